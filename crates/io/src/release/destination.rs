//! The destination of a release: whether it may be written (it is free, or
//! may be replaced, and of the right kind: a file or a directory of parts),
//! checked before the run and again at commit, and the local rename of a
//! finished temporary directory into place.

use std::fs::File;
use std::path::Path;

use anyhow::{Context, Result};

use super::temporaries::{remove_stale, tmp_prefix};
use crate::exit::{Failure, OUTPUT_EXISTS};
use crate::storage::{Location, Storage};

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
    if let Location::Local(p) = dest {
        under_directories(p)?;
    }
    remove_stale(storage, dest, split);
    destination_free(storage, dest, split, overwrite)
}

/// Refuses a local output whose nearest existing ancestor is not a
/// directory (`file.txt/out.parquet`): the job names a wrong path, which a
/// retry cannot fix (exit 2, not 4).
///
/// # Errors
/// A bad-input failure naming the output and the file in its way.
fn under_directories(path: &std::path::Path) -> Result<()> {
    let mut ancestor = path.parent();
    while let Some(a) = ancestor {
        if a.as_os_str().is_empty() {
            break;
        }
        if let Ok(meta) = std::fs::metadata(a) {
            if meta.is_dir() {
                return Ok(());
            }
            return Err(Failure::bad_input(format!(
                "output {} cannot be written: {} is a file, not a directory; choose an output path in a directory",
                path.display(),
                a.display()
            ))
            .into());
        }
        ancestor = a.parent();
    }
    Ok(())
}

/// [`check_destination`] without the cleanup (at commit, where the run's own
/// staged objects exist).
pub(super) fn destination_free(
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

/// Renames a finished temporary directory into place.
pub(super) fn commit_dir(tmp: tempfile::TempDir, dest: &Path, overwrite: bool) -> Result<()> {
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

pub(super) fn sync_parent(dest: &Path) {
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
