//! The S3 side of [`Storage`]: building a bucket's client from the
//! environment, the shared profile files and the job's `[storage]`
//! settings; the operations only object stores have (listing, conditional
//! copy, removing stale temporary objects); and [`s3_error`], which turns an
//! object store error into a message that says what to check. Kept apart
//! from the blocking API so the credential and retry rules are in one place.

use std::sync::Arc;
use std::time::Duration;

use anyhow::Result;
use futures::{StreamExt, TryStreamExt};
use object_store::aws::{AmazonS3Builder, AmazonS3ConfigKey};
use object_store::path::Path as ObjectPath;
use object_store::{ClientOptions, ObjectMeta, ObjectStore, ObjectStoreExt, RetryConfig};

use super::{aws_chain, FileMeta, Location, Storage};
use crate::exit::Failure;

impl Storage {
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
        let env_keys = env("AWS_ACCESS_KEY_ID").is_some();
        // Keys in the environment make the profile files optional (a
        // malformed file is then ignored, as before); a named profile must
        // exist all the same.
        let profile = aws_chain::load_profile(profile_name.as_deref(), env_keys)?;
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
        // Without keys in the environment, credentials come from the AWS
        // SDK's chain (profile, with assume-role, SSO and credential_process;
        // web identity; the container endpoint), cached and renewed before
        // they expire. The instance metadata service is only asked on AWS
        // itself: with a custom endpoint, no credentials is a configuration
        // error, reported on the first request (see `aws_chain`).
        if !env_keys {
            let custom_endpoint = b.get_config_value(&AmazonS3ConfigKey::Endpoint).is_some();
            let region = b.get_config_value(&AmazonS3ConfigKey::Region);
            b = b.with_credentials(Arc::new(aws_chain::chain(
                bucket,
                profile_name.as_deref(),
                region.as_deref(),
                !custom_endpoint,
            )));
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

    /// Copies `from` to `to`, replacing `to` (a server-side copy).
    ///
    /// # Errors
    /// Store failures.
    pub fn copy(&self, from: &Location, to: &Location) -> Result<()> {
        let (store, src) = self.remote(from)?;
        let (_, dst) = self.remote(to)?;
        self.block_on(store.copy(&src, &dst))
            .map_err(|e| s3_error(e, to))
    }

    /// Refuses to publish to a bucket whose store ignores conditional
    /// writes (issue 32, item 4): kanon's publication without
    /// `--overwrite` and every Delta commit rely on `If-None-Match: *`, so
    /// behind such a store two concurrent runs could both "publish" and a
    /// Delta commit could be lost with exit 0. Probes once per bucket and
    /// run: an empty object created twice next to `at` with
    /// `If-None-Match: *`, where the second must be refused; the probe is
    /// removed. `storage.single_writer = true` skips it (the operator
    /// serialises the writers). Local paths need no probe.
    ///
    /// # Errors
    /// A bad-input failure naming the bucket and the ways out; store
    /// failures of the probe.
    pub fn check_conditional_writes(&self, at: &Location) -> Result<()> {
        let Location::S3 { bucket, key } = at else {
            return Ok(());
        };
        if self.settings.single_writer == Some(true) {
            return Ok(());
        }
        if let Some(&honoured) = self
            .probed
            .lock()
            .expect("probe cache lock")
            .get(bucket.as_str())
        {
            return self.conditional_verdict(bucket, honoured);
        }
        let dir = key
            .trim_end_matches('/')
            .rsplit_once('/')
            .map_or("", |(d, _)| d);
        let nanos = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| d.as_nanos());
        let name = format!("{}probe-{nanos}", crate::release::tmp_prefix());
        let probe = Location::S3 {
            bucket: bucket.clone(),
            key: if dir.is_empty() {
                name
            } else {
                format!("{dir}/{name}")
            },
        };
        let (store, path) = self.remote(&probe)?;
        let create = || object_store::PutOptions {
            mode: object_store::PutMode::Create,
            ..Default::default()
        };
        self.block_on(store.put_opts(&path, Vec::<u8>::new().into(), create()))
            .map_err(|e| s3_error(e, &probe))?;
        let second = self.block_on(store.put_opts(&path, Vec::<u8>::new().into(), create()));
        let _ = self.block_on(store.delete(&path));
        let honoured = match second {
            Err(
                object_store::Error::AlreadyExists { .. }
                | object_store::Error::Precondition { .. },
            ) => true,
            Ok(_) => false,
            Err(e) => return Err(s3_error(e, &probe)),
        };
        self.probed
            .lock()
            .expect("probe cache lock")
            .insert(bucket.clone(), honoured);
        self.conditional_verdict(bucket, honoured)
    }

    fn conditional_verdict(&self, bucket: &str, honoured: bool) -> Result<()> {
        if honoured {
            return Ok(());
        }
        Err(Failure::bad_input(format!(
            "the object store of bucket `{bucket}` ignores conditional writes (a probe object was created twice with `If-None-Match: *`): two concurrent runs could both publish, or a Delta commit be lost, while exiting 0, so nothing is written. Use a store that supports conditional writes (AWS S3, recent MinIO, R2, ...), or, when only one kanon at a time writes to this bucket (e.g. under `flock`, as deploy/systemd runs it), set `storage.single_writer = true`"
        ))
        .into())
    }

    /// The store and object path of an S3 location.
    pub(super) fn remote(&self, loc: &Location) -> Result<(Arc<dyn ObjectStore>, ObjectPath)> {
        match loc {
            Location::S3 { bucket, .. } => {
                Ok((self.s3(bucket)?, loc.object_path().unwrap_or_default()))
            }
            Location::Local(_) => unreachable!("remote() on a local path"),
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

    /// Whether any object lies under the prefix `loc` (one list request).
    pub fn any_under(&self, loc: &Location) -> Result<bool> {
        let Location::S3 { bucket, key } = loc else {
            unreachable!("any_under() on a local path")
        };
        let store = self.s3(bucket)?;
        let prefix = ObjectPath::from(key.trim_end_matches('/'));
        let first = self
            .block_on(async { store.list(Some(&prefix)).next().await })
            .transpose()
            .map_err(|e| s3_error(e, loc))?;
        Ok(first.is_some())
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
}

pub(super) fn meta_of(bucket: &str, m: ObjectMeta) -> FileMeta {
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
    if let Some(u) =
        std::error::Error::source(&e).and_then(|s| s.downcast_ref::<aws_chain::Unavailable>())
    {
        return Failure::new(crate::exit::object_store_code(&e), u.0.clone()).into();
    }
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
