//! Where data lives: local paths and `s3://bucket/key` URLs (through
//! `object_store`), with one small blocking API for the rest of kanon-io and the commands.
//!
//! S3 credentials and region come from the usual AWS environment variables
//! (`AWS_ACCESS_KEY_ID`, `AWS_SECRET_ACCESS_KEY`, `AWS_SESSION_TOKEN`,
//! `AWS_REGION`, `AWS_ENDPOINT_URL`, ...), else from the AWS SDK's standard
//! chain (`aws-config`): the shared profile files (`~/.aws/credentials`,
//! `~/.aws/config`, profile `AWS_PROFILE` or `storage.profile`) with static
//! keys, assume-role, SSO or `credential_process`, then web identity, the
//! container endpoint and the instance metadata service; the job's
//! `[storage]` settings (endpoint, region,
//! `allow_http`, virtual-hosted or path-style) come on top. The async store
//! runs on a small tokio runtime created only when an `s3://` location is
//! used, so local jobs pay nothing for it.
//!
//! The module is split by concept: [`Location`] (what a path or URL names)
//! in `location`, the S3 client and its error messages in `s3`, the bridge
//! to the AWS SDK's credential chain in `aws_chain`; this file holds
//! [`Storage`], the blocking API over both kinds of location.

use std::collections::HashMap;
use std::fmt;
use std::sync::{Arc, Mutex, OnceLock};

use anyhow::{Context, Result};
use bytes::Bytes;
use kanon_engine::spec::StorageSpec;
use object_store::{ObjectStore, ObjectStoreExt};

mod aws_chain;
mod location;
mod s3;

pub use location::Location;
use s3::meta_of;
pub use s3::s3_error;

/// Access to local files and object stores.
pub struct Storage {
    settings: StorageSpec,
    runtime: OnceLock<tokio::runtime::Runtime>,
    stores: Mutex<HashMap<String, Arc<dyn ObjectStore>>>,
    /// Buckets probed for conditional writes, and whether their store
    /// honours them ([`Storage::check_conditional_writes`]).
    probed: Mutex<HashMap<String, bool>>,
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
            probed: Mutex::new(HashMap::new()),
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

    /// Writes a small file or object whole: a local file under a temporary
    /// name renamed into place, an S3 object in one request. Unless
    /// `replace`, an existing one is not replaced (exit code 5; on S3 the
    /// store checks, `If-None-Match: *`).
    ///
    /// # Errors
    /// Exit code 5 for an existing destination; write failures.
    pub fn put(&self, loc: &Location, bytes: &[u8], replace: bool) -> Result<()> {
        let exists = || -> anyhow::Error {
            crate::exit::Failure::new(
                crate::exit::OUTPUT_EXISTS,
                format!("{loc} exists; nothing was replaced (pass --overwrite to replace it)"),
            )
            .into()
        };
        match loc {
            Location::Local(p) => {
                let parent = match p.parent() {
                    Some(d) if !d.as_os_str().is_empty() => d,
                    _ => std::path::Path::new("."),
                };
                let mut tmp = tempfile::Builder::new()
                    .prefix(&crate::release::tmp_prefix())
                    .tempfile_in(parent)
                    .with_context(|| format!("cannot write {loc}"))?;
                std::io::Write::write_all(&mut tmp, bytes)
                    .with_context(|| format!("cannot write {loc}"))?;
                let moved = match replace {
                    true => tmp.persist(p).map(|_| ()),
                    false => tmp.persist_noclobber(p).map(|_| ()),
                };
                match moved {
                    Ok(()) => Ok(()),
                    Err(e) if e.error.kind() == std::io::ErrorKind::AlreadyExists => Err(exists()),
                    Err(e) => Err(e.error).with_context(|| format!("cannot write {loc}")),
                }
            }
            Location::S3 { .. } => {
                let (store, path) = self.remote(loc)?;
                let mode = match replace {
                    true => object_store::PutMode::Overwrite,
                    false => object_store::PutMode::Create,
                };
                let put = self.block_on(store.put_opts(
                    &path,
                    bytes.to_vec().into(),
                    object_store::PutOptions {
                        mode,
                        ..Default::default()
                    },
                ));
                match put {
                    Ok(_) => Ok(()),
                    Err(object_store::Error::AlreadyExists { .. }) => Err(exists()),
                    Err(e) => Err(s3_error(e, loc)),
                }
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

/// Makes ring the process's TLS provider. Two providers are linked (ring,
/// which object_store and the AWS SDK use, and aws-lc-rs, which delta-rs's
/// kernel turns on), and rustls then refuses to pick one by itself.
pub fn install_tls_provider() {
    let _ = rustls::crypto::ring::default_provider().install_default();
}
