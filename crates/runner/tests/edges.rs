//! Issue 15, "fail closed at every edge", through the real `kanon` binary:
//! each test reproduces one way today's main published or lied, and checks
//! that the job now stops with a clear error and writes nothing (or, where
//! the job opts in explicitly, does what it says).

mod common;

use std::collections::HashMap;
use std::sync::Arc;

use arrow::array::{Array, ArrayRef, Int64Array, RecordBatch, StringArray};
use arrow::datatypes::{Field, Schema};
use common::*;

/// Adult with two more columns: a direct identifier and a free-text note.
fn adult_with_ids() -> RecordBatch {
    let t = adult_with_patient_ids(3000);
    let notes = StringArray::from(vec!["n"; t.num_rows()]);
    with_columns(
        &t,
        vec![(
            Field::new("note", arrow::datatypes::DataType::Utf8, false),
            Arc::new(notes) as ArrayRef,
        )],
    )
}

fn identifying(name: &str) -> String {
    format!("\n[[attributes]]\nname = \"{name}\"\nrole = \"identifying\"\n")
}

#[test]
fn a_misspelt_identifying_column_is_an_error_not_a_publication() {
    let dir = tempfile::tempdir().unwrap();
    let input = dir.path().join("in.parquet");
    write_parquet(&input, &[adult_with_ids()]);
    let out = dir.path().join("out.parquet");
    let job = adult_job(dir.path(), |t| t + &identifying("patient_idd"));
    let o = run(&mut anonymize_cmd(&job, &input, &out));
    assert_eq!(o.status.code(), Some(2), "{}", show(&o));
    let err = stderr(&o);
    assert!(
        err.contains("patient_idd") && err.contains("did you mean `patient_id`"),
        "{err}"
    );
    assert!(!out.exists());
}

#[test]
fn unlisted_columns_are_refused_unless_the_job_opts_in() {
    let dir = tempfile::tempdir().unwrap();
    let input = dir.path().join("in.parquet");
    write_parquet(&input, &[adult_with_ids()]);
    let out = dir.path().join("out.parquet");
    // Only patient_id declared: `note` has no role.
    let job = adult_job(dir.path(), |t| t + &identifying("patient_id"));
    let o = run(&mut anonymize_cmd(&job, &input, &out));
    assert_eq!(o.status.code(), Some(2), "{}", show(&o));
    let err = stderr(&o);
    assert!(
        err.contains("`note`")
            && err.contains("name = \"note\"")
            && err.contains("unlisted = \"insensitive\""),
        "{err}"
    );
    assert!(
        !err.contains("`patient_id`,"),
        "declared columns are not listed: {err}"
    );
    assert!(!out.exists());

    // Opting in publishes `note` unchanged; `identifying` drops it.
    for (policy, kept) in [("insensitive", true), ("identifying", false)] {
        let job = adult_job(dir.path(), |t| {
            format!(
                "[columns]\nunlisted = \"{policy}\"\n{t}{}",
                identifying("patient_id")
            )
        });
        let o = run(kanon()
            .args(["anonymize", "--overwrite", "-c"])
            .arg(&job)
            .arg("-i")
            .arg(&input)
            .arg("-o")
            .arg(&out));
        assert_eq!(o.status.code(), Some(0), "{}", show(&o));
        let release = read_parquet(&out);
        assert!(release.schema().field_with_name("patient_id").is_err());
        assert_eq!(
            release.schema().field_with_name("note").is_ok(),
            kept,
            "{policy}"
        );
    }
}

#[test]
fn the_environment_may_not_weaken_the_job_file() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("out.parquet");
    let job = adult_job(dir.path(), |t| t);
    for (var, value) in [
        ("KANON_PRIVACY_K", "1"),
        ("KANON_PRIVACY_K", "5"),
        ("KANON_PRIVACY_SUPPRESSION_LIMIT", "0.5"),
    ] {
        let o = run(kanon()
            .args(["anonymize", "-c"])
            .arg(&job)
            .arg("-o")
            .arg(&out)
            .env(var, value));
        assert_eq!(o.status.code(), Some(2), "{var}={value}: {}", show(&o));
        let err = stderr(&o);
        assert!(
            err.contains(var) && err.contains("--weaken-privacy"),
            "{err}"
        );
        assert!(!out.exists());
    }
    // On purpose: allowed, and the override is logged with old and new values.
    let o = run(kanon()
        .args(["anonymize", "-v", "--weaken-privacy", "-c"])
        .arg(&job)
        .arg("-o")
        .arg(&out)
        .env("KANON_PRIVACY_K", "5"));
    assert_eq!(o.status.code(), Some(0), "{}", show(&o));
    let err = stderr(&o);
    assert!(
        err.contains("privacy.k") && err.contains("old=10") && err.contains("new=5"),
        "{err}"
    );
    // k = 1 is never a privacy model, even on purpose.
    let o = run(kanon()
        .args([
            "anonymize",
            "--weaken-privacy",
            "--overwrite",
            "--k",
            "1",
            "-c",
        ])
        .arg(&job)
        .arg("-o")
        .arg(&out));
    assert_eq!(o.status.code(), Some(2), "{}", show(&o));
    assert!(stderr(&o).contains("k >= 2"), "{}", show(&o));
}

#[test]
fn a_failing_metrics_file_publishes_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("out.parquet");
    let job = adult_job(dir.path(), |t| t);
    let metrics = dir.path().join("no-such-dir").join("m.json");
    let o = run(kanon()
        .args(["anonymize", "-c"])
        .arg(&job)
        .arg("-o")
        .arg(&out)
        .arg("--metrics-json")
        .arg(&metrics));
    assert_ne!(o.status.code(), Some(0), "{}", show(&o));
    assert!(stderr(&o).contains("--metrics-json"), "{}", show(&o));
    assert!(
        !out.exists(),
        "the release was published although its metrics failed"
    );
    assert_eq!(ls(dir.path()), vec!["job.toml"], "nothing left behind");
    // And with a writable path both appear.
    let metrics = dir.path().join("m.json");
    let o = run(kanon()
        .args(["anonymize", "-c"])
        .arg(&job)
        .arg("-o")
        .arg(&out)
        .arg("--metrics-json")
        .arg(&metrics));
    assert_eq!(o.status.code(), Some(0), "{}", show(&o));
    let json: serde_json::Value =
        serde_json::from_slice(&std::fs::read(&metrics).unwrap()).unwrap();
    assert_eq!(json["files"][0], out.display().to_string());
}

#[test]
fn input_schema_metadata_is_not_copied_into_the_release() {
    let dir = tempfile::tempdir().unwrap();
    let t = adult().slice(0, 2000);
    let pandas = r#"{"index_columns": ["__index_level_0__"], "columns": [{"name": "patient_id"}]}"#;
    let schema = Schema::new_with_metadata(
        t.schema()
            .fields()
            .iter()
            .map(|f| f.as_ref().clone())
            .collect::<Vec<_>>(),
        HashMap::from([("pandas".to_string(), pandas.to_string())]),
    );
    let input = dir.path().join("in.parquet");
    write_parquet(
        &input,
        &[RecordBatch::try_new(Arc::new(schema), t.columns().to_vec()).unwrap()],
    );
    let out = dir.path().join("out.parquet");
    let job = adult_job(dir.path(), |t| t);
    let o = run(&mut anonymize_cmd(&job, &input, &out));
    assert_eq!(o.status.code(), Some(0), "{}", show(&o));
    let kv = parquet_metadata(std::fs::read(&out).unwrap());
    assert!(kv.iter().all(|(k, _)| k != "pandas"), "{kv:?}");
    assert!(kv.iter().any(|(k, _)| k == "kanon.version"));
    // The same in SQL: anonymize() releases carry none of it either.
    let sql_out = dir.path().join("sql.parquet");
    let o = run(kanon()
        .arg("sql")
        .arg(
            "SELECT * FROM anonymize('t', 'k = 10, qi = [\"age\", \"sex\", \"race\"], unlisted = \"insensitive\"')",
        )
        .arg("--table")
        .arg(format!("t={}", input.display()))
        .arg("--output")
        .arg(&sql_out));
    assert_eq!(o.status.code(), Some(0), "{}", show(&o));
    let kv = parquet_metadata(std::fs::read(&sql_out).unwrap());
    assert!(kv.iter().all(|(k, _)| k != "pandas"), "{kv:?}");
    assert!(kv.iter().any(|(k, _)| k == "kanon.version"), "{kv:?}");
}

#[test]
fn datafly_that_would_suppress_every_row_is_infeasible() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("out.parquet");
    let job = adult_job(dir.path(), |t| {
        set_algorithm(t, "datafly").replace("\nk = 10\n", "\nk = 10\nsuppression_limit = 1.0\n")
    });
    let o = run(kanon()
        .args(["anonymize", "-c"])
        .arg(&job)
        .arg("-o")
        .arg(&out));
    // Either a real generalisation is published or the job is infeasible;
    // never an empty release with exit 0.
    if o.status.code() == Some(0) {
        let release = read_parquet(&out);
        assert!(release.num_rows() > 0, "{}", show(&o));
    } else {
        assert_eq!(o.status.code(), Some(3), "{}", show(&o));
        assert!(!out.exists());
    }
}

#[test]
fn duplicated_csv_header_columns_are_refused() {
    let dir = tempfile::tempdir().unwrap();
    let csv = dir.path().join("in.csv");
    let mut text = String::from("sex;age;race;marital-status;education;native-country;workclass;occupation;salary-class;occupation\n");
    let sample = std::fs::read_to_string(root().join("data/adult/adult-sample.csv")).unwrap();
    for line in sample.lines().skip(1) {
        text.push_str(line);
        text.push_str(";Sales\n");
    }
    std::fs::write(&csv, text).unwrap();
    let out = dir.path().join("out.parquet");
    let job = adult_job(dir.path(), |t| t.replace("k = 10", "k = 2"));
    let o = run(anonymize_cmd(&job, &csv, &out).args(["--set", "input.delimiter=;"]));
    assert_eq!(o.status.code(), Some(2), "{}", show(&o));
    assert!(stderr(&o).contains("occupation"), "{}", show(&o));
    assert!(!out.exists());
}

/// Adult with an `id` column holding each row's input position.
fn adult_with_positions(dir: &std::path::Path) -> std::path::PathBuf {
    let t = adult();
    let n = t.num_rows();
    let mut fields: Vec<Field> = t
        .schema()
        .fields()
        .iter()
        .map(|f| f.as_ref().clone())
        .collect();
    let mut cols: Vec<ArrayRef> = t.columns().to_vec();
    fields.push(Field::new("id", arrow::datatypes::DataType::Int64, false));
    cols.push(Arc::new(Int64Array::from(
        (0..n as i64).collect::<Vec<_>>(),
    )));
    let input = dir.join("in.parquet");
    write_parquet(
        &input,
        &[RecordBatch::try_new(Arc::new(Schema::new(fields)), cols).unwrap()],
    );
    input
}

fn ids(path: &std::path::Path) -> Vec<i64> {
    let r = read_parquet(path);
    r.column_by_name("id")
        .unwrap()
        .as_any()
        .downcast_ref::<Int64Array>()
        .unwrap()
        .values()
        .to_vec()
}

#[test]
fn row_position_carries_no_input_position() {
    let dir = tempfile::tempdir().unwrap();
    let input = adult_with_positions(dir.path());
    let with_id = |t: String| t + "\n[[attributes]]\nname = \"id\"\nrole = \"insensitive\"\n";
    let spill_dir = tempfile::tempdir().unwrap();
    // `buffer`: the release held in memory (pass 1 keeps the input's
    // batches), or a budget so small that pass 2 reads the input again and
    // spills buckets of `buffer_rows` rows.
    let release = |k: u32, buffer_rows: u64, buffer: &str, name: &str| {
        let job = adult_job(dir.path(), |t| {
            with_id(t).replace("\nk = 10\n", &format!("\nk = {k}\n"))
        });
        let out = dir.path().join(name);
        let o = run(kanon()
            .env("TMPDIR", spill_dir.path())
            .args(["anonymize", "-c"])
            .arg(&job)
            .arg("-i")
            .arg(&input)
            .arg("-o")
            .arg(&out)
            .args(["--set", &format!("output.buffer_rows={buffer_rows}")])
            .args(["--set", &format!("output.buffer_memory={buffer:?}")]));
        assert_eq!(o.status.code(), Some(0), "{}", show(&o));
        out
    };
    let a = release(10, 2_000_000, "2GB", "a.parquet");
    let b = release(20, 2_000_000, "2GB", "b.parquet");
    let (ia, ib) = (ids(&a), ids(&b));
    let n = ia.len();
    assert_eq!(n, 30162);
    // Joining two releases of the same input by row number pairs unrelated
    // people: about 1 in n rows by chance, not the thousands of input order.
    let same = ia.iter().zip(&ib).filter(|(x, y)| x == y).count();
    assert!(same < 30, "{same} rows line up between the two releases");
    // Row position says nothing about input position: rank correlation ~ 0.
    let mean = (n as f64 - 1.0) / 2.0;
    let cov: f64 = ia
        .iter()
        .enumerate()
        .map(|(i, &v)| (i as f64 - mean) * (v as f64 - mean))
        .sum();
    let var: f64 = (0..n).map(|i| (i as f64 - mean).powi(2)).sum();
    let rho = cov / var;
    assert!(rho.abs() < 0.05, "Spearman correlation {rho}");
    // Same job, same seed: the same bytes; a small buffer (buckets of
    // classes spilled to TMPDIR) writes the very same file as the same
    // buckets held in memory, leaves nothing behind, and removes a spill
    // directory a killed job left.
    let again = release(10, 2_000_000, "2GB", "a2.parquet");
    assert!(std::fs::read(&a).unwrap() == std::fs::read(&again).unwrap());
    let stale = spill_dir.path().join(".kanon-spill-00000000-1-x");
    std::fs::create_dir(&stale).unwrap();
    std::fs::File::open(&stale)
        .unwrap()
        .set_modified(std::time::SystemTime::now() - std::time::Duration::from_secs(8 * 86_400))
        .unwrap();
    let bucketed = release(10, 1000, "1KB", "a3.parquet");
    let in_memory = release(10, 1000, "2GB", "a4.parquet");
    assert!(std::fs::read(&in_memory).unwrap() == std::fs::read(&bucketed).unwrap());
    // Held through pass 1 (the input's batches fit) but spilled in pass 2.
    let held_then_spilled = release(10, 1000, "1MB", "a5.parquet");
    assert!(std::fs::read(&in_memory).unwrap() == std::fs::read(&held_then_spilled).unwrap());
    // Smaller buckets write smaller batches (other pages), never other
    // rows in another order.
    assert_eq!(ids(&bucketed), ia);
    assert!(
        ls(spill_dir.path()).is_empty(),
        "{:?}",
        ls(spill_dir.path())
    );
    // Another seed, another order.
    let job = adult_job(dir.path(), |t| {
        assert!(t.contains("\nseed = 1\n"));
        with_id(t).replace("\nseed = 1\n", "\nseed = 99\n")
    });
    let other = dir.path().join("seed.parquet");
    let o = run(&mut anonymize_cmd(&job, &input, &other));
    assert_eq!(o.status.code(), Some(0), "{}", show(&o));
    let io = ids(&other);
    let same = ia.iter().zip(&io).filter(|(x, y)| x == y).count();
    assert!(same < 30, "{same} rows line up between two seeds");
}

#[test]
fn timestamps_with_named_time_zones_are_quasi_identifiers() {
    use arrow::array::TimestampSecondArray;
    for tz in ["UTC", "+00:00", "Europe/Paris", "America/New_York"] {
        let dir = tempfile::tempdir().unwrap();
        let n = 200;
        let seen = TimestampSecondArray::from(
            (0..n)
                .map(|i| 1_700_000_000 + (i % 20) * 86_400)
                .collect::<Vec<i64>>(),
        )
        .with_timezone(tz);
        let v = StringArray::from(
            (0..n)
                .map(|i| if i % 3 == 0 { "a" } else { "b" })
                .collect::<Vec<_>>(),
        );
        let schema = Schema::new(vec![
            Field::new("seen", seen.data_type().clone(), false),
            Field::new("v", arrow::datatypes::DataType::Utf8, false),
        ]);
        let input = dir.path().join("in.parquet");
        write_parquet(
            &input,
            &[RecordBatch::try_new(Arc::new(schema), vec![Arc::new(seen), Arc::new(v)]).unwrap()],
        );
        let job = dir.path().join("job.toml");
        std::fs::write(&job, "[privacy]\nk = 5\n[[attributes]]\nname = \"seen\"\nrole = \"quasi-identifier\"\n[[attributes]]\nname = \"v\"\nrole = \"sensitive\"\n").unwrap();
        let out = dir.path().join("out.parquet");
        let o = run(&mut anonymize_cmd(&job, &input, &out));
        assert_eq!(o.status.code(), Some(0), "tz {tz}: {}", show(&o));
    }
}

#[test]
fn an_http_endpoint_without_allow_http_names_the_flag() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("out.parquet");
    let o = run(kanon()
        .args([
            "anonymize",
            "-c",
            "configs/adult.toml",
            "--s3-endpoint",
            "http://127.0.0.1:9",
            "-i",
            "s3://bucket/adult/",
            "-o",
        ])
        .arg(&out)
        .env("AWS_ACCESS_KEY_ID", "test")
        .env("AWS_SECRET_ACCESS_KEY", "test"));
    assert_eq!(o.status.code(), Some(2), "{}", show(&o));
    assert!(stderr(&o).contains("--s3-allow-http"), "{}", show(&o));
}

#[test]
fn verify_fails_a_release_that_holds_an_identifying_column() {
    let dir = tempfile::tempdir().unwrap();
    let input = dir.path().join("in.parquet");
    write_parquet(&input, &[adult_with_ids()]);
    let out = dir.path().join("out.parquet");
    // Published by a job that (wrongly) calls patient_id insensitive ...
    let lax = adult_job(dir.path(), |t| {
        format!("[columns]\nunlisted = \"insensitive\"\n{t}")
    });
    let o = run(&mut anonymize_cmd(&lax, &input, &out));
    assert_eq!(o.status.code(), Some(0), "{}", show(&o));
    // ... and checked against the job that knows it identifies people.
    let strict_dir = tempfile::tempdir().unwrap();
    let strict = adult_job(strict_dir.path(), |t| t + &identifying("patient_id"));
    let o = run(kanon()
        .args(["verify", "-c"])
        .arg(&strict)
        .arg("-i")
        .arg(&out));
    assert_eq!(o.status.code(), Some(1), "{}", show(&o));
    assert!(
        stdout(&o).contains("`patient_id`") && stdout(&o).contains("does NOT satisfy"),
        "{}",
        show(&o)
    );
}

#[test]
fn an_output_that_aliases_the_input_is_refused() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::create_dir(dir.path().join("sub")).unwrap();
    let input = dir.path().join("in.parquet");
    write_parquet(&input, &[adult().slice(0, 2000)]);
    let before = std::fs::read(&input).unwrap();
    let job = adult_job(dir.path(), |t| t);
    for out in [
        dir.path().join("sub/../in.parquet"),
        dir.path().join("./in.parquet"),
        dir.path().to_path_buf(),
    ] {
        let o = run(kanon()
            .args(["anonymize", "--overwrite", "-c"])
            .arg(&job)
            .arg("-i")
            .arg(&input)
            .arg("-o")
            .arg(&out));
        assert_eq!(o.status.code(), Some(2), "{}: {}", out.display(), show(&o));
        assert!(
            stderr(&o).contains("choose an --output outside the input"),
            "{}",
            show(&o)
        );
        assert_eq!(
            std::fs::read(&input).unwrap(),
            before,
            "the input was touched"
        );
    }
}

/// HeuristicMin on Adult's eight QIs runs for seconds: a signal or the
/// time limit must stop it inside the algorithm, promptly, leaving nothing.
#[test]
fn signals_and_the_time_limit_stop_the_algorithm_promptly() {
    let hm = |dir: &std::path::Path, extra: &[&str]| {
        let job = adult_job(dir, |t| set_algorithm(t, "heuristic-min"));
        let mut c = kanon();
        c.args(["anonymize", "-c"])
            .arg(&job)
            .arg("-o")
            .arg(dir.join("out.parquet"))
            .args(extra)
            .stdout(std::process::Stdio::piped())
            .stderr(std::process::Stdio::piped());
        c
    };
    for (signal, code) in [("INT", 130), ("TERM", 143)] {
        let dir = tempfile::tempdir().unwrap();
        let child = hm(dir.path(), &[]).spawn().unwrap();
        std::thread::sleep(std::time::Duration::from_millis(1500));
        let sent = std::time::Instant::now();
        let ok = std::process::Command::new("kill")
            .args(["-s", signal, &child.id().to_string()])
            .status()
            .unwrap();
        assert!(ok.success());
        let o = child.wait_with_output().unwrap();
        let took = sent.elapsed();
        assert_eq!(o.status.code(), Some(code), "SIG{signal}: {}", show(&o));
        assert!(
            took < std::time::Duration::from_secs(4),
            "SIG{signal}: stopped {took:?} after the signal"
        );
        assert_eq!(
            ls(dir.path()),
            vec!["job.toml"],
            "SIG{signal} left files behind"
        );
    }
    let dir = tempfile::tempdir().unwrap();
    let start = std::time::Instant::now();
    let o = hm(dir.path(), &["--timeout", "1"]).output().unwrap();
    assert_eq!(o.status.code(), Some(124), "{}", show(&o));
    assert!(stderr(&o).contains("--timeout"), "{}", show(&o));
    assert!(
        start.elapsed() < std::time::Duration::from_secs(5),
        "{:?}",
        start.elapsed()
    );
    assert_eq!(ls(dir.path()), vec!["job.toml"]);
}

/// Local Parquet row groups are decoded by two threads side by side: the
/// rows must still reach both passes in input order, so that every released
/// row carries its own labels. Two files of 1,000-row groups, the input held
/// from pass 1 or read again in pass 2: every published `sex` that is not
/// generalised is the row's own (looked up by `id`), and the release is the
/// one the single-group file gives.
#[test]
fn row_groups_read_side_by_side_keep_every_row_with_its_labels() {
    let dir = tempfile::tempdir().unwrap();
    let whole = adult_with_positions(dir.path());
    let t = read_parquet(&whole);
    let parts = dir.path().join("parts");
    std::fs::create_dir(&parts).unwrap();
    let props = || {
        parquet::file::properties::WriterProperties::builder()
            .set_max_row_group_row_count(Some(1000))
            .build()
    };
    let half = t.num_rows() / 2;
    write_parquet_with(&parts.join("a.parquet"), &[t.slice(0, half)], Some(props()));
    write_parquet_with(
        &parts.join("b.parquet"),
        &[t.slice(half, t.num_rows() - half)],
        Some(props()),
    );
    let job = adult_job(dir.path(), |t| {
        t + "\n[[attributes]]\nname = \"id\"\nrole = \"insensitive\"\n"
    });
    let sex_of: Vec<String> = {
        let s = t
            .column_by_name("sex")
            .unwrap()
            .as_any()
            .downcast_ref::<StringArray>()
            .unwrap();
        (0..s.len()).map(|i| s.value(i).to_string()).collect()
    };
    let release = |input: &std::path::Path, memory: &str, name: &str| {
        let out = dir.path().join(name);
        let o = run(anonymize_cmd(&job, input, &out)
            .args(["--set", &format!("output.buffer_memory={memory:?}")]));
        assert_eq!(o.status.code(), Some(0), "{}", show(&o));
        out
    };
    let reference = read_parquet(&release(&whole, "2GB", "whole.parquet"));
    for memory in ["2GB", "1KB"] {
        let out = read_parquet(&release(&parts, memory, &format!("parts-{memory}.parquet")));
        let ids = out
            .column_by_name("id")
            .unwrap()
            .as_any()
            .downcast_ref::<Int64Array>()
            .unwrap();
        let sex = arrow::compute::cast(
            out.column_by_name("sex").unwrap(),
            &arrow::datatypes::DataType::Utf8,
        )
        .unwrap();
        let sex = sex.as_any().downcast_ref::<StringArray>().unwrap();
        let mut kept = 0;
        for i in 0..out.num_rows() {
            let label = sex.value(i);
            if label == "Male" || label == "Female" {
                kept += 1;
                assert_eq!(
                    label,
                    sex_of[ids.value(i) as usize],
                    "row {i}, buffer {memory}"
                );
            }
        }
        assert!(kept > 1000, "{kept} rows publish their sex");
        assert!(out.columns() == reference.columns(), "buffer {memory}");
    }
}

#[test]
fn the_same_rows_in_another_input_order_give_the_same_release() {
    // Incognito's classes do not depend on input order, so neither may the
    // release: group ids are numbered in input order, and an order derived
    // from them (even under a seeded permutation, with a seed that may be
    // public) would tell which class a known input position fell into.
    let dir = tempfile::tempdir().unwrap();
    let input = adult_with_positions(dir.path());
    let t = read_parquet(&input);
    let n = t.num_rows() as u32;
    // A fixed shuffle (multiplicative congruence, 7919 is prime to n).
    assert_ne!(n % 7919, 0);
    let perm = arrow::array::UInt32Array::from_iter_values(
        (0..n).map(|i| (i as u64 * 7919 % n as u64) as u32),
    );
    let shuffled = dir.path().join("shuffled.parquet");
    write_parquet(
        &shuffled,
        &[arrow::compute::take_record_batch(&t, &perm).unwrap()],
    );
    let job = adult_job(dir.path(), |t| {
        set_algorithm(t, "incognito") + "\n[[attributes]]\nname = \"id\"\nrole = \"insensitive\"\n"
    });
    let release = |input: &std::path::Path, name: &str| {
        let out = dir.path().join(name);
        let o = run(&mut anonymize_cmd(&job, input, &out));
        assert_eq!(o.status.code(), Some(0), "{}", show(&o));
        out
    };
    let a = release(&input, "a.parquet");
    let b = release(&shuffled, "b.parquet");
    assert!(ids(&a).len() > 20_000);
    assert!(ids(&a) == ids(&b), "input order shows through the release");
    // The same rows in the same order (the files differ only in the input
    // fingerprint of their metadata).
    assert!(
        read_parquet(&a).columns() == read_parquet(&b).columns(),
        "the releases differ"
    );
}

#[test]
fn what_a_killed_run_leaves_is_named_and_cleaned_by_the_next_run() {
    let dir = tempfile::tempdir().unwrap();
    let out_dir = dir.path().join("out");
    std::fs::create_dir(&out_dir).unwrap();
    let out = out_dir.join("release.parquet");
    let job = adult_job(dir.path(), |t| t);
    // A run held just before its commit, then killed outright.
    let barrier = tempfile::tempdir().unwrap();
    std::fs::write(barrier.path().join("before-commit.wait"), b"").unwrap();
    let mut child = kanon()
        .args(["anonymize", "-c"])
        .arg(&job)
        .arg("-o")
        .arg(&out)
        .env("KANON_TEST_BARRIER", barrier.path())
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .spawn()
        .unwrap();
    let start = std::time::Instant::now();
    while !barrier.path().join("before-commit").exists() {
        assert!(
            start.elapsed() < std::time::Duration::from_secs(120),
            "barrier not reached"
        );
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
    child.kill().unwrap(); // SIGKILL
    child.wait().unwrap();
    let left = ls(&out_dir);
    assert_eq!(left.len(), 1, "{left:?}");
    assert!(left[0].starts_with(".kanon-tmp-"), "{left:?}");
    assert!(!out.exists());
    // Files that are not a dead run's temporaries are kept: another name, a
    // live process's (this test's), one from another host.
    let keep = [
        ".kanon-other.parquet".to_string(),
        format!(".kanon-tmp-00000000-{}-x.parquet", std::process::id()),
        "notes.txt".to_string(),
    ];
    for k in &keep {
        std::fs::write(out_dir.join(k), b"x").unwrap();
    }
    // The next run writing there removes the dead run's file.
    let o = run(kanon()
        .args(["anonymize", "-c"])
        .arg(&job)
        .arg("-o")
        .arg(&out));
    assert_eq!(o.status.code(), Some(0), "{}", show(&o));
    let mut want: Vec<String> = keep.to_vec();
    want.push("release.parquet".into());
    want.push("_release.parquet.kanon_release.json".into());
    want.sort();
    assert_eq!(ls(&out_dir), want);
}
