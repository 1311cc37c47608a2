//! Issue 15, items 1, 6 and 9 through the real `kanon` binary: pseudonymised
//! identifiers, overrides that would weaken the job, and the files SQL
//! options may read.

mod common;

use std::path::{Path, PathBuf};
use std::sync::Arc;

use arrow::array::{Array, AsArray, RecordBatch, StringArray};
use arrow::datatypes::DataType;
use common::*;

/// The key of the tests; must never appear in kanon's output or files.
const KEY: &str = "policy-test-key-DO-NOT-PRINT-0123456789";
const KEY_ENV: &str = "POLICY_TEST_PSEUDONYM_KEY";

/// 3000 Adult rows with a direct identifier `patient_id`.
fn adult_with_ids(dir: &Path) -> PathBuf {
    let input = dir.join("in.parquet");
    write_parquet(&input, &[adult_with_patient_ids(3000)]);
    input
}

fn pseudonym_job(dir: &Path) -> PathBuf {
    adult_job(dir, |t| {
        t + &format!(
            "\n[[attributes]]\nname = \"patient_id\"\nrole = \"pseudonymised\"\nkey_env = \"{KEY_ENV}\"\n"
        )
    })
}

fn anonymize(job: &Path, input: &Path, out: &Path) -> std::process::Command {
    let mut c = anonymize_cmd(job, input, out);
    c.arg("-v");
    c
}

fn pseudonyms(release: &Path) -> Vec<String> {
    let b = read_parquet(release);
    let ids = b.column_by_name("patient_id").expect("patient_id released");
    assert_eq!(ids.data_type(), &DataType::Utf8);
    let mut v: Vec<String> = ids
        .as_string::<i32>()
        .iter()
        .map(|s| s.unwrap().to_string())
        .collect();
    v.sort();
    v
}

#[test]
fn pseudonymised_identifiers_are_keyed_hashes_that_join() {
    let dir = tempfile::tempdir().unwrap();
    let input = adult_with_ids(dir.path());
    let job = pseudonym_job(dir.path());
    let (a, b) = (dir.path().join("a.parquet"), dir.path().join("b.parquet"));
    let o = run(anonymize(&job, &input, &a).env(KEY_ENV, KEY));
    assert_eq!(o.status.code(), Some(0), "{}", show(&o));
    assert!(!show(&o).contains(KEY), "the key was printed");
    assert!(
        !std::fs::read(&a)
            .unwrap()
            .windows(KEY.len())
            .any(|w| w == KEY.as_bytes()),
        "the key is in the release"
    );
    let first = pseudonyms(&a);
    assert_eq!(first.len(), 3000);
    assert!(first
        .iter()
        .all(|p| p.len() == 64 && p.bytes().all(|c| c.is_ascii_hexdigit())));
    let mut distinct = first.clone();
    distinct.dedup();
    assert_eq!(distinct.len(), 3000, "one pseudonym per identifier");
    // Not the identifiers' unkeyed SHA-256 either (a dictionary attack
    // away from the raw values). (A test that no pseudonym contains the
    // digits of an identifier failed about once in a hundred runs: 3000
    // random hex strings hold a given 6-digit run by chance that often.)
    let unkeyed: std::collections::HashSet<String> = (900_000..903_000)
        .map(|id: i64| {
            use sha2::Digest;
            format!("{:x}", sha2::Sha256::digest(id.to_string().as_bytes()))
        })
        .collect();
    assert!(first.iter().all(|p| !unkeyed.contains(p)));
    // Same key, job and input, same pseudonyms: a rerun gives the same
    // bytes (releases of other jobs or inputs do not join: tests/people.rs).
    let o = run(anonymize(&job, &input, &b).env(KEY_ENV, KEY));
    assert_eq!(o.status.code(), Some(0), "{}", show(&o));
    assert_eq!(pseudonyms(&b), first);
    // Another key, other pseudonyms.
    let c = dir.path().join("c.parquet");
    let o = run(anonymize(&job, &input, &c).env(KEY_ENV, "another-key-0123456789abcdef"));
    assert_eq!(o.status.code(), Some(0), "{}", show(&o));
    assert!(pseudonyms(&c).iter().all(|p| !first.contains(p)));
    // The release verifies.
    let o = run(kanon().args(["verify", "-c"]).arg(&job).arg("-i").arg(&a));
    assert_eq!(o.status.code(), Some(0), "{}", show(&o));
}

#[test]
fn a_missing_pseudonym_key_is_an_error_naming_the_variable() {
    let dir = tempfile::tempdir().unwrap();
    let input = adult_with_ids(dir.path());
    let job = pseudonym_job(dir.path());
    let out = dir.path().join("out.parquet");
    for value in [None, Some(""), Some("short")] {
        let mut c = anonymize(&job, &input, &out);
        if let Some(v) = value {
            c.env(KEY_ENV, v);
        }
        let o = run(&mut c);
        assert_eq!(o.status.code(), Some(2), "{value:?}: {}", show(&o));
        let err = stderr(&o);
        assert!(
            err.contains(KEY_ENV) && err.contains("attributes.patient_id.key_env"),
            "{err}"
        );
        assert!(
            !err.contains("short\n") && !err.contains("`short`"),
            "{err}"
        );
        assert!(!out.exists());
    }
}

#[test]
fn verify_rejects_raw_values_of_a_pseudonymised_column() {
    let dir = tempfile::tempdir().unwrap();
    let input = adult_with_ids(dir.path());
    let job = pseudonym_job(dir.path());
    // The raw input as a "release": its integer identifiers are refused.
    let o = run(kanon()
        .args(["verify", "-c"])
        .arg(&job)
        .arg("-i")
        .arg(&input));
    assert_eq!(o.status.code(), Some(1), "{}", show(&o));
    assert!(
        stdout(&o).contains("pseudonymised column `patient_id`"),
        "{}",
        show(&o)
    );
    // A real release with its pseudonyms swapped for raw text identifiers.
    let release = dir.path().join("release.parquet");
    let o = run(anonymize(&job, &input, &release).env(KEY_ENV, KEY));
    assert_eq!(o.status.code(), Some(0), "{}", show(&o));
    let b = read_parquet(&release);
    let i = b.schema().index_of("patient_id").unwrap();
    let mut cols = b.columns().to_vec();
    cols[i] = Arc::new(StringArray::from(
        (0..b.num_rows())
            .map(|r| format!("{}", 900_000 + r))
            .collect::<Vec<_>>(),
    ));
    let tampered = dir.path().join("tampered.parquet");
    write_parquet(
        &tampered,
        &[RecordBatch::try_new(b.schema(), cols).unwrap()],
    );
    let o = run(kanon()
        .args(["verify", "-c"])
        .arg(&job)
        .arg("-i")
        .arg(&tampered));
    assert_eq!(o.status.code(), Some(1), "{}", show(&o));
    let out = stdout(&o);
    assert!(
        out.contains("`patient_id`") && out.contains("3000 value(s)") && !out.contains("900000"),
        "{out}"
    );
}

#[test]
fn counting_missing_sensitive_values_needs_weaken_privacy() {
    let dir = tempfile::tempdir().unwrap();
    let job = adult_job(dir.path(), |t| t.replace("k = 10\n", "k = 10\nl = 2\n"));
    let var = "KANON_PRIVACY_MISSING_SENSITIVE";
    let o = run(kanon()
        .args(["anonymize", "--dry-run", "-c"])
        .arg(&job)
        .env(var, "value"));
    assert_eq!(o.status.code(), Some(2), "{}", show(&o));
    let err = stderr(&o);
    assert!(
        err.contains(var)
            && err.contains("missing_sensitive changed from ignore to value")
            && err.contains("--weaken-privacy"),
        "{err}"
    );
    // On purpose: accepted, and logged with the old and new value.
    let o = run(kanon()
        .args(["anonymize", "-v", "--dry-run", "--weaken-privacy", "-c"])
        .arg(&job)
        .env(var, "value"));
    assert_eq!(o.status.code(), Some(0), "{}", show(&o));
    let err = stderr(&o);
    assert!(
        err.contains("privacy.missing_sensitive") && err.contains("new=value"),
        "{err}"
    );
    // Stricter is fine without the flag.
    let o = run(kanon()
        .args(["anonymize", "--dry-run", "-c"])
        .arg(&job)
        .env("KANON_PRIVACY_K", "12"));
    assert_eq!(o.status.code(), Some(0), "{}", show(&o));
}

fn sql(input: &Path, query: &str) -> std::process::Command {
    let mut c = kanon();
    c.arg("sql")
        .arg("--table")
        .arg(format!("t={}", input.display()))
        .arg(query);
    c
}

#[test]
fn sql_reads_files_only_under_allowed_dirs() {
    let dir = tempfile::tempdir().unwrap();
    let dir_path = dir.path().canonicalize().unwrap();
    let input = adult_with_ids(&dir_path);
    let job = adult_job(&dir_path, |t| {
        t + "\n[columns]\nunlisted = \"identifying\"\n"
    });
    let query = format!(
        "SELECT count(*) AS n FROM anonymize('t', 'config = \"{}\"')",
        job.display()
    );
    // Default: the working directory (the repository root) only.
    let o = run(&mut sql(&input, &query));
    assert_eq!(o.status.code(), Some(2), "{}", show(&o));
    let err = stderr(&o);
    assert!(
        err.contains(&job.display().to_string())
            && err.contains("option `config`")
            && err.contains("--allow-dir"),
        "{err}"
    );
    // The job's directory alone: its hierarchies (in the repository) are not.
    let o = run(sql(&input, &query).arg("--allow-dir").arg(&dir_path));
    assert_eq!(o.status.code(), Some(2), "{}", show(&o));
    assert!(
        stderr(&o).contains("hierarchy`) is outside"),
        "{}",
        show(&o)
    );
    // Both: allowed.
    let o = run(sql(&input, &query)
        .arg("--allow-dir")
        .arg(&dir_path)
        .arg("--allow-dir")
        .arg(root()));
    assert_eq!(o.status.code(), Some(0), "{}", show(&o));
    assert!(stdout(&o).contains("3000"), "{}", show(&o));
}

#[test]
fn sql_pseudonymises_like_the_cli() {
    let dir = tempfile::tempdir().unwrap();
    let input = adult_with_ids(dir.path());
    let job = pseudonym_job(dir.path());
    let cli = dir.path().join("cli.parquet");
    let o = run(anonymize(&job, &input, &cli).env(KEY_ENV, KEY));
    assert_eq!(o.status.code(), Some(0), "{}", show(&o));
    let query = format!(
        "SELECT * FROM anonymize('t', 'config = \"{}\"')",
        job.display()
    );
    let allow = |c: &mut std::process::Command| {
        c.arg("--allow-dir")
            .arg(dir.path())
            .arg("--allow-dir")
            .arg(root());
    };
    let mut c = sql(&input, &query);
    allow(&mut c);
    let o = run(&mut c);
    assert_eq!(o.status.code(), Some(2), "{}", show(&o));
    assert!(stderr(&o).contains(KEY_ENV), "{}", show(&o));
    let out = dir.path().join("sql.parquet");
    let mut c = sql(&input, &query);
    allow(&mut c);
    let o = run(c.arg("-o").arg(&out).env(KEY_ENV, KEY));
    assert_eq!(o.status.code(), Some(0), "{}", show(&o));
    assert!(!show(&o).contains(KEY));
    assert_eq!(pseudonyms(&out), pseudonyms(&cli));
}
