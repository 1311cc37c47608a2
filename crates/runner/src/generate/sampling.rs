//! Drawing the Adult columns of a chunk: each row copies a uniformly drawn
//! record of the embedded table, each attribute is redrawn from its marginal
//! with probability `--noise`, and age is jittered within Adult's range
//! (steps 1 to 3 of the command's docs).

use std::sync::Arc;

use anyhow::{bail, ensure, Context, Result};
use arrow::array::{ArrayRef, AsArray, Int64Array, StringArray, StringBuilder};
use arrow::datatypes::{DataType, Field, Int64Type};
use parquet::arrow::arrow_reader::ParquetRecordBatchReaderBuilder;
use rand::Rng;
use rand_chacha::ChaCha8Rng;

use super::draws::{hit, threshold};

/// The bundled Adult table, embedded so that `kanon generate` needs no data
/// directory (88 kB).
pub(super) const ADULT_PARQUET: &[u8] = include_bytes!("../../../../data/adult/adult.parquet");

/// How far age is jittered either way.
const AGE_JITTER: i64 = 2;

/// The source table's columns and how its rows are drawn.
pub(super) struct Source {
    columns: Vec<SourceColumn>,
    /// Its number of records.
    pub(super) records: u32,
    /// A draw under this threshold ([`threshold`]) redraws an attribute.
    noise: u64,
}

/// One column of the source table.
enum SourceColumn {
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

impl Source {
    /// The embedded Adult table, with each attribute redrawn with
    /// probability `noise`; also the output fields of its columns.
    pub(super) fn adult(noise: f64) -> Result<(Source, Vec<Field>)> {
        let reader =
            ParquetRecordBatchReaderBuilder::try_new(bytes::Bytes::from_static(ADULT_PARQUET))
                .context("the embedded Adult table is unreadable (a bug in this kanon build)")?
                .build()?;
        let batches = reader.collect::<Result<Vec<_>, _>>()?;
        let schema = batches
            .first()
            .map(|b| b.schema())
            .context("the embedded Adult table is empty (a bug in this kanon build)")?;
        let mut fields: Vec<Field> = Vec::new();
        let mut columns = Vec::new();
        for (i, field) in schema.fields().iter().enumerate() {
            let arrays: Vec<&ArrayRef> = batches.iter().map(|b| b.column(i)).collect();
            match field.data_type() {
                DataType::Int64 => {
                    let mut values = Vec::new();
                    for c in arrays {
                        values.extend(c.as_primitive::<Int64Type>().iter().flatten());
                    }
                    let min = values.iter().copied().min().unwrap_or(0);
                    let max = values.iter().copied().max().unwrap_or(0);
                    columns.push(SourceColumn::Integer {
                        values,
                        jitter: if field.name() == "age" { AGE_JITTER } else { 0 },
                        min,
                        max,
                    });
                    fields.push(field.as_ref().clone());
                }
                DataType::Utf8 | DataType::LargeUtf8 | DataType::Utf8View => {
                    let mut values: Vec<String> = Vec::new();
                    let mut index = rustc_hash::FxHashMap::<String, u16>::default();
                    let mut codes = Vec::new();
                    for c in arrays {
                        let c = arrow::compute::cast(c, &DataType::Utf8)?;
                        for v in c.as_string::<i32>().iter() {
                            let v = v.context("the embedded Adult table has a null")?;
                            let code = match index.get(v) {
                                Some(&code) => code,
                                None => {
                                    let code = u16::try_from(values.len())?;
                                    values.push(v.to_string());
                                    index.insert(v.to_string(), code);
                                    code
                                }
                            };
                            codes.push(code);
                        }
                    }
                    columns.push(SourceColumn::Category { values, codes });
                    fields.push(field.as_ref().clone().with_data_type(DataType::Utf8));
                }
                other => bail!(
                    "the embedded Adult table has column `{}` of unsupported type {other}",
                    field.name()
                ),
            }
        }
        let records = batches.iter().map(|b| b.num_rows()).sum::<usize>();
        let records = u32::try_from(records)?;
        ensure!(records > 0, "the embedded Adult table has no rows");
        let source = Source {
            columns,
            records,
            noise: threshold(noise),
        };
        Ok((source, fields))
    }

    /// The source table's columns for one chunk of `len` rows, drawn from
    /// `rng`: a sampled record per row, each attribute redrawn from its
    /// marginal with probability `noise`, integers jittered.
    pub(super) fn columns(&self, rng: &mut ChaCha8Rng, len: usize) -> Vec<ArrayRef> {
        let n = self.records;
        let mut ints: Vec<Vec<i64>> = Vec::new();
        let mut codes: Vec<Vec<u16>> = Vec::new();
        for c in &self.columns {
            match c {
                SourceColumn::Integer { .. } => ints.push(Vec::with_capacity(len)),
                SourceColumn::Category { .. } => codes.push(Vec::with_capacity(len)),
            }
        }
        for _ in 0..len {
            let record = rng.gen_range(0..n) as usize;
            let (mut i, mut s) = (0, 0);
            for c in &self.columns {
                let r = if hit(rng, self.noise) {
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
        self.columns
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
