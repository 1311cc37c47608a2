//! Where the blocks of a block-wise run are clustered: on this machine's
//! cores ([`LocalBlocks`], the default) or in other processes (a
//! [`BlockExecutor`] of a front end, e.g. the workers of a
//! datafusion-distributed cluster, issue 18).
//!
//! Every executor clusters a block the same way ([`run_block`]: the
//! block's sub-table, its equivalence classes, the inner algorithm under
//! the job's privacy models), so the partition of a block does not depend
//! on where it ran, and a distributed run publishes the release of the
//! single-machine block-wise run, byte for byte. Another process receives
//! its blocks as a [`BlockTask`]: the job, the sub-table of the blocks'
//! rows (with the whole table's codes, labels, hierarchies and statistics)
//! and where each block starts; it returns each block's [`Partition`].
//! Nothing is trusted on the way back: the partitions are joined and the
//! union is verified against the privacy models before anything is
//! released ([`crate::pipeline`]).

use std::ops::Range;
use std::sync::atomic::{AtomicU64, Ordering};

use rayon::prelude::*;
use serde::{Deserialize, Serialize};

use crate::algorithms::{whole_table, Algorithm, Context};
use crate::cancel::Cancellation;
use crate::encode::{EquivalenceClasses, QiTable};
use crate::error::{Error, Result};
use crate::partition::Partition;
use crate::privacy::Privacy;
use crate::progress::{Progress, Silent};
use crate::spec::JobSpec;

/// The blocks of one block-wise run, ready to be clustered.
#[derive(Debug)]
pub struct Blocks<'a> {
    pub(crate) table: &'a QiTable,
    /// The rows of each block, ascending.
    pub(crate) rows: Vec<Vec<u32>>,
    /// The job of the inner algorithm (the job without `block_size`).
    pub(crate) spec: &'a JobSpec,
    pub(crate) inner: &'a dyn Algorithm,
    pub(crate) privacy: &'a Privacy,
    pub(crate) cancel: &'a Cancellation,
    pub(crate) progress: &'a dyn Progress,
}

impl Blocks<'_> {
    /// Number of blocks.
    pub fn len(&self) -> usize {
        self.rows.len()
    }

    /// Whether there is no block.
    pub fn is_empty(&self) -> bool {
        self.rows.is_empty()
    }

    /// Rows of each block, in block order.
    pub fn sizes(&self) -> Vec<usize> {
        self.rows.iter().map(Vec::len).collect()
    }

    /// The cancellation the run is under.
    pub fn cancel(&self) -> &Cancellation {
        self.cancel
    }

    /// Consecutive ranges of blocks, one per task, of about equal numbers
    /// of rows (at most `tasks` ranges, none empty): the blocks a front end
    /// sends to each of its workers. Deterministic.
    pub fn split(&self, tasks: usize) -> Vec<Range<usize>> {
        let total: usize = self.rows.iter().map(Vec::len).sum();
        let tasks = tasks.clamp(1, self.rows.len().max(1));
        let mut ranges = Vec::with_capacity(tasks);
        let (mut start, mut seen) = (0, 0);
        for (i, block) in self.rows.iter().enumerate() {
            seen += block.len();
            let done = ranges.len() + 1;
            if done < tasks && seen * tasks >= total * done {
                ranges.push(start..i + 1);
                start = i + 1;
            }
        }
        if start < self.rows.len() {
            ranges.push(start..self.rows.len());
        }
        ranges
    }

    /// The blocks of `range` as a self-contained unit of work for another
    /// process.
    pub fn task(&self, range: Range<usize>) -> BlockTask {
        let blocks = &self.rows[range.clone()];
        let mut ends = Vec::with_capacity(blocks.len());
        let mut rows = Vec::with_capacity(blocks.iter().map(Vec::len).sum());
        for b in blocks {
            rows.extend_from_slice(b);
            ends.push(rows.len() as u32);
        }
        BlockTask {
            first_block: range.start as u32,
            spec: self.spec.clone(),
            table: self.table.restrict(&rows),
            ends,
        }
    }
}

/// Clusters the blocks of a block-wise run
/// ([`crate::algorithms::partitioned`]).
///
/// A front end that runs blocks elsewhere (another process, another
/// machine) implements it: split the blocks into tasks ([`Blocks::split`]),
/// ship each as bytes ([`Blocks::task`], [`BlockTask::to_bytes`]), let the
/// other side decode and cluster them ([`BlockTask::from_bytes`],
/// [`BlockTask::run`]), and return the partitions in block order. Nothing
/// it returns is trusted: the union is verified before anything is
/// released.
///
/// # Example: blocks clustered elsewhere
///
/// ```
/// use std::sync::Arc;
/// use arrow::array::{ArrayRef, Int64Array, RecordBatch, StringArray};
/// use arrow::datatypes::{DataType, Field, Schema};
/// use kanon_engine::algorithms::partitioned::{BlockExecutor, BlockTask, Blocks, BlocksRun};
/// use kanon_engine::cancel::Cancellation;
/// use kanon_engine::pipeline::anonymize_cancellable;
/// use kanon_engine::privacy::Privacy;
/// use kanon_engine::progress::Silent;
/// use kanon_engine::{encode::Encoder, spec::JobSpec};
///
/// /// Ships the blocks as two tasks to two threads, standing in for the
/// /// worker processes of a cluster.
/// #[derive(Debug)]
/// struct Shipped;
///
/// impl BlockExecutor for Shipped {
///     fn run(&self, blocks: &Blocks<'_>) -> kanon_engine::Result<BlocksRun> {
///         let messages = blocks
///             .split(2)
///             .into_iter()
///             .map(|range| blocks.task(range).to_bytes())
///             .collect::<kanon_engine::Result<Vec<Vec<u8>>>>()?;
///         let answers = std::thread::scope(|scope| {
///             let workers: Vec<_> = messages
///                 .iter()
///                 .map(|bytes| scope.spawn(move || {
///                     // On the worker: decode the task and cluster its blocks.
///                     BlockTask::from_bytes(bytes)?.run(Cancellation::never())
///                 }))
///                 .collect();
///             workers.into_iter().map(|w| w.join().expect("worker")).collect::<Vec<_>>()
///         });
///         let mut partitions = Vec::new();
///         for answer in answers {
///             partitions.extend(answer?);
///         }
///         Ok(BlocksRun { partitions, details: serde_json::json!({ "workers": 2 }) })
///     }
/// }
///
/// let spec: JobSpec = serde_json::from_str(r#"{
///     "privacy": {"k": 2},
///     "algorithm": {"name": "mondrian", "block_size": 4},
///     "attributes": [{"name": "age", "role": "quasi-identifier"},
///                    {"name": "city", "role": "quasi-identifier"}]}"#)?;
/// let schema = Arc::new(Schema::new(vec![
///     Field::new("age", DataType::Int64, false),
///     Field::new("city", DataType::Utf8, false),
/// ]));
/// let batch = RecordBatch::try_new(schema.clone(), vec![
///     Arc::new(Int64Array::from(vec![30, 41, 52, 33, 47, 38, 29, 60, 45, 35, 50, 27])) as ArrayRef,
///     Arc::new(StringArray::from(vec![
///         "Lyon", "Nice", "Lyon", "Paris", "Nice", "Lyon",
///         "Paris", "Nice", "Lyon", "Paris", "Nice", "Paris",
///     ])),
/// ])?;
/// let mut encoder = Encoder::try_new(&spec, &Default::default(), &schema)?;
/// encoder.push(&batch)?;
/// let table = encoder.finish()?;
///
/// let privacy = Privacy::from_spec(&spec)?;
/// let shipped = anonymize_cancellable(
///     &spec, &table, &privacy, Cancellation::never(), Silent::sink(), &Shipped,
/// )?;
/// // The same partition as on this machine's cores, verified the same way.
/// let local = kanon_engine::anonymize(&spec, &table)?;
/// assert_eq!(shipped.partition, local.partition);
/// assert_eq!(shipped.details["partitioned"]["executor"]["workers"], 2);
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
pub trait BlockExecutor: Send + Sync + std::fmt::Debug {
    /// The partition of every block (over the block's sub-table, rows in
    /// ascending order), in block order.
    ///
    /// # Errors
    /// Whatever clustering a block reports; [`Error::Cancelled`] once the
    /// run's cancellation fires; an executor's own failures (a worker lost)
    /// as [`Error::Internal`] or [`Error::ResourcesExhausted`].
    fn run(&self, blocks: &Blocks<'_>) -> Result<BlocksRun>;
}

/// What an executor returns: the blocks' partitions and facts for the
/// run's details.
#[derive(Debug)]
pub struct BlocksRun {
    /// One partition per block, in block order.
    pub partitions: Vec<Partition>,
    /// Where and how the blocks ran (`null` on this machine).
    pub details: serde_json::Value,
}

/// Clusters the blocks on this machine, in parallel (rayon).
#[derive(Debug, Clone, Copy, Default)]
pub struct LocalBlocks;

impl LocalBlocks {
    /// The executor of block-wise runs that name no other.
    pub fn get() -> &'static LocalBlocks {
        static LOCAL: LocalBlocks = LocalBlocks;
        &LOCAL
    }
}

impl BlockExecutor for LocalBlocks {
    fn run(&self, blocks: &Blocks<'_>) -> Result<BlocksRun> {
        let total = blocks.len() as u64;
        let done = AtomicU64::new(0);
        blocks.progress.update("blocks", 0, total);
        let partitions = blocks
            .rows
            .par_iter()
            .map(|rows| {
                blocks.cancel.check()?;
                let sub = blocks.table.restrict(rows);
                let partition = run_block(
                    &sub,
                    blocks.spec,
                    blocks.inner,
                    blocks.privacy,
                    blocks.cancel,
                )?;
                let finished = done.fetch_add(1, Ordering::Relaxed) + 1;
                blocks.progress.update("blocks", finished, total);
                Ok(partition)
            })
            .collect::<Result<Vec<_>>>()?;
        Ok(BlocksRun {
            partitions,
            details: serde_json::Value::Null,
        })
    }
}

/// Clusters one block: the inner algorithm on the block's sub-table.
fn run_block(
    sub: &QiTable,
    spec: &JobSpec,
    inner: &dyn Algorithm,
    privacy: &Privacy,
    cancel: &Cancellation,
) -> Result<Partition> {
    let classes = EquivalenceClasses::of(sub);
    let outcome = inner.run(&Context {
        table: sub,
        classes: &classes,
        privacy,
        spec,
        cancel,
        progress: Silent::sink(),
        blocks: LocalBlocks::get(),
    })?;
    Ok(outcome.partition)
}

/// Consecutive blocks of a block-wise run, to be clustered in another
/// process: the inner algorithm's job, the sub-table of the blocks' rows
/// and where each block ends in it. [`BlockTask::to_bytes`] and
/// [`BlockTask::from_bytes`] carry it between processes (postcard).
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct BlockTask {
    first_block: u32,
    #[serde(with = "as_json")]
    spec: JobSpec,
    table: QiTable,
    ends: Vec<u32>,
}

impl BlockTask {
    /// The index of the task's first block in the run.
    pub fn first_block(&self) -> usize {
        self.first_block as usize
    }

    /// Number of blocks.
    pub fn len(&self) -> usize {
        self.ends.len()
    }

    /// Rows of all its blocks.
    pub fn rows(&self) -> usize {
        self.table.n_rows()
    }

    /// Whether the task holds no block.
    pub fn is_empty(&self) -> bool {
        self.ends.is_empty()
    }

    /// The task's encoding.
    ///
    /// # Errors
    /// [`Error::Internal`] when it cannot be encoded.
    pub fn to_bytes(&self) -> Result<Vec<u8>> {
        postcard::to_stdvec(self)
            .map_err(|e| Error::Internal(format!("encoding a block task: {e}")))
    }

    /// A task from [`BlockTask::to_bytes`].
    ///
    /// # Errors
    /// [`Error::Internal`] when the bytes are not a task (another kanon
    /// version, or corrupted on the way).
    pub fn from_bytes(bytes: &[u8]) -> Result<Self> {
        postcard::from_bytes(bytes).map_err(|e| {
            Error::Internal(format!(
                "a block task did not decode ({e}): are the coordinator and the workers the same kanon version?"
            ))
        })
    }

    /// Clusters every block of the task, in parallel, exactly as
    /// [`LocalBlocks`] does on the coordinator: the same sub-tables, the
    /// job's own algorithm and privacy models.
    ///
    /// # Errors
    /// As [`BlockExecutor::run`].
    pub fn run(&self, cancel: &Cancellation) -> Result<Vec<Partition>> {
        let inner = whole_table(&self.spec)?;
        let privacy = Privacy::from_spec(&self.spec)?;
        let starts = std::iter::once(0).chain(self.ends.iter().copied());
        let blocks = Blocks {
            table: &self.table,
            rows: starts
                .zip(self.ends.iter().copied())
                .map(|(s, e)| (s..e).collect())
                .collect(),
            spec: &self.spec,
            inner: &*inner,
            privacy: &privacy,
            cancel,
            progress: Silent::sink(),
        };
        Ok(LocalBlocks.run(&blocks)?.partitions)
    }
}

/// The job travels as JSON text inside the binary task: its algorithm
/// parameters are free-form JSON values, which only a self-describing format
/// carries.
mod as_json {
    use serde::{Deserialize, Deserializer, Serializer};

    use crate::spec::JobSpec;

    pub(super) fn serialize<S: Serializer>(spec: &JobSpec, s: S) -> Result<S::Ok, S::Error> {
        let text = serde_json::to_string(spec).map_err(serde::ser::Error::custom)?;
        s.serialize_str(&text)
    }

    pub(super) fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<JobSpec, D::Error> {
        let text = String::deserialize(d)?;
        serde_json::from_str(&text).map_err(serde::de::Error::custom)
    }
}

/// The encoding of a block's partition on the way back from a worker.
///
/// # Errors
/// [`Error::Internal`] when it cannot be encoded.
pub fn partition_to_bytes(partition: &Partition) -> Result<Vec<u8>> {
    postcard::to_stdvec(partition)
        .map_err(|e| Error::Internal(format!("encoding a block's partition: {e}")))
}

/// A partition from [`partition_to_bytes`].
///
/// # Errors
/// [`Error::Internal`] when the bytes are not a partition.
pub fn partition_from_bytes(bytes: &[u8]) -> Result<Partition> {
    postcard::from_bytes(bytes)
        .map_err(|e| Error::Internal(format!("a block's partition did not decode: {e}")))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sizes(sizes: &[usize], tasks: usize) -> Vec<Range<usize>> {
        let table = QiTable::from_string_columns(
            &serde_json::from_str(r#"{"attributes": [{"name": "q", "role": "qi"}]}"#).unwrap(),
            &Default::default(),
            &[("q", vec!["a"])],
        )
        .unwrap();
        let spec: JobSpec = serde_json::from_str(r#"{"attributes": []}"#).unwrap();
        let inner = whole_table(&spec).unwrap();
        let privacy = Privacy::k_anonymity(2);
        let blocks = Blocks {
            table: &table,
            rows: sizes.iter().map(|&n| vec![0; n]).collect(),
            spec: &spec,
            inner: &*inner,
            privacy: &privacy,
            cancel: Cancellation::never(),
            progress: Silent::sink(),
        };
        blocks.split(tasks)
    }

    #[test]
    fn split_covers_every_block_once_in_order_with_balanced_rows() {
        assert_eq!(sizes(&[10, 10, 10, 10], 2), vec![0..2, 2..4]);
        assert_eq!(sizes(&[30, 10, 10, 10], 2), vec![0..1, 1..4]);
        assert_eq!(sizes(&[10, 10], 5), vec![0..1, 1..2]);
        assert_eq!(sizes(&[10, 10, 10], 1), vec![0..3]);
        assert_eq!(sizes(&[], 3), Vec::<Range<usize>>::new());
        for tasks in 1..6 {
            let r = sizes(&[5, 1, 9, 2, 2, 7, 3], tasks);
            assert_eq!(r.first().unwrap().start, 0);
            assert_eq!(r.last().unwrap().end, 7);
            assert!(r
                .windows(2)
                .all(|w| w[0].end == w[1].start && w[0].start < w[0].end));
            assert!(r.len() <= tasks);
        }
    }
}
