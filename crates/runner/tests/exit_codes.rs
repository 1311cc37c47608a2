//! The exit-code contract of deploy/README.md (issue 32): every code its
//! table documents is produced by the real `kanon` binary in a scenario of
//! its meaning. A code added to the table without a scenario here fails the
//! test. (70, a bug in kanon, needs an algorithm that breaks its model: it
//! is checked in-process by `tests/registered.rs`, with a registered
//! algorithm that does.)

mod common;

use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use common::*;

/// The codes of the "Exit codes" table of deploy/README.md.
fn documented_codes() -> Vec<i32> {
    let text = std::fs::read_to_string(root().join("deploy/README.md")).unwrap();
    let section = text
        .split("## Exit codes")
        .nth(1)
        .expect("deploy/README.md has an `Exit codes` section");
    let mut codes = Vec::new();
    for line in section.lines().skip_while(|l| !l.starts_with('|')) {
        if !line.starts_with('|') {
            break;
        }
        let first = line.split('|').nth(1).unwrap_or("").trim();
        for c in first.split(',') {
            if let Ok(code) = c.trim().parse::<i32>() {
                codes.push(code);
            }
        }
    }
    codes
}

/// `kanon anonymize` of the bundled job into `dir`.
fn job(dir: &std::path::Path) -> Command {
    let job = adult_job(dir, |t| t);
    let mut c = kanon();
    c.args(["anonymize", "-c"]).arg(job);
    c
}

/// Runs the job, sends `signal` while it waits at its barrier before the
/// commit, and returns the exit code.
fn interrupted(dir: &std::path::Path, signal: &str) -> Option<i32> {
    let barrier = tempfile::tempdir().unwrap();
    std::fs::write(barrier.path().join("before-commit.wait"), b"").unwrap();
    let mut child = job(dir)
        .arg("--overwrite")
        .env("KANON_TEST_BARRIER", barrier.path())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let start = Instant::now();
    while !barrier.path().join("before-commit").exists() {
        assert!(
            start.elapsed() < Duration::from_secs(120),
            "barrier not reached"
        );
        std::thread::sleep(Duration::from_millis(20));
    }
    let sent = Command::new("kill")
        .args(["-s", signal, &child.id().to_string()])
        .status()
        .unwrap();
    assert!(sent.success());
    child.wait().unwrap().code()
}

#[test]
fn every_documented_exit_code_is_produced_by_its_cause() {
    let documented = documented_codes();
    assert!(documented.len() >= 10, "{documented:?}");
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let release = d.join("adult-k10.parquet");
    let code = |c: &mut Command| run(c).status.code();
    let mut seen: Vec<(i32, Option<i32>)> = Vec::new();
    for expected in &documented {
        let got = match expected {
            0 => code(&mut job(d)),
            // The release checked against a stronger k than it has.
            1 => code(
                kanon()
                    .args(["verify", "-c"])
                    .arg(adult_job(d, |t| t.replace("k = 10", "k = 50")))
                    .arg("-i")
                    .arg(&release),
            ),
            2 => code(job(d).args(["--set", "privacy.kk=3"])),
            3 => code(job(d).args(["--overwrite", "--k", "40000"])),
            // An object store that does not answer.
            4 => code(
                job(d)
                    .args(["-i", "s3://lake/in.parquet", "--overwrite"])
                    .env("AWS_ACCESS_KEY_ID", KEY_ID)
                    .env("AWS_SECRET_ACCESS_KEY", SECRET)
                    .env("AWS_REGION", "us-east-1")
                    .env("KANON_STORAGE_ENDPOINT", "http://127.0.0.1:9")
                    .env("KANON_STORAGE_ALLOW_HTTP", "true")
                    .env("KANON_STORAGE_MAX_RETRIES", "0")
                    .env("KANON_STORAGE_RETRY_TIMEOUT_S", "1")
                    .env("KANON_STORAGE_TIMEOUT_S", "2"),
            ),
            5 => code(&mut job(d)),
            // Checked in-process by tests/registered.rs (see the module docs).
            70 => Some(70),
            124 => code(job(d).args(["--overwrite", "--timeout", "0.001"])),
            130 => interrupted(d, "INT"),
            143 => interrupted(d, "TERM"),
            other => panic!(
                "deploy/README.md documents exit code {other}, which this test has no scenario for: add one"
            ),
        };
        seen.push((*expected, got));
    }
    for (expected, got) in &seen {
        assert_eq!(Some(*expected), *got, "exit code {expected}: {seen:?}");
    }
}
