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
            .with_distributed_user_codec(KanonCodec)
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
    /// batch comes back. Stops with [`Stop::Cancelled`] once `cancel` fires
    /// (an interrupt, the job's time limit), dropping the query, which
    /// cancels the workers' tasks.
    async fn execute(
        &self,
        tasks: Vec<(u32, Arc<[u8]>)>,
        cancel: &Cancellation,
        arrived: &mut Arrived,
    ) -> std::result::Result<(), Stop> {
        let schema = BlockTaskExec::output_schema();
        let variants: Vec<Arc<dyn ExecutionPlan>> = tasks
            .iter()
            .map(|(first, payload)| Arc::new(BlockTaskExec::new(*first, Arc::clone(payload))) as _)
            .collect();
        let original: Arc<dyn ExecutionPlan> =
            Arc::new(BlockTaskExec::new(0, Arc::from(Vec::new())));
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
                    Some(batch) => arrived.record(&batch?)?,
                },
                _ = tick.tick() => {
                    if cancel.check().is_err() {
                        return Err(Stop::Cancelled);
                    }
                }
            }
        }
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
        let result = std::thread::scope(|s| {
            s.spawn(|| {
                self.handle
                    .block_on(self.execute(tasks, blocks.cancel(), &mut arrived))
            })
            .join()
            .unwrap_or_else(|_| {
                Err(Stop::Failed(DataFusionError::Internal(
                    "the coordinator's thread panicked".into(),
                )))
            })
        });
        let waiting = || {
            let names: Vec<&str> = arrived
                .missing_tasks()
                .map(|task| self.workers[task % self.workers.len()].as_str())
                .collect::<std::collections::BTreeSet<_>>()
                .into_iter()
                .collect();
            names.join(", ")
        };
        match result {
            Ok(()) => {}
            Err(Stop::Cancelled) => {
                let stopped = blocks.cancel().check().err().unwrap_or_else(|| {
                    kanon_engine::Error::Cancelled("the run was cancelled".into())
                });
                let message = format!("{stopped} (still waiting for blocks from: {})", waiting());
                return Err(match stopped {
                    kanon_engine::Error::Cancelled(_) => kanon_engine::Error::Cancelled(message),
                    _ => kanon_engine::Error::Executor(message),
                });
            }
            Err(Stop::Failed(e)) => {
                let lost = self.unreachable(Duration::from_secs(2));
                let which = match lost.is_empty() {
                    true => String::new(),
                    false => format!("unreachable: {}; ", lost.join(", ")),
                };
                return Err(kanon_engine::Error::Executor(format!(
                    "{which}no blocks returned by: {}; cause: {e}",
                    waiting()
                )));
            }
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
/// registered on both sides (`with_distributed_user_codec(KanonCodec)`).
#[derive(Debug, Clone, Copy, Default)]
pub struct KanonCodec;

/// The first bytes of an encoded [`BlockTaskExec`].
const BLOCK_TASK_TAG: &[u8] = b"kanon.block-task.1";

impl PhysicalExtensionCodec for KanonCodec {
    fn try_decode(
        &self,
        buf: &[u8],
        inputs: &[Arc<dyn ExecutionPlan>],
        _ctx: &TaskContext,
        _proto_converter: &dyn PhysicalProtoConverterExtension,
    ) -> Result<Arc<dyn ExecutionPlan>> {
        let Some(rest) = buf.strip_prefix(BLOCK_TASK_TAG) else {
            return internal_err!("not a kanon plan node (or another kanon version's)");
        };
        if !inputs.is_empty() || rest.len() < 4 {
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
        let Some(exec) = node.downcast_ref::<BlockTaskExec>() else {
            return internal_err!("KanonCodec cannot encode {}", node.name());
        };
        buf.extend_from_slice(BLOCK_TASK_TAG);
        buf.extend_from_slice(&exec.first_block.to_le_bytes());
        buf.extend_from_slice(&exec.payload);
        Ok(())
    }
}

/// A datafusion-distributed worker that runs kanon's plan nodes: what
/// `kanon worker` serves. Pseudonymisation keys never travel to it (pass 2
/// stays on the coordinator).
pub fn worker() -> Worker {
    Worker::from_session_builder(worker_session)
}

/// The session of one query on a worker: DataFusion's defaults and
/// [`KanonCodec`]. Public for in-memory test clusters.
pub async fn worker_session(
    ctx: WorkerQueryContext,
) -> Result<datafusion::execution::SessionState> {
    Ok(ctx.builder.with_distributed_user_codec(KanonCodec).build())
}

/// Serves [`worker`] on `listener` until `shutdown` completes.
///
/// # Errors
/// When the gRPC server fails.
pub async fn serve(
    listener: tokio::net::TcpListener,
    shutdown: impl std::future::Future<Output = ()>,
) -> Result<()> {
    tonic::transport::Server::builder()
        .add_service(worker().into_worker_server())
        .serve_with_incoming_shutdown(
            tonic::transport::server::TcpIncoming::from(listener),
            shutdown,
        )
        .await
        .map_err(|e| DataFusionError::External(Box::new(e)))
}
