//! Nearest classes to a reference tuple under an additive distance (a sum
//! of per-attribute, per-code entries, as [`DistanceTables`] give), in
//! increasing order of `(distance, position)`, without scanning every class.
//!
//! [`Trie`] is the index: the classes' tuples in a prefix tree whose levels
//! are the QIs in order of increasing cardinality. The distance of a prefix
//! is a lower bound of the distance of every class below it (entries are
//! never negative), so a best-first search pops classes in distance order
//! and expands only the prefixes closer than the last class it needs. Low
//! cardinality attributes first make the top levels cut the most: a
//! different sex, or a far category, is one big step. Every subtree keeps
//! the number of rows left in it, so exhausted subtrees are skipped as
//! groups leave the working set.
//!
//! [`scan`] is the plain alternative: every class with rows left, distances
//! computed on all cores, the nearest selected. Both give the same sequence
//! (ties broken by the classes' positions in the sorted table), which the
//! tests check.

use std::cmp::Reverse;
use std::collections::BinaryHeap;

use rayon::prelude::*;

use super::similarity::DistanceTables;
use crate::encode::EquivalenceClasses;

/// One level of the trie: its nodes, in order of their prefixes.
#[derive(Debug, Clone, Default)]
struct Level {
    /// The QI code of each node.
    code: Vec<u32>,
    /// Children of node `i` are nodes `first_child[i]..first_child[i+1]` of
    /// the next level (the last level's nodes are classes).
    first_child: Vec<u32>,
    /// The parent of each node on the previous level.
    parent: Vec<u32>,
    /// Rows left in each node's subtree.
    left: Vec<u32>,
}

/// A prefix tree of the classes' QI tuples with per-subtree row counts.
#[derive(Debug, Clone)]
pub(crate) struct Trie {
    /// The QI of each level.
    order: Vec<usize>,
    levels: Vec<Level>,
    /// The class of each node of the last level.
    leaf_class: Vec<u32>,
    /// The last-level node of each class.
    class_leaf: Vec<u32>,
}

impl Trie {
    /// Indexes `classes` (with `left[c]` rows each) on the QIs in `order`.
    pub(crate) fn new(classes: &EquivalenceClasses, order: &[usize], left: &[u32]) -> Self {
        let depth = order.len();
        let key = |c: u32| order.iter().map(move |&q| classes.tuple(c as usize)[q]);
        let mut sorted: Vec<u32> = (0..classes.len() as u32).collect();
        sorted.par_sort_unstable_by(|&a, &b| key(a).cmp(key(b)));
        let mut levels = vec![Level::default(); depth];
        let mut leaf_class = Vec::with_capacity(sorted.len());
        let mut class_leaf = vec![0u32; classes.len()];
        let mut previous: Option<u32> = None;
        for &c in &sorted {
            // The first level where this tuple leaves the previous one's path.
            let from = match previous {
                None => 0,
                Some(p) => key(p)
                    .zip(key(c))
                    .position(|(a, b)| a != b)
                    .unwrap_or(depth),
            };
            for l in from..depth {
                let parent = if l == 0 {
                    0
                } else {
                    levels[l - 1].code.len() as u32 - 1
                };
                let children_start = levels.get(l + 1).map_or(0, |n| n.code.len() as u32);
                let level = &mut levels[l];
                level.code.push(classes.tuple(c as usize)[order[l]]);
                level.first_child.push(children_start);
                level.parent.push(parent);
                level.left.push(0);
            }
            let leaf = levels[depth - 1].code.len() as u32 - 1;
            leaf_class.push(c);
            class_leaf[c as usize] = leaf;
            previous = Some(c);
        }
        for l in 0..depth {
            let end = levels.get(l + 1).map_or(0, |n| n.code.len() as u32);
            levels[l].first_child.push(end);
        }
        let mut trie = Trie {
            order: order.to_vec(),
            levels,
            leaf_class,
            class_leaf,
        };
        for (c, &n) in left.iter().enumerate() {
            trie.update(c as u32, |x| *x += n);
        }
        trie
    }

    /// Takes `count` rows of class `c` out of the index.
    pub(crate) fn remove(&mut self, c: u32, count: u32) {
        self.update(c, |x| {
            debug_assert!(*x >= count);
            *x -= count;
        });
    }

    fn update(&mut self, c: u32, mut f: impl FnMut(&mut u32)) {
        let mut node = self.class_leaf[c as usize];
        for l in (0..self.levels.len()).rev() {
            f(&mut self.levels[l].left[node as usize]);
            node = self.levels[l].parent[node as usize];
        }
    }

    /// The classes with rows left, nearest to the reference of `tables`
    /// first; classes at equal distance come out by increasing `position`.
    pub(crate) fn search<'a>(
        &'a self,
        tables: &'a DistanceTables,
        position: &'a [u32],
    ) -> TrieSearch<'a> {
        let mut search = TrieSearch {
            trie: self,
            tables,
            position,
            heap: BinaryHeap::new(),
            ties: Vec::new(),
            expanded: 0,
        };
        if !self.levels.is_empty() {
            search.push_children(0, 0, self.levels[0].code.len() as u32, 0);
        }
        search
    }
}

/// A best-first search of a [`Trie`]: an iterator of classes in order of
/// `(distance, position)`.
#[derive(Debug)]
pub(crate) struct TrieSearch<'a> {
    trie: &'a Trie,
    tables: &'a DistanceTables,
    position: &'a [u32],
    /// `(lower bound, level, node)`, smallest first.
    heap: BinaryHeap<Reverse<(u64, u32, u32)>>,
    /// Classes at the current distance, in reverse output order.
    ties: Vec<(u32, u32)>,
    /// Internal nodes expanded so far (for the algorithm's details).
    pub(crate) expanded: usize,
}

impl TrieSearch<'_> {
    fn push_children(&mut self, level: usize, start: u32, end: u32, base: u64) {
        let l = &self.trie.levels[level];
        let q = self.trie.order[level];
        for n in start..end {
            if l.left[n as usize] > 0 {
                let d = base + self.tables.entry(q, l.code[n as usize]);
                self.heap.push(Reverse((d, level as u32, n)));
            }
        }
    }

    /// Pops the heap up to and including every class at the next smallest
    /// distance, collecting them in `ties`.
    fn fill_ties(&mut self) {
        let last = self.trie.levels.len() - 1;
        let mut found: Option<u64> = None;
        while let Some(&Reverse((d, level, node))) = self.heap.peek() {
            if found.is_some_and(|f| d > f) {
                break;
            }
            self.heap.pop();
            let level = level as usize;
            if level == last {
                found = Some(d);
                let c = self.trie.leaf_class[node as usize];
                self.ties.push((self.position[c as usize], c));
            } else {
                self.expanded += 1;
                let l = &self.trie.levels[level];
                let (s, e) = (
                    l.first_child[node as usize],
                    l.first_child[node as usize + 1],
                );
                self.push_children(level + 1, s, e, d);
            }
        }
        // Output order is by position; pop() takes from the back.
        self.ties.sort_unstable_by(|a, b| b.cmp(a));
    }
}

impl Iterator for TrieSearch<'_> {
    type Item = u32;

    fn next(&mut self) -> Option<u32> {
        if self.ties.is_empty() && !self.trie.levels.is_empty() {
            self.fill_ties();
        }
        self.ties.pop().map(|(_, c)| c)
    }
}

/// The plain search: the distance of every class with rows left (on all
/// cores), then the classes in order of `(distance, position)`, sorting
/// only as far as asked: the first `first` classes are selected before
/// sorting, the rest sorted only if the caller goes on.
pub(crate) fn scan(
    classes: &EquivalenceClasses,
    alive: &[u32],
    tables: &DistanceTables,
    position: &[u32],
    first: usize,
) -> impl Iterator<Item = u32> {
    let mut keyed: Vec<(u64, u32, u32)> = alive
        .par_iter()
        .map(|&c| {
            (
                tables.distance(classes.tuple(c as usize)),
                position[c as usize],
                c,
            )
        })
        .collect();
    let first = first.clamp(1, keyed.len().max(1)).min(keyed.len());
    if first > 0 && first < keyed.len() {
        keyed.select_nth_unstable(first - 1);
    }
    keyed[..first].sort_unstable();
    let mut sorted_rest = false;
    let mut i = 0;
    std::iter::from_fn(move || {
        if i == first && !sorted_rest {
            keyed[first..].par_sort_unstable();
            sorted_rest = true;
        }
        let out = keyed.get(i).map(|&(_, _, c)| c);
        i += 1;
        out
    })
}
