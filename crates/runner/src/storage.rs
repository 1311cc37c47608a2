//! Where data lives: local paths and `s3://bucket/key` URLs (through
//! `object_store`), with one small blocking API for the rest of the runner.
//!
//! S3 credentials and region come from the usual AWS environment variables
//! (`AWS_ACCESS_KEY_ID`, `AWS_SECRET_ACCESS_KEY`, `AWS_SESSION_TOKEN`,
//! `AWS_REGION`, `AWS_ENDPOINT_URL`, ...), else from the shared profile files
//! (`~/.aws/credentials`, `~/.aws/config`, profile `AWS_PROFILE` or
//! `storage.profile`); the job's `[storage]` settings (endpoint, region,
//! `allow_http`, virtual-hosted or path-style) come on top. The async store
//! runs on a small tokio runtime created only when an `s3://` location is
//! used, so local jobs pay nothing for it.

use std::collections::HashMap;
use std::fmt;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, OnceLock};
use std::time::Duration;

use anyhow::{Context, Result};
use bytes::Bytes;
use futures::TryStreamExt;
use kanon_engine::spec::StorageSpec;
use object_store::aws::{AmazonS3Builder, AmazonS3ConfigKey};
use object_store::path::Path as ObjectPath;
use object_store::{ClientOptions, ObjectMeta, ObjectStore, ObjectStoreExt, RetryConfig};

use crate::exit::Failure;

/// A place to read or write: a local path or an object in a bucket.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Location {
    /// A local file or directory.
    Local(PathBuf),
    /// An S3 object or prefix.
    S3 {
        /// The bucket.
        bucket: String,
        /// The key (no leading `/`; may be empty or end with `/`).
        key: String,
    },
}

impl Location {
    /// Parses a path or URL: `s3://bucket/key` (also `s3a://`),
    /// `file:///path`, or a local path.
    ///
    /// # Errors
    /// A bad-input failure for other schemes and URLs without a bucket.
    pub fn parse(s: &str) -> Result<Location> {
        if let Some(rest) = s.strip_prefix("s3://").or_else(|| s.strip_prefix("s3a://")) {
            let (bucket, key) = rest.split_once('/').unwrap_or((rest, ""));
            if bucket.is_empty() {
                return Err(Failure::bad_input(format!(
                    "`{s}` names no bucket; write s3://BUCKET/KEY"
                ))
                .into());
            }
            return Ok(Location::S3 {
                bucket: bucket.to_string(),
                key: key.trim_start_matches('/').to_string(),
            });
        }
        if let Some(p) = s.strip_prefix("file://") {
            return Ok(Location::Local(PathBuf::from(p)));
        }
        if let Some((scheme, _)) = s.split_once("://") {
            if !scheme.is_empty() && scheme.chars().all(|c| c.is_ascii_alphanumeric()) {
                return Err(Failure::bad_input(format!(
                    "`{s}`: kanon reads local paths and s3:// URLs, not {scheme}://"
                ))
                .into());
            }
        }
        Ok(Location::Local(PathBuf::from(s)))
    }

    /// Whether writing `self` could touch what reading `input` reads:
    /// the same file or object, or one inside the other (a release inside
    /// an input directory or prefix is read back by the next run; an output
    /// directory around the input replaces it). Local paths are compared by
    /// the real path of their nearest existing ancestor (so `dir/../in`,
    /// `./in` and symlinks are seen through), S3 keys by path segment after
    /// collapsing `//` and `./`. Globs count from their first wildcard's
    /// directory.
    pub fn overlaps(&self, input: &Location) -> bool {
        match (self, input) {
            (Location::Local(out), Location::Local(inp)) => {
                let (a, b) = (canonical(out), canonical(&glob_root(inp)));
                a.starts_with(&b) || b.starts_with(&a)
            }
            (
                Location::S3 {
                    bucket: ob,
                    key: ok,
                },
                Location::S3 {
                    bucket: ib,
                    key: ik,
                },
            ) => {
                let root = glob_root_key(ik);
                let (a, b) = (key_segments(ok), key_segments(&root));
                ob == ib && (a.starts_with(&b) || b.starts_with(&a))
            }
            _ => false,
        }
    }

    /// Whether this is an object store location.
    pub fn is_remote(&self) -> bool {
        matches!(self, Location::S3 { .. })
    }

    /// The location of `name` inside this directory or prefix.
    pub fn join(&self, name: &str) -> Location {
        match self {
            Location::Local(p) => Location::Local(p.join(name)),
            Location::S3 { bucket, key } => Location::S3 {
                bucket: bucket.clone(),
                key: if key.is_empty() {
                    name.to_string()
                } else {
                    format!("{}/{name}", key.trim_end_matches('/'))
                },
            },
        }
    }

    /// The object path of an S3 location.
    pub fn object_path(&self) -> Option<ObjectPath> {
        match self {
            Location::S3 { key, .. } => Some(ObjectPath::from(key.trim_end_matches('/'))),
            Location::Local(_) => None,
        }
    }
}

/// `path` made absolute through the real path of its nearest existing
/// ancestor, with `.` and `..` of the rest resolved by name.
fn canonical(path: &Path) -> PathBuf {
    let absolute = if path.is_absolute() {
        path.to_path_buf()
    } else {
        std::env::current_dir().unwrap_or_default().join(path)
    };
    let mut rest: Vec<std::ffi::OsString> = Vec::new();
    let mut base = absolute.as_path();
    let resolved = loop {
        if let Ok(real) = base.canonicalize() {
            break real;
        }
        match (base.parent(), base.file_name()) {
            (Some(parent), Some(name)) => {
                rest.push(name.to_os_string());
                base = parent;
            }
            _ => break base.to_path_buf(),
        }
    };
    let mut out = resolved;
    for part in rest.iter().rev() {
        match part.to_str() {
            Some(".") => {}
            Some("..") => {
                out.pop();
            }
            _ => out.push(part),
        }
    }
    out
}

/// The directory a glob starts from (the path itself when it has none).
fn glob_root(path: &Path) -> PathBuf {
    let mut root = PathBuf::new();
    for c in path.components() {
        if c.as_os_str().to_string_lossy().contains(['*', '?', '[']) {
            break;
        }
        root.push(c);
    }
    root
}

/// An S3 key up to its first wildcard.
fn glob_root_key(key: &str) -> String {
    match key.find(['*', '?', '[']) {
        Some(i) => key[..i]
            .rsplit_once('/')
            .map_or(String::new(), |(d, _)| d.to_string()),
        None => key.to_string(),
    }
}

/// The segments of an S3 key, without empty and `.` segments.
fn key_segments(key: &str) -> Vec<&str> {
    key.split('/')
        .filter(|s| !s.is_empty() && *s != ".")
        .collect()
}

impl fmt::Display for Location {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Location::Local(p) => write!(f, "{}", p.display()),
            Location::S3 { bucket, key } => write!(f, "s3://{bucket}/{key}"),
        }
    }
}

/// Access to local files and object stores.
pub struct Storage {
    settings: StorageSpec,
    runtime: OnceLock<tokio::runtime::Runtime>,
    stores: Mutex<HashMap<String, Arc<dyn ObjectStore>>>,
}

impl fmt::Debug for Storage {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Storage")
            .field("settings", &self.settings)
            .finish_non_exhaustive()
    }
}

/// What a file or object looks like before it is read: enough to notice a
/// change between the two passes.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FileMeta {
    /// Where it is.
    pub location: Location,
    /// Its size in bytes.
    pub size: u64,
    /// Its version: the ETag of an object, the modification time of a file.
    pub version: Option<String>,
}

impl Storage {
    /// Storage with the job's `[storage]` settings.
    pub fn new(settings: &StorageSpec) -> Self {
        Storage {
            settings: settings.clone(),
            runtime: OnceLock::new(),
            stores: Mutex::new(HashMap::new()),
        }
    }

    /// The runtime of the async object store (created on first use).
    pub fn runtime(&self) -> &tokio::runtime::Runtime {
        self.runtime.get_or_init(|| {
            tokio::runtime::Builder::new_multi_thread()
                .worker_threads(2)
                .thread_name("kanon-io")
                .enable_all()
                .build()
                .expect("cannot start the I/O runtime")
        })
    }

    /// Runs a future of the object store to completion.
    pub fn block_on<F: std::future::Future>(&self, f: F) -> F::Output {
        self.runtime().block_on(f)
    }

    /// The store of a bucket (built once).
    ///
    /// # Errors
    /// A bad-input failure when no credentials can be found for a custom
    /// endpoint, or a setting is invalid.
    pub fn s3(&self, bucket: &str) -> Result<Arc<dyn ObjectStore>> {
        let mut stores = self.stores.lock().expect("store cache poisoned");
        if let Some(s) = stores.get(bucket) {
            return Ok(s.clone());
        }
        let store: Arc<dyn ObjectStore> = Arc::new(self.build_s3(bucket)?);
        stores.insert(bucket.to_string(), store.clone());
        Ok(store)
    }

    fn build_s3(&self, bucket: &str) -> Result<object_store::aws::AmazonS3> {
        let env = |k: &str| std::env::var(k).ok().filter(|v| !v.is_empty());
        let s = &self.settings;
        let mut b = AmazonS3Builder::from_env().with_bucket_name(bucket);
        let profile_name = s.profile.clone().or_else(|| env("AWS_PROFILE"));
        let profile = aws_profile::load(profile_name.as_deref())?;
        let env_keys = env("AWS_ACCESS_KEY_ID").is_some();
        if !env_keys {
            if let (Some(id), Some(secret)) = (&profile.access_key_id, &profile.secret_access_key) {
                b = b.with_access_key_id(id).with_secret_access_key(secret);
                if let Some(t) = &profile.session_token {
                    b = b.with_token(t);
                }
            }
        }
        if env("AWS_REGION").is_none() && env("AWS_DEFAULT_REGION").is_none() {
            if let Some(r) = &profile.region {
                b = b.with_region(r);
            }
        }
        if env("AWS_ENDPOINT_URL").is_none() && env("AWS_ENDPOINT").is_none() {
            if let Some(e) = &profile.endpoint_url {
                b = b.with_endpoint(e);
            }
        }
        if let Some(e) = &s.endpoint {
            b = b.with_endpoint(e);
        }
        if let Some(r) = &s.region {
            b = b.with_region(r);
        }
        if let Some(h) = s.allow_http {
            b = b.with_allow_http(h);
        }
        if let Some(v) = s.virtual_hosted_style {
            b = b.with_virtual_hosted_style_request(v);
        }
        b = b.with_copy_if_not_exists(object_store::aws::S3CopyIfNotExists::Multipart);
        let timeout = Duration::from_secs(s.timeout_s.unwrap_or(30).max(1));
        let allow_http =
            s.allow_http.unwrap_or(false) || env("AWS_ALLOW_HTTP").is_some_and(|v| v == "true");
        if let Some(e) = b.get_config_value(&AmazonS3ConfigKey::Endpoint) {
            if e.starts_with("http://") && !allow_http {
                return Err(Failure::bad_input(format!(
                    "S3 endpoint {e} is plain HTTP: pass --s3-allow-http (or set `storage.allow_http = true`) for a local test server, or use an https:// endpoint"
                ))
                .into());
            }
        }
        // A failed request is retried with exponential backoff until
        // `retry_timeout_s` (default 60 s) has passed since the first try,
        // so a short outage does not fail the job.
        b = b
            .with_retry(RetryConfig {
                max_retries: s.max_retries.unwrap_or(10),
                retry_timeout: Duration::from_secs(s.retry_timeout_s.unwrap_or(60)),
                backoff: object_store::BackoffConfig {
                    init_backoff: Duration::from_millis(500),
                    max_backoff: Duration::from_secs(15),
                    base: 2.0,
                },
            })
            .with_client_options(
                ClientOptions::new()
                    .with_timeout(timeout)
                    .with_connect_timeout(Duration::from_secs(5))
                    .with_allow_http(allow_http),
            );
        // Without static keys object_store falls back to the instance
        // metadata service; that only makes sense on AWS itself, so a custom
        // endpoint without credentials is a configuration error.
        let has_keys = b
            .get_config_value(&AmazonS3ConfigKey::AccessKeyId)
            .is_some();
        let other_provider = env("AWS_WEB_IDENTITY_TOKEN_FILE").is_some()
            || env("AWS_CONTAINER_CREDENTIALS_RELATIVE_URI").is_some()
            || env("AWS_CONTAINER_CREDENTIALS_FULL_URI").is_some();
        let custom_endpoint = b.get_config_value(&AmazonS3ConfigKey::Endpoint).is_some();
        if !has_keys && !other_provider && custom_endpoint {
            return Err(Failure::bad_input(format!(
                "no S3 credentials for bucket `{bucket}`: set AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY, or a profile in {} (AWS_PROFILE or `storage.profile`)",
                aws_profile::credentials_file().display()
            ))
            .into());
        }
        b.build()
            .map_err(|e| Failure::bad_input(format!("S3 settings for bucket `{bucket}`: {e}")))
            .map_err(Into::into)
    }

    /// Copies `from` to `to` only if `to` does not exist (S3: a multipart
    /// copy completed with `If-None-Match: *`).
    ///
    /// # Errors
    /// Exit code 5 when `to` exists; other store failures.
    pub fn copy_if_not_exists(&self, from: &Location, to: &Location) -> Result<()> {
        let (store, src) = self.remote(from)?;
        let (_, dst) = self.remote(to)?;
        match self.block_on(store.copy_if_not_exists(&src, &dst)) {
            Ok(()) => Ok(()),
            Err(object_store::Error::AlreadyExists { .. }) => Err(Failure::new(
                crate::exit::OUTPUT_EXISTS,
                format!(
                    "output {to} appeared while kanon was writing (another run published it first); nothing was replaced (pass --overwrite to replace it)"
                ),
            )
            .into()),
            Err(e) => Err(s3_error(e, to)),
        }
    }

    /// The store and object path of an S3 location.
    fn remote(&self, loc: &Location) -> Result<(Arc<dyn ObjectStore>, ObjectPath)> {
        match loc {
            Location::S3 { bucket, .. } => {
                Ok((self.s3(bucket)?, loc.object_path().unwrap_or_default()))
            }
            Location::Local(_) => unreachable!("remote() on a local path"),
        }
    }

    /// Size and version of a file or object; `None` when it does not exist.
    ///
    /// # Errors
    /// Any failure but "not found" (a missing bucket is an error).
    pub fn head(&self, loc: &Location) -> Result<Option<FileMeta>> {
        match loc {
            Location::Local(p) => match std::fs::metadata(p) {
                Ok(m) => Ok(Some(FileMeta {
                    location: loc.clone(),
                    size: m.len(),
                    version: local_version(&m),
                })),
                Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(None),
                Err(e) => Err(e).with_context(|| format!("cannot look at {}", p.display())),
            },
            Location::S3 { bucket, key } => {
                if key.is_empty() || key.ends_with('/') {
                    return Ok(None);
                }
                let (store, path) = self.remote(loc)?;
                match self.block_on(store.head(&path)) {
                    Ok(m) => Ok(Some(meta_of(bucket, m))),
                    Err(object_store::Error::NotFound { .. }) => {
                        self.check_bucket(bucket)?;
                        Ok(None)
                    }
                    Err(e) => Err(s3_error(e, loc)),
                }
            }
        }
    }

    /// Fails clearly when a bucket does not exist or cannot be listed.
    pub fn check_bucket(&self, bucket: &str) -> Result<()> {
        let store = self.s3(bucket)?;
        let loc = Location::S3 {
            bucket: bucket.to_string(),
            key: String::new(),
        };
        match self.block_on(store.list_with_delimiter(None)) {
            Ok(_) => Ok(()),
            Err(e) => Err(s3_error(e, &loc)),
        }
    }

    /// Every object under an S3 prefix (`key/`), in key order.
    ///
    /// # Errors
    /// A missing bucket, rejected credentials, network failures.
    pub fn list(&self, loc: &Location) -> Result<Vec<FileMeta>> {
        let Location::S3 { bucket, key } = loc else {
            unreachable!("list() on a local path")
        };
        let store = self.s3(bucket)?;
        let prefix = key.trim_end_matches('/');
        let prefix = (!prefix.is_empty()).then(|| ObjectPath::from(prefix));
        let mut metas: Vec<ObjectMeta> = self
            .block_on(store.list(prefix.as_ref()).try_collect())
            .map_err(|e| s3_error(e, loc))?;
        metas.sort_by(|a, b| a.location.as_ref().cmp(b.location.as_ref()));
        Ok(metas.into_iter().map(|m| meta_of(bucket, m)).collect())
    }

    /// Removes the objects directly under `dir` (a key prefix ending in `/`,
    /// or empty for the bucket root) whose name starts with `prefix` and
    /// that were last modified more than `older_than` ago. Returns their
    /// number. Best effort: a failure is logged, never fatal.
    pub fn remove_stale_objects(
        &self,
        bucket: &str,
        dir: &str,
        prefix: &str,
        older_than: Duration,
    ) -> usize {
        let loc = Location::S3 {
            bucket: bucket.to_string(),
            key: dir.to_string(),
        };
        let Ok(store) = self.s3(bucket) else {
            return 0;
        };
        let parent = dir.trim_end_matches('/');
        let parent = (!parent.is_empty()).then(|| ObjectPath::from(parent));
        let listed = match self.block_on(store.list_with_delimiter(parent.as_ref())) {
            Ok(l) => l,
            Err(e) => {
                tracing::warn!(location = %loc, error = %e, "cannot list stale temporary objects");
                return 0;
            }
        };
        // In milliseconds: whole seconds on both sides could call an object
        // written 1.9 s ago 1 s old, or one written 0.1 s ago 1 s old.
        let cutoff_ms = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| d.as_millis() as i64)
            - older_than.as_millis() as i64;
        let mut removed = 0;
        for m in listed.objects {
            let stale = m.location.filename().is_some_and(|n| n.starts_with(prefix))
                && m.last_modified.timestamp_millis() < cutoff_ms;
            if stale {
                match self.block_on(store.delete(&m.location)) {
                    Ok(()) => {
                        removed += 1;
                        tracing::info!(bucket, key = %m.location, "removed a temporary object left by an interrupted run");
                    }
                    Err(e) => {
                        tracing::warn!(bucket, key = %m.location, error = %e, "cannot remove a stale temporary object")
                    }
                }
            }
        }
        removed
    }

    /// Bytes `range` of a file or object.
    ///
    /// # Errors
    /// Read failures.
    pub fn read_range(&self, loc: &Location, range: std::ops::Range<u64>) -> Result<Bytes> {
        match loc {
            Location::Local(p) => {
                use std::io::{Read, Seek, SeekFrom};
                let mut f = std::fs::File::open(p)
                    .with_context(|| format!("cannot open {}", p.display()))?;
                f.seek(SeekFrom::Start(range.start))?;
                let mut buf = vec![0u8; (range.end - range.start) as usize];
                f.read_exact(&mut buf)
                    .with_context(|| format!("cannot read {}", p.display()))?;
                Ok(Bytes::from(buf))
            }
            Location::S3 { .. } => {
                let (store, path) = self.remote(loc)?;
                self.block_on(store.get_range(&path, range))
                    .map_err(|e| s3_error(e, loc))
            }
        }
    }

    /// A blocking reader of a whole file or object, streamed.
    ///
    /// # Errors
    /// Open failures.
    pub fn open_read(&self, loc: &Location) -> Result<Box<dyn std::io::Read + Send + '_>> {
        match loc {
            Location::Local(p) => Ok(Box::new(std::io::BufReader::with_capacity(
                1 << 20,
                std::fs::File::open(p).with_context(|| format!("cannot open {}", p.display()))?,
            ))),
            Location::S3 { .. } => {
                let (store, path) = self.remote(loc)?;
                let get = self
                    .block_on(store.get(&path))
                    .map_err(|e| s3_error(e, loc))?;
                Ok(Box::new(StreamReader {
                    storage: self,
                    stream: get.into_stream(),
                    chunk: Bytes::new(),
                }))
            }
        }
    }

    /// Deletes an object (best effort cleanup of stale parts).
    ///
    /// # Errors
    /// Delete failures.
    pub fn delete(&self, loc: &Location) -> Result<()> {
        match loc {
            Location::Local(p) => Ok(std::fs::remove_file(p)?),
            Location::S3 { .. } => {
                let (store, path) = self.remote(loc)?;
                self.block_on(store.delete(&path))
                    .map_err(|e| s3_error(e, loc))
            }
        }
    }
}

fn local_version(m: &std::fs::Metadata) -> Option<String> {
    m.modified().ok().and_then(|t| {
        t.duration_since(std::time::UNIX_EPOCH)
            .ok()
            .map(|d| d.as_nanos().to_string())
    })
}

fn meta_of(bucket: &str, m: ObjectMeta) -> FileMeta {
    FileMeta {
        location: Location::S3 {
            bucket: bucket.to_string(),
            key: m.location.to_string(),
        },
        size: m.size,
        version: m.e_tag.or(m.version),
    }
}

/// An object store error as a message that names the bucket or object and
/// says what to check; the original error stays in the chain for the exit
/// code.
pub fn s3_error(e: object_store::Error, loc: &Location) -> anyhow::Error {
    let text = e.to_string();
    let bucket = match loc {
        Location::S3 { bucket, .. } => bucket.as_str(),
        Location::Local(_) => "",
    };
    let hint = if text.contains("NoSuchBucket") {
        format!("bucket `{bucket}` does not exist (check the URL, `storage.endpoint` and `storage.region`)")
    } else {
        match &e {
            object_store::Error::NotFound { .. } => format!("{loc} does not exist"),
            object_store::Error::PermissionDenied { .. }
            | object_store::Error::Unauthenticated { .. } => format!(
                "access to {loc} was refused: check the credentials (AWS_ACCESS_KEY_ID / AWS_SECRET_ACCESS_KEY or the profile AWS_PROFILE / `storage.profile`) and their permissions"
            ),
            _ if text.contains("InvalidAccessKeyId") || text.contains("SignatureDoesNotMatch") => {
                format!(
                    "the credentials were rejected for {loc}: check AWS_ACCESS_KEY_ID / AWS_SECRET_ACCESS_KEY or the profile (AWS_PROFILE / `storage.profile`)"
                )
            }
            _ => format!("object store request for {loc} failed (check `storage.endpoint` and the network)"),
        }
    };
    let code = if text.contains("NoSuchBucket")
        || text.contains("InvalidAccessKeyId")
        || text.contains("SignatureDoesNotMatch")
    {
        crate::exit::BAD_INPUT
    } else {
        crate::exit::object_store_code(&e)
    };
    // The store's message repeats itself through its causes and ends in the
    // server's XML; one line of it is enough.
    let first = text
        .split(": <?xml")
        .next()
        .unwrap_or("")
        .lines()
        .next()
        .unwrap_or("");
    let brief: String = first.chars().take(300).collect();
    Failure::new(code, format!("{hint} ({brief})")).into()
}

/// A blocking `Read` over an object's byte stream.
struct StreamReader<'a> {
    storage: &'a Storage,
    stream: futures::stream::BoxStream<'static, object_store::Result<Bytes>>,
    chunk: Bytes,
}

impl std::io::Read for StreamReader<'_> {
    fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
        use futures::StreamExt;
        while self.chunk.is_empty() {
            match self.storage.block_on(self.stream.next()) {
                None => return Ok(0),
                Some(Ok(b)) => self.chunk = b,
                Some(Err(e)) => return Err(std::io::Error::other(e)),
            }
        }
        let n = buf.len().min(self.chunk.len());
        buf[..n].copy_from_slice(&self.chunk[..n]);
        self.chunk = self.chunk.slice(n..);
        Ok(n)
    }
}

/// The AWS shared credentials and config files (`~/.aws/credentials`,
/// `~/.aws/config`), read the way the AWS SDKs read them: a profile's keys
/// from the credentials file, its region and endpoint from the config file
/// (`[profile NAME]`, or `[default]`).
pub mod aws_profile {
    use super::*;

    /// What a profile provides.
    #[derive(Debug, Clone, Default, PartialEq, Eq)]
    pub struct Profile {
        /// `aws_access_key_id`.
        pub access_key_id: Option<String>,
        /// `aws_secret_access_key`.
        pub secret_access_key: Option<String>,
        /// `aws_session_token`.
        pub session_token: Option<String>,
        /// `region`.
        pub region: Option<String>,
        /// `endpoint_url`.
        pub endpoint_url: Option<String>,
    }

    fn home() -> PathBuf {
        std::env::var_os("HOME")
            .map(PathBuf::from)
            .unwrap_or_else(|| PathBuf::from("."))
    }

    /// `AWS_SHARED_CREDENTIALS_FILE`, or `~/.aws/credentials`.
    pub fn credentials_file() -> PathBuf {
        std::env::var_os("AWS_SHARED_CREDENTIALS_FILE")
            .map(PathBuf::from)
            .unwrap_or_else(|| home().join(".aws").join("credentials"))
    }

    /// `AWS_CONFIG_FILE`, or `~/.aws/config`.
    pub fn config_file() -> PathBuf {
        std::env::var_os("AWS_CONFIG_FILE")
            .map(PathBuf::from)
            .unwrap_or_else(|| home().join(".aws").join("config"))
    }

    /// Loads a profile: `name`, else `default`. A named profile that is in
    /// neither file is an error; a missing `default` is not.
    ///
    /// # Errors
    /// A bad-input failure naming the profile and the files.
    pub fn load(name: Option<&str>) -> Result<Profile> {
        let wanted = name.unwrap_or("default");
        let creds = read_ini(&credentials_file());
        let config = read_ini(&config_file());
        let from_creds = creds.get(wanted);
        let config_section = if wanted == "default" {
            "default".to_string()
        } else {
            format!("profile {wanted}")
        };
        let from_config = config.get(&config_section).or_else(|| config.get(wanted));
        if from_creds.is_none() && from_config.is_none() && name.is_some() {
            return Err(Failure::bad_input(format!(
                "AWS profile `{wanted}` (AWS_PROFILE or `storage.profile`) is in neither {} nor {}",
                credentials_file().display(),
                config_file().display()
            ))
            .into());
        }
        let get = |k: &str| {
            from_creds
                .and_then(|s| s.get(k))
                .or_else(|| from_config.and_then(|s| s.get(k)))
                .cloned()
        };
        Ok(Profile {
            access_key_id: get("aws_access_key_id"),
            secret_access_key: get("aws_secret_access_key"),
            session_token: get("aws_session_token"),
            region: from_config
                .and_then(|s| s.get("region"))
                .or_else(|| from_creds.and_then(|s| s.get("region")))
                .cloned(),
            endpoint_url: get("endpoint_url"),
        })
    }

    type Sections = HashMap<String, HashMap<String, String>>;

    fn read_ini(path: &Path) -> Sections {
        std::fs::read_to_string(path)
            .map(|t| parse_ini(&t))
            .unwrap_or_default()
    }

    /// Parses the INI dialect of the AWS files (`[section]`, `key = value`,
    /// `#` and `;` comments; indented lines belong to nested settings and
    /// are skipped).
    pub fn parse_ini(text: &str) -> Sections {
        let mut out: Sections = HashMap::new();
        let mut current: Option<String> = None;
        for line in text.lines() {
            if line.starts_with([' ', '\t']) {
                continue;
            }
            let line = line.trim();
            if line.is_empty() || line.starts_with('#') || line.starts_with(';') {
                continue;
            }
            if let Some(section) = line.strip_prefix('[').and_then(|l| l.strip_suffix(']')) {
                let name = section.split_whitespace().collect::<Vec<_>>().join(" ");
                out.entry(name.clone()).or_default();
                current = Some(name);
            } else if let (Some(section), Some((k, v))) = (&current, line.split_once('=')) {
                out.entry(section.clone())
                    .or_default()
                    .insert(k.trim().to_lowercase(), v.trim().to_string());
            }
        }
        out
    }

    #[cfg(test)]
    mod tests {
        use super::*;

        #[test]
        fn parses_the_aws_files() {
            let ini = parse_ini(
                "# comment\n[default]\naws_access_key_id = AKIA1\naws_secret_access_key=s1\n\n[profile  dev]\nregion = eu-west-1\ns3 =\n  addressing_style = path\nendpoint_url = http://127.0.0.1:9000\n",
            );
            assert_eq!(ini["default"]["aws_access_key_id"], "AKIA1");
            assert_eq!(ini["default"]["aws_secret_access_key"], "s1");
            assert_eq!(ini["profile dev"]["region"], "eu-west-1");
            assert_eq!(ini["profile dev"]["endpoint_url"], "http://127.0.0.1:9000");
            assert!(!ini["profile dev"].contains_key("addressing_style"));
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn overlapping_locations_are_seen_through_aliases() {
        let dir = tempfile::tempdir().unwrap();
        let d = dir.path();
        std::fs::create_dir(d.join("sub")).unwrap();
        std::fs::write(d.join("in.parquet"), b"x").unwrap();
        let local = |p: PathBuf| Location::Local(p);
        let input = local(d.join("in.parquet"));
        for alias in [
            d.join("sub/../in.parquet"),
            d.join("./in.parquet"),
            d.join("sub/../sub/./../in.parquet"),
        ] {
            assert!(local(alias.clone()).overlaps(&input), "{}", alias.display());
        }
        std::os::unix::fs::symlink(d.join("in.parquet"), d.join("link.parquet")).unwrap();
        assert!(local(d.join("link.parquet")).overlaps(&input));
        assert!(!local(d.join("out.parquet")).overlaps(&input));
        // Containment both ways: a release inside an input directory or
        // glob, an output directory around the input.
        assert!(local(d.join("sub/out.parquet")).overlaps(&local(d.join("sub"))));
        assert!(local(d.join("sub/out.parquet")).overlaps(&local(d.join("sub/*.parquet"))));
        assert!(local(d.to_path_buf()).overlaps(&input));
        let s3 = |s: &str| Location::parse(s).unwrap();
        assert!(s3("s3://lake/adult/r.parquet").overlaps(&s3("s3://lake/adult/")));
        assert!(s3("s3://lake//adult/./r.parquet").overlaps(&s3("s3://lake/adult")));
        assert!(s3("s3://lake/adult").overlaps(&s3("s3://lake/adult/part-0.parquet")));
        assert!(s3("s3://lake/adult/x.parquet").overlaps(&s3("s3://lake/adult/*.parquet")));
        assert!(!s3("s3://lake/adult-k10.parquet").overlaps(&s3("s3://lake/adult/")));
        assert!(!s3("s3://other/adult/r.parquet").overlaps(&s3("s3://lake/adult/")));
        assert!(!s3("s3://lake/adult/r.parquet").overlaps(&local(d.join("adult"))));
    }

    #[test]
    fn parses_locations() {
        assert_eq!(
            Location::parse("s3://b/data/x.parquet").unwrap(),
            Location::S3 {
                bucket: "b".into(),
                key: "data/x.parquet".into()
            }
        );
        assert_eq!(
            Location::parse("s3a://b").unwrap(),
            Location::S3 {
                bucket: "b".into(),
                key: String::new()
            }
        );
        assert_eq!(
            Location::parse("data/x.csv").unwrap(),
            Location::Local("data/x.csv".into())
        );
        assert_eq!(
            Location::parse("file:///tmp/x").unwrap(),
            Location::Local("/tmp/x".into())
        );
        assert!(Location::parse("gs://b/x")
            .unwrap_err()
            .to_string()
            .contains("gs://"));
        assert!(Location::parse("s3:///x").is_err());
        let l = Location::parse("s3://b/out/").unwrap();
        assert_eq!(
            l.join("part-00000.parquet").to_string(),
            "s3://b/out/part-00000.parquet"
        );
        assert_eq!(l.object_path().unwrap().as_ref(), "out");
    }
}
