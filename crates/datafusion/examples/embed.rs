//! Embedding kanon in your own DataFusion `SessionContext`.
//!
//! Registers kanon's functions in a session you configure yourself (here
//! with a memory limit), anonymises a memory table and the bundled Adult
//! Parquet file, checks the release with `kanon_risk`, and writes it with
//! `COPY ... TO`.
//!
//! ```text
//! cargo run -p kanon-datafusion --example embed            # from the repository root
//! ```

use std::sync::Arc;

use datafusion::arrow::array::{Int64Array, RecordBatch, StringArray};
use datafusion::arrow::datatypes::{DataType, Field, Schema};
use datafusion::datasource::MemTable;
use datafusion::error::Result;
use datafusion::execution::runtime_env::RuntimeEnvBuilder;
use datafusion::prelude::{ParquetReadOptions, SessionConfig, SessionContext};

#[tokio::main]
async fn main() -> Result<()> {
    // Your session, your settings: kanon reserves the memory it holds in
    // this pool, so the limit is a clean error rather than an abort.
    let runtime = RuntimeEnvBuilder::new()
        .with_memory_limit(512 * 1024 * 1024, 1.0)
        .build_arc()?;
    let ctx = SessionContext::new_with_config_rt(SessionConfig::new(), runtime);
    kanon_datafusion::register(&ctx)?;

    // 1. A memory table built in code.
    let schema = Arc::new(Schema::new(vec![
        Field::new("name", DataType::Utf8, false),
        Field::new("age", DataType::Int64, false),
        Field::new("zip", DataType::Utf8, false),
        Field::new("disease", DataType::Utf8, false),
    ]));
    let batch = RecordBatch::try_new(
        schema.clone(),
        vec![
            Arc::new(StringArray::from(vec![
                "ann", "bob", "cid", "dan", "eve", "fay",
            ])),
            Arc::new(Int64Array::from(vec![21, 22, 23, 41, 42, 43])),
            Arc::new(StringArray::from(vec![
                "47677", "47602", "47678", "47905", "47909", "47906",
            ])),
            Arc::new(StringArray::from(vec![
                "flu", "flu", "cold", "cancer", "flu", "cold",
            ])),
        ],
    )?;
    ctx.register_table(
        "people",
        Arc::new(MemTable::try_new(schema, vec![vec![batch]])?),
    )?;
    ctx.sql(
        "SELECT * FROM anonymize('people', \
         'k = 3, qi = [\"age\", \"zip\"], sensitive = \"disease\", identifying = \"name\"')",
    )
    .await?
    .show()
    .await?;

    // 2. The bundled Adult data with the bundled job, filtered by a subquery
    //    and with settings as named arguments.
    ctx.register_parquet(
        "adult",
        "data/adult/adult.parquet",
        ParquetReadOptions::default(),
    )
    .await?;
    ctx.sql(
        "SELECT education, count(*) AS n FROM anonymize(\
           (SELECT * FROM adult WHERE \"native-country\" = 'United-States'), \
           config => 'configs/adult.toml', k => 20) \
         GROUP BY education ORDER BY n DESC LIMIT 5",
    )
    .await?
    .show()
    .await?;

    // 3. Risk before and after.
    for table in [
        "'adult'",
        "(SELECT * FROM anonymize('adult', 'config = \"configs/adult.toml\"'))",
    ] {
        ctx.sql(&format!(
            "SELECT rows, classes, smallest_class, rows_below_k, max_risk, ncp \
             FROM kanon_risk({table}, 'config = \"configs/adult.toml\"')"
        ))
        .await?
        .show()
        .await?;
    }

    // 4. A release written with COPY.
    let out = std::env::temp_dir().join("kanon-embed-adult-k10.parquet");
    ctx.sql(&format!(
        "COPY (SELECT * FROM anonymize('adult', 'config = \"configs/adult.toml\"')) \
         TO '{}' STORED AS PARQUET",
        out.display()
    ))
    .await?
    .collect()
    .await?;
    println!("release written to {}", out.display());
    Ok(())
}
