//! Incognito (LeFevre, DeWitt, Ramakrishnan, "Incognito: efficient
//! full-domain k-anonymity", SIGMOD 2005): every accepted full-domain
//! generalisation, found bottom-up over the lattice, and the one of least
//! loss. The KACA paper (section 6) and the SBC thesis (chapter 4) compare against it.
//!
//! The search runs over the lattices of QI subsets of growing size
//! (Incognito's Fig. 5). A node of a subset is a candidate only when each of
//! its projections on the subsets one QI smaller is accepted (*subset
//! property*: a generalisation of fewer QIs that already has too many
//! rejected rows cannot improve with more QIs); within a subset's lattice
//! nodes are visited by height and a node with an accepted direct
//! specialisation is accepted without a test (*generalisation property*).
//! Every test rolls the class counts up from an already computed, more
//! specific node of the same subset (*rollup property*, see
//! `algorithms/lattice.rs`); candidates with no computed
//! specialisation roll up from the subset's *super-root*, the meet of its
//! candidates, grouped once from the input classes (Incognito, section 4).
//!
//! Both properties hold for the privacy models only when they are monotone
//! (and, under a suppression limit, monotone with suppression); otherwise
//! every node of the full lattice is tested, which is always correct.
//!
//! Among the accepted nodes of all QIs the one of least [`Loss`] is chosen;
//! ties go to the smaller discernibility (the finer release), then the lower
//! node, then the smaller level vector in QI order. Without suppression all
//! four losses only grow with generalisation, so the answer is a minimal
//! accepted node and marked nodes are not scored; under a suppression limit
//! a more general node may suppress fewer rows and lose less, so every
//! accepted node is scored unless its loss floor (its loss with nothing
//! suppressed, a lower bound that grows with generalisation) already exceeds
//! the best loss found.
//!
//! The subsets of one size, and the nodes of one height within a subset's
//! lattice, depend only on what lies below them: they are computed in
//! parallel and their results applied in a fixed order, so the answer and
//! the reported statistics do not depend on the thread count.

use rayon::prelude::*;
use rustc_hash::FxHashMap;
use serde::{Deserialize, Serialize};

pub use crate::algorithms::lattice::Loss;

use crate::algorithms::lattice::{CellCosts, FrequencySet, Key, Lattice, Score, Space, Wide};
use crate::algorithms::{details, Algorithm, Context, Outcome};
use crate::error::{Error, Result};

/// Largest number of lattice nodes (over all subset lattices) a search may
/// visit; beyond it the job is refused before any work.
const MAX_SEARCH_NODES: u64 = 50_000_000;

/// Incognito's parameters.
#[derive(Debug, Clone, Default, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct IncognitoParams {
    /// The loss that picks the released node among the accepted ones
    /// (default: KACA's distortion with uniform weights).
    #[serde(default)]
    pub loss: Loss,
    /// Cell-level local suppression (sdcMicro's `localSuppression`): the
    /// records of classes the models reject keep their row and lose only
    /// the cells needed (`*`), instead of being suppressed whole; the
    /// suppression limit then bounds the records of the rejected classes.
    #[serde(default)]
    pub cell_suppression: bool,
}

/// The Incognito algorithm.
#[derive(Debug, Clone, Default)]
pub struct Incognito {
    params: IncognitoParams,
}

impl Incognito {
    /// Incognito with the given parameters.
    pub fn from_params(params: IncognitoParams) -> Self {
        Incognito { params }
    }
}

/// What is known about a node of a subset lattice after the search.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Status {
    /// Not a candidate: a projection on a smaller subset is rejected.
    Pruned,
    /// Tested and rejected.
    Rejected,
    /// Tested and accepted.
    Accepted,
    /// Accepted because a direct specialisation is (not tested).
    Marked,
}

impl Status {
    fn accepted(self) -> bool {
        matches!(self, Status::Accepted | Status::Marked)
    }
}

/// The searched lattice of one QI subset.
#[derive(Debug)]
struct SubLattice {
    space: Space,
    status: Vec<Status>,
}

#[derive(Debug, Default, Serialize)]
struct Stats {
    /// Subset lattices searched.
    subset_lattices: usize,
    /// Nodes of all subset lattices visited (the full lattice included).
    nodes_visited: u64,
    /// Nodes whose classes were tested against the privacy models to decide
    /// whether they are accepted.
    nodes_evaluated: u64,
    /// Nodes decided without a test (`pruned_by_subset + marked_by_generalisation`).
    nodes_pruned: u64,
    /// Nodes ruled out by a rejected projection on a smaller subset.
    pruned_by_subset: u64,
    /// Nodes accepted because a direct specialisation is.
    marked_by_generalisation: u64,
    /// Accepted nodes of the full lattice whose loss was computed.
    nodes_scored: u64,
}

#[derive(Debug, Serialize)]
struct IncognitoDetails {
    loss: Loss,
    /// The chosen node's loss.
    loss_value: f64,
    /// The chosen node: hierarchy level per QI (0 = unchanged).
    chosen: serde_json::Map<String, serde_json::Value>,
    /// Sum of the chosen levels.
    chosen_height: usize,
    /// Rows suppressed (classes the models reject), nulls excluded.
    suppressed_rows: usize,
    /// Rows the suppression limit allows.
    max_suppressed: usize,
    /// Cells suppressed instead of rows (`cell_suppression`).
    suppressed_cells: usize,
    /// Records that lost a cell (`cell_suppression`): those of the
    /// rejected classes (`suppressed_rows`, bounded by the suppression
    /// limit) and those of accepted classes folded into the all-`*` class
    /// as a last resort.
    records_with_suppressed_cells: usize,
    /// Nodes of the lattice of all QIs.
    lattice_size: usize,
    /// Whether subset and generalisation pruning were used (only for
    /// monotone privacy models).
    pruning: bool,
    /// Accepted nodes of the full lattice.
    accepted_nodes: usize,
    /// The minimal accepted nodes: no accepted node lies below them.
    minimal_nodes: Vec<serde_json::Map<String, serde_json::Value>>,
    #[serde(flatten)]
    stats: Stats,
}

/// The best node so far, ordered by (loss, rows suppressed, discernibility,
/// height, index): of two nodes that lose as much, the one that withholds
/// fewer rows wins.
#[derive(Debug, Clone, Copy)]
struct Best {
    score: Score,
    height: usize,
    index: usize,
}

impl Best {
    fn beats(&self, other: &Best) -> bool {
        self.score
            .loss
            .total_cmp(&other.score.loss)
            .then(self.score.suppressed.cmp(&other.score.suppressed))
            .then(
                self.score
                    .discernibility
                    .total_cmp(&other.score.discernibility),
            )
            .then(self.height.cmp(&other.height))
            .then(self.index.cmp(&other.index))
            .is_lt()
    }
}

struct Search<'l, 'a> {
    lattice: &'l Lattice<'a>,
    cancel: &'l crate::cancel::Cancellation,
    costs: CellCosts,
    prune: bool,
    score_all: bool,
}

/// One searched subset lattice, with what the search did and (for the full
/// lattice) its best node.
struct Explored {
    sub: SubLattice,
    stats: Stats,
    best: Option<Best>,
}

impl Stats {
    fn add(&mut self, other: &Stats) {
        self.subset_lattices += other.subset_lattices;
        self.nodes_visited += other.nodes_visited;
        self.nodes_evaluated += other.nodes_evaluated;
        self.pruned_by_subset += other.pruned_by_subset;
        self.marked_by_generalisation += other.marked_by_generalisation;
        self.nodes_pruned = self.pruned_by_subset + self.marked_by_generalisation;
        self.nodes_scored += other.nodes_scored;
    }
}

impl Search<'_, '_> {
    /// Whether a node of all QIs at `levels` may lose no more than the best
    /// node so far (its loss floor does not exceed the best loss). Nodes
    /// above one that may not, may not either: they are skipped, and so is
    /// computing their classes.
    fn may_beat(&self, best: Option<&Best>, levels: &[u8]) -> bool {
        best.is_none_or(|b| {
            let floor = self.lattice.loss_floor(&self.costs, levels);
            floor <= b.score.loss + 1e-9 * b.score.loss.abs().max(1.0)
        })
    }

    /// Searches the lattice of `space`'s QIs (`full` when it holds every
    /// QI); `done` holds the lattices of the subsets one QI smaller.
    fn explore<K: Key>(
        &self,
        space: Space,
        done: &FxHashMap<u64, SubLattice>,
        full: bool,
    ) -> Explored {
        let mut stats = Stats::default();
        let mut best: Option<Best> = None;
        let lattice = self.lattice;
        let attrs = space.attrs().to_vec();
        let mask = attrs.iter().fold(0u64, |m, &q| m | 1 << q);
        let parents: Vec<&SubLattice> = if self.prune && attrs.len() > 1 {
            attrs
                .iter()
                .map(|&q| &done[&(mask & !(1u64 << q))])
                .collect()
        } else {
            Vec::new()
        };
        stats.subset_lattices += 1;
        // Candidates: nodes whose projections one QI smaller are all accepted.
        let pruned: Vec<bool> = (0..space.size())
            .map(|index| {
                let levels = space.decode(index);
                parents
                    .iter()
                    .enumerate()
                    .any(|(j, p)| !p.status[p.space.project(&levels, j)].accepted())
            })
            .collect();
        // Incognito's super-root: the meet of all candidates. Candidates
        // with no computed direct specialisation (those just above the
        // pruned region) roll up from it, so the input classes are grouped
        // once per subset.
        let mut meet: Option<Vec<u8>> = None;
        for index in (0..space.size()).filter(|&i| !pruned[i]) {
            let levels = space.decode(index);
            meet = Some(match meet {
                None => levels,
                Some(m) => m.iter().zip(&levels).map(|(&a, &b)| a.min(b)).collect(),
            });
        }
        let super_root: Option<FrequencySet<K>> =
            meet.map(|meet| lattice.frequency_set(&attrs, &meet, None, false));
        let mut status = vec![Status::Pruned; space.size()];
        let mut previous: FxHashMap<u32, FrequencySet<K>> = FxHashMap::default();
        for (height, layer) in space.by_height().into_iter().enumerate() {
            // Cancelled: stop here; `run` reports the cancel.
            if self.cancel.is_cancelled() {
                break;
            }
            // What each node needs depends only on the layer below: decided
            // first, then the classes of the layer are computed in parallel
            // and the results applied in order (deterministic).
            let mut work = Vec::new();
            for index in layer {
                let index = index as usize;
                stats.nodes_visited += 1;
                if pruned[index] {
                    stats.pruned_by_subset += 1;
                    continue;
                }
                let levels = space.decode(index);
                let marked = self.prune
                    && (0..attrs.len())
                        .any(|j| levels[j] > 0 && status[index - space.stride(j)].accepted());
                if marked {
                    status[index] = Status::Marked;
                    stats.marked_by_generalisation += 1;
                    if !(full && self.score_all && self.may_beat(best.as_ref(), &levels)) {
                        continue;
                    }
                }
                work.push((index, levels, marked));
            }
            let layer_best = best;
            let computed: Vec<_> = work
                .into_par_iter()
                .map(|(index, levels, marked)| {
                    // Roll up from the computed direct specialisation with
                    // the fewest classes, else from the super-root.
                    let source = (0..attrs.len())
                        .filter(|&j| levels[j] > 0)
                        .filter_map(|j| previous.get(&((index - space.stride(j)) as u32)))
                        .min_by_key(|fs| fs.len())
                        .or(super_root.as_ref());
                    let fs = lattice.frequency_set(&attrs, &levels, source, false);
                    let verdict = lattice.verdict(&fs);
                    let score = (full
                        && verdict.accepted
                        && (!marked || self.score_all)
                        && self.may_beat(layer_best.as_ref(), &levels))
                    .then(|| lattice.score(&fs, &verdict, &self.costs));
                    (index, marked, verdict.accepted, score, fs)
                })
                .collect();
            let mut current: FxHashMap<u32, FrequencySet<K>> = FxHashMap::default();
            for (index, marked, accepted, score, fs) in computed {
                if !marked {
                    stats.nodes_evaluated += 1;
                    status[index] = if accepted {
                        Status::Accepted
                    } else {
                        Status::Rejected
                    };
                }
                if let Some(score) = score {
                    stats.nodes_scored += 1;
                    let candidate = Best {
                        score,
                        height,
                        index,
                    };
                    if best.as_ref().is_none_or(|b| candidate.beats(b)) {
                        best = Some(candidate);
                    }
                }
                current.insert(index as u32, fs);
            }
            previous = current;
        }
        stats.nodes_pruned = stats.pruned_by_subset + stats.marked_by_generalisation;
        Explored {
            sub: SubLattice { space, status },
            stats,
            best,
        }
    }
}

/// The accepted nodes of a searched lattice below which no node is
/// accepted, ascending.
fn minimal_nodes(sub: &SubLattice) -> Vec<usize> {
    let space = &sub.space;
    let mut below = vec![false; space.size()];
    let mut out = Vec::new();
    for layer in space.by_height() {
        for index in layer {
            let index = index as usize;
            let levels = space.decode(index);
            for (j, &l) in levels.iter().enumerate() {
                if l > 0 {
                    let child = index - space.stride(j);
                    if sub.status[child].accepted() || below[child] {
                        below[index] = true;
                    }
                }
            }
            if sub.status[index].accepted() && !below[index] {
                out.push(index);
            }
        }
    }
    out.sort_unstable();
    out
}

/// The subsets of `0..n` of `size` elements, in lexicographic order.
fn subsets(n: usize, size: usize) -> Vec<Vec<usize>> {
    let mut out = Vec::new();
    let mut pick: Vec<usize> = (0..size).collect();
    if size > n {
        return out;
    }
    loop {
        out.push(pick.clone());
        let Some(j) = (0..size).rev().find(|&j| pick[j] < n - size + j) else {
            return out;
        };
        pick[j] += 1;
        for t in j + 1..size {
            pick[t] = pick[t - 1] + 1;
        }
    }
}

impl Algorithm for Incognito {
    fn name(&self) -> &'static str {
        "incognito"
    }

    fn run(&self, ctx: &Context<'_>) -> Result<Outcome> {
        if self.params.cell_suppression && ctx.privacy.has_shield_requirements() {
            return Err(Error::spec(
                "algorithm.cell_suppression",
                "places records by their classes, not by the projections `privacy.requirements` shield: drop `cell_suppression` or the requirements",
            ));
        }
        ctx.privacy.check_feasible(ctx.table)?;
        let lattice = Lattice::new(ctx, self.name())?;
        let n = lattice.n_qi();
        let heights = lattice.heights();
        let prune = ctx.privacy.is_monotone()
            && (lattice.max_suppressed() == 0 || ctx.privacy.is_monotone_with_suppression());
        // Nodes over all subset lattices: prod(h + 2) - 1 (each QI absent or
        // at one of its h + 1 levels), or the full lattice without pruning.
        let full_size = heights
            .iter()
            .fold(1u64, |s, &h| s.saturating_mul(h as u64 + 1));
        let searched = if prune {
            heights
                .iter()
                .fold(1u64, |s, &h| s.saturating_mul(h as u64 + 2))
                - 1
        } else {
            full_size
        };
        if searched > MAX_SEARCH_NODES || n > 63 {
            return Err(Error::ResourcesExhausted(format!(
                "Incognito would visit {searched} lattice nodes for {n} quasi-identifiers (at most \
                 {MAX_SEARCH_NODES}); use fewer quasi-identifiers or shorter hierarchies, or `datafly`"
            )));
        }
        let search = Search {
            lattice: &lattice,
            cancel: ctx.cancel,
            costs: lattice.cell_costs(self.params.loss),
            prune,
            score_all: !prune || lattice.max_suppressed() > 0,
        };
        // One key type for every subset: the one the full set of QIs needs.
        let bits = lattice.key_bits(&(0..n).collect::<Vec<_>>());
        let mut stats = Stats::default();
        let mut done: FxHashMap<u64, SubLattice> = FxHashMap::default();
        let mut best = None;
        for size in if prune { 1..=n } else { n..=n } {
            // The subsets of one size depend only on the smaller ones:
            // searched in parallel, collected in order (deterministic).
            let explored: Vec<(u64, Explored)> = subsets(n, size)
                .into_par_iter()
                .map(|attrs| {
                    let mask = attrs.iter().fold(0u64, |m, &q| m | 1 << q);
                    let space = Space::new(attrs, heights).expect("size checked above");
                    let full = size == n;
                    let explored = if u64::holds(bits) {
                        search.explore::<u64>(space, &done, full)
                    } else if u128::holds(bits) {
                        search.explore::<u128>(space, &done, full)
                    } else {
                        search.explore::<Wide>(space, &done, full)
                    };
                    (mask, explored)
                })
                .collect();
            ctx.cancel.check()?;
            let mut next = FxHashMap::default();
            for (mask, e) in explored {
                stats.add(&e.stats);
                best = best.or(e.best);
                next.insert(mask, e.sub);
            }
            done = next;
        }
        let all = (0..n).fold(0u64, |m, q| m | 1 << q);
        let full = done.remove(&all).expect("the full lattice was searched");
        let Some(best) = best else {
            return Err(Error::Unsatisfiable(format!(
                "no full-domain generalisation satisfies {} within the suppression limit ({} rows), \
                 not even every quasi-identifier at the root; raise privacy.suppression_limit or relax the model",
                ctx.privacy.describe(),
                lattice.max_suppressed()
            )));
        };
        let levels = full.space.decode(best.index);
        let (partition, verdict, (suppressed_cells, records_with_suppressed_cells)) =
            lattice.partition(&levels, self.params.cell_suppression)?;
        let minimal = minimal_nodes(&full);
        Ok(Outcome {
            details: details(&IncognitoDetails {
                loss: self.params.loss,
                loss_value: best.score.loss,
                chosen: lattice.describe(&levels),
                chosen_height: best.height,
                suppressed_rows: verdict.suppressed,
                max_suppressed: lattice.max_suppressed(),
                suppressed_cells,
                records_with_suppressed_cells,
                lattice_size: full.space.size(),
                pruning: prune,
                accepted_nodes: full.status.iter().filter(|s| s.accepted()).count(),
                minimal_nodes: minimal
                    .iter()
                    .map(|&i| lattice.describe(&full.space.decode(i)))
                    .collect(),
                stats,
            })?,
            partition,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Issue 15: Incognito chose a node that suppresses every row over one
    /// that loses as much and publishes them.
    #[test]
    fn of_two_equal_losses_the_node_that_suppresses_less_wins() {
        let node = |suppressed: usize, discernibility: f64, height: usize, index: usize| Best {
            score: Score {
                loss: 0.5,
                discernibility,
                suppressed,
            },
            height,
            index,
        };
        let publishes_all = node(0, 900.0, 5, 9);
        let suppresses_all = node(100, 0.0, 0, 0);
        assert!(publishes_all.beats(&suppresses_all));
        assert!(!suppresses_all.beats(&publishes_all));
    }

    #[test]
    fn subsets_in_lexicographic_order() {
        assert_eq!(
            subsets(4, 2),
            vec![
                vec![0, 1],
                vec![0, 2],
                vec![0, 3],
                vec![1, 2],
                vec![1, 3],
                vec![2, 3]
            ]
        );
        assert_eq!(subsets(3, 3), vec![vec![0, 1, 2]]);
        assert_eq!(subsets(3, 1).len(), 3);
    }
}
