//! Partition, then cluster: any local-recoding algorithm run block by block
//! (issue 10), so that algorithms quadratic in the number of classes (KACA,
//! SBC, L-clustering) scale to tens of millions of rows.
//!
//! 1. **Partition.** The active rows are cut top-down by Mondrian's own
//!    cutter (LeFevre, DeWitt, Ramakrishnan, ICDE 2006;
//!    `mondrian::blocks`) until a region has at most `block_size` rows:
//!    ordered QIs at the median, hierarchical ones into the children of the
//!    region's lowest common ancestor, so blocks never split a hierarchy
//!    node that a class could publish. With Mondrian itself inside, its
//!    parameters cut the blocks and each block continues the same cuts, so
//!    the block-wise run publishes the whole-table partition (with blocks
//!    of at most 2^17 rows, which choose their cuts on every row; `tidy`'s
//!    post-pass stays within a block); other algorithms get Mondrian's
//!    default cuts. `block_cut` chooses the QI of every block cut
//!    (`"least-loss"`: the cut whose parts lose least granularity; `"widest"`:
//!    the widest normalised QI). A cut is made only when every part keeps
//!    at least k rows and is accepted by the privacy models (so with
//!    l-diversity every block is l-diverse and its algorithm can succeed); a
//!    region no QI can cut stays one block, whatever its size. A region of
//!    more than 2^17 rows chooses its QI on a sample of them, so a level of
//!    cuts costs about one pass over its rows; parts are cut in parallel.
//! 2. **Cluster.** The inner algorithm runs on each block's sub-table
//!    ([`QiTable::restrict`]: the block's rows, with the whole table's codes
//!    and statistics, so losses and distances are the whole table's), the
//!    blocks in parallel (rayon), each with the same job and seed: on this
//!    machine ([`LocalBlocks`]) or on the workers of a cluster (the
//!    [`BlockExecutor`] in the run's [`Context`], issue 18), with the same
//!    partitions.
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
//! to the inner algorithm unchanged. Without `block_size`, an algorithm
//! whose cuts are followed by passes over the whole table
//! (`mondrian-hierarchy`: the residue, tidying) runs whole at every size;
//! the others run whole up to [`AUTO_PARTITION_ROWS`] rows and in blocks
//! of [`DEFAULT_BLOCK_SIZE`] beyond: for Mondrian the same partition, in
//! less time (the blocks' sub-tables are compact; 16 s against 25 s of
//! cuts on 10M rows, BENCHMARKS.md "Whole-table and block-wise runs").
//! Blocks, their size range and the time of each phase are in the details;
//! while the blocks run, the blocks done so far are reported as progress
//! (phase `"blocks"`).
//! Global-recoding algorithms (Datafly, Incognito, HeuristicMin) publish one
//! generalisation level for the whole table and are refused.
//!
//! The result depends only on the table, the job and the seed, never on the
//! number of threads: cuts are deterministic and the blocks' results are
//! joined in block order.

mod executor;
#[cfg(test)]
mod tests;

pub use executor::{
    partition_from_bytes, partition_to_bytes, BlockExecutor, BlockTask, Blocks, BlocksRun,
    LocalBlocks,
};

use std::time::Instant;

use rayon::prelude::*;
use serde::Serialize;

use crate::algorithms::mondrian::{self, CutChoice, MondrianParams};
use crate::algorithms::registry::Capabilities;
use crate::algorithms::{details, whole_table, Algorithm, Context, Outcome};
use crate::encode::QiTable;
use crate::error::{Error, Result};
use crate::partition::{Partition, SUPPRESSED};
use crate::spec::JobSpec;

/// The job parameter that selects block-wise runs: rows per block.
pub const BLOCK_SIZE: &str = "block_size";

/// The job parameter that chooses the QI each block cut is made on
/// ([`CutChoice`]: `"least-loss"` or `"widest"`).
pub const BLOCK_CUT: &str = "block_cut";

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

// The whole-table sizes are capabilities of registered algorithms: they
// live with the registry, which this module reads (never the reverse).
pub use crate::algorithms::registry::{COVER_WHOLE_TUPLES, KACA_WHOLE_TUPLES};

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
    let rule: Option<CutChoice> = match spec.algorithm.params.get(BLOCK_CUT) {
        None => None,
        Some(v) => Some(serde_json::from_value(v.clone()).map_err(|_| {
            Error::spec(
                "algorithm.block_cut",
                "must be \"least-loss\" (default) or \"widest\"",
            )
        })?),
    };
    let mut inner_spec = spec.clone();
    inner_spec.algorithm.params.remove(BLOCK_SIZE);
    inner_spec.algorithm.params.remove(BLOCK_CUT);
    let inner = whole_table(&inner_spec)?;
    if block_size.is_none() && inner.top_down_cuts().is_some_and(|p| p.residue || p.tidy) {
        if rule.is_some() {
            return Err(Error::spec(
                "algorithm.block_cut",
                format!("`{name}` runs on the whole table unless `block_size` is set (its residue and tidying passes span the whole table); set `block_size` or remove `block_cut`"),
            ));
        }
        return Ok(Some(inner));
    }
    let blockwise = match block_size {
        Some(0) => Partitioned::new(inner, inner_spec, usize::MAX).whole_table_up_to(usize::MAX),
        Some(b) => Partitioned::new(inner, inner_spec, b),
        None => Partitioned::new(inner, inner_spec, DEFAULT_BLOCK_SIZE)
            .whole_table_up_to(AUTO_PARTITION_ROWS)
            .whole_table_up_to_tuples(capabilities.whole_up_to_tuples),
    };
    Ok(Some(Box::new(match rule {
        Some(rule) => blockwise.with_rule(rule),
        None => blockwise,
    })))
}

/// A local-recoding algorithm run block by block (see the module docs).
#[derive(Debug)]
pub struct Partitioned {
    inner: Box<dyn Algorithm>,
    inner_spec: JobSpec,
    block_size: usize,
    /// The QI choice of the block cuts when the job sets [`BLOCK_CUT`].
    rule: Option<CutChoice>,
    /// Tables with at most this many active rows go to `inner` unchanged,
    /// with its own details (the default of jobs without `block_size`).
    whole_table_up_to: Option<usize>,
    /// Likewise for tables with at most this many distinct QI tuples (0:
    /// never).
    whole_table_up_to_tuples: usize,
}

impl Partitioned {
    /// Runs `inner` on blocks of about `block_size` rows, passing it
    /// `inner_spec` as its job (the job without [`BLOCK_SIZE`]).
    pub fn new(inner: Box<dyn Algorithm>, inner_spec: JobSpec, block_size: usize) -> Self {
        Partitioned {
            inner,
            inner_spec,
            block_size: block_size.max(1),
            rule: None,
            whole_table_up_to: None,
            whole_table_up_to_tuples: 0,
        }
    }

    /// Runs `inner` on the whole table, as if unwrapped, when the table has
    /// at most `rows` active rows.
    pub fn whole_table_up_to(mut self, rows: usize) -> Self {
        self.whole_table_up_to = Some(rows);
        self
    }

    /// Runs `inner` on the whole table, as if unwrapped, when the active
    /// rows have at most `tuples` distinct QI tuples (0: never).
    pub fn whole_table_up_to_tuples(mut self, tuples: usize) -> Self {
        self.whole_table_up_to_tuples = tuples;
        self
    }

    /// Chooses the QI each block cut is made on.
    pub fn with_rule(mut self, rule: CutChoice) -> Self {
        self.rule = Some(rule);
        self
    }

    /// How the blocks are cut: as the inner algorithm cuts when it cuts
    /// top-down (Mondrian: each block then continues the same cuts), else
    /// as Mondrian with its default parameters; the job's [`BLOCK_CUT`],
    /// when set, chooses the QI. Cuts that keep every row in a block only:
    /// never the post-pass `tidy`, never deferring rows to a residue.
    fn block_cuts(&self) -> MondrianParams {
        let mut params = self.inner.top_down_cuts().cloned().unwrap_or_default();
        params.tidy = false;
        params.residue = false;
        if let Some(rule) = self.rule {
            params.cut = rule;
        }
        params
    }
}

#[derive(Debug, Serialize)]
struct PartitionedDetails {
    block_size: usize,
    block_cut: CutChoice,
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
        if self.whole_table_up_to.is_some_and(|w| rows.len() <= w)
            || ctx.classes.len() <= self.whole_table_up_to_tuples
        {
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
        let mut rows = mondrian::blocks(
            ctx.table,
            ctx.privacy,
            ctx.cancel,
            &self.block_cuts(),
            rows,
            self.block_size,
        );
        ctx.cancel.check()?;
        rows.par_iter_mut().for_each(|b| b.sort_unstable());
        let partition_s = t.elapsed().as_secs_f64();
        let t = Instant::now();
        let blocks = Blocks {
            table: ctx.table,
            rows,
            spec: &self.inner_spec,
            inner: &*self.inner,
            privacy: ctx.privacy,
            cancel: ctx.cancel,
            progress: ctx.progress,
        };
        let BlocksRun {
            partitions,
            details: executor,
        } = ctx.blocks.run(&blocks)?;
        ctx.cancel.check()?;
        if partitions.len() != blocks.len() {
            return Err(Error::Internal(format!(
                "{} blocks were sent to be clustered, {} came back",
                blocks.len(),
                partitions.len()
            )));
        }
        let results: Vec<(Vec<u32>, Partition)> = blocks.rows.into_iter().zip(partitions).collect();
        let blocks_s = t.elapsed().as_secs_f64();
        let t = Instant::now();
        let sizes: Vec<usize> = results.iter().map(|(rows, _)| rows.len()).collect();
        let partition = union(ctx.table, results)?;
        let union_s = t.elapsed().as_secs_f64();
        let mut details = self.details(&sizes, [partition_s, blocks_s, union_s], None)?;
        if !executor.is_null() {
            details["partitioned"]["executor"] = executor;
        }
        Ok(Outcome { partition, details })
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
                block_cut: self.block_cuts().cut,
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
        // A block's partition may come from another process: check it
        // before its group ids index anything.
        if p.group_of_row()
            .iter()
            .any(|&g| g != SUPPRESSED && g as usize >= p.n_groups())
            || (0..p.n_groups()).any(|g| p.tuple(g).len() != table.n_qi())
        {
            return Err(Error::Internal(format!(
                "a block's partition does not fit its block ({} groups of {} QIs expected)",
                p.n_groups(),
                table.n_qi()
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
