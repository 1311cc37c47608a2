//! A job ready to run: its spec, validated, and every hierarchy it names,
//! parsed and keyed by the path written in the spec.
//!
//! Every front end (`kanon anonymize`, `kanon verify`, `kanon inspect`, the
//! DataFusion `anonymize()` function) builds its job here, so the rules of
//! what makes a job runnable exist once. Reading the hierarchy files is the
//! front end's (the engine does no I/O: the command line's loader reads
//! local paths found by [`paths::resolve`], the SQL integration reads the
//! files its session may access and ships their text inside the plan); it
//! hands the text over through a closure.

pub mod overrides;
pub mod paths;

use std::sync::Arc;

use rustc_hash::FxHashMap;

use crate::error::Error;
use crate::hierarchy::Hierarchy;
use crate::spec::{JobSpec, OutputSpec};

/// A hierarchy file a job names: the front end reads it.
#[derive(Debug, Clone, Copy)]
pub struct HierarchyFile<'a> {
    /// The quasi-identifier it generalises.
    pub attribute: &'a str,
    /// The path as written in the job.
    pub path: &'a str,
    /// The CSV delimiter (`hierarchy_delimiter`, default `;`).
    pub delimiter: char,
}

/// A hierarchy file's text, as the front end read it.
#[derive(Debug, Clone)]
pub struct HierarchyText {
    /// Where it was read from (the resolved path), for messages.
    pub source: String,
    /// The file's contents.
    pub text: String,
}

/// Why a job cannot run. `E` is the front end's own error for a file it
/// could not read, passed through untouched.
#[derive(Debug, thiserror::Error)]
pub enum JobError<E> {
    /// The spec breaks a rule ([`JobSpec::validate`]).
    #[error(transparent)]
    Spec(Error),
    /// The front end could not read a hierarchy file.
    #[error("cannot read the hierarchy file of attribute `{attribute}`")]
    Read {
        /// The attribute whose `hierarchy` setting names the file.
        attribute: String,
        /// The front end's error.
        #[source]
        error: E,
    },
    /// A hierarchy file is not a valid hierarchy.
    #[error("hierarchy of attribute `{attribute}`: {error}")]
    Hierarchy {
        /// The attribute whose `hierarchy` setting names the file.
        attribute: String,
        /// What is wrong with the file.
        #[source]
        error: Error,
    },
}

/// A validated spec and its parsed hierarchies.
#[derive(Debug, Clone)]
pub struct Job {
    spec: JobSpec,
    hierarchies: FxHashMap<String, Arc<Hierarchy>>,
}

impl Job {
    /// Validates `spec` and parses each hierarchy file it names, reading
    /// each distinct path once through `read`.
    ///
    /// # Errors
    /// [`JobError::Spec`] for a spec that breaks a rule (checked before any
    /// file is read), [`JobError::Read`] with the front end's error, and
    /// [`JobError::Hierarchy`] for a file that is not a hierarchy.
    pub fn new<E>(
        spec: JobSpec,
        mut read: impl FnMut(HierarchyFile<'_>) -> Result<HierarchyText, E>,
    ) -> Result<Self, JobError<E>> {
        spec.validate().map_err(JobError::Spec)?;
        let mut hierarchies = FxHashMap::default();
        for (attribute, path, delimiter) in spec.hierarchy_files() {
            if hierarchies.contains_key(path) {
                continue;
            }
            let file = HierarchyFile {
                attribute,
                path,
                delimiter,
            };
            let read = read(file).map_err(|error| JobError::Read {
                attribute: attribute.to_string(),
                error,
            })?;
            let hierarchy =
                Hierarchy::from_csv(&read.source, &read.text, delimiter).map_err(|error| {
                    JobError::Hierarchy {
                        attribute: attribute.to_string(),
                        error,
                    }
                })?;
            hierarchies.insert(path.to_string(), Arc::new(hierarchy));
        }
        Ok(Job { spec, hierarchies })
    }

    /// The validated spec.
    pub fn spec(&self) -> &JobSpec {
        &self.spec
    }

    /// The parsed hierarchies, by the path written in the spec.
    pub fn hierarchies(&self) -> &FxHashMap<String, Arc<Hierarchy>> {
        &self.hierarchies
    }

    /// This job, writing as `output` says (e.g. `kanon sql
    /// --unchecked-series` on `anonymize()`'s job). The output section is
    /// the front end's (where and how a release is written) and validation
    /// does not read it, so the job stays runnable. It bypasses the
    /// overrides' no-weakening rule (`job::overrides::weakenings`), and
    /// `output.unchecked_series` is a weakening: a front end sets only what
    /// its user asked for explicitly.
    pub fn with_output(mut self, output: OutputSpec) -> Job {
        self.spec.output = output;
        self
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn spec(extra: &str) -> JobSpec {
        toml::from_str(&format!(
            r#"
            [privacy]
            k = 2
            [[attributes]]
            name = "sex"
            role = "quasi-identifier"
            hierarchy = "sex.csv"
            [[attributes]]
            name = "sex2"
            role = "quasi-identifier"
            hierarchy = "sex.csv"
            {extra}
            "#
        ))
        .unwrap()
    }

    fn sex(file: HierarchyFile<'_>) -> Result<HierarchyText, String> {
        Ok(HierarchyText {
            source: format!("/data/{}", file.path),
            text: "M;*\nF;*\n".into(),
        })
    }

    #[test]
    fn each_distinct_file_is_read_once() {
        let mut reads = 0;
        let job = Job::new(spec(""), |f| {
            reads += 1;
            sex(f)
        })
        .unwrap();
        assert_eq!(reads, 1);
        assert_eq!(job.hierarchies().len(), 1);
        assert!(job.hierarchies().contains_key("sex.csv"));
    }

    #[test]
    fn a_sensitive_attributes_hierarchy_is_read_like_a_quasi_identifiers() {
        // The ground distance of hierarchical t-closeness.
        let job = Job::new(
            spec("[[attributes]]\nname = \"d\"\nrole = \"sensitive\"\nhierarchy = \"d.csv\"\n"),
            |f| {
                Ok::<_, String>(HierarchyText {
                    source: f.path.to_string(),
                    text: "flu;resp;*\ncold;resp;*\n".into(),
                })
            },
        )
        .unwrap();
        let d = &job.hierarchies()["d.csv"];
        assert_eq!((d.leaf_count(), d.height()), (2, 2));
    }

    #[test]
    fn the_spec_is_checked_before_any_file_is_read() {
        let mut bad = spec("");
        bad.privacy.k = 1;
        let err = Job::new(bad, |_| -> Result<HierarchyText, String> {
            panic!("no file is read for an invalid spec")
        })
        .unwrap_err();
        assert!(matches!(err, JobError::Spec(_)), "{err}");
    }

    #[test]
    fn read_and_parse_failures_name_the_attribute() {
        let err = Job::new(spec(""), |_| Err("gone".to_string())).unwrap_err();
        assert!(
            matches!(&err, JobError::Read { attribute, error } if attribute == "sex" && error == "gone")
        );
        let err = Job::new(spec(""), |_| {
            Ok::<_, String>(HierarchyText {
                source: "sex.csv".into(),
                text: String::new(),
            })
        })
        .unwrap_err();
        assert!(
            err.to_string().starts_with("hierarchy of attribute `sex`"),
            "{err}"
        );
    }
}
