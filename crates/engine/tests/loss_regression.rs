//! Loss regressions of `cover` with hierarchy nodes only (issue 34), on
//! the three data sets its utility is measured on: Adult (the bundled job
//! without its age windows), and the ARX team's `creditcard` and
//! `mach2019` (`configs/<set>.toml`, `data/arx-benchmark/`). At every k of
//! the ARX comparison in RESULTS.md a test fails when the granularity
//! rises more than 1 % above the figure measured when it was written, or
//! when a published value is no hierarchy node; each figure stays above
//! the lower bound `cover` computes (no hierarchy-bound release loses
//! less), which is checked here too for one k per set.

mod common;

use kanon_engine::generalise::Cell;
use kanon_engine::spec::JobSpec;

const KS: [usize; 6] = [2, 5, 10, 20, 50, 100];

/// The job of `config` on its data, with `cover` and no windows.
fn job(config: &str) -> (JobSpec, kanon_engine::encode::QiTable) {
    let mut spec = common::config(config);
    spec.algorithm.name = "cover".into();
    for a in &mut spec.attributes {
        a.windows.clear();
    }
    let h = common::load_hierarchies(&spec);
    let input = spec.input.path.clone().expect("the job names its input");
    let table = common::encode(&spec, &h, &common::adult_batches_from(&input));
    (spec, table)
}

/// Runs `config` at each k of [`KS`] with `edit` applied and checks each
/// granularity against `measured` (same order), plus the lower bound at
/// `bound_at` (an index of [`KS`]).
fn check(config: &str, edit: impl Fn(&mut JobSpec), measured: [f64; 6], bound_at: Option<usize>) {
    let (mut spec, table) = job(config);
    edit(&mut spec);
    for (i, (k, figure)) in KS.into_iter().zip(measured).enumerate() {
        spec.privacy.k = k;
        spec.algorithm.params.clear();
        if bound_at == Some(i) {
            spec.algorithm
                .params
                .insert("lower_bound".into(), serde_json::json!(true));
        }
        let out = kanon_engine::anonymize(&spec, &table)
            .unwrap_or_else(|e| panic!("{config}, k = {k}: {e}"));
        let p = &out.partition;
        for g in 0..p.n_groups() {
            assert!(
                p.tuple(g).iter().all(|c| matches!(c, Cell::Node(_))),
                "{config}, k = {k}: group {g} publishes a value that is no hierarchy node"
            );
        }
        assert!(out.report.smallest_class >= k, "{config}, k = {k}");
        let g = out.report.granularity;
        assert!(
            g <= figure * 1.01,
            "{config}, k = {k}: granularity {g:.6} is more than 1 % above {figure:.6}"
        );
        if let Some(bound) = out.details.get("lower_bound").and_then(|b| b.as_f64()) {
            assert!(
                bound > 0.0 && bound <= g + 1e-12,
                "{config}, k = {k}: bound {bound} against {g}"
            );
        }
    }
}

#[test]
fn adult_hierarchy_nodes_only() {
    check(
        "adult.toml",
        |_| {},
        [0.021908, 0.052386, 0.077219, 0.105306, 0.151849, 0.194893],
        Some(5),
    );
}

#[test]
fn creditcard() {
    check(
        "creditcard.toml",
        |_| {},
        [0.103172, 0.122645, 0.139879, 0.160333, 0.195874, 0.233647],
        Some(0),
    );
}

#[test]
fn mach2019() {
    check(
        "mach2019.toml",
        |_| {},
        [0.005865, 0.015929, 0.026048, 0.039380, 0.064450, 0.091684],
        Some(3),
    );
}

#[test]
fn with_two_percent_suppression() {
    let two = |s: &mut JobSpec| s.privacy.suppression_limit = Some(0.02);
    check(
        "adult.toml",
        two,
        [0.021908, 0.052386, 0.077189, 0.105277, 0.151144, 0.194852],
        None,
    );
    check(
        "creditcard.toml",
        two,
        [0.103172, 0.122645, 0.139879, 0.160333, 0.195874, 0.233617],
        None,
    );
    check(
        "mach2019.toml",
        two,
        [0.005865, 0.015929, 0.026045, 0.039367, 0.064432, 0.091684],
        None,
    );
}

/// A suppression limit never costs granularity: cover suppresses a row
/// only where that saves loss, and keeps the release without suppression
/// when it loses no more (creditcard, k = 50 lost 0.195899 with 32 rows
/// suppressed, against 0.195874 with none, before it did).
#[test]
fn suppression_never_adds_loss() {
    for config in ["adult.toml", "creditcard.toml", "mach2019.toml"] {
        let (mut spec, table) = job(config);
        for k in [10, 50, 100] {
            spec.privacy.k = k;
            spec.privacy.suppression_limit = None;
            let without = kanon_engine::anonymize(&spec, &table).unwrap().report;
            spec.privacy.suppression_limit = Some(0.02);
            let with = kanon_engine::anonymize(&spec, &table).unwrap().report;
            assert!(
                with.granularity <= without.granularity + 1e-12,
                "{config}, k = {k}: {} with 2 % against {} without",
                with.granularity,
                without.granularity
            );
        }
    }
}

#[test]
fn with_distinct_l_2() {
    let l2 = |s: &mut JobSpec| s.privacy.l = Some(2);
    check(
        "adult.toml",
        l2,
        [0.106495, 0.120381, 0.138378, 0.145195, 0.161913, 0.199602],
        None,
    );
    check(
        "creditcard.toml",
        l2,
        [0.131294, 0.140896, 0.147063, 0.161561, 0.195874, 0.233647],
        None,
    );
    check(
        "mach2019.toml",
        l2,
        [0.009731, 0.016037, 0.026051, 0.039380, 0.064450, 0.091684],
        None,
    );
}
