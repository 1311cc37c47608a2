//! The figures of a report, counted from encoded tables: the input's raw
//! classes ([`InputTally`], counts only, never a value) and the release's
//! published classes and labels ([`ReleaseTally`]).
//!
//! The input side keeps sizes and frequencies without their values, so the
//! "before" figures cannot leak a raw value; the release side keeps the
//! published labels, which the release shows anyway.

use std::sync::Arc;

use kanon_engine::encode::{EquivalenceClasses, QiTable};
use kanon_engine::hierarchy::{Hierarchy, Level};
use kanon_engine::spec::{AttributeSpec, Kind};
use rustc_hash::FxHashMap;

/// Class sizes of a table: how many classes of each size.
#[derive(Debug, Clone, Default)]
pub(crate) struct ClassSizes {
    /// `(size, classes of that size)`, ascending by size.
    pub(crate) by_size: Vec<(usize, usize)>,
}

impl ClassSizes {
    /// The sizes of the classes of `table`'s active rows.
    pub(crate) fn of_classes(classes: &EquivalenceClasses) -> ClassSizes {
        let mut counts: FxHashMap<usize, usize> = FxHashMap::default();
        for c in 0..classes.len() {
            *counts.entry(classes.size(c)).or_default() += 1;
        }
        let mut by_size: Vec<(usize, usize)> = counts.into_iter().collect();
        by_size.sort_unstable();
        ClassSizes { by_size }
    }

    /// Records in classes.
    pub(crate) fn rows(&self) -> usize {
        self.by_size.iter().map(|&(s, n)| s * n).sum()
    }

    /// Number of classes.
    pub(crate) fn classes(&self) -> usize {
        self.by_size.iter().map(|&(_, n)| n).sum()
    }

    /// The smallest class (0 when there is none).
    pub(crate) fn smallest(&self) -> usize {
        self.by_size.first().map_or(0, |&(s, _)| s)
    }

    /// The largest class (0 when there is none).
    pub(crate) fn largest(&self) -> usize {
        self.by_size.last().map_or(0, |&(s, _)| s)
    }
}

/// What the report may say about the input: its class sizes over the raw QI
/// values and, per QI, the frequencies of its distinct values sorted from
/// the most to the least frequent, without the values themselves.
#[derive(Debug, Clone)]
pub struct InputTally {
    /// Rows read.
    pub(crate) rows: usize,
    /// Classes of the raw QI values.
    pub(crate) sizes: ClassSizes,
    /// Per QI, in job order: each distinct value's count, descending.
    pub(crate) frequencies: Vec<Vec<u64>>,
}

impl InputTally {
    /// Counts `table`, the job's input as encoded for the algorithm (each
    /// code a raw value). Keeps no label.
    pub fn of(table: &QiTable) -> InputTally {
        let classes = EquivalenceClasses::of(table);
        let frequencies = table
            .columns()
            .iter()
            .map(|c| {
                let mut f: Vec<u64> = c
                    .counts()
                    .iter()
                    .filter(|&&n| n > 0)
                    .map(|&n| n as u64)
                    .collect();
                f.sort_unstable_by(|a, b| b.cmp(a));
                f
            })
            .collect();
        InputTally {
            rows: table.n_rows(),
            sizes: ClassSizes::of_classes(&classes),
            frequencies,
        }
    }
}

/// How a QI's published labels are read.
#[derive(Debug, Clone)]
pub(crate) enum Reading {
    /// Nodes of a hierarchy file.
    Hierarchy(Arc<Hierarchy>),
    /// Numbers and ranges `[a-b]`, `[a-b)`, `>=a`, `<b`.
    Numeric,
    /// Values and value sets `{a,b}`.
    Categorical,
}

/// One published label of a QI and what it costs.
#[derive(Debug, Clone)]
pub(crate) struct Label {
    /// The published label.
    pub(crate) text: String,
    /// Published cells with this label.
    pub(crate) count: u64,
    /// Its NCP (0 = the exact value, 1 = suppressed).
    pub(crate) ncp: f64,
    /// Its generalisation: a hierarchy level (`level 2`), an interval width
    /// (`width 5`), a set size, `exact` or `suppressed (*)`.
    pub(crate) step: String,
    /// Sort key of `step` (exact first, suppressed last).
    pub(crate) step_rank: f64,
}

/// A release's published classes and labels.
#[derive(Debug, Clone)]
pub struct ReleaseTally {
    /// Published rows.
    pub(crate) rows: usize,
    /// Published classes.
    pub(crate) sizes: ClassSizes,
    /// Per QI, in job order, its published labels by code.
    pub(crate) labels: Vec<Vec<Label>>,
    /// Per QI, the mean NCP of its published cells.
    pub(crate) ncp: Vec<f64>,
    /// The largest and the smallest classes, as `(size, label code per QI)`.
    pub(crate) extremes: Vec<(usize, Vec<u32>)>,
    /// Per sensitive column: `(name, distinct l, entropy l)` achieved.
    pub(crate) diversity: Vec<(String, usize, f64)>,
}

/// Classes of each end shown in the heatmap.
const EXTREME_CLASSES: usize = 12;

impl ReleaseTally {
    /// Counts `table`, the release encoded by its labels
    /// (`JobSpec::labels_only`); `attributes` are the job's QIs, in order,
    /// and `hierarchies` its parsed hierarchy files.
    pub(crate) fn of(
        table: &QiTable,
        attributes: &[&AttributeSpec],
        hierarchies: &FxHashMap<String, Arc<Hierarchy>>,
    ) -> ReleaseTally {
        let classes = EquivalenceClasses::of(table);
        let mut labels = Vec::new();
        let mut ncp = Vec::new();
        for (col, attr) in table.columns().iter().zip(attributes) {
            let texts: Vec<(String, u64)> = (0..col.domain_size() as u32)
                .map(|c| (col.label(c).to_string(), col.counts()[c as usize] as u64))
                .collect();
            let reading = reading_of(attr, hierarchies, &texts);
            let costed = cost(&reading, texts);
            let cells: u64 = costed.iter().map(|l| l.count).sum();
            let sum: f64 = costed.iter().map(|l| l.ncp * l.count as f64).sum();
            ncp.push(if cells == 0 { 0.0 } else { sum / cells as f64 });
            labels.push(costed);
        }
        let mut order: Vec<usize> = (0..classes.len()).collect();
        order.sort_by_key(|&c| {
            (
                std::cmp::Reverse(classes.size(c)),
                classes.tuple(c).to_vec(),
            )
        });
        let mut ends: Vec<usize> = order.iter().copied().take(EXTREME_CLASSES).collect();
        let tail = order.len().saturating_sub(EXTREME_CLASSES).max(ends.len());
        ends.extend(order[tail..].iter().copied());
        let extremes = ends
            .into_iter()
            .map(|c| (classes.size(c), classes.tuple(c).to_vec()))
            .collect();
        let diversity = table
            .sensitive()
            .iter()
            .map(|s| {
                let (mut distinct, mut entropy) = (usize::MAX, f64::INFINITY);
                for c in 0..classes.len() {
                    let mut counts: FxHashMap<u32, usize> = FxHashMap::default();
                    for &r in classes.rows(c) {
                        let code = s.codes().get(r as usize);
                        if !s.is_missing(code) {
                            *counts.entry(code).or_default() += 1;
                        }
                    }
                    let n: usize = counts.values().sum();
                    let h = if n == 0 {
                        0.0
                    } else {
                        counts
                            .values()
                            .map(|&m| {
                                let p = m as f64 / n as f64;
                                -p * p.ln()
                            })
                            .sum()
                    };
                    distinct = distinct.min(counts.len());
                    entropy = entropy.min(h);
                }
                if classes.is_empty() {
                    (distinct, entropy) = (0, 0.0);
                }
                (s.name().to_string(), distinct, entropy.exp())
            })
            .collect();
        ReleaseTally {
            rows: table.n_rows() - table.excluded().len(),
            sizes: ClassSizes::of_classes(&classes),
            labels,
            ncp,
            extremes,
            diversity,
        }
    }
}

/// How the labels of `attr` are read: by its hierarchy file, as numbers
/// when the job says so or every label is a number or range, else as values.
fn reading_of(
    attr: &AttributeSpec,
    hierarchies: &FxHashMap<String, Arc<Hierarchy>>,
    labels: &[(String, u64)],
) -> Reading {
    if let Some(h) = attr.hierarchy.as_ref().and_then(|p| hierarchies.get(p)) {
        return Reading::Hierarchy(h.clone());
    }
    let numeric_job =
        attr.kind == Some(Kind::Numeric) || attr.intervals.is_some() || attr.cuts.is_some();
    let all_numbers = labels
        .iter()
        .filter(|(l, n)| *n > 0 && l.trim() != "*")
        .all(|(l, _)| !matches!(parse_numeric(l), Numeric::Text));
    if numeric_job || (all_numbers && !labels.is_empty()) {
        Reading::Numeric
    } else {
        Reading::Categorical
    }
}

/// A numeric label.
enum Numeric {
    /// `*`.
    Suppressed,
    /// One number, published as it is.
    Value(f64),
    /// A range; an open end is infinite.
    Range(f64, f64),
    /// Not a number: a value of its own.
    Text,
}

/// Reads a numeric label: `*`, a number, `[a-b]`, `[a-b)`, `>=a`, `<b`.
fn parse_numeric(label: &str) -> Numeric {
    let l = label.trim();
    if l == "*" {
        return Numeric::Suppressed;
    }
    if let Ok(v) = l.parse::<f64>() {
        return Numeric::Value(v);
    }
    if let Some(inner) = l
        .strip_prefix('[')
        .and_then(|s| s.strip_suffix(']').or_else(|| s.strip_suffix(')')))
    {
        // Split at a `-` after a digit, so negative bounds read too.
        let b = inner.as_bytes();
        if let Some(i) =
            (1..b.len()).find(|&i| b[i] == b'-' && (b[i - 1].is_ascii_digit() || b[i - 1] == b'.'))
        {
            if let (Ok(lo), Ok(hi)) = (inner[..i].trim().parse(), inner[i + 1..].trim().parse()) {
                return Numeric::Range(lo, hi);
            }
        }
    }
    if let Some(v) = l.strip_prefix(">=").and_then(|s| s.trim().parse().ok()) {
        return Numeric::Range(v, f64::INFINITY);
    }
    if let Some(v) = l.strip_prefix('<').and_then(|s| s.trim().parse().ok()) {
        return Numeric::Range(f64::NEG_INFINITY, v);
    }
    Numeric::Text
}

/// The smallest of 1, 2, 5, 10, 20, 50, ... at least `width`: interval
/// widths are shown in these buckets, so a column of many distinct ranges
/// keeps a short chart.
fn width_bucket(width: f64) -> f64 {
    let mut bound = 1.0;
    for step in [2.0, 2.5, 2.0].into_iter().cycle() {
        if bound >= width || !bound.is_finite() {
            return bound;
        }
        bound *= step;
    }
    unreachable!("the cycle is endless")
}

/// The cost of each label under `reading` (NCP as in
/// `kanon_engine::metrics::risk`: leaves covered over all leaves, interval
/// width over the published range, set size over the distinct values).
fn cost(reading: &Reading, labels: Vec<(String, u64)>) -> Vec<Label> {
    let label = |text: String, count: u64, ncp: f64, step: String, step_rank: f64| Label {
        text,
        count,
        ncp,
        step,
        step_rank,
    };
    let suppressed =
        |text: String, count: u64| label(text, count, 1.0, "suppressed (*)".into(), f64::MAX);
    match reading {
        Reading::Hierarchy(h) => {
            let mut nodes: FxHashMap<&str, (usize, u8)> = FxHashMap::default();
            for level in (0..=h.height()).rev() {
                for n in h.nodes_at(Level(level)) {
                    nodes.insert(h.label(n), (h.leaves(n).len(), level));
                }
            }
            let d = h.leaf_count().max(1) as f64;
            labels
                .into_iter()
                .map(|(text, count)| match nodes.get(text.as_str()).copied() {
                    Some((_, level)) if level == h.height() && level > 0 => suppressed(text, count),
                    Some((m, level)) => {
                        let ncp = if m > 1 { m as f64 / d } else { 0.0 };
                        let step = if level == 0 {
                            "level 0 (exact)".to_string()
                        } else {
                            format!("level {level}")
                        };
                        label(text, count, ncp, step, level as f64)
                    }
                    None if text.trim() == "*" => suppressed(text, count),
                    None => label(
                        text,
                        count,
                        0.0,
                        "not in the hierarchy".into(),
                        f64::MAX - 1.0,
                    ),
                })
                .collect()
        }
        Reading::Numeric => {
            let parsed: Vec<Numeric> = labels.iter().map(|(t, _)| parse_numeric(t)).collect();
            let (mut lo, mut hi) = (f64::INFINITY, f64::NEG_INFINITY);
            for p in &parsed {
                let bounds = match p {
                    Numeric::Value(v) => [*v, *v],
                    Numeric::Range(a, b) => [*a, *b],
                    _ => continue,
                };
                for v in bounds.into_iter().filter(|v| v.is_finite()) {
                    lo = lo.min(v);
                    hi = hi.max(v);
                }
            }
            let span = if hi > lo { hi - lo } else { 0.0 };
            labels
                .into_iter()
                .zip(parsed)
                .map(|((text, count), p)| match p {
                    Numeric::Suppressed => suppressed(text, count),
                    Numeric::Value(_) => label(text, count, 0.0, "exact".into(), 0.0),
                    Numeric::Range(a, b) => {
                        let w = b.min(hi) - a.max(lo);
                        let ncp = if span > 0.0 {
                            (w / span).clamp(0.0, 1.0)
                        } else {
                            0.0
                        };
                        if a.is_finite() && b.is_finite() {
                            let bound = width_bucket(b - a);
                            let step =
                                format!("width ≤ {}", kanon_engine::encode::format_number(bound));
                            label(text, count, ncp, step, bound)
                        } else {
                            label(text, count, ncp, "open interval".into(), f64::MAX / 2.0)
                        }
                    }
                    Numeric::Text => label(text, count, 0.0, "exact".into(), 0.0),
                })
                .collect()
        }
        Reading::Categorical => {
            // Published labels in the grammar of
            // `kanon_engine::generalise::escape_value`: `{a,b\,c}` is a set,
            // `\{a,b}` one value.
            let mut singles: FxHashMap<String, ()> = FxHashMap::default();
            let sets: Vec<Option<Vec<String>>> = labels
                .iter()
                .map(|(t, _)| {
                    t.trim()
                        .strip_prefix('{')
                        .and_then(|s| s.strip_suffix('}'))
                        .map(kanon_engine::generalise::split_set)
                })
                .collect();
            for ((t, _), s) in labels.iter().zip(&sets) {
                match s {
                    Some(items) => {
                        for item in items {
                            singles.insert(item.trim().to_string(), ());
                        }
                    }
                    None if t.trim() != "*" => {
                        let value = t.strip_prefix('\\').unwrap_or(t);
                        singles.insert(value.to_string(), ());
                    }
                    None => {}
                }
            }
            let sets: Vec<Option<usize>> = sets.into_iter().map(|s| s.map(|v| v.len())).collect();
            let d = singles.len().max(1) as f64;
            labels
                .into_iter()
                .zip(sets)
                .map(|((text, count), set)| match set {
                    _ if text.trim() == "*" => suppressed(text, count),
                    Some(m) if m > 1 => {
                        label(text, count, m as f64 / d, format!("set of {m}"), m as f64)
                    }
                    _ => label(text, count, 0.0, "exact".into(), 0.0),
                })
                .collect()
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn numeric_labels_cost_their_width() {
        let costed = cost(
            &Reading::Numeric,
            vec![("[20-30]".into(), 4), ("40".into(), 2), ("*".into(), 1)],
        );
        assert!((costed[0].ncp - 0.5).abs() < 1e-12);
        assert_eq!(costed[0].step, "width ≤ 10");
        assert_eq!(
            [0.5, 1.0, 1.5, 6.0, 20.0, 21.0].map(width_bucket),
            [1.0, 1.0, 2.0, 10.0, 20.0, 50.0]
        );
        assert_eq!((costed[1].ncp, costed[1].step.as_str()), (0.0, "exact"));
        assert_eq!(costed[2].ncp, 1.0);
    }

    #[test]
    fn hierarchy_labels_cost_their_leaves_and_name_their_level() {
        let h = Hierarchy::from_csv("h.csv", "a;ab;*\nb;ab;*\nc;cd;*\nd;cd;*\n", ';').unwrap();
        let costed = cost(
            &Reading::Hierarchy(Arc::new(h)),
            vec![("a".into(), 1), ("ab".into(), 2), ("*".into(), 3)],
        );
        assert_eq!(costed[0].step, "level 0 (exact)");
        assert_eq!((costed[1].ncp, costed[1].step.as_str()), (0.5, "level 1"));
        assert_eq!(costed[2].ncp, 1.0);
    }

    #[test]
    fn value_sets_cost_their_share_of_the_values() {
        let costed = cost(
            &Reading::Categorical,
            vec![("{x,y}".into(), 2), ("z".into(), 1), ("w".into(), 1)],
        );
        assert!((costed[0].ncp - 0.5).abs() < 1e-12);
        assert_eq!(costed[0].step, "set of 2");
        assert_eq!(costed[1].ncp, 0.0);
    }
}
