//! The fixed part of a HeuristicMin run: the shield attributes and their
//! hierarchies, the input classes as working rows, the requirements over the
//! working columns, the packing of a row into 64-bit words, the hashed set of
//! states, and the release of the answer.
//!
//! A *state* is an attribute-wise generalisation (the HeuristicMin paper section 3.2): per
//! shield attribute the set of internal hierarchy nodes whose leaves are
//! shown at that node or above ("collapsed" nodes, closed under
//! descendants), stored as one bitset over the internal nodes of all shield
//! hierarchies. Lifting a shown value `v` collapses `parent(v)`: `v`, its
//! siblings and everything below them are shown as `parent(v)` in every row.

use std::hash::{Hash, Hasher};

use rustc_hash::{FxHashMap, FxHasher};
use serde::Serialize;

use crate::encode::{EquivalenceClasses, QiTable, NO_CLASS};
use crate::error::{Error, Result};
use crate::generalise::Cell;
use crate::hierarchy::{Hierarchy, Level, NodeId};
use crate::partition::{Partition, SUPPRESSED};
use crate::privacy::Requirement;

/// One shield attribute.
#[derive(Debug)]
pub(super) struct Attr<'a> {
    /// QI index (job order).
    pub qi: usize,
    pub name: &'a str,
    pub h: &'a Hierarchy,
    /// Bit of internal node `n` is `offset + n - leaf_count`.
    offset: usize,
    /// `closure[(p - leaf_count) * words..]`: bits of `p` and of every
    /// internal node below it.
    closure: Vec<u64>,
    /// `weight_before[l]`: distinct input rows holding a leaf before `l`
    /// (prefix sums in leaf order), for generalisation steps.
    weight_before: Vec<u64>,
}

impl Attr<'_> {
    pub fn leaf_count(&self) -> u32 {
        self.h.leaf_count() as u32
    }

    fn bit(&self, node: u32) -> usize {
        self.offset + (node - self.leaf_count()) as usize
    }

    /// Distinct input rows holding a leaf below `node`.
    pub fn weight(&self, node: u32) -> u64 {
        let r = self.h.leaves(NodeId(node));
        self.weight_before[r.end as usize] - self.weight_before[r.start as usize]
    }

    pub fn level(&self, node: u32) -> u64 {
        self.h.level(NodeId(node)).0 as u64
    }

    pub fn is_root(&self, node: u32) -> bool {
        self.h.level(NodeId(node)).0 == self.h.height()
    }

    pub fn parent(&self, node: u32) -> u32 {
        self.h.parent(NodeId(node)).0
    }

    /// Whether `node` lies at or below `p` (a chain of single children
    /// shares one leaf range, so levels count too).
    pub fn under(&self, node: u32, p: u32) -> bool {
        self.h.covers(NodeId(p), NodeId(node))
    }

    /// Adds the collapse of internal node `p` (and everything below it) to
    /// `bits`.
    pub fn collapse(&self, bits: &mut [u64], p: u32) {
        let words = bits.len();
        let row = &self.closure[(p - self.leaf_count()) as usize * words..][..words];
        for (b, r) in bits.iter_mut().zip(row) {
            *b |= r;
        }
    }

    /// The node shown for every leaf under the collapsed set `bits`: its
    /// highest collapsed ancestor, or the leaf itself.
    pub fn cut_map(&self, bits: &[u64]) -> Vec<u32> {
        let h = self.h;
        (0..self.leaf_count())
            .map(|leaf| {
                for l in (1..=h.height()).rev() {
                    let anc = h.ancestor(NodeId(leaf), Level(l)).0;
                    let b = self.bit(anc);
                    if bits[b / 64] >> (b % 64) & 1 == 1 {
                        return anc;
                    }
                }
                leaf
            })
            .collect()
    }

    /// Generalisation steps of this attribute under a cut map: levels
    /// climbed summed over the distinct input rows.
    pub fn steps(&self, map: &[u32]) -> u64 {
        map.iter()
            .enumerate()
            .map(|(leaf, &n)| {
                (self.weight_before[leaf + 1] - self.weight_before[leaf]) * self.level(n)
            })
            .sum()
    }

    /// Number of cuts of the hierarchy (attribute-wise states of this
    /// attribute alone), saturating.
    pub fn cut_count(&self) -> f64 {
        fn below(h: &Hierarchy, n: NodeId) -> f64 {
            if h.level(n).0 == 0 {
                return 1.0;
            }
            1.0 + h.children(n).map(|c| below(h, c)).product::<f64>()
        }
        below(self.h, self.h.root())
    }
}

/// A requirement over the working columns.
#[derive(Debug)]
pub(super) struct Req {
    pub k: u32,
    /// The shield is every QI: projected tuples are the classes themselves.
    pub all: bool,
    /// Working columns of the shield.
    pub cols: Vec<usize>,
    /// `in_shield[a]`: whether shield attribute `a` is in this shield.
    pub in_shield: Vec<bool>,
}

/// How a working row (rest id, then one node per shield attribute) packs
/// into 64-bit words, no column straddling two words.
#[derive(Debug)]
pub(super) struct Layout {
    pub words: usize,
    pub bits: usize,
    word: Vec<usize>,
    shift: Vec<u32>,
    width: Vec<u32>,
}

impl Layout {
    fn new(widths: &[u32]) -> Self {
        let mut word = Vec::with_capacity(widths.len());
        let mut shift = Vec::with_capacity(widths.len());
        let (mut w, mut used) = (0usize, 0u32);
        for &b in widths {
            if used + b > 64 {
                w += 1;
                used = 0;
            }
            word.push(w);
            shift.push(used);
            used += b;
        }
        Layout {
            words: w + 1,
            bits: widths.iter().map(|&b| b as usize).sum(),
            word,
            shift,
            width: widths.to_vec(),
        }
    }

    /// The packed key of a working row.
    pub fn key<const N: usize>(&self, row: &[u32]) -> [u64; N] {
        let mut k = [0u64; N];
        for (c, &v) in row.iter().enumerate() {
            k[self.word[c]] |= (v as u64) << self.shift[c];
        }
        k
    }

    /// The packed key of a row's projection on `cols`.
    pub fn projection_key<const N: usize>(&self, row: &[u32], cols: &[usize]) -> [u64; N] {
        let mut k = [0u64; N];
        for &c in cols {
            k[self.word[c]] |= (row[c] as u64) << self.shift[c];
        }
        k
    }

    /// `key` with column `c` set to `v` (cut to the column's width).
    pub fn with_column<const N: usize>(&self, mut key: [u64; N], c: usize, v: u32) -> [u64; N] {
        let ones = (1u64 << self.width[c]) - 1;
        let mask = ones << self.shift[c];
        key[self.word[c]] = (key[self.word[c]] & !mask) | ((v as u64 & ones) << self.shift[c]);
        key
    }

    /// Column `c` of a packed key.
    pub fn column<const N: usize>(&self, key: &[u64; N], c: usize) -> u32 {
        ((key[self.word[c]] >> self.shift[c]) & ((1u64 << self.width[c]) - 1)) as u32
    }
}

fn bits_for(n: usize) -> u32 {
    (usize::BITS - n.saturating_sub(1).leading_zeros()).max(1)
}

/// Everything the search needs, fixed for the run.
#[derive(Debug)]
pub(super) struct Problem<'a> {
    pub attrs: Vec<Attr<'a>>,
    /// Working width: 1 (rest id) + shield attributes.
    pub width: usize,
    /// Input classes as working rows: the id of the values of the QIs
    /// outside every shield, then the leaf of every shield attribute.
    pub inputs: Vec<u32>,
    pub input_size: Vec<u32>,
    pub reqs: Vec<Req>,
    /// The largest k of the requirements on all QIs (0 when none).
    pub class_k: u32,
    /// Words of a state's collapsed-node bitset.
    pub words: usize,
    pub layout: Layout,
}

impl<'a> Problem<'a> {
    /// Prepares a run.
    ///
    /// # Errors
    /// [`Error::Spec`] when a shield attribute has no hierarchy.
    pub fn new(
        table: &'a QiTable,
        classes: &EquivalenceClasses,
        requirements: &[Requirement],
    ) -> Result<Self> {
        let n_qi = table.n_qi();
        // Requirements implied by another one need no checking.
        let mut kept: Vec<&Requirement> = Vec::new();
        for (i, r) in requirements.iter().enumerate() {
            let implied = requirements
                .iter()
                .enumerate()
                .any(|(j, o)| j != i && r.is_implied_by(o) && (!o.is_implied_by(r) || j < i));
            if !implied {
                kept.push(r);
            }
        }
        let mut shield_qis: Vec<usize> = kept.iter().flat_map(|r| r.columns(n_qi)).collect();
        shield_qis.sort_unstable();
        shield_qis.dedup();
        let mut attrs = Vec::with_capacity(shield_qis.len());
        let mut offset = 0;
        for &q in &shield_qis {
            let col = &table.columns()[q];
            let h = col.hierarchy().ok_or_else(|| {
                Error::spec(
                    format!("attributes.{}", col.name()),
                    "heuristic-min generalises shield attributes along a hierarchy; give this \
                     attribute `hierarchy`, `intervals`, `cuts` or `masking`",
                )
            })?;
            attrs.push(Attr {
                qi: q,
                name: col.name(),
                h,
                offset,
                closure: Vec::new(),
                weight_before: Vec::new(),
            });
            offset += h.node_count() - h.leaf_count();
        }
        let words = offset.div_ceil(64).max(1);
        for a in &mut attrs {
            let lc = a.leaf_count();
            let nodes = a.h.node_count() as u32;
            let mut closure = vec![0u64; (nodes - lc) as usize * words];
            for p in lc..nodes {
                let row = &mut closure[(p - lc) as usize * words..][..words];
                for n in lc..nodes {
                    if a.under(n, p) {
                        let b = a.offset + (n - lc) as usize;
                        row[b / 64] |= 1 << (b % 64);
                    }
                }
            }
            a.closure = closure;
        }
        let rest_qis: Vec<usize> = (0..n_qi).filter(|q| !shield_qis.contains(q)).collect();
        let width = 1 + attrs.len();
        let mut rest_ids: FxHashMap<Vec<u32>, u32> = FxHashMap::default();
        let mut inputs = Vec::with_capacity(classes.len() * width);
        let mut input_size = Vec::with_capacity(classes.len());
        for c in 0..classes.len() {
            let t = classes.tuple(c);
            let rest: Vec<u32> = rest_qis.iter().map(|&q| t[q]).collect();
            let next = rest_ids.len() as u32;
            inputs.push(*rest_ids.entry(rest).or_insert(next));
            inputs.extend(attrs.iter().map(|a| t[a.qi]));
            input_size.push(classes.size(c) as u32);
        }
        for (i, a) in attrs.iter_mut().enumerate() {
            let mut w = vec![0u64; a.h.leaf_count() + 1];
            for row in inputs.chunks(width) {
                w[row[1 + i] as usize + 1] += 1;
            }
            for l in 1..w.len() {
                w[l] += w[l - 1];
            }
            a.weight_before = w;
        }
        let mut widths = vec![bits_for(rest_ids.len())];
        widths.extend(attrs.iter().map(|a| bits_for(a.h.node_count())));
        let layout = Layout::new(&widths);
        let reqs: Vec<Req> = kept
            .iter()
            .map(|r| {
                let in_shield: Vec<bool> = attrs.iter().map(|a| r.contains(a.qi)).collect();
                Req {
                    k: r.k() as u32,
                    all: r.is_all(),
                    cols: (0..attrs.len())
                        .filter(|&a| in_shield[a])
                        .map(|a| a + 1)
                        .collect(),
                    in_shield,
                }
            })
            .collect();
        let class_k = reqs
            .iter()
            .filter(|r| r.all)
            .map(|r| r.k)
            .max()
            .unwrap_or(0);
        Ok(Problem {
            attrs,
            width,
            inputs,
            input_size,
            reqs,
            class_k,
            words,
            layout,
        })
    }

    /// Cut maps of every shield attribute under `bits`.
    pub fn cut_maps(&self, bits: &[u64]) -> Vec<Vec<u32>> {
        self.attrs.iter().map(|a| a.cut_map(bits)).collect()
    }

    /// The release of a state: one group per distinct generalised row,
    /// shield attributes published as their cut nodes, other QIs unchanged.
    pub fn partition(
        &self,
        table: &QiTable,
        classes: &EquivalenceClasses,
        bits: &[u64],
    ) -> Partition {
        let maps = self.cut_maps(bits);
        let mut group_of_input: Vec<u32> = Vec::with_capacity(self.input_size.len());
        let mut groups: FxHashMap<Vec<u32>, u32> = FxHashMap::default();
        let mut tuples = Vec::new();
        for (c, row) in self.inputs.chunks(self.width).enumerate() {
            let generalised: Vec<u32> = std::iter::once(row[0])
                .chain(maps.iter().zip(&row[1..]).map(|(m, &l)| m[l as usize]))
                .collect();
            let next = groups.len() as u32;
            let g = *groups.entry(generalised).or_insert(next);
            if g == next {
                let mut cells: Vec<Cell> = table
                    .columns()
                    .iter()
                    .zip(classes.tuple(c))
                    .map(|(col, &code)| col.leaf_cell(code))
                    .collect();
                for (a, attr) in self.attrs.iter().enumerate() {
                    cells[attr.qi] = Cell::Node(NodeId(maps[a][row[1 + a] as usize]));
                }
                tuples.push(cells);
            }
            group_of_input.push(g);
        }
        let group_of_row = classes
            .class_of_row()
            .iter()
            .map(|&c| {
                if c == NO_CLASS {
                    SUPPRESSED
                } else {
                    group_of_input[c as usize]
                }
            })
            .collect();
        Partition::with_tuples(table, group_of_row, tuples)
    }

    /// Per shield attribute, the labels of the nodes values are lifted to.
    pub fn describe_cut(&self, bits: &[u64]) -> Vec<AttributeCut> {
        self.attrs
            .iter()
            .map(|a| {
                let mut shown: Vec<u32> = a
                    .cut_map(bits)
                    .into_iter()
                    .enumerate()
                    .filter(|&(leaf, n)| n >= a.leaf_count() && a.weight(leaf as u32) > 0)
                    .map(|(_, n)| n)
                    .collect();
                shown.sort_unstable();
                shown.dedup();
                AttributeCut {
                    attribute: a.name.to_string(),
                    lifted_to: shown
                        .into_iter()
                        .map(|n| a.h.label(NodeId(n)).to_string())
                        .collect(),
                }
            })
            .collect()
    }
}

/// The nodes one attribute's values are lifted to (details of a run).
#[derive(Debug, Serialize)]
pub(super) struct AttributeCut {
    attribute: String,
    lifted_to: Vec<String>,
}

/// A satisfying state and its counts.
#[derive(Debug, Clone)]
pub(super) struct Found {
    pub bits: Vec<u64>,
    /// Distinct rows.
    pub rows: u32,
    /// Levels climbed, summed over distinct input rows and attributes.
    pub steps: u64,
    /// Lifts from the root along the path of the paper's search that found
    /// it (`None` when the proof found it).
    pub depth: Option<u32>,
}

impl Found {
    /// More rows, then fewer generalisation steps; the earlier found wins
    /// ties (the HeuristicMin paper section 4.2).
    pub fn beats(&self, other: Option<&Found>) -> bool {
        other.is_none_or(|o| {
            (self.rows, std::cmp::Reverse(self.steps)) > (o.rows, std::cmp::Reverse(o.steps))
        })
    }
}

/// The set of generated states, hashed by collapsed-node bitset, with a
/// payload per state.
#[derive(Debug)]
pub(super) struct StateSet<M> {
    words: usize,
    bits: Vec<u64>,
    pub meta: Vec<M>,
    index: FxHashMap<u64, u32>,
    /// States whose 64-bit hash collided with a different earlier state.
    collided: FxHashMap<Vec<u64>, u32>,
}

impl<M> StateSet<M> {
    pub fn new(words: usize) -> Self {
        StateSet {
            words,
            bits: Vec::new(),
            meta: Vec::new(),
            index: FxHashMap::default(),
            collided: FxHashMap::default(),
        }
    }

    pub fn bits(&self, id: u32) -> &[u64] {
        &self.bits[id as usize * self.words..][..self.words]
    }

    pub fn contains(&self, bits: &[u64]) -> bool {
        match self.index.get(&hash_bits(bits)) {
            None => false,
            Some(&id) => self.bits(id) == bits || self.collided.contains_key(bits),
        }
    }

    /// Adds a state known not to be present; returns its id.
    pub fn insert(&mut self, bits: &[u64], meta: M) -> u32 {
        let id = self.meta.len() as u32;
        self.bits.extend_from_slice(bits);
        self.meta.push(meta);
        match self.index.entry(hash_bits(bits)) {
            std::collections::hash_map::Entry::Vacant(e) => {
                e.insert(id);
            }
            std::collections::hash_map::Entry::Occupied(_) => {
                self.collided.insert(bits.to_vec(), id);
            }
        }
        id
    }
}

fn hash_bits(bits: &[u64]) -> u64 {
    let mut h = FxHasher::default();
    bits.hash(&mut h);
    let v = h.finish();
    // Fx mixes weakly into the high bits; fold them down.
    v ^ (v >> 29).wrapping_mul(0x9E37_79B9_7F4A_7C15)
}

/// The search budget shared by both phases.
#[derive(Debug)]
pub(super) struct Budget {
    started: std::time::Instant,
    nodes: Option<u64>,
    seconds: Option<f64>,
    cancel: crate::cancel::Cancellation,
    /// States expanded so far (both phases).
    pub expanded: u64,
}

/// Why a phase stopped.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case")]
pub(super) enum Stop {
    /// No open state can beat the answer.
    SearchComplete,
    /// `budget_nodes` expansions were made.
    NodeBudget,
    /// `budget_seconds` passed.
    TimeBudget,
    /// The job was cancelled (interrupt, time limit): no answer is used.
    Cancelled,
    /// The proof was not tried: the other attributes have more cuts than
    /// `proof_limit`.
    ProofTooLarge,
}

impl Budget {
    pub fn new(
        nodes: Option<u64>,
        seconds: Option<f64>,
        cancel: crate::cancel::Cancellation,
    ) -> Self {
        Budget {
            started: std::time::Instant::now(),
            nodes,
            seconds,
            cancel,
            expanded: 0,
        }
    }

    /// Whether the budget is used up, and by what.
    pub fn exhausted(&self) -> Option<Stop> {
        if self.cancel.is_cancelled() {
            Some(Stop::Cancelled)
        } else if self.nodes.is_some_and(|n| self.expanded >= n) {
            Some(Stop::NodeBudget)
        } else if self
            .seconds
            .is_some_and(|s| self.started.elapsed().as_secs_f64() >= s)
        {
            Some(Stop::TimeBudget)
        } else {
            None
        }
    }
}
