//! Information loss of published cells: NCP (the SBC thesis), granularity (ARX's
//! loss), precision (Sweeney; the HeuristicMin paper) and the uncertainty loss of
//! L-clustering (the L-clustering paper).

use crate::encode::QiColumn;
use crate::generalise::Cell;
use crate::metrics::distortion::{flexible_share, numeric_share};

/// NCP of a cell (the SBC thesis, Table 2-13): numeric `[lo,hi]` costs
/// `(hi-lo)/(max-min)`; categorical covering `m` of `D` values costs 0 when
/// `m = 1`, else `m/D`; a suppressed cell costs 1.
pub fn cell_ncp(col: &QiColumn, cell: &Cell) -> f64 {
    if matches!(cell, Cell::Suppressed) {
        return 1.0;
    }
    if let Some(share) = numeric_share(col, cell) {
        return share;
    }
    let m = col.covered(cell);
    if m <= 1 {
        0.0
    } else {
        m as f64 / col.distinct().max(1) as f64
    }
}

/// Granularity of a cell: `(m-1)/(D-1)` with `m` the distinct input values
/// covered, `D` the column's distinct input values; 0 unchanged, 1 for `*`.
pub fn cell_granularity(col: &QiColumn, cell: &Cell) -> f64 {
    if matches!(cell, Cell::Suppressed) {
        return 1.0;
    }
    let d = col.distinct();
    if d <= 1 {
        return 0.0;
    }
    (col.covered(cell).saturating_sub(1)) as f64 / (d - 1) as f64
}

/// The precision loss `l/h` of a cell (the HeuristicMin paper): levels climbed over the
/// hierarchy height; flexible cells use their covered share.
pub fn cell_precision_loss(col: &QiColumn, cell: &Cell) -> f64 {
    match (cell, col.hierarchy()) {
        (Cell::Suppressed, _) => 1.0,
        (Cell::Node(n), Some(h)) if h.height() > 0 => h.level(*n).0 as f64 / h.height() as f64,
        (Cell::Node(_), Some(_)) => 0.0,
        _ => flexible_share(col, cell),
    }
}

/// The uncertainty loss `L(t[A], t*[A])` of L-clustering (the L-clustering paper, `docs/SPEC.md`
/// section 3) for one cell, times the attribute's weight (`p_i` or `q_j`):
/// an ordered (numeric) cell costs its interval width over the attribute's
/// range, an unordered one `(|set|-1)/(|domain|-1)` with the set the
/// observed values it covers (a hierarchy node covers its leaves); a
/// suppressed cell costs the full weight. `L(t, t*)` is the sum over a
/// tuple's cells.
pub fn cell_uncertainty_loss(col: &QiColumn, cell: &Cell) -> f64 {
    col.weight() * flexible_share(col, cell)
}
