//! Issue 15, "exact values": a release never holds a value the input did
//! not, dictionary nulls are nulls, unused dictionary values are not data.

mod common;

use std::sync::Arc;

use arrow::array::{ArrayRef, DictionaryArray, Int64Array, RecordBatch, StringArray, UInt64Array};
use arrow::datatypes::{Field, Int32Type, Schema};
use kanon_engine::encode::Encoder;
use kanon_engine::spec::JobSpec;

fn job(extra: &str) -> JobSpec {
    toml::from_str(&format!(
        "[privacy]\nk = 2\n[[attributes]]\nname = \"x\"\nrole = \"quasi-identifier\"\n{extra}"
    ))
    .unwrap()
}

fn one_column(array: ArrayRef) -> RecordBatch {
    RecordBatch::try_new(
        Arc::new(Schema::new(vec![Field::new(
            "x",
            array.data_type().clone(),
            true,
        )])),
        vec![array],
    )
    .unwrap()
}

fn encode(
    spec: &JobSpec,
    batch: &RecordBatch,
) -> kanon_engine::Result<kanon_engine::encode::QiTable> {
    let mut e = Encoder::try_new(spec, &Default::default(), &batch.schema())?;
    e.push(batch)?;
    e.finish()
}

#[test]
fn integers_beyond_2_pow_53_are_exact_values() {
    let big = (1i64 << 60) + 1;
    let batch = one_column(Arc::new(Int64Array::from(vec![big, big + 2, big, big + 2])));
    // As numbers: two values (one f64), printed exactly, and a published
    // range of exactly the input's bounds.
    let t = encode(&job(""), &batch).unwrap();
    let col = &t.columns()[0];
    let labels: Vec<&str> = (0..col.domain_size() as u32)
        .map(|c| col.label(c))
        .collect();
    assert_eq!(labels, [big.to_string(), (big + 2).to_string()]);
    let range = kanon_engine::generalise::Cell::Range { lo: 0, hi: 1 };
    assert_eq!(
        col.cell_label(&range),
        format!("[{}-{}]", big, big + 2),
        "never 1152921504606847000"
    );
    let u = one_column(Arc::new(UInt64Array::from(vec![u64::MAX, u64::MAX - 1])));
    let t = encode(&job(""), &u).unwrap();
    let col = &t.columns()[0];
    assert_eq!(col.label(0), (u64::MAX - 1).to_string());
    assert_eq!(col.label(1), u64::MAX.to_string());
    // Categorical: exact too.
    let t = encode(&job("type = \"categorical\""), &batch).unwrap();
    let col = &t.columns()[0];
    assert!((0..col.domain_size() as u32).any(|c| col.label(c) == big.to_string()));
    // Intervals cannot have exact bounds there: a clear error, no value.
    let err = encode(&job("intervals = [10]"), &batch)
        .unwrap_err()
        .to_string();
    assert!(err.contains("2^53") && err.contains("`x`"), "{err}");
    assert!(!err.contains(&big.to_string()), "{err}");
}

#[test]
fn dictionary_nulls_are_nulls_and_unused_values_are_not_data() {
    // Values: "a", "b", null, "unused"; keys use a, b and the null value.
    let values = StringArray::from(vec![Some("a"), Some("b"), None, Some("unused")]);
    let keys =
        arrow::array::Int32Array::from(vec![Some(0), Some(1), Some(2), None, Some(0), Some(1)]);
    let dict = DictionaryArray::<Int32Type>::try_new(keys, Arc::new(values)).unwrap();
    let batch = one_column(Arc::new(dict));
    // Two null rows (a null key, a key to a null value): an error by default ...
    let err = encode(&job(""), &batch).unwrap_err().to_string();
    assert!(err.contains("2 rows are null"), "{err}");
    // ... or both suppressed, never code 0 ("a").
    let t = encode(&job("nulls = \"suppress\""), &batch).unwrap();
    assert_eq!(t.excluded(), &[2, 3]);
    let col = &t.columns()[0];
    let labels: Vec<&str> = (0..col.domain_size() as u32)
        .map(|c| col.label(c))
        .collect();
    assert!(!labels.contains(&"unused"), "{labels:?}");
    assert_eq!(col.distinct(), 2);
}

#[test]
fn float_quasi_identifiers_work_with_hierarchy_files() {
    let hierarchy = kanon_engine::hierarchy::Hierarchy::from_csv(
        "score.csv",
        "1;low;*\n2.5;low;*\n40;high;*\n",
        ';',
    )
    .unwrap();
    let mut hierarchies = rustc_hash::FxHashMap::default();
    hierarchies.insert("score.csv".to_string(), Arc::new(hierarchy));
    let batch = one_column(Arc::new(arrow::array::Float64Array::from(vec![
        1.0, 2.5, 40.0, 1.0,
    ])));
    let spec = job("hierarchy = \"score.csv\"");
    let mut e = Encoder::try_new(&spec, &hierarchies, &batch.schema()).unwrap();
    e.push(&batch).unwrap();
    let t = e.finish().unwrap();
    let col = &t.columns()[0];
    let published: Vec<&str> = (0..4).map(|r| col.label(col.codes().get(r))).collect();
    assert_eq!(published, ["1", "2.5", "40", "1"]);
    // A hierarchy written as Arrow prints floats (`1.0`) matches too.
    let arrow_text = kanon_engine::hierarchy::Hierarchy::from_csv(
        "score.csv",
        "1.0;low;*\n2.5;low;*\n40.0;high;*\n",
        ';',
    )
    .unwrap();
    hierarchies.insert("score.csv".to_string(), Arc::new(arrow_text));
    let mut e = Encoder::try_new(&spec, &hierarchies, &batch.schema()).unwrap();
    e.push(&batch).unwrap();
    let t = e.finish().unwrap();
    let col = &t.columns()[0];
    let published: Vec<&str> = (0..4).map(|r| col.label(col.codes().get(r))).collect();
    assert_eq!(published, ["1.0", "2.5", "40.0", "1.0"]);
}
