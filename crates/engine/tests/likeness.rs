//! β-likeness and δ-disclosure privacy named under `[privacy.models]`:
//! job validation, and releases of Adult by every algorithm that honours
//! models beyond k, made through the release path (both verifiers) and
//! checked here against the definitions computed from the released labels
//! alone (Cao and Karras, PVLDB 2012; Brickell and Shmatikov, KDD 2008).

mod common;

use std::collections::HashMap;

use kanon_engine::privacy::Privacy;
use kanon_engine::spec::JobSpec;
use kanon_engine::Error;

/// The Adult job (8 QIs, `salary-class` sensitive) with `models` as its
/// `[privacy.models]` and `algorithm`.
fn adult_with(models: &str, algorithm: &str) -> JobSpec {
    let (mut spec, _) = common::adult_job(&[]);
    let extra: JobSpec =
        toml::from_str(&format!("[privacy]\nk = {}\n{models}\n", spec.privacy.k)).unwrap();
    spec.privacy.models = extra.privacy.models;
    spec.algorithm.name = algorithm.into();
    spec
}

fn shares(values: &[String]) -> HashMap<&str, f64> {
    let mut m: HashMap<&str, f64> = HashMap::new();
    for v in values {
        *m.entry(v.as_str()).or_default() += 1.0 / values.len() as f64;
    }
    m
}

/// Enhanced β-likeness from the labels: (p - q) / q <= min(β, -ln q) for
/// every value with p > q, against the published rows.
fn enhanced_beta_holds(class: &[String], all: &[String], beta: f64) -> bool {
    let (p, q) = (shares(class), shares(all));
    p.iter()
        .all(|(v, &p)| p <= q[v] || (p - q[v]) / q[v] <= beta.min(-q[v].ln()) + 1e-9)
}

/// δ-disclosure from the labels: every published value has |log2 p/q| < δ.
fn delta_holds(class: &[String], all: &[String], delta: f64) -> bool {
    let (p, q) = (shares(class), shares(all));
    q.iter()
        .all(|(v, &q)| (p.get(v).copied().unwrap_or(0.0) / q).log2().abs() < delta)
}

#[test]
fn job_settings_are_validated_naming_the_setting() {
    for (models, setting, says) in [
        (
            "[privacy.models.beta-likeness]\nbeta = 0",
            "privacy.models.beta-likeness.beta",
            "not above 0",
        ),
        (
            "[privacy.models.beta-likeness]\nbeta = 1\nvariant = \"strong\"",
            "privacy.models.beta-likeness",
            "unknown variant",
        ),
        (
            "[privacy.models.beta-likeness]\nbeta = 1\ncolumn = \"age\"",
            "privacy.models.beta-likeness.column",
            "not an attribute with `role = \"sensitive\"`",
        ),
        (
            "[privacy.models.delta-disclosure]\ndelta = -1",
            "privacy.models.delta-disclosure.delta",
            "not above 0",
        ),
        (
            "[privacy.models.delta-disclosure]\nd = 1",
            "privacy.models.delta-disclosure",
            "unknown field",
        ),
    ] {
        let err = Privacy::from_spec(&adult_with(models, "mondrian")).unwrap_err();
        let msg = err.to_string();
        assert!(matches!(err, Error::Spec { .. }), "{models}: {msg}");
        assert!(
            msg.contains(setting) && msg.contains(says),
            "{models}: {msg}"
        );
    }
    let described = Privacy::from_spec(&adult_with(
        "[privacy.models.beta-likeness]\nbeta = 1\n[privacy.models.delta-disclosure]\ndelta = 1.2",
        "mondrian",
    ))
    .unwrap()
    .describe();
    assert!(
        described.contains("enhanced β-likeness (β = 1) on `salary-class`")
            && described.contains("δ-disclosure privacy (δ = 1.2, log base 2) on `salary-class`"),
        "{described}"
    );
}

#[test]
fn every_algorithm_with_the_capability_releases_adult_that_holds_by_the_labels() {
    let batches = common::first_rows(common::adult_batches(), 3000);
    let input = arrow::compute::concat_batches(&batches[0].schema(), &batches).unwrap();
    for (models, holds) in [
        (
            "[privacy.models.beta-likeness]\nbeta = 1.0",
            (|c: &[String], all: &[String]| enhanced_beta_holds(c, all, 1.0))
                as fn(&[String], &[String]) -> bool,
        ),
        (
            "[privacy.models.delta-disclosure]\ndelta = 1.2",
            |c: &[String], all: &[String]| delta_holds(c, all, 1.2),
        ),
    ] {
        for algorithm in [
            "mondrian",
            "cover",
            "kaca",
            "l-clustering",
            "sbc",
            "datafly",
            "incognito",
        ] {
            let spec = adult_with(models, algorithm);
            let hierarchies = common::load_hierarchies(&spec);
            let (release, suppressed) = common::release(&spec, &hierarchies, &input, 1 << 20)
                .unwrap_or_else(|e| panic!("{algorithm}, {models}: {e}"));
            assert_eq!(release.num_rows() + suppressed, input.num_rows());
            let classes = common::released_classes(&spec, &release, "salary-class");
            let all: Vec<String> = classes.iter().flatten().cloned().collect();
            // The local recodings keep more than one class; the full-domain
            // baselines (no suppression here) may have to publish one.
            if !["datafly", "incognito"].contains(&algorithm) {
                assert!(classes.len() > 1, "{algorithm}, {models}: one class");
            }
            for c in &classes {
                assert!(
                    holds(c, &all),
                    "{algorithm}, {models}: a class of {} rows",
                    c.len()
                );
                assert!(c.len() >= spec.privacy.k, "{algorithm}");
            }
        }
    }
}

#[test]
fn heuristic_min_is_refused_naming_the_algorithms_that_can() {
    let spec = adult_with(
        "[privacy.models.delta-disclosure]\ndelta = 1.2",
        "heuristic-min",
    );
    let hierarchies = common::load_hierarchies(&spec);
    let batches = common::first_rows(common::adult_batches(), 200);
    let err = common::release(&spec, &hierarchies, &batches[0], 1 << 20).unwrap_err();
    let msg = err.to_string();
    assert!(
        msg.contains("heuristic-min") && msg.contains("mondrian"),
        "{msg}"
    );
}
