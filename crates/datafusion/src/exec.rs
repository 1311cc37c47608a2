//! [`AnonymizeExec`]: the physical plan node of `anonymize(...)`.
//!
//! It consumes its input (holding the batches, with their memory reserved in
//! the session's pool), encodes the QIs as they arrive, and runs the engine's
//! one release path ([`kanon_engine::release`], the path of `kanon
//! anonymize` too) on a blocking thread: algorithm, verification of the
//! partition, recoding (returning each input batch's memory as it is
//! recoded), release order and verification of the release by its labels.
//! Only then does the first batch of the release leave the node.

use std::fmt;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::task::Poll;
use std::time::Instant;

use arrow::array::RecordBatch;
use datafusion::common::runtime::SpawnedTask;
use datafusion::common::tree_node::TreeNodeRecursion;
use datafusion::common::{internal_err, DataFusionError, Result};
use datafusion::execution::memory_pool::{MemoryConsumer, MemoryReservation};
use datafusion::execution::TaskContext;
use datafusion::physical_expr::{EquivalenceProperties, PhysicalExpr};
use datafusion::physical_plan::execution_plan::{Boundedness, EmissionType};
use datafusion::physical_plan::metrics::{
    BaselineMetrics, Count, ExecutionPlanMetricsSet, Gauge, MetricBuilder, MetricsSet, Time,
};
use datafusion::physical_plan::stream::RecordBatchStreamAdapter;
use datafusion::physical_plan::{
    DisplayAs, DisplayFormatType, ExecutionPlan, ExecutionPlanProperties, Partitioning,
    PlanProperties, SendableRecordBatchStream,
};
use datafusion::prelude::SessionConfig;
use futures::{StreamExt, TryStreamExt};
use kanon_engine::algorithms::partitioned::{BlockExecutor, LocalBlocks};
use kanon_engine::privacy::Privacy;
use kanon_engine::recode::release_schema;
use kanon_engine::release::{MemoryBuckets, Prepared, Release, Releaser, Session, SessionOptions};
use kanon_engine::spec::Role;

use crate::error::engine_error;
use crate::options::{AnonymizeSettings, Job};

/// Anonymises its input and streams the verified release.
///
/// Output: one partition, the input's columns in input order with QI columns
/// as `Dictionary(Int32, Utf8)` labels, identifying columns dropped and
/// suppressed rows withheld; every other column keeps its type. Input rows
/// are read partition by partition in partition order, so a given plan over
/// the same data produces the same release.
#[derive(Debug, Clone)]
pub struct AnonymizeExec {
    input: Arc<dyn ExecutionPlan>,
    job: Arc<Job>,
    /// Columns of the release (see [`release_schema`]) that are output.
    projection: Option<Vec<usize>>,
    cache: Arc<PlanProperties>,
    metrics: ExecutionPlanMetricsSet,
}

impl AnonymizeExec {
    /// A node anonymising `input` with `settings`, outputting the columns
    /// `projection` of the release (all when `None`).
    ///
    /// # Errors
    /// A plan error when the settings are invalid or do not fit the input
    /// (a QI or sensitive column missing or of a type kanon cannot read).
    pub fn try_new(
        input: Arc<dyn ExecutionPlan>,
        settings: AnonymizeSettings,
        projection: Option<Vec<usize>>,
    ) -> Result<Self> {
        Self::with_job(
            input,
            Arc::new(Job::try_new(settings, "anonymize")?),
            projection,
        )
    }

    pub(crate) fn with_job(
        input: Arc<dyn ExecutionPlan>,
        job: Arc<Job>,
        projection: Option<Vec<usize>>,
    ) -> Result<Self> {
        let schema = input.schema();
        // The input is the planner's projection of a table whose columns
        // `anonymize()` checked against the column policy (AnonymizeTable).
        Session::projected(job.spec(), job.hierarchies(), &schema)
            .map_err(|e| engine_error("anonymize", e, true))?;
        let release = release_schema(job.spec(), &schema);
        let output = match &projection {
            Some(p) => Arc::new(release.project(p)?),
            None => release.clone(),
        };
        let cache = PlanProperties::new(
            EquivalenceProperties::new(output),
            Partitioning::UnknownPartitioning(1),
            EmissionType::Final,
            Boundedness::Bounded,
        );
        Ok(AnonymizeExec {
            input,
            job,
            projection,
            cache: Arc::new(cache),
            metrics: ExecutionPlanMetricsSet::new(),
        })
    }

    /// The settings, plain data for an extension codec.
    pub fn settings(&self) -> &AnonymizeSettings {
        self.job.settings()
    }

    /// The job the node anonymises under (its spec and parsed
    /// hierarchies): what a front end that publishes the node's output
    /// verifies it against and certifies.
    pub fn job(&self) -> &Job {
        &self.job
    }

    /// The output columns of the release, when projected.
    pub fn projection(&self) -> Option<&[usize]> {
        self.projection.as_deref()
    }

    /// The input plan.
    pub fn input(&self) -> &Arc<dyn ExecutionPlan> {
        &self.input
    }

    fn names(&self, role: Role) -> Vec<&str> {
        self.job
            .spec()
            .attributes
            .iter()
            .filter(|a| a.role == role)
            .map(|a| a.name.as_str())
            .collect()
    }

    /// `key=value` settings shown by EXPLAIN (never data).
    fn display_pairs(&self, verbose: bool) -> Vec<(String, String)> {
        let spec = self.job.spec();
        let mut pairs = vec![("algorithm".to_string(), spec.algorithm.name.clone())];
        if let Ok(serde_json::Value::Object(p)) = serde_json::to_value(&spec.privacy) {
            // Every privacy setting that is set (new models show up as they
            // are added to the spec).
            for (k, v) in p {
                let unset = match &v {
                    serde_json::Value::Null => true,
                    serde_json::Value::Array(a) => a.is_empty(),
                    serde_json::Value::Object(o) => o.is_empty(),
                    // Only l-diversity reads it.
                    _ if k == "missing_sensitive" => spec.privacy.l.is_none(),
                    _ => false,
                };
                if !unset {
                    pairs.push((k, v.to_string()));
                }
            }
        }
        pairs.push((
            "qi".into(),
            format!("[{}]", self.names(Role::QuasiIdentifier).join(", ")),
        ));
        let sensitive = self.names(Role::Sensitive);
        if !sensitive.is_empty() {
            pairs.push(("sensitive".into(), format!("[{}]", sensitive.join(", "))));
        }
        let identifying = self.names(Role::Identifying);
        if !identifying.is_empty() {
            pairs.push(("dropped".into(), format!("[{}]", identifying.join(", "))));
        }
        if verbose {
            pairs.push(("seed".into(), spec.algorithm.seed.to_string()));
            for (k, v) in &spec.algorithm.params {
                pairs.push((format!("algorithm.{k}"), v.to_string()));
            }
            if let Ok(p) = Privacy::from_spec(spec) {
                pairs.push(("models".into(), format!("[{}]", p.describe())));
            }
            if let Some(c) = &self.job.settings().config {
                pairs.push(("config".into(), c.clone()));
            }
        }
        pairs
    }
}

impl DisplayAs for AnonymizeExec {
    fn fmt_as(&self, t: DisplayFormatType, f: &mut fmt::Formatter) -> fmt::Result {
        match t {
            DisplayFormatType::Default | DisplayFormatType::Verbose => {
                let pairs = self.display_pairs(matches!(t, DisplayFormatType::Verbose));
                let text: Vec<String> = pairs.iter().map(|(k, v)| format!("{k}={v}")).collect();
                write!(f, "AnonymizeExec: {}", text.join(", "))
            }
            DisplayFormatType::TreeRender => {
                let pairs = self.display_pairs(false);
                let text: Vec<String> = pairs.iter().map(|(k, v)| format!("{k}={v}")).collect();
                write!(f, "{}", text.join("\n"))
            }
        }
    }
}

/// The metrics of one execution, shown by EXPLAIN ANALYZE.
#[derive(Debug, Clone)]
struct Metrics {
    baseline: BaselineMetrics,
    rows_in: Count,
    rows_suppressed: Count,
    classes: Count,
    smallest_class: Gauge,
    peak_mem_used: Gauge,
    encode_time: Time,
    algorithm_time: Time,
    verify_time: Time,
    recode_time: Time,
}

impl Metrics {
    fn new(set: &ExecutionPlanMetricsSet, partition: usize) -> Self {
        let b = || MetricBuilder::new(set);
        Metrics {
            baseline: BaselineMetrics::new(set, partition),
            rows_in: b().counter("rows_in", partition),
            rows_suppressed: b().counter("rows_suppressed", partition),
            classes: b().counter("classes", partition),
            smallest_class: b().gauge("smallest_class", partition),
            peak_mem_used: b().gauge("peak_mem_used", partition),
            encode_time: b().subset_time("encode_time", partition),
            algorithm_time: b().subset_time("algorithm_time", partition),
            verify_time: b().subset_time("verify_time", partition),
            recode_time: b().subset_time("recode_time", partition),
        }
    }
}

/// Sets a flag when dropped: the stream was dropped (query cancelled), so the
/// blocking engine task stops at its next phase boundary.
pub(crate) struct CancelOnDrop(pub(crate) Arc<AtomicBool>);

impl Drop for CancelOnDrop {
    fn drop(&mut self) {
        self.0.store(true, Ordering::Relaxed);
    }
}

/// Input batches held in memory, with their reservation.
pub(crate) struct Held {
    pub batches: Vec<RecordBatch>,
    pub reservation: MemoryReservation,
}

/// Reads every partition of `input`, in partition order, reserving the
/// memory of each batch before keeping it and handing it to `on_batch`.
pub(crate) async fn consume(
    input: &Arc<dyn ExecutionPlan>,
    context: &Arc<TaskContext>,
    consumer: &str,
    mut on_batch: impl FnMut(&RecordBatch) -> Result<()>,
) -> Result<Held> {
    let reservation = MemoryConsumer::new(consumer).register(context.memory_pool());
    let mut batches = Vec::new();
    for p in 0..input.output_partitioning().partition_count() {
        let mut stream = input.execute(p, Arc::clone(context))?;
        while let Some(batch) = stream.next().await {
            let batch = batch?;
            reservation
                .try_grow(batch.get_array_memory_size())
                .map_err(|e| {
                    e.context(format!(
                        "{consumer} keeps its whole input in memory until the release is verified; raise the memory limit or anonymise fewer rows"
                    ))
                })?;
            on_batch(&batch)?;
            batches.push(batch);
        }
    }
    Ok(Held {
        batches,
        reservation,
    })
}

/// The verified release in release order, ready to be streamed.
struct Ready {
    release: Option<RecordBatch>,
}

impl ExecutionPlan for AnonymizeExec {
    fn name(&self) -> &'static str {
        "AnonymizeExec"
    }

    fn properties(&self) -> &Arc<PlanProperties> {
        &self.cache
    }

    fn children(&self) -> Vec<&Arc<dyn ExecutionPlan>> {
        vec![&self.input]
    }

    /// The release is written in an order derived from its classes, never
    /// in input order.
    fn maintains_input_order(&self) -> Vec<bool> {
        vec![false]
    }

    fn benefits_from_input_partitioning(&self) -> Vec<bool> {
        vec![false]
    }

    fn apply_expressions(
        &self,
        _f: &mut dyn FnMut(&Arc<dyn PhysicalExpr>) -> Result<TreeNodeRecursion>,
    ) -> Result<TreeNodeRecursion> {
        Ok(TreeNodeRecursion::Continue)
    }

    fn with_new_children(
        self: Arc<Self>,
        children: Vec<Arc<dyn ExecutionPlan>>,
    ) -> Result<Arc<dyn ExecutionPlan>> {
        Ok(Arc::new(AnonymizeExec::with_job(
            only_child("AnonymizeExec", children)?,
            Arc::clone(&self.job),
            self.projection.clone(),
        )?))
    }

    fn execute(
        &self,
        partition: usize,
        context: Arc<TaskContext>,
    ) -> Result<SendableRecordBatchStream> {
        only_partition("AnonymizeExec", partition)?;
        let input = Arc::clone(&self.input);
        let job = Arc::clone(&self.job);
        let projection = self.projection.clone();
        let metrics = Metrics::new(&self.metrics, partition);
        let schema = self.schema();
        let cancelled = Arc::new(AtomicBool::new(false));
        let guard = CancelOnDrop(Arc::clone(&cancelled));
        let context_batch_size = context.session_config().batch_size();
        let blocks = BlockExecutors::of(context.session_config());
        let m = metrics.clone();
        // No work before the first poll: everything happens in this future.
        let work = async move {
            let _guard = guard;
            // Pass one; repeated identifiers may be one person's rows,
            // counted by k as several people (kanon_engine::identities):
            // refused when the session is encoded.
            let mut session = Session::projected(job.spec(), job.hierarchies(), &input.schema())
                .map_err(|e| engine_error("anonymize", e, true))?;
            let held = consume(
                &input,
                &context,
                &format!("AnonymizeExec[{partition}]"),
                |b| {
                    let _t = m.encode_time.timer();
                    m.rows_in.add(b.num_rows());
                    session
                        .push(b)
                        .map_err(|e| engine_error("anonymize", e, false))
                },
            )
            .await?;
            m.peak_mem_used.set_max(held.reservation.size());
            let job2 = Arc::clone(&job);
            let m2 = m.clone();
            let task = SpawnedTask::spawn_blocking(move || {
                run_engine(&job2, session, held, &m2, &cancelled, &*blocks)
            });
            task.join()
                .await
                .map_err(|e| DataFusionError::ExecutionJoin(Box::new(e)))?
        };
        let stream = futures::stream::once(work)
            .map_ok(move |ready| {
                let m = metrics.clone();
                let projection = projection.clone();
                // The release in its order (kanon_engine::order): class by
                // class under a seeded permutation, never in input order; the
                // same rows `kanon anonymize` writes, in the same order.
                let ordered = (|| -> Result<Vec<RecordBatch>> {
                    let Some(all) = ready.release else {
                        return Ok(Vec::new());
                    };
                    let timer = m.baseline.elapsed_compute().timer();
                    let chunk = context_batch_size.max(1);
                    let mut out = Vec::with_capacity(all.num_rows().div_ceil(chunk));
                    let mut start = 0;
                    while start < all.num_rows() {
                        let b = all.slice(start, chunk.min(all.num_rows() - start));
                        start += b.num_rows();
                        out.push(match &projection {
                            Some(p) => b.project(p)?,
                            None => b,
                        });
                    }
                    timer.done();
                    Ok(out)
                })();
                let items: Vec<Result<RecordBatch>> = match ordered {
                    Ok(batches) => batches.into_iter().map(Ok).collect(),
                    Err(e) => vec![Err(e)],
                };
                futures::stream::iter(items.into_iter().map(move |out| {
                    let out = out?;
                    match m.baseline.record_poll(Poll::Ready(Some(Ok(out)))) {
                        Poll::Ready(Some(r)) => r,
                        _ => internal_err!("anonymize(): lost a recoded batch"),
                    }
                }))
            })
            .try_flatten()
            .try_filter(|b| futures::future::ready(b.num_rows() > 0));
        Ok(Box::pin(RecordBatchStreamAdapter::new(schema, stream)))
    }

    fn metrics(&self) -> Option<MetricsSet> {
        Some(self.metrics.clone_inner())
    }
}

fn check_cancelled(cancelled: &AtomicBool) -> Result<()> {
    if cancelled.load(Ordering::Relaxed) {
        Err(DataFusionError::Execution(
            "anonymize(): the query was cancelled".into(),
        ))
    } else {
        Ok(())
    }
}

/// The engine's part, on a blocking thread: the one release path of
/// [`kanon_engine::release`] (anonymise and verify the partition, recode,
/// order, verify the release by its labels, account for every row), with
/// the input's memory returned to the pool as it is recoded.
fn run_engine(
    job: &Job,
    session: Session,
    held: Held,
    m: &Metrics,
    cancelled: &Arc<AtomicBool>,
    blocks: &dyn BlockExecutor,
) -> Result<Ready> {
    let spec = job.spec();
    let f = "anonymize";
    let Held {
        batches,
        reservation,
    } = held;
    let Some(input_schema) = batches
        .iter()
        .any(|b| b.num_rows() > 0)
        .then(|| batches[0].schema())
    else {
        // An empty release would hide that the table or query selected
        // nothing, and be certified for nobody (issue 32): refused, as
        // the command line refuses an empty input file.
        return Err(DataFusionError::Execution(
            "anonymize(): the input has no rows: there is nothing to anonymise, and an empty release would hide that the table or query selected nothing; check the table or the subquery's filter".into(),
        ));
    };
    let t = Instant::now();
    let encoded = session.encode().map_err(|e| engine_error(f, e, false))?;
    let table = encoded.table();
    m.encode_time.add_duration(t.elapsed());
    // What the engine will hold besides the input: codes, classes and the
    // partition, a few u32 per row and QI (an estimate).
    let cols = table.n_qi() + table.sensitive().len();
    let engine_bytes = table.n_rows() * (cols * 4 + 16) * 4;
    reservation.try_grow(engine_bytes).map_err(|e| {
        e.context("anonymize(): not enough memory for the engine's working set; raise the memory limit or anonymise fewer rows")
    })?;
    m.peak_mem_used.set_max(reservation.size());
    check_cancelled(cancelled)?;
    let privacy = Privacy::from_spec(spec).map_err(|e| engine_error(f, e, false))?;
    // A dropped stream (the query cancelled, LIMIT satisfied, the client
    // gone) sets the flag: the algorithm stops in its next inner loop.
    let cancel = kanon_engine::cancel::Cancellation::from_flag(Arc::clone(cancelled));
    let Prepared {
        anonymization: result,
        recoder,
    } = encoded
        .anonymise(
            &privacy,
            SessionOptions {
                cancel: &cancel,
                progress: kanon_engine::progress::Silent::sink(),
                blocks,
                pseudonymiser: job.pseudonymiser(),
            },
        )
        .map_err(|e| engine_error(f, e, false))?;
    m.algorithm_time
        .add_duration(result.timings.classes + result.timings.algorithm + result.timings.metrics);
    m.verify_time.add_duration(result.timings.verify);
    drop(encoded);
    check_cancelled(cancelled)?;
    let t = Instant::now();
    // One bucket, in memory: the node holds its whole input anyway.
    let releaser = Releaser::new(spec, recoder, &input_schema, u64::MAX)
        .map_err(|e| engine_error(f, e, false))?;
    let schema = releaser.schema().clone();
    let store = MemoryBuckets::new(&releaser);
    let mut pass_two = Release::new(releaser, store);
    for b in batches {
        check_cancelled(cancelled)?;
        pass_two.push(&b).map_err(|e| engine_error(f, e, false))?;
        reservation.shrink(b.get_array_memory_size().min(reservation.size()));
    }
    m.recode_time.add_duration(t.elapsed());
    let t = Instant::now();
    let mut chunks = Vec::with_capacity(1);
    pass_two
        .drain(usize::MAX, |chunk| {
            chunks.push(chunk);
            Ok(true)
        })
        .map_err(|e| engine_error(f, e, false))?;
    pass_two
        .finish(&privacy, &result)
        .map_err(|e| engine_error(f, e, false))?;
    // One bucket drained whole is one batch: no copy of the release.
    let release = match chunks.len() {
        1 => chunks.swap_remove(0),
        _ => arrow::compute::concat_batches(&schema, &chunks)?,
    };
    m.verify_time.add_duration(t.elapsed());
    let r = &result.report;
    m.rows_suppressed.add(r.suppressed_rows);
    m.classes.add(r.classes);
    m.smallest_class.set(r.smallest_class);
    Ok(Ready {
        release: Some(release),
    })
}

/// Where the `anonymize()` calls of a session cluster the blocks of their
/// block-wise runs: a [`SessionConfig`] extension
/// (`SessionConfig::with_extension(Arc::new(BlockExecutors::new(executor)))`),
/// e.g. the workers of a cluster (`distributed`); this machine's cores
/// when the session has none.
#[derive(Debug, Clone)]
pub struct BlockExecutors(Arc<dyn BlockExecutor>);

impl BlockExecutors {
    /// The extension naming `executor`.
    pub fn new(executor: Arc<dyn BlockExecutor>) -> Self {
        BlockExecutors(executor)
    }

    /// The executor of a session: its extension's, else this machine's.
    pub fn of(config: &SessionConfig) -> Arc<dyn BlockExecutor> {
        match config.get_extension::<BlockExecutors>() {
            Some(e) => Arc::clone(&e.0),
            None => Arc::new(LocalBlocks),
        }
    }
}

/// The one child of a single-input plan node (`node` names it in the
/// internal error).
pub(crate) fn only_child(
    node: &str,
    mut children: Vec<Arc<dyn ExecutionPlan>>,
) -> Result<Arc<dyn ExecutionPlan>> {
    if children.len() != 1 {
        return internal_err!("{node} takes one child, got {}", children.len());
    }
    Ok(children.swap_remove(0))
}

/// Fails unless `partition` is 0: the node has one output partition.
pub(crate) fn only_partition(node: &str, partition: usize) -> Result<()> {
    if partition != 0 {
        return internal_err!("{node} has one output partition, asked for {partition}");
    }
    Ok(())
}
