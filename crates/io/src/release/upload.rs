//! Where the bytes of one release file go: a buffered local file, or an S3
//! multipart upload whose parts are sent a few at a time while the file is
//! written and which is completed only when the release is committed (or
//! aborted when it is dropped).
//!
//! Why not object_store's `WriteMultipart`: it sends a short last part only
//! in `finish`, which also completes the upload. A file's last part must be
//! uploaded when the file closes (else every closed file of a large release
//! keeps up to a part in memory until the commit) while the upload is
//! completed only at the commit (else an `--overwrite` release would appear
//! at its destination before it was verified). The parts themselves go
//! through object_store's `MultipartUpload`.

use std::fs::File;
use std::io::{BufWriter, Write};
use std::sync::{Arc, Mutex};

use anyhow::{Context, Result};
use object_store::{MultipartUpload, PutPayload};
use tokio::task::JoinSet;

use crate::storage::{s3_error, Location, Storage};

/// Size of one part of a multipart upload (S3 needs at least 5 MiB).
pub(super) const PART_BYTES: usize = 8 << 20;
/// Parts of one upload in flight at once.
const PARTS_IN_FLIGHT: usize = 4;

/// An upload of one object in parts, completed only on commit.
pub(super) struct S3Upload<'a> {
    pub(super) storage: &'a Storage,
    pub(super) upload: Box<dyn MultipartUpload>,
    pub(super) buffer: Vec<u8>,
    pub(super) tasks: JoinSet<object_store::Result<()>>,
    pub(super) location: Location,
    /// Without `overwrite`, the hidden key the parts are uploaded to; the
    /// commit copies it to `location` only if nothing is there yet.
    pub(super) staged: Option<Location>,
    pub(super) done: bool,
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
    pub(super) fn flush_parts(&mut self) -> Result<()> {
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

    pub(super) fn complete(&mut self) -> Result<()> {
        self.flush_parts()?;
        self.storage
            .block_on(self.upload.complete())
            .map_err(|e| s3_error(e, &self.location))?;
        self.done = true;
        Ok(())
    }

    pub(super) fn abort(&mut self) {
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

pub(super) type SharedUpload<'a> = Arc<Mutex<S3Upload<'a>>>;

/// Where one file's bytes go.
pub(super) enum Target<'a> {
    Local(BufWriter<File>),
    S3(SharedUpload<'a>),
}

/// A file's bytes, counted.
pub(super) struct Sink<'a> {
    pub(super) target: Target<'a>,
    pub(super) written: u64,
    /// sha256 of the bytes written: the file's hash in the manifest and
    /// the certificate, which `kanon verify` recomputes.
    pub(super) hasher: sha2::Sha256,
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
        sha2::Digest::update(&mut self.hasher, &buf[..n]);
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
