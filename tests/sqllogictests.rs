//! Runs the `.slt` files of `tests/sql/` with the `sqllogictest` crate, as
//! DataFusion's own SQL tests are run: each file gets a fresh
//! `SessionContext` with kanon registered. The working directory is the
//! repository root, so paths read as in the README (`configs/adult.toml`,
//! `data/adult/adult.parquet`).
//!
//! `cargo test -p kanon-e2e --test sqllogictests [-- FILTER] [-- --complete]`
//! (`--complete` rewrites the expected results: review the diff).

use std::path::{Path, PathBuf};
use std::time::Duration;

use arrow::array::{Array, RecordBatch};
use arrow::datatypes::DataType;
use arrow::util::display::{ArrayFormatter, FormatOptions};
use async_trait::async_trait;
use datafusion::error::DataFusionError;
use datafusion::prelude::{SessionConfig, SessionContext};
use sqllogictest::{DBOutput, DefaultColumnType};

struct Kanon {
    ctx: SessionContext,
}

#[derive(Debug)]
struct Error(DataFusionError);

impl std::fmt::Display for Error {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}", self.0)
    }
}

impl std::error::Error for Error {}

fn cell(array: &dyn Array, row: usize) -> String {
    if array.is_null(row) {
        return "NULL".into();
    }
    if let DataType::Float64 = array.data_type() {
        let v = array
            .as_any()
            .downcast_ref::<arrow::array::Float64Array>()
            .expect("float64")
            .value(row);
        // Rounded so that results do not hinge on the last bits.
        let s = format!("{v:.6}");
        let s = s.trim_end_matches('0').trim_end_matches('.');
        return if s == "-0" { "0".into() } else { s.to_string() };
    }
    let opts = FormatOptions::default();
    let f = ArrayFormatter::try_new(array, &opts).expect("formattable");
    let s = f.value(row).to_string();
    if s.is_empty() {
        "(empty)".into()
    } else {
        s
    }
}

/// One result row per line: a multi-line cell (an EXPLAIN plan) continues
/// on rows of its own, as in DataFusion's `.slt` files.
fn rows(batches: &[RecordBatch]) -> Vec<Vec<String>> {
    let mut out = Vec::new();
    for b in batches {
        for r in 0..b.num_rows() {
            let cells: Vec<String> = b.columns().iter().map(|c| cell(c.as_ref(), r)).collect();
            let lines: Vec<Vec<&str>> = cells.iter().map(|c| c.lines().collect()).collect();
            let height = lines.iter().map(Vec::len).max().unwrap_or(1).max(1);
            for i in 0..height {
                let row: Vec<String> = lines
                    .iter()
                    .filter(|l| i == 0 || l.len() > 1)
                    .map(|l| l.get(i).copied().unwrap_or("").to_string())
                    .collect();
                out.push(row);
            }
        }
    }
    out
}

#[async_trait]
impl sqllogictest::AsyncDB for Kanon {
    type Error = Error;
    type ColumnType = DefaultColumnType;

    async fn run(&mut self, sql: &str) -> Result<DBOutput<DefaultColumnType>, Error> {
        let df = self.ctx.sql(sql).await.map_err(Error)?;
        let schema = df.schema().as_arrow().clone();
        let batches = df.collect().await.map_err(Error)?;
        if schema.fields().is_empty() && batches.iter().all(|b| b.num_rows() == 0) {
            return Ok(DBOutput::StatementComplete(0));
        }
        let types = schema
            .fields()
            .iter()
            .map(|f| match f.data_type() {
                t if t.is_integer() => DefaultColumnType::Integer,
                t if t.is_floating() => DefaultColumnType::FloatingPoint,
                _ => DefaultColumnType::Text,
            })
            .collect();
        Ok(DBOutput::Rows {
            types,
            rows: rows(&batches),
        })
    }

    async fn shutdown(&mut self) {}

    fn engine_name(&self) -> &str {
        "kanon-datafusion"
    }

    async fn sleep(dur: Duration) {
        tokio::time::sleep(dur).await;
    }
}

fn repo_root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("..")
}

async fn run_file(path: &Path, complete: bool) -> Result<(), String> {
    let mut runner = sqllogictest::Runner::new(|| async {
        // Several partitions, as a real session has: the release must not
        // depend on how the input is split.
        let ctx = SessionContext::new_with_config(SessionConfig::new().with_target_partitions(4));
        kanon_datafusion::register(&ctx).map_err(Error)?;
        Ok(Kanon { ctx })
    });
    if complete {
        // Rewrites the expected results from the actual ones (review the diff!).
        return runner
            .update_test_file(
                path,
                " ",
                sqllogictest::default_validator,
                sqllogictest::default_normalizer,
                sqllogictest::default_column_validator,
            )
            .await
            .map_err(|e| e.to_string());
    }
    runner
        .run_file_async(path)
        .await
        .map_err(|e| e.display(true).to_string())
}

fn main() {
    let sql_dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("sql");
    let complete = std::env::args().any(|a| a == "--complete");
    let filter: Vec<String> = std::env::args()
        .skip(1)
        .filter(|a| !a.starts_with('-'))
        .collect();
    let mut files: Vec<PathBuf> = std::fs::read_dir(&sql_dir)
        .expect("tests/sql exists")
        .map(|e| e.expect("readable").path())
        .filter(|p| p.extension().is_some_and(|e| e == "slt"))
        .filter(|p| {
            let name = p.file_name().unwrap().to_string_lossy();
            filter.is_empty() || filter.iter().any(|f| name.contains(f.as_str()))
        })
        .collect();
    files.sort();
    std::env::set_current_dir(repo_root()).expect("repository root");
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .expect("tokio runtime");
    let (mut passed, mut failed) = (0, 0);
    for f in &files {
        let name = f.file_name().unwrap().to_string_lossy().to_string();
        match rt.block_on(run_file(f, complete)) {
            Ok(()) => {
                println!("ok    {name}");
                passed += 1;
            }
            Err(e) => {
                println!("FAIL  {name}\n{e}");
                failed += 1;
            }
        }
    }
    println!("sqllogictests: {passed} passed, {failed} failed");
    if failed > 0 || files.is_empty() {
        std::process::exit(1);
    }
}
