//! Issue 32, "fail closed, round three": each way a new user or an
//! attacker made kanon publish more than it claimed, or exit with the wrong
//! code, run through the real `kanon` binary. Each test failed on the main
//! before the fix (the session note has the table).

mod common;

use std::io::Read;
use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::sync::Arc;

use arrow::array::{ArrayRef, Int64Array, RecordBatch, StringArray};
use arrow::datatypes::{DataType, Field, Schema};
use common::*;

/// A temporary directory with the bundled job, its hierarchy files copied
/// beside it (so a test that overwrote one would not touch the
/// repository's) and the Adult input: (dir, job, input).
fn workspace() -> (tempfile::TempDir, PathBuf, PathBuf) {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    std::fs::create_dir(d.join("hierarchies")).unwrap();
    for e in std::fs::read_dir(root().join("data/adult/hierarchies")).unwrap() {
        let e = e.unwrap();
        std::fs::copy(e.path(), d.join("hierarchies").join(e.file_name())).unwrap();
    }
    let input = d.join("in.parquet");
    std::fs::copy(root().join("data/adult/adult.parquet"), &input).unwrap();
    let text = std::fs::read_to_string(root().join("configs/adult.toml"))
        .unwrap()
        .replace(
            "\"data/adult/hierarchies/",
            &format!("\"{}/hierarchies/", d.display()),
        )
        .replace(
            "\"data/adult/adult.parquet\"",
            &format!("{:?}", input.display().to_string()),
        )
        .replace(
            "\"target/releases/adult-k10.parquet\"",
            &format!("{:?}", d.join("out.parquet").display().to_string()),
        );
    let job = d.join("job.toml");
    std::fs::write(&job, text).unwrap();
    (dir, job, input)
}

fn anonymize(job: &Path) -> std::process::Command {
    let mut c = kanon();
    c.args(["anonymize", "-c"]).arg(job);
    c
}

fn sha(path: &Path) -> Vec<u8> {
    use sha2::Digest;
    sha2::Sha256::digest(std::fs::read(path).unwrap()).to_vec()
}

/// Item 1: `role` forgotten on a column with a hierarchy is refused (it
/// was published raw as `insensitive`, and "k achieved" was printed).
#[test]
fn a_forgotten_role_is_refused() {
    let (dir, job, _) = workspace();
    let text = std::fs::read_to_string(&job).unwrap().replacen(
        "name = \"occupation\"\nrole = \"quasi-identifier\"\n",
        "name = \"occupation\"\n",
        1,
    );
    std::fs::write(&job, text).unwrap();
    let o = run(&mut anonymize(&job));
    assert_eq!(o.status.code(), Some(2), "{}", show(&o));
    assert!(
        stderr(&o).contains("`occupation` has no `role`")
            && stderr(&o).contains("quasi-identifier"),
        "{}",
        show(&o)
    );
    assert!(!dir.path().join("out.parquet").exists());
}

/// Item 2: no artefact may land on what the job reads (the input, the job
/// file, a hierarchy file) or on the release; each refusal names both
/// paths, exits 2 before any work, and leaves every file as it was.
#[test]
fn artefacts_never_overwrite_what_the_job_reads() {
    let (dir, job, input) = workspace();
    let d = dir.path();
    let hierarchy = d.join("hierarchies/sex.csv");
    let release = d.join("out.parquet");
    // A release to overwrite with an artefact.
    let o = run(&mut anonymize(&job));
    assert_eq!(o.status.code(), Some(0), "{}", show(&o));
    let targets: Vec<(&str, PathBuf)> = vec![
        ("input", input.clone()),
        ("job", job.clone()),
        ("hierarchy", hierarchy.clone()),
        ("release", release.clone()),
        ("aliased input", d.join("hierarchies/../in.parquet")),
    ];
    let before: Vec<Vec<u8>> = [&input, &job, &hierarchy, &release]
        .iter()
        .map(|p| sha(p))
        .collect();
    for flag in ["--metrics-json", "--report"] {
        for (what, target) in &targets {
            let o = run(anonymize(&job).arg("--overwrite").arg(flag).arg(target));
            assert_eq!(
                o.status.code(),
                Some(2),
                "{flag} at the {what}: {}",
                show(&o)
            );
            let err = stderr(&o);
            assert!(
                err.contains("is, contains or lies inside")
                    && err.contains(&*target.to_string_lossy()),
                "{flag} at the {what}: {}",
                show(&o)
            );
        }
    }
    // `kanon report -o` at the release or the input.
    for (what, target) in [("release", &release), ("input", &input)] {
        let o = run(kanon()
            .args(["report", "-c"])
            .arg(&job)
            .arg(&release)
            .arg("-o")
            .arg(target));
        assert_eq!(
            o.status.code(),
            Some(2),
            "report -o at the {what}: {}",
            show(&o)
        );
    }
    // The release itself over the job file.
    let o = run(anonymize(&job).arg("--overwrite").arg("-o").arg(&job));
    assert_eq!(o.status.code(), Some(2), "{}", show(&o));
    // `--output DIR/./sub/../in.parquet` with `sub` absent.
    let alias = format!("{}/./sub/../in.parquet", d.display());
    let o = run(anonymize(&job).args(["--overwrite", "-o", &alias]));
    assert_eq!(o.status.code(), Some(2), "{}", show(&o));
    assert!(!d.join("sub").exists(), "`sub` was created");
    // A release whose manifest (`_NAME.kanon_release.json` beside it)
    // would land on the job file.
    let shadow = d.join("_x.parquet.kanon_release.json");
    std::fs::copy(&job, &shadow).unwrap();
    let o = run(anonymize(&shadow)
        .args(["--overwrite", "-o"])
        .arg(d.join("x.parquet")));
    assert_eq!(o.status.code(), Some(2), "{}", show(&o));
    assert!(stderr(&o).contains("manifest"), "{}", show(&o));
    assert_eq!(sha(&shadow), sha(&job), "the job file was overwritten");
    let after: Vec<Vec<u8>> = [&input, &job, &hierarchy, &release]
        .iter()
        .map(|p| sha(p))
        .collect();
    assert_eq!(before, after, "a file the job reads was modified");
}

/// A CSV of `rows` (header first).
fn write_csv(path: &Path, rows: &[&str]) {
    std::fs::write(path, rows.join("\n") + "\n").unwrap();
}

/// Item 5: identifiers `007`, `07`, `7` and `0007` are four people: read as
/// text, they get four pseudonyms (as Int64 they were one).
#[test]
fn identifiers_keep_their_identity() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let csv = d.join("visits.csv");
    write_csv(
        &csv,
        &[
            "patient_id,age,code",
            "007,30,0012",
            "07,31,012",
            "7,32,12",
            "0007,33,12",
        ],
    );
    let job = d.join("job.toml");
    std::fs::write(
        &job,
        "[privacy]\nk = 2\n[algorithm]\nname = \"mondrian\"\n\
         [[attributes]]\nname = \"patient_id\"\nrole = \"pseudonymised\"\n\
         [[attributes]]\nname = \"age\"\nrole = \"quasi-identifier\"\n\
         [[attributes]]\nname = \"code\"\nrole = \"insensitive\"\n",
    )
    .unwrap();
    let out = d.join("out.parquet");
    let o = run(anonymize_cmd(&job, &csv, &out).env(
        "KANON_PSEUDONYM_KEY",
        "fail-closed-test-key-0123456789abcdef",
    ));
    assert_eq!(o.status.code(), Some(0), "{}", show(&o));
    let t = read_parquet(&out);
    let ids = t
        .column_by_name("patient_id")
        .unwrap()
        .as_any()
        .downcast_ref::<StringArray>()
        .unwrap();
    let distinct: std::collections::BTreeSet<&str> = ids.iter().flatten().collect();
    assert_eq!(distinct.len(), 4, "{distinct:?}");
    // An insensitive column whose values a number would change is kept as
    // written (the sample shows `0012`).
    let codes = arrow::compute::cast(t.column_by_name("code").unwrap(), &DataType::Utf8).unwrap();
    let codes = codes.as_any().downcast_ref::<StringArray>().unwrap();
    let mut codes: Vec<&str> = codes.iter().flatten().collect();
    codes.sort();
    assert_eq!(codes, vec!["0012", "012", "12", "12"]);
}

/// Item 5, past the sample: a code written `0012` after the rows type
/// inference read (`input.infer_rows`) would have been read as the number
/// 12, the same value as a `12` in the sample. The job now stops (exit 2)
/// naming the column and the setting, and writes nothing; with the sample
/// covering the row, the column is read as text.
#[test]
fn values_past_the_inference_sample_keep_their_identity() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let csv = d.join("visits.csv");
    let mut rows = vec!["age,code".to_string()];
    for i in 0..40 {
        rows.push(format!("{},{}", 30 + i % 4, 12 + i % 3));
    }
    rows.push("31,0012".to_string());
    let rows: Vec<&str> = rows.iter().map(String::as_str).collect();
    write_csv(&csv, &rows);
    let job = d.join("job.toml");
    std::fs::write(
        &job,
        "[privacy]\nk = 2\n[algorithm]\nname = \"mondrian\"\n\
         [[attributes]]\nname = \"age\"\nrole = \"quasi-identifier\"\n\
         [[attributes]]\nname = \"code\"\nrole = \"insensitive\"\n",
    )
    .unwrap();
    let out = d.join("out.parquet");
    let o = run(anonymize_cmd(&job, &csv, &out).args(["--set", "input.infer_rows=10"]));
    assert_eq!(o.status.code(), Some(2), "{}", show(&o));
    let err = stderr(&o);
    assert!(
        err.contains("`code`") && err.contains("input.infer_rows"),
        "{err}"
    );
    assert!(!err.contains("0012"), "the value is not printed: {err}");
    assert!(!out.exists());
    let o = run(anonymize_cmd(&job, &csv, &out).args(["--set", "input.infer_rows=100"]));
    assert_eq!(o.status.code(), Some(0), "{}", show(&o));
    let t = read_parquet(&out);
    assert_eq!(
        t.column_by_name("code").unwrap().data_type(),
        &DataType::Utf8
    );
}

/// Item 9: a closed standard output after the commit is no crash (exit
/// 101 before); a closed standard error on an error keeps the error's
/// exit code.
#[test]
fn closed_standard_streams_are_no_crash() {
    let (dir, job, _) = workspace();
    let mut child = anonymize(&job)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    drop(child.stdout.take());
    let mut err = String::new();
    child
        .stderr
        .take()
        .unwrap()
        .read_to_string(&mut err)
        .unwrap();
    let status = child.wait().unwrap();
    assert_eq!(status.code(), Some(0), "{err}");
    assert!(!err.contains("panicked"), "{err}");
    assert!(dir.path().join("out.parquet").exists());
    // An error (the release exists) with stderr closed: exit 5, no panic.
    let mut child = anonymize(&job)
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    drop(child.stderr.take());
    assert_eq!(child.wait().unwrap().code(), Some(5));
}

/// Item 9: an output path through a regular file is the job's mistake
/// (exit 2), not an I/O failure worth a retry (it was exit 4).
#[test]
fn an_output_under_a_regular_file_is_bad_input() {
    let (dir, job, _) = workspace();
    let file = dir.path().join("plain-file");
    std::fs::write(&file, b"x").unwrap();
    let o = run(anonymize(&job).arg("-o").arg(file.join("out.parquet")));
    assert_eq!(o.status.code(), Some(2), "{}", show(&o));
    for flag in ["--metrics-json", "--report"] {
        let o = run(anonymize(&job)
            .arg("--overwrite")
            .arg(flag)
            .arg(file.join("artefact")));
        assert_eq!(o.status.code(), Some(2), "{flag}: {}", show(&o));
    }
    assert_eq!(std::fs::read(&file).unwrap(), b"x");
}

/// Item 9: a risk threshold whose mean the algorithm misses at the job's k
/// is reached with larger classes (issue 36: the pipeline raises the class
/// size, and says so); a mean no release can reach is a model out of
/// reach (exit 3, it was exit 70), with nothing written.
#[test]
fn a_missed_mean_risk_raises_the_class_size_and_an_unreachable_one_is_unsatisfiable() {
    let (dir, job, _) = workspace();
    let original = std::fs::read_to_string(&job).unwrap();
    let with_mean = |mean: &str| {
        original.replace(
            "[privacy]\nk = 10\n",
            &format!("[privacy]\nk = 10\n[privacy.models.risk-threshold]\nk = 10\nmean = {mean}\n"),
        )
    };
    std::fs::write(&job, with_mean("0.05")).unwrap();
    let o = run(&mut anonymize(&job));
    assert_eq!(o.status.code(), Some(0), "{}", show(&o));
    assert!(
        stdout(&o).contains("class size    raised to"),
        "{}",
        show(&o)
    );
    let o = run(kanon()
        .args(["verify", "-c"])
        .arg(&job)
        .arg("-i")
        .arg(dir.path().join("out.parquet")));
    assert_eq!(o.status.code(), Some(0), "{}", show(&o));
    std::fs::remove_file(dir.path().join("out.parquet")).unwrap();
    std::fs::write(&job, with_mean("0.0000001")).unwrap();
    let o = run(&mut anonymize(&job));
    assert_eq!(o.status.code(), Some(3), "{}", show(&o));
    assert!(stderr(&o).contains("mean"), "{}", show(&o));
    assert!(!dir.path().join("out.parquet").exists());
}

/// Item 8: a job without `[privacy]` is refused (it meant k = 2).
#[test]
fn a_job_without_privacy_is_refused() {
    let (dir, job, _) = workspace();
    let text = std::fs::read_to_string(&job)
        .unwrap()
        .replace("[privacy]\nk = 10\n", "");
    std::fs::write(&job, text).unwrap();
    let o = run(&mut anonymize(&job));
    assert_eq!(o.status.code(), Some(2), "{}", show(&o));
    assert!(stderr(&o).contains("privacy.k"), "{}", show(&o));
    assert!(!dir.path().join("out.parquet").exists());
}

/// Item 7: `Cancer`, `cancer `, `CANCER` and placeholders (`N/A`, `?`,
/// `NULL`, blank) are one value and missing: l = 2 cannot be met on a
/// table where everybody has cancer (it was certified 3-diverse).
#[test]
fn placeholders_and_spellings_do_not_count_toward_l() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let n = 60;
    let ages = Int64Array::from_iter_values((0..n).map(|i| 20 + i % 30));
    let spellings = [
        "Cancer", "cancer ", "CANCER", " Cancer", "N/A", "?", "NULL", "",
    ];
    let diagnosis = StringArray::from_iter_values((0..n).map(|i| spellings[i as usize % 8]));
    let batch = RecordBatch::try_new(
        Arc::new(Schema::new(vec![
            Field::new("age", DataType::Int64, false),
            Field::new("diagnosis", DataType::Utf8, false),
        ])),
        vec![Arc::new(ages) as ArrayRef, Arc::new(diagnosis) as ArrayRef],
    )
    .unwrap();
    let input = d.join("in.parquet");
    write_parquet(&input, &[batch]);
    let job = d.join("job.toml");
    std::fs::write(
        &job,
        "[privacy]\nk = 2\nl = 2\n[algorithm]\nname = \"mondrian\"\n\
         [[attributes]]\nname = \"age\"\nrole = \"quasi-identifier\"\n\
         [[attributes]]\nname = \"diagnosis\"\nrole = \"sensitive\"\n",
    )
    .unwrap();
    let out = d.join("out.parquet");
    let o = run(&mut anonymize_cmd(&job, &input, &out));
    assert_eq!(o.status.code(), Some(3), "{}", show(&o));
    assert!(!out.exists());
}
