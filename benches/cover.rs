//! `cover` (the cheapest-first cover of issue 19) on the bundled Adult job
//! (8 QIs with the ARX hierarchies, age with 5/10/20-year intervals), the
//! default settings at k = 10 and k = 100, and with hierarchy nodes only
//! (`window_widths = []`) at k = 10. Each iteration is a whole
//! `anonymize`: search, verification and metrics.
//!
//! `cargo bench -p kanon-benches --bench cover -- --warm-up-time 1 --measurement-time 3`

use kanon_benches as common;

use criterion::{criterion_group, criterion_main, BenchmarkId, Criterion};

fn bench(c: &mut Criterion) {
    let mut group = c.benchmark_group("cover");
    group.sample_size(10);
    for (k, windows, label) in [
        (10, true, "adult-8qi-k10"),
        (100, true, "adult-8qi-k100"),
        (10, false, "adult-8qi-k10-nodes-only"),
    ] {
        let (mut spec, table) = common::adult_table(&[]);
        spec.privacy.k = k;
        spec.algorithm.name = "cover".into();
        spec.algorithm.params.clear();
        if !windows {
            spec.algorithm
                .params
                .insert("window_widths".into(), serde_json::json!([]));
        }
        group.bench_function(BenchmarkId::new(label, "default"), |b| {
            b.iter(|| kanon_engine::anonymize(&spec, &table).unwrap())
        });
    }
    group.finish();
}

criterion_group!(benches, bench);
criterion_main!(benches);
