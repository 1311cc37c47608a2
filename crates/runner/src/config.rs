//! Loading a job file and applying command-line overrides.
//!
//! Relative paths in a job file (input, output, hierarchy files) are
//! resolved against the current directory when they exist there, else
//! against the job file's directory and then its parent, so
//! `configs/adult.toml` runs from the repository root and from `configs/`.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use anyhow::{bail, Context, Result};
use kanon_engine::hierarchy::Hierarchy;
use kanon_engine::spec::JobSpec;
use rustc_hash::FxHashMap;

use crate::JobArgs;

/// A loaded job: the spec, where its file lives, and its hierarchies.
#[derive(Debug, Clone)]
pub struct Job {
    /// The spec with overrides applied.
    pub spec: JobSpec,
    /// The job file.
    pub path: PathBuf,
    /// Parsed hierarchy files by the path written in the spec.
    pub hierarchies: FxHashMap<String, Arc<Hierarchy>>,
}

impl Job {
    /// Loads and validates a job file with overrides.
    pub fn load(args: &JobArgs) -> Result<Job> {
        let path = args.config.clone();
        let text = std::fs::read_to_string(&path)
            .with_context(|| format!("cannot read job file {}", path.display()))?;
        let mut spec: JobSpec = toml::from_str(&text)
            .with_context(|| format!("job file {} is not a valid kanon job", path.display()))?;
        if let Some(k) = args.k {
            spec.privacy.k = k;
        }
        if let Some(a) = &args.algorithm {
            spec.algorithm.name = a.clone();
        }
        if let Some(s) = args.seed {
            spec.algorithm.seed = s;
        }
        if let Some(s) = args.suppression_limit {
            spec.privacy.suppression_limit = Some(s);
        }
        spec.validate()
            .with_context(|| format!("in job file {}", path.display()))?;
        let mut job = Job {
            spec,
            path,
            hierarchies: FxHashMap::default(),
        };
        let files: Vec<(String, String, char)> = job
            .spec
            .hierarchy_files()
            .map(|(a, p, d)| (a.to_string(), p.to_string(), d))
            .collect();
        for (attribute, file, delimiter) in files {
            let resolved = job.resolve(&file);
            let text = std::fs::read_to_string(&resolved).with_context(|| {
                format!(
                    "cannot read hierarchy file {} of attribute `{attribute}` (setting attributes.{attribute}.hierarchy in {})",
                    resolved.display(),
                    job.path.display()
                )
            })?;
            let h = Hierarchy::from_csv(&resolved.display().to_string(), &text, delimiter)
                .with_context(|| format!("hierarchy of attribute `{attribute}`"))?;
            job.hierarchies.insert(file, Arc::new(h));
        }
        Ok(job)
    }

    /// Resolves a path written in the job file.
    pub fn resolve(&self, p: &str) -> PathBuf {
        let direct = PathBuf::from(p);
        if direct.is_absolute() || direct.exists() {
            return direct;
        }
        let dir = self.path.parent().unwrap_or(Path::new("."));
        for base in [dir.to_path_buf(), dir.join("..")] {
            let candidate = base.join(p);
            if candidate.exists() {
                return candidate;
            }
        }
        direct
    }

    /// Resolves an output path: relative to the current directory, unless
    /// its parent only exists relative to the job file.
    pub fn resolve_output(&self, p: &str) -> PathBuf {
        let direct = PathBuf::from(p);
        if direct.is_absolute()
            || direct
                .parent()
                .is_none_or(|d| d.as_os_str().is_empty() || d.exists())
        {
            return direct;
        }
        let dir = self.path.parent().unwrap_or(Path::new("."));
        let root = dir.join("..");
        if root.join(p).parent().is_some_and(|d| d.exists())
            || direct
                .components()
                .next()
                .is_some_and(|c| root.join(c).exists())
        {
            return root.join(p);
        }
        direct
    }

    /// The input path (`input.path`, or the override).
    pub fn input(&self, override_path: Option<&Path>) -> Result<PathBuf> {
        match (override_path, self.spec.input.path.as_deref()) {
            (Some(p), _) => Ok(p.to_path_buf()),
            (None, Some(p)) => Ok(self.resolve(p)),
            (None, None) => bail!(
                "no input: set `input.path` in {} or pass --input",
                self.path.display()
            ),
        }
    }
}
