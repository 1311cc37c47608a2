//! One pass over a region gives the code ranges of every candidate cut's
//! parts; regions are ordered by counting their codes.

use super::*;

/// Rows gathered per chunk when [`CodeRanges`] reads a region.
pub(super) const GATHER_ROWS: usize = 1024;

/// For each code of each candidate QI, the smallest and largest code on
/// every QI among a region's rows with that code: one pass over the region
/// gives every candidate part's code ranges.
pub(super) struct CodeRanges {
    n_qi: usize,
    /// Per QI: its smallest code in the region and where its codes' entries
    /// start in `spans` (`usize::MAX`: not a candidate).
    lo: Vec<u32>,
    start: Vec<usize>,
    /// `(smallest, largest)` code per (candidate code, QI).
    spans: Vec<(u32, u32)>,
}

impl CodeRanges {
    /// The ranges of `rows` for the `candidates` QIs; `None` when the table
    /// of ranges would not be smaller than the region (then a pass per QI
    /// over a part costs no more).
    pub(super) fn of(table: &QiTable, rows: &[u32], candidates: &[usize]) -> Option<Self> {
        let n_qi = table.n_qi();
        let columns = table.columns();
        let mut lo = vec![0; n_qi];
        let mut start = vec![usize::MAX; n_qi];
        let mut size = 0;
        for &q in candidates {
            let (a, b) = with_codes!(columns[q].codes(), |c| min_max(rows, c));
            lo[q] = a;
            start[q] = size;
            size += (b - a) as usize + 1;
            if size * n_qi > rows.len() {
                return None;
            }
        }
        let mut spans = vec![(u32::MAX, 0u32); size * n_qi];
        let mut gathered = vec![0u32; GATHER_ROWS * n_qi];
        for chunk in rows.chunks(GATHER_ROWS) {
            for (c, col) in columns.iter().enumerate() {
                with_codes!(col.codes(), |codes| {
                    for (i, &r) in chunk.iter().enumerate() {
                        gathered[i * n_qi + c] = codes[r as usize].into();
                    }
                });
            }
            for row in gathered.chunks(n_qi).take(chunk.len()) {
                for &q in candidates {
                    let at = (start[q] + (row[q] - lo[q]) as usize) * n_qi;
                    for (span, &code) in spans[at..at + n_qi].iter_mut().zip(row) {
                        span.0 = span.0.min(code);
                        span.1 = span.1.max(code);
                    }
                }
            }
        }
        Some(CodeRanges {
            n_qi,
            lo,
            start,
            spans,
        })
    }

    /// The code range on every QI of `part`, whose rows hold every row of
    /// the region with their code on QI `q`.
    pub(super) fn of_part(
        &self,
        table: &QiTable,
        part: &[u32],
        q: usize,
    ) -> Option<Vec<(u32, u32)>> {
        if self.start[q] == usize::MAX {
            return None;
        }
        let n_qi = self.n_qi;
        let mut out = vec![(u32::MAX, 0u32); n_qi];
        let mut seen: Vec<bool> = Vec::new();
        with_codes!(table.columns()[q].codes(), |codes| {
            for &r in part {
                let x = (u32::from(codes[r as usize]) - self.lo[q]) as usize;
                if x >= seen.len() {
                    seen.resize(x + 1, false);
                }
                seen[x] = true;
            }
        });
        for (x, _) in seen.iter().enumerate().filter(|(_, &s)| s) {
            let at = (self.start[q] + x) * n_qi;
            for (o, span) in out.iter_mut().zip(&self.spans[at..at + n_qi]) {
                o.0 = o.0.min(span.0);
                o.1 = o.1.max(span.1);
            }
        }
        Some(out)
    }
}

pub(super) fn shift(regions: Vec<(usize, usize)>, by: usize) -> Vec<(usize, usize)> {
    regions.into_iter().map(|(a, b)| (a + by, b + by)).collect()
}

/// Smallest and largest code of `rows`.
pub(super) fn min_max<T: Code>(rows: &[u32], codes: &[T]) -> (u32, u32) {
    rows.iter().fold((u32::MAX, 0), |(lo, hi), &r| {
        let c: u32 = codes[r as usize].into();
        (lo.min(c), hi.max(c))
    })
}

/// Sorts `rows` stably by `key` of their code (below `n_keys`): one
/// counting pass and one scatter instead of a comparison sort, so a cut
/// costs O(rows). Gives where each key's run ends.
pub(super) fn counting_sort<T: Code>(
    rows: &mut [u32],
    codes: &[T],
    n_keys: usize,
    key: impl Fn(u32) -> usize,
) -> Vec<usize> {
    let mut ends = vec![0usize; n_keys];
    for &r in rows.iter() {
        ends[key(codes[r as usize].into())] += 1;
    }
    let mut next = Vec::with_capacity(n_keys);
    let mut end = 0;
    for count in &mut ends {
        next.push(end);
        end += *count;
        *count = end;
    }
    SCRATCH.with_borrow_mut(|scratch| {
        scratch.clear();
        scratch.resize(rows.len(), 0);
        for &r in rows.iter() {
            let k = key(codes[r as usize].into());
            scratch[next[k]] = r;
            next[k] += 1;
        }
        rows.copy_from_slice(scratch);
    });
    ends
}
