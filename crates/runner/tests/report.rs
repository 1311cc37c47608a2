//! The HTML release report: `kanon anonymize --report` (written with the
//! release, never without it), `kanon report` on a published release (with
//! and without the input), no raw value in the page, and the Adult report
//! rendered by headless Chromium (plots drawn, console clean, screenshot).

mod common;

use std::path::{Path, PathBuf};
use std::process::Command;

use arrow::array::{Array, AsArray};
use arrow::compute::cast;
use arrow::datatypes::DataType;
use common::*;

/// Chromium, as Debian installs it, unless `KANON_TEST_CHROMIUM` names another.
fn chromium() -> PathBuf {
    std::env::var_os("KANON_TEST_CHROMIUM").map_or("/usr/bin/chromium".into(), PathBuf::from)
}

/// Whether Node and Chromium are there; panics under `CI=true` when not.
fn chromium_ready() -> bool {
    let node = Command::new("node")
        .arg("--version")
        .output()
        .is_ok_and(|o| o.status.success());
    let ok = node && chromium().exists();
    if !ok {
        assert!(
            std::env::var("CI").as_deref() != Ok("true"),
            "node and {} are required in CI: apt-get install -y chromium nodejs",
            chromium().display()
        );
        eprintln!(
            "skipped: node or {} not found (apt-get install -y chromium nodejs)",
            chromium().display()
        );
    }
    ok
}

/// Runs the bundled Adult job into `dir` with `extra` flags; returns the
/// release's path.
fn anonymize_adult(dir: &Path, extra: &[&str]) -> (std::process::Output, PathBuf) {
    let job = adult_job(dir, |t| t);
    let release = dir.join("adult.parquet");
    let o = run(kanon()
        .args(["-q", "anonymize", "-c"])
        .arg(&job)
        .arg("-o")
        .arg(&release)
        .args(extra));
    (o, release)
}

fn read(p: &Path) -> String {
    std::fs::read_to_string(p).unwrap_or_else(|e| panic!("{}: {e}", p.display()))
}

#[test]
fn the_adult_report_renders_in_chromium() {
    let dir = tempfile::tempdir().unwrap();
    let report = dir.path().join("report.html");
    let (o, _) = anonymize_adult(dir.path(), &["--report", report.to_str().unwrap()]);
    assert!(o.status.success(), "{}", show(&o));
    let html = read(&report);
    for section in [
        "1. The job",
        "2. What was achieved",
        "3. Risk before and after",
        "4. Information kept",
        "5. Provenance and certificate",
        "k-anonymity (k = 10)",
        "kanon.input.fingerprint",
    ] {
        assert!(html.contains(section), "no {section:?} in the report");
    }
    // Self-contained: no script, nothing fetched.
    assert!(!html.contains("<script"), "the report holds a script");
    if !chromium_ready() {
        return;
    }
    let shot = match std::env::var_os("KANON_TEST_REPORT_SCREENSHOT") {
        // KANON_TEST_REPORT_SCREENSHOT=docs/report-adult.png refreshes the README's.
        Some(p) => root().join(p),
        None => PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join("report-adult.png"),
    };
    let o = Command::new("node")
        .arg(root().join("tests/report/check.mjs"))
        .arg(&report)
        .arg(&shot)
        .arg(chromium())
        .output()
        .expect("node runs");
    assert!(o.status.success(), "{}", show(&o));
    let page: serde_json::Value = serde_json::from_slice(&o.stdout).expect("check.mjs prints JSON");
    assert_eq!(page["errors"], serde_json::json!([]), "console errors");
    assert_eq!(page["requests"], serde_json::json!([]), "network requests");
    assert_eq!(
        page["external"],
        serde_json::json!([]),
        "external resources"
    );
    assert_eq!(page["scripts"], 0);
    let svgs = page["svgs"].as_array().unwrap();
    // 2 risk charts, 3 per QI (8 QIs), the heat scale and the heatmap.
    assert_eq!(svgs.len(), 2 + 3 * 8 + 2, "{svgs:#?}");
    for svg in svgs {
        let f = |k: &str| svg[k].as_f64().unwrap();
        assert!(
            f("width") > 0.0 && f("height") > 0.0 && f("drawn") > 0.0,
            "an empty plot: {svg}"
        );
    }
    let heatmap = svgs
        .iter()
        .find(|s| s["label"].as_str().unwrap().starts_with("generalisation"))
        .unwrap();
    assert_eq!(heatmap["drawn"].as_u64(), Some(24 * 8), "{heatmap}");
    let bytes = std::fs::metadata(&shot).unwrap().len();
    assert!(
        (10_000..500_000).contains(&bytes),
        "screenshot {} has {bytes} bytes",
        shot.display()
    );
    eprintln!("screenshot: {}", shot.display());
}

#[test]
fn anonymize_writes_the_report_with_the_release_and_never_without() {
    let dir = tempfile::tempdir().unwrap();
    let report = dir.path().join("report.html");
    // Unsatisfiable (k above the row count): no release, no report.
    let (o, release) = anonymize_adult(
        dir.path(),
        &["--k", "100000", "--report", report.to_str().unwrap()],
    );
    assert_eq!(o.status.code(), Some(3), "{}", show(&o));
    assert!(!report.exists() && !release.exists());
    assert_eq!(ls(dir.path()), ["job.toml"]);
    // A report that cannot be written: no release either, and the error
    // names the flag and the file.
    let missing = dir.path().join("no-such-dir/report.html");
    let (o, release) = anonymize_adult(dir.path(), &["--report", missing.to_str().unwrap()]);
    assert_eq!(o.status.code(), Some(2), "{}", show(&o));
    let err = stderr(&o);
    assert!(
        err.contains("--report") && err.contains("no-such-dir"),
        "{err}"
    );
    assert!(!release.exists());
    assert_eq!(ls(dir.path()), ["job.toml"]);
    // Success: release, metrics and report together.
    let metrics = dir.path().join("metrics.json");
    let (o, release) = anonymize_adult(
        dir.path(),
        &[
            "--report",
            report.to_str().unwrap(),
            "--metrics-json",
            metrics.to_str().unwrap(),
        ],
    );
    assert!(o.status.success(), "{}", show(&o));
    assert!(release.exists() && metrics.exists());
    assert!(read(&report).contains("verified"));
    assert_eq!(
        ls(dir.path()),
        [
            "_adult.parquet.kanon_release.json",
            "adult.parquet",
            "job.toml",
            "metrics.json",
            "report.html"
        ]
    );
}

#[test]
fn report_on_a_published_release() {
    let dir = tempfile::tempdir().unwrap();
    let (o, release) = anonymize_adult(dir.path(), &[]);
    assert!(o.status.success(), "{}", show(&o));
    let job = dir.path().join("job.toml");
    let report = dir.path().join("r.html");
    let o = run(kanon()
        .arg("report")
        .arg("-c")
        .arg(&job)
        .arg(&release)
        .arg("-o")
        .arg(&report));
    assert!(o.status.success(), "{}", show(&o));
    assert!(stdout(&o).contains("verified"), "{}", show(&o));
    let html = read(&report);
    assert!(html.contains(">verified<"));
    // The "before" column and the figures the release's metadata holds.
    assert!(html.contains("<th>before</th>") && html.contains("NCP (run)"));
    assert!(html.contains("kanon.rows_in") && html.contains("30,162"));

    // Without the input: the report says so.
    let o = run(kanon()
        .args(["report", "--no-input", "-c"])
        .arg(&job)
        .arg(&release)
        .arg("-o")
        .arg(&report));
    assert!(o.status.success(), "{}", show(&o));
    let html = read(&report);
    assert!(html.contains("--no-input") && !html.contains("<th>before</th>"));
    assert!(html.contains("before: input not read"));

    // Checked against a stronger job: the report is written and says NOT
    // verified; exit 1 as for `kanon verify`.
    let o = run(kanon()
        .args(["report", "--k", "50", "-c"])
        .arg(&job)
        .arg(&release)
        .arg("-o")
        .arg(&report));
    assert_eq!(o.status.code(), Some(1), "{}", show(&o));
    assert!(read(&report).contains("NOT verified"));

    // A release that still holds a column the job calls identifying fails,
    // as under `kanon verify`.
    let strict = dir.path().join("strict");
    std::fs::create_dir(&strict).unwrap();
    let strict_job = adult_job(&strict, |t| {
        let cut = t.find("name = \"occupation\"").unwrap();
        format!(
            "{}name = \"occupation\"\nrole = \"identifying\"\n\n[[attributes]]\nname = \"salary-class\"\nrole = \"sensitive\"\n",
            &t[..cut]
        )
    });
    let o = run(kanon()
        .args(["report", "--no-input", "-c"])
        .arg(&strict_job)
        .arg(&release)
        .arg("-o")
        .arg(&report));
    assert_eq!(o.status.code(), Some(1), "{}", show(&o));
    assert!(read(&report).contains("identifying column(s) `occupation`"));

    // Missing release, input or flag: clear errors naming them.
    let o = run(kanon()
        .arg("report")
        .arg("-c")
        .arg(&job)
        .arg(dir.path().join("gone.parquet"))
        .arg("-o")
        .arg(&report));
    assert_eq!(o.status.code(), Some(2), "{}", show(&o));
    assert!(stderr(&o).contains("gone.parquet"), "{}", show(&o));
    let o = run(kanon()
        .arg("report")
        .arg("-c")
        .arg(&job)
        .arg(&release)
        .arg("-i")
        .arg(dir.path().join("no-input.parquet"))
        .arg("-o")
        .arg(&report));
    assert_eq!(o.status.code(), Some(2), "{}", show(&o));
    let err = stderr(&o);
    assert!(
        err.contains("no-input.parquet") && err.contains("--no-input"),
        "{err}"
    );
    let o = run(kanon().arg("report").arg("-c").arg(&job).arg(&release));
    assert_eq!(o.status.code(), Some(2), "{}", show(&o));
    assert!(stderr(&o).contains("--output"), "{}", show(&o));
}

/// The distinct values of a column as text.
fn strings(batch: &arrow::array::RecordBatch, name: &str) -> Vec<(String, usize)> {
    let col = cast(batch.column_by_name(name).unwrap(), &DataType::Utf8).unwrap();
    let col = col.as_string::<i32>();
    let mut counts = std::collections::BTreeMap::<String, usize>::new();
    for i in 0..col.len() {
        if col.is_valid(i) {
            *counts.entry(col.value(i).to_string()).or_default() += 1;
        }
    }
    counts.into_iter().collect()
}

/// Whether a raw number is published: a label, or a bound of a range label
/// (Mondrian's ranges are bounded by values of their class).
fn published_number(raw: &str, labels: &[String]) -> bool {
    labels.iter().any(|l| {
        l == raw
            || l.trim_start_matches('[')
                .trim_end_matches([']', ')'])
                .split('-')
                .any(|b| b.trim() == raw)
    })
}

#[test]
fn the_report_shows_no_raw_value() {
    let input = read_parquet(&root().join("data/adult/adult.parquet"));
    let qis = ADULT_QIS;
    // Mondrian (ranges bounded by raw values) and HeuristicMin (fixed
    // intervals: the unique 86-year-old is published as [80-89]).
    for algorithm in ["mondrian", "heuristic-min"] {
        let dir = tempfile::tempdir().unwrap();
        let report = dir.path().join("report.html");
        let (o, release) = anonymize_adult(
            dir.path(),
            &[
                "--algorithm",
                algorithm,
                "--report",
                report.to_str().unwrap(),
            ],
        );
        assert!(o.status.success(), "{}", show(&o));
        let again = dir.path().join("again.html");
        let o = run(kanon()
            .args(["report", "--algorithm", algorithm, "-c"])
            .arg(dir.path().join("job.toml"))
            .arg(&release)
            .arg("-o")
            .arg(&again));
        assert!(o.status.success(), "{}", show(&o));
        let output = read_parquet(&release);
        // A raw word inside any published label (race `Other` in
        // occupation `Other-service`) may show as part of that label.
        let all_labels: Vec<String> = qis
            .iter()
            .flat_map(|q| strings(&output, q).into_iter().map(|(v, _)| v))
            .collect();
        let (mut strings_checked, mut unique_numbers) = (0, Vec::new());
        for html in [read(&report), read(&again)] {
            // Words and numbers of the page, split at anything else.
            let tokens: std::collections::HashSet<&str> = html
                .split(|c: char| !(c.is_alphanumeric() || c == '-' || c == '.'))
                .collect();
            for q in qis {
                let released: Vec<String> =
                    strings(&output, q).into_iter().map(|(v, _)| v).collect();
                for (raw, n) in strings(&input, q) {
                    if raw.parse::<f64>().is_ok() {
                        // Numbers also count records: only a unique raw
                        // value is checked, as a token of its own.
                        if n == 1 && !published_number(&raw, &released) {
                            assert!(
                                !tokens.contains(raw.as_str()),
                                "{algorithm}: raw {q} value {raw} in the report"
                            );
                            unique_numbers.push(raw);
                        }
                    } else if !all_labels.iter().any(|l| l.contains(raw.as_str())) {
                        assert!(
                            !html.contains(&raw),
                            "{algorithm}: raw {q} value {raw:?} in the report"
                        );
                        strings_checked += 1;
                    }
                }
            }
            // Adult's only Dutch record is never published as such.
            assert!(!html.contains("Holand-Netherlands"));
        }
        assert!(strings_checked > 20, "{algorithm}: {strings_checked}");
        if algorithm == "heuristic-min" {
            assert!(
                unique_numbers.contains(&"86".to_string()),
                "{unique_numbers:?}"
            );
        }
    }
}
