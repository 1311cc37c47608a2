//! The order of a release's rows: derived from the published classes and a
//! seeded permutation, never from input positions.
//!
//! Rows written in input order let anyone who sees two releases of the same
//! input (or a release and any other product that kept the input order) join
//! them by row number; row groups and file boundaries leak the same way. So
//! a release is written class by class, the classes in the order of a
//! permutation drawn from `algorithm.seed` (ChaCha8), and the rows inside a
//! class ordered by a seeded hash of their released content. Nothing in that
//! order depends on where a row stood in the input: two inputs holding the
//! same rows in any order give the same release, and the same input, job
//! and seed give the same bytes.
//!
//! Front ends that stream (the CLI) write the release in [`Buckets`] of
//! consecutive class ranks, each small enough to sort in memory; front ends
//! that hold the data (the DataFusion plan node) sort it in one bucket. Both
//! produce the same rows in the same order.

use std::hash::{Hash, Hasher};
use std::ops::Range;

use arrow::array::{RecordBatch, UInt32Array};
use arrow::compute::{concat_batches, take_record_batch};
use arrow::datatypes::SchemaRef;
use arrow::row::{RowConverter, SortField};
use rand::seq::SliceRandom;
use rand::SeedableRng;
use rand_chacha::ChaCha8Rng;

use crate::error::Result;
use crate::partition::SUPPRESSED;

/// The release order of a partition's groups: each group's rank under a
/// seeded permutation, and its number of published rows.
#[derive(Debug, Clone)]
pub struct ReleaseOrder {
    rank_of_group: Vec<u32>,
    rows_of_rank: Vec<u64>,
    seed: u64,
}

/// Consecutive ranges of group ranks, each holding at most a given number of
/// rows (a group larger than that is a bucket of its own).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Buckets(Vec<Range<u32>>);

impl ReleaseOrder {
    /// The order of the groups of `group_of_row` (a group id per input row,
    /// [`SUPPRESSED`] for withheld rows) under `seed`.
    pub fn new(group_of_row: &[u32], n_groups: usize, seed: u64) -> Self {
        let mut groups: Vec<u32> = (0..n_groups as u32).collect();
        groups.shuffle(&mut ChaCha8Rng::seed_from_u64(seed ^ 0x6b61_6e6f_6e5f_6f72));
        let mut rank_of_group = vec![0u32; n_groups];
        for (rank, &g) in groups.iter().enumerate() {
            rank_of_group[g as usize] = rank as u32;
        }
        let mut rows_of_rank = vec![0u64; n_groups];
        for &g in group_of_row.iter().filter(|&&g| g != SUPPRESSED) {
            rows_of_rank[rank_of_group[g as usize] as usize] += 1;
        }
        ReleaseOrder {
            rank_of_group,
            rows_of_rank,
            seed,
        }
    }

    /// The rank of a group.
    pub fn rank(&self, group: u32) -> u32 {
        self.rank_of_group[group as usize]
    }

    /// Buckets of consecutive ranks of at most `max_rows` published rows.
    pub fn buckets(&self, max_rows: u64) -> Buckets {
        let mut out = Vec::new();
        let mut start = 0u32;
        let mut rows = 0u64;
        for (rank, &n) in self.rows_of_rank.iter().enumerate() {
            if rows > 0 && rows + n > max_rows.max(1) {
                out.push(start..rank as u32);
                start = rank as u32;
                rows = 0;
            }
            rows += n;
        }
        if rows > 0 || out.is_empty() {
            out.push(start..self.rows_of_rank.len() as u32);
        }
        Buckets(out)
    }

    /// Sorts released rows into release order: `batches` are released
    /// batches (every column as published) and `groups` the group of each of
    /// their rows, in the same order. Returns one batch.
    ///
    /// # Errors
    /// Arrow failures (row conversion, take, concat).
    pub fn sort(
        &self,
        schema: &SchemaRef,
        batches: &[RecordBatch],
        groups: &[u32],
    ) -> Result<RecordBatch> {
        let all = concat_batches(schema, batches)?;
        if all.num_rows() != groups.len() {
            return Err(crate::Error::Internal(format!(
                "{} released rows but {} group ids",
                all.num_rows(),
                groups.len()
            )));
        }
        let converter = RowConverter::new(
            schema
                .fields()
                .iter()
                .map(|f| SortField::new(f.data_type().clone()))
                .collect(),
        )?;
        let rows = converter.convert_columns(all.columns())?;
        let mut keys: Vec<(u32, u64, u32)> = (0..all.num_rows())
            .map(|i| {
                let mut h = rustc_hash::FxHasher::default();
                self.seed.hash(&mut h);
                rows.row(i).as_ref().hash(&mut h);
                (self.rank(groups[i]), h.finish(), i as u32)
            })
            .collect();
        // Equal ranks and hashes are (almost surely) equal rows; the last
        // key only makes the sort total, it never orders distinct content
        // unless the hash collides.
        keys.sort_unstable_by(|a, b| {
            (a.0, a.1)
                .cmp(&(b.0, b.1))
                .then_with(|| rows.row(a.2 as usize).cmp(&rows.row(b.2 as usize)))
        });
        let indices = UInt32Array::from_iter_values(keys.iter().map(|k| k.2));
        Ok(take_record_batch(&all, &indices)?)
    }
}

impl Buckets {
    /// The rank ranges.
    pub fn ranges(&self) -> &[Range<u32>] {
        &self.0
    }

    /// The bucket holding `rank`.
    pub fn of(&self, rank: u32) -> usize {
        self.0.partition_point(|r| r.end <= rank)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use arrow::array::{ArrayRef, Int64Array, StringArray};
    use arrow::datatypes::{DataType, Field, Schema};
    use std::sync::Arc;

    fn batch(ids: &[i64], labels: &[&str]) -> RecordBatch {
        RecordBatch::try_new(
            Arc::new(Schema::new(vec![
                Field::new("q", DataType::Utf8, false),
                Field::new("id", DataType::Int64, false),
            ])),
            vec![
                Arc::new(StringArray::from(labels.to_vec())) as ArrayRef,
                Arc::new(Int64Array::from(ids.to_vec())),
            ],
        )
        .unwrap()
    }

    #[test]
    fn order_depends_on_content_and_seed_not_position() {
        let groups = [0u32, 1, 0, 1, 2, 2];
        let order = ReleaseOrder::new(&groups, 3, 7);
        let b = batch(&[10, 20, 11, 21, 30, 31], &["a", "b", "a", "b", "c", "c"]);
        let sorted = order.sort(&b.schema(), &[b.clone()], &groups).unwrap();
        // The same rows in reverse input order give the same release.
        let rev: Vec<u32> = (0..6).rev().collect();
        let r = take_record_batch(&b, &UInt32Array::from(rev.clone())).unwrap();
        let rgroups: Vec<u32> = rev.iter().map(|&i| groups[i as usize]).collect();
        assert_eq!(order.sort(&r.schema(), &[r], &rgroups).unwrap(), sorted);
        // Classes stay together.
        let q = sorted
            .column(0)
            .as_any()
            .downcast_ref::<StringArray>()
            .unwrap();
        let runs = (1..6).filter(|&i| q.value(i) != q.value(i - 1)).count();
        assert_eq!(runs, 2);
        // Another seed permutes differently (for some seed).
        let other = (0..20u64)
            .map(|s| {
                ReleaseOrder::new(&groups, 3, s)
                    .sort(&b.schema(), &[b.clone()], &groups)
                    .unwrap()
            })
            .any(|o| o != sorted);
        assert!(other);
    }

    #[test]
    fn buckets_hold_at_most_the_budget() {
        let groups: Vec<u32> = (0..100).map(|i| i % 10).collect();
        let order = ReleaseOrder::new(&groups, 10, 1);
        let b = order.buckets(25);
        assert_eq!(b.ranges().len(), 5);
        assert_eq!(b.of(0), 0);
        assert_eq!(b.of(9), 4);
        assert_eq!(order.buckets(1_000).ranges(), &[0..10]);
        assert_eq!(order.buckets(1).ranges().len(), 10);
    }
}
