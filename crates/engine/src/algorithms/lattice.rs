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
//! per-level lookup tables of the hierarchies ([`Hierarchy::level_table`]).
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

use std::hash::Hash;

use rustc_hash::FxHashMap;
use serde::{Deserialize, Serialize};

use crate::algorithms::Context;
use crate::encode::{EquivalenceClasses, QiTable, NO_CLASS};
use crate::error::{Error, Result};
use crate::generalise::{Cell, GeneralisedTuple};
use crate::hierarchy::{Hierarchy, Level, NodeId};
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
    /// KACA's table distortion (seed 000, Def. 7): the sum over rows and QIs
    /// of the WHD with uniform weights, `level / height` per cell.
    #[default]
    Distortion,
    /// The sum of the cells' NCP (seed 001, Table 2-13).
    Ncp,
    /// Sweeney's precision loss: the sum of `level / height` over cells
    /// (seed 002), i.e. `(1 - precision) * n * m`.
    Precision,
    /// The discernibility metric `DM = sum |E|^2 + |D| * suppressed rows`.
    Discernibility,
}

/// The classes of one node: per class a representative input class (an
/// index of [`EquivalenceClasses`]) and the number of rows.
#[derive(Debug, Clone)]
pub(crate) struct FrequencySet {
    reps: Vec<u32>,
    counts: Vec<u32>,
    /// The class of every input class, kept only when row lists are needed.
    members: Option<Vec<u32>>,
}

impl FrequencySet {
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
}

/// Per-cell costs of a [`Loss`]: `by_node[q][node]` for every hierarchy
/// node of QI `q`.
#[derive(Debug, Clone)]
pub(crate) struct CellCosts {
    loss: Loss,
    by_node: Vec<Vec<f64>>,
    suppressed_row: f64,
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
        let mut levels = vec![0u8; self.attrs.len()];
        for j in 0..self.attrs.len() {
            levels[j] = (index / self.strides[j]) as u8;
            index %= self.strides[j];
        }
        levels
    }

    /// The index of a level vector.
    pub(crate) fn encode(&self, levels: &[u8]) -> usize {
        levels
            .iter()
            .zip(&self.strides)
            .map(|(&l, &s)| l as usize * s)
            .sum()
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
    hierarchies: Vec<&'a Hierarchy>,
    heights: Vec<u8>,
    /// Bits of a node id of each QI's hierarchy (for packed class keys).
    bits: Vec<u32>,
    base_reps: Vec<u32>,
    base_counts: Vec<u32>,
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
        let bits = hierarchies
            .iter()
            .map(|h| 32 - (h.node_count().max(2) as u32 - 1).leading_zeros())
            .collect();
        let n_base = ctx.classes.len();
        let base_counts = (0..n_base).map(|c| ctx.classes.size(c) as u32).collect();
        Ok(Lattice {
            table,
            classes: ctx.classes,
            privacy: ctx.privacy,
            hierarchies,
            heights,
            bits,
            base_reps: (0..n_base as u32).collect(),
            base_counts,
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
        let table = self.hierarchies[q].level_table(Level(level));
        let tuples = (0..self.classes.len()).map(|c| self.classes.tuple(c)[q]);
        let mut seen: Vec<u32> = tuples.map(|leaf| table[leaf as usize]).collect();
        seen.sort_unstable();
        seen.dedup();
        seen.len()
    }

    /// The frequency set of the node `levels` over the QIs `attrs`, rolled
    /// up from `from` (the frequency set of a node of the same QIs with
    /// every level at most `levels`), or from the input classes when
    /// `from` is `None`. Row lists are tracked when a model needs them or
    /// `members` asks for them (to build a partition).
    pub(crate) fn frequency_set(
        &self,
        attrs: &[usize],
        levels: &[u8],
        from: Option<&FrequencySet>,
        members: bool,
    ) -> FrequencySet {
        let (reps, counts) = match from {
            Some(f) => (&f.reps[..], &f.counts[..]),
            None => (&self.base_reps[..], &self.base_counts[..]),
        };
        let lookups: Vec<(usize, &[u32], u32)> = attrs
            .iter()
            .zip(levels)
            .map(|(&q, &l)| (q, self.hierarchies[q].level_table(Level(l)), self.bits[q]))
            .collect();
        let total_bits: u32 = lookups.iter().map(|l| l.2).sum();
        let classes = self.classes;
        let (out_reps, out_counts, remap) = if total_bits <= 64 {
            group_by(reps, counts, |r| {
                let t = classes.tuple(r as usize);
                lookups.iter().fold(0u64, |k, &(q, table, bits)| {
                    (k << bits) | table[t[q] as usize] as u64
                })
            })
        } else if total_bits <= 128 {
            group_by(reps, counts, |r| {
                let t = classes.tuple(r as usize);
                lookups.iter().fold(0u128, |k, &(q, table, bits)| {
                    (k << bits) | table[t[q] as usize] as u128
                })
            })
        } else {
            group_by(reps, counts, |r| {
                let t = classes.tuple(r as usize);
                lookups
                    .iter()
                    .map(|&(q, table, _)| table[t[q] as usize])
                    .collect::<Box<[u32]>>()
            })
        };
        let members = (members || self.needs_rows).then(|| match from {
            Some(FrequencySet {
                members: Some(m), ..
            }) => m.iter().map(|&g| remap[g as usize]).collect(),
            Some(_) => unreachable!("a frequency set without members rolled up into one with"),
            None => remap,
        });
        FrequencySet {
            reps: out_reps,
            counts: out_counts,
            members,
        }
    }

    /// Tests every class of a node against the privacy models.
    pub(crate) fn verdict(&self, fs: &FrequencySet) -> Verdict {
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
        let by_node = self
            .table
            .columns()
            .iter()
            .zip(&self.hierarchies)
            .map(|(col, h)| {
                (0..h.node_count() as u32)
                    .map(|n| {
                        let cell = Cell::Node(NodeId(n));
                        match loss {
                            Loss::Distortion => distortion::cell_whd(col, &cell, Weights::Uniform),
                            Loss::Ncp => cell_ncp(col, &cell),
                            Loss::Precision => cell_precision_loss(col, &cell),
                            Loss::Discernibility => 0.0,
                        }
                    })
                    .collect()
            })
            .collect();
        let suppressed_row = self
            .table
            .columns()
            .iter()
            .map(|col| match loss {
                Loss::Distortion => distortion::cell_whd(col, &Cell::Suppressed, Weights::Uniform),
                Loss::Ncp => cell_ncp(col, &Cell::Suppressed),
                Loss::Precision => cell_precision_loss(col, &Cell::Suppressed),
                Loss::Discernibility => 0.0,
            })
            .sum();
        CellCosts {
            loss,
            by_node,
            suppressed_row,
        }
    }

    /// Scores an accepted node of all QIs (`levels` in QI order): rows of
    /// rejected classes and rows excluded by a null policy are suppressed.
    pub(crate) fn score(
        &self,
        levels: &[u8],
        fs: &FrequencySet,
        verdict: &Verdict,
        costs: &CellCosts,
    ) -> Score {
        let n = self.table.n_rows() as f64;
        let tables: Vec<&[u32]> = self
            .hierarchies
            .iter()
            .zip(levels)
            .map(|(h, &l)| h.level_table(Level(l)))
            .collect();
        let mut total = 0.0;
        let mut dm = 0.0;
        for g in 0..fs.len() {
            if !verdict.ok[g] {
                continue;
            }
            let size = fs.counts[g] as f64;
            dm += size * size;
            if costs.loss != Loss::Discernibility {
                let t = self.classes.tuple(fs.reps[g] as usize);
                let cell_sum: f64 = tables
                    .iter()
                    .enumerate()
                    .map(|(q, table)| costs.by_node[q][table[t[q] as usize] as usize])
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
        let fs = self.frequency_set(&attrs, levels, None, true);
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
                let t = self.classes.tuple(fs.reps[g] as usize);
                tuples.push(
                    self.hierarchies
                        .iter()
                        .zip(levels)
                        .enumerate()
                        .map(|(q, (h, &l))| h.ancestor(NodeId(t[q]), Level(l)))
                        .map(Cell::Node)
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

/// Groups the classes `reps` (with sizes `counts`) by `key`: returns the
/// new classes' representatives and sizes (in order of first occurrence,
/// so the result depends only on the input order) and the new class of
/// every old one.
fn group_by<K: Hash + Eq>(
    reps: &[u32],
    counts: &[u32],
    key: impl Fn(u32) -> K,
) -> (Vec<u32>, Vec<u32>, Vec<u32>) {
    let mut index: FxHashMap<K, u32> = FxHashMap::default();
    index.reserve(reps.len().min(1 << 16));
    let mut out_reps = Vec::new();
    let mut out_counts: Vec<u32> = Vec::new();
    let mut remap = Vec::with_capacity(reps.len());
    for (&r, &c) in reps.iter().zip(counts) {
        let next = out_reps.len() as u32;
        let g = *index.entry(key(r)).or_insert(next);
        if g == next {
            out_reps.push(r);
            out_counts.push(0);
        }
        out_counts[g as usize] += c;
        remap.push(g);
    }
    (out_reps, out_counts, remap)
}
