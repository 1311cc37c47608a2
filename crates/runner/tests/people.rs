//! Issue 31, "people, not rows": what kanon refuses because k counts rows
//! while an attacker targets people, and pseudonyms that do not hide, run
//! through the real `kanon` binary. Each test failed on the main before
//! (a release was published with exit 0).

mod common;

use std::path::{Path, PathBuf};

use common::*;

const KEY: &str = "people-test-key-0123456789abcdef";

/// A visits table: `patients` people with `visits` rows each, the same
/// age and sex on every row of a person, and a diagnosis per visit.
fn visits(dir: &Path, patients: usize, visits: usize) -> PathBuf {
    let mut rows = vec!["patient_id,age,sex,zip,diagnosis".to_string()];
    for p in 0..patients {
        for v in 0..visits {
            rows.push(format!(
                "P{p:05},{},{},{},D{}",
                20 + p % 50,
                ["F", "M"][p % 2],
                10000 + p % 3,
                (p * 7 + v) % 5
            ));
        }
    }
    let csv = dir.join("visits.csv");
    std::fs::write(&csv, rows.join("\n") + "\n").unwrap();
    csv
}

fn job(dir: &Path, id_role: &str, extra_privacy: &str) -> PathBuf {
    let job = dir.join("job.toml");
    std::fs::write(
        &job,
        format!(
            "[privacy]\nk = 5\n{extra_privacy}\n[algorithm]\nname = \"mondrian\"\n\
             [[attributes]]\nname = \"patient_id\"\nrole = \"{id_role}\"\n\
             [[attributes]]\nname = \"age\"\nrole = \"quasi-identifier\"\n\
             [[attributes]]\nname = \"sex\"\nrole = \"quasi-identifier\"\n\
             [[attributes]]\nname = \"zip\"\nrole = \"insensitive\"\n\
             [[attributes]]\nname = \"diagnosis\"\nrole = \"sensitive\"\n"
        ),
    )
    .unwrap();
    job
}

/// Item 1, fail closed: a pseudonymised or identifying column that repeats
/// a value (a patient's visits) is refused, naming the column and the
/// counts and the line to add; nothing is written. Before, the release
/// said "k achieved 5" with classes of one patient.
#[test]
fn repeated_identifiers_are_refused_unless_the_row_is_the_unit() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let csv = visits(d, 200, 3);
    let out = d.join("out.parquet");
    for role in ["pseudonymised", "identifying"] {
        let job = job(d, role, "");
        let o = run(anonymize_cmd(&job, &csv, &out).env("KANON_PSEUDONYM_KEY", KEY));
        assert_eq!(o.status.code(), Some(2), "{role}: {}", show(&o));
        let err = stderr(&o);
        assert!(err.contains("`patient_id`"), "{err}");
        assert!(err.contains("200 distinct values on 600 rows"), "{err}");
        assert!(err.contains("entity = \"row\""), "{err}");
        assert!(!err.contains("P0000"), "no value is printed: {err}");
        assert!(!out.exists());
        // The dry run reads pass 1 and refuses the same way.
        let o = run(anonymize_cmd(&job, &csv, &out)
            .arg("--dry-run")
            .env("KANON_PSEUDONYM_KEY", KEY));
        assert_eq!(o.status.code(), Some(2), "{}", show(&o));
    }
    // An override may not say so on its own: it weakens the job file.
    let job_file = job(d, "identifying", "");
    let o = run(anonymize_cmd(&job_file, &csv, &out).args(["--set", "privacy.entity=\"row\""]));
    assert_eq!(o.status.code(), Some(2), "{}", show(&o));
    assert!(stderr(&o).contains("privacy.entity"), "{}", show(&o));
    // The job file says the row is the unit: published.
    let job_file = job(d, "identifying", "entity = \"row\"");
    let o = run(&mut anonymize_cmd(&job_file, &csv, &out));
    assert_eq!(o.status.code(), Some(0), "{}", show(&o));
    assert!(out.exists());
}

/// Item 1: counting people by a column is not built yet, and says so
/// instead of counting rows under the name of people.
#[test]
fn an_entity_column_is_refused_until_entities_are_counted() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let csv = visits(d, 50, 2);
    let job = job(d, "pseudonymised", "entity = \"patient_id\"");
    let out = d.join("out.parquet");
    let o = run(anonymize_cmd(&job, &csv, &out).env("KANON_PSEUDONYM_KEY", KEY));
    assert_eq!(o.status.code(), Some(2), "{}", show(&o));
    assert!(stderr(&o).contains("not supported yet"), "{}", show(&o));
    assert!(!out.exists());
}

/// Item 4: pseudonyms too few to hide (a 3-value zip over 600 rows: rank
/// them by frequency and they are the zips), weak keys and keys read from
/// common variables are refused.
#[test]
fn pseudonyms_that_do_not_hide_are_refused() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let csv = visits(d, 600, 1);
    let job_file = d.join("zip.toml");
    std::fs::write(
        &job_file,
        std::fs::read_to_string(job(d, "identifying", "entity = \"row\""))
            .unwrap()
            .replace(
                "name = \"zip\"\nrole = \"insensitive\"",
                "name = \"zip\"\nrole = \"pseudonymised\"",
            ),
    )
    .unwrap();
    let out = d.join("out.parquet");
    let o = run(anonymize_cmd(&job_file, &csv, &out).env("KANON_PSEUDONYM_KEY", KEY));
    assert_eq!(o.status.code(), Some(2), "{}", show(&o));
    let err = stderr(&o);
    assert!(err.contains("`zip`") && err.contains("frequency"), "{err}");
    assert!(!out.exists());

    let job_file = job(d, "pseudonymised", "");
    for (key, says) in [
        ("a".repeat(32), "distinct bytes"),
        ("secretsecretsecretsecret".to_string(), "distinct bytes"),
    ] {
        let o = run(anonymize_cmd(&job_file, &csv, &out).env("KANON_PSEUDONYM_KEY", &key));
        assert_eq!(o.status.code(), Some(2), "{}", show(&o));
        let err = stderr(&o);
        assert!(err.contains(says), "{err}");
        assert!(!err.contains(&key), "the key is never printed: {err}");
    }
    let path_job = d.join("path.toml");
    std::fs::write(
        &path_job,
        std::fs::read_to_string(&job_file).unwrap().replace(
            "role = \"pseudonymised\"\n",
            "role = \"pseudonymised\"\nkey_env = \"PATH\"\n",
        ),
    )
    .unwrap();
    let o = run(&mut anonymize_cmd(&path_job, &csv, &out));
    assert_eq!(o.status.code(), Some(2), "{}", show(&o));
    assert!(
        stderr(&o).contains("common environment variable"),
        "{}",
        show(&o)
    );
    assert!(!out.exists());
}

/// Item 1 in SQL: anonymize() refuses repeated identifiers the same way.
#[cfg(feature = "sql")]
#[test]
fn sql_refuses_repeated_identifiers_too() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let csv = visits(d, 200, 3);
    let query = |privacy: &str| {
        format!(
            "SELECT count(*) AS n FROM anonymize('v', 'k = 5, qi = [\"age\", \"sex\"], sensitive = \"diagnosis\", identifying = \"patient_id\", insensitive = \"zip\"{privacy}')"
        )
    };
    let table = format!("v={}", csv.display());
    let o = run(kanon().args(["sql", &query(""), "-t", &table]));
    assert_eq!(o.status.code(), Some(2), "{}", show(&o));
    assert!(stderr(&o).contains("`patient_id`"), "{}", show(&o));
    let o = run(kanon().args([
        "sql",
        &query(", privacy = { entity = \"row\" }"),
        "-t",
        &table,
    ]));
    assert_eq!(o.status.code(), Some(0), "{}", show(&o));
    assert!(stdout(&o).contains("600"), "{}", show(&o));
}

fn pseudonyms(release: &Path) -> std::collections::BTreeSet<String> {
    let t = read_parquet(release);
    let ids = arrow::compute::cast(
        t.column_by_name("patient_id").unwrap(),
        &arrow::datatypes::DataType::Utf8,
    )
    .unwrap();
    ids.as_any()
        .downcast_ref::<arrow::array::StringArray>()
        .unwrap()
        .iter()
        .flatten()
        .map(String::from)
        .collect()
}

/// Item 4: each release's pseudonyms are its own. Two releases of the same
/// people by two jobs (the issue joined a cover and a mondrian release on
/// the pseudonym: 2,487 singletons), or of two days' rows, share no
/// pseudonym; a rerun gives the same bytes; joining is an opt-in of the job
/// file (an override that turns it on weakens the job).
#[test]
fn pseudonyms_join_only_where_the_job_file_says_so() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let all = visits(d, 600, 1);
    let day1 = {
        let sub = d.join("day1");
        std::fs::create_dir(&sub).unwrap();
        visits(&sub, 300, 1)
    };
    let release = |job: &Path, input: &Path, name: &str, more: &[&str]| {
        let out = d.join(name);
        let o = run(anonymize_cmd(job, input, &out)
            .args(more)
            .env("KANON_PSEUDONYM_KEY", KEY));
        assert_eq!(o.status.code(), Some(0), "{name}: {}", show(&o));
        pseudonyms(&out)
    };
    let job_file = job(d, "pseudonymised", "");
    let a = release(&job_file, &all, "a.parquet", &[]);
    assert_eq!(a.len(), 600);
    assert_eq!(release(&job_file, &all, "a2.parquet", &[]), a, "a rerun");
    let other_job = release(&job_file, &all, "b.parquet", &["--k", "10"]);
    assert!(a.is_disjoint(&other_job), "another job shares pseudonyms");
    let other_day = release(&job_file, &day1, "c.parquet", &[]);
    assert!(a.is_disjoint(&other_day), "another input shares pseudonyms");
    // Only the job file may ask for joinable pseudonyms.
    let o = run(anonymize_cmd(&job_file, &all, &d.join("x.parquet"))
        .args(["--set", "privacy.joinable_pseudonyms=true"])
        .env("KANON_PSEUDONYM_KEY", KEY));
    assert_eq!(o.status.code(), Some(2), "{}", show(&o));
    assert!(stderr(&o).contains("joinable_pseudonyms"), "{}", show(&o));
    let joinable = job(d, "pseudonymised", "joinable_pseudonyms = true");
    let x = release(&joinable, &all, "x.parquet", &[]);
    let y = release(&joinable, &all, "y.parquet", &["--k", "10"]);
    let z = release(&joinable, &day1, "z.parquet", &[]);
    assert_eq!(x, y);
    assert!(z.is_subset(&x) && z.len() == 300);
}
