//! The extra columns `extra_i`: their kind (int64, float64, low or high
//! cardinality string, UTC timestamp, in turn), their share of nulls, and
//! the drawing of one column of a chunk.

use std::sync::Arc;

use arrow::array::{ArrayRef, Float64Array, Int64Array, StringBuilder, TimestampMicrosecondArray};
use arrow::buffer::NullBuffer;
use arrow::datatypes::{DataType, Field, TimeUnit};
use rand::{Rng, RngCore};
use rand_chacha::ChaCha8Rng;

use super::draws::{hit, threshold};

/// Distinct values of a low-cardinality extra string column.
pub(super) const LOW_CARDINALITY: usize = 1_000;

/// Timestamps are drawn from [2000-01-01, 2025-01-01) UTC, whole seconds.
pub(super) const TIMESTAMP_FROM_S: i64 = 946_684_800;
pub(super) const TIMESTAMP_SPAN_S: i64 = 788_918_400;

/// The kind of an extra column.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum ExtraKind {
    Int,
    Float,
    LowCardinalityString,
    HighCardinalityString,
    Timestamp,
}

/// Kind and share of nulls of `extra_{i}`.
fn extra_column(i: usize) -> (ExtraKind, f64) {
    let kind = match i % 4 {
        0 => ExtraKind::Int,
        1 => ExtraKind::Float,
        2 if (i / 4).is_multiple_of(2) => ExtraKind::LowCardinalityString,
        2 => ExtraKind::HighCardinalityString,
        _ => ExtraKind::Timestamp,
    };
    (kind, [0.0, 0.01, 0.1][i % 3])
}

/// The extra columns of a generated file.
pub(super) struct Extras {
    /// Kind and null threshold ([`threshold`]) of each column.
    columns: Vec<(ExtraKind, u64)>,
    /// The values of the low-cardinality string columns.
    labels: Vec<String>,
}

impl Extras {
    /// `n` extra columns, `extra_0 ..`.
    pub(super) fn new(n: usize) -> Self {
        Extras {
            columns: (0..n)
                .map(|i| {
                    let (kind, nulls) = extra_column(i);
                    (kind, threshold(nulls))
                })
                .collect(),
            labels: (0..LOW_CARDINALITY)
                .map(|i| format!("cat_{i:03}"))
                .collect(),
        }
    }

    /// How many there are.
    pub(super) fn len(&self) -> usize {
        self.columns.len()
    }

    /// Their fields in the output schema.
    pub(super) fn fields(&self) -> impl Iterator<Item = Field> + '_ {
        self.columns.iter().enumerate().map(|(i, (kind, _))| {
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
            Field::new(format!("extra_{i}"), data_type, true)
        })
    }

    /// Extra column `i` for one chunk of `len` rows, drawn from `rng`.
    pub(super) fn column(&self, i: usize, rng: &mut ChaCha8Rng, len: usize) -> ArrayRef {
        let (kind, nulls) = self.columns[i];
        let mut valid = Vec::with_capacity(len);
        match kind {
            ExtraKind::Int => {
                let mut v = Vec::with_capacity(len);
                for _ in 0..len {
                    valid.push(!hit(rng, nulls));
                    v.push(rng.gen_range(0..1_000_000i64));
                }
                Arc::new(Int64Array::new(v.into(), null_buffer(valid)))
            }
            ExtraKind::Float => {
                let mut v = Vec::with_capacity(len);
                for _ in 0..len {
                    valid.push(!hit(rng, nulls));
                    // An amount with cents, 0.00 ..= 1000.00.
                    v.push(rng.gen_range(0..=100_000i64) as f64 / 100.0);
                }
                Arc::new(Float64Array::new(v.into(), null_buffer(valid)))
            }
            ExtraKind::Timestamp => {
                let mut v = Vec::with_capacity(len);
                for _ in 0..len {
                    valid.push(!hit(rng, nulls));
                    let s = TIMESTAMP_FROM_S + rng.gen_range(0..TIMESTAMP_SPAN_S);
                    v.push(s * 1_000_000);
                }
                Arc::new(
                    TimestampMicrosecondArray::new(v.into(), null_buffer(valid))
                        .with_timezone("UTC"),
                )
            }
            ExtraKind::LowCardinalityString => {
                let mut b = StringBuilder::with_capacity(len, len * 7);
                for _ in 0..len {
                    let null = hit(rng, nulls);
                    let label = &self.labels[rng.gen_range(0..LOW_CARDINALITY)];
                    if null {
                        b.append_null();
                    } else {
                        b.append_value(label);
                    }
                }
                Arc::new(b.finish())
            }
            ExtraKind::HighCardinalityString => {
                const HEX: &[u8; 16] = b"0123456789abcdef";
                let mut b = StringBuilder::with_capacity(len, len * 16);
                let mut text = [0u8; 16];
                for _ in 0..len {
                    let null = hit(rng, nulls);
                    let mut x = rng.next_u64();
                    for t in text.iter_mut().rev() {
                        *t = HEX[(x & 15) as usize];
                        x >>= 4;
                    }
                    if null {
                        b.append_null();
                    } else {
                        // The bytes are ASCII hex digits.
                        b.append_value(std::str::from_utf8(&text).unwrap_or_default());
                    }
                }
                Arc::new(b.finish())
            }
        }
    }
}

/// A validity buffer, or none when every value is valid.
fn null_buffer(valid: Vec<bool>) -> Option<NullBuffer> {
    if valid.iter().all(|&v| v) {
        None
    } else {
        Some(NullBuffer::from(valid))
    }
}
