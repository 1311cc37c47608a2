//! MDAV (Domingo-Ferrer and Torra 2005, the clustering of microaggregation)
//! on the bundled Adult job (8 QIs, age numeric with its intervals, the
//! other seven categorical) with the job's defaults, at k = 10 and k = 100
//! on all 30,162 rows and at k = 10 on the first 5,000. Each iteration is a whole
//! `anonymize`: clustering, verification and metrics.
//!
//! `cargo bench -p kanon-benches --bench mdav -- --warm-up-time 1 --measurement-time 3`

use kanon_benches as common;

use criterion::{criterion_group, criterion_main, BenchmarkId, Criterion};

fn bench(c: &mut Criterion) {
    let mut group = c.benchmark_group("mdav");
    group.sample_size(10);
    for (k, rows, label) in [
        (10, None, "adult-8qi-k10"),
        (100, None, "adult-8qi-k100"),
        (10, Some(5000), "adult-5000-k10"),
    ] {
        let (mut spec, _) = common::adult_job(&[]);
        spec.privacy.k = k;
        spec.algorithm.name = "mdav".into();
        spec.algorithm.params.clear();
        let table = common::adult_rows_table(&spec, rows);
        group.bench_function(BenchmarkId::new(label, "default"), |b| {
            b.iter(|| kanon_engine::anonymize(&spec, &table).unwrap())
        });
    }
    group.finish();
}

criterion_group!(benches, bench);
criterion_main!(benches);
