//! Anonymity requirements `<shield, k>` (the HeuristicMin paper section 3.1; `docs/SPEC.md`
//! section 1): job files, the privacy model, verification by projection for
//! every algorithm, and the stand-in single-k algorithms see.

use std::sync::Arc;

use arrow::array::RecordBatch;
use kanon_engine::encode::QiTable;
use kanon_engine::hierarchy::Hierarchy;
use kanon_engine::partition::Partition;
use kanon_engine::privacy::{Privacy, Requirement};
use kanon_engine::recode::Recoder;
use kanon_engine::spec::JobSpec;
use kanon_engine::verify::{verify_partition, verify_release};
use kanon_engine::{anonymize, Error};
use rustc_hash::FxHashMap;

fn spec(toml_text: &str) -> JobSpec {
    toml::from_str(toml_text).unwrap()
}

const ATTRS: &str = r#"
[[attributes]]
name = "a"
role = "qi"
hierarchy = "a.csv"
[[attributes]]
name = "b"
role = "qi"
hierarchy = "b.csv"
[[attributes]]
name = "s"
role = "sensitive"
"#;

/// A 2-QI table: every (a, b) combination of {a1,a2} x {b1,b2} `n` times,
/// with a sensitive column.
fn grid(spec: &JobSpec, n: usize) -> QiTable {
    let hierarchies: FxHashMap<String, Arc<Hierarchy>> =
        [("a.csv", "a1;*\na2;*\n"), ("b.csv", "b1;*\nb2;*\n")]
            .into_iter()
            .map(|(f, t)| {
                (
                    f.to_string(),
                    Arc::new(Hierarchy::from_csv(f, t, ';').unwrap()),
                )
            })
            .collect();
    let mut a = Vec::new();
    let mut b = Vec::new();
    for (x, y) in [("a1", "b1"), ("a1", "b2"), ("a2", "b1"), ("a2", "b2")] {
        for _ in 0..n {
            a.push(x);
            b.push(y);
        }
    }
    let s = vec!["v"; a.len()];
    QiTable::from_string_columns(spec, &hierarchies, &[("a", a), ("b", b), ("s", s)]).unwrap()
}

#[test]
fn plain_k_is_one_requirement_on_all_qis() {
    let s = spec(&format!("[privacy]\nk = 3\n{ATTRS}"));
    let p = Privacy::from_spec(&s).unwrap();
    assert_eq!(p.requirements(), &[Requirement::all(3)]);
    assert!(!p.has_shield_requirements());
    assert_eq!(p.class_min_size(), 3);
    assert_eq!(p.min_class_size(), 3);
    assert_eq!(p.describe(), "k-anonymity (k = 3)");
}

#[test]
fn requirements_add_to_k_and_single_k_sees_the_largest() {
    let s = spec(&format!(
        "[privacy]\nk = 2\nrequirements = [{{ shield = [\"b\"], k = 5 }}, {{ shield = [\"b\", \"a\"], k = 4 }}]\n{ATTRS}"
    ));
    let p = Privacy::from_spec(&s).unwrap();
    let described: Vec<String> = p.requirements().iter().map(|r| r.describe()).collect();
    // A shield naming every QI is plain k-anonymity.
    assert_eq!(
        described,
        vec!["k-anonymity (k = 2)", "<{b}, 5>", "k-anonymity (k = 4)"]
    );
    assert!(p.has_shield_requirements());
    // The stand-in for single-k algorithms: the largest k on all QIs.
    assert_eq!(p.min_class_size(), 5);
    // What the job itself demands of every class.
    assert_eq!(p.class_min_size(), 4);
    assert!(p.class_models().is_empty());
    let b5 = &p.requirements()[1];
    assert!(b5.is_implied_by(&Requirement::all(5)));
    assert!(!b5.is_implied_by(&Requirement::all(4)));
    assert!(!Requirement::all(2).is_implied_by(b5));
}

#[test]
fn requirements_are_validated_by_setting() {
    let err = |privacy: &str| {
        Privacy::from_spec(&spec(&format!("[privacy]\n{privacy}\n{ATTRS}")))
            .unwrap_err()
            .to_string()
    };
    let e = err("requirements = [{ shield = [\"a\"], k = 2 }, { shield = [\"zip\"], k = 2 }]");
    assert!(
        e.contains("privacy.requirements[1].shield") && e.contains("`zip`") && e.contains("[a, b]"),
        "{e}"
    );
    let e = err("requirements = [{ shield = [\"s\"], k = 2 }]");
    assert!(e.contains("not a quasi-identifier"), "{e}");
    let e = err("requirements = [{ shield = [\"a\", \"a\"], k = 2 }]");
    assert!(e.contains("more than once"), "{e}");
    let e = err("requirements = [{ shield = [\"a\"], k = 0 }]");
    assert!(e.contains("privacy.requirements[0].k"), "{e}");
    let e = err("requirements = [{ shield = [], k = 2 }]");
    assert!(e.contains("at least one"), "{e}");
    let e = err("suppression_limit = 0.1");
    assert!(e.contains("privacy.k"), "{e}");
    // Only requirements, no plain k.
    let p = Privacy::from_spec(&spec(&format!(
        "[privacy]\nrequirements = [{{ shield = [\"a\"], k = 2 }}]\n{ATTRS}"
    )))
    .unwrap();
    assert_eq!(p.requirements().len(), 1);
    assert_eq!(p.class_min_size(), 1);
    let bad: Result<JobSpec, _> =
        toml::from_str("[privacy]\nrequirements = [{ shield = [\"a\"], k = 2, l = 3 }]\n");
    assert!(bad.unwrap_err().to_string().contains('l'));
}

/// Every row published unchanged in its own group.
fn identity(table: &QiTable) -> Partition {
    Partition::tightest(table, (0..table.n_rows() as u32).collect())
}

#[test]
fn the_verifier_checks_projections_not_classes() {
    let s = spec(&format!("[privacy]\nk = 2\n{ATTRS}"));
    let table = grid(&s, 2);
    let partition = identity(&table);
    let on_a = |k| Requirement::on([(0, "a".to_string())], k, 2);
    // Classes of 2 rows; the projection on {a} has tuples of 4 rows.
    let ok = verify_partition(
        &table,
        &partition,
        &Privacy::with_requirements(vec![on_a(4)]),
    )
    .unwrap();
    assert_eq!(ok.smallest_class, 2);
    assert_eq!(ok.requirements.len(), 1);
    let r = &ok.requirements[0];
    assert_eq!(
        (
            r.requirement.as_str(),
            r.k,
            r.achieved_k,
            r.projected_tuples,
            r.violating_tuples
        ),
        ("<{a}, 4>", 4, 4, 2, 0)
    );
    let err = verify_partition(
        &table,
        &partition,
        &Privacy::with_requirements(vec![Requirement::all(2), on_a(5)]),
    )
    .unwrap_err();
    assert!(matches!(err, Error::VerificationFailed(_)));
    let msg = err.to_string();
    assert!(
        msg.contains("2 of 2 projected tuples violate <{a}, 5> (fewest rows 4)"),
        "{msg}"
    );
    assert!(
        !msg.contains("a1") && !msg.contains("a2"),
        "no values: {msg}"
    );
    // Plain k-anonymity is still checked per class.
    let msg = verify_partition(&table, &partition, &Privacy::k_anonymity(3))
        .unwrap_err()
        .to_string();
    assert!(msg.contains("k-anonymity (k = 3)"), "{msg}");
}

#[test]
fn verify_release_checks_projections_of_labels() {
    let s = spec(&format!("[privacy]\nk = 2\n{ATTRS}"));
    let table = grid(&s, 3);
    let partition = identity(&table);
    let batch = {
        let a: Vec<&str> = (0..table.n_rows() as u32)
            .map(|r| table.columns()[0].label(table.columns()[0].codes().get(r as usize)))
            .collect();
        let b: Vec<&str> = (0..table.n_rows() as u32)
            .map(|r| table.columns()[1].label(table.columns()[1].codes().get(r as usize)))
            .collect();
        let s = vec!["v"; a.len()];
        let arrays: Vec<(&str, arrow::array::ArrayRef)> = vec![
            ("a", Arc::new(arrow::array::StringArray::from(a))),
            ("b", Arc::new(arrow::array::StringArray::from(b))),
            ("s", Arc::new(arrow::array::StringArray::from(s))),
        ];
        RecordBatch::try_from_iter(arrays).unwrap()
    };
    let released = Recoder::new(&s, &table, &partition)
        .recode(&batch, 0)
        .unwrap();
    let on_b = |k| Requirement::on([(1, "b".to_string())], k, 2);
    let v = verify_release(
        &s,
        std::slice::from_ref(&released),
        &Privacy::with_requirements(vec![on_b(6)]),
    )
    .unwrap();
    assert_eq!(v.requirements[0].achieved_k, 6);
    let msg = verify_release(&s, &[released], &Privacy::with_requirements(vec![on_b(7)]))
        .unwrap_err()
        .to_string();
    assert!(msg.contains("<{b}, 7>"), "{msg}");
}

/// Single-k algorithms meet a multi-requirement job through the stand-in
/// (largest k on all QIs); the verifier reports the k achieved per
/// requirement.
#[test]
fn mondrian_meets_requirements_through_the_largest_k() {
    let s = spec(&format!(
        "[privacy]\nrequirements = [{{ shield = [\"a\"], k = 6 }}, {{ shield = [\"b\"], k = 8 }}]\n[algorithm]\nname = \"mondrian\"\n{ATTRS}"
    ));
    let table = grid(&s, 3);
    let result = anonymize(&s, &table).unwrap();
    assert!(result.report.smallest_class >= 8);
    let achieved: Vec<(usize, usize)> = result
        .verified
        .requirements
        .iter()
        .map(|r| (r.k, r.achieved_k))
        .collect();
    assert_eq!(achieved.len(), 2);
    assert!(achieved.iter().all(|(k, got)| got >= k), "{achieved:?}");
    // No per-class k was asked: the report counts no class as below it.
    assert_eq!(result.report.classes_below_k, 0);
    // HeuristicMin meets the requirements exactly: it keeps more rows.
    let mut hm = s.clone();
    hm.algorithm.name = "heuristic-min".into();
    let h = anonymize(&hm, &table).unwrap();
    assert!(h.report.distinct_rows_out >= result.report.distinct_rows_out);
    assert!(h.verified.requirements.iter().all(|r| r.achieved_k >= r.k));
}
