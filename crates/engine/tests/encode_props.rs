//! The encoder's property (issue 15, "exact values"): random Arrow columns
//! of every supported type, with nulls, NaN, infinities, integer extremes
//! and dictionaries holding unused values, encode so that every row's code
//! decodes (its label) to exactly the input value; null and NaN
//! quasi-identifiers are missing (suppressed rows under `nulls =
//! "suppress"`, the documented error otherwise); unused dictionary values
//! are not data.

use std::sync::Arc;

use arrow::array::{
    Array, ArrayRef, Date32Array, Decimal128Array, DictionaryArray, Float32Array, Float64Array,
    Int16Array, Int32Array, Int64Array, Int8Array, LargeStringArray, RecordBatch, StringArray,
    StringViewArray, TimestampMillisecondArray, UInt16Array, UInt32Array, UInt64Array, UInt8Array,
};
use arrow::datatypes::{Field, Int32Type, Schema};
use arrow::util::display::{ArrayFormatter, FormatOptions};
use kanon_engine::encode::Encoder;
use kanon_engine::spec::JobSpec;
use proptest::prelude::*;

/// A column of one supported type, as drawn.
#[derive(Debug, Clone)]
enum Column {
    I8(Vec<Option<i8>>),
    I16(Vec<Option<i16>>),
    I32(Vec<Option<i32>>),
    I64(Vec<Option<i64>>),
    U8(Vec<Option<u8>>),
    U16(Vec<Option<u16>>),
    U32(Vec<Option<u32>>),
    U64(Vec<Option<u64>>),
    F32(Vec<Option<f32>>),
    F64(Vec<Option<f64>>),
    Decimal(Vec<Option<i128>>),
    Date(Vec<Option<i32>>),
    Timestamp(Vec<Option<i64>>, &'static str),
    Utf8(Vec<Option<String>>),
    LargeUtf8(Vec<Option<String>>),
    Utf8View(Vec<Option<String>>),
    /// Dictionary values (some unused) and keys.
    Dictionary(Vec<Option<String>>, Vec<Option<i32>>),
}

fn nullable<T: std::fmt::Debug + Clone>(
    s: impl Strategy<Value = T>,
) -> impl Strategy<Value = Vec<Option<T>>> {
    prop::collection::vec(prop_oneof![8 => s.prop_map(Some), 1 => Just(None)], 1..40)
}

fn extreme_i64() -> impl Strategy<Value = i64> {
    prop_oneof![
        any::<i64>(),
        Just(i64::MIN),
        Just(i64::MAX),
        Just((1i64 << 60) + 1),
        Just((1i64 << 60) + 3),
        Just((1i64 << 53) + 1),
        -5i64..5,
    ]
}

fn float() -> impl Strategy<Value = f64> {
    prop_oneof![
        any::<f64>(),
        Just(f64::NAN),
        Just(f64::INFINITY),
        Just(f64::NEG_INFINITY),
        Just(-0.0),
        Just(2f64.powi(60)),
        Just(0.1),
        (-100i32..100).prop_map(f64::from),
    ]
}

fn text() -> impl Strategy<Value = String> {
    prop_oneof!["[a-c]{0,3}", "[ -~]{0,6}", Just("é中".to_string())]
}

fn column() -> impl Strategy<Value = Column> {
    prop_oneof![
        nullable(any::<i8>()).prop_map(Column::I8),
        nullable(any::<i16>()).prop_map(Column::I16),
        nullable(any::<i32>()).prop_map(Column::I32),
        nullable(extreme_i64()).prop_map(Column::I64),
        nullable(any::<u8>()).prop_map(Column::U8),
        nullable(any::<u16>()).prop_map(Column::U16),
        nullable(any::<u32>()).prop_map(Column::U32),
        nullable(prop_oneof![any::<u64>(), Just(u64::MAX), 0u64..3]).prop_map(Column::U64),
        nullable(any::<f32>()).prop_map(Column::F32),
        nullable(float()).prop_map(Column::F64),
        nullable(prop_oneof![
            -(10i128.pow(38) - 1)..10i128.pow(38),
            Just(10i128.pow(38) - 1)
        ])
        .prop_map(Column::Decimal),
        nullable(-100_000i32..100_000).prop_map(Column::Date),
        (
            nullable(-10_000_000_000_000i64..10_000_000_000_000),
            prop_oneof![Just("UTC"), Just("Europe/Paris"), Just("+05:30")]
        )
            .prop_map(|(v, tz)| Column::Timestamp(v, tz)),
        nullable(text()).prop_map(Column::Utf8),
        nullable(text()).prop_map(Column::LargeUtf8),
        nullable(text()).prop_map(Column::Utf8View),
        (prop::collection::vec(
            prop_oneof![4 => text().prop_map(Some), 1 => Just(None)],
            1..8
        ))
        .prop_flat_map(|values| {
            let n = values.len() as i32;
            (
                Just(values),
                prop::collection::vec(
                    prop_oneof![8 => (0..n).prop_map(Some), 1 => Just(None)],
                    1..40,
                ),
            )
        })
        .prop_map(|(v, k)| Column::Dictionary(v, k)),
    ]
}

fn array(c: &Column) -> ArrayRef {
    match c {
        Column::I8(v) => Arc::new(Int8Array::from(v.clone())),
        Column::I16(v) => Arc::new(Int16Array::from(v.clone())),
        Column::I32(v) => Arc::new(Int32Array::from(v.clone())),
        Column::I64(v) => Arc::new(Int64Array::from(v.clone())),
        Column::U8(v) => Arc::new(UInt8Array::from(v.clone())),
        Column::U16(v) => Arc::new(UInt16Array::from(v.clone())),
        Column::U32(v) => Arc::new(UInt32Array::from(v.clone())),
        Column::U64(v) => Arc::new(UInt64Array::from(v.clone())),
        Column::F32(v) => Arc::new(Float32Array::from(v.clone())),
        Column::F64(v) => Arc::new(Float64Array::from(v.clone())),
        Column::Decimal(v) => Arc::new(
            Decimal128Array::from(v.clone())
                .with_precision_and_scale(38, 3)
                .unwrap(),
        ),
        Column::Date(v) => Arc::new(Date32Array::from(v.clone())),
        Column::Timestamp(v, tz) => {
            Arc::new(TimestampMillisecondArray::from(v.clone()).with_timezone(*tz))
        }
        Column::Utf8(v) => Arc::new(StringArray::from(v.clone())),
        Column::LargeUtf8(v) => Arc::new(LargeStringArray::from(v.clone())),
        Column::Utf8View(v) => Arc::new(StringViewArray::from(v.clone())),
        Column::Dictionary(values, keys) => Arc::new(
            DictionaryArray::<Int32Type>::try_new(
                Int32Array::from(keys.clone()),
                Arc::new(StringArray::from(values.clone())),
            )
            .unwrap(),
        ),
    }
}

/// The exact value of row `i` as text, `None` when it is missing (null, a
/// key to a null dictionary value, or a NaN quasi-identifier).
fn expected(c: &Column, a: &ArrayRef, i: usize) -> Option<String> {
    if a.logical_nulls().is_some_and(|n| n.is_null(i)) {
        return None;
    }
    let f = |v: f64| -> Option<String> { (!v.is_nan()).then(|| float_text(v)) };
    match c {
        Column::F32(v) => f(f64::from(v[i]?)),
        Column::F64(v) => f(v[i]?),
        Column::U64(v) => Some(v[i]?.to_string()),
        Column::I64(v) => Some(v[i]?.to_string()),
        _ => Some(
            ArrayFormatter::try_new(a.as_ref(), &FormatOptions::default())
                .unwrap()
                .value(i)
                .to_string(),
        ),
    }
}

/// A float as the release prints it: integers without a fraction, any
/// other value in Rust's shortest round-trip form (never rounded).
fn float_text(v: f64) -> String {
    if v.fract() == 0.0 && v.abs() <= 2f64.powi(53) {
        format!("{}", v as i128)
    } else {
        format!("{v}")
    }
}

/// Whether a label decodes to the expected value exactly: the same text, or
/// for floats the same number (`1e300` and its digits are one value).
fn same_value(c: &Column, label: &str, expected: &str) -> bool {
    label == expected
        || matches!(c, Column::F64(_))
            && label.parse::<f64>().ok().map(f64::to_bits)
                == expected.parse::<f64>().ok().map(f64::to_bits)
        || matches!(c, Column::F32(_))
            && label.parse::<f32>().ok().map(f32::to_bits)
                == expected.parse::<f32>().ok().map(f32::to_bits)
}

fn job(kind: &str, nulls: &str) -> JobSpec {
    toml::from_str(&format!(
        "[privacy]\nk = 2\n[[attributes]]\nname = \"x\"\nrole = \"quasi-identifier\"\n{kind}nulls = \"{nulls}\"\n"
    ))
    .unwrap()
}

proptest! {
    #![proptest_config(ProptestConfig {
        cases: 512,
        failure_persistence: None,
        ..ProptestConfig::default()
    })]

    #[test]
    fn every_value_decodes_exactly(c in column(), categorical in any::<bool>()) {
        let a = array(&c);
        let batch = RecordBatch::try_new(
            Arc::new(Schema::new(vec![Field::new("x", a.data_type().clone(), true)])),
            vec![a.clone()],
        )
        .unwrap();
        let kind = if categorical { "type = \"categorical\"\n" } else { "" };
        let expected: Vec<Option<String>> = (0..a.len()).map(|i| expected(&c, &a, i)).collect();
        let missing = expected.iter().filter(|e| e.is_none()).count();

        // nulls = "error": missing values are the documented error, naming
        // the column and the count, never a value.
        let mut enc = Encoder::try_new(&job(kind, "error"), &Default::default(), &batch.schema()).unwrap();
        let strict = enc.push(&batch).and_then(|()| enc.finish());
        if missing > 0 {
            let e = strict.unwrap_err().to_string();
            prop_assert!(e.contains("`x`") && e.contains(&format!("{missing} rows are null")), "{}", e);
        } else {
            prop_assert!(strict.is_ok(), "{:?}", strict.err());
        }

        // nulls = "suppress": missing rows are excluded, every other row's
        // code is its exact value.
        let mut enc = Encoder::try_new(&job(kind, "suppress"), &Default::default(), &batch.schema()).unwrap();
        enc.push(&batch).unwrap();
        let table = enc.finish().unwrap();
        let col = &table.columns()[0];
        let excluded: Vec<u32> = (0..a.len() as u32).filter(|&i| expected[i as usize].is_none()).collect();
        prop_assert_eq!(table.excluded(), excluded.as_slice());
        let mut used = std::collections::BTreeSet::new();
        for (i, e) in expected.iter().enumerate() {
            if let Some(e) = e {
                let code = col.codes().get(i);
                used.insert(code);
                let label = col.label(code);
                prop_assert!(same_value(&c, label, e), "row {}: {:?} published as {:?}", i, e, label);
            }
        }
        // Distinct values are distinct codes; no code is a value no row holds.
        let distinct: std::collections::BTreeSet<&String> = expected.iter().flatten().collect();
        prop_assert_eq!(used.len(), distinct.len());
        prop_assert_eq!(col.distinct(), distinct.len());
    }
}
