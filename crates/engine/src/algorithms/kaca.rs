//! KACA: k-anonymisation by clustering in attribute hierarchies (Li, Wong,
//! Fu, Pei, 2006; the KACA paper, Alg. 1), local recoding.
//!
//! Start from the equivalence classes of the input. While a class is not
//! accepted by the privacy models (smaller than k, or not l-diverse when
//! such models are set), take one (the *next-class strategy*: seeded random
//! as in the paper, smallest first, or the class whose best merge costs most
//! or least first), find the class at the least class distance (Def. 10:
//! weighted hierarchical distance with uniform or height weights, Han et al. 2014's
//! level weights, or granularity costs, times per-attribute weights `x_A`;
//! see [`hierarchical_distance`]) and merge the two. When the small
//! class `E1` (`|E1| < k`) would absorb a large class `E2` (`|E1| + |E2| >=
//! 2k`, Def. 11; the paper writes both `>` and `>=`, and both leave `E2` at
//! least k rows), only a *stub* of `k - |E1|` rows of `E2` joins `E1` and
//! the *trunk* keeps its values; the distance is then taken to the stub.
//! Optionally, a class whose best merge costs more than a threshold is
//! suppressed instead, within the job's suppression limit.
//!
//! Two additions to the paper, both off by default: the cheapest-merge-first
//! order (`strategy = "least-distortion-first"`, keyed by the distortion a
//! merge adds per row of the class it forms) and a refinement pass that
//! moves rows to another class while that lowers the total distortion. With
//! granularity costs they bring Adult (8 QIs, k = 10) from granularity 0.126
//! (paper settings) to 0.083 (`docs/results/kaca.md`).
//!
//! # Speed
//! The paper's loop is `O(|E|^2)` over classes. Here each search for the
//! nearest class is a branch-and-bound over a trie of the live classes
//! (`search`), exact and independent of the thread count; rayon computes
//! the initial keys of the keyed strategies and scans very large buckets in
//! parallel.

pub mod hierarchical_distance;
mod queue;
mod search;

use std::cmp::Reverse;
use std::collections::{BTreeSet, BinaryHeap};

use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;
use rayon::prelude::*;
use serde::{Deserialize, Serialize};

use queue::{Key, Pending};
use search::{Best, Classes, Index, Member, Query, Searcher, Trie};

use crate::algorithms::{details, Algorithm, Context, Outcome};
use crate::error::{Error, Result};
use crate::partition::{NumericCells, Partition, SUPPRESSED};
use crate::privacy::ClassView;
use hierarchical_distance::{CellCode, DistanceModel, LevelWeights};

/// The cost of a generalised cell (the KACA paper Def. 5; Han et al. 2014 Def. 5; ARX's
/// granularity).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum WeightScheme {
    /// `w(j, j-1) = 1`.
    #[default]
    Uniform,
    /// `w(j, j-1) = 1/(j-1)^beta` (set `beta`, default 1).
    Height,
    /// Han et al. 2014: `steps / L_A`, `L_A` levels including the leaves.
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
    /// re-evaluated lazily as for largest-distortion-first. Both keyed
    /// strategies rank by the distortion a merge adds per row of the class
    /// it forms.
    LeastDistortionFirst,
}

/// KACA's parameters, set in the job's `[algorithm]` table.
///
/// ```toml
/// [algorithm]
/// name = "kaca"
/// seed = 1
/// weights = "height"           # uniform (default) | height | levels | granularity
/// beta = 1.0                   # height weights only, > 0, default 1
/// strategy = "smallest-first"  # random (default) | smallest-first
///                              # | largest-distortion-first | least-distortion-first
/// outlier_threshold = 4.0      # suppress a class whose best merge costs more (off by default)
/// numeric_cells = "hierarchy"  # hierarchy (default) | ranges
/// refine = true                # local search after the merges (off by default)
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
    /// Lazily re-evaluated keys (keyed strategies).
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

/// Most refinement passes.
const REFINE_PASSES: usize = 8;

/// A refinement move: `rows` rows of member `member` of class `from` go to
/// class `to`.
#[derive(Debug, Clone, Copy)]
struct Move {
    from: u32,
    member: u32,
    rows: u32,
    to: u32,
}

struct Run<'a, 'm> {
    kaca: &'a Kaca,
    ctx: &'a Context<'a>,
    index: Index<'m>,
    searcher: Searcher<'m>,
    pending: Pending,
    suppressed_rows: usize,
    max_suppressed: usize,
    /// Rows in live classes.
    live_rows: usize,
    /// Scratch: the rows of a class the models are asked about.
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
                let found: Vec<(f64, u64, u64)> = initial
                    .par_iter()
                    .map_init(
                        || Searcher::new(index.model),
                        |s, &c| {
                            let (e, b) = (s.evaluated, s.bounded);
                            let d = index.key(c, index.nearest(s, c));
                            (d, s.evaluated - e, s.bounded - b)
                        },
                    )
                    .collect();
                self.details.searches += found.len();
                self.details.distances_evaluated += found.iter().map(|f| f.1).sum::<u64>();
                self.details.bounds_computed += found.iter().map(|f| f.2).sum::<u64>();
                found.into_iter().map(|f| sign * f.0).collect()
            }
            _ => vec![0.0; initial.len()],
        };
        for (&c, &key) in initial.iter().zip(&keys) {
            self.pending
                .add(c, self.index.classes.size[c as usize], key);
        }
        while let Some((e1, found)) = self.next() {
            self.ctx.cancel.check()?;
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

    /// Suppresses a class: it leaves the live classes, so its rows are
    /// published as suppressed.
    fn suppress(&mut self, c: u32) {
        let n = self.index.classes.size[c as usize] as usize;
        self.kill(c);
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

    /// Local search after the merges. A pass proposes, for every slice of
    /// identical rows of a class, to move as many of them as the class can
    /// spare (keeping k) to the class where they add the least distortion,
    /// when that is less than what leaving saves. Proposals are computed in
    /// parallel against the state at the start of the pass and applied in
    /// order; one whose classes an earlier move of the pass changed is
    /// proposed again on the current state first. The first pass looks at
    /// every class, later ones at the classes the previous pass changed.
    /// Every applied move lowers the total distortion, so passes stop (at
    /// the latest after [`REFINE_PASSES`]); the result does not depend on
    /// the thread count. The search only looks for classes cheaper than the
    /// saving, which prunes most of the trie.
    fn refine(&mut self) {
        // Classes whose slices a pass looks at: all at first, then those the
        // previous pass changed.
        let mut open = vec![true; self.index.classes.len()];
        let mut searcher = Searcher::new(self.index.model);
        for _ in 0..REFINE_PASSES {
            // Cancelled: stop refining; the pipeline reports the cancel.
            if self.ctx.cancel.is_cancelled() {
                break;
            }
            self.details.refine_passes += 1;
            let slices: Vec<(u32, Member)> = (0..self.index.classes.len() as u32)
                .filter(|&a| {
                    open[a as usize]
                        && self.index.classes.alive[a as usize]
                        && self.index.classes.size[a as usize] > self.index.k
                })
                .flat_map(|a| {
                    self.index.classes.members[a as usize]
                        .iter()
                        .map(move |&mb| (a, mb))
                })
                .collect();
            let this = &*self;
            let proposals: Vec<(Option<Move>, bool, u64, u64)> = slices
                .par_iter()
                .enumerate()
                .map_init(
                    || Searcher::new(this.index.model),
                    |s, (i, &(a, _))| {
                        let first = slices.partition_point(|&(c, _)| c < a);
                        this.counted_proposal(s, a, i - first)
                    },
                )
                .collect();
            let mut touched = vec![false; self.index.classes.len()];
            let mut moves = 0;
            for (&(a, slice), proposal) in slices.iter().zip(proposals) {
                let stale =
                    touched[a as usize] || proposal.0.is_some_and(|mv| touched[mv.to as usize]);
                let (mv, searched, evaluated, bounded) = if stale {
                    // Proposed on a state this pass has changed: propose
                    // again on the current one, if the slice is still there.
                    self.count_proposal(proposal);
                    let Some(i) = self.index.classes.members[a as usize]
                        .iter()
                        .position(|mb| mb.orig == slice.orig && mb.start == slice.start)
                    else {
                        continue;
                    };
                    self.counted_proposal(&mut searcher, a, i)
                } else {
                    proposal
                };
                self.count_proposal((None, searched, evaluated, bounded));
                let Some(mv) = mv else { continue };
                if self.apply(mv) {
                    touched[mv.from as usize] = true;
                    touched[mv.to as usize] = true;
                    moves += 1;
                }
            }
            self.details.refine_moves += moves;
            if moves == 0 {
                break;
            }
            open = touched;
        }
    }

    /// [`Run::propose`] with the searches and work it took.
    fn counted_proposal(
        &self,
        s: &mut Searcher<'_>,
        a: u32,
        i: usize,
    ) -> (Option<Move>, bool, u64, u64) {
        let (e, b) = (s.evaluated, s.bounded);
        let (mv, searched) = self.propose(s, a, i);
        (mv, searched, s.evaluated - e, s.bounded - b)
    }

    fn count_proposal(
        &mut self,
        (_, searched, evaluated, bounded): (Option<Move>, bool, u64, u64),
    ) {
        self.details.searches += searched as usize;
        self.details.distances_evaluated += evaluated;
        self.details.bounds_computed += bounded;
    }

    /// The members of class `a` without `moved` rows of member `i` (the
    /// tail of its slice), the moved slice, and the tuple of what stays.
    fn without(&self, a: u32, i: usize, moved: u32) -> (Vec<Member>, Member, Vec<CellCode>) {
        let classes = &self.index.classes;
        let x = classes.members[a as usize][i];
        let mut rest = classes.members[a as usize].clone();
        let t_rest = if moved == x.len {
            rest.remove(i);
            self.tuple_of(None, &rest)
        } else {
            rest[i].len -= moved;
            classes.tuple(a).to_vec()
        };
        let slice = Member {
            orig: x.orig,
            start: x.start + x.len - moved,
            len: moved,
        };
        (rest, slice, t_rest)
    }

    /// The best move of rows of member `i` of class `a` on the current
    /// state, if one lowers the total distortion, and whether it searched.
    fn propose(&self, s: &mut Searcher<'_>, a: u32, i: usize) -> (Option<Move>, bool) {
        let model = self.index.model;
        let classes = &self.index.classes;
        let size_a = classes.size[a as usize];
        let x = classes.members[a as usize][i];
        let moved = x.len.min(size_a.saturating_sub(self.index.k));
        if moved == 0 {
            return (None, false);
        }
        let (_, _, t_rest) = self.without(a, i, moved);
        let t_x = self.orig_tuple(x.orig);
        let saving = size_a as f64 * model.tuple_cost(classes.tuple(a))
            - (size_a - moved) as f64 * model.tuple_cost(&t_rest)
            - moved as f64 * model.tuple_cost(&t_x);
        // Only a strict improvement (beyond rounding) is worth a move.
        let bar = saving - 1e-9 * (1.0 + saving.abs());
        if bar <= 0.0 {
            return (None, false);
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
        let best = self.index.search(s, &t_x, q, start);
        if self.kaca.check {
            let mut probe = model.probe();
            assert_eq!(
                best,
                self.index.search_brute(&mut probe, &t_x, q, start),
                "pruned refinement search differs from the full scan"
            );
        }
        let mv = (best.class != u32::MAX).then_some(Move {
            from: a,
            member: i as u32,
            rows: moved,
            to: best.class,
        });
        (mv, true)
    }

    /// Applies a proposed move unless the models reject either class.
    fn apply(&mut self, mv: Move) -> bool {
        let model = self.index.model;
        let (rest, slice, t_rest) = self.without(mv.from, mv.member as usize, mv.rows);
        let mut joined = self.index.classes.members[mv.to as usize].clone();
        joined.push(slice);
        if !self.accepts(&rest) || !self.accepts(&joined) {
            return false;
        }
        let t_x = self.orig_tuple(slice.orig);
        let t_to: Vec<CellCode> = (0..t_x.len())
            .map(|q| model.join(q, self.index.classes.tuple(mv.to)[q], t_x[q]))
            .collect();
        self.replace(mv.from, rest, &t_rest);
        self.replace(mv.to, joined, &t_to);
        true
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
mod tests;
