//! KACA's working classes and the exact nearest-class search over them.
//!
//! The live classes sit in a trie keyed by their generalised cells: one
//! level per hierarchy level of each indexed QI, coarse to fine, the most
//! costly QIs first. The class distance (the KACA paper Def. 10) is a sum of
//! non-negative per-attribute terms, so a trie node's partial sum, times the
//! smallest class size below it, bounds the distance of every class below:
//! a depth-first search from the cheapest child prunes every subtree whose
//! bound exceeds the best distance found. Ties go to the lowest class id,
//! and the bounds are safe against rounding, so the answer equals a full
//! scan's whatever the visiting order and the thread count.

use std::cmp::Ordering;

use rayon::prelude::*;

use super::hierarchical_distance::{CellCode, DistanceModel, Probe};
use crate::hierarchy::{Level, NodeId};

/// A slice of an input class's rows: `rows(orig)[start..start + len]`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) struct Member {
    pub(super) orig: u32,
    pub(super) start: u32,
    pub(super) len: u32,
}

/// The working classes, structure of arrays; ids only grow (merged classes
/// get new ids, dead ones stay dead).
#[derive(Debug)]
pub(super) struct Classes {
    pub(super) m: usize,
    pub(super) tuples: Vec<CellCode>,
    pub(super) size: Vec<u32>,
    pub(super) alive: Vec<bool>,
    pub(super) members: Vec<Vec<Member>>,
}

impl Classes {
    pub(super) fn tuple(&self, c: u32) -> &[CellCode] {
        &self.tuples[c as usize * self.m..(c as usize + 1) * self.m]
    }
    pub(super) fn push(&mut self, tuple: &[CellCode], members: Vec<Member>) -> u32 {
        let id = self.size.len() as u32;
        self.tuples.extend_from_slice(tuple);
        self.size.push(members.iter().map(|m| m.len).sum());
        self.alive.push(true);
        self.members.push(members);
        id
    }
    pub(super) fn len(&self) -> usize {
        self.size.len()
    }
}

/// One level of the search trie: a hierarchical QI and the hierarchy level
/// its keys are taken at (0: the cell itself). A QI occupies consecutive
/// trie levels, from just below its root down to its leaves.
#[derive(Debug, Clone, Copy)]
pub(super) struct TrieLevel {
    pub(super) q: usize,
    pub(super) coarse: u8,
    /// Whether the previous trie level indexes the same QI (its bound is
    /// then replaced, not added).
    pub(super) refines: bool,
}

/// A child of a trie node, with what a bound needs in one place.
#[derive(Debug, Clone, Copy)]
pub(super) struct Child {
    pub(super) node: u32,
    /// The hierarchy node this child stands for at its level.
    pub(super) key: u32,
    /// A lower bound of the sizes of the live classes below (the minimum
    /// since the child was created).
    pub(super) min_size: u32,
}

/// The live classes keyed by their cells, one level per indexed hierarchy
/// level. Nodes whose classes are all gone are detached and reused, so
/// every child is live.
#[derive(Debug)]
pub(super) struct Trie {
    pub(super) levels: Vec<TrieLevel>,
    pub(super) parent: Vec<u32>,
    pub(super) children: Vec<Vec<Child>>,
    /// Live classes below each node.
    pub(super) live: Vec<u32>,
    pub(super) bucket: Vec<Vec<u32>>,
    pub(super) free: Vec<u32>,
    pub(super) leaf_of: Vec<u32>,
    pub(super) pos: Vec<u32>,
}

/// Largest number of children a trie node may get: a hierarchy level whose
/// nodes have more children than this (and the levels below it) is not
/// indexed.
pub(super) const MAX_FANOUT: usize = 256;
/// Buckets with more classes than this are scanned in parallel.
#[cfg(not(test))]
pub(super) const PARALLEL_BUCKET: usize = 8192;
#[cfg(test)]
pub(super) const PARALLEL_BUCKET: usize = 64;

impl Trie {
    pub(super) fn new(model: &DistanceModel) -> Self {
        // Index the hierarchical QIs whose generalisation costs something,
        // those whose first step costs most on average first (their
        // subtrees prune best), then those with fewer leaves.
        let mut order: Vec<(f64, usize, usize)> = (0..model.n_attributes())
            .filter_map(|q| {
                let h = model.hierarchy(q)?;
                let first = h.nodes_at(Level(1));
                let n = first.len() as f64;
                let step = first
                    .map(|n| model.cost(q, CellCode::node(n.0)))
                    .sum::<f64>()
                    / n;
                (model.cost(q, CellCode::node(h.root().0)) > 0.0).then_some((
                    step,
                    h.leaf_count(),
                    q,
                ))
            })
            .collect();
        order.sort_by(|a, b| b.0.total_cmp(&a.0).then(a.1.cmp(&b.1)).then(a.2.cmp(&b.2)));
        let mut levels = Vec::new();
        for (_, _, q) in order {
            let h = model.hierarchy(q).expect("filtered above");
            let mut refines = false;
            for coarse in (0..h.height()).rev() {
                let fanout = h
                    .nodes_at(Level(coarse + 1))
                    .map(|n| h.children(n).len())
                    .max()
                    .unwrap_or(0);
                if fanout > MAX_FANOUT {
                    break;
                }
                levels.push(TrieLevel { q, coarse, refines });
                refines = true;
            }
        }
        Trie {
            levels,
            parent: vec![0],
            children: vec![Vec::new()],
            live: vec![0],
            bucket: vec![Vec::new()],
            free: Vec::new(),
            leaf_of: Vec::new(),
            pos: Vec::new(),
        }
    }

    pub(super) fn key_of(&self, model: &DistanceModel, level: TrieLevel, cell: CellCode) -> u32 {
        let h = model
            .hierarchy(level.q)
            .expect("indexed QIs have hierarchies");
        let n = NodeId(cell.lo);
        if h.level(n).0 >= level.coarse {
            n.0
        } else {
            h.ancestor_of_node(n, Level(level.coarse)).0
        }
    }

    /// The child of `node` for `key` (created when missing), its size
    /// bound lowered to `size`.
    pub(super) fn child(&mut self, node: u32, key: u32, size: u32) -> u32 {
        if let Some(ch) = self.children[node as usize]
            .iter_mut()
            .find(|ch| ch.key == key)
        {
            ch.min_size = ch.min_size.min(size);
            return ch.node;
        }
        let c = match self.free.pop() {
            Some(c) => {
                self.parent[c as usize] = node;
                c
            }
            None => {
                let c = self.parent.len() as u32;
                self.parent.push(node);
                self.children.push(Vec::new());
                self.live.push(0);
                self.bucket.push(Vec::new());
                c
            }
        };
        self.children[node as usize].push(Child {
            node: c,
            key,
            min_size: size,
        });
        c
    }

    pub(super) fn insert(
        &mut self,
        model: &DistanceModel,
        class: u32,
        tuple: &[CellCode],
        size: u32,
    ) {
        let mut node = 0u32;
        self.live[0] += 1;
        for d in 0..self.levels.len() {
            let level = self.levels[d];
            let key = self.key_of(model, level, tuple[level.q]);
            node = self.child(node, key, size);
            self.live[node as usize] += 1;
        }
        let c = class as usize;
        if self.leaf_of.len() <= c {
            self.leaf_of.resize(c + 1, u32::MAX);
            self.pos.resize(c + 1, u32::MAX);
        }
        self.leaf_of[c] = node;
        self.pos[c] = self.bucket[node as usize].len() as u32;
        self.bucket[node as usize].push(class);
    }

    pub(super) fn remove(&mut self, class: u32) {
        let leaf = self.leaf_of[class as usize];
        let pos = self.pos[class as usize] as usize;
        let bucket = &mut self.bucket[leaf as usize];
        bucket.swap_remove(pos);
        if let Some(&moved) = bucket.get(pos) {
            self.pos[moved as usize] = pos as u32;
        }
        self.leaf_of[class as usize] = u32::MAX;
        let mut node = leaf;
        loop {
            let n = node as usize;
            self.live[n] -= 1;
            if n == 0 {
                break;
            }
            let parent = self.parent[n];
            if self.live[n] == 0 {
                // Detach and recycle: its children are all detached already.
                let siblings = &mut self.children[parent as usize];
                let i = siblings
                    .iter()
                    .position(|ch| ch.node == node)
                    .expect("a live node is among its parent's children");
                siblings.swap_remove(i);
                self.free.push(node);
            }
            node = parent;
        }
    }
}

/// The classes and their trie: what a search reads.
#[derive(Debug)]
pub(super) struct Index<'m> {
    pub(super) model: &'m DistanceModel,
    pub(super) classes: Classes,
    pub(super) trie: Trie,
    /// The smallest class size the models accept (k).
    pub(super) k: u32,
}

/// A trie node to visit: the bounds of the attributes above it (`s1`,
/// `s2`), of the attribute of its own level (`c1`, `c2`), and the resulting
/// lower bound of the distance to any class below it.
#[derive(Debug, Clone, Copy)]
pub(super) struct Frame {
    pub(super) node: u32,
    pub(super) depth: u32,
    pub(super) s1: f64,
    pub(super) s2: f64,
    pub(super) c1: f64,
    pub(super) c2: f64,
    pub(super) lb: f64,
}

/// Per-thread search scratch.
pub(super) struct Searcher<'m> {
    pub(super) probe: Probe<'m>,
    pub(super) stack: Vec<Frame>,
    pub(super) buf: Vec<Frame>,
    pub(super) evaluated: u64,
    /// Trie children whose bound was computed.
    pub(super) bounded: u64,
}

impl<'m> Searcher<'m> {
    pub(super) fn new(model: &'m DistanceModel) -> Self {
        Searcher {
            probe: model.probe(),
            stack: Vec::new(),
            buf: Vec::new(),
            evaluated: 0,
            bounded: 0,
        }
    }
}

/// The best candidate so far: least distance, then lowest class id.
#[derive(Debug, Clone, Copy, PartialEq)]
pub(super) struct Best {
    pub(super) dist: f64,
    pub(super) class: u32,
}

impl Best {
    pub(super) const NONE: Best = Best {
        dist: f64::INFINITY,
        class: u32::MAX,
    };
    pub(super) fn better(self, other: Best) -> Best {
        match other.dist.total_cmp(&self.dist) {
            Ordering::Less => other,
            Ordering::Equal if other.class < self.class => other,
            _ => self,
        }
    }
    /// Bounds above this cannot hold a class at least as good (the margin
    /// absorbs rounding: bounds and distances sum the same terms in
    /// different orders).
    pub(super) fn cutoff(self) -> f64 {
        self.dist + 1e-9 * (1.0 + self.dist.abs())
    }
}

/// What a search looks for: the class nearest to `n1` rows of one tuple,
/// other than `exclude`.
#[derive(Debug, Clone, Copy)]
pub(super) struct Query {
    pub(super) n1: u32,
    pub(super) exclude: u32,
    /// Whether a large partner gives only a stub (Def. 11); refinement moves
    /// rows into whole classes.
    pub(super) stub: bool,
}

impl Index<'_> {
    /// The number of rows of `E2` that a merge with `E1` generalises: the
    /// stub of `k - |E1|` rows when `|E1| < k` and `|E1| + |E2| >= 2k`
    /// (Def. 11), else all of `E2`.
    pub(super) fn partner_rows(&self, n1: u32, n2: u32) -> u32 {
        if n1 < self.k && n1 + n2 >= 2 * self.k {
            self.k - n1
        } else {
            n2
        }
    }

    pub(super) fn distance_to(&self, probe: &Probe<'_>, q: Query, c: u32) -> f64 {
        let (s1, s2) = probe.sums(self.classes.tuple(c));
        let n2 = self.classes.size[c as usize];
        let rows = if q.stub {
            self.partner_rows(q.n1, n2)
        } else {
            n2
        };
        q.n1 as f64 * s1 + rows as f64 * s2
    }

    pub(super) fn scan(&self, probe: &Probe<'_>, q: Query, classes: &[u32], best: Best) -> Best {
        classes
            .iter()
            .filter(|&&c| c != q.exclude)
            .fold(best, |best, &c| {
                best.better(Best {
                    dist: self.distance_to(probe, q, c),
                    class: c,
                })
            })
    }

    /// The live class nearest to class `e1` by class distance (ties: lowest
    /// id), or `None` when `e1` is the only live class.
    pub(super) fn nearest(&self, s: &mut Searcher<'_>, e1: u32) -> Option<Best> {
        let t1 = self.classes.tuple(e1);
        let q = Query {
            n1: self.classes.size[e1 as usize],
            exclude: e1,
            stub: true,
        };
        let best = self.search(s, t1, q, Best::NONE);
        (best.class != u32::MAX).then_some(best)
    }

    /// The live class nearest to `q.n1` rows of tuple `t1`, if any is better
    /// than `best` (ties: lowest id). Exact: the same answer as scanning
    /// every class.
    pub(super) fn search(
        &self,
        s: &mut Searcher<'_>,
        t1: &[CellCode],
        q: Query,
        mut best: Best,
    ) -> Best {
        let trie = &self.trie;
        s.probe.aim(t1);
        let n1 = q.n1;
        let stub = if q.stub && n1 < self.k {
            self.k - n1
        } else {
            u32::MAX
        };
        let n1f = n1 as f64;
        s.stack.clear();
        s.stack.push(Frame {
            node: 0,
            depth: 0,
            s1: 0.0,
            s2: 0.0,
            c1: 0.0,
            c2: 0.0,
            lb: 0.0,
        });
        while let Some(f) = s.stack.pop() {
            if f.lb > best.cutoff() {
                continue;
            }
            let depth = f.depth as usize;
            if depth == trie.levels.len() {
                let bucket = &trie.bucket[f.node as usize];
                s.evaluated += bucket.len() as u64;
                best = if bucket.len() > PARALLEL_BUCKET {
                    let probe = &s.probe;
                    bucket
                        .par_chunks(1024)
                        .map(|chunk| self.scan(probe, q, chunk, Best::NONE))
                        .reduce(|| Best::NONE, Best::better)
                        .better(best)
                } else {
                    self.scan(&s.probe, q, bucket, best)
                };
                continue;
            }
            let level = trie.levels[depth];
            let h = self
                .model
                .hierarchy(level.q)
                .expect("indexed QIs have hierarchies");
            let a = NodeId(t1[level.q].lo);
            // A key at the coarse level stands for its descendants: if it
            // covers t1 (it is t1's ancestor at that level) they may be t1
            // itself, so it bounds nothing; else every one of them meets t1
            // at lca(t1, key) and costs at least the key. Keys above the
            // coarse level are the cells themselves.
            let covering = if level.coarse > 0 && h.level(a).0 <= level.coarse {
                h.ancestor_of_node(a, Level(level.coarse)).0
            } else {
                u32::MAX
            };
            let cutoff = best.cutoff();
            // A finer level of the same QI replaces that QI's bound (it is
            // never smaller); a new QI adds to the bounds above.
            let (s1, s2) = if level.refines {
                (f.s1, f.s2)
            } else {
                (f.s1 + f.c1, f.s2 + f.c2)
            };
            let children = &trie.children[f.node as usize];
            s.bounded += children.len() as u64;
            for ch in children {
                let (c1, c2) = if ch.key == covering {
                    (0.0, 0.0)
                } else {
                    s.probe.parts(level.q, CellCode::node(ch.key))
                };
                let lb = n1f * (s1 + c1) + ch.min_size.min(stub) as f64 * (s2 + c2);
                if lb <= cutoff {
                    s.buf.push(Frame {
                        node: ch.node,
                        depth: f.depth + 1,
                        s1,
                        s2,
                        c1,
                        c2,
                        lb,
                    });
                }
            }
            // Cheapest child on top of the stack.
            s.buf.sort_by(|x, y| y.lb.total_cmp(&x.lb));
            s.stack.append(&mut s.buf);
        }
        best
    }

    /// The full scan [`Index::search`] must agree with (tests).
    pub(super) fn search_brute(
        &self,
        probe: &mut Probe<'_>,
        t1: &[CellCode],
        q: Query,
        best: Best,
    ) -> Best {
        probe.aim(t1);
        let live: Vec<u32> = (0..self.classes.len() as u32)
            .filter(|&c| self.classes.alive[c as usize])
            .collect();
        self.scan(probe, q, &live, best)
    }

    /// The key of the keyed strategies: the distortion a class's best merge
    /// adds per row of the class it forms, `Dist / (|E1| + |stub or E2|)`.
    pub(super) fn key(&self, e1: u32, best: Option<Best>) -> f64 {
        let Some(b) = best else {
            return f64::INFINITY;
        };
        let n1 = self.classes.size[e1 as usize];
        let rows = n1 + self.partner_rows(n1, self.classes.size[b.class as usize]);
        b.dist / rows as f64
    }
}
