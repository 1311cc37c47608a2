//! SBC: similarity-based clustering for k-anonymity without hierarchies
//! (the SBC thesis, the SBC thesis, chapter 3, Figure 3-6; `docs/SPEC.md` section 4).
//!
//! The bottom-up greedy algorithm of Figure 3-6:
//!
//! 1. sort the table (by the QI codes in job order: numbers by value,
//!    categories by label or hierarchy order);
//! 2. take the first remaining tuple; measure the distance of every
//!    remaining tuple to it with the contingency-table similarity of
//!    `similarity`;
//! 3. group it with its k-1 nearest tuples (ties by sorted position), and
//!    keep adding the next nearest while the privacy models do not accept
//!    the group (so l-diversity works unchanged);
//! 4. publish the group as its `[min-max]` ranges and value sets, remove it
//!    and update the contingency tables (counts are decremented, not
//!    rebuilt); repeat while at least k tuples remain;
//! 5. the leftover tuples (fewer than k, or too few to satisfy the models)
//!    join their nearest group, or are suppressed when the job says
//!    `leftovers = "suppress"` and the suppression limit allows it
//!    (otherwise they join).
//!
//! SBC never reads a hierarchy: every QI is published flexibly, numeric
//! ones as ranges and categorical ones as value sets, even when the job
//! gives hierarchies (which only full-domain algorithms need).
//!
//! Identical tuples form one class, so the search works on classes with
//! multiplicities. The nearest classes come from a prefix-tree index
//! (`neighbours::Trie`) searched best-first, so a step costs the
//! neighbourhood it explores rather than a scan of the table;
//! `search = "scan"` computes every distance instead, on all cores. The
//! greedy loop itself is sequential by nature (each group changes the
//! tables the next distances come from); building the index, the leftover
//! distances and the published cells use every core. There is no random
//! choice: the output depends only on the input and the job.

mod neighbours;
mod similarity;

use rayon::prelude::*;
use serde::{Deserialize, Serialize};

use crate::algorithms::{details, Algorithm, Context, Outcome};
use crate::codes::with_codes;
use crate::encode::{EquivalenceClasses, QiTable};
use crate::error::{Error, Result};
use crate::generalise::GeneralisedTuple;
use crate::partition::{Partition, SUPPRESSED};
use crate::privacy::{ClassView, Privacy};
use similarity::{to_share, Contingency, TupleDistance};

use neighbours::Trie;

/// What happens to the tuples left over when fewer than k remain.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Deserialize, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum Leftovers {
    /// Each joins the group with the nearest member (Figure 3-6, step 9).
    #[default]
    Join,
    /// Suppressed, when the job's suppression limit allows that many rows;
    /// otherwise they join.
    Suppress,
}

/// How the nearest tuples are found.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Deserialize, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum Search {
    /// Best-first search of a prefix-tree index of the classes.
    #[default]
    Index,
    /// The distance of every remaining class, computed on all cores.
    Scan,
}

/// SBC's parameters.
#[derive(Debug, Clone, Default, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct SbcParams {
    /// Leftover tuples join their nearest group (default) or are suppressed.
    #[serde(default)]
    pub leftovers: Leftovers,
    /// The nearest-neighbour search: `index` (default) or `scan`. Both give
    /// the same release.
    #[serde(default)]
    pub search: Search,
}

/// The SBC algorithm.
#[derive(Debug, Clone, Default)]
pub struct Sbc {
    params: SbcParams,
}

impl Sbc {
    /// SBC with the given parameters.
    pub fn from_params(params: SbcParams) -> Self {
        Sbc { params }
    }
}

#[derive(Debug, Serialize)]
struct SbcDetails {
    groups: usize,
    /// The categorical QIs in the order their contingency tables chain.
    similarity_order: Vec<String>,
    leftovers: usize,
    leftovers_joined: usize,
    leftovers_suppressed: usize,
    search: Search,
    /// Index nodes expanded (index search only).
    index_nodes_expanded: usize,
    /// Mean distance from a group's first tuple to its farthest member.
    mean_group_radius: f64,
}

impl Algorithm for Sbc {
    fn name(&self) -> &'static str {
        "sbc"
    }

    fn run(&self, ctx: &Context<'_>) -> Result<Outcome> {
        ctx.privacy.check_feasible(ctx.table)?;
        let mut clustering = Clustering::new(ctx.table, ctx.classes, ctx.privacy)?;
        clustering.grow_groups(self.params.search, ctx.cancel)?;
        let leftovers = clustering.leftover_rows();
        let n_leftovers = leftovers.len();
        let budget = ctx.privacy.max_suppressed(ctx.table.n_rows());
        let suppress = self.params.leftovers == Leftovers::Suppress && n_leftovers <= budget;
        let mut suppressed = 0;
        if suppress {
            suppressed = n_leftovers;
        } else {
            suppressed += clustering.join_leftovers(&leftovers, budget)?;
        }
        let groups = &clustering.groups;
        let mut group_of_row = vec![SUPPRESSED; ctx.table.n_rows()];
        for (g, rows) in groups.iter().enumerate() {
            for &r in rows {
                group_of_row[r as usize] = g as u32;
            }
        }
        let tuples: Vec<GeneralisedTuple> = groups
            .par_iter()
            .map(|rows| flexible_tuple(ctx.table, rows))
            .collect();
        let partition = Partition::with_tuples(ctx.table, group_of_row, tuples);
        let table = ctx.table;
        Ok(Outcome {
            details: details(&SbcDetails {
                groups: groups.len(),
                similarity_order: clustering
                    .contingency
                    .chain()
                    .iter()
                    .map(|&q| table.columns()[q].name().to_string())
                    .collect(),
                leftovers: n_leftovers,
                leftovers_joined: n_leftovers - suppressed,
                leftovers_suppressed: suppressed,
                search: self.params.search,
                index_nodes_expanded: clustering.expanded,
                mean_group_radius: if clustering.radii.is_empty() {
                    0.0
                } else {
                    clustering.radii.iter().map(|&d| to_share(d)).sum::<f64>()
                        / clustering.radii.len() as f64
                },
            })?,
            partition,
        })
    }
}

/// A group's published tuple: ranges and value sets of its rows' codes.
fn flexible_tuple(table: &QiTable, rows: &[u32]) -> GeneralisedTuple {
    table
        .columns()
        .iter()
        .map(|col| {
            with_codes!(col.codes(), |c| col
                .flexible_cell_of(rows.iter().map(|&r| u32::from(c[r as usize]))))
        })
        .collect()
}

/// The state of one SBC run.
struct Clustering<'a> {
    table: &'a QiTable,
    classes: &'a EquivalenceClasses,
    privacy: &'a Privacy,
    /// The smallest group (k): the row-merging threshold of the similarity.
    k: usize,
    distance: TupleDistance,
    /// Counts of the tuples still in the working set.
    contingency: Contingency,
    /// Counts of the whole table (for placing leftovers).
    initial: Contingency,
    /// Classes in sorted-table order.
    sorted: Vec<u32>,
    /// Each class's position in `sorted`.
    position: Vec<u32>,
    /// Rows of each class not yet grouped (its last `left` rows).
    left: Vec<u32>,
    groups: Vec<Vec<u32>>,
    /// The distinct classes of each group.
    group_classes: Vec<Vec<u32>>,
    /// Each group's distance from its first tuple to its farthest member.
    radii: Vec<u64>,
    expanded: usize,
}

impl<'a> Clustering<'a> {
    fn new(
        table: &'a QiTable,
        classes: &'a EquivalenceClasses,
        privacy: &'a Privacy,
    ) -> Result<Self> {
        let distance = TupleDistance::new(table)?;
        let contingency = Contingency::of_classes(table, classes);
        let mut sorted: Vec<u32> = (0..classes.len() as u32).collect();
        // Tuples of different classes differ, so the order is total.
        sorted.par_sort_unstable_by(|&a, &b| {
            classes.tuple(a as usize).cmp(classes.tuple(b as usize))
        });
        let mut position = vec![0u32; classes.len()];
        for (p, &c) in sorted.iter().enumerate() {
            position[c as usize] = p as u32;
        }
        Ok(Clustering {
            table,
            classes,
            privacy,
            k: privacy.min_class_size().max(1),
            distance,
            initial: contingency.clone(),
            contingency,
            sorted,
            position,
            left: (0..classes.len()).map(|c| classes.size(c) as u32).collect(),
            groups: Vec::new(),
            group_classes: Vec::new(),
            radii: Vec::new(),
            expanded: 0,
        })
    }

    fn accepts(&self, rows: &[u32]) -> bool {
        self.privacy.accepts(ClassView {
            table: self.table,
            rows,
        })
    }

    /// The untaken rows of class `c`, ascending.
    fn rows_left(&self, c: u32) -> &'a [u32] {
        let rows = self.classes.rows(c as usize);
        &rows[rows.len() - self.left[c as usize] as usize..]
    }

    /// Steps 1-8 of Figure 3-6: forms groups from the first remaining tuple
    /// and its nearest neighbours while at least k tuples remain.
    fn grow_groups(&mut self, search: Search, cancel: &crate::cancel::Cancellation) -> Result<()> {
        let order = self.index_order();
        let mut trie = match search {
            Search::Index => Some(Trie::new(self.classes, &order, &self.left)),
            Search::Scan => None,
        };
        let mut alive: Vec<u32> = self.sorted.clone();
        let mut remaining: usize = self.left.iter().map(|&n| n as usize).sum();
        let mut cursor = 0;
        let mut rows: Vec<u32> = Vec::new();
        let mut picks: Vec<(u32, u32)> = Vec::new();
        while remaining >= self.k {
            cancel.check()?;
            while self.left[self.sorted[cursor] as usize] == 0 {
                cursor += 1;
            }
            let seed = self.sorted[cursor];
            let tables = self.distance.tables(
                self.table,
                &self.contingency,
                self.classes.tuple(seed as usize),
                self.k,
            );
            rows.clear();
            picks.clear();
            let mut radius = 0;
            let mut accepted = false;
            let mut take = |c: u32, rows: &mut Vec<u32>, picks: &mut Vec<(u32, u32)>| {
                let mut taken = 0;
                for &r in self.rows_left(c) {
                    rows.push(r);
                    taken += 1;
                    if rows.len() >= self.k && self.accepts(rows) {
                        accepted = true;
                        break;
                    }
                }
                picks.push((c, taken));
                accepted
            };
            match &trie {
                Some(trie) => {
                    let mut s = trie.search(&tables, &self.position);
                    for c in s.by_ref() {
                        radius = tables.distance(self.classes.tuple(c as usize));
                        if take(c, &mut rows, &mut picks) {
                            break;
                        }
                    }
                    self.expanded += s.expanded;
                }
                None => {
                    alive.retain(|&c| self.left[c as usize] > 0);
                    let nearest =
                        neighbours::scan(self.classes, &alive, &tables, &self.position, self.k);
                    for c in nearest {
                        radius = tables.distance(self.classes.tuple(c as usize));
                        if take(c, &mut rows, &mut picks) {
                            break;
                        }
                    }
                }
            }
            if !accepted {
                // Not even every remaining tuple satisfies the models: the
                // rest are leftovers.
                break;
            }
            for &(c, n) in &picks {
                self.left[c as usize] -= n;
                self.contingency.remove(self.classes.tuple(c as usize), n);
                if let Some(t) = trie.as_mut() {
                    t.remove(c, n);
                }
            }
            remaining -= rows.len();
            self.groups.push(rows.clone());
            self.group_classes
                .push(picks.iter().map(|&(c, _)| c).collect());
            self.radii.push(radius);
        }
        Ok(())
    }

    /// The QIs from lowest to highest cardinality: the index's levels.
    fn index_order(&self) -> Vec<usize> {
        let cols = self.table.columns();
        let mut order: Vec<usize> = (0..cols.len()).collect();
        order.sort_by_key(|&q| (cols[q].distinct(), q));
        order
    }

    /// Rows not in any group, ascending.
    fn leftover_rows(&self) -> Vec<u32> {
        let mut rows: Vec<u32> = (0..self.classes.len() as u32)
            .flat_map(|c| self.rows_left(c).iter().copied())
            .collect();
        rows.sort_unstable();
        rows
    }

    /// Step 9 of Figure 3-6: every leftover row joins the group holding its
    /// nearest tuple (ties to the earlier group) that the models still
    /// accept with it. Distances use the contingency tables of the whole
    /// table: the working set is down to the leftovers. Returns the number
    /// of rows suppressed because no group accepts them, within `budget`.
    ///
    /// # Errors
    /// [`Error::Unsatisfiable`] when rows fit no group and the suppression
    /// limit does not allow withholding them.
    fn join_leftovers(&mut self, leftovers: &[u32], budget: usize) -> Result<usize> {
        let mut unplaced = Vec::new();
        let class_of_row = self.classes.class_of_row();
        for &r in leftovers {
            let c = class_of_row[r as usize];
            // Recomputed for every row: an earlier leftover may have joined.
            let tables = self.distance.tables(
                self.table,
                &self.initial,
                self.classes.tuple(c as usize),
                self.k,
            );
            let classes = self.classes;
            let mut by_group: Vec<(u64, u32)> = self
                .group_classes
                .par_iter()
                .enumerate()
                .map(|(g, members)| {
                    let d = members
                        .iter()
                        .map(|&m| tables.distance(classes.tuple(m as usize)))
                        .min()
                        .unwrap_or(u64::MAX);
                    (d, g as u32)
                })
                .collect();
            by_group.par_sort_unstable();
            let mut placed = false;
            for &(_, g) in &by_group {
                let rows = &mut self.groups[g as usize];
                rows.push(r);
                if self.privacy.accepts(ClassView {
                    table: self.table,
                    rows,
                }) {
                    placed = true;
                    if !self.group_classes[g as usize].contains(&c) {
                        self.group_classes[g as usize].push(c);
                    }
                    break;
                }
                rows.pop();
            }
            if !placed {
                unplaced.push(r);
            }
        }
        if unplaced.len() > budget {
            return Err(Error::Unsatisfiable(format!(
                "SBC could place {} rows in no group that satisfies {} and the suppression limit allows withholding {budget}; raise privacy.suppression_limit or relax the model",
                unplaced.len(),
                self.privacy.describe()
            )));
        }
        Ok(unplaced.len())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::algorithms::Context;
    use crate::spec::JobSpec;
    use crate::verify::verify_partition;

    fn run(spec: &JobSpec, table: &QiTable, params: SbcParams) -> Outcome {
        let classes = EquivalenceClasses::of(table);
        let privacy = Privacy::from_spec(spec).unwrap();
        Sbc::from_params(params)
            .run(&Context::local(table, &classes, &privacy, spec))
            .unwrap()
    }

    fn spec(k: usize, qis: &[&str]) -> JobSpec {
        let attrs: Vec<String> = qis
            .iter()
            .map(|q| match *q {
                "age" => format!(r#"{{"name": "{q}", "role": "qi", "type": "numeric"}}"#),
                _ => format!(r#"{{"name": "{q}", "role": "qi"}}"#),
            })
            .collect();
        serde_json::from_str(&format!(
            r#"{{"privacy": {{"k": {k}}}, "algorithm": {{"name": "sbc"}}, "attributes": [{}]}}"#,
            attrs.join(",")
        ))
        .unwrap()
    }

    /// A table with skewed categories and a numeric column, deterministic.
    fn mixed_table(n: usize, spec: &JobSpec) -> QiTable {
        let ages: Vec<String> = (0..n).map(|i| ((i * 37) % 61 + 17).to_string()).collect();
        let sexes: Vec<&str> = (0..n)
            .map(|i| if (i * 7) % 3 == 0 { "F" } else { "M" })
            .collect();
        let countries = ["US", "US", "US", "MX", "US", "DE", "IN", "US", "MX", "CN"];
        let country: Vec<&str> = (0..n).map(|i| countries[(i * 13) % 10]).collect();
        let jobs = ["a", "b", "c", "d", "e"];
        let job: Vec<&str> = (0..n).map(|i| jobs[(i * i + 3) % 5]).collect();
        QiTable::from_string_columns(
            spec,
            &Default::default(),
            &[
                ("age", ages.iter().map(|s| s.as_str()).collect()),
                ("sex", sexes),
                ("country", country),
                ("job", job),
            ],
        )
        .unwrap()
    }

    #[test]
    fn index_and_scan_give_the_same_release() {
        for k in [2, 3, 7, 25] {
            let s = spec(k, &["age", "sex", "country", "job"]);
            let t = mixed_table(301, &s);
            let a = run(&s, &t, SbcParams::default());
            let b = run(
                &s,
                &t,
                SbcParams {
                    search: Search::Scan,
                    ..Default::default()
                },
            );
            assert_eq!(a.partition, b.partition, "k = {k}");
            let privacy = Privacy::from_spec(&s).unwrap();
            let v = verify_partition(&t, &a.partition, &privacy).unwrap();
            assert!(v.smallest_class >= k);
            assert_eq!(v.published_rows, 301);
        }
    }

    #[test]
    fn groups_take_the_first_tuple_and_its_nearest() {
        // Ages 1..=6 and sexes M,M,M,F,F,F: sorted by age, the first tuple
        // (1, M) takes the next two males; (4, F) the other two.
        let s = spec(3, &["age", "sex"]);
        let t = QiTable::from_string_columns(
            &s,
            &Default::default(),
            &[
                ("age", vec!["6", "1", "5", "2", "4", "3"]),
                ("sex", vec!["F", "M", "F", "M", "F", "M"]),
            ],
        )
        .unwrap();
        let out = run(&s, &t, SbcParams::default());
        let g = out.partition.group_of_row();
        assert_eq!(g[1], g[3]);
        assert_eq!(g[1], g[5]);
        assert_eq!(g[0], g[2]);
        assert_eq!(g[0], g[4]);
        assert_ne!(g[0], g[1]);
        let age = &t.columns()[0];
        assert_eq!(
            age.cell_label(&out.partition.tuple(g[1] as usize)[0]),
            "[1-3]"
        );
        assert_eq!(
            age.cell_label(&out.partition.tuple(g[0] as usize)[0]),
            "[4-6]"
        );
    }

    #[test]
    fn leftovers_join_their_nearest_group_or_are_suppressed() {
        // k = 3 over 7 rows: two groups and one leftover (age 100, M).
        let s = spec(3, &["age", "sex"]);
        let cols = [
            ("age", vec!["1", "2", "3", "50", "51", "52", "100"]),
            ("sex", vec!["M", "M", "M", "F", "F", "F", "M"]),
        ];
        let t = QiTable::from_string_columns(&s, &Default::default(), &cols).unwrap();
        let out = run(&s, &t, SbcParams::default());
        let g = out.partition.group_of_row();
        assert_eq!(out.details["leftovers"], 1);
        assert_eq!(out.partition.suppressed(), 0);
        // (100, M) is nearer to (3, M) than to (52, F):
        // (97/99 + 0) / 2 = 0.49 against (48/99 + 1) / 2 = 0.74.
        assert_eq!(g[6], g[0]);
        assert_ne!(g[0], g[3]);

        // With suppression allowed, the leftover is withheld instead.
        let mut s2 = s.clone();
        s2.privacy.suppression_limit = Some(0.2);
        let out = run(
            &s2,
            &t,
            SbcParams {
                leftovers: Leftovers::Suppress,
                ..Default::default()
            },
        );
        assert_eq!(out.partition.group_of_row()[6], SUPPRESSED);
        assert_eq!(out.details["leftovers_suppressed"], 1);
        // Without room under the limit, it joins.
        let out = run(
            &s,
            &t,
            SbcParams {
                leftovers: Leftovers::Suppress,
                ..Default::default()
            },
        );
        assert_ne!(out.partition.group_of_row()[6], SUPPRESSED);
    }
}
