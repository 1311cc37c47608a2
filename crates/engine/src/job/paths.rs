//! Where a path written in a job file points: one rule for every front end
//! (the command line's job loader, SQL's `config` option and hierarchy
//! files), so `configs/adult.toml` names the same files from the
//! repository root, from `configs/`, and inside `anonymize(...)`.
//!
//! The engine does no I/O: the front end answers `exists` from its own file
//! system (and SQL then checks the result against the directories its
//! session may read).

use std::path::{Path, PathBuf};

/// Resolves `written`, a path written in the job file `job_file` (or given
/// without one): as written when it is absolute or `exists`, else relative
/// to the job file's directory, then to that directory's parent; as
/// written when neither exists, so the front end's error names the path
/// the user wrote.
///
/// A glob (`data/part-*.parquet`) has no file of its own name: when no
/// candidate exists, it is resolved where its directory exists, in the same
/// order. A file whose name only looks like a glob (`age[5].csv`) is found
/// where it exists first.
///
/// ```
/// use std::path::{Path, PathBuf};
/// use kanon_engine::job::paths::resolve;
///
/// // The repository root holds data/; the job file lives in configs/.
/// let exists = |p: &Path| p.starts_with("repo/configs/../data") || p == Path::new("repo/configs/../data/adult");
/// let job = Some(Path::new("repo/configs/adult.toml"));
/// assert_eq!(
///     resolve("data/adult/adult.parquet", job, exists),
///     PathBuf::from("repo/configs/../data/adult/adult.parquet"),
/// );
/// assert_eq!(
///     resolve("data/adult/part-*.parquet", job, exists),
///     PathBuf::from("repo/configs/../data/adult/part-*.parquet"),
/// );
/// // Nowhere: as written.
/// assert_eq!(resolve("elsewhere.csv", job, exists), PathBuf::from("elsewhere.csv"));
/// ```
pub fn resolve(written: &str, job_file: Option<&Path>, exists: impl Fn(&Path) -> bool) -> PathBuf {
    let direct = PathBuf::from(written);
    if direct.is_absolute() || exists(&direct) {
        return direct;
    }
    let Some(job_file) = job_file else {
        return direct;
    };
    let dir = job_file.parent().unwrap_or(Path::new("."));
    let candidates = [dir.join(written), dir.join("..").join(written)];
    if let Some(found) = candidates.iter().find(|c| exists(c)) {
        return found.clone();
    }
    let glob = written.contains(['*', '?', '[']);
    match candidates
        .into_iter()
        .find(|c| glob && c.parent().is_some_and(&exists))
    {
        Some(pattern) => pattern,
        None => direct,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The job file's directory wins over its parent, and the current
    /// directory over both.
    #[test]
    fn the_nearest_existing_candidate_wins() {
        let everywhere = |_: &Path| true;
        let job = Some(Path::new("a/b/job.toml"));
        assert_eq!(resolve("h.csv", job, everywhere), PathBuf::from("h.csv"));
        let not_cwd = |p: &Path| p != Path::new("h.csv");
        assert_eq!(resolve("h.csv", job, not_cwd), PathBuf::from("a/b/h.csv"));
        let parent_only = |p: &Path| p == Path::new("a/b/../h.csv");
        assert_eq!(
            resolve("h.csv", job, parent_only),
            PathBuf::from("a/b/../h.csv")
        );
        assert_eq!(resolve("h.csv", None, parent_only), PathBuf::from("h.csv"));
        assert_eq!(
            resolve("/abs/h.csv", job, |_| false),
            PathBuf::from("/abs/h.csv")
        );
    }

    /// A glob is resolved where its directory exists, but only when no
    /// candidate exists as a file: a name that merely holds `[` is found
    /// where it is.
    #[test]
    fn globs_resolve_by_their_directory_after_existing_files() {
        let job = Some(Path::new("a/b/job.toml"));
        let dirs = |p: &Path| p == Path::new("a/b/data") || p == Path::new("a/b/../data");
        assert_eq!(
            resolve("data/part-*.parquet", job, dirs),
            PathBuf::from("a/b/data/part-*.parquet")
        );
        let parent_file = |p: &Path| p == Path::new("a/b") || p == Path::new("a/b/../age[5].csv");
        assert_eq!(
            resolve("age[5].csv", job, parent_file),
            PathBuf::from("a/b/../age[5].csv")
        );
        assert_eq!(
            resolve("nowhere/*.csv", job, dirs),
            PathBuf::from("nowhere/*.csv")
        );
    }
}
