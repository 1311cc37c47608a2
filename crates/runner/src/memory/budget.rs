//! The job's memory budget: `resources.memory`, else the cgroup's limit,
//! else a share of physical memory.

use std::path::{Path, PathBuf};

use anyhow::Result;
use kanon_engine::spec::JobSpec;

use kanon_io::release::parse_size;

/// Share of physical memory a job may use when neither the job nor a
/// cgroup sets a limit: the rest is the page cache, the operating system
/// and whatever else runs on the machine.
const PHYSICAL_SHARE: f64 = 0.8;

/// Cgroup limits at or above this are "no limit" (cgroup v1 writes
/// `9223372036854771712` when none is set).
const NO_LIMIT: u64 = 1 << 60;

/// Where a budget comes from, for the messages that quote it.
#[derive(Debug, Clone, PartialEq)]
pub(crate) enum Source {
    /// `resources.memory` (the job file, `KANON_RESOURCES_MEMORY`, `--set`
    /// or `--memory`).
    Setting(String),
    /// The memory limit of the cgroup the process runs in.
    Cgroup(PathBuf),
    /// A share of the machine's physical memory.
    Physical {
        /// Its total in bytes.
        total: u64,
    },
}

/// The bytes a whole job may hold in memory.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Budget {
    /// Its size in bytes.
    pub bytes: u64,
    /// Where it comes from.
    pub source: Source,
}

impl Budget {
    /// The job's budget. `None` only where neither the job, a cgroup nor
    /// `/proc/meminfo` says anything (not Linux): the job then runs
    /// unbudgeted, as before, and says so in its log.
    pub fn of(spec: &JobSpec) -> Result<Option<Budget>> {
        if let Some(s) = &spec.resources.memory {
            return Ok(Some(Budget {
                bytes: parse_size("resources.memory", s)?,
                source: Source::Setting(s.clone()),
            }));
        }
        if let Some((path, bytes)) = cgroup_limit(&cgroup_root()) {
            return Ok(Some(Budget {
                bytes,
                source: Source::Cgroup(path),
            }));
        }
        Ok(physical_memory().map(|total| Budget {
            bytes: (total as f64 * PHYSICAL_SHARE) as u64,
            source: Source::Physical { total },
        }))
    }

    /// The budget and where it comes from, in words.
    pub fn describe(&self) -> String {
        let size = super::human(self.bytes);
        match &self.source {
            Source::Setting(s) => format!("{size} (resources.memory = \"{s}\")"),
            Source::Cgroup(path) => {
                format!("{size} (the memory limit of this container's cgroup, {})", path.display())
            }
            Source::Physical { total } => format!(
                "{size} ({:.0} % of the machine's {}, as no resources.memory and no cgroup limit is set)",
                PHYSICAL_SHARE * 100.0,
                super::human(*total)
            ),
        }
    }
}

/// The cgroup file system's mount point; `KANON_TEST_CGROUP_ROOT` points
/// the tests at a directory that looks like one.
fn cgroup_root() -> PathBuf {
    std::env::var_os("KANON_TEST_CGROUP_ROOT")
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from("/sys/fs/cgroup"))
}

/// The memory limit of this process's cgroup under `root`: cgroup v2's
/// `memory.max` of the process's own group (`/proc/self/cgroup`'s `0::`
/// line) or of the root, else cgroup v1's `memory/memory.limit_in_bytes`.
/// `None` when no limit is set.
fn cgroup_limit(root: &Path) -> Option<(PathBuf, u64)> {
    let own = std::fs::read_to_string("/proc/self/cgroup")
        .ok()
        .and_then(|s| {
            s.lines()
                .find_map(|l| l.strip_prefix("0::"))
                .map(|p| p.trim_start_matches('/').to_string())
        })
        .filter(|p| !p.is_empty());
    let mut candidates = Vec::new();
    if let Some(own) = own {
        candidates.push(root.join(own).join("memory.max"));
    }
    candidates.push(root.join("memory.max"));
    candidates.push(root.join("memory").join("memory.limit_in_bytes"));
    candidates.into_iter().find_map(|path| {
        let text = std::fs::read_to_string(&path).ok()?;
        let bytes = parse_limit(&text)?;
        Some((path, bytes))
    })
}

/// A cgroup memory limit file's value: `None` for `max` or a value meaning
/// no limit.
fn parse_limit(text: &str) -> Option<u64> {
    let v: u64 = text.trim().parse().ok()?;
    (v > 0 && v < NO_LIMIT).then_some(v)
}

/// `MemTotal` of `/proc/meminfo`, in bytes.
fn physical_memory() -> Option<u64> {
    let text = std::fs::read_to_string("/proc/meminfo").ok()?;
    let line = text.lines().find_map(|l| l.strip_prefix("MemTotal:"))?;
    let kib: u64 = line.trim().strip_suffix("kB")?.trim().parse().ok()?;
    Some(kib * 1024)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_cgroup_limits() {
        assert_eq!(parse_limit("max\n"), None);
        assert_eq!(parse_limit("9223372036854771712\n"), None);
        assert_eq!(parse_limit("4294967296\n"), Some(4 << 30));
        let dir = tempfile::tempdir().unwrap();
        assert_eq!(cgroup_limit(dir.path()), None);
        std::fs::create_dir(dir.path().join("memory")).unwrap();
        std::fs::write(
            dir.path().join("memory").join("memory.limit_in_bytes"),
            "536870912\n",
        )
        .unwrap();
        assert_eq!(
            cgroup_limit(dir.path()).map(|(_, b)| b),
            Some(512 << 20),
            "cgroup v1"
        );
        std::fs::write(dir.path().join("memory.max"), "1073741824\n").unwrap();
        assert_eq!(
            cgroup_limit(dir.path()).map(|(_, b)| b),
            Some(1 << 30),
            "cgroup v2 before v1"
        );
        std::fs::write(dir.path().join("memory.max"), "max\n").unwrap();
        assert_eq!(
            cgroup_limit(dir.path()).map(|(_, b)| b),
            Some(512 << 20),
            "no v2 limit: v1's"
        );
    }

    #[test]
    fn physical_memory_is_read_on_linux() {
        if cfg!(target_os = "linux") {
            assert!(physical_memory().unwrap() > 1 << 20);
        }
    }
}
