//! Gathering rare rows table-wide (`residue = true`), the iterative local
//! recoding of ARX (Prasser, Kohlmayer, Kuhn, "Efficient and effective
//! pruning strategies for health data de-identification", BMC Medical
//! Informatics 2016, section "Local recoding": the rows a pass cannot
//! publish well are anonymised again on their own, pass after pass).
//!
//! Top-down, a region cut into hierarchy children whose small children
//! cannot stand alone either generalises them with a large child (the pool
//! published at the parent node) or tops them up to k with a stub of one
//! (Xu et al., "Utility-based anonymization using local recoding", KDD
//! 2006). Either way a handful of rare values costs k rows a coarse cell,
//! region after region. Here the pass instead defers those rows to one
//! residue for the whole table; the residue is cut again by the same
//! top-down algorithm, where rows with the same rare value from every
//! region meet (as KACA gathers them, Li et al., "Achieving k-anonymity by
//! clustering in attribute hierarchical structures", DaWaK 2006). After a
//! few passes the last residue is cut without deferring, and rows no cut
//! can publish on their own (too few for the privacy models) join the
//! group whose cells they widen least.

use serde::Serialize;

use super::{Cut, Cutter, MondrianParams};
use crate::codes::Codes;

/// Passes that defer rare rows; the residue of the last one is cut with
/// pooling or topping up, so every row ends in a group.
const DEFERRING_PASSES: usize = 8;

/// What gathering the residue did, for the run's details.
#[derive(Debug, Clone, Default, Serialize)]
pub(crate) struct ResidueStats {
    /// Rows deferred by each pass.
    deferred: Vec<usize>,
    /// Rows of the last residue that joined an existing group.
    placed: usize,
}

impl Cutter<'_> {
    /// Defers the pool of small hierarchy children (each too few to stand
    /// alone) to the residue: the cut keeps the large children as its parts
    /// and leaves the pool's rows after them, in no part. The pool goes even
    /// when it could stand alone, as it would be published at the parent
    /// node (on Adult at k = 100, 0.1983 against 0.2008 when such pools stay).
    /// `groups` are the large children (one run each); `None` when there is
    /// none.
    pub(super) fn defer(
        &self,
        rows: &mut [u32],
        groups: &[Vec<(usize, usize)>],
        pool: &[u32],
    ) -> Option<Cut> {
        if groups.is_empty() || pool.is_empty() {
            return None;
        }
        let mut reordered: Vec<u32> = Vec::with_capacity(rows.len());
        let mut parts = Vec::with_capacity(groups.len());
        for g in groups {
            let (a, b) = g[0];
            reordered.extend_from_slice(&rows[a..b]);
            parts.push(b - a);
        }
        reordered.extend_from_slice(pool);
        rows.copy_from_slice(&reordered);
        Some(Cut {
            parts,
            relaxed: false,
        })
    }

    /// Cuts `rows` in passes, each deferring rare rows to a residue that
    /// the next pass cuts; returns the groups and what the passes did.
    pub(super) fn split_gathering(&self, rows: Vec<u32>) -> (Vec<Vec<u32>>, ResidueStats) {
        let mut stats = ResidueStats::default();
        let mut groups: Vec<Vec<u32>> = Vec::new();
        let mut pending = rows;
        let last = MondrianParams {
            residue: false,
            ..self.params.clone()
        };
        let final_cutter = Cutter {
            table: self.table,
            privacy: self.privacy,
            params: &last,
            cuts: Default::default(),
            relaxed_cuts: Default::default(),
            cancel: self.cancel,
            stop_at: self.stop_at,
        };
        for pass in 0..=DEFERRING_PASSES {
            if pending.is_empty() || !self.accepts(&pending) || self.cancel.is_cancelled() {
                break;
            }
            let cutter = if pass < DEFERRING_PASSES {
                self
            } else {
                &final_cutter
            };
            let mut region = std::mem::take(&mut pending);
            let regions = cutter.split(&mut region);
            let mut covered = vec![false; region.len()];
            for &(a, b) in &regions {
                groups.push(region[a..b].to_vec());
                covered[a..b].iter_mut().for_each(|c| *c = true);
            }
            pending = region
                .iter()
                .zip(&covered)
                .filter(|(_, &c)| !c)
                .map(|(&r, _)| r)
                .collect();
            pending.sort_unstable();
            if pass < DEFERRING_PASSES {
                stats.deferred.push(pending.len());
            }
        }
        self.add_counts(&final_cutter);
        stats.placed = pending.len();
        self.place(&mut groups, pending);
        (groups, stats)
    }

    fn add_counts(&self, other: &Cutter<'_>) {
        use std::sync::atomic::Ordering;
        self.cuts
            .fetch_add(other.cuts.load(Ordering::Relaxed), Ordering::Relaxed);
        self.relaxed_cuts.fetch_add(
            other.relaxed_cuts.load(Ordering::Relaxed),
            Ordering::Relaxed,
        );
    }

    /// Granularity of a cell given as inclusive code ranges, summed over
    /// the QIs.
    pub(super) fn cell_loss(&self, cell: &[(u32, u32)]) -> f64 {
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
    }

    /// The cell `cell` (inclusive code ranges, as [`Cutter::cells`] gives)
    /// widened to cover row `r`.
    fn widened(&self, cell: &[(u32, u32)], r: u32, codes: &[&Codes]) -> Vec<(u32, u32)> {
        cell.iter()
            .zip(self.table.columns())
            .zip(codes)
            .map(|((&(lo, hi), col), c)| {
                let x = c.get(r as usize);
                self.published_span(col, lo.min(x), hi.max(x))
            })
            .collect()
    }

    /// Puts each of `rows` (too few, or too uniform, to be a group) into
    /// the group whose loss, weighted by its size, grows least with it and
    /// that the privacy models still accept with it. When no group accepts
    /// a row, the rows left join the cheapest group, and groups merge into
    /// it, cheapest first, until the models accept it (the whole table
    /// does).
    fn place(&self, groups: &mut Vec<Vec<u32>>, rows: Vec<u32>) {
        if rows.is_empty() {
            return;
        }
        if groups.is_empty() {
            groups.push(rows);
            return;
        }
        let codes = self.qi_codes();
        let mut cells: Vec<Vec<(u32, u32)>> =
            groups.iter().map(|g| self.cells(g, &codes)).collect();
        let mut stranded: Vec<u32> = Vec::new();
        for r in rows {
            let mut order: Vec<(f64, usize)> = groups
                .iter()
                .enumerate()
                .map(|(g, members)| {
                    let joined = self.widened(&cells[g], r, &codes);
                    let cost = (members.len() + 1) as f64 * self.cell_loss(&joined)
                        - members.len() as f64 * self.cell_loss(&cells[g]);
                    (cost, g)
                })
                .collect();
            order.sort_by(|a, b| a.0.total_cmp(&b.0).then(a.1.cmp(&b.1)));
            let home = order.iter().map(|&(_, g)| g).find(|&g| {
                let mut with = groups[g].clone();
                with.push(r);
                self.accepts(&with)
            });
            match home {
                Some(g) => {
                    groups[g].push(r);
                    cells[g] = self.cells(&groups[g], &codes);
                }
                None => stranded.push(r),
            }
        }
        if stranded.is_empty() {
            return;
        }
        let mut merged = stranded;
        while !self.accepts(&merged) && !groups.is_empty() {
            let cheapest = (0..groups.len())
                .min_by(|&a, &b| {
                    let cost = |g: usize| {
                        let mut all = merged.clone();
                        all.extend_from_slice(&groups[g]);
                        self.cell_loss(&self.cells(&all, &codes)) * all.len() as f64
                    };
                    cost(a).total_cmp(&cost(b)).then(a.cmp(&b))
                })
                .expect("groups left");
            merged.extend(groups.swap_remove(cheapest));
        }
        groups.push(merged);
    }
}

#[cfg(test)]
mod tests;
