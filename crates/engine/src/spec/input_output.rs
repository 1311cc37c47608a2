//! The front ends' settings of a job: where the data comes from
//! ([`InputSpec`]), where the release goes ([`OutputSpec`]) and how object
//! storage is reached ([`StorageSpec`]). The engine does no I/O and never
//! reads them; they live in the job file beside the engine's settings.

use serde::{Deserialize, Serialize};

/// Input settings (read by the front end, not the engine).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct InputSpec {
    /// A path or URL.
    pub path: Option<String>,
    /// `csv`, `parquet` or `delta` (a Delta Lake table); inferred from the
    /// file extension when absent.
    pub format: Option<String>,
    /// A Delta input: the table version to read; default the latest.
    #[serde(default)]
    pub version: Option<i64>,
    /// CSV field delimiter (one character), default `,`.
    pub delimiter: Option<String>,
    /// Whether the CSV has a header row, default true.
    pub header: Option<bool>,
    /// CSV quote character (one character), default `"`.
    #[serde(default)]
    pub quote: Option<String>,
    /// CSV escape character (one character); default none (a quote inside a
    /// quoted field is doubled).
    #[serde(default)]
    pub escape: Option<String>,
    /// CSV comment character (one character): lines starting with it are
    /// skipped; default none.
    #[serde(default)]
    pub comment: Option<String>,
    /// CSV: number of rows read to infer the column types, default 10000.
    #[serde(default)]
    pub infer_rows: Option<usize>,
    /// Columns read as text whatever their values look like: set by the
    /// front end from the job's identifying and pseudonymised columns
    /// ([`super::JobSpec::text_columns`]), never written in a job file, so
    /// that `007` and `7` stay two identifiers (issue 32, item 5).
    #[serde(skip)]
    pub text_columns: Vec<String>,
}

/// Output settings (read by the front end, not the engine).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct OutputSpec {
    /// A path or URL.
    pub path: Option<String>,
    /// `parquet` (default) or `delta`: a Delta Lake table at `path`, the
    /// release committed as one transaction with its privacy certificate.
    #[serde(default)]
    pub format: Option<String>,
    /// How a Delta release meets an existing table: `create` (default: the
    /// table must not exist), `append`, `overwrite` (every row replaced), or
    /// `replace-partition` (the rows of `partition` replaced).
    #[serde(default)]
    pub mode: Option<String>,
    /// A Delta release's partition: constant partition columns and their
    /// values, e.g. `{ release_date = "2026-11-24" }`.
    #[serde(default)]
    pub partition: Option<std::collections::BTreeMap<String, String>>,
    /// Split the release into Parquet files of about this size (e.g.
    /// `"256MB"`); the output path is then a directory (or prefix) of
    /// `part-NNNNN.parquet` files. Default: one file.
    #[serde(default)]
    pub max_file_size: Option<String>,
    /// Rows per Parquet row group, default 1048576 (a row group is also
    /// closed at about 128 MiB).
    #[serde(default)]
    pub row_group_rows: Option<usize>,
    /// zstd compression level (1..=22), default 3.
    #[serde(default)]
    pub compression_level: Option<i32>,
    /// Replace an existing release, like `--overwrite`; default false.
    #[serde(default)]
    pub overwrite: Option<bool>,
    /// Memory for putting the release in order (the order is derived from
    /// the classes, not the input), as a size such as `"2GB"`: a release
    /// whose rows (as Arrow arrays) fit is ordered in memory; a larger one
    /// is spilled to `TMPDIR` in buckets of `buffer_rows` rows, each ordered
    /// in memory. Default 2 GiB. The bytes of the release are the same
    /// either way.
    #[serde(default)]
    pub buffer_memory: Option<String>,
    /// Released rows per spilled bucket when the release does not fit in
    /// `buffer_memory`. Default 2000000. The release is ordered and written
    /// in buckets of at most 65536 rows (of at most this many, when
    /// smaller), whether held or spilled: a smaller value writes smaller
    /// batches (other Parquet pages), the same rows in the same order.
    #[serde(default)]
    pub buffer_rows: Option<u64>,
    /// Where the history of a Delta table's releases is kept (a directory
    /// or S3 prefix outside the table, never published): keyed
    /// fingerprints of the people each release published. With it, every
    /// new version is checked against the versions a reader can still
    /// read, and an `append` leaves out the people already published
    /// (`kanon_engine::history`). Needs `privacy.entity`.
    #[serde(default)]
    pub history: Option<String>,
    /// The job file accepts that readers compare a Delta table's versions
    /// (each release is still checked on its own): without it, or
    /// `history`, a commit onto a table with readable rows is refused.
    #[serde(default)]
    pub unchecked_series: Option<bool>,
}

/// What the job may use of the machine (read by the front end, not the
/// engine): the whole job's memory budget. The front end estimates the
/// job's peak before reading the input and refuses a job whose estimate
/// exceeds it, and holds the release's rows within what the budget leaves
/// after the engine's working set (`output.buffer_memory` at most).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ResourcesSpec {
    /// The job's memory budget, as a size such as `"4GB"`. Default: the
    /// memory limit of the job's cgroup when it has one (a container's
    /// limit), else 80 % of the machine's physical memory.
    #[serde(default)]
    pub memory: Option<String>,
}

/// Object storage settings (read by the front end, not the engine).
/// Credentials never go here: they come from the usual AWS environment
/// variables or profile files.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct StorageSpec {
    /// Endpoint of an S3-compatible store, e.g. `http://127.0.0.1:9000`;
    /// default AWS (or `AWS_ENDPOINT_URL`).
    #[serde(default)]
    pub endpoint: Option<String>,
    /// Region; default `AWS_REGION`/`AWS_DEFAULT_REGION`, the profile's, or
    /// `us-east-1`.
    #[serde(default)]
    pub region: Option<String>,
    /// Allow plain-HTTP endpoints (local test servers); default false.
    #[serde(default)]
    pub allow_http: Option<bool>,
    /// Virtual-hosted-style requests (`bucket.endpoint/key`) instead of
    /// path-style (`endpoint/bucket/key`); default false.
    #[serde(default)]
    pub virtual_hosted_style: Option<bool>,
    /// AWS profile of the shared credentials and config files; default
    /// `AWS_PROFILE` or `default`.
    #[serde(default)]
    pub profile: Option<String>,
    /// Retries of a failed request, default 10 (backing off from 0.5 s to
    /// 15 s between tries).
    #[serde(default)]
    pub max_retries: Option<usize>,
    /// No retry starts later than this many seconds after a request's first
    /// try, default 60.
    #[serde(default)]
    pub retry_timeout_s: Option<u64>,
    /// Timeout of one request in seconds, default 30.
    #[serde(default)]
    pub timeout_s: Option<u64>,
    /// The operator guarantees that one kanon at a time writes to the
    /// bucket (e.g. under `flock`, as deploy/systemd runs it): publish even
    /// when the store ignores conditional writes (`If-None-Match`), which
    /// kanon otherwise refuses after probing it. Default false.
    #[serde(default)]
    pub single_writer: Option<bool>,
}
