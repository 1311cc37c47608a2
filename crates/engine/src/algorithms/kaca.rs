//! KACA: k-anonymisation by clustering in attribute hierarchies (Li, Wong,
//! Fu, Pei, 2006; seed 000, Alg. 1), local recoding.
//!
//! Start from the equivalence classes of the input. While a class is not
//! accepted by the privacy models (smaller than k, or not l-diverse once
//! such models exist), take one (the *next-class strategy*: seeded random as
//! in the paper, smallest first, or largest best-merge distortion first),
//! find the class at the least class distance (Def. 10, weighted
//! hierarchical distance with uniform, height or seed 003 level weights and
//! per-attribute weights `x_A`; see [`crate::distance`]) and merge the two.
//! When the small class `E1` (`|E1| < k`) would absorb a large class `E2`
//! (`|E1| + |E2| > 2k`, Def. 11), only a *stub* of `k - |E1|` rows of `E2`
//! joins `E1` and the *trunk* keeps its values; the distance is then taken
//! to the stub. Optionally, a class whose best merge costs more than a
//! threshold is suppressed instead, within the job's suppression limit.
//!
//! # Speed
//! The paper's loop is `O(|E|^2)`. Here the live classes sit in a trie keyed
//! by their generalised cells, one level per hierarchical QI (most costly
//! attributes first). The distance is a sum of non-negative per-attribute
//! terms, so a trie node's partial sum (times the smallest class size below
//! it) is a lower bound for every class below: a depth-first search from the
//! cheapest child prunes every subtree whose bound exceeds the best distance
//! found, and usually inspects a few dozen classes instead of thousands.
//! Per search a [`Probe`] tabulates each attribute's merge cost against
//! every hierarchy node. Pruning is exact (ties go to the lowest class id),
//! so the result is the same as the full scan's, whatever the thread count;
//! rayon scans large buckets and computes the initial keys of the
//! largest-distortion-first strategy in parallel.

use std::cmp::{Ordering, Reverse};
use std::collections::{BTreeSet, BinaryHeap};

use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;
use rayon::prelude::*;
use serde::{Deserialize, Serialize};

use crate::algorithms::{details, Algorithm, Context, Outcome};
use crate::distance::{CellCode, DistanceModel, LevelWeights, Probe};
use crate::error::{Error, Result};
use crate::hierarchy::{Level, NodeId};
use crate::partition::{NumericCells, Partition, SUPPRESSED};
use crate::privacy::ClassView;

/// The WHD weight scheme (seed 000 Def. 5; seed 003 Def. 5).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum WeightScheme {
    /// `w(j, j-1) = 1`.
    #[default]
    Uniform,
    /// `w(j, j-1) = 1/(j-1)^beta` (set `beta`, default 1).
    Height,
    /// Seed 003: `steps / L_A`, `L_A` levels including the leaves.
    Levels,
    /// Granularity (ARX's loss): `(m-1)/(D-1)` for a cell covering `m` of
    /// the `D` distinct values.
    Granularity,
}

/// Which class not yet accepted is merged next.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Strategy {
    /// Uniformly at random among the classes not yet accepted, from the
    /// job's seed (the paper's Alg. 1, line 3).
    #[default]
    Random,
    /// The smallest class first (ties: the oldest class).
    SmallestFirst,
    /// The class whose cheapest merge currently costs most first (outliers
    /// first, while they still have close partners); keys are re-evaluated
    /// lazily when a class comes to the top.
    LargestDistortionFirst,
    /// The class whose cheapest merge currently costs least first
    /// (agglomerative order: obvious merges before doubtful ones); keys are
    /// re-evaluated lazily as for largest-distortion-first.
    LeastDistortionFirst,
}

/// KACA's parameters, set in the job's `[algorithm]` table.
///
/// ```toml
/// [algorithm]
/// name = "kaca"
/// seed = 1
/// weights = "height"          # uniform (default) | height | levels
/// beta = 1.0                  # height weights only, > 0, default 1
/// strategy = "smallest-first" # random (default) | smallest-first | largest-distortion-first
/// outlier_threshold = 4.0     # suppress a class whose best merge costs more (off by default)
/// numeric_cells = "hierarchy" # hierarchy (default) | ranges
/// refine = true               # local search after the merges (off by default)
/// ```
#[derive(Debug, Clone, Default, PartialEq, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct KacaParams {
    /// The WHD weight scheme.
    #[serde(default)]
    pub weights: WeightScheme,
    /// The exponent of height weights (default 1).
    #[serde(default)]
    pub beta: Option<f64>,
    /// Which class is merged next.
    #[serde(default)]
    pub strategy: Strategy,
    /// Suppress, instead of merging, a class whose least class distance
    /// (Def. 10: summed over its rows) exceeds this; off when absent. Rows
    /// are suppressed only within the job's `suppression_limit`.
    #[serde(default)]
    pub outlier_threshold: Option<f64>,
    /// How numeric QIs with an interval hierarchy are published: the group's
    /// lowest common ancestor (what KACA's distance measures) or its tighter
    /// `[min-max]` range.
    #[serde(default)]
    pub numeric_cells: NumericCells,
    /// After the merges, move rows from a class to another while that lowers
    /// the total distortion and both stay accepted (a local search the paper
    /// does not have; off by default).
    #[serde(default)]
    pub refine: bool,
}

/// The KACA algorithm.
#[derive(Debug, Clone)]
pub struct Kaca {
    params: KacaParams,
    weights: LevelWeights,
    /// Cross-checks every search against a full scan and every split's trunk
    /// (tests only).
    check: bool,
}

impl Kaca {
    /// KACA with the given parameters.
    ///
    /// # Errors
    /// [`Error::Spec`] for a `beta` that is not positive or given without
    /// height weights, or a negative or non-finite outlier threshold.
    pub fn from_params(params: KacaParams) -> Result<Self> {
        let weights = match (params.weights, params.beta) {
            (WeightScheme::Height, beta) => {
                let beta = beta.unwrap_or(1.0);
                if !(beta > 0.0 && beta.is_finite()) {
                    return Err(Error::spec(
                        "algorithm.beta",
                        "must be a positive number (the paper uses 1)",
                    ));
                }
                LevelWeights::Height { beta }
            }
            (_, Some(_)) => {
                return Err(Error::spec(
                    "algorithm.beta",
                    "applies to height weights only; set `weights = \"height\"` or drop `beta`",
                ))
            }
            (WeightScheme::Uniform, None) => LevelWeights::Uniform,
            (WeightScheme::Levels, None) => LevelWeights::Levels,
            (WeightScheme::Granularity, None) => LevelWeights::Granularity,
        };
        if let Some(t) = params.outlier_threshold {
            if !(t >= 0.0 && t.is_finite()) {
                return Err(Error::spec(
                    "algorithm.outlier_threshold",
                    "must be a distance >= 0 (a class distance, Def. 10 of the KACA paper)",
                ));
            }
        }
        Ok(Kaca {
            params,
            weights,
            check: false,
        })
    }
}

#[derive(Debug, Default, Serialize)]
struct KacaDetails {
    strategy: Strategy,
    weights: LevelWeights,
    initial_classes: usize,
    initially_unaccepted: usize,
    /// Merges of two whole classes.
    merges: usize,
    /// Merges with a stub (Def. 11).
    splits: usize,
    /// Classes suppressed as outliers (or because nothing was left to merge).
    suppressed_classes: usize,
    suppressed_rows: usize,
    groups: usize,
    /// Nearest-class searches, and class distances evaluated by them.
    searches: usize,
    distances_evaluated: u64,
    bounds_computed: u64,
    trie_nodes: usize,
    trie_levels: usize,
    /// Lazily re-evaluated keys (largest-distortion-first).
    requeued: usize,
    /// Refinement passes and the row moves they made.
    refine_passes: usize,
    refine_moves: usize,
    /// The QIs indexed by the search trie, in trie order.
    indexed: Vec<String>,
}

impl Algorithm for Kaca {
    fn name(&self) -> &'static str {
        "kaca"
    }

    fn run(&self, ctx: &Context<'_>) -> Result<Outcome> {
        ctx.privacy.check_feasible(ctx.table)?;
        let model = DistanceModel::new(ctx.table, self.weights)?;
        let mut run = Run::new(self, ctx, &model);
        run.details.strategy = self.params.strategy;
        run.details.weights = self.weights;
        run.solve()?;
        let (partition, facts) = run.finish();
        Ok(Outcome {
            partition,
            details: details(&facts)?,
        })
    }
}

/// A slice of an input class's rows: `rows(orig)[start..start + len]`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Member {
    orig: u32,
    start: u32,
    len: u32,
}

/// The working classes, structure of arrays; ids only grow (merged classes
/// get new ids, dead ones stay dead).
#[derive(Debug)]
struct Classes {
    m: usize,
    tuples: Vec<CellCode>,
    size: Vec<u32>,
    alive: Vec<bool>,
    members: Vec<Vec<Member>>,
}

impl Classes {
    fn tuple(&self, c: u32) -> &[CellCode] {
        &self.tuples[c as usize * self.m..(c as usize + 1) * self.m]
    }
    fn push(&mut self, tuple: &[CellCode], members: Vec<Member>) -> u32 {
        let id = self.size.len() as u32;
        self.tuples.extend_from_slice(tuple);
        self.size.push(members.iter().map(|m| m.len).sum());
        self.alive.push(true);
        self.members.push(members);
        id
    }
    fn len(&self) -> usize {
        self.size.len()
    }
}

/// One level of the search trie: a hierarchical QI and the hierarchy level
/// its keys are taken at (0: the cell itself). A QI occupies consecutive
/// trie levels, from just below its root down to its leaves.
#[derive(Debug, Clone, Copy)]
struct TrieLevel {
    q: usize,
    coarse: u8,
    /// Whether the previous trie level indexes the same QI (its bound is
    /// then replaced, not added).
    refines: bool,
}

/// The live classes keyed by their cells, one level per indexed hierarchy
/// level. Nodes whose classes are all gone are detached and reused.
#[derive(Debug)]
struct Trie {
    levels: Vec<TrieLevel>,
    parent: Vec<u32>,
    key: Vec<u32>,
    children: Vec<Vec<u32>>,
    /// Live classes below each node.
    live: Vec<u32>,
    /// A lower bound of the sizes of the live classes below each node (the
    /// minimum since the node was created).
    min_size: Vec<u32>,
    bucket: Vec<Vec<u32>>,
    free: Vec<u32>,
    leaf_of: Vec<u32>,
    pos: Vec<u32>,
}

/// Largest number of children a trie node may get: a hierarchy level whose
/// nodes have more children than this (and the levels below it) is not
/// indexed.
const MAX_FANOUT: usize = 256;
/// Buckets with more classes than this are scanned in parallel.
#[cfg(not(test))]
const PARALLEL_BUCKET: usize = 8192;
#[cfg(test)]
const PARALLEL_BUCKET: usize = 64;
/// Most refinement passes.
const REFINE_PASSES: usize = 8;

impl Trie {
    fn new(model: &DistanceModel) -> Self {
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
            key: vec![0],
            children: vec![Vec::new()],
            live: vec![0],
            min_size: vec![u32::MAX],
            bucket: vec![Vec::new()],
            free: Vec::new(),
            leaf_of: Vec::new(),
            pos: Vec::new(),
        }
    }

    fn key_of(&self, model: &DistanceModel, level: TrieLevel, cell: CellCode) -> u32 {
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

    fn child(&mut self, node: u32, key: u32) -> u32 {
        if let Some(&c) = self.children[node as usize]
            .iter()
            .find(|&&c| self.key[c as usize] == key)
        {
            return c;
        }
        let c = match self.free.pop() {
            Some(c) => {
                self.parent[c as usize] = node;
                self.key[c as usize] = key;
                self.min_size[c as usize] = u32::MAX;
                c
            }
            None => {
                let c = self.parent.len() as u32;
                self.parent.push(node);
                self.key.push(key);
                self.children.push(Vec::new());
                self.live.push(0);
                self.min_size.push(u32::MAX);
                self.bucket.push(Vec::new());
                c
            }
        };
        self.children[node as usize].push(c);
        c
    }

    fn insert(&mut self, model: &DistanceModel, class: u32, tuple: &[CellCode], size: u32) {
        let mut node = 0u32;
        self.live[0] += 1;
        self.min_size[0] = self.min_size[0].min(size);
        for d in 0..self.levels.len() {
            let level = self.levels[d];
            let key = self.key_of(model, level, tuple[level.q]);
            node = self.child(node, key);
            self.live[node as usize] += 1;
            self.min_size[node as usize] = self.min_size[node as usize].min(size);
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

    fn remove(&mut self, class: u32) {
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
                    .position(|&c| c == node)
                    .expect("a live node is among its parent's children");
                siblings.swap_remove(i);
                self.free.push(node);
            }
            node = parent;
        }
        if self.live[0] == 0 {
            self.min_size[0] = u32::MAX;
        }
    }
}

/// The classes and their trie: what a search reads.
#[derive(Debug)]
struct Index<'m> {
    model: &'m DistanceModel,
    classes: Classes,
    trie: Trie,
    /// The smallest class size the models accept (k).
    k: u32,
}

/// A trie node to visit: the bounds of the attributes above it (`s1`,
/// `s2`), of the attribute of its own level (`c1`, `c2`), and the resulting
/// lower bound of the distance to any class below it.
#[derive(Debug, Clone, Copy)]
struct Frame {
    node: u32,
    depth: u32,
    s1: f64,
    s2: f64,
    c1: f64,
    c2: f64,
    lb: f64,
}

/// Per-thread search scratch.
struct Searcher<'m> {
    probe: Probe<'m>,
    stack: Vec<Frame>,
    buf: Vec<Frame>,
    evaluated: u64,
    /// Trie children whose bound was computed.
    bounded: u64,
}

impl<'m> Searcher<'m> {
    fn new(model: &'m DistanceModel) -> Self {
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
struct Best {
    dist: f64,
    class: u32,
}

impl Best {
    const NONE: Best = Best {
        dist: f64::INFINITY,
        class: u32::MAX,
    };
    fn better(self, other: Best) -> Best {
        match other.dist.total_cmp(&self.dist) {
            Ordering::Less => other,
            Ordering::Equal if other.class < self.class => other,
            _ => self,
        }
    }
    /// Bounds above this cannot hold a class at least as good (the margin
    /// absorbs rounding: bounds and distances sum the same terms in
    /// different orders).
    fn cutoff(self) -> f64 {
        self.dist + 1e-9 * (1.0 + self.dist.abs())
    }
}

/// What a search looks for: the class nearest to `n1` rows of one tuple,
/// other than `exclude`.
#[derive(Debug, Clone, Copy)]
struct Query {
    n1: u32,
    exclude: u32,
    /// Whether a large partner gives only a stub (Def. 11); refinement moves
    /// rows into whole classes.
    stub: bool,
}

impl Index<'_> {
    /// The number of rows of `E2` that a merge with `E1` generalises: the
    /// stub of `k - |E1|` rows when `|E1| < k` and `|E1| + |E2| >= 2k`
    /// (Def. 11), else all of `E2`.
    fn partner_rows(&self, n1: u32, n2: u32) -> u32 {
        if n1 < self.k && n1 + n2 >= 2 * self.k {
            self.k - n1
        } else {
            n2
        }
    }

    fn distance_to(&self, probe: &Probe<'_>, q: Query, c: u32) -> f64 {
        let (s1, s2) = probe.sums(self.classes.tuple(c));
        let n2 = self.classes.size[c as usize];
        let rows = if q.stub {
            self.partner_rows(q.n1, n2)
        } else {
            n2
        };
        q.n1 as f64 * s1 + rows as f64 * s2
    }

    fn scan(&self, probe: &Probe<'_>, q: Query, classes: &[u32], best: Best) -> Best {
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
    fn nearest(&self, s: &mut Searcher<'_>, e1: u32) -> Option<Best> {
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
    fn search(&self, s: &mut Searcher<'_>, t1: &[CellCode], q: Query, mut best: Best) -> Best {
        let trie = &self.trie;
        s.probe.aim(t1);
        let n1 = q.n1;
        let stub = if q.stub && n1 < self.k {
            self.k - n1
        } else {
            u32::MAX
        };
        let nmin = |node: u32| trie.min_size[node as usize].min(stub) as f64;
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
            for &child in children {
                let key = trie.key[child as usize];
                let g = NodeId(key);
                // A key at the coarse level stands for its descendants: if it
                // covers t1 they may be t1 itself (bound 0), else every one
                // of them meets t1 at lca(t1, key) and costs at least the
                // key. Above the coarse level the key is the cell itself.
                let (c1, c2) = if level.coarse > 0 && h.level(g).0 == level.coarse && h.covers(g, a)
                {
                    (0.0, 0.0)
                } else {
                    s.probe.parts(level.q, CellCode::node(key))
                };
                let lb = n1f * (s1 + c1) + nmin(child) * (s2 + c2);
                if lb <= cutoff {
                    s.buf.push(Frame {
                        node: child,
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
    fn search_brute(&self, probe: &mut Probe<'_>, t1: &[CellCode], q: Query, best: Best) -> Best {
        probe.aim(t1);
        let live: Vec<u32> = (0..self.classes.len() as u32)
            .filter(|&c| self.classes.alive[c as usize])
            .collect();
        self.scan(probe, q, &live, best)
    }

    /// The key of the keyed strategies: the distortion a class's best merge
    /// adds per row of the class it forms, `Dist / (|E1| + |stub or E2|)`.
    fn key(&self, e1: u32, best: Option<Best>) -> f64 {
        let Some(b) = best else {
            return f64::INFINITY;
        };
        let n1 = self.classes.size[e1 as usize];
        let rows = n1 + self.partner_rows(n1, self.classes.size[b.class as usize]);
        b.dist / rows as f64
    }
}

/// Total order on f64 keys for the largest-distortion-first heap.
#[derive(Debug, Clone, Copy, PartialEq)]
struct Key(f64);
impl Eq for Key {}
impl PartialOrd for Key {
    fn partial_cmp(&self, other: &Self) -> Option<Ordering> {
        Some(self.cmp(other))
    }
}
impl Ord for Key {
    fn cmp(&self, other: &Self) -> Ordering {
        self.0.total_cmp(&other.0)
    }
}

/// The classes not yet accepted, ordered by the strategy.
enum Pending {
    Random {
        rng: Box<ChaCha8Rng>,
        list: Vec<u32>,
        pos: Vec<u32>,
    },
    Smallest {
        set: BTreeSet<(u32, u32)>,
        key: Vec<u32>,
    },
    /// A max-heap of `sign * distance` (stale keys are re-evaluated).
    Keyed {
        heap: BinaryHeap<(Key, Reverse<u32>)>,
        member: Vec<bool>,
        sign: f64,
    },
}

impl Pending {
    fn add(&mut self, class: u32, size: u32, key: f64) {
        let c = class as usize;
        match self {
            Pending::Random { list, pos, .. } => {
                if pos.len() <= c {
                    pos.resize(c + 1, u32::MAX);
                }
                pos[c] = list.len() as u32;
                list.push(class);
            }
            Pending::Smallest { set, key: k } => {
                if k.len() <= c {
                    k.resize(c + 1, u32::MAX);
                }
                k[c] = size;
                set.insert((size, class));
            }
            Pending::Keyed { heap, member, .. } => {
                if member.len() <= c {
                    member.resize(c + 1, false);
                }
                member[c] = true;
                heap.push((Key(key), Reverse(class)));
            }
        }
    }

    fn remove(&mut self, class: u32) {
        let c = class as usize;
        match self {
            Pending::Random { list, pos, .. } => {
                let Some(&p) = pos.get(c).filter(|&&p| p != u32::MAX) else {
                    return;
                };
                list.swap_remove(p as usize);
                if let Some(&moved) = list.get(p as usize) {
                    pos[moved as usize] = p;
                }
                pos[c] = u32::MAX;
            }
            Pending::Smallest { set, key } => {
                if let Some(&s) = key.get(c).filter(|&&s| s != u32::MAX) {
                    set.remove(&(s, class));
                    key[c] = u32::MAX;
                }
            }
            Pending::Keyed { member, .. } => {
                if let Some(m) = member.get_mut(c) {
                    *m = false;
                }
            }
        }
    }
}

struct Run<'a, 'm> {
    kaca: &'a Kaca,
    ctx: &'a Context<'a>,
    index: Index<'m>,
    searcher: Searcher<'m>,
    pending: Pending,
    suppressed: Vec<Member>,
    suppressed_rows: usize,
    max_suppressed: usize,
    /// Rows in live classes.
    live_rows: usize,
    rows: Vec<u32>,
    details: KacaDetails,
}

impl<'a, 'm> Run<'a, 'm> {
    fn new(kaca: &'a Kaca, ctx: &'a Context<'a>, model: &'m DistanceModel) -> Self {
        let ec = ctx.classes;
        let m = ctx.table.n_qi();
        let mut classes = Classes {
            m,
            tuples: Vec::with_capacity(ec.len() * m * 2),
            size: Vec::with_capacity(ec.len() * 2),
            alive: Vec::with_capacity(ec.len() * 2),
            members: Vec::with_capacity(ec.len() * 2),
        };
        let mut tuple = Vec::with_capacity(m);
        for c in 0..ec.len() {
            tuple.clear();
            tuple.extend(ec.tuple(c).iter().map(|&code| CellCode::node(code)));
            classes.push(
                &tuple,
                vec![Member {
                    orig: c as u32,
                    start: 0,
                    len: ec.size(c) as u32,
                }],
            );
        }
        let mut trie = Trie::new(model);
        for c in 0..classes.len() as u32 {
            trie.insert(model, c, classes.tuple(c), classes.size[c as usize]);
        }
        let k = ctx.privacy.min_class_size().max(1) as u32;
        let pending = match kaca.params.strategy {
            Strategy::Random => Pending::Random {
                rng: Box::new(ChaCha8Rng::seed_from_u64(ctx.spec.algorithm.seed)),
                list: Vec::new(),
                pos: Vec::new(),
            },
            Strategy::SmallestFirst => Pending::Smallest {
                set: BTreeSet::new(),
                key: Vec::new(),
            },
            Strategy::LargestDistortionFirst => Pending::Keyed {
                heap: BinaryHeap::new(),
                member: Vec::new(),
                sign: 1.0,
            },
            Strategy::LeastDistortionFirst => Pending::Keyed {
                heap: BinaryHeap::new(),
                member: Vec::new(),
                sign: -1.0,
            },
        };
        let live_rows = classes.size.iter().map(|&s| s as usize).sum();
        let details = KacaDetails {
            initial_classes: classes.len(),
            indexed: trie
                .levels
                .iter()
                .filter(|l| !l.refines)
                .map(|l| ctx.table.columns()[l.q].name().to_string())
                .collect(),
            ..Default::default()
        };
        Run {
            kaca,
            ctx,
            index: Index {
                model,
                classes,
                trie,
                k,
            },
            searcher: Searcher::new(model),
            pending,
            suppressed: Vec::new(),
            suppressed_rows: 0,
            max_suppressed: ctx.privacy.max_suppressed(ctx.table.n_rows()),
            live_rows,
            rows: Vec::new(),
            details,
        }
    }

    /// Whether the models accept a class made of `members`.
    fn accepts(&mut self, members: &[Member]) -> bool {
        let size: u32 = members.iter().map(|m| m.len).sum();
        if size < self.index.k {
            return false;
        }
        self.rows.clear();
        for m in members {
            let rows = self.ctx.classes.rows(m.orig as usize);
            self.rows
                .extend_from_slice(&rows[m.start as usize..(m.start + m.len) as usize]);
        }
        self.ctx.privacy.accepts(ClassView {
            table: self.ctx.table,
            rows: &self.rows,
        })
    }

    fn search(&mut self, e1: u32) -> Option<Best> {
        self.details.searches += 1;
        let found = self.index.nearest(&mut self.searcher, e1);
        if self.kaca.check {
            let mut probe = self.index.model.probe();
            let q = Query {
                n1: self.index.classes.size[e1 as usize],
                exclude: e1,
                stub: true,
            };
            let brute =
                self.index
                    .search_brute(&mut probe, self.index.classes.tuple(e1), q, Best::NONE);
            assert_eq!(
                found,
                (brute.class != u32::MAX).then_some(brute),
                "pruned search differs from the full scan"
            );
        }
        found
    }

    fn solve(&mut self) -> Result<()> {
        let initial: Vec<u32> = (0..self.index.classes.len() as u32)
            .filter(|&c| {
                let members = self.index.classes.members[c as usize].clone();
                !self.accepts(&members)
            })
            .collect();
        self.details.initially_unaccepted = initial.len();
        let keys: Vec<f64> = match self.pending {
            Pending::Keyed { sign, .. } => {
                let index = &self.index;
                let found: Vec<(f64, u64)> = initial
                    .par_iter()
                    .map_init(
                        || Searcher::new(index.model),
                        |s, &c| {
                            let before = s.evaluated;
                            let d = index.key(c, index.nearest(s, c));
                            (d, s.evaluated - before)
                        },
                    )
                    .collect();
                self.details.searches += found.len();
                self.details.distances_evaluated += found.iter().map(|f| f.1).sum::<u64>();
                found.into_iter().map(|f| sign * f.0).collect()
            }
            _ => vec![0.0; initial.len()],
        };
        for (&c, &key) in initial.iter().zip(&keys) {
            self.pending
                .add(c, self.index.classes.size[c as usize], key);
        }
        while let Some((e1, found)) = self.next() {
            self.process(e1, found)?;
        }
        if self.kaca.params.refine {
            self.refine();
        }
        self.details.distances_evaluated += self.searcher.evaluated;
        self.details.bounds_computed += self.searcher.bounded;
        self.details.trie_nodes = self.index.trie.parent.len();
        self.details.trie_levels = self.index.trie.levels.len();
        Ok(())
    }

    /// The next class to merge and its nearest class, per the strategy.
    fn next(&mut self) -> Option<(u32, Option<Best>)> {
        let e1 = match &mut self.pending {
            Pending::Random { rng, list, .. } => {
                if list.is_empty() {
                    return None;
                }
                list[rng.gen_range(0..list.len())]
            }
            Pending::Smallest { set, .. } => set.first()?.1,
            Pending::Keyed { .. } => return self.next_keyed(),
        };
        self.pending.remove(e1);
        let found = self.search(e1);
        Some((e1, found))
    }

    /// Keyed strategies: pops the top key and re-evaluates it; a class whose
    /// fresh key fell below the next key goes back.
    fn next_keyed(&mut self) -> Option<(u32, Option<Best>)> {
        loop {
            let Pending::Keyed { heap, member, .. } = &mut self.pending else {
                unreachable!("called for keyed strategies only")
            };
            let (_, Reverse(c)) = heap.pop()?;
            if !member[c as usize] {
                continue;
            }
            let found = self.search(c);
            let Pending::Keyed { heap, sign, .. } = &mut self.pending else {
                unreachable!("called for keyed strategies only")
            };
            let fresh = *sign * self.index.key(c, found);
            match heap.peek() {
                Some(&(Key(top), _)) if fresh < top => {
                    heap.push((Key(fresh), Reverse(c)));
                    self.details.requeued += 1;
                }
                _ => {
                    self.pending.remove(c);
                    return Some((c, found));
                }
            }
        }
    }

    fn process(&mut self, e1: u32, found: Option<Best>) -> Result<()> {
        let n1 = self.index.classes.size[e1 as usize] as usize;
        let Some(best) = found else {
            // Nothing left to merge with: the whole remaining table is one
            // class the models reject.
            if self.can_suppress(n1) {
                self.suppress(e1);
                return Ok(());
            }
            return Err(Error::Unsatisfiable(format!(
                "{} rejects even the class of all {n1} remaining rows; raise the suppression limit or relax the model",
                self.ctx.privacy.describe()
            )));
        };
        if let Some(threshold) = self.kaca.params.outlier_threshold {
            if best.dist > threshold && self.can_suppress(n1) {
                self.suppress(e1);
                return Ok(());
            }
        }
        let e2 = best.class;
        let n2 = self.index.classes.size[e2 as usize];
        if self.index.partner_rows(n1 as u32, n2) < n2 && self.split(e1, e2) {
            return Ok(());
        }
        self.merge(e1, e2);
        Ok(())
    }

    /// Whether `n` more rows may be suppressed, leaving either nothing or at
    /// least k rows to publish.
    fn can_suppress(&self, n: usize) -> bool {
        let left = self.live_rows - n;
        self.suppressed_rows + n <= self.max_suppressed
            && (left == 0 || left >= self.index.k as usize)
    }

    fn kill(&mut self, c: u32) {
        self.index.trie.remove(c);
        self.index.classes.alive[c as usize] = false;
        self.pending.remove(c);
    }

    fn suppress(&mut self, c: u32) {
        let n = self.index.classes.size[c as usize] as usize;
        self.kill(c);
        self.suppressed
            .extend(std::mem::take(&mut self.index.classes.members[c as usize]));
        self.suppressed_rows += n;
        self.live_rows -= n;
        self.details.suppressed_classes += 1;
    }

    /// Adds a class; queues it when the models reject it.
    fn add(&mut self, tuple: &[CellCode], members: Vec<Member>) -> u32 {
        let accepted = self.accepts(&members);
        let c = self.index.classes.push(tuple, members);
        let size = self.index.classes.size[c as usize];
        self.index
            .trie
            .insert(self.index.model, c, self.index.classes.tuple(c), size);
        if !accepted {
            self.pending.add(c, size, f64::INFINITY);
        }
        c
    }

    /// The tightest tuple of members: the closest common generalisation of
    /// their input classes' values, starting from `start` when given.
    fn tuple_of(&self, start: Option<&[CellCode]>, members: &[Member]) -> Vec<CellCode> {
        let model = self.index.model;
        let mut out: Vec<CellCode> = match start {
            Some(t) => t.to_vec(),
            None => self.orig_tuple(members[0].orig),
        };
        for mb in members {
            for (q, &code) in self.ctx.classes.tuple(mb.orig as usize).iter().enumerate() {
                out[q] = model.join(q, out[q], CellCode::node(code));
            }
        }
        out
    }

    fn orig_tuple(&self, orig: u32) -> Vec<CellCode> {
        self.ctx
            .classes
            .tuple(orig as usize)
            .iter()
            .map(|&c| CellCode::node(c))
            .collect()
    }

    /// Merges two whole classes into a new one.
    fn merge(&mut self, e1: u32, e2: u32) {
        let model = self.index.model;
        let classes = &self.index.classes;
        let tuple: Vec<CellCode> = (0..classes.m)
            .map(|q| model.join(q, classes.tuple(e1)[q], classes.tuple(e2)[q]))
            .collect();
        let mut members = std::mem::take(&mut self.index.classes.members[e1 as usize]);
        members.extend(std::mem::take(&mut self.index.classes.members[e2 as usize]));
        self.kill(e1);
        self.kill(e2);
        self.add(&tuple, members);
        self.details.merges += 1;
    }

    /// Merges `e1` with a stub of `k - |e1|` rows of `e2`, taking the rows
    /// of `e2` closest to `e1` (Def. 11); the trunk keeps its cells. Returns
    /// false, changing nothing, when the models reject either part.
    fn split(&mut self, e1: u32, e2: u32) -> bool {
        let model = self.index.model;
        let classes = &self.index.classes;
        let n1 = classes.size[e1 as usize];
        let need = self.index.k - n1;
        let t1 = classes.tuple(e1).to_vec();
        let old_trunk = classes.tuple(e2).to_vec();
        let donors = &classes.members[e2 as usize];
        let single_donor = donors.len() == 1;
        // Donor input classes by the cost of joining them to e1.
        let mut order: Vec<(f64, usize)> = donors
            .iter()
            .enumerate()
            .map(|(i, mb)| {
                let cost: f64 = self
                    .ctx
                    .classes
                    .tuple(mb.orig as usize)
                    .iter()
                    .enumerate()
                    .map(|(q, &code)| model.cost(q, model.join(q, t1[q], CellCode::node(code))))
                    .sum();
                (cost, i)
            })
            .collect();
        order.sort_by(|a, b| a.0.total_cmp(&b.0).then(a.1.cmp(&b.1)));
        let mut trunk = donors.clone();
        let mut stub = Vec::new();
        let mut left = need;
        for &(_, i) in &order {
            if left == 0 {
                break;
            }
            let take = trunk[i].len.min(left);
            let mb = &mut trunk[i];
            stub.push(Member {
                orig: mb.orig,
                start: mb.start + mb.len - take,
                len: take,
            });
            mb.len -= take;
            left -= take;
        }
        trunk.retain(|mb| mb.len > 0);
        let mut merged = self.index.classes.members[e1 as usize].clone();
        merged.extend_from_slice(&stub);
        if !self.accepts(&merged) || !self.accepts(&trunk) {
            return false;
        }
        let merged_tuple = self.tuple_of(Some(&t1), &stub);
        let trunk_tuple = self.tuple_of(None, &trunk);
        if self.kaca.check {
            for q in 0..trunk_tuple.len() {
                assert!(
                    model.covers(q, old_trunk[q], trunk_tuple[q]),
                    "a split generalised the trunk"
                );
            }
            if single_donor {
                assert_eq!(trunk_tuple, old_trunk, "a split changed the trunk");
            }
        }
        // The trunk keeps its id, with its rows and cells refreshed.
        self.index.trie.remove(e2);
        self.pending.remove(e2);
        let trunk_size: u32 = trunk.iter().map(|mb| mb.len).sum();
        let classes = &mut self.index.classes;
        classes.size[e2 as usize] = trunk_size;
        classes.members[e2 as usize] = trunk;
        let m = classes.m;
        classes.tuples[e2 as usize * m..(e2 as usize + 1) * m].copy_from_slice(&trunk_tuple);
        self.index.trie.insert(model, e2, &trunk_tuple, trunk_size);
        self.kill(e1);
        self.add(&merged_tuple, merged);
        self.details.splits += 1;
        true
    }

    /// Local search after the merges: for every slice of identical rows of
    /// a class, moves as many of them as the class can spare (keeping k) to
    /// the class where they add the least distortion, when that is less
    /// than what leaving saves; repeats until a pass moves nothing (at most
    /// [`REFINE_PASSES`]). Every move lowers the total distortion, so it
    /// terminates; the search only looks for classes cheaper than the
    /// saving, which prunes most of the trie.
    fn refine(&mut self) {
        for _ in 0..REFINE_PASSES {
            self.details.refine_passes += 1;
            let mut moves = 0;
            for a in 0..self.index.classes.len() as u32 {
                let mut i = 0;
                while self.index.classes.alive[a as usize]
                    && i < self.index.classes.members[a as usize].len()
                {
                    match self.try_move(a, i) {
                        Some(true) => moves += 1,
                        Some(false) => {
                            moves += 1;
                            i += 1;
                        }
                        None => i += 1,
                    }
                }
            }
            self.details.refine_moves += moves;
            if moves == 0 {
                break;
            }
        }
    }

    /// Tries to move rows of member `i` of class `a`; `Some(true)` when the
    /// whole member left, `Some(false)` when part of it did, `None` when
    /// nothing moved.
    fn try_move(&mut self, a: u32, i: usize) -> Option<bool> {
        let model = self.index.model;
        let classes = &self.index.classes;
        let size_a = classes.size[a as usize];
        let x = classes.members[a as usize][i];
        let spare = size_a.checked_sub(self.index.k)?;
        let moved = x.len.min(spare);
        if moved == 0 {
            return None;
        }
        let whole = moved == x.len;
        let mut rest = classes.members[a as usize].clone();
        if whole {
            rest.remove(i);
        } else {
            rest[i].len -= moved;
        }
        let t_a = classes.tuple(a).to_vec();
        let t_rest = if whole {
            self.tuple_of(None, &rest)
        } else {
            t_a.clone()
        };
        let t_x = self.orig_tuple(x.orig);
        let saving = size_a as f64 * model.tuple_cost(&t_a)
            - (size_a - moved) as f64 * model.tuple_cost(&t_rest)
            - moved as f64 * model.tuple_cost(&t_x);
        // Only a strict improvement (beyond rounding) is worth a move.
        let bar = saving - 1e-9 * (1.0 + saving.abs());
        if bar <= 0.0 {
            return None;
        }
        let q = Query {
            n1: moved,
            exclude: a,
            stub: false,
        };
        let start = Best {
            dist: bar,
            class: u32::MAX,
        };
        self.details.searches += 1;
        let best = self.index.search(&mut self.searcher, &t_x, q, start);
        if self.kaca.check {
            let mut probe = model.probe();
            assert_eq!(
                best,
                self.index.search_brute(&mut probe, &t_x, q, start),
                "pruned refinement search differs from the full scan"
            );
        }
        if best.class == u32::MAX {
            return None;
        }
        let b = best.class;
        let slice = Member {
            orig: x.orig,
            start: x.start + x.len - moved,
            len: moved,
        };
        let mut joined = self.index.classes.members[b as usize].clone();
        joined.push(slice);
        if !self.accepts(&rest) || !self.accepts(&joined) {
            return None;
        }
        let t_b: Vec<CellCode> = (0..t_x.len())
            .map(|q| model.join(q, self.index.classes.tuple(b)[q], t_x[q]))
            .collect();
        self.replace(a, rest, &t_rest);
        self.replace(b, joined, &t_b);
        Some(whole)
    }

    /// Gives a live class new members and cells.
    fn replace(&mut self, c: u32, members: Vec<Member>, tuple: &[CellCode]) {
        self.index.trie.remove(c);
        let size = members.iter().map(|mb| mb.len).sum();
        let classes = &mut self.index.classes;
        let m = classes.m;
        classes.size[c as usize] = size;
        classes.members[c as usize] = members;
        classes.tuples[c as usize * m..(c as usize + 1) * m].copy_from_slice(tuple);
        self.index.trie.insert(self.index.model, c, tuple, size);
    }

    fn finish(mut self) -> (Partition, KacaDetails) {
        let table = self.ctx.table;
        let mut group_of_row = vec![SUPPRESSED; table.n_rows()];
        let mut groups = 0u32;
        for c in 0..self.index.classes.len() {
            if !self.index.classes.alive[c] {
                continue;
            }
            for mb in &self.index.classes.members[c] {
                let rows = self.ctx.classes.rows(mb.orig as usize);
                for &r in &rows[mb.start as usize..(mb.start + mb.len) as usize] {
                    group_of_row[r as usize] = groups;
                }
            }
            groups += 1;
        }
        self.details.groups = groups as usize;
        self.details.suppressed_rows = self.suppressed_rows;
        let partition =
            Partition::tightest_with(table, group_of_row, self.kaca.params.numeric_cells);
        (partition, self.details)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::encode::{EquivalenceClasses, QiTable};
    use crate::hierarchy::Hierarchy;
    use crate::metrics::{report, ReportOptions};
    use crate::privacy::Privacy;
    use crate::spec::JobSpec;
    use crate::verify::verify_partition;
    use proptest::prelude::*;
    use rand::Rng;
    use rustc_hash::FxHashMap;
    use std::sync::Arc;

    fn job(k: usize, params: serde_json::Value) -> JobSpec {
        let mut spec: JobSpec = serde_json::from_value(serde_json::json!({
            "privacy": {"k": k},
            "algorithm": {"name": "kaca", "seed": 7},
            "attributes": [
                {"name": "gender", "role": "qi", "hierarchy": "g.csv"},
                {"name": "age", "role": "qi", "hierarchy": "a.csv"},
                {"name": "pcode", "role": "qi", "masking": true}
            ]
        }))
        .unwrap();
        if let serde_json::Value::Object(p) = params {
            spec.algorithm.params.extend(p);
        }
        spec
    }

    fn hierarchies() -> FxHashMap<String, Arc<Hierarchy>> {
        [
            ("g.csv", "male;*\nfemale;*\n"),
            ("a.csv", "young;*\nmiddle;*\nold;*\n"),
        ]
        .iter()
        .map(|(n, t)| {
            (
                n.to_string(),
                Arc::new(Hierarchy::from_csv(n, t, ';').unwrap()),
            )
        })
        .collect()
    }

    fn run(spec: &JobSpec, table: &QiTable, check: bool) -> Result<Outcome> {
        let mut kaca = Kaca::from_params(spec.algorithm.params()?)?;
        kaca.check = check;
        let privacy = Privacy::from_spec(spec)?;
        let classes = EquivalenceClasses::of(table);
        kaca.run(&Context {
            table,
            classes: &classes,
            privacy: &privacy,
            spec,
        })
    }

    /// Seed 000, Table 1a.
    fn table_1(spec: &JobSpec) -> QiTable {
        QiTable::from_string_columns(
            spec,
            &hierarchies(),
            &[
                (
                    "gender",
                    vec!["male", "male", "male", "female", "female", "female"],
                ),
                (
                    "age",
                    vec!["middle", "middle", "young", "young", "old", "old"],
                ),
                (
                    "pcode",
                    vec!["4350", "4350", "4351", "4352", "4353", "4353"],
                ),
            ],
        )
        .unwrap()
    }

    #[test]
    fn kaca_table_1_local_recoding() {
        for strategy in ["random", "smallest-first", "largest-distortion-first"] {
            let spec = job(2, serde_json::json!({ "strategy": strategy }));
            let table = table_1(&spec);
            let out = run(&spec, &table, true).unwrap();
            let p = &out.partition;
            verify_partition(&table, p, &Privacy::from_spec(&spec).unwrap()).unwrap();
            // Rows 3 and 4 become (*, young, 435*); the others are unchanged.
            let labels: Vec<String> = (0..3)
                .map(|q| table.columns()[q].cell_label(p.cell(2, q)))
                .collect();
            assert_eq!(labels, ["*", "young", "435*"], "{strategy}");
            assert_eq!(p.group_of_row()[2], p.group_of_row()[3]);
            let r = report(&table, p, ReportOptions::default());
            assert!((r.distortion - 2.5).abs() < 1e-12, "{}", r.distortion);
            assert!((r.modification_rate - 2.0 / 9.0).abs() < 1e-12);
            assert_eq!(out.details["merges"], 1);
        }
    }

    #[test]
    fn stub_and_trunk() {
        // One class of 9 identical rows and one lone row: with k = 3 the lone
        // row takes a stub of 2 rows; the trunk of 7 keeps its values.
        let spec = job(3, serde_json::json!({}));
        let mut g = vec!["male"; 9];
        g.push("female");
        let table = QiTable::from_string_columns(
            &spec,
            &hierarchies(),
            &[
                ("gender", g),
                ("age", vec!["old"; 10]),
                ("pcode", vec!["4350"; 10]),
            ],
        )
        .unwrap();
        let out = run(&spec, &table, true).unwrap();
        assert_eq!(out.details["splits"], 1);
        let p = &out.partition;
        let sizes = p.group_sizes();
        let mut sorted = sizes.clone();
        sorted.sort();
        assert_eq!(sorted, [3, 7]);
        let unchanged = (0..9)
            .filter(|&r| table.columns()[0].is_unchanged(p.cell(r, 0)))
            .count();
        assert_eq!(unchanged, 7);
        // The distance was taken to the stub: 1 * 1 + 2 * 1 = 3.
        let r = report(&table, p, ReportOptions::default());
        assert!((r.distortion - 3.0).abs() < 1e-12);
    }

    #[test]
    fn outliers_are_suppressed_within_the_limit() {
        let mut spec = job(2, serde_json::json!({ "outlier_threshold": 1.0 }));
        let table = table_1(&spec);
        // No suppression allowed: the outlier threshold cannot apply.
        let out = run(&spec, &table, true).unwrap();
        assert_eq!(out.partition.suppressed(), 0);
        // With room for two rows, the two lone rows (best merge 2.5 > 1)
        // are suppressed.
        spec.privacy.suppression_limit = Some(2.0 / 6.0);
        let out = run(&spec, &table, true).unwrap();
        assert_eq!(out.partition.suppressed(), 2);
        assert_eq!(out.details["suppressed_classes"], 2);
        verify_partition(&table, &out.partition, &Privacy::from_spec(&spec).unwrap()).unwrap();
    }

    #[test]
    fn rejects_bad_params() {
        let bad = |p: serde_json::Value| {
            let spec = job(2, p);
            let params: Result<KacaParams> = spec.algorithm.params();
            params.and_then(Kaca::from_params).unwrap_err().to_string()
        };
        assert!(bad(serde_json::json!({"beta": 2.0})).contains("algorithm.beta"));
        assert!(bad(serde_json::json!({"weights": "height", "beta": 0.0})).contains("positive"));
        assert!(bad(serde_json::json!({"outlier_threshold": -1.0})).contains("outlier_threshold"));
        assert!(bad(serde_json::json!({"strategy": "fastest"})).contains("fastest"));
        assert!(bad(serde_json::json!({"stratgy": "random"})).contains("stratgy"));
    }

    type Hierarchies = FxHashMap<String, Arc<Hierarchy>>;
    type Columns = Vec<(&'static str, Vec<String>)>;

    fn random_table(rows: &[(u8, u8, u16, u8)]) -> (Hierarchies, Columns) {
        let edu = "a;x;L;*\nb;x;L;*\nc;y;L;*\nd;y;L;*\ne;z;R;*\nf;z;R;*\n";
        let hs = [("edu.csv", edu), ("sex.csv", "M;*\nF;*\n")]
            .iter()
            .map(|(n, t)| {
                (
                    n.to_string(),
                    Arc::new(Hierarchy::from_csv(n, t, ';').unwrap()),
                )
            })
            .collect();
        let cols = vec![
            (
                "edu",
                rows.iter()
                    .map(|r| ["a", "b", "c", "d", "e", "f"][r.0 as usize % 6].to_string())
                    .collect(),
            ),
            (
                "sex",
                rows.iter()
                    .map(|r| ["M", "F"][r.1 as usize % 2].to_string())
                    .collect(),
            ),
            (
                "age",
                rows.iter().map(|r| (20 + r.2 % 50).to_string()).collect(),
            ),
            (
                "city",
                rows.iter()
                    .map(|r| ["p", "q", "r"][r.3 as usize % 3].to_string())
                    .collect(),
            ),
        ];
        (hs, cols)
    }

    fn random_spec(k: usize, strategy: &str, weights: &str, age: serde_json::Value) -> JobSpec {
        let mut age_attr = serde_json::json!({"name": "age", "role": "qi", "type": "numeric"});
        if !age.is_null() {
            age_attr["intervals"] = age;
        }
        serde_json::from_value(serde_json::json!({
            "privacy": {"k": k},
            "algorithm": {"name": "kaca", "seed": 3, "strategy": strategy, "weights": weights},
            "attributes": [
                {"name": "edu", "role": "qi", "hierarchy": "edu.csv", "weight": 2.0},
                {"name": "sex", "role": "qi", "hierarchy": "sex.csv"},
                age_attr,
                {"name": "city", "role": "qi"}
            ]
        }))
        .unwrap()
    }

    /// Numeric QIs without hierarchies are not indexed: every class sits in
    /// one bucket, scanned in parallel; 1 and 2 threads give one answer.
    #[test]
    fn parallel_scans_are_deterministic() {
        let spec: JobSpec = serde_json::from_value(serde_json::json!({
            "privacy": {"k": 3},
            "algorithm": {"name": "kaca", "seed": 11, "strategy": "least-distortion-first"},
            "attributes": [
                {"name": "x", "role": "qi", "type": "numeric"},
                {"name": "y", "role": "qi", "type": "numeric"}
            ]
        }))
        .unwrap();
        let mut rng = ChaCha8Rng::seed_from_u64(5);
        let xs: Vec<String> = (0..400)
            .map(|_| rng.gen_range(0..300).to_string())
            .collect();
        let ys: Vec<String> = (0..400)
            .map(|_| rng.gen_range(0..300).to_string())
            .collect();
        let table = QiTable::from_string_columns(
            &spec,
            &FxHashMap::default(),
            &[
                ("x", xs.iter().map(|s| s.as_str()).collect()),
                ("y", ys.iter().map(|s| s.as_str()).collect()),
            ],
        )
        .unwrap();
        let outcomes: Vec<Outcome> = [1, 2]
            .iter()
            .map(|&threads| {
                rayon::ThreadPoolBuilder::new()
                    .num_threads(threads)
                    .build()
                    .unwrap()
                    .install(|| run(&spec, &table, true).unwrap())
            })
            .collect();
        assert!(outcomes[0].details["indexed"]
            .as_array()
            .unwrap()
            .is_empty());
        assert_eq!(outcomes[0].partition, outcomes[1].partition);
        assert_eq!(outcomes[0].details, outcomes[1].details);
        verify_partition(
            &table,
            &outcomes[0].partition,
            &Privacy::from_spec(&spec).unwrap(),
        )
        .unwrap();
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(64))]
        /// On random small tables every output verifies, keeps every row,
        /// every pruned search equals the full scan and every split leaves
        /// its trunk's cells as they were (checked inside the run).
        #[test]
        fn random_tables_verify(
            rows in proptest::collection::vec((0u8..6, 0u8..2, 0u16..50, 0u8..3), 1..80),
            k in 1usize..7,
            strategy in prop_oneof![
                Just("random"),
                Just("smallest-first"),
                Just("largest-distortion-first"),
                Just("least-distortion-first"),
            ],
            weights in prop_oneof![Just("uniform"), Just("height"), Just("levels"), Just("granularity")],
            intervals in any::<bool>(),
            refine in any::<bool>(),
        ) {
            let age = if intervals { serde_json::json!([5, 10]) } else { serde_json::Value::Null };
            let mut spec = random_spec(k, strategy, weights, age);
            spec.algorithm.params.insert("refine".into(), refine.into());
            let (hs, cols) = random_table(&rows);
            let cols: Vec<(&str, Vec<&str>)> =
                cols.iter().map(|(n, v)| (*n, v.iter().map(|s| s.as_str()).collect())).collect();
            let table = QiTable::from_string_columns(&spec, &hs, &cols).unwrap();
            let result = run(&spec, &table, true);
            if rows.len() < k {
                prop_assert!(result.is_err());
                return Ok(());
            }
            let out = result.unwrap();
            let privacy = Privacy::from_spec(&spec).unwrap();
            let v = verify_partition(&table, &out.partition, &privacy).unwrap();
            prop_assert_eq!(out.partition.suppressed(), 0);
            prop_assert_eq!(v.published_rows, rows.len());
            prop_assert!(v.smallest_class >= k);
        }
    }
}
