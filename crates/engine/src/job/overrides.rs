//! Overrides of a job document, each with where it came from, and the rule
//! that they may not weaken the job file's privacy: the one loader of every
//! front end's settings. The command line's `KANON_*` variables, `--set`
//! and flags (`--k`, `--algorithm`, ...), and SQL's options of
//! `anonymize(...)` (`k = 5`, `qi = ["age"]`, `config = "..."`) are all
//! overrides of the job file's document, applied here before the document
//! is read as a [`JobSpec`], so that an unknown key or a bad value is
//! reported like one written in the file, and a weaker job than the file's
//! is refused the same way whatever the front end ([`weakenings`]). Reading
//! the file is the front end's: this module sees documents only.

use crate::error::Error;
use crate::spec::JobSpec;

/// One override: where in the job document, the value, and where it came
/// from (`KANON_PRIVACY_K`, `--set`, `--k`, the SQL option `k`, ...).
#[derive(Debug, Clone, PartialEq)]
pub struct Override {
    /// The keys from the document's root, e.g. `["privacy", "k"]`. Under
    /// `attributes` (a list of tables), a key names the attribute:
    /// `["attributes", "age", "role"]` sets the role of the attribute named
    /// `age`, which is added when the document lacks it.
    pub path: Vec<String>,
    /// The value.
    pub value: toml::Value,
    /// Where it came from, for messages and logs.
    pub source: String,
}

impl Override {
    /// An override of the dotted `key` (e.g. `privacy.k`) by `value`.
    pub fn new(key: &str, value: toml::Value, source: impl Into<String>) -> Self {
        Override {
            path: key.split('.').map(str::to_string).collect(),
            value,
            source: source.into(),
        }
    }

    /// An override of the dotted `key` by `text` read as a TOML value
    /// (`5`, `0.02`, `true`, `[5, 10]`), else as a string: how environment
    /// variables and `--set` give values.
    pub fn parse(key: &str, text: &str, source: impl Into<String>) -> Self {
        Override::new(key, toml_value(text), source)
    }

    /// The role of the attribute named `column` (added when the document
    /// lacks it).
    pub fn role(column: &str, role: &str, source: impl Into<String>) -> Self {
        Override {
            path: vec!["attributes".into(), column.into(), "role".into()],
            value: toml::Value::String(role.into()),
            source: source.into(),
        }
    }

    /// The section it sets (`privacy`, `storage`, ...): its first key.
    pub fn section(&self) -> &str {
        self.path.first().map_or("", String::as_str)
    }

    /// The value for messages and logs: a string as written, anything
    /// else as TOML.
    pub fn shown_value(&self) -> String {
        match &self.value {
            toml::Value::String(s) => s.clone(),
            v => v.to_string(),
        }
    }

    /// The dotted key, for messages.
    pub fn key(&self) -> String {
        self.path.join(".")
    }

    /// Whether it changes what the job protects or publishes: the privacy
    /// models, the column policy or an attribute.
    pub fn touches_privacy(&self) -> bool {
        matches!(self.section(), "privacy" | "columns" | "attributes")
    }
}

/// A value as TOML when it parses as one (numbers, booleans, arrays), else
/// as a string.
fn toml_value(v: &str) -> toml::Value {
    let parsed: Result<toml::Table, _> = format!("v = {v}").parse::<toml::Table>();
    match parsed.ok().and_then(|mut t| t.remove("v")) {
        Some(toml::Value::Datetime(_)) | None => toml::Value::String(v.to_string()),
        Some(x) => x,
    }
}

/// Why a job document with its overrides is not a job.
#[derive(Debug, thiserror::Error)]
pub enum OverrideError {
    /// An override runs into a value that is not a table.
    #[error("{from} sets `{key}`, but `{section}` is not a section")]
    NotASection {
        /// Where the override came from.
        from: String,
        /// Its dotted key.
        key: String,
        /// The key that holds no table.
        section: String,
    },
    /// The document is not a valid job (an unknown key, a bad value).
    #[error("{0}")]
    Invalid(String),
    /// The document names no privacy model ([`JobSpec::require_privacy`]).
    #[error(transparent)]
    NoModel(Error),
}

/// Applies `overrides` to a job document, in order (a later one wins).
///
/// # Errors
/// [`OverrideError::NotASection`] when a key runs into a value that is not
/// a table (or, under `attributes`, not a list of tables).
pub fn apply(doc: &mut toml::Table, overrides: &[Override]) -> Result<(), OverrideError> {
    for o in overrides {
        let not_a_section = |section: &str| OverrideError::NotASection {
            from: o.source.clone(),
            key: o.key(),
            section: section.to_string(),
        };
        let Some((last, parts)) = o.path.split_last() else {
            continue;
        };
        let mut table = &mut *doc;
        let mut at = 0;
        while at < parts.len() {
            let p = &parts[at];
            if p == "attributes" && !table.contains_key(p) {
                table.insert(p.clone(), toml::Value::Array(Vec::new()));
            }
            let entry = table
                .entry(p.clone())
                .or_insert_with(|| toml::Value::Table(toml::Table::new()));
            table = match (p == "attributes", entry) {
                // `attributes.NAME....`: the attribute named NAME.
                (true, toml::Value::Array(list)) => {
                    let Some(name) = parts.get(at + 1) else {
                        return Err(not_a_section(p));
                    };
                    let i = match list.iter().position(|a| {
                        a.get("name").and_then(toml::Value::as_str) == Some(name.as_str())
                    }) {
                        Some(i) => i,
                        None => {
                            let mut a = toml::Table::new();
                            a.insert("name".into(), toml::Value::String(name.clone()));
                            list.push(toml::Value::Table(a));
                            list.len() - 1
                        }
                    };
                    at += 2;
                    list[i]
                        .as_table_mut()
                        .ok_or_else(|| not_a_section(&format!("attributes.{name}")))?
                }
                (_, other) => {
                    at += 1;
                    other.as_table_mut().ok_or_else(|| not_a_section(p))?
                }
            };
        }
        if o.path.len() == 2 && o.path[0] == "attributes" {
            // `attributes.NAME` alone would replace the attribute by a value.
            return Err(not_a_section(&o.key()));
        }
        table.insert(last.clone(), o.value.clone());
    }
    Ok(())
}

/// The job a document describes, once its overrides are applied: parsed
/// and required to name a privacy model.
///
/// # Errors
/// [`OverrideError::Invalid`] with the parser's message;
/// [`OverrideError::NoModel`] when it names neither `k` nor requirements
/// (there is no default k).
pub fn spec_of(doc: toml::Table) -> Result<JobSpec, OverrideError> {
    let has_model = doc
        .get("privacy")
        .and_then(|p| p.as_table())
        .is_some_and(|p| p.contains_key("k") || p.contains_key("requirements"));
    let spec: JobSpec = toml::Value::Table(doc)
        .try_into()
        .map_err(|e: toml::de::Error| {
            // One line (the parser puts where on a line of its own).
            let text = e.to_string();
            let message: Vec<&str> = text.lines().map(str::trim).collect();
            OverrideError::Invalid(message.join(" ").trim().to_string())
        })?;
    JobSpec::require_privacy(has_model).map_err(OverrideError::NoModel)?;
    Ok(spec)
}

/// How the job `new` (the file's document with `overrides` applied)
/// protects less than the job file alone (`file`), one line per weaker
/// setting ([`JobSpec::weakenings`]); empty when it protects as much. A
/// file that is not a complete job alone gives no baseline to compare
/// with: then every override of the privacy models, the column policy or
/// an attribute counts as weaker. Front ends refuse a weaker job unless
/// their user says so on purpose (`--weaken-privacy`, `weaken_privacy =
/// true`).
pub fn weakenings(file: &toml::Table, new: &JobSpec, overrides: &[Override]) -> Vec<String> {
    match toml::Value::Table(file.clone()).try_into::<JobSpec>() {
        Ok(file) => file.weakenings(new),
        Err(_) => overrides
            .iter()
            .filter(|o| o.touches_privacy())
            .map(|o| {
                format!(
                    "`{}` is set to {} (the job file alone is not a complete job, so its privacy settings cannot be compared)",
                    o.key(),
                    o.shown_value()
                )
            })
            .collect(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn doc(text: &str) -> toml::Table {
        text.parse().unwrap()
    }

    #[test]
    fn overrides_apply_in_order_and_name_attributes_by_name() {
        let mut d =
            doc("[privacy]\nk = 5\n[[attributes]]\nname = \"age\"\nrole = \"quasi-identifier\"\n");
        apply(
            &mut d,
            &[
                Override::parse("privacy.k", "7", "KANON_PRIVACY_K"),
                Override::parse("privacy.k", "9", "--set"),
                Override::parse("algorithm.name", "mondrian", "--algorithm"),
                Override::role("age", "insensitive", "insensitive"),
                Override::role("a.b", "sensitive", "sensitive"),
            ],
        )
        .unwrap();
        assert_eq!(d["privacy"]["k"].as_integer(), Some(9));
        assert_eq!(d["algorithm"]["name"].as_str(), Some("mondrian"));
        let attrs = d["attributes"].as_array().unwrap();
        assert_eq!(attrs.len(), 2);
        assert_eq!(attrs[0]["role"].as_str(), Some("insensitive"));
        // A column name with a dot is one key, not two sections.
        assert_eq!(attrs[1]["name"].as_str(), Some("a.b"));
        assert_eq!(attrs[1]["role"].as_str(), Some("sensitive"));
    }

    #[test]
    fn an_override_through_a_value_names_its_source() {
        let mut d = doc("[privacy]\nk = 5\n");
        let err = apply(&mut d, &[Override::parse("privacy.k.x", "1", "--set")]).unwrap_err();
        assert_eq!(
            err.to_string(),
            "--set sets `privacy.k.x`, but `k` is not a section"
        );
        let err = apply(&mut d, &[Override::parse("attributes.age", "1", "--set")]).unwrap_err();
        assert!(err.to_string().contains("is not a section"), "{err}");
    }

    #[test]
    fn values_are_toml_or_strings() {
        assert_eq!(toml_value("5"), toml::Value::Integer(5));
        assert_eq!(toml_value("0.5"), toml::Value::Float(0.5));
        assert_eq!(
            toml_value("http://x:9000"),
            toml::Value::String("http://x:9000".into())
        );
        assert_eq!(toml_value("\"q\""), toml::Value::String("q".into()));
    }

    #[test]
    fn weaker_jobs_are_named_and_incomplete_files_trust_no_privacy_override() {
        let file =
            doc("[privacy]\nk = 5\n[[attributes]]\nname = \"age\"\nrole = \"quasi-identifier\"\n");
        let weaker = [Override::parse("privacy.k", "2", "--k")];
        let mut d = file.clone();
        apply(&mut d, &weaker).unwrap();
        let w = weakenings(&file, &spec_of(d).unwrap(), &weaker);
        assert_eq!(w.len(), 1, "{w:?}");
        let stronger = [Override::parse("privacy.k", "8", "--k")];
        let mut d = file.clone();
        apply(&mut d, &stronger).unwrap();
        assert!(weakenings(&file, &spec_of(d).unwrap(), &stronger).is_empty());
        // A file that is no job alone (its algorithm lacks a name): nothing
        // to compare with.
        let partial = doc(
            "[algorithm]\nseed = 3\n[[attributes]]\nname = \"age\"\nrole = \"quasi-identifier\"\n",
        );
        let given = [
            Override::parse("privacy.k", "5", "k"),
            Override::parse("algorithm.name", "mondrian", "algorithm"),
        ];
        let mut d = partial.clone();
        apply(&mut d, &given).unwrap();
        let w = weakenings(&partial, &spec_of(d).unwrap(), &given);
        assert_eq!(w.len(), 1, "{w:?}");
        assert!(w[0].contains("privacy.k"), "{w:?}");
        // And no model at all is refused, not defaulted.
        let mut d = partial.clone();
        apply(&mut d, &given[1..]).unwrap();
        assert!(matches!(spec_of(d), Err(OverrideError::NoModel(_))));
    }
}
