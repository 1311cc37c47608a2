//! The paper's best-first search (the HeuristicMin paper Fig. 2) over attribute-wise
//! states.
//!
//! An expanded state's classes (distinct generalised rows with record
//! counts, and per requirement the records of every projected tuple) are
//! rolled up from the input classes; every child is counted from them by
//! merging only the classes whose value the lift changes, never from raw
//! rows.

use std::cmp::{Ordering, Reverse};
use std::collections::BinaryHeap;

use rustc_hash::{FxHashMap, FxHashSet};
use serde::Serialize;

use super::problem::{Budget, Found, Problem, StateSet, Stop};
use super::{Bound, HeuristicMinParams, Successors};

/// The counts of a state.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub(super) struct Meta {
    /// Distinct generalised rows.
    pub rows: u32,
    /// Distinct rows violating some requirement.
    pub violating: u32,
    /// Upper bound on the rows of any satisfying descendant.
    bound: u32,
    /// Classes of at least `class_k` records.
    big: u32,
    /// Records in classes of fewer than `class_k` records.
    small_records: u64,
    /// Levels climbed, summed over distinct input rows and attributes.
    steps: u64,
    /// Lifts from the root along the path that generated the state.
    depth: u32,
}

/// What the paper's search did.
#[derive(Debug, Default, Serialize)]
pub(super) struct Counters {
    pub nodes_generated: u64,
    pub nodes_expanded: u64,
    pub nodes_pruned: u64,
    pub duplicates: u64,
    pub satisfying_found: u64,
    pub dive_expanded: u64,
    pub max_open: usize,
}

pub(super) struct PaperResult {
    pub best: Option<Found>,
    pub root: Meta,
    pub stop: Stop,
    pub counters: Counters,
}

/// An expanded state: its classes and projections.
#[derive(Debug, Default)]
struct Mat {
    /// Working rows of the classes, `width` codes each.
    tuples: Vec<u32>,
    counts: Vec<u32>,
    /// Per requirement: the projected tuple of every class (empty for
    /// requirements on all QIs) and the records of every projected tuple.
    proj: Vec<Vec<u32>>,
    proj_count: Vec<Vec<u32>>,
    violating: Vec<bool>,
    /// Per shield attribute: the values shown, and the classes of each
    /// (`value_classes[value_start[v]..value_start[v + 1]]`).
    values: Vec<Vec<u32>>,
    value_start: Vec<Vec<u32>>,
    value_classes: Vec<Vec<u32>>,
}

impl Mat {
    fn tuple(&self, width: usize, j: usize) -> &[u32] {
        &self.tuples[j * width..(j + 1) * width]
    }

    /// The record count of class `j`'s projection on requirement `r`.
    fn projected(&self, p: &Problem<'_>, r: usize, j: usize) -> u32 {
        if p.reqs[r].all {
            self.counts[j]
        } else {
            self.proj_count[r][self.proj[r][j] as usize]
        }
    }
}

/// A candidate child: lift the shown values under each node of `to` (all
/// of attribute `attr`, none below another) to that node.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Lift {
    attr: usize,
    to: Vec<u32>,
}

/// Open states ordered as the paper selects them (the HeuristicMin paper Fig. 2 line 6):
/// most rows, then fewest violating rows, then fewest steps, then the first
/// generated.
#[derive(Debug, PartialEq, Eq)]
struct Open {
    rows: u32,
    violating: u32,
    steps: u64,
    id: u32,
}

impl Ord for Open {
    fn cmp(&self, other: &Self) -> Ordering {
        let key = |o: &Open| {
            (
                o.rows,
                Reverse(o.violating),
                Reverse(o.steps),
                Reverse(o.id),
            )
        };
        key(self).cmp(&key(other))
    }
}

impl PartialOrd for Open {
    fn partial_cmp(&self, other: &Self) -> Option<Ordering> {
        Some(self.cmp(other))
    }
}

/// The paper's search over states whose rows pack into `N` words.
pub(super) struct PaperSearch<'p, const N: usize> {
    p: &'p Problem<'p>,
    params: &'p HeuristicMinParams,
    counters: Counters,
    /// Reused buffers of the child rollup.
    merged: FxHashMap<[u64; N], u32>,
    merged_tuples: Vec<u32>,
    merged_counts: Vec<u32>,
    merged_rep: Vec<u32>,
    projected: FxHashMap<[u64; N], u32>,
}

impl<'p, const N: usize> PaperSearch<'p, N> {
    pub fn new(p: &'p Problem<'p>, params: &'p HeuristicMinParams) -> Self {
        PaperSearch {
            p,
            params,
            counters: Counters::default(),
            merged: FxHashMap::default(),
            merged_tuples: Vec::new(),
            merged_counts: Vec::new(),
            merged_rep: Vec::new(),
            projected: FxHashMap::default(),
        }
    }

    fn bound(&self, m: &Meta) -> u32 {
        let k = self.p.class_k;
        if self.params.bound == Bound::Rows || k == 0 {
            return m.rows;
        }
        let b = m.big as u64 + m.small_records / k as u64;
        m.rows.min(b.min(u32::MAX as u64) as u32)
    }

    /// Rolls the input classes up to the state `bits`.
    fn materialise(&self, bits: &[u64]) -> (Mat, Meta) {
        let p = self.p;
        let w = p.width;
        let maps = p.cut_maps(bits);
        let mut m = Mat::default();
        let mut index: FxHashMap<[u64; N], u32> = FxHashMap::default();
        let mut row = vec![0u32; w];
        for (i, input) in p.inputs.chunks(w).enumerate() {
            row[0] = input[0];
            for (a, map) in maps.iter().enumerate() {
                row[1 + a] = map[input[1 + a] as usize];
            }
            let next = m.counts.len() as u32;
            let j = *index.entry(p.layout.key(&row)).or_insert(next);
            if j == next {
                m.tuples.extend_from_slice(&row);
                m.counts.push(0);
            }
            m.counts[j as usize] += p.input_size[i];
        }
        let n = m.counts.len();
        for r in &p.reqs {
            if r.all {
                m.proj.push(Vec::new());
                m.proj_count.push(Vec::new());
                continue;
            }
            let mut ids: FxHashMap<[u64; N], u32> = FxHashMap::default();
            let mut proj = Vec::with_capacity(n);
            let mut counts: Vec<u32> = Vec::new();
            for j in 0..n {
                let next = counts.len() as u32;
                let id = *ids
                    .entry(p.layout.projection_key(m.tuple(w, j), &r.cols))
                    .or_insert(next);
                if id == next {
                    counts.push(0);
                }
                counts[id as usize] += m.counts[j];
                proj.push(id);
            }
            m.proj.push(proj);
            m.proj_count.push(counts);
        }
        let mut meta = Meta {
            rows: n as u32,
            ..Meta::default()
        };
        m.violating = (0..n)
            .map(|j| (0..p.reqs.len()).any(|r| m.projected(p, r, j) < p.reqs[r].k))
            .collect();
        meta.violating = m.violating.iter().filter(|&&v| v).count() as u32;
        for &c in &m.counts {
            if c >= p.class_k {
                meta.big += 1;
            } else {
                meta.small_records += c as u64;
            }
        }
        for (a, attr) in p.attrs.iter().enumerate() {
            let nodes = attr.h.node_count();
            let mut start = vec![0u32; nodes + 1];
            for j in 0..n {
                start[m.tuples[j * w + 1 + a] as usize + 1] += 1;
            }
            let values: Vec<u32> = (0..nodes as u32)
                .filter(|&v| start[v as usize + 1] > 0)
                .collect();
            for v in 1..start.len() {
                start[v] += start[v - 1];
            }
            let mut fill = start.clone();
            let mut classes = vec![0u32; n];
            for j in 0..n {
                let v = m.tuples[j * w + 1 + a] as usize;
                classes[fill[v] as usize] = j as u32;
                fill[v] += 1;
            }
            meta.steps += values
                .iter()
                .map(|&v| attr.level(v) * attr.weight(v))
                .sum::<u64>();
            m.values.push(values);
            m.value_start.push(start);
            m.value_classes.push(classes);
        }
        meta.bound = self.bound(&meta);
        (m, meta)
    }

    /// The lifts the violating rows of `m` call for, in a fixed order.
    fn lifts(&self, m: &Mat) -> Vec<Lift> {
        let p = self.p;
        let w = p.width;
        let mut wanted: Vec<FxHashSet<u32>> = vec![FxHashSet::default(); p.attrs.len()];
        let mut attrs = vec![false; p.attrs.len()];
        for j in (0..m.counts.len()).filter(|&j| m.violating[j]) {
            let t = m.tuple(w, j);
            match self.params.successors {
                // Attributes of the shields the row violates.
                Successors::Value => {
                    attrs.iter_mut().for_each(|x| *x = false);
                    for (r, req) in p.reqs.iter().enumerate() {
                        if m.projected(p, r, j) < req.k {
                            for (x, &inside) in attrs.iter_mut().zip(&req.in_shield) {
                                *x |= inside;
                            }
                        }
                    }
                }
                // Every shield attribute (the HeuristicMin paper Fig. 2 line 7).
                Successors::Attribute => attrs.iter_mut().for_each(|x| *x = true),
            }
            for (a, attr) in p.attrs.iter().enumerate() {
                let v = t[1 + a];
                if attrs[a] && !attr.is_root(v) {
                    wanted[a].insert(attr.parent(v));
                }
            }
        }
        let mut out = Vec::new();
        for (a, set) in wanted.into_iter().enumerate() {
            let attr = &p.attrs[a];
            let mut parents: Vec<u32> = set.into_iter().collect();
            match self.params.successors {
                Successors::Value => {
                    parents.sort_unstable();
                    out.extend(parents.into_iter().map(|n| Lift {
                        attr: a,
                        to: vec![n],
                    }));
                }
                Successors::Attribute => {
                    // Highest first, so nested lifts keep only the outer one.
                    parents.sort_unstable_by_key(|&n| (Reverse(attr.level(n)), n));
                    let mut outer: Vec<u32> = Vec::new();
                    for n in parents {
                        if !outer.iter().any(|&o| attr.under(n, o)) {
                            outer.push(n);
                        }
                    }
                    if !outer.is_empty() {
                        outer.sort_unstable();
                        out.push(Lift { attr: a, to: outer });
                    }
                }
            }
        }
        out
    }

    fn child_bits(&self, bits: &[u64], lift: &Lift) -> Vec<u64> {
        let attr = &self.p.attrs[lift.attr];
        let mut out = bits.to_vec();
        for &n in &lift.to {
            attr.collapse(&mut out, n);
        }
        out
    }

    /// Counts a child from its parent's classes: only the classes whose
    /// value the lift changes are merged (the rollup).
    fn evaluate(&mut self, m: &Mat, parent: &Meta, lift: &Lift) -> Meta {
        let p = self.p;
        let w = p.width;
        let a = lift.attr;
        let attr = &p.attrs[a];
        let col = 1 + a;
        self.merged.clear();
        self.merged_tuples.clear();
        self.merged_counts.clear();
        self.merged_rep.clear();
        let mut affected = 0u32;
        let mut affected_violating = 0u32;
        let mut affected_big = 0u32;
        let mut affected_small = 0u64;
        let mut steps = parent.steps;
        let mut row = vec![0u32; w];
        for &v in &m.values[a] {
            let Some(&to) = lift.to.iter().find(|&&n| attr.under(v, n)) else {
                continue;
            };
            steps += (attr.level(to) - attr.level(v)) * attr.weight(v);
            let start = m.value_start[a][v as usize] as usize;
            let end = m.value_start[a][v as usize + 1] as usize;
            for &j in &m.value_classes[a][start..end] {
                let j = j as usize;
                affected += 1;
                affected_violating += m.violating[j] as u32;
                if m.counts[j] >= p.class_k {
                    affected_big += 1;
                } else {
                    affected_small += m.counts[j] as u64;
                }
                row.copy_from_slice(m.tuple(w, j));
                row[col] = to;
                let next = self.merged_counts.len() as u32;
                let g = *self.merged.entry(p.layout.key(&row)).or_insert(next);
                if g == next {
                    self.merged_tuples.extend_from_slice(&row);
                    self.merged_counts.push(0);
                    self.merged_rep.push(j as u32);
                }
                self.merged_counts[g as usize] += m.counts[j];
            }
        }
        let n_merged = self.merged_counts.len();
        let mut merged_violating = vec![false; n_merged];
        for (r, req) in p.reqs.iter().enumerate() {
            if req.all {
                for (v, &c) in merged_violating.iter_mut().zip(&self.merged_counts) {
                    *v |= c < req.k;
                }
            } else if req.in_shield[a] {
                // The merged projections gather only affected classes.
                self.projected.clear();
                for g in 0..n_merged {
                    let t = &self.merged_tuples[g * w..(g + 1) * w];
                    let key = p.layout.projection_key(t, &req.cols);
                    *self.projected.entry(key).or_insert(0) += self.merged_counts[g];
                }
                for (g, v) in merged_violating.iter_mut().enumerate() {
                    let t = &self.merged_tuples[g * w..(g + 1) * w];
                    let key = p.layout.projection_key(t, &req.cols);
                    *v |= self.projected[&key] < req.k;
                }
            } else {
                // The lift leaves this projection unchanged.
                for (v, &j) in merged_violating.iter_mut().zip(&self.merged_rep) {
                    *v |= m.projected(p, r, j as usize) < req.k;
                }
            }
        }
        let mut meta = Meta {
            rows: parent.rows - affected + n_merged as u32,
            violating: parent.violating - affected_violating
                + merged_violating.iter().filter(|&&v| v).count() as u32,
            bound: 0,
            big: parent.big - affected_big,
            small_records: parent.small_records - affected_small,
            steps,
            depth: parent.depth + 1,
        };
        for &c in &self.merged_counts {
            if c >= p.class_k {
                meta.big += 1;
            } else {
                meta.small_records += c as u64;
            }
        }
        meta.bound = self.bound(&meta);
        meta
    }

    /// Follows the child with the fewest violating rows (then most rows,
    /// then fewest steps) down to a satisfying state.
    pub fn dive(&mut self, bits: Vec<u64>, meta: Meta) -> Found {
        let (mut bits, mut meta) = (bits, meta);
        while meta.violating > 0 {
            let (m, _) = self.materialise(&bits);
            self.counters.dive_expanded += 1;
            let mut best: Option<(Vec<u64>, Meta)> = None;
            for lift in self.lifts(&m) {
                let c = self.evaluate(&m, &meta, &lift);
                let better = best.as_ref().is_none_or(|(_, b)| {
                    (Reverse(c.violating), c.rows, Reverse(c.steps))
                        > (Reverse(b.violating), b.rows, Reverse(b.steps))
                });
                if better {
                    best = Some((self.child_bits(&bits, &lift), c));
                }
            }
            // A violating row violates a requirement whose shield values are
            // not all roots (all roots give one tuple of every record).
            let (b, c) = best.expect("a violating state has a lift");
            bits = b;
            meta = c;
        }
        self.counters.satisfying_found += 1;
        Found {
            bits,
            rows: meta.rows,
            steps: meta.steps,
            depth: Some(meta.depth),
        }
    }

    /// Runs the search; `best` is the answer unless the root satisfies.
    pub fn run(mut self, budget: &mut Budget) -> PaperResult {
        let p = self.p;
        let root_bits = vec![0u64; p.words];
        let (_, root) = self.materialise(&root_bits);
        if root.violating == 0 {
            self.counters.satisfying_found += 1;
            return PaperResult {
                best: Some(Found {
                    bits: root_bits,
                    rows: root.rows,
                    steps: root.steps,
                    depth: Some(0),
                }),
                root,
                stop: Stop::SearchComplete,
                counters: self.counters,
            };
        }
        let mut best: Option<Found> = None;
        if self.params.dive {
            best = Some(self.dive(root_bits.clone(), root));
        }
        let mut states: StateSet<Meta> = StateSet::new(p.words);
        let mut open = BinaryHeap::new();
        let id = states.insert(&root_bits, root);
        open.push(Open {
            rows: root.rows,
            violating: root.violating,
            steps: root.steps,
            id,
        });
        let mut stop = Stop::SearchComplete;
        while let Some(top) = open.pop() {
            let best_rows = best.as_ref().map(|b| b.rows);
            if best_rows.is_some_and(|b| top.rows <= b) {
                // The HeuristicMin paper Fig. 2 line 12: no open state is larger.
                self.counters.nodes_pruned += 1 + open.len() as u64;
                open.clear();
                break;
            }
            let meta = states.meta[top.id as usize];
            if best_rows.is_some_and(|b| meta.bound <= b) {
                self.counters.nodes_pruned += 1;
                continue;
            }
            if let Some(why) = budget.exhausted() {
                stop = why;
                if best.is_none() {
                    let bits = states.bits(top.id).to_vec();
                    best = Some(self.dive(bits, meta));
                }
                break;
            }
            let bits = states.bits(top.id).to_vec();
            let (m, _) = self.materialise(&bits);
            budget.expanded += 1;
            self.counters.nodes_expanded += 1;
            for lift in self.lifts(&m) {
                let child_bits = self.child_bits(&bits, &lift);
                if states.contains(&child_bits) {
                    self.counters.duplicates += 1;
                    continue;
                }
                let c = self.evaluate(&m, &meta, &lift);
                self.counters.nodes_generated += 1;
                let id = states.insert(&child_bits, c);
                if c.violating == 0 {
                    self.counters.satisfying_found += 1;
                    let found = Found {
                        bits: child_bits,
                        rows: c.rows,
                        steps: c.steps,
                        depth: Some(c.depth),
                    };
                    if found.beats(best.as_ref()) {
                        best = Some(found);
                    }
                } else if best.as_ref().is_some_and(|b| c.bound <= b.rows) {
                    self.counters.nodes_pruned += 1;
                } else {
                    open.push(Open {
                        rows: c.rows,
                        violating: c.violating,
                        steps: c.steps,
                        id,
                    });
                }
            }
            self.counters.max_open = self.counters.max_open.max(open.len());
        }
        PaperResult {
            best,
            root,
            stop,
            counters: self.counters,
        }
    }
}

/// The (violating, rows) pairs of the root's children, in generation order
/// (the HeuristicMin paper Fig. 5 labels states `(n, m)`).
#[cfg(test)]
pub(super) fn root_children<const N: usize>(
    p: &Problem<'_>,
    params: &HeuristicMinParams,
) -> Vec<(u32, u32)> {
    let mut s = PaperSearch::<N>::new(p, params);
    let root_bits = vec![0u64; p.words];
    let (m, root) = s.materialise(&root_bits);
    s.lifts(&m)
        .iter()
        .map(|l| {
            let c = s.evaluate(&m, &root, l);
            (c.violating, c.rows)
        })
        .collect()
}
