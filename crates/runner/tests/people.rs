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

/// Item 1: `entity = "patient_id"` counts people. Every class of the
/// release holds at least k patients (recounted here from the published
/// pseudonyms), every patient's visits share one class, `kanon verify`
/// recounts the same, and the summary says k counts people. Before, the
/// job was refused ("not supported yet"); with `entity = "row"` the same
/// table publishes classes of a single patient.
#[test]
fn an_entity_column_counts_people() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    // 100 patients, each alone on their (age, sex), 4 visits each.
    let mut rows = vec!["patient_id,age,sex,zip,diagnosis".to_string()];
    for v in 0..4 {
        for p in 0..100 {
            rows.push(format!(
                "P{p:05},{},{},1000{},D{}",
                20 + p % 50,
                ["F", "M"][p / 50],
                v,
                (p + v) % 5
            ));
        }
    }
    let csv = d.join("unique.csv");
    std::fs::write(&csv, rows.join("\n") + "\n").unwrap();
    let job = job(d, "pseudonymised", "entity = \"patient_id\"\nl = 2");
    let out = d.join("out.parquet");
    let o = run(anonymize_cmd(&job, &csv, &out).env("KANON_PSEUDONYM_KEY", KEY));
    assert_eq!(o.status.code(), Some(0), "{}", show(&o));
    assert!(
        stdout(&o).contains("k achieved") && stdout(&o).contains("people"),
        "{}",
        show(&o)
    );
    let (classes, smallest, split) = patients_per_class(&out);
    assert_eq!(split, 0, "patients whose rows are in two classes");
    assert!(classes > 1, "{classes} classes");
    assert!(smallest >= 5, "a class of {smallest} patients");
    let o = run(kanon()
        .args(["verify", "-c"])
        .arg(&job)
        .arg("-i")
        .arg(&out)
        .env("KANON_PSEUDONYM_KEY", KEY));
    assert_eq!(o.status.code(), Some(0), "{}", show(&o));
    // An identifying entity column would leave a k nobody can recount.
    let dropped = job_file_with(d, "identifying", "entity = \"patient_id\"");
    let o = run(&mut anonymize_cmd(&dropped, &csv, &out));
    assert_eq!(o.status.code(), Some(2), "{}", show(&o));
    assert!(stderr(&o).contains("recount"), "{}", show(&o));

    // The attack of issue 31 on the same table with the row as the unit:
    // classes of 5 rows that are one or two patients (4 visits each).
    let rows_job = job_file_with(d, "pseudonymised", "entity = \"row\"");
    let by_rows = d.join("rows.parquet");
    let o = run(anonymize_cmd(&rows_job, &csv, &by_rows).env("KANON_PSEUDONYM_KEY", KEY));
    assert_eq!(o.status.code(), Some(0), "{}", show(&o));
    let (_, smallest_by_rows, split_by_rows) = patients_per_class(&by_rows);
    assert!(
        smallest_by_rows < 5 && split_by_rows > 0,
        "by rows: {smallest_by_rows} patients, {split_by_rows} split"
    );
}

fn job_file_with(dir: &Path, role: &str, privacy: &str) -> PathBuf {
    let path = dir.join(format!("job-{role}-{}.toml", privacy.len()));
    std::fs::copy(job(dir, role, privacy), &path).unwrap();
    path
}

/// Classes of a release (rows with equal `age` and `sex` labels), the
/// fewest distinct patients (pseudonyms) in one, and how many patients
/// have rows in two classes (which an attacker intersects).
fn patients_per_class(release: &Path) -> (usize, usize, usize) {
    let t = read_parquet(release);
    let text = |c: &str| column_text(&t, c);
    let (age, sex, id) = (text("age"), text("sex"), text("patient_id"));
    let mut classes: std::collections::HashMap<
        (String, String),
        std::collections::HashSet<String>,
    > = Default::default();
    let mut class_of: std::collections::HashMap<String, (String, String)> = Default::default();
    let mut split = std::collections::HashSet::new();
    for i in 0..id.len() {
        let key = (age[i].clone(), sex[i].clone());
        if class_of
            .insert(id[i].clone(), key.clone())
            .is_some_and(|k| k != key)
        {
            split.insert(id[i].clone());
        }
        classes.entry(key).or_default().insert(id[i].clone());
    }
    let smallest = classes.values().map(|p| p.len()).min().unwrap_or(0);
    (classes.len(), smallest, split.len())
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

/// Item 1 in SQL: `anonymize()` counts people the same way, and the
/// query's result, published with `--output`, is checked in people too.
#[cfg(feature = "sql")]
#[test]
fn sql_counts_people_too() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let csv = visits(d, 200, 3);
    let table = format!("v={}", csv.display());
    let query = "SELECT * FROM anonymize('v', 'k = 5, qi = [\"age\", \"sex\"], sensitive = \"diagnosis\", pseudonymised = \"patient_id\", insensitive = \"zip\", privacy = { l = 2, entity = \"patient_id\" }')";
    let out = d.join("sql.parquet");
    let o = run(kanon()
        .args(["sql", query, "-t", &table, "--output"])
        .arg(&out)
        .env("KANON_PSEUDONYM_KEY", KEY));
    assert_eq!(o.status.code(), Some(0), "{}", show(&o));
    let (_, smallest, split) = patients_per_class(&out);
    assert!(
        smallest >= 5 && split == 0,
        "{smallest} patients, {split} split"
    );
    // kanon_risk() of the release counts people too: its smallest class is
    // the smallest number of patients (3 visits each: rows would say 3x).
    let options = query
        .split_once("anonymize('v', '")
        .unwrap()
        .1
        .trim_end_matches("')");
    let risk =
        format!("SELECT rows, smallest_class, classes_below_k FROM kanon_risk('r', '{options}')");
    let o = run(kanon()
        .args(["sql", &risk, "-t"])
        .arg(format!("r={}", out.display()))
        .env("KANON_PSEUDONYM_KEY", KEY));
    assert_eq!(o.status.code(), Some(0), "{}", show(&o));
    let line = stdout(&o)
        .lines()
        .find(|l| l.contains("| 600 "))
        .map(String::from)
        .unwrap_or_default();
    let cells: Vec<&str> = line
        .split('|')
        .map(str::trim)
        .filter(|c| !c.is_empty())
        .collect();
    assert_eq!(
        cells,
        vec!["600", &smallest.to_string(), "0"],
        "{}",
        show(&o)
    );
    // A result without the pseudonyms cannot be recounted in people.
    let o = run(kanon()
        .args([
            "sql",
            &query.replace("SELECT *", "SELECT age, sex, diagnosis"),
            "-t",
            &table,
            "--output",
        ])
        .arg(d.join("no-people.parquet"))
        .env("KANON_PSEUDONYM_KEY", KEY));
    assert_ne!(o.status.code(), Some(0), "{}", show(&o));
    assert!(stderr(&o).contains("recounted"), "{}", show(&o));
    assert!(!d.join("no-people.parquet").exists());
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

/// Item 1: `kanon inspect` with an entity job counts people. 200 patients
/// of 3 visits each: 200 people, and the smallest class in people (rows
/// would say 3 times more); a table where a person's quasi-identifiers
/// vary between rows is refused with what to do instead. Before, inspect
/// counted rows.
#[test]
fn inspect_counts_people() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let csv = visits(d, 200, 3);
    let job = job(d, "pseudonymised", "entity = \"patient_id\"");
    let inspect = |input: &Path| {
        run(kanon()
            .args(["inspect", "--json", "-c"])
            .arg(&job)
            .arg(input))
    };
    let o = inspect(&csv);
    assert_eq!(o.status.code(), Some(0), "{}", show(&o));
    let r: serde_json::Value = serde_json::from_str(&stdout(&o)).unwrap();
    assert_eq!(r["rows"], 600, "{r}");
    assert_eq!(r["risk"]["people"], 200, "{r}");
    assert_eq!(r["risk"]["entity"], "patient_id", "{r}");
    // age 20 + p % 50 fixes sex (p % 2): 50 classes of 4 patients (12
    // rows each).
    assert_eq!(r["risk"]["smallest_class"], 4, "{r}");
    assert_eq!(r["risk"]["classes"], 50, "{r}");
    // A patient whose age differs between visits.
    let text = std::fs::read_to_string(&csv).unwrap();
    let varying = d.join("varying.csv");
    std::fs::write(&varying, text.replacen("P00000,20,", "P00000,21,", 1)).unwrap();
    let o = inspect(&varying);
    assert_eq!(o.status.code(), Some(2), "{}", show(&o));
    assert!(
        stderr(&o).contains("inspect the release instead"),
        "{}",
        show(&o)
    );
    assert!(
        !stderr(&o).contains("P00000"),
        "no value printed: {}",
        show(&o)
    );
}

/// The certificate and the footers of a release by people state what
/// `kanon verify` recounts from the published labels. People whose
/// quasi-identifiers differ between their rows publish the widened cell of
/// all their rows, which can join classes the algorithm kept apart; the
/// certificate used the algorithm's classes (k achieved 19, the labels 61;
/// entropy l 1.49, the labels 1.82), so `kanon verify` rejected a good
/// release (exit 1).
#[test]
fn the_certificate_of_people_counts_the_published_classes() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    // 500 Adult rows, two per person: age and the rest differ between a
    // person's rows.
    let adult = adult().slice(0, 500);
    let ids: Vec<String> = (0..adult.num_rows())
        .map(|i| format!("p{}", i / 2))
        .collect();
    let batch = with_columns(
        &adult,
        vec![(
            arrow::datatypes::Field::new("pid", arrow::datatypes::DataType::Utf8, false),
            std::sync::Arc::new(arrow::array::StringArray::from(ids)) as arrow::array::ArrayRef,
        )],
    );
    let input = d.join("people.parquet");
    write_parquet(&input, &[batch]);
    let mut text = std::fs::read_to_string(root().join("configs/adult-average-risk.toml")).unwrap();
    text = text.replace("k = 1 ", "entity = \"pid\"\nk = 1 ").replace(
        "data/adult/hierarchies",
        &root().join("data/adult/hierarchies").display().to_string(),
    );
    text.push_str("\n[[attributes]]\nname = \"pid\"\nrole = \"pseudonymised\"\n");
    let job = d.join("job.toml");
    std::fs::write(&job, text).unwrap();
    let out = d.join("out.parquet");
    let o = run(anonymize_cmd(&job, &input, &out).env("KANON_PSEUDONYM_KEY", KEY));
    assert_eq!(o.status.code(), Some(0), "{}", show(&o));
    let o = run(kanon()
        .args(["verify", "-c"])
        .arg(&job)
        .arg("--input")
        .arg(&out));
    assert_eq!(o.status.code(), Some(0), "{}", show(&o));
    assert!(stdout(&o).contains("footers hold"), "{}", show(&o));
}
