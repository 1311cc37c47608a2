//! The plan node beyond SQL text: determinism across partitionings, memory
//! returned to the pool on cancellation, and settings carried as plain data.

use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use arrow::array::RecordBatch;
use datafusion::execution::memory_pool::{GreedyMemoryPool, MemoryPool, TrackConsumersPool};
use datafusion::execution::runtime_env::RuntimeEnvBuilder;
use datafusion::physical_plan::{collect, displayable, ExecutionPlan};
use datafusion::prelude::{ParquetReadOptions, SessionConfig, SessionContext};
use futures::StreamExt;
use kanon_datafusion::{AnonymizeExec, AnonymizeSettings};

fn root() -> &'static Path {
    Box::leak(
        Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("../..")
            .into_boxed_path(),
    )
}

async fn session(partitions: usize, pool: Option<Arc<dyn MemoryPool>>) -> SessionContext {
    let mut rt = RuntimeEnvBuilder::new();
    if let Some(p) = pool {
        rt = rt.with_memory_pool(p);
    }
    let ctx = SessionContext::new_with_config_rt(
        SessionConfig::new().with_target_partitions(partitions),
        rt.build_arc().unwrap(),
    );
    // The job file and hierarchies live in the repository, not under the
    // test's working directory (the crate).
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

fn config() -> String {
    root().join("configs/adult.toml").display().to_string()
}

async fn release(ctx: &SessionContext, sql: &str) -> Vec<RecordBatch> {
    ctx.sql(sql).await.unwrap().collect().await.unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_release_does_not_depend_on_partitioning() {
    let sql = format!(
        "SELECT * FROM anonymize((SELECT * FROM adult WHERE age > 30), 'config = \"{}\", k = 7, weaken_privacy = true')",
        config()
    );
    let one = release(&session(1, None).await, &sql).await;
    let many = release(&session(8, None).await, &sql).await;
    let one = arrow::compute::concat_batches(&one[0].schema(), &one).unwrap();
    let many = arrow::compute::concat_batches(&many[0].schema(), &many).unwrap();
    assert!(one.num_rows() > 10_000);
    assert_eq!(one, many);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn memory_is_reserved_and_returned_on_cancellation() {
    let pool: Arc<dyn MemoryPool> = Arc::new(TrackConsumersPool::new(
        GreedyMemoryPool::new(1 << 30),
        std::num::NonZeroUsize::new(5).unwrap(),
    ));
    let ctx = session(2, Some(Arc::clone(&pool))).await;
    let df = ctx
        .sql(&format!(
            "SELECT * FROM anonymize('adult', 'config = \"{}\", algorithm = \"incognito\"')",
            config()
        ))
        .await
        .unwrap();
    let plan = df.create_physical_plan().await.unwrap();
    let mut stream = plan.execute(0, ctx.task_ctx()).unwrap();
    // Nothing happens before the first poll.
    assert_eq!(pool.reserved(), 0);
    // Poll until the node holds its input, then cancel by dropping.
    let polled = tokio::time::timeout(Duration::from_millis(300), stream.next()).await;
    if polled.is_err() {
        assert!(
            pool.reserved() > 1_000_000,
            "input held: {}",
            pool.reserved()
        );
    }
    drop(stream);
    // The blocking engine task stops at its next phase boundary and frees
    // what it reserved.
    for _ in 0..600 {
        if pool.reserved() == 0 {
            break;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    assert_eq!(pool.reserved(), 0);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn settings_are_plain_data_for_a_codec() {
    let ctx = session(2, None).await;
    let df = ctx
        .sql(&format!(
            "SELECT age, sex FROM anonymize('adult', 'config = \"{}\", k = 25')",
            config()
        ))
        .await
        .unwrap();
    let plan = df.create_physical_plan().await.unwrap();
    let exec = find(&plan).expect("an AnonymizeExec in the plan");
    // What an extension codec would carry: settings as JSON, the projection
    // and the child (serialised by DataFusion's own codec).
    let json = exec.settings().to_json().unwrap();
    let rebuilt = AnonymizeExec::try_new(
        Arc::clone(exec.input()),
        AnonymizeSettings::from_json(&json).unwrap(),
        exec.projection().map(|p| p.to_vec()),
    )
    .unwrap();
    assert_eq!(
        displayable(&rebuilt).one_line().to_string(),
        displayable(exec).one_line().to_string()
    );
    assert_eq!(rebuilt.schema(), exec.schema());
    // (A plan runs once: compare with the same query planned afresh.)
    let a = collect(Arc::new(rebuilt), ctx.task_ctx()).await.unwrap();
    let b = release(
        &ctx,
        &format!(
            "SELECT * FROM anonymize('adult', 'config = \"{}\", k = 25')",
            config()
        ),
    )
    .await;
    let a = arrow::compute::concat_batches(&a[0].schema(), &a).unwrap();
    let b = arrow::compute::concat_batches(&b[0].schema(), &b).unwrap();
    assert_eq!(a.num_rows(), 30162);
    let release_columns: Vec<usize> = a
        .schema()
        .fields()
        .iter()
        .map(|f| b.schema().index_of(f.name()).unwrap())
        .collect();
    assert_eq!(a, b.project(&release_columns).unwrap());
}

fn find(plan: &Arc<dyn ExecutionPlan>) -> Option<&AnonymizeExec> {
    if let Some(e) = plan.downcast_ref::<AnonymizeExec>() {
        return Some(e);
    }
    plan.children().into_iter().find_map(find)
}

/// Publishes the whole table as one class (a test algorithm).
#[derive(Debug)]
struct OneClass;

impl kanon_engine::algorithms::Algorithm for OneClass {
    fn name(&self) -> &'static str {
        "one-class"
    }
    fn run(
        &self,
        ctx: &kanon_engine::algorithms::Context<'_>,
    ) -> kanon_engine::Result<kanon_engine::algorithms::Outcome> {
        Ok(kanon_engine::algorithms::Outcome {
            partition: kanon_engine::partition::Partition::tightest(
                ctx.table,
                vec![0; ctx.table.n_rows()],
            ),
            details: serde_json::Value::Null,
        })
    }
}

/// An algorithm defined here and registered through the engine's public
/// API is what `anonymize(..., algorithm => 'one-class')` runs, verified as
/// every built-in one is.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_registered_algorithm_runs_in_sql() {
    use kanon_engine::algorithms::registry::{register, Capabilities, Registration};
    register(Registration {
        name: "one-class",
        summary: "every row in one class (a test)",
        capabilities: Capabilities::NONE,
        build: |_| Ok(Box::new(OneClass)),
    })
    .unwrap();
    let ctx = session(1, None).await;
    let sql = format!(
        "SELECT age, count(*) AS n FROM anonymize('adult', config => '{}', algorithm => 'one-class') GROUP BY age",
        config()
    );
    let out = release(&ctx, &sql).await;
    let out = arrow::compute::concat_batches(&out[0].schema(), &out).unwrap();
    assert_eq!(out.num_rows(), 1, "one class, one age label");
    let n = out
        .column_by_name("n")
        .unwrap()
        .as_any()
        .downcast_ref::<arrow::array::Int64Array>()
        .unwrap()
        .value(0);
    assert_eq!(n, 30_162);
    // It has no l-diversity capability: a job with l is refused.
    let sql = format!(
        "SELECT count(*) FROM anonymize('adult', 'config = \"{}\", algorithm = \"one-class\", privacy.l = 2')",
        config()
    );
    let err = ctx
        .sql(&sql)
        .await
        .unwrap()
        .collect()
        .await
        .unwrap_err()
        .to_string();
    assert!(err.contains("does not honour l-diversity"), "{err}");
}
