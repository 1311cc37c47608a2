//! Mondrian: strict multidimensional partitioning (LeFevre, DeWitt,
//! Ramakrishnan, "Mondrian multidimensional k-anonymity", ICDE 2006), the
//! baseline of seed 001 (section 2.4).
//!
//! Top down: a region is cut on the QI with the widest normalised range;
//! ordered QIs (numeric, or categorical without a hierarchy, by value order)
//! at the median, QIs with a hierarchy into the children of the region's
//! lowest common ancestor. A cut is made only when every part satisfies the
//! privacy models (k rows, and l-diversity when asked); otherwise the next
//! widest QI is tried, and a region no QI can cut becomes a group, published
//! as its tightest generalisation (local recoding).
//!
//! Hierarchy children too small to stand alone are pooled into one part (or
//! into the smallest large child), so one rare country does not stop a cut of
//! the whole continent. Sorting the region once per cut keeps the whole run
//! at O(n log^2 n).

use serde::{Deserialize, Serialize};

use crate::algorithms::{details, Algorithm, Context, Outcome};
use crate::encode::QiTable;
use crate::error::Result;
use crate::hierarchy::NodeId;
use crate::partition::{Partition, SUPPRESSED};
use crate::privacy::{ClassView, Privacy};

/// Mondrian's parameters (none yet beyond the job's privacy model).
#[derive(Debug, Clone, Default, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct MondrianParams {}

/// The Mondrian algorithm.
#[derive(Debug, Clone, Default)]
pub struct Mondrian {
    _params: MondrianParams,
}

impl Mondrian {
    /// Mondrian with the given parameters.
    pub fn from_params(params: MondrianParams) -> Self {
        Mondrian { _params: params }
    }
}

#[derive(Debug, Serialize)]
struct MondrianDetails {
    cuts: usize,
    groups: usize,
}

impl Algorithm for Mondrian {
    fn name(&self) -> &'static str {
        "mondrian"
    }

    fn run(&self, ctx: &Context<'_>) -> Result<Outcome> {
        ctx.privacy.check_feasible(ctx.table)?;
        let mut rows = ctx.table.active_rows();
        let mut group_of_row = vec![SUPPRESSED; ctx.table.n_rows()];
        let mut cutter = Cutter {
            table: ctx.table,
            privacy: ctx.privacy,
            cuts: 0,
        };
        let mut regions = Vec::new();
        if !rows.is_empty() {
            cutter.split(&mut rows, 0, &mut regions);
        }
        for (g, &(start, end)) in regions.iter().enumerate() {
            for &r in &rows[start..end] {
                group_of_row[r as usize] = g as u32;
            }
        }
        let partition = Partition::tightest(ctx.table, group_of_row);
        Ok(Outcome {
            details: details(&MondrianDetails {
                cuts: cutter.cuts,
                groups: regions.len(),
            })?,
            partition,
        })
    }
}

struct Cutter<'a> {
    table: &'a QiTable,
    privacy: &'a Privacy,
    cuts: usize,
}

/// A candidate cut of a region: the parts' lengths after reordering.
type Parts = Vec<usize>;

impl Cutter<'_> {
    /// Splits `rows` (which start at `offset` of the whole row array)
    /// recursively, appending leaf regions as `(start, end)`.
    fn split(&mut self, rows: &mut [u32], offset: usize, regions: &mut Vec<(usize, usize)>) {
        let mut stack = vec![(offset, offset + rows.len())];
        let base = offset;
        while let Some((start, end)) = stack.pop() {
            let region = &mut rows[start - base..end - base];
            match self.best_cut(region) {
                Some(parts) => {
                    self.cuts += 1;
                    let mut s = start;
                    let mut bounds = Vec::with_capacity(parts.len());
                    for len in parts {
                        bounds.push((s, s + len));
                        s += len;
                    }
                    // Depth-first in row order keeps group numbering stable.
                    stack.extend(bounds.into_iter().rev());
                }
                None => regions.push((start, end)),
            }
        }
    }

    fn accepts(&self, rows: &[u32]) -> bool {
        self.privacy.accepts(ClassView {
            table: self.table,
            rows,
        })
    }

    /// Tries the QIs from the widest normalised range down; reorders `rows`
    /// into the parts of the first allowed cut.
    fn best_cut(&self, rows: &mut [u32]) -> Option<Parts> {
        let table = self.table;
        let mut widths: Vec<(f64, usize)> = table
            .columns()
            .iter()
            .enumerate()
            .map(|(q, col)| {
                let codes = col.codes();
                let (lo, hi) = rows.iter().fold((u32::MAX, 0), |(lo, hi), &r| {
                    (lo.min(codes[r as usize]), hi.max(codes[r as usize]))
                });
                let cell = match col.hierarchy() {
                    Some(h) => crate::generalise::Cell::Node(h.lca(NodeId(lo), NodeId(hi))),
                    None => crate::generalise::Cell::Range { lo, hi },
                };
                let width = if let Some((a, b)) = col.extent(&cell) {
                    let (min, max) = col.min_max();
                    if max > min {
                        (b - a) / (max - min)
                    } else {
                        0.0
                    }
                } else {
                    let d = col.distinct().max(2) - 1;
                    col.observed_in(lo, hi + 1).saturating_sub(1) as f64 / d as f64
                };
                (width, q)
            })
            .filter(|(w, _)| *w > 0.0)
            .collect();
        widths.sort_by(|a, b| b.0.total_cmp(&a.0).then(a.1.cmp(&b.1)));
        for (_, q) in widths {
            let parts = match table.columns()[q].hierarchy() {
                Some(_) => self.cut_by_children(rows, q),
                None => self.cut_at_median(rows, q),
            };
            if parts.is_some() {
                return parts;
            }
        }
        None
    }

    /// Median cut of an ordered QI: the boundary between distinct values
    /// closest to the middle such that both sides are accepted.
    fn cut_at_median(&self, rows: &mut [u32], q: usize) -> Option<Parts> {
        let codes = self.table.columns()[q].codes();
        rows.sort_unstable_by_key(|&r| (codes[r as usize], r));
        let n = rows.len();
        let mut boundaries: Vec<usize> = (1..n)
            .filter(|&i| codes[rows[i] as usize] != codes[rows[i - 1] as usize])
            .collect();
        let mid = n / 2;
        boundaries.sort_by_key(|&b| (b.abs_diff(mid), b));
        for b in boundaries {
            let (left, right) = rows.split_at(b);
            if self.accepts(left) && self.accepts(right) {
                return Some(vec![b, n - b]);
            }
        }
        None
    }

    /// Cut of a hierarchical QI into the children of the region's lowest
    /// common ancestor; children too small on their own are pooled.
    fn cut_by_children(&self, rows: &mut [u32], q: usize) -> Option<Parts> {
        let col = &self.table.columns()[q];
        let h = col.hierarchy()?;
        let codes = col.codes();
        let (lo, hi) = rows.iter().fold((u32::MAX, 0), |(lo, hi), &r| {
            (lo.min(codes[r as usize]), hi.max(codes[r as usize]))
        });
        let node = h.lca(NodeId(lo), NodeId(hi));
        let starts: Vec<u32> = h.children(node).map(|c| h.leaves(c).start).collect();
        if starts.len() < 2 {
            return None;
        }
        let child_of = |r: u32| starts.partition_point(|&s| s <= codes[r as usize]) - 1;
        rows.sort_unstable_by_key(|&r| (child_of(r), r));
        // Runs of rows per child.
        let mut runs: Vec<(usize, usize)> = Vec::new();
        let mut s = 0;
        for i in 1..=rows.len() {
            if i == rows.len() || child_of(rows[i]) != child_of(rows[i - 1]) {
                runs.push((s, i));
                s = i;
            }
        }
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
            } else {
                let smallest = groups
                    .iter()
                    .enumerate()
                    .min_by_key(|(i, g)| (g.iter().map(|(a, b)| b - a).sum::<usize>(), *i))?
                    .0;
                groups[smallest].extend(small);
            }
        }
        if groups.len() < 2 {
            return None;
        }
        let reordered: Vec<u32> = groups
            .iter()
            .flat_map(|g| g.iter().flat_map(|&(a, b)| rows[a..b].iter().copied()))
            .collect();
        let parts = groups
            .iter()
            .map(|g| g.iter().map(|(a, b)| b - a).sum())
            .collect();
        rows.copy_from_slice(&reordered);
        Some(parts)
    }
}
