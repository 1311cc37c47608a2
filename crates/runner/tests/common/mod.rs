//! Helpers of the runner's integration tests: the real `kanon` binary in a
//! clean environment, Parquet files made on the fly, and an S3-compatible
//! server (`moto_server`) started on 127.0.0.1 for the S3 tests.
#![allow(dead_code)]

use std::fs::File;
use std::io::{Read, Write};
use std::net::{TcpListener, TcpStream};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Output, Stdio};
use std::sync::Arc;
use std::time::{Duration, Instant};

use arrow::array::{ArrayRef, Int64Array, RecordBatch};
use arrow::datatypes::{DataType, Field, Schema};
use parquet::arrow::arrow_reader::ParquetRecordBatchReaderBuilder;
use parquet::arrow::ArrowWriter;

// Each test binary uses some of them.
#[allow(unused_imports)]
pub use kanon_e2e::{
    adult_job, ls, read_parquet, read_parquet_bytes, root, set_algorithm, ADULT_QIS,
};

/// A column of `batch` as text, one string per row (null as empty).
pub fn column_text(batch: &RecordBatch, name: &str) -> Vec<String> {
    let a = arrow::compute::cast(batch.column_by_name(name).unwrap(), &DataType::Utf8).unwrap();
    a.as_any()
        .downcast_ref::<arrow::array::StringArray>()
        .unwrap()
        .iter()
        .map(|v| v.unwrap_or_default().to_string())
        .collect()
}

/// The `kanon` binary, run from the repository root, without AWS or KANON
/// variables from the caller's environment (and HOME pointing nowhere, so
/// no real AWS profile is read).
pub fn kanon() -> Command {
    let mut c = Command::new(env!("CARGO_BIN_EXE_kanon"));
    c.current_dir(root());
    for (k, _) in std::env::vars() {
        if k.starts_with("AWS_") || k.starts_with("KANON_") {
            c.env_remove(k);
        }
    }
    c.env("HOME", "/nonexistent-kanon-test-home");
    c.stdin(Stdio::null());
    c
}

/// Runs a command and returns its output.
pub fn run(c: &mut Command) -> Output {
    c.output().expect("kanon runs")
}

/// The exit code, stdout and stderr of an output, for messages.
pub fn show(o: &Output) -> String {
    format!(
        "exit {:?}\n--- stdout\n{}--- stderr\n{}",
        o.status.code(),
        String::from_utf8_lossy(&o.stdout),
        String::from_utf8_lossy(&o.stderr)
    )
}

pub fn stderr(o: &Output) -> String {
    String::from_utf8_lossy(&o.stderr).into_owned()
}

pub fn stdout(o: &Output) -> String {
    String::from_utf8_lossy(&o.stdout).into_owned()
}

/// Writes batches to a Parquet file.
pub fn write_parquet(path: &Path, batches: &[RecordBatch]) {
    write_parquet_with(path, batches, None)
}

/// Writes batches to a Parquet file with writer properties.
pub fn write_parquet_with(
    path: &Path,
    batches: &[RecordBatch],
    props: Option<parquet::file::properties::WriterProperties>,
) {
    let f = File::create(path).unwrap();
    let mut w = ArrowWriter::try_new(f, batches[0].schema(), props).unwrap();
    for b in batches {
        w.write(b).unwrap();
    }
    w.close().unwrap();
}

/// The key-value metadata of a Parquet file.
pub fn parquet_metadata(bytes: Vec<u8>) -> Vec<(String, String)> {
    let b = ParquetRecordBatchReaderBuilder::try_new(bytes::Bytes::from(bytes)).unwrap();
    b.metadata()
        .file_metadata()
        .key_value_metadata()
        .map(|kv| {
            kv.iter()
                .map(|k| (k.key.clone(), k.value.clone().unwrap_or_default()))
                .collect()
        })
        .unwrap_or_default()
}

/// The bundled Adult table.
pub fn adult() -> RecordBatch {
    read_parquet(&root().join("data/adult/adult.parquet"))
}

/// `batch` with more columns appended.
pub fn with_columns(batch: &RecordBatch, extra: Vec<(Field, ArrayRef)>) -> RecordBatch {
    let mut fields: Vec<Field> = batch
        .schema()
        .fields()
        .iter()
        .map(|f| f.as_ref().clone())
        .collect();
    let mut cols: Vec<ArrayRef> = batch.columns().to_vec();
    for (f, c) in extra {
        fields.push(f);
        cols.push(c);
    }
    RecordBatch::try_new(Arc::new(Schema::new(fields)), cols).unwrap()
}

/// The first `n` Adult rows with a direct identifier `patient_id`
/// (900000, 900001, ...).
pub fn adult_with_patient_ids(n: usize) -> RecordBatch {
    let t = adult().slice(0, n);
    let ids = Int64Array::from_iter_values((0..t.num_rows() as i64).map(|i| 900_000 + i));
    with_columns(
        &t,
        vec![(
            Field::new("patient_id", DataType::Int64, false),
            Arc::new(ids) as ArrayRef,
        )],
    )
}

/// `kanon anonymize -c JOB -i INPUT -o OUTPUT`.
pub fn anonymize_cmd(job: &Path, input: &Path, output: &Path) -> Command {
    let mut c = kanon();
    c.args(["anonymize", "-c"])
        .arg(job)
        .arg("-i")
        .arg(input)
        .arg("-o")
        .arg(output);
    c
}

/// Writes the Adult table as `n` Parquet files `part-0.parquet`, ... in
/// `dir`, in row order.
pub fn adult_parts(dir: &Path, n: usize) -> Vec<PathBuf> {
    let t = adult();
    let per = t.num_rows().div_ceil(n);
    (0..n)
        .map(|i| {
            let start = i * per;
            let len = per.min(t.num_rows() - start);
            let p = dir.join(format!("part-{i}.parquet"));
            write_parquet(&p, &[t.slice(start, len)]);
            p
        })
        .collect()
}

// ---------------------------------------------------------------------------
// S3: moto_server on 127.0.0.1.

/// A running `moto_server`, stopped on drop.
pub struct Moto {
    child: Option<Child>,
    pub port: u16,
}

/// Access key id the tests use (moto accepts any while auth is off).
pub const KEY_ID: &str = "AKIAKANONTEST0000001";
/// Its secret; must never appear in kanon's output.
pub const SECRET: &str = "kanon-test-secret-DO-NOT-PRINT-0123456789";

/// `moto_server` on 127.0.0.1 at the port given as the first argument,
/// handling one request at a time. moto checks S3's conditions (such as
/// `If-None-Match: *` on completing a multipart upload, which kanon's
/// publication without `--overwrite` relies on) and then writes, on many
/// threads: two requests released together can both pass the check. S3
/// makes each request atomic; so does the lock, and the connections stay
/// threaded. With a third argument, every request is logged to that file
/// as a line `ACCESS_KEY_ID METHOD PATH QUERY` (the store's request log).
const MOTO_ONE_REQUEST_AT_A_TIME: &str = r#"
import sys, threading
from moto.moto_server import werkzeug_app
lock = threading.Lock()
handle = werkzeug_app.DomainDispatcherApplication.__call__
ignore_conditions = sys.argv[2] == "ignore-conditions"
log = sys.argv[3] if len(sys.argv) > 3 else None
def one_at_a_time(self, environ, start_response):
    if ignore_conditions:
        # A store without conditional writes: If-None-Match is dropped.
        environ.pop("HTTP_IF_NONE_MATCH", None)
    with lock:
        if log:
            auth = environ.get("HTTP_AUTHORIZATION", "")
            key = auth.split("Credential=")[1].split("/")[0] if "Credential=" in auth else "-"
            with open(log, "a") as f:
                f.write("%s %s %s %s\n" % (key, environ["REQUEST_METHOD"], environ.get("PATH_INFO", ""), environ.get("QUERY_STRING", "")))
        return list(handle(self, environ, start_response))
werkzeug_app.DomainDispatcherApplication.__call__ = one_at_a_time
from moto.server import main
main(["-H", "127.0.0.1", "-p", sys.argv[1]])
"#;

impl Moto {
    /// Starts a server, or returns `None` (with a printed reason) when
    /// `moto_server` is not installed and `CI` is not set. In CI a missing
    /// server fails the test.
    pub fn start() -> Option<Moto> {
        Self::start_with(false, None)
    }

    /// [`Moto::start`] for a store that ignores conditional writes: the
    /// server drops every `If-None-Match` header before handling the
    /// request (as stores without conditional writes do).
    pub fn start_ignoring_conditions() -> Option<Moto> {
        Self::start_with(true, None)
    }

    /// [`Moto::start`] with a request log at `log`: one line
    /// `ACCESS_KEY_ID METHOD PATH QUERY` per request.
    pub fn start_logged(log: &Path) -> Option<Moto> {
        Self::start_with(false, Some(log))
    }

    fn start_with(ignore_conditions: bool, log: Option<&Path>) -> Option<Moto> {
        let installed = Command::new("moto_server")
            .arg("--help")
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .status()
            .map(|s| s.success())
            .unwrap_or(false);
        if !installed {
            if std::env::var_os("CI").is_some() {
                panic!("moto_server is not installed but CI is set: install it with `pip install \"moto[server]\"` (see .ci/run)");
            }
            eprintln!("SKIPPED: moto_server is not installed (pip install \"moto[server]\"); S3 test not run");
            return None;
        }
        let port = TcpListener::bind("127.0.0.1:0")
            .unwrap()
            .local_addr()
            .unwrap()
            .port();
        let mode = if ignore_conditions {
            "ignore-conditions"
        } else {
            "conditions"
        };
        let mut python = Command::new("python3");
        python.args(["-c", MOTO_ONE_REQUEST_AT_A_TIME, &port.to_string(), mode]);
        if let Some(log) = log {
            python.arg(log);
        }
        let child = python
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("moto_server starts");
        let m = Moto {
            child: Some(child),
            port,
        };
        let start = Instant::now();
        loop {
            if let Ok(r) = m.request("GET", "/", &[], b"") {
                if r.0 > 0 {
                    break;
                }
            }
            assert!(
                start.elapsed() < Duration::from_secs(60),
                "moto_server did not start on port {port}"
            );
            std::thread::sleep(Duration::from_millis(100));
        }
        Some(m)
    }

    /// The endpoint URL.
    pub fn endpoint(&self) -> String {
        format!("http://127.0.0.1:{}", self.port)
    }

    /// Stops the server now.
    pub fn stop(&mut self) {
        if let Some(mut c) = self.child.take() {
            let _ = c.kill();
            let _ = c.wait();
        }
    }

    /// A plain HTTP/1.1 request (moto does not check signatures while
    /// authentication is off): status and body.
    pub fn request(
        &self,
        method: &str,
        path: &str,
        headers: &[(&str, &str)],
        body: &[u8],
    ) -> std::io::Result<(u16, Vec<u8>)> {
        let mut s = TcpStream::connect(("127.0.0.1", self.port))?;
        s.set_read_timeout(Some(Duration::from_secs(30)))?;
        let mut req = format!(
            "{method} {path} HTTP/1.1\r\nHost: 127.0.0.1:{}\r\nContent-Length: {}\r\nConnection: close\r\n",
            self.port,
            body.len()
        );
        for (k, v) in headers {
            req.push_str(&format!("{k}: {v}\r\n"));
        }
        req.push_str("\r\n");
        s.write_all(req.as_bytes())?;
        s.write_all(body)?;
        let mut raw = Vec::new();
        s.read_to_end(&mut raw)?;
        let head_end = raw
            .windows(4)
            .position(|w| w == b"\r\n\r\n")
            .ok_or_else(|| std::io::Error::other("no HTTP head"))?;
        let head = String::from_utf8_lossy(&raw[..head_end]).into_owned();
        let status: u16 = head
            .split_whitespace()
            .nth(1)
            .and_then(|c| c.parse().ok())
            .unwrap_or(0);
        let mut body = raw[head_end + 4..].to_vec();
        if head
            .to_ascii_lowercase()
            .contains("transfer-encoding: chunked")
        {
            body = dechunk(&body);
        }
        Ok((status, body))
    }

    /// Creates a bucket.
    pub fn create_bucket(&self, bucket: &str) {
        let (status, body) = self
            .request("PUT", &format!("/{bucket}"), &[], b"")
            .unwrap();
        assert_eq!(status, 200, "{}", String::from_utf8_lossy(&body));
    }

    /// Uploads an object.
    pub fn put(&self, bucket: &str, key: &str, data: &[u8]) {
        let (status, body) = self
            .request("PUT", &format!("/{bucket}/{key}"), &[], data)
            .unwrap();
        assert_eq!(status, 200, "{}", String::from_utf8_lossy(&body));
    }

    /// Downloads an object. The request names an access key (moto does not
    /// check the signature while authentication is off): moto refuses
    /// anonymous reads of objects stored by a single PUT.
    pub fn get(&self, bucket: &str, key: &str) -> Vec<u8> {
        let auth = format!(
            "AWS4-HMAC-SHA256 Credential={KEY_ID}/20260101/us-east-1/s3/aws4_request, SignedHeaders=host, Signature=0"
        );
        let (status, body) = self
            .request(
                "GET",
                &format!("/{bucket}/{key}"),
                &[("Authorization", &auth)],
                b"",
            )
            .unwrap();
        assert_eq!(status, 200, "GET {key}: {}", String::from_utf8_lossy(&body));
        body
    }

    /// The keys under a prefix.
    pub fn keys(&self, bucket: &str, prefix: &str) -> Vec<String> {
        let (status, body) = self
            .request(
                "GET",
                &format!("/{bucket}?list-type=2&prefix={prefix}"),
                &[],
                b"",
            )
            .unwrap();
        assert_eq!(status, 200, "{}", String::from_utf8_lossy(&body));
        tags(&String::from_utf8_lossy(&body), "Key")
    }

    /// The keys of the multipart uploads in progress (neither completed nor
    /// aborted).
    pub fn pending_uploads(&self, bucket: &str) -> Vec<String> {
        let (status, body) = self
            .request("GET", &format!("/{bucket}?uploads"), &[], b"")
            .unwrap();
        assert_eq!(status, 200, "{}", String::from_utf8_lossy(&body));
        tags(&String::from_utf8_lossy(&body), "Key")
    }

    /// Turns authentication on: from now on only known credentials pass.
    pub fn require_auth(&self) {
        let (status, body) = self
            .request("POST", "/moto-api/reset-auth", &[], b"0")
            .unwrap();
        assert_eq!(status, 200, "{}", String::from_utf8_lossy(&body));
    }

    /// An IAM request (query protocol), made while authentication is off:
    /// the credential scope of the (unchecked) signature routes it to IAM.
    pub fn iam(&self, params: &[(&str, &str)]) -> String {
        let body: Vec<String> = params
            .iter()
            .chain(&[("Version", "2010-05-08")])
            .map(|(k, v)| format!("{k}={}", url_encode(v)))
            .collect();
        let (status, body) = self
            .request(
                "POST",
                "/",
                &[
                    ("Content-Type", "application/x-www-form-urlencoded"),
                    (
                        "Authorization",
                        "AWS4-HMAC-SHA256 Credential=AKIAKANONSETUP/20250101/us-east-1/iam/aws4_request, SignedHeaders=host, Signature=0",
                    ),
                ],
                body.join("&").as_bytes(),
            )
            .unwrap();
        let body = String::from_utf8_lossy(&body).into_owned();
        assert_eq!(status, 200, "{params:?}: {body}");
        body
    }

    /// Creates an IAM user allowed the IAM `action` (e.g. `s3:*`) on every
    /// resource, and an access key of it: (key id, secret). Once
    /// [`Moto::require_auth`] is called, only such keys pass.
    pub fn iam_user(&self, name: &str, action: &str) -> (String, String) {
        self.iam(&[("Action", "CreateUser"), ("UserName", name)]);
        self.iam(&[
            ("Action", "PutUserPolicy"),
            ("UserName", name),
            ("PolicyName", "kanon-test"),
            ("PolicyDocument", &allow(action)),
        ]);
        let key = self.iam(&[("Action", "CreateAccessKey"), ("UserName", name)]);
        (
            tags(&key, "AccessKeyId").remove(0),
            tags(&key, "SecretAccessKey").remove(0),
        )
    }

    /// Creates an IAM role that the user `trusted` may assume, allowed the
    /// IAM `action` on every resource; returns its ARN.
    pub fn iam_role(&self, name: &str, trusted: &str, action: &str) -> String {
        let trust = format!(
            r#"{{"Version":"2012-10-17","Statement":[{{"Effect":"Allow","Principal":{{"AWS":"arn:aws:iam::123456789012:user/{trusted}"}},"Action":"sts:AssumeRole"}}]}}"#
        );
        let role = self.iam(&[
            ("Action", "CreateRole"),
            ("RoleName", name),
            ("AssumeRolePolicyDocument", &trust),
        ]);
        self.iam(&[
            ("Action", "PutRolePolicy"),
            ("RoleName", name),
            ("PolicyName", "kanon-test"),
            ("PolicyDocument", &allow(action)),
        ]);
        tags(&role, "Arn").remove(0)
    }

    /// `kanon` with credentials for this server and its endpoint.
    pub fn kanon(&self) -> Command {
        let mut c = kanon();
        c.env("AWS_ACCESS_KEY_ID", KEY_ID)
            .env("AWS_SECRET_ACCESS_KEY", SECRET)
            .env("AWS_REGION", "us-east-1")
            .env("KANON_STORAGE_ENDPOINT", self.endpoint())
            .env("KANON_STORAGE_ALLOW_HTTP", "true")
            .env("KANON_STORAGE_MAX_RETRIES", "1")
            .env("KANON_STORAGE_RETRY_TIMEOUT_S", "5")
            .env("KANON_STORAGE_TIMEOUT_S", "10");
        c
    }

    /// `kanon anonymize -c configs/adult.toml -i INPUT -o OUTPUT` against
    /// this server.
    pub fn anonymize(&self, input: &str, output: &str) -> Command {
        let mut c = self.kanon();
        c.args([
            "anonymize",
            "-c",
            "configs/adult.toml",
            "-i",
            input,
            "-o",
            output,
        ]);
        c
    }
}

impl Drop for Moto {
    fn drop(&mut self) {
        self.stop();
    }
}

/// An IAM policy allowing `action` on every resource.
fn allow(action: &str) -> String {
    format!(
        r#"{{"Version":"2012-10-17","Statement":[{{"Effect":"Allow","Action":"{action}","Resource":"*"}}]}}"#
    )
}

fn url_encode(s: &str) -> String {
    s.bytes()
        .map(|b| match b {
            b'A'..=b'Z' | b'a'..=b'z' | b'0'..=b'9' | b'-' | b'_' | b'.' | b'~' => {
                (b as char).to_string()
            }
            _ => format!("%{b:02X}"),
        })
        .collect()
}

fn tags(xml: &str, tag: &str) -> Vec<String> {
    let open = format!("<{tag}>");
    let close = format!("</{tag}>");
    xml.split(&open)
        .skip(1)
        .filter_map(|s| s.split(&close).next())
        .map(|s| s.to_string())
        .collect()
}

fn dechunk(mut b: &[u8]) -> Vec<u8> {
    let mut out = Vec::new();
    while let Some(eol) = b.windows(2).position(|w| w == b"\r\n") {
        let size = usize::from_str_radix(
            String::from_utf8_lossy(&b[..eol])
                .split(';')
                .next()
                .unwrap()
                .trim(),
            16,
        )
        .unwrap_or(0);
        if size == 0 {
            break;
        }
        out.extend_from_slice(&b[eol + 2..eol + 2 + size]);
        b = &b[eol + 2 + size + 2..];
    }
    out
}

/// Overwrites the bytes of one column chunk of a Parquet file with garbage,
/// so that reading that column fails while the others read fine.
pub fn corrupt_column(path: &Path, column: &str) {
    let bytes = std::fs::read(path).unwrap();
    let b = ParquetRecordBatchReaderBuilder::try_new(bytes::Bytes::from(bytes.clone())).unwrap();
    let md = b.metadata().clone();
    let schema = md.file_metadata().schema_descr();
    let idx = (0..schema.num_columns())
        .find(|&i| schema.column(i).name() == column)
        .expect("column");
    let mut bytes = bytes;
    for rg in md.row_groups() {
        let (start, len) = rg.column(idx).byte_range();
        for b in &mut bytes[start as usize..(start + len) as usize] {
            *b = 0xEE;
        }
    }
    std::fs::write(path, bytes).unwrap();
}

/// Keeps `Arc` in scope for helpers that build schemas.
pub type SchemaRef = Arc<arrow::datatypes::Schema>;

/// Whether `python3` imports `modules` (e.g. `"import yaml"`); panics under
/// `CI=true` when it does not, saying how to install them (`install`), and
/// prints why the test is skipped otherwise.
pub fn python_with(imports: &str, install: &str) -> bool {
    let ok = Command::new("python3")
        .args(["-c", imports])
        .output()
        .is_ok_and(|o| o.status.success());
    if !ok {
        assert!(
            std::env::var("CI").as_deref() != Ok("true"),
            "python3 with `{imports}` is required in CI: {install}"
        );
        eprintln!("skipped: python3 cannot `{imports}` ({install})");
    }
    ok
}

/// Replaces the byte right after the first `needle` in the file by another
/// digit: the same size, still valid Parquet when the byte lies in a footer
/// metadata value (`sha256:` of kanon's input fingerprint), other bytes.
#[allow(dead_code)]
pub fn rewrite_same_size(path: &Path, needle: &[u8]) {
    let mut bytes = std::fs::read(path).unwrap();
    let at = bytes
        .windows(needle.len())
        .position(|w| w == needle)
        .expect("the needle is in the file")
        + needle.len();
    bytes[at] = if bytes[at] == b'0' { b'1' } else { b'0' };
    std::fs::write(path, bytes).unwrap();
}

/// Waits until `p` exists (a test barrier reached), at most 240 s.
pub fn wait_for(p: &Path) {
    let start = Instant::now();
    while !p.exists() {
        assert!(
            start.elapsed() < Duration::from_secs(240),
            "{} never appeared",
            p.display()
        );
        std::thread::sleep(Duration::from_millis(20));
    }
}
