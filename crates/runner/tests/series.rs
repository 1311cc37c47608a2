//! Issue 31, item 2, "a table's history is one release": a Delta table's
//! versions stay readable (time travel), so a reader diffs them. Each test
//! runs the real `kanon` binary on a generated visits table published day
//! after day, and attacks the versions as a reader would: by the rows each
//! class gained or lost between two versions. Before, every write mode
//! committed day 2 with exit 0.

mod common;

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

use arrow::array::{AsArray, RecordBatch};
use arrow::datatypes::DataType;
use common::*;

const KEY: &str = "series-test-key-0123456789abcdef";

/// Patients `from..to`, 1 to 3 visits each (`extra` more for patients
/// below `extra_below`: their later visits), age and sex constant per
/// patient, a diagnosis per visit.
fn visits(dir: &Path, name: &str, to: usize, extra_below: usize) -> PathBuf {
    let mut rows = vec!["patient_id,age,sex,ward,diagnosis".to_string()];
    for p in 0..to {
        let n = 1 + p % 3 + usize::from(p < extra_below);
        for v in 0..n {
            rows.push(format!(
                "P{p:05},{},{},W{},D{}",
                20 + (p * 37) % 60,
                ["F", "M"][(p / 7) % 2],
                v % 2,
                (p * 3 + v) % 7
            ));
        }
    }
    let csv = dir.join(name);
    std::fs::write(&csv, rows.join("\n") + "\n").unwrap();
    csv
}

fn job(dir: &Path, output: &str) -> PathBuf {
    let job = dir.join("job.toml");
    std::fs::write(
        &job,
        format!(
            "[privacy]\nk = 5\nl = 2\nentity = \"patient_id\"\n\
             [algorithm]\nname = \"mondrian\"\n\
             [output]\nformat = \"delta\"\n{output}\n\
             [[attributes]]\nname = \"patient_id\"\nrole = \"pseudonymised\"\n\
             [[attributes]]\nname = \"age\"\nrole = \"quasi-identifier\"\n\
             [[attributes]]\nname = \"sex\"\nrole = \"quasi-identifier\"\n\
             [[attributes]]\nname = \"ward\"\nrole = \"insensitive\"\n\
             [[attributes]]\nname = \"diagnosis\"\nrole = \"sensitive\"\n"
        ),
    )
    .unwrap();
    job
}

fn publish(job: &Path, input: &Path, table: &Path, sets: &[&str]) -> std::process::Output {
    let mut c = anonymize_cmd(job, input, table);
    c.env("KANON_PSEUDONYM_KEY", KEY);
    for s in sets {
        c.args(["--set", s]);
    }
    run(&mut c)
}

/// The versions in the table's log.
fn versions(table: &Path) -> Vec<i64> {
    let mut v: Vec<i64> = std::fs::read_dir(table.join("_delta_log"))
        .unwrap()
        .filter_map(|e| {
            let name = e.unwrap().file_name().into_string().unwrap();
            name.strip_suffix(".json").and_then(|n| n.parse().ok())
        })
        .collect();
    v.sort();
    v
}

/// The data files active at `version`, replaying the log.
fn active(table: &Path, version: i64) -> BTreeSet<String> {
    let mut files = BTreeSet::new();
    for v in 0..=version {
        let log = std::fs::read_to_string(table.join(format!("_delta_log/{v:020}.json"))).unwrap();
        for line in log.lines().filter(|l| !l.trim().is_empty()) {
            let a: serde_json::Value = serde_json::from_str(line).unwrap();
            if let Some(p) = a["add"]["path"].as_str() {
                files.insert(p.to_string());
            }
            if let Some(p) = a["remove"]["path"].as_str() {
                files.remove(p);
            }
        }
    }
    files
}

fn text(batch: &RecordBatch, column: &str) -> Vec<String> {
    let c = arrow::compute::cast(batch.column_by_name(column).unwrap(), &DataType::Utf8).unwrap();
    c.as_string::<i32>()
        .iter()
        .map(|v| v.unwrap_or("").to_string())
        .collect()
}

/// A version as a reader sees it: per class (the published age and sex),
/// its rows (ward, diagnosis) and the people (pseudonyms) they belong to.
type Classes = BTreeMap<(String, String), (Vec<(String, String)>, BTreeSet<String>)>;

fn classes(table: &Path, version: i64) -> Classes {
    let mut out = Classes::new();
    for f in active(table, version) {
        for b in [read_parquet(&table.join(&f))] {
            let (age, sex, ward, dx, id) = (
                text(&b, "age"),
                text(&b, "sex"),
                text(&b, "ward"),
                text(&b, "diagnosis"),
                text(&b, "patient_id"),
            );
            for r in 0..b.num_rows() {
                let e = out.entry((age[r].clone(), sex[r].clone())).or_default();
                e.0.push((ward[r].clone(), dx[r].clone()));
                e.1.insert(id[r].clone());
            }
        }
    }
    out
}

/// The differencing attack: the classes whose rows changed between the
/// two versions by fewer than `k` people (rows added or removed, counted
/// by the people whose rows they are), and how many rows those are.
fn singled_out(a: &Classes, b: &Classes, k: usize) -> (usize, usize) {
    let empty = (Vec::new(), BTreeSet::new());
    let (mut classes, mut rows) = (0, 0);
    for key in a.keys().chain(b.keys()).collect::<BTreeSet<_>>() {
        let (ra, _) = a.get(key).unwrap_or(&empty);
        let (rb, pb) = b.get(key).unwrap_or(&empty);
        let mut left: Vec<&(String, String)> = ra.iter().collect();
        let mut added = 0;
        for r in rb {
            match left.iter().position(|x| *x == r) {
                Some(i) => {
                    left.remove(i);
                }
                None => added += 1,
            }
        }
        let changed = added + left.len();
        // The people a change can come from: a class whose rows changed
        // holds them; fewer than k people in it, or a change of fewer rows
        // than k people could have, singles them out.
        if changed > 0 && (changed < k || pb.len() < k) {
            classes += 1;
            rows += changed;
        }
    }
    (classes, rows)
}

/// The daily job: `append` with a history. Day 2 holds day 1's patients
/// (some with a later visit) and 25 new ones: only the new patients are
/// published, in classes of their own of at least 5; diffing the two
/// versions singles out nobody; a rerun is a no-op; a day with nobody new
/// publishes nothing; `kanon verify` checks the history.
#[test]
fn a_daily_append_with_a_history_publishes_each_person_once() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let day1 = visits(d, "day1.csv", 300, 0);
    let day2 = visits(d, "day2.csv", 325, 40);
    let history = d.join("history");
    let job = job(
        d,
        &format!(
            "mode = \"append\"\nhistory = {:?}",
            history.to_str().unwrap()
        ),
    );
    let table = d.join("visits");
    let o = publish(&job, &day1, &table, &[]);
    assert_eq!(o.status.code(), Some(0), "{}", show(&o));
    let o = publish(&job, &day2, &table, &[]);
    assert_eq!(o.status.code(), Some(0), "{}", show(&o));
    assert!(
        stdout(&o).contains("people the table already publishes left out"),
        "{}",
        show(&o)
    );
    assert_eq!(versions(&table), vec![0, 1]);
    let (v0, v1) = (classes(&table, 0), classes(&table, 1));
    let people = |c: &Classes| c.values().map(|(_, p)| p.len()).sum::<usize>();
    let rows = |c: &Classes| c.values().map(|(r, _)| r.len()).sum::<usize>();
    assert_eq!(people(&v0), 300);
    // Each person once: the 25 new patients' 50 visits, none of the
    // later visits of day 1's patients.
    assert_eq!(people(&v1), 325, "every person once");
    let new_rows: usize = (300..325).map(|p| 1 + p % 3).sum();
    assert_eq!(rows(&v1) - rows(&v0), new_rows);
    assert_eq!(singled_out(&v0, &v1, 5), (0, 0));
    // The history is not in the table.
    assert!(history.exists());
    assert!(!ls(&table).iter().any(|f| f.contains("kanon-history")));
    // `kanon verify` checks the readable versions as one release.
    let o = run(kanon()
        .args(["verify", "-c"])
        .arg(&job)
        .arg("-i")
        .arg(&table)
        .env("KANON_PSEUDONYM_KEY", KEY));
    assert_eq!(o.status.code(), Some(0), "{}", show(&o));
    assert!(stdout(&o).contains("hold as one release"), "{}", show(&o));
    // A rerun of day 2 is a no-op; a day with nobody new publishes nothing.
    let o = publish(&job, &day2, &table, &[]);
    assert_eq!(o.status.code(), Some(0), "{}", show(&o));
    let day3 = visits(d, "day3.csv", 325, 100);
    let o = publish(&job, &day3, &table, &[]);
    assert_eq!(o.status.code(), Some(0), "{}", show(&o));
    assert!(
        stdout(&o).contains("nothing new to publish"),
        "{}",
        show(&o)
    );
    assert_eq!(versions(&table), vec![0, 1]);
}

/// Day 2 re-anonymised whole: in `append` without a history, `overwrite`
/// and `replace-partition` with one, the commit a reader could diff is
/// refused (exit 3, naming the versions and the remedies), and the table
/// stays at version 0 with no new data file. With
/// `output.unchecked_series = true` in the job file the overwrite is
/// published, and the attack on its two versions singles people out:
/// what the refusal prevents.
#[test]
fn versions_a_reader_could_diff_are_refused_and_the_table_is_unchanged() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let day1 = visits(d, "day1.csv", 300, 0);
    let day2 = visits(d, "day2.csv", 325, 40);
    let history = d.join("history");
    let with_history = format!("history = {:?}", history.to_str().unwrap());
    for (name, output, sets) in [
        (
            "append without a history",
            "",
            vec!["output.mode=\"append\""],
        ),
        (
            "overwrite with a history",
            with_history.as_str(),
            vec!["output.mode=\"overwrite\""],
        ),
        (
            "replace-partition with a history",
            with_history.as_str(),
            vec![
                "output.mode=\"replace-partition\"",
                "output.partition={ day = \"1\" }",
            ],
        ),
    ] {
        let _ = std::fs::remove_dir_all(&history);
        let job = job(d, output);
        let table = d.join(name.replace(' ', "_"));
        let first: Vec<&str> = match name.starts_with("replace") {
            true => vec!["output.mode=\"append\"", "output.partition={ day = \"1\" }"],
            false => vec![],
        };
        let o = publish(&job, &day1, &table, &first);
        assert_eq!(o.status.code(), Some(0), "{name}: {}", show(&o));
        let files = ls(&table);
        let o = publish(&job, &day2, &table, &sets);
        assert_eq!(o.status.code(), Some(3), "{name}: {}", show(&o));
        let err = stderr(&o);
        assert!(err.contains("nothing was committed"), "{name}: {err}");
        assert!(err.contains("a new table"), "{name}: remedies: {err}");
        assert!(!err.contains("P00"), "{name}: no value printed: {err}");
        assert_eq!(versions(&table), vec![0], "{name}");
        assert_eq!(ls(&table), files, "{name}: no file left behind");
    }
    // The job file accepts readers comparing versions: published, and the
    // attack singles people out.
    let job = job(d, "unchecked_series = true");
    let table = d.join("unchecked");
    let o = publish(&job, &day1, &table, &[]);
    assert_eq!(o.status.code(), Some(0), "{}", show(&o));
    let o = publish(&job, &day2, &table, &["output.mode=\"overwrite\""]);
    assert_eq!(o.status.code(), Some(0), "{}", show(&o));
    let (classes_hit, _) = singled_out(&classes(&table, 0), &classes(&table, 1), 5);
    assert!(classes_hit > 0, "the unchecked overwrite is attackable");
}

/// What a history cannot check is refused: a table whose earlier version
/// has no record in the history (exit 3), a history inside the table or
/// without `privacy.entity`, a history on a Parquet release (exit 2), and
/// an override that turns the check off (it weakens the job file).
#[test]
fn a_history_that_cannot_check_the_series_is_refused() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let day1 = visits(d, "day1.csv", 300, 0);
    let day2 = visits(d, "day2.csv", 325, 0);
    let history = d.join("history");
    let table = d.join("visits");
    // Version 0 written without the history.
    let o = publish(&job(d, ""), &day1, &table, &[]);
    assert_eq!(o.status.code(), Some(0), "{}", show(&o));
    let job_h = job(
        d,
        &format!(
            "mode = \"append\"\nhistory = {:?}",
            history.to_str().unwrap()
        ),
    );
    let o = publish(&job_h, &day2, &table, &[]);
    assert_eq!(o.status.code(), Some(3), "{}", show(&o));
    assert!(stderr(&o).contains("has no record of"), "{}", show(&o));
    assert_eq!(versions(&table), vec![0]);
    // Inside the table.
    let inside = format!("output.history={:?}", table.join("h").to_str().unwrap());
    let o = publish(&job_h, &day2, &table, &[&inside]);
    assert_eq!(o.status.code(), Some(2), "{}", show(&o));
    assert!(stderr(&o).contains("never be published"), "{}", show(&o));
    // An override may not turn the check off.
    let o = publish(&job_h, &day2, &table, &["output.unchecked_series=true"]);
    assert_eq!(o.status.code(), Some(2), "{}", show(&o));
    // Without privacy.entity.
    let no_entity = std::fs::read_to_string(&job_h)
        .unwrap()
        .replace("entity = \"patient_id\"\n", "entity = \"row\"\n");
    let job_r = d.join("rows.toml");
    std::fs::write(&job_r, no_entity).unwrap();
    let o = publish(&job_r, &day2, &d.join("other"), &[]);
    assert_eq!(o.status.code(), Some(2), "{}", show(&o));
    assert!(stderr(&o).contains("privacy.entity"), "{}", show(&o));
    // A model the series check does not know (it counts k and distinct l
    // per atom of the versions): refused, not certified unchecked.
    let o = publish(
        &job_h,
        &day2,
        &d.join("modelled"),
        &["privacy.models.average-risk.average=0.2"],
    );
    assert_eq!(o.status.code(), Some(2), "{}", show(&o));
    assert!(
        stderr(&o).contains("not for the job's `[privacy.models]` (average-risk)"),
        "{}",
        show(&o)
    );
    // A Parquet release replaced by the same job's release of another
    // input is a series readers can diff: refused (exit 3, the first
    // release kept) unless the job file accepts it; the same input again
    // is the same release.
    let plain = std::fs::read_to_string(job(d, "unchecked_series = true"))
        .unwrap()
        .replace("format = \"delta\"\nunchecked_series = true\n", "");
    let job_q = d.join("parquet.toml");
    std::fs::write(&job_q, &plain).unwrap();
    let out = d.join("release.parquet");
    let o = publish(&job_q, &day1, &out, &[]);
    assert_eq!(o.status.code(), Some(0), "{}", show(&o));
    let first = std::fs::read(&out).unwrap();
    let mut again = anonymize_cmd(&job_q, &day1, &out);
    let o = run(again.arg("--overwrite").env("KANON_PSEUDONYM_KEY", KEY));
    assert_eq!(o.status.code(), Some(0), "same input: {}", show(&o));
    let mut next = anonymize_cmd(&job_q, &day2, &out);
    let o = run(next.arg("--overwrite").env("KANON_PSEUDONYM_KEY", KEY));
    assert_eq!(o.status.code(), Some(3), "{}", show(&o));
    assert!(stderr(&o).contains("diff the two"), "{}", show(&o));
    assert_eq!(std::fs::read(&out).unwrap(), first);
    std::fs::write(
        &job_q,
        plain.replace("[output]\n", "[output]\nunchecked_series = true\n"),
    )
    .unwrap();
    let mut next = anonymize_cmd(&job_q, &day2, &out);
    let o = run(next.arg("--overwrite").env("KANON_PSEUDONYM_KEY", KEY));
    assert_eq!(o.status.code(), Some(0), "{}", show(&o));
    // A history on a Parquet release.
    let job_p = job(d, &format!("history = {:?}", history.to_str().unwrap()));
    let o = publish(
        &job_p,
        &day2,
        &d.join("out.parquet"),
        &["output.format=\"parquet\""],
    );
    assert_eq!(o.status.code(), Some(2), "{}", show(&o));
}

/// The daily job on S3, table and history both in a bucket of a real
/// S3-compatible server (moto): day 2 publishes the new patients only, a
/// re-anonymised overwrite is refused with the table unchanged, and
/// `kanon verify` checks the history from the bucket.
#[test]
fn the_daily_job_keeps_its_history_on_s3() {
    let Some(m) = Moto::start() else { return };
    m.create_bucket("lake");
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    for (name, to, extra) in [
        ("day1.csv", 300, 0),
        ("day2.csv", 325, 40),
        ("day3.csv", 350, 0),
    ] {
        let csv = visits(d, name, to, extra);
        m.put("lake", &format!("in/{name}"), &std::fs::read(csv).unwrap());
    }
    let job = job(
        d,
        "mode = \"append\"\nhistory = \"s3://lake/private/history\"",
    );
    let day = |input: &str, sets: &[&str]| {
        let mut c = m.kanon();
        c.args(["anonymize", "-c"])
            .arg(&job)
            .args(["-i", input, "-o", "s3://lake/releases/visits"])
            .env("KANON_PSEUDONYM_KEY", KEY);
        for s in sets {
            c.args(["--set", s]);
        }
        run(&mut c)
    };
    let versions = || {
        m.keys("lake", "releases/visits/_delta_log/")
            .iter()
            .filter(|k| k.ends_with(".json"))
            .count()
    };
    let o = day("s3://lake/in/day1.csv", &[]);
    assert_eq!(o.status.code(), Some(0), "{}", show(&o));
    let o = day("s3://lake/in/day2.csv", &[]);
    assert_eq!(o.status.code(), Some(0), "{}", show(&o));
    assert!(
        stdout(&o).contains("people the table already publishes left out"),
        "{}",
        show(&o)
    );
    assert_eq!(versions(), 2);
    let history = m.keys("lake", "private/history/");
    assert_eq!(
        history
            .iter()
            .filter(|k| k.ends_with(".kanon-history"))
            .count(),
        2,
        "{history:?}"
    );
    assert!(!m
        .keys("lake", "releases/")
        .iter()
        .any(|k| k.contains("kanon-history")));
    let o = day("s3://lake/in/day3.csv", &["output.mode=\"overwrite\""]);
    assert_eq!(o.status.code(), Some(3), "{}", show(&o));
    assert_eq!(versions(), 2);
    let o = run(m
        .kanon()
        .args(["verify", "-c"])
        .arg(&job)
        .args(["-i", "s3://lake/releases/visits"])
        .env("KANON_PSEUDONYM_KEY", KEY));
    assert_eq!(o.status.code(), Some(0), "{}", show(&o));
    assert!(stdout(&o).contains("hold as one release"), "{}", show(&o));
}

/// Two daily runs at once on one table with a history (day 2 of two
/// sources, each with new patients): both check the history against
/// version 0 and wait at the commit (barrier `delta-commit`); one commits, the other fails with
/// nothing committed and its history file removed (its check is stale: a
/// commit resolved around it would publish people nobody checked
/// together). Run again, it checks against version 1 and commits.
#[test]
fn of_two_runs_at_once_one_commits_and_the_other_is_rerun() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let day1 = visits(d, "day1.csv", 300, 0);
    let day2a = visits(d, "day2a.csv", 325, 0);
    // Patients 0..300 and 325..350: other new people than day2a's.
    let text = std::fs::read_to_string(visits(d, "all.csv", 350, 0)).unwrap();
    let day2b = d.join("day2b.csv");
    std::fs::write(
        &day2b,
        text.lines()
            .filter(|l| {
                l.starts_with("patient_id")
                    || l[1..6]
                        .parse::<usize>()
                        .is_ok_and(|p| !(300..325).contains(&p))
            })
            .collect::<Vec<_>>()
            .join("\n")
            + "\n",
    )
    .unwrap();
    let history = d.join("history");
    let job = job(
        d,
        &format!(
            "mode = \"append\"\nhistory = {:?}",
            history.to_str().unwrap()
        ),
    );
    let table = d.join("visits");
    let o = publish(&job, &day1, &table, &[]);
    assert_eq!(o.status.code(), Some(0), "{}", show(&o));
    let barriers = [tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap()];
    let children: Vec<_> = [&day2a, &day2b]
        .iter()
        .zip(&barriers)
        .map(|(input, b)| {
            std::fs::write(b.path().join("delta-commit.wait"), b"").unwrap();
            anonymize_cmd(&job, input, &table)
                .env("KANON_PSEUDONYM_KEY", KEY)
                .env("KANON_TEST_BARRIER", b.path())
                .stdout(std::process::Stdio::piped())
                .stderr(std::process::Stdio::piped())
                .spawn()
                .unwrap()
        })
        .collect();
    // Both have loaded and checked version 0 when they are let go: one
    // commit wins, the other's, checked against a version no longer the
    // latest, fails.
    for b in &barriers {
        wait_for(&b.path().join("delta-commit"));
    }
    for b in &barriers {
        std::fs::remove_file(b.path().join("delta-commit.wait")).unwrap();
    }
    let outputs: Vec<_> = children
        .into_iter()
        .map(|c| c.wait_with_output().unwrap())
        .collect();
    let won: Vec<bool> = outputs.iter().map(|o| o.status.success()).collect();
    assert_eq!(
        won.iter().filter(|&&w| w).count(),
        1,
        "{}\n{}",
        show(&outputs[0]),
        show(&outputs[1])
    );
    assert_eq!(versions(&table), vec![0, 1]);
    let files = |dir: &Path| -> usize {
        std::fs::read_dir(dir)
            .unwrap()
            .map(|e| std::fs::read_dir(e.unwrap().path()).unwrap().count())
            .sum()
    };
    assert_eq!(files(&history), 2, "the loser's history file is removed");
    // The loser again: checked against version 1, committed.
    let loser = if won[0] { &day2b } else { &day2a };
    let o = publish(&job, loser, &table, &[]);
    assert_eq!(o.status.code(), Some(0), "{}", show(&o));
    assert_eq!(versions(&table), vec![0, 1, 2]);
    let (v0, v2) = (classes(&table, 0), classes(&table, 2));
    assert_eq!(singled_out(&v0, &v2, 5), (0, 0));
    let people = |c: &Classes| c.values().map(|(_, p)| p.len()).sum::<usize>();
    assert_eq!(people(&v2), 350);
}
