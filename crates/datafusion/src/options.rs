//! The settings of one `anonymize(...)` or `kanon_risk(...)` call: the same
//! settings as a job file, written in SQL.
//!
//! The options string is TOML key/values separated by commas, as inside a
//! TOML inline table (a string with line breaks is read as a whole TOML
//! document, one starting with `{` as JSON):
//!
//! ```text
//! 'config = "configs/adult.toml", k = 5, algorithm = "kaca"'
//! 'k = 2, qi = ["age", "zip"], sensitive = "disease"'
//! 'config = "configs/adult.toml", privacy.suppression_limit = 0.02, algorithm.max_depth = 8'
//! ```
//!
//! Besides the sections of a job file (`privacy`, `algorithm`,
//! `attributes`, all optional), these shorthands are read:
//!
//! | key | meaning |
//! |---|---|
//! | `config` | a job file (TOML) loaded first; every other key overrides it |
//! | `k`, `suppression_limit` | `privacy.k`, `privacy.suppression_limit` |
//! | `algorithm` (a string), `seed` | `algorithm.name`, `algorithm.seed` |
//! | `qi`, `sensitive`, `identifying`, `insensitive`, `pseudonymised` | column names (a string or a list) given that role; a column not yet listed is added with flexible generalisation |
//! | `unlisted` | `columns.unlisted`: `"error"` (default), `"insensitive"` or `"identifying"` for input columns given no role |
//! | `weaken_privacy` | `true` lets the other options weaken the `config` job file's privacy (lower k, raise the suppression limit, give a column a role that publishes more, ...), refused otherwise as on the command line |
//!
//! Every column of the input (the table or subquery) needs a role, or the
//! call opts in with `unlisted` ([`kanon_engine::columns`]). A pseudonymised
//! column's key is read from its `key_env` environment variable (default
//! `KANON_PSEUDONYM_KEY`) of the process that plans the query.
//!
//! Files named by the options (`config`, hierarchy files) are read only
//! under the directories the session allows ([`FileAccess`], set with
//! [`crate::register_with`]; default the current directory), after
//! resolving `..` and symbolic links. Hierarchy files are found by the
//! rule every front end follows (`kanon_engine::job::paths::resolve`):
//! relative to the current directory when they exist there, else to the job
//! file's directory, then its parent. `input` and `output` of a job file are
//! ignored: the table comes from SQL and the release goes where the query
//! sends it (`COPY ... TO`).

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use datafusion::common::{plan_datafusion_err, DataFusionError, Result};
use kanon_engine::hierarchy::Hierarchy;
use kanon_engine::job::overrides::{Override, OverrideError};
use kanon_engine::job::{HierarchyText, Job as EngineJob, JobError};
use kanon_engine::recode::Pseudonymiser;
use kanon_engine::spec::JobSpec;
use rustc_hash::FxHashMap;
use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

/// A hierarchy file as read at planning time, kept as text so that the
/// settings stay plain data.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct HierarchySource {
    /// The file it was read from (after path resolution).
    pub file: String,
    /// The file's text.
    pub text: String,
    /// Its delimiter.
    pub delimiter: char,
}

/// Everything one call needs, as plain serde data: the job spec and the text
/// of its hierarchy files. An extension codec (e.g. for Ballista) carries
/// [`AnonymizeSettings::to_json`] and rebuilds the node with
/// [`AnonymizeSettings::from_json`].
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct AnonymizeSettings {
    /// The job, with every override applied.
    pub spec: JobSpec,
    /// Hierarchy files by the path written in the spec.
    pub hierarchies: BTreeMap<String, HierarchySource>,
    /// The job file the settings started from, if any (for display).
    pub config: Option<String>,
}

/// [`AnonymizeSettings`] with their hierarchies parsed and the keys of
/// their pseudonymised columns (never part of the settings, never printed).
#[derive(Debug, Clone)]
pub struct Job {
    settings: AnonymizeSettings,
    job: EngineJob,
    pseudonymiser: Pseudonymiser,
}

/// The directories under which `anonymize()` and `kanon_risk()` options may
/// name files (`config`, hierarchy files): a setting of the session, so a
/// SQL user cannot read any file the server process can. Paths are compared
/// after resolving `..` and symbolic links.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FileAccess {
    dirs: Vec<PathBuf>,
}

impl Default for FileAccess {
    /// The current directory only (nothing when it cannot be determined).
    fn default() -> Self {
        FileAccess {
            dirs: std::env::current_dir()
                .and_then(|d| d.canonicalize())
                .into_iter()
                .collect(),
        }
    }
}

impl FileAccess {
    /// Allows the files under `dirs` (relative ones against the current
    /// directory).
    ///
    /// # Errors
    /// A configuration error naming a directory that does not exist.
    pub fn new(dirs: &[PathBuf]) -> Result<Self> {
        let dirs = dirs
            .iter()
            .map(|d| {
                d.canonicalize().map_err(|e| {
                    DataFusionError::Configuration(format!(
                        "kanon: allowed directory {} cannot be used: {e}",
                        d.display()
                    ))
                })
            })
            .collect::<Result<Vec<_>>>()?;
        Ok(FileAccess { dirs })
    }

    /// The allowed directories, canonical.
    pub fn dirs(&self) -> &[PathBuf] {
        &self.dirs
    }

    /// The path to read for `path`, named by `option` of `function`: its
    /// real path when it exists. A path outside every allowed directory is
    /// refused whether it exists or not (so the error says nothing about
    /// files outside).
    ///
    /// # Errors
    /// A plan error naming the path, the option and how to allow it.
    pub fn check(&self, path: &Path, option: &str, function: &str) -> Result<PathBuf> {
        let absolute = std::env::current_dir()
            .map(|d| d.join(path))
            .unwrap_or_else(|_| path.to_path_buf());
        let real = real_path(&absolute);
        if self.dirs.iter().any(|d| real.starts_with(d)) {
            return Ok(if real.exists() {
                real
            } else {
                path.to_path_buf()
            });
        }
        let dirs: Vec<String> = self.dirs.iter().map(|d| d.display().to_string()).collect();
        Err(plan_datafusion_err!(
            "{function}(): {} (option `{option}`) is outside the directories this session may read files from ([{}]); move the file under one of them, or allow its directory: `kanon sql --allow-dir DIR`, or in Rust kanon_datafusion::register_with(&ctx, Options {{ allowed_dirs, .. }})",
            path.display(),
            dirs.join(", ")
        ))
    }
}

/// `path` with `.`, `..` and symbolic links resolved: the real path of its
/// longest existing ancestor, followed by the rest of it.
fn real_path(path: &Path) -> PathBuf {
    let mut existing = path.to_path_buf();
    let mut rest: Vec<std::ffi::OsString> = Vec::new();
    loop {
        if let Ok(real) = existing.canonicalize() {
            let mut out = real;
            for part in rest.iter().rev() {
                match Path::new(part).components().next() {
                    Some(std::path::Component::ParentDir) => {
                        out.pop();
                    }
                    Some(std::path::Component::CurDir) | None => {}
                    _ => out.push(part),
                }
            }
            return out;
        }
        match (existing.file_name(), existing.parent()) {
            (Some(name), Some(parent)) => {
                rest.push(name.to_os_string());
                existing = parent.to_path_buf();
            }
            _ => {
                // `..` at the end, or the root: keep the components as
                // written, without `.` and `..` (lexically).
                let mut out = PathBuf::new();
                for c in path.components() {
                    match c {
                        std::path::Component::ParentDir => {
                            out.pop();
                        }
                        std::path::Component::CurDir => {}
                        c => out.push(c),
                    }
                }
                return out;
            }
        }
    }
}

impl AnonymizeSettings {
    /// The settings as JSON.
    ///
    /// # Errors
    /// Never in practice (the settings are plain data); an internal error
    /// otherwise.
    pub fn to_json(&self) -> Result<String> {
        serde_json::to_string(self)
            .map_err(|e| DataFusionError::Internal(format!("kanon settings to JSON: {e}")))
    }

    /// Settings from [`AnonymizeSettings::to_json`].
    ///
    /// # Errors
    /// A plan error when the JSON is not kanon settings.
    pub fn from_json(json: &str) -> Result<Self> {
        serde_json::from_str(json)
            .map_err(|e| plan_datafusion_err!("not kanon anonymize settings: {e}"))
    }
}

impl Job {
    /// Validates the settings and parses their hierarchies.
    ///
    /// # Errors
    /// A plan error naming the setting or hierarchy file at fault.
    pub fn try_new(settings: AnonymizeSettings, function: &str) -> Result<Self> {
        let job = EngineJob::new(settings.spec.clone(), |file| {
            let src = settings.hierarchies.get(file.path).ok_or_else(|| {
                plan_datafusion_err!(
                    "{function}(): hierarchy file `{}` of attribute `{}` was not loaded",
                    file.path,
                    file.attribute
                )
            })?;
            Ok(HierarchyText {
                source: src.file.clone(),
                text: src.text.clone(),
            })
        })
        .map_err(|e| match e {
            JobError::Read { error, .. } => error,
            JobError::Spec(e) | JobError::Hierarchy { error: e, .. } => {
                plan_datafusion_err!("{function}(): {e}")
            }
        })?;
        // The keys come from the environment of the process that plans
        // the query; only the variables' names are in the settings.
        let pseudonymiser =
            Pseudonymiser::from_lookup(&settings.spec, |var| std::env::var(var).ok())
                .map_err(|e| plan_datafusion_err!("{function}(): {e}"))?;
        Ok(Job {
            settings,
            job,
            pseudonymiser,
        })
    }

    /// The keys of the pseudonymised columns.
    pub fn pseudonymiser(&self) -> &Pseudonymiser {
        &self.pseudonymiser
    }

    /// The plain settings.
    pub fn settings(&self) -> &AnonymizeSettings {
        &self.settings
    }

    /// The job spec.
    pub fn spec(&self) -> &JobSpec {
        &self.settings.spec
    }

    /// The parsed hierarchies, by the path written in the spec.
    pub fn hierarchies(&self) -> &FxHashMap<String, Arc<Hierarchy>> {
        self.job.hierarchies()
    }

    /// The engine's job: the validated spec and its parsed hierarchies.
    pub fn engine_job(&self) -> &EngineJob {
        &self.job
    }
}

/// Parses an options string into a JSON object of settings (before the
/// shorthands are applied).
///
/// # Errors
/// A plan error quoting the parser's message.
pub fn parse_options(text: &str, function: &str) -> Result<Map<String, Value>> {
    let t = text.trim();
    if t.is_empty() {
        return Ok(Map::new());
    }
    let bad = |how: &str, msg: String| {
        plan_datafusion_err!(
            "{function}(): the options are not valid {how}: {msg}; write them as `key = value` pairs separated by commas, e.g. 'k = 10, algorithm = \"mondrian\", config = \"configs/adult.toml\"'"
        )
    };
    let value: Value = if t.starts_with('{') {
        serde_json::from_str(t).map_err(|e| bad("JSON", e.to_string()))?
    } else if t.contains('\n') {
        let v: toml::Value = toml::from_str(t).map_err(|e| bad("TOML", e.message().to_string()))?;
        serde_json::to_value(v).map_err(|e| bad("TOML", e.to_string()))?
    } else {
        let wrapped = format!("options = {{ {t} }}");
        let mut v: toml::Table = toml::from_str(&wrapped).map_err(|e| {
            let at = e
                .span()
                .map(|s| format!(" (at character {})", s.start.saturating_sub(12) + 1))
                .unwrap_or_default();
            bad("TOML key/values", format!("{}{at}", e.message().trim()))
        })?;
        let inner = v
            .remove("options")
            .unwrap_or(toml::Value::Table(Default::default()));
        serde_json::to_value(inner).map_err(|e| bad("TOML", e.to_string()))?
    };
    match value {
        Value::Object(m) => Ok(m),
        _ => Err(bad("settings", "expected key/values".into())),
    }
}

/// Resolves a path written in a job file ([`kanon_engine::job::paths::resolve`],
/// the rule the command line's loader follows).
fn resolve(path: &str, config: Option<&Path>) -> PathBuf {
    kanon_engine::job::paths::resolve(path, config, Path::exists)
}

/// An option's value as the TOML value of a job file.
fn toml_of(v: &Value, key: &str, function: &str) -> Result<toml::Value> {
    toml::Value::try_from(v).map_err(|e| {
        plan_datafusion_err!("{function}(): option `{key}` has no value a job file can hold: {e}")
    })
}

/// The overrides of an option: one per value under `path`, a table's
/// values each by their own key (so that `algorithm = {{ max_depth = 8 }}`
/// sets that key of the job file's `[algorithm]`, not the whole section).
fn flatten(out: &mut Vec<Override>, path: Vec<String>, value: Value, function: &str) -> Result<()> {
    match value {
        // An empty table sets nothing.
        Value::Object(m) => {
            for (k, v) in m {
                let mut p = path.clone();
                p.push(k);
                flatten(out, p, v, function)?;
            }
        }
        v => {
            let key = path.join(".");
            out.push(Override {
                value: toml_of(&v, &key, function)?,
                source: format!("option `{key}`"),
                path,
            });
        }
    }
    Ok(())
}

fn names(v: &Value, key: &str, function: &str) -> Result<Vec<String>> {
    match v {
        Value::String(s) => Ok(s
            .split(',')
            .map(|s| s.trim().to_string())
            .filter(|s| !s.is_empty())
            .collect()),
        Value::Array(a) => a
            .iter()
            .map(|x| {
                x.as_str().map(str::to_string).ok_or_else(|| {
                    plan_datafusion_err!("{function}(): option `{key}` takes column names (strings)")
                })
            })
            .collect(),
        _ => Err(plan_datafusion_err!(
            "{function}(): option `{key}` takes a column name or a list of names, e.g. {key} = [\"age\", \"zip\"]"
        )),
    }
}

/// Builds the settings of a call from its options (already parsed into
/// key/values, shorthands included), loading the `config` job file and the
/// hierarchy files.
///
/// # Errors
/// A plan error naming the option, file or setting at fault.
pub fn settings_from(
    mut options: Map<String, Value>,
    function: &str,
    files: &FileAccess,
) -> Result<AnonymizeSettings> {
    let config = match options.remove("config") {
        None => None,
        Some(Value::String(p)) => Some(p),
        Some(_) => {
            return Err(plan_datafusion_err!(
                "{function}(): option `config` takes the path of a job file, e.g. config = \"configs/adult.toml\""
            ))
        }
    };
    let mut base = toml::Table::new();
    let config_path = config
        .as_deref()
        .map(|c| files.check(&resolve(c, None), "config", function))
        .transpose()?;
    if let (Some(c), Some(path)) = (&config, &config_path) {
        let text = std::fs::read_to_string(path).map_err(|e| {
            plan_datafusion_err!(
                "{function}(): cannot read job file {} (option `config = \"{c}\"`): {e}; paths are relative to the current directory {}",
                path.display(),
                std::env::current_dir().map(|d| d.display().to_string()).unwrap_or_default()
            )
        })?;
        base = toml::from_str(&text).map_err(|e| {
            plan_datafusion_err!(
                "{function}(): job file {} is not valid TOML: {}",
                path.display(),
                e.message()
            )
        })?;
    }
    // A population table is read by the command line's reports, never by
    // a SQL call: naming one here would be silently ignored.
    if options
        .get("risk")
        .and_then(|r| r.get("population"))
        .is_some()
    {
        return Err(plan_datafusion_err!(
            "{function}(): option `risk.population` is not read in SQL (journalist and marketer risk against a population table are measured by `kanon anonymize --metrics-json`, `--report` and `kanon report`); remove it, or give the population's size with `risk.population_size`"
        ));
    }
    let weaken = match options.remove("weaken_privacy") {
        None => false,
        Some(Value::Bool(b)) => b,
        Some(_) => {
            return Err(plan_datafusion_err!(
                "{function}(): option `weaken_privacy` takes true or false"
            ))
        }
    };
    // The options are overrides of the job file, as the command line's
    // flags are (kanon_engine::job::overrides): the sections written out,
    // then the shorthands, then the roles.
    let mut roles: Vec<Override> = Vec::new();
    for (key, role) in [
        ("qi", "quasi-identifier"),
        ("quasi_identifiers", "quasi-identifier"),
        ("sensitive", "sensitive"),
        ("identifying", "identifying"),
        ("insensitive", "insensitive"),
        ("pseudonymised", "pseudonymised"),
        ("pseudonymized", "pseudonymised"),
    ] {
        if let Some(v) = options.remove(key) {
            for column in names(&v, key, function)? {
                roles.push(Override::role(&column, role, format!("option `{key}`")));
            }
        }
    }
    let mut shorthands: Vec<Override> = Vec::new();
    for (key, to) in [
        ("k", "privacy.k"),
        ("suppression_limit", "privacy.suppression_limit"),
    ] {
        if let Some(v) = options.remove(key) {
            shorthands.push(Override::new(
                to,
                toml_of(&v, key, function)?,
                format!("option `{key}`"),
            ));
        }
    }
    match options.remove("algorithm") {
        Some(Value::String(name)) => shorthands.push(Override::new(
            "algorithm.name",
            toml::Value::String(name),
            "option `algorithm`",
        )),
        Some(Value::Object(m)) => flatten(&mut shorthands, vec!["algorithm".into()], Value::Object(m), function)?,
        Some(_) => {
            return Err(plan_datafusion_err!(
                "{function}(): option `algorithm` takes an algorithm name, e.g. algorithm = \"mondrian\""
            ))
        }
        None => {}
    }
    if let Some(v) = options.remove("seed") {
        shorthands.push(Override::new(
            "algorithm.seed",
            toml_of(&v, "seed", function)?,
            "option `seed`",
        ));
    }
    if let Some(v) = options.remove("unlisted") {
        shorthands.push(Override::new(
            "columns.unlisted",
            toml_of(&v, "unlisted", function)?,
            "option `unlisted`",
        ));
    }
    let mut overrides: Vec<Override> = Vec::new();
    for (key, value) in options {
        flatten(&mut overrides, vec![key], value, function)?;
    }
    overrides.extend(shorthands);
    overrides.extend(roles);
    let mut doc = base.clone();
    kanon_engine::job::overrides::apply(&mut doc, &overrides)
        .map_err(|e| plan_datafusion_err!("{function}(): {e}"))?;
    // `seed = 7` or `algorithm.x = ...` alone keep the default algorithm.
    if let Some(toml::Value::Table(a)) = doc.get_mut("algorithm") {
        a.entry("name")
            .or_insert_with(|| toml::Value::String(JobSpec::default().algorithm.name));
    }
    // The SQL table is the input and the query decides where output goes.
    doc.remove("input");
    doc.remove("output");
    let spec = kanon_engine::job::overrides::spec_of(doc).map_err(|e| match e {
        OverrideError::NoModel(e) => plan_datafusion_err!(
            "{function}(): {e} (in SQL: the option `k = ...`, or a `config` job file with `[privacy]`)"
        ),
        e => plan_datafusion_err!(
            "{function}(): bad option: {e}; options are the settings of a job file (privacy, algorithm, attributes) or the shorthands config, k, suppression_limit, algorithm, seed, qi, sensitive, identifying, insensitive, pseudonymised, unlisted, weaken_privacy"
        ),
    })?;
    // The job file alone is the baseline of the no-weakening rule.
    if !weaken && config.is_some() {
        let weaker = kanon_engine::job::overrides::weakenings(&base, &spec, &overrides);
        if !weaker.is_empty() {
            return Err(plan_datafusion_err!(
                "{function}(): the options would weaken the privacy of job file {}: {}; fix the job file, drop the option, or add `weaken_privacy = true` to do this on purpose",
                config.as_deref().unwrap_or_default(),
                weaker.join("; ")
            ));
        }
    }
    let mut hierarchies = BTreeMap::new();
    for (attribute, path, delimiter) in spec.hierarchy_files() {
        let file = files.check(
            &resolve(path, config_path.as_deref()),
            &format!("attributes.{attribute}.hierarchy"),
            function,
        )?;
        let text = std::fs::read_to_string(&file).map_err(|e| {
            plan_datafusion_err!(
                "{function}(): cannot read hierarchy file {} of attribute `{attribute}` (setting attributes.{attribute}.hierarchy): {e}",
                file.display()
            )
        })?;
        hierarchies.insert(
            path.to_string(),
            HierarchySource {
                file: file.display().to_string(),
                text,
                delimiter,
            },
        );
    }
    Ok(AnonymizeSettings {
        spec,
        hierarchies,
        config,
    })
}

/// Parses an options string and builds the job of a call.
///
/// # Errors
/// A plan error naming the option, file or setting at fault.
pub fn job_from_options(text: &str, function: &str, files: &FileAccess) -> Result<Job> {
    let options = parse_options(text, function)?;
    Job::try_new(settings_from(options, function, files)?, function)
}

#[cfg(test)]
mod tests;
