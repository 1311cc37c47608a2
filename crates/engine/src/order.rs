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

use arrow::array::{Array, ArrayRef, AsArray, GenericByteArray, RecordBatch};
use arrow::compute::interleave;
use arrow::datatypes::ArrowNativeType;
use arrow::datatypes::ByteArrayType;
use arrow::datatypes::{DataType, SchemaRef};
use arrow::row::{RowConverter, SortField};
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
    /// Columns whose value is the same for every row of a rank (the QI
    /// labels): hashing them cannot order a rank's rows.
    class_columns: Vec<String>,
}

/// Consecutive ranges of group ranks, each holding at most a given number of
/// rows (a group larger than that is a bucket of its own).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Buckets(Vec<Range<u32>>);

/// Released rows and the order they leave in: a permutation over the rows
/// of a set of batches, taken in chunks ([`Ordered::chunk`]) so that a
/// bucket is never copied whole into release order.
#[derive(Debug)]
pub struct Ordered {
    schema: SchemaRef,
    batches: Vec<RecordBatch>,
    /// Release position to (batch, row).
    order: Vec<(usize, usize)>,
}

/// A keyed 64-bit hash of `bytes` under `seed` (FxHash, stable for a build:
/// the order only has to be reproducible, not secret).
fn keyed_hash(seed: u64, bytes: &[u8]) -> u64 {
    let mut h = rustc_hash::FxHasher::default();
    seed.hash(&mut h);
    bytes.hash(&mut h);
    h.finish()
}

/// MurmurHash3's 64-bit finaliser: spreads every input bit over the word.
fn fmix64(mut h: u64) -> u64 {
    h ^= h >> 33;
    h = h.wrapping_mul(0xff51_afd7_ed55_8ccd);
    h ^= h >> 33;
    h = h.wrapping_mul(0xc4ce_b9fe_1a85_ec53);
    h ^ (h >> 33)
}

/// The hash of a null cell (any value that no non-null cell hashes to
/// more often than chance).
const NULL_HASH: u64 = 0x6e75_6c6c_5f63_656c;

/// The hash of one byte string (a cell's value).
fn bytes_hash(bytes: &[u8]) -> u64 {
    let mut h = rustc_hash::FxHasher::default();
    bytes.hash(&mut h);
    fmix64(h.finish())
}

/// The hash of every cell of `array`, by value (nulls hash to [`NULL_HASH`],
/// whatever bytes lie under them). Strings, binaries, fixed-width
/// primitives and dictionaries of them are read directly; any other type
/// (nested, booleans) through its Arrow row encoding, which is equal
/// exactly when the values are.
fn cell_hashes(array: &dyn Array) -> Result<Vec<u64>> {
    let n = array.len();
    let mut out: Vec<u64> = match array.data_type() {
        DataType::Utf8 => byte_hashes(array.as_string::<i32>()),
        DataType::LargeUtf8 => byte_hashes(array.as_string::<i64>()),
        DataType::Binary => byte_hashes(array.as_binary::<i32>()),
        DataType::LargeBinary => byte_hashes(array.as_binary::<i64>()),
        DataType::Utf8View => (0..n)
            .map(|i| bytes_hash(array.as_string_view().value(i).as_bytes()))
            .collect(),
        DataType::BinaryView => (0..n)
            .map(|i| bytes_hash(array.as_binary_view().value(i)))
            .collect(),
        DataType::FixedSizeBinary(_) => (0..n)
            .map(|i| bytes_hash(array.as_fixed_size_binary().value(i)))
            .collect(),
        DataType::Dictionary(_, _) => {
            let dict = array.as_any_dictionary();
            if dict.values().is_empty() {
                vec![NULL_HASH; n]
            } else {
                let values = cell_hashes(dict.values().as_ref())?;
                dict.normalized_keys()
                    .into_iter()
                    .map(|k| values[k])
                    .collect()
            }
        }
        t if t.is_primitive() => {
            let width = t.primitive_width().unwrap_or(0);
            let data = array.to_data();
            let bytes =
                &data.buffers()[0].as_slice()[data.offset() * width..(data.offset() + n) * width];
            match width {
                8 => bytes
                    .chunks_exact(8)
                    .map(|c| fmix64(u64::from_le_bytes(c.try_into().expect("8 bytes")) ^ 8))
                    .collect(),
                1..=7 => bytes
                    .chunks_exact(width)
                    .map(|c| {
                        let mut w = [0u8; 8];
                        w[..width].copy_from_slice(c);
                        fmix64(u64::from_le_bytes(w) ^ width as u64)
                    })
                    .collect(),
                _ => bytes.chunks_exact(width.max(1)).map(bytes_hash).collect(),
            }
        }
        t => {
            let converter = RowConverter::new(vec![SortField::new(t.clone())])?;
            let rows = converter.convert_columns(&[arrow::array::make_array(array.to_data())])?;
            rows.iter().map(|r| bytes_hash(r.as_ref())).collect()
        }
    };
    if let Some(nulls) = array.logical_nulls() {
        for (h, valid) in out.iter_mut().zip(nulls.iter()) {
            if !valid {
                *h = NULL_HASH;
            }
        }
    }
    Ok(out)
}

/// The hash of every value of a string or binary array (nulls included:
/// the caller overwrites them).
fn byte_hashes<T: ByteArrayType>(array: &GenericByteArray<T>) -> Vec<u64> {
    let data = array.value_data();
    array
        .value_offsets()
        .windows(2)
        .map(|w| bytes_hash(&data[w[0].as_usize()..w[1].as_usize()]))
        .collect()
}

/// A keyed hash of every row of `batch` over its `columns`: their cells'
/// hashes combined column by column under `seed`. Equal rows hash equally,
/// whatever their batch.
fn row_hashes(seed: u64, batch: &RecordBatch, columns: &[usize]) -> Result<Vec<u64>> {
    let mut rows = vec![seed; batch.num_rows()];
    for &c in columns {
        for (h, c) in rows.iter_mut().zip(cell_hashes(batch.column(c).as_ref())?) {
            *h = fmix64(h.rotate_left(29) ^ c);
        }
    }
    Ok(rows)
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
            class_columns: Vec::new(),
        }
    }

    /// Names the columns whose value is the same for every row of a rank
    /// (the QI columns, published as the class's labels): they are left out
    /// of the rows' hashes, which they could not change within a rank.
    pub fn with_class_columns(mut self, names: Vec<String>) -> Self {
        self.class_columns = names;
        self
    }

    /// The number of groups.
    pub fn n_groups(&self) -> usize {
        self.rank_of_group.len()
    }

    /// The rank of a group.
    pub fn rank(&self, group: u32) -> u32 {
        self.rank_of_group[group as usize]
    }

    /// Published rows of the ranks in `ranks`.
    pub fn rows_of(&self, ranks: Range<u32>) -> u64 {
        self.rows_of_rank[ranks.start as usize..ranks.end as usize]
            .iter()
            .sum()
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

    /// Puts released rows in release order: `batches` are released batches
    /// (every column as published) and `groups` the group of each of their
    /// rows, in the same order. Rows are ordered by their group's rank, then
    /// by a keyed hash of their content (the columns named by
    /// [`ReleaseOrder::with_class_columns`] left out: they are equal within
    /// a rank); rows whose rank and hash are equal
    /// are ordered by their content itself (Arrow's row encoding), so the
    /// order is a function of the rows alone (and equal rows are
    /// interchangeable). The hashes and the sort run on rayon; the order
    /// does not depend on the number of threads or on how the rows are
    /// split into batches.
    ///
    /// # Errors
    /// Arrow failures (hashing or encoding a column).
    pub fn order(
        &self,
        schema: &SchemaRef,
        batches: Vec<RecordBatch>,
        groups: &[u32],
    ) -> Result<Ordered> {
        let batches: Vec<RecordBatch> = batches.into_iter().filter(|b| b.num_rows() > 0).collect();
        let n: usize = batches.iter().map(RecordBatch::num_rows).sum();
        if n != groups.len() {
            return Err(crate::error::Error::Internal(format!(
                "{n} released rows but {} group ids",
                groups.len()
            )));
        }
        let hashed: Vec<usize> = schema
            .fields()
            .iter()
            .enumerate()
            .filter(|(_, f)| !self.class_columns.contains(f.name()))
            .map(|(c, _)| c)
            .collect();
        let hashes: Vec<Vec<u64>> = batches
            .par_iter()
            .map(|b| row_hashes(self.seed, b, &hashed))
            .collect::<Result<_>>()?;
        let mut keys: Vec<(u32, u64, u32, u32)> = Vec::with_capacity(n);
        let mut row = 0usize;
        for (b, h) in hashes.iter().enumerate() {
            keys.extend(
                h.iter()
                    .enumerate()
                    .map(|(r, &h)| (self.rank(groups[row + r]), h, b as u32, r as u32)),
            );
            row += h.len();
        }
        drop(hashes);
        // The batch and row only make the sort total; ties are ordered by
        // content below.
        keys.par_sort_unstable();
        self.order_ties(&batches, &mut keys)?;
        Ok(Ordered {
            schema: schema.clone(),
            batches,
            order: keys
                .into_iter()
                .map(|k| (k.2 as usize, k.3 as usize))
                .collect(),
        })
    }

    /// Orders every run of rows with equal rank and hash by the rows'
    /// content (they are equal rows, almost surely: the run is then left
    /// as it is, since equal rows are interchangeable).
    fn order_ties(&self, batches: &[RecordBatch], keys: &mut [(u32, u64, u32, u32)]) -> Result<()> {
        let mut runs: Vec<Range<usize>> = Vec::new();
        let mut start = 0;
        for i in 1..=keys.len() {
            if i == keys.len() || (keys[i].0, keys[i].1) != (keys[start].0, keys[start].1) {
                if i - start > 1 {
                    runs.push(start..i);
                }
                start = i;
            }
        }
        if runs.is_empty() {
            return Ok(());
        }
        let tied: Vec<(usize, usize)> = runs
            .iter()
            .flat_map(|r| keys[r.clone()].iter().map(|k| (k.2 as usize, k.3 as usize)))
            .collect();
        let columns = take_columns(batches, &tied)?;
        if columns.is_empty() {
            return Ok(());
        }
        let converter = RowConverter::new(
            columns
                .iter()
                .map(|c| SortField::new(c.data_type().clone()))
                .collect(),
        )?;
        let rows = converter.convert_columns(&columns)?;
        let mut at = 0;
        for run in runs {
            let len = run.len();
            let mut members: Vec<usize> = (at..at + len).collect();
            members.sort_by(|&a, &b| rows.row(a).cmp(&rows.row(b)));
            let sorted: Vec<_> = members.iter().map(|&m| keys[run.start + m - at]).collect();
            keys[run].copy_from_slice(&sorted);
            at += len;
        }
        Ok(())
    }

    /// [`ReleaseOrder::order`], taken as one batch.
    ///
    /// # Errors
    /// As [`ReleaseOrder::order`].
    pub fn sort(
        &self,
        schema: &SchemaRef,
        batches: &[RecordBatch],
        groups: &[u32],
    ) -> Result<RecordBatch> {
        let ordered = self.order(schema, batches.to_vec(), groups)?;
        ordered.chunk(0, ordered.num_rows())
    }
}

/// The rows `at` ((batch, row) pairs) of `batches`, column by column on
/// rayon.
fn take_columns(batches: &[RecordBatch], at: &[(usize, usize)]) -> Result<Vec<ArrayRef>> {
    let n_columns = batches.first().map_or(0, RecordBatch::num_columns);
    (0..n_columns)
        .into_par_iter()
        .map(|c| {
            let arrays: Vec<&dyn Array> = batches.iter().map(|b| b.column(c).as_ref()).collect();
            Ok(interleave(&arrays, at)?)
        })
        .collect()
}

impl Ordered {
    /// The number of rows.
    pub fn num_rows(&self) -> usize {
        self.order.len()
    }

    /// The schema of the rows.
    pub fn schema(&self) -> &SchemaRef {
        &self.schema
    }

    /// The rows at release positions `start..start + len`, as one batch.
    ///
    /// # Errors
    /// Arrow failures.
    pub fn chunk(&self, start: usize, len: usize) -> Result<RecordBatch> {
        let at = &self.order[start..start + len];
        if self.batches.is_empty() || at.is_empty() {
            return Ok(RecordBatch::new_empty(self.schema.clone()));
        }
        let columns = take_columns(&self.batches, at)?;
        Ok(RecordBatch::try_new_with_options(
            self.schema.clone(),
            columns,
            &arrow::array::RecordBatchOptions::new().with_row_count(Some(len)),
        )?)
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
    use arrow::array::{
        ArrayRef, BooleanArray, Float64Array, Int64Array, StringArray, StringViewArray,
        StructArray, UInt32Array,
    };
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

    /// Rows of many types (nulls, views, booleans, structs, duplicates),
    /// split into batches any way and in any input order, leave in the
    /// same order; equal rows share their hash whatever their batch.
    #[test]
    fn the_order_depends_on_the_rows_alone_whatever_their_types_and_batches() {
        let n = 600usize;
        let schema = Arc::new(Schema::new(vec![
            Field::new("s", DataType::Utf8, true),
            Field::new("v", DataType::Utf8View, true),
            Field::new("f", DataType::Float64, true),
            Field::new("b", DataType::Boolean, true),
            Field::new(
                "st",
                DataType::Struct(vec![Field::new("x", DataType::Int64, true)].into()),
                true,
            ),
        ]));
        let s: StringArray = (0..n)
            .map(|i| i % 300)
            .map(|i| (i % 7 != 0).then(|| format!("s{}", i % 13)))
            .collect();
        let v: StringViewArray = (0..n)
            .map(|i| i % 300)
            .map(|i| (i % 5 != 0).then(|| format!("a rather long view value {}", i % 11)))
            .collect();
        let f: Float64Array = (0..n)
            .map(|i| i % 300)
            .map(|i| (i % 3 != 0).then_some((i % 4) as f64))
            .collect();
        let b: BooleanArray = (0..n)
            .map(|i| i % 300)
            .map(|i| (i % 9 != 0).then_some(i % 2 == 0))
            .collect();
        let x: Int64Array = (0..n)
            .map(|i| i % 300)
            .map(|i| (i % 6 != 0).then_some((i % 3) as i64))
            .collect();
        let st = StructArray::from(vec![(
            Arc::new(Field::new("x", DataType::Int64, true)),
            Arc::new(x) as ArrayRef,
        )]);
        let columns: Vec<ArrayRef> = vec![
            Arc::new(s),
            Arc::new(v),
            Arc::new(f),
            Arc::new(b),
            Arc::new(st),
        ];
        let all = RecordBatch::try_new(schema.clone(), columns).unwrap();
        let groups: Vec<u32> = (0..n).map(|i| (i % 4) as u32).collect();
        let labels: Vec<Vec<u8>> = (0..4u8).map(|g| vec![g]).collect();
        let order = ReleaseOrder::new(&groups, &labels, 11);
        let whole = order
            .sort(&schema, std::slice::from_ref(&all), &groups)
            .unwrap();
        // Equal rows are adjacent within a rank: the ties were resolved by
        // content.
        let rev: Vec<u32> = (0..n as u32).rev().collect();
        let reversed = take_record_batch(&all, &UInt32Array::from(rev.clone())).unwrap();
        let rgroups: Vec<u32> = rev.iter().map(|&i| groups[i as usize]).collect();
        for split in [1usize, 7, 64, 599] {
            let parts: Vec<RecordBatch> = (0..n)
                .step_by(split)
                .map(|s| reversed.slice(s, split.min(n - s)))
                .collect();
            assert_eq!(
                order.sort(&schema, &parts, &rgroups).unwrap(),
                whole,
                "batches of {split} rows, reversed"
            );
        }
        // Rows i and i + 300 are equal: their hashes are, across batches.
        let h1 = row_hashes(3, &all.slice(0, 300), &[0, 1, 2, 3, 4]).unwrap();
        let h2 = row_hashes(3, &all.slice(300, 300), &[0, 1, 2, 3, 4]).unwrap();
        assert_eq!(h1, h2);
        assert!(h1.iter().collect::<std::collections::HashSet<_>>().len() > 100);
    }
}
