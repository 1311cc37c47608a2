//! Writing a release: Parquet (zstd, dictionary-encoded labels, bounded row
//! groups, optionally split into files of a target size) with kanon's
//! provenance in the key-value metadata, committed atomically.
//!
//! Nothing appears at the destination before [`ReleaseWriter::commit`]:
//! - a local file is written to a hidden temporary file next to the
//!   destination (`.kanon-*.tmp`) and renamed into place;
//! - a local split release is written to a hidden temporary directory that
//!   is renamed into place;
//! - on S3 every file is a multipart upload that is completed only at
//!   commit, after all its parts were uploaded and the release verified;
//!   without `--overwrite` it is uploaded to a hidden `.kanon-tmp-*` key
//!   and published by a copy that S3 completes only if the destination key
//!   is still free (`If-None-Match: *`), so of two concurrent runs exactly
//!   one publishes.
//!
//! Dropping an uncommitted writer (an error, a failed verification, an
//! interrupt) removes the temporary files and aborts the uploads.
//!
//! A process killed outright (SIGKILL, OOM killer, power loss) never leaves
//! a partial release, but can leave, next to the destination:
//! - a hidden local file or directory `.kanon-tmp-<host>-<pid>-*`; the next
//!   run writing next to it removes it once its process is gone (same host,
//!   no such pid), or after [`STALE_LOCAL`] whatever its origin;
//! - a spill directory `.kanon-spill-<host>-<pid>-*` in the system temporary
//!   directory (`crate::spill`), removed the same way by the next job that
//!   spills;
//! - on S3, a staged object `.kanon-tmp-*` (killed between upload and
//!   commit); the next run writing to the same prefix removes those older
//!   than [`STALE_S3`];
//! - on S3, an incomplete multipart upload (invisible, billed as storage).
//!   `object_store` cannot list pending uploads, so kanon cannot clean them:
//!   use a bucket lifecycle rule (`AbortIncompleteMultipartUpload`) or
//!   `aws s3api list-multipart-uploads`.

use std::fs::File;
use std::io::{BufWriter, Write};
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};

use anyhow::{Context, Result};
use arrow::array::RecordBatch;
use arrow::datatypes::SchemaRef;
use object_store::{MultipartUpload, ObjectStore, ObjectStoreExt, PutPayload};
use parquet::arrow::ArrowWriter;
use parquet::basic::{Compression, ZstdLevel};
use parquet::file::metadata::KeyValue;
use parquet::file::properties::WriterProperties;
use tokio::task::JoinSet;

use crate::exit::{Failure, OUTPUT_EXISTS};
use crate::storage::{s3_error, Location, Storage};

/// How to write a release.
#[derive(Debug, Clone)]
pub struct ReleaseOptions {
    /// Split into files of about this many bytes (the destination is then a
    /// directory or prefix of `part-NNNNN.parquet` files).
    pub max_file_bytes: Option<u64>,
    /// Rows per row group.
    pub row_group_rows: usize,
    /// zstd level.
    pub zstd_level: i32,
    /// Replace an existing release.
    pub overwrite: bool,
    /// Key-value metadata of every file (provenance).
    pub metadata: Vec<(String, String)>,
}

/// Row groups are also closed at this estimated size.
pub const ROW_GROUP_BYTES: usize = 128 << 20;
/// Size of one part of a multipart upload (S3 needs at least 5 MiB).
const PART_BYTES: usize = 8 << 20;
/// Parts of one upload in flight at once.
const PARTS_IN_FLIGHT: usize = 4;

/// Start of the name of every temporary file, directory or object a release
/// writes next to its destination.
pub const TMP_PREFIX: &str = ".kanon-tmp-";

/// Start of the name of a spill directory (`crate::spill`), in the system
/// temporary directory.
pub const SPILL_PREFIX: &str = ".kanon-spill-";

/// A local temporary whose owner cannot be checked (another host) is stale
/// after this long.
pub const STALE_LOCAL: std::time::Duration = std::time::Duration::from_secs(7 * 24 * 3600);

/// A staged S3 object lives from the end of its upload to its commit copy
/// (seconds); one older than this was left by a killed run.
pub const STALE_S3: std::time::Duration = std::time::Duration::from_secs(3600);

/// This host, as a short tag in temporary names: a pid only says whether
/// its process is alive on the host that wrote it.
fn host_tag() -> String {
    use std::hash::{Hash, Hasher};
    let name = std::fs::read_to_string("/proc/sys/kernel/hostname")
        .or_else(|_| std::fs::read_to_string("/etc/hostname"))
        .unwrap_or_default();
    let mut h = rustc_hash::FxHasher::default();
    name.trim().hash(&mut h);
    format!("{:08x}", h.finish() as u32)
}

/// The prefix of this process's temporary names.
pub(crate) fn tmp_prefix() -> String {
    format!("{TMP_PREFIX}{}-{}-", host_tag(), std::process::id())
}

/// The prefix of this process's spill directories.
pub(crate) fn spill_prefix() -> String {
    format!("{SPILL_PREFIX}{}-{}-", host_tag(), std::process::id())
}

/// Whether a local temporary named `name` (modified `age` ago) was left by
/// a process that is gone.
fn is_stale_local(name: &str, age: std::time::Duration) -> bool {
    let Some(rest) = name
        .strip_prefix(TMP_PREFIX)
        .or_else(|| name.strip_prefix(SPILL_PREFIX))
    else {
        return false;
    };
    if age > STALE_LOCAL {
        return true;
    }
    let mut parts = rest.splitn(3, '-');
    let (Some(host), Some(pid)) = (parts.next(), parts.next()) else {
        return false;
    };
    let Ok(pid) = pid.parse::<u32>() else {
        return false;
    };
    host == host_tag()
        && pid != std::process::id()
        && Path::new("/proc/self").exists()
        && !Path::new(&format!("/proc/{pid}")).exists()
}

/// Removes what killed runs left in `dir` (see the module docs). Best
/// effort: failures are logged, never fatal.
pub fn remove_stale_local(dir: &Path) -> usize {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return 0;
    };
    let mut removed = 0;
    for e in entries.flatten() {
        let name = e.file_name().to_string_lossy().into_owned();
        let Ok(meta) = e.metadata() else { continue };
        let age = meta
            .modified()
            .ok()
            .and_then(|m| m.elapsed().ok())
            .unwrap_or_default();
        if !is_stale_local(&name, age) {
            continue;
        }
        let path = e.path();
        let done = if meta.is_dir() {
            std::fs::remove_dir_all(&path)
        } else {
            std::fs::remove_file(&path)
        };
        match done {
            Ok(()) => {
                removed += 1;
                tracing::info!(path = %path.display(), "removed a temporary file left by an interrupted run");
            }
            Err(e) => {
                tracing::warn!(path = %path.display(), error = %e, "cannot remove a stale temporary file")
            }
        }
    }
    removed
}

/// Removes what killed runs left next to `dest`, before anything is
/// checked or written there.
fn remove_stale(storage: &Storage, dest: &Location, split: bool) {
    match dest {
        Location::Local(p) => {
            let parent = match p.parent() {
                Some(d) if !d.as_os_str().is_empty() => d,
                _ => Path::new("."),
            };
            remove_stale_local(parent);
        }
        Location::S3 { bucket, key } => {
            let dir = if split {
                format!("{}/", key.trim_end_matches('/'))
            } else {
                key.rsplit_once('/')
                    .map_or(String::new(), |(d, _)| format!("{d}/"))
            };
            // Tests cannot age an object on the server: they shorten the wait.
            let older_than = std::env::var("KANON_TEST_STALE_S3_S")
                .ok()
                .and_then(|v| v.parse().ok())
                .map_or(STALE_S3, std::time::Duration::from_secs);
            storage.remove_stale_objects(bucket, &dir, TMP_PREFIX, older_than);
        }
    }
}

/// Parses a size: `1048576`, `512k`, `256MB`, `1 GiB`. Units k, M, G, T
/// are powers of 1024 with or without `i`/`B` (`256MB` = 256 MiB).
///
/// # Errors
/// A bad-input failure naming the setting.
pub fn parse_size(setting: &str, s: &str) -> Result<u64> {
    let t = s.trim();
    let split = t
        .find(|c: char| !(c.is_ascii_digit() || c == '.'))
        .unwrap_or(t.len());
    let (num, unit) = t.split_at(split);
    let unit = unit.trim().to_ascii_lowercase();
    let mult: u64 = match unit.trim_end_matches("ib").trim_end_matches('b') {
        "" => 1,
        "k" => 1 << 10,
        "m" => 1 << 20,
        "g" => 1 << 30,
        "t" => 1 << 40,
        _ => 0,
    };
    let v: f64 = num.parse().unwrap_or(-1.0);
    if mult == 0 || v.is_nan() || v <= 0.0 {
        return Err(Failure::bad_input(format!(
            "`{setting} = \"{s}\"` is not a size; write e.g. \"256MB\" or \"1GB\""
        ))
        .into());
    }
    Ok((v * mult as f64) as u64)
}

/// Removes what killed runs left next to the destination (see the module
/// docs), then fails when the destination exists and may not be replaced,
/// or is of the wrong kind.
///
/// # Errors
/// Exit code 5 when it exists without `overwrite`; bad input when a single
/// file is to be written where a directory is.
pub fn check_destination(
    storage: &Storage,
    dest: &Location,
    split: bool,
    overwrite: bool,
) -> Result<()> {
    remove_stale(storage, dest, split);
    destination_free(storage, dest, split, overwrite)
}

/// [`check_destination`] without the cleanup (at commit, where the run's own
/// staged objects exist).
fn destination_free(
    storage: &Storage,
    dest: &Location,
    split: bool,
    overwrite: bool,
) -> Result<()> {
    let exists = match dest {
        Location::Local(p) => {
            if p.is_dir() && !split {
                return Err(Failure::bad_input(format!(
                    "output {} is a directory: name a file, or set `output.max_file_size` to write a directory of parts",
                    p.display()
                ))
                .into());
            }
            p.exists()
        }
        Location::S3 { .. } if split => !storage.list(dest)?.is_empty(),
        Location::S3 { key, bucket } => {
            if key.is_empty() || key.ends_with('/') {
                return Err(Failure::bad_input(format!(
                    "output {dest} names a prefix: name an object (s3://{bucket}/path/release.parquet), or set `output.max_file_size` to write parts under the prefix"
                ))
                .into());
            }
            storage.head(dest)?.is_some()
        }
    };
    if exists && !overwrite {
        return Err(Failure::new(
            OUTPUT_EXISTS,
            format!(
                "output {dest} already exists; pass --overwrite (or set `output.overwrite = true`) to replace it, or choose another --output"
            ),
        )
        .into());
    }
    Ok(())
}

/// An upload of one object in parts, completed only on commit.
struct S3Upload<'a> {
    storage: &'a Storage,
    upload: Box<dyn MultipartUpload>,
    buffer: Vec<u8>,
    tasks: JoinSet<object_store::Result<()>>,
    location: Location,
    /// Without `overwrite`, the hidden key the parts are uploaded to; the
    /// commit copies it to `location` only if nothing is there yet.
    staged: Option<Location>,
    done: bool,
}

impl S3Upload<'_> {
    fn send_part(&mut self) -> std::io::Result<()> {
        let data = std::mem::take(&mut self.buffer);
        let part = self.upload.put_part(PutPayload::from(data));
        {
            let _guard = self.storage.runtime().enter();
            self.tasks.spawn(part);
        }
        while self.tasks.len() >= PARTS_IN_FLIGHT {
            self.join_one()?;
        }
        Ok(())
    }

    fn join_one(&mut self) -> std::io::Result<()> {
        match self.storage.block_on(self.tasks.join_next()) {
            None | Some(Ok(Ok(()))) => Ok(()),
            Some(Ok(Err(e))) => Err(std::io::Error::other(e)),
            Some(Err(e)) => Err(std::io::Error::other(e)),
        }
    }

    /// Uploads what is buffered and waits for every part.
    fn flush_parts(&mut self) -> Result<()> {
        if !self.buffer.is_empty() {
            self.send_part()
                .with_context(|| format!("cannot upload {}", self.location))?;
        }
        while !self.tasks.is_empty() {
            self.join_one()
                .with_context(|| format!("cannot upload {}", self.location))?;
        }
        Ok(())
    }

    fn complete(&mut self) -> Result<()> {
        self.flush_parts()?;
        self.storage
            .block_on(self.upload.complete())
            .map_err(|e| s3_error(e, &self.location))?;
        self.done = true;
        Ok(())
    }

    fn abort(&mut self) {
        if self.done {
            return;
        }
        self.done = true;
        let storage = self.storage;
        storage.block_on(async {
            self.tasks.shutdown().await;
            if let Err(e) = self.upload.abort().await {
                tracing::warn!(location = %self.location, error = %e, "cannot abort the upload");
            }
        });
    }
}

type SharedUpload<'a> = Arc<Mutex<S3Upload<'a>>>;

/// Where one file's bytes go.
enum Target<'a> {
    Local(BufWriter<File>),
    S3(SharedUpload<'a>),
}

/// A file's bytes, counted.
struct Sink<'a> {
    target: Target<'a>,
    written: u64,
}

impl Write for Sink<'_> {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        let n = match &mut self.target {
            Target::Local(w) => w.write(buf)?,
            Target::S3(u) => {
                let mut u = u.lock().expect("upload lock");
                u.buffer.extend_from_slice(buf);
                if u.buffer.len() >= PART_BYTES {
                    u.send_part()?;
                }
                buf.len()
            }
        };
        self.written += n as u64;
        Ok(n)
    }

    fn flush(&mut self) -> std::io::Result<()> {
        match &mut self.target {
            Target::Local(w) => w.flush(),
            Target::S3(_) => Ok(()),
        }
    }
}

/// Writes a release and commits it atomically (see the module docs).
pub struct ReleaseWriter<'a> {
    storage: &'a Storage,
    dest: Location,
    options: ReleaseOptions,
    props: WriterProperties,
    schema: SchemaRef,
    current: Option<ArrowWriter<Sink<'a>>>,
    /// Files closed so far (footer written), not committed.
    closed: Vec<Location>,
    /// Every upload started, to complete on commit or abort on drop.
    uploads: Vec<SharedUpload<'a>>,
    /// Single local file: its temporary path.
    tmp_file: Option<tempfile::TempPath>,
    /// Split local release: the temporary directory.
    tmp_dir: Option<tempfile::TempDir>,
    rows: u64,
    bytes: u64,
    committed: bool,
}

impl<'a> ReleaseWriter<'a> {
    /// Prepares a release of `schema` at `dest`.
    ///
    /// # Errors
    /// As [`check_destination`]; failures to create the temporary file or
    /// start the upload; an invalid zstd level.
    pub fn create(
        storage: &'a Storage,
        dest: Location,
        schema: SchemaRef,
        options: ReleaseOptions,
    ) -> Result<Self> {
        check_destination(
            storage,
            &dest,
            options.max_file_bytes.is_some(),
            options.overwrite,
        )?;
        let level = ZstdLevel::try_new(options.zstd_level).map_err(|_| {
            Failure::bad_input(format!(
                "`output.compression_level = {}` is not a zstd level: use 1 to 22",
                options.zstd_level
            ))
        })?;
        if options.row_group_rows == 0 {
            return Err(Failure::bad_input("`output.row_group_rows` must be at least 1").into());
        }
        let props = WriterProperties::builder()
            .set_compression(Compression::ZSTD(level))
            .set_dictionary_enabled(true)
            .set_max_row_group_row_count(Some(options.row_group_rows))
            .set_max_row_group_bytes(Some(ROW_GROUP_BYTES))
            .set_key_value_metadata(Some(
                options
                    .metadata
                    .iter()
                    .map(|(k, v)| KeyValue::new(k.clone(), v.clone()))
                    .collect(),
            ))
            .build();
        let mut w = ReleaseWriter {
            storage,
            dest,
            options,
            props,
            schema,
            current: None,
            closed: Vec::new(),
            uploads: Vec::new(),
            tmp_file: None,
            tmp_dir: None,
            rows: 0,
            bytes: 0,
            committed: false,
        };
        w.open_next()?;
        Ok(w)
    }

    fn split(&self) -> bool {
        self.options.max_file_bytes.is_some()
    }

    fn part_location(&self) -> Location {
        if self.split() {
            self.dest
                .join(&format!("part-{:05}.parquet", self.closed.len()))
        } else {
            self.dest.clone()
        }
    }

    fn open_next(&mut self) -> Result<()> {
        let location = self.part_location();
        let sink = match &self.dest {
            Location::Local(dest) => {
                let parent = match dest.parent() {
                    Some(d) if !d.as_os_str().is_empty() => d.to_path_buf(),
                    _ => PathBuf::from("."),
                };
                std::fs::create_dir_all(&parent).with_context(|| {
                    format!("cannot create output directory {}", parent.display())
                })?;
                let file = if self.split() {
                    if self.tmp_dir.is_none() {
                        self.tmp_dir = Some(
                            tempfile::Builder::new()
                                .prefix(&tmp_prefix())
                                .tempdir_in(&parent)
                                .with_context(|| {
                                    format!(
                                        "cannot create a temporary directory in {}",
                                        parent.display()
                                    )
                                })?,
                        );
                    }
                    let dir = self.tmp_dir.as_ref().expect("temp dir").path();
                    let name = format!("part-{:05}.parquet", self.closed.len());
                    File::create_new(dir.join(&name))
                        .with_context(|| format!("cannot create {}", dir.join(name).display()))?
                } else {
                    let (file, path) = tempfile::Builder::new()
                        .prefix(&tmp_prefix())
                        .suffix(".parquet")
                        .tempfile_in(&parent)
                        .with_context(|| {
                            format!("cannot create a temporary file in {}", parent.display())
                        })?
                        .into_parts();
                    self.tmp_file = Some(path);
                    file
                };
                Target::Local(BufWriter::with_capacity(1 << 20, file))
            }
            Location::S3 { bucket, .. } => {
                let store: Arc<dyn ObjectStore> = self.storage.s3(bucket)?;
                let staged = (!self.options.overwrite).then(|| staging_key(&location));
                let path = staged
                    .as_ref()
                    .unwrap_or(&location)
                    .object_path()
                    .expect("s3 path");
                let upload = self
                    .storage
                    .block_on(store.put_multipart(&path))
                    .map_err(|e| s3_error(e, &location))?;
                let upload = Arc::new(Mutex::new(S3Upload {
                    storage: self.storage,
                    upload,
                    buffer: Vec::with_capacity(PART_BYTES + (1 << 20)),
                    tasks: JoinSet::new(),
                    location: location.clone(),
                    staged,
                    done: false,
                }));
                self.uploads.push(upload.clone());
                Target::S3(upload)
            }
        };
        self.current = Some(
            ArrowWriter::try_new(
                Sink {
                    target: sink,
                    written: 0,
                },
                self.schema.clone(),
                Some(self.props.clone()),
            )
            .context("cannot start the Parquet writer")?,
        );
        Ok(())
    }

    /// Writes one batch of the release.
    ///
    /// # Errors
    /// Write failures.
    pub fn write(&mut self, batch: &RecordBatch) -> Result<()> {
        let w = self.current.as_mut().expect("an open file");
        w.write(batch)
            .with_context(|| format!("cannot write the release to {}", self.dest))?;
        self.rows += batch.num_rows() as u64;
        if let Some(max) = self.options.max_file_bytes {
            if (w.bytes_written() + w.in_progress_size()) as u64 >= max {
                self.close_current()?;
                self.open_next()?;
            }
        }
        Ok(())
    }

    fn close_current(&mut self) -> Result<()> {
        let Some(w) = self.current.take() else {
            return Ok(());
        };
        let location = self.part_location();
        let sink = w
            .into_inner()
            .with_context(|| format!("cannot finish the release file {location}"))?;
        self.bytes += sink.written;
        match sink.target {
            Target::Local(b) => {
                let f = b
                    .into_inner()
                    .map_err(|e| e.into_error())
                    .with_context(|| format!("cannot write {location}"))?;
                f.sync_all()
                    .with_context(|| format!("cannot write {location}"))?;
            }
            Target::S3(u) => u.lock().expect("upload lock").flush_parts()?,
        }
        self.closed.push(location);
        Ok(())
    }

    /// Closes the last file (its footer is written) without committing.
    ///
    /// # Errors
    /// Write failures.
    pub fn close(&mut self) -> Result<()> {
        self.close_current()
    }

    /// The files of the release once [`ReleaseWriter::close`]d: what
    /// [`ReleaseWriter::commit`] will publish.
    pub fn files(&self) -> &[Location] {
        &self.closed
    }

    /// Rows written.
    pub fn rows(&self) -> u64 {
        self.rows
    }

    /// Bytes written (after [`ReleaseWriter::close`]).
    pub fn bytes(&self) -> u64 {
        self.bytes
    }

    /// Moves the release into place. Call only after the release was
    /// verified. Returns the files of the release.
    ///
    /// # Errors
    /// Exit code 5 when the destination appeared meanwhile (without
    /// `overwrite`); rename or upload failures.
    pub fn commit(mut self) -> Result<Vec<Location>> {
        self.close_current()?;
        let split = self.split();
        // Re-check: another job may have written the destination meanwhile.
        destination_free(self.storage, &self.dest, split, self.options.overwrite)?;
        let files: Vec<Location> = self.closed.clone();
        match self.dest.clone() {
            Location::Local(dest) => {
                if split {
                    let tmp = self.tmp_dir.take().expect("temp dir");
                    commit_dir(tmp, &dest, self.options.overwrite)?;
                } else {
                    let tmp = self.tmp_file.take().expect("temp file");
                    let moved = if self.options.overwrite {
                        tmp.persist(&dest).map_err(|e| e.error)
                    } else {
                        tmp.persist_noclobber(&dest).map_err(|e| e.error)
                    };
                    match moved {
                        Ok(()) => {}
                        Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => {
                            return Err(Failure::new(
                                OUTPUT_EXISTS,
                                format!(
                                    "output {} appeared while kanon was writing; nothing was replaced (pass --overwrite to replace it)",
                                    dest.display()
                                ),
                            )
                            .into())
                        }
                        Err(e) => {
                            return Err(e).with_context(|| {
                                format!("cannot move the release into place at {}", dest.display())
                            })
                        }
                    }
                }
                sync_parent(&dest);
            }
            Location::S3 { .. } => {
                let staged: Vec<Location> = self
                    .uploads
                    .iter()
                    .filter_map(|u| u.lock().expect("upload lock").staged.clone())
                    .collect();
                for (i, u) in self.uploads.iter().enumerate() {
                    if let Err(e) = u.lock().expect("upload lock").complete() {
                        // Best effort: take back what was completed.
                        for l in files[..i].iter().chain(&staged[..i.min(staged.len())]) {
                            let _ = self.storage.delete(l);
                        }
                        return Err(e);
                    }
                }
                // Without --overwrite, each file is published by a copy that
                // S3 completes only if the key is still free: of two
                // concurrent runs, exactly one publishes.
                for (i, (tmp, dest)) in staged.iter().zip(&files).enumerate() {
                    if let Err(e) = self.storage.copy_if_not_exists(tmp, dest) {
                        for l in staged.iter().chain(&files[..i]) {
                            let _ = self.storage.delete(l);
                        }
                        return Err(e);
                    }
                }
                for tmp in &staged {
                    if let Err(e) = self.storage.delete(tmp) {
                        tracing::warn!(location = %tmp, error = %e, "cannot remove a staged upload");
                    }
                }
                if split && self.options.overwrite {
                    for old in self.storage.list(&self.dest)? {
                        if !files.contains(&old.location) {
                            self.storage.delete(&old.location).with_context(|| {
                                format!("cannot remove {} of the replaced release", old.location)
                            })?;
                        }
                    }
                }
            }
        }
        self.committed = true;
        Ok(files)
    }
}

/// The hidden key a file is uploaded to before a conditional commit:
/// `.kanon-tmp-<random>-<name>` next to it, easy to find and to clean up
/// (the names of [`remove_stale`]).
fn staging_key(dest: &Location) -> Location {
    let Location::S3 { bucket, key } = dest else {
        return dest.clone();
    };
    let nonce: u64 = rand::random();
    let (dir, name) = key.rsplit_once('/').unwrap_or(("", key));
    let staged = format!("{TMP_PREFIX}{nonce:016x}-{name}");
    Location::S3 {
        bucket: bucket.clone(),
        key: if dir.is_empty() {
            staged
        } else {
            format!("{dir}/{staged}")
        },
    }
}

/// Renames a finished temporary directory into place.
fn commit_dir(tmp: tempfile::TempDir, dest: &Path, overwrite: bool) -> Result<()> {
    let tmp_path = tmp.path().to_path_buf();
    if dest.exists() {
        if !overwrite {
            return Err(Failure::new(
                OUTPUT_EXISTS,
                format!("output {} already exists", dest.display()),
            )
            .into());
        }
        // Move the old release aside, the new one in, then drop the old.
        let parent = tmp_path.parent().unwrap_or(Path::new("."));
        let old = tempfile::Builder::new()
            .prefix(&format!("{}old-", tmp_prefix()))
            .tempdir_in(parent)?;
        let old_path = old.path().join("release");
        std::fs::rename(dest, &old_path)
            .with_context(|| format!("cannot move the old release {} aside", dest.display()))?;
        if let Err(e) = std::fs::rename(&tmp_path, dest) {
            let _ = std::fs::rename(&old_path, dest);
            return Err(e).with_context(|| {
                format!("cannot move the release into place at {}", dest.display())
            });
        }
        let _ = tmp.keep();
        drop(old);
    } else {
        std::fs::rename(&tmp_path, dest)
            .with_context(|| format!("cannot move the release into place at {}", dest.display()))?;
        let _ = tmp.keep();
    }
    Ok(())
}

fn sync_parent(dest: &Path) {
    if let Some(parent) = dest.parent() {
        let parent = if parent.as_os_str().is_empty() {
            Path::new(".")
        } else {
            parent
        };
        if let Ok(d) = File::open(parent) {
            let _ = d.sync_all();
        }
    }
}

impl Drop for ReleaseWriter<'_> {
    fn drop(&mut self) {
        if self.committed {
            return;
        }
        // Temporary local files and directories remove themselves; uploads
        // must be aborted so that no parts stay behind.
        drop(self.current.take());
        for u in &self.uploads {
            if let Ok(mut u) = u.lock() {
                u.abort();
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_sizes() {
        assert_eq!(parse_size("s", "1048576").unwrap(), 1 << 20);
        assert_eq!(parse_size("s", "256MB").unwrap(), 256 << 20);
        assert_eq!(parse_size("s", "1 GiB").unwrap(), 1 << 30);
        assert_eq!(parse_size("s", "512k").unwrap(), 512 << 10);
        assert_eq!(parse_size("s", "1.5G").unwrap(), 3 << 29);
        let e = parse_size("output.max_file_size", "lots").unwrap_err();
        assert!(e.to_string().contains("output.max_file_size"), "{e}");
        assert!(parse_size("s", "0").is_err());
        assert!(parse_size("s", "5 parsecs").is_err());
    }
}
