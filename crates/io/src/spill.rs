//! Spilling a release to local disk, bucket by bucket, so that pass 2 puts
//! its rows in release order (`kanon_engine::order`) with bounded memory.
//!
//! A release whose rows outgrow `output.buffer_memory` is split into
//! buckets of consecutive class ranks of at most `output.buffer_rows` rows.
//! From then on pass 2 appends every recoded row to its bucket's spill file
//! (the rows it held so far first); each bucket is then read back, ordered
//! in memory and written to the release in bucket order. The result is the
//! very file the in-memory path writes.
//!
//! Spill files are uncompressed Parquet (the format of the release itself,
//! so any release column spills, and the Arrow schema travels with it),
//! with the row's group id in one more column. They live in a hidden
//! directory `.kanon-spill-<host>-<pid>-*` of the system temporary directory
//! (`TMPDIR`), removed when the job ends, fails or is interrupted; one left
//! by a killed job is removed by the next job that spills (see
//! [`crate::release::remove_stale_local`]).

use std::fs::File;
use std::sync::Arc;

use anyhow::{Context, Result};
use arrow::array::{Array, RecordBatch, UInt32Array};
use arrow::compute::take_record_batch;
use arrow::datatypes::{DataType, Field, Schema, SchemaRef};
use parquet::arrow::arrow_reader::ParquetRecordBatchReaderBuilder;
use parquet::arrow::ArrowWriter;
use parquet::basic::Compression;
use parquet::file::properties::WriterProperties;

/// Rows a spill file buffers per bucket before writing them out: memory is
/// about this many rows per bucket.
const SPILL_ROW_GROUP: usize = 8192;

/// The name of the group column of a spill file.
const GROUP: &str = "__kanon_group";

/// Buckets of a release spilled to disk.
pub struct Spill {
    dir: tempfile::TempDir,
    release_schema: SchemaRef,
    schema: SchemaRef,
    props: WriterProperties,
    writers: Vec<Option<ArrowWriter<File>>>,
}

impl Spill {
    /// A spill of `buckets` buckets of a release of `release_schema`.
    ///
    /// # Errors
    /// The temporary directory cannot be created.
    pub fn create(release_schema: &SchemaRef, buckets: usize) -> Result<Self> {
        let tmp = std::env::temp_dir();
        crate::release::remove_stale_local(&tmp);
        let dir = tempfile::Builder::new()
            .prefix(&crate::release::spill_prefix())
            .tempdir_in(&tmp)
            .with_context(|| {
                format!(
                    "cannot create a spill directory in {} (set TMPDIR to a writable directory, or raise `output.buffer_rows`)",
                    tmp.display()
                )
            })?;
        let mut fields: Vec<Arc<Field>> = release_schema.fields().iter().cloned().collect();
        fields.push(Arc::new(Field::new(GROUP, DataType::UInt32, false)));
        Ok(Spill {
            dir,
            release_schema: release_schema.clone(),
            schema: Arc::new(Schema::new(fields)),
            props: WriterProperties::builder()
                .set_compression(Compression::UNCOMPRESSED)
                .set_max_row_group_row_count(Some(SPILL_ROW_GROUP))
                .build(),
            writers: (0..buckets).map(|_| None).collect(),
        })
    }

    fn path(&self, bucket: usize) -> std::path::PathBuf {
        self.dir.path().join(format!("bucket-{bucket:06}.parquet"))
    }

    /// Appends released rows: `groups` holds each row's group, `bucket_of`
    /// maps a group to its bucket.
    ///
    /// # Errors
    /// Write failures (a full disk names the directory).
    pub fn push(
        &mut self,
        batch: &RecordBatch,
        groups: &[u32],
        bucket_of: impl Fn(u32) -> usize,
    ) -> Result<()> {
        for (b, rows, g) in by_bucket(batch, groups, bucket_of)? {
            let mut cols = rows.columns().to_vec();
            cols.push(Arc::new(UInt32Array::from(g)));
            let part = RecordBatch::try_new(self.schema.clone(), cols)?;
            let path = self.path(b);
            let w = match &mut self.writers[b] {
                Some(w) => w,
                slot => {
                    let f = File::create_new(&path)
                        .with_context(|| format!("cannot create spill file {}", path.display()))?;
                    slot.insert(ArrowWriter::try_new(
                        f,
                        self.schema.clone(),
                        Some(self.props.clone()),
                    )?)
                }
            };
            w.write(&part)
                .with_context(|| format!("cannot write spill file {}", path.display()))?;
        }
        Ok(())
    }

    /// The rows of one bucket and their groups, in spill order; its file is
    /// removed.
    ///
    /// # Errors
    /// Read or write failures.
    pub fn take(&mut self, bucket: usize) -> Result<(Vec<RecordBatch>, Vec<u32>)> {
        let Some(w) = self.writers[bucket].take() else {
            return Ok((Vec::new(), Vec::new()));
        };
        let path = self.path(bucket);
        w.close()
            .with_context(|| format!("cannot write spill file {}", path.display()))?;
        let f = File::open(&path)
            .with_context(|| format!("cannot read spill file {}", path.display()))?;
        let reader = ParquetRecordBatchReaderBuilder::try_new(f)?
            .with_batch_size(crate::dataset::BATCH_ROWS)
            .build()?;
        let mut batches = Vec::new();
        let mut groups = Vec::new();
        let group_col = self.release_schema.fields().len();
        for b in reader {
            let b = b.with_context(|| format!("cannot read spill file {}", path.display()))?;
            let g = b
                .column(group_col)
                .as_any()
                .downcast_ref::<UInt32Array>()
                .context("spill file lost its group column")?;
            groups.extend(g.values().iter().copied());
            let cols = b.columns()[..group_col].to_vec();
            batches.push(RecordBatch::try_new(self.release_schema.clone(), cols)?);
        }
        let _ = std::fs::remove_file(&path);
        Ok((batches, groups))
    }
}

/// Shared by pass 2's memory buffer and the spill files.
/// The rows of `batch` by bucket: `(bucket, rows, their groups)` for every
/// bucket holding some, in bucket order, from one take and a slice per
/// bucket. `groups` holds each row's group, `bucket_of` maps a group to
/// its bucket.
///
/// # Errors
/// Arrow failures.
pub fn by_bucket(
    batch: &RecordBatch,
    groups: &[u32],
    bucket_of: impl Fn(u32) -> usize,
) -> Result<Vec<(usize, RecordBatch, Vec<u32>)>> {
    let mut keyed: Vec<(usize, u32)> = groups
        .iter()
        .enumerate()
        .map(|(i, &g)| (bucket_of(g), i as u32))
        .collect();
    let first = keyed.first().map(|k| k.0);
    if keyed.iter().all(|k| Some(k.0) == first) {
        return Ok(first
            .map(|b| (b, batch.clone(), groups.to_vec()))
            .into_iter()
            .collect());
    }
    keyed.sort_unstable();
    let grouped = take_record_batch(
        batch,
        &UInt32Array::from_iter_values(keyed.iter().map(|k| k.1)),
    )?;
    let mut out = Vec::new();
    let mut start = 0;
    while start < keyed.len() {
        let b = keyed[start].0;
        let end = start + keyed[start..].partition_point(|k| k.0 == b);
        out.push((
            b,
            grouped.slice(start, end - start),
            keyed[start..end]
                .iter()
                .map(|k| groups[k.1 as usize])
                .collect(),
        ));
        start = end;
    }
    Ok(out)
}
