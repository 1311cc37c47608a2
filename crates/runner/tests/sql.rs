//! `kanon sql` on the real binary, run from the repository root.
#![cfg(feature = "sql")]

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

fn root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

fn kanon(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_kanon"))
        .args(args)
        .current_dir(root())
        .output()
        .expect("kanon runs")
}

fn text(o: &Output) -> (String, String) {
    (
        String::from_utf8_lossy(&o.stdout).into_owned(),
        String::from_utf8_lossy(&o.stderr).into_owned(),
    )
}

const ADULT: &str = "adult=data/adult/adult.parquet";

#[test]
fn prints_a_query_over_anonymize() {
    let o = kanon(&[
        "sql",
        "SELECT count(*) AS n FROM anonymize('adult', 'config = \"configs/adult.toml\"')",
        "--table",
        ADULT,
    ]);
    let (out, err) = text(&o);
    assert!(o.status.success(), "{out}\n{err}");
    assert!(out.contains("| 30162 |"), "{out}");
    assert!(out.contains("(1 rows)"), "{out}");
}

#[test]
fn writes_the_result_to_parquet_atomically() {
    let dir = tempfile::tempdir().unwrap();
    let dest = dir.path().join("release.parquet");
    let query = "SELECT * FROM anonymize('adult', 'config = \"configs/adult.toml\", k = 20')";
    let o = kanon(&[
        "sql",
        query,
        "--table",
        ADULT,
        "--output",
        dest.to_str().unwrap(),
    ]);
    let (out, err) = text(&o);
    assert!(o.status.success(), "{out}\n{err}");
    assert!(out.contains("30162 rows"), "{out}");
    let file = std::fs::File::open(&dest).unwrap();
    let reader =
        parquet::arrow::arrow_reader::ParquetRecordBatchReaderBuilder::try_new(file).unwrap();
    let meta = reader
        .metadata()
        .file_metadata()
        .key_value_metadata()
        .cloned()
        .unwrap_or_default();
    assert!(meta
        .iter()
        .any(|kv| kv.key == "kanon.command" && kv.value.as_deref() == Some("sql")));
    // The query text stays out of the published file.
    assert!(!meta
        .iter()
        .any(|kv| kv.value.as_deref().is_some_and(|v| v.contains("anonymize"))));
    let age = reader
        .schema()
        .field_with_name("age")
        .unwrap()
        .data_type()
        .clone();
    assert!(
        matches!(age, arrow::datatypes::DataType::Dictionary(_, _)),
        "{age}"
    );
    let rows: usize = reader.build().unwrap().map(|b| b.unwrap().num_rows()).sum();
    assert_eq!(rows, 30162);

    // An existing output is kept unless --overwrite.
    let o = kanon(&[
        "sql",
        query,
        "--table",
        ADULT,
        "--output",
        dest.to_str().unwrap(),
    ]);
    assert_eq!(o.status.code(), Some(5), "exit 5: the output exists");
    assert!(text(&o).1.contains("already exists; pass --overwrite"));
}

#[test]
fn a_failed_query_leaves_no_file() {
    let dir = tempfile::tempdir().unwrap();
    let dest = dir.path().join("release.parquet");
    let o = kanon(&[
        "sql",
        "SELECT * FROM anonymize('sample', 'config = \"configs/adult.toml\", k = 1000')",
        "--table",
        "sample=data/adult/adult-sample.csv",
        "--delimiter",
        ";",
        "--output",
        dest.to_str().unwrap(),
    ]);
    let (out, err) = text(&o);
    assert_eq!(o.status.code(), Some(3), "{out}\n{err}");
    assert!(err.contains("privacy model cannot be satisfied"), "{err}");
    assert_eq!(std::fs::read_dir(dir.path()).unwrap().count(), 0);
}

#[test]
fn csv_tables_and_risk() {
    let o = kanon(&[
        "sql",
        "SELECT rows, smallest_class FROM kanon_risk('sample', 'config = \"configs/adult.toml\"')",
        "--table",
        "sample=data/adult/adult-sample.csv",
        "--delimiter",
        ";",
    ]);
    let (out, err) = text(&o);
    assert!(o.status.success(), "{out}\n{err}");
    assert!(out.contains("| 500  | 1              |"), "{out}");
}

#[test]
fn bad_input_is_exit_2_with_a_message() {
    let o = kanon(&[
        "sql",
        "SELECT * FROM anonymize('nobody', 'k = 2, qi = \"a\"')",
    ]);
    assert_eq!(o.status.code(), Some(2));
    assert!(
        text(&o).1.contains("table 'nobody' not found"),
        "{}",
        text(&o).1
    );
    let o = kanon(&["sql", "SELECT 1", "--table", "x=missing.parquet"]);
    assert_eq!(o.status.code(), Some(2));
    assert!(text(&o).1.contains("no such file or directory"));
}

/// Every front end drives the same pipeline: the release of `kanon sql` is
/// the release of `kanon anonymize`, row for row, in the same order.
#[test]
fn sql_and_anonymize_publish_the_same_release() {
    let dir = tempfile::tempdir().unwrap();
    let cli = dir.path().join("cli.parquet");
    let sql = dir.path().join("sql.parquet");
    let o = kanon(&[
        "anonymize",
        "--config",
        "configs/adult.toml",
        "--weaken-privacy",
        "--k",
        "20",
        "--output",
        cli.to_str().unwrap(),
        "-q",
    ]);
    assert!(o.status.success(), "{:?}", text(&o));
    let o = kanon(&[
        "sql",
        "SELECT * FROM anonymize('adult', 'config = \"configs/adult.toml\", k = 20')",
        "--table",
        ADULT,
        "--output",
        sql.to_str().unwrap(),
    ]);
    assert!(o.status.success(), "{:?}", text(&o));
    let read = |p: &Path| {
        let f = std::fs::File::open(p).unwrap();
        let r = parquet::arrow::arrow_reader::ParquetRecordBatchReaderBuilder::try_new(f)
            .unwrap()
            .build()
            .unwrap();
        let batches: Vec<_> = r.map(|b| b.unwrap()).collect();
        arrow::compute::concat_batches(&batches[0].schema(), &batches).unwrap()
    };
    let (a, b) = (read(&cli), read(&sql));
    assert_eq!(a.num_rows(), 30162);
    let names = |s: &arrow::datatypes::Schema| {
        s.fields()
            .iter()
            .map(|f| f.name().clone())
            .collect::<Vec<_>>()
    };
    assert_eq!(names(&a.schema()), names(&b.schema()));
    // Values compared as strings: dictionaries may be laid out differently
    // by batch boundaries, and DataFusion reads Parquet strings as Utf8View.
    let plain = |c: &arrow::array::ArrayRef| {
        arrow::compute::cast(c, &arrow::datatypes::DataType::Utf8).unwrap()
    };
    for (x, y) in a.columns().iter().zip(b.columns()) {
        let (x, y) = (plain(x), plain(y));
        assert_eq!(&x, &y);
    }
    // The same release gets the same certified figures, though the SQL
    // certificate is computed from the published labels alone.
    let certificate = |name: &str| -> serde_json::Value {
        let m: serde_json::Value =
            serde_json::from_slice(&std::fs::read(dir.path().join(name)).unwrap()).unwrap();
        m["certificate"].clone()
    };
    let (c, s) = (
        certificate("_cli.parquet.kanon_release.json"),
        certificate("_sql.parquet.kanon_release.json"),
    );
    for field in [
        "verified",
        "l_achieved",
        "rows_in",
        "rows_published",
        "privacy",
    ] {
        assert_eq!(c[field], s[field], "{field}");
    }
}

/// DataFusion's `COPY ... TO` writes in place: when anonymize() refuses,
/// `kanon sql` removes what the failed query left (a zero-row file), and
/// keeps what existed before.
#[test]
fn a_failed_copy_leaves_no_file() {
    let dir = tempfile::tempdir().unwrap();
    let dest = dir.path().join("release.parquet");
    let copy = |dest: &Path, k: usize| {
        kanon(&[
            "sql",
            &format!(
                "COPY (SELECT * FROM anonymize('adult', 'config = \"configs/adult.toml\", k = {k}')) \
                 TO '{}' STORED AS PARQUET",
                dest.display()
            ),
            "--table",
            ADULT,
        ])
    };
    let o = copy(&dest, 40_000);
    assert_eq!(o.status.code(), Some(3), "{:?}", text(&o));
    assert!(!dest.exists(), "a refused COPY left {}", dest.display());
    let o = copy(&dest, 10);
    assert!(o.status.success(), "{:?}", text(&o));
    assert!(dest.exists());
}

/// Issue 32, item 2: a `COPY ... TO` whose target is (an alias of) a table
/// of the query is refused before DataFusion truncates it; the input is
/// untouched. An `anonymize()` over a subquery that selects no row is
/// refused instead of publishing an empty release.
#[test]
fn copy_onto_an_input_and_an_empty_subquery_are_refused() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    std::fs::create_dir(d.join("sub")).unwrap();
    let input = d.join("t.csv");
    let o = kanon(&[
        "sql",
        &format!(
            "COPY (SELECT * FROM adult LIMIT 500) TO '{}' STORED AS CSV",
            input.display()
        ),
        "--table",
        ADULT,
    ]);
    assert!(o.status.success(), "{:?}", text(&o));
    let before = std::fs::read(&input).unwrap();
    let table = format!("t={}", input.display());
    for target in [
        input.display().to_string(),
        format!("{}/sub/../t.csv", d.display()),
        format!("{}/./t.csv", d.display()),
    ] {
        let o = kanon(&[
            "sql",
            &format!(
                "COPY (SELECT * FROM anonymize('t', 'config = \"configs/adult.toml\"')) TO '{target}' STORED AS CSV"
            ),
            "--table",
            &table,
        ]);
        let (out, err) = text(&o);
        assert_eq!(o.status.code(), Some(2), "{target}: {out}\n{err}");
        assert!(err.contains("COPY"), "{err}");
        assert_eq!(
            std::fs::read(&input).unwrap(),
            before,
            "{target}: input changed"
        );
    }
    let o = kanon(&[
        "sql",
        "SELECT * FROM anonymize((SELECT * FROM adult WHERE age > 1000), config => 'configs/adult.toml')",
        "--table",
        ADULT,
    ]);
    let (out, err) = text(&o);
    assert_eq!(o.status.code(), Some(2), "{out}\n{err}");
    assert!(err.contains("no rows"), "{err}");
}

/// Issue 32, item 10: `kanon sql --output` publishes through the same
/// Publisher as `kanon anonymize`: the release has its manifest with a
/// certificate (before this change it had none, so `kanon verify` could not
/// check it), and `kanon verify` re-checks the certificate's figures.
#[test]
fn output_carries_a_manifest_whose_certificate_verify_checks() {
    let dir = tempfile::tempdir().unwrap();
    let dest = dir.path().join("release.parquet");
    let o = kanon(&[
        "sql",
        "SELECT * FROM anonymize('adult', 'config = \"configs/adult.toml\", k = 20')",
        "--table",
        ADULT,
        "--output",
        dest.to_str().unwrap(),
    ]);
    let (out, err) = text(&o);
    assert!(o.status.success(), "{out}\n{err}");
    let manifest = dir.path().join("_release.parquet.kanon_release.json");
    let m: serde_json::Value =
        serde_json::from_slice(&std::fs::read(&manifest).expect("a manifest")).unwrap();
    let c = &m["certificate"];
    assert_eq!(m["rows"], 30162, "{m}");
    assert_eq!(c["rows_in"], 30162, "{c}");
    assert_eq!(c["rows_published"], 30162, "{c}");
    assert_eq!(c["privacy"]["k"], 20, "{c}");
    assert!(
        c["verified"]["smallest_class"].as_u64().unwrap() >= 20,
        "{c}"
    );
    assert!(
        c["job_hash"].as_str().unwrap().starts_with("sha256:"),
        "{c}"
    );
    let o = kanon(&[
        "verify",
        "-c",
        "configs/adult.toml",
        "--set",
        "privacy.k=20",
        "-i",
        dest.to_str().unwrap(),
    ]);
    let (out, err) = text(&o);
    assert_eq!(o.status.code(), Some(0), "{out}\n{err}");
    assert!(out.contains("manifest holds"), "{out}");

    // A certificate that claims more than the rows hold fails verify.
    let mut forged = m.clone();
    forged["certificate"]["verified"]["smallest_class"] = serde_json::json!(500);
    std::fs::write(&manifest, serde_json::to_vec(&forged).unwrap()).unwrap();
    let o = kanon(&[
        "verify",
        "-c",
        "configs/adult.toml",
        "--set",
        "privacy.k=20",
        "-i",
        dest.to_str().unwrap(),
    ]);
    assert_eq!(o.status.code(), Some(1), "{:?}", text(&o));
}

/// `--output` publishes only what it can certify: a query that reads no
/// anonymize(), and a result whose classes a LIMIT broke, are refused with
/// exit 2 and leave no file (before, both were written and "published").
#[test]
fn output_refuses_results_it_cannot_certify() {
    let dir = tempfile::tempdir().unwrap();
    let dest = dir.path().join("release.parquet");
    for (query, says) in [
        ("SELECT * FROM adult", "reads 0 anonymize() calls"),
        (
            "SELECT * FROM anonymize('adult', 'config = \"configs/adult.toml\", k = 20') LIMIT 7",
            "does NOT satisfy anonymize()'s job",
        ),
        (
            "SELECT age, sex FROM anonymize('adult', 'config = \"configs/adult.toml\", k = 20')",
            "cannot be checked against anonymize()'s job",
        ),
        (
            "SELECT * FROM anonymize('adult', 'config = \"configs/adult.toml\", k = 20') \
             UNION ALL SELECT * FROM anonymize('adult', 'config = \"configs/adult.toml\", k = 30')",
            "reads 2 anonymize() calls",
        ),
    ] {
        let o = kanon(&[
            "sql",
            query,
            "--table",
            ADULT,
            "--output",
            dest.to_str().unwrap(),
        ]);
        let (out, err) = text(&o);
        assert_eq!(o.status.code(), Some(2), "{query}\n{out}\n{err}");
        assert!(err.contains(says), "{query}\n{err}");
        assert_eq!(
            std::fs::read_dir(dir.path()).unwrap().count(),
            0,
            "{query} left a file"
        );
    }
}

/// Issue 36: a delta-presence release is verified against its population,
/// which a query's result cannot be recounted against: `--output` refuses
/// it (exit 2, no file) and names the way that can publish it.
#[test]
fn output_refuses_a_delta_presence_release() {
    let dir = tempfile::tempdir().unwrap();
    let dest = dir.path().join("release.parquet");
    let o = kanon(&[
        "sql",
        "SELECT * FROM anonymize('population', 'config = \"configs/adult-delta-presence.toml\"')",
        "--table",
        "population=data/adult/adult-presence.parquet",
        "--output",
        dest.to_str().unwrap(),
    ]);
    let (out, err) = text(&o);
    assert_eq!(o.status.code(), Some(2), "{out}\n{err}");
    assert!(
        err.contains("delta-presence") && err.contains("kanon anonymize"),
        "{err}"
    );
    assert_eq!(std::fs::read_dir(dir.path()).unwrap().count(), 0);
}

/// Issue 32, item 5, in `kanon sql`: a CSV table's columns are typed as
/// `kanon anonymize` types them, so codes `007`, `07` and `7` stay three
/// values (DataFusion's own inference read them as the number 7).
#[test]
fn csv_tables_keep_the_identity_of_codes() {
    let dir = tempfile::tempdir().unwrap();
    let csv = dir.path().join("codes.csv");
    std::fs::write(&csv, "code,n\n007,1\n07,2\n7,3\n").unwrap();
    let o = kanon(&[
        "sql",
        "SELECT count(DISTINCT code) AS codes, sum(n) AS total FROM t",
        "--table",
        &format!("t={}", csv.display()),
    ]);
    let (out, err) = text(&o);
    assert!(o.status.success(), "{out}\n{err}");
    assert!(out.contains("| 3     | 6     |"), "{out}");
}
