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

mod code_ranges;
mod gain;
mod residue;
mod tidy;
mod top_up;

use code_ranges::*;

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

#[cfg(test)]
mod tests;
