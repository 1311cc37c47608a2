//! Distances of clustering algorithms under the uncertainty loss of
//! L-clustering (the L-clustering paper; `docs/SPEC.md` section 3).
//!
//! A cluster is published as one generalised tuple: per QI a [`Span`], the
//! `[min-max]` code range of an ordered (numeric) attribute, the value set of
//! an unordered one, or a hierarchy node when the job generalises through
//! hierarchies. [`UncertaintyLoss`] holds, per QI, what it needs to compute
//! the weighted loss of a span and of the join of a span with a value or with
//! another span without allocating, so that greedy clustering can evaluate
//! thousands of candidate joins per step.
//!
//! The losses agree with
//! [`metrics::loss::cell_uncertainty_loss`](crate::metrics::loss::cell_uncertainty_loss)
//! of the published [`Cell`] (a unit test checks it): ordered
//! `p_i * width / range`, unordered `q_j * (|set|-1)/(|domain|-1)`, a
//! hierarchy node costing the values it covers.

use std::sync::Arc;

use crate::encode::QiTable;
use crate::generalise::Cell;
use crate::hierarchy::{Hierarchy, NodeId};
use crate::metrics::distortion::flexible_share;
use crate::spec::Kind;

/// The generalisation of one QI of a cluster, in the column's codes.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Span {
    /// Codes `lo..=hi` of an ordered attribute (codes ascend with values).
    Range { lo: u32, hi: u32 },
    /// A set of codes of an unordered attribute, as a bitset.
    Set(Box<[u64]>),
    /// A hierarchy node (the lowest common ancestor of the cluster's values).
    Node(u32),
}

#[derive(Debug, Clone)]
enum Attr {
    /// Ordered: value of every code and `1 / (max - min)` (0 for a constant).
    Range { values: Vec<f64>, inv_range: f64 },
    /// Unordered: `1 / (D - 1)` over the `D` observed values (0 when `D <= 1`),
    /// and the bitset length in words.
    Set { inv_denom: f64, words: usize },
    /// Through a hierarchy: the unweighted loss of every node.
    Tree { lca: Lca, loss: Vec<f64> },
}

/// Lowest common ancestors of a hierarchy, from a table when the hierarchy
/// is small (joins are the inner loop of clustering).
#[derive(Debug, Clone)]
struct Lca {
    h: Arc<Hierarchy>,
    /// `table[a * nodes + b]`, when `nodes <= MAX_LCA_TABLE_NODES`.
    table: Vec<u32>,
    nodes: usize,
}

/// Largest hierarchy (in nodes) whose LCA table is kept: 1024^2 entries.
const MAX_LCA_TABLE_NODES: usize = 1024;

impl Lca {
    fn new(h: &Arc<Hierarchy>) -> Self {
        let nodes = h.node_count();
        let table = if nodes <= MAX_LCA_TABLE_NODES {
            (0..nodes as u32)
                .flat_map(|a| (0..nodes as u32).map(move |b| (a, b)))
                .map(|(a, b)| h.lca(NodeId(a), NodeId(b)).0)
                .collect()
        } else {
            Vec::new()
        };
        Lca {
            h: h.clone(),
            table,
            nodes,
        }
    }

    fn of(&self, a: u32, b: u32) -> u32 {
        if self.table.is_empty() {
            self.h.lca(NodeId(a), NodeId(b)).0
        } else {
            self.table[a as usize * self.nodes + b as usize]
        }
    }
}

/// Per-QI setup of the weighted uncertainty loss of a table.
#[derive(Debug, Clone)]
pub(crate) struct UncertaintyLoss {
    attrs: Vec<Attr>,
    weights: Vec<f64>,
}

impl UncertaintyLoss {
    /// The loss of `table`'s QIs, each weighted by its attribute `weight`.
    /// With `through_hierarchies`, QIs that have a hierarchy generalise to
    /// its nodes; otherwise (and for QIs without one) ordered QIs generalise
    /// to ranges and unordered ones to value sets.
    pub(crate) fn new(table: &QiTable, through_hierarchies: bool) -> Self {
        let attrs = table
            .columns()
            .iter()
            .map(
                |col| match (col.hierarchy(), through_hierarchies, col.kind()) {
                    (Some(h), true, _) => Attr::Tree {
                        lca: Lca::new(h),
                        loss: (0..h.node_count() as u32)
                            .map(|n| flexible_share(col, &Cell::Node(NodeId(n))))
                            .collect(),
                    },
                    (_, _, Kind::Numeric) => {
                        let (min, max) = col.min_max();
                        Attr::Range {
                            values: (0..col.domain_size() as u32)
                                .map(|c| col.value(c).unwrap_or(0.0))
                                .collect(),
                            inv_range: if max > min { 1.0 / (max - min) } else { 0.0 },
                        }
                    }
                    (_, _, Kind::Categorical) => Attr::Set {
                        inv_denom: if col.distinct() > 1 {
                            1.0 / (col.distinct() - 1) as f64
                        } else {
                            0.0
                        },
                        words: col.domain_size().div_ceil(64).max(1),
                    },
                },
            )
            .collect();
        UncertaintyLoss {
            attrs,
            weights: table.columns().iter().map(|c| c.weight()).collect(),
        }
    }

    /// Number of QIs.
    pub(crate) fn n_attrs(&self) -> usize {
        self.attrs.len()
    }

    /// The span of a single value (loss 0).
    pub(crate) fn leaf_span(&self, q: usize, code: u32) -> Span {
        match &self.attrs[q] {
            Attr::Range { .. } => Span::Range { lo: code, hi: code },
            Attr::Set { words, .. } => {
                let mut bits = vec![0u64; *words].into_boxed_slice();
                bits[code as usize / 64] |= 1 << (code % 64);
                Span::Set(bits)
            }
            Attr::Tree { .. } => Span::Node(code),
        }
    }

    /// The spans of one row.
    pub(crate) fn row_spans(&self, table: &QiTable, row: u32) -> Vec<Span> {
        table
            .row(row)
            .enumerate()
            .map(|(q, c)| self.leaf_span(q, c))
            .collect()
    }

    /// Weighted loss of a span of QI `q`.
    pub(crate) fn span_loss(&self, q: usize, span: &Span) -> f64 {
        self.weights[q]
            * match (&self.attrs[q], span) {
                (Attr::Range { values, inv_range }, Span::Range { lo, hi }) => {
                    (values[*hi as usize] - values[*lo as usize]) * inv_range
                }
                (Attr::Set { inv_denom, .. }, Span::Set(bits)) => {
                    (popcount(bits).saturating_sub(1)) as f64 * inv_denom
                }
                (Attr::Tree { loss, .. }, Span::Node(n)) => loss[*n as usize],
                _ => unreachable!("span of another attribute kind"),
            }
    }

    /// Weighted loss of the join of a span with the value `code`.
    pub(crate) fn join_code_loss(&self, q: usize, span: &Span, code: u32) -> f64 {
        self.weights[q]
            * match (&self.attrs[q], span) {
                (Attr::Range { values, inv_range }, Span::Range { lo, hi }) => {
                    let lo = values[(*lo).min(code) as usize];
                    let hi = values[(*hi).max(code) as usize];
                    (hi - lo) * inv_range
                }
                (Attr::Set { inv_denom, .. }, Span::Set(bits)) => {
                    let inside = bits[code as usize / 64] >> (code % 64) & 1 == 1;
                    let m = popcount(bits) + usize::from(!inside);
                    (m - 1) as f64 * inv_denom
                }
                (Attr::Tree { lca, loss }, Span::Node(n)) => loss[lca.of(*n, code) as usize],
                _ => unreachable!("span of another attribute kind"),
            }
    }

    /// Weighted loss of the join of two spans of QI `q`.
    pub(crate) fn join_loss(&self, q: usize, a: &Span, b: &Span) -> f64 {
        self.weights[q]
            * match (&self.attrs[q], a, b) {
                (
                    Attr::Range { values, inv_range },
                    Span::Range { lo: l1, hi: h1 },
                    Span::Range { lo: l2, hi: h2 },
                ) => (values[*h1.max(h2) as usize] - values[*l1.min(l2) as usize]) * inv_range,
                (Attr::Set { inv_denom, .. }, Span::Set(x), Span::Set(y)) => {
                    let m: u32 = x
                        .iter()
                        .zip(y.iter())
                        .map(|(a, b)| (a | b).count_ones())
                        .sum();
                    (m as usize).saturating_sub(1) as f64 * inv_denom
                }
                (Attr::Tree { lca, loss }, Span::Node(x), Span::Node(y)) => {
                    loss[lca.of(*x, *y) as usize]
                }
                _ => unreachable!("spans of another attribute kind"),
            }
    }

    /// A span packed into one word, when it fits (ranges, nodes, sets of at
    /// most 64 codes): cheap to store column-wise for fast bounds.
    pub(crate) fn key(span: &Span) -> Option<u64> {
        match span {
            Span::Range { lo, hi } => Some((*lo as u64) << 32 | *hi as u64),
            Span::Set(bits) if bits.len() == 1 => Some(bits[0]),
            Span::Set(_) => None,
            Span::Node(n) => Some(*n as u64),
        }
    }

    /// Whether every span of QI `q` packs into a key.
    pub(crate) fn keyed(&self, q: usize) -> bool {
        !matches!(self.attrs[q], Attr::Set { words, .. } if words > 1)
    }

    /// [`UncertaintyLoss::join_loss`] of a span and a packed span.
    pub(crate) fn join_loss_key(&self, q: usize, span: &Span, key: u64) -> f64 {
        self.weights[q]
            * match (&self.attrs[q], span) {
                (Attr::Range { values, inv_range }, Span::Range { lo, hi }) => {
                    let (l2, h2) = ((key >> 32) as u32, key as u32);
                    (values[(*hi).max(h2) as usize] - values[(*lo).min(l2) as usize]) * inv_range
                }
                (Attr::Set { inv_denom, .. }, Span::Set(bits)) => {
                    ((bits[0] | key).count_ones() as usize).saturating_sub(1) as f64 * inv_denom
                }
                (Attr::Tree { lca, loss }, Span::Node(n)) => loss[lca.of(*n, key as u32) as usize],
                _ => unreachable!("span of another attribute kind"),
            }
    }

    /// [`UncertaintyLoss::join_loss_key`] of one span with many packed
    /// spans: `out[i]` for `keys[i]` (the kind dispatch hoisted out of the
    /// loop, which is the first pass of a scan over all clusters).
    pub(crate) fn join_loss_keys(&self, q: usize, span: &Span, keys: &[u64], out: &mut Vec<f64>) {
        out.clear();
        let w = self.weights[q];
        match (&self.attrs[q], span) {
            (Attr::Range { values, inv_range }, Span::Range { lo, hi }) => {
                let scale = w * inv_range;
                out.extend(keys.iter().map(|&key| {
                    let (l2, h2) = ((key >> 32) as u32, key as u32);
                    (values[(*hi).max(h2) as usize] - values[(*lo).min(l2) as usize]) * scale
                }));
            }
            (Attr::Set { inv_denom, .. }, Span::Set(bits)) => {
                let scale = w * inv_denom;
                out.extend(
                    keys.iter().map(|&key| {
                        ((bits[0] | key).count_ones().saturating_sub(1)) as f64 * scale
                    }),
                );
            }
            (Attr::Tree { lca, loss }, Span::Node(n)) => {
                out.extend(
                    keys.iter()
                        .map(|&key| w * loss[lca.of(*n, key as u32) as usize]),
                );
            }
            _ => unreachable!("span of another attribute kind"),
        }
    }

    /// Widens `span` to cover `code`.
    pub(crate) fn add_code(&self, q: usize, span: &mut Span, code: u32) {
        match (&self.attrs[q], span) {
            (Attr::Range { .. }, Span::Range { lo, hi }) => {
                *lo = (*lo).min(code);
                *hi = (*hi).max(code);
            }
            (Attr::Set { .. }, Span::Set(bits)) => bits[code as usize / 64] |= 1 << (code % 64),
            (Attr::Tree { lca, .. }, Span::Node(n)) => *n = lca.of(*n, code),
            _ => unreachable!("span of another attribute kind"),
        }
    }

    /// Widens `span` to cover `other`.
    pub(crate) fn join_into(&self, q: usize, span: &mut Span, other: &Span) {
        match (&self.attrs[q], span, other) {
            (Attr::Range { .. }, Span::Range { lo, hi }, Span::Range { lo: l2, hi: h2 }) => {
                *lo = (*lo).min(*l2);
                *hi = (*hi).max(*h2);
            }
            (Attr::Set { .. }, Span::Set(bits), Span::Set(other)) => {
                for (a, b) in bits.iter_mut().zip(other.iter()) {
                    *a |= b;
                }
            }
            (Attr::Tree { lca, .. }, Span::Node(n), Span::Node(m)) => *n = lca.of(*n, *m),
            _ => unreachable!("spans of another attribute kind"),
        }
    }

    /// `costs[c]` = weighted loss of the join of `span` with code `c`, for
    /// every code of QI `q` (`domain` codes).
    pub(crate) fn code_costs(&self, q: usize, span: &Span, domain: usize, costs: &mut Vec<f64>) {
        costs.clear();
        costs.extend((0..domain as u32).map(|c| self.join_code_loss(q, span, c)));
    }

    /// The published cell of a span.
    pub(crate) fn cell(&self, span: &Span) -> Cell {
        match span {
            Span::Range { lo, hi } => Cell::Range { lo: *lo, hi: *hi },
            Span::Set(bits) => {
                let codes: Vec<u32> = bits
                    .iter()
                    .enumerate()
                    .flat_map(|(w, &word)| {
                        (0..64u32)
                            .filter(move |b| word >> b & 1 == 1)
                            .map(move |b| w as u32 * 64 + b)
                    })
                    .collect();
                Cell::Set(codes.into())
            }
            Span::Node(n) => Cell::Node(NodeId(*n)),
        }
    }
}

fn popcount(bits: &[u64]) -> usize {
    bits.iter().map(|w| w.count_ones() as usize).sum()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::metrics::loss::cell_uncertainty_loss;
    use crate::spec::JobSpec;

    fn table() -> QiTable {
        let spec: JobSpec = serde_json::from_str(
            r#"{"attributes": [
                {"name": "age", "role": "qi", "type": "numeric", "weight": 2},
                {"name": "zip", "role": "qi", "masking": true},
                {"name": "country", "role": "qi"}]}"#,
        )
        .unwrap();
        QiTable::from_string_columns(
            &spec,
            &Default::default(),
            &[
                ("age", vec!["51", "50", "55", "52", "53"]),
                ("zip", vec!["12562", "12552", "12532", "12561", "12533"]),
                ("country", vec!["China", "India", "Peru", "China", "Chad"]),
            ],
        )
        .unwrap()
    }

    #[test]
    fn span_losses_match_the_published_cells() {
        let t = table();
        for through in [false, true] {
            let u = UncertaintyLoss::new(&t, through);
            for q in 0..u.n_attrs() {
                let col = &t.columns()[q];
                let mut span = u.leaf_span(q, col.codes().get(0));
                assert_eq!(u.span_loss(q, &span), 0.0);
                for r in 1..t.n_rows() {
                    let code = col.codes().get(r);
                    let predicted = u.join_code_loss(q, &span, code);
                    let mut grown = span.clone();
                    u.add_code(q, &mut grown, code);
                    let other = u.leaf_span(q, code);
                    assert!((u.join_loss(q, &span, &other) - predicted).abs() < 1e-12);
                    let cell_loss = cell_uncertainty_loss(col, &u.cell(&grown));
                    assert!(
                        (u.span_loss(q, &grown) - predicted).abs() < 1e-12
                            && (cell_loss - predicted).abs() < 1e-12,
                        "{} through={through}: {predicted} vs {cell_loss}",
                        col.name()
                    );
                    span = grown;
                }
                // The whole column: the age range [50-55] costs its weight.
                if q == 0 {
                    assert!((u.span_loss(q, &span) - 2.0).abs() < 1e-12);
                }
            }
        }
    }

    #[test]
    fn hierarchy_spans_climb_to_common_ancestors() {
        let t = table();
        let u = UncertaintyLoss::new(&t, true);
        let zip = &t.columns()[1];
        let h = zip.hierarchy().unwrap();
        let mut span = u.leaf_span(1, zip.codes().get(2)); // 12532
        u.add_code(1, &mut span, zip.codes().get(4)); // 12533
        assert_eq!(zip.cell_label(&u.cell(&span)), "1253*");
        // 1253* covers 2 of the 5 zip codes: (2-1)/(5-1).
        assert!((u.span_loss(1, &span) - 0.25).abs() < 1e-12);
        u.add_code(1, &mut span, zip.codes().get(1)); // 12552
        assert_eq!(
            h.label(NodeId(match span {
                Span::Node(n) => n,
                _ => unreachable!(),
            })),
            "125**"
        );
        let flexible = UncertaintyLoss::new(&t, false);
        let mut set = flexible.leaf_span(1, zip.codes().get(2));
        flexible.add_code(1, &mut set, zip.codes().get(4));
        assert_eq!(zip.cell_label(&flexible.cell(&set)), "{12532,12533}");
    }
}
