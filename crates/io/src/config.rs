//! Loading a job file, with overrides from `KANON_*` environment variables
//! and the command line.
//!
//! Precedence, lowest first: the job file, then environment variables
//! `KANON_<SECTION>_<KEY>` (sections `INPUT`, `OUTPUT`, `PRIVACY`,
//! `ALGORITHM`, `STORAGE`, `RESOURCES`; e.g. `KANON_PRIVACY_K=5`,
//! `KANON_PRIVACY_SUPPRESSION_LIMIT=0.02`, `KANON_STORAGE_ENDPOINT=...`),
//! then `--set section.key=value` and the dedicated flags (`--k`,
//! `--algorithm`, `--seed`, `--suppression-limit`, `--s3-endpoint`, ...).
//! Values are read as TOML (`5`, `0.02`, `true`, `[5, 10]`), else as a
//! string. The overrides are applied to the TOML document before it is
//! checked, so an unknown key or a bad value is reported like one written in
//! the file, with where it came from; `attributes.NAME.KEY` sets a key of
//! the attribute named NAME. Applying them, reading the document as a job
//! and the no-weakening rule are the engine's
//! ([`kanon_engine::job::overrides`]), shared with SQL's options.
//!
//! Relative paths in a job file (input, output, hierarchy files) are
//! resolved against the current directory when they exist there, else
//! against the job file's directory and then its parent, so
//! `configs/adult.toml` runs from the repository root and from `configs/`.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use anyhow::Result;
use kanon_engine::hierarchy::Hierarchy;
use kanon_engine::job::overrides::OverrideError;
use kanon_engine::job::{HierarchyText, JobError};
use kanon_engine::spec::JobSpec;
use rustc_hash::FxHashMap;

use crate::exit::Failure;
use crate::storage::Location;

/// The sections of a job file that environment variables may override.
pub const ENV_SECTIONS: [&str; 6] = [
    "input",
    "output",
    "privacy",
    "algorithm",
    "storage",
    "resources",
];

/// What a front end asks the loader for: the job file and the overrides
/// its user gave, in order of precedence (after `KANON_*` variables).
#[derive(Debug, Clone, Default)]
pub struct JobRequest {
    /// The job file (TOML).
    pub config: PathBuf,
    /// `--set section.key=value` as typed: parsed by the loader, so a bad
    /// one is reported with the other errors of the job.
    pub set: Vec<String>,
    /// The dedicated flags (`--k`, `--algorithm`, `--s3-endpoint`, ...) as
    /// overrides, applied after `set`.
    pub flags: Vec<Override>,
    /// Whether the overrides may weaken the file's privacy.
    pub weaken_privacy: bool,
}

impl JobRequest {
    /// The job file at `config` as written, with no overrides but `flags`:
    /// for commands that read a job without overriding it (`kanon
    /// inspect`).
    pub fn file(config: PathBuf, flags: Vec<Override>) -> Self {
        JobRequest {
            config,
            flags,
            ..JobRequest::default()
        }
    }
}

/// A job file, loaded: the engine's runnable job (the spec with every
/// override applied and validated, its hierarchies parsed) and the file it
/// came from, against which the paths it names resolve. What the engine
/// leaves to a front end (where the input, output and population are, the
/// keys of pseudonymised columns) is read here.
#[derive(Debug, Clone)]
pub struct JobFile {
    job: kanon_engine::job::Job,
    /// The job file (empty for a job that did not come from a file, e.g.
    /// `anonymize()`'s in `kanon sql`).
    pub path: PathBuf,
}

// One override of the job document, with where it came from: the
// engine's, shared with SQL's options (kanon_engine::job::overrides).
pub use kanon_engine::job::overrides::Override;

/// The environment variable holding the certificate signing key's secret
/// seed ([`crate::signing`]).
pub const SIGNING_KEY_ENV: &str = "KANON_SIGNING_KEY";

/// `KANON_*` variables that are not job settings: read by `kanon-job` and
/// the deploy files (deploy/README.md), the default pseudonym key, the
/// certificate signing key, the secret of differential privacy's draws,
/// and the test suite's hooks (`KANON_TEST_*`).
pub const OTHER_ENV_VARS: [&str; 10] = [
    "KANON_JOB",
    "KANON_OUTPUT",
    "KANON_TIMEOUT",
    "KANON_PARTITION",
    "KANON_METRICS_JSON",
    "KANON_REPORT",
    "KANON_BIN",
    kanon_engine::spec::DEFAULT_KEY_ENV,
    SIGNING_KEY_ENV,
    kanon_engine::algorithms::safepub::KEY_ENV,
];

/// The `KANON_*` variables of `vars`: the overrides they give
/// (`KANON_<SECTION>_<KEY>`), and the names of those that are neither an
/// override nor one of [`OTHER_ENV_VARS`] (a typo such as
/// `KANON_PRIVACYK`, which [`JobFile::load`] refuses unless the job names it as
/// a `key_env`).
pub fn env_overrides(vars: impl Iterator<Item = (String, String)>) -> (Vec<Override>, Vec<String>) {
    let mut out = Vec::new();
    let mut unknown = Vec::new();
    for (k, v) in vars {
        let Some(rest) = k.strip_prefix("KANON_") else {
            continue;
        };
        let setting = rest.split_once('_').and_then(|(section, key)| {
            let section = section.to_ascii_lowercase();
            (ENV_SECTIONS.contains(&section.as_str()) && !key.is_empty())
                .then(|| format!("{section}.{}", key.to_ascii_lowercase()))
        });
        match setting {
            // `KANON_OUTPUT_...` is an override; `KANON_OUTPUT` alone is
            // kanon-job's.
            Some(key) => out.push(Override::parse(&key, &v, k)),
            None if OTHER_ENV_VARS.contains(&k.as_str()) || rest.starts_with("TEST_") => {}
            None => unknown.push(k),
        }
    }
    out.sort_by(|a, b| a.source.cmp(&b.source));
    unknown.sort();
    (out, unknown)
}

/// The refusal of `KANON_*` variables that are no setting, each with the
/// override it most likely meant.
fn unknown_env_error(unknown: &[String]) -> Failure {
    let described: Vec<String> = unknown
        .iter()
        .map(|name| {
            let rest = &name["KANON_".len()..];
            let meant = ENV_SECTIONS.iter().find_map(|s| {
                let upper = s.to_ascii_uppercase();
                rest.strip_prefix(upper.as_str())
                    .filter(|key| !key.is_empty() && !key.starts_with('_'))
                    .map(|key| format!("KANON_{upper}_{key}"))
            });
            match meant {
                Some(m) => format!("`{name}` (did you mean `{m}`?)"),
                None => format!("`{name}`"),
            }
        })
        .collect();
    Failure::bad_input(format!(
        "environment variable(s) {} look like kanon settings but are not: an override is KANON_<SECTION>_<KEY> with SECTION one of {}, e.g. KANON_PRIVACY_K=10; other KANON_ variables kanon reads: {}. Rename or unset them, so that no setting is silently ignored (a key variable of a pseudonymised column is fine once the job names it in `key_env`)",
        described.join(", "),
        ENV_SECTIONS
            .iter()
            .map(|s| s.to_ascii_uppercase())
            .collect::<Vec<_>>()
            .join(", "),
        OTHER_ENV_VARS.join(", ")
    ))
}

/// Parses `--set key=value`.
///
/// # Errors
/// A bad-input failure when there is no `=` or no section.
pub fn parse_set(s: &str) -> Result<Override> {
    let (k, v) = s.split_once('=').ok_or_else(|| {
        Failure::bad_input(format!(
            "--set `{s}`: write section.key=value, e.g. --set privacy.k=5"
        ))
    })?;
    let k = k.trim();
    if !k.contains('.') {
        return Err(Failure::bad_input(format!(
            "--set `{s}`: the key needs its section, e.g. privacy.{k}"
        ))
        .into());
    }
    Ok(Override::parse(k, v, "--set"))
}

/// Applies overrides to a parsed job document
/// ([`kanon_engine::job::overrides::apply`]).
///
/// # Errors
/// A bad-input failure when a key runs into a value that is not a table.
pub fn apply_overrides(doc: &mut toml::Table, overrides: &[Override]) -> Result<()> {
    kanon_engine::job::overrides::apply(doc, overrides)
        .map_err(|e| Failure::bad_input(e.to_string()).into())
}

impl JobFile {
    /// A job that did not come from a file as read here (SQL's
    /// `anonymize()` job), kept with `path` for its messages.
    pub fn new(job: kanon_engine::job::Job, path: PathBuf) -> Self {
        JobFile { job, path }
    }

    /// The validated spec, with every override applied.
    pub fn spec(&self) -> &JobSpec {
        self.job.spec()
    }

    /// The parsed hierarchy files, by the path written in the spec.
    pub fn hierarchies(&self) -> &FxHashMap<String, Arc<Hierarchy>> {
        self.job.hierarchies()
    }

    /// Loads and validates a job file with overrides from the environment
    /// and the command line.
    ///
    /// # Errors
    /// Bad-input failures naming the file, the setting and the override.
    pub fn load(args: &JobRequest) -> Result<JobFile> {
        Self::load_with_env(args, std::env::vars())
    }

    /// [`JobFile::load`] with explicit environment variables.
    ///
    /// # Errors
    /// As [`JobFile::load`].
    pub fn load_with_env(
        args: &JobRequest,
        vars: impl Iterator<Item = (String, String)>,
    ) -> Result<JobFile> {
        let path = args.config.clone();
        let text = std::fs::read_to_string(&path).map_err(|e| {
            Failure::bad_input(format!(
                "cannot read job file {}: {e}; check --config",
                path.display()
            ))
        })?;
        let mut doc: toml::Table = text.parse().map_err(|e: toml::de::Error| {
            Failure::bad_input(format!(
                "job file {} is not valid TOML: {e}",
                path.display()
            ))
        })?;
        let (mut overrides, unknown_env) = env_overrides(vars);
        for s in &args.set {
            overrides.push(parse_set(s)?);
        }
        overrides.extend(args.flags.iter().cloned());
        let base = doc.clone();
        apply_overrides(&mut doc, &overrides)?;
        for o in &overrides {
            let old =
                lookup(&base, &o.key()).map_or_else(|| "(unset)".to_string(), |v| v.to_string());
            tracing::info!(setting = %o.key(), source = %o.source, old = %old, new = %o.shown_value(), "job setting overridden");
        }
        let described: Vec<String> = overrides
            .iter()
            .map(|o| format!("{} ({})", o.key(), o.source))
            .collect();
        let from = if described.is_empty() {
            String::new()
        } else {
            format!(" with overrides {}", described.join(", "))
        };
        let spec = kanon_engine::job::overrides::spec_of(doc).map_err(|e| match e {
            OverrideError::Invalid(e) => Failure::bad_input(format!(
                "job file {}{from} is not a valid kanon job: {e}",
                path.display()
            )),
            e => Failure::bad_input(format!("in job file {}{from}: {e}", path.display())),
        })?;
        let unknown_env: Vec<String> = unknown_env
            .into_iter()
            .filter(|name| !spec.attributes.iter().any(|a| a.key_env() == name))
            .collect();
        if !unknown_env.is_empty() {
            return Err(unknown_env_error(&unknown_env).into());
        }
        if !args.weaken_privacy {
            let weaker = kanon_engine::job::overrides::weakenings(&base, &spec, &overrides);
            if !weaker.is_empty() {
                return Err(Failure::bad_input(format!(
                    "the overrides {} would weaken the privacy of job file {}: {}; fix the job file, drop the override, or pass --weaken-privacy to do this on purpose",
                    described.join(", "),
                    path.display(),
                    weaker.join("; ")
                ))
                .into());
            }
        }
        let loaded = kanon_engine::job::Job::new(spec, |file| {
            let resolved = resolve_in(&path, file.path);
            let text = std::fs::read_to_string(&resolved).map_err(|e| {
                Failure::bad_input(format!(
                    "cannot read hierarchy file {} of attribute `{}` (setting `hierarchy` of attribute `{}` in {}): {e}",
                    resolved.display(),
                    file.attribute,
                    file.attribute,
                    path.display()
                ))
            })?;
            Ok::<_, Failure>(HierarchyText {
                source: resolved.display().to_string(),
                text,
            })
        })
        .map_err(|e| -> anyhow::Error {
            match e {
                JobError::Spec(e) => {
                    Failure::bad_input(format!("in job file {}{from}: {e}", path.display())).into()
                }
                JobError::Read { error, .. } => error.into(),
                JobError::Hierarchy { attribute, error } => anyhow::Error::new(error).context(
                    format!(
                        "hierarchy of attribute `{attribute}` (setting `hierarchy` in {})",
                        path.display()
                    ),
                ),
            }
        })?;
        Ok(JobFile { job: loaded, path })
    }

    /// The keys of the job's pseudonymised columns, read from the
    /// environment variables the job names (`key_env`). Only `kanon
    /// anonymize` needs them; the keys are never logged.
    ///
    /// # Errors
    /// A bad-input failure naming the attribute and the variable when it is
    /// unset, empty or too short.
    pub fn pseudonymiser(&self) -> Result<kanon_engine::recode::Pseudonymiser> {
        kanon_engine::recode::Pseudonymiser::from_lookup(self.spec(), |var| std::env::var(var).ok())
            .map_err(|e| {
                Failure::bad_input(format!("in job file {}: {e}", self.path.display())).into()
            })
    }

    /// Resolves a path written in the job file.
    pub fn resolve(&self, p: &str) -> PathBuf {
        resolve_in(&self.path, p)
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

    /// The input location: `--input`, else `input.path` (resolved).
    ///
    /// # Errors
    /// A bad-input failure when neither is given.
    pub fn input(&self, override_path: Option<&str>) -> Result<Location> {
        match (override_path, self.spec().input.path.as_deref()) {
            (Some(p), _) => Location::parse(p),
            (None, Some(p)) => match Location::parse(p)? {
                Location::Local(_) => Ok(Location::Local(self.resolve(p))),
                remote => Ok(remote),
            },
            (None, None) => Err(Failure::bad_input(format!(
                "no input: set `input.path` in {} or pass --input",
                self.path.display()
            ))
            .into()),
        }
    }

    /// The population table of `[risk] population` (resolved like the
    /// input), for journalist and marketer risk; `None` when not set.
    pub fn population(&self) -> Result<Option<Location>> {
        let Some(p) = self.spec().risk.population.as_deref() else {
            return Ok(None);
        };
        Ok(Some(match Location::parse(p)? {
            Location::Local(_) => Location::Local(self.resolve(p)),
            remote => remote,
        }))
    }

    /// The output location: `--output`, else `output.path` (resolved).
    ///
    /// # Errors
    /// A bad-input failure when neither is given.
    pub fn output(&self, override_path: Option<&str>) -> Result<Location> {
        match (override_path, self.spec().output.path.as_deref()) {
            (Some(p), _) => Location::parse(p),
            (None, Some(p)) => match Location::parse(p)? {
                Location::Local(_) => Ok(Location::Local(self.resolve_output(p))),
                remote => Ok(remote),
            },
            (None, None) => Err(Failure::bad_input(format!(
                "no output: set `output.path` in {} or pass --output",
                self.path.display()
            ))
            .into()),
        }
    }
}

/// Resolves path `p` written in job file `job`
/// ([`kanon_engine::job::paths::resolve`], the rule SQL's options follow).
fn resolve_in(job: &Path, p: &str) -> PathBuf {
    kanon_engine::job::paths::resolve(p, Some(job), Path::exists)
}

/// The value at a dotted key of a TOML document, if set.
fn lookup<'a>(doc: &'a toml::Table, key: &str) -> Option<&'a toml::Value> {
    let mut parts = key.split('.');
    let mut value = doc.get(parts.next()?)?;
    for p in parts {
        value = value.as_table()?.get(p)?;
    }
    Some(value)
}

#[cfg(test)]
mod tests;
