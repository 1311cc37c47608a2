//! L-clustering (the L-clustering paper) on Adult with occupation sensitive
//! (`configs/adult-occupation.toml`: 8 QIs, distinct l-diversity), full
//! table and the first 5,000 rows, against l-diverse Mondrian.
//!
//! ```text
//! cargo bench -p kanon-benches --bench l_clustering -- --warm-up-time 1 --measurement-time 3
//! ```

use kanon_benches as common;

use criterion::{criterion_group, criterion_main, Criterion};
use kanon_engine::encode::QiTable;
use kanon_engine::spec::JobSpec;

fn job(rows: Option<usize>) -> (JobSpec, QiTable) {
    let spec = common::config("adult-occupation.toml");
    let table = common::adult_rows_table(&spec, rows);
    (spec, table)
}

fn bench(c: &mut Criterion) {
    let mut group = c.benchmark_group("l_clustering");
    group.sample_size(10);
    for (name, rows) in [("adult_5000", Some(5000)), ("adult_full", None)] {
        let (spec, table) = job(rows);
        for (label, algorithm, param) in [
            ("l4_flexible", "l-clustering", None),
            (
                "l4_class_distance",
                "l-clustering",
                Some(("distance", "class")),
            ),
            (
                "l4_hierarchy",
                "l-clustering",
                Some(("generalisation", "hierarchy")),
            ),
            ("l4_mondrian", "mondrian", None),
        ] {
            let mut spec = spec.clone();
            spec.algorithm.name = algorithm.into();
            if let Some((k, v)) = param {
                spec.algorithm.params.insert(k.into(), v.into());
            }
            group.bench_function(format!("{name}/{label}"), |b| {
                b.iter(|| kanon_engine::anonymize(&spec, &table).expect("l-diverse release"))
            });
        }
    }
    group.finish();
}

criterion_group!(benches, bench);
criterion_main!(benches);
