//! Delta Lake releases (issue 17): the Adult job committed to a Delta table
//! locally and on a real S3-compatible server (`moto_server` on 127.0.0.1),
//! rerun as a no-op, rerun on changed input as a new version, run twice at
//! once on different inputs (one commit each), every version verified by
//! `kanon verify` with its certificate, the table read back through
//! DataFusion's Delta provider (`kanon sql`) and through the Python
//! `deltalake` package with identical rows; and failures between the write
//! and the commit (the server gone, data files that fail verification)
//! leaving the table at its previous version.

mod common;

use std::io::{Read, Write};
use std::net::{TcpListener, TcpStream};
use std::path::{Path, PathBuf};
use std::process::{Command, Output};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};

use arrow::array::RecordBatch;
use arrow::util::display::{ArrayFormatter, FormatOptions};
use common::*;

/// The Adult job writing a Delta table, with extra `--set`s. These tests
/// are about the mechanics of Delta commits on Adult, which has no person
/// column to recognise across versions: they accept that readers compare
/// versions (`output.unchecked_series`, an override that weakens the job
/// file, hence `--weaken-privacy`). The series check itself is tested in
/// `series.rs`.
fn delta_job(c: &mut Command, input: &str, table: &str, sets: &[&str]) {
    c.args([
        "anonymize",
        "-c",
        "configs/adult.toml",
        "-i",
        input,
        "-o",
        table,
    ])
    .args(["--set", "output.format=delta"])
    .args(["--set", "output.unchecked_series=true", "--weaken-privacy"]);
    for s in sets {
        c.args(["--set", s]);
    }
}

/// `kanon anonymize` of the Adult job into a Delta table.
fn run_delta(input: &str, table: &str, sets: &[&str]) -> Output {
    let mut c = kanon();
    delta_job(&mut c, input, table, sets);
    run(&mut c)
}

/// Two slices of the Adult rows, `a` and `b`, as `a.parquet` and
/// `b.parquet` in `dir`.
fn two_slices(dir: &Path, a: (usize, usize), b: (usize, usize)) -> (PathBuf, PathBuf) {
    let (pa, pb) = (dir.join("a.parquet"), dir.join("b.parquet"));
    adult_slice(&pa, a.0, a.1);
    adult_slice(&pb, b.0, b.1);
    (pa, pb)
}

/// The Adult rows `from..to` as one Parquet file.
fn adult_slice(path: &Path, from: usize, to: usize) {
    let t = adult();
    write_parquet(path, &[t.slice(from, to - from)]);
}

/// The committed versions of a local table (its `_delta_log` JSON files).
fn local_versions(table: &Path) -> Vec<i64> {
    let mut v: Vec<i64> = std::fs::read_dir(table.join("_delta_log"))
        .map(|d| {
            d.filter_map(|e| {
                let name = e.ok()?.file_name().to_string_lossy().into_owned();
                name.strip_suffix(".json")?.parse().ok()
            })
            .collect()
        })
        .unwrap_or_default();
    v.sort_unstable();
    v
}

/// Parquet data files under a local table, wherever they are.
fn local_data_files(table: &Path) -> Vec<PathBuf> {
    fn walk(d: &Path, out: &mut Vec<PathBuf>) {
        for e in std::fs::read_dir(d).unwrap().flatten() {
            let p = e.path();
            if p.is_dir() {
                walk(&p, out);
            } else if p.extension().is_some_and(|x| x == "parquet") {
                out.push(p);
            }
        }
    }
    let mut out = Vec::new();
    walk(table, &mut out);
    out.sort();
    out
}

/// Every row of the batches as text, cells joined by `|`, sorted: the
/// table's content whatever the row order, file split or string encoding.
fn rows_of(batches: &[RecordBatch], columns: &[&str]) -> Vec<String> {
    let opts = FormatOptions::default().with_null("NULL");
    let mut rows = Vec::new();
    for b in batches {
        let cols: Vec<_> = columns
            .iter()
            .map(|c| {
                let a = b.column_by_name(c).unwrap_or_else(|| panic!("column {c}"));
                arrow::compute::cast(a, &arrow::datatypes::DataType::Utf8).unwrap()
            })
            .collect();
        for r in 0..b.num_rows() {
            let cells: Vec<String> = cols
                .iter()
                .map(|a| {
                    ArrayFormatter::try_new(a.as_ref(), &opts)
                        .unwrap()
                        .value(r)
                        .to_string()
                })
                .collect();
            rows.push(cells.join("|"));
        }
    }
    rows.sort();
    rows
}

/// The columns of an Adult release.
fn columns() -> Vec<&'static str> {
    ADULT_QIS.iter().copied().chain(["salary-class"]).collect()
}

#[test]
fn a_local_table_created_rerun_appended_verified_and_inspected() {
    let dir = tempfile::tempdir().unwrap();
    let (a, b) = two_slices(dir.path(), (0, 20_000), (10_000, 30_162));
    let table = dir.path().join("releases");
    let t = table.to_str().unwrap();

    // Created with the first release (one commit, version 0).
    let o = run_delta(a.to_str().unwrap(), t, &[]);
    assert_eq!(o.status.code(), Some(0), "{}", show(&o));
    assert_eq!(local_versions(&table), vec![0]);
    let first_files = local_data_files(&table);
    assert_eq!(first_files.len(), 1, "{first_files:?}");
    // The data file is the very Parquet release of the same job and input,
    // byte for byte (provenance in the footer included).
    let parquet = dir.path().join("a-release.parquet");
    let o = run(&mut anonymize_cmd(
        Path::new("configs/adult.toml"),
        &a,
        &parquet,
    ));
    assert_eq!(o.status.code(), Some(0), "{}", show(&o));
    assert_eq!(
        std::fs::read(&first_files[0]).unwrap(),
        std::fs::read(&parquet).unwrap()
    );

    // The same job on the same input: a no-op that says so (exit 0).
    let mut c = kanon();
    c.args([
        "anonymize",
        "-c",
        "configs/adult.toml",
        "-i",
        a.to_str().unwrap(),
        "-o",
        t,
    ])
    .args([
        "--set",
        "output.format=delta",
        "--set",
        "output.mode=append",
    ]);
    let o = run(&mut c);
    assert_eq!(o.status.code(), Some(0), "{}", show(&o));
    assert!(stdout(&o).contains("nothing to do"), "{}", show(&o));
    assert_eq!(local_versions(&table), vec![0]);
    assert_eq!(local_data_files(&table), first_files);

    // Another input with mode "create" (the default): the table exists.
    let o = run_delta(b.to_str().unwrap(), t, &[]);
    assert_eq!(o.status.code(), Some(5), "{}", show(&o));
    assert!(stderr(&o).contains("output.mode"), "{}", show(&o));
    assert_eq!(local_versions(&table), vec![0]);

    // Appended: version 1.
    let o = run_delta(b.to_str().unwrap(), t, &["output.mode=append"]);
    assert_eq!(o.status.code(), Some(0), "{}", show(&o));
    assert_eq!(local_versions(&table), vec![0, 1]);
    assert_eq!(local_data_files(&table).len(), 2);

    // Verified: the table's rows, and each version's certificate against
    // the rows it added.
    for version in ["0", "1"] {
        let o = run(kanon().args([
            "verify",
            "-c",
            "configs/adult.toml",
            "-i",
            t,
            "--version",
            version,
        ]));
        assert_eq!(o.status.code(), Some(0), "{}", show(&o));
        assert!(
            stdout(&o).contains(&format!("(Delta version {version})")),
            "{}",
            show(&o)
        );
        assert!(stdout(&o).contains("certificate holds"), "{}", show(&o));
    }
    // A stricter job than the one certified fails verification.
    let o = run(kanon().args([
        "verify",
        "-c",
        "configs/adult.toml",
        "--set",
        "privacy.k=500",
        "-i",
        t,
    ]));
    assert_eq!(o.status.code(), Some(1), "{}", show(&o));

    // The history with certificates.
    let o = run(kanon().args(["inspect", t]));
    assert_eq!(o.status.code(), Some(0), "{}", show(&o));
    let out = stdout(&o);
    assert!(out.contains("2 version(s)"), "{out}");
    assert!(
        out.contains("k achieved 10") || out.contains("k achieved 1"),
        "{out}"
    );
    let o = run(kanon().args(["inspect", "--json", t]));
    assert_eq!(o.status.code(), Some(0), "{}", show(&o));
    let j: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    let history = j["delta_history"].as_array().unwrap();
    assert_eq!(history.len(), 2);
    for h in history {
        let c = &h["certificate"];
        assert_eq!(c["algorithm"], "cover");
        assert_eq!(c["privacy"]["k"], 10);
        assert!(c["verified"]["smallest_class"].as_u64().unwrap() >= 10);
        assert!(c["job_hash"].as_str().unwrap().starts_with("sha256:"));
        assert!(c["input"]["fingerprint"]
            .as_str()
            .unwrap()
            .starts_with("sha256:"));
    }
    assert_eq!(
        j["rows"],
        20_000 + 20_162
            - (history[0]["certificate"]["rows_suppressed"]
                .as_u64()
                .unwrap()
                + history[1]["certificate"]["rows_suppressed"]
                    .as_u64()
                    .unwrap())
    );
}

/// A Delta table written by hand (its log as the protocol states it):
/// version 0 adds `a.parquet`, version 1 removes it and adds `b.parquet`.
fn raw_delta_table(table: &Path, a: &RecordBatch, b: &RecordBatch) {
    std::fs::create_dir_all(table.join("_delta_log")).unwrap();
    let fields: Vec<serde_json::Value> = a
        .schema()
        .fields()
        .iter()
        .map(|f| {
            let t = match f.data_type() {
                arrow::datatypes::DataType::Int64 => "long",
                arrow::datatypes::DataType::Utf8 => "string",
                other => panic!("no Delta type for {other}"),
            };
            serde_json::json!({"name": f.name(), "type": t, "nullable": true, "metadata": {}})
        })
        .collect();
    let schema = serde_json::json!({"type": "struct", "fields": fields}).to_string();
    let add = |name: &str, batch: &RecordBatch| {
        write_parquet(&table.join(name), std::slice::from_ref(batch));
        let size = std::fs::metadata(table.join(name)).unwrap().len();
        serde_json::json!({"add": {"path": name, "partitionValues": {}, "size": size,
            "modificationTime": 0, "dataChange": true}})
        .to_string()
    };
    let v0 = [
        serde_json::json!({"protocol": {"minReaderVersion": 1, "minWriterVersion": 2}}).to_string(),
        serde_json::json!({"metaData": {"id": "raw", "format": {"provider": "parquet", "options": {}},
            "schemaString": schema, "partitionColumns": [], "configuration": {}, "createdTime": 0}})
        .to_string(),
        add("a.parquet", a),
    ];
    std::fs::write(
        table.join("_delta_log/00000000000000000000.json"),
        v0.join("\n") + "\n",
    )
    .unwrap();
    let v1 = [
        serde_json::json!({"remove": {"path": "a.parquet", "deletionTimestamp": 0, "dataChange": true}})
            .to_string(),
        add("b.parquet", b),
    ];
    std::fs::write(
        table.join("_delta_log/00000000000000000001.json"),
        v1.join("\n") + "\n",
    )
    .unwrap();
}

#[test]
fn a_delta_input_is_read_at_its_version_and_never_with_removed_files() {
    let dir = tempfile::tempdir().unwrap();
    let t = adult();
    let (a, b) = (t.slice(0, 12_000), t.slice(12_000, 14_000));
    let table = dir.path().join("raw");
    raw_delta_table(&table, &a, &b);
    let out = |name: &str| dir.path().join(name);
    let job = |version: Option<&str>, o: &Path| {
        let mut c = kanon();
        c.args(["anonymize", "-q", "-c", "configs/adult.toml", "-i"])
            .arg(&table)
            .arg("-o")
            .arg(o);
        if let Some(v) = version {
            c.args(["--set", &format!("input.version={v}")]);
        }
        run(&mut c)
    };
    // The latest version holds b's rows only, though a.parquet is still in
    // the directory: the table is read, not the directory.
    let o = job(None, &out("latest.parquet"));
    assert_eq!(o.status.code(), Some(0), "{}", show(&o));
    let meta: std::collections::HashMap<String, String> =
        parquet_metadata(std::fs::read(out("latest.parquet")).unwrap())
            .into_iter()
            .collect();
    assert_eq!(meta["kanon.rows_in"], "14000");
    let o = job(Some("0"), &out("v0.parquet"));
    assert_eq!(o.status.code(), Some(0), "{}", show(&o));
    let meta: std::collections::HashMap<String, String> =
        parquet_metadata(std::fs::read(out("v0.parquet")).unwrap())
            .into_iter()
            .collect();
    assert_eq!(meta["kanon.rows_in"], "12000");
    assert_eq!(meta["kanon.input.delta_version"], "0");
    // The input version is in the certificate of a Delta release.
    let mut c = kanon();
    delta_job(
        &mut c,
        table.to_str().unwrap(),
        out("rel").to_str().unwrap(),
        &["input.version=0"],
    );
    let o = run(&mut c);
    assert_eq!(o.status.code(), Some(0), "{}", show(&o));
    let o = run(kanon().args(["inspect", "--json"]).arg(out("rel")));
    let j: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    assert_eq!(
        j["delta_history"][0]["certificate"]["input"]["delta_version"],
        0
    );
    assert_eq!(j["delta_history"][0]["certificate"]["rows_in"], 12_000);
    // A version the table does not have.
    let o = job(Some("7"), &out("never.parquet"));
    assert_eq!(o.status.code(), Some(2), "{}", show(&o));
    assert!(
        stderr(&o).contains("no version 7") && stderr(&o).contains("latest is 1"),
        "{}",
        show(&o)
    );
    // `input.version` on a Parquet input is an error.
    let o = run(kanon()
        .args(["anonymize", "-q", "-c", "configs/adult.toml", "-o"])
        .arg(out("x.parquet"))
        .args(["--set", "input.version=0"]));
    assert_eq!(o.status.code(), Some(2), "{}", show(&o));
    assert!(stderr(&o).contains("input.version"), "{}", show(&o));
}

#[test]
fn partitions_replaced_and_the_whole_table_overwritten() {
    let dir = tempfile::tempdir().unwrap();
    let (a, b) = two_slices(dir.path(), (0, 15_000), (15_000, 30_162));
    let table = dir.path().join("t");
    let t = table.to_str().unwrap();
    let job = |input: &Path, sets: &[&str]| {
        let mut c = kanon();
        delta_job(&mut c, input.to_str().unwrap(), t, sets);
        run(&mut c)
    };
    let ok = |o: Output| assert_eq!(o.status.code(), Some(0), "{}", show(&o));
    ok(job(
        &a,
        &[
            "output.mode=append",
            "output.partition.release_date=2026-11-24",
        ],
    ));
    ok(job(
        &b,
        &[
            "output.mode=append",
            "output.partition.release_date=2026-11-25",
        ],
    ));
    assert!(table.join("release_date=2026-11-24").is_dir());
    assert_eq!(local_versions(&table), vec![0, 1]);
    // Replacing 2026-11-24 with b's release: the other partition stays.
    ok(job(
        &b,
        &[
            "output.mode=replace-partition",
            "output.partition.release_date=2026-11-24",
        ],
    ));
    assert_eq!(local_versions(&table), vec![0, 1, 2]);
    let o = run(kanon().args(["inspect", "--json", t]));
    let j: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    let v2 = &j["delta_history"][2];
    assert_eq!(v2["files_added"], 1);
    assert_eq!(v2["files_removed"], 1);
    assert_eq!(v2["operation"], "WRITE");
    // The same partition columns are required to append.
    let o = job(&a, &["output.mode=append"]);
    assert_eq!(o.status.code(), Some(2), "{}", show(&o));
    assert!(
        stderr(&o).contains("does not fit Delta table"),
        "{}",
        show(&o)
    );
    // replace-partition without a partition is refused before any work.
    let o = job(&a, &["output.mode=replace-partition"]);
    assert_eq!(o.status.code(), Some(2), "{}", show(&o));
    assert!(stderr(&o).contains("output.partition"), "{}", show(&o));
    // --overwrite replaces every row (and the partitioning).
    let mut c = kanon();
    delta_job(&mut c, a.to_str().unwrap(), t, &[]);
    let o = run(c.arg("--overwrite"));
    assert_eq!(o.status.code(), Some(0), "{}", show(&o));
    let o = run(kanon().args(["inspect", "--json", t]));
    let j: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    let last = &j["delta_history"][3];
    assert_eq!(last["files_removed"], 2);
    // The overwrite changed the partitioning, not the table: same id.
    let metadata_of = |version: u32| -> serde_json::Value {
        let log =
            std::fs::read_to_string(table.join(format!("_delta_log/{version:020}.json"))).unwrap();
        log.lines()
            .map(|l| serde_json::from_str::<serde_json::Value>(l).unwrap())
            .find_map(|a| a.get("metaData").cloned())
            .unwrap_or_else(|| panic!("no metaData in version {version}"))
    };
    let (before, after) = (metadata_of(0), metadata_of(3));
    assert_eq!(before["id"], after["id"]);
    assert_eq!(
        before["partitionColumns"],
        serde_json::json!(["release_date"])
    );
    assert_eq!(after["partitionColumns"], serde_json::json!([]));
    assert_eq!(j["rows"], last["certificate"]["rows_published"]);
    // A partitioned Delta table is not read as input (its partition values
    // are not in the files).
    let o = run(kanon()
        .args(["anonymize", "-q", "-c", "configs/adult.toml", "-o"])
        .arg(dir.path().join("x.parquet"))
        .args(["-i", t, "--set", "input.version=1"]));
    assert_eq!(o.status.code(), Some(2), "{}", show(&o));
    assert!(
        stderr(&o).contains("partitioned by release_date"),
        "{}",
        show(&o)
    );
}

#[test]
fn data_files_that_fail_verification_are_not_committed() {
    let dir = tempfile::tempdir().unwrap();
    let (a, b) = two_slices(dir.path(), (0, 15_000), (15_000, 30_162));
    let table = dir.path().join("t");
    let t = table.to_str().unwrap();
    let o = run_delta(a.to_str().unwrap(), t, &[]);
    assert_eq!(o.status.code(), Some(0), "{}", show(&o));
    let before = local_data_files(&table);

    // Between the write and the commit, the new data file is replaced by
    // its first 3 rows: the files no longer hold the verified release.
    let barrier = tempfile::tempdir().unwrap();
    std::fs::write(barrier.path().join("delta-verify.wait"), b"").unwrap();
    let mut c = kanon();
    delta_job(&mut c, b.to_str().unwrap(), t, &["output.mode=append"]);
    let child = c
        .env("KANON_TEST_BARRIER", barrier.path())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    wait_for(&barrier.path().join("delta-verify"));
    let new: Vec<PathBuf> = local_data_files(&table)
        .into_iter()
        .filter(|f| !before.contains(f))
        .collect();
    assert_eq!(new.len(), 1, "{new:?}");
    let tampered = read_parquet(&new[0]).slice(0, 3);
    write_parquet(&new[0], &[tampered]);
    std::fs::remove_file(barrier.path().join("delta-verify.wait")).unwrap();
    let o = child.wait_with_output().unwrap();
    assert_eq!(o.status.code(), Some(1), "{}", show(&o));
    assert!(stderr(&o).contains("nothing was committed"), "{}", show(&o));
    // The table is at its previous version, and the data file is gone.
    assert_eq!(local_versions(&table), vec![0]);
    assert_eq!(local_data_files(&table), before);
    let o = run(kanon().args(["verify", "-c", "configs/adult.toml", "-i", t]));
    assert_eq!(o.status.code(), Some(0), "{}", show(&o));
}

// ---------------------------------------------------------------------------
// S3.

/// A TCP relay to the S3 server that can be cut (every connection closed,
/// new ones refused) and restored: the server "stopped" for kanon, its
/// state kept for the test.
struct Relay {
    port: u16,
    up: Arc<AtomicBool>,
    open: Arc<Mutex<Vec<TcpStream>>>,
}

impl Relay {
    fn to(target: u16) -> Relay {
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let port = listener.local_addr().unwrap().port();
        let up = Arc::new(AtomicBool::new(true));
        let open: Arc<Mutex<Vec<TcpStream>>> = Arc::default();
        let (up2, open2) = (up.clone(), open.clone());
        std::thread::spawn(move || {
            for client in listener.incoming() {
                let Ok(client) = client else { continue };
                if !up2.load(Ordering::SeqCst) {
                    let _ = client.shutdown(std::net::Shutdown::Both);
                    continue;
                }
                let Ok(server) = TcpStream::connect(("127.0.0.1", target)) else {
                    continue;
                };
                {
                    let mut o = open2.lock().unwrap();
                    o.push(client.try_clone().unwrap());
                    o.push(server.try_clone().unwrap());
                }
                let pipe = |mut from: TcpStream, mut to: TcpStream| {
                    std::thread::spawn(move || {
                        let mut buf = [0u8; 64 * 1024];
                        loop {
                            match from.read(&mut buf) {
                                Ok(0) | Err(_) => break,
                                Ok(n) => {
                                    if to.write_all(&buf[..n]).is_err() {
                                        break;
                                    }
                                }
                            }
                        }
                        let _ = to.shutdown(std::net::Shutdown::Both);
                        let _ = from.shutdown(std::net::Shutdown::Both);
                    });
                };
                pipe(client.try_clone().unwrap(), server.try_clone().unwrap());
                pipe(server, client);
            }
        });
        Relay { port, up, open }
    }

    fn endpoint(&self) -> String {
        format!("http://127.0.0.1:{}", self.port)
    }

    fn cut(&self) {
        self.up.store(false, Ordering::SeqCst);
        for s in self.open.lock().unwrap().drain(..) {
            let _ = s.shutdown(std::net::Shutdown::Both);
        }
    }

    fn restore(&self) {
        self.up.store(true, Ordering::SeqCst);
    }
}

/// The committed versions of a table on the server.
fn s3_versions(m: &Moto, bucket: &str, prefix: &str) -> Vec<i64> {
    let mut v: Vec<i64> = m
        .keys(bucket, &format!("{prefix}_delta_log/"))
        .iter()
        .filter_map(|k| k.rsplit('/').next()?.strip_suffix(".json")?.parse().ok())
        .collect();
    v.sort_unstable();
    v
}

fn s3_data_files(m: &Moto, bucket: &str, prefix: &str) -> Vec<String> {
    m.keys(bucket, prefix)
        .into_iter()
        .filter(|k| k.ends_with(".parquet"))
        .collect()
}

/// Puts a slice of Adult as one object.
fn put_slice(m: &Moto, key: &str, from: usize, to: usize) {
    let dir = tempfile::tempdir().unwrap();
    let p = dir.path().join("x.parquet");
    adult_slice(&p, from, to);
    m.put("lake", key, &std::fs::read(&p).unwrap());
}

/// The scheduled job: append to the `releases` table, partitioned by day.
fn scheduled(m: &Moto, endpoint: &str, input: &str, day: &str) -> Command {
    let mut c = m.kanon();
    c.env("KANON_STORAGE_ENDPOINT", endpoint);
    delta_job(
        &mut c,
        input,
        "s3://lake/releases",
        &[
            "output.mode=append",
            &format!("output.partition.release_date={day}"),
        ],
    );
    c
}

/// Two scheduled runs on `inputs` at once, for the same day: each waits at
/// the commit with its data files written, then both are let go together.
fn race(m: &Moto, endpoint: &str, inputs: [&str; 2]) -> Vec<Output> {
    let barriers = [tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap()];
    let children: Vec<_> = inputs
        .iter()
        .zip(&barriers)
        .map(|(input, b)| {
            std::fs::write(b.path().join("before-commit.wait"), b"").unwrap();
            scheduled(m, endpoint, input, "2026-11-26")
                .env("KANON_TEST_BARRIER", b.path())
                .stdout(std::process::Stdio::piped())
                .stderr(std::process::Stdio::piped())
                .spawn()
                .unwrap()
        })
        .collect();
    for b in &barriers {
        wait_for(&b.path().join("before-commit"));
    }
    for b in &barriers {
        std::fs::remove_file(b.path().join("before-commit.wait")).unwrap();
    }
    children
        .into_iter()
        .map(|c| c.wait_with_output().unwrap())
        .collect()
}

#[test]
fn the_scheduled_job_on_s3_idempotent_concurrent_verified_and_read_back() {
    let Some(m) = Moto::start() else { return };
    m.create_bucket("lake");
    put_slice(&m, "in/day1.parquet", 0, 12_000);
    put_slice(&m, "in/day2.parquet", 8_000, 20_000);
    put_slice(&m, "in/day3a.parquet", 14_000, 26_000);
    put_slice(&m, "in/day3b.parquet", 18_162, 30_162);
    put_slice(&m, "in/day4.parquet", 3_000, 17_000);
    let ep = m.endpoint();

    // First run: the table is created with the release (version 0).
    let o = run(&mut scheduled(
        &m,
        &ep,
        "s3://lake/in/day1.parquet",
        "2026-11-24",
    ));
    assert_eq!(o.status.code(), Some(0), "{}", show(&o));
    assert_eq!(s3_versions(&m, "lake", "releases/"), vec![0]);
    let files = s3_data_files(&m, "lake", "releases/");
    assert_eq!(files.len(), 1);
    assert!(
        files[0].starts_with("releases/release_date=2026-11-24/part-"),
        "{files:?}"
    );

    // The same job on the same input: a no-op.
    let o = run(&mut scheduled(
        &m,
        &ep,
        "s3://lake/in/day1.parquet",
        "2026-11-24",
    ));
    assert_eq!(o.status.code(), Some(0), "{}", show(&o));
    assert!(stdout(&o).contains("nothing to do"), "{}", show(&o));
    assert_eq!(s3_versions(&m, "lake", "releases/"), vec![0]);
    assert_eq!(s3_data_files(&m, "lake", "releases/"), files);

    // Changed input: a new version.
    let o = run(&mut scheduled(
        &m,
        &ep,
        "s3://lake/in/day2.parquet",
        "2026-11-25",
    ));
    assert_eq!(o.status.code(), Some(0), "{}", show(&o));
    assert_eq!(s3_versions(&m, "lake", "releases/"), vec![0, 1]);

    // Two runs at once on different inputs: both commit, one version each.
    for o in race(
        &m,
        &ep,
        ["s3://lake/in/day3a.parquet", "s3://lake/in/day3b.parquet"],
    ) {
        assert_eq!(o.status.code(), Some(0), "{}", show(&o));
    }
    assert_eq!(s3_versions(&m, "lake", "releases/"), vec![0, 1, 2, 3]);
    // Two runs at once on the same input: one commits, the other finds the
    // release committed (Delta's conflict check on the transaction id) and
    // publishes nothing; both exit 0.
    let outputs = race(
        &m,
        &ep,
        ["s3://lake/in/day4.parquet", "s3://lake/in/day4.parquet"],
    );
    for o in &outputs {
        assert_eq!(o.status.code(), Some(0), "{}", show(o));
    }
    assert_eq!(
        outputs
            .iter()
            .filter(|o| stdout(o).contains("nothing to do"))
            .count(),
        1,
        "{}\n{}",
        show(&outputs[0]),
        show(&outputs[1])
    );
    assert_eq!(s3_versions(&m, "lake", "releases/"), vec![0, 1, 2, 3, 4]);
    // The loser removed its data files: one file per version, no orphan.
    assert_eq!(s3_data_files(&m, "lake", "releases/").len(), 5);

    // Every version verifies, its certificate against the rows it added.
    let mut fingerprints = Vec::new();
    for v in 0..=4 {
        let o = run(m.kanon().args([
            "verify",
            "-c",
            "configs/adult.toml",
            "-i",
            "s3://lake/releases",
            "--version",
            &v.to_string(),
        ]));
        assert_eq!(o.status.code(), Some(0), "version {v}: {}", show(&o));
        assert_eq!(
            stdout(&o).matches("certificate holds").count(),
            v as usize + 1,
            "{}",
            show(&o)
        );
    }
    let o = run(m.kanon().args(["inspect", "--json", "s3://lake/releases"]));
    assert_eq!(o.status.code(), Some(0), "{}", show(&o));
    let j: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    let history = j["delta_history"].as_array().unwrap();
    assert_eq!(history.len(), 5);
    for h in history {
        assert_eq!(h["files_added"], 1, "{h}");
        fingerprints.push(
            h["certificate"]["input"]["fingerprint"]
                .as_str()
                .unwrap()
                .to_string(),
        );
    }
    fingerprints.sort();
    fingerprints.dedup();
    assert_eq!(fingerprints.len(), 5, "each version is another input");
    let published: u64 = history
        .iter()
        .map(|h| h["certificate"]["rows_published"].as_u64().unwrap())
        .sum();
    assert_eq!(j["rows"].as_u64().unwrap(), published);

    // Read back through DataFusion's Delta provider (kanon sql)...
    let out = tempfile::tempdir().unwrap();
    let via_datafusion = out.path().join("datafusion.parquet");
    let o = run(m.kanon().args([
        "sql",
        "-t",
        "r=s3://lake/releases",
        &format!(
            "COPY (SELECT * FROM r) TO '{}' STORED AS PARQUET",
            via_datafusion.display()
        ),
    ]));
    assert_eq!(o.status.code(), Some(0), "{}", show(&o));
    let df_rows = rows_of(&[read_parquet(&via_datafusion)], &columns());
    assert_eq!(df_rows.len() as u64, published);
    // ... and through the Python deltalake package: identical rows.
    if python_with("import deltalake, pyarrow", "pip install deltalake pyarrow") {
        let via_python = out.path().join("python.parquet");
        let script = r#"
import sys, deltalake, pyarrow.parquet as pq
endpoint, out = sys.argv[1], sys.argv[2]
dt = deltalake.DeltaTable("s3://lake/releases", storage_options={
    "AWS_ENDPOINT_URL": endpoint, "AWS_ALLOW_HTTP": "true", "AWS_REGION": "us-east-1",
    "AWS_ACCESS_KEY_ID": sys.argv[3], "AWS_SECRET_ACCESS_KEY": sys.argv[4]})
assert dt.version() == 4, dt.version()
pq.write_table(dt.to_pyarrow_table(), out)
"#;
        let o = Command::new("python3")
            .args([
                "-c",
                script,
                &ep,
                via_python.to_str().unwrap(),
                KEY_ID,
                SECRET,
            ])
            .output()
            .unwrap();
        assert!(o.status.success(), "{}", show(&o));
        assert_eq!(rows_of(&[read_parquet(&via_python)], &columns()), df_rows);
    }
}

#[test]
fn the_server_gone_between_write_and_commit_leaves_the_table_as_it_was() {
    let Some(m) = Moto::start() else { return };
    m.create_bucket("lake");
    put_slice(&m, "in/day1.parquet", 0, 12_000);
    put_slice(&m, "in/day2.parquet", 12_000, 24_000);
    let relay = Relay::to(m.port);
    let o = run(&mut scheduled(
        &m,
        &relay.endpoint(),
        "s3://lake/in/day1.parquet",
        "2026-11-24",
    ));
    assert_eq!(o.status.code(), Some(0), "{}", show(&o));
    assert_eq!(s3_versions(&m, "lake", "releases/"), vec![0]);

    let barrier = tempfile::tempdir().unwrap();
    std::fs::write(barrier.path().join("delta-verify.wait"), b"").unwrap();
    let child = scheduled(
        &m,
        &relay.endpoint(),
        "s3://lake/in/day2.parquet",
        "2026-11-25",
    )
    .env("KANON_TEST_BARRIER", barrier.path())
    .stdout(std::process::Stdio::piped())
    .stderr(std::process::Stdio::piped())
    .spawn()
    .unwrap();
    wait_for(&barrier.path().join("delta-verify"));
    // The data files are written; the server goes away before the commit.
    relay.cut();
    std::fs::remove_file(barrier.path().join("delta-verify.wait")).unwrap();
    let o = child.wait_with_output().unwrap();
    assert_eq!(o.status.code(), Some(4), "{}", show(&o));
    // The data file it wrote could not be removed with the server gone: it
    // is named for VACUUM, never referenced by a version.
    assert!(stderr(&o).contains("VACUUM removes it"), "{}", show(&o));
    relay.restore();
    // The table is at its previous version and reads as before.
    assert_eq!(s3_versions(&m, "lake", "releases/"), vec![0]);
    let o = run(m.kanon().args([
        "verify",
        "-c",
        "configs/adult.toml",
        "-i",
        "s3://lake/releases",
    ]));
    assert_eq!(o.status.code(), Some(0), "{}", show(&o));
    assert!(stdout(&o).contains("(Delta version 0)"), "{}", show(&o));
    // The next run commits.
    let o = run(&mut scheduled(
        &m,
        &relay.endpoint(),
        "s3://lake/in/day2.parquet",
        "2026-11-25",
    ));
    assert_eq!(o.status.code(), Some(0), "{}", show(&o));
    assert_eq!(s3_versions(&m, "lake", "releases/"), vec![0, 1]);
}

/// `INSERT INTO` a registered Delta table from `anonymize(...)` is
/// published by kanon's Publisher, as `kanon anonymize` publishes: the data
/// files are read back and verified, and the commit carries the release's
/// certificate (issue 32, item 10: delta-rs's sink committed it with none).
/// Nothing is committed when anonymize() fails, when the query's result
/// breaks the classes, or for any other write into a registered table.
#[cfg(feature = "sql")]
#[test]
fn insert_into_a_delta_table_from_anonymize_commits_only_a_verified_release() {
    let dir = tempfile::tempdir().unwrap();
    let table = dir.path().join("t");
    let t = table.to_str().unwrap();
    let o = run_delta("data/adult/adult.parquet", t, &[]);
    assert_eq!(o.status.code(), Some(0), "{}", show(&o));
    // Adult has no person column to recognise across versions: the
    // INSERT accepts that readers compare the table's versions.
    let sql = |query: &str| {
        run(kanon().args([
            "sql",
            "--unchecked-series",
            "-t",
            "adult=data/adult/adult.parquet",
            "-t",
            &format!("r={t}"),
            query,
        ]))
    };
    let insert = |k: usize| {
        format!("INSERT INTO r SELECT * FROM anonymize('adult', 'config = \"configs/adult.toml\", k = {k}')")
    };
    // The job of the table's first release, so that its certificate is
    // this job's (verify fails a certificate of another job).
    let o = sql(&insert(10));
    assert_eq!(o.status.code(), Some(0), "{}", show(&o));
    assert!(stdout(&o).contains("with its certificate"), "{}", show(&o));
    assert_eq!(local_versions(&table), vec![0, 1]);
    // Without --unchecked-series, an INSERT into a table readers can read
    // is refused: it would let them diff the versions.
    let files = local_data_files(&table);
    let o = run(kanon().args([
        "sql",
        "-t",
        "adult=data/adult/adult.parquet",
        "-t",
        &format!("r={t}"),
        &insert(10),
    ]));
    assert_eq!(o.status.code(), Some(3), "{}", show(&o));
    assert!(
        stderr(&o).contains("already publishes rows"),
        "{}",
        show(&o)
    );
    assert_eq!(local_versions(&table), vec![0, 1]);
    assert_eq!(local_data_files(&table), files);
    // Unsatisfiable: exit 3, no commit, no data file.
    let o = sql(&insert(40_000));
    assert_eq!(o.status.code(), Some(3), "{}", show(&o));
    assert_eq!(local_versions(&table), vec![0, 1]);
    assert_eq!(local_data_files(&table), files);
    // Refused, the table unchanged: a result whose classes a LIMIT broke,
    // an INSERT into a table that is not Delta, and a DELETE.
    for (query, says) in [
        (
            format!("{} LIMIT 7", insert(10)),
            "does NOT satisfy anonymize()'s job",
        ),
        (
            "INSERT INTO adult SELECT * FROM adult".to_string(),
            "publishes into Delta tables only",
        ),
        (
            "INSERT INTO r SELECT * FROM r".to_string(),
            "reads 0 anonymize() calls",
        ),
        ("DELETE FROM r WHERE age = '*'".to_string(), "is refused"),
    ] {
        let o = sql(&query);
        assert_eq!(o.status.code(), Some(2), "{query}: {}", show(&o));
        assert!(stderr(&o).contains(says), "{query}: {}", show(&o));
        assert_eq!(local_versions(&table), vec![0, 1], "{query}");
        assert_eq!(local_data_files(&table), files, "{query}");
    }
    // Both releases are in the table, and each commit's certificate holds;
    // verified as another job (another k), the SQL commit's fails.
    let o = run(kanon().args([
        "sql",
        "-t",
        &format!("r={t}"),
        "SELECT count(*) AS n FROM r",
    ]));
    assert!(stdout(&o).contains("60324"), "{}", show(&o));
    let o = run(kanon().args(["verify", "-c", "configs/adult.toml", "-i", t]));
    assert_eq!(o.status.code(), Some(0), "{}", show(&o));
    assert_eq!(
        stdout(&o).matches("certificate holds").count(),
        2,
        "{}",
        show(&o)
    );
    let o = run(kanon().args([
        "verify",
        "-c",
        "configs/adult.toml",
        "--set",
        "privacy.k=20",
        "-i",
        t,
    ]));
    assert_eq!(o.status.code(), Some(1), "{}", show(&o));
    assert!(stdout(&o).contains("another job"), "{}", show(&o));
    let o = run(kanon().args(["inspect", t]));
    assert!(!stdout(&o).contains("no kanon certificate"), "{}", show(&o));
}

/// Issue 32, item 3: a Delta input with column mapping is refused, also
/// under reader version 2 (no reader features listed). Its data file still
/// holds `patient_id`, which the table dropped: read by physical names it
/// came back, and with `unlisted = "insensitive"` raw ids were published.
#[test]
fn a_column_mapped_delta_input_is_refused() {
    let dir = tempfile::tempdir().unwrap();
    let table = dir.path().join("visits");
    std::fs::create_dir_all(table.join("_delta_log")).unwrap();
    let batch = adult_with_patient_ids(2_000);
    write_parquet(&table.join("part-0.parquet"), std::slice::from_ref(&batch));
    let size = std::fs::metadata(table.join("part-0.parquet"))
        .unwrap()
        .len();
    // The logical schema: every column but the dropped `patient_id`, each
    // mapped to its physical name.
    let fields: Vec<serde_json::Value> = batch
        .schema()
        .fields()
        .iter()
        .filter(|f| f.name() != "patient_id")
        .enumerate()
        .map(|(i, f)| {
            let t = match f.data_type() {
                arrow::datatypes::DataType::Int64 => "long",
                _ => "string",
            };
            serde_json::json!({"name": f.name(), "type": t, "nullable": true, "metadata": {
                "delta.columnMapping.id": i + 1,
                "delta.columnMapping.physicalName": f.name()}})
        })
        .collect();
    let n = fields.len();
    let schema = serde_json::json!({"type": "struct", "fields": fields}).to_string();
    let log = [
        serde_json::json!({"protocol": {"minReaderVersion": 2, "minWriterVersion": 5}}).to_string(),
        serde_json::json!({"metaData": {"id": "mapped", "format": {"provider": "parquet", "options": {}},
            "schemaString": schema, "partitionColumns": [],
            "configuration": {"delta.columnMapping.mode": "name",
                              "delta.columnMapping.maxColumnId": n.to_string()},
            "createdTime": 0}})
        .to_string(),
        serde_json::json!({"add": {"path": "part-0.parquet", "partitionValues": {}, "size": size,
            "modificationTime": 0, "dataChange": true}})
        .to_string(),
    ];
    std::fs::write(
        table.join("_delta_log/00000000000000000000.json"),
        log.join("\n") + "\n",
    )
    .unwrap();
    let out = dir.path().join("out.parquet");
    let o = run(kanon()
        .args(["anonymize", "-c", "configs/adult.toml", "-i"])
        .arg(&table)
        .arg("-o")
        .arg(&out)
        .args([
            "--set",
            "columns.unlisted=\"insensitive\"",
            "--weaken-privacy",
        ]));
    assert_eq!(o.status.code(), Some(2), "{}", show(&o));
    assert!(stderr(&o).contains("column mapping"), "{}", show(&o));
    assert!(!out.exists());
}

/// Issue 32, item 9: after another engine's OPTIMIZE and DELETE (which
/// rewrites some of kanon's files with its own string types), `kanon
/// verify` still reads the table (it stopped at "different schemas").
/// Issue 31, item 3: OPTIMIZE changes no row and passes; the DELETE is a
/// version that changes the rows of a certified table without a
/// certificate, and fails verify (exit 1) naming it.
#[test]
fn verify_reads_a_table_another_engine_optimized_and_deleted_from() {
    if !python_with("import deltalake, pyarrow", "pip install deltalake pyarrow") {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let (a, b) = two_slices(dir.path(), (0, 15_000), (15_000, 30_162));
    let table = dir.path().join("releases");
    let t = table.to_str().unwrap();
    for input in [&a, &b] {
        let o = run_delta(input.to_str().unwrap(), t, &["output.mode=\"append\""]);
        assert_eq!(o.status.code(), Some(0), "{}", show(&o));
    }
    let verify = || run(kanon().args(["verify", "-c", "configs/adult.toml", "-i", t]));
    let o = std::process::Command::new("python3")
        .args([
            "-c",
            "import sys; from deltalake import DeltaTable; DeltaTable(sys.argv[1]).optimize.compact()",
            t,
        ])
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", show(&o));
    let o = verify();
    assert_eq!(o.status.code(), Some(0), "after OPTIMIZE: {}", show(&o));
    // DELETE the rows of one age label: whole classes go.
    let script = r#"
import sys, pyarrow.parquet as pq
from deltalake import DeltaTable
p = sys.argv[1]
dt = DeltaTable(p)
ages = sorted(set(dt.to_pyarrow_table(columns=["age"]).column("age").to_pylist()))
dt.delete(f"age = '{ages[0]}'")
"#;
    let o = std::process::Command::new("python3")
        .args(["-c", script, t])
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", show(&o));
    let o = verify();
    assert_eq!(o.status.code(), Some(1), "after DELETE: {}", show(&o));
    let out = stdout(&o);
    assert!(out.contains(": satisfies"), "the table was read: {out}");
    assert!(
        out.contains("version 3: changes the rows of a table kanon certified"),
        "{out}"
    );
}

/// Issue 31, item 3, for Delta tables: an l inflated in a commit's
/// certificate, a certificate removed from a kanon commit, and a data file
/// rewritten with the same size all fail `kanon verify` (exit 1), naming
/// the version. Each passed with exit 0 before.
#[test]
fn verify_catches_certificates_that_lie() {
    let dir = tempfile::tempdir().unwrap();
    let (a, b) = two_slices(dir.path(), (0, 15_000), (15_000, 30_162));
    let table = dir.path().join("releases");
    let t = table.to_str().unwrap();
    for input in [&a, &b] {
        let o = run_delta(input.to_str().unwrap(), t, &["output.mode=\"append\""]);
        assert_eq!(o.status.code(), Some(0), "{}", show(&o));
    }
    let verify = || run(kanon().args(["verify", "-c", "configs/adult.toml", "-i", t]));
    let o = verify();
    assert_eq!(o.status.code(), Some(0), "{}", show(&o));
    assert_eq!(
        stdout(&o).matches("file hashes match").count(),
        2,
        "{}",
        show(&o)
    );
    let log = table.join("_delta_log/00000000000000000001.json");
    let original = std::fs::read_to_string(&log).unwrap();
    let edit = |change: &dyn Fn(&mut serde_json::Map<String, serde_json::Value>)| {
        let lines: Vec<String> = original
            .lines()
            .map(|l| {
                let mut v: serde_json::Value = serde_json::from_str(l).unwrap();
                if let Some(info) = v.get_mut("commitInfo").and_then(|i| i.as_object_mut()) {
                    change(info);
                }
                serde_json::to_string(&v).unwrap()
            })
            .collect();
        std::fs::write(&log, lines.join("\n") + "\n").unwrap();
    };
    edit(&|info| {
        let c = info.get_mut("kanon.certificate").unwrap();
        let l = c["l_achieved"][0]["distinct_l"].as_u64().unwrap();
        c["l_achieved"][0]["distinct_l"] = serde_json::json!(l + 7);
    });
    let o = verify();
    assert_eq!(o.status.code(), Some(1), "{}", show(&o));
    assert!(
        stdout(&o).contains("version 1: certificate does NOT match"),
        "{}",
        show(&o)
    );
    edit(&|info| {
        info.remove("kanon.certificate");
    });
    let o = verify();
    assert_eq!(o.status.code(), Some(1), "{}", show(&o));
    assert!(
        stdout(&o).contains("carries no certificate"),
        "{}",
        show(&o)
    );
    std::fs::write(&log, &original).unwrap();
    let o = verify();
    assert_eq!(o.status.code(), Some(0), "{}", show(&o));
    for f in local_data_files(&table) {
        rewrite_same_size(&f, b"sha256:");
    }
    let o = verify();
    assert_eq!(o.status.code(), Some(1), "{}", show(&o));
    assert!(stdout(&o).contains("sha256 differs"), "{}", show(&o));
}
