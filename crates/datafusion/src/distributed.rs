//! Block-wise runs on the workers of a datafusion-distributed cluster
//! (issue 18): the job's blocks are clustered on other machines, the
//! release is joined, verified and committed where the job runs.
//!
//! A block-wise run ([`kanon_engine::algorithms::partitioned`]) cuts the
//! table into blocks with Mondrian's cuts, clusters every block on its own
//! and joins the blocks' partitions. A [`Cluster`] is the
//! [`BlockExecutor`] that sends the blocks to workers:
//!
//! 1. **Cuts** (the coordinator, the process running the job): the QI scan
//!    encodes the table and cuts it into blocks, as on one machine.
//! 2. **Shipping**: the blocks are split into one consecutive range per
//!    worker (two for a single worker, whose stage datafusion-distributed
//!    would otherwise run on the coordinator), of about equal rows
//!    ([`Blocks::split`]); each range travels
//!    as a [`BlockTask`] (the job, the sub-table of its rows with the whole
//!    table's codes and statistics) inside the plan of a
//!    [`BlockTaskExec`] leaf, one variant per task of a
//!    [`DistributedLeafExec`] under a [`NetworkCoalesceExec`]:
//!    datafusion-distributed 4 plans the stages, sends each worker its own
//!    variant only ([`KanonCodec`]) and streams the results back over Arrow
//!    Flight.
//! 3. **Blocks** (the workers, `kanon worker`): every block of the task is
//!    clustered on the worker's cores, exactly as [`LocalBlocks`] does on
//!    one machine; each block's partition comes back as one row.
//! 4. **Union and verification** (the coordinator): the partitions are
//!    joined in block order and the union is verified against the privacy
//!    models before pass 2 recodes, verifies again and commits. Nothing from
//!    a worker is trusted: a wrong partition fails verification, a lost
//!    worker fails the job, and nothing is committed.
//!
//! Because every block is clustered by the same code on the same sub-table,
//! the release is byte-identical to the single-machine block-wise run of the
//! same job and seed. Pass 2 (recode, order, write) stays on the
//! coordinator: the rows themselves never leave it, only their QI and
//! sensitive codes do.
//!
//! [`LocalBlocks`]: kanon_engine::algorithms::partitioned::LocalBlocks

use std::fmt;
use std::net::{SocketAddr, ToSocketAddrs};
use std::sync::atomic::AtomicBool;
use std::sync::Arc;
use std::time::{Duration, Instant};

use arrow::array::{Array, LargeBinaryArray, RecordBatch, UInt32Array};
use arrow::datatypes::{DataType, Field, Schema, SchemaRef};
use async_trait::async_trait;
use datafusion::catalog::Session;
use datafusion::common::runtime::SpawnedTask;
use datafusion::common::tree_node::TreeNodeRecursion;
use datafusion::common::{internal_err, DataFusionError, Result};
use datafusion::datasource::{TableProvider, TableType};
use datafusion::execution::{SessionStateBuilder, TaskContext};
use datafusion::logical_expr::Expr;
use datafusion::physical_expr::{EquivalenceProperties, Partitioning, PhysicalExpr};
use datafusion::physical_plan::execution_plan::{Boundedness, EmissionType};
use datafusion::physical_plan::stream::RecordBatchStreamAdapter;
use datafusion::physical_plan::{
    DisplayAs, DisplayFormatType, ExecutionPlan, ExecutionPlanProperties, PlanProperties,
    SendableRecordBatchStream,
};
use datafusion::prelude::SessionContext;
use datafusion_distributed::{
    grpc, ChannelResolver, DistributedExt, DistributedLeafExec, NetworkCoalesceExec,
    RouteTasksEvent, RouteTasksEventResponse, RouteTasksHandler, SessionStateBuilderExt, Worker,
    WorkerChannel, WorkerQueryContext, WorkerResolver,
};
use datafusion_proto::physical_plan::{PhysicalExtensionCodec, PhysicalProtoConverterExtension};
use futures::StreamExt;
use kanon_engine::algorithms::partitioned::{
    partition_from_bytes, partition_to_bytes, BlockExecutor, BlockTask, Blocks, BlocksRun,
    LocalBlocks,
};
use kanon_engine::cancel::Cancellation;
use url::Url;

use crate::error::engine_error;
use crate::exec::CancelOnDrop;

/// The workers of a datafusion-distributed cluster, as the executor of
/// block-wise runs (see the module docs).
pub struct Cluster {
    ctx: SessionContext,
    workers: Vec<Url>,
    handle: tokio::runtime::Handle,
    /// The runtime [`Cluster::connect`] started, kept alive with the cluster.
    runtime: Option<tokio::runtime::Runtime>,
}

impl Drop for Cluster {
    fn drop(&mut self) {
        // Dropping a runtime blocks, which a runtime's own threads may not.
        if let Some(runtime) = self.runtime.take() {
            runtime.shutdown_background();
        }
    }
}

impl fmt::Debug for Cluster {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let workers: Vec<&str> = self.workers.iter().map(Url::as_str).collect();
        f.debug_struct("Cluster")
            .field("workers", &workers)
            .finish()
    }
}

impl Cluster {
    /// A cluster of the `kanon worker`s at `workers` (`http://host:port`),
    /// with its own small runtime for the coordinator's side of the
    /// distributed plans. Connections are made when a run starts.
    ///
    /// # Errors
    /// When no worker is given, a worker's address is not an `http://` URL,
    /// or the runtime cannot start.
    pub fn connect(workers: &[Url]) -> Result<Cluster> {
        if workers.is_empty() {
            return Err(DataFusionError::Configuration(
                "no worker given: name at least one `kanon worker` (--workers http://HOST:PORT,...)".into(),
            ));
        }
        if let Some(bad) = workers
            .iter()
            .find(|u| u.scheme() != "http" || u.host().is_none())
        {
            return Err(DataFusionError::Configuration(format!(
                "worker `{bad}` is not an http://HOST:PORT address (kanon workers speak gRPC over plain HTTP/2; put TLS in front with a proxy)"
            )));
        }
        let runtime = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(2)
            .thread_name("kanon-coordinator")
            .enable_all()
            .build()
            .map_err(|e| DataFusionError::External(Box::new(e)))?;
        let state = SessionStateBuilder::new()
            .with_default_features()
            .with_distributed_worker_resolver(StaticWorkers(workers.to_vec()))
            .with_distributed_planner()
            .with_distributed_user_codec(KanonCodec::default())
            .with_distributed_route_tasks_handler(in_order(workers.to_vec()))
            .with_distributed_channel_resolver(KeepAliveChannels::default())
            .build();
        Ok(Cluster {
            ctx: SessionContext::from(state),
            workers: workers.to_vec(),
            handle: runtime.handle().clone(),
            runtime: Some(runtime),
        })
    }

    /// A cluster behind a coordinator session the caller built (its worker
    /// resolver, channel resolver and distributed planner set, and
    /// [`KanonCodec`] registered with `with_distributed_user_codec`), whose
    /// plans run on `handle`; `workers` are the URLs its resolver returns.
    /// For embedders with their own resolvers, and for in-memory test
    /// clusters.
    pub fn with_context(
        mut ctx: SessionContext,
        handle: tokio::runtime::Handle,
        workers: Vec<Url>,
    ) -> Cluster {
        ctx.set_distributed_route_tasks_handler(in_order(workers.clone()));
        Cluster {
            ctx,
            workers,
            handle,
            runtime: None,
        }
    }

    /// The workers' URLs.
    pub fn workers(&self) -> &[Url] {
        &self.workers
    }

    /// Runs the distributed plan of `tasks` (each task's first block and
    /// its encoded [`BlockTask`]; task `i` on worker `i mod workers`) and
    /// records each block's partition bytes in `arrived` as its task's row
    /// batch comes back.
    async fn execute(
        &self,
        tasks: Vec<(u32, Arc<[u8]>)>,
        cancel: &Cancellation,
        arrived: &mut Arrived,
    ) -> std::result::Result<(), Stop> {
        let variants: Vec<Arc<dyn ExecutionPlan>> = tasks
            .iter()
            .map(|(first, payload)| Arc::new(BlockTaskExec::new(*first, Arc::clone(payload))) as _)
            .collect();
        let original: Arc<dyn ExecutionPlan> =
            Arc::new(BlockTaskExec::new(0, Arc::from(Vec::new())));
        self.execute_plan(original, variants, cancel, |b| arrived.record(b))
            .await
    }

    /// Runs one leaf plan per task (`variants`, task `i` on worker
    /// `i mod workers`; `original` is what the coordinator would run
    /// without workers) under a network boundary, and hands every batch
    /// that comes back to `record`. Stops with [`Stop::Cancelled`] once
    /// `cancel` fires (an interrupt, the job's time limit), dropping the
    /// query, which cancels the workers' tasks.
    async fn execute_plan(
        &self,
        original: Arc<dyn ExecutionPlan>,
        variants: Vec<Arc<dyn ExecutionPlan>>,
        cancel: &Cancellation,
        mut record: impl FnMut(&RecordBatch) -> Result<()>,
    ) -> std::result::Result<(), Stop> {
        let schema = original.schema();
        let n_tasks = variants.len();
        let leaf = Arc::new(DistributedLeafExec::try_new(original, variants)?);
        let gather = Arc::new(NetworkCoalesceExec::try_new(leaf, n_tasks, 1)?);
        let plan: Arc<dyn ExecutionPlan> = Arc::new(GatherExec::new(gather));
        let provider = Arc::new(PlannedTable { schema, plan });
        let physical = self
            .ctx
            .read_table(provider)?
            .create_physical_plan()
            .await?;
        let mut stream = datafusion::physical_plan::execute_stream(physical, self.ctx.task_ctx())?;
        let mut tick = tokio::time::interval(Duration::from_millis(100));
        loop {
            tokio::select! {
                next = stream.next() => match next {
                    None => return Ok(()),
                    Some(batch) => record(&batch?)?,
                },
                _ = tick.tick() => {
                    if cancel.check().is_err() {
                        return Err(Stop::Cancelled);
                    }
                }
            }
        }
    }

    /// Runs `f` on a thread of its own that blocks on the cluster's
    /// runtime (the caller may itself be on a runtime).
    fn block_on<T: Send>(
        &self,
        f: impl std::future::Future<Output = std::result::Result<T, Stop>> + Send,
    ) -> std::result::Result<T, Stop> {
        std::thread::scope(|s| {
            s.spawn(|| self.handle.block_on(f))
                .join()
                .unwrap_or_else(|_| {
                    Err(Stop::Failed(DataFusionError::Internal(
                        "the coordinator's thread panicked".into(),
                    )))
                })
        })
    }

    /// The engine's error for a run that stopped early: the cancellation's
    /// reason, or the failure with the workers that no longer answer;
    /// `waiting` names the workers whose results had not all come back.
    fn stopped(
        &self,
        stop: Stop,
        cancel: &Cancellation,
        what: &str,
        waiting: String,
    ) -> kanon_engine::Error {
        match stop {
            Stop::Cancelled => {
                let stopped = cancel.check().err().unwrap_or_else(|| {
                    kanon_engine::Error::Cancelled("the run was cancelled".into())
                });
                let message = format!("{stopped} (still waiting for {what} from: {waiting})");
                match stopped {
                    kanon_engine::Error::Cancelled(_) => kanon_engine::Error::Cancelled(message),
                    _ => kanon_engine::Error::Executor(message),
                }
            }
            Stop::Failed(e) => {
                let lost = self.unreachable(Duration::from_secs(2));
                let which = match lost.is_empty() {
                    true => String::new(),
                    false => format!("unreachable: {}; ", lost.join(", ")),
                };
                kanon_engine::Error::Executor(format!(
                    "{which}no {what} returned by: {waiting}; cause: {e}"
                ))
            }
        }
    }

    /// How many tasks a run of [`Cluster::run_tasks`] takes: one per worker,
    /// and at least two (datafusion-distributed runs a stage of one task on
    /// the coordinator itself, which must never run a worker's task).
    pub fn tasks_per_run(&self) -> usize {
        self.workers.len().max(2)
    }

    /// Runs one task of `kind` per payload on the workers (task `i` on
    /// worker `i mod workers`; see [`Cluster::tasks_per_run`]) and returns
    /// each task's result bytes, in task order. The workers run the tasks
    /// their [`Tasks`] register (`kanon worker`'s are the runner's).
    ///
    /// # Errors
    /// Fewer than two payloads; a lost worker or a worker's error (naming
    /// the workers still owing results); `cancel` firing.
    pub fn run_tasks(
        &self,
        kind: &str,
        payloads: Vec<Vec<u8>>,
        cancel: &Cancellation,
    ) -> kanon_engine::Result<Vec<Vec<u8>>> {
        if payloads.len() < 2 {
            return Err(kanon_engine::Error::Executor(format!(
                "{} task(s) of `{kind}`: a distributed run takes at least two (a bug in kanon)",
                payloads.len()
            )));
        }
        let variants: Vec<Arc<dyn ExecutionPlan>> = payloads
            .into_iter()
            .enumerate()
            .map(|(i, p)| Arc::new(JobTaskExec::new(kind, i as u32, Arc::from(p), None)) as _)
            .collect();
        let n_tasks = variants.len();
        let original: Arc<dyn ExecutionPlan> =
            Arc::new(JobTaskExec::new(kind, 0, Arc::from(Vec::new()), None));
        let mut results = TaskResults::new(n_tasks);
        let outcome =
            self.block_on(self.execute_plan(original, variants, cancel, |b| results.record(b)));
        if let Err(stop) = outcome {
            let waiting = results
                .missing()
                .map(|t| self.workers[t % self.workers.len()].as_str())
                .collect::<std::collections::BTreeSet<_>>()
                .into_iter()
                .collect::<Vec<_>>()
                .join(", ");
            return Err(self.stopped(stop, cancel, &format!("`{kind}` results"), waiting));
        }
        results.finish(kind)
    }

    /// The workers that refuse a TCP connection within `timeout`: named in
    /// the error of a failed run, since the engine's error does not say
    /// which worker was lost.
    fn unreachable(&self, timeout: Duration) -> Vec<String> {
        self.workers
            .iter()
            .filter(|u| {
                let addrs: Vec<SocketAddr> = match (u.host_str(), u.port_or_known_default()) {
                    (Some(h), Some(p)) => (h, p)
                        .to_socket_addrs()
                        .map(Iterator::collect)
                        .unwrap_or_default(),
                    _ => Vec::new(),
                };
                // In-memory test clusters have no address to probe.
                !addrs.is_empty()
                    && !addrs
                        .iter()
                        .any(|a| std::net::TcpStream::connect_timeout(a, timeout).is_ok())
            })
            .map(|u| u.to_string())
            .collect()
    }
}

impl BlockExecutor for Cluster {
    fn run(&self, blocks: &Blocks<'_>) -> kanon_engine::Result<BlocksRun> {
        if self.workers.is_empty() {
            return Err(kanon_engine::Error::Executor(
                "the cluster has no worker to send the blocks to".into(),
            ));
        }
        let t = Instant::now();
        // At least two tasks: datafusion-distributed runs a stage of one
        // task on the coordinator itself (it elides a 1-to-1 boundary), so
        // one worker gets two tasks.
        let ranges = blocks.split(self.workers.len().max(2));
        if ranges.len() < 2 {
            // A single block (no cut was possible): nothing to spread.
            return LocalBlocks::get().run(blocks);
        }
        let tasks = ranges
            .iter()
            .map(|r| {
                let task = blocks.task(r.clone());
                Ok((r.start as u32, Arc::<[u8]>::from(task.to_bytes()?)))
            })
            .collect::<kanon_engine::Result<Vec<_>>>()?;
        let bytes_to_workers: usize = tasks.iter().map(|(_, p)| p.len()).sum();
        let encode_s = t.elapsed().as_secs_f64();
        blocks.cancel().check()?;
        let mut arrived = Arrived::new(&ranges, blocks.len());
        let result = self.block_on(self.execute(tasks, blocks.cancel(), &mut arrived));
        if let Err(stop) = result {
            let waiting: Vec<&str> = arrived
                .missing_tasks()
                .map(|task| self.workers[task % self.workers.len()].as_str())
                .collect::<std::collections::BTreeSet<_>>()
                .into_iter()
                .collect();
            return Err(self.stopped(stop, blocks.cancel(), "blocks", waiting.join(", ")));
        }
        let (partitions, bytes_from_workers, task_s) = arrived.finish()?;
        let tasks: Vec<serde_json::Value> = ranges
            .iter()
            .zip(task_s)
            .enumerate()
            .map(|(i, (r, s))| {
                serde_json::json!({
                    "worker": self.workers[i % self.workers.len()].as_str(),
                    "blocks": r.len(),
                    "seconds": s,
                })
            })
            .collect();
        Ok(BlocksRun {
            partitions,
            details: serde_json::json!({
                "workers": self.workers.len(),
                "tasks": tasks.len(),
                "bytes_to_workers": bytes_to_workers,
                "bytes_from_workers": bytes_from_workers,
                "encode_s": encode_s,
                "distributed_s": t.elapsed().as_secs_f64() - encode_s,
                "per_task": tasks,
            }),
        })
    }
}

/// Why a distributed run stopped early.
enum Stop {
    /// The run's cancellation fired.
    Cancelled,
    /// The query failed (a worker lost, a worker's error).
    Failed(DataFusionError),
}

impl From<DataFusionError> for Stop {
    fn from(e: DataFusionError) -> Self {
        Stop::Failed(e)
    }
}

/// The blocks' partitions as the workers' tasks return them.
struct Arrived {
    start: Instant,
    /// The task of each block.
    task_of_block: Vec<usize>,
    parts: Vec<Option<Vec<u8>>>,
    /// When each task's rows came back, in seconds from the start.
    task_s: Vec<Option<f64>>,
}

impl Arrived {
    fn new(ranges: &[std::ops::Range<usize>], n_blocks: usize) -> Self {
        let mut task_of_block = vec![0; n_blocks];
        for (task, r) in ranges.iter().enumerate() {
            task_of_block[r.clone()].fill(task);
        }
        Arrived {
            start: Instant::now(),
            task_of_block,
            parts: vec![None; n_blocks],
            task_s: vec![None; ranges.len()],
        }
    }

    fn record(&mut self, batch: &RecordBatch) -> Result<()> {
        let blocks = batch
            .column(0)
            .as_any()
            .downcast_ref::<UInt32Array>()
            .ok_or_else(|| DataFusionError::Internal("block column is not UInt32".into()))?;
        let parts = batch
            .column(1)
            .as_any()
            .downcast_ref::<LargeBinaryArray>()
            .ok_or_else(|| {
                DataFusionError::Internal("partition column is not LargeBinary".into())
            })?;
        for i in 0..batch.num_rows() {
            let block = blocks.value(i) as usize;
            let Some(slot) = self.parts.get_mut(block) else {
                return internal_err!(
                    "a worker returned block {block} of {}",
                    self.task_of_block.len()
                );
            };
            if slot.replace(parts.value(i).to_vec()).is_some() {
                return internal_err!("a worker returned block {block} twice");
            }
            self.task_s[self.task_of_block[block]] = Some(self.start.elapsed().as_secs_f64());
        }
        Ok(())
    }

    /// The tasks with a block not yet returned.
    fn missing_tasks(&self) -> impl Iterator<Item = usize> + '_ {
        let mut missing: Vec<usize> = self
            .parts
            .iter()
            .zip(&self.task_of_block)
            .filter(|(p, _)| p.is_none())
            .map(|(_, &t)| t)
            .collect();
        missing.dedup();
        missing.into_iter()
    }

    /// Every block's partition, the bytes received and each task's time.
    fn finish(
        self,
    ) -> kanon_engine::Result<(Vec<kanon_engine::partition::Partition>, usize, Vec<f64>)> {
        let missing = self.parts.iter().filter(|p| p.is_none()).count();
        if missing > 0 {
            return Err(kanon_engine::Error::Executor(format!(
                "the workers returned {} of {} blocks",
                self.parts.len() - missing,
                self.parts.len()
            )));
        }
        let bytes = self.parts.iter().flatten().map(Vec::len).sum();
        let partitions = self
            .parts
            .iter()
            .flatten()
            .map(|p| partition_from_bytes(p))
            .collect::<kanon_engine::Result<Vec<_>>>()?;
        Ok((
            partitions,
            bytes,
            self.task_s.into_iter().map(|s| s.unwrap_or(0.0)).collect(),
        ))
    }
}

/// The results of [`Cluster::run_tasks`] as they come back: each task's
/// chunks, in order.
struct TaskResults {
    chunks: Vec<Vec<Option<Vec<u8>>>>,
}

impl TaskResults {
    fn new(n_tasks: usize) -> Self {
        TaskResults {
            chunks: vec![Vec::new(); n_tasks],
        }
    }

    fn record(&mut self, batch: &RecordBatch) -> Result<()> {
        let column = |i: usize| {
            batch
                .column(i)
                .as_any()
                .downcast_ref::<UInt32Array>()
                .ok_or_else(|| {
                    DataFusionError::Internal("a task result column is not UInt32".into())
                })
        };
        let (tasks, chunks, of) = (column(0)?, column(1)?, column(2)?);
        let bytes = batch
            .column(3)
            .as_any()
            .downcast_ref::<LargeBinaryArray>()
            .ok_or_else(|| DataFusionError::Internal("a task result is not LargeBinary".into()))?;
        for i in 0..batch.num_rows() {
            let (task, chunk, of) = (
                tasks.value(i) as usize,
                chunks.value(i) as usize,
                of.value(i) as usize,
            );
            let Some(slots) = self.chunks.get_mut(task) else {
                return internal_err!(
                    "a worker returned task {task} of a run of {}",
                    self.chunks.len()
                );
            };
            if slots.is_empty() {
                slots.resize(of, None);
            }
            if slots.len() != of || chunk >= of {
                return internal_err!(
                    "a worker returned chunk {chunk} of {of} of task {task}, which has {}",
                    slots.len()
                );
            }
            if slots[chunk].replace(bytes.value(i).to_vec()).is_some() {
                return internal_err!("a worker returned chunk {chunk} of task {task} twice");
            }
        }
        Ok(())
    }

    /// The tasks with a chunk not yet returned.
    fn missing(&self) -> impl Iterator<Item = usize> + '_ {
        self.chunks
            .iter()
            .enumerate()
            .filter(|(_, c)| c.is_empty() || c.iter().any(Option::is_none))
            .map(|(t, _)| t)
    }

    fn finish(self, kind: &str) -> kanon_engine::Result<Vec<Vec<u8>>> {
        let missing = self.missing().count();
        if missing > 0 {
            return Err(kanon_engine::Error::Executor(format!(
                "the workers returned {} of {} `{kind}` results",
                self.chunks.len() - missing,
                self.chunks.len()
            )));
        }
        Ok(self
            .chunks
            .into_iter()
            .map(|c| c.into_iter().flatten().flatten().collect())
            .collect())
    }
}

/// Routes task `i` of a stage to worker `i mod workers`, so that a failed
/// or slow task names its worker.
fn in_order(workers: Vec<Url>) -> impl RouteTasksHandler {
    move |ev: RouteTasksEvent<'_>| {
        Some(Ok(RouteTasksEventResponse::new(
            (0..ev.task_count)
                .map(|i| workers[i % workers.len()].clone())
                .collect(),
        )))
    }
}

/// How long connecting to a worker may take.
const CONNECT_TIMEOUT: Duration = Duration::from_secs(10);
/// How often an HTTP/2 ping checks that a worker still answers, and how
/// long it may take to answer.
const KEEP_ALIVE: (Duration, Duration) = (Duration::from_secs(10), Duration::from_secs(20));

/// Channels to the workers with a connect timeout and HTTP/2 keep-alive
/// pings (datafusion-distributed's default channels have neither), so that
/// a worker whose host vanishes without a TCP reset, or whose process
/// stops answering, fails the run in seconds instead of hanging it. A
/// worker busy clustering still answers pings (its blocks run on blocking
/// threads). Channels are kept per URL and reconnect by themselves.
#[derive(Clone, Default)]
struct KeepAliveChannels {
    channels: Arc<std::sync::Mutex<std::collections::HashMap<Url, tonic::transport::Channel>>>,
}

#[async_trait]
impl ChannelResolver for KeepAliveChannels {
    async fn get_worker_client_for_url(&self, url: &Url) -> Result<Box<dyn WorkerChannel>> {
        let known = self.channels.lock().ok().and_then(|c| c.get(url).cloned());
        let channel = match known {
            Some(c) => c,
            None => {
                let endpoint = tonic::transport::Endpoint::from_shared(url.to_string())
                    .map_err(|e| DataFusionError::Configuration(format!("worker {url}: {e}")))?
                    .connect_timeout(CONNECT_TIMEOUT)
                    .tcp_nodelay(true)
                    .http2_keep_alive_interval(KEEP_ALIVE.0)
                    .keep_alive_timeout(KEEP_ALIVE.1)
                    .keep_alive_while_idle(true);
                let channel = endpoint.connect().await.map_err(|e| {
                    DataFusionError::Execution(format!("cannot connect to worker {url}: {e}"))
                })?;
                if let Ok(mut c) = self.channels.lock() {
                    c.insert(url.clone(), channel.clone());
                }
                channel
            }
        };
        Ok(grpc::create_worker_client(grpc::BoxCloneSyncChannel::new(
            channel,
        )))
    }
}

/// A fixed list of workers.
#[derive(Debug, Clone)]
struct StaticWorkers(Vec<Url>);

impl WorkerResolver for StaticWorkers {
    fn get_urls(&self) -> Result<Vec<Url>> {
        Ok(self.0.clone())
    }
}

/// A table whose scan is a plan built beforehand: how a plan with its own
/// network boundaries reaches datafusion-distributed's planner.
#[derive(Debug)]
struct PlannedTable {
    schema: SchemaRef,
    plan: Arc<dyn ExecutionPlan>,
}

#[async_trait]
impl TableProvider for PlannedTable {
    fn schema(&self) -> SchemaRef {
        Arc::clone(&self.schema)
    }

    fn table_type(&self) -> TableType {
        TableType::Temporary
    }

    async fn scan(
        &self,
        _state: &dyn Session,
        projection: Option<&Vec<usize>>,
        _filters: &[Expr],
        _limit: Option<usize>,
    ) -> Result<Arc<dyn ExecutionPlan>> {
        match projection {
            Some(p) if *p != (0..self.schema.fields().len()).collect::<Vec<_>>() => {
                internal_err!("the blocks' plan is read whole, not projected")
            }
            _ => Ok(Arc::clone(&self.plan)),
        }
    }
}

/// The leaf of a worker's task: clusters the blocks of one [`BlockTask`]
/// and emits one row per block (its index in the run, its partition).
#[derive(Debug)]
pub struct BlockTaskExec {
    first_block: u32,
    payload: Arc<[u8]>,
    properties: Arc<PlanProperties>,
}

impl BlockTaskExec {
    fn new(first_block: u32, payload: Arc<[u8]>) -> Self {
        let properties = Arc::new(PlanProperties::new(
            EquivalenceProperties::new(Self::output_schema()),
            Partitioning::UnknownPartitioning(1),
            EmissionType::Final,
            Boundedness::Bounded,
        ));
        BlockTaskExec {
            first_block,
            payload,
            properties,
        }
    }

    fn output_schema() -> SchemaRef {
        Arc::new(Schema::new(vec![
            Field::new("block", DataType::UInt32, false),
            Field::new("partition", DataType::LargeBinary, false),
        ]))
    }
}

impl DisplayAs for BlockTaskExec {
    fn fmt_as(&self, _t: DisplayFormatType, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "BlockTaskExec: blocks from {}, {} bytes",
            self.first_block,
            self.payload.len()
        )
    }
}

impl ExecutionPlan for BlockTaskExec {
    fn name(&self) -> &str {
        "BlockTaskExec"
    }

    fn properties(&self) -> &Arc<PlanProperties> {
        &self.properties
    }

    fn children(&self) -> Vec<&Arc<dyn ExecutionPlan>> {
        vec![]
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
        if !children.is_empty() {
            return internal_err!("BlockTaskExec takes no child");
        }
        Ok(self)
    }

    fn execute(
        &self,
        partition: usize,
        _context: Arc<TaskContext>,
    ) -> Result<SendableRecordBatchStream> {
        crate::exec::only_partition("BlockTaskExec", partition)?;
        if self.payload.is_empty() {
            return internal_err!(
                "the blocks' plan ran without its task (on the coordinator instead of a worker): a bug in kanon"
            );
        }
        let payload = Arc::clone(&self.payload);
        let cancelled = Arc::new(AtomicBool::new(false));
        let guard = CancelOnDrop(Arc::clone(&cancelled));
        let work = async move {
            let _guard = guard;
            let task = SpawnedTask::spawn_blocking(move || -> Result<RecordBatch> {
                let f = "anonymize";
                let task =
                    BlockTask::from_bytes(&payload).map_err(|e| engine_error(f, e, false))?;
                let cancel = Cancellation::from_flag(cancelled);
                let t = Instant::now();
                let partitions = task.run(&cancel).map_err(|e| engine_error(f, e, false))?;
                let first = task.first_block() as u32;
                tracing::info!(
                    first_block = first,
                    blocks = task.len(),
                    rows = task.rows(),
                    seconds = t.elapsed().as_secs_f64(),
                    "blocks clustered"
                );
                let blocks: UInt32Array = (first..first + partitions.len() as u32).collect();
                let bytes = partitions
                    .iter()
                    .map(partition_to_bytes)
                    .collect::<kanon_engine::Result<Vec<_>>>()
                    .map_err(|e| engine_error(f, e, false))?;
                let parts = LargeBinaryArray::from_iter_values(bytes.iter());
                Ok(RecordBatch::try_new(
                    BlockTaskExec::output_schema(),
                    vec![Arc::new(blocks), Arc::new(parts)],
                )?)
            });
            task.join()
                .await
                .map_err(|e| DataFusionError::ExecutionJoin(Box::new(e)))?
        };
        Ok(Box::pin(RecordBatchStreamAdapter::new(
            Self::output_schema(),
            futures::stream::once(work),
        )))
    }
}

/// A task a worker runs by its kind: the payload's bytes in, the result's
/// bytes out (see [`Tasks`]).
pub type TaskFn =
    dyn Fn(&[u8], &Cancellation) -> std::result::Result<Vec<u8>, String> + Send + Sync;

/// The kinds of task a worker runs besides blocks, registered by the
/// program that serves it ([`worker_with`]): `kanon worker` registers the
/// runner's, which read the job's storage. A coordinator needs none.
#[derive(Clone, Default)]
pub struct Tasks(Arc<std::collections::BTreeMap<String, Arc<TaskFn>>>);

impl Tasks {
    /// These tasks and `run` for tasks of `kind`.
    pub fn with(
        self,
        kind: &str,
        run: impl Fn(&[u8], &Cancellation) -> std::result::Result<Vec<u8>, String>
            + Send
            + Sync
            + 'static,
    ) -> Tasks {
        let mut map = (*self.0).clone();
        map.insert(kind.to_string(), Arc::new(run));
        Tasks(Arc::new(map))
    }

    fn get(&self, kind: &str) -> Option<Arc<TaskFn>> {
        self.0.get(kind).cloned()
    }
}

impl fmt::Debug for Tasks {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_list().entries(self.0.keys()).finish()
    }
}

/// Bytes of a task's result per row sent back: Arrow Flight carries each
/// batch as one gRPC message, which stays well under its size limits.
const RESULT_CHUNK: usize = 2 << 20;

/// The leaf of a worker's task of [`Cluster::run_tasks`]: runs the task's
/// function on its payload and emits the result in chunks (task, chunk,
/// chunks, bytes), one batch per chunk.
pub struct JobTaskExec {
    kind: String,
    task: u32,
    payload: Arc<[u8]>,
    /// The function, on a worker that registers the kind.
    run: Option<Arc<TaskFn>>,
    properties: Arc<PlanProperties>,
}

impl fmt::Debug for JobTaskExec {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("JobTaskExec")
            .field("kind", &self.kind)
            .field("task", &self.task)
            .field("payload_bytes", &self.payload.len())
            .finish()
    }
}

impl JobTaskExec {
    fn new(kind: &str, task: u32, payload: Arc<[u8]>, run: Option<Arc<TaskFn>>) -> Self {
        let properties = Arc::new(PlanProperties::new(
            EquivalenceProperties::new(Self::output_schema()),
            Partitioning::UnknownPartitioning(1),
            EmissionType::Final,
            Boundedness::Bounded,
        ));
        JobTaskExec {
            kind: kind.to_string(),
            task,
            payload,
            run,
            properties,
        }
    }

    fn output_schema() -> SchemaRef {
        Arc::new(Schema::new(vec![
            Field::new("task", DataType::UInt32, false),
            Field::new("chunk", DataType::UInt32, false),
            Field::new("chunks", DataType::UInt32, false),
            Field::new("bytes", DataType::LargeBinary, false),
        ]))
    }

    /// The result's chunks as batches.
    fn batches(task: u32, result: &[u8]) -> Result<Vec<RecordBatch>> {
        let chunks: Vec<&[u8]> = match result.is_empty() {
            true => vec![&[][..]],
            false => result.chunks(RESULT_CHUNK).collect(),
        };
        let of = chunks.len() as u32;
        chunks
            .iter()
            .enumerate()
            .map(|(i, c)| {
                Ok(RecordBatch::try_new(
                    Self::output_schema(),
                    vec![
                        Arc::new(UInt32Array::from(vec![task])),
                        Arc::new(UInt32Array::from(vec![i as u32])),
                        Arc::new(UInt32Array::from(vec![of])),
                        Arc::new(LargeBinaryArray::from_iter_values([*c])),
                    ],
                )?)
            })
            .collect()
    }
}

impl DisplayAs for JobTaskExec {
    fn fmt_as(&self, _t: DisplayFormatType, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "JobTaskExec: {} task {}, {} bytes",
            self.kind,
            self.task,
            self.payload.len()
        )
    }
}

impl ExecutionPlan for JobTaskExec {
    fn name(&self) -> &str {
        "JobTaskExec"
    }

    fn properties(&self) -> &Arc<PlanProperties> {
        &self.properties
    }

    fn children(&self) -> Vec<&Arc<dyn ExecutionPlan>> {
        vec![]
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
        if !children.is_empty() {
            return internal_err!("JobTaskExec takes no child");
        }
        Ok(self)
    }

    fn execute(
        &self,
        partition: usize,
        _context: Arc<TaskContext>,
    ) -> Result<SendableRecordBatchStream> {
        crate::exec::only_partition("JobTaskExec", partition)?;
        let Some(run) = self.run.clone() else {
            return match self.payload.is_empty() {
                true => internal_err!(
                    "a `{}` task ran on the coordinator instead of a worker: a bug in kanon",
                    self.kind
                ),
                false => Err(DataFusionError::Execution(format!(
                    "this worker does not run `{}` tasks: run the workers from the same kanon build as the coordinator",
                    self.kind
                ))),
            };
        };
        let (kind, task, payload) = (self.kind.clone(), self.task, Arc::clone(&self.payload));
        let cancelled = Arc::new(AtomicBool::new(false));
        let guard = CancelOnDrop(Arc::clone(&cancelled));
        let work = async move {
            let _guard = guard;
            let job = SpawnedTask::spawn_blocking(move || -> Result<Vec<RecordBatch>> {
                let cancel = Cancellation::from_flag(cancelled);
                let t = Instant::now();
                let result = run(&payload, &cancel).map_err(DataFusionError::Execution)?;
                tracing::info!(
                    kind,
                    task,
                    bytes = result.len(),
                    seconds = t.elapsed().as_secs_f64(),
                    "task done"
                );
                JobTaskExec::batches(task, &result)
            });
            job.join()
                .await
                .map_err(|e| DataFusionError::ExecutionJoin(Box::new(e)))?
        };
        let batches = futures::stream::once(work).flat_map(|r| match r {
            Ok(batches) => futures::stream::iter(batches.into_iter().map(Ok).collect::<Vec<_>>()),
            Err(e) => futures::stream::iter(vec![Err(e)]),
        });
        Ok(Box::pin(RecordBatchStreamAdapter::new(
            Self::output_schema(),
            batches,
        )))
    }
}

/// The head of the blocks' plan, on the coordinator: every block's row from
/// every worker task, in one partition (what the distributed plan's root
/// must have). A node of kanon's own, because the physical optimizer drops a
/// `CoalescePartitionsExec` at a plan's root.
#[derive(Debug)]
struct GatherExec {
    input: Arc<dyn ExecutionPlan>,
    properties: Arc<PlanProperties>,
}

impl GatherExec {
    fn new(input: Arc<dyn ExecutionPlan>) -> Self {
        let properties = Arc::new(PlanProperties::new(
            EquivalenceProperties::new(input.schema()),
            Partitioning::UnknownPartitioning(1),
            EmissionType::Incremental,
            Boundedness::Bounded,
        ));
        GatherExec { input, properties }
    }
}

impl DisplayAs for GatherExec {
    fn fmt_as(&self, _t: DisplayFormatType, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "GatherExec")
    }
}

impl ExecutionPlan for GatherExec {
    fn name(&self) -> &str {
        "GatherExec"
    }

    fn properties(&self) -> &Arc<PlanProperties> {
        &self.properties
    }

    fn children(&self) -> Vec<&Arc<dyn ExecutionPlan>> {
        vec![&self.input]
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
        Ok(Arc::new(GatherExec::new(crate::exec::only_child(
            "GatherExec",
            children,
        )?)))
    }

    fn execute(
        &self,
        partition: usize,
        context: Arc<TaskContext>,
    ) -> Result<SendableRecordBatchStream> {
        crate::exec::only_partition("GatherExec", partition)?;
        let streams = (0..self.input.output_partitioning().partition_count())
            .map(|p| self.input.execute(p, Arc::clone(&context)))
            .collect::<Result<Vec<_>>>()?;
        Ok(Box::pin(RecordBatchStreamAdapter::new(
            self.input.schema(),
            futures::stream::select_all(streams),
        )))
    }
}

/// Carries kanon's plan nodes between the coordinator and the workers:
/// registered on both sides (`with_distributed_user_codec`). A worker's
/// codec holds the [`Tasks`] it runs; a coordinator's needs none.
#[derive(Debug, Clone, Default)]
pub struct KanonCodec {
    tasks: Tasks,
}

impl KanonCodec {
    /// The codec of a worker that runs `tasks`.
    pub fn with_tasks(tasks: Tasks) -> KanonCodec {
        KanonCodec { tasks }
    }
}

/// The first bytes of an encoded [`BlockTaskExec`].
const BLOCK_TASK_TAG: &[u8] = b"kanon.block-task.1";
/// The first bytes of an encoded [`JobTaskExec`].
const JOB_TASK_TAG: &[u8] = b"kanon.job-task.1";

impl PhysicalExtensionCodec for KanonCodec {
    fn try_decode(
        &self,
        buf: &[u8],
        inputs: &[Arc<dyn ExecutionPlan>],
        _ctx: &TaskContext,
        _proto_converter: &dyn PhysicalProtoConverterExtension,
    ) -> Result<Arc<dyn ExecutionPlan>> {
        if !inputs.is_empty() {
            return internal_err!("a kanon plan node with inputs");
        }
        if let Some(rest) = buf.strip_prefix(JOB_TASK_TAG) {
            let malformed = || DataFusionError::Internal("a malformed JobTaskExec".into());
            let (len, rest) = rest.split_first_chunk::<2>().ok_or_else(malformed)?;
            let len = u16::from_le_bytes(*len) as usize;
            if rest.len() < len + 4 {
                return Err(malformed());
            }
            let (kind, rest) = rest.split_at(len);
            let kind = std::str::from_utf8(kind).map_err(|_| malformed())?;
            let (task, payload) = rest.split_at(4);
            let task = u32::from_le_bytes(task.try_into().expect("4 bytes"));
            let run = self.tasks.get(kind);
            return Ok(Arc::new(JobTaskExec::new(
                kind,
                task,
                Arc::from(payload),
                run,
            )));
        }
        let Some(rest) = buf.strip_prefix(BLOCK_TASK_TAG) else {
            return internal_err!("not a kanon plan node (or another kanon version's)");
        };
        if rest.len() < 4 {
            return internal_err!("a malformed BlockTaskExec");
        }
        let (first, payload) = rest.split_at(4);
        let first = u32::from_le_bytes(first.try_into().expect("4 bytes"));
        Ok(Arc::new(BlockTaskExec::new(first, Arc::from(payload))))
    }

    fn try_encode(
        &self,
        node: Arc<dyn ExecutionPlan>,
        buf: &mut Vec<u8>,
        _proto_converter: &dyn PhysicalProtoConverterExtension,
    ) -> Result<()> {
        if let Some(exec) = node.downcast_ref::<JobTaskExec>() {
            let kind = exec.kind.as_bytes();
            let Ok(len) = u16::try_from(kind.len()) else {
                return internal_err!("a task kind of {} bytes", kind.len());
            };
            buf.extend_from_slice(JOB_TASK_TAG);
            buf.extend_from_slice(&len.to_le_bytes());
            buf.extend_from_slice(kind);
            buf.extend_from_slice(&exec.task.to_le_bytes());
            buf.extend_from_slice(&exec.payload);
            return Ok(());
        }
        let Some(exec) = node.downcast_ref::<BlockTaskExec>() else {
            return internal_err!("KanonCodec cannot encode {}", node.name());
        };
        buf.extend_from_slice(BLOCK_TASK_TAG);
        buf.extend_from_slice(&exec.first_block.to_le_bytes());
        buf.extend_from_slice(&exec.payload);
        Ok(())
    }
}

/// A datafusion-distributed worker that runs kanon's plan nodes: blocks,
/// and the tasks of `tasks`. Pseudonymisation keys never travel to it.
pub fn worker_with(tasks: Tasks) -> Worker {
    Worker::from_session_builder(move |ctx: WorkerQueryContext| {
        let tasks = tasks.clone();
        async move {
            Ok(ctx
                .builder
                .with_distributed_user_codec(KanonCodec::with_tasks(tasks))
                .build())
        }
    })
}

/// The session of one query on a worker that runs blocks only:
/// DataFusion's defaults and [`KanonCodec`]. Public for in-memory test
/// clusters.
pub async fn worker_session(
    ctx: WorkerQueryContext,
) -> Result<datafusion::execution::SessionState> {
    Ok(ctx
        .builder
        .with_distributed_user_codec(KanonCodec::default())
        .build())
}

/// Serves [`worker_with`]`(tasks)` on `listener` until `shutdown`
/// completes.
///
/// # Errors
/// When the gRPC server fails.
pub async fn serve(
    listener: tokio::net::TcpListener,
    tasks: Tasks,
    shutdown: impl std::future::Future<Output = ()>,
) -> Result<()> {
    tonic::transport::Server::builder()
        .add_service(worker_with(tasks).into_worker_server())
        .serve_with_incoming_shutdown(
            tonic::transport::server::TcpIncoming::from(listener),
            shutdown,
        )
        .await
        .map_err(|e| DataFusionError::External(Box::new(e)))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn task_results_come_back_whole_in_chunks_in_any_order() {
        let big: Vec<u8> = (0..(2 * RESULT_CHUNK + 17))
            .map(|i| (i % 251) as u8)
            .collect();
        let mut batches = JobTaskExec::batches(1, &big).unwrap();
        assert_eq!(batches.len(), 3);
        batches.reverse();
        batches.extend(JobTaskExec::batches(0, &[]).unwrap());
        let mut results = TaskResults::new(2);
        assert_eq!(results.missing().collect::<Vec<_>>(), [0, 1]);
        for b in &batches[..2] {
            results.record(b).unwrap();
        }
        assert_eq!(results.missing().collect::<Vec<_>>(), [0, 1]);
        for b in &batches[2..] {
            results.record(b).unwrap();
        }
        assert!(results.record(&batches[0]).is_err(), "a chunk twice");
        let out = results.finish("test").unwrap();
        assert_eq!(out, [Vec::new(), big]);
        let mut short = TaskResults::new(2);
        short
            .record(&JobTaskExec::batches(0, b"x").unwrap()[0])
            .unwrap();
        let err = short.finish("test").unwrap_err().to_string();
        assert!(err.contains("returned 1 of 2 `test` results"), "{err}");
    }
}
