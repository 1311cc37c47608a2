//! Step 5 (not the paper's, `oversize = "split"`): clusters with room
//! for two accepted classes are cut into accepted parts.

use super::*;

impl Run<'_> {
    /// Step 5 (not the paper's, [`Oversize::Split`]): every cluster with
    /// room for two accepted classes is cut into accepted parts.
    pub(super) fn split_oversize(&mut self) -> Result<()> {
        let min = self.privacy.min_class_size().max(1);
        let big: Vec<usize> = self
            .finished
            .iter()
            .filter(|(_, c)| c.rows.len() >= 2 * min)
            .map(|(i, _)| i)
            .collect();
        self.stats.largest_before_split = self
            .finished
            .iter()
            .map(|(_, c)| c.rows.len())
            .max()
            .unwrap_or(0);
        for id in big {
            self.cancel.check()?;
            let cluster = self.finished.remove(id);
            let parts = self.split_rows(cluster.rows, min);
            if parts.len() > 1 {
                self.stats.clusters_split += 1;
            }
            for rows in parts {
                let part = Cluster::of_rows(self.table, self.loss, rows);
                self.finished.insert(part);
            }
        }
        // Clusters still too big for lack of rows the models need (a single
        // row of the rarer sensitive value, say): re-cut together with
        // their closest cluster, kept when that loses no more.
        let stuck: Vec<usize> = self
            .finished
            .iter()
            .filter(|(_, c)| c.rows.len() >= 2 * min)
            .map(|(i, _)| i)
            .collect();
        for id in stuck {
            self.cancel.check()?;
            if self.finished.slots[id]
                .as_ref()
                .is_none_or(|c| c.rows.len() < 2 * min)
            {
                continue;
            }
            let c = self.finished.remove(id);
            let Some((j, _)) = self.nearest_cluster(&c, f64::INFINITY) else {
                self.finished.insert(c);
                continue;
            };
            let n = self.finished.remove(j);
            let before = c.rows.len() as f64 * c.loss + n.rows.len() as f64 * n.loss;
            let largest = c.rows.len().max(n.rows.len());
            let mut union = c.rows.clone();
            union.extend_from_slice(&n.rows);
            let parts: Vec<Cluster> = self
                .split_rows(union, min)
                .into_iter()
                .map(|rows| Cluster::of_rows(self.table, self.loss, rows))
                .collect();
            let after: f64 = parts.iter().map(|p| p.rows.len() as f64 * p.loss).sum();
            let biggest = parts.iter().map(|p| p.rows.len()).max().unwrap_or(0);
            if biggest < largest && after <= before + 1e-9 * before.abs().max(1.0) {
                self.stats.pair_splits += 1;
                for p in parts {
                    self.finished.insert(p);
                }
            } else {
                self.finished.insert(c);
                self.finished.insert(n);
            }
        }
        Ok(())
    }

    /// `rows` cut recursively by [`Run::best_cut`] while a cut leaves two
    /// accepted parts.
    pub(super) fn split_rows(&self, rows: Vec<u32>, min: usize) -> Vec<Vec<u32>> {
        let mut pending = vec![rows];
        let mut parts: Vec<Vec<u32>> = Vec::new();
        while let Some(rows) = pending.pop() {
            match self.best_cut(&rows, min) {
                Some((a, b)) => pending.extend([b, a]),
                None => parts.push(rows),
            }
        }
        parts
    }

    /// The cut of `rows` in two accepted parts that loses least, if any.
    ///
    /// For each QI the rows are sorted by their code on it, then by their
    /// other codes (so a cut inside a run of equal values still separates
    /// alike rows), then by row; every position leaving at least `min` rows
    /// on each side is a candidate, costing `|P1| L(P1) + |P2| L(P2)` from
    /// prefix and suffix spans. Candidates are tried cheapest first (ties:
    /// the more balanced cut, then the lower QI and position) until both
    /// parts are accepted. `O(d^2 m)` for the costs plus one acceptance
    /// check of `m` rows per rejected candidate.
    pub(super) fn best_cut(&self, rows: &[u32], min: usize) -> Option<(Vec<u32>, Vec<u32>)> {
        let m = rows.len();
        if m < 2 * min {
            return None;
        }
        let d = self.table.n_qi();
        let codes: Vec<Vec<u32>> = rows.iter().map(|&r| self.table.row(r).collect()).collect();
        // (cost, imbalance, qi, position) of every candidate cut.
        let mut candidates: Vec<(f64, usize, usize, usize)> = Vec::new();
        let mut orders: Vec<Vec<usize>> = Vec::with_capacity(d);
        let mut prefix = vec![0.0; m + 1];
        for q in 0..d {
            let mut order: Vec<usize> = (0..m).collect();
            order.sort_by(|&a, &b| {
                codes[a][q]
                    .cmp(&codes[b][q])
                    .then_with(|| codes[a].cmp(&codes[b]))
                    .then(rows[a].cmp(&rows[b]))
            });
            if codes[order[0]][q] == codes[order[m - 1]][q] {
                // One value: every cut on this QI is a cut on another one.
                orders.push(Vec::new());
                continue;
            }
            self.running_losses(&codes, order.iter().copied(), &mut prefix[1..]);
            let mut suffix = vec![0.0; m + 1];
            self.running_losses(&codes, order.iter().rev().copied(), &mut suffix[1..]);
            suffix.reverse(); // suffix[i]: loss of order[i..]
            for i in min..=m - min {
                let cost = i as f64 * prefix[i] + (m - i) as f64 * suffix[i];
                candidates.push((cost, (2 * i).abs_diff(m), q, i));
            }
            orders.push(order);
        }
        candidates.sort_by(|a, b| {
            a.0.total_cmp(&b.0)
                .then(a.1.cmp(&b.1))
                .then(a.2.cmp(&b.2))
                .then(a.3.cmp(&b.3))
        });
        let mut sorted: Vec<u32> = Vec::with_capacity(m);
        let mut sorted_q = usize::MAX;
        // The cheapest cut per QI, for the exchange below.
        let mut cheapest: Vec<(usize, usize)> = Vec::new();
        for &(_, _, q, i) in &candidates {
            if q != sorted_q {
                sorted.clear();
                sorted.extend(orders[q].iter().map(|&j| rows[j]));
                sorted_q = q;
            }
            let (a, b) = sorted.split_at(i);
            if self.accepts(a) && self.accepts(b) {
                return Some((a.to_vec(), b.to_vec()));
            }
            if !cheapest.iter().any(|&(q2, _)| q2 == q) {
                cheapest.push((q, i));
            }
        }
        // No cut along one QI leaves both parts accepted (say the rows of a
        // rare sensitive value sit side by side in every order): the
        // cheapest cuts again, with one row of the rejected part exchanged
        // for a row of the other part that helps it.
        cheapest.into_iter().find_map(|(q, i)| {
            let sorted: Vec<u32> = orders[q].iter().map(|&j| rows[j]).collect();
            let (a, b) = sorted.split_at(i);
            self.exchange(a.to_vec(), b.to_vec())
        })
    }

    /// Most rows tried on each side by [`Run::exchange`]: it is a fallback,
    /// bounded to `O(d m)` acceptance checks per cut.
    const EXCHANGE_TRIES: usize = 8;

    /// Parts `a` and `b` with one row exchanged so that both are accepted,
    /// if one of the closest few exchanges does it: a row of the accepted
    /// part that helps the rejected one (cheapest join with the rejected
    /// part's tuple first) for a row of the rejected part (cheapest join with
    /// the other part's tuple first).
    pub(super) fn exchange(&self, a: Vec<u32>, b: Vec<u32>) -> Option<(Vec<u32>, Vec<u32>)> {
        let (mut bad, mut good, bad_is_a) = match (self.accepts(&a), self.accepts(&b)) {
            (false, true) => (a, b, true),
            (true, false) => (b, a, false),
            _ => return None,
        };
        let closest = |rows: &[u32], to: &[u32], keep: &dyn Fn(u32) -> bool| -> Vec<usize> {
            let tuple = Cluster::of_rows(self.table, self.loss, to.to_vec());
            let mut scored: Vec<(f64, usize)> = rows
                .iter()
                .enumerate()
                .filter(|&(_, &r)| keep(r))
                .map(|(j, &r)| {
                    let cost: f64 = self
                        .table
                        .row(r)
                        .enumerate()
                        .map(|(q, c)| self.loss.join_code_loss(q, &tuple.spans[q], c))
                        .sum();
                    (cost, j)
                })
                .collect();
            scored.sort_by(|x, y| x.0.total_cmp(&y.0).then(x.1.cmp(&y.1)));
            scored
                .into_iter()
                .take(Self::EXCHANGE_TRIES)
                .map(|(_, j)| j)
                .collect()
        };
        let view = ClassView {
            table: self.table,
            rows: &bad,
        };
        let givers = closest(&good, &bad, &|r| self.privacy.helps(view, r));
        let takers = closest(&bad, &good, &|_| true);
        for &g in &givers {
            for &t in &takers {
                std::mem::swap(&mut bad[t], &mut good[g]);
                if self.accepts(&bad) && self.accepts(&good) {
                    return Some(if bad_is_a { (bad, good) } else { (good, bad) });
                }
                std::mem::swap(&mut bad[t], &mut good[g]);
            }
        }
        None
    }

    /// `out[j]` = `L` of the generalised tuple of the first `j + 1` rows of
    /// `order` (indexes into `codes`, one row's QI codes each).
    pub(super) fn running_losses(
        &self,
        codes: &[Vec<u32>],
        mut order: impl Iterator<Item = usize>,
        out: &mut [f64],
    ) {
        let Some(first) = order.next() else {
            return;
        };
        let mut spans: Vec<Span> = codes[first]
            .iter()
            .enumerate()
            .map(|(q, &c)| self.loss.leaf_span(q, c))
            .collect();
        let mut attr_loss = vec![0.0; spans.len()];
        out[0] = 0.0;
        for (slot, j) in out[1..].iter_mut().zip(order) {
            for (q, &c) in codes[j].iter().enumerate() {
                self.loss.add_code(q, &mut spans[q], c);
                attr_loss[q] = self.loss.span_loss(q, &spans[q]);
            }
            *slot = attr_loss.iter().sum();
        }
    }
}
