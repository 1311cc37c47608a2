//! The `deploy/` examples, checked without a cluster: the manifests, DAG and
//! units parse and name what `deploy/README.md` relies on
//! (`deploy/check.py`), the ConfigMap's job passes `kanon anonymize
//! --dry-run` on the bundled Adult data, and the image's entry point
//! (`deploy/entrypoint.sh`) runs a scheduled job outside a container with
//! the exit codes and JSON log lines the README documents.

use std::path::Path;
use std::process::Command;

mod common;
use common::*;

/// `deploy/entrypoint.sh` with this build's `kanon`, in a clean environment.
fn entrypoint(job: &Path) -> Command {
    let mut c = Command::new("sh");
    c.arg(root().join("deploy/entrypoint.sh"));
    c.current_dir(root());
    for (k, _) in std::env::vars() {
        if k.starts_with("AWS_") || k.starts_with("KANON_") {
            c.env_remove(k);
        }
    }
    c.env("HOME", "/nonexistent-kanon-test-home");
    c.env("KANON_BIN", env!("CARGO_BIN_EXE_kanon"));
    c.env("KANON_JOB", job);
    c
}

#[test]
fn the_examples_parse_and_the_configmap_job_runs() {
    if !python_with("import yaml", "pip install pyyaml") {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let out = run(Command::new("python3")
        .arg(root().join("deploy/check.py"))
        .arg(dir.path()));
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );

    let release = dir.path().join("release.parquet");
    // The CronJob's job, the distributed Job's (deploy/k8s/distributed.yaml)
    // the census's (deploy/k8s/census.yaml) and the writers'
    // (deploy/k8s/scale-out.yaml).
    for job in [
        "job.toml",
        "distributed-job.toml",
        "census-job.toml",
        "scale-out-job.toml",
    ] {
        let out = run(kanon()
            .args(["anonymize", "--dry-run", "-c"])
            .arg(dir.path().join(job))
            .args(["-i", "data/adult/adult.parquet", "-o"])
            .arg(&release));
        assert!(
            out.status.success(),
            "{job}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        assert!(!release.exists(), "a dry run writes nothing");
    }
}

#[test]
fn the_entrypoint_runs_a_dated_release_and_reports_by_exit_code() {
    let dir = tempfile::tempdir().unwrap();
    let job = adult_job(dir.path(), |s| s);
    let pattern = dir.path().join("release_date=%Y-%m-%d.parquet");
    let metrics = dir.path().join("metrics-%Y-%m-%d.json");
    let first = run(entrypoint(&job)
        .env("KANON_OUTPUT", &pattern)
        .env("KANON_METRICS_JSON", &metrics)
        .env("KANON_TIMEOUT", "600"));
    assert!(
        first.status.success(),
        "{}",
        String::from_utf8_lossy(&first.stderr)
    );
    let files = ls(dir.path());
    let release = files
        .iter()
        .find(|f| f.starts_with("release_date=") && f.ends_with(".parquet"))
        .unwrap_or_else(|| panic!("no dated release among {files:?}"));
    assert!(
        !release.contains('%'),
        "strftime fields are filled: {release}"
    );
    assert!(files
        .iter()
        .any(|f| f.starts_with("metrics-") && !f.contains('%')));
    assert_eq!(read_parquet(&dir.path().join(release)).num_rows(), 30162);

    let committed = String::from_utf8_lossy(&first.stderr)
        .lines()
        .map(|l| serde_json::from_str::<serde_json::Value>(l).expect("every log line is JSON"))
        .find(|v| v["message"] == "release committed")
        .expect("a `release committed` log line");
    for field in [
        "timestamp",
        "level",
        "output",
        "rows_in",
        "rows_out",
        "suppressed",
        "k_achieved",
    ] {
        assert!(
            committed.get(field).is_some(),
            "log field {field} in {committed}"
        );
    }

    let again = run(entrypoint(&job).env("KANON_OUTPUT", &pattern));
    assert_eq!(
        again.status.code(),
        Some(5),
        "the day's release exists: exit 5"
    );

    let missing = run(&mut entrypoint(&dir.path().join("nope.toml")));
    assert_eq!(missing.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&missing.stderr).contains("KANON_JOB"));
}

/// The scheduled job as a lakehouse runs it: a Delta table, one partition
/// per day; the second run of the day is a no-op (exit 0).
#[test]
fn the_entrypoint_appends_the_days_partition_to_a_delta_table_once() {
    let dir = tempfile::tempdir().unwrap();
    let job = adult_job(dir.path(), |s| s);
    let table = dir.path().join("lake/adult");
    let day = |c: &mut Command| {
        c.env("KANON_OUTPUT", &table)
            .env("KANON_OUTPUT_FORMAT", "delta")
            .env("KANON_OUTPUT_MODE", "append")
            .env("KANON_PARTITION", "release_date=%Y-%m-%d,source=adult");
        run(c)
    };
    let first = day(&mut entrypoint(&job));
    assert!(
        first.status.success(),
        "{}",
        String::from_utf8_lossy(&first.stderr)
    );
    let date = ls(&table)
        .into_iter()
        .find(|f| f.starts_with("release_date="))
        .expect("the day's partition");
    assert!(!date.contains('%'), "{date}");
    assert_eq!(ls(&table.join(&date)), vec!["source=adult"]);
    let committed = String::from_utf8_lossy(&first.stderr)
        .lines()
        .map(|l| serde_json::from_str::<serde_json::Value>(l).expect("every log line is JSON"))
        .find(|v| v["message"] == "Delta version committed")
        .expect("a `Delta version committed` log line");
    assert_eq!(committed["table_version"], 0);
    let again = day(&mut entrypoint(&job));
    assert_eq!(
        again.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&again.stderr)
    );
    assert!(String::from_utf8_lossy(&again.stderr).contains("already released"));
    assert_eq!(
        ls(&table.join("_delta_log")),
        vec!["00000000000000000000.json"]
    );
}
