//! The generalisation lattice of full-domain (global) recoding, shared by
//! Datafly and Incognito.
//!
//! A node is one hierarchy level per QI (a *level vector*; 0 = the leaves);
//! its height is the sum of its levels. Generalising node `N` to a node `G`
//! above it (every level at least as high) merges `N`'s equivalence classes
//! into `G`'s. Incognito (LeFevre, DeWitt, Ramakrishnan, SIGMOD 2005,
//! section 3) calls this the *rollup property*: the class counts (frequency
//! set) of `G` are the sums of the counts of `N`'s classes that map to the
//! same generalised tuple. [`Lattice::frequency_set`] therefore never reads
//! rows: it starts from the table's [`EquivalenceClasses`] (one entry per
//! distinct QI tuple with its size) and rolls any frequency set of a more
//! specific node up to a more general one, mapping each class through the
//! per-level lookup tables of the hierarchies
//! ([`Hierarchy::level_table`](crate::hierarchy::Hierarchy::level_table)).
//! Only the QIs whose level differs are mapped, on tuples packed into one
//! integer ([`Key`]), and grouped in a small open-addressing table.
//!
//! A node is *accepted* when the rows in classes the privacy models reject
//! (for k-anonymity: classes smaller than k) fit the suppression limit;
//! those rows are then suppressed and counted ([`Verdict`]). Classes are
//! tested through [`Privacy::accepts`] with their row lists, except when no
//! model needs rows ([`Privacy::needs_rows`]), where the size test alone is
//! exact and the row lists are never built.
//!
//! The lattice is split by concept: [`Space`] (the nodes of a set of QIs
//! and their index arithmetic), [`Key`] (generalised tuples packed into one
//! integer), `frequency` (frequency sets, their rollup and the verdict of
//! the privacy models) and [`Loss`] (scoring nodes with the engine's metric
//! functions). This module holds the [`Lattice`] itself (the per-QI lookup
//! tables built from the hierarchies) and turns a chosen node into a
//! [`Partition`].

mod cells;
mod frequency;
mod key;
mod loss;
mod space;

pub(crate) use frequency::{FrequencySet, Verdict};
pub(crate) use key::{Key, Layout, Wide};
pub use loss::Loss;
pub(crate) use loss::{CellCosts, Score};
pub(crate) use space::Space;

use crate::algorithms::Context;
use crate::encode::{EquivalenceClasses, QiTable, NO_CLASS};
use crate::error::{Error, Result};
use crate::generalise::{Cell, GeneralisedTuple};
use crate::hierarchy::{Level, NodeId};
use crate::partition::{Partition, SUPPRESSED};
use crate::privacy::Privacy;

/// The lattice of a table whose QIs all have hierarchies.
#[derive(Debug)]
pub(crate) struct Lattice<'a> {
    table: &'a QiTable,
    classes: &'a EquivalenceClasses,
    privacy: &'a Privacy,
    heights: Vec<u8>,
    /// `dense[q][l][leaf]`: the dense code of the leaf's ancestor at level
    /// `l` (its position among the nodes of level `l`), from
    /// [`Hierarchy::level_table`](crate::hierarchy::Hierarchy::level_table).
    dense: Vec<Vec<Vec<u32>>>,
    /// `up[q][l][code]`: the dense code at level `l + 1` of the parent of
    /// the level-`l` node with dense code `code`.
    up: Vec<Vec<Vec<u32>>>,
    /// `nodes[q][l][code]`: the hierarchy node of a dense code.
    nodes: Vec<Vec<Vec<NodeId>>>,
    /// Bits of a dense code of each QI (the leaf level has the most nodes).
    bits: Vec<u32>,
    min_size: usize,
    needs_rows: bool,
    max_suppressed: usize,
    /// Under δ-presence, the classes of the population records outside the
    /// research subset, counted beside each node's research classes.
    outside: Option<EquivalenceClasses>,
}

impl<'a> Lattice<'a> {
    /// The lattice of the context's table.
    ///
    /// # Errors
    /// [`Error::Spec`] naming the first QI without a hierarchy: full-domain
    /// recoding publishes hierarchy levels, so `algorithm` needs one for
    /// every QI.
    pub(crate) fn new(ctx: &Context<'a>, algorithm: &str) -> Result<Self> {
        let table = ctx.table;
        let mut hierarchies = Vec::with_capacity(table.n_qi());
        for col in table.columns() {
            let Some(h) = col.hierarchy() else {
                return Err(Error::spec(
                    format!("attributes.{}", col.name()),
                    format!(
                        "`{algorithm}` recodes whole domains to hierarchy levels and needs a hierarchy for every \
                         quasi-identifier; give `{}` a `hierarchy` file, `intervals`, `cuts` or `masking`, \
                         or choose a local-recoding algorithm such as `mondrian`",
                        col.name()
                    ),
                ));
            };
            hierarchies.push(h.as_ref());
        }
        let heights = hierarchies.iter().map(|h| h.height()).collect();
        let mut dense = Vec::with_capacity(hierarchies.len());
        let mut up = Vec::with_capacity(hierarchies.len());
        let mut nodes = Vec::with_capacity(hierarchies.len());
        for h in &hierarchies {
            let mut position = vec![0u32; h.node_count()];
            let levels: Vec<Level> = (0..=h.height()).map(Level).collect();
            let by_level: Vec<Vec<NodeId>> =
                levels.iter().map(|&l| h.nodes_at(l).collect()).collect();
            for level_nodes in &by_level {
                for (i, n) in level_nodes.iter().enumerate() {
                    position[n.0 as usize] = i as u32;
                }
            }
            dense.push(
                levels
                    .iter()
                    .map(|&l| {
                        h.level_table(l)
                            .iter()
                            .map(|&n| position[n as usize])
                            .collect::<Vec<u32>>()
                    })
                    .collect::<Vec<_>>(),
            );
            up.push(
                by_level
                    .iter()
                    .map(|level_nodes| {
                        level_nodes
                            .iter()
                            .map(|&n| position[h.parent(n).0 as usize])
                            .collect::<Vec<u32>>()
                    })
                    .collect::<Vec<_>>(),
            );
            nodes.push(by_level);
        }
        let bits = hierarchies
            .iter()
            .map(|h| 32 - (h.leaf_count().max(2) as u32 - 1).leading_zeros())
            .collect();
        Ok(Lattice {
            table,
            classes: ctx.classes,
            privacy: ctx.privacy,
            heights,
            dense,
            up,
            nodes,
            bits,
            min_size: ctx.privacy.min_class_size(),
            needs_rows: ctx.privacy.needs_rows(),
            max_suppressed: ctx.privacy.max_suppressed(table.rows_in_scope()),
            outside: ctx
                .privacy
                .presence()
                .map(|_| EquivalenceClasses::of_rows(table, table.outside())),
        })
    }

    /// Rows excluded by a null policy: suppressed whatever the node (the
    /// population outside a research subset is never published, and is
    /// not the data's loss).
    pub(crate) fn nulls(&self) -> usize {
        self.table.excluded_rows() - self.table.outside().len()
    }

    /// Number of QIs.
    pub(crate) fn n_qi(&self) -> usize {
        self.heights.len()
    }

    /// Height of each QI's hierarchy (its top level).
    pub(crate) fn heights(&self) -> &[u8] {
        &self.heights
    }

    /// The number of rows that may be suppressed.
    pub(crate) fn max_suppressed(&self) -> usize {
        self.max_suppressed
    }

    /// The node's levels by QI name (for reports).
    pub(crate) fn describe(&self, levels: &[u8]) -> serde_json::Map<String, serde_json::Value> {
        self.table
            .columns()
            .iter()
            .zip(levels)
            .map(|(c, &l)| (c.name().to_string(), l.into()))
            .collect()
    }

    /// Number of distinct generalised values of QI `q` at `level` among the
    /// active rows (Datafly's choice of attribute).
    pub(crate) fn distinct_at(&self, q: usize, level: u8) -> usize {
        let dense = &self.dense[q][level as usize];
        let mut seen = vec![false; self.nodes[q][level as usize].len()];
        for c in 0..self.classes.len() {
            seen[dense[self.classes.tuple(c)[q] as usize] as usize] = true;
        }
        seen.iter().filter(|&&s| s).count()
    }

    /// The bits a packed key of the QIs `attrs` needs.
    pub(crate) fn key_bits(&self, attrs: &[usize]) -> u32 {
        attrs.iter().map(|&q| self.bits[q]).sum()
    }

    /// The packed-key layout of the QIs `attrs`.
    fn layout(&self, attrs: &[usize]) -> Layout {
        let mut shifts = Vec::with_capacity(attrs.len());
        let mut masks = Vec::with_capacity(attrs.len());
        let mut at = 0;
        for &q in attrs {
            shifts.push(at);
            masks.push(((1u64 << self.bits[q]) - 1) as u32);
            at += self.bits[q];
        }
        Layout { shifts, masks }
    }

    /// The release of a node of all QIs: every accepted class is a group
    /// published as the hierarchy nodes at `levels`; rows of rejected
    /// classes are suppressed (and counted by the partition), or, with
    /// `cells`, keep their rows and lose some cells ([`cells`]; the
    /// suppression limit then bounds the rejected records). Also returns
    /// the cells suppressed and the records that lost a cell (the rejected
    /// ones, and those of accepted classes folded into the all-`*` class).
    ///
    /// # Errors
    /// [`Error::Internal`] when the node does not fit the suppression limit
    /// (callers choose accepted nodes only).
    pub(crate) fn partition(
        &self,
        levels: &[u8],
        cells: bool,
    ) -> Result<(Partition, Verdict, (usize, usize))> {
        let attrs: Vec<usize> = (0..self.n_qi()).collect();
        let fs: FrequencySet<Wide> = self.frequency_set(&attrs, levels, None, true);
        let verdict = self.verdict(&fs);
        if !verdict.accepted {
            return Err(Error::Internal(format!(
                "the chosen lattice node suppresses {} rows, more than the {} allowed",
                verdict.suppressed, self.max_suppressed
            )));
        }
        let mut group_of_class = vec![SUPPRESSED; fs.len()];
        let mut tuples: Vec<GeneralisedTuple> = Vec::new();
        for (g, slot) in group_of_class.iter_mut().enumerate() {
            if verdict.ok[g] {
                *slot = tuples.len() as u32;
                tuples.push(
                    fs.keys[g]
                        .iter()
                        .zip(levels)
                        .enumerate()
                        .map(|(q, (&code, &l))| {
                            Cell::Node(self.nodes[q][l as usize][code as usize])
                        })
                        .collect(),
                );
            }
        }
        let members = fs.members.as_ref().expect("members were asked for");
        let mut group_of_row: Vec<u32> = self
            .classes
            .class_of_row()
            .iter()
            .map(|&c| match c {
                NO_CLASS => SUPPRESSED,
                c => group_of_class[members[c as usize] as usize],
            })
            .collect();
        let mut suppressed_cells = (0, 0);
        if cells && verdict.suppressed > 0 {
            suppressed_cells =
                self.suppress_cells(levels, &fs, &verdict, &mut group_of_row, &mut tuples)?;
        }
        Ok((
            Partition::with_tuples(self.table, group_of_row, tuples),
            verdict,
            suppressed_cells,
        ))
    }

    /// Places the rows of the classes `verdict` rejects by suppressing
    /// cells ([`cells::place`]), updating `group_of_row` and `tuples`;
    /// returns the cells suppressed and the records that lost one.
    fn suppress_cells(
        &self,
        levels: &[u8],
        fs: &FrequencySet<Wide>,
        verdict: &Verdict,
        group_of_row: &mut [u32],
        tuples: &mut Vec<GeneralisedTuple>,
    ) -> Result<(usize, usize)> {
        let members = fs.members.as_ref().expect("members were asked for");
        let mut rejected: Vec<cells::Rejected> = Vec::new();
        let mut slot = vec![usize::MAX; fs.len()];
        for (g, key) in fs.keys.iter().enumerate() {
            if !verdict.ok[g] {
                slot[g] = rejected.len();
                rejected.push(cells::Rejected {
                    key: key.to_vec(),
                    rows: Vec::new(),
                });
            }
        }
        for (base, &g) in members.iter().enumerate().take(self.classes.len()) {
            if let Some(r) = rejected.get_mut(slot[g as usize]) {
                r.rows.extend_from_slice(self.classes.rows(base));
            }
        }
        // Nulls under `nulls = "suppress"` stay suppressed: they have no
        // value to publish.
        let excluded = self.table.excluded();
        for r in &mut rejected {
            r.rows.retain(|row| excluded.binary_search(row).is_err());
        }
        rejected.retain(|r| !r.rows.is_empty());
        let mut accepted: Vec<Vec<u32>> = vec![Vec::new(); tuples.len()];
        for (row, &g) in group_of_row.iter().enumerate() {
            if g != SUPPRESSED {
                accepted[g as usize].push(row as u32);
            }
        }
        let distinct: Vec<usize> = (0..self.n_qi())
            .map(|q| self.distinct_at(q, levels[q]))
            .collect();
        let placed = cells::place(self.table, self.privacy, &distinct, rejected, &accepted)
            .ok_or_else(|| {
                Error::Unsatisfiable(
                    "even with every cell of the rejected records suppressed, no class satisfies the privacy models".into(),
                )
            })?;
        // Accepted groups folded into the all-`*` class leave the
        // numbering; the others keep their order.
        let mut renumber: Vec<u32> = Vec::with_capacity(tuples.len());
        let mut kept = Vec::with_capacity(tuples.len());
        for (g, t) in std::mem::take(tuples).into_iter().enumerate() {
            if placed.absorbed.contains(&(g as u32)) {
                renumber.push(SUPPRESSED);
            } else {
                renumber.push(kept.len() as u32);
                kept.push(t);
            }
        }
        *tuples = kept;
        for g in group_of_row.iter_mut() {
            if *g != SUPPRESSED {
                *g = renumber[*g as usize];
            }
        }
        let (mut suppressed_cells, mut records) = (0, 0);
        for (key, rows) in placed.groups {
            let group = tuples.len() as u32;
            tuples.push(cells::tuple(&key, |q, code| {
                Cell::Node(self.nodes[q][levels[q] as usize][code as usize])
            }));
            let stars = key.iter().filter(|c| c.is_none()).count();
            suppressed_cells += stars * rows.len();
            records += rows.len();
            for r in rows {
                group_of_row[r as usize] = group;
            }
        }
        Ok((suppressed_cells, records))
    }
}
