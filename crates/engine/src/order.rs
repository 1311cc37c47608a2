//! The order of a release's rows: derived from the published classes and a
//! seeded permutation, never from input positions.
//!
//! Rows written in input order let anyone who sees two releases of the same
//! input (or a release and any other product that kept the input order) join
//! them by row number; row groups and file boundaries leak the same way. So
//! a release is written class by class, the classes ordered by a keyed hash
//! (seeded by `algorithm.seed`) of their published labels, and the rows
//! inside a class ordered by a keyed hash of their released content.
//!
//! Why content, not a permutation of group ids or of a class's members:
//! group ids are numbered by the algorithms in input order (a class's id
//! is often the position of its first row), and the seed is in the job file,
//! which may be public (the default is 0). A seeded permutation of ids or of
//! members can be inverted by anyone who knows the seed, and would then tell
//! an attacker who knows some input positions (the input was sorted by
//! admission date, say) which class those rows fell into. An order computed
//! from the released content alone carries nothing beyond that content: with
//! the seed, an attacker can recompute it, and learns only what the release
//! already shows. Rows with equal released content are interchangeable, so
//! their relative order does not matter. Two inputs holding the same rows in
//! any order, recoded into the same classes, give the same release; the same
//! input, job and seed give the same bytes.
//!
//! Front ends that stream (the CLI) write the release in [`Buckets`] of
//! consecutive class ranks, each small enough to sort in memory; front ends
//! that hold the data (the DataFusion plan node) sort it in one bucket. Both
//! produce the same rows in the same order.

use std::hash::{Hash, Hasher};
use std::ops::Range;

use arrow::array::{RecordBatch, UInt32Array};
use arrow::compute::{concat_batches, take};
use arrow::datatypes::SchemaRef;
use arrow::row::{RowConverter, Rows, SortField};
use rayon::prelude::*;

use crate::error::Result;
use crate::partition::SUPPRESSED;

/// The release order of a partition's groups: each group's rank (groups
/// with the same published labels share one), and the number of published
/// rows of each rank.
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

/// A keyed 64-bit hash of `bytes` under `seed` (FxHash, stable for a build:
/// the order only has to be reproducible, not secret).
fn keyed_hash(seed: u64, bytes: &[u8]) -> u64 {
    let mut h = rustc_hash::FxHasher::default();
    seed.hash(&mut h);
    bytes.hash(&mut h);
    h.finish()
}

impl ReleaseOrder {
    /// The order of the groups of `group_of_row` (a group id per input row,
    /// [`SUPPRESSED`] for withheld rows) under `seed`: `label_of_group`
    /// holds the published labels of each group (any byte encoding that is
    /// equal exactly when the labels are), never anything derived from input
    /// positions or group ids.
    pub fn new(group_of_row: &[u32], label_of_group: &[Vec<u8>], seed: u64) -> Self {
        let seed = seed ^ 0x6b61_6e6f_6e5f_6f72;
        let mut groups: Vec<(u64, &[u8], u32)> = label_of_group
            .iter()
            .enumerate()
            .map(|(g, l)| (keyed_hash(seed, l), l.as_slice(), g as u32))
            .collect();
        // The group id is never compared: equal (hash, labels) share a rank.
        groups.sort_unstable_by(|a, b| (a.0, a.1).cmp(&(b.0, b.1)));
        let mut rank_of_group = vec![0u32; label_of_group.len()];
        let mut rank = 0u32;
        for (i, &(h, l, g)) in groups.iter().enumerate() {
            if i > 0 && (groups[i - 1].0, groups[i - 1].1) != (h, l) {
                rank += 1;
            }
            rank_of_group[g as usize] = rank;
        }
        let n_ranks = if groups.is_empty() {
            0
        } else {
            rank as usize + 1
        };
        let mut rows_of_rank = vec![0u64; n_ranks];
        for &g in group_of_row.iter().filter(|&&g| g != SUPPRESSED) {
            if let Some(&r) = rank_of_group.get(g as usize) {
                rows_of_rank[r as usize] += 1;
            }
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
    /// their rows, in the same order. Returns one batch. The rows are
    /// converted, hashed and sorted in chunks on rayon, and taken column by
    /// column; the order does not depend on the number of threads.
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
        let n = all.num_rows();
        let chunk = n.div_ceil(rayon::current_num_threads().max(1)).max(1);
        let starts: Vec<usize> = (0..n).step_by(chunk).collect();
        let rows: Vec<Rows> = starts
            .par_iter()
            .map(|&start| {
                converter.convert_columns(all.slice(start, chunk.min(n - start)).columns())
            })
            .collect::<std::result::Result<_, _>>()?;
        let row = |i: u32| rows[i as usize / chunk].row(i as usize % chunk);
        let mut keys: Vec<(u32, u64, u32)> = (0..n as u32)
            .into_par_iter()
            .map(|i| {
                (
                    self.rank(groups[i as usize]),
                    keyed_hash(self.seed, row(i).as_ref()),
                    i,
                )
            })
            .collect();
        // Equal ranks and hashes are (almost surely) equal rows; the last
        // key only makes the sort total, it never orders distinct content
        // unless the hash collides.
        keys.par_sort_unstable_by(|a, b| {
            (a.0, a.1)
                .cmp(&(b.0, b.1))
                .then_with(|| row(a.2).cmp(&row(b.2)))
        });
        let indices = UInt32Array::from_iter_values(keys.iter().map(|k| k.2));
        let columns = all
            .columns()
            .par_iter()
            .map(|c| take(c, &indices, None))
            .collect::<std::result::Result<Vec<_>, _>>()?;
        Ok(RecordBatch::try_new(all.schema(), columns)?)
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
    use arrow::compute::take_record_batch;
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

    /// The rows are converted, hashed and sorted in as many chunks as
    /// there are threads: the release order is the same for any number.
    #[test]
    fn the_order_does_not_depend_on_the_thread_count() {
        let n = 10_007usize;
        let groups: Vec<u32> = (0..n).map(|i| (i % 13) as u32).collect();
        let names: Vec<String> = (0..13).map(|g| format!("g{g}")).collect();
        let labels: Vec<Vec<u8>> = names.iter().map(|s| s.as_bytes().to_vec()).collect();
        let order = ReleaseOrder::new(&groups, &labels, 3);
        let ids: Vec<i64> = (0..n).map(|i| (i % 997) as i64).collect();
        let text: Vec<&str> = groups.iter().map(|&g| names[g as usize].as_str()).collect();
        let b = batch(&ids, &text);
        let sort = |threads: usize| {
            rayon::ThreadPoolBuilder::new()
                .num_threads(threads)
                .build()
                .unwrap()
                .install(|| {
                    order
                        .sort(&b.schema(), std::slice::from_ref(&b), &groups)
                        .unwrap()
                })
        };
        let one = sort(1);
        assert_eq!(one.num_rows(), n);
        for threads in [2, 3, 8] {
            assert_eq!(sort(threads), one, "{threads} threads");
        }
    }

    #[test]
    fn order_depends_on_content_and_seed_not_position() {
        let groups = [0u32, 1, 0, 1, 2, 2];
        let labels = |l: &[&str]| l.iter().map(|s| s.as_bytes().to_vec()).collect::<Vec<_>>();
        let order = ReleaseOrder::new(&groups, &labels(&["a", "b", "c"]), 7);
        let b = batch(&[10, 20, 11, 21, 30, 31], &["a", "b", "a", "b", "c", "c"]);
        let sorted = order
            .sort(&b.schema(), std::slice::from_ref(&b), &groups)
            .unwrap();
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
                ReleaseOrder::new(&groups, &labels(&["a", "b", "c"]), s)
                    .sort(&b.schema(), std::slice::from_ref(&b), &groups)
                    .unwrap()
            })
            .any(|o| o != sorted);
        assert!(other);
        // Group ids numbered another way (as another input order would)
        // change nothing: the order comes from the labels.
        let renumbered = [2u32, 0, 2, 0, 1, 1];
        let o2 = ReleaseOrder::new(&renumbered, &labels(&["b", "c", "a"]), 7);
        assert_eq!(
            o2.sort(&b.schema(), std::slice::from_ref(&b), &renumbered)
                .unwrap(),
            sorted
        );
        // Groups publishing the same labels share a rank.
        let same = ReleaseOrder::new(&groups, &labels(&["a", "a", "c"]), 7);
        assert_eq!(same.rank(0), same.rank(1));
        assert_ne!(same.rank(0), same.rank(2));
    }

    #[test]
    fn buckets_hold_at_most_the_budget() {
        let groups: Vec<u32> = (0..100).map(|i| i % 10).collect();
        let labels: Vec<Vec<u8>> = (0..10u8).map(|g| vec![g]).collect();
        let order = ReleaseOrder::new(&groups, &labels, 1);
        let b = order.buckets(25);
        assert_eq!(b.ranges().len(), 5);
        assert_eq!(b.of(0), 0);
        assert_eq!(b.of(9), 4);
        assert_eq!(
            order.buckets(1_000).ranges(),
            std::slice::from_ref(&(0..10))
        );
        assert_eq!(order.buckets(1).ranges().len(), 10);
    }
}
