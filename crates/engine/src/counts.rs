//! Anonymising a table known only by its counts (issue 35): the distinct
//! QI tuples of a table too large for one machine, each with its rows, as
//! the workers that read the table report them.
//!
//! Full-domain generalisation never looks at a row on its own: Datafly and
//! Incognito walk the lattice of hierarchy levels with the *frequency
//! sets* of its nodes (LeFevre, DeWitt, Ramakrishnan, SIGMOD 2005, section
//! 3), which the distinct tuples and their counts determine. On a table of
//! counted tuples ([`QiTable::with_weights`]) they therefore choose exactly
//! the node, and suppress exactly the classes, they choose on the rows
//! themselves: the plan a coordinator computes from counts is the
//! single-machine release's, with no loss. Rows of one tuple share its
//! group, so the plan is a group (or suppression) per distinct tuple and
//! the labels each group publishes; the workers apply it to their rows.
//!
//! The plan is verified from counts ([`crate::verify::verify_counted`]),
//! which is exact for anonymity requirements and a suppression limit; jobs
//! with models that need a class's values (l-diversity, t-closeness, risk
//! thresholds, δ-presence), cell suppression (its rows are placed one
//! class at a time), and local-recoding algorithms are refused by name.

use crate::algorithms::partitioned::LocalBlocks;
use crate::algorithms::Context;
use crate::cancel::Cancellation;
use crate::encode::{EquivalenceClasses, QiTable};
use crate::error::{Error, Result};
use crate::partition::Partition;
use crate::privacy::Privacy;
use crate::progress::Progress;
use crate::spec::JobSpec;
use crate::verify::Verified;

/// The algorithms that run from counts: full-domain generalisation.
pub const ALGORITHMS: &[&str] = &["datafly", "incognito"];

/// What an anonymisation from counts decided.
#[derive(Debug, Clone)]
pub struct CountedPlan {
    /// The group of every row of the table of counted tuples (or
    /// [`crate::partition::SUPPRESSED`]), and every group's cells.
    pub partition: Partition,
    /// Per QI (in the job's order), the label every group publishes.
    pub labels: Vec<Vec<String>>,
    /// The plan's verification, counted by input rows.
    pub verified: Verified,
    /// The algorithm's details (the chosen node, ...).
    pub details: serde_json::Value,
}

/// Whether `spec` can run from counts: a full-domain algorithm without
/// cell suppression, and models met by class sizes alone.
///
/// # Errors
/// [`Error::Spec`] naming the setting that needs the rows.
pub fn check(spec: &JobSpec, privacy: &Privacy) -> Result<()> {
    let name = spec.algorithm.name.as_str();
    if !ALGORITHMS.contains(&name) {
        return Err(Error::spec(
            "algorithm.name",
            format!(
                "`{name}` needs the rows themselves; a run whose workers read the table plans from counts, which full-domain generalisation ({}) needs alone",
                ALGORITHMS.join(", ")
            ),
        ));
    }
    if spec.algorithm.params.get("cell_suppression") == Some(&serde_json::Value::Bool(true)) {
        return Err(Error::spec(
            "algorithm.cell_suppression",
            "cell suppression places the rejected rows class by class, on the rows themselves; remove it to plan from counts (rejected classes are then suppressed whole)",
        ));
    }
    crate::verify::sizes_suffice(privacy)
}

/// Runs the job's full-domain algorithm on a table of counted tuples and
/// verifies its plan from the counts.
///
/// # Errors
/// As [`check`]; [`Error::Internal`] for a table without weights; the
/// algorithm's and the verification's errors.
pub fn plan(
    spec: &JobSpec,
    table: &QiTable,
    privacy: &Privacy,
    cancel: &Cancellation,
    progress: &dyn Progress,
) -> Result<CountedPlan> {
    check(spec, privacy)?;
    if !table.is_weighted() {
        return Err(Error::Internal(
            "a plan from counts of a table without counts (a bug in kanon)".into(),
        ));
    }
    let classes = EquivalenceClasses::of(table);
    let algorithm = crate::algorithms::by_name(spec)?;
    let ctx = Context {
        table,
        classes: &classes,
        privacy,
        spec,
        cancel,
        progress,
        blocks: LocalBlocks::get(),
    };
    let outcome = algorithm.run(&ctx)?;
    let verified = crate::verify::verify_counted(table, &outcome.partition, privacy)?;
    let labels = crate::recode::group_labels(spec, table, &outcome.partition);
    Ok(CountedPlan {
        partition: outcome.partition,
        labels,
        verified,
        details: outcome.details,
    })
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use arrow::array::{ArrayRef, Int64Array, RecordBatch, StringArray};
    use arrow::datatypes::{DataType, Field, Schema};

    use super::*;
    use crate::encode::Encoder;
    use crate::partition::SUPPRESSED;

    fn spec(algorithm: &str, k: usize, limit: f64) -> JobSpec {
        serde_json::from_value(serde_json::json!({
            "algorithm": {"name": algorithm},
            "privacy": {"k": k, "suppression_limit": limit},
            "attributes": [
                {"name": "age", "role": "qi", "type": "numeric", "intervals": [5, 10, 20]},
                {"name": "sex", "role": "qi", "masking": true},
            ],
        }))
        .unwrap()
    }

    fn encode(spec: &JobSpec, ages: Vec<i64>, sexes: Vec<&str>) -> QiTable {
        let schema = Arc::new(Schema::new(vec![
            Field::new("age", DataType::Int64, false),
            Field::new("sex", DataType::Utf8, false),
        ]));
        let batch = RecordBatch::try_new(
            schema.clone(),
            vec![
                Arc::new(Int64Array::from(ages)) as ArrayRef,
                Arc::new(StringArray::from(sexes)),
            ],
        )
        .unwrap();
        let mut e = Encoder::try_new(spec, &Default::default(), &schema).unwrap();
        e.push(&batch).unwrap();
        e.finish().unwrap()
    }

    /// Rows: (age, sex) with a skewed spread, so that levels and
    /// suppression both matter.
    fn rows() -> Vec<(i64, &'static str)> {
        (0..400i64)
            .map(|i| {
                let age = 18 + (i * i * 7 + i / 3) % 60;
                (age, if i % 3 == 0 { "F" } else { "M" })
            })
            .collect()
    }

    #[test]
    fn counted_tuples_plan_what_the_rows_release() {
        let mut seen = Vec::new();
        for (algorithm, k, limit) in [
            ("incognito", 5, 0.0),
            ("incognito", 10, 0.05),
            ("datafly", 5, 0.02),
            ("datafly", 20, 0.0),
        ] {
            let spec = spec(algorithm, k, limit);
            let privacy = Privacy::from_spec(&spec).unwrap();
            let all = rows();
            // On the rows.
            let table = encode(
                &spec,
                all.iter().map(|r| r.0).collect(),
                all.iter().map(|r| r.1).collect(),
            );
            let on_rows = crate::pipeline::anonymize(&spec, &table).unwrap();
            // From counts: each distinct tuple once, with its rows.
            let mut distinct: Vec<((i64, &str), u32)> = Vec::new();
            for r in &all {
                match distinct.iter_mut().find(|(t, _)| t == r) {
                    Some((_, n)) => *n += 1,
                    None => distinct.push((*r, 1)),
                }
            }
            // Another order than the rows' first appearance.
            distinct.reverse();
            let counted = encode(
                &spec,
                distinct.iter().map(|(t, _)| t.0).collect(),
                distinct.iter().map(|(t, _)| t.1).collect(),
            )
            .with_weights(distinct.iter().map(|(_, n)| *n).collect(), 0)
            .unwrap();
            let plan = plan(
                &spec,
                &counted,
                &privacy,
                Cancellation::never(),
                crate::progress::Silent::sink(),
            )
            .unwrap();
            assert_eq!(
                plan.details["chosen"], on_rows.details["chosen"],
                "{algorithm} k={k}"
            );
            assert_eq!(
                (
                    plan.verified.published_rows,
                    plan.verified.suppressed_rows,
                    plan.verified.classes,
                    plan.verified.smallest_class
                ),
                (
                    on_rows.verified.published_rows,
                    on_rows.verified.suppressed_rows,
                    on_rows.verified.classes,
                    on_rows.verified.smallest_class
                ),
                "{algorithm} k={k}"
            );
            seen.push((
                plan.details["chosen"].to_string(),
                plan.verified.suppressed_rows,
            ));
            // Every row publishes the labels its tuple's group publishes.
            let row_labels = crate::recode::group_labels(&spec, &table, &on_rows.partition);
            for (r, row) in all.iter().enumerate() {
                let g = on_rows.partition.group_of_row()[r];
                let t = distinct.iter().position(|(t, _)| t == row).unwrap();
                let h = plan.partition.group_of_row()[t];
                assert_eq!(g == SUPPRESSED, h == SUPPRESSED);
                if g != SUPPRESSED {
                    for (row_q, plan_q) in row_labels.iter().zip(&plan.labels) {
                        assert_eq!(row_q[g as usize], plan_q[h as usize]);
                    }
                }
            }
        }
        // The cases differ: several nodes, some with suppression.
        assert!(seen.iter().any(|s| s.1 > 0), "{seen:?}");
        seen.dedup_by(|a, b| a.0 == b.0);
        assert!(seen.len() > 1, "{seen:?}");
    }

    #[test]
    fn jobs_that_need_rows_are_refused_by_setting() {
        let mut s = spec("mondrian", 5, 0.0);
        let privacy = Privacy::from_spec(&s).unwrap();
        let err = check(&s, &privacy).unwrap_err().to_string();
        assert!(
            err.contains("algorithm.name") && err.contains("mondrian"),
            "{err}"
        );
        s.algorithm.name = "incognito".into();
        s.algorithm
            .params
            .insert("cell_suppression".into(), serde_json::Value::Bool(true));
        let err = check(&s, &privacy).unwrap_err().to_string();
        assert!(err.contains("cell_suppression"), "{err}");
        let l: JobSpec = serde_json::from_value(serde_json::json!({
            "algorithm": {"name": "incognito"},
            "privacy": {"k": 2, "l": 2},
            "attributes": [
                {"name": "sex", "role": "qi", "masking": true},
                {"name": "d", "role": "sensitive"},
            ],
        }))
        .unwrap();
        let err = check(&l, &Privacy::from_spec(&l).unwrap())
            .unwrap_err()
            .to_string();
        assert!(err.contains("diversity"), "{err}");
        // A table without counts is a bug, not a plan.
        let s = spec("incognito", 2, 0.0);
        let table = encode(&s, vec![1, 2], vec!["F", "M"]);
        let err = plan(
            &s,
            &table,
            &Privacy::from_spec(&s).unwrap(),
            Cancellation::never(),
            crate::progress::Silent::sink(),
        )
        .unwrap_err();
        assert!(matches!(err, Error::Internal(_)), "{err}");
    }
}
