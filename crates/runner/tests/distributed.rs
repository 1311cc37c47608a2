//! `kanon worker` processes on 127.0.0.1 and `kanon anonymize --workers`
//! (issue 18): the same release as the single-machine block-wise run, and a
//! worker killed mid-job fails the job with its address and commits nothing.
#![cfg(feature = "distributed")]

mod common;

use std::io::{BufRead, BufReader};
use std::path::Path;
use std::process::{Child, Stdio};

use common::*;

/// A `kanon worker` on a free port of 127.0.0.1, killed when dropped.
struct Worker {
    child: Child,
    url: String,
}

impl Worker {
    fn start() -> Worker {
        Worker::start_with(&[])
    }

    /// A worker with `env` set (its storage credentials).
    fn start_with(env: &[(&str, &str)]) -> Worker {
        let mut c = kanon();
        for (k, v) in env {
            c.env(k, v);
        }
        let mut child = c
            .args(["worker", "--listen", "127.0.0.1:0"])
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .unwrap();
        let mut line = String::new();
        BufReader::new(child.stdout.take().unwrap())
            .read_line(&mut line)
            .unwrap();
        let url = line
            .trim()
            .strip_prefix("kanon worker listening on ")
            .unwrap_or_else(|| panic!("unexpected first line: {line:?}"))
            .to_string();
        Worker { child, url }
    }

    /// Sends `signal` (`-STOP`, `-CONT`, `-TERM`) to the worker.
    fn signal(&self, signal: &str) {
        let s = std::process::Command::new("kill")
            .args([signal, &self.child.id().to_string()])
            .status()
            .unwrap();
        assert!(s.success());
    }

    fn kill(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

impl Drop for Worker {
    fn drop(&mut self) {
        self.kill();
    }
}

/// `kanon anonymize` of `input` (the bundled Adult data by default) with the
/// Adult job in blocks of `block_size` rows, on `workers` when given.
fn anonymize(
    dir: &Path,
    input: Option<&Path>,
    block_size: usize,
    out: &str,
    workers: &[&Worker],
) -> std::process::Output {
    let job = adult_job(dir, |t| t);
    let mut c = kanon();
    c.args(["anonymize", "-c"])
        .arg(&job)
        .arg("-o")
        .arg(dir.join(out));
    c.args(["--set", &format!("algorithm.block_size={block_size}")]);
    // Publishing unlisted columns weakens the job file: said on purpose.
    c.args([
        "--set",
        "columns.unlisted=\"insensitive\"",
        "--weaken-privacy",
    ]);
    c.arg("--metrics-json").arg(dir.join(format!("{out}.json")));
    if let Some(i) = input {
        c.arg("-i").arg(i);
    }
    if !workers.is_empty() {
        let urls: Vec<&str> = workers.iter().map(|w| w.url.as_str()).collect();
        c.args(["--workers", &urls.join(",")]);
    }
    run(&mut c)
}

fn executor(dir: &Path, out: &str) -> serde_json::Value {
    let m: serde_json::Value =
        serde_json::from_slice(&std::fs::read(dir.join(format!("{out}.json"))).unwrap()).unwrap();
    let details = m
        .pointer("/algorithm/details/partitioned")
        .or_else(|| m.pointer("/details/partitioned"))
        .unwrap_or_else(|| panic!("no partitioned details in {m}"));
    details["executor"].clone()
}

fn same_release(dir: &Path, input: Option<&Path>, block_size: usize) {
    let single = anonymize(dir, input, block_size, "single.parquet", &[]);
    assert!(single.status.success(), "{}", show(&single));
    let (a, b) = (Worker::start(), Worker::start());
    let two = anonymize(dir, input, block_size, "two.parquet", &[&a, &b]);
    assert!(two.status.success(), "{}", show(&two));
    assert!(
        stdout(&two).contains("  workers       2 (2 tasks; "),
        "{}",
        show(&two)
    );
    assert!(!stdout(&single).contains("  workers "), "{}", show(&single));
    let here = std::fs::read(dir.join("single.parquet")).unwrap();
    let there = std::fs::read(dir.join("two.parquet")).unwrap();
    assert!(
        here == there,
        "the release on two workers differs from the single-machine one"
    );
    assert!(executor(dir, "single.parquet").is_null());
    let e = executor(dir, "two.parquet");
    assert_eq!(e["workers"], 2, "{e}");
    assert_eq!(e["tasks"], 2, "{e}");
}

#[test]
fn adult_on_two_worker_processes_is_the_single_machine_release() {
    let dir = tempfile::tempdir().unwrap();
    same_release(dir.path(), None, 2_000);
}

#[test]
fn a_million_generated_rows_on_two_worker_processes_is_the_single_machine_release() {
    let dir = tempfile::tempdir().unwrap();
    let input = dir.path().join("gen.parquet");
    let g = run(kanon()
        .args([
            "-q", "generate", "--like", "adult", "--rows", "1000000", "--seed", "18",
        ])
        .arg(&input));
    assert!(g.status.success(), "{}", show(&g));
    same_release(dir.path(), Some(&input), 10_000);
}

/// `kanon anonymize` of the Adult job in blocks on workers `a` and `b`
/// (with `more` arguments), released into `out`, held at the test barrier
/// just before its blocks leave: the table is read and cut.
struct HeldJob {
    child: Child,
    barrier: tempfile::TempDir,
}

impl HeldJob {
    fn start(dir: &Path, out: &Path, a: &Worker, b: &Worker, more: &[&str]) -> HeldJob {
        let barrier = tempfile::tempdir().unwrap();
        std::fs::write(barrier.path().join("blocks.wait"), b"").unwrap();
        let job = adult_job(dir, |t| t);
        let child = kanon()
            .env("KANON_TEST_BARRIER", barrier.path())
            .arg("anonymize")
            .args(more)
            .arg("-c")
            .arg(&job)
            .arg("-o")
            .arg(out.join("release.parquet"))
            .args(["--set", "algorithm.block_size=2000"])
            .args(["--workers", &format!("{},{}", a.url, b.url)])
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        let point = barrier.path().join("blocks");
        let start = std::time::Instant::now();
        while !point.exists() {
            assert!(start.elapsed().as_secs() < 300, "barrier not reached");
            std::thread::sleep(std::time::Duration::from_millis(20));
        }
        HeldJob { child, barrier }
    }

    /// Lets the blocks leave and waits for the job's end.
    fn finish(self) -> std::process::Output {
        std::fs::remove_file(self.barrier.path().join("blocks.wait")).unwrap();
        self.child.wait_with_output().unwrap()
    }
}

#[test]
fn a_worker_killed_mid_job_fails_the_job_by_its_address_and_commits_nothing() {
    let (dir, out) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
    let (a, mut b) = (Worker::start(), Worker::start());
    let job = HeldJob::start(dir.path(), out.path(), &a, &b, &[]);
    b.kill();
    let o = job.finish();
    assert_eq!(o.status.code(), Some(4), "{}", show(&o));
    let err = stderr(&o);
    assert!(err.contains("nothing was released"), "{err}");
    assert!(err.contains(&format!("unreachable: {}", b.url)), "{err}");
    assert!(!err.contains(&format!("unreachable: {}", a.url)), "{err}");
    assert!(ls(out.path()).is_empty(), "{:?}", ls(out.path()));
}

#[test]
fn bad_worker_addresses_are_refused_before_any_work() {
    let dir = tempfile::tempdir().unwrap();
    let job = adult_job(dir.path(), |t| t);
    let o = run(kanon()
        .args(["anonymize", "-c"])
        .arg(&job)
        .args(["--workers", "ftp://127.0.0.1:1"]));
    assert_eq!(o.status.code(), Some(2), "{}", show(&o));
    assert!(stderr(&o).contains("ftp://127.0.0.1:1"), "{}", show(&o));
    assert!(ls(dir.path()) == ["job.toml"], "{:?}", ls(dir.path()));
}

#[test]
fn kanon_sql_on_a_worker_process_is_the_single_machine_release() {
    let dir = tempfile::tempdir().unwrap();
    let query = "COPY (SELECT * FROM anonymize('adult', 'config = \"configs/adult.toml\", \
                 algorithm.block_size = 3000')) TO '{out}' STORED AS PARQUET";
    let sql = |out: &str, workers: Option<&Worker>| {
        let out = dir.path().join(out);
        let mut c = kanon();
        c.args(["sql", "-t", "adult=data/adult/adult.parquet"])
            .arg(query.replace("{out}", &out.display().to_string()));
        if let Some(w) = workers {
            c.args(["--workers", &w.url]);
        }
        let o = run(&mut c);
        assert!(o.status.success(), "{}", show(&o));
        read_parquet(&out)
    };
    let here = sql("single.parquet", None);
    let worker = Worker::start();
    let there = sql("one.parquet", Some(&worker));
    assert!(here.num_rows() > 29_000);
    assert_eq!(here, there);
    // The blocks do go to --workers: a dead one fails the query, by address.
    let out = dir.path().join("dead.parquet");
    let o = run(kanon()
        .args(["sql", "-t", "adult=data/adult/adult.parquet"])
        .arg(query.replace("{out}", &out.display().to_string()))
        .args(["--workers", "127.0.0.1:1"]));
    assert!(!o.status.success(), "{}", show(&o));
    assert!(
        stderr(&o).contains("unreachable: http://127.0.0.1:1/"),
        "{}",
        show(&o)
    );
    assert!(!out.exists(), "the failed COPY left {}", out.display());
}

#[test]
fn a_stalled_worker_is_named_when_the_time_limit_ends_the_job() {
    let (dir, out) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
    let (a, b) = (Worker::start(), Worker::start());
    let job = HeldJob::start(dir.path(), out.path(), &a, &b, &["--timeout", "10"]);
    // Worker b still accepts connections (the kernel does) but never answers.
    b.signal("-STOP");
    let o = job.finish();
    b.signal("-CONT");
    assert_eq!(o.status.code(), Some(124), "{}", show(&o));
    let err = stderr(&o);
    assert!(err.contains("time limit"), "{err}");
    assert!(
        err.contains(&format!("still waiting for blocks from: {}", b.url)),
        "{err}"
    );
    assert!(!err.contains(&a.url), "{err}");
    assert!(ls(out.path()).is_empty(), "{:?}", ls(out.path()));
}

#[test]
fn a_worker_stops_cleanly_on_sigterm_and_refuses_a_taken_port() {
    let mut w = Worker::start();
    let port = w
        .url
        .trim_end_matches('/')
        .rsplit(':')
        .next()
        .unwrap()
        .to_string();
    let o = run(kanon().args(["worker", "--listen", &format!("127.0.0.1:{port}")]));
    assert_eq!(o.status.code(), Some(2), "{}", show(&o));
    assert!(
        stderr(&o).contains(&format!("cannot listen on 127.0.0.1:{port}")),
        "{}",
        show(&o)
    );
    w.signal("-TERM");
    let start = std::time::Instant::now();
    let status = loop {
        if let Some(status) = w.child.try_wait().unwrap() {
            break status;
        }
        assert!(start.elapsed().as_secs() < 10, "the worker ignored SIGTERM");
        std::thread::sleep(std::time::Duration::from_millis(20));
    };
    assert!(status.success(), "{status:?}");
}

/// Without a time limit, the keep-alive pings end the wait for a worker
/// that stopped answering: the job fails (exit 4) and names it.
#[test]
fn a_stalled_worker_fails_the_job_by_itself_without_a_time_limit() {
    let (dir, out) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
    let (a, b) = (Worker::start(), Worker::start());
    let job = HeldJob::start(dir.path(), out.path(), &a, &b, &[]);
    b.signal("-STOP");
    let start = std::time::Instant::now();
    let o = job.finish();
    b.signal("-CONT");
    assert_eq!(o.status.code(), Some(4), "{}", show(&o));
    assert!(start.elapsed().as_secs() < 120, "{:?}", start.elapsed());
    let err = stderr(&o);
    assert!(
        err.contains(&format!("no blocks returned by: {}", b.url)),
        "{err}"
    );
    assert!(ls(out.path()).is_empty(), "{:?}", ls(out.path()));
}

/// Access key id of the coordinator in the census tests, told apart from
/// the workers' in the store's request log.
const COORDINATOR_KEY: &str = "AKIAKANONCOORDINATOR";
/// Access key id of the workers in the census tests.
const WORKER_KEY: &str = "AKIAKANONWORKERS0001";

/// The QIs the census tests count.
const CENSUS_QIS: &str = "age,sex,race,marital-status,education";

/// Bundled Adult in four Parquet parts, uploaded to `s3://lake/adult/`;
/// the local directory of the parts is returned too.
fn adult_in_the_lake(m: &Moto) -> tempfile::TempDir {
    let parts = tempfile::tempdir().unwrap();
    m.create_bucket("lake");
    for p in adult_parts(parts.path(), 4) {
        let name = p.file_name().unwrap().to_str().unwrap().to_string();
        m.put(
            "lake",
            &format!("adult/{name}"),
            &std::fs::read(&p).unwrap(),
        );
    }
    parts
}

/// Asserts `a` and `b` are the same JSON, numbers equal to 1e-12
/// relative: sums of risks over classes taken in another order differ in
/// their last bits.
fn assert_same(a: &serde_json::Value, b: &serde_json::Value, at: &str) {
    use serde_json::Value;
    match (a, b) {
        (Value::Number(x), Value::Number(y)) => {
            let (x, y) = (x.as_f64().unwrap(), y.as_f64().unwrap());
            assert!(
                (x - y).abs() <= 1e-12 * x.abs().max(y.abs()),
                "{at}: {x} against {y}"
            );
        }
        (Value::Array(x), Value::Array(y)) => {
            assert_eq!(x.len(), y.len(), "{at}: lengths");
            for (i, (x, y)) in x.iter().zip(y).enumerate() {
                assert_same(x, y, &format!("{at}[{i}]"));
            }
        }
        (Value::Object(x), Value::Object(y)) => {
            let keys = |o: &serde_json::Map<String, Value>| o.keys().cloned().collect::<Vec<_>>();
            assert_eq!(keys(x), keys(y), "{at}: keys");
            for (k, v) in x {
                assert_same(v, &y[k], &format!("{at}.{k}"));
            }
        }
        _ => assert_eq!(a, b, "{at}"),
    }
}

/// The JSON of `kanon inspect` with `args`, checked to succeed.
fn inspect_json(c: &mut std::process::Command) -> serde_json::Value {
    let o = run(c);
    assert!(o.status.success(), "{}", show(&o));
    serde_json::from_slice(&o.stdout).unwrap_or_else(|e| panic!("{e}: {}", show(&o)))
}

#[test]
fn inspect_on_two_workers_reads_nothing_here_and_counts_as_one_machine() {
    let dir = tempfile::tempdir().unwrap();
    let log = dir.path().join("requests.log");
    let Some(m) = Moto::start_logged(&log) else {
        return;
    };
    let parts = adult_in_the_lake(&m);
    let creds = [
        ("AWS_ACCESS_KEY_ID", WORKER_KEY),
        ("AWS_SECRET_ACCESS_KEY", SECRET),
        ("AWS_REGION", "us-east-1"),
    ];
    let (a, b) = (Worker::start_with(&creds), Worker::start_with(&creds));
    let args = [
        "--qi",
        CENSUS_QIS,
        "--k",
        "2",
        "--k",
        "5",
        "--k",
        "10",
        "--msu-size",
        "0",
        "--json",
    ];
    let there = inspect_json(
        m.kanon()
            .env("AWS_ACCESS_KEY_ID", COORDINATOR_KEY)
            .args(["inspect", "s3://lake/adult/"])
            .args(args)
            .args(["--workers", &format!("{},{}", a.url, b.url)]),
    );
    let here = inspect_json(kanon().arg("inspect").arg(parts.path()).args(args));
    // Every figure as on one machine reading the same files.
    for field in ["files", "bytes", "rows", "columns", "format", "risk"] {
        assert_same(&there[field], &here[field], field);
    }
    assert_eq!(there["rows"], 30162, "{there}");
    assert!(
        there["risk"]["unique_rows"].as_u64().unwrap() > 0,
        "{there}"
    );
    assert_eq!(there["workers"].as_array().unwrap().len(), 2, "{there}");
    // The store's request log: the coordinator listed the prefix and
    // opened no data file; the workers read every part.
    let log = std::fs::read_to_string(&log).unwrap();
    let coordinator: Vec<&str> = log
        .lines()
        .filter(|l| l.starts_with(COORDINATOR_KEY))
        .collect();
    assert!(
        !coordinator.is_empty(),
        "the coordinator made no request:\n{log}"
    );
    for line in &coordinator {
        assert!(
            !line.contains(".parquet"),
            "the coordinator touched a data file: {line}\n{log}"
        );
    }
    for i in 0..4 {
        let part = format!("/lake/adult/part-{i}.parquet");
        assert!(
            log.lines()
                .any(|l| l.starts_with(WORKER_KEY) && l.contains(" GET ") && l.contains(&part)),
            "no worker read {part}:\n{log}"
        );
    }
}

#[test]
fn inspect_on_workers_reads_a_delta_tables_files() {
    let dir = tempfile::tempdir().unwrap();
    let table = dir.path().join("released");
    for (i, part) in adult_parts(dir.path(), 2).iter().enumerate() {
        let mut c = kanon();
        c.args(["anonymize", "-c", "configs/adult.toml", "-i"])
            .arg(part)
            .arg("-o")
            .arg(&table)
            .args(["--set", "output.format=delta"]);
        if i > 0 {
            c.args([
                "--set",
                "output.mode=append",
                "--set",
                "output.unchecked_series=true",
            ])
            .arg("--weaken-privacy");
        }
        let o = run(&mut c);
        assert!(o.status.success(), "{}", show(&o));
    }
    let (a, b) = (Worker::start(), Worker::start());
    let args = ["--qi", "age,sex,race", "--msu-size", "0", "--json"];
    let there = inspect_json(
        kanon()
            .arg("inspect")
            .arg(&table)
            .args(args)
            .args(["--workers", &format!("{},{}", a.url, b.url)]),
    );
    let here = inspect_json(kanon().arg("inspect").arg(&table).args(args));
    for field in ["files", "bytes", "rows", "columns", "format", "risk"] {
        assert_same(&there[field], &here[field], field);
    }
    assert_eq!(there["files"], 2, "{there}");
}

#[test]
fn inspect_on_workers_reads_the_population_table_too() {
    let dir = tempfile::tempdir().unwrap();
    let population = dir.path().join("population");
    std::fs::create_dir(&population).unwrap();
    let parts = adult_parts(&population, 3);
    let (a, b) = (Worker::start(), Worker::start());
    let args = [
        "--qi",
        "age,sex,race",
        "--msu-size",
        "0",
        "--json",
        "--population",
        population.to_str().unwrap(),
    ];
    let there = inspect_json(
        kanon()
            .arg("inspect")
            .arg(&parts[1])
            .args(args)
            .args(["--workers", &format!("{},{}", a.url, b.url)]),
    );
    let here = inspect_json(kanon().arg("inspect").arg(&parts[1]).args(args));
    assert_same(&there["risk"], &here["risk"], "risk");
    let journalist = &there["risk"]["profile"]["journalist"];
    assert!(journalist["highest"].as_f64().unwrap() > 0.0, "{there}");
    // A sample the population does not hold is refused, by count.
    let t = adult().slice(0, 10);
    let mut columns = t.columns().to_vec();
    columns[t.schema().index_of("race").unwrap()] =
        std::sync::Arc::new(arrow::array::StringArray::from(vec!["Nowhere"; 10]));
    let other = dir.path().join("other.parquet");
    write_parquet(
        &other,
        &[arrow::array::RecordBatch::try_new(t.schema(), columns).unwrap()],
    );
    let o = run(kanon()
        .arg("inspect")
        .arg(&other)
        .args(["--qi", "age,sex,race", "--population"])
        .arg(&population)
        .args(["--workers", &format!("{},{}", a.url, b.url)]));
    assert_eq!(o.status.code(), Some(2), "{}", show(&o));
    assert!(
        stderr(&o).contains("do not occur in the population"),
        "{}",
        show(&o)
    );
}

#[test]
fn a_lost_worker_fails_inspect_by_its_address() {
    let dir = tempfile::tempdir().unwrap();
    let parts = adult_parts(dir.path(), 3);
    let (a, mut b) = (Worker::start(), Worker::start());
    b.kill();
    let o = run(kanon()
        .arg("inspect")
        .arg(parts[0].parent().unwrap())
        .args(["--qi", CENSUS_QIS])
        .args(["--workers", &format!("{},{}", a.url, b.url)]));
    assert_eq!(o.status.code(), Some(4), "{}", show(&o));
    let err = stderr(&o);
    assert!(err.contains(&format!("unreachable: {}", b.url)), "{err}");
    assert!(err.contains("nothing was measured"), "{err}");
}

#[test]
fn inspect_on_workers_refuses_what_it_cannot_count_there() {
    let dir = tempfile::tempdir().unwrap();
    let csv = dir.path().join("t.csv");
    std::fs::write(&csv, "a,b\n1,2\n").unwrap();
    let o = run(kanon()
        .arg("inspect")
        .arg(&csv)
        .args(["--qi", "a", "--workers", "127.0.0.1:1"]));
    assert_eq!(o.status.code(), Some(2), "{}", show(&o));
    assert!(
        stderr(&o).contains("Parquet files and Delta tables only"),
        "{}",
        show(&o)
    );
    let o = run(kanon()
        .arg("inspect")
        .arg(&csv)
        .args(["--workers", "127.0.0.1:1"]));
    assert_eq!(o.status.code(), Some(2), "{}", show(&o));
    assert!(stderr(&o).contains("--qi or --config"), "{}", show(&o));
}

/// The coordinator's signing key in the tests of workers that write.
const SIGNING_KEY: &str = "9f8e7d6c5b4a39281706f5e4d3c2b1a0ffeeddccbbaa99887766554433221100";

/// The Adult job with a full-domain algorithm (`incognito`): what the
/// workers read and write themselves (issue 35).
fn full_domain_job(dir: &Path) -> std::path::PathBuf {
    adult_job(dir, |t| {
        // `windows` are `cover`'s alone.
        let t: String = t
            .lines()
            .filter(|l| !l.starts_with("windows"))
            .map(|l| format!("{l}\n"))
            .collect();
        set_algorithm(t, "incognito")
    })
}

/// Every row of `batch` as one line of text, sorted: a release up to the
/// order of its rows.
fn sorted_rows(batch: &arrow::array::RecordBatch) -> Vec<String> {
    let columns: Vec<Vec<String>> = batch
        .schema()
        .fields()
        .iter()
        .map(|f| column_text(batch, f.name()))
        .collect();
    let mut rows: Vec<String> = (0..batch.num_rows())
        .map(|r| {
            columns
                .iter()
                .map(|c| c[r].as_str())
                .collect::<Vec<_>>()
                .join("|")
        })
        .collect();
    rows.sort();
    rows
}

/// The sorted rows of `job`'s release of `input` on this machine alone
/// (written in `dir`).
fn single_machine_rows(dir: &Path, job: &Path, input: &Path) -> Vec<String> {
    let single = dir.join("single.parquet");
    let here = run(kanon()
        .args(["anonymize", "-c"])
        .arg(job)
        .arg("-i")
        .arg(input)
        .arg("-o")
        .arg(&single));
    assert!(here.status.success(), "{}", show(&here));
    sorted_rows(&read_parquet(&single))
}

/// The Parquet parts under `prefix` in `bucket`, as one sorted list of rows.
fn release_rows(m: &Moto, bucket: &str, prefix: &str) -> Vec<String> {
    let mut rows = Vec::new();
    for key in m.keys(bucket, prefix) {
        if key.ends_with(".parquet") {
            rows.extend(sorted_rows(&read_parquet_bytes(m.get(bucket, &key))));
        }
    }
    rows.sort();
    rows
}

/// Bundled Adult in the lake (`s3://lake/adult/`, four parts, also in
/// `parts` on disk) and two workers reading it with their own key, `b`
/// with `b_env` besides.
struct Lake {
    m: Moto,
    parts: tempfile::TempDir,
    a: Worker,
    b: Worker,
}

impl Lake {
    fn start(log: Option<&Path>, b_env: &[(&str, &str)]) -> Option<Lake> {
        let m = match log {
            Some(log) => Moto::start_logged(log)?,
            None => Moto::start()?,
        };
        let parts = adult_in_the_lake(&m);
        let creds = [
            ("AWS_ACCESS_KEY_ID", WORKER_KEY),
            ("AWS_SECRET_ACCESS_KEY", SECRET),
            ("AWS_REGION", "us-east-1"),
        ];
        let a = Worker::start_with(&creds);
        let b = Worker::start_with(&[&creds[..], b_env].concat());
        Some(Lake { m, parts, a, b })
    }
}

/// Asserts that the coordinator's requests in the store's `log` touch no
/// data file of the input (`s3://lake/adult/part-*`).
fn assert_coordinator_opened_no_input_file(log: &str) {
    for line in log.lines().filter(|l| l.starts_with(COORDINATOR_KEY)) {
        assert!(
            !line.contains("/lake/adult/part-"),
            "the coordinator touched a data file: {line}\n{log}"
        );
    }
}

#[test]
fn incognito_on_two_workers_is_read_and_written_there_and_is_the_single_machine_release() {
    let dir = tempfile::tempdir().unwrap();
    let log = dir.path().join("requests.log");
    let Some(Lake { m, parts, a, b }) = Lake::start(Some(&log), &[]) else {
        return;
    };
    let job = full_domain_job(dir.path());
    let there = run(m
        .kanon()
        .env("AWS_ACCESS_KEY_ID", COORDINATOR_KEY)
        .env("KANON_SIGNING_KEY", SIGNING_KEY)
        .args(["anonymize", "-c"])
        .arg(&job)
        .args(["-i", "s3://lake/adult/", "-o", "s3://lake/release/"])
        .args(["--workers", &format!("{},{}", a.url, b.url)]));
    assert!(there.status.success(), "{}", show(&there));
    assert!(stdout(&there).contains("by 2 workers"), "{}", show(&there));
    // The release is the single machine's, up to the order of its rows.
    let expected = single_machine_rows(dir.path(), &job, parts.path());
    assert_eq!(expected.len(), 30162);
    assert!(
        release_rows(&m, "lake", "release/") == expected,
        "the release of the workers is not the single machine's"
    );
    // It is a checked release: manifest, certificate (signed, its files'
    // hashes in it), `_SUCCESS`.
    let public = stdout(&there)
        .split("signed by Ed25519 key ")
        .nth(1)
        .and_then(|s| s.split_whitespace().next())
        .unwrap_or_else(|| panic!("no signing key in {}", show(&there)))
        .to_string();
    let verify = run(m
        .kanon()
        .args(["verify", "-c"])
        .arg(&job)
        .args(["--trusted-key", &public])
        .args(["--input", "s3://lake/release/"]));
    assert!(verify.status.success(), "{}", show(&verify));
    let keys = m.keys("lake", "");
    assert!(keys.contains(&"release/_SUCCESS".to_string()), "{keys:?}");
    assert!(
        !keys.iter().any(|k| k.contains("kanon-staging")),
        "staged parts left: {keys:?}"
    );
    // The coordinator never touched a data file of the input; the workers
    // read every part of it and wrote the staged parts.
    let log = std::fs::read_to_string(&log).unwrap();
    assert_coordinator_opened_no_input_file(&log);
    for i in 0..4 {
        let part = format!("/lake/adult/part-{i}.parquet");
        assert!(
            log.lines()
                .filter(|l| l.starts_with(WORKER_KEY) && l.contains(" GET "))
                .any(|l| l.contains(&part)),
            "no worker read {part}:\n{log}"
        );
    }
    assert!(
        log.lines()
            .any(|l| l.starts_with(WORKER_KEY) && l.contains("kanon-staging")),
        "no worker wrote a staged part:\n{log}"
    );
}

#[test]
fn a_worker_killed_while_writing_publishes_nothing_and_leaves_no_staged_part() {
    let dir = tempfile::tempdir().unwrap();
    // Worker b stops once its parts are written, before it reports them.
    let barrier = tempfile::tempdir().unwrap();
    std::fs::write(barrier.path().join("part-written.wait"), b"").unwrap();
    let barrier_dir = barrier.path().to_str().unwrap().to_string();
    let Some(Lake { m, a, mut b, .. }) =
        Lake::start(None, &[("KANON_TEST_BARRIER", barrier_dir.as_str())])
    else {
        return;
    };
    let job = full_domain_job(dir.path());
    let child = m
        .kanon()
        .args(["anonymize", "-c"])
        .arg(&job)
        .args(["-i", "s3://lake/adult/", "-o", "s3://lake/release/"])
        .args(["--workers", &format!("{},{}", a.url, b.url)])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    wait_for(&barrier.path().join("part-written"));
    assert!(
        m.keys("lake", "")
            .iter()
            .any(|k| k.contains("kanon-staging")),
        "no part was staged before the kill"
    );
    b.kill();
    let o = child.wait_with_output().unwrap();
    assert!(!o.status.success(), "{}", show(&o));
    let err = stderr(&o);
    assert!(err.contains("nothing was published"), "{err}");
    assert!(err.contains(&b.url), "{err}");
    let keys = m.keys("lake", "");
    assert!(
        keys.iter().all(|k| k.starts_with("adult/")),
        "something besides the input is left: {keys:?}"
    );
    assert!(m.pending_uploads("lake").is_empty());
}

#[test]
fn full_domain_jobs_the_workers_cannot_plan_from_counts_are_refused_by_setting() {
    let dir = tempfile::tempdir().unwrap();
    let a = Worker::start();
    let job = full_domain_job(dir.path());
    let o = run(kanon()
        .args(["anonymize", "-c"])
        .arg(&job)
        .args(["--set", "privacy.l=2"])
        .args(["--workers", &a.url]));
    assert!(!o.status.success(), "{}", show(&o));
    let err = stderr(&o);
    assert!(err.contains("diversity") && err.contains("counts"), "{err}");
    assert!(ls(dir.path()) == ["job.toml"], "{:?}", ls(dir.path()));
}

#[test]
fn incognito_on_two_workers_commits_one_delta_version_with_every_part() {
    let dir = tempfile::tempdir().unwrap();
    let log = dir.path().join("requests.log");
    let Some(Lake { m, parts, a, b }) = Lake::start(Some(&log), &[]) else {
        return;
    };
    let job = full_domain_job(dir.path());
    let delta = |c: &mut std::process::Command| {
        c.args(["anonymize", "-c"])
            .arg(&job)
            .args(["-i", "s3://lake/adult/", "-o", "s3://lake/table/"])
            .args(["--set", "output.format=delta"])
            .args(["--workers", &format!("{},{}", a.url, b.url)]);
    };
    let mut c = m.kanon();
    c.env("AWS_ACCESS_KEY_ID", COORDINATOR_KEY);
    delta(&mut c);
    let o = run(&mut c);
    assert!(o.status.success(), "{}", show(&o));
    assert!(stdout(&o).contains("version 0"), "{}", show(&o));
    // One version, whose files are the single machine's rows.
    let keys = m.keys("lake", "table/");
    let logs: Vec<&String> = keys.iter().filter(|k| k.contains("_delta_log/")).collect();
    assert_eq!(logs.len(), 1, "{keys:?}");
    assert!(
        release_rows(&m, "lake", "table/") == single_machine_rows(dir.path(), &job, parts.path()),
        "the table's rows are not the single machine's release"
    );
    let verify = run(m
        .kanon()
        .args(["verify", "-c"])
        .arg(&job)
        .args(["--input", "s3://lake/table/"]));
    assert!(verify.status.success(), "{}", show(&verify));
    // The table now has readable rows: a second run is refused before any
    // work (the job accepts no unchecked series), and adds nothing.
    let mut c = m.kanon();
    delta(&mut c);
    let again = run(&mut c);
    assert!(!again.status.success(), "{}", show(&again));
    assert_eq!(m.keys("lake", "table/"), keys);
    let log = std::fs::read_to_string(&log).unwrap();
    assert_coordinator_opened_no_input_file(&log);
}

#[test]
fn workers_publish_no_column_the_job_does_not_declare_and_no_person_twice() {
    let dir = tempfile::tempdir().unwrap();
    // Adult with a patient id the job does not list, in two local files.
    let t = adult_with_patient_ids(adult().num_rows());
    let input = dir.path().join("in");
    std::fs::create_dir(&input).unwrap();
    let half = t.num_rows() / 2;
    write_parquet(&input.join("a.parquet"), &[t.slice(0, half)]);
    write_parquet(
        &input.join("b.parquet"),
        &[t.slice(half, t.num_rows() - half)],
    );
    let (a, b) = (Worker::start(), Worker::start());
    let workers = format!("{},{}", a.url, b.url);
    let attempt = |job: &Path, out: &str| {
        run(kanon()
            .args(["anonymize", "-c"])
            .arg(job)
            .arg("-i")
            .arg(&input)
            .arg("-o")
            .arg(dir.path().join(out))
            .args(["--workers", &workers]))
    };
    // Unlisted: refused as on one machine, nothing written.
    let job = full_domain_job(dir.path());
    let o = attempt(&job, "unlisted");
    assert!(!o.status.success(), "{}", show(&o));
    assert!(
        stderr(&o).contains("have no role in the job"),
        "{}",
        show(&o)
    );
    // Identifying: a person may have several rows across the files, which
    // no worker sees; refused unless the job says rows are people.
    let text = std::fs::read_to_string(&job).unwrap();
    let with_id =
        format!("{text}\n[[attributes]]\nname = \"patient_id\"\nrole = \"identifying\"\n");
    std::fs::write(&job, &with_id).unwrap();
    let o = attempt(&job, "identifying");
    assert!(!o.status.success(), "{}", show(&o));
    assert!(
        stderr(&o).contains("privacy.entity = \"row\""),
        "{}",
        show(&o)
    );
    let rows_are_people = with_id.replace("[privacy]\n", "[privacy]\nentity = \"row\"\n");
    assert_ne!(rows_are_people, with_id);
    std::fs::write(&job, rows_are_people).unwrap();
    let o = attempt(&job, "dropped");
    assert!(o.status.success(), "{}", show(&o));
    for name in ls(&dir.path().join("dropped")) {
        if name.ends_with(".parquet") {
            let part = read_parquet(&dir.path().join("dropped").join(&name));
            assert!(part.column_by_name("patient_id").is_none(), "{name}");
        }
    }
    let names = ls(dir.path());
    assert!(
        !names
            .iter()
            .any(|n| n == "unlisted" || n == "identifying" || n.contains("staging")),
        "{names:?}"
    );
}

#[test]
fn ctrl_c_before_the_commit_of_a_workers_release_publishes_nothing_and_removes_the_parts() {
    let dir = tempfile::tempdir().unwrap();
    let input = dir.path().join("in");
    std::fs::create_dir(&input).unwrap();
    adult_parts(&input, 3);
    let out = dir.path().join("out");
    std::fs::create_dir(&out).unwrap();
    let job = full_domain_job(dir.path());
    let (a, b) = (Worker::start(), Worker::start());
    let barrier = tempfile::tempdir().unwrap();
    std::fs::write(barrier.path().join("before-commit.wait"), b"").unwrap();
    let child = kanon()
        .env("KANON_TEST_BARRIER", barrier.path())
        .args(["anonymize", "-c"])
        .arg(&job)
        .arg("-i")
        .arg(&input)
        .arg("-o")
        .arg(out.join("release"))
        .arg("--metrics-json")
        .arg(out.join("metrics.json"))
        .args(["--workers", &format!("{},{}", a.url, b.url)])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    wait_for(&barrier.path().join("before-commit"));
    // Verified, and waiting: the parts staged beside the release, the
    // metrics written, the release not there.
    let staged = ls(&out);
    assert!(
        staged
            .iter()
            .any(|n| n.starts_with("_release.kanon-staging-")),
        "{staged:?}"
    );
    assert!(!staged.contains(&"release".to_string()), "{staged:?}");
    let s = std::process::Command::new("kill")
        .args(["-INT", &child.id().to_string()])
        .status()
        .unwrap();
    assert!(s.success());
    let o = child.wait_with_output().unwrap();
    assert_eq!(o.status.code(), Some(130), "{}", show(&o));
    let err = stderr(&o);
    assert!(err.contains("nothing was published"), "{err}");
    assert!(ls(&out).is_empty(), "{:?}", ls(&out));
}
