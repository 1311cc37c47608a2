//! `kanon` against a real S3-compatible server (`moto_server`, started on
//! 127.0.0.1 by the test): a multi-file Parquet dataset read from a bucket,
//! the release written to the bucket and verified, failures between the
//! passes and interrupts leaving nothing at the destination (no object, no
//! multipart upload), a missing bucket, rejected credentials.
//!
//! Skipped with a printed reason when `moto_server` is not installed and
//! `CI` is not set (`pip install "moto[server]"`, see .ci/run);
//! in CI a missing server fails.

mod common;

use std::collections::HashMap;
use std::time::{Duration, Instant};

use common::*;

/// Uploads the Adult table as three Parquet objects under `prefix`, and
/// returns a local directory with the same three files.
fn upload_adult(m: &Moto, bucket: &str, prefix: &str) -> tempfile::TempDir {
    let dir = tempfile::tempdir().unwrap();
    for p in adult_parts(dir.path(), 3) {
        let name = p.file_name().unwrap().to_string_lossy().into_owned();
        m.put(
            bucket,
            &format!("{prefix}{name}"),
            &std::fs::read(&p).unwrap(),
        );
    }
    dir
}

#[test]
fn multi_file_dataset_from_a_bucket_to_a_verified_release_in_the_bucket() {
    let Some(m) = Moto::start() else { return };
    m.create_bucket("lake");
    let local = upload_adult(&m, "lake", "adult/");
    let o = run(&mut m.anonymize("s3://lake/adult/", "s3://lake/releases/adult-k10.parquet"));
    assert_eq!(o.status.code(), Some(0), "{}", show(&o));
    assert_eq!(
        m.keys("lake", "releases/"),
        vec![
            "releases/_adult-k10.parquet.kanon_release.json",
            "releases/adult-k10.parquet"
        ]
    );
    assert!(m.pending_uploads("lake").is_empty());
    let release = m.get("lake", "releases/adult-k10.parquet");
    assert_eq!(read_parquet_bytes(release.clone()).num_rows(), 30162);
    // The same files read locally give the very same bytes (provenance and
    // input fingerprint included).
    let out = tempfile::tempdir().unwrap();
    let local_out = out.path().join("r.parquet");
    let o = run(kanon()
        .args(["anonymize", "-c", "configs/adult.toml", "-i"])
        .arg(local.path())
        .arg("-o")
        .arg(&local_out));
    assert_eq!(o.status.code(), Some(0), "{}", show(&o));
    assert_eq!(std::fs::read(&local_out).unwrap(), release);
    // Verified by kanon verify, read from the bucket.
    let o = run(m.kanon().args([
        "verify",
        "-c",
        "configs/adult.toml",
        "-i",
        "s3://lake/releases/adult-k10.parquet",
    ]));
    assert_eq!(o.status.code(), Some(0), "{}", show(&o));
    assert!(
        stdout(&o).contains("satisfies k-anonymity (k = 10)"),
        "{}",
        show(&o)
    );
    // The release exists now: refused without --overwrite (exit 5).
    let o = run(&mut m.anonymize("s3://lake/adult/", "s3://lake/releases/adult-k10.parquet"));
    assert_eq!(o.status.code(), Some(5), "{}", show(&o));
    assert!(stderr(&o).contains("--overwrite"), "{}", show(&o));
    // Inspect reads the dataset from the bucket too.
    let o = run(m.kanon().args([
        "inspect",
        "s3://lake/adult/",
        "--qi",
        "sex,race",
        "--s3-endpoint",
        &m.endpoint(),
        "--s3-allow-http",
    ]));
    assert_eq!(o.status.code(), Some(0), "{}", show(&o));
    assert!(
        stdout(&o).contains("3 file(s)") && stdout(&o).contains("30162 rows"),
        "{}",
        show(&o)
    );
    assert!(!stderr(&o).contains(SECRET) && !stdout(&o).contains(SECRET));
}

#[test]
fn glob_input_and_a_split_release_under_a_prefix() {
    let Some(m) = Moto::start() else { return };
    m.create_bucket("lake");
    upload_adult(&m, "lake", "adult/");
    m.put("lake", "adult/README.txt", b"not data");
    let o = run(m.kanon().args([
        "anonymize",
        "-c",
        "configs/adult.toml",
        "-i",
        "s3://lake/adult/part-*.parquet",
        "-o",
        "s3://lake/releases/split",
        "--max-file-size",
        "16kB",
        "--set",
        "output.row_group_rows=4096",
    ]));
    assert_eq!(o.status.code(), Some(0), "{}", show(&o));
    let mut keys = m.keys("lake", "releases/split/");
    assert!(keys.len() > 3, "{keys:?}");
    assert_eq!(keys.remove(0), "releases/split/_SUCCESS");
    let manifest: serde_json::Value =
        serde_json::from_slice(&m.get("lake", &keys.remove(0))).unwrap();
    assert_eq!(manifest["files"].as_array().unwrap().len(), keys.len());
    assert!(keys.iter().all(|k| k.starts_with("releases/split/part-")));
    let rows: usize = keys
        .iter()
        .map(|k| read_parquet_bytes(m.get("lake", k)).num_rows())
        .sum();
    assert_eq!(rows, 30162);
    let o = run(m.kanon().args([
        "verify",
        "-c",
        "configs/adult.toml",
        "-i",
        "s3://lake/releases/split/",
    ]));
    assert_eq!(o.status.code(), Some(0), "{}", show(&o));
    // Overwritten by a release of fewer files: the stale parts go.
    let o = run(m.kanon().args([
        "anonymize",
        "-c",
        "configs/adult.toml",
        "-i",
        "s3://lake/adult/part-*.parquet",
        "-o",
        "s3://lake/releases/split",
        "--max-file-size",
        "1GB",
        "--overwrite",
    ]));
    assert_eq!(o.status.code(), Some(0), "{}", show(&o));
    assert_eq!(
        m.keys("lake", "releases/split/"),
        vec![
            "releases/split/_SUCCESS",
            "releases/split/_kanon_release.json",
            "releases/split/part-00000.parquet"
        ]
    );
    let manifest: serde_json::Value =
        serde_json::from_slice(&m.get("lake", "releases/split/_kanon_release.json")).unwrap();
    assert_eq!(manifest["files"][0]["name"], "part-00000.parquet");
    assert!(m.pending_uploads("lake").is_empty());
}

#[test]
fn corrupt_input_object_found_in_pass_two_leaves_nothing() {
    let Some(m) = Moto::start() else { return };
    m.create_bucket("lake");
    let dir = tempfile::tempdir().unwrap();
    let parts = adult_parts(dir.path(), 3);
    // Big enough for a multipart upload of several parts to be under way.
    for (i, p) in parts.iter().enumerate() {
        if i == 2 {
            corrupt_column(p, "salary-class");
        }
        m.put(
            "lake",
            &format!("adult/{i}.parquet"),
            &std::fs::read(p).unwrap(),
        );
    }
    let job = adult_job(dir.path(), |t| {
        t.replace(
            "name = \"salary-class\"\nrole = \"sensitive\"",
            "name = \"salary-class\"\nrole = \"insensitive\"",
        )
    });
    let o = run(m.kanon().args(["anonymize", "-c"]).arg(&job).args([
        "-i",
        "s3://lake/adult/",
        "-o",
        "s3://lake/releases/r.parquet",
    ]));
    assert_eq!(o.status.code(), Some(2), "{}", show(&o));
    assert!(
        stderr(&o).contains("corrupt Parquet data in s3://lake/adult/2.parquet"),
        "{}",
        show(&o)
    );
    assert!(m.keys("lake", "releases/").is_empty());
    assert!(m.pending_uploads("lake").is_empty());
}

#[test]
fn interrupt_before_commit_leaves_no_object_and_no_upload() {
    let Some(m) = Moto::start() else { return };
    m.create_bucket("lake");
    upload_adult(&m, "lake", "adult/");
    let barrier = tempfile::tempdir().unwrap();
    std::fs::write(barrier.path().join("before-commit.wait"), b"").unwrap();
    let child = m
        .kanon()
        .env("KANON_TEST_BARRIER", barrier.path())
        .args([
            "anonymize",
            "-c",
            "configs/adult.toml",
            "-i",
            "s3://lake/adult/",
            "-o",
            "s3://lake/releases/r",
            "--max-file-size",
            "16kB",
        ])
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let point = barrier.path().join("before-commit");
    let start = Instant::now();
    while !point.exists() {
        assert!(
            start.elapsed() < Duration::from_secs(120),
            "barrier not reached"
        );
        std::thread::sleep(Duration::from_millis(20));
    }
    // Every part is uploaded, nothing is visible.
    assert!(!m.pending_uploads("lake").is_empty());
    assert!(m.keys("lake", "releases/").is_empty());
    std::process::Command::new("kill")
        .args(["-INT", &child.id().to_string()])
        .status()
        .unwrap();
    let o = child.wait_with_output().unwrap();
    assert_eq!(o.status.code(), Some(130), "{}", show(&o));
    assert!(m.keys("lake", "releases/").is_empty());
    assert!(m.pending_uploads("lake").is_empty(), "uploads aborted");
}

#[test]
fn server_gone_between_the_passes_is_an_io_failure() {
    let Some(mut m) = Moto::start() else { return };
    m.create_bucket("lake");
    upload_adult(&m, "lake", "adult/");
    let barrier = tempfile::tempdir().unwrap();
    std::fs::write(barrier.path().join("between-passes.wait"), b"").unwrap();
    let child = m
        .kanon()
        .env("KANON_TEST_BARRIER", barrier.path())
        .args([
            "anonymize",
            "-c",
            "configs/adult.toml",
            "-i",
            "s3://lake/adult/",
            "-o",
            "s3://lake/releases/r.parquet",
        ])
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let point = barrier.path().join("between-passes");
    let start = Instant::now();
    while !point.exists() {
        assert!(
            start.elapsed() < Duration::from_secs(120),
            "barrier not reached"
        );
        std::thread::sleep(Duration::from_millis(20));
    }
    m.stop();
    std::fs::remove_file(barrier.path().join("between-passes.wait")).unwrap();
    let o = child.wait_with_output().unwrap();
    assert_eq!(o.status.code(), Some(4), "{}", show(&o));
    assert!(stderr(&o).contains("s3://lake/"), "{}", show(&o));
    assert!(!stderr(&o).contains(SECRET));
}

#[test]
fn missing_bucket() {
    let Some(m) = Moto::start() else { return };
    m.create_bucket("lake");
    upload_adult(&m, "lake", "adult/");
    let o = run(&mut m.anonymize("s3://no-such-bucket/adult/", "s3://lake/releases/r.parquet"));
    assert_eq!(o.status.code(), Some(2), "{}", show(&o));
    assert!(
        stderr(&o).contains("bucket `no-such-bucket` does not exist"),
        "{}",
        show(&o)
    );
    let o = run(&mut m.anonymize("s3://lake/adult/", "s3://no-such-bucket/r.parquet"));
    assert_eq!(o.status.code(), Some(2), "{}", show(&o));
    assert!(
        stderr(&o).contains("bucket `no-such-bucket` does not exist"),
        "{}",
        show(&o)
    );
}

#[test]
fn bad_credentials() {
    let Some(m) = Moto::start() else { return };
    m.create_bucket("lake");
    upload_adult(&m, "lake", "adult/");
    m.require_auth();
    let o = run(&mut m.anonymize("s3://lake/adult/", "s3://lake/releases/r.parquet"));
    assert_eq!(o.status.code(), Some(2), "{}", show(&o));
    let err = stderr(&o);
    assert!(err.contains("credentials"), "{}", show(&o));
    assert!(err.contains("AWS_ACCESS_KEY_ID"), "{}", show(&o));
    assert!(!err.contains(SECRET), "the secret key leaked: {err}");
    // No credentials at all for a custom endpoint: a clear error, and no
    // attempt at the instance metadata service.
    let o = run(kanon()
        .env("KANON_STORAGE_ENDPOINT", m.endpoint())
        .env("KANON_STORAGE_ALLOW_HTTP", "true")
        .args([
            "anonymize",
            "-c",
            "configs/adult.toml",
            "-i",
            "s3://lake/adult/",
            "-o",
            "s3://lake/releases/none.parquet",
        ]));
    assert_eq!(o.status.code(), Some(2), "{}", show(&o));
    assert!(stderr(&o).contains("no S3 credentials"), "{}", show(&o));
}

#[test]
fn credentials_from_a_profile_file() {
    let Some(m) = Moto::start() else { return };
    m.create_bucket("lake");
    upload_adult(&m, "lake", "adult/");
    let dir = tempfile::tempdir().unwrap();
    let creds = dir.path().join("credentials");
    std::fs::write(
        &creds,
        format!("[default]\naws_access_key_id = nope\n\n[lake]\naws_access_key_id = {KEY_ID}\naws_secret_access_key = {SECRET}\n"),
    )
    .unwrap();
    let config = dir.path().join("config");
    std::fs::write(&config, "[profile lake]\nregion = eu-west-1\n").unwrap();
    let o = run(kanon()
        .env("AWS_SHARED_CREDENTIALS_FILE", &creds)
        .env("AWS_CONFIG_FILE", &config)
        .args([
            "inspect",
            "s3://lake/adult/",
            "--aws-profile",
            "lake",
            "--s3-endpoint",
            &m.endpoint(),
            "--s3-allow-http",
            "--json",
        ]));
    assert_eq!(o.status.code(), Some(0), "{}", show(&o));
    let v: HashMap<String, serde_json::Value> = serde_json::from_slice(&o.stdout).unwrap();
    assert_eq!(v["rows"], 30162);
    let o = run(kanon()
        .env("AWS_SHARED_CREDENTIALS_FILE", &creds)
        .env("AWS_CONFIG_FILE", &config)
        .args([
            "inspect",
            "s3://lake/adult/",
            "--aws-profile",
            "elsewhere",
            "--s3-endpoint",
            &m.endpoint(),
            "--s3-allow-http",
        ]));
    assert_eq!(o.status.code(), Some(2), "{}", show(&o));
    assert!(stderr(&o).contains("profile `elsewhere`"), "{}", show(&o));
}

/// Profile files in a temporary directory, and `kanon` reading them.
fn with_profiles(credentials: &str, config: &str) -> (tempfile::TempDir, std::process::Command) {
    let dir = tempfile::tempdir().unwrap();
    let creds = dir.path().join("credentials");
    std::fs::write(&creds, credentials).unwrap();
    let conf = dir.path().join("config");
    std::fs::write(&conf, config).unwrap();
    let mut c = kanon();
    c.env("AWS_SHARED_CREDENTIALS_FILE", &creds)
        .env("AWS_CONFIG_FILE", &conf)
        .env("KANON_STORAGE_ALLOW_HTTP", "true")
        .env("KANON_STORAGE_MAX_RETRIES", "1")
        .env("KANON_STORAGE_RETRY_TIMEOUT_S", "5");
    (dir, c)
}

/// A profile with `role_arn` and `source_profile`: the AWS SDK assumes the
/// role through STS (moto's, named by the profile's `endpoint_url`, which S3
/// uses too) with the source profile's keys, and a whole run reads and
/// writes the bucket with the role's temporary credentials (session token
/// included). Then with authentication on: the role's credentials read an
/// object while the source keys alone are refused by S3, so the run did not
/// pass on the source keys. (Under moto's authentication a listing with a
/// `/` in its query fails its signature check whoever signs it, boto3
/// included, so the authenticated part reads single objects.)
#[test]
fn a_profile_that_assumes_a_role_through_sts() {
    let Some(m) = Moto::start() else { return };
    m.create_bucket("lake");
    upload_adult(&m, "lake", "adult/");
    let (id, secret) = m.iam_user("ci", "sts:AssumeRole");
    let role = m.iam_role("kanon-reader", "ci", "s3:*");
    let credentials =
        format!("[base]\naws_access_key_id = {id}\naws_secret_access_key = {secret}\n");
    let config = format!(
        "[profile base]\nregion = us-east-1\nendpoint_url = {e}\n\n[profile reader]\nrole_arn = {role}\nsource_profile = base\nrole_session_name = kanon-test\nregion = us-east-1\nendpoint_url = {e}\n",
        e = m.endpoint()
    );
    let (_dir, mut c) = with_profiles(&credentials, &config);
    let o = run(c.args([
        "anonymize",
        "-c",
        "configs/adult.toml",
        "-i",
        "s3://lake/adult/",
        "-o",
        "s3://lake/releases/role.parquet",
        "--aws-profile",
        "reader",
    ]));
    assert_eq!(o.status.code(), Some(0), "{}", show(&o));
    assert!(!stderr(&o).contains(&secret), "the secret key leaked");
    assert_eq!(
        read_parquet_bytes(m.get("lake", "releases/role.parquet")).num_rows(),
        30162
    );
    assert!(m.pending_uploads("lake").is_empty());

    m.require_auth();
    let inspect = |profile: &str, config: &str| {
        let (_dir, mut c) = with_profiles(&credentials, config);
        run(c.args([
            "inspect",
            "s3://lake/releases/role.parquet",
            "--aws-profile",
            profile,
            "--s3-allow-http",
            "--json",
        ]))
    };
    let o = inspect("reader", &config);
    assert_eq!(o.status.code(), Some(0), "{}", show(&o));
    let v: HashMap<String, serde_json::Value> = serde_json::from_slice(&o.stdout).unwrap();
    assert_eq!(v["rows"], 30162);
    // The source profile's own keys may assume the role, nothing more
    // (moto answers a refused HEAD with a 500, so only the failure is
    // checked, with a single retry).
    let (_dir, mut c) = with_profiles(&credentials, &config);
    let o = run(c.args([
        "verify",
        "-c",
        "configs/adult.toml",
        "-i",
        "s3://lake/releases/role.parquet",
        "--aws-profile",
        "base",
    ]));
    assert_ne!(o.status.code(), Some(0), "{}", show(&o));
    assert!(!stderr(&o).contains(&secret), "the secret key leaked");
    // A source profile that does not exist: the error names the profile.
    let o = inspect(
        "reader",
        &config.replace("source_profile = base", "source_profile = gone"),
    );
    assert_eq!(o.status.code(), Some(2), "{}", show(&o));
    let err = stderr(&o);
    assert!(err.contains("AWS profile `reader`"), "{}", show(&o));
    assert!(!err.contains(&secret), "the secret key leaked: {err}");
}

/// A profile whose `credential_process` prints the keys (the JSON of the
/// AWS CLI's external process protocol), checked by moto with
/// authentication on.
#[test]
fn a_profile_with_a_credential_process() {
    let Some(m) = Moto::start() else { return };
    m.create_bucket("lake");
    upload_adult(&m, "lake", "adult/");
    let (id, secret) = m.iam_user("reader", "s3:*");
    m.require_auth();
    let dir = tempfile::tempdir().unwrap();
    let script = dir.path().join("creds.sh");
    std::fs::write(
        &script,
        format!("#!/bin/sh\necho '{{\"Version\": 1, \"AccessKeyId\": \"{id}\", \"SecretAccessKey\": \"{secret}\"}}'\n"),
    )
    .unwrap();
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(&script, std::fs::Permissions::from_mode(0o755)).unwrap();
    let config = format!(
        "[profile tool]\ncredential_process = {}\nendpoint_url = {}\n",
        script.display(),
        m.endpoint()
    );
    let inspect = || {
        let (_dir, mut c) = with_profiles("", &config);
        run(c.args([
            "inspect",
            "s3://lake/adult/part-0.parquet",
            "--aws-profile",
            "tool",
            "--s3-allow-http",
            "--json",
        ]))
    };
    let o = inspect();
    assert_eq!(o.status.code(), Some(0), "{}", show(&o));
    let v: HashMap<String, serde_json::Value> = serde_json::from_slice(&o.stdout).unwrap();
    assert_eq!(v["rows"], 10054);
    assert!(!stderr(&o).contains(&secret), "the secret key leaked");
    // A failing process: its message, and the profile to fix.
    std::fs::write(
        &script,
        "#!/bin/sh\necho 'token expired, log in again' >&2\nexit 3\n",
    )
    .unwrap();
    let o = inspect();
    assert_eq!(o.status.code(), Some(2), "{}", show(&o));
    let err = stderr(&o);
    assert!(err.contains("AWS profile `tool`"), "{}", show(&o));
    assert!(err.contains("token expired, log in again"), "{}", show(&o));
    // The SDK's own attempts are not logged below -vv: one error, kanon's.
    assert!(!err.contains("WARN"), "{}", show(&o));
}

/// `kanon sql` reads a table from a bucket prefix and commits its result to
/// the bucket through the same atomic writer; a failing query leaves no
/// object and no multipart upload behind.
#[cfg(feature = "sql")]
#[test]
fn sql_over_a_bucket_table_into_the_bucket() {
    let Some(m) = Moto::start() else { return };
    m.create_bucket("lake");
    upload_adult(&m, "lake", "adult/");
    let o = run(m.kanon().args([
        "sql",
        "SELECT * FROM anonymize('adult', 'config = \"configs/adult.toml\"')",
        "--table",
        "adult=s3://lake/adult/",
        "--output",
        "s3://lake/releases/sql.parquet",
    ]));
    assert_eq!(o.status.code(), Some(0), "{}", show(&o));
    assert!(stdout(&o).contains("30162 rows"), "{}", show(&o));
    assert!(m.pending_uploads("lake").is_empty());
    let release = read_parquet_bytes(m.get("lake", "releases/sql.parquet"));
    assert_eq!(release.num_rows(), 30162);
    assert!(!stderr(&o).contains(SECRET) && !stdout(&o).contains(SECRET));
    let o = run(m.kanon().args([
        "verify",
        "-c",
        "configs/adult.toml",
        "-i",
        "s3://lake/releases/sql.parquet",
    ]));
    assert_eq!(o.status.code(), Some(0), "{}", show(&o));

    let o = run(m.kanon().args([
        "sql",
        "SELECT * FROM anonymize('adult', 'config = \"configs/adult.toml\", k = 100000')",
        "--table",
        "adult=s3://lake/adult/",
        "--output",
        "s3://lake/releases/impossible.parquet",
    ]));
    assert_eq!(o.status.code(), Some(3), "{}", show(&o));
    assert!(m.keys("lake", "releases/impossible").is_empty());
    assert!(m.pending_uploads("lake").is_empty());
}

/// Two runs racing to publish the same S3 release without `--overwrite`:
/// both reach the commit with the destination free; exactly one publishes,
/// the other exits 5 and leaves nothing (no staged object, no upload).
#[test]
fn of_two_concurrent_runs_exactly_one_publishes() {
    let Some(m) = Moto::start() else { return };
    m.create_bucket("lake");
    let _local = upload_adult(&m, "lake", "adult/");
    let barriers: Vec<tempfile::TempDir> = (0..2).map(|_| tempfile::tempdir().unwrap()).collect();
    let children: Vec<std::process::Child> = barriers
        .iter()
        .enumerate()
        .map(|(i, b)| {
            std::fs::write(b.path().join("before-commit.wait"), b"").unwrap();
            m.kanon()
                .env("KANON_TEST_BARRIER", b.path())
                .args([
                    "anonymize",
                    "-c",
                    "configs/adult.toml",
                    "--seed",
                    &(i + 1).to_string(),
                    "-i",
                    "s3://lake/adult/",
                    "-o",
                    "s3://lake/releases/race.parquet",
                ])
                .stdout(std::process::Stdio::piped())
                .stderr(std::process::Stdio::piped())
                .spawn()
                .unwrap()
        })
        .collect();
    let start = Instant::now();
    while !barriers
        .iter()
        .all(|b| b.path().join("before-commit").exists())
    {
        assert!(
            start.elapsed() < Duration::from_secs(180),
            "barrier not reached"
        );
        std::thread::sleep(Duration::from_millis(20));
    }
    // Both checked that the destination is free; release them together.
    for b in &barriers {
        std::fs::remove_file(b.path().join("before-commit.wait")).unwrap();
    }
    let outputs: Vec<std::process::Output> = children
        .into_iter()
        .map(|c| c.wait_with_output().unwrap())
        .collect();
    let codes: Vec<Option<i32>> = outputs.iter().map(|o| o.status.code()).collect();
    let winners = codes.iter().filter(|c| **c == Some(0)).count();
    assert_eq!(
        winners,
        1,
        "{codes:?}\n{}\n{}",
        show(&outputs[0]),
        show(&outputs[1])
    );
    assert!(
        codes.contains(&Some(5)),
        "{codes:?}\n{}\n{}",
        show(&outputs[0]),
        show(&outputs[1])
    );
    assert_eq!(
        m.keys("lake", "releases/"),
        vec![
            "releases/_race.parquet.kanon_release.json",
            "releases/race.parquet"
        ]
    );
    assert!(m.pending_uploads("lake").is_empty());
    // The published object is the winner's, whole.
    let winner = codes.iter().position(|c| *c == Some(0)).unwrap();
    let seed = (winner + 1).to_string();
    let kv = parquet_metadata(m.get("lake", "releases/race.parquet"));
    assert!(
        kv.iter().any(|(k, v)| k == "kanon.seed" && *v == seed),
        "{kv:?}"
    );
    assert_eq!(
        read_parquet_bytes(m.get("lake", "releases/race.parquet")).num_rows(),
        30162
    );
}

#[test]
fn staged_objects_of_a_killed_run_are_removed_by_the_next_run() {
    let Some(m) = Moto::start() else { return };
    m.create_bucket("lake");
    upload_adult(&m, "lake", "adult/");
    // What a run killed between its upload and its commit copy leaves: a
    // staged object next to the file, or inside a split release's prefix
    // (where it made the destination look taken).
    m.put(
        "lake",
        "releases/.kanon-tmp-0123456789abcdef-r.parquet",
        b"x",
    );
    m.put(
        "lake",
        "releases/parts/.kanon-tmp-0123456789abcdef-part-00000.parquet",
        b"x",
    );
    m.put("lake", "releases/keep.parquet", b"x");
    // Older than the shortened limit of 1 s by a clear margin (the server
    // may report times to the second).
    std::thread::sleep(Duration::from_millis(2500));
    for (out, extra) in [
        ("s3://lake/releases/r.parquet", vec![]),
        ("s3://lake/releases/parts", vec!["--max-file-size", "16kB"]),
    ] {
        let o = run(m
            .kanon()
            .env("KANON_TEST_STALE_S3_S", "1")
            .args([
                "anonymize",
                "-c",
                "configs/adult.toml",
                "-i",
                "s3://lake/adult/",
                "-o",
                out,
            ])
            .args(&extra));
        assert_eq!(o.status.code(), Some(0), "{out}: {}", show(&o));
    }
    let keys = m.keys("lake", "releases/");
    assert!(keys.iter().all(|k| !k.contains(".kanon-tmp-")), "{keys:?}");
    assert!(
        keys.contains(&"releases/keep.parquet".to_string()),
        "{keys:?}"
    );
    assert!(keys.contains(&"releases/r.parquet".to_string()), "{keys:?}");
    assert!(
        keys.iter().any(|k| k.starts_with("releases/parts/part-")),
        "{keys:?}"
    );
}

/// Issue 32, item 4: behind a store that ignores `If-None-Match` (moto
/// with the header dropped), a release without `--overwrite` and a Delta
/// commit are refused before any work, naming the bucket and the way out;
/// nothing is left in the bucket. An operator who serialises the writers
/// says so with `storage.single_writer = true`.
#[test]
fn a_store_without_conditional_writes_is_refused_before_any_work() {
    let Some(m) = Moto::start_ignoring_conditions() else {
        return;
    };
    m.create_bucket("lake");
    let _local = upload_adult(&m, "lake", "adult/");
    let o = run(&mut m.anonymize("s3://lake/adult/", "s3://lake/releases/r.parquet"));
    assert_eq!(o.status.code(), Some(2), "{}", show(&o));
    assert!(
        stderr(&o).contains("ignores conditional writes")
            && stderr(&o).contains("`lake`")
            && stderr(&o).contains("storage.single_writer"),
        "{}",
        show(&o)
    );
    let o = run(m
        .anonymize("s3://lake/adult/", "s3://lake/releases/table")
        .args([
            "--set",
            "output.format=delta",
            "--set",
            "output.mode=append",
        ]));
    assert_eq!(o.status.code(), Some(2), "{}", show(&o));
    assert!(
        stderr(&o).contains("ignores conditional writes"),
        "{}",
        show(&o)
    );
    assert!(
        m.keys("lake", "releases/").is_empty(),
        "{:?}",
        m.keys("lake", "releases/")
    );
    // One writer at a time, on the operator's word.
    let o = run(m
        .anonymize("s3://lake/adult/", "s3://lake/releases/r.parquet")
        .env("KANON_STORAGE_SINGLE_WRITER", "true"));
    assert_eq!(o.status.code(), Some(0), "{}", show(&o));
    assert!(m
        .keys("lake", "releases/")
        .contains(&"releases/r.parquet".to_string()));
}
