//! t-closeness (Li, Li and Venkatasubramanian, "t-Closeness: Privacy Beyond
//! k-Anonymity and l-Diversity", ICDE 2007): the distribution of a
//! sensitive column in every class is within Earth Mover's Distance `t` of
//! its distribution in the whole table, under one of the paper's three
//! ground distances ([`GroundDistance`]; ARX: `EqualDistanceTCloseness`,
//! `HierarchicalDistanceTCloseness`, `OrderedDistanceTCloseness`).
//!
//! # The reference distribution
//!
//! The paper compares each class with the distribution `Q` of the sensitive
//! attribute "in the overall table". kanon takes it as follows, so that the
//! algorithm, a block of a block-wise run and both verifiers agree:
//!
//! - an algorithm compares a class of the working table with the values of
//!   the table's active rows (every row but those excluded for null QIs),
//!   counted once by the encoder ([`SensitiveColumn::reference_counts`]);
//!   a block sub-table of a block-wise run ([`QiTable::restrict`]) keeps
//!   the whole table's counts, never the block's;
//! - both verifiers compare every published class with the distribution of
//!   the *published* rows ([`TCloseness::check_release`]), because that is
//!   the overall table a reader of the release, attacker included, sees.
//!   The verifier of released labels can only see that one; the verifier of
//!   partitions uses the same, so the two agree.
//!
//! Without suppression the published rows are the active rows and the two
//! references are the same. When an algorithm suppresses rows, the
//! published distribution moves away from the one the algorithm aimed at,
//! and a class it accepted may be farther than `t` from it: the verifier
//! then refuses the release (fail closed; its decision is final and a
//! refused release is never published). Lower the suppression limit or
//! raise `t` in that case.
//!
//! Missing values (NULL, NaN, `""` unless `privacy.missing_sensitive =
//! "value"`) are not values ([`super::frequencies`]): they are left out of
//! both the class's and the reference distribution. A class without any
//! value has no distribution to compare and is rejected (fail closed).

use serde::Deserialize;

use crate::codes::with_codes;
use crate::encode::{QiTable, SensitiveColumn, SensitiveHierarchy};
use crate::error::{Error, Result};
use crate::hierarchy::{Hierarchy, Level};

use super::{ClassView, PrivacyModel};

/// Tolerance of the comparison with `t`: the EMD of a union is at most the
/// largest EMD of its parts (convexity), which floating point may compute a
/// few ulps above.
const T_EPS: f64 = 1e-9;

/// The ground distance between two sensitive values, which the Earth
/// Mover's Distance moves probability mass along (Li et al. 2007, the
/// section on computing the EMD).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum GroundDistance {
    /// Every two distinct values are at distance 1 (categorical values):
    /// `EMD = 1/2 sum_i |p_i - q_i|`.
    Equal,
    /// Values are leaves of the attribute's hierarchy; two values are at
    /// distance `level(lca) / H`, the height of their lowest common ancestor
    /// over the height of the tree. The EMD is the paper's
    /// `sum_N height(N)/H * min(pos_extra(N), neg_extra(N))` over the inner
    /// nodes `N`.
    Hierarchical,
    /// Numbers: with the `m` distinct values in ascending order, values
    /// `i` and `j` are at distance `|i - j| / (m - 1)`, and
    /// `EMD = 1/(m-1) sum_i |sum_{j<=i} (p_j - q_j)|`.
    Ordered,
}

impl GroundDistance {
    fn name(self) -> &'static str {
        match self {
            GroundDistance::Equal => "equal",
            GroundDistance::Hierarchical => "hierarchical",
            GroundDistance::Ordered => "ordered",
        }
    }
}

/// t-closeness (Li, Li and Venkatasubramanian, ICDE 2007, the t-closeness
/// principle): the distribution of `column` in every class is within Earth
/// Mover's Distance `t` of the reference distribution (see the module
/// documentation for which one).
///
/// Monotone under generalisation (ibid., the generalisation property of
/// the EMD): the distribution of a union of classes is a mixture of
/// theirs, and the EMD to a fixed reference is convex in the class's
/// distribution (it is the minimum of a linear transport problem), so the
/// union is at most as far as its farthest part. Not monotone with
/// suppression: adding arbitrary rows to a close class can move it away.
#[derive(Debug, Clone, PartialEq)]
pub struct TCloseness {
    /// The sensitive column.
    pub column: String,
    /// The largest EMD a class may have, in (0, 1].
    pub t: f64,
    /// The ground distance; `None` decides by the column: hierarchical when
    /// it has a hierarchy, ordered when its values are numbers, else equal.
    /// (A job always decides it from the attribute's settings when it can,
    /// see the registry.)
    pub distance: Option<GroundDistance>,
}

/// The ground a column offers a distance, resolved.
enum Ground<'a> {
    Equal,
    Ordered(&'a [u32]),
    Hierarchical(&'a SensitiveHierarchy),
}

/// Rows per code of `rows`, missing values left out, and their total.
pub(super) fn counts_by_code(column: &SensitiveColumn, rows: &[u32]) -> (Vec<u32>, u64) {
    let mut counts = vec![0u32; column.distinct()];
    with_codes!(column.codes(), |codes| {
        for &r in rows {
            counts[u32::from(codes[r as usize]) as usize] += 1;
        }
    });
    let mut total = 0u64;
    for (c, n) in counts.iter_mut().enumerate() {
        if column.is_missing(c as u32) {
            *n = 0;
        }
        total += *n as u64;
    }
    (counts, total)
}

/// The rows of the table's reference distribution that hold a value
/// (missing values left out).
pub(super) fn reference_values(column: &SensitiveColumn) -> u64 {
    column
        .reference_counts()
        .iter()
        .enumerate()
        .filter(|(c, _)| !column.is_missing(*c as u32))
        .map(|(_, &n)| n as u64)
        .sum()
}

/// `EMD` under the equal ground distance of two distributions over the
/// same values: `1/2 sum_i |p_i - q_i|` (Li et al. 2007, computing the EMD,
/// "equal distance").
pub(crate) fn emd_equal(p: &[f64], q: &[f64]) -> f64 {
    0.5 * p.iter().zip(q).map(|(a, b)| (a - b).abs()).sum::<f64>()
}

/// `EMD` under the ordered ground distance of two distributions over the
/// same `m` values in ascending order:
/// `1/(m-1) sum_{i=1..m} |sum_{j<=i} (p_j - q_j)|` (Li et al. 2007, computing
/// the EMD, "ordered distance"); 0 when `m <= 1`.
pub(crate) fn emd_ordered(p: &[f64], q: &[f64]) -> f64 {
    let m = p.len().min(q.len());
    if m <= 1 {
        return 0.0;
    }
    let mut cumulative = 0.0;
    let mut sum = 0.0;
    for (a, b) in p.iter().zip(q) {
        cumulative += a - b;
        sum += cumulative.abs();
    }
    sum / (m - 1) as f64
}

/// `EMD` under the hierarchical ground distance of two distributions over
/// the leaves of `h` (Li et al. 2007, computing the EMD, "hierarchical
/// distance"): with `extra(leaf) = p - q` and `extra(N)` the sum over the
/// children of `N`, every inner node `N` moves `min(pos_extra(N),
/// neg_extra(N))` (the positive and the negative extras of its children)
/// across itself at cost `height(N) / H`, and the EMD is the sum of those
/// costs. 0 for a hierarchy of height 0.
pub(crate) fn emd_hierarchical(h: &Hierarchy, p: &[f64], q: &[f64]) -> f64 {
    let height = h.height();
    if height == 0 {
        return 0.0;
    }
    let mut extra = vec![0.0f64; h.node_count()];
    for (leaf, (a, b)) in p.iter().zip(q).enumerate().take(h.leaf_count()) {
        extra[leaf] = a - b;
    }
    let mut cost = 0.0;
    for level in 1..=height {
        let weight = level as f64 / height as f64;
        for node in h.nodes_at(Level(level)) {
            let (mut pos, mut neg) = (0.0, 0.0);
            for child in h.children(node) {
                let e = extra[child.0 as usize];
                if e > 0.0 {
                    pos += e;
                } else {
                    neg -= e;
                }
            }
            extra[node.0 as usize] = pos - neg;
            cost += weight * pos.min(neg);
        }
    }
    cost
}

/// The EMD between the class counts `p` and the reference counts `q` (both
/// per code, missing values zeroed), or `None` when one of them holds no
/// value or the class holds a value the ground distance does not know.
fn emd(ground: &Ground<'_>, p: &[u32], p_total: u64, q: &[u32], q_total: u64) -> Option<f64> {
    if p_total == 0 || q_total == 0 {
        return None;
    }
    let (pt, qt) = (p_total as f64, q_total as f64);
    match ground {
        Ground::Equal => {
            let pd: Vec<f64> = p.iter().map(|&n| n as f64 / pt).collect();
            let qd: Vec<f64> = q.iter().map(|&n| n as f64 / qt).collect();
            Some(emd_equal(&pd, &qd))
        }
        Ground::Ordered(order) => {
            // The m distinct values of the reference, ascending.
            let domain: Vec<u32> = order
                .iter()
                .copied()
                .filter(|&c| q.get(c as usize).is_some_and(|&n| n > 0))
                .collect();
            let covered: u64 = domain.iter().map(|&c| p[c as usize] as u64).sum();
            if covered != p_total {
                return None;
            }
            let pd: Vec<f64> = domain.iter().map(|&c| p[c as usize] as f64 / pt).collect();
            let qd: Vec<f64> = domain.iter().map(|&c| q[c as usize] as f64 / qt).collect();
            Some(emd_ordered(&pd, &qd))
        }
        Ground::Hierarchical(sh) => {
            let h = sh.hierarchy();
            let mut pd = vec![0.0f64; h.leaf_count()];
            let mut qd = vec![0.0f64; h.leaf_count()];
            for (code, (&a, &b)) in p.iter().zip(q).enumerate() {
                if a == 0 && b == 0 {
                    continue;
                }
                let leaf = sh.leaf(code as u32);
                if leaf == SensitiveHierarchy::NO_LEAF || leaf as usize >= pd.len() {
                    return None;
                }
                pd[leaf as usize] += a as f64 / pt;
                qd[leaf as usize] += b as f64 / qt;
            }
            Some(emd_hierarchical(h, &pd, &qd))
        }
    }
}

impl TCloseness {
    /// The column the model reads, by name (so a model built from a job
    /// also checks a release encoded from labels alone).
    fn sensitive_column<'a>(&self, table: &'a QiTable) -> Option<&'a SensitiveColumn> {
        table.sensitive().iter().find(|c| c.name() == self.column)
    }

    /// The ground distance for `column`, or why the column cannot give it.
    fn ground<'a>(&self, column: &'a SensitiveColumn) -> std::result::Result<Ground<'a>, String> {
        let distance = self.distance.unwrap_or(if column.hierarchy().is_some() {
            GroundDistance::Hierarchical
        } else if column.numeric_order().is_some() {
            GroundDistance::Ordered
        } else {
            GroundDistance::Equal
        });
        match distance {
            GroundDistance::Equal => Ok(Ground::Equal),
            GroundDistance::Ordered => column.numeric_order().map(Ground::Ordered).ok_or_else(|| {
                "ordered-distance t-closeness needs numbers, but the column's values are not all numbers (a missing value counts as a value under `privacy.missing_sensitive = \"value\"`); use `distance = \"equal\"`".to_string()
            }),
            GroundDistance::Hierarchical => column.hierarchy().map(Ground::Hierarchical).ok_or_else(|| {
                "hierarchical-distance t-closeness needs the attribute's hierarchy (`hierarchy = \"file.csv\"` on the sensitive attribute), and none was given to this check".to_string()
            }),
        }
    }

    /// The EMD of a class against the reference counts `q`; `None` when it
    /// cannot be computed (no value in the class or the reference, or no
    /// ground distance).
    fn distance_of(&self, table: &QiTable, rows: &[u32], q: &[u32]) -> Option<f64> {
        let column = self.sensitive_column(table)?;
        let ground = self.ground(column).ok()?;
        let (p, p_total) = counts_by_code(column, rows);
        let q_total = q
            .iter()
            .enumerate()
            .filter(|(c, _)| !column.is_missing(*c as u32))
            .map(|(_, &n)| n as u64)
            .sum();
        let mut q = q.to_vec();
        for (c, n) in q.iter_mut().enumerate() {
            if column.is_missing(c as u32) {
                *n = 0;
            }
        }
        emd(&ground, &p, p_total, &q, q_total)
    }

    /// The EMD of a class against the table's reference distribution.
    fn class_distance(&self, class: ClassView<'_>) -> Option<f64> {
        let column = self.sensitive_column(class.table)?;
        self.distance_of(class.table, class.rows, column.reference_counts())
    }

    fn close_enough(&self, d: Option<f64>) -> bool {
        d.is_some_and(|d| d <= self.t + T_EPS)
    }
}

/// The classes of a release against the distribution of its published
/// rows.
struct Distances {
    /// Classes farther than t, or without a value to measure.
    failing: usize,
    /// Classes without any sensitive value.
    without_values: usize,
    /// The largest distance of a class.
    farthest: f64,
}

impl TCloseness {
    /// Every class of a release measured against the distribution of the
    /// published rows, or why the release cannot be measured.
    fn release_distances(
        &self,
        table: &QiTable,
        classes: &[&[u32]],
    ) -> std::result::Result<Distances, String> {
        let Some(column) = self.sensitive_column(table) else {
            return Err(format!(
                "{}: the release has no sensitive column `{}`",
                self.describe(),
                self.column
            ));
        };
        if let Err(why) = self.ground(column) {
            return Err(format!("{}: {why}", self.describe()));
        }
        let mut reference = vec![0u32; column.distinct()];
        with_codes!(column.codes(), |codes| {
            for rows in classes {
                for &r in *rows {
                    reference[u32::from(codes[r as usize]) as usize] += 1;
                }
            }
        });
        let mut d = Distances {
            failing: 0,
            without_values: 0,
            farthest: 0.0,
        };
        for rows in classes {
            match self.distance_of(table, rows, &reference) {
                Some(x) => {
                    if !self.close_enough(Some(x)) {
                        d.failing += 1;
                    }
                    d.farthest = d.farthest.max(x);
                }
                None => {
                    d.failing += 1;
                    d.without_values += 1;
                }
            }
        }
        Ok(d)
    }
}

impl PrivacyModel for TCloseness {
    fn sensitive_columns(&self) -> Option<Vec<&str>> {
        Some(vec![self.column.as_str()])
    }
    fn describe(&self) -> String {
        let distance = match self.distance {
            Some(d) => format!("{} distance", d.name()),
            None => "distance by column".to_string(),
        };
        format!(
            "t-closeness (t = {}, {distance}) on `{}`",
            self.t, self.column
        )
    }
    fn min_class_size(&self) -> usize {
        1
    }
    fn accepts(&self, class: ClassView<'_>) -> bool {
        self.close_enough(self.class_distance(class))
    }
    fn is_monotone(&self) -> bool {
        true
    }
    /// A row helps when it brings the class's distribution closer to the
    /// reference (lower EMD), or gives a class without any value its first.
    fn helps(&self, class: ClassView<'_>, row: u32) -> bool {
        let before = self.class_distance(class);
        let mut rows = class.rows.to_vec();
        rows.push(row);
        let after = self.class_distance(ClassView {
            table: class.table,
            rows: &rows,
        });
        match (before, after) {
            (None, Some(_)) => true,
            (Some(b), Some(a)) => a < b - T_EPS,
            _ => false,
        }
    }
    /// Every published class against the distribution of the published
    /// rows (the module documentation says why).
    fn check_release(&self, table: &QiTable, classes: &[&[u32]]) -> Option<String> {
        if classes.is_empty() {
            return None;
        }
        let Distances {
            failing,
            without_values,
            farthest,
        } = match self.release_distances(table, classes) {
            Ok(d) => d,
            Err(why) => return Some(why),
        };
        (failing > 0).then(|| {
            let empty = if without_values > 0 {
                format!(", {without_values} of them without any sensitive value to measure")
            } else {
                String::new()
            };
            format!(
                "{failing} published classes violate {} (largest distance {farthest:.4} from the distribution of the published rows{empty})",
                self.describe()
            )
        })
    }
    fn achieved(&self, table: &QiTable, classes: &[&[u32]]) -> Option<String> {
        let d = self.release_distances(table, classes).ok()?;
        Some(format!(
            "largest distance {:.4} (t = {}) from the distribution of the published rows",
            d.farthest, self.t
        ))
    }
    fn check_feasible(&self, table: &QiTable, active: usize, _max_suppressed: usize) -> Result<()> {
        let column = self.sensitive_column(table).ok_or_else(|| {
            Error::data(
                &self.column,
                "is not an encoded sensitive column of the table",
            )
        })?;
        self.ground(column)
            .map_err(|why| Error::data(&self.column, why))?;
        if active == 0 {
            return Ok(());
        }
        if reference_values(column) == 0 {
            return Err(Error::Unsatisfiable(format!(
                "sensitive column `{}`: {} compares the distribution of its values in every class with the whole input's, but all {active} rows hold a missing value (missing values are not values unless `privacy.missing_sensitive = \"value\"`); choose another sensitive column",
                self.column,
                self.describe()
            )));
        }
        // One class of every active row has the reference distribution
        // itself (EMD 0): a release always exists, whatever t.
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use rustc_hash::FxHashMap;

    use super::*;
    use crate::hierarchy::NodeId;
    use crate::spec::JobSpec;

    /// One QI and one sensitive column `s` (numeric when `numeric`), with a
    /// hierarchy on `s` when given.
    fn table_with(values: &[&str], numeric: bool, hierarchy: Option<&str>) -> QiTable {
        let kind = if numeric { "numeric" } else { "categorical" };
        let h = hierarchy.map_or(String::new(), |_| r#", "hierarchy": "s.csv""#.to_string());
        let spec: JobSpec = serde_json::from_str(&format!(
            r#"{{"attributes": [{{"name": "q", "role": "qi"}}, {{"name": "s", "role": "sensitive", "type": "{kind}"{h}}}]}}"#
        ))
        .unwrap();
        let mut hierarchies = FxHashMap::default();
        if let Some(text) = hierarchy {
            hierarchies.insert(
                "s.csv".to_string(),
                Arc::new(Hierarchy::from_csv("s.csv", text, ';').unwrap()),
            );
        }
        QiTable::from_string_columns(
            &spec,
            &hierarchies,
            &[("q", vec!["x"; values.len()]), ("s", values.to_vec())],
        )
        .unwrap()
    }

    fn model(t: f64, distance: GroundDistance) -> TCloseness {
        TCloseness {
            column: "s".into(),
            t,
            distance: Some(distance),
        }
    }

    fn distance(m: &TCloseness, t: &QiTable, rows: &[u32]) -> f64 {
        m.class_distance(ClassView { table: t, rows }).unwrap()
    }

    /// Two diseases families, two values each (height 2):
    /// `*` -> {resp: {flu, cold}, digest: {ulcer, gastritis}}.
    const DISEASES: &str = "flu;resp;*\ncold;resp;*\nulcer;digest;*\ngastritis;digest;*\n";

    #[test]
    fn equal_distance_matches_hand_computed_cases() {
        // Table: a a b c (Q = 1/2, 1/4, 1/4). Class {a, b}: P = 1/2, 1/2, 0.
        // EMD = 1/2 (|1/2-1/2| + |1/2-1/4| + |0-1/4|) = 1/2 * 1/2 = 0.25.
        let t = table_with(&["a", "a", "b", "c"], false, None);
        let m = model(0.25, GroundDistance::Equal);
        assert!((distance(&m, &t, &[0, 2]) - 0.25).abs() < 1e-12);
        // Class {a}: P = 1, 0, 0: EMD = 1/2 (1/2 + 1/4 + 1/4) = 0.5.
        assert!((distance(&m, &t, &[0]) - 0.5).abs() < 1e-12);
        assert!(m.accepts(ClassView {
            table: &t,
            rows: &[0, 2]
        }));
        assert!(!m.accepts(ClassView {
            table: &t,
            rows: &[0]
        }));
        // The whole table is its own reference.
        assert_eq!(distance(&m, &t, &[0, 1, 2, 3]), 0.0);
        // Adding `c` to {a} brings it closer (EMD 0.25), adding `a` does not.
        let class = ClassView {
            table: &t,
            rows: &[0],
        };
        assert!(m.helps(class, 3));
        assert!(!m.helps(class, 1));
    }

    #[test]
    fn ordered_distance_matches_hand_computed_cases() {
        // Values 1 2 3 4, one row each: Q = 1/4 each, m = 4.
        // Class {1}: P = (1, 0, 0, 0); P - Q = (3/4, -1/4, -1/4, -1/4);
        // cumulative 3/4, 1/2, 1/4, 0; EMD = (3/4 + 1/2 + 1/4) / 3 = 0.5.
        let t = table_with(&["1", "2", "3", "4"], true, None);
        let m = model(0.5, GroundDistance::Ordered);
        assert!((distance(&m, &t, &[0]) - 0.5).abs() < 1e-12);
        // Class {1, 4}: P - Q = (1/4, -1/4, -1/4, 1/4); cumulative
        // 1/4, 0, -1/4, 0; EMD = (1/4 + 1/4) / 3 = 1/6.
        assert!((distance(&m, &t, &[0, 3]) - 1.0 / 6.0).abs() < 1e-12);
        // Class {3, 4} (the top half): cumulative -1/4, -1/2, -1/4, 0:
        // EMD = 1/3; passes t = 0.34, fails t = 0.3.
        assert!((distance(&m, &t, &[2, 3]) - 1.0 / 3.0).abs() < 1e-12);
        assert!(model(0.34, GroundDistance::Ordered).accepts(ClassView {
            table: &t,
            rows: &[2, 3]
        }));
        assert!(!model(0.3, GroundDistance::Ordered).accepts(ClassView {
            table: &t,
            rows: &[2, 3]
        }));
        // Numeric order, not label order: "10" sorts after "9".
        // Values 9, 10, 2: ascending 2, 9, 10. Class {9}: P - Q =
        // (-1/3, 2/3, -1/3); cumulative -1/3, 1/3, 0; EMD = (2/3) / 2 = 1/3.
        // (Label order 10, 2, 9 would give P - Q = (-1/3, -1/3, 2/3),
        // cumulative -1/3, -2/3, 0: EMD 1/2.)
        let t = table_with(&["9", "10", "2"], true, None);
        assert!((distance(&m, &t, &[0]) - 1.0 / 3.0).abs() < 1e-12);
        // The default for a numeric column is ordered.
        let auto = TCloseness {
            column: "s".into(),
            t: 0.5,
            distance: None,
        };
        assert!((distance(&auto, &t, &[0]) - 1.0 / 3.0).abs() < 1e-12);
    }

    #[test]
    fn hierarchical_distance_matches_hand_computed_cases() {
        // One row per leaf: Q = 1/4 each; H = 2.
        let t = table_with(
            &["flu", "cold", "ulcer", "gastritis"],
            false,
            Some(DISEASES),
        );
        let m = model(0.6, GroundDistance::Hierarchical);
        // Class {flu}: extra = (3/4, -1/4 | -1/4, -1/4).
        // resp (height 1): pos 3/4, neg 1/4: cost 1/2 * 1/4 = 1/8; extra 1/2.
        // digest: pos 0: cost 0; extra -1/2.
        // root (height 2): pos 1/2, neg 1/2: cost 2/2 * 1/2 = 1/2.
        // EMD = 1/8 + 1/2 = 0.625 (move 1/4 flu -> cold at 1/2, 1/2 across
        // the root at 1).
        assert!((distance(&m, &t, &[0]) - 0.625).abs() < 1e-12);
        assert!(!m.accepts(ClassView {
            table: &t,
            rows: &[0]
        }));
        // Class {flu, cold}: extra (1/4, 1/4 | -1/4, -1/4): inner nodes
        // move nothing; root moves 1/2 at cost 1: EMD = 0.5 (equal distance
        // would say 0.5 too).
        assert!((distance(&m, &t, &[0, 1]) - 0.5).abs() < 1e-12);
        // Class {flu, ulcer}: extra (1/4, -1/4 | 1/4, -1/4): each family
        // moves 1/4 at cost 1/2, the root nothing: EMD = 0.25, where the
        // equal distance says 0.5: values of one family are close.
        assert!((distance(&m, &t, &[0, 2]) - 0.25).abs() < 1e-12);
        assert!((distance(&model(1.0, GroundDistance::Equal), &t, &[0, 2]) - 0.5).abs() < 1e-12);
        assert!(model(0.3, GroundDistance::Hierarchical).accepts(ClassView {
            table: &t,
            rows: &[0, 2]
        }));
        assert!(
            !model(0.2, GroundDistance::Hierarchical).accepts(ClassView {
                table: &t,
                rows: &[0, 2]
            })
        );
        // The default with a hierarchy is hierarchical.
        let auto = TCloseness {
            column: "s".into(),
            t: 0.5,
            distance: None,
        };
        assert!((distance(&auto, &t, &[0, 2]) - 0.25).abs() < 1e-12);
    }

    #[test]
    fn missing_values_are_left_out_of_class_and_reference() {
        // Table a, a, b, "" (missing): Q over values = (2/3, 1/3).
        // Class {a, ""}: P = (1, 0): EMD = 1/2 (1/3 + 1/3) = 1/3, exactly as
        // if the missing row were not there.
        let t = table_with(&["a", "a", "b", ""], false, None);
        let m = model(0.4, GroundDistance::Equal);
        assert!((distance(&m, &t, &[0, 3]) - 1.0 / 3.0).abs() < 1e-12);
        assert!((distance(&m, &t, &[0]) - 1.0 / 3.0).abs() < 1e-12);
        // A class of missing values only has no distribution: rejected.
        assert!(!m.accepts(ClassView {
            table: &t,
            rows: &[3]
        }));
        // ... and a row with a value helps it, a missing one does not.
        let class = ClassView {
            table: &t,
            rows: &[3],
        };
        assert!(m.helps(class, 2));
        assert!(!m.helps(class, 3));
        // The verifiers refuse such a class, and say so by count.
        let msg = m.check_release(&t, &[&[0, 1, 2], &[3]]).unwrap();
        assert!(
            msg.starts_with("1 published classes violate")
                && msg.contains("1 of them without any sensitive value"),
            "{msg}"
        );
        // A column without any value cannot be t-close.
        let t = table_with(&["", ""], false, None);
        let err = m.check_feasible(&t, 2, 0).unwrap_err().to_string();
        assert!(
            err.contains("missing value") && err.contains("`s`"),
            "{err}"
        );
    }

    #[test]
    fn a_block_compares_with_the_whole_table() {
        // Whole table a a b b: Q = (1/2, 1/2). A block holding a, a, b has
        // Q_block = (2/3, 1/3), but its class {a, b} must be measured
        // against the whole table: EMD 0, not 1/6.
        let t = table_with(&["a", "a", "b", "b"], false, None);
        let block = t.restrict(&[0, 1, 2]);
        assert_eq!(block.sensitive()[0].reference_counts(), &[2, 2]);
        let m = model(0.1, GroundDistance::Equal);
        assert_eq!(distance(&m, &block, &[1, 2]), 0.0);
        // Class {a, a} of the block: EMD 1/2 against the whole table (it
        // would be 1/3 against the block).
        assert!((distance(&m, &block, &[0, 1]) - 0.5).abs() < 1e-12);
    }

    #[test]
    fn the_verifier_uses_the_published_distribution() {
        // Table a a b b; rows 2 and 3 suppressed: the release is a, a. Its
        // one class has EMD 1/2 against the input but 0 against what is
        // published; and a release {a, b}, {a} with b suppressed is
        // measured against (2/3, 1/3).
        let t = table_with(&["a", "a", "b", "b"], false, None);
        let m = model(0.2, GroundDistance::Equal);
        assert!(!m.accepts(ClassView {
            table: &t,
            rows: &[0, 1]
        }));
        assert_eq!(m.check_release(&t, &[&[0, 1]]), None);
        // {a, b}: EMD 1/2 |1/2-2/3| + 1/2 |1/2-1/3| = 1/6 <= 0.2;
        // {a}: 1/2 (1/3 + 1/3) = 1/3 > 0.2.
        let msg = m.check_release(&t, &[&[0, 2], &[1]]).unwrap();
        assert!(
            msg.starts_with(
                "1 published classes violate t-closeness (t = 0.2, equal distance) on `s`"
            ),
            "{msg}"
        );
        assert!(msg.contains("0.3333"), "{msg}");
    }

    #[test]
    fn unions_of_close_classes_are_close() {
        // Monotone: two accepted classes give an accepted union, for every
        // distance (convexity of the EMD).
        let t = table_with(
            &[
                "flu",
                "cold",
                "ulcer",
                "gastritis",
                "flu",
                "ulcer",
                "cold",
                "gastritis",
            ],
            false,
            Some(DISEASES),
        );
        for d in [GroundDistance::Equal, GroundDistance::Hierarchical] {
            let m = model(0.3, d);
            assert!(m.is_monotone() && !m.is_monotone_with_suppression());
            // {flu, cold, ulcer}: equal EMD 1/2 (3 * 1/12 + 1/4) = 1/4,
            // hierarchical 1/6 + 1/24 = 5/24; {gastritis, flu, cold}: the
            // same by symmetry; their union: equal 1/6.
            let (x, y): (&[u32], &[u32]) = (&[0, 1, 2], &[3, 4, 6]);
            let view = |rows| ClassView { table: &t, rows };
            assert!(m.accepts(view(x)) && m.accepts(view(y)), "{d:?}");
            assert!(m.accepts(view(&[0, 1, 2, 3, 4, 6])), "{d:?}");
        }
    }

    #[test]
    fn columns_that_cannot_give_the_distance_fail_before_any_work() {
        // Ordered needs numbers.
        let t = table_with(&["a", "b"], false, None);
        let err = model(0.2, GroundDistance::Ordered)
            .check_feasible(&t, 2, 0)
            .unwrap_err()
            .to_string();
        assert!(
            err.contains("column `s`") && err.contains("numbers"),
            "{err}"
        );
        // Hierarchical needs a hierarchy.
        let err = model(0.2, GroundDistance::Hierarchical)
            .check_feasible(&t, 2, 0)
            .unwrap_err()
            .to_string();
        assert!(err.contains("hierarchy"), "{err}");
        // Any t: the whole table passes.
        model(1e-6, GroundDistance::Equal)
            .check_feasible(&t, 2, 0)
            .unwrap();
        // A value missing from the hierarchy: counted, never shown.
        let spec: JobSpec = serde_json::from_str(
            r#"{"attributes": [{"name": "q", "role": "qi"}, {"name": "s", "role": "sensitive", "hierarchy": "s.csv"}]}"#,
        )
        .unwrap();
        let mut hierarchies = FxHashMap::default();
        hierarchies.insert(
            "s.csv".to_string(),
            Arc::new(Hierarchy::from_csv("s.csv", DISEASES, ';').unwrap()),
        );
        let err = QiTable::from_string_columns(
            &spec,
            &hierarchies,
            &[
                ("q", vec!["x"; 3]),
                ("s", vec!["flu", "Secret-x", "Secret-x"]),
            ],
        )
        .unwrap_err()
        .to_string();
        assert!(
            err.contains("column `s`") && err.contains("2 rows") && err.contains("s.csv"),
            "{err}"
        );
        assert!(!err.contains("Secret"), "{err}");
    }

    #[test]
    fn emd_formulas_on_distributions() {
        assert!((emd_equal(&[0.5, 0.5, 0.0], &[0.25, 0.25, 0.5]) - 0.5).abs() < 1e-12);
        // m = 3: P - Q = (1/2, 0, -1/2): cumulative 1/2, 1/2, 0: 1 / 2.
        assert!((emd_ordered(&[0.5, 0.5, 0.0], &[0.0, 0.5, 0.5]) - 0.5).abs() < 1e-12);
        assert_eq!(emd_ordered(&[1.0], &[1.0]), 0.0);
        let h = Hierarchy::from_csv("d", DISEASES, ';').unwrap();
        // Leaves in file order: flu, cold, ulcer, gastritis (depth first).
        let flu = h.leaf("flu").unwrap().0 as usize;
        let gastritis = h.leaf("gastritis").unwrap().0 as usize;
        let mut p = vec![0.0; 4];
        let mut q = vec![0.0; 4];
        p[flu] = 1.0;
        q[gastritis] = 1.0;
        // All mass across the root: distance 2/2 = 1.
        assert!((emd_hierarchical(&h, &p, &q) - 1.0).abs() < 1e-12);
        assert_eq!(h.level(NodeId(flu as u32)), Level(0));
    }
}
