//! The generalisation lattice of full-domain (global) recoding, shared by
//! Datafly and Incognito.
//!
//! A node is one hierarchy level per QI (a *level vector*; 0 = the leaves);
//! its height is the sum of its levels. Generalising node `N` to a node `G`
//! above it (every level at least as high) merges `N`'s equivalence classes
//! into `G`'s. Incognito (LeFevre, DeWitt, Ramakrishnan, SIGMOD 2005,
//! section 3) calls this the *rollup property*: the class counts (frequency
//! set) of `G` are the sums of the counts of `N`'s classes that map to the
//! same generalised tuple. [`Lattice::frequency_set`] therefore never reads
//! rows: it starts from the table's [`EquivalenceClasses`] (one entry per
//! distinct QI tuple with its size) and rolls any frequency set of a more
//! specific node up to a more general one, mapping each class through the
//! per-level lookup tables of the hierarchies
//! ([`Hierarchy::level_table`](crate::hierarchy::Hierarchy::level_table)).
//! Only the QIs whose level differs are mapped, on tuples packed into one
//! integer ([`Key`]), and grouped in a small open-addressing table.
//!
//! A node is *accepted* when the rows in classes the privacy models reject
//! (for k-anonymity: classes smaller than k) fit the suppression limit;
//! those rows are then suppressed and counted ([`Verdict`]). Classes are
//! tested through [`Privacy::accepts`] with their row lists, except when no
//! model needs rows ([`Privacy::needs_rows`]), where the size test alone is
//! exact and the row lists are never built.
//!
//! The same module scores nodes ([`Loss`]) with the engine's metric
//! functions, and turns a chosen node into a [`Partition`].

use serde::{Deserialize, Serialize};

use crate::algorithms::Context;
use crate::encode::{EquivalenceClasses, QiTable, NO_CLASS};
use crate::error::{Error, Result};
use crate::generalise::{Cell, GeneralisedTuple};
use crate::hierarchy::{Level, NodeId};
use crate::metrics::loss::{cell_ncp, cell_precision_loss};
use crate::metrics::{distortion, Weights};
use crate::partition::{Partition, SUPPRESSED};
use crate::privacy::{ClassView, Privacy};

/// The loss a full-domain node is scored by (Incognito's choice among the
/// accepted nodes). Suppressed rows count at the root: every one of their
/// cells costs the maximum (1), and `|D|` per row for discernibility.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Loss {
    /// KACA's table distortion (the KACA paper, Def. 7): the sum over rows and QIs
    /// of the WHD with uniform weights, `level / height` per cell.
    #[default]
    Distortion,
    /// The sum of the cells' NCP (the SBC thesis, Table 2-13).
    Ncp,
    /// Sweeney's precision loss: the sum of `level / height` over cells
    /// (the HeuristicMin paper), i.e. `(1 - precision) * n * m`.
    Precision,
    /// The discernibility metric `DM = sum |E|^2 + |D| * suppressed rows`.
    Discernibility,
}

/// A generalised tuple packed into one value: per QI of a node, the
/// position of its hierarchy node among the nodes of its level ("dense
/// code"), at the bit offsets of a [`Layout`]. Packed keys make rollups
/// cheap (one changed QI is one masked field) and hash fast; [`Wide`]
/// holds any number of QIs.
pub(crate) trait Key: Clone + Eq + Send + Sync {
    /// The tuple of all zeros for `width` QIs.
    fn zeros(width: usize) -> Self;
    /// The dense code at position `j`.
    fn get(&self, layout: &Layout, j: usize) -> u32;
    /// Sets the dense code at position `j`.
    fn set(&mut self, layout: &Layout, j: usize, code: u32);
    /// Whether keys of this type hold `bits` bits.
    fn holds(bits: u32) -> bool;
    /// A well-mixed 64-bit hash (the high bits are used).
    fn hash64(&self) -> u64;
}

/// Fibonacci hashing multiplier (Knuth, TAOCP vol. 3, 6.4): 2^64 / phi.
const PHI64: u64 = 0x9E37_79B9_7F4A_7C15;

/// Bit offsets of the positions of a packed [`Key`].
#[derive(Debug, Clone)]
pub(crate) struct Layout {
    shifts: Vec<u32>,
    masks: Vec<u32>,
}

macro_rules! packed_key {
    ($t:ty) => {
        impl Key for $t {
            fn zeros(_: usize) -> Self {
                0
            }
            fn get(&self, layout: &Layout, j: usize) -> u32 {
                ((*self >> layout.shifts[j]) as u32) & layout.masks[j]
            }
            fn set(&mut self, layout: &Layout, j: usize, code: u32) {
                let shift = layout.shifts[j];
                *self = (*self & !((layout.masks[j] as $t) << shift)) | ((code as $t) << shift);
            }
            fn holds(bits: u32) -> bool {
                bits <= <$t>::BITS
            }
            fn hash64(&self) -> u64 {
                let x = *self as u128;
                ((x as u64) ^ ((x >> 64) as u64).rotate_left(29)).wrapping_mul(PHI64)
            }
        }
    };
}
packed_key!(u64);
packed_key!(u128);

/// A generalised tuple of any width, one `u32` per QI.
pub(crate) type Wide = Box<[u32]>;

impl Key for Wide {
    fn zeros(width: usize) -> Self {
        vec![0; width].into()
    }
    fn get(&self, _: &Layout, j: usize) -> u32 {
        self[j]
    }
    fn set(&mut self, _: &Layout, j: usize, code: u32) {
        self[j] = code;
    }
    fn holds(_: u32) -> bool {
        true
    }
    fn hash64(&self) -> u64 {
        self.iter().fold(0u64, |h, &c| {
            (h.rotate_left(23) ^ c as u64).wrapping_mul(PHI64)
        })
    }
}

/// The classes of one node (its frequency set): per class the generalised
/// tuple and the number of rows.
#[derive(Debug, Clone)]
pub(crate) struct FrequencySet<K> {
    levels: Vec<u8>,
    keys: Vec<K>,
    counts: Vec<u32>,
    /// The class of every input class, kept only when row lists are needed.
    members: Option<Vec<u32>>,
}

impl<K> FrequencySet<K> {
    /// Number of classes.
    pub(crate) fn len(&self) -> usize {
        self.counts.len()
    }
}

/// Which classes of a node the privacy models accept.
#[derive(Debug, Clone)]
pub(crate) struct Verdict {
    /// Whether the rejected classes fit the suppression limit.
    pub(crate) accepted: bool,
    /// Rows in rejected classes (suppressed if the node is chosen).
    pub(crate) suppressed: usize,
    ok: Vec<bool>,
}

/// The score of an accepted node.
#[derive(Debug, Clone, Copy, PartialEq)]
pub(crate) struct Score {
    /// The chosen [`Loss`].
    pub(crate) loss: f64,
    /// The discernibility metric (ties of `loss` go to the finer release).
    pub(crate) discernibility: f64,
    /// Rows the node suppresses (ties of `loss` go to the node that
    /// publishes more rows).
    pub(crate) suppressed: usize,
}

/// Per-cell costs of a [`Loss`]: `by_code[q][l][code]` for every dense
/// code of every level of QI `q`.
#[derive(Debug, Clone)]
pub(crate) struct CellCosts {
    loss: Loss,
    by_code: Vec<Vec<Vec<f64>>>,
    suppressed_row: f64,
    /// `floor[q][l]`: the summed cost of QI `q`'s cells over all active
    /// rows at level `l`.
    floor: Vec<Vec<f64>>,
}

/// A set of QIs (ascending indices) with the index arithmetic of its
/// lattice: node indices enumerate level vectors in lexicographic order
/// (last QI fastest), so comparing indices compares level vectors.
#[derive(Debug, Clone)]
pub(crate) struct Space {
    attrs: Vec<usize>,
    radix: Vec<u8>,
    strides: Vec<usize>,
    size: usize,
}

impl Space {
    /// The lattice of `attrs` (ascending QI indices) with QI heights
    /// `heights`; `None` when its size overflows.
    pub(crate) fn new(attrs: Vec<usize>, heights: &[u8]) -> Option<Self> {
        let radix: Vec<u8> = attrs.iter().map(|&q| heights[q] + 1).collect();
        let mut strides = vec![0usize; attrs.len()];
        let mut size = 1usize;
        for j in (0..attrs.len()).rev() {
            strides[j] = size;
            size = size.checked_mul(radix[j] as usize)?;
        }
        Some(Space {
            attrs,
            radix,
            strides,
            size,
        })
    }

    /// The QIs of the space.
    pub(crate) fn attrs(&self) -> &[usize] {
        &self.attrs
    }

    /// Number of nodes.
    pub(crate) fn size(&self) -> usize {
        self.size
    }

    /// Index distance between a node and its child one level lower on
    /// position `j`.
    pub(crate) fn stride(&self, j: usize) -> usize {
        self.strides[j]
    }

    /// The level vector of a node.
    pub(crate) fn decode(&self, mut index: usize) -> Vec<u8> {
        self.strides
            .iter()
            .map(|&s| {
                let l = (index / s) as u8;
                index %= s;
                l
            })
            .collect()
    }

    /// The index, in this space, of the projection of `levels` (a node of a
    /// space with one more QI, `skip` being the position dropped).
    pub(crate) fn project(&self, levels: &[u8], skip: usize) -> usize {
        levels
            .iter()
            .enumerate()
            .filter(|&(j, _)| j != skip)
            .zip(&self.strides)
            .map(|((_, &l), &s)| l as usize * s)
            .sum()
    }

    /// The nodes grouped by height (sum of levels), each group ascending.
    pub(crate) fn by_height(&self) -> Vec<Vec<u32>> {
        let max: usize = self.radix.iter().map(|&r| r as usize - 1).sum();
        let mut out = vec![Vec::new(); max + 1];
        let mut levels = vec![0u8; self.attrs.len()];
        for index in 0..self.size {
            let h: usize = levels.iter().map(|&l| l as usize).sum();
            out[h].push(index as u32);
            // Increment the level vector, last position fastest.
            for j in (0..levels.len()).rev() {
                levels[j] += 1;
                if levels[j] < self.radix[j] {
                    break;
                }
                levels[j] = 0;
            }
        }
        out
    }
}

/// The lattice of a table whose QIs all have hierarchies.
#[derive(Debug)]
pub(crate) struct Lattice<'a> {
    table: &'a QiTable,
    classes: &'a EquivalenceClasses,
    privacy: &'a Privacy,
    heights: Vec<u8>,
    /// `dense[q][l][leaf]`: the dense code of the leaf's ancestor at level
    /// `l` (its position among the nodes of level `l`), from
    /// [`Hierarchy::level_table`](crate::hierarchy::Hierarchy::level_table).
    dense: Vec<Vec<Vec<u32>>>,
    /// `up[q][l][code]`: the dense code at level `l + 1` of the parent of
    /// the level-`l` node with dense code `code`.
    up: Vec<Vec<Vec<u32>>>,
    /// `nodes[q][l][code]`: the hierarchy node of a dense code.
    nodes: Vec<Vec<Vec<NodeId>>>,
    /// Bits of a dense code of each QI (the leaf level has the most nodes).
    bits: Vec<u32>,
    min_size: usize,
    needs_rows: bool,
    max_suppressed: usize,
}

impl<'a> Lattice<'a> {
    /// The lattice of the context's table.
    ///
    /// # Errors
    /// [`Error::Spec`] naming the first QI without a hierarchy: full-domain
    /// recoding publishes hierarchy levels, so `algorithm` needs one for
    /// every QI.
    pub(crate) fn new(ctx: &Context<'a>, algorithm: &str) -> Result<Self> {
        let table = ctx.table;
        let mut hierarchies = Vec::with_capacity(table.n_qi());
        for col in table.columns() {
            let Some(h) = col.hierarchy() else {
                return Err(Error::spec(
                    format!("attributes.{}", col.name()),
                    format!(
                        "`{algorithm}` recodes whole domains to hierarchy levels and needs a hierarchy for every \
                         quasi-identifier; give `{}` a `hierarchy` file, `intervals`, `cuts` or `masking`, \
                         or choose a local-recoding algorithm such as `mondrian`",
                        col.name()
                    ),
                ));
            };
            hierarchies.push(h.as_ref());
        }
        let heights = hierarchies.iter().map(|h| h.height()).collect();
        let mut dense = Vec::with_capacity(hierarchies.len());
        let mut up = Vec::with_capacity(hierarchies.len());
        let mut nodes = Vec::with_capacity(hierarchies.len());
        for h in &hierarchies {
            let mut position = vec![0u32; h.node_count()];
            let levels: Vec<Level> = (0..=h.height()).map(Level).collect();
            let by_level: Vec<Vec<NodeId>> =
                levels.iter().map(|&l| h.nodes_at(l).collect()).collect();
            for level_nodes in &by_level {
                for (i, n) in level_nodes.iter().enumerate() {
                    position[n.0 as usize] = i as u32;
                }
            }
            dense.push(
                levels
                    .iter()
                    .map(|&l| {
                        h.level_table(l)
                            .iter()
                            .map(|&n| position[n as usize])
                            .collect::<Vec<u32>>()
                    })
                    .collect::<Vec<_>>(),
            );
            up.push(
                by_level
                    .iter()
                    .map(|level_nodes| {
                        level_nodes
                            .iter()
                            .map(|&n| position[h.parent(n).0 as usize])
                            .collect::<Vec<u32>>()
                    })
                    .collect::<Vec<_>>(),
            );
            nodes.push(by_level);
        }
        let bits = hierarchies
            .iter()
            .map(|h| 32 - (h.leaf_count().max(2) as u32 - 1).leading_zeros())
            .collect();
        Ok(Lattice {
            table,
            classes: ctx.classes,
            privacy: ctx.privacy,
            heights,
            dense,
            up,
            nodes,
            bits,
            min_size: ctx.privacy.min_class_size(),
            needs_rows: ctx.privacy.needs_rows(),
            max_suppressed: ctx.privacy.max_suppressed(table.n_rows()),
        })
    }

    /// Number of QIs.
    pub(crate) fn n_qi(&self) -> usize {
        self.heights.len()
    }

    /// Height of each QI's hierarchy (its top level).
    pub(crate) fn heights(&self) -> &[u8] {
        &self.heights
    }

    /// The number of rows that may be suppressed.
    pub(crate) fn max_suppressed(&self) -> usize {
        self.max_suppressed
    }

    /// The node's levels by QI name (for reports).
    pub(crate) fn describe(&self, levels: &[u8]) -> serde_json::Map<String, serde_json::Value> {
        self.table
            .columns()
            .iter()
            .zip(levels)
            .map(|(c, &l)| (c.name().to_string(), l.into()))
            .collect()
    }

    /// Number of distinct generalised values of QI `q` at `level` among the
    /// active rows (Datafly's choice of attribute).
    pub(crate) fn distinct_at(&self, q: usize, level: u8) -> usize {
        let dense = &self.dense[q][level as usize];
        let mut seen = vec![false; self.nodes[q][level as usize].len()];
        for c in 0..self.classes.len() {
            seen[dense[self.classes.tuple(c)[q] as usize] as usize] = true;
        }
        seen.iter().filter(|&&s| s).count()
    }

    /// The bits a packed key of the QIs `attrs` needs.
    pub(crate) fn key_bits(&self, attrs: &[usize]) -> u32 {
        attrs.iter().map(|&q| self.bits[q]).sum()
    }

    /// The packed-key layout of the QIs `attrs`.
    fn layout(&self, attrs: &[usize]) -> Layout {
        let mut shifts = Vec::with_capacity(attrs.len());
        let mut masks = Vec::with_capacity(attrs.len());
        let mut at = 0;
        for &q in attrs {
            shifts.push(at);
            masks.push(((1u64 << self.bits[q]) - 1) as u32);
            at += self.bits[q];
        }
        Layout { shifts, masks }
    }

    /// The frequency set of the node `levels` over the QIs `attrs`, rolled
    /// up from `from` (the frequency set of a node of the same QIs with
    /// every level at most `levels`): only the QIs whose level differs are
    /// mapped, one level at a time, through their parent tables. Without
    /// `from` it is grouped from the input classes. Row lists are tracked
    /// when a model needs them or `members` asks for them (to build a
    /// partition).
    ///
    /// `K` must hold [`Lattice::key_bits`] of `attrs`.
    pub(crate) fn frequency_set<K: Key>(
        &self,
        attrs: &[usize],
        levels: &[u8],
        from: Option<&FrequencySet<K>>,
        members: bool,
    ) -> FrequencySet<K> {
        debug_assert!(K::holds(self.key_bits(attrs)));
        let layout = self.layout(attrs);
        let members = members || self.needs_rows;
        let (keys, counts, remap) = match from {
            None => {
                let tables: Vec<(usize, &[u32])> = attrs
                    .iter()
                    .zip(levels)
                    .map(|(&q, &l)| (q, &self.dense[q][l as usize][..]))
                    .collect();
                let classes = self.classes;
                group_by(
                    (0..classes.len()).map(|c| {
                        let t = classes.tuple(c);
                        let mut key = K::zeros(attrs.len());
                        for (j, &(q, table)) in tables.iter().enumerate() {
                            key.set(&layout, j, table[t[q] as usize]);
                        }
                        (key, classes.size(c) as u32)
                    }),
                    classes.len(),
                    members,
                )
            }
            Some(src) => {
                debug_assert!(src.levels.iter().zip(levels).all(|(a, b)| a <= b));
                // Per changed QI, one table from the source's level to ours.
                let changed: Vec<(usize, Vec<u32>)> = attrs
                    .iter()
                    .enumerate()
                    .filter(|&(j, _)| src.levels[j] != levels[j])
                    .map(|(j, &q)| {
                        let (from, to) = (src.levels[j] as usize, levels[j] as usize);
                        let table = (0..self.nodes[q][from].len() as u32)
                            .map(|c| (from..to).fold(c, |c, l| self.up[q][l][c as usize]))
                            .collect();
                        (j, table)
                    })
                    .collect();
                let pairs = src.keys.iter().zip(&src.counts);
                match &changed[..] {
                    // The common case: a direct specialisation, one QI differs.
                    [(j, table)] => group_by(
                        pairs.map(|(key, &count)| {
                            let mut key = key.clone();
                            key.set(&layout, *j, table[key.get(&layout, *j) as usize]);
                            (key, count)
                        }),
                        src.len(),
                        members,
                    ),
                    _ => group_by(
                        pairs.map(|(key, &count)| {
                            let mut key = key.clone();
                            for (j, table) in &changed {
                                key.set(&layout, *j, table[key.get(&layout, *j) as usize]);
                            }
                            (key, count)
                        }),
                        src.len(),
                        members,
                    ),
                }
            }
        };
        let members = members.then(|| match from {
            None => remap,
            Some(src) => src
                .members
                .as_ref()
                .expect("row lists are tracked from the input classes on")
                .iter()
                .map(|&g| remap[g as usize])
                .collect(),
        });
        FrequencySet {
            levels: levels.to_vec(),
            keys,
            counts,
            members,
        }
    }

    /// Tests every class of a node against the privacy models.
    pub(crate) fn verdict<K>(&self, fs: &FrequencySet<K>) -> Verdict {
        let mut ok: Vec<bool> = fs
            .counts
            .iter()
            .map(|&c| c as usize >= self.min_size)
            .collect();
        if self.needs_rows {
            let members = fs
                .members
                .as_ref()
                .expect("frequency sets keep members when a model needs rows");
            // Row lists of the classes that pass the size test, in one buffer.
            let mut offsets = Vec::with_capacity(fs.len() + 1);
            let mut acc = 0usize;
            for (g, &c) in fs.counts.iter().enumerate() {
                offsets.push(acc);
                if ok[g] {
                    acc += c as usize;
                }
            }
            offsets.push(acc);
            let mut fill = offsets.clone();
            let mut rows = vec![0u32; acc];
            for (base, &g) in members.iter().enumerate() {
                if ok[g as usize] {
                    let src = self.classes.rows(base);
                    let at = fill[g as usize];
                    rows[at..at + src.len()].copy_from_slice(src);
                    fill[g as usize] += src.len();
                }
            }
            for (g, flag) in ok.iter_mut().enumerate() {
                if *flag {
                    *flag = self.privacy.accepts(ClassView {
                        table: self.table,
                        rows: &rows[offsets[g]..offsets[g + 1]],
                    });
                }
            }
        }
        let suppressed = fs
            .counts
            .iter()
            .zip(&ok)
            .filter(|(_, &ok)| !ok)
            .map(|(&c, _)| c as usize)
            .sum();
        Verdict {
            accepted: suppressed <= self.max_suppressed,
            suppressed,
            ok,
        }
    }

    /// The per-cell costs of `loss`, from the engine's metric functions.
    pub(crate) fn cell_costs(&self, loss: Loss) -> CellCosts {
        let cost = |col, cell: &Cell| match loss {
            Loss::Distortion => distortion::cell_whd(col, cell, Weights::Uniform),
            Loss::Ncp => cell_ncp(col, cell),
            Loss::Precision => cell_precision_loss(col, cell),
            Loss::Discernibility => 0.0,
        };
        let by_code: Vec<Vec<Vec<f64>>> = self
            .table
            .columns()
            .iter()
            .zip(&self.nodes)
            .map(|(col, levels)| {
                levels
                    .iter()
                    .map(|nodes| nodes.iter().map(|&n| cost(col, &Cell::Node(n))).collect())
                    .collect()
            })
            .collect();
        let suppressed_row = self
            .table
            .columns()
            .iter()
            .map(|col| cost(col, &Cell::Suppressed))
            .sum();
        // Floors: every active row published at the node's levels, nothing
        // suppressed (a suppressed cell costs the maximum, 1, so no accepted
        // node loses less).
        let mut floor: Vec<Vec<f64>> = self
            .heights
            .iter()
            .map(|&h| vec![0.0; h as usize + 1])
            .collect();
        if loss != Loss::Discernibility {
            for c in 0..self.classes.len() {
                let t = self.classes.tuple(c);
                let size = self.classes.size(c) as f64;
                for (q, per_level) in floor.iter_mut().enumerate() {
                    for (l, f) in per_level.iter_mut().enumerate() {
                        let code = self.dense[q][l][t[q] as usize];
                        *f += size * by_code[q][l][code as usize];
                    }
                }
            }
        }
        CellCosts {
            loss,
            by_code,
            suppressed_row,
            floor,
        }
    }

    /// A lower bound of the loss of any accepted node at `levels` (all QIs,
    /// in order): the loss with no row suppressed but those excluded by a
    /// null policy. It only grows with generalisation. Discernibility has
    /// no useful floor here (0).
    pub(crate) fn loss_floor(&self, costs: &CellCosts, levels: &[u8]) -> f64 {
        if costs.loss == Loss::Discernibility {
            return 0.0;
        }
        let published: f64 = costs
            .floor
            .iter()
            .zip(levels)
            .map(|(f, &l)| f[l as usize])
            .sum();
        published + self.table.excluded().len() as f64 * costs.suppressed_row
    }

    /// Scores an accepted node of all QIs (`fs` over every QI, in order):
    /// rows of rejected classes and rows excluded by a null policy are
    /// suppressed.
    pub(crate) fn score<K: Key>(
        &self,
        fs: &FrequencySet<K>,
        verdict: &Verdict,
        costs: &CellCosts,
    ) -> Score {
        let attrs: Vec<usize> = (0..self.n_qi()).collect();
        let layout = self.layout(&attrs);
        let n = self.table.n_rows() as f64;
        let tables: Vec<&[f64]> = costs
            .by_code
            .iter()
            .zip(&fs.levels)
            .map(|(by_level, &l)| &by_level[l as usize][..])
            .collect();
        let mut total = 0.0;
        let mut dm = 0.0;
        for (g, key) in fs.keys.iter().enumerate() {
            if !verdict.ok[g] {
                continue;
            }
            let size = fs.counts[g] as f64;
            dm += size * size;
            if costs.loss != Loss::Discernibility {
                let cell_sum: f64 = tables
                    .iter()
                    .enumerate()
                    .map(|(j, table)| table[key.get(&layout, j) as usize])
                    .sum();
                total += cell_sum * size;
            }
        }
        let suppressed = (verdict.suppressed + self.table.excluded().len()) as f64;
        dm += suppressed * n;
        total += suppressed * costs.suppressed_row;
        Score {
            loss: if costs.loss == Loss::Discernibility {
                dm
            } else {
                total
            },
            discernibility: dm,
            suppressed: verdict.suppressed,
        }
    }

    /// The release of a node of all QIs: every accepted class is a group
    /// published as the hierarchy nodes at `levels`; rows of rejected
    /// classes are suppressed (and counted by the partition).
    ///
    /// # Errors
    /// [`Error::Internal`] when the node does not fit the suppression limit
    /// (callers choose accepted nodes only).
    pub(crate) fn partition(&self, levels: &[u8]) -> Result<(Partition, Verdict)> {
        let attrs: Vec<usize> = (0..self.n_qi()).collect();
        let fs: FrequencySet<Wide> = self.frequency_set(&attrs, levels, None, true);
        let verdict = self.verdict(&fs);
        if !verdict.accepted {
            return Err(Error::Internal(format!(
                "the chosen lattice node suppresses {} rows, more than the {} allowed",
                verdict.suppressed, self.max_suppressed
            )));
        }
        let mut group_of_class = vec![SUPPRESSED; fs.len()];
        let mut tuples: Vec<GeneralisedTuple> = Vec::new();
        for (g, slot) in group_of_class.iter_mut().enumerate() {
            if verdict.ok[g] {
                *slot = tuples.len() as u32;
                tuples.push(
                    fs.keys[g]
                        .iter()
                        .zip(levels)
                        .enumerate()
                        .map(|(q, (&code, &l))| {
                            Cell::Node(self.nodes[q][l as usize][code as usize])
                        })
                        .collect(),
                );
            }
        }
        let members = fs.members.as_ref().expect("members were asked for");
        let group_of_row = self
            .classes
            .class_of_row()
            .iter()
            .map(|&c| match c {
                NO_CLASS => SUPPRESSED,
                c => group_of_class[members[c as usize] as usize],
            })
            .collect();
        Ok((
            Partition::with_tuples(self.table, group_of_row, tuples),
            verdict,
        ))
    }
}

/// Groups `(key, count)` pairs by key: returns the distinct keys and their
/// summed counts (in order of first occurrence, so the result depends only
/// on the input order) and, when `remap` is asked for, the new class of
/// every input pair.
///
/// An open-addressing table of class numbers (4 bytes a slot, linear
/// probing, at most half full) keeps the hot data small: rollups of large
/// frequency sets are bound by this table's cache misses.
fn group_by<K: Key>(
    items: impl Iterator<Item = (K, u32)>,
    len: usize,
    remap: bool,
) -> (Vec<K>, Vec<u32>, Vec<u32>) {
    const EMPTY: u32 = u32::MAX;
    let bits = (2 * len.max(1)).next_power_of_two().trailing_zeros().max(4);
    let mask = (1usize << bits) - 1;
    let mut slots = vec![EMPTY; mask + 1];
    let mut keys: Vec<K> = Vec::with_capacity(len);
    let mut counts: Vec<u32> = Vec::with_capacity(len);
    let mut class_of = Vec::with_capacity(if remap { len } else { 0 });
    for (key, c) in items {
        let mut at = (key.hash64() >> (64 - bits)) as usize;
        let g = loop {
            match slots[at] {
                EMPTY => {
                    let g = keys.len() as u32;
                    slots[at] = g;
                    keys.push(key);
                    counts.push(0);
                    break g;
                }
                g if keys[g as usize] == key => break g,
                _ => at = (at + 1) & mask,
            }
        };
        counts[g as usize] += c;
        if remap {
            class_of.push(g);
        }
    }
    (keys, counts, class_of)
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use rustc_hash::FxHashMap;

    use super::*;
    use crate::hierarchy::Hierarchy;
    use crate::spec::JobSpec;

    fn fixture() -> (JobSpec, QiTable) {
        let spec: JobSpec = serde_json::from_value(serde_json::json!({"attributes": [
            {"name": "a", "role": "qi", "hierarchy": "a.csv"},
            {"name": "z", "role": "qi", "masking": true},
            {"name": "n", "role": "qi", "intervals": [2, 4]},
        ]}))
        .unwrap();
        let h = Hierarchy::from_csv("a.csv", "a0;p;*\na1;p;*\na2;q;*\na3;q;*\n", ';').unwrap();
        let hs: FxHashMap<String, Arc<Hierarchy>> =
            [("a.csv".to_string(), Arc::new(h))].into_iter().collect();
        let rows = 60;
        let a: Vec<String> = (0..rows).map(|i| format!("a{}", (i * 7) % 4)).collect();
        let z: Vec<String> = (0..rows)
            .map(|i| format!("{}", 4350 + (i * 5) % 9))
            .collect();
        let n: Vec<String> = (0..rows).map(|i| format!("{}", (i * 3) % 11)).collect();
        fn col(v: &[String]) -> Vec<&str> {
            v.iter().map(|s| s.as_str()).collect()
        }
        let table = QiTable::from_string_columns(
            &spec,
            &hs,
            &[("a", col(&a)), ("z", col(&z)), ("n", col(&n))],
        )
        .unwrap();
        (spec, table)
    }

    fn sorted<K: Key + Ord>(fs: &FrequencySet<K>) -> Vec<(K, u32)> {
        let mut v: Vec<(K, u32)> = fs
            .keys
            .iter()
            .cloned()
            .zip(fs.counts.iter().copied())
            .collect();
        v.sort();
        v
    }

    /// Rolling up from any more specific node gives the same classes as
    /// grouping the input classes directly, for every key type.
    fn rollup_matches_grouping<K: Key + Ord + std::fmt::Debug>() {
        let (spec, table) = fixture();
        let classes = EquivalenceClasses::of(&table);
        let privacy = Privacy::k_anonymity(3);
        let ctx = Context {
            table: &table,
            classes: &classes,
            privacy: &privacy,
            spec: &spec,
            cancel: crate::cancel::Cancellation::never(),
        };
        let lattice = Lattice::new(&ctx, "test").unwrap();
        let attrs = [0usize, 2];
        let space = Space::new(attrs.to_vec(), lattice.heights()).unwrap();
        for to in 0..space.size() {
            let target = space.decode(to);
            let direct = lattice.frequency_set::<K>(&attrs, &target, None, true);
            assert_eq!(direct.counts.iter().sum::<u32>(), 60);
            for from in 0..space.size() {
                let source = space.decode(from);
                if source.iter().zip(&target).any(|(s, t)| s > t) {
                    continue;
                }
                let src = lattice.frequency_set::<K>(&attrs, &source, None, true);
                let rolled = lattice.frequency_set(&attrs, &target, Some(&src), true);
                assert_eq!(sorted(&rolled), sorted(&direct), "{source:?} -> {target:?}");
                // Every input class lands in the class holding its tuple.
                let members = rolled.members.as_ref().unwrap();
                let mut sizes = vec![0u32; rolled.len()];
                for (c, &g) in members.iter().enumerate() {
                    sizes[g as usize] += classes.size(c) as u32;
                }
                assert_eq!(sizes, rolled.counts);
            }
        }
    }

    #[test]
    fn rollups_match_direct_grouping_for_every_key_type() {
        rollup_matches_grouping::<u64>();
        rollup_matches_grouping::<u128>();
        rollup_matches_grouping::<Wide>();
    }

    #[test]
    fn the_root_node_has_one_class_and_the_leaves_the_input_classes() {
        let (spec, table) = fixture();
        let classes = EquivalenceClasses::of(&table);
        let privacy = Privacy::k_anonymity(61);
        let ctx = Context {
            table: &table,
            classes: &classes,
            privacy: &privacy,
            spec: &spec,
            cancel: crate::cancel::Cancellation::never(),
        };
        let lattice = Lattice::new(&ctx, "test").unwrap();
        let attrs = [0usize, 1, 2];
        assert_eq!(lattice.heights(), &[2, 4, 3]);
        let leaves = lattice.frequency_set::<u64>(&attrs, &[0, 0, 0], None, false);
        assert_eq!(leaves.len(), classes.len());
        let root = lattice.frequency_set(&attrs, &[2, 4, 3], Some(&leaves), false);
        assert_eq!(root.counts, vec![60]);
        // k = 61 > 60 rows: even the root is rejected, all rows counted.
        let v = lattice.verdict(&root);
        assert!(!v.accepted);
        assert_eq!(v.suppressed, 60);
        assert_eq!(lattice.distinct_at(0, 0), 4);
        assert_eq!(lattice.distinct_at(0, 1), 2);
        assert_eq!(lattice.distinct_at(1, 4), 1);
    }

    #[test]
    fn space_indices_follow_level_vectors() {
        let space = Space::new(vec![0, 2, 3], &[1, 9, 2, 3]).unwrap();
        assert_eq!(space.size(), 2 * 3 * 4);
        let layers = space.by_height();
        assert_eq!(layers.len(), 1 + 2 + 3 + 1);
        let mut seen = 0;
        for (h, layer) in layers.iter().enumerate() {
            for &i in layer {
                let levels = space.decode(i as usize);
                assert_eq!(levels.iter().map(|&l| l as usize).sum::<usize>(), h);
                seen += 1;
            }
        }
        assert_eq!(seen, space.size());
        // Lexicographic: the last QI varies fastest.
        assert_eq!(space.decode(1), vec![0, 0, 1]);
        assert_eq!(space.decode(4), vec![0, 1, 0]);
        assert_eq!(space.stride(0), 12);
        // Projection dropping the middle QI lands on (l0, l2) of that space.
        let smaller = Space::new(vec![0, 3], &[1, 9, 2, 3]).unwrap();
        assert_eq!(smaller.decode(smaller.project(&[1, 2, 3], 1)), vec![1, 3]);
    }
}
