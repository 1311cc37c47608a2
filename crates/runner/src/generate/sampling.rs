//! Drawing the Adult columns of a chunk: each row copies a uniformly drawn
//! record of the embedded table, each attribute is redrawn from its marginal
//! with probability `--noise`, and age is jittered within Adult's range
//! (steps 1 to 3 of the command's docs).

use std::sync::Arc;

use arrow::array::{ArrayRef, Int64Array, StringArray, StringBuilder};
use rand::Rng;

use super::model::{hit, stream, Model};

/// One column of the source table.
pub(super) enum SourceColumn {
    /// Integers (Adult: age): copied, then jittered and clamped to the
    /// observed range.
    Integer {
        values: Vec<i64>,
        jitter: i64,
        min: i64,
        max: i64,
    },
    /// Strings, as codes into their distinct values.
    Category {
        values: Vec<String>,
        codes: Vec<u16>,
    },
}

impl Model {
    /// The source table's columns for one chunk: a sampled record per row,
    /// each attribute redrawn from its marginal with probability `noise`,
    /// integers jittered.
    pub(super) fn source_columns(&self, chunk: u64, len: usize) -> Vec<ArrayRef> {
        let mut rng = stream(self.seed, 0, chunk);
        let n = self.records;
        let mut ints: Vec<Vec<i64>> = Vec::new();
        let mut codes: Vec<Vec<u16>> = Vec::new();
        for c in &self.source {
            match c {
                SourceColumn::Integer { .. } => ints.push(Vec::with_capacity(len)),
                SourceColumn::Category { .. } => codes.push(Vec::with_capacity(len)),
            }
        }
        for _ in 0..len {
            let record = rng.gen_range(0..n) as usize;
            let (mut i, mut s) = (0, 0);
            for c in &self.source {
                let r = if hit(&mut rng, self.noise) {
                    rng.gen_range(0..n) as usize
                } else {
                    record
                };
                match c {
                    SourceColumn::Integer {
                        values,
                        jitter,
                        min,
                        max,
                    } => {
                        let mut v = values[r];
                        if *jitter > 0 {
                            v = (v + rng.gen_range(-jitter..=*jitter)).clamp(*min, *max);
                        }
                        ints[i].push(v);
                        i += 1;
                    }
                    SourceColumn::Category { codes: src, .. } => {
                        codes[s].push(src[r]);
                        s += 1;
                    }
                }
            }
        }
        let (mut ints, mut codes) = (ints.into_iter(), codes.into_iter());
        self.source
            .iter()
            .map(|c| -> ArrayRef {
                match c {
                    SourceColumn::Integer { .. } => {
                        Arc::new(Int64Array::from(ints.next().unwrap_or_default()))
                    }
                    SourceColumn::Category { values, .. } => {
                        let codes = codes.next().unwrap_or_default();
                        Arc::new(strings(values, &codes))
                    }
                }
            })
            .collect()
    }
}

/// A string array from codes into `values`.
fn strings(values: &[String], codes: &[u16]) -> StringArray {
    let bytes = codes.iter().map(|&c| values[c as usize].len()).sum();
    let mut b = StringBuilder::with_capacity(codes.len(), bytes);
    for &c in codes {
        b.append_value(&values[c as usize]);
    }
    b.finish()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::generate::model::tests::{adult, rows};
    use crate::generate::Like;
    use arrow::array::{Array, AsArray, RecordBatch};
    use arrow::datatypes::{DataType, Int64Type};

    const QIS: [&str; 8] = [
        "age",
        "sex",
        "race",
        "marital-status",
        "education",
        "native-country",
        "workclass",
        "occupation",
    ];

    /// The number of distinct tuples of `columns` in `batches`.
    fn distinct_tuples(batches: &[RecordBatch], columns: &[&str]) -> usize {
        let mut seen = std::collections::HashSet::new();
        for b in batches {
            let cols: Vec<ArrayRef> = columns
                .iter()
                .map(|c| {
                    arrow::compute::cast(b.column_by_name(c).unwrap(), &DataType::Utf8).unwrap()
                })
                .collect();
            for r in 0..b.num_rows() {
                let key: Vec<String> = cols
                    .iter()
                    .map(|c| c.as_string::<i32>().value(r).to_string())
                    .collect();
                seen.insert(key);
            }
        }
        seen.len()
    }

    #[test]
    fn without_noise_every_row_is_an_adult_record_up_to_age() {
        let m = Model::new(Like::Adult, 3, 0.0, 0).unwrap();
        let source = adult();
        let key = |b: &RecordBatch, r: usize| -> Vec<String> {
            b.columns()
                .iter()
                .zip(b.schema().fields())
                .filter(|(_, f)| f.name() != "age")
                .map(|(c, _)| c.as_string::<i32>().value(r).to_string())
                .collect()
        };
        let mut known = std::collections::HashSet::new();
        for b in &source {
            for r in 0..b.num_rows() {
                known.insert(key(b, r));
            }
        }
        for b in rows(&m, 20_000) {
            let age = b.column_by_name("age").unwrap().as_primitive::<Int64Type>();
            for r in 0..b.num_rows() {
                assert!(known.contains(&key(&b, r)), "row {r} is not an Adult tuple");
                assert!((17..=90).contains(&age.value(r)));
            }
        }
    }

    #[test]
    fn marginals_follow_adult() {
        let m = Model::new(Like::Adult, 5, 0.02, 0).unwrap();
        let share = |batches: &[RecordBatch], col: &str, value: &str| {
            let (mut hits, mut all) = (0usize, 0usize);
            for b in batches {
                let c = b.column_by_name(col).unwrap().as_string::<i32>();
                hits += c.iter().filter(|v| *v == Some(value)).count();
                all += c.len();
            }
            hits as f64 / all as f64
        };
        let source = adult();
        let generated = rows(&m, 100_000);
        for (col, value) in [
            ("sex", "Male"),
            ("salary-class", ">50K"),
            ("race", "White"),
            ("native-country", "United-States"),
        ] {
            let (s, g) = (share(&source, col, value), share(&generated, col, value));
            assert!(
                (s - g).abs() < 0.01,
                "{col}={value}: Adult {s:.4}, generated {g:.4}"
            );
        }
    }

    #[test]
    fn class_structure_is_plausible() {
        // Adult itself has 18,109 distinct QI tuples in 30,162 rows. A plain
        // resample of 100k rows would have at most 18,109; the noise adds a
        // tail of new tuples, but most rows still fall in shared classes.
        let m = Model::new(Like::Adult, 1, 0.02, 0).unwrap();
        let d = distinct_tuples(&rows(&m, 100_000), &QIS);
        assert!(
            (25_000..=75_000).contains(&d),
            "{d} distinct QI tuples in 100k rows"
        );
        let plain = Model::new(Like::Adult, 1, 0.0, 0).unwrap();
        assert!(distinct_tuples(&rows(&plain, 100_000), &QIS) < d);
    }
}
