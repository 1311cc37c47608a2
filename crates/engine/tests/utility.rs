//! The utility-metric registry: the built-in metrics agree with the report's
//! own figures on an Adult release, and a metric defined in this file,
//! registered through the public API, is computed for every run.

mod common;

use kanon_engine::metrics::utility::{self, ReleaseView, UtilityMetric};
use kanon_engine::partition::SUPPRESSED;

fn close(a: f64, b: f64) -> bool {
    (a - b).abs() <= 1e-9 * a.abs().max(b.abs()).max(1.0)
}

fn suppressed_share(r: &ReleaseView<'_>) -> f64 {
    let rows = r.partition.group_of_row();
    rows.iter().filter(|&&g| g == SUPPRESSED).count() as f64 / rows.len().max(1) as f64
}

#[test]
fn built_in_metrics_agree_with_the_report_and_registered_ones_are_reported() {
    utility::register(UtilityMetric {
        name: "suppressed-share",
        summary: "share of rows withheld (a test)",
        measure: suppressed_share,
    })
    .unwrap();
    let (mut spec, table) = common::adult_table(&[]);
    spec.privacy.suppression_limit = Some(0.02);
    let run = kanon_engine::anonymize(&spec, &table).unwrap();
    let r = &run.report;
    let loss = |name: &str| {
        r.utility_metrics
            .iter()
            .find(|u| u.metric == name)
            .unwrap_or_else(|| panic!("{name} reported"))
            .loss
    };
    let k = spec.privacy.k as f64;
    for (name, expected) in [
        ("ncp", r.ncp),
        ("granularity", r.granularity),
        ("precision-loss", 1.0 - r.precision),
        ("whd", r.distortion_ratio),
        ("discernibility", r.discernibility),
        ("aecs", r.aecs / k),
    ] {
        assert!(
            close(loss(name), expected),
            "{name}: {} vs {expected}",
            loss(name)
        );
    }
    assert!(close(
        loss("suppressed-share"),
        r.suppressed_rows as f64 / r.rows_in as f64
    ));
    let names: Vec<&str> = r
        .utility_metrics
        .iter()
        .map(|u| u.metric.as_str())
        .collect();
    assert_eq!(names.last(), Some(&"suppressed-share"));
    assert!(utility::get("suppressed-share").is_some());
}
