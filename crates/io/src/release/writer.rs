//! [`ReleaseWriter`]: writes the batches of a release as Parquet files
//! (one, or parts of a target size) to temporaries or pending uploads, and
//! publishes them atomically on [`ReleaseWriter::commit`]; dropping it
//! uncommitted leaves nothing behind.

use std::fs::File;
use std::io::BufWriter;
use std::path::PathBuf;
use std::sync::{Arc, Mutex};

use anyhow::{Context, Result};
use arrow::array::RecordBatch;
use arrow::datatypes::SchemaRef;
use object_store::{ObjectStore, ObjectStoreExt};
use parquet::basic::{Compression, ZstdLevel};
use parquet::file::metadata::KeyValue;
use parquet::file::properties::WriterProperties;
use tokio::task::JoinSet;

use super::destination::{check_destination, commit_dir, destination_free, sync_parent};
use super::manifest::{manifest_location, Manifest, MANIFEST, SUCCESS};
use super::parallel::ParallelWriter;
use super::temporaries::{staging_key, tmp_prefix};
use super::upload::{S3Upload, SharedUpload, Sink, Target, PART_BYTES};
use super::{ReleaseOptions, ROW_GROUP_BYTES};
use crate::exit::{Failure, OUTPUT_EXISTS};
use crate::storage::{s3_error, Location, Storage};

/// Writes a release and commits it atomically (see the module docs).
pub struct ReleaseWriter<'a> {
    storage: &'a Storage,
    dest: Location,
    options: ReleaseOptions,
    props: WriterProperties,
    schema: SchemaRef,
    current: Option<ParallelWriter<Sink<'a>>>,
    /// Files closed so far (footer written), not committed.
    closed: Vec<Location>,
    /// Rows and bytes of each closed file.
    closed_sizes: Vec<(u64, u64)>,
    /// `sha256:` of each closed file's bytes.
    closed_hashes: Vec<String>,
    /// Rows written to the open file.
    current_rows: u64,
    /// Direct files created on the local disk, removed unless committed.
    direct_paths: Vec<PathBuf>,
    /// The manifest to publish with the release.
    manifest: Option<Vec<u8>>,
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
        if options.direct.is_none() {
            check_destination(
                storage,
                &dest,
                options.max_file_bytes.is_some(),
                options.overwrite,
            )?;
        }
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
            closed_sizes: Vec::new(),
            closed_hashes: Vec::new(),
            current_rows: 0,
            direct_paths: Vec::new(),
            manifest: None,
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
        if let Some(token) = &self.options.direct {
            self.dest.join(&format!(
                "part-{:05}-{token}.zstd.parquet",
                self.closed.len()
            ))
        } else if self.split() {
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
                let file = if let (Some(_), Location::Local(path)) =
                    (&self.options.direct, &location)
                {
                    std::fs::create_dir_all(dest).with_context(|| {
                        format!("cannot create output directory {}", dest.display())
                    })?;
                    let file = File::create_new(path)
                        .with_context(|| format!("cannot create {}", path.display()))?;
                    self.direct_paths.push(path.clone());
                    file
                } else if self.split() {
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
                let staged = (!self.options.overwrite && self.options.direct.is_none())
                    .then(|| staging_key(&location));
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
            ParallelWriter::try_new(
                Sink {
                    target: sink,
                    written: 0,
                    hasher: sha2::Sha256::default(),
                },
                self.schema.clone(),
                self.props.clone(),
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
        self.current_rows += batch.num_rows() as u64;
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
        self.closed_sizes
            .push((std::mem::take(&mut self.current_rows), sink.written));
        self.closed_hashes.push(format!(
            "sha256:{}",
            crate::certificate::hex(&sha2::Digest::finalize(sink.hasher.clone()))
        ));
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

    /// `sha256:` of each closed file, in the order of [`ReleaseWriter::files`].
    pub fn file_hashes(&self) -> &[String] {
        &self.closed_hashes
    }

    /// Publishes `manifest` with the release (see [`Manifest`]).
    pub fn set_manifest(&mut self, manifest: &Manifest) {
        self.manifest = Some(manifest.to_bytes());
    }

    /// The schema of the files.
    pub fn schema(&self) -> &SchemaRef {
        &self.schema
    }

    /// The rows and bytes of each file of [`ReleaseWriter::files`].
    pub fn file_sizes(&self) -> &[(u64, u64)] {
        &self.closed_sizes
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
        if self.options.direct.is_some() {
            return self.commit_direct();
        }
        let split = self.split();
        // Re-check: another job may have written the destination meanwhile.
        destination_free(self.storage, &self.dest, split, self.options.overwrite)?;
        let files: Vec<Location> = self.closed.clone();
        match self.dest.clone() {
            Location::Local(dest) => {
                if split {
                    let tmp = self.tmp_dir.take().expect("temp dir");
                    if let Some(m) = &self.manifest {
                        for (name, bytes) in [(MANIFEST, m.as_slice()), (SUCCESS, &[][..])] {
                            std::fs::write(tmp.path().join(name), bytes).with_context(|| {
                                format!("cannot write the release's {name} in {}", dest.display())
                            })?;
                        }
                    }
                    commit_dir(tmp, &dest, self.options.overwrite)?;
                } else {
                    let sidecar = self.put_sidecar()?;
                    let tmp = self.tmp_file.take().expect("temp file");
                    let moved = if self.options.overwrite {
                        tmp.persist(&dest).map_err(|e| e.error)
                    } else {
                        tmp.persist_noclobber(&dest).map_err(|e| e.error)
                    };
                    if moved.is_err() {
                        if let Some(s) = &sidecar {
                            let _ = self.storage.delete(s);
                        }
                    }
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
                let sidecar = match split {
                    false => self.put_sidecar()?,
                    true => None,
                };
                let take_back_sidecar = || {
                    if let Some(s) = &sidecar {
                        let _ = self.storage.delete(s);
                    }
                };
                for (i, u) in self.uploads.iter().enumerate() {
                    if let Err(e) = u.lock().expect("upload lock").complete() {
                        // Best effort: take back what was completed.
                        for l in files[..i].iter().chain(&staged[..i.min(staged.len())]) {
                            let _ = self.storage.delete(l);
                        }
                        take_back_sidecar();
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
                        take_back_sidecar();
                        return Err(e);
                    }
                }
                for tmp in &staged {
                    if let Err(e) = self.storage.delete(tmp) {
                        tracing::warn!(location = %tmp, error = %e, "cannot remove a staged upload");
                    }
                }
                let markers = [self.dest.join(MANIFEST), self.dest.join(SUCCESS)];
                if split && self.options.overwrite {
                    for old in self.storage.list(&self.dest)? {
                        if !files.contains(&old.location) && !markers.contains(&old.location) {
                            self.storage.delete(&old.location).with_context(|| {
                                format!("cannot remove {} of the replaced release", old.location)
                            })?;
                        }
                    }
                }
                if split {
                    self.put_markers()?;
                }
            }
        }
        self.committed = true;
        Ok(files)
    }
}

impl ReleaseWriter<'_> {
    /// Writes a single-file release's manifest beside it, before the
    /// release is moved into place (without `overwrite`, only if there is
    /// none). Returns where, to take it back if the move fails.
    fn put_sidecar(&self) -> Result<Option<Location>> {
        let Some(m) = &self.manifest else {
            return Ok(None);
        };
        let at = manifest_location(&self.dest, false);
        self.storage.put(&at, m, self.options.overwrite)?;
        Ok(Some(at))
    }

    /// A split release on S3: its manifest, then `_SUCCESS`, once every
    /// part is published.
    fn put_markers(&self) -> Result<()> {
        if let Some(m) = &self.manifest {
            self.storage.put(&self.dest.join(MANIFEST), m, true)?;
            self.storage.put(&self.dest.join(SUCCESS), &[], true)?;
        }
        Ok(())
    }

    /// Direct files: complete the uploads (the files are then in place,
    /// published by nothing yet).
    fn commit_direct(mut self) -> Result<Vec<Location>> {
        let files = self.closed.clone();
        for (i, u) in self.uploads.iter().enumerate() {
            if let Err(e) = u.lock().expect("upload lock").complete() {
                for l in &files[..i] {
                    let _ = self.storage.delete(l);
                }
                return Err(e);
            }
        }
        if let Location::Local(dest) = &self.dest {
            sync_parent(&dest.join("x"));
        }
        self.committed = true;
        Ok(files)
    }
}

impl Drop for ReleaseWriter<'_> {
    fn drop(&mut self) {
        if self.committed {
            return;
        }
        for p in &self.direct_paths {
            let _ = std::fs::remove_file(p);
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
