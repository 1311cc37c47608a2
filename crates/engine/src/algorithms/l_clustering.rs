//! L-clustering: l-diversity by greedy clustering with flexible
//! generalisation (the L-clustering paper, section 4 of the paper; `docs/SPEC.md` section 4).
//!
//! The paper's steps, in the engine's terms:
//! 1. check that the table can be l-diverse at all (the pipeline's
//!    [`Privacy::check_feasible`], before any work);
//! 2. while the remaining tuples `D` could still form an accepted cluster
//!    (`privacy.accepts(D)`): start a cluster `G` from a random remaining
//!    tuple (seeded); while `G` is not accepted, take the remaining tuple
//!    `t'` that helps (for distinct l-diversity: its sensitive value is not
//!    in `G` yet) with the smallest `DS(t', G)`, unless a finished cluster
//!    `G'` has `DS(G', G) < DS(t', G)`, in which case `G'` is merged into
//!    `G`; then `G` is finished;
//! 3. each leftover tuple joins the finished cluster closest to it;
//! 4. every cluster is published as one generalised tuple: flexibly
//!    (`[min-max]` for ordered QIs, value sets for unordered ones), or
//!    through the QIs' hierarchies with `generalisation = "hierarchy"`.
//!
//! Not the paper's, on by default (`oversize = "split"`, [`Oversize`]):
//! between steps 3 and 4 every cluster with room for two accepted classes
//! (`>= 2k` rows) is cut, Mondrian-like, into accepted parts, each published
//! at its own tighter generalisation; a cluster no cut can split (on Adult:
//! one row of the rarer salary class among `2k` or more) is re-cut together
//! with its closest cluster when that loses no more. The paper's growth
//! leaves classes of 2-3k rows on average at large k (whole finished
//! clusters merged into growing ones, leftovers of one sensitive value);
//! the cut keeps them close to `max(k, what l needs)` and lowers the loss.
//!
//! `DS(t1, t2) = L(t1, t12) + L(t2, t12)` with `t12` the join of both and
//! `L` the uncertainty loss with per-attribute weights (`distance`).
//! For a generalised `t2` the loss `L(t2, t12)` is read as the growth of its
//! loss, `L(t12) - L(t2)`. The paper compares clusters through their
//! generalised tuples alone, not weighted by their sizes, and so does this
//! module by default; `distance = "class"` weights each side by its rows
//! (KACA's class distance), which loses less on Adult
//! (`docs/results/ldiv.md`).
//!
//! The model is whatever `ctx.privacy` holds (k, and distinct, entropy or
//! recursive l-diversity): "l distinct values" is the paper's special case
//! of "accepted", and [`Privacy::helps`] says which tuples move a cluster
//! towards acceptance. Leftovers can break entropy or recursive diversity of
//! the cluster they join (distinct diversity and k cannot break), so a final
//! pass merges any cluster the models reject into its closest cluster.
//!
//! Speed: the paper's search is `O(n)` per step, `O(d n^2 / l)` in all. Here
//! the remaining tuples sit in a trie over their QI codes whose nodes count
//! the remaining rows per sensitive value; the nearest helpful tuple is found
//! by branch and bound (the join of a span with a value never costs less
//! than the span), visiting first the values the cluster already covers.
//! Finished clusters keep column-wise copies of their losses and of their
//! spans packed into words, so the scan for the closest cluster bounds
//! `DS(G', G) >= L(G') - L(G) + ...` for each of them in a few operations and
//! evaluates only those whose bound beats the best distance so far.

mod distance;
mod finished;
mod oversize;
mod trie;

use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;
use rustc_hash::FxHashMap;
use serde::{Deserialize, Serialize};

use crate::algorithms::{details, Algorithm, Context, Outcome};
use crate::encode::QiTable;
use crate::error::{Error, Result};
use crate::partition::{Partition, SUPPRESSED};
use crate::privacy::{ClassView, Privacy};
use distance::{Span, UncertaintyLoss};
use finished::*;
use trie::*;

/// How clusters are published.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Generalisation {
    /// The paper's flexible generalisation: `[min-max]` ranges for ordered
    /// QIs, value sets for unordered ones; hierarchies are ignored.
    #[default]
    Flexible,
    /// Through the QIs' hierarchies (lowest common ancestors) where they have
    /// one, flexibly otherwise.
    Hierarchy,
}

/// How the distance between a growing cluster and a candidate (tuple or
/// finished cluster) counts the candidate's rows.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum ClusterDistance {
    /// The paper's `DS(G', G) = L(t_G', t12) + L(t_G, t12)`: clusters compare
    /// through their generalised tuples alone, whatever their sizes.
    #[default]
    Tuple,
    /// Each side weighted by its number of rows, as KACA's class distance
    /// (the KACA paper, Def. 8; `docs/SPEC.md` section 3):
    /// `|G'| L(t_G', t12) + |G| L(t_G, t12)`, the loss the join adds to
    /// the release.
    Class,
}

/// What happens to a finished cluster with room for two accepted classes
/// (at least twice the smallest class the models allow, `2k` for plain k).
///
/// The paper's growth overshoots k: a growing cluster swallows whole
/// finished clusters (`DS(G', G) < DS(t', G)`, which does not count the
/// rows of `G'`), and the leftovers, all of one sensitive value once the
/// rarer values run out, join their closest clusters. On Adult with l = 2
/// the mean class holds 2k rows at k = 10 and 2.8k at k = 100
/// (`RESULTS.md`, "L-clustering near k").
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Oversize {
    /// Cut the cluster in two, recursively, while both parts are accepted:
    /// Mondrian-like cuts of the cluster's rows, on the QI and at the
    /// position whose parts lose least (`|P1| L(P1) + |P2| L(P2)`, the
    /// paper's `L(D, D*)` of the two parts). Each part is published at its
    /// own generalisation, which lies inside the cluster's on every QI (a
    /// sub-range, a subset of values, a descendant in the hierarchy), so no
    /// row loses more than before: the split lowers the loss and the class
    /// sizes together. The default for that reason, although the paper
    /// publishes its clusters whole. Every part passes the same acceptance
    /// check as the clusters themselves (k, l-diversity, and whatever models
    /// the job has); with k alone, every class ends below `2k` rows.
    ///
    /// A cluster still that big afterwards lacks rows some model needs
    /// (with distinct l = 2 on a skewed column: a single row of the rarer
    /// value). It is cut together with its closest finished cluster (the
    /// paper's `DS`), and the parts replace both when their largest is
    /// smaller than the larger of the two and their `L(D, D*)` is not
    /// larger; rows of the pair may then trade generalisations, so this
    /// second pass bounds the loss of the pair, not of each row.
    #[default]
    Split,
    /// Publish clusters as the paper's growth leaves them.
    Keep,
}

/// L-clustering's parameters.
#[derive(Debug, Clone, Default, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct LClusteringParams {
    /// How clusters are published; default `flexible`.
    #[serde(default)]
    pub generalisation: Generalisation,
    /// How candidates' rows count in `DS`; default `tuple` (the paper).
    #[serde(default)]
    pub distance: ClusterDistance,
    /// What happens to finished clusters of at least `2k` rows; default
    /// `split` (see [`Oversize`]).
    #[serde(default)]
    pub oversize: Oversize,
}

/// The L-clustering algorithm.
#[derive(Debug, Clone, Default)]
pub struct LClustering {
    params: LClusteringParams,
}

impl LClustering {
    /// L-clustering with the given parameters.
    pub fn from_params(params: LClusteringParams) -> Self {
        LClustering { params }
    }
}

#[derive(Debug, Serialize)]
struct LClusteringDetails {
    generalisation: Generalisation,
    distance: ClusterDistance,
    oversize: Oversize,
    /// Clusters published.
    clusters: usize,
    /// Clusters started from a random tuple.
    started: usize,
    /// Tuples added to a growing cluster.
    tuples_added: usize,
    /// Finished clusters merged into a growing one (`DS(G',G) < DS(t',G)`).
    cluster_merges: usize,
    /// Tuples left over and given to their closest cluster.
    leftovers: usize,
    /// Clusters merged afterwards because a leftover broke them.
    repair_merges: usize,
    /// Clusters cut in parts by [`Oversize::Split`].
    clusters_split: usize,
    /// Clusters that could not be cut alone but were re-cut together with
    /// their closest cluster.
    pair_splits: usize,
    /// The largest cluster before the split (rows).
    largest_before_split: usize,
    /// Rows suppressed (only when no cluster can take them).
    suppressed: usize,
}

impl Algorithm for LClustering {
    fn name(&self) -> &'static str {
        "l-clustering"
    }

    fn run(&self, ctx: &Context<'_>) -> Result<Outcome> {
        ctx.privacy.check_feasible(ctx.table)?;
        let loss = UncertaintyLoss::new(
            ctx.table,
            self.params.generalisation == Generalisation::Hierarchy,
        );
        let mut run = Run::new(ctx, &loss, self.params.distance);
        run.cluster()?;
        run.distribute_leftovers();
        run.repair()?;
        if self.params.oversize == Oversize::Split {
            run.split_oversize()?;
        }
        let (partition, stats) = run.publish();
        Ok(Outcome {
            details: details(&LClusteringDetails {
                generalisation: self.params.generalisation,
                distance: self.params.distance,
                oversize: self.params.oversize,
                ..stats
            })?,
            partition,
        })
    }
}

/// A cluster and its generalised tuple.
#[derive(Debug, Clone)]
struct Cluster {
    rows: Vec<u32>,
    spans: Vec<Span>,
    /// Weighted loss of each span.
    attr_loss: Vec<f64>,
    /// `L` of the generalised tuple (sum of `attr_loss`).
    loss: f64,
}

impl Cluster {
    fn of_row(table: &QiTable, loss: &UncertaintyLoss, row: u32) -> Self {
        let n = loss.n_attrs();
        Cluster {
            rows: vec![row],
            spans: loss.row_spans(table, row),
            attr_loss: vec![0.0; n],
            loss: 0.0,
        }
    }

    /// The cluster of `rows` (at least one).
    fn of_rows(table: &QiTable, loss: &UncertaintyLoss, rows: Vec<u32>) -> Self {
        let mut c = Cluster::of_row(table, loss, rows[0]);
        for &r in &rows[1..] {
            c.add_row(table, loss, r);
        }
        c
    }

    fn add_row(&mut self, table: &QiTable, loss: &UncertaintyLoss, row: u32) {
        self.rows.push(row);
        for (q, code) in table.row(row).enumerate() {
            loss.add_code(q, &mut self.spans[q], code);
            self.attr_loss[q] = loss.span_loss(q, &self.spans[q]);
        }
        self.loss = self.attr_loss.iter().sum();
    }

    fn absorb(&mut self, loss: &UncertaintyLoss, other: Cluster) {
        self.rows.extend(other.rows);
        for (q, span) in other.spans.iter().enumerate() {
            loss.join_into(q, &mut self.spans[q], span);
            self.attr_loss[q] = loss.span_loss(q, &self.spans[q]);
        }
        self.loss = self.attr_loss.iter().sum();
    }
}

/// Buffers of [`Run::nearest_cluster`], kept across calls: the join loss of
/// the first indexed QI per slot, and `(bound, slot)` of the candidates.
type ScanScratch = (Vec<f64>, Vec<(f64, usize)>);

#[derive(Debug, Default)]
struct Stats {
    started: usize,
    tuples_added: usize,
    cluster_merges: usize,
    leftovers: usize,
    repair_merges: usize,
    clusters_split: usize,
    pair_splits: usize,
    largest_before_split: usize,
}

struct Run<'a> {
    table: &'a QiTable,
    privacy: &'a Privacy,
    cancel: &'a crate::cancel::Cancellation,
    loss: &'a UncertaintyLoss,
    trie: Trie,
    /// Remaining rows, with each row's position for O(1) removal.
    remaining: Vec<u32>,
    position: Vec<u32>,
    /// A row of every bucket (rows of a bucket share their sensitive values).
    representative: Vec<u32>,
    finished: Finished,
    suppressed: Vec<u32>,
    rng: ChaCha8Rng,
    stats: Stats,
    /// Scratch: per-depth cost tables.
    costs: Vec<Vec<f64>>,
    /// Scratch of the cluster scan.
    scratch: std::cell::RefCell<ScanScratch>,
    distance: ClusterDistance,
}

impl<'a> Run<'a> {
    fn new(ctx: &Context<'a>, loss: &'a UncertaintyLoss, distance: ClusterDistance) -> Self {
        let remaining = ctx.table.active_rows();
        let trie = Trie::new(ctx, &remaining);
        let trie_order = trie.order.clone();
        let mut position = vec![u32::MAX; ctx.table.n_rows()];
        for (i, &r) in remaining.iter().enumerate() {
            position[r as usize] = i as u32;
        }
        let mut representative = vec![0u32; trie.n_buckets];
        for &r in remaining.iter().rev() {
            representative[trie.bucket_of_row[r as usize] as usize] = r;
        }
        Run {
            table: ctx.table,
            privacy: ctx.privacy,
            cancel: ctx.cancel,
            loss,
            costs: vec![Vec::new(); ctx.table.n_qi()],
            trie,
            remaining,
            position,
            representative,
            finished: Finished::new(loss, &trie_order),
            suppressed: Vec::new(),
            rng: ChaCha8Rng::seed_from_u64(ctx.spec.algorithm.seed),
            stats: Stats::default(),
            scratch: Default::default(),
            distance,
        }
    }

    fn accepts(&self, rows: &[u32]) -> bool {
        self.privacy.accepts(ClassView {
            table: self.table,
            rows,
        })
    }

    fn take(&mut self, row: u32) {
        let i = self.position[row as usize] as usize;
        self.remaining.swap_remove(i);
        if let Some(&moved) = self.remaining.get(i) {
            self.position[moved as usize] = i as u32;
        }
        self.position[row as usize] = u32::MAX;
        self.trie.remove(row);
    }

    /// Step 2: clusters grown from random tuples while the remaining tuples
    /// could still form an accepted cluster.
    fn cluster(&mut self) -> Result<()> {
        while !self.remaining.is_empty() && self.accepts(&self.remaining) {
            let start = self.remaining[self.rng.gen_range(0..self.remaining.len())];
            self.take(start);
            self.stats.started += 1;
            let mut g = Cluster::of_row(self.table, self.loss, start);
            while !self.accepts(&g.rows) {
                self.cancel.check()?;
                let helpful = self.nearest_tuple(&g, true);
                let bound = helpful.map_or(f64::INFINITY, |(_, ds)| ds);
                match (helpful, self.nearest_cluster(&g, bound)) {
                    (_, Some((i, _))) => {
                        let other = self.finished.remove(i);
                        g.absorb(self.loss, other);
                        self.stats.cluster_merges += 1;
                    }
                    (Some((row, _)), None) => {
                        self.take(row);
                        g.add_row(self.table, self.loss, row);
                        self.stats.tuples_added += 1;
                    }
                    (None, None) => match self.nearest_tuple(&g, false) {
                        // Nothing helps any more: the closest tuple at all.
                        Some((row, _)) => {
                            self.take(row);
                            g.add_row(self.table, self.loss, row);
                            self.stats.tuples_added += 1;
                        }
                        // Everything is in G and G is still rejected.
                        None => return self.give_up(g.rows),
                    },
                }
            }
            self.finished.insert(g);
        }
        Ok(())
    }

    /// Suppresses rows no accepted cluster can hold, within the limit.
    fn give_up(&mut self, rows: Vec<u32>) -> Result<()> {
        let allowed = self.privacy.max_suppressed(self.table.n_rows());
        if self.suppressed.len() + rows.len() > allowed {
            return Err(Error::Unsatisfiable(format!(
                "l-clustering: {} rows cannot join any cluster that satisfies {} and the suppression limit allows {allowed}; lower the parameters or raise `privacy.suppression_limit`",
                rows.len(),
                self.privacy.describe()
            )));
        }
        self.suppressed.extend(rows);
        Ok(())
    }

    /// The remaining row whose addition to `g` costs least (`DS(t', G)`),
    /// among rows that help the models when `helpful_only`.
    fn nearest_tuple(&mut self, g: &Cluster, helpful_only: bool) -> Option<(u32, f64)> {
        if self.remaining.is_empty() {
            return None;
        }
        let trie = &self.trie;
        let n_qi = self.table.n_qi();
        let mut base = Vec::with_capacity(n_qi);
        for (d, &q) in trie.order.iter().enumerate() {
            let domain = self.table.columns()[q].domain_size();
            self.loss
                .code_costs(q, &g.spans[q], domain, &mut self.costs[d]);
            base.push(g.attr_loss[q]);
        }
        let mut rest = vec![0.0; n_qi + 1];
        for d in (0..n_qi).rev() {
            rest[d] = rest[d + 1] + base[d];
        }
        let filter = if !helpful_only {
            Filter::All
        } else if !trie.masks.is_empty() {
            let present = trie.masks[ROOT as usize];
            let mut mask = 0u64;
            for b in 0..trie.n_buckets {
                if present >> b & 1 == 1
                    && self.privacy.helps(
                        ClassView {
                            table: self.table,
                            rows: &g.rows,
                        },
                        self.representative[b],
                    )
                {
                    mask |= 1 << b;
                }
            }
            if mask == 0 {
                return None;
            }
            Filter::Mask(mask)
        } else {
            Filter::Lazy {
                privacy: self.privacy,
                table: self.table,
                rows: &g.rows,
                representative: &self.representative,
                memo: FxHashMap::default(),
            }
        };
        let mut search = Search {
            trie,
            costs: &self.costs,
            rest: &rest,
            base: &base,
            filter,
            best: f64::INFINITY,
            found: None,
            done: false,
        };
        search.visit(ROOT, 0, 0.0);
        let (leaf, bucket) = search.found?;
        let joined = search.best;
        let rows = &trie.leaf_rows[leaf as usize]
            .iter()
            .find(|(b, _)| *b == bucket)?
            .1;
        let row = *rows.iter().min()?;
        // DS(t', G) = L(t', t12) + w_G L(t_G, t12) = (1 + w_G) L(t12) - w_G L(t_G).
        let w = self.weight_of(g.rows.len() as f64);
        Some((row, (1.0 + w) * joined - w * g.loss))
    }

    /// The weight of a side of `DS` with `rows` rows: 1 for the paper's
    /// tuple distance, the rows for the class distance.
    fn weight_of(&self, rows: f64) -> f64 {
        match self.distance {
            ClusterDistance::Tuple => 1.0,
            ClusterDistance::Class => rows,
        }
    }

    /// The finished cluster `G'` with the smallest `DS(G', G)`, if it is
    /// below `bound`.
    ///
    /// With side weights `w` (1 each for the paper's distance, the rows for
    /// the class distance) and `J` the join,
    /// `DS(G', G) = w_G' (L(J) - L(G')) + w_G (L(J) - L(G))
    ///            = sum_q ((w_G' + w_G) L(J_q) - w_G' L(G'_q)) - w_G L(G)`.
    /// Every term is at least `w_G L(G'_q)`, so `w_G (L(G') - L(G))` plus the
    /// exact excess `(w_G' + w_G) (L(J_q) - L(G'_q))` of the indexed QIs
    /// bounds it from below, and is exact when every QI is indexed.
    ///
    /// A first pass bounds every cluster by its loss and the first indexed QI
    /// in one tight loop; the clusters below `bound` are then refined, the
    /// one with the smallest bound first, skipping any whose bound reaches
    /// the best distance found.
    fn nearest_cluster(&self, g: &Cluster, bound: f64) -> Option<(usize, f64)> {
        let f = &self.finished;
        if bound <= 0.0 || f.is_empty() {
            // DS >= 0: nothing beats a tuple at distance 0.
            return None;
        }
        let wg = self.weight_of(g.rows.len() as f64);
        let mut scratch = self.scratch.borrow_mut();
        let (joined, candidates) = &mut *scratch;
        candidates.clear();
        match f.indexed.first() {
            Some(&q) => {
                self.loss.join_loss_keys(q, &g.spans[q], &f.keys[0], joined);
                for (id, (&j, &own)) in joined.iter().zip(&f.key_loss[0]).enumerate() {
                    let wc = self.weight_of(f.size[id]);
                    let lb = wg * (f.loss[id] - g.loss) + (wg + wc) * (j - own);
                    if lb < bound {
                        candidates.push((lb, id));
                    }
                }
            }
            None => candidates.extend(
                f.loss
                    .iter()
                    .enumerate()
                    .map(|(id, &l)| (wg * (l - g.loss), id))
                    .filter(|&(lb, _)| lb < bound),
            ),
        }
        // The most promising cluster first, for a tight bound; then the rest
        // in slot order.
        let first = (0..candidates.len()).min_by(|&a, &b| {
            let (x, y) = (candidates[a], candidates[b]);
            x.0.total_cmp(&y.0).then(x.1.cmp(&y.1))
        })?;
        candidates.swap(0, first);
        let refined = usize::from(!f.indexed.is_empty());
        let mut best = bound;
        let mut found: Option<(usize, f64)> = None;
        for &(lb, id) in candidates.iter() {
            if lb >= best {
                continue;
            }
            let wc = self.weight_of(f.size[id]);
            let mut acc = lb;
            for (k, &q) in f.indexed.iter().enumerate().skip(refined) {
                let own = f.key_loss[k][id];
                acc += (wg + wc) * (self.loss.join_loss_key(q, &g.spans[q], f.keys[k][id]) - own);
                if acc >= best {
                    break;
                }
            }
            if !f.exact && acc < best {
                let c = f.get(id);
                acc = -wg * g.loss;
                for &q in &self.trie.order {
                    acc += (wg + wc) * self.loss.join_loss(q, &g.spans[q], &c.spans[q])
                        - wc * c.attr_loss[q];
                    if acc >= best {
                        break;
                    }
                }
            }
            // Ties go to the lower slot.
            if acc < best || (acc == best && found.is_some_and(|(i, _)| id < i)) {
                best = acc;
                found = Some((id, acc));
            }
        }
        found
    }

    /// The finished cluster closest to one tuple: smallest `DS(t', G_i)`
    /// (the tuple as a cluster of one row).
    fn nearest_cluster_to_row(&self, row: u32) -> Option<usize> {
        let single = Cluster::of_row(self.table, self.loss, row);
        self.nearest_cluster(&single, f64::INFINITY).map(|(i, _)| i)
    }

    /// Step 3: every leftover tuple joins its closest cluster.
    fn distribute_leftovers(&mut self) {
        let mut left = std::mem::take(&mut self.remaining);
        left.sort_unstable();
        self.stats.leftovers = left.len();
        if self.finished.is_empty() {
            self.remaining = left;
            return;
        }
        for row in left {
            self.position[row as usize] = u32::MAX;
            if let Some(i) = self.nearest_cluster_to_row(row) {
                let mut c = self.finished.remove(i);
                c.add_row(self.table, self.loss, row);
                self.finished.put_back(i, c);
            }
        }
    }

    /// Merges clusters the models reject (a leftover broke entropy or
    /// recursive diversity) into their closest cluster; suppresses what no
    /// cluster can hold.
    fn repair(&mut self) -> Result<()> {
        if !self.remaining.is_empty() {
            // No cluster was ever accepted: the rows can only be suppressed.
            let rows = std::mem::take(&mut self.remaining);
            return self.give_up(rows);
        }
        loop {
            self.cancel.check()?;
            let Some(i) = self
                .finished
                .iter()
                .find(|(_, c)| !self.accepts(&c.rows))
                .map(|(i, _)| i)
            else {
                break;
            };
            let bad = self.finished.remove(i);
            let Some((j, _)) = self.nearest_cluster(&bad, f64::INFINITY) else {
                return self.give_up(bad.rows);
            };
            let mut c = self.finished.remove(j);
            c.absorb(self.loss, bad);
            self.finished.put_back(j, c);
            self.stats.repair_merges += 1;
        }
        Ok(())
    }

    /// Step 4: the partition, one group per cluster.
    fn publish(self) -> (Partition, LClusteringDetails) {
        let mut group_of_row = vec![SUPPRESSED; self.table.n_rows()];
        let mut tuples = Vec::new();
        for (g, (_, c)) in self.finished.iter().enumerate() {
            for &r in &c.rows {
                group_of_row[r as usize] = g as u32;
            }
            tuples.push(c.spans.iter().map(|s| self.loss.cell(s)).collect());
        }
        let details = LClusteringDetails {
            generalisation: Generalisation::Flexible,
            distance: ClusterDistance::Tuple,
            oversize: Oversize::Split,
            clusters: tuples.len(),
            started: self.stats.started,
            tuples_added: self.stats.tuples_added,
            cluster_merges: self.stats.cluster_merges,
            leftovers: self.stats.leftovers,
            repair_merges: self.stats.repair_merges,
            clusters_split: self.stats.clusters_split,
            pair_splits: self.stats.pair_splits,
            largest_before_split: self.stats.largest_before_split,
            suppressed: self.suppressed.len(),
        };
        (
            Partition::with_tuples(self.table, group_of_row, tuples),
            details,
        )
    }
}
