//! Where pass 2's buckets wait ([`kanon_engine::release::BucketStore`]):
//! in memory ([`Buffer`]) while the release fits in `output.buffer_memory`,
//! then on disk ([`Spill`]) from the moment it outgrows it.
//!
//! Recoded batches are partitioned by bucket a window at a time on every
//! core. Once the buffer overflows, consecutive buckets share a spill file
//! holding at most as many rows as the buffer holds at the bytes per row
//! seen so far (`output.buffer_rows` at most), so that a spilled file read
//! back fits in the buffer. Which buckets share a file never changes the
//! bytes written: a spilled file is partitioned by bucket again when it is
//! read back.

use anyhow::Result;
use arrow::array::RecordBatch;
use arrow::datatypes::SchemaRef;
use kanon_engine::release::{BucketStore, Releaser};
use rayon::prelude::*;

use super::buffer::{Buffer, Parts};
use kanon_io::spill::Spill;

/// Recoded batches partitioned by bucket at once, on every core.
const PARTITION_WINDOW: usize = 8;

/// Pass 2's buckets, in memory then spilled.
pub(crate) struct ReleaseBuckets {
    schema: SchemaRef,
    /// The bucket of every group.
    bucket_of: Vec<usize>,
    /// Published rows of every bucket.
    sort_rows: Vec<u64>,
    /// `output.buffer_memory`, in bytes.
    budget: u64,
    /// `output.buffer_rows`: rows of a spilled file, at most.
    buffer_rows: u64,
    held: Buffer,
    /// The spilled file of every bucket: none until the release outgrows
    /// the buffer.
    spill: Option<(Spill, Vec<usize>)>,
    /// The next spilled file to read back.
    next_spilled: usize,
    window: Vec<(RecordBatch, Vec<u32>)>,
}

impl ReleaseBuckets {
    /// The buckets of `releaser`'s release, held within `budget` bytes.
    pub(crate) fn new(releaser: &Releaser, budget: u64, buffer_rows: u64) -> Self {
        let sort_rows = releaser.bucket_rows();
        ReleaseBuckets {
            schema: releaser.schema().clone(),
            bucket_of: releaser.bucket_of_groups(),
            held: Buffer::new(releaser.schema(), sort_rows.len()),
            sort_rows,
            budget,
            buffer_rows,
            spill: None,
            next_spilled: 0,
            window: Vec::with_capacity(PARTITION_WINDOW),
        }
    }

    /// Partitions the window by bucket, into the buffer (spilling it when
    /// it outgrows the budget) or the spill.
    fn flush(&mut self) -> Result<()> {
        let bucket_of = &self.bucket_of;
        match &mut self.spill {
            None => {
                let parts = self
                    .window
                    .par_iter()
                    .map(|(rows, g)| Parts::of(rows, g, |g| bucket_of[g as usize]))
                    .collect::<Result<Vec<_>>>()?;
                for p in parts {
                    self.held.add(p)?;
                }
                if self.held.bytes() > self.budget {
                    self.start_spilling()?;
                }
            }
            Some((spill, file_of)) => {
                for (rows, g) in &self.window {
                    spill.push(rows, g, |g| file_of[bucket_of[g as usize]])?;
                }
            }
        }
        self.window.clear();
        Ok(())
    }

    /// Moves the buffer to spill files, each of about as many rows as the
    /// buffer holds (none when every bucket fits in one file).
    fn start_spilling(&mut self) -> Result<()> {
        let per_row = self.held.bytes() / self.held.rows().max(1);
        let fit = (self.budget / per_row.max(1)).min(self.buffer_rows).max(1);
        let file_of = spill_files(&self.sort_rows, fit);
        let files = file_of.last().map_or(0, |&b| b + 1);
        if files <= 1 {
            return Ok(());
        }
        tracing::info!(
            held_bytes = self.held.bytes(),
            held_rows = self.held.rows(),
            buffer_memory = self.budget,
            buckets = files,
            "the release outgrows output.buffer_memory: spilling it in buckets"
        );
        let mut spill = Spill::create(&self.schema, files)?;
        for (b, rows, g) in self.held.drain() {
            spill.push(&rows, &g, |_| file_of[b])?;
        }
        self.spill = Some((spill, file_of));
        Ok(())
    }
}

impl BucketStore for ReleaseBuckets {
    type Error = anyhow::Error;

    fn put(&mut self, rows: RecordBatch, groups: Vec<u32>) -> Result<()> {
        self.window.push((rows, groups));
        if self.window.len() == PARTITION_WINDOW {
            self.flush()?;
        }
        Ok(())
    }

    fn take(&mut self, bucket: usize) -> Result<(Vec<RecordBatch>, Vec<u32>)> {
        if !self.window.is_empty() {
            self.flush()?;
        }
        if let Some((spill, file_of)) = &mut self.spill {
            // A spilled file is read back whole when its first bucket is
            // asked for, and partitioned again.
            if file_of[bucket] == self.next_spilled {
                let (batches, groups) = spill.take(self.next_spilled)?;
                let mut at = 0;
                for rows in batches {
                    let g = &groups[at..at + rows.num_rows()];
                    at += rows.num_rows();
                    self.held.push(&rows, g, |g| self.bucket_of[g as usize])?;
                }
                self.next_spilled += 1;
            }
        }
        self.held.take(bucket)
    }
}

/// The spilled file of every bucket sorted at once: consecutive buckets of
/// at most `max_rows` rows together (a larger bucket alone).
fn spill_files(sort_rows: &[u64], max_rows: u64) -> Vec<usize> {
    let mut out = Vec::with_capacity(sort_rows.len());
    let (mut file, mut rows) = (0usize, 0u64);
    for &n in sort_rows {
        if rows > 0 && rows + n > max_rows.max(1) {
            file += 1;
            rows = 0;
        }
        rows += n;
        out.push(file);
    }
    out
}
