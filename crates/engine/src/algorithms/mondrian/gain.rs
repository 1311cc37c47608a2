//! Choosing the cut by the loss it saves per bit of region it spends
//! (`cut = "gain-per-bit"`).
//!
//! Top-down, every cut divides a region, and a region can only be divided
//! until its parts reach k rows: a table of n rows affords about
//! log2(n / k) halvings along any path of the cut tree. The paper's widest
//! QI first (LeFevre et al., ICDE 2006) spends them in attribute order when
//! the widths tie, as they all do at the root of a table generalised by
//! hierarchies; the least-loss cut prefers the cut whose parts lose least
//! right away, which favours cuts into many small parts. Here a cut's
//! score is the granularity it saves over the rows it keeps (the region's
//! cells against its parts' cells, summed over the QIs) divided by the
//! entropy of its part sizes in bits raised to an exponent (deferred rows,
//! `residue = true`, are one more part that saves nothing): a QI almost
//! every row of which has one value is cut early, as it costs next to no
//! halving. This is the gain ratio of decision trees (Quinlan, C4.5, 1993)
//! with granularity in place of class entropy, the utility-driven choice of
//! Xu et al., "Utility-based anonymization using local recoding", KDD 2006.
//! An exponent under 1 weighs the halvings less than the full ratio, which
//! cuts QIs of many balanced values (age) too late: on Adult with the
//! residue, granularity 0.0837 / 0.2048 at k = 10 / 100 with the full
//! ratio, 0.0845 / 0.2096 with the saving alone, 0.0814 / 0.2008 with the
//! square root everywhere. The exponent now follows the halvings a region
//! still affords ([`bits_exponent`]): low at the top of the cut tree, where
//! every QI will still be cut and the saving matters most, 1 near 2k rows,
//! where the one cut left should buy the most per bit (0.0810 / 0.1983
//! with the square root everywhere and every small pool deferred, 0.0805 /
//! 0.1965 with this exponent).
//!
//! Regions under [`PER_BIT_MIN_ROWS`] rows, and every region when k is
//! under [`PER_BIT_MIN_K`], take the widest QI instead: the score costs a
//! trial cut per QI, about doubling the time, and saves nothing there (on
//! Adult with the residue, widest against per-bit: 0.0240 / 0.0244 at
//! k = 2, 0.0555 / 0.0561 at k = 5, 0.0810 both at k = 10; then 0.1114 /
//! 0.1102 at k = 20 and 0.2092 / 0.1983 at k = 100).

use super::{CodeRanges, Cut, Cutter};
use crate::spec::Kind;

/// Regions with fewer rows than this are cut on the widest QI (the
/// paper's rule) instead of scoring every QI's cut.
pub(super) const PER_BIT_MIN_ROWS: usize = 64;

/// Below this k every region is cut on the widest QI.
pub(super) const PER_BIT_MIN_K: usize = 10;

/// The halvings above which a region's exponent is [`MIN_EXPONENT`] in
/// [`bits_exponent`]: log2(n / k) of the whole Adult table at k = 100 is
/// 8.2 (6 and 10 lose more on Adult: 0.1970 and 0.1979 at k = 100).
const BUDGET_BITS: f64 = 8.0;

/// The smallest exponent of the bits in the per-bit score (large regions;
/// 0.2 / 0.3 / 0.4 give 0.1974 / 0.1965 / 0.1985 on Adult at k = 100).
const MIN_EXPONENT: f64 = 0.3;

/// The exponent of the bits in the score of a cut of a region of `n` rows
/// at class size `k`: 1 - log2(n / k) / [`BUDGET_BITS`], at least
/// [`MIN_EXPONENT`] and at most 1. A region that affords many more halvings
/// (the top of the cut tree) weighs the saving more than the bits it
/// spends, as every QI will still be cut below it; a region near 2k rows,
/// which affords one or two more cuts, weighs the bits fully (the gain
/// ratio), as the cut it spends now is one another QI will not get.
fn bits_exponent(n: usize, k: usize) -> f64 {
    let budget = (n as f64 / k.max(1) as f64).log2();
    (1.0 - budget / BUDGET_BITS).clamp(MIN_EXPONENT, 1.0)
}

impl Cutter<'_> {
    /// The allowed cut of `rows` on one of the QIs of `widths` (their
    /// normalised widths, [`Cutter::width`], in the order to try them)
    /// with the highest loss saved per bit, and that QI; `None` when none
    /// can be cut.
    pub(super) fn best_cut_per_bit(
        &self,
        rows: &mut [u32],
        widths: &[(f64, usize)],
    ) -> Option<(usize, Cut)> {
        let n = rows.len();
        let exponent = bits_exponent(n, self.privacy.min_class_size());
        let whole: f64 = (0..self.table.n_qi())
            .map(|q| {
                let col = &self.table.columns()[q];
                if col.kind() == Kind::Numeric && !self.by_children(col) {
                    self.column_loss(rows, q)
                } else {
                    widths.iter().find(|w| w.1 == q).map_or(0.0, |w| w.0)
                }
            })
            .sum();
        let candidates: Vec<usize> = widths.iter().map(|&(_, q)| q).collect();
        let ranges = CodeRanges::of(self.table, rows, &candidates);
        let mut best: Option<(f64, usize, Cut, Vec<u32>)> = None;
        for &q in &candidates {
            let Some(cut) = self.try_cut(rows, q) else {
                continue;
            };
            let kept: usize = cut.parts.iter().sum();
            let saved = whole * kept as f64 - self.cut_loss(rows, q, &cut, ranges.as_ref());
            let bits: f64 = cut
                .parts
                .iter()
                .copied()
                .chain(std::iter::once(n - kept))
                .filter(|&len| len > 0)
                .map(|len| {
                    let p = len as f64 / n as f64;
                    -p * p.log2()
                })
                .sum();
            let score = saved / n as f64 / bits.max(f64::MIN_POSITIVE).powf(exponent);
            if best.as_ref().is_none_or(|(b, _, _, _)| score > b + 1e-12) {
                best = Some((score, q, cut, rows.to_vec()));
            }
        }
        let (_, q, cut, order) = best?;
        rows.copy_from_slice(&order);
        Some((q, cut))
    }
}

#[cfg(test)]
mod tests {
    use super::{bits_exponent, MIN_EXPONENT};

    #[test]
    fn the_exponent_rises_as_the_halvings_left_fall() {
        // The whole Adult table at k = 100 (8.2 halvings): the floor.
        assert_eq!(bits_exponent(30_162, 100), MIN_EXPONENT);
        // A region of 2k rows affords one halving: 1 - 1/8.
        assert!((bits_exponent(200, 100) - 0.875).abs() < 1e-12);
        // A region of at most k rows: the full gain ratio.
        assert_eq!(bits_exponent(100, 100), 1.0);
        assert_eq!(bits_exponent(50, 100), 1.0);
        // k = 0 (no model on size) is read as 1; never NaN.
        assert!(bits_exponent(10, 0).is_finite());
        let mut last = 1.0;
        for n in (100..40_000).step_by(97) {
            let e = bits_exponent(n, 100);
            assert!((MIN_EXPONENT..=1.0).contains(&e) && e <= last, "n = {n}");
            last = e;
        }
    }
}
