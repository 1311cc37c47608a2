//! Mondrian: top-down multidimensional partitioning (LeFevre, DeWitt,
//! Ramakrishnan, "Mondrian multidimensional k-anonymity", ICDE 2006), the
//! baseline of the SBC thesis (section 2.4).
//!
//! A region (initially the whole table) is cut into parts on one QI:
//! ordered QIs (numeric, or categorical without a hierarchy, in value order)
//! at the median, categorical QIs with a hierarchy into the children of the
//! region's lowest common ancestor. A cut is made only when every part
//! satisfies the privacy models (k rows; l-diversity when asked); a region no
//! QI can cut becomes a group, published as its tightest generalisation
//! (local recoding).
//!
//! Choices beyond the paper, each a parameter:
//! - `cut = "widest"` is the paper's rule (the QI with the widest normalised
//!   range first); the default `cut = "least-loss"` tries every QI and keeps
//!   the allowed cut whose parts lose least granularity. On Adult (8 QIs,
//!   k = 10) it lowers granularity from 0.107 to 0.098 at about 4x the time
//!   of a still very fast run (see `BENCHMARKS.md`).
//! - `relaxed = true` (default): when no boundary between distinct values of
//!   an ordered QI leaves both parts acceptable, cut at the exact median,
//!   splitting rows with the median value between the parts (LeFevre's
//!   relaxed partitioning); `false` keeps regions strictly disjoint.
//! - `numeric = "ranges"` (default) publishes and cuts numeric QIs as their
//!   own `[min-max]` ranges even when they have an interval hierarchy;
//!   `"hierarchy"` cuts them into hierarchy children and publishes nodes.
//! - Hierarchy children too small to stand alone are pooled into one part
//!   (or, when the pool itself is too small, into the smallest large child),
//!   so one rare country does not block the cut of a whole continent.
//! - `top_up = true` (default false): a pool too small to stand alone takes
//!   only the rows it lacks from one large child, those that widen its other
//!   cells least (KACA's stub, Def. 11 of the KACA paper; the bottom-up merge
//!   of small parts of Xu et al., "Utility-based anonymization using local
//!   recoding", KDD 2006), instead of generalising a whole child with it; a
//!   region with one large child and a few rare ones is then still cut.
//!   These cuts count as relaxed cuts (identical rows may end up apart).
//!
//! - `tidy = true` (default false): after the cuts, the rows that alone
//!   widen a group's cell on a hierarchical QI (those outside its largest
//!   child, when the group can spare them all) move to groups near it in
//!   cut order whose cells already cover them on every QI, when the group's
//!   narrower cells save more than the rows cost in their new groups (a
//!   local search in the spirit of KACA's refinement; a few passes).
//!
//! The `mondrian-hierarchy` algorithm is Mondrian with `cut = "widest"`,
//! `numeric = "hierarchy"`, `top_up = true` and `tidy = true`: every
//! published value is a hierarchy node ([`Mondrian::hierarchy_bound`]).
//!
//! Sorting a region once per candidate cut keeps a run at O(m n log^2 n);
//! the parts of large regions are cut in parallel (rayon), with the same
//! result for any thread count.

use std::cell::RefCell;
use std::sync::atomic::{AtomicUsize, Ordering};

use rayon::prelude::*;
use serde::{Deserialize, Serialize};

use crate::algorithms::{details, Algorithm, Context, Outcome};
use crate::codes::{with_codes, Code};
use crate::encode::{QiColumn, QiTable};
use crate::error::{Error, Result};
use crate::hierarchy::NodeId;
use crate::partition::{NumericCells, Partition, SUPPRESSED};
use crate::privacy::{ClassView, Privacy};
use crate::spec::Kind;

/// How Mondrian picks the QI to cut.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Deserialize, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum CutChoice {
    /// The allowed cut whose parts lose the least granularity.
    #[default]
    LeastLoss,
    /// The QI with the widest normalised range that can be cut (the paper).
    Widest,
}

/// Mondrian's parameters.
#[derive(Debug, Clone, Deserialize, Serialize)]
#[serde(deny_unknown_fields, default)]
pub struct MondrianParams {
    /// How the QI to cut is chosen.
    pub cut: CutChoice,
    /// Whether ordered QIs may be cut at the exact median when no boundary
    /// between distinct values works.
    pub relaxed: bool,
    /// How numeric QIs with an interval hierarchy are cut and published.
    pub numeric: NumericCells,
    /// Whether small hierarchy children too few to stand alone are topped
    /// up with the fitting rows of a large child (a stub, as KACA's)
    /// instead of merged with the whole smallest large child.
    pub top_up: bool,
    /// Whether, after the cuts, the rows that alone widen a group's cell
    /// move to a nearby group whose cells already cover them.
    pub tidy: bool,
}

impl Default for MondrianParams {
    fn default() -> Self {
        MondrianParams {
            cut: CutChoice::LeastLoss,
            relaxed: true,
            numeric: NumericCells::Ranges,
            top_up: false,
            tidy: false,
        }
    }
}

/// The Mondrian algorithm.
#[derive(Debug, Clone)]
pub struct Mondrian {
    params: MondrianParams,
    name: &'static str,
}

impl Default for Mondrian {
    fn default() -> Self {
        Mondrian::from_params(MondrianParams::default())
    }
}

/// The registered name of the hierarchy-bound preset
/// ([`Mondrian::hierarchy_bound`]).
pub const HIERARCHY_BOUND: &str = "mondrian-hierarchy";

impl Mondrian {
    /// Mondrian with the given parameters.
    pub fn from_params(params: MondrianParams) -> Self {
        Mondrian {
            params,
            name: "mondrian",
        }
    }

    /// The hierarchy-bound local recoding of issue 19: every published
    /// value is a node of the QI's hierarchy (numeric QIs with intervals
    /// included, `numeric = "hierarchy"`), regions are cut into hierarchy
    /// children of the widest QI (`cut = "widest"`, the paper's rule), and
    /// small children are topped up to k with a stub of a large child
    /// (`top_up = true`, as Xu et al., KDD 2006, merge small parts bottom-up
    /// after a top-down specialisation), and the rows that alone widen a
    /// group move to a nearby group that already covers them when that
    /// lowers the loss (`tidy = true`). On Adult (8 QIs) it loses less
    /// granularity than `numeric = "hierarchy"` with the default settings at
    /// every k from 2 to 100, in less time (`BENCHMARKS.md`).
    /// The job's parameters override these defaults.
    ///
    /// # Errors
    /// [`Error::Spec`] for a parameter Mondrian does not know or a bad value.
    pub fn hierarchy_bound(spec: &crate::spec::AlgorithmSpec) -> Result<Self> {
        let mut spec = spec.clone();
        for (key, value) in [("cut", "widest"), ("numeric", "hierarchy")] {
            spec.params
                .entry(key.to_string())
                .or_insert_with(|| serde_json::Value::String(value.to_string()));
        }
        for key in ["top_up", "tidy"] {
            spec.params
                .entry(key.to_string())
                .or_insert(serde_json::Value::Bool(true));
        }
        Ok(Mondrian {
            params: spec.params()?,
            name: HIERARCHY_BOUND,
        })
    }
}

#[derive(Debug, Serialize)]
struct MondrianDetails {
    params: MondrianParams,
    cuts: usize,
    relaxed_cuts: usize,
    groups: usize,
    tidied_rows: usize,
}

impl Algorithm for Mondrian {
    fn name(&self) -> &'static str {
        self.name
    }

    fn run(&self, ctx: &Context<'_>) -> Result<Outcome> {
        ctx.privacy.check_feasible(ctx.table)?;
        let mut rows = ctx.table.active_rows();
        let cutter = Cutter {
            table: ctx.table,
            privacy: ctx.privacy,
            params: &self.params,
            cuts: AtomicUsize::new(0),
            relaxed_cuts: AtomicUsize::new(0),
            cancel: ctx.cancel,
        };
        // Mondrian publishes every active row and only cuts regions whose
        // parts satisfy the model, so the whole input must satisfy it; a
        // model that is not monotone with suppression (entropy l-diversity)
        // passes the feasibility check whenever rows may be suppressed.
        if !rows.is_empty() && !cutter.accepts(&rows) {
            return Err(Error::Unsatisfiable(format!(
                "Mondrian suppresses no rows, so the whole input must satisfy {} and it does not; choose an algorithm that suppresses (datafly, incognito, kaca, l-clustering) or weaken the model",
                ctx.privacy.describe()
            )));
        }
        let regions = if rows.is_empty() {
            Vec::new()
        } else {
            cutter.split(&mut rows)
        };
        ctx.cancel.check()?;
        let mut groups: Vec<Vec<u32>> = regions
            .iter()
            .map(|&(start, end)| rows[start..end].to_vec())
            .collect();
        let mut moved = 0;
        if self.params.tidy {
            for _ in 0..TIDY_PASSES {
                let m = cutter.tidy(&mut groups);
                moved += m;
                if m == 0 {
                    break;
                }
            }
        }
        let mut group_of_row = vec![SUPPRESSED; ctx.table.n_rows()];
        for (g, members) in groups.iter().enumerate() {
            for &r in members {
                group_of_row[r as usize] = g as u32;
            }
        }
        let partition = Partition::tightest_with(ctx.table, group_of_row, self.params.numeric);
        Ok(Outcome {
            details: details(&MondrianDetails {
                params: self.params.clone(),
                cuts: cutter.cuts.into_inner(),
                relaxed_cuts: cutter.relaxed_cuts.into_inner(),
                groups: regions.len(),
                tidied_rows: moved,
            })?,
            partition,
        })
    }
}

struct Cutter<'a> {
    table: &'a QiTable,
    privacy: &'a Privacy,
    params: &'a MondrianParams,
    cuts: AtomicUsize,
    relaxed_cuts: AtomicUsize,
    cancel: &'a crate::cancel::Cancellation,
}

/// Regions smaller than this are cut on the current thread; larger ones
/// hand their parts to rayon. The regions come out in the same order
/// whatever the thread count.
const PARALLEL_REGION: usize = 4096;

thread_local! {
    /// Scratch for counting distinct codes: `seen[c] == stamp` when seen.
    static SEEN: RefCell<(Vec<u32>, u32)> = const { RefCell::new((Vec::new(), 0)) };
}

/// An allowed cut: the parts' lengths, in the order the rows were left.
struct Cut {
    parts: Vec<usize>,
    relaxed: bool,
}

impl Cutter<'_> {
    /// Cuts `rows` recursively; returns the final regions as index ranges of
    /// `rows`, in row order of the depth-first traversal.
    fn split(&self, rows: &mut [u32]) -> Vec<(usize, usize)> {
        // Cancelled: stop cutting; `run` reports the cancel, never this region.
        if self.cancel.is_cancelled() {
            return vec![(0, rows.len())];
        }
        let Some(cut) = self.best_cut(rows) else {
            return vec![(0, rows.len())];
        };
        self.cuts.fetch_add(1, Ordering::Relaxed);
        self.relaxed_cuts
            .fetch_add(cut.relaxed as usize, Ordering::Relaxed);
        let mut parts: Vec<(usize, &mut [u32])> = Vec::with_capacity(cut.parts.len());
        let mut rest = rows;
        let mut offset = 0;
        for len in cut.parts {
            let (part, tail) = rest.split_at_mut(len);
            parts.push((offset, part));
            offset += len;
            rest = tail;
        }
        let nested: Vec<Vec<(usize, usize)>> = if offset >= PARALLEL_REGION {
            parts
                .into_par_iter()
                .map(|(o, part)| shift(self.split(part), o))
                .collect()
        } else {
            parts
                .into_iter()
                .map(|(o, part)| shift(self.split(part), o))
                .collect()
        };
        nested.into_iter().flatten().collect()
    }

    fn accepts(&self, rows: &[u32]) -> bool {
        self.privacy.accepts(ClassView {
            table: self.table,
            rows,
        })
    }

    /// Whether the QI is cut into hierarchy children (else at the median).
    fn by_children(&self, col: &QiColumn) -> bool {
        col.hierarchy().is_some()
            && (col.kind() == Kind::Categorical || self.params.numeric == NumericCells::Hierarchy)
    }

    /// Granularity of the tightest cell of `rows` on one QI, as published.
    fn column_loss(&self, rows: &[u32], q: usize) -> f64 {
        let col = &self.table.columns()[q];
        let d = col.distinct();
        if d <= 1 {
            return 0.0;
        }
        let codes = col.codes();
        let m = if col.kind() == Kind::Categorical && col.hierarchy().is_none() {
            SEEN.with_borrow_mut(|(seen, stamp)| {
                if seen.len() < col.domain_size() {
                    seen.resize(col.domain_size(), 0);
                }
                *stamp = stamp.wrapping_add(1);
                if *stamp == 0 {
                    seen.fill(0);
                    *stamp = 1;
                }
                let mut m = 0;
                with_codes!(codes, |codes| {
                    for &r in rows {
                        let c = u32::from(codes[r as usize]) as usize;
                        if seen[c] != *stamp {
                            seen[c] = *stamp;
                            m += 1;
                        }
                    }
                });
                m
            })
        } else {
            let (lo, hi) = with_codes!(codes, |c| min_max(rows, c));
            match col.hierarchy() {
                Some(h) if self.by_children(col) => {
                    let r = h.leaves(h.lca(NodeId(lo), NodeId(hi)));
                    col.observed_in(r.start, r.end)
                }
                _ => col.observed_in(lo, hi + 1),
            }
        };
        (m.saturating_sub(1)) as f64 / (d - 1) as f64
    }

    /// The normalised width of a region on a QI (the paper's choice rule):
    /// range over the attribute's range for numeric QIs, covered share of
    /// the distinct values otherwise.
    fn width(&self, rows: &[u32], q: usize) -> f64 {
        let col = &self.table.columns()[q];
        if col.kind() == Kind::Numeric && !self.by_children(col) {
            let (lo, hi) = with_codes!(col.codes(), |c| min_max(rows, c));
            let (min, max) = col.min_max();
            return match (col.value(lo), col.value(hi)) {
                (Some(a), Some(b)) if max > min => (b - a) / (max - min),
                _ => 0.0,
            };
        }
        self.column_loss(rows, q)
    }

    fn try_cut(&self, rows: &mut [u32], q: usize) -> Option<Cut> {
        if self.by_children(&self.table.columns()[q]) {
            self.cut_by_children(rows, q)
        } else {
            self.cut_at_median(rows, q)
        }
    }

    fn best_cut(&self, rows: &mut [u32]) -> Option<Cut> {
        let n_qi = self.table.n_qi();
        let mut widths: Vec<(f64, usize)> = (0..n_qi)
            .map(|q| (self.width(rows, q), q))
            .filter(|(w, _)| *w > 0.0)
            .collect();
        widths.sort_by(|a, b| b.0.total_cmp(&a.0).then(a.1.cmp(&b.1)));
        match self.params.cut {
            CutChoice::Widest => widths.into_iter().find_map(|(_, q)| self.try_cut(rows, q)),
            CutChoice::LeastLoss => {
                let mut best: Option<(f64, usize)> = None;
                for &(_, q) in &widths {
                    if let Some(cut) = self.try_cut(rows, q) {
                        let mut loss = 0.0;
                        let mut s = 0;
                        for len in cut.parts {
                            let part = &rows[s..s + len];
                            loss += (0..n_qi).map(|c| self.column_loss(part, c)).sum::<f64>()
                                * len as f64;
                            s += len;
                        }
                        if best.is_none_or(|(b, _)| loss < b - 1e-9) {
                            best = Some((loss, q));
                        }
                    }
                }
                let (_, q) = best?;
                self.try_cut(rows, q)
            }
        }
    }

    /// Median cut of an ordered QI: the boundary between distinct values
    /// closest to the middle that leaves both parts acceptable; failing that
    /// (relaxed mode) the exact median.
    fn cut_at_median(&self, rows: &mut [u32], q: usize) -> Option<Cut> {
        let mut boundaries =
            with_codes!(self.table.columns()[q].codes(), |c| sort_by_code(rows, c))?;
        let n = rows.len();
        let mid = n / 2;
        boundaries.sort_by_key(|&b| (b.abs_diff(mid), b));
        for b in boundaries {
            let (left, right) = rows.split_at(b);
            if self.accepts(left) && self.accepts(right) {
                return Some(Cut {
                    parts: vec![b, n - b],
                    relaxed: false,
                });
            }
        }
        if self.params.relaxed {
            let (left, right) = rows.split_at(mid);
            if self.accepts(left) && self.accepts(right) {
                return Some(Cut {
                    parts: vec![mid, n - mid],
                    relaxed: true,
                });
            }
        }
        None
    }

    /// Cut of a hierarchical QI into the children of the region's lowest
    /// common ancestor; children too small on their own are pooled.
    fn cut_by_children(&self, rows: &mut [u32], q: usize) -> Option<Cut> {
        let col = &self.table.columns()[q];
        let h = col.hierarchy()?;
        let codes = col.codes();
        let (lo, hi) = with_codes!(codes, |c| min_max(rows, c));
        let node = h.lca(NodeId(lo), NodeId(hi));
        let starts: Vec<u32> = h.children(node).map(|c| h.leaves(c).start).collect();
        if starts.len() < 2 {
            return None;
        }
        let runs = with_codes!(codes, |c| runs_by_child(rows, c, &starts));
        let (big, small): (Vec<_>, Vec<_>) =
            runs.iter().partition(|&&(a, b)| self.accepts(&rows[a..b]));
        let mut groups: Vec<Vec<(usize, usize)>> = big.into_iter().map(|r| vec![r]).collect();
        if !small.is_empty() {
            let pool: Vec<u32> = small
                .iter()
                .flat_map(|&(a, b)| rows[a..b].iter().copied())
                .collect();
            if self.accepts(&pool) {
                groups.push(small);
            } else if let Some(cut) = self
                .params
                .top_up
                .then(|| self.top_up(rows, q, &groups, &pool))
                .flatten()
            {
                return Some(cut);
            } else {
                let size = |g: &Vec<(usize, usize)>| g.iter().map(|(a, b)| b - a).sum::<usize>();
                let smallest = (0..groups.len()).min_by_key(|&i| (size(&groups[i]), i))?;
                groups[smallest].extend(small);
                let merged: Vec<u32> = groups[smallest]
                    .iter()
                    .flat_map(|&(a, b)| rows[a..b].iter().copied())
                    .collect();
                // Size-only models accept any superset of an accepted part;
                // entropy and recursive l-diversity need not.
                if !self.accepts(&merged) {
                    return None;
                }
            }
        }
        if groups.len() < 2 {
            return None;
        }
        let reordered: Vec<u32> = groups
            .iter()
            .flat_map(|g| g.iter().flat_map(|&(a, b)| rows[a..b].iter().copied()))
            .collect();
        rows.copy_from_slice(&reordered);
        Some(Cut {
            parts: groups
                .iter()
                .map(|g| g.iter().map(|(a, b)| b - a).sum())
                .collect(),
            relaxed: false,
        })
    }
}

impl Cutter<'_> {
    /// The pool of small hierarchy children, topped up to an acceptable part
    /// with the rows of one large child that widen the pool's cells least on
    /// the other QIs (the stub of the KACA paper, Def. 11: only the rows the
    /// pool needs are generalised with it; Xu et al., KDD 2006, merge small
    /// parts bottom-up the same way). The donor keeps its other rows, tight
    /// on `q`, so a region whose small children cannot stand alone is still
    /// cut. `groups` are the large children (one run each); `None` when no
    /// large child can spare the rows or the models reject a part.
    fn top_up(
        &self,
        rows: &mut [u32],
        q: usize,
        groups: &[Vec<(usize, usize)>],
        pool: &[u32],
    ) -> Option<Cut> {
        let k = self.privacy.min_class_size().max(1);
        let need = k.checked_sub(pool.len()).filter(|&n| n > 0)?;
        let bounds: Vec<(u32, u32)> = (0..self.table.n_qi())
            .map(|c| with_codes!(self.table.columns()[c].codes(), |x| min_max(pool, x)))
            .collect();
        // The donor: the large child whose `need` cheapest rows cost least.
        let mut best: Option<(f64, usize, Vec<u32>)> = None;
        for (i, g) in groups.iter().enumerate() {
            let (a, b) = g[0];
            if b - a < need + k {
                continue;
            }
            let mut costed: Vec<(f64, u32)> = rows[a..b]
                .iter()
                .map(|&r| (self.widening(r, q, &bounds), r))
                .collect();
            costed.select_nth_unstable_by(need - 1, |x, y| x.0.total_cmp(&y.0).then(x.1.cmp(&y.1)));
            let cost: f64 = costed[..need].iter().map(|x| x.0).sum();
            if best.as_ref().is_none_or(|(c, _, _)| cost < *c - 1e-12) {
                let mut taken: Vec<u32> = costed[..need].iter().map(|x| x.1).collect();
                taken.sort_unstable();
                best = Some((cost, i, taken));
            }
        }
        let (_, donor, taken) = best?;
        let (a, b) = groups[donor][0];
        let rest: Vec<u32> = rows[a..b]
            .iter()
            .copied()
            .filter(|r| taken.binary_search(r).is_err())
            .collect();
        let mut topped: Vec<u32> = pool.to_vec();
        topped.extend_from_slice(&taken);
        if !self.accepts(&rest) || !self.accepts(&topped) {
            return None;
        }
        let mut reordered: Vec<u32> = Vec::with_capacity(rows.len());
        let mut parts = Vec::with_capacity(groups.len() + 1);
        for (i, g) in groups.iter().enumerate() {
            if i == donor {
                reordered.extend_from_slice(&rest);
                parts.push(rest.len());
            } else {
                let (a, b) = g[0];
                reordered.extend_from_slice(&rows[a..b]);
                parts.push(b - a);
            }
        }
        reordered.extend_from_slice(&topped);
        parts.push(topped.len());
        rows.copy_from_slice(&reordered);
        Some(Cut {
            parts,
            relaxed: true,
        })
    }

    /// How much adding row `r` widens cells bounded by `bounds` (smallest
    /// and largest code per QI), in granularity summed over the QIs but `q`.
    fn widening(&self, r: u32, q: usize, bounds: &[(u32, u32)]) -> f64 {
        let mut cost = 0.0;
        for (c, col) in self.table.columns().iter().enumerate() {
            let d = col.distinct();
            if c == q || d <= 1 {
                continue;
            }
            let x: u32 = with_codes!(col.codes(), |codes| codes[r as usize].into());
            let (lo, hi) = bounds[c];
            if lo <= x && x <= hi {
                continue;
            }
            let covered = |lo: u32, hi: u32| match col.hierarchy() {
                Some(h) if self.by_children(col) => {
                    let l = h.leaves(h.lca(NodeId(lo), NodeId(hi)));
                    col.observed_in(l.start, l.end)
                }
                _ => col.observed_in(lo, hi + 1),
            };
            let before = covered(lo, hi);
            let after = covered(lo.min(x), hi.max(x));
            cost += (after - before) as f64 / (d - 1) as f64;
        }
        cost
    }
}

/// Groups this many positions either side of a group (in cut order, so
/// mostly its neighbours in the cut tree) are searched for a new home.
const TIDY_WINDOW: usize = 256;
/// Most tidying passes; each moves only rows whose move lowers the loss.
const TIDY_PASSES: usize = 4;

impl Cutter<'_> {
    /// The published cell of `rows` on every QI as an inclusive code range:
    /// the leaves of the lowest common ancestor for QIs cut into children,
    /// the smallest and largest code otherwise.
    fn cells(&self, rows: &[u32], codes: &[Vec<u32>]) -> Vec<(u32, u32)> {
        self.table
            .columns()
            .iter()
            .zip(codes)
            .map(|(col, c)| {
                let (lo, hi) = rows.iter().fold((u32::MAX, 0), |(lo, hi), &r| {
                    (lo.min(c[r as usize]), hi.max(c[r as usize]))
                });
                match col.hierarchy() {
                    Some(h) if self.by_children(col) => {
                        let l = h.leaves(h.lca(NodeId(lo), NodeId(hi)));
                        (l.start, l.end - 1)
                    }
                    _ => (lo, hi),
                }
            })
            .collect()
    }

    /// Moves the rows that alone widen a group's cell on some QI (those
    /// outside its largest hierarchy child, when the group can spare them
    /// all) to nearby groups whose cells already cover them on every QI:
    /// the group's cell narrows and no other cell widens. Returns the rows
    /// moved.
    fn tidy(&self, groups: &mut [Vec<u32>]) -> usize {
        let k = self.privacy.min_class_size().max(1);
        let codes: Vec<Vec<u32>> = self
            .table
            .columns()
            .iter()
            .map(|col| with_codes!(col.codes(), |c| c.iter().map(|&x| x.into()).collect()))
            .collect();
        let mut cells: Vec<Vec<(u32, u32)>> =
            groups.iter().map(|g| self.cells(g, &codes)).collect();
        let cost = |cell: &[(u32, u32)]| -> f64 {
            cell.iter()
                .zip(self.table.columns())
                .map(|(&(lo, hi), col)| {
                    let d = col.distinct();
                    if d <= 1 {
                        return 0.0;
                    }
                    (col.observed_in(lo, hi + 1).saturating_sub(1)) as f64 / (d - 1) as f64
                })
                .sum()
        };
        let mut costs: Vec<f64> = cells.iter().map(|c| cost(c)).collect();
        let covers = |cell: &[(u32, u32)], r: u32| {
            cell.iter()
                .zip(&codes)
                .all(|(&(lo, hi), c)| lo <= c[r as usize] && c[r as usize] <= hi)
        };
        let mut moved = 0;
        for g in 0..groups.len() {
            for q in 0..self.table.n_qi() {
                let col = &self.table.columns()[q];
                let Some(h) = col.hierarchy().filter(|_| self.by_children(col)) else {
                    continue;
                };
                let n = groups[g].len();
                if n <= k {
                    break;
                }
                let (lo, hi) = cells[g][q];
                if lo == hi {
                    continue;
                }
                let node = h.lca(NodeId(lo), NodeId(hi));
                let starts: Vec<u32> = h.children(node).map(|c| h.leaves(c).start).collect();
                let child_of = |r: u32| starts.partition_point(|&s| s <= codes[q][r as usize]) - 1;
                let mut counts = vec![0usize; starts.len()];
                for &r in &groups[g] {
                    counts[child_of(r)] += 1;
                }
                let (big, &c) = counts
                    .iter()
                    .enumerate()
                    .max_by_key(|&(i, &c)| (c, std::cmp::Reverse(i)))
                    .expect("a node with children");
                if n - c > n - k || c == n {
                    continue;
                }
                let lo_g = g.saturating_sub(TIDY_WINDOW);
                let hi_g = (g + TIDY_WINDOW + 1).min(groups.len());
                let mut homes: Vec<(u32, usize)> = Vec::new();
                for &r in &groups[g] {
                    if child_of(r) == big {
                        continue;
                    }
                    let Some(to) = (lo_g..hi_g)
                        .filter(|&o| o != g && covers(&cells[o], r))
                        .min_by(|&a, &b| costs[a].total_cmp(&costs[b]).then(a.cmp(&b)))
                    else {
                        break;
                    };
                    homes.push((r, to));
                }
                if homes.len() != n - c {
                    continue;
                }
                let stay: Vec<u32> = groups[g]
                    .iter()
                    .copied()
                    .filter(|&r| child_of(r) == big)
                    .collect();
                let narrowed = self.cells(&stay, &codes);
                let saving = n as f64 * costs[g]
                    - stay.len() as f64 * cost(&narrowed)
                    - homes.iter().map(|&(_, to)| costs[to]).sum::<f64>();
                if saving <= 1e-9 || !self.accepts(&stay) {
                    continue;
                }
                let mut ok = true;
                let mut after: Vec<(usize, Vec<u32>)> = Vec::new();
                for &(_, to) in &homes {
                    if after.iter().any(|(o, _)| *o == to) {
                        continue;
                    }
                    let mut joined = groups[to].clone();
                    joined.extend(homes.iter().filter(|h| h.1 == to).map(|h| h.0));
                    if !self.accepts(&joined) {
                        ok = false;
                        break;
                    }
                    after.push((to, joined));
                }
                if !ok {
                    continue;
                }
                moved += homes.len();
                for (to, joined) in after {
                    groups[to] = joined;
                }
                costs[g] = cost(&narrowed);
                cells[g] = narrowed;
                groups[g] = stay;
            }
        }
        moved
    }
}

fn shift(regions: Vec<(usize, usize)>, by: usize) -> Vec<(usize, usize)> {
    regions.into_iter().map(|(a, b)| (a + by, b + by)).collect()
}

/// Smallest and largest code of `rows`.
fn min_max<T: Code>(rows: &[u32], codes: &[T]) -> (u32, u32) {
    rows.iter().fold((u32::MAX, 0), |(lo, hi), &r| {
        let c: u32 = codes[r as usize].into();
        (lo.min(c), hi.max(c))
    })
}

/// Sorts `rows` by code, then row, and gives the positions where the code
/// changes; `None` when every row has the same code.
fn sort_by_code<T: Code>(rows: &mut [u32], codes: &[T]) -> Option<Vec<usize>> {
    rows.sort_unstable_by_key(|&r| (codes[r as usize], r));
    let n = rows.len();
    if codes[rows[0] as usize] == codes[rows[n - 1] as usize] {
        return None;
    }
    Some(
        (1..n)
            .filter(|&i| codes[rows[i] as usize] != codes[rows[i - 1] as usize])
            .collect(),
    )
}

/// Sorts `rows` by the hierarchy child their code falls in (`starts`: each
/// child's first leaf, ascending), then by row, and gives each child's run
/// of positions.
fn runs_by_child<T: Code>(rows: &mut [u32], codes: &[T], starts: &[u32]) -> Vec<(usize, usize)> {
    let child_of = |r: u32| starts.partition_point(|&s| s <= codes[r as usize].into()) - 1;
    rows.sort_unstable_by_key(|&r| (child_of(r), r));
    let mut runs: Vec<(usize, usize)> = Vec::new();
    let mut s = 0;
    for i in 1..=rows.len() {
        if i == rows.len() || child_of(rows[i]) != child_of(rows[i - 1]) {
            runs.push((s, i));
            s = i;
        }
    }
    runs
}
