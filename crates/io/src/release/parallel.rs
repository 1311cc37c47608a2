//! [`ParallelWriter`]: parquet's [`ArrowWriter`], with the columns of every
//! batch encoded and compressed on all cores (rayon), so that writing a
//! release is not one core's work.
//!
//! It follows `ArrowWriter::write` of parquet 59 (row groups cut at the same
//! row and byte limits, batches split the same way), built on the
//! low-level API that crate documents for encoding columns in parallel
//! (`ArrowRowGroupWriterFactory`, `ArrowColumnWriter`; the example on
//! `ArrowColumnWriter`). Each column writer sees the same leaves in the same
//! order as under `ArrowWriter`, so the file's bytes are the same whatever
//! the number of threads, and the same as `ArrowWriter`'s.

use std::io::Write;

use arrow::array::RecordBatch;
use arrow::datatypes::SchemaRef;
use parquet::arrow::arrow_writer::{
    compute_leaves, ArrowColumnWriter, ArrowLeafColumn, ArrowRowGroupWriterFactory,
};
use parquet::arrow::ArrowWriter;
use parquet::errors::Result;
use parquet::file::properties::WriterProperties;
use parquet::file::writer::SerializedFileWriter;
use rayon::prelude::*;

/// The row group being filled: one writer per leaf column.
struct RowGroup {
    writers: Vec<ArrowColumnWriter>,
    rows: usize,
}

impl RowGroup {
    fn estimated_bytes(&self) -> usize {
        self.writers
            .iter()
            .map(ArrowColumnWriter::get_estimated_total_bytes)
            .sum()
    }
}

/// Writes record batches to a Parquet file as [`ArrowWriter`] does, encoding
/// the columns in parallel.
pub(crate) struct ParallelWriter<W: Write + Send> {
    file: SerializedFileWriter<W>,
    factory: ArrowRowGroupWriterFactory,
    schema: SchemaRef,
    in_progress: Option<RowGroup>,
    max_rows: Option<usize>,
    max_bytes: Option<usize>,
}

impl<W: Write + Send> ParallelWriter<W> {
    /// A writer of `schema` to `sink` with `props`: the file header and the
    /// footer's metadata (the Arrow schema included) are `ArrowWriter`'s.
    pub(crate) fn try_new(sink: W, schema: SchemaRef, props: WriterProperties) -> Result<Self> {
        let max_rows = props.max_row_group_row_count();
        let max_bytes = props.max_row_group_bytes();
        let (file, factory) =
            ArrowWriter::try_new(sink, schema.clone(), Some(props))?.into_serialized_writer()?;
        Ok(ParallelWriter {
            file,
            factory,
            schema,
            in_progress: None,
            max_rows,
            max_bytes,
        })
    }

    /// Encodes `batch`, flushing row groups at the row and byte limits.
    pub fn write(&mut self, batch: &RecordBatch) -> Result<()> {
        if batch.num_rows() == 0 {
            return Ok(());
        }
        if self.in_progress.is_none() {
            let index = self.file.flushed_row_groups().len();
            self.in_progress = Some(RowGroup {
                writers: self.factory.create_column_writers(index)?,
                rows: 0,
            });
        }
        let group = self.in_progress.as_ref().expect("a row group in progress");
        if let Some(max) = self.max_rows {
            if group.rows + batch.num_rows() > max {
                let fits = max - group.rows;
                self.write(&batch.slice(0, fits))?;
                return self.write(&batch.slice(fits, batch.num_rows() - fits));
            }
        }
        if let (Some(max), true) = (self.max_bytes, group.rows > 0) {
            let bytes = group.estimated_bytes();
            if bytes >= max {
                self.flush()?;
                return self.write(batch);
            }
            if let Some(per_row) = bytes.checked_div(group.rows).filter(|b| *b > 0) {
                let fits = (max - bytes) / per_row;
                if batch.num_rows() > fits {
                    if fits > 0 {
                        self.write(&batch.slice(0, fits))?;
                        return self.write(&batch.slice(fits, batch.num_rows() - fits));
                    }
                    self.flush()?;
                    return self.write(batch);
                }
            }
        }
        self.encode(batch)?;
        let group = self.in_progress.as_ref().expect("a row group in progress");
        if self.max_rows.is_some_and(|max| group.rows >= max)
            || self
                .max_bytes
                .is_some_and(|max| group.estimated_bytes() >= max)
        {
            self.flush()?;
        }
        Ok(())
    }

    /// Every leaf column of `batch` into its writer, the columns in parallel.
    fn encode(&mut self, batch: &RecordBatch) -> Result<()> {
        let group = self.in_progress.as_mut().expect("a row group in progress");
        group.rows += batch.num_rows();
        let mut leaves: Vec<ArrowLeafColumn> = Vec::with_capacity(group.writers.len());
        for (field, column) in self.schema.fields().iter().zip(batch.columns()) {
            leaves.extend(compute_leaves(field.as_ref(), column)?);
        }
        group
            .writers
            .par_iter_mut()
            .zip(leaves.par_iter())
            .try_for_each(|(writer, leaf)| writer.write(leaf))
    }

    /// Closes the row group in progress, its columns in parallel.
    pub(crate) fn flush(&mut self) -> Result<()> {
        let Some(group) = self.in_progress.take() else {
            return Ok(());
        };
        let chunks = group
            .writers
            .into_par_iter()
            .map(ArrowColumnWriter::close)
            .collect::<Result<Vec<_>>>()?;
        let mut row_group = self.file.next_row_group()?;
        for chunk in chunks {
            chunk.append_to_row_group(&mut row_group)?;
        }
        row_group.close()?;
        Ok(())
    }

    /// Bytes written to the sink so far.
    pub(crate) fn bytes_written(&self) -> usize {
        self.file.bytes_written()
    }

    /// Estimated bytes of the row group in progress.
    pub(crate) fn in_progress_size(&self) -> usize {
        self.in_progress
            .as_ref()
            .map_or(0, RowGroup::estimated_bytes)
    }

    /// Flushes, writes the footer and returns the sink.
    pub(crate) fn into_inner(mut self) -> Result<W> {
        self.flush()?;
        self.file.into_inner()
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use arrow::array::{ArrayRef, Int64Array, StringArray, StringDictionaryBuilder};
    use arrow::datatypes::{DataType, Field, Int32Type, Schema};

    use super::*;

    fn batches() -> (SchemaRef, Vec<RecordBatch>) {
        let schema = Arc::new(Schema::new(vec![
            Field::new("n", DataType::Int64, true),
            Field::new("s", DataType::Utf8, false),
            Field::new(
                "d",
                DataType::Dictionary(Box::new(DataType::Int32), Box::new(DataType::Utf8)),
                false,
            ),
        ]));
        let mut out = Vec::new();
        let mut x: u64 = 7;
        for len in [1000usize, 37, 4096, 1, 2500] {
            let mut n = Vec::with_capacity(len);
            let mut s = Vec::with_capacity(len);
            let mut d = StringDictionaryBuilder::<Int32Type>::new();
            for _ in 0..len {
                x = x
                    .wrapping_mul(6364136223846793005)
                    .wrapping_add(1442695040888963407);
                n.push((!x.is_multiple_of(5)).then_some((x >> 20) as i64 % 1000));
                s.push(format!("v{}", (x >> 33) % 300));
                d.append_value(format!("c{}", (x >> 40) % 12));
            }
            let columns: Vec<ArrayRef> = vec![
                Arc::new(Int64Array::from(n)),
                Arc::new(StringArray::from(s)),
                Arc::new(d.finish()),
            ];
            out.push(RecordBatch::try_new(schema.clone(), columns).unwrap());
        }
        (schema, out)
    }

    fn props(rows: Option<usize>, bytes: Option<usize>) -> WriterProperties {
        WriterProperties::builder()
            .set_compression(parquet::basic::Compression::ZSTD(Default::default()))
            .set_max_row_group_row_count(rows)
            .set_max_row_group_bytes(bytes)
            .build()
    }

    #[test]
    fn the_bytes_are_arrow_writers_whatever_the_threads() {
        let (schema, batches) = batches();
        for (rows, bytes) in [
            (None, None),
            (Some(1500), None),
            (Some(100_000), Some(6_000)),
        ] {
            let mut reference = Vec::new();
            let mut w =
                ArrowWriter::try_new(&mut reference, schema.clone(), Some(props(rows, bytes)))
                    .unwrap();
            for b in &batches {
                w.write(b).unwrap();
            }
            w.close().unwrap();
            for threads in [1, 2, 4] {
                let pool = rayon::ThreadPoolBuilder::new()
                    .num_threads(threads)
                    .build()
                    .unwrap();
                let bytes_out = pool.install(|| {
                    let mut w =
                        ParallelWriter::try_new(Vec::new(), schema.clone(), props(rows, bytes))
                            .unwrap();
                    for b in &batches {
                        w.write(b).unwrap();
                    }
                    w.into_inner().unwrap()
                });
                assert_eq!(
                    bytes_out, reference,
                    "row group limits {rows:?} rows, {bytes:?} bytes; {threads} threads"
                );
            }
        }
    }
}
