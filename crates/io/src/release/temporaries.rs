//! The names of the temporary files, directories and objects a release
//! (and a spill) writes next to its destination, and the cleanup of those a
//! killed run left behind (see the module docs of [`crate::release`]). The
//! names carry the host and pid so that a later run can tell whether their
//! owner is gone.

use std::path::Path;

use crate::storage::{Location, Storage};

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
pub(super) fn remove_stale(storage: &Storage, dest: &Location, split: bool) {
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

/// The hidden key a file is uploaded to before a conditional commit:
/// `.kanon-tmp-<random>-<name>` next to it, easy to find and to clean up
/// (the names of [`remove_stale`]).
pub(super) fn staging_key(dest: &Location) -> Location {
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
