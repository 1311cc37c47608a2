//! An algorithm defined in this file, registered through the engine's public
//! registry, runs end to end through the command line's own path
//! (`kanon::run`, which the `kanon` binary's `main` calls: load the job, run,
//! verify, write, commit) and through SQL `anonymize()` (`kanon sql`); both
//! releases pass `kanon verify` and an independent count of their classes.
//! A registered algorithm that breaks k publishes nothing.

use kanon_e2e as common;

use std::collections::HashMap;
use std::path::Path;
use std::process::ExitCode;

use arrow::array::{Array, AsArray};
use arrow::compute::cast;
use arrow::datatypes::DataType;
use kanon_engine::algorithms::registry::{self, Capabilities, Registration};
use kanon_engine::algorithms::{Algorithm, Context, Outcome};
use kanon_engine::partition::Partition;
use kanon_engine::spec::JobSpec;
use kanon_engine::Result;

/// Sorts the rows by their QI codes and cuts the order into runs of k rows
/// (the last run takes the remainder): a plain local recoding, each run
/// published as its tightest generalisation.
#[derive(Debug)]
struct SortedRuns;

impl Algorithm for SortedRuns {
    fn name(&self) -> &'static str {
        "sorted-runs"
    }
    fn run(&self, ctx: &Context<'_>) -> Result<Outcome> {
        let table = ctx.table;
        let k = ctx.privacy.min_class_size().max(1);
        let mut rows: Vec<u32> = (0..table.n_rows() as u32).collect();
        rows.sort_by_key(|&r| table.row(r).collect::<Vec<u32>>());
        ctx.cancel.check()?;
        let runs = (rows.len() / k).max(1);
        let mut groups = vec![0u32; rows.len()];
        for (i, &r) in rows.iter().enumerate() {
            groups[r as usize] = ((i / k).min(runs - 1)) as u32;
        }
        Ok(Outcome {
            partition: Partition::tightest(table, groups),
            details: serde_json::json!({ "runs": runs }),
        })
    }
}

/// Publishes every row as a class of its own: breaks k on purpose.
#[derive(Debug)]
struct EveryRowAlone;

impl Algorithm for EveryRowAlone {
    fn name(&self) -> &'static str {
        "every-row-alone"
    }
    fn run(&self, ctx: &Context<'_>) -> Result<Outcome> {
        Ok(Outcome {
            partition: Partition::tightest(ctx.table, (0..ctx.table.n_rows() as u32).collect()),
            details: serde_json::Value::Null,
        })
    }
}

fn register_once() {
    static ONCE: std::sync::Once = std::sync::Once::new();
    ONCE.call_once(|| {
        registry::register(Registration {
            name: "sorted-runs",
            summary: "rows sorted by their QIs, cut into runs of k (a test)",
            capabilities: Capabilities::NONE,
            build: |_| Ok(Box::new(SortedRuns)),
        })
        .unwrap();
        registry::register(Registration {
            name: "every-row-alone",
            summary: "every row a class (a broken test algorithm)",
            capabilities: Capabilities::NONE,
            build: |_| Ok(Box::new(EveryRowAlone)),
        })
        .unwrap();
    });
}

fn kanon(args: &[&str]) -> ExitCode {
    kanon::run(std::iter::once("kanon").chain(args.iter().copied()))
}

fn path(p: &Path) -> &str {
    p.to_str().unwrap()
}

/// The size of the smallest class of `release` over the QIs of `job`,
/// counted here from the published values.
fn smallest_class(job: &Path, release: &Path) -> usize {
    let spec: JobSpec = toml::from_str(&std::fs::read_to_string(job).unwrap()).unwrap();
    let batch = common::read_parquet(release);
    let columns: Vec<_> = spec
        .quasi_identifiers()
        .map(|q| {
            let c = batch
                .column_by_name(&q.name)
                .unwrap_or_else(|| panic!("{} in the release", q.name));
            cast(c, &DataType::Utf8).unwrap()
        })
        .collect();
    let mut sizes: HashMap<Vec<Option<String>>, usize> = HashMap::new();
    for row in 0..batch.num_rows() {
        let key = columns
            .iter()
            .map(|c| {
                let s = c.as_string::<i32>();
                (!s.is_null(row)).then(|| s.value(row).to_string())
            })
            .collect();
        *sizes.entry(key).or_default() += 1;
    }
    sizes.into_values().min().unwrap()
}

/// `kanon anonymize -q -c JOB --algorithm ALGORITHM -o OUT`, in process.
fn anonymize(job: &Path, algorithm: &str, out: &Path) -> ExitCode {
    kanon(&[
        "anonymize",
        "-q",
        "-c",
        path(job),
        "--algorithm",
        algorithm,
        "-o",
        path(out),
    ])
}

/// Every Adult row is in `release`, its classes hold at least the job's k
/// rows, and `kanon verify` passes it with the job that made it (`job` run
/// by `algorithm`): a certificate of another job fails.
fn assert_released_and_verified(job: &Path, algorithm: &str, release: &Path) {
    assert_eq!(common::read_parquet(release).num_rows(), 30162);
    assert!(smallest_class(job, release) >= 10);
    let verified = kanon(&[
        "verify",
        "-q",
        "-c",
        path(job),
        "--algorithm",
        algorithm,
        "-i",
        path(release),
    ]);
    assert_eq!(verified, ExitCode::SUCCESS);
    let other = kanon(&["verify", "-q", "-c", path(job), "-i", path(release)]);
    assert_eq!(other, ExitCode::from(1), "verified as another job");
}

#[test]
fn a_registered_algorithm_runs_through_the_cli_path_with_verification() {
    register_once();
    let dir = tempfile::tempdir().unwrap();
    let job = common::adult_job(dir.path(), |t| t);
    let out = dir.path().join("release.parquet");
    assert_eq!(anonymize(&job, "sorted-runs", &out), ExitCode::SUCCESS);
    assert_released_and_verified(&job, "sorted-runs", &out);
}

#[test]
fn a_registered_algorithm_that_breaks_k_publishes_nothing() {
    register_once();
    let dir = tempfile::tempdir().unwrap();
    let job = common::adult_job(dir.path(), |t| t);
    let out = dir.path().join("release.parquet");
    // A release that fails verification is a bug in the algorithm: exit
    // 70, the code deploy/README.md documents (crates/runner/tests/
    // exit_codes.rs checks the others with the binary).
    assert_eq!(anonymize(&job, "every-row-alone", &out), ExitCode::from(70));
    assert_eq!(common::ls(dir.path()), vec!["job.toml".to_string()]);
}

#[test]
fn a_registered_algorithm_runs_in_sql_anonymize() {
    register_once();
    let dir = tempfile::tempdir().unwrap();
    let job = common::adult_job(dir.path(), |t| t);
    let out = dir.path().join("sql.parquet");
    let query = format!(
        "SELECT * FROM anonymize('adult', 'config = \"{}\", algorithm = \"sorted-runs\"')",
        path(&job)
    );
    let table = format!(
        "adult={}",
        path(&common::root().join("data/adult/adult.parquet"))
    );
    let code = kanon(&[
        "sql",
        "-q",
        &query,
        "--table",
        &table,
        "--output",
        path(&out),
        "--allow-dir",
        path(dir.path()),
        "--allow-dir",
        path(&common::root()),
    ]);
    assert_eq!(code, ExitCode::SUCCESS);
    assert_released_and_verified(&job, "sorted-runs", &out);
}
