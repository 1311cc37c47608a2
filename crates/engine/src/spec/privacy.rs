//! The privacy settings of a job ([`PrivacySpec`]): k, the suppression
//! limit, per-group [`RequirementSpec`]s, and the l-diversity settings
//! ([`Diversity`], [`MissingSensitive`]).

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use crate::error::{Error, Result};

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
    /// Texts that stand for a missing sensitive value, compared after
    /// trimming and ignoring case; default [`DEFAULT_MISSING_VALUES`]
    /// (`NULL`, `N/A`, `?`, ...). Together with NULL, NaN and blank text
    /// they are missing: under `missing_sensitive = "ignore"` they count
    /// toward no l, under `"value"` they are one value together. `[]`
    /// leaves only NULL, NaN and blank text missing.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub missing_values: Option<Vec<String>>,
    /// Further privacy models by registered name, each with its parameters
    /// (`[privacy.models.NAME]`; see `privacy::registry`): every published
    /// class must satisfy each of them too.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub models: BTreeMap<String, serde_json::Value>,
    /// The privacy unit (issue 31). Unset, a job whose identifying or
    /// pseudonymised column repeats a value on several rows is refused
    /// (`crate::identities`): those rows may be one person, and k counts
    /// rows. `"row"` says that repeated values are not people (a hospital
    /// code, a batch number) and the row is the unit. A column name (role
    /// identifying or pseudonymised) makes the person the unit: k counts
    /// distinct values of that column per class, l counts each person once,
    /// and all of a person's rows share one class ([`crate::entity`]).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub entity: Option<String>,
    /// Pseudonyms that join across releases. Unset (false), each release's
    /// pseudonyms are its own: the key is salted with the job and the
    /// input's identifiers, so two releases of one table (another job, or
    /// another day's rows) cannot be joined on them, while a rerun of the
    /// same job on the same input gives the same bytes. `true` keeps one
    /// pseudonym per value and key across releases, to join them on
    /// purpose (issue 31, item 4).
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub joinable_pseudonyms: bool,
}

/// `privacy.entity` for "the row is the privacy unit".
pub const ENTITY_ROW: &str = "row";

/// The texts that stand for a missing sensitive value when the job gives
/// no `privacy.missing_values` (compared trimmed, ignoring case): the
/// placeholders of SQL, R, pandas, spreadsheets and survey exports. A real
/// value among them only counts toward l less, which publishes less.
pub const DEFAULT_MISSING_VALUES: [&str; 12] = [
    "NULL", "N/A", "NA", "n.a.", "?", "-", "--", "NaN", "None", "nil", "#N/A", "(null)",
];

impl PrivacySpec {
    /// The placeholders of a missing sensitive value, trimmed and in
    /// lower case: `missing_values` or [`DEFAULT_MISSING_VALUES`].
    pub fn missing_placeholders(&self) -> Vec<String> {
        match &self.missing_values {
            Some(v) => v.iter().map(|s| s.trim().to_lowercase()).collect(),
            None => DEFAULT_MISSING_VALUES
                .iter()
                .map(|s| s.to_lowercase())
                .collect(),
        }
    }
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
            missing_values: None,
            models: BTreeMap::new(),
            entity: None,
            joinable_pseudonyms: false,
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
