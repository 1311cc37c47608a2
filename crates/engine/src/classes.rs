//! Equivalence classes: the rows of a [`QiTable`] grouped by identical QI
//! codes, with their sizes, tuples and rows. Algorithms start from them;
//! verification and metrics group published rows the same way.

use rustc_hash::FxHashMap;

use crate::codes::with_codes;
use crate::table::QiTable;

/// Identical QI tuples grouped into classes, with their sizes and rows.
///
/// Classes are numbered in order of their first row, so the numbering depends
/// only on the input order.
#[derive(Debug, Clone)]
pub struct EquivalenceClasses {
    n_qi: usize,
    class_of_row: Vec<u32>,
    tuples: Vec<u32>,
    offsets: Vec<u32>,
    rows: Vec<u32>,
    /// The input rows of every class, when the table's rows stand for
    /// several ([`QiTable::with_weights`]); its rows otherwise.
    weights: Option<Vec<u32>>,
}

/// Marks a row that belongs to no class (excluded by a null policy).
pub const NO_CLASS: u32 = u32::MAX;

/// Rows whose keys [`EquivalenceClasses::of_rows`] builds together: enough
/// to amortise the match on each column's code width, small enough that the
/// keys stay in the L1 cache (16 KiB of `u128`).
const KEY_CHUNK: usize = 1024;

impl EquivalenceClasses {
    /// Groups the active rows of `table` by their QI codes.
    pub fn of(table: &QiTable) -> Self {
        let rows = table.active_rows();
        Self::of_rows(table, &rows)
    }

    /// Groups the given rows of `table` by their QI codes.
    ///
    /// Rows are read in chunks of `KEY_CHUNK` (1024), column by column, so each
    /// column's code width is matched once per chunk rather than per code;
    /// a class's key is allocated once, when the class is found.
    pub fn of_rows(table: &QiTable, rows: &[u32]) -> Self {
        let n_qi = table.n_qi();
        let columns = table.columns();
        let bits: Vec<u32> = columns
            .iter()
            .map(|c| 32 - (c.domain_size().max(2) as u32 - 1).leading_zeros())
            .collect();
        let mut class_of_row = vec![NO_CLASS; table.n_rows()];
        let mut tuples: Vec<u32> = Vec::new();
        let mut sizes: Vec<u32> = Vec::new();
        let mut assign = |r: u32, class: u32, fresh: bool| {
            class_of_row[r as usize] = class;
            if fresh {
                tuples.extend(columns.iter().map(|c| c.codes().get(r as usize)));
                sizes.push(0);
            }
            sizes[class as usize] += 1;
        };
        if bits.iter().sum::<u32>() <= 128 {
            let mut map: FxHashMap<u128, u32> = FxHashMap::default();
            let mut keys = vec![0u128; KEY_CHUNK.min(rows.len())];
            for chunk in rows.chunks(KEY_CHUNK) {
                let keys = &mut keys[..chunk.len()];
                keys.fill(0);
                for (col, &b) in columns.iter().zip(&bits) {
                    with_codes!(col.codes(), |c| {
                        for (key, &r) in keys.iter_mut().zip(chunk) {
                            *key = (*key << b) | u128::from(u32::from(c[r as usize]));
                        }
                    });
                }
                for (&key, &r) in keys.iter().zip(chunk) {
                    let next = map.len() as u32;
                    let class = *map.entry(key).or_insert(next);
                    assign(r, class, class == next);
                }
            }
        } else {
            let mut map: FxHashMap<Box<[u32]>, u32> = FxHashMap::default();
            let mut keys = vec![0u32; KEY_CHUNK.min(rows.len()) * n_qi];
            for chunk in rows.chunks(KEY_CHUNK) {
                let keys = &mut keys[..chunk.len() * n_qi];
                for (q, col) in columns.iter().enumerate() {
                    with_codes!(col.codes(), |c| {
                        for (i, &r) in chunk.iter().enumerate() {
                            keys[i * n_qi + q] = u32::from(c[r as usize]);
                        }
                    });
                }
                for (key, &r) in keys.chunks_exact(n_qi).zip(chunk) {
                    let (class, fresh) = match map.get(key) {
                        Some(&class) => (class, false),
                        None => {
                            let class = map.len() as u32;
                            map.insert(key.into(), class);
                            (class, true)
                        }
                    };
                    assign(r, class, fresh);
                }
            }
        }
        let mut offsets = Vec::with_capacity(sizes.len() + 1);
        let mut acc = 0u32;
        offsets.push(0);
        for s in &sizes {
            acc += s;
            offsets.push(acc);
        }
        let mut fill = offsets.clone();
        let mut members = vec![0u32; acc as usize];
        for &r in rows {
            let c = class_of_row[r as usize] as usize;
            members[fill[c] as usize] = r;
            fill[c] += 1;
        }
        let weights = table.is_weighted().then(|| {
            (0..sizes.len())
                .map(|c| {
                    let rows = &members[offsets[c] as usize..offsets[c + 1] as usize];
                    rows.iter().map(|&r| table.weight(r) as u32).sum()
                })
                .collect()
        });
        EquivalenceClasses {
            n_qi,
            class_of_row,
            tuples,
            offsets,
            rows: members,
            weights,
        }
    }

    /// Number of classes.
    pub fn len(&self) -> usize {
        self.offsets.len() - 1
    }
    /// Whether there are no classes.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
    /// The class of every row ([`NO_CLASS`] for excluded rows).
    pub fn class_of_row(&self) -> &[u32] {
        &self.class_of_row
    }
    /// The QI codes of a class.
    pub fn tuple(&self, class: usize) -> &[u32] {
        &self.tuples[class * self.n_qi..(class + 1) * self.n_qi]
    }
    /// The rows of a class, ascending.
    pub fn rows(&self, class: usize) -> &[u32] {
        &self.rows[self.offsets[class] as usize..self.offsets[class + 1] as usize]
    }
    /// The size of a class: its input rows (the sum of its rows' weights
    /// in a table of counted tuples, [`QiTable::with_weights`]).
    pub fn size(&self, class: usize) -> usize {
        match &self.weights {
            Some(w) => w[class] as usize,
            None => (self.offsets[class + 1] - self.offsets[class]) as usize,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::spec::JobSpec;

    fn spec(json: &str) -> JobSpec {
        serde_json::from_str(json).unwrap()
    }

    /// Classes by brute force: rows with equal codes on every QI, numbered
    /// by first row.
    fn classes_by_brute_force(t: &QiTable) -> Vec<u32> {
        let mut seen: Vec<Vec<u32>> = Vec::new();
        (0..t.n_rows() as u32)
            .map(|r| {
                let tuple: Vec<u32> = t.row(r).collect();
                match seen.iter().position(|s| *s == tuple) {
                    Some(c) => c as u32,
                    None => {
                        seen.push(tuple);
                        seen.len() as u32 - 1
                    }
                }
            })
            .collect()
    }

    #[test]
    fn classes_group_equal_rows_with_packed_and_wide_keys() {
        // 8 QIs of 3 bits pack into one u128; 50 QIs need a key per class.
        for n_qi in [8, 50] {
            let names: Vec<String> = (0..n_qi).map(|q| format!("q{q}")).collect();
            let attributes: Vec<String> = names
                .iter()
                .map(|n| format!(r#"{{"name": "{n}", "role": "qi"}}"#))
                .collect();
            let s = spec(&format!(r#"{{"attributes": [{}]}}"#, attributes.join(",")));
            // Few distinct rows, more than one chunk of keys.
            let values: Vec<Vec<String>> = (0..n_qi)
                .map(|q| {
                    (0..2_500usize)
                        .map(|r| format!("v{}", (r * 7 + q) % 5 * ((r / 3) % 4)))
                        .collect()
                })
                .collect();
            let columns: Vec<(&str, Vec<&str>)> = names
                .iter()
                .zip(&values)
                .map(|(n, v)| (n.as_str(), v.iter().map(String::as_str).collect()))
                .collect();
            let t = QiTable::from_string_columns(&s, &Default::default(), &columns).unwrap();
            let expected = classes_by_brute_force(&t);
            let classes = EquivalenceClasses::of(&t);
            assert_eq!(classes.class_of_row(), expected.as_slice(), "{n_qi} QIs");
            let n_classes = *expected.iter().max().unwrap() as usize + 1;
            assert_eq!(classes.len(), n_classes);
            for c in 0..n_classes {
                let first = classes.rows(c)[0];
                assert!(classes.tuple(c).iter().copied().eq(t.row(first)));
            }
        }
    }
}
