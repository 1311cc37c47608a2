//! Scoring lattice nodes: the [`Loss`] Incognito chooses among accepted
//! nodes by, its per-cell costs ([`CellCosts`]), the lower bound used to
//! prune nodes ([`Lattice::loss_floor`]) and the [`Score`] of a node.
//!
//! Costs come from the engine's metric functions, computed once per dense
//! code of every level, so scoring a node reads one table entry per class
//! and QI instead of generalising rows.

use serde::{Deserialize, Serialize};

use super::{FrequencySet, Key, Lattice, Verdict};
use crate::generalise::Cell;
use crate::metrics::loss::{cell_ncp, cell_precision_loss};
use crate::metrics::{distortion, Weights};

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

impl Lattice<'_> {
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
        published + self.nulls() as f64 * costs.suppressed_row
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
        let n = self.table.rows_in_scope() as f64;
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
        let suppressed = (verdict.suppressed + self.nulls()) as f64;
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
}
