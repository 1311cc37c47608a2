//! Transformations beyond generalisation (issue 36): top and bottom coding,
//! microaggregation and cell-level local suppression. Each release of
//! Adult rows is made through the release path (both verifiers) and checked
//! here against the input through a pass-through `id` column: what every
//! record publishes, computed independently of the engine.

mod common;

use std::collections::HashMap;
use std::sync::Arc;

use arrow::array::{ArrayRef, AsArray, Float64Array, Int64Array, RecordBatch};
use arrow::datatypes::{DataType, Field, Int64Type, Schema};
use kanon_engine::spec::JobSpec;
use kanon_engine::Error;

/// The first `rows` Adult rows with an `id` (row number) and a float
/// `income` derived from age and row number (a second numeric column to
/// code: Adult has no other).
fn adult(rows: usize) -> RecordBatch {
    let batches = common::first_rows(common::adult_batches(), rows);
    let b = arrow::compute::concat_batches(&batches[0].schema(), &batches).unwrap();
    let age = arrow::compute::cast(b.column_by_name("age").unwrap(), &DataType::Float64).unwrap();
    let age = age.as_primitive::<arrow::datatypes::Float64Type>();
    let n = b.num_rows();
    let income: Float64Array = (0..n)
        .map(|i| Some(age.value(i) * 1000.0 + ((i * 7919) % 5000) as f64 + 0.25))
        .collect();
    let mut fields: Vec<Field> = b
        .schema()
        .fields()
        .iter()
        .map(|f| f.as_ref().clone())
        .collect();
    fields.push(Field::new("id", DataType::Int64, false));
    fields.push(Field::new("income", DataType::Float64, false));
    let mut columns: Vec<ArrayRef> = b.columns().to_vec();
    columns.push(Arc::new(Int64Array::from_iter_values(0..n as i64)));
    columns.push(Arc::new(income));
    RecordBatch::try_new(Arc::new(Schema::new(fields)), columns).unwrap()
}

/// A bundled job file with `id` and `income` listed as insensitive
/// (`income` with `income` as its extra TOML), run by `algorithm`.
fn job(config: &str, algorithm: &str, income: &str) -> JobSpec {
    let mut spec = common::config(config);
    let extra: JobSpec = toml::from_str(&format!(
        "[[attributes]]\nname = \"id\"\nrole = \"insensitive\"\n[[attributes]]\nname = \"income\"\nrole = \"insensitive\"\n{income}\n"
    ))
    .unwrap();
    spec.attributes.extend(extra.attributes);
    spec.algorithm.name = algorithm.into();
    spec.algorithm.params.clear();
    spec
}

/// The attribute `name` of `spec`, to change one setting.
fn attribute<'a>(spec: &'a mut JobSpec, name: &str) -> &'a mut kanon_engine::spec::AttributeSpec {
    spec.attributes.iter_mut().find(|a| a.name == name).unwrap()
}

fn release(spec: &JobSpec, input: &RecordBatch) -> kanon_engine::Result<(RecordBatch, usize)> {
    let hierarchies = common::load_hierarchies(spec);
    common::release(spec, &hierarchies, input, 1000)
}

/// The report (the certificate's figures) of the job on `input`.
fn report_of(spec: &JobSpec, input: &RecordBatch) -> kanon_engine::metrics::Report {
    let hierarchies = common::load_hierarchies(spec);
    let table = common::encode(spec, &hierarchies, std::slice::from_ref(input));
    kanon_engine::anonymize(spec, &table).unwrap().report
}

fn ints(batch: &RecordBatch, name: &str) -> Vec<i64> {
    let col = arrow::compute::cast(batch.column_by_name(name).unwrap(), &DataType::Int64).unwrap();
    col.as_primitive::<Int64Type>().values().to_vec()
}

fn floats(batch: &RecordBatch, name: &str) -> Vec<f64> {
    let col =
        arrow::compute::cast(batch.column_by_name(name).unwrap(), &DataType::Float64).unwrap();
    col.as_primitive::<arrow::datatypes::Float64Type>()
        .values()
        .to_vec()
}

/// The numbers a label shows (`[25-29]`, `>=80`, `<25`, `42`, `{a,b}`).
fn numbers(label: &str) -> Vec<f64> {
    label
        .split(|c: char| !(c.is_ascii_digit() || c == '.'))
        .filter_map(|t| t.parse().ok())
        .collect()
}

/// Whether `age` (already coded) lies in the set of ages `label` stands
/// for: `*`, `>=a`, `<=a`, `<a`, `[a-b]`, `[a-b)`, `{..}` or a value.
fn covers(label: &str, age: f64) -> bool {
    let n = numbers(label);
    if label == "*" {
        true
    } else if let Some(rest) = label.strip_prefix(">=") {
        age >= rest.parse::<f64>().unwrap()
    } else if let Some(rest) = label.strip_prefix("<=") {
        age <= rest.parse::<f64>().unwrap()
    } else if let Some(rest) = label.strip_prefix('<') {
        age < rest.parse::<f64>().unwrap()
    } else if label.starts_with('[') && label.ends_with(')') {
        n[0] <= age && age < n[1]
    } else if label.starts_with('[') {
        n[0] <= age && age <= n[1]
    } else {
        n == vec![age]
    }
}

#[test]
fn top_and_bottom_coding_hold_for_every_algorithm_and_record() {
    let input = adult(2500);
    let ages = ints(&input, "age");
    let incomes = floats(&input, "income");
    for algorithm in ["cover", "mondrian", "datafly", "incognito", "mdav"] {
        let spec = job(
            "adult-top-bottom-coding.toml",
            algorithm,
            "top_code = 60000.5\nbottom_code = 25000",
        );
        let (out, suppressed) = release(&spec, &input).unwrap();
        assert_eq!(out.num_rows() + suppressed, input.num_rows(), "{algorithm}");
        let ids = ints(&out, "id");
        let labels = common::strings(&out, "age");
        let published = floats(&out, "income");
        let mut coded_top = 0;
        for ((&id, label), &income) in ids.iter().zip(&labels).zip(&published) {
            let age = ages[id as usize] as f64;
            let coded = age.clamp(20.0, 80.0);
            assert!(
                covers(label, coded),
                "{algorithm}: age {age} under `{label}`"
            );
            assert!(
                numbers(label).iter().all(|&v| (20.0..=80.0).contains(&v)),
                "{algorithm}: `{label}` shows an age beyond the codes"
            );
            if age >= 80.0 {
                coded_top += 1;
                assert!(
                    label.starts_with(">=") || label == "*",
                    "{algorithm}: a coded age of 80 or more published as `{label}`"
                );
            }
            if age <= 20.0 {
                assert!(
                    label.starts_with('<') || label == "*",
                    "{algorithm}: a coded age of 20 or less published as `{label}`"
                );
            }
            assert_eq!(
                income,
                incomes[id as usize].clamp(25000.0, 60000.5),
                "{algorithm}: income coded"
            );
        }
        assert!(coded_top > 0, "the sample holds ages of 80 or more");
    }
}

#[test]
fn a_release_that_was_not_coded_fails_verification() {
    let input = adult(1500);
    let spec = job("adult-top-bottom-coding.toml", "cover", "top_code = 60000");
    let (out, _) = release(&spec, &input).unwrap();
    let privacy = kanon_engine::privacy::Privacy::from_spec(&spec).unwrap();
    kanon_engine::verify::verify_release(&spec, std::slice::from_ref(&out), &privacy).unwrap();
    // The raw incomes back in place of the coded ones.
    let raw = arrow::compute::take(
        input.column_by_name("income").unwrap(),
        &arrow::compute::cast(out.column_by_name("id").unwrap(), &DataType::UInt32)
            .unwrap()
            .as_primitive::<arrow::datatypes::UInt32Type>()
            .clone(),
        None,
    )
    .unwrap();
    let i = out.schema().index_of("income").unwrap();
    let mut columns = out.columns().to_vec();
    columns[i] = raw;
    let tampered = RecordBatch::try_new(out.schema(), columns).unwrap();
    let err = kanon_engine::verify::verify_release(&spec, &[tampered], &privacy).unwrap_err();
    assert!(
        matches!(err, Error::VerificationFailed(_)) && err.to_string().contains("`income`"),
        "{err}"
    );
    assert!(
        !err.to_string().contains("60000.25"),
        "no value in the message: {err}"
    );
}

#[test]
fn microaggregated_classes_publish_the_aggregate_of_their_records() {
    let input = adult(2500);
    let ages = ints(&input, "age");
    for algorithm in ["cover", "mondrian", "datafly", "mdav"] {
        for function in ["mean", "interval", "set"] {
            let mut spec = job("adult-microaggregation.toml", algorithm, "");
            let age = attribute(&mut spec, "age");
            age.microaggregation = Some(serde_json::from_value(function.into()).unwrap());
            let (out, _) = release(&spec, &input).unwrap();
            // Classes by the published labels of every QI.
            let qis: Vec<Vec<String>> = spec
                .quasi_identifiers()
                .map(|a| common::strings(&out, &a.name))
                .collect();
            let mut classes: HashMap<Vec<&str>, Vec<i64>> = HashMap::new();
            for (r, id) in ints(&out, "id").into_iter().enumerate() {
                classes
                    .entry(qis.iter().map(|q| q[r].as_str()).collect())
                    .or_default()
                    .push(ages[id as usize]);
            }
            // The certificate states the classes the labels form.
            let report = report_of(&spec, &input);
            assert_eq!(
                (report.classes, report.smallest_class),
                (classes.len(), classes.values().map(Vec::len).min().unwrap()),
                "{algorithm}/{function}: the report counts the published classes"
            );
            let at = spec
                .quasi_identifiers()
                .position(|a| a.name == "age")
                .unwrap();
            for (labels, members) in &classes {
                assert!(
                    members.len() >= 10,
                    "{algorithm}/{function}: a class of {}",
                    members.len()
                );
                let label = labels[at];
                let (min, max) = (members.iter().min().unwrap(), members.iter().max().unwrap());
                let expected = match function {
                    "mean" => {
                        let mean = members.iter().sum::<i64>() as f64 / members.len() as f64;
                        kanon_engine::encode::format_number((mean * 1e4).round() / 1e4)
                    }
                    "interval" if min == max => min.to_string(),
                    "interval" => format!("[{min}-{max}]"),
                    _ => {
                        let mut distinct = members.clone();
                        distinct.sort_unstable();
                        distinct.dedup();
                        match distinct.len() {
                            1 => distinct[0].to_string(),
                            _ => format!(
                                "{{{}}}",
                                distinct
                                    .iter()
                                    .map(i64::to_string)
                                    .collect::<Vec<_>>()
                                    .join(",")
                            ),
                        }
                    }
                };
                assert_eq!(label, expected, "{algorithm}/{function}");
            }
        }
    }
}

#[test]
fn cell_suppression_keeps_every_record_and_every_class_of_k() {
    let input = adult(3000);
    for algorithm in ["datafly", "incognito"] {
        let mut spec = job("adult-cell-suppression.toml", algorithm, "");
        spec.privacy.suppression_limit = Some(0.05);
        // Rows, as the job would without cell suppression.
        let (rows_out, rows_suppressed) = release(&spec, &input).unwrap();
        assert!(rows_suppressed > 0, "{algorithm}: the job suppresses rows");
        assert_eq!(rows_out.num_rows() + rows_suppressed, input.num_rows());
        spec.algorithm
            .params
            .insert("cell_suppression".into(), true.into());
        let (out, suppressed) = release(&spec, &input).unwrap();
        assert_eq!(suppressed, 0, "{algorithm}: no record is suppressed");
        assert_eq!(out.num_rows(), input.num_rows());
        let qis: Vec<Vec<String>> = spec
            .quasi_identifiers()
            .map(|a| common::strings(&out, &a.name))
            .collect();
        let mut sizes: HashMap<Vec<&str>, usize> = HashMap::new();
        for r in 0..out.num_rows() {
            *sizes
                .entry(qis.iter().map(|q| q[r].as_str()).collect())
                .or_default() += 1;
        }
        assert!(sizes.values().all(|&s| s >= 10), "{algorithm}: {sizes:?}");
        // The certificate states the classes the labels form (a suppressed
        // cell's `*` beside a root's `*` is one class).
        let report = report_of(&spec, &input);
        assert_eq!(
            (report.classes, report.smallest_class),
            (sizes.len(), *sizes.values().min().unwrap()),
            "{algorithm}: the report counts the published classes"
        );
        // The records that were suppressed whole now show cells, and the
        // others are as the row-suppressing release published them.
        let starred = (0..out.num_rows())
            .filter(|&r| qis.iter().any(|q| q[r] == "*"))
            .count();
        assert!(
            starred >= rows_suppressed,
            "{algorithm}: {starred} < {rows_suppressed}"
        );
        let plain: Vec<Vec<String>> = spec
            .quasi_identifiers()
            .map(|a| common::strings(&rows_out, &a.name))
            .collect();
        let tuples = |q: &Vec<Vec<String>>, n: usize| {
            let mut t: Vec<Vec<String>> = (0..n)
                .map(|r| q.iter().map(|c| c[r].clone()).collect())
                .collect();
            t.sort();
            t
        };
        let kept = tuples(&plain, rows_out.num_rows());
        let all = tuples(&qis, out.num_rows());
        let not_starred: Vec<&Vec<String>> =
            all.iter().filter(|t| !t.iter().any(|l| l == "*")).collect();
        assert!(
            not_starred.len() <= kept.len(),
            "{algorithm}: only the rejected records change"
        );
    }
}

#[test]
fn settings_that_do_not_fit_are_refused_naming_them() {
    let base = || job("adult-top-bottom-coding.toml", "cover", "");
    let refuse = |spec: JobSpec, setting: &str, says: &str| {
        let err = spec.validate().unwrap_err().to_string();
        assert!(err.contains(setting) && err.contains(says), "{err}");
    };
    let mut spec = base();
    attribute(&mut spec, "sex").top_code = Some(1.0);
    refuse(spec, "attributes.sex.top_code", "categorical");
    let mut spec = base();
    attribute(&mut spec, "age").bottom_code = Some(90.0);
    refuse(spec, "attributes.age.bottom_code", "below top_code");
    let mut spec = base();
    let salary = attribute(&mut spec, "salary-class");
    salary.microaggregation = Some(kanon_engine::spec::Microaggregation::Mode);
    refuse(
        spec,
        "attributes.salary-class.microaggregation",
        "quasi-identifier",
    );
    let mut spec = base();
    let sex = attribute(&mut spec, "sex");
    sex.microaggregation = Some(kanon_engine::spec::Microaggregation::Mean);
    refuse(
        spec,
        "attributes.sex.microaggregation",
        "\"mode\" or \"set\"",
    );
    // An override that moves a bound outwards, removes it or changes the
    // aggregate weakens the job file.
    let file = job("adult-microaggregation.toml", "cover", "top_code = 50000");
    let mut new = file.clone();
    attribute(&mut new, "income").top_code = Some(50001.0);
    attribute(&mut new, "age").microaggregation = Some(kanon_engine::spec::Microaggregation::Set);
    let weakened = file.weakenings(&new);
    assert!(
        weakened.iter().any(|w| w.contains("income.top_code")),
        "{weakened:?}"
    );
    assert!(
        weakened.iter().any(|w| w.contains("age.microaggregation")),
        "{weakened:?}"
    );
    attribute(&mut new, "income").top_code = Some(40000.0);
    attribute(&mut new, "age").microaggregation = file
        .attributes
        .iter()
        .find(|a| a.name == "age")
        .unwrap()
        .microaggregation;
    assert!(
        file.weakenings(&new).is_empty(),
        "a lower top code publishes less"
    );
    // A string column cannot be coded: said when the data is read.
    let mut spec = base();
    spec.attributes.retain(|a| a.name != "income");
    let extra: JobSpec = toml::from_str(
        "[[attributes]]\nname = \"income\"\nrole = \"insensitive\"\ntype = \"numeric\"\n[[attributes]]\nname = \"workclass\"\nrole = \"sensitive\"\ntop_code = 3",
    )
    .unwrap();
    spec.attributes.retain(|a| a.name != "workclass");
    spec.attributes.extend(extra.attributes);
    let err = kanon_engine::encode::Encoder::try_new(
        &spec,
        &common::load_hierarchies(&spec),
        &adult(10).schema(),
    )
    .unwrap_err()
    .to_string();
    assert!(
        err.contains("workclass") && err.contains("integers or floats"),
        "{err}"
    );
    // Cell suppression places classes, not shielded projections.
    let mut spec = job("adult-cell-suppression.toml", "datafly", "");
    spec.algorithm
        .params
        .insert("cell_suppression".into(), true.into());
    spec.privacy.requirements =
        toml::from_str::<JobSpec>("[[privacy.requirements]]\nshield = [\"age\", \"sex\"]\nk = 5")
            .unwrap()
            .privacy
            .requirements;
    let err = release(&spec, &adult(500)).unwrap_err().to_string();
    assert!(err.contains("algorithm.cell_suppression"), "{err}");
}
