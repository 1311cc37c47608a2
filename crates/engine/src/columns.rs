//! The column policy: every input column has a role, and every column the
//! job names exists.
//!
//! A column the job does not mention would otherwise be published as it is,
//! and a typo in an identifying column's name (`patient_idd`) would publish
//! the real identifiers. So an unlisted column is an error unless the job
//! opts in with `[columns] unlisted = "insensitive"` (publish them) or
//! `"identifying"` (drop them); a job attribute the input lacks is an error
//! that names the closest real column. Duplicate column names are refused,
//! because which of them a role applies to would be a silent guess.

use std::collections::HashMap;

use arrow::datatypes::Schema;
use serde::{Deserialize, Serialize};

use crate::error::{Error, Result};
use crate::spec::{JobSpec, Role};

/// What happens to input columns the job does not list in `[[attributes]]`.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Unlisted {
    /// Refuse the job, listing every unlisted column and the lines to add.
    #[default]
    Error,
    /// Publish unlisted columns unchanged (an explicit opt-in).
    Insensitive,
    /// Drop unlisted columns from the release.
    Identifying,
}

/// The `[columns]` section of a job.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ColumnsSpec {
    /// The role of columns the job does not list; default: an error.
    #[serde(default)]
    pub unlisted: Unlisted,
}

/// The role a column of the input plays in the job: its attribute's role,
/// or the `[columns] unlisted` policy (`None` when that policy is an error).
pub fn role_of(spec: &JobSpec, column: &str) -> Option<Role> {
    match spec.attributes.iter().find(|a| a.name == column) {
        Some(a) => Some(a.role),
        None => match spec.columns.unlisted {
            Unlisted::Error => None,
            Unlisted::Insensitive => Some(Role::Insensitive),
            Unlisted::Identifying => Some(Role::Identifying),
        },
    }
}

/// Checks the job's columns against the input schema `schema` of `source`
/// (a file name, table name or `the input`, used in messages).
///
/// # Errors
/// [`Error::Data`] for a duplicated column name; [`Error::Spec`] for a job
/// attribute the input lacks (with the closest real name) or for input
/// columns the job does not mention (with the lines to add).
pub fn check(spec: &JobSpec, schema: &Schema, source: &str) -> Result<()> {
    let mut seen: HashMap<&str, usize> = HashMap::new();
    for f in schema.fields() {
        *seen.entry(f.name().as_str()).or_default() += 1;
    }
    if let Some(f) = schema.fields().iter().find(|f| seen[f.name().as_str()] > 1) {
        return Err(Error::data(
            f.name(),
            format!(
                "appears {} times in {source}; a role cannot tell them apart: rename or drop all but one (for CSV, fix the header row)",
                seen[f.name().as_str()]
            ),
        ));
    }
    for a in &spec.attributes {
        if !seen.contains_key(a.name.as_str()) {
            let hint = closest(&a.name, schema.fields().iter().map(|f| f.name().as_str()))
                .map(|c| format!("did you mean `{c}`? "))
                .unwrap_or_default();
            return Err(Error::spec(
                format!("attributes.{}", a.name),
                format!(
                    "{source} has no column `{}`; {hint}fix the name in the job (the input has {} columns)",
                    a.name,
                    schema.fields().len()
                ),
            ));
        }
    }
    let unlisted: Vec<&str> = schema
        .fields()
        .iter()
        .map(|f| f.name().as_str())
        .filter(|n| role_of(spec, n).is_none())
        .collect();
    if !unlisted.is_empty() {
        let lines: String = unlisted
            .iter()
            .map(|n| format!("\n  [[attributes]]\n  name = \"{n}\"\n  role = \"insensitive\"   # or identifying, pseudonymised, quasi-identifier, sensitive"))
            .collect();
        return Err(Error::spec(
            "attributes",
            format!(
                "{} column(s) of {source} have no role in the job: {}. Every column must be declared, so nothing is published by accident. Add to the job:{lines}\nor publish every unlisted column unchanged with `[columns] unlisted = \"insensitive\"` (drop them with `unlisted = \"identifying\"`)",
                unlisted.len(),
                unlisted
                    .iter()
                    .map(|n| format!("`{n}`"))
                    .collect::<Vec<_>>()
                    .join(", ")
            ),
        ));
    }
    Ok(())
}

/// The name in `names` closest to `name` by edit distance (ignoring case),
/// when it is close enough to be a likely typo.
fn closest<'a>(name: &str, names: impl Iterator<Item = &'a str>) -> Option<&'a str> {
    let target = name.to_lowercase();
    names
        .map(|n| (edit_distance(&target, &n.to_lowercase()), n))
        .filter(|(d, n)| *d <= (n.chars().count().max(target.chars().count()) / 3).max(2))
        .min_by_key(|(d, _)| *d)
        .map(|(_, n)| n)
}

/// Levenshtein distance between two strings, by characters.
fn edit_distance(a: &str, b: &str) -> usize {
    let b: Vec<char> = b.chars().collect();
    let mut row: Vec<usize> = (0..=b.len()).collect();
    for (i, ca) in a.chars().enumerate() {
        let mut diag = row[0];
        row[0] = i + 1;
        for (j, cb) in b.iter().enumerate() {
            let next = (diag + usize::from(ca != *cb))
                .min(row[j] + 1)
                .min(row[j + 1] + 1);
            diag = row[j + 1];
            row[j + 1] = next;
        }
    }
    row[b.len()]
}

#[cfg(test)]
mod tests {
    use super::*;
    use arrow::datatypes::{DataType, Field};

    fn spec(toml_text: &str) -> JobSpec {
        toml::from_str(toml_text).unwrap()
    }

    fn schema(names: &[&str]) -> Schema {
        Schema::new(
            names
                .iter()
                .map(|n| Field::new(*n, DataType::Utf8, true))
                .collect::<Vec<_>>(),
        )
    }

    const JOB: &str = r#"
[privacy]
k = 2
[[attributes]]
name = "age"
role = "quasi-identifier"
[[attributes]]
name = "patient_idd"
role = "identifying"
"#;

    #[test]
    fn a_misspelt_attribute_names_the_real_column() {
        let err = check(&spec(JOB), &schema(&["age", "patient_id"]), "in.parquet")
            .unwrap_err()
            .to_string();
        assert!(
            err.contains("patient_idd") && err.contains("did you mean `patient_id`"),
            "{err}"
        );
    }

    #[test]
    fn unlisted_columns_are_an_error_listing_them_all() {
        let job = JOB.replace("patient_idd", "patient_id");
        let err = check(
            &spec(&job),
            &schema(&["age", "patient_id", "zip", "note"]),
            "in.parquet",
        )
        .unwrap_err()
        .to_string();
        assert!(err.contains("`zip`") && err.contains("`note`"), "{err}");
        assert!(
            err.contains("name = \"zip\"") && err.contains("unlisted = \"insensitive\""),
            "{err}"
        );
        let opted = format!("[columns]\nunlisted = \"insensitive\"\n{job}");
        check(&spec(&opted), &schema(&["age", "patient_id", "zip"]), "in").unwrap();
        assert_eq!(role_of(&spec(&opted), "zip"), Some(Role::Insensitive));
        let dropped = format!("[columns]\nunlisted = \"identifying\"\n{job}");
        assert_eq!(role_of(&spec(&dropped), "zip"), Some(Role::Identifying));
    }

    #[test]
    fn duplicate_column_names_are_refused() {
        let job = JOB.replace("patient_idd", "patient_id");
        let err = check(
            &spec(&job),
            &schema(&["age", "patient_id", "age"]),
            "in.csv",
        )
        .unwrap_err()
        .to_string();
        assert!(err.contains("`age`") && err.contains("2 times"), "{err}");
    }

    #[test]
    fn edit_distance_counts_edits() {
        assert_eq!(edit_distance("kitten", "sitting"), 3);
        assert_eq!(edit_distance("", "abc"), 3);
        assert_eq!(
            closest("patient_idd", ["age", "patient_id"].into_iter()),
            Some("patient_id")
        );
        assert_eq!(closest("zzz", ["age", "patient_id"].into_iter()), None);
    }
}
