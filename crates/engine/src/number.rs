//! Exact numbers: the identity, order and printed form of the values of a
//! numeric column, read from Arrow arrays without going through `f64`.
//!
//! A numeric quasi-identifier publishes values (`42`) and ranges
//! (`[40-49]`), and a sensitive column counts distinct values for
//! l-diversity. Both must see exactly the values the input holds: an `f64`
//! holds integers only up to 2^53, so `2^60 + 1` and `2^60 + 3` would become
//! one value that the input never held (issue 15, "exact values"). So every
//! value gets an [`Exact`] key (integers, decimals, dates, times and
//! timestamps as `i128` in their own unit; other floats by their bits), its
//! label is printed from that key or from Arrow's own display of the value,
//! and the `f64` kept beside it serves only distances and losses.

use std::cmp::Ordering;

use arrow::array::{Array, ArrayRef, AsArray};
use arrow::compute::cast;
use arrow::datatypes::{DataType, Float64Type, Int64Type, UInt64Type};
use arrow::util::display::{ArrayFormatter, FormatOptions};

use crate::error::{Error, Result};

/// The largest integer magnitude an `f64` holds exactly.
pub(crate) const MAX_EXACT_F64_INTEGER: f64 = 9_007_199_254_740_992.0;

/// The identity of one numeric value: equal keys are the same input value.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub(crate) enum Exact {
    /// An integer, from an integer column or an integral float within 2^53.
    Int(i128),
    /// A decimal's unscaled value, or a temporal value in its unit; printed
    /// by Arrow's display of the column type.
    Scaled(i128),
    /// Any other float, by its bits (`-0` is `0`; NaN has one key).
    Float(u64),
}

impl Exact {
    /// The total order of a column's values: by number, then exactly (two
    /// integers beyond 2^53 that share an `f64` keep their own order).
    pub(crate) fn cmp_with(&self, value: f64, other: &Exact, other_value: f64) -> Ordering {
        value
            .total_cmp(&other_value)
            .then_with(|| match (self, other) {
                (Exact::Int(a), Exact::Int(b)) | (Exact::Scaled(a), Exact::Scaled(b)) => a.cmp(b),
                (Exact::Float(a), Exact::Float(b)) => a.cmp(b),
                (a, b) => a.rank().cmp(&b.rank()),
            })
    }

    fn rank(&self) -> u8 {
        match self {
            Exact::Int(_) => 0,
            Exact::Scaled(_) => 1,
            Exact::Float(_) => 2,
        }
    }
}

/// One value of a numeric column: its key and its number for distances.
/// [`Exact::Scaled`] values print through Arrow ([`printer`]); the others
/// print themselves ([`Number::label`]).
#[derive(Debug, Clone, Copy, PartialEq)]
pub(crate) struct Number {
    pub(crate) exact: Exact,
    pub(crate) value: f64,
}

impl Number {
    fn int(v: i128) -> Self {
        Number {
            exact: Exact::Int(v),
            value: v as f64,
        }
    }

    pub(crate) fn float(v: f64) -> Self {
        let v = if v == 0.0 { 0.0 } else { v };
        if v.fract() == 0.0 && v.abs() <= MAX_EXACT_F64_INTEGER {
            return Number::int(v as i128);
        }
        let bits = if v.is_nan() {
            f64::NAN.to_bits()
        } else {
            v.to_bits()
        };
        Number {
            exact: Exact::Float(bits),
            value: v,
        }
    }

    /// The label a release prints for an integer or a float (a decimal or
    /// temporal value is printed by [`printer`]).
    pub(crate) fn label(&self) -> String {
        match self.exact {
            Exact::Int(v) => v.to_string(),
            _ => format_float(self.value),
        }
    }
}

/// Formats a float as the release shows it: integers without a fraction.
pub fn format_float(v: f64) -> String {
    if v.fract() == 0.0 && v.abs() < 1e15 {
        format!("{}", v as i64)
    } else {
        format!("{v}")
    }
}

/// How Arrow prints the values of `array` when they are decimals, dates,
/// times or timestamps, whose [`Exact::Scaled`] keys do not print
/// themselves; `None` for other types. The encoder prints a value only when
/// it first meets it, not every row.
///
/// # Errors
/// Arrow's, for a time zone it cannot read.
pub(crate) fn printer(array: &dyn Array) -> Result<Option<ArrayFormatter<'_>>> {
    let dt = array.data_type();
    if dt.is_numeric()
        && !matches!(
            dt,
            DataType::Decimal32(..)
                | DataType::Decimal64(..)
                | DataType::Decimal128(..)
                | DataType::Decimal256(..)
        )
        || !is_numeric_type(dt)
    {
        return Ok(None);
    }
    Ok(Some(ArrayFormatter::try_new(
        array,
        &FormatOptions::default(),
    )?))
}

/// Whether a column of this type is read on the numeric path.
pub(crate) fn is_numeric_type(dt: &DataType) -> bool {
    dt.is_numeric() || dt.is_temporal() && !matches!(dt, DataType::Interval(_))
}

/// The numbers of `array` (nulls are `None`), for column `column`.
/// Strings are parsed (`unparsable` counts those that are not numbers).
///
/// # Errors
/// [`Error::Data`] naming the column for a type with no exact numeric form
/// (intervals, decimals beyond 38 digits).
pub(crate) fn numbers(
    column: &str,
    array: &ArrayRef,
    unparsable: &mut usize,
) -> Result<Vec<Option<Number>>> {
    let dt = array.data_type();
    let unsupported = || {
        Error::data(
            column,
            format!("has type {dt}, which cannot be read as exact numbers; set `type = \"categorical\"` on the attribute"),
        )
    };
    Ok(match dt {
        DataType::UInt64 => array
            .as_primitive::<UInt64Type>()
            .iter()
            .map(|v| v.map(|v| Number::int(i128::from(v))))
            .collect(),
        DataType::Int8
        | DataType::Int16
        | DataType::Int32
        | DataType::Int64
        | DataType::UInt8
        | DataType::UInt16
        | DataType::UInt32 => cast(array, &DataType::Int64)?
            .as_primitive::<Int64Type>()
            .iter()
            .map(|v| v.map(|v| Number::int(i128::from(v))))
            .collect(),
        DataType::Float16 | DataType::Float32 | DataType::Float64 => {
            cast(array, &DataType::Float64)?
                .as_primitive::<Float64Type>()
                .iter()
                .map(|v| v.map(Number::float))
                .collect()
        }
        DataType::Utf8 | DataType::LargeUtf8 | DataType::Utf8View => {
            let strings = cast(array, &DataType::Utf8)?;
            strings
                .as_string::<i32>()
                .iter()
                .map(|s| {
                    s.and_then(|s| {
                        let s = s.trim();
                        let n = match s.parse::<i128>() {
                            Ok(i) => Some(Number::int(i)),
                            Err(_) => s.parse::<f64>().ok().map(Number::float),
                        };
                        if n.is_none() {
                            *unparsable += 1;
                        }
                        n
                    })
                })
                .collect()
        }
        DataType::Decimal32(_, scale)
        | DataType::Decimal64(_, scale)
        | DataType::Decimal128(_, scale)
        | DataType::Decimal256(_, scale) => {
            let scale = *scale;
            let wide = cast(array, &DataType::Decimal128(38, scale)).map_err(|_| unsupported())?;
            let raw = wide.as_primitive::<arrow::datatypes::Decimal128Type>();
            let divisor = 10f64.powi(i32::from(scale));
            (0..raw.len())
                .map(|i| {
                    raw.is_valid(i).then(|| Number {
                        exact: Exact::Scaled(raw.value(i)),
                        value: raw.value(i) as f64 / divisor,
                    })
                })
                .collect()
        }
        dt if is_numeric_type(dt) => {
            let units = cast(array, &DataType::Int64).map_err(|_| unsupported())?;
            let units = units.as_primitive::<Int64Type>();
            (0..units.len())
                .map(|i| {
                    units.is_valid(i).then(|| Number {
                        exact: Exact::Scaled(i128::from(units.value(i))),
                        value: units.value(i) as f64,
                    })
                })
                .collect()
        }
        _ => return Err(unsupported()),
    })
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use arrow::array::{
        Date32Array, Decimal128Array, Float64Array, Int64Array, StringArray,
        TimestampMicrosecondArray, UInt64Array,
    };

    use super::*;

    fn labels(array: ArrayRef) -> Vec<Option<String>> {
        let mut bad = 0;
        let printed = printer(array.as_ref()).unwrap();
        numbers("x", &array, &mut bad)
            .unwrap()
            .into_iter()
            .enumerate()
            .map(|(i, n)| {
                n.map(|n| match &printed {
                    Some(p) => p.value(i).to_string(),
                    None => n.label(),
                })
            })
            .collect()
    }

    #[test]
    fn integers_beyond_2_pow_53_keep_their_identity_and_label() {
        let big = (1i64 << 60) + 1;
        let n = numbers(
            "x",
            &(Arc::new(Int64Array::from(vec![big, big + 2])) as ArrayRef),
            &mut 0,
        )
        .unwrap();
        let (a, b) = (n[0].unwrap(), n[1].unwrap());
        assert_ne!(a.exact, b.exact);
        assert_eq!(a.value, b.value, "the same f64, yet two values");
        assert_eq!(a.exact.cmp_with(a.value, &b.exact, b.value), Ordering::Less);
        assert_eq!(a.label(), big.to_string());
        assert_eq!(
            labels(Arc::new(UInt64Array::from(vec![u64::MAX]))),
            vec![Some(u64::MAX.to_string())]
        );
    }

    #[test]
    fn integral_floats_and_text_share_the_integer_key() {
        let f = numbers(
            "x",
            &(Arc::new(Float64Array::from(vec![5.0, -0.0, 2.5])) as ArrayRef),
            &mut 0,
        )
        .unwrap();
        let t = numbers(
            "x",
            &(Arc::new(StringArray::from(vec!["5", "0", "2.5"])) as ArrayRef),
            &mut 0,
        )
        .unwrap();
        assert_eq!(f, t);
        assert_eq!(f[2].as_ref().unwrap().label(), "2.5");
    }

    #[test]
    fn decimals_dates_and_timestamps_print_as_arrow_does() {
        let d = Decimal128Array::from(vec![Some(1234), None, Some(i128::MAX / 10)])
            .with_precision_and_scale(38, 2)
            .unwrap();
        let l = labels(Arc::new(d));
        assert_eq!(l[0].as_deref(), Some("12.34"));
        assert_eq!(l[1], None);
        assert!(l[2]
            .as_deref()
            .unwrap()
            .starts_with("170141183460469231731687303715884105"));
        assert_eq!(
            labels(Arc::new(Date32Array::from(vec![19358]))),
            vec![Some("2023-01-01".to_string())]
        );
        let ts = TimestampMicrosecondArray::from(vec![1_672_531_200_000_000]).with_timezone("UTC");
        let l = labels(Arc::new(ts));
        assert!(
            l[0].as_deref().unwrap().starts_with("2023-01-01T00:00:00"),
            "{l:?}"
        );
    }

    #[test]
    fn unparsable_text_is_counted() {
        let mut bad = 0;
        let n = numbers(
            "x",
            &(Arc::new(StringArray::from(vec![Some("1"), Some("x"), None])) as ArrayRef),
            &mut bad,
        )
        .unwrap();
        assert_eq!(bad, 1);
        assert_eq!(n[1], None);
    }
}
