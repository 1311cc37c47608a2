//! `cover` (the cheapest-first cover of issue 19) on the bundled Adult job
//! (8 QIs with the ARX hierarchies, age with 5/10/20-year intervals): the
//! bundled job (age windows declared) at k = 10 and k = 100, hierarchy
//! nodes only (the windows dropped) at k = 10, and nodes only with distinct
//! l = 2 on the salary class at k = 2, where most boxes fail the model.
//! Each iteration is a whole `anonymize`: search, verification and
//! metrics.
//!
//! `cargo bench -p kanon-benches --bench cover -- --warm-up-time 1 --measurement-time 3`

use kanon_benches as common;

use criterion::{criterion_group, criterion_main, BenchmarkId, Criterion};

fn bench(c: &mut Criterion) {
    let mut group = c.benchmark_group("cover");
    group.sample_size(10);
    for (k, windows, l, label) in [
        (10, true, None, "adult-8qi-k10"),
        (100, true, None, "adult-8qi-k100"),
        (10, false, None, "adult-8qi-k10-nodes-only"),
        (2, false, Some(2), "adult-8qi-k2-l2-nodes-only"),
    ] {
        let (mut spec, _) = common::adult_job(&[]);
        spec.privacy.k = k;
        spec.privacy.l = l;
        spec.algorithm.name = "cover".into();
        spec.algorithm.params.clear();
        if !windows {
            // Before encoding: the windows are the encoded column's.
            for a in &mut spec.attributes {
                a.windows.clear();
            }
        }
        let table = common::adult_rows_table(&spec, None);
        group.bench_function(BenchmarkId::new(label, "default"), |b| {
            b.iter(|| kanon_engine::anonymize(&spec, &table).unwrap())
        });
    }
    group.finish();
}

criterion_group!(benches, bench);
criterion_main!(benches);
