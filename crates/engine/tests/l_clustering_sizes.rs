//! L-clustering near k (issue 19, item 3): on the bundled Adult job with
//! distinct 2-diversity on salary-class, classes stay below `2k` rows unless
//! l forces more, and splitting the paper's oversize clusters loses less.

mod common;

use kanon_engine::anonymize;
use kanon_engine::encode::QiTable;
use kanon_engine::partition::{Partition, SUPPRESSED};
use kanon_engine::spec::JobSpec;

fn l_clustering(spec: &JobSpec, k: usize, oversize: &str) -> JobSpec {
    let mut s = spec.clone();
    s.algorithm.name = "l-clustering".into();
    s.privacy.k = k;
    s.privacy.l = Some(2);
    s.algorithm
        .params
        .insert("oversize".into(), serde_json::json!(oversize));
    s
}

/// Per group: its rows per salary-class code.
fn sensitive_counts(table: &QiTable, partition: &Partition) -> Vec<Vec<usize>> {
    let codes = table.sensitive()[0].codes();
    let mut counts = vec![Vec::new(); partition.n_groups()];
    for (r, &g) in partition.group_of_row().iter().enumerate() {
        if g == SUPPRESSED {
            continue;
        }
        let c = codes.get(r) as usize;
        let group = &mut counts[g as usize];
        if group.len() <= c {
            group.resize(c + 1, 0);
        }
        group[c] += 1;
    }
    counts
}

/// Measured (RESULTS.md, "L-clustering near k"): mean group 67.5 rows and
/// NCP 0.1854 at k = 50, 128.3 rows and 0.2493 at k = 100; the paper's
/// clusters as they grow: 124.6 / 0.2707 and 279.3 / 0.3872.
#[test]
fn adult_classes_stay_below_2k_unless_l_forces_more() {
    let (spec, table) = common::adult_table(&[]);
    for (k, mean_bound, ncp_bound) in [(50, 72.0, 0.19), (100, 135.0, 0.255)] {
        let split = anonymize(&l_clustering(&spec, k, "split"), &table).unwrap();
        let sizes = split.partition.group_sizes();
        assert!(sizes.iter().all(|&s| s >= k), "k = {k}");
        // A group of 2k rows or more is there only because no cut into two
        // 2-diverse groups of k rows exists: it holds one row of a value.
        let counts = sensitive_counts(&table, &split.partition);
        for (size, c) in sizes.iter().zip(&counts) {
            let rarest = c.iter().copied().filter(|&n| n > 0).min().unwrap();
            assert!(
                *size < 2 * k || rarest == 1,
                "k = {k}: a group of {size} rows with sensitive counts {c:?} could be cut"
            );
        }
        let mean = sizes.iter().sum::<usize>() as f64 / sizes.len() as f64;
        assert!(mean <= mean_bound, "k = {k}: mean group {mean}");
        assert!(
            split.report.ncp <= ncp_bound,
            "k = {k}: NCP {}",
            split.report.ncp
        );

        // The paper's clusters, published whole: larger, and no row loses
        // less than in the split release.
        let keep = anonymize(&l_clustering(&spec, k, "keep"), &table).unwrap();
        let keep_sizes = keep.partition.group_sizes();
        assert!(keep_sizes.len() < sizes.len(), "k = {k}");
        assert!(split.report.ncp < keep.report.ncp, "k = {k}");
        assert!(
            split.report.uncertainty_loss < keep.report.uncertainty_loss,
            "k = {k}"
        );
    }
}
