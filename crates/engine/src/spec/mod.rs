//! The job specification: what to anonymise, how, and under which privacy
//! model. Plain serde data, loaded from TOML (or JSON) by the front ends.
//!
//! The engine does no I/O: hierarchy files named here are read by the front
//! end and handed over as parsed [`Hierarchy`](crate::hierarchy::Hierarchy)
//! values (see [`JobSpec::hierarchy_files`]).
//!
//! One file per part of a job file: [`AttributeSpec`] (the columns and
//! their roles and generalisations), [`PrivacySpec`] (the privacy models),
//! [`AlgorithmSpec`], and the front ends' [`InputSpec`], [`OutputSpec`]
//! and [`StorageSpec`]; `validate` holds the checks that need no data.

mod algorithm;
mod attribute;
mod input_output;
mod privacy;
mod risk;
mod validate;
mod weaken;

pub use algorithm::AlgorithmSpec;
pub use attribute::{
    AttributeSpec, GeneralisationSpec, Kind, Microaggregation, NullPolicy, Role, DEFAULT_KEY_ENV,
};
pub use input_output::{InputSpec, OutputSpec, ResourcesSpec, StorageSpec};
pub use privacy::{
    Diversity, MissingSensitive, PrivacySpec, RequirementSpec, DEFAULT_MISSING_VALUES, ENTITY_ROW,
};
pub use risk::{RiskSpec, MSU_DEFAULT_MAX_RECORDS};

use serde::{Deserialize, Serialize};

/// A complete job as written in a job file.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct JobSpec {
    /// Where the data comes from (interpreted by the front end).
    #[serde(default)]
    pub input: InputSpec,
    /// Where the release goes (interpreted by the front end).
    #[serde(default)]
    pub output: OutputSpec,
    /// How to reach object storage (interpreted by the front end).
    #[serde(default)]
    pub storage: StorageSpec,
    /// What the job may use of the machine (interpreted by the front end).
    #[serde(default)]
    pub resources: ResourcesSpec,
    /// Every column the job knows about. Columns of the input not listed here
    /// are an error unless `[columns] unlisted` says what they are
    /// ([`crate::columns`]).
    #[serde(default)]
    pub attributes: Vec<AttributeSpec>,
    /// The policy for input columns not listed in `attributes`.
    #[serde(default)]
    pub columns: crate::columns::ColumnsSpec,
    /// The privacy model the release must satisfy. The front ends' job
    /// loaders refuse a job file without `[privacy]` ([`JobSpec::require_privacy`]):
    /// the default here (k = 2) is for specs built in code.
    #[serde(default)]
    pub privacy: PrivacySpec,
    /// The algorithm and its parameters.
    #[serde(default)]
    pub algorithm: AlgorithmSpec,
    /// How risk is measured (reports only; never changes the release).
    #[serde(default)]
    pub risk: RiskSpec,
}

impl JobSpec {
    /// The job without its input, output and storage settings: what it
    /// publishes and how, not where it reads or writes. The identity of a
    /// job in a certificate's hash and in a release's pseudonym salt, so a
    /// daily job over each day's file is one job, and SQL's `anonymize()`
    /// of a job file is that job.
    pub fn without_io(&self) -> JobSpec {
        let mut spec = self.clone();
        spec.input = Default::default();
        spec.output = Default::default();
        spec.storage = Default::default();
        spec.resources = Default::default();
        spec
    }

    /// The job as a reader of its release sees it: only the QI and
    /// sensitive columns, each read as plain categorical labels (no
    /// hierarchy, intervals or masking), so a class is rows with equal
    /// published labels. The release verifier and the risk of a release
    /// read it this way. A sensitive attribute keeps its `hierarchy`: it is
    /// no generalisation but the ground distance of hierarchical
    /// t-closeness, which the release verifier attaches when it is given
    /// the file.
    pub fn labels_only(&self) -> JobSpec {
        let mut labels = self.clone();
        // The entity's attribute stays: the job still names it.
        let entity = self.entity_column().map(str::to_string);
        labels.attributes.retain(|a| {
            matches!(a.role, Role::QuasiIdentifier | Role::Sensitive)
                || entity.as_deref() == Some(a.name.as_str())
        });
        for a in &mut labels.attributes {
            a.kind = Some(Kind::Categorical);
            if a.role != Role::Sensitive {
                a.hierarchy = None;
            }
            a.intervals = None;
            a.cuts = None;
            a.windows = Vec::new();
            a.masking = false;
            // The release's values are coded and aggregated already: its
            // labels are read as they are.
            a.top_code = None;
            a.bottom_code = None;
            a.microaggregation = None;
        }
        // The research subset of δ-presence is never published: the release
        // alone cannot show it, and the population is recounted apart
        // ([`crate::privacy::DeltaPresence`]).
        labels.privacy.models.remove("delta-presence");
        labels
    }

    /// Checks the parts of the spec that need no data: roles, k, limits.
    ///
    /// # Errors
    /// The l-diversity variant (distinct when not given).
    pub fn diversity(&self) -> Diversity {
        self.privacy.diversity.unwrap_or_default()
    }

    /// The sensitive columns l-diversity applies to: `privacy.sensitive`, or
    /// every sensitive attribute in job order.
    pub fn diversity_columns(&self) -> Vec<String> {
        match &self.privacy.sensitive {
            Some(cols) => cols.clone(),
            None => self.sensitive().map(|a| a.name.clone()).collect(),
        }
    }

    /// The largest k the job asks for: `privacy.k` and the k of every
    /// `<shield, k>` requirement.
    pub fn strictest_k(&self) -> usize {
        self.privacy
            .requirements
            .iter()
            .map(|r| r.k)
            .fold(self.privacy.k, usize::max)
    }

    /// The input columns the engine encodes: the QI and sensitive
    /// attributes, and the research subset of a δ-presence job (what pass 1
    /// of every front end reads).
    pub fn encoded_columns(&self) -> Vec<String> {
        self.quasi_identifiers()
            .chain(self.sensitive())
            .map(|a| a.name.clone())
            .chain(self.presence_subset().map(String::from))
            .collect()
    }

    /// The boolean column marking the research subset of a δ-presence job
    /// (`[privacy.models.delta-presence] subset`): the encoder reads it
    /// beside the QIs, and only its `true` rows are published.
    pub fn presence_subset(&self) -> Option<&str> {
        self.privacy
            .models
            .get("delta-presence")?
            .get("subset")?
            .as_str()
            .map(str::trim)
    }

    /// The column naming the person of each row (`privacy.entity` set to
    /// a column, not `"row"`): the privacy unit of [`crate::entity`].
    pub fn entity_column(&self) -> Option<&str> {
        self.privacy.entity.as_deref().filter(|&e| e != ENTITY_ROW)
    }

    /// The QI attributes, in job order.
    pub fn quasi_identifiers(&self) -> impl Iterator<Item = &AttributeSpec> {
        self.attributes
            .iter()
            .filter(|a| a.role == Role::QuasiIdentifier)
    }

    /// The sensitive attributes, in job order.
    pub fn sensitive(&self) -> impl Iterator<Item = &AttributeSpec> {
        self.attributes.iter().filter(|a| a.role == Role::Sensitive)
    }

    /// The role of a column (insensitive when not listed).
    pub fn role_of(&self, column: &str) -> Role {
        self.attributes
            .iter()
            .find(|a| a.name == column)
            .map_or(Role::Insensitive, |a| a.role)
    }

    /// Hierarchy files the front end must load: `(attribute, path, delimiter)`,
    /// those of the quasi-identifiers (generalisation) and of the sensitive
    /// attributes (the ground distance of hierarchical t-closeness).
    pub fn hierarchy_files(&self) -> impl Iterator<Item = (&str, &str, char)> {
        self.quasi_identifiers()
            .chain(self.sensitive())
            .filter_map(|a| {
                a.hierarchy.as_deref().map(|p| {
                    let d = a
                        .hierarchy_delimiter
                        .as_deref()
                        .and_then(|d| d.chars().next())
                        .unwrap_or(';');
                    (a.name.as_str(), p, d)
                })
            })
    }

    /// Refuses a job document (TOML or JSON, overrides applied) that names
    /// no privacy model: no `privacy` table with `k` or `requirements`.
    /// kanon has no default k, so a forgotten `[privacy]` section never
    /// certifies a protection nobody chose (issue 32, item 8). Every front
    /// end's job loader calls it before deserialising.
    ///
    /// # Errors
    /// [`crate::error::Error::Spec`] naming `privacy.k`.
    pub fn require_privacy(has_k_or_requirements: bool) -> crate::error::Result<()> {
        if has_k_or_requirements {
            return Ok(());
        }
        Err(crate::error::Error::spec(
            "privacy.k",
            "the job names no privacy model: kanon has no default k, so that a forgotten `[privacy]` section never certifies a protection nobody chose; add `[privacy]` with `k = ...` (at least 2) or `requirements`",
        ))
    }

    /// The columns whose values are identities, not quantities: the
    /// identifying and pseudonymised ones. A front end reads them as text
    /// ([`InputSpec::text_columns`]), so that type inference never merges
    /// two identifiers (`007` and `7`).
    pub fn text_columns(&self) -> Vec<String> {
        self.attributes
            .iter()
            .filter(|a| matches!(a.role, Role::Identifying | Role::Pseudonymised))
            .map(|a| a.name.clone())
            .collect()
    }

    /// The job that reads the raw values of the QIs `qis` as categories,
    /// rows with a null QI counted apart (suppressed): what `kanon
    /// inspect` measures and what workers count of a table (issue 35), so
    /// that counts taken apart merge by their labels.
    pub fn raw_categories(qis: &[String]) -> JobSpec {
        JobSpec {
            attributes: qis
                .iter()
                .map(|q| AttributeSpec {
                    name: q.clone(),
                    role: Role::QuasiIdentifier,
                    kind: Some(Kind::Categorical),
                    hierarchy: None,
                    hierarchy_delimiter: None,
                    intervals: None,
                    cuts: None,
                    masking: false,
                    weight: None,
                    nulls: NullPolicy::Suppress,
                    key_env: None,
                    top_code: None,
                    bottom_code: None,
                    microaggregation: None,
                    windows: Vec::new(),
                })
                .collect(),
            ..Default::default()
        }
    }

    /// The input settings with [`JobSpec::text_columns`] filled in: what a
    /// front end opens the input with.
    pub fn input_spec(&self) -> InputSpec {
        InputSpec {
            text_columns: self.text_columns(),
            ..self.input.clone()
        }
    }

    /// The share of rows that may be suppressed.
    pub fn suppression_limit(&self) -> f64 {
        self.privacy.suppression_limit.unwrap_or(0.0)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_a_job_file() {
        let spec: JobSpec = toml::from_str(
            r#"
            [input]
            path = "adult.parquet"
            [privacy]
            k = 10
            [algorithm]
            name = "kaca"
            seed = 7
            strategy = "random"
            [[attributes]]
            name = "age"
            role = "quasi-identifier"
            intervals = [5, 10, 20]
            [[attributes]]
            name = "sex"
            role = "qi"
            hierarchy = "sex.csv"
            [[attributes]]
            name = "salary"
            role = "sensitive"
            "#,
        )
        .unwrap();
        spec.validate().unwrap();
        assert_eq!(spec.quasi_identifiers().count(), 2);
        assert_eq!(spec.algorithm.params["strategy"], "random");
        assert_eq!(
            spec.hierarchy_files().collect::<Vec<_>>(),
            vec![("sex", "sex.csv", ';')]
        );
    }
}
