//! One column of a job ([`AttributeSpec`]): its [`Role`], [`Kind`],
//! [`NullPolicy`] and how a quasi-identifier is generalised
//! ([`GeneralisationSpec`]: a hierarchy file, intervals, cuts, masking or
//! flexible ranges and sets).

use serde::{Deserialize, Serialize};

use crate::error::{Error, Result};
use crate::hierarchy::IntervalLevels;

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
