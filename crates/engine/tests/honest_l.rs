//! Issue 15, "honest l": missing sensitive values (NULL, NaN, "") do not
//! count toward l unless the job says they are a value of their own. The
//! release is checked by an oracle written here: classes from the published
//! QI labels, l from the real (non-missing) values of each class.

mod common;

use std::collections::{HashMap, HashSet};
use std::sync::Arc;

use arrow::array::{Array, ArrayRef, AsArray, RecordBatch, StringArray};
use arrow::compute::cast;
use arrow::datatypes::{DataType, Field, Schema};
use kanon_engine::recode::Recoder;
use kanon_engine::spec::MissingSensitive;
use kanon_engine::{anonymize, Error};

/// The first `n` Adult rows with `salary-class` set to NULL on 40 % of them
/// (rows 0 and 1 of every 5).
fn adult_with_missing_salary(n: usize) -> RecordBatch {
    let batches = common::first_rows(common::adult_batches(), n);
    let batch = arrow::compute::concat_batches(&batches[0].schema(), &batches).unwrap();
    let schema = batch.schema();
    let mut fields = Vec::new();
    let mut cols: Vec<ArrayRef> = Vec::new();
    for (f, c) in schema.fields().iter().zip(batch.columns()) {
        if f.name() == "salary-class" {
            let s = cast(c, &DataType::Utf8).unwrap();
            let s = s.as_string::<i32>();
            let with_nulls: StringArray = (0..s.len())
                .map(|i| (i % 5 >= 2).then(|| s.value(i).to_string()))
                .collect();
            fields.push(Field::new(f.name(), DataType::Utf8, true));
            cols.push(Arc::new(with_nulls));
        } else {
            fields.push(f.as_ref().clone());
            cols.push(c.clone());
        }
    }
    RecordBatch::try_new(Arc::new(Schema::new(fields)), cols).unwrap()
}

/// The oracle: the smallest number of distinct non-missing sensitive values
/// over the published classes (classes = rows with equal published QI
/// labels), and the number of published rows.
fn oracle_min_l(release: &RecordBatch, qis: &[String], sensitive: &str) -> (usize, usize) {
    let labels: Vec<ArrayRef> = qis
        .iter()
        .map(|q| cast(release.column_by_name(q).unwrap(), &DataType::Utf8).unwrap())
        .collect();
    let s = cast(release.column_by_name(sensitive).unwrap(), &DataType::Utf8).unwrap();
    let s = s.as_string::<i32>();
    let mut classes: HashMap<Vec<String>, HashSet<String>> = HashMap::new();
    for row in 0..release.num_rows() {
        let key: Vec<String> = labels
            .iter()
            .map(|a| a.as_string::<i32>().value(row).to_string())
            .collect();
        let values = classes.entry(key).or_default();
        if s.is_valid(row) && !s.value(row).trim().is_empty() {
            values.insert(s.value(row).to_string());
        }
    }
    (
        classes.values().map(HashSet::len).min().unwrap_or(0),
        release.num_rows(),
    )
}

#[test]
fn missing_sensitive_values_do_not_count_toward_l() {
    let batch = adult_with_missing_salary(4000);
    let (mut spec, hierarchies) = common::adult_job(&[]);
    spec.privacy.k = 2;
    spec.privacy.l = Some(2);
    let qis: Vec<String> = spec.quasi_identifiers().map(|a| a.name.clone()).collect();
    for algorithm in ["mondrian", "kaca", "l-clustering", "datafly", "incognito"] {
        spec.algorithm.name = algorithm.into();
        let table = common::encode(&spec, &hierarchies, std::slice::from_ref(&batch));
        match anonymize(&spec, &table) {
            Ok(result) => {
                let release = Recoder::new(&spec, &table, &result.partition)
                    .recode(&batch, 0)
                    .unwrap();
                let (l, rows) = oracle_min_l(&release, &qis, "salary-class");
                eprintln!("{algorithm}: published {rows}, min l {l}");
                assert!(rows > 0, "{algorithm}: empty release");
                assert!(
                    l >= 2,
                    "{algorithm}: a published class has l = {l} real values"
                );
                assert!(result.report.sensitive[0].distinct_l >= 2, "{algorithm}");
                assert_eq!(
                    rows + result.report.suppressed_rows,
                    batch.num_rows(),
                    "{algorithm}: every row published or counted as suppressed"
                );
            }
            Err(e) => {
                eprintln!("{algorithm}: {e}");
                assert!(matches!(e, Error::Unsatisfiable(_)), "{algorithm}: {e}")
            }
        }
    }
}

/// A column with one real value and NULLs can never be 2-diverse when
/// missing values are ignored; counted as a value of their own, it can.
#[test]
fn missing_as_a_value_is_an_explicit_choice() {
    let (mut spec, hierarchies) = common::adult_job(&[]);
    spec.privacy.k = 2;
    spec.privacy.l = Some(2);
    let batch = adult_with_missing_salary(2000);
    let only_one: StringArray = (0..batch.num_rows())
        .map(|i| (i % 2 == 0).then_some(">50K"))
        .collect();
    let idx = batch.schema().index_of("salary-class").unwrap();
    let mut cols = batch.columns().to_vec();
    cols[idx] = Arc::new(only_one);
    let batch = RecordBatch::try_new(batch.schema(), cols).unwrap();
    let table = common::encode(&spec, &hierarchies, std::slice::from_ref(&batch));
    let err = anonymize(&spec, &table).unwrap_err();
    assert!(matches!(err, Error::Unsatisfiable(_)), "{err}");
    assert!(err.to_string().contains("missing_sensitive"), "{err}");
    assert!(
        !err.to_string().contains(">50K"),
        "no value in errors: {err}"
    );

    spec.privacy.missing_sensitive = MissingSensitive::Value;
    let table = common::encode(&spec, &hierarchies, std::slice::from_ref(&batch));
    let result = anonymize(&spec, &table).unwrap();
    assert!(result.report.sensitive[0].distinct_l >= 2);
}

/// NaN and empty strings are missing too.
#[test]
fn nan_and_empty_strings_are_missing() {
    let spec: kanon_engine::spec::JobSpec = toml::from_str(
        r#"
        [privacy]
        k = 2
        l = 2
        [[attributes]]
        name = "age"
        role = "quasi-identifier"
        [[attributes]]
        name = "score"
        role = "sensitive"
        [[attributes]]
        name = "note"
        role = "sensitive"
        "#,
    )
    .unwrap();
    let batch = RecordBatch::try_new(
        Arc::new(Schema::new(vec![
            Field::new("age", DataType::Int64, false),
            Field::new("score", DataType::Float64, true),
            Field::new("note", DataType::Utf8, true),
        ])),
        vec![
            Arc::new(arrow::array::Int64Array::from(vec![30, 31, 32, 33])),
            Arc::new(arrow::array::Float64Array::from(vec![
                1.0,
                f64::NAN,
                2.0,
                f64::NAN,
            ])),
            Arc::new(StringArray::from(vec![
                Some("a"),
                Some(""),
                None,
                Some("b"),
            ])),
        ],
    )
    .unwrap();
    let table = common::encode(&spec, &Default::default(), &[batch]);
    // Two real scores and two real notes in the whole table: only one class
    // of all four rows is 2-diverse in both.
    let result = anonymize(&spec, &table).unwrap();
    assert_eq!(result.report.classes, 1);
    for s in &result.report.sensitive {
        assert_eq!(s.distinct_l, 2, "{}", s.name);
    }
}

/// `kanon verify` and the second check of every run read the published
/// labels: NaN, NULL and blank sensitive values are missing there too, so
/// a tampered release that relies on them for l is refused.
#[test]
fn the_label_verifier_does_not_count_missing_values() {
    let spec: kanon_engine::spec::JobSpec = toml::from_str(
        r#"
        [privacy]
        k = 2
        l = 2
        [[attributes]]
        name = "age"
        role = "quasi-identifier"
        [[attributes]]
        name = "score"
        role = "sensitive"
        [[attributes]]
        name = "note"
        role = "sensitive"
        "#,
    )
    .unwrap();
    let privacy = kanon_engine::privacy::Privacy::from_spec(&spec).unwrap();
    let release = |scores: Vec<f64>, notes: Vec<Option<&str>>| {
        RecordBatch::try_new(
            Arc::new(Schema::new(vec![
                Field::new("age", DataType::Utf8, false),
                Field::new("score", DataType::Float64, true),
                Field::new("note", DataType::Utf8, true),
            ])),
            vec![
                Arc::new(StringArray::from(vec!["[30-33]"; scores.len()])),
                Arc::new(arrow::array::Float64Array::from(scores)),
                Arc::new(StringArray::from(notes)),
            ],
        )
        .unwrap()
    };
    let honest = release(vec![1.0, 2.0], vec![Some("a"), Some("b")]);
    kanon_engine::verify::verify_release(&spec, &[honest], &privacy).unwrap();
    for tampered in [
        release(vec![1.0, f64::NAN], vec![Some("a"), Some("b")]),
        release(vec![1.0, 2.0], vec![Some("a"), None]),
        release(vec![1.0, 2.0], vec![Some("a"), Some(" ")]),
    ] {
        let err = kanon_engine::verify::verify_release(&spec, &[tampered], &privacy).unwrap_err();
        assert!(matches!(err, Error::VerificationFailed(_)), "{err}");
    }
}

/// Issue 32, item 7: placeholders (`NULL`, `N/A`, `?`, blank) are missing,
/// and `Cancer`, `cancer`, `Cancer ` are one value, so a table where every
/// patient has cancer cannot be made 2-diverse (it was "3-diverse"). With
/// `missing_sensitive = "value"` every missing form is one value: still
/// only two values. A job that lists its own placeholders (`[]`) counts
/// `N/A` as a value.
#[test]
fn placeholders_and_spellings_are_not_diversity() {
    let (mut spec, hierarchies) = common::adult_job(&[]);
    spec.privacy.k = 2;
    spec.privacy.l = Some(2);
    let batch = adult_with_missing_salary(2000);
    let spellings = [
        "Cancer", "cancer", "Cancer ", " CANCER", "N/A", "?", "NULL", "",
    ];
    let diagnosis: StringArray = (0..batch.num_rows())
        .map(|i| Some(spellings[i % spellings.len()]))
        .collect();
    let idx = batch.schema().index_of("salary-class").unwrap();
    let mut cols = batch.columns().to_vec();
    cols[idx] = Arc::new(diagnosis);
    let batch = RecordBatch::try_new(batch.schema(), cols).unwrap();
    let table = common::encode(&spec, &hierarchies, std::slice::from_ref(&batch));
    assert_eq!(table.sensitive()[0].case_or_space_variants(), 3);
    let err = anonymize(&spec, &table).unwrap_err();
    assert!(matches!(err, Error::Unsatisfiable(_)), "{err}");
    assert!(
        !err.to_string().contains("ancer"),
        "no value in errors: {err}"
    );

    spec.privacy.l = Some(3);
    spec.privacy.missing_sensitive = MissingSensitive::Value;
    let table = common::encode(&spec, &hierarchies, std::slice::from_ref(&batch));
    let err = anonymize(&spec, &table).unwrap_err();
    assert!(matches!(err, Error::Unsatisfiable(_)), "{err}");

    spec.privacy.l = Some(2);
    spec.privacy.missing_sensitive = MissingSensitive::Ignore;
    spec.privacy.missing_values = Some(vec![]);
    let table = common::encode(&spec, &hierarchies, std::slice::from_ref(&batch));
    let result = anonymize(&spec, &table).unwrap();
    assert!(result.report.sensitive[0].distinct_l >= 2);
}
