//! The proof phase: an exact best-first search that confirms (or improves)
//! the paper's answer over *all* attribute-wise states.
//!
//! One shield attribute `a` (the one whose hierarchy has the most cuts, age
//! on Adult) is eliminated by dynamic programming over its tree: once the
//! cuts of every other attribute are fixed (a *rest state* `R`), the rows of
//! the table are the sum over `a`'s shown nodes of the rows under each node,
//! and every requirement either contains `a` (its projected tuples then
//! separate by `a`'s node, so it is checked node by node) or does not (it
//! does not depend on `a`'s cut at all). The best cut of `a` is therefore
//! `best(u) = max(collapse u if u's rows satisfy, sum of best(children))`,
//! exact in `O(classes * height)`.
//!
//! The rest states are searched best first by an upper bound: coarsening
//! `R` only merges rows, and any cut of `a` valid under a coarser `R` gives
//! every shown node of `a` at least `k` records for each requirement on `a`;
//! so `UB(R)` = the same tree DP over rows under `R` with only that record
//! condition bounds every rest state at or above `R` (and decreases with
//! `R`). States whose bound does not exceed the best satisfying table are
//! pruned; the search stops when no open state's bound does (the paper's
//! stopping rule with this bound). Successors are every single lift of a
//! shown value of a rest attribute, which reaches every rest state.

use std::cmp::{Ordering, Reverse};
use std::collections::BinaryHeap;

use rustc_hash::FxHashMap;
use serde::Serialize;

use super::problem::{Budget, Found, Problem, StateSet, Stop};

/// What the proof phase did.
#[derive(Debug, Serialize)]
pub(super) struct ProofCounters {
    /// The attribute solved by dynamic programming.
    pub attribute: String,
    /// Cuts of the other shield attributes: the states the proof may visit.
    pub rest_states: f64,
    pub nodes_generated: u64,
    pub nodes_expanded: u64,
    pub nodes_pruned: u64,
    pub duplicates: u64,
    /// Whether the proof found a larger table than the paper's search.
    pub improved: bool,
    pub stopped_by: Stop,
}

/// A rest state's value.
#[derive(Debug, Clone)]
struct Eval {
    /// The best table with this rest state: rows, steps, full bitset.
    best: Option<(u32, u64, Vec<u64>)>,
    /// Upper bound on the rows of any table at or above this rest state.
    bound: u32,
}

#[derive(Debug, PartialEq, Eq)]
struct Open {
    bound: u32,
    steps: u64,
    id: u32,
}

impl Ord for Open {
    fn cmp(&self, other: &Self) -> Ordering {
        let key = |o: &Open| (o.bound, Reverse(o.steps), Reverse(o.id));
        key(self).cmp(&key(other))
    }
}

impl PartialOrd for Open {
    fn partial_cmp(&self, other: &Self) -> Option<Ordering> {
        Some(self.cmp(other))
    }
}

/// The exact search over rest states whose rows pack into `N` words.
pub(super) struct Exact<'p, const N: usize> {
    p: &'p Problem<'p>,
    /// The eliminated attribute and its working column.
    a: usize,
    col: usize,
    /// The largest k of the requirements whose shield holds `a`.
    weak_k: u32,
    /// Per requirement, the packed-key mask of its shield's columns.
    masks: Vec<[u64; N]>,
    level: FxHashMap<[u64; N], u32>,
    projected: FxHashMap<[u64; N], u32>,
}

impl<'p, const N: usize> Exact<'p, N> {
    /// The proof over `p`, eliminating the attribute with the most cuts.
    ///
    /// # Panics
    /// When `p` has no shield attribute.
    pub fn new(p: &'p Problem<'p>) -> Self {
        let a = (0..p.attrs.len())
            .max_by(|&x, &y| {
                p.attrs[x]
                    .cut_count()
                    .total_cmp(&p.attrs[y].cut_count())
                    .then(y.cmp(&x))
            })
            .expect("a shield attribute");
        let masks = p
            .reqs
            .iter()
            .map(|r| {
                let cols: Vec<usize> = if r.all {
                    (0..p.width).collect()
                } else {
                    r.cols.clone()
                };
                cols.into_iter()
                    .fold([0u64; N], |m, c| p.layout.with_column(m, c, u32::MAX))
            })
            .collect();
        Exact {
            p,
            a,
            col: 1 + a,
            weak_k: p
                .reqs
                .iter()
                .filter(|r| r.in_shield[a])
                .map(|r| r.k)
                .max()
                .unwrap_or(0),
            masks,
            level: FxHashMap::default(),
            projected: FxHashMap::default(),
        }
    }

    /// Number of cuts of the shield attributes other than the eliminated
    /// one (an upper bound on the states the proof visits).
    pub fn rest_states(&self) -> f64 {
        self.p
            .attrs
            .iter()
            .enumerate()
            .filter(|&(b, _)| b != self.a)
            .map(|(_, x)| x.cut_count())
            .product()
    }

    /// The counters of a proof not tried because it is too large.
    pub fn skipped(&self) -> ProofCounters {
        ProofCounters {
            attribute: self.p.attrs[self.a].name.to_string(),
            rest_states: self.rest_states(),
            nodes_generated: 0,
            nodes_expanded: 0,
            nodes_pruned: 0,
            duplicates: 0,
            improved: false,
            stopped_by: Stop::ProofTooLarge,
        }
    }

    /// The best table and the bound of the rest state `bits` (whose bits of
    /// the eliminated attribute are clear).
    fn evaluate(&mut self, bits: &[u64]) -> Eval {
        let p = self.p;
        let (a, col) = (self.a, self.col);
        let attr = &p.attrs[a];
        let h = attr.h;
        let w = p.width;
        let maps = p.cut_maps(bits);
        let rest_steps: u64 = p
            .attrs
            .iter()
            .enumerate()
            .filter(|&(b, _)| b != a)
            .map(|(b, x)| x.steps(&maps[b]))
            .sum();
        // Level 0: rows of the rest state with `a` unchanged.
        self.level.clear();
        let mut row = vec![0u32; w];
        for (i, input) in p.inputs.chunks(w).enumerate() {
            row[0] = input[0];
            for (b, map) in maps.iter().enumerate() {
                row[1 + b] = if b == a {
                    input[1 + b]
                } else {
                    map[input[1 + b] as usize]
                };
            }
            *self.level.entry(p.layout.key(&row)).or_insert(0) += p.input_size[i];
        }
        let mut entries: Vec<([u64; N], u32)> = self.level.drain().collect();
        // Requirements without `a` do not depend on its cut.
        let mut feasible_rest = true;
        for (r, req) in p.reqs.iter().enumerate() {
            if req.in_shield[a] {
                continue;
            }
            self.projected.clear();
            for (key, c) in &entries {
                *self.projected.entry(and(key, &self.masks[r])).or_insert(0) += c;
            }
            feasible_rest &= self.projected.values().all(|&c| c >= req.k);
        }
        // Per node of `a`: rows, records, smallest class, smallest projection.
        let nodes = h.node_count();
        let mut rows = vec![0u32; nodes];
        let mut records = vec![0u64; nodes];
        let mut feasible = vec![true; nodes];
        for level in 0..=h.height() {
            for (key, c) in &entries {
                let u = p.layout.column(key, col) as usize;
                rows[u] += 1;
                records[u] += *c as u64;
                feasible[u] &= *c >= p.class_k;
            }
            for (r, req) in p.reqs.iter().enumerate() {
                if req.all || !req.in_shield[a] {
                    continue;
                }
                self.projected.clear();
                for (key, c) in &entries {
                    *self.projected.entry(and(key, &self.masks[r])).or_insert(0) += c;
                }
                for (key, &c) in &self.projected {
                    if c < req.k {
                        feasible[p.layout.column(key, col) as usize] = false;
                    }
                }
            }
            if level < h.height() {
                self.level.clear();
                for (key, c) in &entries {
                    let u = p.layout.column(key, col);
                    let up = p.layout.with_column(*key, col, attr.parent(u));
                    *self.level.entry(up).or_insert(0) += c;
                }
                entries = self.level.drain().collect();
            }
        }
        // Tree DP, leaves first (node ids ascend with the level).
        let mut best: Vec<Option<(u32, u64)>> = vec![None; nodes];
        let mut collapse = vec![false; nodes];
        let mut bound: Vec<Option<u32>> = vec![None; nodes];
        for u in 0..nodes as u32 {
            let ui = u as usize;
            if records[ui] == 0 {
                continue;
            }
            let whole = feasible[ui].then(|| (rows[ui], attr.level(u) * attr.weight(u)));
            let whole_bound = (records[ui] >= self.weak_k as u64).then_some(rows[ui]);
            if attr.level(u) == 0 {
                best[ui] = whole;
                collapse[ui] = true;
                bound[ui] = whole_bound;
                continue;
            }
            let mut split = Some((0u32, 0u64));
            let mut split_bound = Some(0u32);
            for c in h.children(crate::hierarchy::NodeId(u)) {
                let ci = c.0 as usize;
                if records[ci] == 0 {
                    continue;
                }
                split = split.zip(best[ci]).map(|(s, b)| (s.0 + b.0, s.1 + b.1));
                split_bound = split_bound.zip(bound[ci]).map(|(s, b)| s + b);
            }
            let better = |x: (u32, u64), y: (u32, u64)| (x.0, Reverse(x.1)) > (y.0, Reverse(y.1));
            (best[ui], collapse[ui]) = match (split, whole) {
                (Some(s), Some(c)) if better(c, s) => (Some(c), true),
                (Some(s), _) => (Some(s), false),
                (None, c) => (c, true),
            };
            bound[ui] = split_bound.max(whole_bound);
        }
        let root = h.root().0 as usize;
        let best = best[root].filter(|_| feasible_rest).map(|(r, s)| {
            let mut full = bits.to_vec();
            let mut stack = vec![root as u32];
            while let Some(u) = stack.pop() {
                if collapse[u as usize] {
                    if attr.level(u) > 0 {
                        attr.collapse(&mut full, u);
                    }
                } else {
                    stack.extend(
                        h.children(crate::hierarchy::NodeId(u))
                            .map(|c| c.0)
                            .filter(|&c| records[c as usize] > 0),
                    );
                }
            }
            (r, s + rest_steps, full)
        });
        Eval {
            best,
            bound: bound[root].unwrap_or(0),
        }
    }

    /// Every single lift of a shown value of a rest attribute.
    fn children(&self, bits: &[u64]) -> Vec<Vec<u64>> {
        let p = self.p;
        let mut out: Vec<Vec<u64>> = Vec::new();
        for (b, attr) in p.attrs.iter().enumerate() {
            if b == self.a {
                continue;
            }
            let mut parents: Vec<u32> = attr
                .cut_map(bits)
                .into_iter()
                .enumerate()
                .filter(|&(leaf, n)| attr.weight(leaf as u32) > 0 && !attr.is_root(n))
                .map(|(_, n)| attr.parent(n))
                .collect();
            parents.sort_unstable();
            parents.dedup();
            for n in parents {
                let mut child = bits.to_vec();
                attr.collapse(&mut child, n);
                out.push(child);
            }
        }
        out
    }

    /// Searches the rest states, improving `best` where a larger table
    /// exists.
    pub fn run(mut self, budget: &mut Budget, best: &mut Option<Found>) -> ProofCounters {
        let p = self.p;
        let mut counters = ProofCounters {
            attribute: p.attrs[self.a].name.to_string(),
            rest_states: self.rest_states(),
            nodes_generated: 0,
            nodes_expanded: 0,
            nodes_pruned: 0,
            duplicates: 0,
            improved: false,
            stopped_by: Stop::SearchComplete,
        };
        let mut states: StateSet<(u32, u64)> = StateSet::new(p.words);
        let mut open = BinaryHeap::new();
        let root = vec![0u64; p.words];
        let offer = |eval: &Eval, best: &mut Option<Found>, counters: &mut ProofCounters| {
            if let Some((rows, steps, bits)) = &eval.best {
                let found = Found {
                    bits: bits.clone(),
                    rows: *rows,
                    steps: *steps,
                    depth: None,
                };
                if found.beats(best.as_ref()) {
                    counters.improved |= best.as_ref().is_some_and(|b| found.rows > b.rows);
                    *best = Some(found);
                }
            }
        };
        let e = self.evaluate(&root);
        offer(&e, best, &mut counters);
        let steps = e.best.as_ref().map_or(0, |b| b.1);
        let id = states.insert(&root, (e.bound, steps));
        open.push(Open {
            bound: e.bound,
            steps,
            id,
        });
        while let Some(top) = open.pop() {
            if best.as_ref().is_some_and(|b| top.bound <= b.rows) {
                counters.nodes_pruned += 1 + open.len() as u64;
                break;
            }
            if let Some(why) = budget.exhausted() {
                counters.stopped_by = why;
                break;
            }
            budget.expanded += 1;
            counters.nodes_expanded += 1;
            let bits = states.bits(top.id).to_vec();
            for child in self.children(&bits) {
                if states.contains(&child) {
                    counters.duplicates += 1;
                    continue;
                }
                let e = self.evaluate(&child);
                counters.nodes_generated += 1;
                offer(&e, best, &mut counters);
                let steps = e.best.as_ref().map_or(0, |b| b.1);
                let id = states.insert(&child, (e.bound, steps));
                if best.as_ref().is_some_and(|b| e.bound <= b.rows) {
                    counters.nodes_pruned += 1;
                } else {
                    open.push(Open {
                        bound: e.bound,
                        steps,
                        id,
                    });
                }
            }
        }
        counters
    }
}

fn and<const N: usize>(key: &[u64; N], mask: &[u64; N]) -> [u64; N] {
    let mut out = *key;
    for (o, m) in out.iter_mut().zip(mask) {
        *o &= m;
    }
    out
}
