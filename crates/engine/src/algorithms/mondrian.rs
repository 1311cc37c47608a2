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
//! - `residue = true` (default false): small hierarchy children are not
//!   pooled or topped up within their region but deferred to a residue of
//!   the whole table, cut again in further passes where rows with the same
//!   rare values meet (ARX's iterative local recoding; see `mondrian/residue.rs`).
//! - `cut = "gain-per-bit"`: the cut that saves the most granularity per
//!   bit of region it spends (`mondrian/gain.rs`).
//!
//! The `mondrian-hierarchy` algorithm is Mondrian with
//! `cut = "gain-per-bit"`, `numeric = "hierarchy"`, `residue = true`,
//! `top_up = true` (for the last residue) and `tidy = true`: every
//! published value is a hierarchy node ([`Mondrian::hierarchy_bound`]).
//!
//! Each candidate cut orders a region by counting its codes (no comparison
//! sort), and one pass over a region gives the code ranges of every
//! candidate's parts, so a level of cuts costs a few passes per QI plus m^2
//! table updates per row; the parts of large regions are cut in parallel
//! (rayon), with the same result for any thread count.

use std::cell::RefCell;
use std::sync::atomic::{AtomicUsize, Ordering};

use rayon::prelude::*;
use serde::{Deserialize, Serialize};

use crate::algorithms::{details, Algorithm, Context, Outcome};
use crate::codes::{with_codes, Code, Codes};
use crate::encode::{QiColumn, QiTable};
use crate::error::{Error, Result};
use crate::hierarchy::NodeId;
use crate::partition::{NumericCells, Partition, SUPPRESSED};
use crate::privacy::{ClassView, Privacy};
use crate::spec::Kind;

mod gain;
mod residue;

/// How Mondrian picks the QI to cut.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Deserialize, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum CutChoice {
    /// The allowed cut whose parts lose the least granularity.
    #[default]
    LeastLoss,
    /// The QI with the widest normalised range that can be cut (the paper).
    Widest,
    /// The allowed cut that saves the most loss per bit of the region it
    /// spends (see `mondrian/gain.rs`).
    GainPerBit,
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
    /// Whether small hierarchy children too few to stand alone are deferred
    /// to a table-wide residue, cut again after the pass (see `mondrian/residue.rs`),
    /// instead of pooled or topped up within their region.
    pub residue: bool,
}

impl Default for MondrianParams {
    fn default() -> Self {
        MondrianParams {
            cut: CutChoice::LeastLoss,
            relaxed: true,
            numeric: NumericCells::Ranges,
            top_up: false,
            tidy: false,
            residue: false,
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
    /// children of the QI whose cut saves the most loss per bit of region
    /// (`cut = "gain-per-bit"`), small children are deferred to a residue
    /// of the whole table that later passes cut again (`residue = true`,
    /// ARX's iterative local recoding), the last residue's small children
    /// are topped up to k with a stub of a large child (`top_up = true`, as
    /// Xu et al., KDD 2006, merge small parts bottom-up after a top-down
    /// specialisation), and the rows that alone widen a group move to a
    /// nearby group that already covers them when that lowers the loss
    /// (`tidy = true`). On Adult (8 QIs) it loses less
    /// granularity than `numeric = "hierarchy"` with the default settings at
    /// every k from 2 to 100, in less time (`BENCHMARKS.md`).
    /// The job's parameters override these defaults.
    ///
    /// # Errors
    /// [`Error::Spec`] for a parameter Mondrian does not know or a bad value.
    pub fn hierarchy_bound(spec: &crate::spec::AlgorithmSpec) -> Result<Self> {
        let mut spec = spec.clone();
        for (key, value) in [("cut", "gain-per-bit"), ("numeric", "hierarchy")] {
            spec.params
                .entry(key.to_string())
                .or_insert_with(|| serde_json::Value::String(value.to_string()));
        }
        for key in ["top_up", "tidy", "residue"] {
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
    #[serde(skip_serializing_if = "Option::is_none")]
    residue: Option<residue::ResidueStats>,
}

impl Algorithm for Mondrian {
    fn name(&self) -> &'static str {
        self.name
    }

    fn top_down_cuts(&self) -> Option<&MondrianParams> {
        Some(&self.params)
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
            stop_at: 0,
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
        let (mut groups, residue) = if self.params.residue {
            let (groups, stats) = cutter.split_gathering(rows);
            (groups, Some(stats))
        } else {
            let regions = if rows.is_empty() {
                Vec::new()
            } else {
                cutter.split(&mut rows)
            };
            let groups: Vec<Vec<u32>> = regions
                .iter()
                .map(|&(start, end)| rows[start..end].to_vec())
                .collect();
            (groups, None)
        };
        ctx.cancel.check()?;
        let n_regions = groups.len();
        let mut moved = 0;
        if self.params.tidy {
            moved = cutter.tidy(&mut groups);
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
                groups: n_regions,
                tidied_rows: moved,
                residue,
            })?,
            partition,
        })
    }
}

/// The blocks of a block-wise run (`partitioned`): `rows` cut as Mondrian
/// with `params` cuts them, but only until a region has at most
/// `block_rows` rows (a region no QI can cut stays one block, whatever its
/// size). Mondrian run on each block then continues these very cuts, so a
/// block-wise Mondrian publishes the whole-table partition; other
/// algorithms get blocks whose cells follow the hierarchies. Regions come
/// out in cut order, whatever the number of threads.
pub(crate) fn blocks(
    table: &QiTable,
    privacy: &Privacy,
    cancel: &crate::cancel::Cancellation,
    params: &MondrianParams,
    mut rows: Vec<u32>,
    block_rows: usize,
) -> Vec<Vec<u32>> {
    let cutter = Cutter {
        table,
        privacy,
        params,
        cuts: AtomicUsize::new(0),
        relaxed_cuts: AtomicUsize::new(0),
        cancel,
        stop_at: block_rows.max(1),
    };
    let regions = if rows.is_empty() {
        Vec::new()
    } else {
        cutter.split(&mut rows)
    };
    regions
        .into_iter()
        .map(|(start, end)| rows[start..end].to_vec())
        .collect()
}

struct Cutter<'a> {
    table: &'a QiTable,
    privacy: &'a Privacy,
    params: &'a MondrianParams,
    cuts: AtomicUsize,
    relaxed_cuts: AtomicUsize,
    cancel: &'a crate::cancel::Cancellation,
    /// Regions of at most this many rows are not cut further (0: cut while
    /// any cut is allowed); see [`blocks`].
    stop_at: usize,
}

/// Regions smaller than this are cut on the current thread; larger ones
/// hand their parts to rayon. The regions come out in the same order
/// whatever the thread count.
const PARALLEL_REGION: usize = 4096;

/// Regions of more than this many rows choose the QI to cut on a sample of
/// this many rows ([`Cutter::best_cut`]). Above every bundled data set (the
/// whole Adult table is chosen on all its rows). On 10M generated rows
/// (BENCHMARKS.md, "Whole-table Mondrian") every row gave NCP 0.00888 in
/// 132 s of cuts; a sample of 2^15 rows 0.00927 (+4.4 %) in 11 s, 2^17
/// rows 0.00898 (+1.1 %).
const CHOICE_SAMPLE: usize = 1 << 17;

thread_local! {
    /// Scratch for counting distinct codes: `seen[c] == stamp` when seen.
    static SEEN: RefCell<(Vec<u32>, u32)> = const { RefCell::new((Vec::new(), 0)) };
    /// Scratch for the counting sort of a region's rows.
    static SCRATCH: RefCell<Vec<u32>> = const { RefCell::new(Vec::new()) };
}

/// An allowed cut: the parts' lengths, in the order the rows were left.
struct Cut {
    parts: Vec<usize>,
    relaxed: bool,
}

impl Cutter<'_> {
    /// Cuts `rows` recursively; returns the final regions as index ranges of
    /// `rows`, in row order of the depth-first traversal. Rows a cut defers
    /// (after its parts, `residue = true`) are in no region.
    fn split(&self, rows: &mut [u32]) -> Vec<(usize, usize)> {
        // Cancelled: stop cutting; `run` reports the cancel, never this region.
        if self.cancel.is_cancelled() || rows.len() <= self.stop_at {
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
        if !self.counts_distinct(q) {
            let (lo, hi) = with_codes!(col.codes(), |c| min_max(rows, c));
            return self.loss_of_range(q, lo, hi);
        }
        let d = col.distinct();
        if d <= 1 {
            return 0.0;
        }
        let m = SEEN.with_borrow_mut(|(seen, stamp)| {
            if seen.len() < col.domain_size() {
                seen.resize(col.domain_size(), 0);
            }
            *stamp = stamp.wrapping_add(1);
            if *stamp == 0 {
                seen.fill(0);
                *stamp = 1;
            }
            let mut m = 0usize;
            with_codes!(col.codes(), |codes| {
                for &r in rows {
                    let c = u32::from(codes[r as usize]) as usize;
                    if seen[c] != *stamp {
                        seen[c] = *stamp;
                        m += 1;
                    }
                }
            });
            m
        });
        (m.saturating_sub(1)) as f64 / (d - 1) as f64
    }

    /// Whether [`Cutter::column_loss`] counts distinct codes on this QI
    /// (else it only needs the smallest and largest code).
    fn counts_distinct(&self, q: usize) -> bool {
        let col = &self.table.columns()[q];
        col.kind() == Kind::Categorical && col.hierarchy().is_none()
    }

    /// [`Cutter::column_loss`] of rows whose codes on QI `q` span `lo..=hi`,
    /// for a QI that does not count distinct codes.
    fn loss_of_range(&self, q: usize, lo: u32, hi: u32) -> f64 {
        let col = &self.table.columns()[q];
        let d = col.distinct();
        if d <= 1 {
            return 0.0;
        }
        let m = match col.hierarchy() {
            Some(h) if self.by_children(col) => {
                let r = h.leaves(h.lca(NodeId(lo), NodeId(hi)));
                col.observed_in(r.start, r.end)
            }
            _ => col.observed_in(lo, hi + 1),
        };
        (m.saturating_sub(1)) as f64 / (d - 1) as f64
    }

    /// The loss of a cut's parts (`rows` as the cut left them), summed over
    /// every QI and weighted by part size. With `ranges`, a part made of
    /// whole codes of `q` takes its code range on each QI from the ranges
    /// of its codes instead of a pass per QI over its rows.
    fn cut_loss(&self, rows: &[u32], q: usize, cut: &Cut, ranges: Option<&CodeRanges>) -> f64 {
        let n_qi = self.table.n_qi();
        let mut loss = 0.0;
        let mut s = 0;
        for &len in &cut.parts {
            let part = &rows[s..s + len];
            let spans = ranges
                .filter(|_| !cut.relaxed)
                .and_then(|r| r.of_part(self.table, part, q));
            loss += match spans {
                Some(spans) => (0..n_qi)
                    .map(|c| {
                        if self.counts_distinct(c) {
                            self.column_loss(part, c)
                        } else {
                            self.loss_of_range(c, spans[c].0, spans[c].1)
                        }
                    })
                    .sum::<f64>(),
                None => (0..n_qi).map(|c| self.column_loss(part, c)).sum::<f64>(),
            } * len as f64;
            s += len;
        }
        loss
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

    /// The cut of a region: on the QI chosen by [`Cutter::search`], made
    /// on every row of the region. A region of more than [`CHOICE_SAMPLE`]
    /// rows chooses its QI on an even sample of them (every `n /
    /// CHOICE_SAMPLE`-th row, rounded up), so that choosing costs the same
    /// at every size and a level of cuts costs one ordering pass over the
    /// rows instead of one per candidate QI; when the chosen QI cannot cut
    /// the whole region, the region searches on all its rows.
    fn best_cut(&self, rows: &mut [u32]) -> Option<Cut> {
        if rows.len() > CHOICE_SAMPLE {
            let step = rows.len().div_ceil(CHOICE_SAMPLE);
            let mut sample: Vec<u32> = rows.iter().step_by(step).copied().collect();
            if let Some(cut) = self
                .search(&mut sample)
                .and_then(|(q, _)| self.try_cut(rows, q))
            {
                return Some(cut);
            }
        }
        self.search(rows).map(|(_, cut)| cut)
    }

    /// The QI to cut `rows` on by the job's [`CutChoice`], with its cut.
    fn search(&self, rows: &mut [u32]) -> Option<(usize, Cut)> {
        let n_qi = self.table.n_qi();
        let mut widths: Vec<(f64, usize)> = (0..n_qi)
            .map(|q| (self.width(rows, q), q))
            .filter(|(w, _)| *w > 0.0)
            .collect();
        widths.sort_by(|a, b| b.0.total_cmp(&a.0).then(a.1.cmp(&b.1)));
        match self.params.cut {
            CutChoice::Widest => widths
                .into_iter()
                .find_map(|(_, q)| self.try_cut(rows, q).map(|cut| (q, cut))),
            CutChoice::LeastLoss => {
                let mut best: Option<(f64, usize)> = None;
                let candidates: Vec<usize> = widths.iter().map(|&(_, q)| q).collect();
                let ranges = CodeRanges::of(self.table, rows, &candidates);
                for &q in &candidates {
                    if let Some(cut) = self.try_cut(rows, q) {
                        let loss = self.cut_loss(rows, q, &cut, ranges.as_ref());
                        if best.is_none_or(|(b, _)| loss < b - 1e-9) {
                            best = Some((loss, q));
                        }
                    }
                }
                let (_, q) = best?;
                self.try_cut(rows, q).map(|cut| (q, cut))
            }
            CutChoice::GainPerBit
                if rows.len() < gain::PER_BIT_MIN_ROWS
                    || self.privacy.min_class_size() < gain::PER_BIT_MIN_K =>
            {
                widths
                    .into_iter()
                    .find_map(|(_, q)| self.try_cut(rows, q).map(|cut| (q, cut)))
            }
            CutChoice::GainPerBit => self.best_cut_per_bit(rows, &widths),
        }
    }

    /// Median cut of an ordered QI: the boundary between distinct values
    /// closest to the middle that leaves both parts acceptable; failing that
    /// (relaxed mode) the exact median, where the rows of the median value
    /// with the lowest row numbers go left.
    fn cut_at_median(&self, rows: &mut [u32], q: usize) -> Option<Cut> {
        let codes = self.table.columns()[q].codes();
        let (lo, hi) = with_codes!(codes, |c| min_max(rows, c));
        if lo == hi {
            return None;
        }
        let ends = with_codes!(codes, |c| counting_sort(
            rows,
            c,
            (hi - lo) as usize + 1,
            |code| (code - lo) as usize
        ));
        let n = rows.len();
        let mid = n / 2;
        let mut boundaries: Vec<usize> = ends.iter().copied().filter(|&e| e < n).collect();
        boundaries.dedup();
        let median_run = boundaries.partition_point(|&b| b <= mid);
        let median_start = median_run.checked_sub(1).map_or(0, |i| boundaries[i]);
        boundaries.retain(|&b| b > 0);
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
            if mid > median_start {
                let median_end = ends.iter().copied().find(|&e| e > mid).unwrap_or(n);
                rows[median_start..median_end].select_nth_unstable(mid - median_start - 1);
            }
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
        let child_of: Vec<usize> = (lo..=hi)
            .map(|code| starts.partition_point(|&s| s <= code) - 1)
            .collect();
        let ends = with_codes!(codes, |c| counting_sort(rows, c, starts.len(), |code| {
            child_of[(code - lo) as usize]
        }));
        let runs: Vec<(usize, usize)> = ends
            .iter()
            .scan(0, |start, &end| {
                let run = (*start, end);
                *start = end;
                Some(run)
            })
            .filter(|&(a, b)| a < b)
            .collect();
        let (big, small): (Vec<_>, Vec<_>) =
            runs.iter().partition(|&&(a, b)| self.accepts(&rows[a..b]));
        let mut groups: Vec<Vec<(usize, usize)>> = big.into_iter().map(|r| vec![r]).collect();
        if !small.is_empty() {
            let pool: Vec<u32> = small
                .iter()
                .flat_map(|&(a, b)| rows[a..b].iter().copied())
                .collect();
            if let Some(cut) = self
                .params
                .residue
                .then(|| self.defer(rows, &groups, &pool))
                .flatten()
            {
                return Some(cut);
            } else if self.accepts(&pool) {
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
    fn cells(&self, rows: &[u32], codes: &[&Codes]) -> Vec<(u32, u32)> {
        self.table
            .columns()
            .iter()
            .zip(codes)
            .map(|(col, c)| {
                let (lo, hi) =
                    with_codes!(c, |c| rows.iter().fold((u32::MAX, 0), |(lo, hi), &r| {
                        let x = u32::from(c[r as usize]);
                        (lo.min(x), hi.max(x))
                    }));
                self.published_span(col, lo, hi)
            })
            .collect()
    }

    /// Every QI's codes, for the passes that look up many rows' codes on
    /// every QI (tidying, the residue's placement): the table's own narrow
    /// codes, read with [`Codes::get`] (widening them to `u32` cost 4 bytes
    /// a row per QI, 32 GB for a billion rows of 8 QIs).
    fn qi_codes(&self) -> Vec<&Codes> {
        self.table.columns().iter().map(|col| col.codes()).collect()
    }

    /// The inclusive code range published for codes `lo..=hi` of `col`: the
    /// leaves of their lowest common ancestor for a QI cut into children,
    /// the range itself otherwise.
    fn published_span(&self, col: &QiColumn, lo: u32, hi: u32) -> (u32, u32) {
        match col.hierarchy() {
            Some(h) if self.by_children(col) => {
                let l = h.leaves(h.lca(NodeId(lo), NodeId(hi)));
                (l.start, l.end - 1)
            }
            _ => (lo, hi),
        }
    }

    /// Moves the rows that alone widen a group's cell on some QI (those
    /// outside its largest hierarchy child, when the group can spare them
    /// all) to nearby groups whose cells already cover them on every QI:
    /// the group's cell narrows and no other cell widens. Up to
    /// [`TIDY_PASSES`] passes, until one moves nothing; the cells are
    /// computed once (a move narrows its group's cell and leaves the cells
    /// of the groups that take the rows as they were). Returns the rows
    /// moved.
    fn tidy(&self, groups: &mut [Vec<u32>]) -> usize {
        let codes = self.qi_codes();
        let mut cells: Vec<Vec<(u32, u32)>> =
            groups.iter().map(|g| self.cells(g, &codes)).collect();
        let mut costs: Vec<f64> = cells.iter().map(|c| self.cell_loss(c)).collect();
        let mut moved = 0;
        for _ in 0..TIDY_PASSES {
            let m = self.tidy_pass(groups, &codes, &mut cells, &mut costs);
            moved += m;
            if m == 0 {
                break;
            }
        }
        moved
    }

    /// One pass of [`Cutter::tidy`] over every group.
    fn tidy_pass(
        &self,
        groups: &mut [Vec<u32>],
        codes: &[&Codes],
        cells: &mut [Vec<(u32, u32)>],
        costs: &mut [f64],
    ) -> usize {
        let k = self.privacy.min_class_size().max(1);
        let cost = |cell: &[(u32, u32)]| self.cell_loss(cell);
        let covers = |cell: &[(u32, u32)], r: u32| {
            cell.iter()
                .zip(codes)
                .all(|(&(lo, hi), c)| (lo..=hi).contains(&c.get(r as usize)))
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
                let child_of =
                    |r: u32| starts.partition_point(|&s| s <= codes[q].get(r as usize)) - 1;
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
                let narrowed = self.cells(&stay, codes);
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

/// Rows gathered per chunk when [`CodeRanges`] reads a region.
const GATHER_ROWS: usize = 1024;

/// For each code of each candidate QI, the smallest and largest code on
/// every QI among a region's rows with that code: one pass over the region
/// gives every candidate part's code ranges.
struct CodeRanges {
    n_qi: usize,
    /// Per QI: its smallest code in the region and where its codes' entries
    /// start in `spans` (`usize::MAX`: not a candidate).
    lo: Vec<u32>,
    start: Vec<usize>,
    /// `(smallest, largest)` code per (candidate code, QI).
    spans: Vec<(u32, u32)>,
}

impl CodeRanges {
    /// The ranges of `rows` for the `candidates` QIs; `None` when the table
    /// of ranges would not be smaller than the region (then a pass per QI
    /// over a part costs no more).
    fn of(table: &QiTable, rows: &[u32], candidates: &[usize]) -> Option<Self> {
        let n_qi = table.n_qi();
        let columns = table.columns();
        let mut lo = vec![0; n_qi];
        let mut start = vec![usize::MAX; n_qi];
        let mut size = 0;
        for &q in candidates {
            let (a, b) = with_codes!(columns[q].codes(), |c| min_max(rows, c));
            lo[q] = a;
            start[q] = size;
            size += (b - a) as usize + 1;
            if size * n_qi > rows.len() {
                return None;
            }
        }
        let mut spans = vec![(u32::MAX, 0u32); size * n_qi];
        let mut gathered = vec![0u32; GATHER_ROWS * n_qi];
        for chunk in rows.chunks(GATHER_ROWS) {
            for (c, col) in columns.iter().enumerate() {
                with_codes!(col.codes(), |codes| {
                    for (i, &r) in chunk.iter().enumerate() {
                        gathered[i * n_qi + c] = codes[r as usize].into();
                    }
                });
            }
            for row in gathered.chunks(n_qi).take(chunk.len()) {
                for &q in candidates {
                    let at = (start[q] + (row[q] - lo[q]) as usize) * n_qi;
                    for (span, &code) in spans[at..at + n_qi].iter_mut().zip(row) {
                        span.0 = span.0.min(code);
                        span.1 = span.1.max(code);
                    }
                }
            }
        }
        Some(CodeRanges {
            n_qi,
            lo,
            start,
            spans,
        })
    }

    /// The code range on every QI of `part`, whose rows hold every row of
    /// the region with their code on QI `q`.
    fn of_part(&self, table: &QiTable, part: &[u32], q: usize) -> Option<Vec<(u32, u32)>> {
        if self.start[q] == usize::MAX {
            return None;
        }
        let n_qi = self.n_qi;
        let mut out = vec![(u32::MAX, 0u32); n_qi];
        let mut seen: Vec<bool> = Vec::new();
        with_codes!(table.columns()[q].codes(), |codes| {
            for &r in part {
                let x = (u32::from(codes[r as usize]) - self.lo[q]) as usize;
                if x >= seen.len() {
                    seen.resize(x + 1, false);
                }
                seen[x] = true;
            }
        });
        for (x, _) in seen.iter().enumerate().filter(|(_, &s)| s) {
            let at = (self.start[q] + x) * n_qi;
            for (o, span) in out.iter_mut().zip(&self.spans[at..at + n_qi]) {
                o.0 = o.0.min(span.0);
                o.1 = o.1.max(span.1);
            }
        }
        Some(out)
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

/// Sorts `rows` stably by `key` of their code (below `n_keys`): one
/// counting pass and one scatter instead of a comparison sort, so a cut
/// costs O(rows). Gives where each key's run ends.
fn counting_sort<T: Code>(
    rows: &mut [u32],
    codes: &[T],
    n_keys: usize,
    key: impl Fn(u32) -> usize,
) -> Vec<usize> {
    let mut ends = vec![0usize; n_keys];
    for &r in rows.iter() {
        ends[key(codes[r as usize].into())] += 1;
    }
    let mut next = Vec::with_capacity(n_keys);
    let mut end = 0;
    for count in &mut ends {
        next.push(end);
        end += *count;
        *count = end;
    }
    SCRATCH.with_borrow_mut(|scratch| {
        scratch.clear();
        scratch.resize(rows.len(), 0);
        for &r in rows.iter() {
            let k = key(codes[r as usize].into());
            scratch[next[k]] = r;
            next[k] += 1;
        }
        rows.copy_from_slice(scratch);
    });
    ends
}

#[cfg(test)]
mod tests {
    //! The counting cuts against the comparison-sort cuts they replaced:
    //! the same boundaries, parts and rows, cut by cut and over whole runs,
    //! so releases stay byte-identical.

    use std::sync::Arc;

    use rand::{Rng, SeedableRng};
    use rand_chacha::ChaCha8Rng;
    use rustc_hash::FxHashMap;

    use super::*;
    use crate::hierarchy::Hierarchy;
    use crate::privacy::{DistinctLDiversity, EntropyLDiversity};
    use crate::spec::JobSpec;

    /// The sort-based cuts as they were before counting (reference only).
    mod reference {
        use super::*;

        pub fn try_cut(cutter: &Cutter<'_>, rows: &mut [u32], q: usize) -> Option<Cut> {
            if cutter.by_children(&cutter.table.columns()[q]) {
                cut_by_children(cutter, rows, q)
            } else {
                cut_at_median(cutter, rows, q)
            }
        }

        fn cut_at_median(cutter: &Cutter<'_>, rows: &mut [u32], q: usize) -> Option<Cut> {
            let mut boundaries =
                with_codes!(cutter.table.columns()[q].codes(), |c| sort_by_code(rows, c))?;
            let n = rows.len();
            let mid = n / 2;
            boundaries.sort_by_key(|&b| (b.abs_diff(mid), b));
            for b in boundaries {
                let (left, right) = rows.split_at(b);
                if cutter.accepts(left) && cutter.accepts(right) {
                    return Some(Cut {
                        parts: vec![b, n - b],
                        relaxed: false,
                    });
                }
            }
            if cutter.params.relaxed {
                let (left, right) = rows.split_at(mid);
                if cutter.accepts(left) && cutter.accepts(right) {
                    return Some(Cut {
                        parts: vec![mid, n - mid],
                        relaxed: true,
                    });
                }
            }
            None
        }

        fn cut_by_children(cutter: &Cutter<'_>, rows: &mut [u32], q: usize) -> Option<Cut> {
            let col = &cutter.table.columns()[q];
            let h = col.hierarchy()?;
            let codes = col.codes();
            let (lo, hi) = with_codes!(codes, |c| min_max(rows, c));
            let node = h.lca(NodeId(lo), NodeId(hi));
            let starts: Vec<u32> = h.children(node).map(|c| h.leaves(c).start).collect();
            if starts.len() < 2 {
                return None;
            }
            let runs = with_codes!(codes, |c| runs_by_child(rows, c, &starts));
            let (big, small): (Vec<_>, Vec<_>) = runs
                .iter()
                .partition(|&&(a, b)| cutter.accepts(&rows[a..b]));
            let mut groups: Vec<Vec<(usize, usize)>> = big.into_iter().map(|r| vec![r]).collect();
            if !small.is_empty() {
                let pool: Vec<u32> = small
                    .iter()
                    .flat_map(|&(a, b)| rows[a..b].iter().copied())
                    .collect();
                if cutter.accepts(&pool) {
                    groups.push(small);
                } else {
                    let size =
                        |g: &Vec<(usize, usize)>| g.iter().map(|(a, b)| b - a).sum::<usize>();
                    let smallest = (0..groups.len()).min_by_key(|&i| (size(&groups[i]), i))?;
                    groups[smallest].extend(small);
                    let merged: Vec<u32> = groups[smallest]
                        .iter()
                        .flat_map(|&(a, b)| rows[a..b].iter().copied())
                        .collect();
                    if !cutter.accepts(&merged) {
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

        fn runs_by_child<T: Code>(
            rows: &mut [u32],
            codes: &[T],
            starts: &[u32],
        ) -> Vec<(usize, usize)> {
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

        /// `Cutter::best_cut` with the reference cuts.
        fn best_cut(cutter: &Cutter<'_>, rows: &mut [u32]) -> Option<Cut> {
            let n_qi = cutter.table.n_qi();
            let mut widths: Vec<(f64, usize)> = (0..n_qi)
                .map(|q| (cutter.width(rows, q), q))
                .filter(|(w, _)| *w > 0.0)
                .collect();
            widths.sort_by(|a, b| b.0.total_cmp(&a.0).then(a.1.cmp(&b.1)));
            match cutter.params.cut {
                CutChoice::GainPerBit => unreachable!("the reference predates the per-bit cut"),
                CutChoice::Widest => widths
                    .into_iter()
                    .find_map(|(_, q)| try_cut(cutter, rows, q)),
                CutChoice::LeastLoss => {
                    let mut best: Option<(f64, usize)> = None;
                    for &(_, q) in &widths {
                        if let Some(cut) = try_cut(cutter, rows, q) {
                            let mut loss = 0.0;
                            let mut s = 0;
                            for len in cut.parts {
                                let part = &rows[s..s + len];
                                loss += (0..n_qi).map(|c| cutter.column_loss(part, c)).sum::<f64>()
                                    * len as f64;
                                s += len;
                            }
                            if best.is_none_or(|(b, _)| loss < b - 1e-9) {
                                best = Some((loss, q));
                            }
                        }
                    }
                    let (_, q) = best?;
                    try_cut(cutter, rows, q)
                }
            }
        }

        /// `Cutter::split` with the reference cuts, on one thread.
        pub fn split(cutter: &Cutter<'_>, rows: &mut [u32]) -> Vec<(usize, usize)> {
            let Some(cut) = best_cut(cutter, rows) else {
                return vec![(0, rows.len())];
            };
            let mut out = Vec::new();
            let mut offset = 0;
            for len in cut.parts {
                let part = &mut rows[offset..offset + len];
                out.extend(shift(split(cutter, part), offset));
                offset += len;
            }
            out
        }
    }

    /// Leaves `c0..c{n}` under groups of three, under halves, under `*`.
    fn hierarchy(n: usize) -> Arc<Hierarchy> {
        let csv: String = (0..n)
            .map(|i| format!("c{i};g{};h{};*\n", i / 3, i / 6))
            .collect();
        Arc::new(Hierarchy::from_csv("h.csv", &csv, ';').unwrap())
    }

    /// A random table: numeric QIs with and without intervals, a categorical
    /// QI without and two with a hierarchy, skewed so that some hierarchy
    /// children are rare, and a sensitive column.
    fn random_table(rng: &mut ChaCha8Rng, n: usize, numeric: &str) -> QiTable {
        let spec: JobSpec = serde_json::from_str(&format!(
            r#"{{"attributes": [
                {{"name": "age", "role": "qi", "type": "numeric", "intervals": [5, 10]}},
                {{"name": "zip", "role": "qi", "type": "numeric"}},
                {{"name": "job", "role": "qi"}},
                {{"name": "city", "role": "qi", "hierarchy": "city.csv"}},
                {{"name": "land", "role": "qi", "hierarchy": "land.csv"}},
                {{"name": "disease", "role": "sensitive"}}],
               "algorithm": {{"name": "mondrian", "params": {{"numeric": "{numeric}"}}}}}}"#
        ))
        .unwrap();
        let hierarchies: FxHashMap<String, Arc<Hierarchy>> = [
            ("city.csv".to_string(), hierarchy(14)),
            ("land.csv".to_string(), hierarchy(5)),
        ]
        .into_iter()
        .collect();
        let ages = rng.gen_range(2..60);
        let ages = if rng.gen_bool(0.5) {
            ages
        } else {
            ages % 4 + 1
        };
        let jobs = rng.gen_range(2..9);
        let mut cols: Vec<Vec<String>> = vec![Vec::new(); 6];
        for _ in 0..n {
            let skewed = |rng: &mut ChaCha8Rng, d: usize| {
                let x: f64 = rng.gen();
                ((x * x * x) * d as f64) as usize
            };
            cols[0].push((17 + skewed(rng, ages)).to_string());
            cols[1].push((10_000 + skewed(rng, 40) * 7).to_string());
            cols[2].push(format!("job{}", skewed(rng, jobs)));
            cols[3].push(format!("c{}", skewed(rng, 14)));
            cols[4].push(format!("c{}", rng.gen_range(0..5)));
            cols[5].push(format!("d{}", skewed(rng, 6)));
        }
        let names = ["age", "zip", "job", "city", "land", "disease"];
        let columns: Vec<(&str, Vec<&str>)> = names
            .iter()
            .zip(&cols)
            .map(|(n, c)| (*n, c.iter().map(String::as_str).collect()))
            .collect();
        QiTable::from_string_columns(&spec, &hierarchies, &columns).unwrap()
    }

    /// k up to 11, or (for many relaxed cuts) up to half the rows.
    fn privacy(rng: &mut ChaCha8Rng, n: usize) -> Privacy {
        let k = if rng.gen_bool(0.5) {
            rng.gen_range(1..12)
        } else {
            rng.gen_range(1..=n / 2 + 1)
        };
        let column = "disease".to_string();
        match rng.gen_range(0..3) {
            0 => Privacy::k_anonymity(k),
            1 => Privacy::k_anonymity(k).with_model(Box::new(DistinctLDiversity {
                column,
                l: rng.gen_range(2..4),
            })),
            _ => Privacy::k_anonymity(k).with_model(Box::new(EntropyLDiversity {
                column,
                l: rng.gen_range(2..4),
            })),
        }
    }

    fn params(rng: &mut ChaCha8Rng) -> MondrianParams {
        MondrianParams {
            cut: if rng.gen_bool(0.5) {
                CutChoice::LeastLoss
            } else {
                CutChoice::Widest
            },
            relaxed: rng.gen_bool(0.5),
            numeric: if rng.gen_bool(0.5) {
                NumericCells::Ranges
            } else {
                NumericCells::Hierarchy
            },
            top_up: false,
            tidy: false,
            residue: false,
        }
    }

    fn cutter<'a>(
        table: &'a QiTable,
        privacy: &'a Privacy,
        params: &'a MondrianParams,
    ) -> Cutter<'a> {
        Cutter {
            table,
            privacy,
            params,
            cuts: AtomicUsize::new(0),
            relaxed_cuts: AtomicUsize::new(0),
            cancel: crate::cancel::Cancellation::never(),
            stop_at: 0,
        }
    }

    /// The parts of a cut as sets of rows.
    fn parts(rows: &[u32], cut: &Cut) -> Vec<Vec<u32>> {
        let mut s = 0;
        cut.parts
            .iter()
            .map(|&len| {
                let mut part = rows[s..s + len].to_vec();
                part.sort_unstable();
                s += len;
                part
            })
            .collect()
    }

    fn regions(rows: &[u32], regions: &[(usize, usize)]) -> Vec<Vec<u32>> {
        regions
            .iter()
            .map(|&(a, b)| {
                let mut r = rows[a..b].to_vec();
                r.sort_unstable();
                r
            })
            .collect()
    }

    #[test]
    fn every_cut_matches_the_sorting_cut() {
        let mut rng = ChaCha8Rng::seed_from_u64(19);
        let (mut cuts, mut relaxed, mut children) = (0, 0, 0);
        for case in 0..1000 {
            let params = params(&mut rng);
            let numeric = if params.numeric == NumericCells::Hierarchy {
                "hierarchy"
            } else {
                "ranges"
            };
            let n = rng.gen_range(2..300);
            let table = random_table(&mut rng, n, numeric);
            let privacy = privacy(&mut rng, n);
            let cutter = cutter(&table, &privacy, &params);
            for _ in 0..5 {
                // A region: some rows in a shuffled order.
                let mut rows: Vec<u32> = (0..n as u32).filter(|_| rng.gen_bool(0.7)).collect();
                if rows.len() < 2 {
                    continue;
                }
                for i in (1..rows.len()).rev() {
                    rows.swap(i, rng.gen_range(0..=i));
                }
                for q in 0..table.n_qi() {
                    let mut old = rows.clone();
                    let mut new = rows.clone();
                    let want = reference::try_cut(&cutter, &mut old, q);
                    let got = cutter.try_cut(&mut new, q);
                    match (want, got) {
                        (None, None) => {}
                        (Some(w), Some(g)) => {
                            assert_eq!(w.parts, g.parts, "case {case}, QI {q}");
                            assert_eq!(w.relaxed, g.relaxed, "case {case}, QI {q}");
                            assert_eq!(parts(&old, &w), parts(&new, &g), "case {case}, QI {q}");
                            cuts += 1;
                            relaxed += g.relaxed as usize;
                            children += g.parts.len().saturating_sub(2).min(1);
                        }
                        (w, g) => panic!(
                            "case {case}, QI {q}: reference {:?}, counting {:?}",
                            w.map(|c| c.parts),
                            g.map(|c| c.parts)
                        ),
                    }
                }
            }
        }
        // The cases reach every kind of cut.
        assert!(
            cuts > 1000 && relaxed > 100 && children > 100,
            "{cuts} {relaxed} {children}"
        );
    }

    #[test]
    fn whole_runs_match_the_sorting_cuts() {
        let mut rng = ChaCha8Rng::seed_from_u64(2);
        for case in 0..150 {
            let params = params(&mut rng);
            let numeric = if params.numeric == NumericCells::Hierarchy {
                "hierarchy"
            } else {
                "ranges"
            };
            let n = rng.gen_range(2..6000);
            let table = random_table(&mut rng, n, numeric);
            let privacy = privacy(&mut rng, n);
            let cutter = cutter(&table, &privacy, &params);
            let mut rows: Vec<u32> = (0..n as u32).collect();
            if !cutter.accepts(&rows) {
                continue;
            }
            let mut old = rows.clone();
            let want = reference::split(&cutter, &mut old);
            let got = cutter.split(&mut rows);
            assert_eq!(regions(&old, &want), regions(&rows, &got), "case {case}");
        }
    }
}
