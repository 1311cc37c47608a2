//! The hierarchy-bound local recoding (`mondrian-hierarchy`, issue 19) on
//! the bundled Adult job with its default settings: every published cell is
//! a node of its QI's hierarchy (age: a node of its intervals), nothing is
//! suppressed, and the granularity stays under the bound measured at each k
//! (a loss regression; ARX 3.9.2's local recoding, times 0.9, in comments).

mod common;

use kanon_engine::generalise::Cell;

/// The Adult job (8 QIs, age with intervals 5, 10, 20) at `k` with the
/// hierarchy-bound path and no parameters.
fn run(k: usize) -> kanon_engine::Anonymization {
    let (mut spec, h) = common::adult_job(&[]);
    spec.privacy.k = k;
    spec.algorithm.name = "mondrian-hierarchy".into();
    spec.algorithm.params.clear();
    let table = common::encode(&spec, &h, &common::adult_batches());
    kanon_engine::anonymize(&spec, &table).unwrap()
}

#[test]
fn adult_releases_are_hierarchy_bound_and_within_the_loss_bounds() {
    // (k, upper bound a little above the measured granularity, 0.9 x ARX).
    let bounds = [
        (2, 0.0243, 0.0277),
        (5, 0.0561, 0.0551),
        (10, 0.0813, 0.0762),
        (20, 0.1108, 0.1020),
        (50, 0.1563, 0.1424),
        (100, 0.1985, 0.1811),
    ];
    for (k, bound, _arx) in bounds {
        let out = run(k);
        assert_eq!(out.algorithm, "mondrian-hierarchy");
        assert_eq!(out.report.rows_in, 30_162);
        assert_eq!(out.report.suppressed_rows, 0, "k = {k}");
        assert!(out.report.smallest_class >= k, "k = {k}");
        let p = &out.partition;
        for g in 0..p.n_groups() {
            for cell in p.tuple(g) {
                assert!(
                    matches!(cell, Cell::Node(_)),
                    "k = {k}: group {g} publishes {cell:?}, not a hierarchy node"
                );
            }
        }
        assert!(
            out.report.granularity <= bound,
            "k = {k}: granularity {} above {bound}",
            out.report.granularity
        );
    }
}

#[test]
fn parameters_override_the_preset() {
    let (mut spec, h) = common::adult_job(&[]);
    spec.privacy.k = 10;
    spec.algorithm.name = "mondrian-hierarchy".into();
    spec.algorithm.params.clear();
    spec.algorithm
        .params
        .insert("residue".into(), serde_json::Value::Bool(false));
    let table = common::encode(&spec, &h, &common::adult_batches());
    let off = kanon_engine::anonymize(&spec, &table).unwrap();
    let on = run(10);
    // Gathering rare rows table-wide loses less than topping them up.
    assert!(off.details.get("residue").is_none());
    assert!(on.details["residue"]["deferred"][0].as_u64().unwrap() > 0);
    assert!(on.report.granularity < off.report.granularity);
    spec.algorithm
        .params
        .insert("bogus".into(), serde_json::Value::Bool(true));
    assert!(kanon_engine::anonymize(&spec, &table).is_err());
}
