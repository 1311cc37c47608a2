//! Generalisation distances between tuples in attribute hierarchies, shared
//! by the clustering algorithms (KACA, and any other that merges classes by
//! the distortion a merge causes).
//!
//! The model is KACA's (the KACA paper, Def. 5-10) with Han et al. 2014's per-attribute
//! weights (Def. 3-6):
//! - every QI cell costs `x_A * share_A(cell)`, where `x_A` is the
//!   attribute's `weight` (default 1) and `share_A` is how far the cell lies
//!   from the leaves, in `[0, 1]`:
//!   - for a hierarchy node at code level `l` (0 = leaf), the WHD from the
//!     leaves to that level ([`LevelWeights::Uniform`] or
//!     [`LevelWeights::Height`]), or Han et al. 2014's `l / L_A` with `L_A` the
//!     number of levels including the leaves ([`LevelWeights::Levels`]);
//!   - for a numeric QI without a hierarchy, generalised to `[min-max]`, the
//!     range distance `(max - min) / (max_A - min_A)`;
//!   - a categorical QI without a hierarchy counts as a one-level hierarchy
//!     (value or `*`), the shape the KACA paper gives sex and salary;
//! - the closest common generalisation of two cells is their lowest common
//!   ancestor (or the union of two ranges) (the KACA paper Def. 8, Han et al. 2014 Def. 3);
//! - `Distortion(t, t')` is the sum of the cell costs climbed from `t` to `t'`
//!   (Def. 6); the tuple distance is `Distortion(t1,t12) + Distortion(t2,t12)`
//!   (Def. 9) and the class distance `n1*Distortion(t1,t12) +
//!   n2*Distortion(t2,t12)` (Def. 10).
//!
//! Cells are [`CellCode`]s: a hierarchy node (`lo == hi`) or a code range.
//! For scans of many candidates against one tuple, [`Probe`] precomputes,
//! per attribute, both halves of the merge cost for every node of the
//! hierarchy (one pass down the tree), so a candidate costs one table lookup
//! per attribute.

use std::sync::Arc;

use serde::{Deserialize, Serialize};

use crate::encode::QiTable;
use crate::error::Result;
use crate::hierarchy::{Hierarchy, NodeId};
use crate::metrics::distortion::{whd, Weights};
use crate::spec::Kind;

/// How the generalisation steps of a hierarchy are weighted.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize, Default)]
#[serde(rename_all = "kebab-case")]
pub enum LevelWeights {
    /// WHD with `w(j, j-1) = 1` (the KACA paper Def. 5): every step counts the same,
    /// the root costs 1.
    #[default]
    Uniform,
    /// WHD with `w(j, j-1) = 1/(j-1)^beta` (paper levels, the KACA paper Def. 5):
    /// steps near the root cost more; the root costs 1.
    Height {
        /// The exponent, > 0 (the paper's default 1).
        beta: f64,
    },
    /// Han et al. 2014's normalisation (Def. 5): `steps / L_A` with `L_A` the number
    /// of levels including the leaves, so the root costs `height/(height+1)`.
    Levels,
    /// Granularity, the loss ARX reports (`docs/SPEC.md` section 3): a node
    /// covering `m` of the attribute's `D` distinct input values costs
    /// `(m-1)/(D-1)`, so wide nodes cost more than narrow ones of the same
    /// level; a range costs the same over the distinct values it covers.
    Granularity,
}

impl LevelWeights {
    /// The share of an attribute's distortion of a cell at code level `level`
    /// of a hierarchy of `height` code levels (0 = leaf).
    pub fn share(self, height: u8, level: u8) -> f64 {
        // Paper levels: 1 = root .. h = leaves, so code level l is h - l.
        let h = height as usize + 1;
        let p = h - level as usize;
        match self {
            LevelWeights::Uniform => whd(Weights::Uniform, h, h, p),
            LevelWeights::Height { beta } => whd(Weights::Height { beta }, h, h, p),
            LevelWeights::Levels => level as f64 / h as f64,
            // Not a function of the level: as uniform for a hierarchy whose
            // nodes of a level all cover the same number of values.
            LevelWeights::Granularity => level as f64 / height.max(1) as f64,
        }
    }
}

/// One generalised QI cell, in the column's codes: a hierarchy node
/// (`lo == hi` = the node id; leaves are the unchanged values) or, for a
/// numeric QI without a hierarchy, the code range `lo..=hi`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct CellCode {
    /// The node, or the smallest code of the range.
    pub lo: u32,
    /// The node, or the largest code of the range.
    pub hi: u32,
}

impl CellCode {
    /// A hierarchy node, or the unchanged value with code `n` (a leaf, or the
    /// one-value range `n..=n`).
    pub fn node(n: u32) -> Self {
        CellCode { lo: n, hi: n }
    }
}

/// Above this many nodes a hierarchy's [`Probe`] computes lowest common
/// ancestors per candidate instead of tabulating them per probe.
const TABULATE_NODES: usize = 4096;

#[derive(Debug, Clone)]
enum Attribute {
    /// Cells are nodes of a hierarchy; `cost[n]` is `x_A * share(level(n))`.
    Tree {
        hierarchy: Arc<Hierarchy>,
        cost: Vec<f64>,
    },
    /// Cells are code ranges of a numeric QI; `scaled[c] = x_A * value(c) /
    /// (max_A - min_A)`, so a range costs `scaled[hi] - scaled[lo]`.
    Range { scaled: Vec<f64> },
}

/// The distance model of one table: a cost per cell and per attribute.
#[derive(Debug, Clone)]
pub struct DistanceModel {
    attributes: Vec<Attribute>,
}

impl DistanceModel {
    /// The model of `table` under `weights`: QIs with a hierarchy (files,
    /// intervals, masking) use it, numeric QIs without one use the range
    /// distance, categorical QIs without one a one-level hierarchy.
    ///
    /// # Errors
    /// [`crate::error::Error::Hierarchy`] if the one-level hierarchy of a flexible
    /// categorical QI cannot be built (it always can for encoded columns).
    pub fn new(table: &QiTable, weights: LevelWeights) -> Result<Self> {
        let attributes = table
            .columns()
            .iter()
            .map(|col| {
                let hierarchy = match (col.hierarchy(), col.kind()) {
                    (Some(h), _) => h.clone(),
                    (None, Kind::Numeric) => {
                        let (min, max) = col.min_max();
                        let span = max - min;
                        let d = col.distinct().saturating_sub(1).max(1) as f64;
                        let scaled = (0..col.domain_size() as u32)
                            .map(|c| {
                                let v = col.value(c).unwrap_or(0.0);
                                if weights == LevelWeights::Granularity {
                                    // Distinct values below c, over D - 1.
                                    col.weight() * col.observed_in(0, c) as f64 / d
                                } else if span > 0.0 {
                                    col.weight() * (v - min) / span
                                } else {
                                    0.0
                                }
                            })
                            .collect();
                        return Ok(Attribute::Range { scaled });
                    }
                    (None, Kind::Categorical) => {
                        // Leaf i is code i: paths are given in code order.
                        let paths = (0..col.domain_size())
                            .map(|c| vec![c.to_string(), "*".to_string()])
                            .collect();
                        Arc::new(Hierarchy::from_paths(
                            &format!("values of `{}`", col.name()),
                            paths,
                            None,
                            false,
                        )?)
                    }
                };
                let height = hierarchy.height();
                let d = col.distinct().saturating_sub(1).max(1) as f64;
                let cost = (0..hierarchy.node_count() as u32)
                    .map(|n| {
                        let share = match weights {
                            LevelWeights::Granularity => {
                                let leaves = hierarchy.leaves(NodeId(n));
                                col.observed_in(leaves.start, leaves.end).saturating_sub(1) as f64
                                    / d
                            }
                            _ => weights.share(height, hierarchy.level(NodeId(n)).0),
                        };
                        col.weight() * share
                    })
                    .collect();
                Ok(Attribute::Tree { hierarchy, cost })
            })
            .collect::<Result<Vec<_>>>()?;
        Ok(DistanceModel { attributes })
    }

    /// Number of attributes (QIs).
    pub fn n_attributes(&self) -> usize {
        self.attributes.len()
    }

    /// The hierarchy the model uses for QI `q` (`None` for range QIs).
    pub fn hierarchy(&self, q: usize) -> Option<&Arc<Hierarchy>> {
        match &self.attributes[q] {
            Attribute::Tree { hierarchy, .. } => Some(hierarchy),
            Attribute::Range { .. } => None,
        }
    }

    /// The cost of a cell: `x_A * share`.
    pub fn cost(&self, q: usize, cell: CellCode) -> f64 {
        match &self.attributes[q] {
            Attribute::Tree { cost, .. } => cost[cell.lo as usize],
            Attribute::Range { scaled } => scaled[cell.hi as usize] - scaled[cell.lo as usize],
        }
    }

    /// The closest common generalisation of two cells: their lowest common
    /// ancestor, or the union range.
    pub fn join(&self, q: usize, a: CellCode, b: CellCode) -> CellCode {
        match &self.attributes[q] {
            Attribute::Tree { hierarchy, .. } => {
                CellCode::node(hierarchy.lca(NodeId(a.lo), NodeId(b.lo)).0)
            }
            Attribute::Range { .. } => CellCode {
                lo: a.lo.min(b.lo),
                hi: a.hi.max(b.hi),
            },
        }
    }

    /// Whether cell `outer` covers cell `inner`.
    pub fn covers(&self, q: usize, outer: CellCode, inner: CellCode) -> bool {
        match &self.attributes[q] {
            Attribute::Tree { hierarchy, .. } => {
                hierarchy.covers(NodeId(outer.lo), NodeId(inner.lo))
            }
            Attribute::Range { .. } => outer.lo <= inner.lo && inner.hi <= outer.hi,
        }
    }

    /// The distortion of a tuple published as `cells` (the KACA paper Def. 6, with
    /// attribute weights as Han et al. 2014 Def. 5).
    pub fn tuple_cost(&self, cells: &[CellCode]) -> f64 {
        cells
            .iter()
            .enumerate()
            .map(|(q, &c)| self.cost(q, c))
            .sum()
    }

    /// Both halves of the distance of two cells: `(cost(t12) - cost(a),
    /// cost(t12) - cost(b))` with `t12` their closest common generalisation.
    pub fn merge_parts(&self, q: usize, a: CellCode, b: CellCode) -> (f64, f64) {
        let j = self.cost(q, self.join(q, a, b));
        (j - self.cost(q, a), j - self.cost(q, b))
    }

    /// The class distance (the KACA paper Def. 10) of classes of `n1` tuples `t1`
    /// and `n2` tuples `t2`: `n1*Distortion(t1,t12) + n2*Distortion(t2,t12)`.
    pub fn class_distance(&self, t1: &[CellCode], n1: usize, t2: &[CellCode], n2: usize) -> f64 {
        let (s1, s2) = t1
            .iter()
            .zip(t2)
            .enumerate()
            .fold((0.0, 0.0), |(s1, s2), (q, (&a, &b))| {
                let (d1, d2) = self.merge_parts(q, a, b);
                (s1 + d1, s2 + d2)
            });
        n1 as f64 * s1 + n2 as f64 * s2
    }

    /// The tuple distance (the KACA paper Def. 9, Han et al. 2014 Def. 6):
    /// `Distortion(t1,t12) + Distortion(t2,t12)`.
    pub fn tuple_distance(&self, t1: &[CellCode], t2: &[CellCode]) -> f64 {
        self.class_distance(t1, 1, t2, 1)
    }

    /// An empty probe for scans against one tuple (see [`Probe::aim`]).
    pub fn probe(&self) -> Probe<'_> {
        Probe {
            model: self,
            base: Vec::new(),
            tables: vec![None; self.attributes.len()],
            lca: Vec::new(),
        }
    }
}

/// Per-attribute merge costs of one fixed tuple `t1` against any cell,
/// precomputed for fast scans over many candidates.
#[derive(Debug, Clone)]
pub struct Probe<'m> {
    model: &'m DistanceModel,
    base: Vec<CellCode>,
    /// Per tree attribute with few enough nodes: `(d1, d2)` of every node.
    tables: Vec<Option<Vec<(f64, f64)>>>,
    /// Scratch: the lowest common ancestor of the aimed node and every node.
    lca: Vec<u32>,
}

impl Probe<'_> {
    /// Aims the probe at tuple `t1` (one cell per attribute). Costs one pass
    /// over the nodes of each hierarchy: `lca(t1, b)` is `b` when `b` covers
    /// `t1`, else `lca(t1, parent(b))`, and parents have higher ids than
    /// their children except at the leaves, so a descending pass over ids
    /// sees every parent before its children.
    pub fn aim(&mut self, t1: &[CellCode]) {
        self.base.clear();
        self.base.extend_from_slice(t1);
        for (q, attr) in self.model.attributes.iter().enumerate() {
            let Attribute::Tree { hierarchy: h, cost } = attr else {
                continue;
            };
            if h.node_count() > TABULATE_NODES {
                self.tables[q] = None;
                continue;
            }
            let a = t1[q].lo;
            let ca = cost[a as usize];
            let n = h.node_count();
            let table = self.tables[q].get_or_insert_with(Vec::new);
            table.clear();
            table.resize(n, (0.0, 0.0));
            let lca = &mut self.lca;
            lca.clear();
            lca.resize(n, u32::MAX);
            // a and its ancestors are their own lca with a.
            let mut x = a;
            loop {
                lca[x as usize] = x;
                let p = h.parent(NodeId(x)).0;
                if p == x {
                    break;
                }
                x = p;
            }
            // Internal nodes are numbered by level after the leaves, so the
            // descending order visits the root first and every parent before
            // its children.
            for b in (0..n).rev() {
                if lca[b] == u32::MAX {
                    lca[b] = lca[h.parent(NodeId(b as u32)).0 as usize];
                }
                let cl = cost[lca[b] as usize];
                table[b] = (cl - ca, cl - cost[b]);
            }
        }
    }

    /// The tuple the probe is aimed at.
    pub fn base(&self) -> &[CellCode] {
        &self.base
    }

    /// `(cost(t12) - cost(t1), cost(t12) - cost(b))` for attribute `q`, with
    /// `t12` the closest common generalisation of the aimed cell and `b`.
    #[inline]
    pub fn parts(&self, q: usize, b: CellCode) -> (f64, f64) {
        match &self.tables[q] {
            Some(t) => t[b.lo as usize],
            None => self.model.merge_parts(q, self.base[q], b),
        }
    }

    /// `(S1, S2)`: the sums over all attributes of [`Probe::parts`], so that
    /// the class distance to a class of `n2` tuples `t2` is
    /// `n1 * S1 + n2 * S2`.
    #[inline]
    pub fn sums(&self, t2: &[CellCode]) -> (f64, f64) {
        let mut s1 = 0.0;
        let mut s2 = 0.0;
        for (q, &b) in t2.iter().enumerate() {
            let (d1, d2) = self.parts(q, b);
            s1 += d1;
            s2 += d2;
        }
        (s1, s2)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::spec::JobSpec;
    use rustc_hash::FxHashMap;

    fn table(json: &str, hierarchies: &[(&str, &str)], cols: &[(&str, Vec<&str>)]) -> QiTable {
        let spec: JobSpec = serde_json::from_str(json).unwrap();
        let hs: FxHashMap<String, Arc<Hierarchy>> = hierarchies
            .iter()
            .map(|(n, text)| {
                (
                    n.to_string(),
                    Arc::new(Hierarchy::from_csv(n, text, ';').unwrap()),
                )
            })
            .collect();
        QiTable::from_string_columns(&spec, &hs, cols).unwrap()
    }

    fn tuple(t: &QiTable, row: u32) -> Vec<CellCode> {
        t.row(row).map(CellCode::node).collect()
    }

    #[test]
    fn whd_shares_match_seed_000_examples() {
        // Birth date D/M/Y, M/Y, Y, 10Y, C/Y/M/O, * : h = 6 paper levels.
        assert!((LevelWeights::Uniform.share(5, 2) - 0.4).abs() < 1e-12);
        // Height weights, beta = 1: (1/5) / (1/5 + 1/4 + 1/3 + 1/2 + 1) =
        // 0.0876, which the paper prints truncated as 0.087.
        let h = LevelWeights::Height { beta: 1.0 }.share(5, 1);
        assert!((h - 0.2 / (0.2 + 0.25 + 1.0 / 3.0 + 0.5 + 1.0)).abs() < 1e-12);
        assert_eq!((h * 1000.0).floor() / 1000.0, 0.087);
        // Gender {M/F, *}: WHD(2,1) = 1 under both schemes.
        assert_eq!(LevelWeights::Uniform.share(1, 1), 1.0);
        assert_eq!(LevelWeights::Height { beta: 2.0 }.share(1, 1), 1.0);
        // Han et al. 2014: steps over levels including the leaves.
        assert_eq!(LevelWeights::Levels.share(1, 1), 0.5);
        assert_eq!(LevelWeights::Levels.share(4, 1), 0.2);
    }

    #[test]
    fn seed_003_weighted_distance_is_1_4() {
        let t = table(
            r#"{"attributes": [{"name": "gender", "role": "qi", "hierarchy": "g.csv"},
                               {"name": "pcode", "role": "qi", "masking": true}]}"#,
            &[("g.csv", "male;*\nfemale;*\n")],
            &[
                ("gender", vec!["female", "male"]),
                ("pcode", vec!["4661", "4663"]),
            ],
        );
        let m = DistanceModel::new(&t, LevelWeights::Levels).unwrap();
        let (t1, t2) = (tuple(&t, 0), tuple(&t, 1));
        let t12: Vec<CellCode> = (0..2).map(|q| m.join(q, t1[q], t2[q])).collect();
        let h = m.hierarchy(1).unwrap();
        assert_eq!(h.label(NodeId(t12[1].lo)), "466*");
        // distortion(t1, t0) = 1/2 + 1/5 = 0.7; dist_gen = 1.4.
        assert!((m.tuple_cost(&t12) - m.tuple_cost(&t1) - 0.7).abs() < 1e-12);
        assert!((m.tuple_distance(&t1, &t2) - 1.4).abs() < 1e-12);
    }

    #[test]
    fn kaca_table_1_distance_is_2_5() {
        let t = table(
            r#"{"attributes": [{"name": "gender", "role": "qi", "hierarchy": "g.csv"},
                               {"name": "age", "role": "qi", "hierarchy": "a.csv"},
                               {"name": "pcode", "role": "qi", "masking": true}]}"#,
            &[
                ("g.csv", "male;*\nfemale;*\n"),
                ("a.csv", "young;*\nmiddle;*\nold;*\n"),
            ],
            &[
                ("gender", vec!["male", "female"]),
                ("age", vec!["young", "young"]),
                ("pcode", vec!["4351", "4352"]),
            ],
        );
        let m = DistanceModel::new(&t, LevelWeights::Uniform).unwrap();
        let (t1, t2) = (tuple(&t, 0), tuple(&t, 1));
        assert!((m.tuple_distance(&t1, &t2) - 2.5).abs() < 1e-12);
        // Def. 10 with class sizes 2 and 3.
        assert!((m.class_distance(&t1, 2, &t2, 3) - 6.25).abs() < 1e-12);
    }

    #[test]
    fn attribute_weights_and_ranges() {
        let t = table(
            r#"{"attributes": [{"name": "age", "role": "qi", "type": "numeric", "weight": 2},
                               {"name": "city", "role": "qi", "weight": 0.5}]}"#,
            &[],
            &[
                ("age", vec!["20", "30", "60", "25"]),
                ("city", vec!["a", "b", "a", "c"]),
            ],
        );
        let m = DistanceModel::new(&t, LevelWeights::Uniform).unwrap();
        assert!(m.hierarchy(0).is_none());
        let r = |row: u32| tuple(&t, row);
        // Ages 20 and 30 over the range 20..60: [20-30] costs 2 * 10/40.
        let j = m.join(0, r(0)[0], r(1)[0]);
        assert_eq!((j.lo, j.hi), (0, 2));
        assert!((m.cost(0, j) - 0.5).abs() < 1e-12);
        // Flexible categorical: one level, weight 0.5.
        assert!((m.tuple_distance(&r(0), &r(1)) - (0.5 + 0.5 + 0.5 + 0.5)).abs() < 1e-12);
        assert_eq!(m.tuple_distance(&r(0), &r(0)), 0.0);
    }

    #[test]
    fn probe_agrees_with_direct_computation() {
        let t = table(
            r#"{"attributes": [{"name": "edu", "role": "qi", "hierarchy": "e.csv"},
                               {"name": "age", "role": "qi", "intervals": [5, 10]},
                               {"name": "n", "role": "qi", "type": "numeric"}]}"#,
            &[(
                "e.csv",
                "9th;High;Sec;*\n10th;High;Sec;*\n11th;Mid;Sec;*\nBSc;Uni;Higher;*\nMSc;Uni;Higher;*\n",
            )],
            &[
                ("edu", vec!["9th", "10th", "11th", "BSc", "MSc", "9th"]),
                ("age", vec!["21", "24", "33", "38", "52", "21"]),
                ("n", vec!["1", "5", "2", "9", "4", "7"]),
            ],
        );
        for weights in [
            LevelWeights::Uniform,
            LevelWeights::Height { beta: 1.5 },
            LevelWeights::Levels,
        ] {
            let m = DistanceModel::new(&t, weights).unwrap();
            let mut p = m.probe();
            // Generalised tuples too: joins of pairs of rows.
            let mut tuples: Vec<Vec<CellCode>> = (0..6).map(|r| tuple(&t, r)).collect();
            for a in 0..6 {
                for b in a + 1..6 {
                    let (x, y) = (tuple(&t, a), tuple(&t, b));
                    tuples.push((0..3).map(|q| m.join(q, x[q], y[q])).collect());
                }
            }
            for t1 in &tuples {
                p.aim(t1);
                for t2 in &tuples {
                    let (s1, s2) = p.sums(t2);
                    let direct = m.class_distance(t1, 3, t2, 2);
                    assert!((3.0 * s1 + 2.0 * s2 - direct).abs() < 1e-12);
                    assert!(s1 >= -1e-15 && s2 >= -1e-15);
                }
            }
        }
    }
}
