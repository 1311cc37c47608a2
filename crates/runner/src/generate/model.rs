//! The model of the generated rows: the embedded Adult table loaded into
//! per-column values, the output schema (Adult's columns, then the extras),
//! the keyed ChaCha8 stream of each column group and chunk, and the
//! assembly of a chunk's columns into a batch, chunks in parallel.

use std::sync::Arc;

use anyhow::{bail, ensure, Context, Result};
use arrow::array::{ArrayRef, AsArray, RecordBatch};
use arrow::datatypes::{DataType, Field, Int64Type, Schema, SchemaRef, TimeUnit};
use parquet::arrow::arrow_reader::ParquetRecordBatchReaderBuilder;
use rand::{RngCore, SeedableRng};
use rand_chacha::ChaCha8Rng;
use rayon::prelude::*;

use super::extras::{extra_column, ExtraKind, LOW_CARDINALITY};
use super::sampling::SourceColumn;
use super::{Like, CHUNK_ROWS};

/// The bundled Adult table, embedded so that `kanon generate` needs no data
/// directory (88 kB).
pub(super) const ADULT_PARQUET: &[u8] = include_bytes!("../../../../data/adult/adult.parquet");

/// How far age is jittered either way.
const AGE_JITTER: i64 = 2;

/// Domain separation for the random streams: changing the generator's
/// algorithm should change this, so old and new files are never confused.
const STREAM_TAG: &[u8; 16] = b"kanon-generate-1";

/// Everything needed to generate any chunk of rows.
pub(super) struct Model {
    pub(super) schema: SchemaRef,
    pub(super) seed: u64,
    pub(super) source: Vec<SourceColumn>,
    pub(super) records: u32,
    /// A draw `next_u32() < noise` redraws an attribute.
    pub(super) noise: u64,
    pub(super) extras: Vec<(ExtraKind, u64)>,
    pub(super) labels: Vec<String>,
}

/// A probability as a threshold on a uniform `u32`.
pub(super) fn threshold(p: f64) -> u64 {
    (p * (1u64 << 32) as f64).round() as u64
}

/// Whether a draw falls under a threshold made by [`threshold`].
#[inline]
pub(super) fn hit(rng: &mut ChaCha8Rng, t: u64) -> bool {
    (rng.next_u32() as u64) < t
}

/// The random stream of one column group of one chunk.
pub(super) fn stream(seed: u64, column: u64, chunk: u64) -> ChaCha8Rng {
    let mut key = [0u8; 32];
    key[..8].copy_from_slice(&seed.to_le_bytes());
    key[8..16].copy_from_slice(&column.to_le_bytes());
    key[16..].copy_from_slice(STREAM_TAG);
    let mut rng = ChaCha8Rng::from_seed(key);
    rng.set_stream(chunk);
    rng
}

impl Model {
    /// Loads the source table and prepares the output schema.
    pub(super) fn new(like: Like, seed: u64, noise: f64, extra_columns: usize) -> Result<Model> {
        let Like::Adult = like;
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
        let mut source = Vec::new();
        for (i, field) in schema.fields().iter().enumerate() {
            let columns: Vec<&ArrayRef> = batches.iter().map(|b| b.column(i)).collect();
            match field.data_type() {
                DataType::Int64 => {
                    let mut values = Vec::new();
                    for c in columns {
                        values.extend(c.as_primitive::<Int64Type>().iter().flatten());
                    }
                    let min = values.iter().copied().min().unwrap_or(0);
                    let max = values.iter().copied().max().unwrap_or(0);
                    source.push(SourceColumn::Integer {
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
                    for c in columns {
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
                    source.push(SourceColumn::Category { values, codes });
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
        let mut extras = Vec::with_capacity(extra_columns);
        for i in 0..extra_columns {
            let (kind, nulls) = extra_column(i);
            let data_type = match kind {
                ExtraKind::Int => DataType::Int64,
                ExtraKind::Float => DataType::Float64,
                ExtraKind::LowCardinalityString | ExtraKind::HighCardinalityString => {
                    DataType::Utf8
                }
                ExtraKind::Timestamp => {
                    DataType::Timestamp(TimeUnit::Microsecond, Some("UTC".into()))
                }
            };
            fields.push(Field::new(format!("extra_{i}"), data_type, true));
            extras.push((kind, threshold(nulls)));
        }
        Ok(Model {
            schema: Arc::new(Schema::new(fields)),
            seed,
            source,
            records,
            noise: threshold(noise),
            extras,
            labels: (0..LOW_CARDINALITY)
                .map(|i| format!("cat_{i:03}"))
                .collect(),
        })
    }

    /// Generates the chunks in `range` (in parallel) of a file of `rows` rows.
    pub(super) fn generate(
        &self,
        range: std::ops::Range<u64>,
        rows: u64,
    ) -> Result<Vec<RecordBatch>> {
        range
            .into_par_iter()
            .map(|chunk| {
                let start = chunk * CHUNK_ROWS as u64;
                let len = (rows - start).min(CHUNK_ROWS as u64) as usize;
                self.chunk(chunk, len)
            })
            .collect()
    }

    /// Generates chunk number `chunk`, holding `len` rows.
    fn chunk(&self, chunk: u64, len: usize) -> Result<RecordBatch> {
        let mut columns = self.source_columns(chunk, len);
        for (i, &(kind, nulls)) in self.extras.iter().enumerate() {
            let mut rng = stream(self.seed, 1 + i as u64, chunk);
            columns.push(self.extra(kind, nulls, &mut rng, len));
        }
        Ok(RecordBatch::try_new(self.schema.clone(), columns)?)
    }
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;

    pub(crate) fn adult() -> Vec<RecordBatch> {
        ParquetRecordBatchReaderBuilder::try_new(bytes::Bytes::from_static(ADULT_PARQUET))
            .unwrap()
            .build()
            .unwrap()
            .collect::<Result<Vec<_>, _>>()
            .unwrap()
    }

    pub(crate) fn rows(model: &Model, n: u64) -> Vec<RecordBatch> {
        model.generate(0..n.div_ceil(CHUNK_ROWS as u64), n).unwrap()
    }

    #[test]
    fn schema_is_adults_then_extras() {
        let m = Model::new(Like::Adult, 1, 0.02, 9).unwrap();
        let names: Vec<&str> = m
            .schema
            .fields()
            .iter()
            .map(|f| f.name().as_str())
            .collect();
        assert_eq!(
            names,
            [
                "sex",
                "age",
                "race",
                "marital-status",
                "education",
                "native-country",
                "workclass",
                "occupation",
                "salary-class",
                "extra_0",
                "extra_1",
                "extra_2",
                "extra_3",
                "extra_4",
                "extra_5",
                "extra_6",
                "extra_7",
                "extra_8",
            ]
        );
        assert_eq!(m.records, 30_162);
        assert_eq!(m.schema.field(1).data_type(), &DataType::Int64);
        assert_eq!(m.schema.field(9).data_type(), &DataType::Int64);
        assert_eq!(m.schema.field(10).data_type(), &DataType::Float64);
        assert_eq!(m.schema.field(11).data_type(), &DataType::Utf8);
        assert!(matches!(
            m.schema.field(12).data_type(),
            DataType::Timestamp(TimeUnit::Microsecond, Some(tz)) if tz.as_ref() == "UTC"
        ));
    }

    #[test]
    fn chunks_are_deterministic_and_independent_of_window_and_extras() {
        let a = Model::new(Like::Adult, 7, 0.02, 4).unwrap();
        let b = Model::new(Like::Adult, 7, 0.02, 0).unwrap();
        let n = 3 * CHUNK_ROWS as u64 + 5;
        let all = a.generate(0..4, n).unwrap();
        let one_by_one: Vec<RecordBatch> = (0..4)
            .map(|c| a.generate(c..c + 1, n).unwrap().remove(0))
            .collect();
        assert_eq!(all, one_by_one);
        assert_eq!(all[3].num_rows(), 5);
        let adult_only = b.generate(0..4, n).unwrap();
        for (x, y) in all.iter().zip(&adult_only) {
            assert_eq!(x.columns()[..9], y.columns()[..]);
        }
        let other_seed = Model::new(Like::Adult, 8, 0.02, 4).unwrap();
        assert_ne!(other_seed.generate(0..1, n).unwrap()[0], all[0]);
    }

    #[test]
    fn thresholds() {
        assert_eq!(threshold(0.0), 0);
        assert_eq!(threshold(1.0), 1 << 32);
        let mut rng = stream(1, 0, 0);
        assert!((0..1000).all(|_| hit(&mut rng, threshold(1.0))));
        assert!((0..1000).all(|_| !hit(&mut rng, threshold(0.0))));
    }
}
