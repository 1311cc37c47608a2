//! Microaggregation of a quasi-identifier: each class publishes one
//! aggregate of its values (mean, median, mode, interval or set) instead of
//! the generalised label (Domingo-Ferrer and Mateo-Sanz, "Practical
//! data-oriented microaggregation for statistical disclosure control",
//! IEEE TKDE 14(1), 2002; ARX's `MicroAggregationFunction`).
//!
//! The algorithm forms its classes with the column's generalisation as
//! usual; only the published label changes, so every class still holds at
//! least k records, and classes whose labels happen to agree merge into a
//! larger one (the release verifier counts classes by labels).

use crate::encode::QiColumn;
use crate::generalise::{escape_value, Cell};
use crate::partition::{Partition, SUPPRESSED};
use crate::spec::Microaggregation;

/// The label every group of `partition` publishes in column `q` (`col`)
/// under `function`; a group without rows gets its generalised label.
pub(crate) fn labels(
    function: Microaggregation,
    col: &QiColumn,
    q: usize,
    partition: &Partition,
) -> Vec<String> {
    let groups = partition.n_groups();
    // The codes of each group's rows, grouped by a counting sort.
    let mut start = vec![0usize; groups + 1];
    for &g in partition.group_of_row() {
        if g != SUPPRESSED {
            start[g as usize + 1] += 1;
        }
    }
    for g in 0..groups {
        start[g + 1] += start[g];
    }
    let mut next = start.clone();
    let mut codes = vec![0u32; start[groups]];
    for (r, &g) in partition.group_of_row().iter().enumerate() {
        if g != SUPPRESSED {
            codes[next[g as usize]] = col.codes().get(r);
            next[g as usize] += 1;
        }
    }
    let leaf_label = |code: u32| match col.hierarchy() {
        // A hierarchy's labels are the job's vocabulary, published as written.
        Some(_) => col.label(code).to_string(),
        None => escape_value(col.label(code)),
    };
    (0..groups)
        .map(|g| {
            let members = &mut codes[start[g]..start[g + 1]];
            if members.is_empty() {
                return col.cell_label(&partition.tuple(g)[q]);
            }
            // Codes of a numeric column are in value order.
            members.sort_unstable();
            match function {
                Microaggregation::Mean => {
                    let sum: f64 = members
                        .iter()
                        .map(|&c| col.value(c).unwrap_or(f64::NAN))
                        .sum();
                    let mean = sum / members.len() as f64;
                    crate::number::format_float((mean * 1e4).round() / 1e4)
                }
                Microaggregation::Median => leaf_label(members[(members.len() - 1) / 2]),
                Microaggregation::Mode => {
                    let (mut best, mut best_count) = (members[0], 0);
                    let mut i = 0;
                    while i < members.len() {
                        let run = members[i..]
                            .iter()
                            .take_while(|&&c| c == members[i])
                            .count();
                        if run > best_count {
                            (best, best_count) = (members[i], run);
                        }
                        i += run;
                    }
                    leaf_label(best)
                }
                Microaggregation::Interval => col.cell_label(&Cell::Range {
                    lo: members[0],
                    hi: members[members.len() - 1],
                }),
                Microaggregation::Set => {
                    let mut distinct = members.to_vec();
                    distinct.dedup();
                    col.cell_label(&Cell::Set(distinct.into()))
                }
            }
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::encode::QiTable;
    use crate::spec::JobSpec;

    fn table(age: &[&str], job: &[&str]) -> QiTable {
        let spec: JobSpec = serde_json::from_str(
            r#"{"attributes": [{"name": "age", "role": "qi", "type": "numeric"},
                               {"name": "job", "role": "qi"}]}"#,
        )
        .unwrap();
        QiTable::from_string_columns(
            &spec,
            &Default::default(),
            &[("age", age.to_vec()), ("job", job.to_vec())],
        )
        .unwrap()
    }

    #[test]
    fn each_function_aggregates_the_values_of_each_group() {
        let t = table(
            &["30", "31", "31", "50", "52", "60"],
            &["a", "b", "b", "c", "c", "d"],
        );
        let p = Partition::from_groups(&t, &[vec![0, 1, 2], vec![3, 4]]);
        let age = &t.columns()[0];
        let job = &t.columns()[1];
        let of = |m, col, q| labels(m, col, q, &p);
        assert_eq!(of(Microaggregation::Mean, age, 0), vec!["30.6667", "51"]);
        assert_eq!(of(Microaggregation::Median, age, 0), vec!["31", "50"]);
        assert_eq!(of(Microaggregation::Mode, age, 0), vec!["31", "50"]);
        assert_eq!(
            of(Microaggregation::Interval, age, 0),
            vec!["[30-31]", "[50-52]"]
        );
        assert_eq!(of(Microaggregation::Set, job, 1), vec!["{a,b}", "c"]);
        assert_eq!(of(Microaggregation::Mode, job, 1), vec!["b", "c"]);
    }
}
