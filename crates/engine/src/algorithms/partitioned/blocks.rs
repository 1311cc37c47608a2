//! The cutter of block-wise runs: a region of rows is cut top-down near the
//! median of one QI, chosen on a sample of the region, until every block
//! has at most `block_size` rows (step 1 of the module doc of
//! `partitioned`). It differs from Mondrian's own cutter on purpose: it
//! must cost one pass per level on tens of millions of rows (a sample, no
//! sort of the region), and it only prepares blocks that the inner
//! algorithm then anonymises.

use super::BlockCut;
use crate::codes::with_codes;
use crate::encode::QiTable;
use crate::privacy::{ClassView, Privacy};

/// Rows of a region on which [`Blocks::cut`] chooses its cut. On 1M rows
/// from `kanon generate --like adult` (partitioned SBC, 10k-row blocks),
/// 2^13 made the partition step about twice as fast as 2^15 but raised the
/// NCP by 4 %, and 2^16 cost 50 % more time for no gain; 2^15 also covers a
/// whole Adult table, so Adult is partitioned exactly.
const LOSS_SAMPLE: usize = 1 << 15;

/// Where a region is cut: rows whose code is below `code` (or up to it,
/// when `inclusive`) go left.
#[derive(Debug, Clone, Copy)]
struct Boundary {
    code: u32,
    inclusive: bool,
}

impl Boundary {
    #[inline]
    fn goes_left(self, code: u32) -> bool {
        code < self.code || (self.inclusive && code == self.code)
    }
}

/// Sample rows of a region with their QI codes copied row-major.
struct Sample {
    n_qi: usize,
    codes: Vec<u32>,
}

impl Sample {
    /// Every `step`-th row of `rows`.
    fn of(table: &QiTable, rows: &[u32], step: usize) -> Sample {
        let n_qi = table.n_qi();
        let picked: Vec<u32> = rows.iter().step_by(step).copied().collect();
        let mut codes = vec![0u32; picked.len() * n_qi];
        for (q, col) in table.columns().iter().enumerate() {
            with_codes!(col.codes(), |column| {
                for (i, &r) in picked.iter().enumerate() {
                    codes[i * n_qi + q] = column[r as usize].into();
                }
            });
        }
        Sample { n_qi, codes }
    }

    fn len(&self) -> usize {
        self.codes.len() / self.n_qi.max(1)
    }

    #[inline]
    fn code(&self, i: u32, q: usize) -> u32 {
        self.codes[i as usize * self.n_qi + q]
    }

    /// The codes of sample row `i`, one per QI.
    #[inline]
    fn row(&self, i: u32) -> &[u32] {
        &self.codes[i as usize * self.n_qi..(i as usize + 1) * self.n_qi]
    }

    /// Smallest and largest code of every QI over sample rows `idx`.
    fn ranges(&self, idx: &[u32]) -> Vec<(u32, u32)> {
        let mut ranges = vec![(u32::MAX, 0u32); self.n_qi];
        for &i in idx {
            let row = self.row(i);
            for (r, &c) in ranges.iter_mut().zip(row) {
                r.0 = r.0.min(c);
                r.1 = r.1.max(c);
            }
        }
        ranges
    }
}

/// The boundary between distinct values of QI `q` nearest the median of
/// sample rows `idx`, when it leaves both sides within the middle half.
/// `domain` is the QI's number of codes: a small domain is counted in one
/// pass, a large one goes through a selection.
fn boundary(sample: &Sample, idx: &mut [u32], q: usize, domain: usize) -> Option<Boundary> {
    let n = idx.len();
    if n < 2 {
        return None;
    }
    let m = n / 2;
    let (median, below, upto) = if domain <= 4 * n {
        let mut hist = vec![0u32; domain];
        for &i in idx.iter() {
            hist[sample.code(i, q) as usize] += 1;
        }
        let mut before = 0usize;
        let mut found = None;
        for (c, &h) in hist.iter().enumerate() {
            if before + h as usize > m {
                found = Some((c as u32, before, before + h as usize));
                break;
            }
            before += h as usize;
        }
        found?
    } else {
        idx.select_nth_unstable_by_key(m, |&i| sample.code(i, q));
        let median = sample.code(idx[m], q);
        let (mut below, mut upto) = (0, 0);
        for &i in idx.iter() {
            let c = sample.code(i, q);
            below += (c < median) as usize;
            upto += (c <= median) as usize;
        }
        (median, below, upto)
    };
    let in_middle = |c: usize| c >= n / 4 && c <= n - n / 4 && c > 0 && c < n;
    let c = [below, upto]
        .into_iter()
        .filter(|&c| in_middle(c))
        .min_by_key(|&c| (c.abs_diff(m), c))?;
    Some(Boundary {
        code: median,
        inclusive: c == upto,
    })
}

/// The partition step: top-down median cuts down to the block size.
pub(super) struct Blocks<'a> {
    pub(super) table: &'a QiTable,
    pub(super) privacy: &'a Privacy,
    pub(super) block_size: usize,
    pub(super) rule: BlockCut,
}

impl Blocks<'_> {
    /// Cuts `rows` into blocks, in a deterministic order.
    pub(super) fn split(&self, rows: Vec<u32>) -> Vec<Vec<u32>> {
        if rows.len() <= self.block_size {
            return vec![rows];
        }
        match self.cut(rows) {
            Ok((left, right)) => {
                let (mut a, b) = rayon::join(|| self.split(left), || self.split(right));
                a.extend(b);
                a
            }
            Err(rows) => vec![rows],
        }
    }

    /// The normalised width of QI `q` over codes `lo..=hi`: numeric QIs by
    /// value range, others by the share of their observed codes spanned.
    fn width(&self, q: usize, lo: u32, hi: u32) -> f64 {
        if lo >= hi {
            return 0.0;
        }
        let col = &self.table.columns()[q];
        let (min, max) = col.min_max();
        match (col.value(lo), col.value(hi)) {
            (Some(a), Some(b)) if max > min => (b - a) / (max - min),
            _ => {
                let spanned = col.observed_in(lo, hi + 1) as f64;
                (spanned - 1.0) / (col.distinct().max(2) - 1) as f64
            }
        }
    }

    /// The loss of cutting sample rows `idx` at boundary `b` of QI `q`:
    /// for each part, its rows times the sum of its QIs' normalised widths
    /// (granularity, unweighted, as if the part were one group). One pass.
    fn split_loss(&self, sample: &Sample, idx: &[u32], q: usize, b: Boundary) -> f64 {
        let n_qi = sample.n_qi;
        let mut ranges = [vec![(u32::MAX, 0u32); n_qi], vec![(u32::MAX, 0u32); n_qi]];
        let mut sizes = [0usize; 2];
        for &i in idx {
            let row = sample.row(i);
            let side = (!b.goes_left(row[q])) as usize;
            sizes[side] += 1;
            for (r, &c) in ranges[side].iter_mut().zip(row) {
                r.0 = r.0.min(c);
                r.1 = r.1.max(c);
            }
        }
        (0..2)
            .map(|side| {
                let widths: f64 = ranges[side]
                    .iter()
                    .enumerate()
                    .map(|(q, &(lo, hi))| self.width(q, lo, hi))
                    .sum();
                widths * sizes[side] as f64
            })
            .sum()
    }

    /// The QIs that vary over sample rows `idx`, widest first (ties by QI
    /// order).
    fn widths(&self, sample: &Sample, idx: &[u32]) -> Vec<usize> {
        let mut widths: Vec<(f64, usize)> = sample
            .ranges(idx)
            .into_iter()
            .enumerate()
            .filter(|(_, (lo, hi))| lo < hi)
            .map(|(q, (lo, hi))| (self.width(q, lo, hi), q))
            .collect();
        widths.sort_by(|a, b| b.0.total_cmp(&a.0).then(a.1.cmp(&b.1)));
        widths.into_iter().map(|(_, q)| q).collect()
    }

    /// Cuts a region in two, or gives it back when no QI allows a cut.
    ///
    /// The QI and the boundary are chosen on an evenly strided sample of at
    /// most [`LOSS_SAMPLE`] rows (the whole region when smaller), copied
    /// row-major so that weighing every candidate reads memory in order;
    /// the chosen cut then costs one pass over the region, and is checked
    /// on the full parts.
    fn cut(&self, mut rows: Vec<u32>) -> std::result::Result<(Vec<u32>, Vec<u32>), Vec<u32>> {
        let n = rows.len();
        let k = self.privacy.min_class_size().max(1);
        if n < 2 * k || self.table.n_qi() == 0 {
            return Err(rows);
        }
        let sample = Sample::of(self.table, &rows, n.div_ceil(LOSS_SAMPLE).max(1));
        let mut idx: Vec<u32> = (0..sample.len() as u32).collect();
        let order = self.widths(&sample, &idx);
        // First a boundary between distinct values within the middle half:
        // on the widest QI that has one, or the one whose parts lose least.
        let mut candidates: Vec<(f64, usize, Boundary)> = Vec::new();
        for (rank, &q) in order.iter().enumerate() {
            let domain = self.table.columns()[q].domain_size();
            let Some(b) = boundary(&sample, &mut idx, q, domain) else {
                continue;
            };
            let loss = match self.rule {
                BlockCut::Widest => rank as f64,
                BlockCut::LeastLoss => self.split_loss(&sample, &idx, q, b),
            };
            candidates.push((loss, q, b));
        }
        candidates.sort_by(|a, b| a.0.total_cmp(&b.0));
        for (_, q, b) in candidates {
            let (left, right): (Vec<u32>, Vec<u32>) =
                with_codes!(self.table.columns()[q].codes(), |codes| rows
                    .iter()
                    .partition(|&&r| b.goes_left(codes[r as usize].into())));
            if self.accepts(&left) && self.accepts(&right) {
                return Ok((left, right));
            }
        }
        // Only then an exact median cut, which splits rows of equal value
        // and leaves every other QI as wide as before.
        let m = n / 2;
        for &q in &order {
            with_codes!(self.table.columns()[q].codes(), |codes| {
                rows.select_nth_unstable_by_key(m, |&r| (codes[r as usize], r));
            });
            let (left, right) = (rows[..m].to_vec(), rows[m..].to_vec());
            if self.accepts(&left) && self.accepts(&right) {
                return Ok((left, right));
            }
        }
        Err(rows)
    }

    fn accepts(&self, rows: &[u32]) -> bool {
        rows.len() >= self.privacy.min_class_size()
            && self.privacy.accepts(ClassView {
                table: self.table,
                rows,
            })
    }
}
