//! The job's memory budget (issue 38): a job whose estimated peak exceeds
//! its budget (`--memory`, `resources.memory`, or the cgroup's limit) is
//! refused before any reading, with exit 2 and nothing written; a job that
//! fits runs within it and publishes the same bytes whatever the budget.

mod common;

use std::path::Path;

use arrow::array::{Array, ArrayRef, Int64Array, RecordBatch, StringArray};
use arrow::compute::concat_batches;
use common::*;

/// Adult three times over as CSV (90,486 rows), with one malformed `age`
/// after the rows kanon samples before reading (65,536): a run that reads
/// the input fails on it.
fn csv_that_fails_when_read(dir: &Path) -> std::path::PathBuf {
    let a = adult();
    let mut t = concat_batches(&a.schema(), &[a.clone(), a.clone(), a]).unwrap();
    let age = t.column_by_name("age").unwrap();
    let bad: ArrayRef = match age.as_any().downcast_ref::<Int64Array>() {
        Some(_) => {
            let mut v: Vec<String> = (0..t.num_rows())
                .map(|i| arrow::util::display::array_value_to_string(age, i).unwrap_or_default())
                .collect();
            *v.last_mut().unwrap() = "not-a-number".into();
            std::sync::Arc::new(StringArray::from(v))
        }
        None => panic!("Adult's age is Int64"),
    };
    let i = t.schema().index_of("age").unwrap();
    let mut cols = t.columns().to_vec();
    cols[i] = bad;
    let mut fields: Vec<arrow::datatypes::Field> = t
        .schema()
        .fields()
        .iter()
        .map(|f| f.as_ref().clone())
        .collect();
    fields[i] = arrow::datatypes::Field::new("age", arrow::datatypes::DataType::Utf8, false);
    t = RecordBatch::try_new(
        std::sync::Arc::new(arrow::datatypes::Schema::new(fields)),
        cols,
    )
    .unwrap();
    let path = dir.join("adult-bad-tail.csv");
    let mut w = arrow_csv::WriterBuilder::new()
        .with_header(true)
        .build(std::fs::File::create(&path).unwrap());
    w.write(&t).unwrap();
    path
}

#[test]
fn a_budget_too_small_is_refused_before_reading() {
    let dir = tempfile::tempdir().unwrap();
    let job = adult_job(dir.path(), |t| t);
    let input = csv_that_fails_when_read(dir.path());
    let out = dir.path().join("release.parquet");
    let metrics = dir.path().join("metrics.json");

    // Read, the input fails on its malformed tail.
    let o = run(&mut anonymize_cmd(&job, &input, &out));
    assert_eq!(o.status.code(), Some(2), "{}", show(&o));
    assert!(stderr(&o).contains("malformed CSV"), "{}", show(&o));

    // Under a budget it cannot fit, it is refused before reading.
    let o = run(anonymize_cmd(&job, &input, &out)
        .args(["--memory", "40MB", "--metrics-json"])
        .arg(&metrics));
    assert_eq!(o.status.code(), Some(2), "{}", show(&o));
    let e = stderr(&o);
    assert!(e.contains("more than its budget of 40 MiB"), "{e}");
    assert!(e.contains("resources.memory = \"40MB\""), "{e}");
    assert!(e.contains("nothing was read or written"), "{e}");
    assert!(e.contains("at its peak, in"), "the estimate's parts: {e}");
    assert!(!e.contains("malformed"), "refused before reading: {e}");
    assert!(!out.exists() && !metrics.exists());
    assert_eq!(
        ls(dir.path()),
        vec!["adult-bad-tail.csv".to_string(), "job.toml".to_string()],
        "nothing written"
    );
    // No value of the data in the message.
    assert!(
        !e.contains("not-a-number") && !e.contains("Bachelors"),
        "{e}"
    );

    // The same from the job file's [resources] and from the environment.
    let text = std::fs::read_to_string(&job).unwrap();
    let in_file = dir.path().join("job-40mb.toml");
    std::fs::write(
        &in_file,
        format!("{text}\n[resources]\nmemory = \"40MB\"\n"),
    )
    .unwrap();
    let o = run(&mut anonymize_cmd(&in_file, &input, &out));
    assert_eq!(o.status.code(), Some(2), "{}", show(&o));
    assert!(stderr(&o).contains("budget of 40 MiB"), "{}", show(&o));
    let o = run(anonymize_cmd(&job, &input, &out).env("KANON_RESOURCES_MEMORY", "40MB"));
    assert_eq!(o.status.code(), Some(2), "{}", show(&o));
    assert!(stderr(&o).contains("budget of 40 MiB"), "{}", show(&o));
    assert!(!out.exists());

    // A size that is not one names the setting.
    let o = run(anonymize_cmd(&job, &input, &out).args(["--memory", "lots"]));
    assert_eq!(o.status.code(), Some(2), "{}", show(&o));
    assert!(stderr(&o).contains("resources.memory"), "{}", show(&o));
}

#[test]
fn a_container_limit_is_the_default_budget() {
    let dir = tempfile::tempdir().unwrap();
    let job = adult_job(dir.path(), |t| t);
    let input = root().join("data/adult/adult.parquet");
    let out = dir.path().join("release.parquet");
    // A cgroup v2 file system whose limit is 40 MiB.
    let cgroup = dir.path().join("cgroup");
    std::fs::create_dir(&cgroup).unwrap();
    std::fs::write(cgroup.join("memory.max"), format!("{}\n", 40u64 << 20)).unwrap();
    let o = run(anonymize_cmd(&job, &input, &out).env("KANON_TEST_CGROUP_ROOT", &cgroup));
    assert_eq!(o.status.code(), Some(2), "{}", show(&o));
    let e = stderr(&o);
    assert!(e.contains("budget of 40 MiB"), "{e}");
    assert!(e.contains("cgroup"), "{e}");
    assert!(!out.exists());
    // The job's own setting wins over the container's.
    let o = run(anonymize_cmd(&job, &input, &out)
        .env("KANON_TEST_CGROUP_ROOT", &cgroup)
        .args(["--memory", "1GB"]));
    assert!(o.status.success(), "{}", show(&o));
    // No limit ("max"): a share of physical memory.
    std::fs::write(cgroup.join("memory.max"), "max\n").unwrap();
    let o = run(anonymize_cmd(&job, &input, &dir.path().join("dry.parquet"))
        .env("KANON_TEST_CGROUP_ROOT", &cgroup)
        .args(["--dry-run"]));
    assert!(o.status.success(), "{}", show(&o));
    assert!(stdout(&o).contains("of the machine's"), "{}", show(&o));
}

#[test]
fn a_job_that_fits_keeps_within_its_budget_and_publishes_the_same_bytes() {
    let dir = tempfile::tempdir().unwrap();
    let job = adult_job(dir.path(), |t| t);
    let input = root().join("data/adult/adult.parquet");
    let free = dir.path().join("free.parquet");
    let tight = dir.path().join("tight.parquet");
    let metrics = dir.path().join("tight.json");
    let o = run(&mut anonymize_cmd(&job, &input, &free));
    assert!(o.status.success(), "{}", show(&o));
    let o = run(anonymize_cmd(&job, &input, &tight)
        .args(["--memory", "300MB", "--metrics-json"])
        .arg(&metrics));
    assert!(o.status.success(), "{}", show(&o));
    assert_eq!(
        std::fs::read(&free).unwrap(),
        std::fs::read(&tight).unwrap(),
        "the budget changes how the release is buffered, never its bytes"
    );
    // A job's own small buffer is not a budget too small: it spills.
    let small = dir.path().join("small.parquet");
    let o = run(anonymize_cmd(&job, &input, &small).args([
        "--set",
        "output.buffer_memory=\"64kB\"",
        "--memory",
        "300MB",
    ]));
    assert!(o.status.success(), "{}", show(&o));
    assert_eq!(
        std::fs::read(&free).unwrap(),
        std::fs::read(&small).unwrap()
    );
    let m: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&metrics).unwrap()).unwrap();
    let memory = &m["memory"];
    assert_eq!(memory["budget_bytes"], 300u64 << 20, "{memory}");
    let estimate = memory["estimate_bytes"].as_u64().unwrap();
    assert!(estimate > 0 && estimate <= 300 << 20, "{memory}");
    let before = memory["estimate_before_reading_bytes"].as_u64().unwrap();
    assert!(before > 0 && before <= 300 << 20, "{memory}");
    let phases: Vec<&str> = memory["phases"]
        .as_array()
        .unwrap()
        .iter()
        .map(|p| p["phase"].as_str().unwrap())
        .collect();
    if cfg!(target_os = "linux") {
        assert_eq!(phases, ["pass1", "algorithm", "pass2"], "{memory}");
    }

    // A dry run prints the estimate and the budget.
    let o = run(
        anonymize_cmd(&job, &input, &dir.path().join("dry.parquet")).args([
            "--dry-run",
            "--memory",
            "4GB",
        ]),
    );
    assert!(o.status.success(), "{}", show(&o));
    let s = stdout(&o);
    assert!(s.contains("memory") && s.contains("at its peak, in"), "{s}");
    assert!(
        s.contains("budget        4.00 GiB (resources.memory = \"4GB\")"),
        "{s}"
    );
}
