//! Mondrian on small hand-made tables, and the property that every output
//! verifies and keeps every row and non-QI value.

use std::sync::Arc;

use arrow::array::{Array, ArrayRef, AsArray, Int64Array, RecordBatch, StringArray};
use arrow::datatypes::{DataType, Field, Int64Type, Schema};
use kanon_engine::encode::Encoder;
use kanon_engine::hierarchy::Hierarchy;
use kanon_engine::privacy::Privacy;
use kanon_engine::recode::Recoder;
use kanon_engine::spec::JobSpec;
use kanon_engine::verify::verify_release;
use kanon_engine::{anonymize, Error};
use proptest::prelude::*;
use rustc_hash::FxHashMap;

fn batch(age: Vec<i64>, zip: Vec<&str>, colour: Vec<&str>) -> RecordBatch {
    let id: Vec<i64> = (0..age.len() as i64).collect();
    let schema = Schema::new(vec![
        Field::new("id", DataType::Int64, false),
        Field::new("age", DataType::Int64, false),
        Field::new("zip", DataType::Utf8, false),
        Field::new("colour", DataType::Utf8, false),
    ]);
    RecordBatch::try_new(
        Arc::new(schema),
        vec![
            Arc::new(Int64Array::from(id)) as ArrayRef,
            Arc::new(Int64Array::from(age)),
            Arc::new(StringArray::from(zip)),
            Arc::new(StringArray::from(colour)),
        ],
    )
    .unwrap()
}

fn job(k: usize, extra: &str) -> JobSpec {
    serde_json::from_str(&format!(
        r#"{{"privacy": {{"k": {k}}}, "algorithm": {{"name": "mondrian"{extra}}}, "attributes": [
            {{"name": "age", "role": "qi"}},
            {{"name": "zip", "role": "qi", "masking": true}},
            {{"name": "colour", "role": "qi", "hierarchy": "colour.csv"}}]}}"#
    ))
    .unwrap()
}

fn hierarchies() -> FxHashMap<String, Arc<Hierarchy>> {
    let colours = "red;warm;*\norange;warm;*\nblue;cold;*\ngreen;cold;*\n";
    [(
        "colour.csv".to_string(),
        Arc::new(Hierarchy::from_csv("colour.csv", colours, ';').unwrap()),
    )]
    .into_iter()
    .collect()
}

/// Anonymises and recodes one batch; returns the release.
fn release(
    spec: &JobSpec,
    b: &RecordBatch,
) -> Result<(RecordBatch, kanon_engine::Anonymization), Error> {
    let h = hierarchies();
    let mut enc = Encoder::try_new(spec, &h, &b.schema())?;
    enc.push(b)?;
    let table = enc.finish()?;
    let result = anonymize(spec, &table)?;
    let out = Recoder::new(spec, &table, &result.partition).recode(b, 0)?;
    Ok((out, result))
}

fn labels(b: &RecordBatch, column: &str) -> Vec<String> {
    let a = arrow::compute::cast(b.column_by_name(column).unwrap(), &DataType::Utf8).unwrap();
    a.as_string::<i32>()
        .iter()
        .map(|s| s.unwrap().to_string())
        .collect()
}

#[test]
fn cuts_a_small_table_into_k_groups() {
    let b = batch(
        vec![21, 22, 23, 24, 61, 62, 63, 64],
        vec![
            "4350", "4351", "4350", "4351", "9870", "9871", "9870", "9871",
        ],
        vec![
            "red", "orange", "red", "orange", "blue", "green", "blue", "green",
        ],
    );
    let spec = job(2, "");
    let (out, result) = release(&spec, &b).unwrap();
    assert_eq!(out.num_rows(), 8);
    assert_eq!(result.report.smallest_class, 2);
    // The two obvious clusters are never mixed: young warm 435x, old cold 987x.
    let zips = labels(&out, "zip");
    let colours = labels(&out, "colour");
    for r in 0..4 {
        assert!(zips[r].starts_with("435"), "{zips:?}");
        assert!(
            ["red", "orange", "warm"].contains(&colours[r].as_str()),
            "{colours:?}"
        );
    }
    for r in 4..8 {
        assert!(zips[r].starts_with("987"), "{zips:?}");
        assert!(
            ["blue", "green", "cold"].contains(&colours[r].as_str()),
            "{colours:?}"
        );
    }
    // Ages are published as each group's own range.
    let ages = labels(&out, "age");
    assert!(
        ages.iter()
            .take(4)
            .all(|a| a.starts_with("[2") || a.starts_with("2")),
        "{ages:?}"
    );
}

#[test]
fn k_equal_to_rows_gives_one_group_and_larger_k_is_refused() {
    let b = batch(
        vec![1, 2, 3],
        vec!["1111", "1112", "1121"],
        vec!["red", "blue", "green"],
    );
    let (out, result) = release(&job(3, ""), &b).unwrap();
    assert_eq!(result.report.classes, 1);
    assert_eq!(labels(&out, "zip"), ["11**"; 3]);
    assert_eq!(labels(&out, "colour"), ["*"; 3]);
    assert_eq!(labels(&out, "age"), ["[1-3]"; 3]);
    let err = release(&job(4, ""), &b).unwrap_err();
    assert!(matches!(err, Error::Unsatisfiable(_)), "{err}");
    assert!(err.to_string().contains("needs at least 4 rows"), "{err}");
}

#[test]
fn widest_rule_and_strict_cuts_also_verify() {
    let b = batch(
        vec![30, 30, 30, 30, 30, 31],
        vec!["1000", "1000", "1000", "1000", "1000", "1000"],
        vec!["red", "red", "red", "red", "red", "red"],
    );
    // Strict: 5 rows of 30 and 1 of 31 cannot be cut with k = 3.
    let (_, strict) = release(&job(3, r#", "relaxed": false, "cut": "widest""#), &b).unwrap();
    assert_eq!(strict.report.classes, 1);
    // Relaxed: cut at the exact median, the value 30 spread over both parts.
    let (out, relaxed) = release(&job(3, r#", "relaxed": true"#), &b).unwrap();
    assert_eq!(relaxed.report.classes, 2);
    assert_eq!(relaxed.details["relaxed_cuts"], 1);
    assert_eq!(
        labels(&out, "age"),
        ["30", "30", "30", "[30-31]", "[30-31]", "[30-31]"]
    );
}

#[test]
fn unknown_parameter_is_a_spec_error() {
    let b = batch(vec![1, 2], vec!["1111", "1112"], vec!["red", "blue"]);
    let err = release(&job(2, r#", "cutt": "widest""#), &b).unwrap_err();
    assert!(err.to_string().contains("cutt"), "{err}");
}

fn arb_table() -> impl Strategy<Value = (Vec<i64>, Vec<String>, Vec<&'static str>)> {
    (1usize..60).prop_flat_map(|n| {
        (
            proptest::collection::vec(0i64..40, n),
            proptest::collection::vec((0u8..3, 0u8..4, 0u8..10), n).prop_map(|v| {
                v.into_iter()
                    .map(|(a, b, c)| format!("9{a}{b}{c}"))
                    .collect()
            }),
            proptest::collection::vec(
                proptest::sample::select(vec!["red", "orange", "blue", "green"]),
                n,
            ),
        )
    })
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(64))]

    /// Every Mondrian output verifies as k-anonymous, keeps every row in input
    /// order and leaves non-QI values untouched.
    #[test]
    fn mondrian_output_verifies_and_keeps_rows((age, zip, colour) in arb_table(), k_seed in 1usize..100, params in 0usize..4) {
        let n = age.len();
        let k = (1 + k_seed % n).max(2);
        prop_assume!(k <= n);
        let extra = [r#""#, r#", "cut": "widest""#, r#", "relaxed": false"#, r#", "numeric": "hierarchy""#][params];
        let spec = job(k, extra);
        let b = batch(age, zip.iter().map(|s| s.as_str()).collect(), colour);
        let (out, result) = release(&spec, &b).unwrap();
        prop_assert_eq!(out.num_rows(), n);
        prop_assert!(result.report.smallest_class >= k);
        let ids = out.column_by_name("id").unwrap().as_primitive::<Int64Type>();
        prop_assert_eq!(ids.values().to_vec(), (0..n as i64).collect::<Vec<_>>());
        prop_assert_eq!(ids.null_count(), 0);
        let v = verify_release(&spec, &[out], &Privacy::k_anonymity(k)).unwrap();
        prop_assert!(v.smallest_class >= k);
    }
}
