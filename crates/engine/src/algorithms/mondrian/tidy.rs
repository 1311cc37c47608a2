//! After the cuts: rows that alone widen a group's cell move to groups
//! near it in cut order whose cells already cover them (`tidy = true`).

use super::*;

/// Groups this many positions either side of a group (in cut order, so
/// mostly its neighbours in the cut tree) are searched for a new home.
pub(super) const TIDY_WINDOW: usize = 256;
/// Most tidying passes; each moves only rows whose move lowers the loss.
pub(super) const TIDY_PASSES: usize = 4;

impl Cutter<'_> {
    /// The published cell of `rows` on every QI as an inclusive code range:
    /// the leaves of the lowest common ancestor for QIs cut into children,
    /// the smallest and largest code otherwise.
    pub(super) fn cells(&self, rows: &[u32], codes: &[&Codes]) -> Vec<(u32, u32)> {
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
    pub(super) fn qi_codes(&self) -> Vec<&Codes> {
        self.table.columns().iter().map(|col| col.codes()).collect()
    }

    /// The inclusive code range published for codes `lo..=hi` of `col`: the
    /// leaves of their lowest common ancestor for a QI cut into children,
    /// the range itself otherwise.
    pub(super) fn published_span(&self, col: &QiColumn, lo: u32, hi: u32) -> (u32, u32) {
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
    pub(super) fn tidy(&self, groups: &mut [Vec<u32>]) -> usize {
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
    pub(super) fn tidy_pass(
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
