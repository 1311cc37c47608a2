//! People, not rows (issue 31, item 1): random tables where each patient
//! has 1 to 8 visits, released by every registered algorithm with
//! `privacy.entity = "patient"`, random k, distinct l, suppression and
//! blocks, through the one release path of every front end. An oracle
//! written here reads the published batches and the input alone:
//! - it maps each published row back to its patient (by the passed-through
//!   `row` number) and counts **distinct patients** per class (rows with
//!   equal QI labels): at least k;
//! - it plays the attacker who knows every quasi-identifier value of one
//!   patient's visits: all of them must lead to one class (no patient's
//!   rows in two classes to intersect), which holds at least k patients;
//! - l counts each patient once: no fewer than l diagnoses may cover every
//!   patient of a class (checked by brute force over subsets);
//! - every patient is published whole or suppressed whole, every row once,
//!   and nothing else.

mod common;

use std::collections::{BTreeSet, HashMap, HashSet};
use std::sync::Arc;

use arrow::array::{ArrayRef, AsArray, Int64Array, RecordBatch, StringArray};
use arrow::compute::cast;
use arrow::datatypes::{DataType, Field, Int64Type, Schema};
use kanon_engine::hierarchy::Hierarchy;
use kanon_engine::spec::JobSpec;
use kanon_engine::Error;
use proptest::prelude::*;
use rustc_hash::FxHashMap;

const CITY: &str = "\
Lyon;South;France;*
Nice;South;France;*
Paris;North;France;*
Lille;North;France;*
Turin;North-It;Italy;*
Rome;South-It;Italy;*
";
const CITIES: [&str; 6] = ["Lyon", "Nice", "Paris", "Lille", "Turin", "Rome"];
const DIAGNOSES: [&str; 6] = ["flu", "cold", "asthma", "ulcer", "gout", "acne"];

/// One patient: their city and birth year (constant), and one age and
/// diagnosis per visit (age varies when `ages_vary`).
#[derive(Debug, Clone)]
struct Patient {
    city: usize,
    age: i64,
    visits: Vec<(i64, usize)>,
}

fn patient() -> impl Strategy<Value = Patient> {
    (
        0usize..CITIES.len(),
        18i64..80,
        prop::collection::vec((0i64..3, 0usize..DIAGNOSES.len()), 1..=8),
    )
        .prop_map(|(city, age, visits)| Patient { city, age, visits })
}

#[derive(Debug, Clone)]
struct Case {
    k: usize,
    l: Option<usize>,
    suppression: Option<f64>,
    block_size: Option<usize>,
    ages_vary: bool,
}

fn case() -> impl Strategy<Value = Case> {
    (
        2usize..5,
        prop_oneof![2 => Just(None), 1 => (2usize..4).prop_map(Some)],
        prop_oneof![Just(None), Just(Some(0.1))],
        prop_oneof![3 => Just(None), 1 => (8usize..20).prop_map(Some)],
        any::<bool>(),
    )
        .prop_map(|(k, l, suppression, block_size, ages_vary)| Case {
            k,
            l,
            suppression,
            block_size,
            ages_vary,
        })
}

fn job(algorithm: &str, c: &Case) -> JobSpec {
    let mut text = format!(
        "[privacy]\nk = {}\nentity = \"patient\"\n[algorithm]\nname = \"{algorithm}\"\nseed = 3\n",
        c.k
    );
    if let Some(b) = c.block_size.filter(|_| {
        kanon_engine::algorithms::registry::get(algorithm)
            .unwrap()
            .capabilities
            .block_wise
    }) {
        text += &format!("block_size = {b}\n");
    }
    text += "
[[attributes]]
name = \"patient\"
role = \"pseudonymised\"
[[attributes]]
name = \"age\"
role = \"quasi-identifier\"
intervals = [5, 10, 20, 40]
[[attributes]]
name = \"city\"
role = \"quasi-identifier\"
hierarchy = \"city.csv\"
[[attributes]]
name = \"diagnosis\"
role = \"sensitive\"
[[attributes]]
name = \"row\"
role = \"insensitive\"
";
    let mut spec: JobSpec = toml::from_str(&text).unwrap();
    let capabilities = kanon_engine::algorithms::registry::get(algorithm)
        .unwrap()
        .capabilities;
    spec.privacy.l = c.l.filter(|_| capabilities.l_diversity);
    spec.privacy.suppression_limit = c.suppression;
    if algorithm == "l-clustering" && spec.privacy.l.is_none() {
        spec.privacy.l = Some(2);
    }
    spec
}

fn hierarchies() -> FxHashMap<String, Arc<Hierarchy>> {
    let mut h = FxHashMap::default();
    h.insert(
        "city.csv".to_string(),
        Arc::new(Hierarchy::from_csv("city.csv", CITY, ';').unwrap()),
    );
    h
}

/// The visits table, one row per visit, patients interleaved (each
/// patient's visits are spread over the table, as in a real log).
fn visits(patients: &[Patient], ages_vary: bool) -> (RecordBatch, Vec<usize>) {
    let mut rows: Vec<(usize, i64, usize, usize)> = Vec::new();
    let longest = patients.iter().map(|p| p.visits.len()).max().unwrap_or(0);
    for v in 0..longest {
        for (id, p) in patients.iter().enumerate() {
            if let Some(&(older, dx)) = p.visits.get(v) {
                let age = if ages_vary { p.age + older } else { p.age };
                rows.push((id, age, p.city, dx));
            }
        }
    }
    let schema = Arc::new(Schema::new(vec![
        Field::new("row", DataType::Int64, false),
        Field::new("patient", DataType::Utf8, false),
        Field::new("age", DataType::Int64, false),
        Field::new("city", DataType::Utf8, false),
        Field::new("diagnosis", DataType::Utf8, false),
    ]));
    let batch = RecordBatch::try_new(
        schema,
        vec![
            Arc::new(Int64Array::from_iter_values(0..rows.len() as i64)) as ArrayRef,
            Arc::new(StringArray::from_iter_values(
                rows.iter().map(|r| format!("p{}", r.0)),
            )),
            Arc::new(Int64Array::from_iter_values(rows.iter().map(|r| r.1))),
            Arc::new(StringArray::from_iter_values(
                rows.iter().map(|r| CITIES[r.2]),
            )),
            Arc::new(StringArray::from_iter_values(
                rows.iter().map(|r| DIAGNOSES[r.3]),
            )),
        ],
    )
    .unwrap();
    (batch, rows.iter().map(|r| r.0).collect())
}

fn text(batch: &RecordBatch, column: &str) -> Vec<String> {
    let c = cast(batch.column_by_name(column).unwrap(), &DataType::Utf8).unwrap();
    c.as_string::<i32>()
        .iter()
        .map(|v| v.unwrap_or_default().to_string())
        .collect()
}

/// The fewest diagnoses that every patient of a class holds one of
/// (brute force over subsets of the class's diagnoses).
fn hitting_number(sets: &[BTreeSet<String>]) -> usize {
    let values: Vec<&String> = sets
        .iter()
        .flatten()
        .collect::<BTreeSet<_>>()
        .into_iter()
        .collect();
    (0..=values.len())
        .find(|&size| {
            (0u32..1 << values.len())
                .filter(|m| m.count_ones() as usize == size)
                .any(|m| {
                    sets.iter().all(|s| {
                        values
                            .iter()
                            .enumerate()
                            .any(|(i, v)| m & (1 << i) != 0 && s.contains(*v))
                    })
                })
        })
        .unwrap_or(values.len())
}

fn oracle(
    input: &RecordBatch,
    patient_of_row: &[usize],
    out: &RecordBatch,
    suppressed: usize,
    c: &Case,
) -> Result<(), String> {
    let n = input.num_rows();
    if out.num_rows() + suppressed != n {
        return Err(format!(
            "{} published + {suppressed} suppressed != {n}",
            out.num_rows()
        ));
    }
    // Each patient is published under one pseudonym, never their id.
    let pseudonyms = text(out, "patient");
    let mut pseudonym_of: HashMap<usize, String> = HashMap::new();
    let ids = out
        .column_by_name("row")
        .unwrap()
        .as_primitive::<Int64Type>();
    let diagnosis_in = text(input, "diagnosis");
    let labels: Vec<Vec<String>> = ["age", "city"].iter().map(|q| text(out, q)).collect();
    // The label tuple of every published patient (the attacker's lookup):
    // all their rows must carry one.
    let mut class_of_patient: HashMap<usize, (String, String)> = HashMap::new();
    let mut published_rows_of: HashMap<usize, usize> = HashMap::new();
    let mut seen = HashSet::new();
    for (i, &id) in ids.values().iter().enumerate() {
        let id = id as usize;
        if !seen.insert(id) {
            return Err(format!("input row {id} published twice"));
        }
        let p = patient_of_row[id];
        if !kanon_engine::recode::is_pseudonym(&pseudonyms[i]) {
            return Err(format!("patient {p} published without a pseudonym"));
        }
        if pseudonym_of
            .entry(p)
            .or_insert_with(|| pseudonyms[i].clone())
            != &pseudonyms[i]
        {
            return Err(format!("patient {p} has two pseudonyms"));
        }
        let tuple = (labels[0][i].clone(), labels[1][i].clone());
        match class_of_patient.get(&p) {
            Some(t) if *t != tuple => {
                return Err(format!("patient {p}'s visits are in two classes"));
            }
            _ => {
                class_of_patient.insert(p, tuple);
            }
        }
        *published_rows_of.entry(p).or_default() += 1;
    }
    let mut rows_of: HashMap<usize, usize> = HashMap::new();
    for &p in patient_of_row {
        *rows_of.entry(p).or_default() += 1;
    }
    let mut suppressed_patients = 0;
    for (p, &rows) in &rows_of {
        match published_rows_of.get(p) {
            Some(&published) if published != rows => {
                return Err(format!("patient {p}: {published} of {rows} rows published"));
            }
            None => suppressed_patients += 1,
            _ => {}
        }
    }
    let allowed = (c.suppression.unwrap_or(0.0) * rows_of.len() as f64).floor() as usize;
    if suppressed_patients > allowed {
        return Err(format!(
            "{suppressed_patients} patients suppressed, limit {allowed}"
        ));
    }
    // Classes of patients, and their diagnoses.
    let mut classes: HashMap<(String, String), Vec<usize>> = HashMap::new();
    for (&p, t) in &class_of_patient {
        classes.entry(t.clone()).or_default().push(p);
    }
    let mut diagnoses: HashMap<usize, BTreeSet<String>> = HashMap::new();
    for (r, &p) in patient_of_row.iter().enumerate() {
        diagnoses
            .entry(p)
            .or_default()
            .insert(diagnosis_in[r].clone());
    }
    for patients in classes.values() {
        if patients.len() < c.k {
            return Err(format!(
                "a class of {} patients < k = {}",
                patients.len(),
                c.k
            ));
        }
        if let Some(l) = c.l {
            let sets: Vec<BTreeSet<String>> =
                patients.iter().map(|p| diagnoses[p].clone()).collect();
            let h = hitting_number(&sets);
            if h < l {
                return Err(format!(
                    "a class of {} patients is covered by {h} diagnoses < l = {l}",
                    patients.len()
                ));
            }
        }
    }
    Ok(())
}

/// Every registered algorithm but `safepub`: differential privacy protects
/// records, and its jobs refuse `privacy.entity` (`tests/differential_privacy.rs`).
fn algorithms() -> Vec<&'static str> {
    kanon_engine::algorithms::registry::names()
        .into_iter()
        .filter(|&a| a != "safepub")
        .collect()
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(24))]

    #[test]
    fn every_algorithm_counts_patients_not_visits(
        patients in prop::collection::vec(patient(), 12..40),
        c in case(),
    ) {
        let (input, patient_of_row) = visits(&patients, c.ages_vary);
        for algorithm in algorithms() {
            let spec = job(algorithm, &c);
            let c = Case { l: spec.privacy.l, ..c.clone() };
            match common::release(&spec, &hierarchies(), &input, 16) {
                Ok((out, suppressed)) => {
                    if let Err(e) = oracle(&input, &patient_of_row, &out, suppressed, &c) {
                        prop_assert!(false, "{algorithm} {c:?}: {e}");
                    }
                }
                // Too few patients or diagnoses for the model: refused,
                // never released.
                Err(Error::Unsatisfiable(_)) => {}
                Err(e) => prop_assert!(false, "{algorithm} {c:?}: {e}"),
            }
        }
    }
}

/// The hospital case of issue 31: without the entity, a class of "5 rows"
/// can be one patient. With it, every class holds k patients.
#[test]
fn a_class_of_one_patient_is_never_published() {
    // 30 patients with 5 visits each, every visit with their own QIs.
    let patients: Vec<Patient> = (0..30)
        .map(|i| Patient {
            city: i % 6,
            age: 20 + (i as i64 % 50),
            visits: (0..5).map(|v| (0, (i + v) % DIAGNOSES.len())).collect(),
        })
        .collect();
    let (input, patient_of_row) = visits(&patients, false);
    let c = Case {
        k: 5,
        l: Some(2),
        suppression: None,
        block_size: None,
        ages_vary: false,
    };
    for algorithm in algorithms() {
        let spec = job(algorithm, &c);
        let c = Case {
            l: spec.privacy.l,
            ..c.clone()
        };
        let (out, suppressed) = common::release(&spec, &hierarchies(), &input, 16)
            .unwrap_or_else(|e| panic!("{algorithm}: {e}"));
        oracle(&input, &patient_of_row, &out, suppressed, &c)
            .unwrap_or_else(|e| panic!("{algorithm}: {e}"));
    }
}
