//! Publishing parts that other processes wrote (issue 35): workers write
//! their parts of a split release to a staging prefix beside the release,
//! and the process that verified the whole release adopts them, moving
//! them into place with the manifest and `_SUCCESS` (the same layout,
//! checks and commit order as a split release written by one process,
//! [`super::ReleaseWriter`]).

use anyhow::{Context, Result};

use super::destination::{commit_dir, destination_free, sync_parent};
use super::manifest::{Manifest, MANIFEST, SUCCESS};
use super::temporaries::tmp_prefix;
use crate::certificate::Certificate;
use crate::storage::{Location, Storage};

/// Parts copied into place at once on S3.
const COPIES: usize = 16;

/// A part written by another process, as it reported it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StagedPart {
    /// Where it was written (under the staging prefix).
    pub location: Location,
    /// Rows published in it.
    pub rows: u64,
    /// Its size in bytes.
    pub bytes: u64,
    /// `sha256:` of its bytes.
    pub sha256: String,
}

/// The staging prefix of the release at `dest` for the run `token`: a
/// sibling of the release (never inside it: an existing release is not
/// touched before the commit, and a reader of the release never lists
/// staged parts).
pub fn staging_location(dest: &Location, token: &str) -> Location {
    match dest {
        Location::Local(p) => {
            let name = p
                .file_name()
                .map(|n| n.to_string_lossy().into_owned())
                .unwrap_or_else(|| "release".into());
            Location::Local(p.with_file_name(format!("_{name}.kanon-staging-{token}")))
        }
        Location::S3 { bucket, key } => {
            let key = key.trim_end_matches('/');
            let (dir, name) = key.rsplit_once('/').unwrap_or(("", key));
            let staged = format!("_{name}.kanon-staging-{token}/");
            Location::S3 {
                bucket: bucket.clone(),
                key: if dir.is_empty() {
                    staged
                } else {
                    format!("{dir}/{staged}")
                },
            }
        }
    }
}

/// Removes everything under the staging prefix `staging` (best effort;
/// returns what could not be removed, to name it).
pub fn remove_staging(storage: &Storage, staging: &Location) -> Vec<Location> {
    match staging {
        Location::Local(p) => match std::fs::remove_dir_all(p) {
            Ok(()) => Vec::new(),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => Vec::new(),
            Err(_) => vec![staging.clone()],
        },
        Location::S3 { .. } => match storage.list(staging) {
            Ok(files) => files
                .into_iter()
                .filter(|f| storage.delete(&f.location).is_err())
                .map(|f| f.location)
                .collect(),
            Err(_) => vec![staging.clone()],
        },
    }
}

/// Publishes `parts` (all under `staging`) as the split release at `dest`,
/// with the manifest carrying `certificate` (its files filled in, and
/// signed with `KANON_SIGNING_KEY` when set): each part keeps its name, the
/// manifest and `_SUCCESS` are written last. Without `overwrite` an
/// existing release is refused (exit 5), also when one appears meanwhile.
/// The staging prefix is removed once the release is in place. Call only
/// after the release was verified.
///
/// # Errors
/// An existing release without `overwrite`; store failures. On failure
/// nothing is published (what was copied is removed); the staged parts
/// stay for the caller to remove ([`remove_staging`]).
pub fn adopt(
    storage: &Storage,
    parts: &[StagedPart],
    staging: &Location,
    dest: &Location,
    certificate: Certificate,
    overwrite: bool,
) -> Result<Vec<Location>> {
    destination_free(storage, dest, true, overwrite)?;
    let name_of = |l: &Location| super::manifest::relative_name(staging, l);
    let files: Vec<Location> = parts
        .iter()
        .map(|p| dest.join(&name_of(&p.location)))
        .collect();
    let listed: Vec<(Location, u64, u64, String)> = parts
        .iter()
        .zip(&files)
        .map(|(p, f)| (f.clone(), p.rows, p.bytes, p.sha256.clone()))
        .collect();
    let certificate = crate::publish::certify(
        &certificate,
        dest,
        listed.iter().map(|(l, rows, _, h)| (l, *rows, h.as_str())),
    )?;
    let manifest = Manifest::new(dest, &listed, certificate).to_bytes();
    match dest {
        Location::Local(dest_path) => {
            let Location::Local(staging_path) = staging else {
                anyhow::bail!("parts staged on S3 for a local release (a bug in kanon)");
            };
            let parent = match dest_path.parent() {
                Some(d) if !d.as_os_str().is_empty() => d.to_path_buf(),
                _ => std::path::PathBuf::from("."),
            };
            let tmp = tempfile::Builder::new()
                .prefix(&tmp_prefix())
                .tempdir_in(&parent)
                .with_context(|| {
                    format!(
                        "cannot create a temporary directory in {}",
                        parent.display()
                    )
                })?;
            for p in parts {
                let Location::Local(from) = &p.location else {
                    anyhow::bail!("a part staged on S3 for a local release (a bug in kanon)");
                };
                let name = name_of(&p.location);
                std::fs::rename(from, tmp.path().join(&name)).with_context(|| {
                    format!(
                        "cannot move the staged part {} into the release",
                        from.display()
                    )
                })?;
            }
            for (name, bytes) in [(MANIFEST, manifest.as_slice()), (SUCCESS, &[][..])] {
                std::fs::write(tmp.path().join(name), bytes).with_context(|| {
                    format!(
                        "cannot write the release's {name} in {}",
                        dest_path.display()
                    )
                })?;
            }
            commit_dir(tmp, dest_path, overwrite)?;
            sync_parent(dest_path);
            let _ = std::fs::remove_dir_all(staging_path);
        }
        Location::S3 { .. } => {
            // Server-side copies, COPIES at a time: a release of hundreds
            // of parts is in place in a few rounds.
            let next = std::sync::atomic::AtomicUsize::new(0);
            let copied: Vec<Result<()>> = std::thread::scope(|scope| {
                let workers: Vec<_> = (0..COPIES.min(parts.len()))
                    .map(|_| {
                        scope.spawn(|| {
                            let mut done = Vec::new();
                            loop {
                                let i = next.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
                                let (Some(p), Some(to)) = (parts.get(i), files.get(i)) else {
                                    return done;
                                };
                                let r = match overwrite {
                                    true => storage.copy(&p.location, to),
                                    false => storage.copy_if_not_exists(&p.location, to),
                                };
                                done.push((i, r));
                            }
                        })
                    })
                    .collect();
                let mut all: Vec<(usize, Result<()>)> = workers
                    .into_iter()
                    .flat_map(|w| w.join().unwrap_or_default())
                    .collect();
                all.sort_by_key(|(i, _)| *i);
                all.into_iter().map(|(_, r)| r).collect()
            });
            if copied.len() != parts.len() || copied.iter().any(Result::is_err) {
                // Take back every copy that landed; name the first failure.
                for (to, r) in files.iter().zip(&copied) {
                    if r.is_ok() {
                        let _ = storage.delete(to);
                    }
                }
                return Err(copied.into_iter().find_map(Result::err).unwrap_or_else(|| {
                    anyhow::anyhow!("a copy of a part did not finish (a bug in kanon)")
                }));
            }
            let markers = [dest.join(MANIFEST), dest.join(SUCCESS)];
            if overwrite {
                for old in storage.list(dest)? {
                    if !files.contains(&old.location) && !markers.contains(&old.location) {
                        storage.delete(&old.location).with_context(|| {
                            format!("cannot remove {} of the replaced release", old.location)
                        })?;
                    }
                }
            }
            storage.put(&markers[0], &manifest, true)?;
            storage.put(&markers[1], &[], true)?;
            for l in remove_staging(storage, staging) {
                tracing::warn!(location = %l, "cannot remove a staged part; remove it by hand");
            }
        }
    }
    Ok(files)
}
