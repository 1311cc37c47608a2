//! Partition, then cluster: any local-recoding algorithm run block by block
//! (issue 10), so that algorithms quadratic in the number of classes (KACA,
//! SBC, L-clustering) scale to tens of millions of rows.
//!
//! 1. **Partition.** The active rows are cut top-down as Mondrian does
//!    (LeFevre, DeWitt, Ramakrishnan, ICDE 2006) until a region has at most
//!    `block_size` rows. A region is cut near the median of one QI, at the
//!    boundary between distinct values nearest the median (codes are in
//!    value or hierarchy order) as long as it leaves both parts within the
//!    middle half. The QI is, by `block_cut`, the one whose two parts lose
//!    least when each is measured as one group (`"least-loss"`, default) or
//!    the widest normalised one (`"widest"`: numeric QIs by value range,
//!    others by the share of their observed codes the region spans). Only
//!    when no QI has such a boundary is the region cut at the exact median
//!    (rows ordered by code, then row number), which splits rows of equal
//!    value. A cut is made only when both parts keep at least k rows and
//!    are accepted by the privacy models (so with l-diversity every block
//!    is l-diverse and its algorithm can succeed); a region no QI can cut
//!    stays one block, whatever its size. The QI and boundary are chosen on
//!    a sample of at most 2^15 rows of the region, copied row-major, so a
//!    cut costs one pass over the region; halves are cut in parallel.
//! 2. **Cluster.** The inner algorithm runs on each block's sub-table
//!    ([`QiTable::restrict`]: the block's rows, with the whole table's codes
//!    and statistics, so losses and distances are the whole table's), the
//!    blocks in parallel (rayon), each with the same job and seed.
//! 3. **Union.** Each block's groups, with the cells its algorithm published
//!    and its suppressed rows, become groups of one [`Partition`] of the
//!    whole table. Every group satisfies the models in its block, hence in
//!    the union; groups of different blocks that publish the same tuple
//!    form one larger class. The pipeline verifies the union as usual
//!    before anything is released. Each block suppresses at most
//!    `floor(limit * block rows)` rows, so the union stays within the limit.
//!
//! Selected by `block_size` in the job's `[algorithm]` section (rows per
//! block, with `block_cut` optional), which [`wrap`] handles for the
//! registry; a table with no more active rows than `block_size` is handed
//! to the inner algorithm unchanged.
//! Blocks, their size range and the time of each phase are in the details.
//! Global-recoding algorithms (Datafly, Incognito, HeuristicMin) publish one
//! generalisation level for the whole table and are refused.
//!
//! The result depends only on the table, the job and the seed, never on the
//! number of threads: cuts are deterministic and the blocks' results are
//! joined in block order.

use std::time::Instant;

use rayon::prelude::*;
use serde::{Deserialize, Serialize};

use crate::algorithms::registry::Capabilities;
use crate::algorithms::{details, whole_table, Algorithm, Context, Outcome};
use crate::codes::with_codes;
use crate::encode::{EquivalenceClasses, QiTable};
use crate::error::{Error, Result};
use crate::partition::{Partition, SUPPRESSED};
use crate::privacy::{ClassView, Privacy};
use crate::spec::JobSpec;

/// The job parameter that selects block-wise runs: rows per block.
pub const BLOCK_SIZE: &str = "block_size";

/// The job parameter that chooses how regions are cut ([`BlockCut`]).
pub const BLOCK_CUT: &str = "block_cut";

/// How the partition step picks the QI to cut a region on.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Deserialize, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum BlockCut {
    /// Try a cut on every QI and keep the one whose two parts, each
    /// measured as one group, lose the least granularity (as Mondrian's
    /// `cut = "least-loss"`). On Adult, k = 10, it keeps partitioned SBC
    /// within 1 % of the unpartitioned NCP at 1,000-row blocks, where the
    /// widest rule loses 8 %.
    #[default]
    LeastLoss,
    /// The QI with the widest normalised range that can be cut (Mondrian's
    /// rule).
    Widest,
}

/// Rows per block when a job does not set [`BLOCK_SIZE`]. Chosen by
/// measurement (RESULTS.md, "Cost of partitioning"): on Adult at k = 10,
/// Mondrian, SBC, KACA and L-clustering in blocks of this size stay within
/// 5 % (relative) of the NCP of their whole-table runs, while blocks keep
/// the quadratic clustering algorithms at a fraction of a second each.
pub const DEFAULT_BLOCK_SIZE: usize = 10_000;

/// A job that does not set [`BLOCK_SIZE`] runs on the whole table up to this
/// many active rows and in blocks of [`DEFAULT_BLOCK_SIZE`] beyond: below
/// it, the whole-table run of every local-recoding algorithm takes seconds
/// (BENCHMARKS.md, "Default block size") and loses no information to the
/// cuts.
pub const AUTO_PARTITION_ROWS: usize = 100_000;

/// Wraps the job's algorithm in [`Partitioned`]: with the job's
/// [`BLOCK_SIZE`] when it sets one (`0`: the whole table, whatever its
/// size), else, for a local-recoding algorithm, with
/// [`DEFAULT_BLOCK_SIZE`] on tables of more than [`AUTO_PARTITION_ROWS`]
/// active rows. Global-recoding algorithms without `block_size` are not
/// wrapped.
///
/// # Errors
/// [`Error::Spec`] for a block size that is not a whole number, for a
/// global-recoding algorithm with a block size, or whatever building the
/// inner algorithm reports.
pub fn wrap(spec: &JobSpec, capabilities: Capabilities) -> Result<Option<Box<dyn Algorithm>>> {
    let name = spec.algorithm.name.as_str();
    let block_wise = capabilities.block_wise;
    let block_size = match spec.algorithm.params.get(BLOCK_SIZE) {
        None if !block_wise => return Ok(None),
        None => None,
        Some(value) => Some(
            value
                .as_u64()
                .and_then(|b| usize::try_from(b).ok())
                .ok_or_else(|| {
                    Error::spec(
                        "algorithm.block_size",
                        "must be a whole number of rows (e.g. 10000), or 0 to run on the whole table",
                    )
                })?,
        ),
    };
    if block_size.is_some_and(|b| b > 0) && !block_wise {
        return Err(Error::spec(
            "algorithm.block_size",
            format!(
                "`{name}` does not run block by block (a global-recoding algorithm publishes one generalisation level for the whole table); remove `block_size` or choose a local-recoding algorithm such as mondrian"
            ),
        ));
    }
    let rule = match spec.algorithm.params.get(BLOCK_CUT) {
        None => BlockCut::default(),
        Some(v) => serde_json::from_value(v.clone()).map_err(|_| {
            Error::spec(
                "algorithm.block_cut",
                "must be \"least-loss\" (default) or \"widest\"",
            )
        })?,
    };
    let mut inner_spec = spec.clone();
    inner_spec.algorithm.params.remove(BLOCK_SIZE);
    inner_spec.algorithm.params.remove(BLOCK_CUT);
    let inner = whole_table(&inner_spec)?;
    let blockwise = match block_size {
        Some(0) => Partitioned::new(inner, inner_spec, usize::MAX).whole_table_up_to(usize::MAX),
        Some(b) => Partitioned::new(inner, inner_spec, b),
        None => Partitioned::new(inner, inner_spec, DEFAULT_BLOCK_SIZE)
            .whole_table_up_to(AUTO_PARTITION_ROWS),
    };
    Ok(Some(Box::new(blockwise.with_rule(rule))))
}

/// A local-recoding algorithm run block by block (see the module docs).
#[derive(Debug)]
pub struct Partitioned {
    inner: Box<dyn Algorithm>,
    inner_spec: JobSpec,
    block_size: usize,
    rule: BlockCut,
    /// Tables with at most this many active rows go to `inner` unchanged,
    /// with its own details (the default of jobs without `block_size`).
    whole_table_up_to: Option<usize>,
}

impl Partitioned {
    /// Runs `inner` on blocks of about `block_size` rows, passing it
    /// `inner_spec` as its job (the job without [`BLOCK_SIZE`]).
    pub fn new(inner: Box<dyn Algorithm>, inner_spec: JobSpec, block_size: usize) -> Self {
        Partitioned {
            inner,
            inner_spec,
            block_size: block_size.max(1),
            rule: BlockCut::default(),
            whole_table_up_to: None,
        }
    }

    /// Runs `inner` on the whole table, as if unwrapped, when the table has
    /// at most `rows` active rows.
    pub fn whole_table_up_to(mut self, rows: usize) -> Self {
        self.whole_table_up_to = Some(rows);
        self
    }

    /// Chooses how regions are cut.
    pub fn with_rule(mut self, rule: BlockCut) -> Self {
        self.rule = rule;
        self
    }
}

#[derive(Debug, Serialize)]
struct PartitionedDetails {
    block_size: usize,
    block_cut: BlockCut,
    blocks: usize,
    block_rows_min: usize,
    block_rows_max: usize,
    partition_s: f64,
    blocks_s: f64,
    union_s: f64,
    #[serde(skip_serializing_if = "Option::is_none")]
    inner_details: Option<serde_json::Value>,
}

impl Algorithm for Partitioned {
    fn name(&self) -> &'static str {
        self.inner.name()
    }

    fn run(&self, ctx: &Context<'_>) -> Result<Outcome> {
        ctx.privacy.check_feasible(ctx.table)?;
        let rows = ctx.table.active_rows();
        if self.whole_table_up_to.is_some_and(|w| rows.len() <= w) {
            return self.inner.run(&Context {
                spec: &self.inner_spec,
                ..*ctx
            });
        }
        let t = Instant::now();
        if rows.len() <= self.block_size {
            let outcome = self.inner.run(&Context {
                spec: &self.inner_spec,
                ..*ctx
            })?;
            let details = self.details(
                &[rows.len()],
                [0.0, t.elapsed().as_secs_f64(), 0.0],
                Some(outcome.details),
            )?;
            return Ok(Outcome {
                partition: outcome.partition,
                details,
            });
        }
        let blocks = Blocks {
            table: ctx.table,
            privacy: ctx.privacy,
            block_size: self.block_size,
            rule: self.rule,
        }
        .split(rows);
        ctx.cancel.check()?;
        let partition_s = t.elapsed().as_secs_f64();
        let t = Instant::now();
        let results = blocks
            .into_par_iter()
            .map(|mut rows| {
                ctx.cancel.check()?;
                rows.sort_unstable();
                let sub = ctx.table.restrict(&rows);
                let classes = EquivalenceClasses::of(&sub);
                let outcome = self.inner.run(&Context {
                    table: &sub,
                    classes: &classes,
                    privacy: ctx.privacy,
                    spec: &self.inner_spec,
                    cancel: ctx.cancel,
                })?;
                Ok((rows, outcome.partition))
            })
            .collect::<Result<Vec<_>>>()?;
        let blocks_s = t.elapsed().as_secs_f64();
        let t = Instant::now();
        let sizes: Vec<usize> = results.iter().map(|(rows, _)| rows.len()).collect();
        let partition = union(ctx.table, results)?;
        let union_s = t.elapsed().as_secs_f64();
        Ok(Outcome {
            partition,
            details: self.details(&sizes, [partition_s, blocks_s, union_s], None)?,
        })
    }
}

impl Partitioned {
    /// The details of a run; `inner_details` when there was a single block.
    fn details(
        &self,
        sizes: &[usize],
        phases_s: [f64; 3],
        inner_details: Option<serde_json::Value>,
    ) -> Result<serde_json::Value> {
        let [partition_s, blocks_s, union_s] = phases_s;
        Ok(serde_json::json!({
            "partitioned": details(&PartitionedDetails {
                block_size: self.block_size,
                block_cut: self.rule,
                blocks: sizes.len(),
                block_rows_min: sizes.iter().copied().min().unwrap_or(0),
                block_rows_max: sizes.iter().copied().max().unwrap_or(0),
                partition_s,
                blocks_s,
                union_s,
                inner_details,
            })?
        }))
    }
}

/// Joins the blocks' partitions (each over its block's sub-table, rows in
/// the order given) into one partition of `table`.
fn union(table: &QiTable, blocks: Vec<(Vec<u32>, Partition)>) -> Result<Partition> {
    let n_groups: usize = blocks.iter().map(|(_, p)| p.n_groups()).sum();
    if u32::try_from(n_groups).is_err() {
        return Err(Error::ResourcesExhausted(format!(
            "{n_groups} groups do not fit the partition's 32-bit group ids"
        )));
    }
    let mut group_of_row = vec![SUPPRESSED; table.n_rows()];
    let mut tuples = Vec::with_capacity(n_groups);
    for (rows, p) in blocks {
        if p.n_rows() != rows.len() {
            return Err(Error::Internal(format!(
                "a block of {} rows came back with a partition of {} rows",
                rows.len(),
                p.n_rows()
            )));
        }
        let base = tuples.len() as u32;
        for (&r, &g) in rows.iter().zip(p.group_of_row()) {
            if g != SUPPRESSED {
                group_of_row[r as usize] = base + g;
            }
        }
        tuples.extend((0..p.n_groups()).map(|g| p.tuple(g).to_vec()));
    }
    Ok(Partition::with_tuples(table, group_of_row, tuples))
}

/// Rows of a region on which [`Blocks::cut`] chooses its cut. On 1M rows
/// from `kanon generate --like adult` (partitioned SBC, 10k-row blocks),
/// 2^13 made the partition step about twice as fast as 2^15 but raised the
/// NCP by 4 %, and 2^16 cost 50 % more time for no gain; 2^15 also covers a
/// whole Adult table, so Adult is partitioned exactly.
const LOSS_SAMPLE: usize = 1 << 15;

/// Where a region is cut: rows whose code is below `code` (or up to it,
/// when `inclusive`) go left.
#[derive(Debug, Clone, Copy)]
struct Boundary {
    code: u32,
    inclusive: bool,
}

impl Boundary {
    #[inline]
    fn goes_left(self, code: u32) -> bool {
        code < self.code || (self.inclusive && code == self.code)
    }
}

/// Sample rows of a region with their QI codes copied row-major.
struct Sample {
    n_qi: usize,
    codes: Vec<u32>,
}

impl Sample {
    /// Every `step`-th row of `rows`.
    fn of(table: &QiTable, rows: &[u32], step: usize) -> Sample {
        let n_qi = table.n_qi();
        let picked: Vec<u32> = rows.iter().step_by(step).copied().collect();
        let mut codes = vec![0u32; picked.len() * n_qi];
        for (q, col) in table.columns().iter().enumerate() {
            with_codes!(col.codes(), |column| {
                for (i, &r) in picked.iter().enumerate() {
                    codes[i * n_qi + q] = column[r as usize].into();
                }
            });
        }
        Sample { n_qi, codes }
    }

    fn len(&self) -> usize {
        self.codes.len() / self.n_qi.max(1)
    }

    #[inline]
    fn code(&self, i: u32, q: usize) -> u32 {
        self.codes[i as usize * self.n_qi + q]
    }

    /// The codes of sample row `i`, one per QI.
    #[inline]
    fn row(&self, i: u32) -> &[u32] {
        &self.codes[i as usize * self.n_qi..(i as usize + 1) * self.n_qi]
    }

    /// Smallest and largest code of every QI over sample rows `idx`.
    fn ranges(&self, idx: &[u32]) -> Vec<(u32, u32)> {
        let mut ranges = vec![(u32::MAX, 0u32); self.n_qi];
        for &i in idx {
            let row = self.row(i);
            for (r, &c) in ranges.iter_mut().zip(row) {
                r.0 = r.0.min(c);
                r.1 = r.1.max(c);
            }
        }
        ranges
    }
}

/// The boundary between distinct values of QI `q` nearest the median of
/// sample rows `idx`, when it leaves both sides within the middle half.
/// `domain` is the QI's number of codes: a small domain is counted in one
/// pass, a large one goes through a selection.
fn boundary(sample: &Sample, idx: &mut [u32], q: usize, domain: usize) -> Option<Boundary> {
    let n = idx.len();
    if n < 2 {
        return None;
    }
    let m = n / 2;
    let (median, below, upto) = if domain <= 4 * n {
        let mut hist = vec![0u32; domain];
        for &i in idx.iter() {
            hist[sample.code(i, q) as usize] += 1;
        }
        let mut before = 0usize;
        let mut found = None;
        for (c, &h) in hist.iter().enumerate() {
            if before + h as usize > m {
                found = Some((c as u32, before, before + h as usize));
                break;
            }
            before += h as usize;
        }
        found?
    } else {
        idx.select_nth_unstable_by_key(m, |&i| sample.code(i, q));
        let median = sample.code(idx[m], q);
        let (mut below, mut upto) = (0, 0);
        for &i in idx.iter() {
            let c = sample.code(i, q);
            below += (c < median) as usize;
            upto += (c <= median) as usize;
        }
        (median, below, upto)
    };
    let in_middle = |c: usize| c >= n / 4 && c <= n - n / 4 && c > 0 && c < n;
    let c = [below, upto]
        .into_iter()
        .filter(|&c| in_middle(c))
        .min_by_key(|&c| (c.abs_diff(m), c))?;
    Some(Boundary {
        code: median,
        inclusive: c == upto,
    })
}

/// The partition step: top-down median cuts down to the block size.
struct Blocks<'a> {
    table: &'a QiTable,
    privacy: &'a Privacy,
    block_size: usize,
    rule: BlockCut,
}

impl Blocks<'_> {
    /// Cuts `rows` into blocks, in a deterministic order.
    fn split(&self, rows: Vec<u32>) -> Vec<Vec<u32>> {
        if rows.len() <= self.block_size {
            return vec![rows];
        }
        match self.cut(rows) {
            Ok((left, right)) => {
                let (mut a, b) = rayon::join(|| self.split(left), || self.split(right));
                a.extend(b);
                a
            }
            Err(rows) => vec![rows],
        }
    }

    /// The normalised width of QI `q` over codes `lo..=hi`: numeric QIs by
    /// value range, others by the share of their observed codes spanned.
    fn width(&self, q: usize, lo: u32, hi: u32) -> f64 {
        if lo >= hi {
            return 0.0;
        }
        let col = &self.table.columns()[q];
        let (min, max) = col.min_max();
        match (col.value(lo), col.value(hi)) {
            (Some(a), Some(b)) if max > min => (b - a) / (max - min),
            _ => {
                let spanned = col.observed_in(lo, hi + 1) as f64;
                (spanned - 1.0) / (col.distinct().max(2) - 1) as f64
            }
        }
    }

    /// The loss of cutting sample rows `idx` at boundary `b` of QI `q`:
    /// for each part, its rows times the sum of its QIs' normalised widths
    /// (granularity, unweighted, as if the part were one group). One pass.
    fn split_loss(&self, sample: &Sample, idx: &[u32], q: usize, b: Boundary) -> f64 {
        let n_qi = sample.n_qi;
        let mut ranges = [vec![(u32::MAX, 0u32); n_qi], vec![(u32::MAX, 0u32); n_qi]];
        let mut sizes = [0usize; 2];
        for &i in idx {
            let row = sample.row(i);
            let side = (!b.goes_left(row[q])) as usize;
            sizes[side] += 1;
            for (r, &c) in ranges[side].iter_mut().zip(row) {
                r.0 = r.0.min(c);
                r.1 = r.1.max(c);
            }
        }
        (0..2)
            .map(|side| {
                let widths: f64 = ranges[side]
                    .iter()
                    .enumerate()
                    .map(|(q, &(lo, hi))| self.width(q, lo, hi))
                    .sum();
                widths * sizes[side] as f64
            })
            .sum()
    }

    /// The QIs that vary over sample rows `idx`, widest first (ties by QI
    /// order).
    fn widths(&self, sample: &Sample, idx: &[u32]) -> Vec<usize> {
        let mut widths: Vec<(f64, usize)> = sample
            .ranges(idx)
            .into_iter()
            .enumerate()
            .filter(|(_, (lo, hi))| lo < hi)
            .map(|(q, (lo, hi))| (self.width(q, lo, hi), q))
            .collect();
        widths.sort_by(|a, b| b.0.total_cmp(&a.0).then(a.1.cmp(&b.1)));
        widths.into_iter().map(|(_, q)| q).collect()
    }

    /// Cuts a region in two, or gives it back when no QI allows a cut.
    ///
    /// The QI and the boundary are chosen on an evenly strided sample of at
    /// most [`LOSS_SAMPLE`] rows (the whole region when smaller), copied
    /// row-major so that weighing every candidate reads memory in order;
    /// the chosen cut then costs one pass over the region, and is checked
    /// on the full parts.
    fn cut(&self, mut rows: Vec<u32>) -> std::result::Result<(Vec<u32>, Vec<u32>), Vec<u32>> {
        let n = rows.len();
        let k = self.privacy.min_class_size().max(1);
        if n < 2 * k || self.table.n_qi() == 0 {
            return Err(rows);
        }
        let sample = Sample::of(self.table, &rows, n.div_ceil(LOSS_SAMPLE).max(1));
        let mut idx: Vec<u32> = (0..sample.len() as u32).collect();
        let order = self.widths(&sample, &idx);
        // First a boundary between distinct values within the middle half:
        // on the widest QI that has one, or the one whose parts lose least.
        let mut candidates: Vec<(f64, usize, Boundary)> = Vec::new();
        for (rank, &q) in order.iter().enumerate() {
            let domain = self.table.columns()[q].domain_size();
            let Some(b) = boundary(&sample, &mut idx, q, domain) else {
                continue;
            };
            let loss = match self.rule {
                BlockCut::Widest => rank as f64,
                BlockCut::LeastLoss => self.split_loss(&sample, &idx, q, b),
            };
            candidates.push((loss, q, b));
        }
        candidates.sort_by(|a, b| a.0.total_cmp(&b.0));
        for (_, q, b) in candidates {
            let (left, right): (Vec<u32>, Vec<u32>) =
                with_codes!(self.table.columns()[q].codes(), |codes| rows
                    .iter()
                    .partition(|&&r| b.goes_left(codes[r as usize].into())));
            if self.accepts(&left) && self.accepts(&right) {
                return Ok((left, right));
            }
        }
        // Only then an exact median cut, which splits rows of equal value
        // and leaves every other QI as wide as before.
        let m = n / 2;
        for &q in &order {
            with_codes!(self.table.columns()[q].codes(), |codes| {
                rows.select_nth_unstable_by_key(m, |&r| (codes[r as usize], r));
            });
            let (left, right) = (rows[..m].to_vec(), rows[m..].to_vec());
            if self.accepts(&left) && self.accepts(&right) {
                return Ok((left, right));
            }
        }
        Err(rows)
    }

    fn accepts(&self, rows: &[u32]) -> bool {
        rows.len() >= self.privacy.min_class_size()
            && self.privacy.accepts(ClassView {
                table: self.table,
                rows,
            })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::algorithms::by_name;
    use crate::encode::QiTable;
    use crate::privacy::PrivacyModel;
    use crate::verify::verify_partition;
    use rand::{Rng, SeedableRng};
    use rand_chacha::ChaCha8Rng;

    /// A random table: two numeric QIs, two categorical QIs (flexible), a
    /// sensitive column.
    fn random_table(seed: u64, n: usize) -> (JobSpec, QiTable) {
        let spec: JobSpec = serde_json::from_str(
            r#"{"attributes": [
                {"name": "age", "role": "qi", "type": "numeric"},
                {"name": "zip", "role": "qi", "type": "numeric"},
                {"name": "job", "role": "qi"},
                {"name": "city", "role": "qi"},
                {"name": "disease", "role": "sensitive"}],
               "algorithm": {"name": "mondrian", "seed": 3}}"#,
        )
        .unwrap();
        let mut rng = ChaCha8Rng::seed_from_u64(seed);
        let mut cols: Vec<Vec<String>> = vec![Vec::new(); 5];
        for _ in 0..n {
            cols[0].push(rng.gen_range(17..90).to_string());
            cols[1].push((10_000 + rng.gen_range(0..60) * 7).to_string());
            cols[2].push(format!("job{}", rng.gen_range(0..12)));
            cols[3].push(format!("city{}", rng.gen_range(0..30)));
            cols[4].push(format!("d{}", rng.gen_range(0..5)));
        }
        let names = ["age", "zip", "job", "city", "disease"];
        let columns: Vec<(&str, Vec<&str>)> = names
            .iter()
            .zip(&cols)
            .map(|(n, c)| (*n, c.iter().map(String::as_str).collect()))
            .collect();
        let table = QiTable::from_string_columns(&spec, &Default::default(), &columns).unwrap();
        (spec, table)
    }

    fn with(spec: &JobSpec, algorithm: &str, block_size: Option<usize>) -> JobSpec {
        let mut s = spec.clone();
        s.algorithm.name = algorithm.to_string();
        if let Some(b) = block_size {
            s.algorithm
                .params
                .insert(BLOCK_SIZE.into(), serde_json::json!(b));
        }
        s
    }

    fn run(spec: &JobSpec, table: &QiTable, privacy: &Privacy) -> Result<Outcome> {
        let classes = EquivalenceClasses::of(table);
        by_name(spec)?.run(&Context {
            table,
            classes: &classes,
            privacy,
            spec,
            cancel: crate::cancel::Cancellation::never(),
        })
    }

    /// Distinct l-diversity on the first sensitive column (a local copy, so
    /// these tests do not depend on which models are registered).
    #[derive(Debug)]
    struct DistinctL(usize);

    impl PrivacyModel for DistinctL {
        fn is_monotone(&self) -> bool {
            true
        }
        fn describe(&self) -> String {
            format!("distinct {}-diversity", self.0)
        }
        fn min_class_size(&self) -> usize {
            self.0
        }
        fn accepts(&self, class: ClassView<'_>) -> bool {
            let codes = class.table.sensitive()[0].codes();
            let mut seen: Vec<u32> = class.rows.iter().map(|&r| codes.get(r as usize)).collect();
            seen.sort_unstable();
            seen.dedup();
            seen.len() >= self.0
        }
    }

    #[test]
    fn partitioned_output_verifies_on_random_tables() {
        for (i, (n, k, block)) in [
            (3_000, 2, 100),
            (3_000, 5, 300),
            (5_000, 10, 1_000),
            (2_000, 25, 120),
            (4_000, 3, 7),
        ]
        .into_iter()
        .enumerate()
        {
            let (spec, table) = random_table(i as u64, n);
            let mut spec = with(&spec, "mondrian", Some(block));
            spec.privacy.k = k;
            let privacy = Privacy::k_anonymity(k);
            let out = run(&spec, &table, &privacy).unwrap();
            verify_partition(&table, &out.partition, &privacy)
                .unwrap_or_else(|e| panic!("case {i}: {e}"));
            let d = &out.details["partitioned"];
            let blocks = d["blocks"].as_u64().unwrap();
            assert!(blocks > 1, "case {i}: one block");
            assert!(d["block_rows_min"].as_u64().unwrap() >= k as u64);
            if block >= 2 * k {
                // Cuts stay within the middle half, so blocks are at most
                // about the block size once they can be cut.
                assert!(blocks as usize >= n / block / 2, "case {i}: {d}");
            }
            assert_eq!(out.partition.suppressed(), 0);
        }
    }

    #[test]
    fn partitioned_output_is_l_diverse_when_asked() {
        for (i, (n, l, block)) in [(3_000, 3, 200), (2_000, 4, 100)].into_iter().enumerate() {
            let (spec, table) = random_table(10 + i as u64, n);
            let spec = with(&spec, "mondrian", Some(block));
            let privacy = Privacy::k_anonymity(2).with_model(Box::new(DistinctL(l)));
            let out = run(&spec, &table, &privacy).unwrap();
            verify_partition(&table, &out.partition, &privacy)
                .unwrap_or_else(|e| panic!("case {i}: {e}"));
            assert!(out.details["partitioned"]["blocks"].as_u64().unwrap() > 1);
            // Every group, not only every published class, is l-diverse.
            let mut members = vec![Vec::new(); out.partition.n_groups()];
            for (r, &g) in out.partition.group_of_row().iter().enumerate() {
                if g != SUPPRESSED {
                    members[g as usize].push(r as u32);
                }
            }
            for rows in members.iter().filter(|m| !m.is_empty()) {
                assert!(privacy.accepts(ClassView {
                    table: &table,
                    rows
                }));
            }
        }
    }

    #[test]
    fn small_tables_agree_with_the_unpartitioned_run() {
        let (spec, table) = random_table(4, 1_500);
        let privacy = Privacy::k_anonymity(5);
        for algorithm in ["mondrian", "sbc"] {
            let plain = run(&with(&spec, algorithm, None), &table, &privacy).unwrap();
            let blocked = run(&with(&spec, algorithm, Some(1_500)), &table, &privacy).unwrap();
            assert_eq!(plain.partition, blocked.partition, "{algorithm}");
            assert_eq!(blocked.details["partitioned"]["blocks"], 1);
            assert_eq!(
                blocked.details["partitioned"]["inner_details"],
                plain.details
            );
        }
    }

    #[test]
    fn a_sub_table_of_every_row_behaves_as_the_table() {
        let (spec, table) = random_table(5, 1_200);
        let privacy = Privacy::k_anonymity(4);
        let all: Vec<u32> = (0..table.n_rows() as u32).collect();
        let sub = table.restrict(&all);
        for algorithm in ["mondrian", "sbc"] {
            let spec = with(&spec, algorithm, None);
            let a = run(&spec, &table, &privacy).unwrap();
            let b = run(&spec, &sub, &privacy).unwrap();
            assert_eq!(a.partition, b.partition, "{algorithm}");
            // And through the union, as one block of a larger run.
            let u = union(&table, vec![(all.clone(), b.partition)]).unwrap();
            assert_eq!(u.group_of_row(), a.partition.group_of_row());
            for g in 0..u.n_groups() {
                assert_eq!(u.tuple(g), a.partition.tuple(g));
            }
        }
    }

    #[test]
    fn results_do_not_depend_on_the_thread_count() {
        let (spec, table) = random_table(6, 6_000);
        let privacy = Privacy::k_anonymity(5);
        for algorithm in ["mondrian", "sbc"] {
            let spec = with(&spec, algorithm, Some(400));
            let on = |threads: usize| {
                rayon::ThreadPoolBuilder::new()
                    .num_threads(threads)
                    .build()
                    .unwrap()
                    .install(|| run(&spec, &table, &privacy).unwrap().partition)
            };
            let one = on(1);
            assert_eq!(one, on(2), "{algorithm}");
            assert_eq!(one, on(4), "{algorithm}");
            verify_partition(&table, &one, &privacy).unwrap();
        }
    }

    #[test]
    fn sbc_in_blocks_verifies() {
        let (spec, table) = random_table(7, 4_000);
        let privacy = Privacy::k_anonymity(6);
        let out = run(&with(&spec, "sbc", Some(500)), &table, &privacy).unwrap();
        verify_partition(&table, &out.partition, &privacy).unwrap();
        assert!(out.details["partitioned"]["blocks"].as_u64().unwrap() >= 4);
    }

    #[test]
    fn bad_block_sizes_and_global_recoding_are_refused() {
        let (spec, _) = random_table(8, 10);
        for bad in [
            serde_json::json!(1.5),
            serde_json::json!(-5),
            serde_json::json!("big"),
        ] {
            let mut s = with(&spec, "mondrian", None);
            s.algorithm.params.insert(BLOCK_SIZE.into(), bad.clone());
            let err = by_name(&s).unwrap_err().to_string();
            assert!(err.contains("algorithm.block_size"), "{bad}: {err}");
        }
        for global in ["datafly", "incognito"] {
            let err = by_name(&with(&spec, global, Some(1000)))
                .unwrap_err()
                .to_string();
            assert!(err.contains("global-recoding"), "{err}");
        }
        // The inner algorithm still rejects parameters it does not know.
        let mut s = with(&spec, "mondrian", Some(1000));
        s.algorithm
            .params
            .insert("bogus".into(), serde_json::json!(1));
        assert!(by_name(&s).is_err());
    }

    #[test]
    fn both_cut_rules_verify_and_bad_rules_are_refused() {
        let (spec, table) = random_table(9, 3_000);
        let privacy = Privacy::k_anonymity(5);
        for rule in ["least-loss", "widest"] {
            let mut s = with(&spec, "mondrian", Some(250));
            s.algorithm
                .params
                .insert(BLOCK_CUT.into(), serde_json::json!(rule));
            let out = run(&s, &table, &privacy).unwrap();
            verify_partition(&table, &out.partition, &privacy).unwrap();
            assert_eq!(out.details["partitioned"]["block_cut"], rule);
            assert!(out.details["partitioned"]["blocks"].as_u64().unwrap() >= 6);
        }
        let mut s = with(&spec, "mondrian", Some(250));
        s.algorithm
            .params
            .insert(BLOCK_CUT.into(), serde_json::json!("random"));
        let err = by_name(&s).unwrap_err().to_string();
        assert!(err.contains("algorithm.block_cut"), "{err}");
    }

    #[test]
    fn a_region_that_cannot_be_cut_stays_one_block() {
        // Every row identical: no QI has width, the table is one block.
        let spec: JobSpec = serde_json::from_str(
            r#"{"attributes": [{"name": "a", "role": "qi"}],
                "algorithm": {"name": "mondrian", "block_size": 10}}"#,
        )
        .unwrap();
        let values = vec!["x"; 100];
        let table =
            QiTable::from_string_columns(&spec, &Default::default(), &[("a", values)]).unwrap();
        let privacy = Privacy::k_anonymity(3);
        let out = run(&spec, &table, &privacy).unwrap();
        assert_eq!(out.details["partitioned"]["blocks"], 1);
        assert_eq!(out.details["partitioned"]["block_rows_max"], 100);
        verify_partition(&table, &out.partition, &privacy).unwrap();
    }

    #[test]
    fn the_default_runs_small_tables_whole_and_large_ones_in_blocks() {
        let (spec, table) = random_table(21, 3_000);
        let privacy = Privacy::k_anonymity(5);
        for algorithm in ["mondrian", "sbc"] {
            // No block_size: the whole table, exactly as the bare algorithm.
            let default = run(&with(&spec, algorithm, None), &table, &privacy).unwrap();
            assert!(default.details.get("partitioned").is_none(), "{algorithm}");
            let zero = run(&with(&spec, algorithm, Some(0)), &table, &privacy).unwrap();
            let bare = whole_table(&spec_named(&spec, algorithm))
                .unwrap()
                .run(&Context {
                    table: &table,
                    classes: &EquivalenceClasses::of(&table),
                    privacy: &privacy,
                    spec: &spec_named(&spec, algorithm),
                    cancel: crate::cancel::Cancellation::never(),
                })
                .unwrap();
            assert_eq!(default.partition, bare.partition, "{algorithm}");
            assert_eq!(zero.partition, bare.partition, "{algorithm}");
        }
        // Above the threshold the default cuts into blocks of the default
        // size (a smaller threshold and size stand in for the constants).
        let inner = whole_table(&spec).unwrap();
        let auto = Partitioned::new(inner, spec.clone(), 1_000).whole_table_up_to(2_000);
        let classes = EquivalenceClasses::of(&table);
        let out = auto
            .run(&Context {
                table: &table,
                classes: &classes,
                privacy: &privacy,
                spec: &spec,
                cancel: crate::cancel::Cancellation::never(),
            })
            .unwrap();
        verify_partition(&table, &out.partition, &privacy).unwrap();
        assert!(out.details["partitioned"]["blocks"].as_u64().unwrap() >= 3);
        // Global recoding without block_size is not wrapped; 0 is accepted
        // (this table lacks the hierarchies Incognito needs: its own error).
        let incognito = crate::algorithms::registry::get("incognito")
            .unwrap()
            .capabilities;
        assert!(wrap(&with(&spec, "incognito", None), incognito)
            .unwrap()
            .is_none());
        let err = run(&with(&spec, "incognito", Some(0)), &table, &privacy)
            .unwrap_err()
            .to_string();
        assert!(err.contains("needs a hierarchy"), "{err}");
    }

    fn spec_named(spec: &JobSpec, algorithm: &str) -> JobSpec {
        let mut s = spec.clone();
        s.algorithm.name = algorithm.to_string();
        s
    }
}
