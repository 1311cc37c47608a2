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
    /// How to reach object storage (interpreted by the front end).
    #[serde(default)]
    pub storage: StorageSpec,
    /// Every column the job knows about. Columns of the input not listed here
    /// are an error unless `[columns] unlisted` says what they are
    /// ([`crate::columns`]).
    #[serde(default)]
    pub attributes: Vec<AttributeSpec>,
    /// The policy for input columns not listed in `attributes`.
    #[serde(default)]
    pub columns: crate::columns::ColumnsSpec,
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
    /// CSV quote character (one character), default `"`.
    #[serde(default)]
    pub quote: Option<String>,
    /// CSV escape character (one character); default none (a quote inside a
    /// quoted field is doubled).
    #[serde(default)]
    pub escape: Option<String>,
    /// CSV comment character (one character): lines starting with it are
    /// skipped; default none.
    #[serde(default)]
    pub comment: Option<String>,
    /// CSV: number of rows read to infer the column types, default 10000.
    #[serde(default)]
    pub infer_rows: Option<usize>,
}

/// Output settings (read by the front end, not the engine).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct OutputSpec {
    /// A path or URL.
    pub path: Option<String>,
    /// Split the release into Parquet files of about this size (e.g.
    /// `"256MB"`); the output path is then a directory (or prefix) of
    /// `part-NNNNN.parquet` files. Default: one file.
    #[serde(default)]
    pub max_file_size: Option<String>,
    /// Rows per Parquet row group, default 1048576 (a row group is also
    /// closed at about 128 MiB).
    #[serde(default)]
    pub row_group_rows: Option<usize>,
    /// zstd compression level (1..=22), default 3.
    #[serde(default)]
    pub compression_level: Option<i32>,
    /// Replace an existing release, like `--overwrite`; default false.
    #[serde(default)]
    pub overwrite: Option<bool>,
    /// Released rows sorted in memory at once (the release order is derived
    /// from the classes, not the input); a larger release is written in
    /// buckets, reading the input once per bucket. Default 2000000.
    #[serde(default)]
    pub buffer_rows: Option<u64>,
}

/// Object storage settings (read by the front end, not the engine).
/// Credentials never go here: they come from the usual AWS environment
/// variables or profile files.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct StorageSpec {
    /// Endpoint of an S3-compatible store, e.g. `http://127.0.0.1:9000`;
    /// default AWS (or `AWS_ENDPOINT_URL`).
    #[serde(default)]
    pub endpoint: Option<String>,
    /// Region; default `AWS_REGION`/`AWS_DEFAULT_REGION`, the profile's, or
    /// `us-east-1`.
    #[serde(default)]
    pub region: Option<String>,
    /// Allow plain-HTTP endpoints (local test servers); default false.
    #[serde(default)]
    pub allow_http: Option<bool>,
    /// Virtual-hosted-style requests (`bucket.endpoint/key`) instead of
    /// path-style (`endpoint/bucket/key`); default false.
    #[serde(default)]
    pub virtual_hosted_style: Option<bool>,
    /// AWS profile of the shared credentials and config files; default
    /// `AWS_PROFILE` or `default`.
    #[serde(default)]
    pub profile: Option<String>,
    /// Retries of a failed request, default 10 (backing off from 0.5 s to
    /// 15 s between tries).
    #[serde(default)]
    pub max_retries: Option<usize>,
    /// No retry starts later than this many seconds after a request's first
    /// try, default 60.
    #[serde(default)]
    pub retry_timeout_s: Option<u64>,
    /// Timeout of one request in seconds, default 30.
    #[serde(default)]
    pub timeout_s: Option<u64>,
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
    /// An identifier the data owner must still join on: released as the
    /// keyed HMAC-SHA256 of its value (64 lowercase hex digits; nulls stay
    /// null), the key read by the front end from the environment variable
    /// `key_env` ([`crate::recode::Pseudonymiser`]).
    #[serde(alias = "pseudonymized")]
    Pseudonymised,
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
    /// Per-attribute weight in weighted distances and losses (Han et al. 2014 `x_A`,
    /// the L-clustering paper `p_i`/`q_j`); default 1.
    #[serde(default)]
    pub weight: Option<f64>,
    /// What to do with nulls (QIs only).
    #[serde(default)]
    pub nulls: NullPolicy,
    /// The environment variable holding the key of a pseudonymised column,
    /// default [`DEFAULT_KEY_ENV`]. Only the variable's name is part of the
    /// job: the key itself never is.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub key_env: Option<String>,
}

/// The environment variable a pseudonymised column's key is read from when
/// the attribute gives no `key_env`.
pub const DEFAULT_KEY_ENV: &str = "KANON_PSEUDONYM_KEY";

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

    /// The environment variable holding this attribute's pseudonym key.
    pub fn key_env(&self) -> &str {
        self.key_env.as_deref().unwrap_or(DEFAULT_KEY_ENV)
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
    /// Further anonymity requirements `<shield, k>` (HeuristicMin, the HeuristicMin paper
    /// section 3.1): the projection of the release on the shield holds every
    /// tuple at least k times. They add to `k`.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub requirements: Vec<RequirementSpec>,
    /// Largest share of rows (0..=1) that may be suppressed; default 0.
    #[serde(default)]
    pub suppression_limit: Option<f64>,
    /// l of l-diversity (`docs/SPEC.md` section 1): every published class must be
    /// l-diverse in each sensitive column of `sensitive`. Absent: no
    /// l-diversity.
    #[serde(default)]
    pub l: Option<usize>,
    /// Which l-diversity: `distinct` (default), `entropy` or `recursive`.
    #[serde(default)]
    pub diversity: Option<Diversity>,
    /// c of recursive (c,l)-diversity (required by, and only allowed with,
    /// `diversity = "recursive"`).
    #[serde(default)]
    pub c: Option<f64>,
    /// The sensitive columns l-diversity applies to; default every attribute
    /// with `role = "sensitive"`. Each column is checked on its own.
    #[serde(default)]
    pub sensitive: Option<Vec<String>>,
    /// Whether missing sensitive values (NULL, NaN, empty strings) count
    /// toward l: `ignore` (default) leaves them out of distinct, entropy and
    /// recursive l, `value` counts them as one value of their own.
    #[serde(default)]
    pub missing_sensitive: MissingSensitive,
}

/// How l-diversity treats missing sensitive values (NULL, NaN, `""`).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum MissingSensitive {
    /// A missing value says nothing an attacker could not guess: it does not
    /// count toward l (the reading that publishes less).
    #[default]
    Ignore,
    /// Missing is a value of its own (e.g. "not asked" is itself sensitive).
    Value,
}

impl Default for PrivacySpec {
    fn default() -> Self {
        PrivacySpec {
            k: 2,
            requirements: Vec::new(),
            suppression_limit: None,
            l: None,
            diversity: None,
            c: None,
            sensitive: None,
            missing_sensitive: MissingSensitive::Ignore,
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

/// The variant of l-diversity (Machanavajjhala et al., "l-Diversity: Privacy
/// beyond k-anonymity", ICDE 2006 / TKDD 2007).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Diversity {
    /// At least l distinct sensitive values per class (the model of
    /// L-clustering, the L-clustering paper).
    #[default]
    Distinct,
    /// The entropy of the class's sensitive values is at least `ln l`.
    Entropy,
    /// Recursive (c,l): the most frequent value occurs fewer than `c` times
    /// the total of the l-th and rarer values.
    Recursive,
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
    /// The job as a reader of its release sees it: only the QI and
    /// sensitive columns, each read as plain categorical labels (no
    /// hierarchy, intervals or masking), so a class is rows with equal
    /// published labels. The release verifier and the risk of a release
    /// read it this way.
    pub fn labels_only(&self) -> JobSpec {
        let mut labels = self.clone();
        labels
            .attributes
            .retain(|a| matches!(a.role, Role::QuasiIdentifier | Role::Sensitive));
        for a in &mut labels.attributes {
            a.kind = Some(Kind::Categorical);
            a.hierarchy = None;
            a.intervals = None;
            a.cuts = None;
            a.masking = false;
        }
        labels
    }

    /// Checks the parts of the spec that need no data: roles, k, limits.
    ///
    /// # Errors
    /// [`Error::Spec`] naming the setting.
    pub fn validate(&self) -> Result<()> {
        if self.privacy.k == 0 && self.privacy.requirements.is_empty() {
            return Err(Error::spec(
                "privacy.k",
                "give k (at least 2) or `privacy.requirements`",
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
        self.validate_diversity()?;
        let strongest = self
            .privacy
            .requirements
            .iter()
            .map(|r| r.k)
            .chain([self.privacy.k, self.privacy.l.unwrap_or(0)])
            .max()
            .unwrap_or(0);
        // (A requirement of k = 0 is refused with its own message by
        // `Privacy::from_spec`.)
        if strongest < 2 && self.privacy.requirements.iter().all(|r| r.k > 0) {
            return Err(Error::spec(
                "privacy.k",
                format!(
                    "k = {} protects nobody (every record may be a class of its own); set k >= 2 (or l >= 2 for l-diversity alone)",
                    self.privacy.k
                ),
            ));
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
            if a.key_env.is_some() && a.role != Role::Pseudonymised {
                return Err(Error::spec(
                    format!("attributes.{}.key_env", a.name),
                    "only applies to `role = \"pseudonymised\"`",
                ));
            }
            if a.key_env.as_deref().is_some_and(|v| v.trim().is_empty()) {
                return Err(Error::spec(
                    format!("attributes.{}.key_env", a.name),
                    "name an environment variable, e.g. key_env = \"KANON_PSEUDONYM_KEY\"",
                ));
            }
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

    /// Checks the l-diversity settings of `[privacy]`.
    fn validate_diversity(&self) -> Result<()> {
        let p = &self.privacy;
        let Some(l) = p.l else {
            for (given, name) in [
                (p.diversity.is_some(), "diversity"),
                (p.c.is_some(), "c"),
                (p.sensitive.is_some(), "sensitive"),
            ] {
                if given {
                    return Err(Error::spec(
                        format!("privacy.{name}"),
                        "only applies to l-diversity: set `l` as well (e.g. `l = 3`)",
                    ));
                }
            }
            return Ok(());
        };
        if l < 1 {
            return Err(Error::spec("privacy.l", "l must be at least 1"));
        }
        match (self.diversity(), p.c) {
            (Diversity::Recursive, None) => {
                return Err(Error::spec(
                    "privacy.c",
                    "recursive (c,l)-diversity needs `c` (a number > 0, e.g. `c = 2`)",
                ))
            }
            (Diversity::Recursive, Some(c)) if !(c > 0.0 && c.is_finite()) => {
                return Err(Error::spec("privacy.c", "must be a number > 0"))
            }
            (Diversity::Distinct | Diversity::Entropy, Some(_)) => {
                return Err(Error::spec(
                    "privacy.c",
                    "only applies to `diversity = \"recursive\"`",
                ))
            }
            _ => {}
        }
        let columns = self.diversity_columns();
        if columns.is_empty() {
            return Err(Error::spec(
                "privacy.l",
                "l-diversity needs a sensitive column: give an attribute `role = \"sensitive\"`",
            ));
        }
        for c in &columns {
            if self.role_of(c) != Role::Sensitive {
                return Err(Error::spec(
                    "privacy.sensitive",
                    format!("`{c}` is not an attribute with `role = \"sensitive\"`"),
                ));
            }
        }
        Ok(())
    }

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

    #[test]
    fn l_diversity_settings() {
        let job = |privacy: &str| -> JobSpec {
            toml::from_str(&format!(
                "[privacy]\n{privacy}\n[[attributes]]\nname = \"q\"\nrole = \"qi\"\n[[attributes]]\nname = \"d\"\nrole = \"sensitive\"\n[[attributes]]\nname = \"x\"\n"
            ))
            .unwrap()
        };
        let ok = job("k = 1\nl = 3\ndiversity = \"entropy\"");
        ok.validate().unwrap();
        assert_eq!(ok.diversity(), Diversity::Entropy);
        assert_eq!(ok.diversity_columns(), vec!["d".to_string()]);
        assert_eq!(job("k = 1\nl = 2").diversity(), Diversity::Distinct);
        let err = |privacy: &str| job(privacy).validate().unwrap_err().to_string();
        assert!(err("k = 1\nl = 0").contains("privacy.l"));
        assert!(err("k = 1\nl = 2\ndiversity = \"recursive\"").contains("privacy.c"));
        assert!(err("k = 1\nl = 2\ndiversity = \"recursive\"\nc = 0").contains("> 0"));
        assert!(err("k = 1\nl = 2\nc = 2").contains("recursive"));
        assert!(err("k = 1\ndiversity = \"entropy\"").contains("set `l`"));
        assert!(err("k = 1\nl = 2\nsensitive = [\"x\"]").contains("`x`"));
        assert!(err("k = 1\nl = 2\nsensitive = [\"q\"]").contains("`q`"));
        let bad: std::result::Result<JobSpec, _> =
            toml::from_str("[privacy]\nk = 1\nl = 2\ndiversity = \"probabilistic\"\n");
        assert!(bad.unwrap_err().to_string().contains("distinct"));
        let mut none = ok.clone();
        none.attributes.retain(|a| a.role != Role::Sensitive);
        assert!(none
            .validate()
            .unwrap_err()
            .to_string()
            .contains("sensitive column"));
    }
}
