//! Tests of KACA.

use super::*;
use crate::encode::{EquivalenceClasses, QiTable};
use crate::hierarchy::Hierarchy;
use crate::metrics::{report, ReportOptions};
use crate::privacy::Privacy;
use crate::spec::JobSpec;
use crate::verify::verify_partition;
use proptest::prelude::*;
use rand::Rng;
use rustc_hash::FxHashMap;
use std::sync::Arc;

fn job(k: usize, params: serde_json::Value) -> JobSpec {
    let mut spec: JobSpec = serde_json::from_value(serde_json::json!({
        "privacy": {"k": k},
        "algorithm": {"name": "kaca", "seed": 7},
        "attributes": [
            {"name": "gender", "role": "qi", "hierarchy": "g.csv"},
            {"name": "age", "role": "qi", "hierarchy": "a.csv"},
            {"name": "pcode", "role": "qi", "masking": true}
        ]
    }))
    .unwrap();
    if let serde_json::Value::Object(p) = params {
        spec.algorithm.params.extend(p);
    }
    spec
}

fn hierarchies() -> FxHashMap<String, Arc<Hierarchy>> {
    [
        ("g.csv", "male;*\nfemale;*\n"),
        ("a.csv", "young;*\nmiddle;*\nold;*\n"),
    ]
    .iter()
    .map(|(n, t)| {
        (
            n.to_string(),
            Arc::new(Hierarchy::from_csv(n, t, ';').unwrap()),
        )
    })
    .collect()
}

fn run(spec: &JobSpec, table: &QiTable, check: bool) -> Result<Outcome> {
    let mut kaca = Kaca::from_params(spec.algorithm.params()?)?;
    kaca.check = check;
    let privacy = Privacy::from_spec(spec)?;
    let classes = EquivalenceClasses::of(table);
    kaca.run(&Context::local(table, &classes, &privacy, spec))
}

/// The KACA paper, Table 1a.
fn table_1(spec: &JobSpec) -> QiTable {
    QiTable::from_string_columns(
        spec,
        &hierarchies(),
        &[
            (
                "gender",
                vec!["male", "male", "male", "female", "female", "female"],
            ),
            (
                "age",
                vec!["middle", "middle", "young", "young", "old", "old"],
            ),
            (
                "pcode",
                vec!["4350", "4350", "4351", "4352", "4353", "4353"],
            ),
        ],
    )
    .unwrap()
}

#[test]
fn kaca_table_1_local_recoding() {
    for strategy in ["random", "smallest-first", "largest-distortion-first"] {
        let spec = job(2, serde_json::json!({ "strategy": strategy }));
        let table = table_1(&spec);
        let out = run(&spec, &table, true).unwrap();
        let p = &out.partition;
        verify_partition(&table, p, &Privacy::from_spec(&spec).unwrap()).unwrap();
        // Rows 3 and 4 become (*, young, 435*); the others are unchanged.
        let labels: Vec<String> = (0..3)
            .map(|q| table.columns()[q].cell_label(p.cell(2, q)))
            .collect();
        assert_eq!(labels, ["*", "young", "435*"], "{strategy}");
        assert_eq!(p.group_of_row()[2], p.group_of_row()[3]);
        let r = report(&table, p, ReportOptions::default());
        assert!((r.distortion - 2.5).abs() < 1e-12, "{}", r.distortion);
        assert!((r.modification_rate - 2.0 / 9.0).abs() < 1e-12);
        assert_eq!(out.details["merges"], 1);
    }
}

#[test]
fn stub_and_trunk() {
    // One class of 9 identical rows and one lone row: with k = 3 the lone
    // row takes a stub of 2 rows; the trunk of 7 keeps its values.
    let spec = job(3, serde_json::json!({}));
    let mut g = vec!["male"; 9];
    g.push("female");
    let table = QiTable::from_string_columns(
        &spec,
        &hierarchies(),
        &[
            ("gender", g),
            ("age", vec!["old"; 10]),
            ("pcode", vec!["4350"; 10]),
        ],
    )
    .unwrap();
    let out = run(&spec, &table, true).unwrap();
    assert_eq!(out.details["splits"], 1);
    let p = &out.partition;
    let sizes = p.group_sizes();
    let mut sorted = sizes.clone();
    sorted.sort();
    assert_eq!(sorted, [3, 7]);
    let unchanged = (0..9)
        .filter(|&r| table.columns()[0].is_unchanged(p.cell(r, 0)))
        .count();
    assert_eq!(unchanged, 7);
    // The distance was taken to the stub: 1 * 1 + 2 * 1 = 3.
    let r = report(&table, p, ReportOptions::default());
    assert!((r.distortion - 3.0).abs() < 1e-12);
}

#[test]
fn outliers_are_suppressed_within_the_limit() {
    let mut spec = job(2, serde_json::json!({ "outlier_threshold": 1.0 }));
    let table = table_1(&spec);
    // No suppression allowed: the outlier threshold cannot apply.
    let out = run(&spec, &table, true).unwrap();
    assert_eq!(out.partition.suppressed(), 0);
    // With room for two rows, the two lone rows (best merge 2.5 > 1)
    // are suppressed.
    spec.privacy.suppression_limit = Some(2.0 / 6.0);
    let out = run(&spec, &table, true).unwrap();
    assert_eq!(out.partition.suppressed(), 2);
    assert_eq!(out.details["suppressed_classes"], 2);
    verify_partition(&table, &out.partition, &Privacy::from_spec(&spec).unwrap()).unwrap();
}

#[test]
fn rejects_bad_params() {
    let bad = |p: serde_json::Value| {
        let spec = job(2, p);
        let params: Result<KacaParams> = spec.algorithm.params();
        params.and_then(Kaca::from_params).unwrap_err().to_string()
    };
    assert!(bad(serde_json::json!({"beta": 2.0})).contains("algorithm.beta"));
    assert!(bad(serde_json::json!({"weights": "height", "beta": 0.0})).contains("positive"));
    assert!(bad(serde_json::json!({"outlier_threshold": -1.0})).contains("outlier_threshold"));
    assert!(bad(serde_json::json!({"strategy": "fastest"})).contains("fastest"));
    assert!(bad(serde_json::json!({"stratgy": "random"})).contains("stratgy"));
}

type Hierarchies = FxHashMap<String, Arc<Hierarchy>>;
type Columns = Vec<(&'static str, Vec<String>)>;

fn random_table(rows: &[(u8, u8, u16, u8)]) -> (Hierarchies, Columns) {
    let edu = "a;x;L;*\nb;x;L;*\nc;y;L;*\nd;y;L;*\ne;z;R;*\nf;z;R;*\n";
    let hs = [("edu.csv", edu), ("sex.csv", "M;*\nF;*\n")]
        .iter()
        .map(|(n, t)| {
            (
                n.to_string(),
                Arc::new(Hierarchy::from_csv(n, t, ';').unwrap()),
            )
        })
        .collect();
    let cols = vec![
        (
            "edu",
            rows.iter()
                .map(|r| ["a", "b", "c", "d", "e", "f"][r.0 as usize % 6].to_string())
                .collect(),
        ),
        (
            "sex",
            rows.iter()
                .map(|r| ["M", "F"][r.1 as usize % 2].to_string())
                .collect(),
        ),
        (
            "age",
            rows.iter().map(|r| (20 + r.2 % 50).to_string()).collect(),
        ),
        (
            "city",
            rows.iter()
                .map(|r| ["p", "q", "r"][r.3 as usize % 3].to_string())
                .collect(),
        ),
    ];
    (hs, cols)
}

fn random_spec(k: usize, strategy: &str, weights: &str, age: serde_json::Value) -> JobSpec {
    let mut age_attr = serde_json::json!({"name": "age", "role": "qi", "type": "numeric"});
    if !age.is_null() {
        age_attr["intervals"] = age;
    }
    serde_json::from_value(serde_json::json!({
        "privacy": {"k": k},
        "algorithm": {"name": "kaca", "seed": 3, "strategy": strategy, "weights": weights},
        "attributes": [
            {"name": "edu", "role": "qi", "hierarchy": "edu.csv", "weight": 2.0},
            {"name": "sex", "role": "qi", "hierarchy": "sex.csv"},
            age_attr,
            {"name": "city", "role": "qi"}
        ]
    }))
    .unwrap()
}

/// Numeric QIs without hierarchies are not indexed: every class sits in
/// one bucket, scanned in parallel; 1 and 2 threads give one answer.
#[test]
fn parallel_scans_are_deterministic() {
    let spec: JobSpec = serde_json::from_value(serde_json::json!({
        "privacy": {"k": 3},
        "algorithm": {"name": "kaca", "seed": 11, "strategy": "least-distortion-first"},
        "attributes": [
            {"name": "x", "role": "qi", "type": "numeric"},
            {"name": "y", "role": "qi", "type": "numeric"}
        ]
    }))
    .unwrap();
    let mut rng = ChaCha8Rng::seed_from_u64(5);
    let xs: Vec<String> = (0..400)
        .map(|_| rng.gen_range(0..300).to_string())
        .collect();
    let ys: Vec<String> = (0..400)
        .map(|_| rng.gen_range(0..300).to_string())
        .collect();
    let table = QiTable::from_string_columns(
        &spec,
        &FxHashMap::default(),
        &[
            ("x", xs.iter().map(|s| s.as_str()).collect()),
            ("y", ys.iter().map(|s| s.as_str()).collect()),
        ],
    )
    .unwrap();
    let outcomes: Vec<Outcome> = [1, 2]
        .iter()
        .map(|&threads| {
            rayon::ThreadPoolBuilder::new()
                .num_threads(threads)
                .build()
                .unwrap()
                .install(|| run(&spec, &table, true).unwrap())
        })
        .collect();
    assert!(outcomes[0].details["indexed"]
        .as_array()
        .unwrap()
        .is_empty());
    assert_eq!(outcomes[0].partition, outcomes[1].partition);
    assert_eq!(outcomes[0].details, outcomes[1].details);
    verify_partition(
        &table,
        &outcomes[0].partition,
        &Privacy::from_spec(&spec).unwrap(),
    )
    .unwrap();
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(64))]
    /// On random small tables every output verifies, keeps every row,
    /// every pruned search equals the full scan and every split leaves
    /// its trunk's cells as they were (checked inside the run).
    #[test]
    fn random_tables_verify(
        rows in proptest::collection::vec((0u8..6, 0u8..2, 0u16..50, 0u8..3), 1..80),
        k in 2usize..7,
        strategy in prop_oneof![
            Just("random"),
            Just("smallest-first"),
            Just("largest-distortion-first"),
            Just("least-distortion-first"),
        ],
        weights in prop_oneof![Just("uniform"), Just("height"), Just("levels"), Just("granularity")],
        intervals in any::<bool>(),
        refine in any::<bool>(),
    ) {
        let age = if intervals { serde_json::json!([5, 10]) } else { serde_json::Value::Null };
        let mut spec = random_spec(k, strategy, weights, age);
        spec.algorithm.params.insert("refine".into(), refine.into());
        let (hs, cols) = random_table(&rows);
        let cols: Vec<(&str, Vec<&str>)> =
            cols.iter().map(|(n, v)| (*n, v.iter().map(|s| s.as_str()).collect())).collect();
        let table = QiTable::from_string_columns(&spec, &hs, &cols).unwrap();
        let result = run(&spec, &table, true);
        if rows.len() < k {
            prop_assert!(result.is_err());
            return Ok(());
        }
        let out = result.unwrap();
        let privacy = Privacy::from_spec(&spec).unwrap();
        let v = verify_partition(&table, &out.partition, &privacy).unwrap();
        prop_assert_eq!(out.partition.suppressed(), 0);
        prop_assert_eq!(v.published_rows, rows.len());
        prop_assert!(v.smallest_class >= k);
    }
}
