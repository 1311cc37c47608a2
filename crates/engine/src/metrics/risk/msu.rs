//! The riskiest QI combinations: minimal sample uniques (MSUs) after SUDA
//! (Elliot, Manning & Ford, "A computational algorithm for handling the
//! special uniques problem", IJUFKS 10(5), 2002) and SUDA2 (Manning, Haglin
//! & Keane, "A recursive search algorithm for statistical disclosure
//! assessment", Data Min Knowl Disc 16, 2008).
//!
//! A set `S` of QIs is an MSU of a record when the record's values on `S`
//! occur in no other record, while on every proper subset of `S` they do.
//! Uniqueness only grows with the set, so `S` is minimal exactly when the
//! record is not unique on any of the sets `S \ {a}`. The sets are
//! enumerated by size up to a bound, each grouped by hashing its packed
//! codes; a level keeps only the unique records of the level below, so
//! memory stays at one bit per record and set of the previous level at
//! most.
//!
//! The result names attributes and counts records; it never holds values.

use rayon::prelude::*;
use rustc_hash::FxHashMap;
use serde::Serialize;

use crate::encode::QiTable;
use crate::error::{Error, Result};

/// Most QI sets an MSU search evaluates (all sets of up to the maximum
/// size): beyond it the search refuses rather than run for hours.
const MAX_SETS: usize = 100_000;

/// MSUs an attribute takes part in.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct AttributeMsus {
    /// The QI's name.
    pub attribute: String,
    /// MSUs (record, set) whose set contains the attribute.
    pub msus: usize,
    /// The same by set size: `by_size[i]` counts sets of `i + 1` QIs.
    pub by_size: Vec<usize>,
}

/// A QI combination and the records it is an MSU of.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct RiskyCombination {
    /// The QIs' names, in job order.
    pub attributes: Vec<String>,
    /// Records for which this combination is an MSU: alone on these QIs but
    /// on no fewer of them.
    pub records: usize,
}

/// MSUs of a table up to a set size.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct MsuReport {
    /// The largest set size searched.
    pub max_size: usize,
    /// MSUs found: (record, set) pairs.
    pub msus: usize,
    /// MSUs by set size: `by_size[i]` counts sets of `i + 1` QIs.
    pub by_size: Vec<usize>,
    /// Records with at least one MSU (unique on some set of at most
    /// `max_size` QIs).
    pub records_with_msu: usize,
    /// Per QI, in job order.
    pub attributes: Vec<AttributeMsus>,
    /// The combinations that are MSUs of the most records, most first (ties:
    /// smaller sets first, then job order); at most the requested number.
    pub top_combinations: Vec<RiskyCombination>,
}

/// Rows of the table as a set: sorted row numbers while few, a bitmap once
/// dense.
enum RowSet {
    Sparse(Vec<u32>),
    Dense(Vec<u64>),
}

impl RowSet {
    fn new(rows: Vec<u32>, n_rows: usize) -> Self {
        if rows.len() * 32 < n_rows {
            RowSet::Sparse(rows)
        } else {
            let mut bits = vec![0u64; n_rows.div_ceil(64)];
            for r in rows {
                bits[r as usize / 64] |= 1 << (r % 64);
            }
            RowSet::Dense(bits)
        }
    }

    fn contains(&self, r: u32) -> bool {
        match self {
            RowSet::Sparse(v) => v.binary_search(&r).is_ok(),
            RowSet::Dense(b) => b[r as usize / 64] & (1 << (r % 64)) != 0,
        }
    }
}

/// Finds the MSUs of the active rows of `table` over sets of at most
/// `max_size` QIs and reports, per QI and per set size, how many there are,
/// and the `top` combinations that are MSUs of the most records.
///
/// # Errors
/// [`Error::Spec`] (`max_msu_size`) when `max_size` is 0 or the search
/// would evaluate more than 100,000 QI sets.
pub fn minimal_sample_uniques(table: &QiTable, max_size: usize, top: usize) -> Result<MsuReport> {
    let q = table.n_qi();
    if max_size == 0 {
        return Err(Error::spec("max_msu_size", "must be at least 1"));
    }
    let max_size = max_size.min(q);
    let sets: usize = (1..=max_size).map(|k| binomial(q, k)).sum();
    if sets > MAX_SETS {
        return Err(Error::spec(
            "max_msu_size",
            format!(
                "{q} QIs and sets of up to {max_size} of them make {sets} sets to search, more than {MAX_SETS}; lower the maximum set size"
            ),
        ));
    }
    let rows = table.active_rows();
    let bits: Vec<u32> = table
        .columns()
        .iter()
        .map(|c| 32 - (c.domain_size().max(2) as u32 - 1).leading_zeros())
        .collect();
    let mut by_size = vec![0usize; max_size];
    let mut per_attr = vec![vec![0usize; max_size]; q];
    let mut has_msu = vec![false; table.n_rows()];
    let mut combos: Vec<(Vec<usize>, usize)> = Vec::new();
    // Unique rows of every set of the previous level.
    let mut previous: FxHashMap<Vec<usize>, RowSet> = FxHashMap::default();
    for size in 1..=max_size {
        let level = subsets(q, size);
        let found: Vec<(Vec<u32>, Vec<u32>)> = level
            .par_iter()
            .map(|set| {
                let uniques = unique_rows(table, &rows, set, &bits);
                let minimal: Vec<u32> = uniques
                    .iter()
                    .copied()
                    .filter(|&r| {
                        (0..set.len()).all(|drop| {
                            let sub: Vec<usize> = set
                                .iter()
                                .enumerate()
                                .filter(|&(i, _)| i != drop)
                                .map(|(_, &a)| a)
                                .collect();
                            previous.get(&sub).is_none_or(|s| !s.contains(r))
                        })
                    })
                    .collect();
                (uniques, minimal)
            })
            .collect();
        let mut next = FxHashMap::default();
        for (set, (uniques, minimal)) in level.into_iter().zip(found) {
            by_size[size - 1] += minimal.len();
            for &a in &set {
                per_attr[a][size - 1] += minimal.len();
            }
            for &r in &minimal {
                has_msu[r as usize] = true;
            }
            if !minimal.is_empty() {
                combos.push((set.clone(), minimal.len()));
            }
            if size < max_size {
                next.insert(set, RowSet::new(uniques, table.n_rows()));
            }
        }
        previous = next;
    }
    combos.sort_by(|a, b| {
        b.1.cmp(&a.1)
            .then(a.0.len().cmp(&b.0.len()))
            .then(a.0.cmp(&b.0))
    });
    combos.truncate(top);
    let name = |a: usize| table.columns()[a].name().to_string();
    Ok(MsuReport {
        max_size,
        msus: by_size.iter().sum(),
        records_with_msu: has_msu.iter().filter(|&&b| b).count(),
        attributes: per_attr
            .into_iter()
            .enumerate()
            .map(|(a, by_size)| AttributeMsus {
                attribute: name(a),
                msus: by_size.iter().sum(),
                by_size,
            })
            .collect(),
        by_size,
        top_combinations: combos
            .into_iter()
            .map(|(set, records)| RiskyCombination {
                attributes: set.into_iter().map(name).collect(),
                records,
            })
            .collect(),
    })
}

/// The rows (ascending) whose codes on `set` no other row shares.
fn unique_rows(table: &QiTable, rows: &[u32], set: &[usize], bits: &[u32]) -> Vec<u32> {
    let columns = table.columns();
    // Pack the codes into 128 bits; when a set's codes do not fit (more
    // than four wide columns), fold the packed prefix into a dense id first.
    let mut keys: Vec<u128> = vec![0; rows.len()];
    let mut used = 0u32;
    for &a in set {
        if used + bits[a] > 128 {
            let mut ids: FxHashMap<u128, u128> = FxHashMap::default();
            for k in keys.iter_mut() {
                let next = ids.len() as u128;
                *k = *ids.entry(*k).or_insert(next);
            }
            used = 128 - (ids.len().max(2) as u128 - 1).leading_zeros();
        }
        let codes = columns[a].codes();
        for (k, &r) in keys.iter_mut().zip(rows) {
            *k = (*k << bits[a]) | codes.get(r as usize) as u128;
        }
        used += bits[a];
    }
    // key -> (count capped at 2, first row)
    let mut seen: FxHashMap<u128, (u8, u32)> = FxHashMap::default();
    seen.reserve(rows.len().min(1 << 20));
    for (&k, &r) in keys.iter().zip(rows) {
        seen.entry(k).and_modify(|e| e.0 = 2).or_insert((1, r));
    }
    let mut out: Vec<u32> = seen
        .into_values()
        .filter(|&(c, _)| c == 1)
        .map(|(_, r)| r)
        .collect();
    out.sort_unstable();
    out
}

/// All `k`-subsets of `0..q`, as ascending index lists, in lexicographic
/// order.
fn subsets(q: usize, k: usize) -> Vec<Vec<usize>> {
    let mut out = Vec::new();
    let mut cur: Vec<usize> = (0..k).collect();
    if k == 0 || k > q {
        return out;
    }
    loop {
        out.push(cur.clone());
        // Advance the rightmost index that can move.
        let Some(i) = (0..k).rev().find(|&i| cur[i] < q - k + i) else {
            return out;
        };
        cur[i] += 1;
        for j in i + 1..k {
            cur[j] = cur[j - 1] + 1;
        }
    }
}

fn binomial(n: usize, k: usize) -> usize {
    (0..k).fold(1usize, |acc, i| acc.saturating_mul(n - i) / (i + 1))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::spec::JobSpec;

    fn table(columns: &[(&str, Vec<&str>)]) -> QiTable {
        let attrs: Vec<String> = columns
            .iter()
            .map(|(n, _)| format!(r#"{{"name": "{n}", "role": "qi"}}"#))
            .collect();
        let spec: JobSpec = serde_json::from_str(&format!(
            r#"{{"privacy": {{"k": 2}}, "attributes": [{}]}}"#,
            attrs.join(",")
        ))
        .unwrap();
        QiTable::from_string_columns(&spec, &Default::default(), columns).unwrap()
    }

    #[test]
    fn subsets_and_binomials() {
        assert_eq!(
            subsets(4, 2),
            [[0, 1], [0, 2], [0, 3], [1, 2], [1, 3], [2, 3]]
        );
        assert_eq!(subsets(3, 3), [[0, 1, 2]]);
        assert!(subsets(2, 3).is_empty());
        assert_eq!(binomial(8, 3), 56);
        assert_eq!((1..=3).map(|k| subsets(8, k).len()).sum::<usize>(), 92);
    }

    #[test]
    fn msus_by_hand() {
        // row  a  b  c
        //  0   x  1  p
        //  1   x  1  q
        //  2   y  1  p
        //  3   y  2  p
        //  4   x  2  q
        // Size 1: no value of a, b or c is unique (a: x3 y2; b: 1x3 2x2;
        // c: p3 q2).
        // Size 2: {a,b}: x1 x1 y1 y2 x2 -> rows 2, 3, 4 unique.
        //         {a,c}: xp xq yp yp xq -> row 0 unique.
        //         {b,c}: 1p 1q 1p 2p 2q -> rows 1, 3, 4 unique.
        // Size 3: all five rows unique; row 0 is unique on {a,c}, rows 1..4
        //         on {a,b} or {b,c}: no MSU of size 3.
        let t = table(&[
            ("a", vec!["x", "x", "y", "y", "x"]),
            ("b", vec!["1", "1", "1", "2", "2"]),
            ("c", vec!["p", "q", "p", "p", "q"]),
        ]);
        let r = minimal_sample_uniques(&t, 3, 10).unwrap();
        assert_eq!(r.by_size, [0, 7, 0]);
        assert_eq!(r.msus, 7);
        assert_eq!(r.records_with_msu, 5);
        let per: Vec<(&str, usize)> = r
            .attributes
            .iter()
            .map(|a| (a.attribute.as_str(), a.msus))
            .collect();
        // a: {a,b} 3 + {a,c} 1; b: {a,b} 3 + {b,c} 3; c: {a,c} 1 + {b,c} 3.
        assert_eq!(per, [("a", 4), ("b", 6), ("c", 4)]);
        let top: Vec<(Vec<&str>, usize)> = r
            .top_combinations
            .iter()
            .map(|c| (c.attributes.iter().map(|s| s.as_str()).collect(), c.records))
            .collect();
        assert_eq!(
            top,
            [
                (vec!["a", "b"], 3),
                (vec!["b", "c"], 3),
                (vec!["a", "c"], 1)
            ]
        );
        // Size 1 only: nothing.
        let r = minimal_sample_uniques(&t, 1, 10).unwrap();
        assert_eq!((r.msus, r.records_with_msu), (0, 0));
        assert!(r.top_combinations.is_empty());
        // No value appears in the report's serialisation.
        let json = serde_json::to_string(&minimal_sample_uniques(&t, 3, 10).unwrap()).unwrap();
        assert!(!json.contains("\"x\"") && !json.contains("\"p\""), "{json}");
    }

    #[test]
    fn single_attribute_uniques_are_msus_of_size_one() {
        // Row 2 is unique on a alone, so {a,b} is no MSU for it; rows 0 and
        // 1 share a and b, row 3's b is unique.
        let t = table(&[
            ("a", vec!["x", "x", "z", "w", "w"]),
            ("b", vec!["1", "1", "1", "9", "1"]),
        ]);
        let r = minimal_sample_uniques(&t, 2, 1).unwrap();
        // Size 1: row 2 on a, row 3 on b. Size 2: row 4 (w,1) - a=w and
        // b=1 are not unique on their own.
        assert_eq!(r.by_size, [2, 1]);
        assert_eq!(r.records_with_msu, 3);
        assert_eq!(r.top_combinations.len(), 1);
        assert_eq!(r.top_combinations[0].records, 1);
        assert_eq!(r.top_combinations[0].attributes, ["a"]);
    }

    #[test]
    fn bounds_are_checked() {
        let t = table(&[("a", vec!["x"])]);
        assert!(minimal_sample_uniques(&t, 0, 5).is_err());
        // One row: unique on its only QI; the size bound is capped at q.
        let r = minimal_sample_uniques(&t, 3, 5).unwrap();
        assert_eq!((r.max_size, r.msus, r.records_with_msu), (1, 1, 1));
    }
}
