//! Similarity of categorical values learned from the data alone, and the
//! tuple distance it induces (the SBC thesis, the SBC thesis, sections 3.4, 3.5,
//! 3.7 and 3.8; `docs/SPEC.md` section 4 and worked example 5).
//!
//! No hierarchy is needed. The categorical QIs are put in order of
//! increasing cardinality. For a reference tuple `t`:
//!
//! - the lowest-cardinality attribute orders its values by how close their
//!   number of observations is to that of `t`'s own value (the fallback of
//!   section 3.8; for a binary attribute it gives the thesis's
//!   `D(Male, Female) = 1`);
//! - every higher-cardinality attribute `N` is read in its contingency table
//!   against the attribute `M` just below it in the order (Table 3-4: each
//!   table puts the next attribute against the previous one). In the row of
//!   `t`'s `M` value, the observation probability `P(n)_m = |n|_m / |m|`
//!   (Equation 3-1) of every value `n` is compared with that of `t`'s own `N`
//!   value: the closer, the more similar. When that row holds fewer than k
//!   tuples (Table 3-3), the rows of the `M` values most similar to `t`'s are
//!   merged into it, nearest first, until it holds at least k: a group of k
//!   tuples will mix them anyway;
//! - the values of an attribute with `c` values present are ranked in that
//!   order (`t`'s own value 0, tied values sharing the smaller rank) and
//!   `D(v0, v) = rank(v) / (c - 1)`.
//!
//! Numeric QIs use `|x1 - x2| / R` with `R` the attribute's range
//! (Equation 3-2). The total distance (Equation 3-3) is the weighted mean of
//! the per-attribute distances (weights default to 1, which gives the
//! thesis's normalised sum), so it lies in `[0, 1]`.
//!
//! The counts behind the contingency tables are kept in [`Contingency`] and
//! updated as tuples leave the working set (Figure 3-6, step 8), not rebuilt.
//!
//! Tuple distances are fixed-point integers ([`SCALE`] is a distance of 1):
//! integer sums are exact whatever order an index adds the attributes in, so
//! ties, and therefore the output, never depend on the search structure.

use crate::encode::{EquivalenceClasses, QiTable};
use crate::error::{Error, Result};
use crate::spec::Kind;

/// A tuple distance of 1 in fixed point (2^40): per-attribute quantisation
/// errors stay below 1e-12.
pub(crate) const SCALE: u64 = 1 << 40;

/// Converts a fixed-point distance to a share in `[0, 1]`.
pub(crate) fn to_share(d: u64) -> f64 {
    d as f64 / SCALE as f64
}

/// Rank marking a value that no tuple of the working set holds.
const ABSENT: u32 = u32::MAX;

/// The observation counts behind the contingency tables of the categorical
/// QIs, over the tuples still in the working set.
#[derive(Debug, Clone)]
pub(crate) struct Contingency {
    /// Categorical QIs (indices into the table's columns) in order of
    /// increasing cardinality, ties in job order.
    chain: Vec<usize>,
    /// Domain size (number of codes) of each chain attribute.
    domain: Vec<usize>,
    /// `marginal[j][v]`: tuples holding value `v` of chain attribute `j`.
    marginal: Vec<Vec<u32>>,
    /// `pair[j]` (j >= 1): the contingency table of chain attribute `j-1`
    /// (rows) against `j` (columns), row-major; `pair[0]` is empty.
    pair: Vec<Vec<u32>>,
}

impl Contingency {
    /// Empty tables for the categorical QIs of `table`.
    pub(crate) fn new(table: &QiTable) -> Self {
        let mut chain: Vec<usize> = table
            .columns()
            .iter()
            .enumerate()
            .filter(|(_, c)| c.kind() == Kind::Categorical)
            .map(|(q, _)| q)
            .collect();
        chain.sort_by_key(|&q| (table.columns()[q].distinct(), q));
        let domain: Vec<usize> = chain
            .iter()
            .map(|&q| table.columns()[q].domain_size())
            .collect();
        let marginal = domain.iter().map(|&d| vec![0; d]).collect();
        let pair = (0..chain.len())
            .map(|j| {
                if j == 0 {
                    Vec::new()
                } else {
                    vec![0; domain[j - 1] * domain[j]]
                }
            })
            .collect();
        Contingency {
            chain,
            domain,
            marginal,
            pair,
        }
    }

    /// The tables of every active row of `table`, counted by class.
    pub(crate) fn of_classes(table: &QiTable, classes: &EquivalenceClasses) -> Self {
        let mut c = Self::new(table);
        for class in 0..classes.len() {
            c.add(classes.tuple(class), classes.size(class) as u32);
        }
        c
    }

    /// The categorical QIs in order of increasing cardinality.
    pub(crate) fn chain(&self) -> &[usize] {
        &self.chain
    }

    /// Counts `times` more tuples with the QI codes `tuple` (job order).
    pub(crate) fn add(&mut self, tuple: &[u32], times: u32) {
        self.update(tuple, |n| *n += times);
    }

    /// Removes `times` tuples with the QI codes `tuple` (job order), e.g.
    /// when a group leaves the working set.
    ///
    /// # Panics
    /// In debug builds, when fewer such tuples were counted.
    pub(crate) fn remove(&mut self, tuple: &[u32], times: u32) {
        self.update(tuple, |n| {
            debug_assert!(*n >= times, "removing tuples that were never counted");
            *n -= times;
        });
    }

    fn update(&mut self, tuple: &[u32], mut f: impl FnMut(&mut u32)) {
        for j in 0..self.chain.len() {
            let v = tuple[self.chain[j]] as usize;
            f(&mut self.marginal[j][v]);
            if j > 0 {
                let u = tuple[self.chain[j - 1]] as usize;
                f(&mut self.pair[j][u * self.domain[j] + v]);
            }
        }
    }

    /// The similarity order of every chain attribute's values as seen from
    /// the tuple `reference` (QI codes in job order), with `k` the smallest
    /// group size: the row-merging threshold of Table 3-3.
    pub(crate) fn orders(&self, reference: &[u32], k: usize) -> Vec<ValueOrder> {
        let mut orders: Vec<ValueOrder> = Vec::with_capacity(self.chain.len());
        let mut row: Vec<u64> = Vec::new();
        for j in 0..self.chain.len() {
            let d = self.domain[j];
            let own = reference[self.chain[j]] as usize;
            row.clear();
            if j == 0 {
                // Section 3.8: the lowest-cardinality attribute is judged by
                // its values' own numbers of observations.
                row.extend(self.marginal[0].iter().map(|&n| n as u64));
            } else {
                // The row of the reference's value of the attribute below,
                // merged with its most similar rows while it holds < k.
                row.resize(d, 0);
                let below = &orders[j - 1];
                let mut rows_below: Vec<usize> = (0..self.domain[j - 1])
                    .filter(|&u| self.marginal[j - 1][u] > 0 || u == below.own as usize)
                    .collect();
                rows_below.sort_by_key(|&u| (below.rank_of(u as u32), u));
                let mut total = 0u64;
                for u in rows_below {
                    let cells = &self.pair[j][u * d..(u + 1) * d];
                    for (acc, &n) in row.iter_mut().zip(cells) {
                        *acc += n as u64;
                    }
                    total += self.marginal[j - 1][u] as u64;
                    if total >= k as u64 {
                        break;
                    }
                }
            }
            orders.push(ValueOrder::rank(
                self.chain[j],
                own as u32,
                &row,
                &self.marginal[j],
            ));
        }
        orders
    }
}

/// The similarity order of one categorical attribute's values as seen from
/// a reference value, and the distances it defines.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct ValueOrder {
    /// The QI (index into the table's columns).
    qi: usize,
    /// The reference tuple's value.
    own: u32,
    /// `rank[v]`: 0 for the reference value, 1 + the number of present
    /// values strictly closer otherwise; [`ABSENT`] for values no tuple holds.
    rank: Vec<u32>,
    /// `c - 1` for `c` values present (the reference's included).
    denominator: u32,
}

impl ValueOrder {
    /// Ranks the values present (`present[v] > 0`) by how close their
    /// observations `row[v]` are to the reference value's `row[own]`
    /// (comparing counts within one row is comparing its probabilities).
    fn rank(qi: usize, own: u32, row: &[u64], present: &[u32]) -> Self {
        let target = row[own as usize];
        let mut others: Vec<(u64, u32)> = (0..row.len() as u32)
            .filter(|&v| v != own && present[v as usize] > 0)
            .map(|v| (row[v as usize].abs_diff(target), v))
            .collect();
        others.sort_unstable();
        let mut rank = vec![ABSENT; row.len()];
        rank[own as usize] = 0;
        let mut shared = 0u32;
        for (i, &(diff, v)) in others.iter().enumerate() {
            if i == 0 || diff != others[i - 1].0 {
                shared = i as u32 + 1;
            }
            rank[v as usize] = shared;
        }
        ValueOrder {
            qi,
            own,
            rank,
            denominator: others.len() as u32,
        }
    }

    /// The QI this order belongs to.
    pub(crate) fn qi(&self) -> usize {
        self.qi
    }

    /// `D(own, v) = rank(v) / (c - 1)`; 1 for a value no tuple holds.
    pub(crate) fn distance(&self, v: u32) -> f64 {
        match self.rank[v as usize] {
            ABSENT => 1.0,
            0 => 0.0,
            r => r as f64 / self.denominator as f64,
        }
    }

    /// The values present, most similar first (ties by code).
    #[cfg(test)]
    pub(crate) fn values(&self) -> Vec<u32> {
        let mut v: Vec<u32> = (0..self.rank.len() as u32)
            .filter(|&v| self.rank[v as usize] != ABSENT)
            .collect();
        v.sort_by_key(|&v| (self.rank[v as usize], v));
        v
    }

    fn rank_of(&self, v: u32) -> u32 {
        self.rank[v as usize]
    }
}

/// The tuple distance of Equation 3-3: per-attribute distances, weighted by
/// the attributes' weights and normalised to `[0, 1]`.
#[derive(Debug, Clone)]
pub(crate) struct TupleDistance {
    /// Each QI's weight over the sum of weights.
    shares: Vec<f64>,
}

impl TupleDistance {
    /// The distance for `table`'s QIs and their weights.
    ///
    /// # Errors
    /// [`Error::Spec`] when every QI has weight 0.
    pub(crate) fn new(table: &QiTable) -> Result<Self> {
        let total: f64 = table.columns().iter().map(|c| c.weight()).sum();
        if total <= 0.0 || !total.is_finite() {
            return Err(Error::spec(
                "attributes.weight",
                "every quasi-identifier has weight 0, so no tuple is closer than another; give at least one a positive weight",
            ));
        }
        Ok(TupleDistance {
            shares: table.columns().iter().map(|c| c.weight() / total).collect(),
        })
    }

    /// Per-code distance tables from the tuple `reference` (job order): its
    /// similarity orders come from `contingency` with group size `k`.
    pub(crate) fn tables(
        &self,
        table: &QiTable,
        contingency: &Contingency,
        reference: &[u32],
        k: usize,
    ) -> DistanceTables {
        let orders = contingency.orders(reference, k);
        let mut offsets = Vec::with_capacity(table.n_qi() + 1);
        let mut entries = Vec::new();
        for (q, col) in table.columns().iter().enumerate() {
            offsets.push(entries.len());
            let share = self.shares[q];
            let fixed = |d: f64| (d * share * SCALE as f64).round() as u64;
            match col.kind() {
                Kind::Numeric => {
                    let (min, max) = col.min_max();
                    let range = max - min;
                    let own = col.value(reference[q]).unwrap_or(0.0);
                    entries.extend((0..col.domain_size() as u32).map(|c| {
                        let v = col.value(c).unwrap_or(own);
                        if range > 0.0 {
                            fixed(((v - own).abs() / range).min(1.0))
                        } else {
                            0
                        }
                    }));
                }
                Kind::Categorical => {
                    let order = orders
                        .iter()
                        .find(|o| o.qi() == q)
                        .expect("every categorical QI is in the chain");
                    entries.extend((0..col.domain_size() as u32).map(|c| fixed(order.distance(c))));
                }
            }
        }
        offsets.push(entries.len());
        DistanceTables { offsets, entries }
    }
}

/// The fixed-point distance of every code of every QI from one reference
/// tuple: the distance of a tuple is the sum of its codes' entries.
#[derive(Debug, Clone)]
pub(crate) struct DistanceTables {
    offsets: Vec<usize>,
    entries: Vec<u64>,
}

impl DistanceTables {
    /// The share of QI `q`'s distance for code `code`, in fixed point.
    #[inline]
    pub(crate) fn entry(&self, q: usize, code: u32) -> u64 {
        self.entries[self.offsets[q] + code as usize]
    }

    /// The distance of a tuple (QI codes in job order), in fixed point.
    #[inline]
    pub(crate) fn distance(&self, tuple: &[u32]) -> u64 {
        tuple
            .iter()
            .enumerate()
            .map(|(q, &c)| self.entry(q, c))
            .sum()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::spec::JobSpec;

    /// Table 3-1 of the thesis: Male: Japan 4, US 4, Iran 1; Female: Japan 4,
    /// US 1, Iran 6 (20 tuples), with a Male, Japan tuple first.
    fn table_3_1() -> QiTable {
        let mut gender = Vec::new();
        let mut nationality = Vec::new();
        for (g, n, times) in [
            ("Male", "Japan", 4),
            ("Male", "US", 4),
            ("Male", "Iran", 1),
            ("Female", "Japan", 4),
            ("Female", "US", 1),
            ("Female", "Iran", 6),
        ] {
            for _ in 0..times {
                gender.push(g);
                nationality.push(n);
            }
        }
        let spec: JobSpec = serde_json::from_str(
            r#"{"attributes": [{"name": "gender", "role": "qi"}, {"name": "nationality", "role": "qi"}]}"#,
        )
        .unwrap();
        QiTable::from_string_columns(
            &spec,
            &Default::default(),
            &[("gender", gender), ("nationality", nationality)],
        )
        .unwrap()
    }

    fn code(table: &QiTable, q: usize, label: &str) -> u32 {
        let col = &table.columns()[q];
        (0..col.domain_size() as u32)
            .find(|&c| col.label(c) == label)
            .unwrap()
    }

    fn labels(table: &QiTable, q: usize, codes: &[u32]) -> Vec<String> {
        codes
            .iter()
            .map(|&c| table.columns()[q].label(c).to_string())
            .collect()
    }

    #[test]
    fn worked_example_5_k3_uses_the_male_row() {
        let t = table_3_1();
        let c = Contingency::of_classes(&t, &EquivalenceClasses::of(&t));
        assert_eq!(
            c.chain(),
            &[0, 1],
            "gender (2 values) before nationality (3)"
        );
        let male_japan = [code(&t, 0, "Male"), code(&t, 1, "Japan")];
        let orders = c.orders(&male_japan, 3);
        let (g, n) = (&orders[0], &orders[1]);
        assert_eq!(g.distance(code(&t, 0, "Female")), 1.0);
        assert_eq!(g.distance(code(&t, 0, "Male")), 0.0);
        assert_eq!(labels(&t, 1, &n.values()), ["Japan", "US", "Iran"]);
        assert_eq!(n.distance(code(&t, 1, "Japan")), 0.0);
        assert_eq!(n.distance(code(&t, 1, "US")), 0.5);
        assert_eq!(n.distance(code(&t, 1, "Iran")), 1.0);
    }

    #[test]
    fn worked_example_5_k10_merges_the_rows() {
        let t = table_3_1();
        let c = Contingency::of_classes(&t, &EquivalenceClasses::of(&t));
        let male_japan = [code(&t, 0, "Male"), code(&t, 1, "Japan")];
        // Male holds 9 < 10 tuples: merged with Female, Japan 8, US 5, Iran 7.
        let orders = c.orders(&male_japan, 10);
        let n = &orders[1];
        assert_eq!(labels(&t, 1, &n.values()), ["Japan", "Iran", "US"]);
        assert_eq!(n.distance(code(&t, 1, "Iran")), 0.5);
        assert_eq!(n.distance(code(&t, 1, "US")), 1.0);
        // k = 9 is still met by the Male row alone.
        let n9 = &c.orders(&male_japan, 9)[1];
        assert_eq!(labels(&t, 1, &n9.values()), ["Japan", "US", "Iran"]);
    }

    #[test]
    fn lowest_cardinality_attribute_ranks_by_its_own_counts() {
        // Section 3.8: with Nationality lowest, Japan (8) is closer to Iran (7)
        // than to US (5).
        let t = table_3_1();
        let mut c = Contingency::new(&t);
        c.chain = vec![1];
        c.domain = vec![3];
        c.marginal = vec![vec![0; 3]];
        c.pair = vec![Vec::new()];
        let classes = EquivalenceClasses::of(&t);
        for class in 0..classes.len() {
            c.add(classes.tuple(class), classes.size(class) as u32);
        }
        let japan = [code(&t, 0, "Male"), code(&t, 1, "Japan")];
        let n = &c.orders(&japan, 1)[0];
        assert_eq!(labels(&t, 1, &n.values()), ["Japan", "Iran", "US"]);
    }

    #[test]
    fn removing_tuples_updates_the_tables_incrementally() {
        let t = table_3_1();
        let classes = EquivalenceClasses::of(&t);
        let mut c = Contingency::of_classes(&t, &classes);
        let male_japan = [code(&t, 0, "Male"), code(&t, 1, "Japan")];
        let male_us = [code(&t, 0, "Male"), code(&t, 1, "US")];
        // Remove three Male/US tuples: the Male row becomes Japan 4, US 1,
        // Iran 1 (6 >= k = 3): US and Iran tie at rank 1 of 2.
        c.remove(&male_us, 3);
        let n = &c.orders(&male_japan, 3)[1];
        assert_eq!(n.distance(code(&t, 1, "US")), 0.5);
        assert_eq!(n.distance(code(&t, 1, "Iran")), 0.5);
        // The result equals counting the remaining tuples from scratch.
        let mut fresh = Contingency::new(&t);
        for class in 0..classes.len() {
            let mut size = classes.size(class) as u32;
            if classes.tuple(class) == male_us {
                size -= 3;
            }
            fresh.add(classes.tuple(class), size);
        }
        assert_eq!(fresh.marginal, c.marginal);
        assert_eq!(fresh.pair, c.pair);
    }

    #[test]
    fn tuple_distance_is_the_normalised_sum() {
        let spec: JobSpec = serde_json::from_str(
            r#"{"attributes": [{"name": "age", "role": "qi", "type": "numeric"}, {"name": "sex", "role": "qi"}]}"#,
        )
        .unwrap();
        let t = QiTable::from_string_columns(
            &spec,
            &Default::default(),
            &[
                ("age", vec!["10", "40", "100", "25"]),
                ("sex", vec!["M", "F", "M", "M"]),
            ],
        )
        .unwrap();
        let c = Contingency::of_classes(&t, &EquivalenceClasses::of(&t));
        let d = TupleDistance::new(&t).unwrap();
        let row = |r: u32| t.row(r).collect::<Vec<_>>();
        let tables = d.tables(&t, &c, &row(0), 2);
        // (|10-40|/90 + 1) / 2 and (|10-25|/90 + 0) / 2.
        let close = |a: f64, b: f64| (a - b).abs() < 1e-9;
        assert!(close(
            to_share(tables.distance(&row(1))),
            (30.0 / 90.0 + 1.0) / 2.0
        ));
        assert!(close(
            to_share(tables.distance(&row(3))),
            (15.0 / 90.0) / 2.0
        ));
        assert!(close(to_share(tables.distance(&row(2))), 0.5));
        assert_eq!(tables.distance(&row(0)), 0);
    }
}
