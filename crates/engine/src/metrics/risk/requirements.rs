//! Risk under each anonymity requirement `<shield, k>` of a job
//! ([`RequirementRisk`]): how far a table (an input before anonymisation,
//! or a release) is from every requirement, counted on the table's
//! projection on the requirement's shield. Plain k is the requirement on
//! all QIs, so a job with requirements is judged by all of them, not by
//! its largest k alone (HeuristicMin's model, the HeuristicMin paper
//! section 3.1).

use rustc_hash::FxHashMap;
use serde::Serialize;

use crate::encode::{EquivalenceClasses, QiTable};
use crate::privacy::Requirement;

/// How a table stands against one requirement `<shield, k>`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct RequirementRisk {
    /// The requirement, e.g. `<{age, sex}, 10>` or `k-anonymity (k = 10)`.
    pub requirement: String,
    /// The k asked for.
    pub k: usize,
    /// The fewest records sharing one projected tuple (0 for no records).
    pub achieved_k: usize,
    /// Distinct tuples of the table projected on the shield.
    pub tuples: usize,
    /// Projected tuples held by fewer than k records.
    pub tuples_below_k: usize,
    /// Records in those tuples: the records the requirement leaves at risk.
    pub records_below_k: usize,
}

impl RequirementRisk {
    /// Whether the table meets the requirement.
    pub fn is_met(&self) -> bool {
        self.tuples_below_k == 0
    }
}

/// Every requirement's standing on `table` (its QIs in job order, the
/// order the requirements' shields index).
pub fn requirement_risk(table: &QiTable, requirements: &[Requirement]) -> Vec<RequirementRisk> {
    requirement_standing(table, requirements).0
}

/// Records at risk under any requirement: records whose tuple, projected
/// on some requirement's shield, is held by fewer than that k records.
pub fn records_below_any_requirement(table: &QiTable, requirements: &[Requirement]) -> usize {
    requirement_standing(table, requirements).1
}

/// [`requirement_risk`] and [`records_below_any_requirement`] from one
/// grouping of the table into classes and one projection per requirement.
pub fn requirement_standing(
    table: &QiTable,
    requirements: &[Requirement],
) -> (Vec<RequirementRisk>, usize) {
    let classes = EquivalenceClasses::of(table);
    let tuples: Vec<&[u32]> = (0..classes.len()).map(|c| classes.tuple(c)).collect();
    let sizes: Vec<usize> = (0..classes.len()).map(|c| classes.size(c)).collect();
    standing_of_classes(table.n_qi(), &tuples, &sizes, requirements)
}

/// [`requirement_standing`] of classes given by their tuples (one code per
/// QI, in job order; equal codes for equal values) and sizes, as workers
/// that count a table's tuples report them.
pub fn standing_of_classes(
    n_qi: usize,
    tuples: &[&[u32]],
    sizes: &[usize],
    requirements: &[Requirement],
) -> (Vec<RequirementRisk>, usize) {
    let mut at_risk = vec![false; tuples.len()];
    let per_requirement = requirements
        .iter()
        .map(|r| {
            let shield = r.columns(n_qi);
            if shield.iter().copied().eq(0..n_qi) {
                // The whole tuple: the classes themselves, no projection.
                for (risky, &size) in at_risk.iter_mut().zip(sizes) {
                    *risky |= size < r.k();
                }
                let below: Vec<usize> = sizes.iter().copied().filter(|&n| n < r.k()).collect();
                return RequirementRisk {
                    requirement: r.describe(),
                    k: r.k(),
                    achieved_k: sizes.iter().copied().min().unwrap_or(0),
                    tuples: sizes.len(),
                    tuples_below_k: below.len(),
                    records_below_k: below.iter().sum(),
                };
            }
            let key = |c: usize| -> Vec<u32> { shield.iter().map(|&q| tuples[c][q]).collect() };
            let mut counts: FxHashMap<Vec<u32>, usize> = FxHashMap::default();
            for (c, &size) in sizes.iter().enumerate() {
                *counts.entry(key(c)).or_default() += size;
            }
            for (c, risky) in at_risk.iter_mut().enumerate() {
                *risky |= counts[&key(c)] < r.k();
            }
            let below: Vec<usize> = counts.values().copied().filter(|&n| n < r.k()).collect();
            RequirementRisk {
                requirement: r.describe(),
                k: r.k(),
                achieved_k: counts.values().copied().min().unwrap_or(0),
                tuples: counts.len(),
                tuples_below_k: below.len(),
                records_below_k: below.iter().sum(),
            }
        })
        .collect();
    let records = sizes
        .iter()
        .zip(&at_risk)
        .filter(|(_, &risky)| risky)
        .map(|(&size, _)| size)
        .sum();
    (per_requirement, records)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::spec::JobSpec;

    /// Six records on (sex, age): classes (M,30)x3, (M,40)x1, (F,30)x2.
    /// Under k = 2 the (M,40) record is at risk; under <{sex}, 4> the two
    /// F records are (M has 4, F has 2); under <{age}, 4> the (M,40)
    /// record is (30 has 5, 40 has 1).
    #[test]
    fn every_requirement_is_counted_on_its_projection() {
        let spec: JobSpec = toml::from_str(
            r#"
            [privacy]
            k = 2
            [[attributes]]
            name = "sex"
            role = "quasi-identifier"
            [[attributes]]
            name = "age"
            role = "quasi-identifier"
            "#,
        )
        .unwrap();
        let table = QiTable::from_string_columns(
            &spec,
            &Default::default(),
            &[
                ("sex", vec!["M", "M", "M", "M", "F", "F"]),
                ("age", vec!["30", "30", "30", "40", "30", "30"]),
            ],
        )
        .unwrap();
        let reqs = [
            Requirement::all(2),
            Requirement::on([(0, "sex".to_string())], 4, 2),
            Requirement::on([(1, "age".to_string())], 4, 2),
        ];
        let r = requirement_risk(&table, &reqs);
        let got: Vec<(usize, usize, usize, usize)> = r
            .iter()
            .map(|r| (r.achieved_k, r.tuples, r.tuples_below_k, r.records_below_k))
            .collect();
        assert_eq!(got, [(1, 3, 1, 1), (2, 2, 1, 2), (1, 2, 1, 1)]);
        assert_eq!(r[1].requirement, "<{sex}, 4>");
        assert!(!r[0].is_met());
        // (M,40) under k and age, the two F under sex: 3 records.
        assert_eq!(records_below_any_requirement(&table, &reqs), 3);
        assert_eq!(records_below_any_requirement(&table, &reqs[..1]), 1);
    }
}
