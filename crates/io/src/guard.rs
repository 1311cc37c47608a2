//! The output-path guard: nothing a command writes (the release, the
//! metrics JSON, the report, their temporary files, a `kanon sql --output`)
//! may land on anything the command reads (the input, the job file, the
//! hierarchy files, the population table, the release it checks).
//!
//! Every writer asks one [`Reads`] before it writes anything, and the
//! refusal names both paths and the flag. Paths are compared as
//! [`Location::overlaps`] compares them: local paths by the real path of
//! their nearest existing ancestor with `.` and `..` of the rest resolved
//! by name (so `dir/./absent/../in.parquet`, a symbolic link, a trailing
//! slash or a relative spelling of the input are all seen through), S3
//! keys by segment.

use anyhow::Result;

use crate::config::JobFile;
use crate::exit::Failure;
use crate::storage::Location;

/// What one command reads (or has already claimed for writing), each with
/// what it is, for the refusal.
#[derive(Debug, Default)]
pub struct Reads {
    items: Vec<(String, Location)>,
}

impl Reads {
    /// The files a job names: its job file, its hierarchy files (as
    /// resolved) and its population table.
    ///
    /// # Errors
    /// A bad-input failure when the population location does not parse.
    pub fn of_job(job: &JobFile) -> Result<Reads> {
        let mut reads = Reads::default();
        reads.add("the job file", Location::Local(job.path.clone()));
        for (attribute, path, _) in job.spec().hierarchy_files() {
            reads.add(
                format!("the hierarchy file of attribute `{attribute}`"),
                Location::Local(job.resolve(path)),
            );
        }
        if let Some(population) = job.population()? {
            reads.add("the population table (`risk.population`)", population);
        }
        Ok(reads)
    }

    /// Adds a location the command reads or writes.
    pub fn add(&mut self, what: impl Into<String>, location: Location) {
        self.items.push((what.into(), location));
    }

    /// Refuses `target`, written as `what` (e.g. `the metrics JSON
    /// (--metrics-json)`), when it is, contains or lies inside anything
    /// read or already written.
    ///
    /// # Errors
    /// A bad-input failure naming both paths.
    pub fn check(&self, what: &str, target: &Location) -> Result<()> {
        if let Some((read, at)) = self.items.iter().find(|(_, at)| target.overlaps(at)) {
            return Err(Failure::bad_input(format!(
                "{what} {target} is, contains or lies inside {read} {at}: writing it would overwrite or replace what this command reads; choose another path"
            ))
            .into());
        }
        Ok(())
    }

    /// [`Reads::check`], then adds `target`, so that the next artefact may
    /// not land on it either.
    ///
    /// # Errors
    /// As [`Reads::check`].
    pub fn claim(&mut self, what: &str, target: Location) -> Result<()> {
        self.check(what, &target)?;
        self.add(what.to_string(), target);
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use std::path::{Component, Path, PathBuf};

    use proptest::prelude::*;

    use super::*;

    /// A directory with what a job reads: an input file, an input
    /// directory with a part, a job file, a hierarchy file, and a symbolic
    /// link to the input directory.
    fn layout() -> (tempfile::TempDir, Vec<PathBuf>) {
        let dir = tempfile::tempdir().unwrap();
        let d = dir.path().canonicalize().unwrap();
        std::fs::create_dir_all(d.join("data/sub")).unwrap();
        std::fs::create_dir_all(d.join("conf")).unwrap();
        for f in [
            "in.parquet",
            "data/part-0.parquet",
            "conf/job.toml",
            "conf/sex.csv",
        ] {
            std::fs::write(d.join(f), b"x").unwrap();
        }
        std::os::unix::fs::symlink(d.join("data"), d.join("link")).unwrap();
        let reads = vec![
            d.join("in.parquet"),
            d.join("data"),
            d.join("conf/job.toml"),
            d.join("conf/sex.csv"),
        ];
        (dir, reads)
    }

    /// `path` spelled another way by `ops`: `.` segments, `absent/..` and
    /// `sub/..` detours, the symbolic link for `data`, a relative spelling
    /// from the current directory, a trailing slash.
    fn alias(path: &Path, ops: &[u8]) -> String {
        let mut parts: Vec<String> = path
            .components()
            .filter_map(|c| match c {
                Component::Normal(s) => Some(s.to_string_lossy().into_owned()),
                _ => None,
            })
            .collect();
        let mut relative = false;
        let mut trailing = false;
        for (i, op) in ops.iter().enumerate() {
            let at = (*op as usize / 8) % (parts.len() + 1);
            // Detours only below the root's first segment, so `..` never
            // climbs past `/`.
            let at = at.max(1).min(parts.len());
            match op % 8 {
                0 => parts.insert(at, ".".into()),
                1 => {
                    parts.insert(at, "..".into());
                    parts.insert(at, format!("absent-{i}"));
                }
                2 => {
                    if let Some(j) = parts.iter().position(|p| p == "data") {
                        parts[j] = "link".into();
                    }
                }
                3 => relative = true,
                4 => trailing = true,
                5 => {
                    parts.insert(at, "..".into());
                    parts.insert(at, "absent".into());
                    parts.insert(at, ".".into());
                }
                _ => {}
            }
        }
        let joined = parts.join("/");
        let mut s = if relative {
            let depth = std::env::current_dir().unwrap().components().count() - 1;
            format!("{}{joined}", "../".repeat(depth))
        } else {
            format!("/{joined}")
        };
        if trailing {
            s.push('/');
        }
        s
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(200))]

        /// Issue 32: whatever the spelling, a target that is, contains or
        /// lies in something read is refused, naming both paths; and a
        /// sibling is not.
        #[test]
        fn aliases_of_what_is_read_are_refused(which in 0usize..4, ops in proptest::collection::vec(any::<u8>(), 0..6), inside in any::<bool>()) {
            let (_dir, reads) = layout();
            let mut guard = Reads::default();
            for (i, r) in reads.iter().enumerate() {
                guard.add(format!("read {i}"), Location::Local(r.clone()));
            }
            let mut target = reads[which].clone();
            if inside && which == 1 {
                target = target.join("sub/new.parquet");
            }
            let spelled = alias(&target, &ops);
            let err = guard
                .check("the metrics JSON (--metrics-json)", &Location::Local(PathBuf::from(&spelled)))
                .unwrap_err()
                .to_string();
            prop_assert!(err.contains(&spelled) && err.contains(&reads[which].display().to_string()), "{}", err);
            // A sibling of the input file, spelled the same ways, is fine.
            let sibling = alias(&reads[0].with_file_name("release.parquet"), &ops);
            prop_assert!(guard.check("the release", &Location::Local(PathBuf::from(&sibling))).is_ok(), "{}", sibling);
        }

        /// S3 keys that normalise alike (`//`, `./`, a trailing slash).
        #[test]
        fn s3_keys_that_normalise_alike_are_refused(ops in proptest::collection::vec(0u8..3, 0..4)) {
            let mut guard = Reads::default();
            guard.add("the input", Location::parse("s3://lake/in/adult.parquet").unwrap());
            let mut key = String::from("in/adult.parquet");
            for op in ops {
                key = match op {
                    0 => key.replacen('/', "//", 1),
                    1 => format!("./{key}"),
                    _ => key.replacen('/', "/./", 1),
                };
            }
            let target = Location::parse(&format!("s3://lake/{key}")).unwrap();
            prop_assert!(guard.check("the report (--report)", &target).is_err(), "{}", key);
        }
    }
}
