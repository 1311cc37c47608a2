//! Tests of the generated table: its schema, its determinism, the
//! sampled Adult columns and the extra columns.

use std::collections::HashSet;

use arrow::array::{Array, ArrayRef, AsArray, RecordBatch};
use arrow::datatypes::{DataType, Int64Type, TimeUnit};
use parquet::arrow::arrow_reader::ParquetRecordBatchReaderBuilder;

use super::extras::{LOW_CARDINALITY, TIMESTAMP_FROM_S, TIMESTAMP_SPAN_S};
use super::model::Model;
use super::sampling::ADULT_PARQUET;
use super::{Like, CHUNK_ROWS};

pub(super) fn adult() -> Vec<RecordBatch> {
    ParquetRecordBatchReaderBuilder::try_new(bytes::Bytes::from_static(ADULT_PARQUET))
        .unwrap()
        .build()
        .unwrap()
        .collect::<Result<Vec<_>, _>>()
        .unwrap()
}

pub(super) fn rows(model: &Model, n: u64) -> Vec<RecordBatch> {
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
    assert_eq!(m.source.records, 30_162);
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
    let mut seen = HashSet::new();
    for b in batches {
        let cols: Vec<ArrayRef> = columns
            .iter()
            .map(|c| arrow::compute::cast(b.column_by_name(c).unwrap(), &DataType::Utf8).unwrap())
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
    let mut known = HashSet::new();
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

#[test]
fn extras_have_their_nulls_and_ranges() {
    let m = Model::new(Like::Adult, 2, 0.02, 12).unwrap();
    let batches = rows(&m, 100_000);
    for i in 0..12 {
        let name = format!("extra_{i}");
        let nulls: usize = batches
            .iter()
            .map(|b| b.column_by_name(&name).unwrap().null_count())
            .sum();
        let expected = [0.0, 0.01, 0.1][i % 3] * 100_000.0;
        assert!(
            (nulls as f64 - expected).abs() <= 0.1 * expected + 1.0,
            "{name}: {nulls} nulls, expected about {expected}"
        );
    }
    let b = &batches[0];
    let distinct = |name: &str| {
        let c = b.column_by_name(name).unwrap().as_string::<i32>();
        c.iter().flatten().collect::<HashSet<_>>().len()
    };
    assert!(distinct("extra_2") <= LOW_CARDINALITY);
    assert!(distinct("extra_6") > 60_000);
    let ts = b.column_by_name("extra_3").unwrap();
    let ts = ts.as_primitive::<arrow::datatypes::TimestampMicrosecondType>();
    assert!(ts.iter().flatten().all(|t| {
        (TIMESTAMP_FROM_S * 1_000_000..(TIMESTAMP_FROM_S + TIMESTAMP_SPAN_S) * 1_000_000)
            .contains(&t)
    }));
}
