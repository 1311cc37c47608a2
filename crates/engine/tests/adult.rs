//! End-to-end engine runs on the bundled Adult data (issue 2 targets).

mod common;

use kanon_engine::anonymize;

#[test]
fn mondrian_adult_k10_is_verified_and_fine_grained() {
    let (mut spec, table) = common::adult_table(&[]);
    spec.algorithm.name = "mondrian".into();
    assert_eq!(table.n_rows(), 30_162);
    assert_eq!(table.n_qi(), 8);
    spec.privacy.k = 10;
    let result = anonymize(&spec, &table).unwrap();
    let r = &result.report;
    assert!(
        r.smallest_class >= 10,
        "smallest class {}",
        r.smallest_class
    );
    assert_eq!(r.rows_out, 30_162);
    assert_eq!(r.suppressed_rows, 0);
    assert!(r.granularity <= 0.10, "granularity {}", r.granularity);
}

#[test]
fn mondrian_paper_rule_is_available_and_verified() {
    let (mut spec, table) = common::adult_table(&["age", "sex", "race", "education"]);
    spec.privacy.k = 25;
    spec.algorithm.name = "mondrian".into();
    spec.algorithm.params.insert("cut".into(), "widest".into());
    spec.algorithm.params.insert("relaxed".into(), false.into());
    spec.algorithm
        .params
        .insert("numeric".into(), "hierarchy".into());
    let result = anonymize(&spec, &table).unwrap();
    assert!(result.report.smallest_class >= 25);
    assert_eq!(result.details["relaxed_cuts"], 0);
}

#[test]
fn mondrian_is_identical_for_one_and_two_threads() {
    let (mut spec, table) = common::adult_table(&["age", "sex", "education", "native-country"]);
    spec.privacy.k = 5;
    spec.algorithm.name = "mondrian".into();
    let run = |threads: usize| {
        rayon::ThreadPoolBuilder::new()
            .num_threads(threads)
            .build()
            .unwrap()
            .install(|| anonymize(&spec, &table).unwrap().partition)
    };
    assert_eq!(run(1), run(2));
}
