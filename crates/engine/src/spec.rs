//! The job specification: what to anonymise, how, and under which privacy
//! model. Plain serde data, loaded from TOML (or JSON) by the front ends.
//!
//! The engine does no I/O: hierarchy files named here are read by the front
//! end and handed over as parsed [`Hierarchy`](crate::hierarchy::Hierarchy)
//! values (see [`JobSpec::hierarchy_files`]).

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use crate::error::{Error, Result};
use crate::hierarchy::IntervalLevels;

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
    /// Every column the job knows about. Columns of the input not listed here
    /// are insensitive and passed through unchanged.
    #[serde(default)]
    pub attributes: Vec<AttributeSpec>,
    /// The privacy model the release must satisfy.
    #[serde(default)]
    pub privacy: PrivacySpec,
    /// The algorithm and its parameters.
    #[serde(default)]
    pub algorithm: AlgorithmSpec,
}

/// Input settings (read by the front end, not the engine).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct InputSpec {
    /// A path or URL.
    pub path: Option<String>,
    /// `csv` or `parquet`; inferred from the file extension when absent.
    pub format: Option<String>,
    /// CSV field delimiter (one character), default `,`.
    pub delimiter: Option<String>,
    /// Whether the CSV has a header row, default true.
    pub header: Option<bool>,
}

/// Output settings (read by the front end, not the engine).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct OutputSpec {
    /// A path or URL.
    pub path: Option<String>,
}

/// The role of a column in the job.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Role {
    /// Directly identifying (name, SSN): dropped from the release.
    Identifying,
    /// Quasi-identifier: generalised.
    #[serde(alias = "qi")]
    QuasiIdentifier,
    /// Sensitive: kept as is, constrained by l-diversity.
    Sensitive,
    /// Anything else: passed through unchanged.
    #[default]
    Insensitive,
}

/// Whether a QI is ordered (numeric) or unordered (categorical).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Kind {
    /// Numeric values: ranges, interval hierarchies, range distances.
    Numeric,
    /// Unordered values: hierarchies or value sets.
    Categorical,
}

/// What to do with nulls in a QI column.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum NullPolicy {
    /// Refuse the job, naming the column and the number of null rows.
    #[default]
    Error,
    /// Suppress rows with a null in this QI (counted in the report).
    Suppress,
}

/// One column of the job.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct AttributeSpec {
    /// Column name in the input.
    pub name: String,
    /// Role; default insensitive.
    #[serde(default)]
    pub role: Role,
    /// Numeric or categorical; default numeric when `intervals` or `cuts` are
    /// given or the column has a numeric type, categorical otherwise.
    #[serde(default, rename = "type")]
    pub kind: Option<Kind>,
    /// A hierarchy file in the CSV form `leaf;parent;...;*`.
    #[serde(default)]
    pub hierarchy: Option<String>,
    /// Delimiter of the hierarchy file, default `;`.
    #[serde(default)]
    pub hierarchy_delimiter: Option<String>,
    /// Equal-width interval levels for a numeric QI, e.g. `[5, 10, 20]`.
    #[serde(default)]
    pub intervals: Option<Vec<f64>>,
    /// Explicit cut points per level for a numeric QI.
    #[serde(default)]
    pub cuts: Option<Vec<Vec<f64>>>,
    /// Digit masking (`4351 -> 435* -> ...`) for equal-length codes.
    #[serde(default)]
    pub masking: bool,
    /// Per-attribute weight in weighted distances and losses (seed 003 `x_A`,
    /// seed 004 `p_i`/`q_j`); default 1.
    #[serde(default)]
    pub weight: Option<f64>,
    /// What to do with nulls (QIs only).
    #[serde(default)]
    pub nulls: NullPolicy,
}

/// How a QI is generalised.
#[derive(Debug, Clone, PartialEq)]
pub enum GeneralisationSpec {
    /// Through a hierarchy file (path as written in the job).
    HierarchyFile(String),
    /// Through numeric intervals built from the data.
    Intervals(IntervalLevels),
    /// By masking trailing characters.
    Masking,
    /// Without a hierarchy: `[min-max]` ranges and `{a,b}` value sets.
    Flexible,
}

impl AttributeSpec {
    /// The generalisation this QI asked for.
    ///
    /// # Errors
    /// [`Error::Spec`] when more than one generalisation is given.
    pub fn generalisation(&self) -> Result<GeneralisationSpec> {
        let given = [
            self.hierarchy.is_some(),
            self.intervals.is_some(),
            self.cuts.is_some(),
            self.masking,
        ];
        if given.iter().filter(|g| **g).count() > 1 {
            return Err(Error::spec(
                format!("attributes.{}", self.name),
                "give at most one of `hierarchy`, `intervals`, `cuts`, `masking`",
            ));
        }
        Ok(if let Some(h) = &self.hierarchy {
            GeneralisationSpec::HierarchyFile(h.clone())
        } else if let Some(w) = &self.intervals {
            GeneralisationSpec::Intervals(IntervalLevels::Widths(w.clone()))
        } else if let Some(c) = &self.cuts {
            GeneralisationSpec::Intervals(IntervalLevels::Cuts(c.clone()))
        } else if self.masking {
            GeneralisationSpec::Masking
        } else {
            GeneralisationSpec::Flexible
        })
    }

    /// The weight of this attribute (default 1).
    pub fn weight(&self) -> f64 {
        self.weight.unwrap_or(1.0)
    }
}

/// The privacy model.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct PrivacySpec {
    /// k of k-anonymity: every published class holds at least k rows, i.e.
    /// the requirement `<all QIs, k>`. May be left out (0) when
    /// `requirements` are given.
    #[serde(default)]
    pub k: usize,
    /// Further anonymity requirements `<shield, k>` (HeuristicMin, seed 002
    /// section 3.1): the projection of the release on the shield holds every
    /// tuple at least k times. They add to `k`.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub requirements: Vec<RequirementSpec>,
    /// Largest share of rows (0..=1) that may be suppressed; default 0.
    #[serde(default)]
    pub suppression_limit: Option<f64>,
}

impl Default for PrivacySpec {
    fn default() -> Self {
        PrivacySpec {
            k: 2,
            requirements: Vec::new(),
            suppression_limit: None,
        }
    }
}

/// One anonymity requirement `<shield, k>` as written in a job file:
/// `{ shield = ["age", "sex"], k = 10 }`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RequirementSpec {
    /// Quasi-identifiers whose joint values must each occur at least k times.
    pub shield: Vec<String>,
    /// The anonymity degree.
    pub k: usize,
}

impl std::str::FromStr for RequirementSpec {
    type Err = Error;

    /// Parses the command-line form `age,sex:10` (shield, colon, k).
    fn from_str(s: &str) -> Result<Self> {
        let bad = || {
            Error::spec(
                "privacy.requirements",
                "write a requirement as `attribute,attribute,...:k`, e.g. `age,sex:10`",
            )
        };
        let (shield, k) = s.rsplit_once(':').ok_or_else(bad)?;
        let k = k.trim().parse().map_err(|_| bad())?;
        let shield: Vec<String> = shield
            .trim()
            .trim_start_matches('{')
            .trim_end_matches('}')
            .split(',')
            .map(|a| a.trim().to_string())
            .collect();
        Ok(RequirementSpec { shield, k })
    }
}

/// The algorithm and its parameters.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct AlgorithmSpec {
    /// Registered algorithm name, e.g. `mondrian`.
    pub name: String,
    /// Seed of every randomised choice; the same seed gives the same release.
    #[serde(default)]
    pub seed: u64,
    /// Algorithm-specific parameters (each algorithm rejects unknown ones).
    #[serde(flatten)]
    pub params: BTreeMap<String, serde_json::Value>,
}

impl Default for AlgorithmSpec {
    fn default() -> Self {
        AlgorithmSpec {
            name: "mondrian".into(),
            seed: 0,
            params: BTreeMap::new(),
        }
    }
}

impl AlgorithmSpec {
    /// Deserialises the algorithm-specific parameters into `P`.
    ///
    /// # Errors
    /// [`Error::Spec`] naming the bad parameter.
    pub fn params<P: serde::de::DeserializeOwned>(&self) -> Result<P> {
        let map: serde_json::Map<String, serde_json::Value> = self
            .params
            .iter()
            .map(|(k, v)| (k.clone(), v.clone()))
            .collect();
        serde_json::from_value(serde_json::Value::Object(map))
            .map_err(|e| Error::spec(format!("algorithm ({})", self.name), e.to_string()))
    }
}

impl JobSpec {
    /// Checks the parts of the spec that need no data: roles, k, limits.
    ///
    /// # Errors
    /// [`Error::Spec`] naming the setting.
    pub fn validate(&self) -> Result<()> {
        if self.privacy.k < 1 && self.privacy.requirements.is_empty() {
            return Err(Error::spec(
                "privacy.k",
                "k must be at least 1 (or give `privacy.requirements`)",
            ));
        }
        if let Some(s) = self.privacy.suppression_limit {
            if !(0.0..=1.0).contains(&s) {
                return Err(Error::spec(
                    "privacy.suppression_limit",
                    "must be a share between 0 and 1 (e.g. 0.02 for 2 %)",
                ));
            }
        }
        let mut seen = std::collections::HashSet::new();
        for a in &self.attributes {
            if !seen.insert(a.name.as_str()) {
                return Err(Error::spec(
                    format!("attributes.{}", a.name),
                    "listed more than once",
                ));
            }
            a.generalisation()?;
            if let Some(w) = a.weight {
                if !(w >= 0.0 && w.is_finite()) {
                    return Err(Error::spec(
                        format!("attributes.{}.weight", a.name),
                        "must be >= 0",
                    ));
                }
            }
        }
        if self.quasi_identifiers().next().is_none() {
            return Err(Error::spec(
                "attributes",
                "no quasi-identifier: give at least one attribute with role = \"quasi-identifier\"",
            ));
        }
        for (i, r) in self.privacy.requirements.iter().enumerate() {
            let setting = format!("privacy.requirements[{i}]");
            if r.k < 1 {
                return Err(Error::spec(format!("{setting}.k"), "k must be at least 1"));
            }
            if r.shield.is_empty() {
                return Err(Error::spec(
                    format!("{setting}.shield"),
                    "name at least one quasi-identifier",
                ));
            }
            let mut seen = std::collections::HashSet::new();
            for name in &r.shield {
                if self.role_of(name) != Role::QuasiIdentifier {
                    let qis: Vec<&str> =
                        self.quasi_identifiers().map(|a| a.name.as_str()).collect();
                    return Err(Error::spec(
                        format!("{setting}.shield"),
                        format!(
                            "`{name}` is not a quasi-identifier of the job; a shield names quasi-identifiers only ([{}])",
                            qis.join(", ")
                        ),
                    ));
                }
                if !seen.insert(name.as_str()) {
                    return Err(Error::spec(
                        format!("{setting}.shield"),
                        format!("`{name}` is listed more than once"),
                    ));
                }
            }
        }
        Ok(())
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

    /// Hierarchy files the front end must load: `(attribute, path, delimiter)`.
    pub fn hierarchy_files(&self) -> impl Iterator<Item = (&str, &str, char)> {
        self.quasi_identifiers().filter_map(|a| {
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

    #[test]
    fn rejects_bad_settings() {
        let bad: std::result::Result<JobSpec, _> = toml::from_str("[privacy]\nk = 2\nkk = 3\n");
        assert!(bad.unwrap_err().to_string().contains("kk"));
        let spec = JobSpec {
            attributes: vec![],
            ..Default::default()
        };
        assert!(spec
            .validate()
            .unwrap_err()
            .to_string()
            .contains("quasi-identifier"));
        let mut spec: JobSpec = toml::from_str(
            "[[attributes]]\nname = \"a\"\nrole = \"qi\"\nintervals = [5]\nhierarchy = \"a.csv\"\n",
        )
        .unwrap();
        assert!(spec
            .validate()
            .unwrap_err()
            .to_string()
            .contains("at most one"));
        spec.attributes[0].hierarchy = None;
        spec.privacy.k = 0;
        assert!(spec
            .validate()
            .unwrap_err()
            .to_string()
            .contains("privacy.k"));
    }
}
