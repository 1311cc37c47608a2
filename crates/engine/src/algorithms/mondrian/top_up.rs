//! Topping up a pool of small hierarchy children with the rows of one
//! large child (the KACA paper's stub, Def. 11; Xu et al., KDD 2006).

use super::*;

impl Cutter<'_> {
    /// The pool of small hierarchy children, topped up to an acceptable part
    /// with the rows of one large child that widen the pool's cells least on
    /// the other QIs (the stub of the KACA paper, Def. 11: only the rows the
    /// pool needs are generalised with it; Xu et al., KDD 2006, merge small
    /// parts bottom-up the same way). The donor keeps its other rows, tight
    /// on `q`, so a region whose small children cannot stand alone is still
    /// cut. `groups` are the large children (one run each); `None` when no
    /// large child can spare the rows or the models reject a part.
    pub(super) fn top_up(
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
    pub(super) fn widening(&self, r: u32, q: usize, bounds: &[(u32, u32)]) -> f64 {
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
