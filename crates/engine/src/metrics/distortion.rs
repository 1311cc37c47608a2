//! Weighted hierarchical distance and distortion (KACA, the KACA paper, Def. 5-8),
//! and the attribute-weighted distortion of Han et al. 2014.
//!
//! The paper numbers levels 1 (root) .. h (leaves); code levels count up from
//! the leaves (0 = leaf, `height` = root), so paper level `p` is code level
//! `h - p` with `h = height + 1`.

use serde::{Deserialize, Serialize};

use crate::encode::{QiColumn, QiTable};
use crate::generalise::Cell;

/// The weights `w(j, j-1)` of WHD.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize, Default)]
#[serde(rename_all = "kebab-case", tag = "weights")]
pub enum Weights {
    /// `w = 1`: every level counts the same.
    #[default]
    Uniform,
    /// `w(j, j-1) = 1 / (j-1)^beta` (paper levels): steps near the root cost
    /// more than steps near the leaves.
    Height {
        /// The exponent, > 0 (default 1).
        beta: f64,
    },
}

/// WHD between paper levels `p` (more specific) and `q` (more general) of a
/// hierarchy with `h` paper levels (the KACA paper, Def. 5):
/// `sum_{j=q+1..p} w(j,j-1) / sum_{j=2..h} w(j,j-1)`.
pub fn whd(weights: Weights, h: usize, p: usize, q: usize) -> f64 {
    if h < 2 || p <= q {
        return 0.0;
    }
    let w = |j: usize| match weights {
        Weights::Uniform => 1.0,
        Weights::Height { beta } => 1.0 / ((j - 1) as f64).powf(beta),
    };
    let num: f64 = (q + 1..=p).map(w).sum();
    let den: f64 = (2..=h).map(w).sum();
    num / den
}

/// Per-column table of WHD from each code level to each higher code level.
#[derive(Debug, Clone)]
pub struct WhdTable {
    /// `up[l]`: WHD from the leaves to code level `l`.
    up: Vec<f64>,
}

impl WhdTable {
    /// The table for a hierarchy of the given height (code levels).
    pub fn new(weights: Weights, height: usize) -> Self {
        let h = height + 1;
        WhdTable {
            up: (0..=height).map(|l| whd(weights, h, h, h - l)).collect(),
        }
    }

    /// WHD from code level `from` up to code level `to` (`to >= from`).
    pub fn between(&self, from: usize, to: usize) -> f64 {
        self.up[to] - self.up[from]
    }
}

/// How far a published cell lies from the leaves, as a share in `[0, 1]`
/// under the given weights: WHD for hierarchy cells; for flexible cells
/// (no hierarchy) the covered share `(m-1)/(D-1)` for categorical and the
/// width over the range for numeric columns (the flexible analogue of WHD;
/// the SBC thesis's NCP without the `m/D` jump); 1 for suppressed cells.
pub fn cell_whd(col: &QiColumn, cell: &Cell, weights: Weights) -> f64 {
    match (cell, col.hierarchy()) {
        (Cell::Suppressed, _) => 1.0,
        (Cell::Node(n), Some(h)) => {
            WhdTable::new(weights, h.height() as usize).between(0, h.level(*n).0 as usize)
        }
        _ => flexible_share(col, cell),
    }
}

/// The width of a numeric cell over the attribute's range, `(hi-lo)/(max-min)`;
/// `None` for categorical columns.
pub(crate) fn numeric_share(col: &QiColumn, cell: &Cell) -> Option<f64> {
    let (lo, hi) = col.extent(cell)?;
    let (min, max) = col.min_max();
    Some(if max > min {
        (hi - lo) / (max - min)
    } else {
        0.0
    })
}

/// `(m-1)/(D-1)` of a categorical cell, width/range of a numeric one.
pub(crate) fn flexible_share(col: &QiColumn, cell: &Cell) -> f64 {
    if let Some(share) = numeric_share(col, cell) {
        return share;
    }
    let d = col.distinct();
    if d <= 1 {
        return 0.0;
    }
    (col.covered(cell).saturating_sub(1)) as f64 / (d - 1) as f64
}

/// Attribute-weighted distortion of one cell (Han et al. 2014):
/// `x_A * steps_A / L_A`, with `L_A` the number of levels including the
/// leaves; flexible cells use `x_A * (m-1)/(D-1)`.
pub fn cell_weighted_distortion(col: &QiColumn, cell: &Cell) -> f64 {
    let share = match (cell, col.hierarchy()) {
        (Cell::Node(n), Some(h)) => h.level(*n).0 as f64 / (h.height() as f64 + 1.0),
        (Cell::Suppressed, Some(h)) => h.height() as f64 / (h.height() as f64 + 1.0),
        (Cell::Suppressed, None) => 1.0,
        _ => flexible_share(col, cell),
    };
    col.weight() * share
}

/// Distortion of a tuple published as `cells` (sum of its cells' WHD).
pub fn tuple_distortion(table: &QiTable, cells: &[Cell], weights: Weights) -> f64 {
    table
        .columns()
        .iter()
        .zip(cells)
        .map(|(c, cell)| cell_whd(c, cell, weights))
        .sum()
}

/// Closest common generalisation of two published tuples: per attribute the
/// tightest cell covering both.
pub fn closest_common_generalisation(table: &QiTable, a: &[Cell], b: &[Cell]) -> Vec<Cell> {
    table
        .columns()
        .iter()
        .zip(a.iter().zip(b))
        .map(|(c, (x, y))| c.join(x, y))
        .collect()
}

/// Distortion of moving a published tuple `from` up to `to` (which covers
/// it): the sum over attributes of WHD between their levels, or the growth of
/// the flexible share.
pub fn distortion_between(table: &QiTable, from: &[Cell], to: &[Cell], weights: Weights) -> f64 {
    table
        .columns()
        .iter()
        .zip(from.iter().zip(to))
        .map(|(c, (f, t))| cell_whd(c, t, weights) - cell_whd(c, f, weights))
        .sum()
}

/// Tuple distance (the KACA paper Def. 7): `Distortion(t1,t12) + Distortion(t2,t12)`
/// with `t12` the closest common generalisation.
pub fn tuple_distance(table: &QiTable, a: &[Cell], b: &[Cell], weights: Weights) -> f64 {
    class_distance(table, a, 1, b, 1, weights)
}

/// Class distance (the KACA paper Def. 8) for classes of `n1` and `n2` identical
/// tuples: `n1*Distortion(t1,t12) + n2*Distortion(t2,t12)`.
pub fn class_distance(
    table: &QiTable,
    a: &[Cell],
    n1: usize,
    b: &[Cell],
    n2: usize,
    weights: Weights,
) -> f64 {
    let t12 = closest_common_generalisation(table, a, b);
    n1 as f64 * distortion_between(table, a, &t12, weights)
        + n2 as f64 * distortion_between(table, b, &t12, weights)
}

impl QiColumn {
    /// The tightest cell covering both cells.
    pub fn join(&self, a: &Cell, b: &Cell) -> Cell {
        match (a, b) {
            (Cell::Suppressed, _) | (_, Cell::Suppressed) => Cell::Suppressed,
            (Cell::Node(x), Cell::Node(y)) => match self.hierarchy() {
                Some(h) => Cell::Node(h.lca(*x, *y)),
                None => self.cell_of([x.0, y.0]),
            },
            (Cell::Range { lo: a1, hi: a2 }, Cell::Range { lo: b1, hi: b2 }) => Cell::Range {
                lo: *a1.min(b1),
                hi: *a2.max(b2),
            },
            (Cell::Set(x), Cell::Set(y)) => {
                let mut s: Vec<u32> = x.iter().chain(y.iter()).copied().collect();
                s.sort_unstable();
                s.dedup();
                Cell::Set(s.into())
            }
            _ => Cell::Suppressed,
        }
    }
}
