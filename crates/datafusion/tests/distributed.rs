//! Block-wise runs on datafusion-distributed's in-memory cluster (issue 18):
//! the same release as on one machine, through SQL and through the
//! engine's path, with the blocks really shipped through the plan codec
//! and Arrow Flight.
#![cfg(feature = "distributed")]

use std::path::Path;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;

use arrow::array::RecordBatch;
use datafusion::execution::SessionStateBuilder;
use datafusion::prelude::{ParquetReadOptions, SessionConfig, SessionContext};
use datafusion_distributed::{DistributedExt, SessionStateBuilderExt, WorkerResolver};
use kanon_datafusion::distributed::{worker_session, Cluster, KanonCodec};
use kanon_datafusion::BlockExecutors;
use kanon_engine::algorithms::partitioned::{BlockExecutor, Blocks, BlocksRun};

#[path = "distributed/in_memory.rs"]
mod in_memory;
use in_memory::{InMemoryChannelResolver, InMemoryWorkerResolver};

fn root() -> &'static Path {
    Box::leak(
        Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("../..")
            .into_boxed_path(),
    )
}

/// A cluster of `n` worker URLs served by one in-process worker (the
/// in-memory harness of datafusion-distributed).
fn in_memory_cluster(n: usize) -> Cluster {
    let channels = InMemoryChannelResolver::from_session_builder(worker_session);
    let workers = InMemoryWorkerResolver::new(n);
    let urls = workers.get_urls().unwrap();
    let state = SessionStateBuilder::new()
        .with_default_features()
        .with_distributed_planner()
        .with_distributed_worker_resolver(workers)
        .with_distributed_channel_resolver(channels)
        .with_distributed_user_codec(KanonCodec::default())
        .build();
    Cluster::with_context(
        SessionContext::from(state),
        tokio::runtime::Handle::current(),
        urls,
    )
}

/// A cluster that counts the block-wise runs sent to it.
#[derive(Debug)]
struct Counted(Cluster, AtomicUsize);

impl BlockExecutor for Counted {
    fn run(&self, blocks: &Blocks<'_>) -> kanon_engine::Result<BlocksRun> {
        self.1.fetch_add(1, Ordering::SeqCst);
        self.0.run(blocks)
    }
}

async fn session(cluster: Option<Arc<Counted>>) -> SessionContext {
    let mut config = SessionConfig::new();
    if let Some(c) = cluster {
        config = config.with_extension(Arc::new(BlockExecutors::new(c)));
    }
    let ctx = SessionContext::new_with_config(config);
    kanon_datafusion::register_with(&ctx, kanon_datafusion::Options::allowed_dirs([root()]))
        .unwrap();
    ctx.register_parquet(
        "adult",
        root().join("data/adult/adult.parquet").to_str().unwrap(),
        ParquetReadOptions::default(),
    )
    .await
    .unwrap();
    ctx
}

async fn release(ctx: &SessionContext, options: &str) -> Vec<RecordBatch> {
    let sql = format!(
        "SELECT * FROM anonymize('adult', 'config = \"{}\", {options}')",
        root().join("configs/adult.toml").display()
    );
    ctx.sql(&sql).await.unwrap().collect().await.unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn blocks_on_the_cluster_publish_the_single_machine_release() {
    for (options, workers) in [
        ("algorithm.block_size = 2000", 3),
        ("algorithm.name = \"kaca\", algorithm.block_size = 3000", 2),
        ("algorithm.block_size = 5000, privacy.l = 2", 4),
        (
            "algorithm.block_size = 4000, k = 5, weaken_privacy = true",
            1,
        ),
    ] {
        let here = release(&session(None).await, options).await;
        let cluster = Arc::new(Counted(in_memory_cluster(workers), AtomicUsize::new(0)));
        let there = release(&session(Some(Arc::clone(&cluster))).await, options).await;
        assert_eq!(
            cluster.1.load(Ordering::SeqCst),
            1,
            "{options}: the cluster was not used"
        );
        let rows: usize = here.iter().map(RecordBatch::num_rows).sum();
        assert!(rows > 29_000, "{options}: {rows} rows");
        assert_eq!(here, there, "{options} on {workers} workers");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_cluster_is_used_and_reports_what_it_moved() {
    use kanon_engine::algorithms::partitioned::LocalBlocks;
    use kanon_engine::encode::Encoder;
    use kanon_engine::privacy::Privacy;

    let job = kanon_datafusion::options::job_from_options(
        &format!(
            "config = \"{}\", algorithm.block_size = 2000",
            root().join("configs/adult.toml").display()
        ),
        "anonymize",
        &kanon_datafusion::FileAccess::new(&[root().to_path_buf()]).unwrap(),
    )
    .unwrap();
    let batches = session(None)
        .await
        .sql("SELECT * FROM adult")
        .await
        .unwrap()
        .collect()
        .await
        .unwrap();
    let cluster = in_memory_cluster(2);
    let (local, remote) = tokio::task::spawn_blocking(move || {
        let mut enc =
            Encoder::try_new(job.spec(), job.hierarchies(), &batches[0].schema()).unwrap();
        for b in &batches {
            enc.push(b).unwrap();
        }
        let table = enc.finish().unwrap();
        let privacy = Privacy::from_spec(job.spec()).unwrap();
        let run = |blocks: &dyn kanon_engine::algorithms::partitioned::BlockExecutor| {
            kanon_engine::pipeline::anonymize_cancellable(
                job.spec(),
                &table,
                &privacy,
                kanon_engine::cancel::Cancellation::never(),
                kanon_engine::progress::Silent::sink(),
                blocks,
            )
            .unwrap()
        };
        (run(LocalBlocks::get()), run(&cluster))
    })
    .await
    .unwrap();
    assert_eq!(local.partition, remote.partition);
    assert!(local.details["partitioned"].get("executor").is_none());
    let executor = &remote.details["partitioned"]["executor"];
    assert_eq!(executor["workers"], 2);
    assert_eq!(executor["tasks"], 2);
    assert!(executor["bytes_to_workers"].as_u64().unwrap() > 30_162 * 8);
    assert!(executor["bytes_from_workers"].as_u64().unwrap() > 30_162);
    assert!(remote.details["partitioned"]["blocks"].as_u64().unwrap() > 2);
}
