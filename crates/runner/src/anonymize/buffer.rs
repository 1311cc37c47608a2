//! Pass 2's buffer of released rows: partitioned by bucket of consecutive
//! class ranks as they are recoded, so that each bucket is put in release
//! order on its own, its rows close together in memory.
//!
//! Putting a whole release in order at once gathers every column row by
//! row from anywhere in it: at 10M rows that gather (2.3 s) cost more than
//! ordering. Partitioned as they arrive, while the reader decodes the next
//! batches, the rows of a bucket (about [`SORT_ROWS`]) are gathered from a
//! few megabytes. Small pieces of a bucket are concatenated as they
//! accumulate, so a bucket holds a few batches whatever the number of input
//! batches.

use anyhow::Result;
use arrow::array::RecordBatch;
use arrow::compute::concat_batches;

use arrow::datatypes::SchemaRef;
use kanon_io::spill::by_bucket;

/// Rows of a bucket put in order at once (its classes' rows; a larger class
/// is a bucket of its own).
pub(crate) const SORT_ROWS: u64 = 64 * 1024;

/// Pieces of a bucket concatenated into one batch: a bucket receives a
/// piece from most input batches, and pieces are gathered from directly
/// (concatenating them would copy every row once more), unless they grow
/// this many.
const COMPACT_PIECES: usize = 512;

/// Released rows partitioned by bucket ([`by_bucket`]), with their size:
/// computed apart from the [`Buffer`] (on any thread), then added to it.
pub(crate) struct Parts {
    bytes: u64,
    parts: Vec<(usize, RecordBatch, Vec<u32>)>,
}

impl Parts {
    /// The rows of `batch` (groups `groups`) by bucket.
    ///
    /// # Errors
    /// Arrow failures.
    pub(crate) fn of(
        batch: &RecordBatch,
        groups: &[u32],
        bucket_of: impl Fn(u32) -> usize,
    ) -> Result<Parts> {
        Ok(Parts {
            bytes: (slice_bytes(batch) + groups.len() * 4) as u64,
            parts: by_bucket(batch, groups, bucket_of)?,
        })
    }
}

/// The bytes of the rows of `batch`: of its slices, not of the buffers they
/// slice. A batch of a table given in memory is a slice of the caller's
/// larger arrays (`dataset::MemoryTable`), whose whole size would count
/// each buffer as many times as it is sliced and spill a release that fits.
fn slice_bytes(batch: &RecordBatch) -> usize {
    batch
        .columns()
        .iter()
        .map(|c| {
            let data = c.to_data();
            data.get_slice_memory_size()
                .unwrap_or_else(|_| c.get_array_memory_size())
        })
        .sum()
}

/// One bucket's rows: compacted batches, and small pieces waiting to be.
#[derive(Default)]
struct Bucket {
    batches: Vec<RecordBatch>,
    pieces: Vec<RecordBatch>,
    groups: Vec<u32>,
}

/// Released rows held in memory by bucket, with their size as Arrow arrays.
pub(crate) struct Buffer {
    schema: SchemaRef,
    buckets: Vec<Bucket>,
    bytes: u64,
    rows: u64,
}

impl Buffer {
    /// An empty buffer of `buckets` buckets of rows of `schema`.
    pub(crate) fn new(schema: &SchemaRef, buckets: usize) -> Self {
        Buffer {
            schema: schema.clone(),
            buckets: (0..buckets).map(|_| Bucket::default()).collect(),
            bytes: 0,
            rows: 0,
        }
    }

    /// Bytes of the rows held (the arrays they were taken into).
    pub(crate) fn bytes(&self) -> u64 {
        self.bytes
    }

    /// Rows held.
    pub(crate) fn rows(&self) -> u64 {
        self.rows
    }

    /// Adds released rows and their groups, partitioned with `bucket_of`.
    ///
    /// # Errors
    /// Arrow failures.
    pub(crate) fn push(
        &mut self,
        batch: &RecordBatch,
        groups: &[u32],
        bucket_of: impl Fn(u32) -> usize,
    ) -> Result<()> {
        self.add(Parts::of(batch, groups, bucket_of)?)
    }

    /// Adds rows partitioned by [`Parts::of`].
    ///
    /// # Errors
    /// Arrow failures.
    pub(crate) fn add(&mut self, parts: Parts) -> Result<()> {
        self.bytes += parts.bytes;
        for (b, rows, g) in parts.parts {
            self.rows += g.len() as u64;
            let bucket = &mut self.buckets[b];
            bucket.pieces.push(rows);
            bucket.groups.extend(g);
            if bucket.pieces.len() >= COMPACT_PIECES {
                compact(&self.schema, bucket)?;
            }
        }
        Ok(())
    }

    /// The rows of bucket `b` and their groups, in the same order; the
    /// bucket is emptied.
    ///
    /// # Errors
    /// Arrow failures.
    pub(crate) fn take(&mut self, b: usize) -> Result<(Vec<RecordBatch>, Vec<u32>)> {
        let Bucket {
            mut batches,
            pieces,
            groups,
            ..
        } = std::mem::take(&mut self.buckets[b]);
        batches.extend(pieces);
        Ok((batches, groups))
    }

    /// Every held row, bucket by bucket, as `(bucket, rows, groups)`; the
    /// buffer is emptied.
    pub(crate) fn drain(&mut self) -> impl Iterator<Item = (usize, RecordBatch, Vec<u32>)> + '_ {
        self.bytes = 0;
        self.rows = 0;
        self.buckets.iter_mut().enumerate().flat_map(|(b, bucket)| {
            let Bucket {
                batches,
                pieces,
                groups,
                ..
            } = std::mem::take(bucket);
            let mut at = 0;
            batches
                .into_iter()
                .chain(pieces)
                .map(move |rows| {
                    let g = groups[at..at + rows.num_rows()].to_vec();
                    at += rows.num_rows();
                    (b, rows, g)
                })
                .collect::<Vec<_>>()
        })
    }
}

/// Concatenates a bucket's pieces into one batch.
fn compact(schema: &SchemaRef, bucket: &mut Bucket) -> Result<()> {
    match bucket.pieces.len() {
        0 => {}
        1 => bucket.batches.append(&mut bucket.pieces),
        _ => {
            bucket
                .batches
                .push(concat_batches(schema, bucket.pieces.iter())?);
            bucket.pieces.clear();
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use arrow::array::{Array, Int64Array};
    use arrow::datatypes::{DataType, Field, Schema};

    use super::*;

    #[test]
    fn rows_keep_their_groups_through_partition_compaction_and_drain() {
        let schema = Arc::new(Schema::new(vec![Field::new("v", DataType::Int64, false)]));
        let mut buffer = Buffer::new(&schema, 3);
        let bucket_of = |g: u32| (g % 3) as usize;
        let mut all: Vec<(i64, u32)> = Vec::new();
        for part in 0..40i64 {
            let n = 700;
            let values: Vec<i64> = (0..n).map(|i| part * 10_000 + i).collect();
            let groups: Vec<u32> = values.iter().map(|v| (v % 7) as u32).collect();
            all.extend(values.iter().copied().zip(groups.iter().copied()));
            let batch =
                RecordBatch::try_new(schema.clone(), vec![Arc::new(Int64Array::from(values))])
                    .unwrap();
            buffer.push(&batch, &groups, bucket_of).unwrap();
        }
        let collect = |batches: &[RecordBatch], groups: &[u32]| -> Vec<(i64, u32)> {
            let values = batches.iter().flat_map(|b| {
                let a = b.column(0).as_any().downcast_ref::<Int64Array>().unwrap();
                (0..a.len()).map(|i| a.value(i)).collect::<Vec<_>>()
            });
            values.zip(groups.iter().copied()).collect()
        };
        let (b0, g0) = buffer.take(0).unwrap();
        assert!(
            b0.len() <= COMPACT_PIECES,
            "{} batches: pieces are compacted",
            b0.len()
        );
        let mut seen = collect(&b0, &g0);
        assert!(seen.iter().all(|&(_, g)| bucket_of(g) == 0));
        for (b, rows, g) in buffer.drain() {
            assert!(b > 0);
            let part = collect(&[rows], &g);
            assert!(part.iter().all(|&(_, g)| bucket_of(g) == b));
            seen.extend(part);
        }
        seen.sort_unstable();
        all.sort_unstable();
        assert_eq!(seen, all);
    }
}
