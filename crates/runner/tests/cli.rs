//! The `kanon` binary on local files: the bundled Adult job, streaming two
//! passes, atomic commits, the operational options, and every bad input of
//! issue 9 — each must end in a clear error that names the file, column or
//! setting, with the documented exit code, and must never print a record
//! value (a distinctive value is planted in the data to check that).

mod common;

use std::collections::HashMap;
use std::sync::Arc;

use arrow::array::{
    Array, ArrayRef, Float64Array, Int64Array, ListArray, RecordBatch, StringArray,
};
use arrow::datatypes::{DataType, Field, Int32Type, Schema};
use common::*;

/// A value that must never appear in kanon's output.
const PLANTED: &str = "ZZPLANTED-4711";

fn assert_no_leak(o: &std::process::Output) {
    assert!(
        !stderr(o).contains(PLANTED) && !stdout(o).contains(PLANTED),
        "a record value leaked:\n{}",
        show(o)
    );
}

fn expect_error(o: &std::process::Output, code: i32, needles: &[&str]) {
    assert_eq!(o.status.code(), Some(code), "{}", show(o));
    let err = stderr(o);
    for n in needles {
        assert!(err.contains(n), "stderr lacks `{n}`:\n{}", show(o));
    }
    assert_no_leak(o);
}

/// A small Adult-like table: 60 rows, with `sex` values chosen by `sex`.
fn small(sex: impl Fn(usize) -> Option<&'static str>) -> RecordBatch {
    let t = adult().slice(0, 60);
    let schema = t.schema();
    let cols: Vec<ArrayRef> = schema
        .fields()
        .iter()
        .zip(t.columns())
        .map(|(f, c)| {
            if f.name() == "sex" {
                Arc::new(StringArray::from((0..60).map(&sex).collect::<Vec<_>>())) as ArrayRef
            } else {
                c.clone()
            }
        })
        .collect();
    let fields: Vec<Field> = schema
        .fields()
        .iter()
        .map(|f| f.as_ref().clone().with_nullable(true))
        .collect();
    RecordBatch::try_new(Arc::new(Schema::new(fields)), cols).unwrap()
}

fn male_female(i: usize) -> Option<&'static str> {
    Some(if i.is_multiple_of(2) {
        "Male"
    } else {
        "Female"
    })
}

#[test]
fn the_bundled_adult_job_runs_and_verifies() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("adult-k10.parquet");
    let o = run(kanon()
        .args(["anonymize", "--config", "configs/adult.toml", "--output"])
        .arg(&out));
    assert_eq!(o.status.code(), Some(0), "{}", show(&o));
    assert!(stdout(&o).contains("30162 in"), "{}", show(&o));
    // Not a terminal: no progress bars, and no logs by default.
    assert!(stderr(&o).is_empty(), "{}", show(&o));
    let release = read_parquet(&out);
    assert_eq!(release.num_rows(), 30162);
    assert!(matches!(
        release.schema().field_with_name("sex").unwrap().data_type(),
        DataType::Dictionary(_, _)
    ));
    let md: HashMap<String, String> = parquet_metadata(std::fs::read(&out).unwrap())
        .into_iter()
        .collect();
    assert_eq!(md["kanon.algorithm"], "cover");
    assert!(md["kanon.k_achieved"].parse::<usize>().unwrap() >= 10);
    assert!(md["kanon.input.fingerprint"].starts_with("sha256:"));
    assert_eq!(md["kanon.rows_in"], "30162");
    assert!(md["kanon.privacy"].contains("\"k\":10"));
    // Nothing but the release in the directory.
    // The release and its manifest (hidden from readers by its `_`).
    assert_eq!(
        ls(dir.path()),
        vec!["_adult-k10.parquet.kanon_release.json", "adult-k10.parquet"]
    );
    let manifest: serde_json::Value = serde_json::from_slice(
        &std::fs::read(dir.path().join("_adult-k10.parquet.kanon_release.json")).unwrap(),
    )
    .unwrap();
    assert_eq!(manifest["files"][0]["name"], "adult-k10.parquet");
    assert_eq!(
        manifest["files"][0]["bytes"],
        std::fs::metadata(dir.path().join("adult-k10.parquet"))
            .unwrap()
            .len()
    );
    assert_eq!(manifest["certificate"]["privacy"]["k"], 10);
    assert!(
        manifest["certificate"]["verified"]["smallest_class"]
            .as_u64()
            .unwrap()
            >= 10
    );
    let o = run(kanon()
        .args(["verify", "--config", "configs/adult.toml", "--input"])
        .arg(&out));
    assert_eq!(o.status.code(), Some(0), "{}", show(&o));
    assert!(
        stdout(&o).contains("satisfies k-anonymity (k = 10)"),
        "{}",
        show(&o)
    );
    // A stricter k does not hold on this release: exit 1.
    let o = run(kanon()
        .args([
            "verify",
            "--config",
            "configs/adult.toml",
            "--weaken-privacy",
            "--k",
            "100000",
            "--input",
        ])
        .arg(&out));
    assert_eq!(o.status.code(), Some(1), "{}", show(&o));
}

/// A block-wise run says so in the summary: blocks, their size range and
/// the time of each phase (issue 10).
#[test]
fn block_wise_runs_report_their_blocks() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("r.parquet");
    let o = run(kanon()
        .args([
            "anonymize",
            "-c",
            "configs/adult.toml",
            "--set",
            "algorithm.block_size=10000",
            "-o",
        ])
        .arg(&out));
    assert_eq!(o.status.code(), Some(0), "{}", show(&o));
    let line = stdout(&o)
        .lines()
        .find(|l| l.trim_start().starts_with("blocks"))
        .unwrap_or_else(|| panic!("no blocks line:\n{}", show(&o)))
        .to_string();
    assert!(line.contains(" rows (partition "), "{line}");
    let blocks: usize = line.split_whitespace().nth(1).unwrap().parse().unwrap();
    assert!(blocks >= 3, "{line}");
    // The default on a table this small is the whole table: no blocks line.
    let o = run(kanon()
        .args(["anonymize", "-c", "configs/adult.toml", "--overwrite", "-o"])
        .arg(&out));
    assert_eq!(o.status.code(), Some(0), "{}", show(&o));
    assert!(!stdout(&o).contains("  blocks "), "{}", show(&o));
}

#[test]
fn same_input_job_and_seed_give_identical_bytes() {
    let dir = tempfile::tempdir().unwrap();
    let a = dir.path().join("a.parquet");
    let b = dir.path().join("b.parquet");
    for out in [&a, &b] {
        let o = run(kanon()
            .args(["anonymize", "-c", "configs/adult.toml", "-o"])
            .arg(out));
        assert_eq!(o.status.code(), Some(0), "{}", show(&o));
    }
    assert_eq!(std::fs::read(&a).unwrap(), std::fs::read(&b).unwrap());
}

#[test]
fn passed_through_columns_keep_type_nullability_metadata_and_order() {
    let dir = tempfile::tempdir().unwrap();
    let t = adult().slice(0, 5000);
    let n = t.num_rows();
    let mut fields: Vec<Field> = t
        .schema()
        .fields()
        .iter()
        .map(|f| f.as_ref().clone())
        .collect();
    let mut cols: Vec<ArrayRef> = t.columns().to_vec();
    let meta: HashMap<String, String> = [("unit".to_string(), "EUR".to_string())].into();
    fields.push(Field::new("income", DataType::Float64, true).with_metadata(meta.clone()));
    cols.push(Arc::new(Float64Array::from(
        (0..n)
            .map(|i| (i % 7 != 0).then_some(i as f64 * 1.5))
            .collect::<Vec<_>>(),
    )));
    fields.push(Field::new("row_id", DataType::Int64, false));
    cols.push(Arc::new(Int64Array::from(
        (0..n as i64).collect::<Vec<_>>(),
    )));
    fields.push(Field::new(
        "tags",
        DataType::List(Arc::new(Field::new_list_field(DataType::Int32, true))),
        true,
    ));
    cols.push(Arc::new(ListArray::from_iter_primitive::<Int32Type, _, _>(
        (0..n).map(|i| Some(vec![Some(i as i32), None])),
    )));
    fields.push(Field::new("name", DataType::Utf8, false));
    cols.push(Arc::new(StringArray::from(
        (0..n).map(|i| format!("person {i}")).collect::<Vec<_>>(),
    )));
    let schema = Arc::new(Schema::new_with_metadata(
        fields,
        [("origin".to_string(), "test".to_string())].into(),
    ));
    let input = dir.path().join("in.parquet");
    // Several row groups and batches.
    write_parquet_with(
        &input,
        &[RecordBatch::try_new(schema.clone(), cols).unwrap()],
        Some(
            parquet::file::properties::WriterProperties::builder()
                .set_max_row_group_row_count(Some(1500))
                .build(),
        ),
    );
    let job = adult_job(dir.path(), |t| {
        let insensitive: String = ["income", "row_id", "tags"]
            .iter()
            .map(|c| format!("\n[[attributes]]\nname = \"{c}\"\nrole = \"insensitive\"\n"))
            .collect();
        format!("{t}\n[[attributes]]\nname = \"name\"\nrole = \"identifying\"\n{insensitive}")
    });
    let out = dir.path().join("out.parquet");
    let o = run(anonymize_cmd(&job, &input, &out).args(["--weaken-privacy", "--k", "5"]));
    assert_eq!(o.status.code(), Some(0), "{}", show(&o));
    let r = read_parquet(&out);
    assert_eq!(r.num_rows(), n);
    assert!(
        r.schema().field_with_name("name").is_err(),
        "identifying column dropped"
    );
    // The input's schema metadata describes the input, not the release.
    assert_eq!(r.schema().metadata().get("origin"), None);
    for name in ["income", "row_id", "tags"] {
        let f_in = schema.field_with_name(name).unwrap();
        let f_out = r.schema().field_with_name(name).unwrap().clone();
        assert_eq!(&f_out, f_in, "field {name} changed");
    }
    // Every row comes back, but never in input order: the release order
    // follows the classes and the seed, so row position says nothing about
    // input position (issue 15).
    let ids = r
        .column_by_name("row_id")
        .unwrap()
        .as_any()
        .downcast_ref::<Int64Array>()
        .unwrap();
    let mut sorted = ids.values().to_vec();
    sorted.sort_unstable();
    assert!(sorted.iter().enumerate().all(|(i, &v)| v == i as i64));
    let in_place = ids
        .values()
        .iter()
        .enumerate()
        .filter(|(i, &v)| v == *i as i64)
        .count();
    assert!(
        in_place < n / 100,
        "{in_place} of {n} rows kept their input position"
    );
    let income = r.column_by_name("income").unwrap();
    assert_eq!(income.null_count(), n.div_ceil(7));
}

#[test]
fn directories_and_globs_read_as_one_dataset() {
    let dir = tempfile::tempdir().unwrap();
    let parts = dir.path().join("parts");
    std::fs::create_dir(&parts).unwrap();
    adult_parts(&parts, 3);
    std::fs::write(parts.join("_SUCCESS"), b"").unwrap();
    std::fs::write(parts.join(".hidden.parquet"), b"not parquet").unwrap();
    let single = dir.path().join("single.parquet");
    let o = run(kanon()
        .args(["anonymize", "-c", "configs/adult.toml", "-o"])
        .arg(&single));
    assert_eq!(o.status.code(), Some(0), "{}", show(&o));
    let expected = read_parquet(&single);
    for input in [
        parts.display().to_string(),
        format!("{}/part-*.parquet", parts.display()),
    ] {
        let out = dir.path().join(format!("from-{}.parquet", input.len()));
        let o = run(kanon()
            .args(["anonymize", "-c", "configs/adult.toml", "-i", &input, "-o"])
            .arg(&out));
        assert_eq!(o.status.code(), Some(0), "{input}: {}", show(&o));
        let got = read_parquet(&out);
        assert_eq!(got.schema().fields(), expected.schema().fields(), "{input}");
        assert_eq!(got.columns(), expected.columns(), "{input}");
    }
}

#[test]
fn split_release_files_verify_as_one() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("release");
    let o = run(kanon()
        .args([
            "anonymize",
            "-c",
            "configs/adult.toml",
            "--max-file-size",
            "16kB",
            "-o",
        ])
        .arg(&out)
        .args(["--set", "output.row_group_rows=4096"]));
    assert_eq!(o.status.code(), Some(0), "{}", show(&o));
    let mut files = ls(&out);
    assert!(files.len() > 3, "{files:?}");
    // The manifest, then the commit marker, beside the parts.
    assert_eq!(files.remove(0), "_SUCCESS");
    assert_eq!(files.remove(0), "_kanon_release.json");
    assert!(files
        .iter()
        .all(|f| f.starts_with("part-") && f.ends_with(".parquet")));
    assert_eq!(
        ls(dir.path()),
        vec!["release"],
        "no temporary directory left"
    );
    let rows: usize = files
        .iter()
        .map(|f| read_parquet(&out.join(f)).num_rows())
        .sum();
    assert_eq!(rows, 30162);
    let o = run(kanon()
        .args(["verify", "-c", "configs/adult.toml", "-i"])
        .arg(&out));
    assert_eq!(o.status.code(), Some(0), "{}", show(&o));
    // Exists: refused (5), then replaced with --overwrite.
    let o = run(kanon()
        .args([
            "anonymize",
            "-c",
            "configs/adult.toml",
            "--max-file-size",
            "16kB",
            "-o",
        ])
        .arg(&out));
    expect_error(&o, 5, &["already exists", "--overwrite"]);
    let o = run(kanon()
        .args([
            "anonymize",
            "-c",
            "configs/adult.toml",
            "--max-file-size",
            "1GB",
            "--overwrite",
            "-o",
        ])
        .arg(&out));
    assert_eq!(o.status.code(), Some(0), "{}", show(&o));
    assert_eq!(
        ls(&out),
        vec!["_SUCCESS", "_kanon_release.json", "part-00000.parquet"]
    );
    assert_eq!(ls(dir.path()), vec!["release"]);
}

#[test]
fn csv_input_with_options() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("sample.parquet");
    let o = run(kanon()
        .args([
            "anonymize",
            "-c",
            "configs/adult.toml",
            "-i",
            "data/adult/adult-sample.csv",
            "--set",
            "input.delimiter=;",
            "--weaken-privacy",
            "--k",
            "5",
            "-o",
        ])
        .arg(&out));
    assert_eq!(o.status.code(), Some(0), "{}", show(&o));
    assert_eq!(read_parquet(&out).num_rows() as u64 + suppressed(&out), 500);
    let md: HashMap<String, String> = parquet_metadata(std::fs::read(&out).unwrap())
        .into_iter()
        .collect();
    assert!(md["kanon.input.fingerprint"].starts_with("sha256:"));
}

fn suppressed(p: &std::path::Path) -> u64 {
    let md: HashMap<String, String> = parquet_metadata(std::fs::read(p).unwrap())
        .into_iter()
        .collect();
    md["kanon.rows_suppressed"].parse().unwrap()
}

#[test]
fn environment_overrides_and_json_logs() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("o.parquet");
    let o = run(kanon()
        .env("KANON_PRIVACY_K", "25")
        .env("KANON_OUTPUT_PATH", &out)
        .args([
            "--log-format",
            "json",
            "anonymize",
            "-c",
            "configs/adult.toml",
        ]));
    assert_eq!(o.status.code(), Some(0), "{}", show(&o));
    let md: HashMap<String, String> = parquet_metadata(std::fs::read(&out).unwrap())
        .into_iter()
        .collect();
    assert!(md["kanon.privacy"].contains("\"k\":25"), "{md:?}");
    let events: Vec<serde_json::Value> = stderr(&o)
        .lines()
        .map(|l| serde_json::from_str(l).unwrap_or_else(|e| panic!("not JSON: {l}: {e}")))
        .collect();
    let committed = events
        .iter()
        .find(|e| e["message"] == "release committed")
        .unwrap_or_else(|| panic!("{}", show(&o)));
    assert_eq!(committed["rows_in"], 30162);
    assert!(committed["k_achieved"].as_u64().unwrap() >= 25);
    // The command line wins over the environment.
    let o = run(kanon()
        .env("KANON_PRIVACY_K", "25")
        .args([
            "anonymize",
            "-c",
            "configs/adult.toml",
            "--weaken-privacy",
            "--k",
            "30",
            "--overwrite",
            "-o",
        ])
        .arg(&out));
    assert_eq!(o.status.code(), Some(0), "{}", show(&o));
    let md: HashMap<String, String> = parquet_metadata(std::fs::read(&out).unwrap())
        .into_iter()
        .collect();
    assert!(md["kanon.privacy"].contains("\"k\":30"), "{md:?}");
    // Errors as JSON too.
    let o = run(kanon().env("KANON_PRIVACY_KK", "3").args([
        "--log-format",
        "json",
        "anonymize",
        "-c",
        "configs/adult.toml",
    ]));
    assert_eq!(o.status.code(), Some(2), "{}", show(&o));
    let e: serde_json::Value = serde_json::from_str(stderr(&o).lines().last().unwrap()).unwrap();
    assert_eq!(e["exit_code"], 2);
    assert!(
        e["error"].as_str().unwrap().contains("KANON_PRIVACY_KK"),
        "{e}"
    );
}

/// Issue 10: `-v` and `--metrics-json` report the working set and the peak
/// RSS per row; Adult's 8 QIs and salary class take one byte each.
#[test]
fn memory_is_reported_per_row() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("o.parquet");
    let metrics = dir.path().join("m.json");
    let o = run(kanon()
        .args(["anonymize", "-v", "-c", "configs/adult.toml", "-o"])
        .arg(&out)
        .arg("--metrics-json")
        .arg(&metrics));
    assert_eq!(o.status.code(), Some(0), "{}", show(&o));
    let log = stderr(&o);
    let line = log
        .lines()
        .find(|l| l.contains(" memory ") && l.contains("working_set_bytes="))
        .unwrap_or_else(|| panic!("no memory line:\n{}", show(&o)));
    assert!(
        line.contains("working_set_bytes=271458") && line.contains("working_set_bytes_per_row=9"),
        "{line}"
    );
    let json: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&metrics).unwrap()).unwrap();
    let memory = &json["memory"];
    assert_eq!(memory["working_set_bytes"], 30162 * 9, "{memory}");
    assert_eq!(memory["working_set_bytes_per_row"], 9.0, "{memory}");
    if cfg!(target_os = "linux") {
        assert!(line.contains("peak_rss_bytes="), "{line}");
        let peak = memory["peak_rss_bytes"].as_u64().unwrap();
        assert!(peak > 30162 * 9, "{memory}");
        let per_row = memory["peak_rss_bytes_per_row"].as_f64().unwrap();
        assert!((per_row - peak as f64 / 30162.0).abs() < 1e-6, "{memory}");
    }
}

#[test]
fn dry_run_checks_without_writing() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("never.parquet");
    let o = run(kanon()
        .args(["anonymize", "-c", "configs/adult.toml", "--dry-run", "-o"])
        .arg(&out));
    assert_eq!(o.status.code(), Some(0), "{}", show(&o));
    assert!(stdout(&o).contains("nothing was written"), "{}", show(&o));
    assert!(ls(dir.path()).is_empty());
    // A hierarchy that lacks a value: found by the dry run.
    let input = dir.path().join("in.parquet");
    write_parquet(
        &input,
        &[small(|i| Some(if i == 7 { PLANTED } else { "Male" }))],
    );
    let o = run(kanon()
        .args(["anonymize", "-c", "configs/adult.toml", "--dry-run", "-i"])
        .arg(&input)
        .arg("-o")
        .arg(&out));
    expect_error(&o, 2, &["`sex`", "1 rows", "sex.csv"]);
    // k above the rows: exit 3 before any algorithm runs.
    write_parquet(&input, &[small(male_female)]);
    let o = run(kanon()
        .args([
            "anonymize",
            "-c",
            "configs/adult.toml",
            "--dry-run",
            "--weaken-privacy",
            "--k",
            "100",
            "-i",
        ])
        .arg(&input)
        .arg("-o")
        .arg(&out));
    expect_error(&o, 3, &["privacy.k", "k = 100", "60"]);
    assert!(ls(dir.path()) == vec!["in.parquet"]);
}

#[test]
fn inspect_shows_schema_rows_and_risk() {
    let o = run(kanon().args(["inspect", "data/adult/adult.parquet"]));
    assert_eq!(o.status.code(), Some(0), "{}", show(&o));
    let s = stdout(&o);
    assert!(
        s.contains("30162 rows") && s.contains("native-country") && s.contains("Int64"),
        "{s}"
    );
    let o = run(kanon().args([
        "inspect",
        "data/adult/adult.parquet",
        "--qi",
        "sex,race",
        "--k",
        "100",
        "--json",
    ]));
    assert_eq!(o.status.code(), Some(0), "{}", show(&o));
    let v: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    let risk = &v["risk"];
    assert_eq!(risk["classes"], 10);
    let at = &risk["at_risk"][0];
    assert_eq!(at["k"], 100);
    assert!(at["rows"].as_u64().unwrap() < 30162);
    // Risk of the job's QIs, from the job file, on the CSV sample.
    let o = run(kanon().args([
        "inspect",
        "data/adult/adult-sample.csv",
        "--delimiter",
        ";",
        "-c",
        "configs/adult.toml",
    ]));
    assert_eq!(o.status.code(), Some(0), "{}", show(&o));
    assert!(
        stdout(&o).contains("500 rows") && stdout(&o).contains("k = 10"),
        "{}",
        show(&o)
    );
    let o = run(kanon().args(["inspect", "data/adult/adult.parquet", "--qi", "nope"]));
    expect_error(&o, 2, &["`nope`", "not found"]);
}

#[test]
fn interrupt_before_commit_leaves_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let barrier = tempfile::tempdir().unwrap();
    let out = dir.path().join("o.parquet");
    std::fs::write(barrier.path().join("before-commit.wait"), b"").unwrap();
    let child = kanon()
        .env("KANON_TEST_BARRIER", barrier.path())
        .args(["anonymize", "-c", "configs/adult.toml", "-o"])
        .arg(&out)
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let point = barrier.path().join("before-commit");
    let start = std::time::Instant::now();
    while !point.exists() {
        assert!(start.elapsed().as_secs() < 300, "barrier not reached");
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
    // The whole release is written, verified, and waits under a temporary name.
    assert_eq!(ls(dir.path()).len(), 1);
    assert!(ls(dir.path())[0].starts_with(".kanon-"));
    let status = std::process::Command::new("kill")
        .args(["-INT", &child.id().to_string()])
        .status()
        .unwrap();
    assert!(status.success());
    let o = child.wait_with_output().unwrap();
    expect_error(&o, 130, &["interrupted"]);
    assert!(ls(dir.path()).is_empty(), "{:?}", ls(dir.path()));
}

// ---------------------------------------------------------------------------
// Bad inputs (issue 9): each names the file/column/setting, leaks nothing.

#[test]
fn missing_input_file() {
    let o = run(kanon().args([
        "anonymize",
        "-c",
        "configs/adult.toml",
        "-i",
        "/nonexistent/adult.parquet",
        "-o",
        "/tmp/kanon-never.parquet",
    ]));
    expect_error(
        &o,
        2,
        &["/nonexistent/adult.parquet", "does not exist", "input.path"],
    );
    let o = run(kanon().args(["anonymize", "-c", "/nonexistent/job.toml"]));
    expect_error(&o, 2, &["/nonexistent/job.toml", "--config"]);
}

#[test]
fn unknown_column() {
    let dir = tempfile::tempdir().unwrap();
    let job = adult_job(dir.path(), |t| {
        t.replace("name = \"race\"", "name = \"rase\"")
    });
    let o = run(kanon()
        .args(["anonymize", "-c"])
        .arg(&job)
        .arg("-o")
        .arg(dir.path().join("o.parquet")));
    expect_error(
        &o,
        2,
        &["`rase`", "has no column", "did you mean `race`", "job.toml"],
    );
}

#[test]
fn qi_values_missing_from_the_hierarchy() {
    let dir = tempfile::tempdir().unwrap();
    let input = dir.path().join("in.parquet");
    write_parquet(
        &input,
        &[small(|i| Some(if i % 20 == 3 { PLANTED } else { "Male" }))],
    );
    let o = run(kanon()
        .args(["anonymize", "-c", "configs/adult.toml", "-i"])
        .arg(&input)
        .arg("-o")
        .arg(dir.path().join("o.parquet")));
    expect_error(&o, 2, &["`sex`", "3 rows", "sex.csv", "in.parquet"]);
    assert_eq!(ls(dir.path()), vec!["in.parquet"]);
}

#[test]
fn nulls_in_a_qi() {
    let dir = tempfile::tempdir().unwrap();
    let input = dir.path().join("in.parquet");
    write_parquet(
        &input,
        &[small(|i| {
            if i == 5 || i == 9 {
                None
            } else {
                male_female(i)
            }
        })],
    );
    let o = run(kanon()
        .args(["anonymize", "-c", "configs/adult.toml", "-i"])
        .arg(&input)
        .arg("-o")
        .arg(dir.path().join("o.parquet"))
        .args(["--weaken-privacy", "--k", "2"]));
    expect_error(&o, 2, &["`sex`", "2 rows are null", "nulls = \"suppress\""]);
    // With the suggested fix the two rows are suppressed and counted.
    let job = adult_job(dir.path(), |t| {
        t.replace("hierarchy = \"", "nulls = \"suppress\"\nhierarchy = \"")
    });
    let out = dir.path().join("o.parquet");
    let o = run(anonymize_cmd(&job, &input, &out).args([
        "--weaken-privacy",
        "--k",
        "2",
        "--suppression-limit",
        "0.5",
    ]));
    assert_eq!(o.status.code(), Some(0), "{}", show(&o));
    assert_eq!(read_parquet(&out).num_rows() as u64 + suppressed(&out), 60);
    assert!(suppressed(&out) >= 2);
}

#[test]
fn wrong_types() {
    let dir = tempfile::tempdir().unwrap();
    // A numeric QI (age, intervals) holding text.
    let t = small(male_female);
    let cols: Vec<ArrayRef> = t
        .schema()
        .fields()
        .iter()
        .zip(t.columns())
        .map(|(f, c)| {
            if f.name() == "age" {
                Arc::new(StringArray::from(
                    (0..60)
                        .map(|i| {
                            if i == 4 {
                                PLANTED.to_string()
                            } else {
                                (20 + i).to_string()
                            }
                        })
                        .collect::<Vec<_>>(),
                )) as ArrayRef
            } else {
                c.clone()
            }
        })
        .collect();
    let fields: Vec<Field> = t
        .schema()
        .fields()
        .iter()
        .map(|f| {
            if f.name() == "age" {
                Field::new("age", DataType::Utf8, true)
            } else {
                f.as_ref().clone()
            }
        })
        .collect();
    let input = dir.path().join("in.parquet");
    write_parquet(
        &input,
        &[RecordBatch::try_new(Arc::new(Schema::new(fields)), cols).unwrap()],
    );
    let o = run(kanon()
        .args([
            "anonymize",
            "-c",
            "configs/adult.toml",
            "--weaken-privacy",
            "--k",
            "2",
            "-i",
        ])
        .arg(&input)
        .arg("-o")
        .arg(dir.path().join("o.parquet")));
    expect_error(
        &o,
        2,
        &["`age`", "1 rows are not numbers", "type = \"categorical\""],
    );
    // A CSV whose types were inferred from the first rows, wrong later on.
    let mut csv = std::fs::read_to_string(root().join("data/adult/adult-sample.csv")).unwrap();
    csv.push_str(&format!(
        "Male;{PLANTED};White;Never-married;Bachelors;United-States;State-gov;Adm-clerical;<=50K\n"
    ));
    let input = dir.path().join("in.csv");
    std::fs::write(&input, csv).unwrap();
    let o = run(kanon()
        .args([
            "anonymize",
            "-c",
            "configs/adult.toml",
            "--set",
            "input.delimiter=;",
            "--set",
            "input.infer_rows=100",
            "-i",
        ])
        .arg(&input)
        .arg("-o")
        .arg(dir.path().join("o.parquet")));
    expect_error(&o, 2, &["in.csv", "`age`", "line 502", "input.infer_rows"]);
    // A type kanon cannot anonymise at all.
    let list =
        ListArray::from_iter_primitive::<Int32Type, _, _>((0..3).map(|i| Some(vec![Some(i)])));
    let b = RecordBatch::try_new(
        Arc::new(Schema::new(vec![Field::new(
            "sex",
            list.data_type().clone(),
            true,
        )])),
        vec![Arc::new(list) as ArrayRef],
    )
    .unwrap();
    write_parquet(&input.with_extension("parquet"), &[b]);
    let o = run(kanon()
        .args(["inspect", "--qi", "sex"])
        .arg(input.with_extension("parquet")));
    expect_error(&o, 2, &["`sex`", "cannot anonymise"]);
}

#[test]
fn k_larger_than_the_row_count() {
    let dir = tempfile::tempdir().unwrap();
    let input = dir.path().join("in.parquet");
    write_parquet(&input, &[small(male_female)]);
    let o = run(kanon()
        .args([
            "anonymize",
            "-c",
            "configs/adult.toml",
            "--weaken-privacy",
            "--k",
            "61",
            "-i",
        ])
        .arg(&input)
        .arg("-o")
        .arg(dir.path().join("o.parquet")));
    expect_error(&o, 3, &["privacy.k", "k = 61", "60", "adult.toml"]);
    assert_eq!(ls(dir.path()), vec!["in.parquet"]);
}

#[test]
fn empty_input() {
    let dir = tempfile::tempdir().unwrap();
    let input = dir.path().join("empty.parquet");
    write_parquet(&input, &[small(male_female).slice(0, 0)]);
    let o = run(kanon()
        .args(["anonymize", "-c", "configs/adult.toml", "-i"])
        .arg(&input)
        .arg("-o")
        .arg(dir.path().join("o.parquet")));
    expect_error(&o, 2, &["empty.parquet", "no rows"]);
    let empty_dir = dir.path().join("nothing");
    std::fs::create_dir(&empty_dir).unwrap();
    let o = run(kanon()
        .args(["anonymize", "-c", "configs/adult.toml", "-i"])
        .arg(&empty_dir)
        .arg("-o")
        .arg(dir.path().join("o.parquet")));
    expect_error(&o, 2, &["nothing", "no Parquet or CSV files", "input.path"]);
    assert_eq!(ls(dir.path()), vec!["empty.parquet", "nothing"]);
}

#[test]
fn corrupt_parquet() {
    let dir = tempfile::tempdir().unwrap();
    let input = dir.path().join("garbage.parquet");
    std::fs::write(&input, format!("{PLANTED} this is not parquet at all")).unwrap();
    let o = run(kanon()
        .args(["anonymize", "-c", "configs/adult.toml", "-i"])
        .arg(&input)
        .arg("-o")
        .arg(dir.path().join("o.parquet")));
    expect_error(&o, 2, &["garbage.parquet", "not a readable Parquet file"]);
    // An encrypted footer (magic PARE) is named as such, not misread.
    let input = dir.path().join("sealed.parquet");
    let mut sealed = format!("PARE{PLANTED}").into_bytes();
    sealed.extend_from_slice(&8u32.to_le_bytes());
    sealed.extend_from_slice(b"PARE");
    std::fs::write(&input, sealed).unwrap();
    let o = run(kanon()
        .args(["anonymize", "-c", "configs/adult.toml", "-i"])
        .arg(&input)
        .arg("-o")
        .arg(dir.path().join("o.parquet")));
    expect_error(&o, 2, &["sealed.parquet", "its footer is encrypted"]);
    // Valid footer, corrupt data in a QI column: found in pass 1.
    let input = dir.path().join("in.parquet");
    write_parquet(&input, &[adult().slice(0, 3000)]);
    corrupt_column(&input, "education");
    let o = run(kanon()
        .args(["anonymize", "-c", "configs/adult.toml", "-i"])
        .arg(&input)
        .arg("-o")
        .arg(dir.path().join("o.parquet")));
    expect_error(&o, 2, &["in.parquet", "corrupt Parquet data"]);
    assert_eq!(
        ls(dir.path()),
        vec!["garbage.parquet", "in.parquet", "sealed.parquet"]
    );
}

#[test]
fn corrupt_data_found_in_pass_two_leaves_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let t = adult().slice(0, 3000);
    let mut fields: Vec<Field> = t
        .schema()
        .fields()
        .iter()
        .map(|f| f.as_ref().clone())
        .collect();
    let mut cols = t.columns().to_vec();
    fields.push(Field::new("extra", DataType::Utf8, false));
    cols.push(Arc::new(StringArray::from(
        (0..3000)
            .map(|i| format!("{PLANTED}-{i}"))
            .collect::<Vec<_>>(),
    )));
    let input = dir.path().join("in.parquet");
    write_parquet(
        &input,
        &[RecordBatch::try_new(Arc::new(Schema::new(fields)), cols).unwrap()],
    );
    // Pass 1 does not read `extra`; the sample of the memory estimate (the
    // first batch of every column) or pass 2 does, and fails.
    corrupt_column(&input, "extra");
    let out_dir = dir.path().join("out");
    std::fs::create_dir(&out_dir).unwrap();
    let o = run(kanon()
        .args([
            "anonymize",
            "-c",
            "configs/adult.toml",
            "--weaken-privacy",
            "--k",
            "5",
            "--set",
            "columns.unlisted=insensitive",
            "-i",
        ])
        .arg(&input)
        .arg("-o")
        .arg(out_dir.join("o.parquet")));
    expect_error(&o, 2, &["in.parquet", "corrupt Parquet data"]);
    assert!(ls(&out_dir).is_empty(), "{:?}", ls(&out_dir));
}

#[test]
fn unreadable_hierarchy_file() {
    let dir = tempfile::tempdir().unwrap();
    let job = adult_job(dir.path(), |t| {
        t.replace("hierarchies/race.csv", "hierarchies/no-such-race.csv")
    });
    let o = run(kanon()
        .args(["anonymize", "-c"])
        .arg(&job)
        .arg("-o")
        .arg(dir.path().join("o.parquet")));
    expect_error(
        &o,
        2,
        &["no-such-race.csv", "`race`", "hierarchy", "job.toml"],
    );
    let bad = dir.path().join("binary.csv");
    std::fs::write(&bad, [0xff, 0xfe, 0x00, 0x81, b'\n']).unwrap();
    let job = adult_job(dir.path(), |t| {
        t.replace(
            &format!(
                "{}/data/adult/hierarchies/race.csv",
                root().canonicalize().unwrap().display()
            ),
            &bad.display().to_string(),
        )
    });
    let o = run(kanon()
        .args(["anonymize", "-c"])
        .arg(&job)
        .arg("-o")
        .arg(dir.path().join("o.parquet")));
    expect_error(&o, 2, &["binary.csv", "`race`"]);
    assert_eq!(ls(dir.path()), vec!["binary.csv", "job.toml"]);
}

#[test]
fn output_exists() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("o.parquet");
    std::fs::write(&out, b"previous release").unwrap();
    let o = run(kanon()
        .args(["anonymize", "-c", "configs/adult.toml", "-o"])
        .arg(&out));
    expect_error(&o, 5, &["o.parquet", "already exists", "--overwrite"]);
    assert_eq!(std::fs::read(&out).unwrap(), b"previous release");
    let o = run(kanon()
        .args(["anonymize", "-c", "configs/adult.toml", "--overwrite", "-o"])
        .arg(&out));
    assert_eq!(o.status.code(), Some(0), "{}", show(&o));
    assert_eq!(read_parquet(&out).num_rows(), 30162);
    assert_eq!(
        ls(dir.path()),
        vec!["_o.parquet.kanon_release.json", "o.parquet"]
    );
}

#[test]
fn bad_settings_name_the_setting() {
    let o = run(kanon().args([
        "anonymize",
        "-c",
        "configs/adult.toml",
        "--set",
        "output.compression_level=99",
        "-o",
        "/tmp/kanon-never-written.parquet",
    ]));
    expect_error(&o, 2, &["output.compression_level"]);
    let o = run(kanon().args([
        "anonymize",
        "-c",
        "configs/adult.toml",
        "--max-file-size",
        "huge",
    ]));
    expect_error(&o, 2, &["output.max_file_size", "huge"]);
    let o = run(kanon().args([
        "anonymize",
        "-c",
        "configs/adult.toml",
        "--set",
        "output.buffer_memory=\"lots\"",
        "-o",
        "/tmp/kanon-never-written.parquet",
    ]));
    expect_error(&o, 2, &["output.buffer_memory", "lots"]);
    let o = run(kanon().args([
        "anonymize",
        "-c",
        "configs/adult.toml",
        "-i",
        "gs://bucket/x.parquet",
    ]));
    expect_error(&o, 2, &["gs://"]);
    let o = run(kanon().args(["anonymize", "-c", "configs/template.toml", "--dry-run"]));
    assert_eq!(
        o.status.code(),
        Some(0),
        "the template job runs: {}",
        show(&o)
    );
}

/// The README's sample summary of the bundled job is what a real run
/// prints (every line but the paths and the times).
#[test]
fn readme_sample_output_is_a_real_run() {
    let readme = std::fs::read_to_string(root().join("README.md")).unwrap();
    let after = readme
        .split_once("printing a summary:\n\n```text\n")
        .expect("the README shows the summary of the quick start")
        .1;
    let sample = after.split_once("```").unwrap().0;
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("adult-k10.parquet");
    let o = run(kanon()
        .args(["anonymize", "--config", "configs/adult.toml", "--output"])
        .arg(&out));
    assert!(o.status.success(), "{}", show(&o));
    let real = stdout(&o);
    let lines = |text: &str| -> Vec<String> {
        text.lines()
            .filter(|l| !l.starts_with("kanon anonymize:") && !l.trim_start().starts_with("time"))
            .map(str::to_string)
            .collect()
    };
    assert_eq!(
        lines(sample),
        lines(&real),
        "README sample vs a real run:\n{real}"
    );
}

/// The README's privacy-model table names exactly the models of the
/// engine's registry, and every job it points to exists.
#[test]
fn the_readme_lists_the_registered_privacy_models() {
    let mut registered: Vec<&str> = kanon_engine::privacy::registry::all()
        .iter()
        .map(|m| m.name)
        .collect();
    registered.sort_unstable();
    let readme = std::fs::read_to_string(root().join("README.md")).unwrap();
    let table = readme
        .split_once("| model | protects against | parameters | job on the bundled data |")
        .expect("the README's privacy-model table")
        .1;
    let rows: Vec<&str> = table
        .lines()
        .skip(2)
        .take_while(|l| l.starts_with("| `"))
        .collect();
    let mut in_readme: Vec<&str> = rows.iter().map(|l| l.split('`').nth(1).unwrap()).collect();
    in_readme.sort_unstable();
    assert_eq!(in_readme, registered, "README privacy-model table");
    for row in rows {
        for job in row.split('`').filter(|c| c.starts_with("configs/")) {
            assert!(
                root().join(job).is_file(),
                "README names {job}, which does not exist"
            );
        }
    }
}

/// The README's algorithm table is generated from the engine's registry
/// (each algorithm's summary and capabilities): a new built-in algorithm is
/// a module and a `Registration`, and `KANON_BLESS=1 cargo test -p kanon
/// --test cli docs_and_help` writes its row. `--help` lists the registry too.
#[test]
fn docs_and_help_list_the_registered_algorithms_and_metrics() {
    let path = root().join("README.md");
    let readme = std::fs::read_to_string(&path).unwrap();
    let (head, rest) = readme
        .split_once(ALGORITHM_TABLE)
        .expect("the README's algorithm table");
    let end = rest.find("\n\n").expect("a blank line after the table");
    let generated = algorithm_table();
    if rest[..end] != generated {
        if std::env::var_os("KANON_BLESS").is_some() {
            std::fs::write(
                &path,
                format!("{head}{ALGORITHM_TABLE}{generated}{}", &rest[end..]),
            )
            .unwrap();
        } else {
            panic!(
                "README.md's algorithm table is not the registry's; run `KANON_BLESS=1 cargo test -p kanon --test cli docs_and_help` to write it:\n{generated}"
            );
        }
    }
    let help = stdout(&run(kanon().args(["anonymize", "--help"])));
    for name in kanon_engine::algorithms::registry::names() {
        assert!(help.contains(name), "kanon anonymize --help lacks {name}");
    }
    // The README names every built-in utility metric.
    let metrics = readme
        .split_once("under `utility_metrics`")
        .expect("the README's utility metrics")
        .1;
    let metrics = &metrics[..metrics.find("\n\n").unwrap_or(metrics.len())];
    for m in kanon_engine::metrics::utility::all() {
        assert!(
            metrics.contains(&format!("`{}`", m.name)),
            "README lacks the utility metric {}",
            m.name
        );
    }
}

/// What precedes the generated algorithm table in the README.
const ALGORITHM_TABLE: &str = "<!-- generated from the registry (kanon_engine::algorithms::registry) by crates/runner/tests/cli.rs: KANON_BLESS=1 cargo test -p kanon --test cli docs_and_help -->\n";

/// The README's table of the registered algorithms, in registry order.
fn algorithm_table() -> String {
    let yes_no = |b: bool| if b { "yes" } else { "no" };
    let mut out = String::from(
        "| name | what it does | l and other models | block-wise |\n|---|---|---|---|",
    );
    for r in kanon_engine::algorithms::registry::all() {
        // Summaries are plain text (`--help` prints them): `<...>` is not HTML.
        let summary = r.summary.replace('<', "&lt;").replace('>', "&gt;");
        out.push_str(&format!(
            "\n| `{}` | {summary} | {} | {} |",
            r.name,
            yes_no(r.capabilities.l_diversity),
            yes_no(r.capabilities.block_wise)
        ));
    }
    out
}

/// A dry run writes nothing, so asking it for a report or metrics is an
/// error naming both flags, not a silently missing file.
#[test]
fn a_dry_run_refuses_to_be_asked_for_a_report_or_metrics() {
    let dir = tempfile::tempdir().unwrap();
    let job = adult_job(dir.path(), |s| s);
    for flag in ["--report", "--metrics-json"] {
        let o = run(kanon()
            .args(["anonymize", "--dry-run", "-c"])
            .arg(&job)
            .arg(flag)
            .arg(dir.path().join("out")));
        assert_eq!(o.status.code(), Some(2), "{}", show(&o));
        let err = stderr(&o);
        assert!(err.contains("--dry-run") && err.contains(flag), "{err}");
    }
    assert_eq!(ls(dir.path()), ["job.toml"]);
}

/// A Parquet release's manifest names its files and certificate; `kanon
/// verify` checks the release against it, which catches a partial copy and
/// a release swapped for another one that also satisfies the job.
#[test]
fn the_manifest_is_checked_by_verify() {
    let dir = tempfile::tempdir().unwrap();
    let one = dir.path().join("one.parquet");
    let parts = dir.path().join("parts");
    let other = dir.path().join("k20.parquet");
    for (out, extra) in [
        (&one, vec![]),
        (
            &parts,
            vec![
                "--max-file-size",
                "16kB",
                "--set",
                "output.row_group_rows=4096",
            ],
        ),
        (&other, vec!["--set", "privacy.k=20"]),
    ] {
        let o = run(kanon()
            .args(["anonymize", "-q", "-c", "configs/adult.toml", "-o"])
            .arg(out)
            .args(&extra));
        assert_eq!(o.status.code(), Some(0), "{}", show(&o));
    }
    let verify = |release: &std::path::Path| {
        run(kanon()
            .args(["verify", "-c", "configs/adult.toml", "-i"])
            .arg(release))
    };
    for release in [&one, &parts] {
        let o = verify(release);
        assert_eq!(o.status.code(), Some(0), "{}", show(&o));
        assert!(stdout(&o).contains("manifest holds"), "{}", show(&o));
    }
    // Another release that satisfies k = 10 too, in place of this one: only
    // the manifest tells.
    std::fs::copy(&other, &one).unwrap();
    let o = verify(&one);
    assert_eq!(o.status.code(), Some(1), "{}", show(&o));
    assert!(stdout(&o).contains("satisfies k-anonymity"), "{}", show(&o));
    assert!(
        stdout(&o).contains("does NOT match the release"),
        "{}",
        show(&o)
    );
    // A partial copy: one part missing.
    let part = ls(&parts)
        .into_iter()
        .find(|f| f.starts_with("part-"))
        .unwrap();
    std::fs::remove_file(parts.join(part)).unwrap();
    let o = verify(&parts);
    assert_eq!(o.status.code(), Some(1), "{}", show(&o));
    assert!(
        stdout(&o).contains("does NOT match the release"),
        "{}",
        show(&o)
    );
}

/// Every `configs/adult-<model>.toml` of the privacy models beyond k and l
/// (issue 36) runs on the bundled data, and `kanon verify` accepts its
/// release under that model, which the certificate names.
#[test]
fn each_model_job_on_the_bundled_data_runs_and_verifies() {
    for (model, described) in [
        (
            "beta-likeness",
            "k-anonymity (k = 10), enhanced β-likeness (β = 1) on `salary-class`",
        ),
        (
            "delta-disclosure",
            "k-anonymity (k = 10), δ-disclosure privacy (δ = 1.2, log base 2) on `salary-class`",
        ),
        // The risk models stand at k = 1: only they are named.
        (
            "average-risk",
            "average re-identification risk at most 0.05 (at most 0.02 of the records above risk 0.2)",
        ),
        (
            "population-uniqueness",
            "population uniqueness at most 0.001 (Dankar model, population 301620)",
        ),
        (
            "k-map",
            "k-map (k = 10, population 301620, significance 0.01, Poisson)",
        ),
        (
            "delta-presence",
            "k-anonymity (k = 5), delta-presence (delta in [0.05, 0.5], research subset `in_study`)",
        ),
    ] {
        let dir = tempfile::tempdir().unwrap();
        let out = dir.path().join(format!("adult-{model}.parquet"));
        let job = format!("configs/adult-{model}.toml");
        let o = run(kanon().args(["anonymize", "-c", &job, "-o"]).arg(&out));
        assert_eq!(o.status.code(), Some(0), "{model}: {}", show(&o));
        assert!(stdout(&o).contains(described), "{model}: {}", show(&o));
        let o = run(kanon().args(["verify", "-c", &job, "-i"]).arg(&out));
        assert_eq!(o.status.code(), Some(0), "{model}: {}", show(&o));
        assert!(
            stdout(&o).contains(&format!("satisfies {described} (")),
            "{model}: {}",
            show(&o)
        );
        let manifest: serde_json::Value = serde_json::from_slice(
            &std::fs::read(
                dir.path()
                    .join(format!("_adult-{model}.parquet.kanon_release.json")),
            )
            .unwrap(),
        )
        .unwrap();
        assert!(
            manifest["certificate"]["privacy"]["models"][model].is_object(),
            "{model}: {}",
            manifest["certificate"]["privacy"]
        );
    }
}

/// Issue 36: the delta-presence job publishes study records only (never
/// the subset column), says how many population rows it withheld, and
/// `kanon verify` recounts the population itself: the same release fails
/// under stricter bounds, and against a population that is only the study
/// (every class then is all study records, δ = 1).
#[test]
fn the_delta_presence_job_publishes_the_study_and_verify_recounts_the_population() {
    const JOB: &str = "configs/adult-delta-presence.toml";
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("presence.parquet");
    let o = run(kanon().args(["anonymize", "-c", JOB, "-o"]).arg(&out));
    assert_eq!(o.status.code(), Some(0), "{}", show(&o));
    assert!(
        stdout(&o).contains("rows outside the research subset withheld (delta-presence)"),
        "{}",
        show(&o)
    );
    let population = read_parquet(&root().join("data/adult/adult-presence.parquet"));
    let study = arrow::compute::filter_record_batch(
        &population,
        population
            .column_by_name("in_study")
            .unwrap()
            .as_any()
            .downcast_ref::<arrow::array::BooleanArray>()
            .unwrap(),
    )
    .unwrap();
    let release = read_parquet(&out);
    assert!(release.column_by_name("in_study").is_none());
    assert!(release.num_rows() > 0 && release.num_rows() <= study.num_rows());
    // The certificate accounts for every row: the published, the withheld
    // population, the suppressed study records; and names what δ achieved.
    let manifest: serde_json::Value = serde_json::from_slice(
        &std::fs::read(dir.path().join("_presence.parquet.kanon_release.json")).unwrap(),
    )
    .unwrap();
    let cert = &manifest["certificate"];
    assert_eq!(
        cert["rows_in"].as_u64().unwrap() - cert["rows_suppressed"].as_u64().unwrap(),
        release.num_rows() as u64,
        "{cert}"
    );
    assert_eq!(
        cert["verified"]["outside_rows"].as_u64(),
        Some((population.num_rows() - study.num_rows()) as u64),
        "{cert}"
    );
    assert!(
        cert["verified"]["models"]
            .to_string()
            .contains("delta from"),
        "{cert}"
    );
    let o = run(kanon().args(["verify", "-c", JOB, "-i"]).arg(&out));
    assert_eq!(o.status.code(), Some(0), "{}", show(&o));
    assert!(
        stdout(&o).contains("population recounted: delta from"),
        "{}",
        show(&o)
    );
    let o = run(kanon()
        .args([
            "verify",
            "-c",
            JOB,
            "--set",
            "privacy.models.delta-presence.d_max=0.3",
            // Any change of a model's parameters counts as weakening.
            "--weaken-privacy",
            "-i",
        ])
        .arg(&out));
    assert_eq!(o.status.code(), Some(1), "{}", show(&o));
    assert!(
        stdout(&o).contains("violate delta-presence"),
        "{}",
        show(&o)
    );
    let only_study = dir.path().join("study.parquet");
    write_parquet(&only_study, &[study]);
    let o = run(kanon()
        .args(["verify", "-c", JOB, "--set"])
        .arg(format!("input.path={}", only_study.display()))
        .arg("-i")
        .arg(&out));
    assert_eq!(o.status.code(), Some(1), "{}", show(&o));
    assert!(
        stdout(&o).contains("violate delta-presence")
            && stdout(&o).contains("delta from 1.0000 to 1.0000"),
        "{}",
        show(&o)
    );
    assert_no_leak(&o);
}

/// Issue 36: the transformation jobs on the bundled data (top and bottom
/// coding, microaggregation, cell suppression) run, `kanon verify`
/// accepts each release, and each release shows its transformation.
#[test]
fn each_transformation_job_on_the_bundled_data_runs_and_verifies() {
    let labels = |path: &std::path::Path, column: &str| column_text(&read_parquet(path), column);
    let rows = adult().num_rows();
    for name in ["top-bottom-coding", "microaggregation", "cell-suppression"] {
        let dir = tempfile::tempdir().unwrap();
        let out = dir.path().join(format!("adult-{name}.parquet"));
        let job = format!("configs/adult-{name}.toml");
        let o = run(kanon().args(["anonymize", "-c", &job, "-o"]).arg(&out));
        assert_eq!(o.status.code(), Some(0), "{name}: {}", show(&o));
        let o = run(kanon().args(["verify", "-c", &job, "-i"]).arg(&out));
        assert_eq!(o.status.code(), Some(0), "{name}: {}", show(&o));
        let age = labels(&out, "age");
        match name {
            "top-bottom-coding" => {
                let numbers = |l: &str| -> Vec<f64> {
                    l.split(|c: char| !c.is_ascii_digit())
                        .filter_map(|t| t.parse().ok())
                        .collect()
                };
                assert!(
                    age.iter().any(|l| l.starts_with(">=")),
                    "the top code is published open-ended"
                );
                assert!(
                    age.iter()
                        .all(|l| numbers(l).iter().all(|v| (20.0..=80.0).contains(v))),
                    "no age beyond the codes"
                );
            }
            "microaggregation" => {
                assert!(
                    age.iter().all(|l| l.parse::<f64>().is_ok()),
                    "every class publishes its mean age"
                );
            }
            _ => {
                assert_eq!(age.len(), rows, "no record is suppressed");
                // Without cell suppression the same job withholds rows.
                let whole = dir.path().join("rows.parquet");
                let o = run(kanon()
                    .args([
                        "anonymize",
                        "-c",
                        &job,
                        "--set",
                        "algorithm.cell_suppression=false",
                        "-o",
                    ])
                    .arg(&whole));
                assert_eq!(o.status.code(), Some(0), "{name}: {}", show(&o));
                assert!(labels(&whole, "age").len() < rows, "{}", show(&o));
            }
        }
    }
}

/// Issue 36: the differential-privacy job (SafePub) runs and verifies on
/// the bundled data; with `KANON_DP_KEY` its draws repeat byte for byte,
/// without it they are fresh and the metrics say so; the certificate
/// records the budget.
#[test]
fn the_differential_privacy_job_runs_verifies_and_draws_from_its_secret() {
    const JOB: &str = "configs/adult-differential-privacy.toml";
    const KEY: &str = "cli-test-key-of-differential-privacy-0123456789";
    let dir = tempfile::tempdir().unwrap();
    let rows = adult().num_rows();
    let mut published = Vec::new();
    for (name, key) in [("a", Some(KEY)), ("b", Some(KEY)), ("fresh", None)] {
        let out = dir.path().join(format!("{name}.parquet"));
        let metrics = dir.path().join(format!("{name}.json"));
        let mut c = kanon();
        c.args(["anonymize", "-c", JOB, "-o"])
            .arg(&out)
            .arg("--metrics-json")
            .arg(&metrics);
        if let Some(k) = key {
            c.env("KANON_DP_KEY", k);
        }
        let o = run(&mut c);
        assert_eq!(o.status.code(), Some(0), "{name}: {}", show(&o));
        let draws = if key.is_some() { "keyed" } else { "fresh" };
        assert!(
            stdout(&o).contains(&format!("left out; draws {draws}")),
            "{name}: {}",
            show(&o)
        );
        let o = run(kanon().args(["verify", "-c", JOB, "-i"]).arg(&out));
        assert_eq!(o.status.code(), Some(0), "{name}: {}", show(&o));
        let m: serde_json::Value =
            serde_json::from_str(&std::fs::read_to_string(&metrics).unwrap()).unwrap();
        let details = &m["details"];
        assert_eq!(
            details["randomness"],
            if key.is_some() { "keyed" } else { "fresh" },
            "{m}"
        );
        assert_eq!(details["k"], 119, "{m}");
        let n = column_text(&read_parquet(&out), "age").len();
        assert!(n > 0 && n < rows, "{name}: {n} of {rows} published");
        published.push(std::fs::read(&out).unwrap());
    }
    assert_eq!(
        published[0], published[1],
        "the key and seed repeat the release"
    );
    let cert = |name: &str| -> serde_json::Value {
        let path = dir
            .path()
            .join(format!("_{name}.parquet.kanon_release.json"));
        serde_json::from_str(&std::fs::read_to_string(path).unwrap()).unwrap()
    };
    let text = cert("a").to_string();
    assert!(
        text.contains("differential-privacy") && text.contains("epsilon"),
        "{text}"
    );
    // The input's fingerprint would tell an attacker who knows all records
    // but one which input was used: keyed with the secret, or absent.
    let keyed = cert("a")["certificate"]["input"]["fingerprint"].clone();
    assert!(
        keyed
            .as_str()
            .is_some_and(|f| f.starts_with("hmac-sha256:")),
        "{keyed}"
    );
    assert_eq!(keyed, cert("b")["certificate"]["input"]["fingerprint"]);
    assert!(
        cert("fresh")["certificate"]["input"]["fingerprint"].is_null(),
        "{}",
        cert("fresh")
    );
}

/// The jobs on the ARX team's benchmark sets (issue 34) run and verify from
/// a clean clone (their data and hierarchies are in the repository), and
/// every value they publish is a label of the job's hierarchy: no
/// window, since they declare none.
#[test]
fn the_arx_benchmark_jobs_run_verify_and_publish_hierarchy_nodes() {
    for (set, rows) in [("creditcard", 30_000), ("mach2019", 73_489)] {
        let dir = tempfile::tempdir().unwrap();
        let out = dir.path().join(format!("{set}.parquet"));
        let job = format!("configs/{set}.toml");
        let o = run(kanon()
            .args(["anonymize", "-c", &job, "-q", "-o"])
            .arg(&out));
        assert_eq!(o.status.code(), Some(0), "{set}: {}", show(&o));
        let o = run(kanon().args(["verify", "-c", &job, "-i"]).arg(&out));
        assert_eq!(o.status.code(), Some(0), "{set}: {}", show(&o));
        let release = read_parquet(&out);
        assert_eq!(release.num_rows(), rows, "{set}");
        let spec: kanon_engine::spec::JobSpec =
            toml::from_str(&std::fs::read_to_string(root().join(&job)).unwrap()).unwrap();
        for a in spec.quasi_identifiers() {
            let file = root().join(
                a.hierarchy
                    .as_deref()
                    .expect("every QI has a hierarchy file"),
            );
            let labels: std::collections::HashSet<String> = std::fs::read_to_string(&file)
                .unwrap()
                .lines()
                .flat_map(|l| l.split(';').map(str::to_string).collect::<Vec<_>>())
                .collect();
            let column =
                arrow::compute::cast(release.column_by_name(&a.name).unwrap(), &DataType::Utf8)
                    .unwrap();
            let column = column.as_any().downcast_ref::<StringArray>().unwrap();
            for v in column.iter() {
                let v = v.expect("no nulls");
                assert!(
                    labels.contains(v),
                    "{set}: `{}` publishes a value that is no node of its hierarchy",
                    a.name
                );
            }
        }
    }
}
