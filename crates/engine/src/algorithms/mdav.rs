//! MDAV, Maximum Distance to Average Vector (Domingo-Ferrer and Torra,
//! "Ordinal, Continuous and Heterogeneous k-Anonymity Through
//! Microaggregation", Data Mining and Knowledge Discovery 11(2), 2005,
//! Algorithm 1; the fixed-size heuristic of sdcMicro's
//! `microaggregation(method = "mdav")`): the clustering that
//! microaggregation is usually run with.
//!
//! While at least 3k records are left: take the record `r` farthest from
//! the centroid of those left, the record `s` farthest from `r`, and form a
//! class of `r` and its k - 1 nearest records, then one of `s` and its
//! k - 1 nearest among the rest. With 2k to 3k - 1 left, one more class
//! around the record farthest from the centroid and the rest as the last;
//! fewer than 2k form one class. Every class has k to 2k - 1 records.
//!
//! Records are points with one coordinate per quasi-identifier: a number
//! divided by its column's range (so every QI weighs alike), a category
//! compared for equality (distance 0 or 1; its centroid coordinate is the
//! most frequent category). Ties go to the lower row number, so a run is
//! deterministic. The classes are published with their tightest cells, or
//! with one aggregate per class where a QI names `microaggregation`.

use serde::{Deserialize, Serialize};

use crate::algorithms::{details, Algorithm, Context, Outcome};
use crate::encode::QiTable;
use crate::error::{Error, Result};
use crate::partition::Partition;
use crate::spec::Kind;

/// MDAV's parameters (none beyond the job's k).
#[derive(Debug, Clone, Default, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct MdavParams {}

/// The MDAV algorithm.
#[derive(Debug, Clone, Default)]
pub struct Mdav;

impl Mdav {
    /// MDAV with the given parameters.
    pub fn from_params(_params: MdavParams) -> Self {
        Mdav
    }
}

#[derive(Debug, Serialize)]
struct MdavDetails {
    /// Classes formed.
    classes: usize,
    /// Records in the smallest and the largest class.
    smallest: usize,
    largest: usize,
}

/// One coordinate per QI of every record.
struct Points<'a> {
    table: &'a QiTable,
    /// Per QI: `Some(1 / range)` for a numeric column, `None` for a
    /// categorical one.
    scale: Vec<Option<f64>>,
}

/// A centroid: per QI a number (numeric) or a code (categorical).
#[derive(Clone, Copy)]
enum Coordinate {
    Number(f64),
    Code(u32),
}

impl Points<'_> {
    fn coordinate(&self, q: usize, row: u32) -> Coordinate {
        let col = &self.table.columns()[q];
        let code = col.codes().get(row as usize);
        match self.scale[q] {
            Some(_) => Coordinate::Number(col.value(code).unwrap_or(0.0)),
            None => Coordinate::Code(code),
        }
    }

    /// Squared distance of a record to a point.
    fn to_point(&self, row: u32, point: &[Coordinate]) -> f64 {
        (0..point.len())
            .map(
                |q| match (self.coordinate(q, row), point[q], self.scale[q]) {
                    (Coordinate::Number(a), Coordinate::Number(b), Some(s)) => {
                        ((a - b) * s).powi(2)
                    }
                    (Coordinate::Code(a), Coordinate::Code(b), _) => f64::from(u8::from(a != b)),
                    _ => 0.0,
                },
            )
            .sum()
    }

    fn point(&self, row: u32) -> Vec<Coordinate> {
        (0..self.scale.len())
            .map(|q| self.coordinate(q, row))
            .collect()
    }

    /// The centroid of `rows`: the mean of each numeric QI, the most
    /// frequent code (the smallest of equals) of each categorical one.
    fn centroid(&self, rows: &[u32]) -> Vec<Coordinate> {
        (0..self.scale.len())
            .map(|q| match self.scale[q] {
                Some(_) => {
                    let col = &self.table.columns()[q];
                    let sum: f64 = rows
                        .iter()
                        .map(|&r| col.value(col.codes().get(r as usize)).unwrap_or(0.0))
                        .sum();
                    Coordinate::Number(sum / rows.len() as f64)
                }
                None => {
                    let col = &self.table.columns()[q];
                    let mut counts = vec![0u32; col.domain_size()];
                    for &r in rows {
                        counts[col.codes().get(r as usize) as usize] += 1;
                    }
                    let best = (0..counts.len())
                        .max_by_key(|&c| (counts[c], std::cmp::Reverse(c)))
                        .unwrap_or(0);
                    Coordinate::Code(best as u32)
                }
            })
            .collect()
    }

    /// The record of `rows` farthest from `point` (the first of equals).
    fn farthest(&self, rows: &[u32], point: &[Coordinate]) -> usize {
        let mut best = (f64::NEG_INFINITY, 0);
        for (i, &r) in rows.iter().enumerate() {
            let d = self.to_point(r, point);
            if d > best.0 {
                best = (d, i);
            }
        }
        best.1
    }

    /// Takes the record at `at` and its `k - 1` nearest records out of
    /// `rows` (the earlier of equals first), as one class.
    fn take_class(&self, rows: &mut Vec<u32>, at: usize, k: usize) -> Vec<u32> {
        let point = self.point(rows[at]);
        let mut by_distance: Vec<(f64, u32)> = rows
            .iter()
            .map(|&r| (self.to_point(r, &point), r))
            .collect();
        // The record itself is at distance 0 and the lowest of its equals
        // by row number only if it comes first: put it first.
        let me = rows[at];
        by_distance.sort_by(|a, b| {
            (a.1 != me)
                .cmp(&(b.1 != me))
                .then(a.0.total_cmp(&b.0))
                .then(a.1.cmp(&b.1))
        });
        let class: Vec<u32> = by_distance[..k].iter().map(|&(_, r)| r).collect();
        let mut taken = class.clone();
        taken.sort_unstable();
        rows.retain(|r| taken.binary_search(r).is_err());
        class
    }
}

impl Algorithm for Mdav {
    fn name(&self) -> &'static str {
        "mdav"
    }

    fn run(&self, ctx: &Context<'_>) -> Result<Outcome> {
        if ctx.privacy.has_shield_requirements() {
            return Err(Error::spec(
                "privacy.requirements",
                "`mdav` groups whole records and cannot keep a <shield, k> requirement on a projection: remove the requirements or choose `heuristic-min` (or another algorithm that honours them)",
            ));
        }
        ctx.privacy.check_feasible(ctx.table)?;
        let table = ctx.table;
        let k = ctx.privacy.class_min_size().max(1);
        let mut rows = table.active_rows();
        if rows.len() < k {
            return Err(Error::Unsatisfiable(format!(
                "{} rows cannot form a class of {k}",
                rows.len()
            )));
        }
        let points = Points {
            table,
            scale: table
                .columns()
                .iter()
                .map(|col| match col.kind() {
                    Kind::Numeric => {
                        let (lo, hi) = col.min_max();
                        Some(if hi > lo { 1.0 / (hi - lo) } else { 0.0 })
                    }
                    Kind::Categorical => None,
                })
                .collect(),
        };
        let total = rows.len();
        let mut groups: Vec<Vec<u32>> = Vec::new();
        while rows.len() >= 3 * k {
            ctx.cancel.check()?;
            let centroid = points.centroid(&rows);
            let r = points.farthest(&rows, &centroid);
            let r_point = points.point(rows[r]);
            let s_row = rows[points.farthest(&rows, &r_point)];
            groups.push(points.take_class(&mut rows, r, k));
            let s = rows.iter().position(|&x| x == s_row).unwrap_or(0);
            groups.push(points.take_class(&mut rows, s, k));
            ctx.progress
                .update("mdav", (total - rows.len()) as u64, total as u64);
        }
        if rows.len() >= 2 * k {
            let centroid = points.centroid(&rows);
            let r = points.farthest(&rows, &centroid);
            groups.push(points.take_class(&mut rows, r, k));
        }
        if !rows.is_empty() {
            rows.sort_unstable();
            groups.push(rows);
        }
        let sizes = groups.iter().map(Vec::len);
        let details = details(&MdavDetails {
            classes: groups.len(),
            smallest: sizes.clone().min().unwrap_or(0),
            largest: sizes.max().unwrap_or(0),
        })?;
        Ok(Outcome {
            partition: Partition::from_groups(table, &groups),
            details,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::privacy::Privacy;
    use crate::spec::JobSpec;

    fn run(values: &[&str], k: usize) -> Partition {
        let spec: JobSpec = serde_json::from_str(
            r#"{"attributes": [{"name": "x", "role": "qi", "type": "numeric"}]}"#,
        )
        .unwrap();
        let table =
            QiTable::from_string_columns(&spec, &Default::default(), &[("x", values.to_vec())])
                .unwrap();
        let classes = crate::encode::EquivalenceClasses::of(&table);
        let privacy = Privacy::k_anonymity(k);
        let ctx = Context::local(&table, &classes, &privacy, &spec);
        Mdav.run(&ctx).unwrap().partition
    }

    fn groups(p: &Partition) -> Vec<Vec<u32>> {
        let mut out = vec![Vec::new(); p.n_groups()];
        for (r, &g) in p.group_of_row().iter().enumerate() {
            out[g as usize].push(r as u32);
        }
        out
    }

    /// 1..9 with k = 3: the centroid is 5, the farthest record 1 (the first
    /// of 1 and 9), its class {1, 2, 3}; the farthest from 1 is 9, its
    /// class {7, 8, 9}; the three left form the last class.
    #[test]
    fn the_extremes_go_first_and_the_middle_last() {
        let p = run(&["5", "1", "9", "2", "8", "3", "7", "4", "6"], 3);
        assert_eq!(
            groups(&p),
            vec![vec![1, 3, 5], vec![2, 4, 6], vec![0, 7, 8]]
        );
    }

    #[test]
    fn every_class_has_k_to_2k_minus_1_records() {
        let values: Vec<String> = (0..47).map(|i| ((i * 37) % 101).to_string()).collect();
        let values: Vec<&str> = values.iter().map(String::as_str).collect();
        for k in [2, 3, 5, 7] {
            let p = run(&values, k);
            for g in groups(&p) {
                assert!(
                    (k..2 * k).contains(&g.len()),
                    "k = {k}: a class of {}",
                    g.len()
                );
            }
        }
    }
}
