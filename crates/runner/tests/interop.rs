//! Issue 15, item 8: pyarrow, pandas, DuckDB and polars read every release,
//! and a release carries no stale input metadata. The readers run in Python
//! (`tests/interop/read_release.py`); without the packages the test is
//! skipped, except under `CI=true`, where it fails.

mod common;

use std::process::Command;

use common::*;

fn script() -> std::path::PathBuf {
    root().join("tests/interop/read_release.py")
}

/// Whether Python and the four readers are there; panics under `CI=true`
/// when they are not.
fn python_ready() -> bool {
    python_with(
        "import pyarrow, pandas, duckdb, polars",
        "pip install pyarrow pandas duckdb polars",
    )
}

fn python(args: &[&std::ffi::OsStr]) {
    let o = Command::new("python3")
        .arg(script())
        .args(args)
        .output()
        .expect("python3 runs");
    assert!(
        o.status.success(),
        "python {args:?} failed:\n{}{}",
        String::from_utf8_lossy(&o.stdout),
        String::from_utf8_lossy(&o.stderr)
    );
}

#[test]
fn python_readers_read_releases_of_a_pandas_input() {
    if !python_ready() {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    // Adult with a patient id, rewritten by pandas with a non-default index:
    // its `pandas` metadata names `patient_id` and `__index_level_0__`.
    let plain = dir.path().join("plain.parquet");
    write_parquet(&plain, &[adult_with_patient_ids(5000)]);
    let input = dir.path().join("in.parquet");
    python(&[
        "pandas-input".as_ref(),
        plain.as_os_str(),
        input.as_os_str(),
    ]);
    let job = adult_job(dir.path(), |t| {
        t + "\n[[attributes]]\nname = \"patient_id\"\nrole = \"identifying\"\n\
             \n[[attributes]]\nname = \"__index_level_0__\"\nrole = \"identifying\"\n"
    });
    for (name, extra) in [
        ("one.parquet", vec![]),
        ("parts", vec!["--max-file-size", "16kB"]),
    ] {
        let out = dir.path().join(name);
        let o = run(anonymize_cmd(&job, &input, &out).args(&extra));
        assert_eq!(o.status.code(), Some(0), "{}", show(&o));
        let rows = if out.is_dir() {
            std::fs::read_dir(&out)
                .unwrap()
                .map(|e| e.unwrap().path())
                .filter(|p| p.extension().is_some_and(|x| x == "parquet"))
                .map(|p| read_parquet(&p).num_rows())
                .sum::<usize>()
        } else {
            read_parquet(&out).num_rows()
        };
        assert!(rows > 0);
        python(&[
            "check".as_ref(),
            out.as_os_str(),
            rows.to_string().as_ref(),
            "patient_id".as_ref(),
            "__index_level_0__".as_ref(),
        ]);
    }
}
