//! The remaining tuples, indexed for step 2's search of the tuple nearest
//! a growing cluster: a trie over their QI codes, its filters and the
//! bounded search.

use super::*;

/// The remaining tuples, in a trie over their QI codes.
///
/// Depth `d` branches on QI `order[d]`; leaves (depth `n_qi`) are the
/// distinct QI tuples, each holding its remaining rows per bucket (a bucket
/// is a distinct combination of sensitive values). Every node counts its
/// remaining rows and, when there are few buckets, which buckets it holds.
pub(super) struct Trie {
    pub(super) order: Vec<usize>,
    pub(super) code: Vec<u32>,
    pub(super) parent: Vec<u32>,
    pub(super) child_start: Vec<u32>,
    pub(super) child_end: Vec<u32>,
    pub(super) count: Vec<u32>,
    /// First leaf node id: leaf `i` is node `first_leaf + i`.
    pub(super) first_leaf: u32,
    /// Per leaf: `(bucket, rows)` of its remaining rows.
    pub(super) leaf_rows: Vec<Vec<(u32, Vec<u32>)>>,
    pub(super) leaf_of_row: Vec<u32>,
    pub(super) bucket_of_row: Vec<u32>,
    pub(super) n_buckets: usize,
    /// Per node and bucket, remaining rows (only when `masks` is used).
    pub(super) bucket_count: Vec<u32>,
    /// Per node, the buckets it holds as bits (empty when there are more
    /// than 64 buckets or too many nodes).
    pub(super) masks: Vec<u64>,
}

pub(super) const ROOT: u32 = 0;
pub(super) const NO_NODE: u32 = u32::MAX;
/// Largest `nodes * buckets` for which per-node bucket counts are kept.
pub(super) const MAX_BUCKET_CELLS: usize = 1 << 25;

impl Trie {
    pub(super) fn new(ctx: &Context<'_>, rows: &[u32]) -> Self {
        let table = ctx.table;
        let classes = ctx.classes;
        let n_qi = table.n_qi();
        // Most distinct values first: the widest fan-out near the root prunes best.
        let mut order: Vec<usize> = (0..n_qi).collect();
        order.sort_by_key(|&q| (std::cmp::Reverse(table.columns()[q].distinct()), q));
        // Buckets: distinct combinations of the sensitive values.
        let mut bucket_of_row = vec![u32::MAX; table.n_rows()];
        let mut bucket_ids: FxHashMap<Vec<u32>, u32> = FxHashMap::default();
        // One key buffer for all rows: a key is allocated once per bucket.
        let mut key: Vec<u32> = Vec::with_capacity(table.sensitive().len());
        for &r in rows {
            key.clear();
            key.extend(table.sensitive().iter().map(|s| s.codes().get(r as usize)));
            bucket_of_row[r as usize] = match bucket_ids.get(key.as_slice()) {
                Some(&b) => b,
                None => {
                    let b = bucket_ids.len() as u32;
                    bucket_ids.insert(key.clone(), b);
                    b
                }
            };
        }
        let n_buckets = bucket_ids.len().max(1);
        // Classes sorted by their codes in trie order.
        let mut sorted: Vec<usize> = (0..classes.len()).collect();
        sorted.sort_by(|&a, &b| {
            let (ta, tb) = (classes.tuple(a), classes.tuple(b));
            order
                .iter()
                .map(|&q| ta[q])
                .cmp(order.iter().map(|&q| tb[q]))
        });
        let mut code = vec![0u32];
        let mut parent = vec![NO_NODE];
        let mut child_start = vec![0u32];
        let mut child_end = vec![0u32];
        let mut current = vec![ROOT; sorted.len()];
        for &q in &order {
            let mut prev: Option<(u32, u32)> = None;
            for (i, &c) in sorted.iter().enumerate() {
                let p = current[i];
                let v = classes.tuple(c)[q];
                if prev != Some((p, v)) {
                    let id = code.len() as u32;
                    code.push(v);
                    parent.push(p);
                    child_start.push(0);
                    child_end.push(0);
                    if child_end[p as usize] == 0 {
                        child_start[p as usize] = id;
                    }
                    child_end[p as usize] = id + 1;
                    prev = Some((p, v));
                }
                current[i] = code.len() as u32 - 1;
            }
        }
        let n_nodes = code.len();
        let first_leaf = if sorted.is_empty() {
            n_nodes as u32
        } else {
            current[0]
        };
        let mut leaf_rows: Vec<Vec<(u32, Vec<u32>)>> =
            vec![Vec::new(); n_nodes - first_leaf as usize];
        let mut leaf_of_row = vec![NO_NODE; table.n_rows()];
        for (i, &c) in sorted.iter().enumerate() {
            let leaf = current[i] - first_leaf;
            let buckets = &mut leaf_rows[leaf as usize];
            for &r in classes.rows(c) {
                leaf_of_row[r as usize] = leaf;
                let b = bucket_of_row[r as usize];
                match buckets.iter_mut().find(|(x, _)| *x == b) {
                    Some((_, rs)) => rs.push(r),
                    None => buckets.push((b, vec![r])),
                }
            }
        }
        let use_masks = n_buckets <= 64 && n_nodes * n_buckets <= MAX_BUCKET_CELLS;
        let mut trie = Trie {
            order,
            code,
            parent,
            child_start,
            child_end,
            count: vec![0; n_nodes],
            first_leaf,
            leaf_rows,
            leaf_of_row,
            bucket_of_row,
            n_buckets,
            bucket_count: if use_masks {
                vec![0; n_nodes * n_buckets]
            } else {
                Vec::new()
            },
            masks: if use_masks {
                vec![0; n_nodes]
            } else {
                Vec::new()
            },
        };
        for &r in rows {
            trie.update_path(r, true);
        }
        trie
    }

    pub(super) fn node_of_leaf(&self, leaf: u32) -> u32 {
        self.first_leaf + leaf
    }

    /// Counts `row` in (or out of) every node on its path.
    pub(super) fn update_path(&mut self, row: u32, add: bool) {
        let b = self.bucket_of_row[row as usize] as usize;
        let mut node = self.node_of_leaf(self.leaf_of_row[row as usize]);
        while node != NO_NODE {
            let n = node as usize;
            if add {
                self.count[n] += 1;
            } else {
                self.count[n] -= 1;
            }
            if !self.masks.is_empty() {
                let cell = &mut self.bucket_count[n * self.n_buckets + b];
                if add {
                    *cell += 1;
                    self.masks[n] |= 1 << b;
                } else {
                    *cell -= 1;
                    if *cell == 0 {
                        self.masks[n] &= !(1 << b);
                    }
                }
            }
            node = self.parent[n];
        }
    }

    /// Removes `row` from the remaining tuples.
    pub(super) fn remove(&mut self, row: u32) {
        let leaf = self.leaf_of_row[row as usize] as usize;
        let b = self.bucket_of_row[row as usize];
        let buckets = &mut self.leaf_rows[leaf];
        if let Some(i) = buckets.iter().position(|(x, _)| *x == b) {
            let rows = &mut buckets[i].1;
            if let Some(j) = rows.iter().position(|&r| r == row) {
                rows.swap_remove(j);
            }
            if rows.is_empty() {
                buckets.remove(i);
            }
        }
        self.update_path(row, false);
    }
}

/// Which buckets may be taken in a search.
pub(super) enum Filter<'a> {
    /// Any bucket.
    All,
    /// Buckets whose bit is set (few buckets).
    Mask(u64),
    /// Decided per bucket on first sight, memoised for this search.
    Lazy {
        privacy: &'a Privacy,
        table: &'a QiTable,
        rows: &'a [u32],
        representative: &'a [u32],
        memo: FxHashMap<u32, bool>,
    },
}

impl Filter<'_> {
    pub(super) fn allows(&mut self, bucket: u32) -> bool {
        match self {
            Filter::All => true,
            Filter::Mask(m) => *m >> bucket & 1 == 1,
            Filter::Lazy {
                privacy,
                table,
                rows,
                representative,
                memo,
            } => *memo.entry(bucket).or_insert_with(|| {
                privacy.helps(ClassView { table, rows }, representative[bucket as usize])
            }),
        }
    }
}

/// Branch-and-bound search of the remaining tuple whose join with a cluster
/// costs least.
pub(super) struct Search<'a> {
    pub(super) trie: &'a Trie,
    /// `costs[d][code]`: weighted loss of the join on QI `order[d]`.
    pub(super) costs: &'a [Vec<f64>],
    /// `rest[d]`: lower bound of the loss on QIs `order[d..]`.
    pub(super) rest: &'a [f64],
    /// `base[d]`: the cluster's own loss on QI `order[d]`.
    pub(super) base: &'a [f64],
    pub(super) filter: Filter<'a>,
    pub(super) best: f64,
    pub(super) found: Option<(u32, u32)>,
    pub(super) done: bool,
}

pub(super) const EPS: f64 = 1e-12;

impl Search<'_> {
    pub(super) fn visit(&mut self, node: u32, depth: usize, partial: f64) {
        let trie = self.trie;
        if depth == trie.order.len() {
            let leaf = node - trie.first_leaf;
            for (b, rows) in &trie.leaf_rows[leaf as usize] {
                if !rows.is_empty() && self.filter.allows(*b) {
                    self.best = partial;
                    self.found = Some((leaf, *b));
                    if partial <= self.rest[0] + EPS {
                        self.done = true;
                    }
                    return;
                }
            }
            return;
        }
        let costs = &self.costs[depth];
        let rest = self.rest[depth + 1];
        let base = self.base[depth];
        let (start, end) = (
            trie.child_start[node as usize],
            trie.child_end[node as usize],
        );
        // Children inside the cluster's span first: they cost nothing more.
        for inside in [true, false] {
            for child in start..end {
                let c = child as usize;
                if trie.count[c] == 0 {
                    continue;
                }
                if let (false, Filter::Mask(m)) = (trie.masks.is_empty(), &self.filter) {
                    if trie.masks[c] & m == 0 {
                        continue;
                    }
                }
                let cost = costs[trie.code[c] as usize];
                if (cost <= base + EPS) != inside || partial + cost + rest >= self.best {
                    continue;
                }
                self.visit(child, depth + 1, partial + cost);
                if self.done {
                    return;
                }
            }
        }
    }
}
