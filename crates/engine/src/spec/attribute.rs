//! One column of a job ([`AttributeSpec`]): its [`Role`], [`Kind`],
//! [`NullPolicy`] and how a quasi-identifier is generalised
//! ([`GeneralisationSpec`]: a hierarchy file, intervals, cuts, masking or
//! flexible ranges and sets).

use serde::{Deserialize, Serialize};

use crate::error::{Error, Result};
use crate::hierarchy::IntervalLevels;

/// The role of a column in the job. A job file must give every attribute
/// its role: a forgotten `role` line would otherwise publish a column meant
/// to be generalised as is (issue 32, item 1), so the default exists only
/// for code that builds specs by hand.
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
///
/// Deserialised through a raw form with an optional role, which refuses an attribute
/// without `role` (naming it and the five roles) instead of defaulting to
/// `insensitive`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, try_from = "RawAttribute")]
pub struct AttributeSpec {
    /// Column name in the input.
    pub name: String,
    /// Role; required in a job file.
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
    /// Top coding of a numeric column (Hundepool et al., *Statistical
    /// Disclosure Control*, 2012, §3.4.4; sdcMicro's `topBotCoding`): every
    /// value above the bound is published as the bound (integer columns:
    /// its integer part), which then reads "this or more". A quasi-identifier
    /// publishes the coded values' leaf as `>=T` and every interval or
    /// range that holds it as open-ended (`>=lo`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub top_code: Option<f64>,
    /// Bottom coding: every value below the bound is published as the
    /// bound (integer columns: rounded up), read "this or less" (`<=B`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub bottom_code: Option<f64>,
    /// Microaggregation of a quasi-identifier (ARX's
    /// `MicroAggregationFunction`; Domingo-Ferrer and Mateo-Sanz 2002): the
    /// algorithm forms its classes with the column's generalisation as
    /// usual, and each class publishes one aggregate of its values instead
    /// of the generalised label.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub microaggregation: Option<Microaggregation>,
    /// Windows a numeric QI with `intervals` (or `cuts`) may publish besides
    /// its levels' intervals: widths in finest intervals, each at every
    /// offset (`[2, 3]` over 5-year intervals: `[25-34]`, `[30-44]`, ...).
    /// A window is no node of the declared hierarchy, so only a job that
    /// declares one publishes it (`cover` uses them; issue 34). Empty by
    /// default.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub windows: Vec<usize>,
}

/// What a microaggregated quasi-identifier publishes for each class
/// ([`AttributeSpec::microaggregation`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Microaggregation {
    /// The arithmetic mean of the class's values (numeric columns),
    /// rounded to 4 decimals.
    Mean,
    /// The class's (lower) median value (numeric columns).
    Median,
    /// The class's most frequent value (ties: the smallest).
    Mode,
    /// `[min-max]` of the class's values (numeric columns).
    Interval,
    /// `{a,b,...}`: the set of the class's distinct values.
    Set,
}

impl Microaggregation {
    /// Whether the function needs numbers (mean, median, interval).
    pub fn needs_numbers(self) -> bool {
        matches!(self, Self::Mean | Self::Median | Self::Interval)
    }
}

/// An attribute as written in a job file: [`AttributeSpec`] with the role
/// still optional, so that its absence is refused with a message that
/// names the attribute.
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawAttribute {
    name: String,
    #[serde(default)]
    role: Option<Role>,
    #[serde(default, rename = "type")]
    kind: Option<Kind>,
    #[serde(default)]
    hierarchy: Option<String>,
    #[serde(default)]
    hierarchy_delimiter: Option<String>,
    #[serde(default)]
    intervals: Option<Vec<f64>>,
    #[serde(default)]
    cuts: Option<Vec<Vec<f64>>>,
    #[serde(default)]
    masking: bool,
    #[serde(default)]
    weight: Option<f64>,
    #[serde(default)]
    nulls: NullPolicy,
    #[serde(default)]
    key_env: Option<String>,
    #[serde(default)]
    top_code: Option<f64>,
    #[serde(default)]
    bottom_code: Option<f64>,
    #[serde(default)]
    microaggregation: Option<Microaggregation>,
    #[serde(default)]
    windows: Vec<usize>,
}

impl TryFrom<RawAttribute> for AttributeSpec {
    type Error = String;

    fn try_from(raw: RawAttribute) -> std::result::Result<Self, String> {
        let Some(role) = raw.role else {
            let generalised = raw.hierarchy.is_some()
                || raw.intervals.is_some()
                || raw.cuts.is_some()
                || raw.masking;
            let hint = if generalised {
                " (it has a generalisation, so it is probably `quasi-identifier`)"
            } else {
                ""
            };
            return Err(format!(
                "attribute `{}` has no `role`{hint}; every attribute needs one, so that no column is published raw by accident: add `role = \"quasi-identifier\"` (or sensitive, identifying, pseudonymised, insensitive)",
                raw.name
            ));
        };
        Ok(AttributeSpec {
            name: raw.name,
            role,
            kind: raw.kind,
            hierarchy: raw.hierarchy,
            hierarchy_delimiter: raw.hierarchy_delimiter,
            intervals: raw.intervals,
            cuts: raw.cuts,
            masking: raw.masking,
            weight: raw.weight,
            nulls: raw.nulls,
            key_env: raw.key_env,
            top_code: raw.top_code,
            bottom_code: raw.bottom_code,
            microaggregation: raw.microaggregation,
            windows: raw.windows,
        })
    }
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

    /// Checks top/bottom coding and microaggregation against the
    /// attribute's role and generalisation (the column's type is checked
    /// when the data is read).
    ///
    /// # Errors
    /// [`Error::Spec`] naming the attribute and the setting, with the fix.
    pub fn check_transformations(&self) -> Result<()> {
        let at = |setting: &str| format!("attributes.{}.{setting}", self.name);
        for (setting, bound) in [
            ("top_code", self.top_code),
            ("bottom_code", self.bottom_code),
        ] {
            let Some(bound) = bound else { continue };
            if !bound.is_finite() {
                return Err(Error::spec(at(setting), "must be a finite number"));
            }
            if matches!(self.role, Role::Identifying | Role::Pseudonymised) {
                return Err(Error::spec(
                    at(setting),
                    format!(
                        "`{}` is not published as values (identifying columns are dropped, pseudonymised ones hashed): remove `{setting}`",
                        self.name
                    ),
                ));
            }
            if self.hierarchy.is_some() || self.masking || self.kind == Some(Kind::Categorical) {
                return Err(Error::spec(
                    at(setting),
                    format!(
                        "codes numbers, but `{}` is categorical (a hierarchy file, masking or type = \"categorical\"): generalise it with `intervals` or `cuts` (or as ranges, with neither), or code its hierarchy file's top values yourself",
                        self.name
                    ),
                ));
            }
        }
        if let (Some(bottom), Some(top)) = (self.bottom_code, self.top_code) {
            if bottom >= top {
                return Err(Error::spec(
                    at("bottom_code"),
                    format!(
                        "must be below top_code ({bottom} >= {top}): every value would be coded"
                    ),
                ));
            }
        }
        if let Some(m) = self.microaggregation {
            if self.role != Role::QuasiIdentifier {
                return Err(Error::spec(
                    at("microaggregation"),
                    "publishes one value per class of a quasi-identifier: set role = \"quasi-identifier\", or remove `microaggregation`",
                ));
            }
            let categorical =
                self.hierarchy.is_some() || self.masking || self.kind == Some(Kind::Categorical);
            if m.needs_numbers() && categorical {
                return Err(Error::spec(
                    at("microaggregation"),
                    format!(
                        "`{}` is categorical, and a mean, median or interval needs numbers: use \"mode\" or \"set\"",
                        self.name
                    ),
                ));
            }
        }
        Ok(())
    }

    /// Refuses a generalisation on a column that is not generalised: a
    /// `hierarchy`, `intervals`, `cuts` or `masking` on an insensitive,
    /// identifying or pseudonymised column says the author meant a
    /// quasi-identifier (a sensitive column may name a `hierarchy`: the
    /// ground distance of hierarchical t-closeness).
    ///
    /// # Errors
    /// [`Error::Spec`] naming the attribute and the setting.
    pub fn check_generalisation_role(&self) -> Result<()> {
        if self.role == Role::QuasiIdentifier {
            return Ok(());
        }
        let given = [
            (
                "hierarchy",
                self.hierarchy.is_some() && self.role != Role::Sensitive,
            ),
            ("intervals", self.intervals.is_some()),
            ("cuts", self.cuts.is_some()),
            ("masking", self.masking),
        ];
        if let Some((setting, _)) = given.iter().find(|(_, g)| *g) {
            let role = serde_json::to_value(self.role)
                .ok()
                .and_then(|v| v.as_str().map(str::to_string))
                .unwrap_or_default();
            return Err(Error::spec(
                format!("attributes.{}.{setting}", self.name),
                format!(
                    "`{setting}` generalises a quasi-identifier, but `{}` has role = \"{role}\", whose values are {}; set role = \"quasi-identifier\" if it should be generalised, or remove `{setting}`",
                    self.name,
                    match self.role {
                        Role::Sensitive => "published as they are",
                        Role::Identifying => "dropped",
                        Role::Pseudonymised => "replaced by keyed hashes",
                        _ => "published unchanged",
                    }
                ),
            ));
        }
        Ok(())
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
