//! Writing the generated rows as Parquet: chunks are generated a window at
//! a time in parallel while the previous window is encoded, each batch's
//! columns encoded in parallel into the current row group ([`RowGroups`]).

use std::fs::File;

use anyhow::Result;
use arrow::array::RecordBatch;
use arrow::datatypes::SchemaRef;
use parquet::arrow::arrow_writer::{
    compute_leaves, ArrowColumnChunk, ArrowColumnWriter, ArrowRowGroupWriterFactory,
};
use parquet::arrow::ArrowWriter;
use parquet::basic::{Compression, ZstdLevel};
use parquet::file::metadata::KeyValue;
use parquet::file::properties::WriterProperties;
use parquet::file::writer::SerializedFileWriter;
use rayon::prelude::*;

use super::model::Model;
use super::CHUNK_ROWS;

/// Writes `rows` generated rows as Parquet to `file`; returns the number of
/// row groups.
pub(super) fn write(
    model: &Model,
    rows: u64,
    row_group_rows: usize,
    file: File,
    metadata: Vec<KeyValue>,
) -> Result<usize> {
    let props = WriterProperties::builder()
        .set_compression(Compression::ZSTD(ZstdLevel::try_new(1)?))
        .set_dictionary_enabled(true)
        .set_max_row_group_row_count(Some(row_group_rows))
        .set_key_value_metadata(Some(metadata))
        .build();
    // ArrowWriter embeds the Arrow schema (timestamp time zone, ...) in the
    // footer; its lower half lets us encode the columns in parallel.
    let (file_writer, factory) =
        ArrowWriter::try_new(file, model.schema.clone(), Some(props))?.into_serialized_writer()?;
    let mut out = RowGroups {
        schema: model.schema.clone(),
        writers: factory.create_column_writers(0)?,
        factory,
        file_writer,
        capacity: row_group_rows,
        rows: 0,
        done: 0,
    };
    let chunks = rows.div_ceil(CHUNK_ROWS as u64);
    let window = (2 * rayon::current_num_threads()).max(2) as u64;
    let windows = chunks.div_ceil(window);
    let window_of = |w: u64| (w * window)..((w + 1) * window).min(chunks);
    let mut current = model.generate(window_of(0), rows)?;
    for w in 1..=windows {
        let (next, written) = rayon::join(
            || {
                if w < windows {
                    model.generate(window_of(w), rows)
                } else {
                    Ok(Vec::new())
                }
            },
            || out.write(std::mem::take(&mut current)),
        );
        written?;
        current = next?;
    }
    if out.rows > 0 {
        out.flush()?;
    }
    let done = out.done;
    out.file_writer.close()?;
    Ok(done)
}

/// The file being written: its current row group's column writers.
struct RowGroups {
    schema: SchemaRef,
    factory: ArrowRowGroupWriterFactory,
    file_writer: SerializedFileWriter<File>,
    writers: Vec<ArrowColumnWriter>,
    /// Rows per row group.
    capacity: usize,
    /// Rows in the current row group.
    rows: usize,
    /// Row groups written.
    done: usize,
}

impl RowGroups {
    /// Appends batches, starting a new row group whenever one is full.
    fn write(&mut self, batches: Vec<RecordBatch>) -> Result<()> {
        for batch in batches {
            let mut offset = 0;
            while offset < batch.num_rows() {
                let take = (batch.num_rows() - offset).min(self.capacity - self.rows);
                let slice = batch.slice(offset, take);
                let mut leaves = Vec::with_capacity(self.writers.len());
                for (field, column) in self.schema.fields().iter().zip(slice.columns()) {
                    leaves.extend(compute_leaves(field, column)?);
                }
                self.writers
                    .par_iter_mut()
                    .zip(leaves.into_par_iter())
                    .try_for_each(|(w, leaf)| w.write(&leaf))?;
                self.rows += take;
                offset += take;
                if self.rows == self.capacity {
                    self.flush()?;
                }
            }
        }
        Ok(())
    }

    /// Closes the current row group and appends it to the file.
    fn flush(&mut self) -> Result<()> {
        let next = self.factory.create_column_writers(self.done + 1)?;
        let writers = std::mem::replace(&mut self.writers, next);
        let chunks = writers
            .into_par_iter()
            .map(ArrowColumnWriter::close)
            .collect::<parquet::errors::Result<Vec<ArrowColumnChunk>>>()?;
        let mut row_group = self.file_writer.next_row_group()?;
        for chunk in chunks {
            chunk.append_to_row_group(&mut row_group)?;
        }
        row_group.close()?;
        self.done += 1;
        self.rows = 0;
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::generate::tests::rows;
    use crate::generate::Like;
    use parquet::arrow::arrow_reader::ParquetRecordBatchReaderBuilder;

    #[test]
    fn row_groups_split_chunks() {
        let m = Model::new(Like::Adult, 1, 0.02, 2).unwrap();
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("g.parquet");
        let groups = write(
            &m,
            150_000,
            40_000,
            File::create(&path).unwrap(),
            Vec::new(),
        )
        .unwrap();
        assert_eq!(groups, 4);
        let r = ParquetRecordBatchReaderBuilder::try_new(File::open(&path).unwrap()).unwrap();
        let sizes: Vec<i64> = r
            .metadata()
            .row_groups()
            .iter()
            .map(|g| g.num_rows())
            .collect();
        assert_eq!(sizes, [40_000, 40_000, 40_000, 30_000]);
        let read: Vec<RecordBatch> = r.build().unwrap().collect::<Result<_, _>>().unwrap();
        let read = arrow::compute::concat_batches(&m.schema, &read).unwrap();
        let made = arrow::compute::concat_batches(&m.schema, &rows(&m, 150_000)).unwrap();
        assert_eq!(read, made);
    }
}
