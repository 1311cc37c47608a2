//! SafePub ((ε, δ)-differential privacy; Bild, Kuhn and Prasser, PoPETs
//! 2018) on the bundled Adult job (8 QIs with their hierarchies), ε = 2 and
//! δ = 1e-6: SafePub's search (search budget 0.1 over 100 and 300 steps)
//! and a fixed data-independent generalisation (`medium`), on all 30,162
//! rows. Each iteration is a whole `anonymize` (sampling, search,
//! verification and metrics); the draws are keyed (`KANON_DP_KEY`) so every
//! iteration does the same work.
//!
//! `cargo bench -p kanon-benches --bench safepub -- --warm-up-time 1 --measurement-time 3`

use kanon_benches as common;

use criterion::{criterion_group, criterion_main, BenchmarkId, Criterion};

fn bench(c: &mut Criterion) {
    std::env::set_var(
        kanon_engine::algorithms::safepub::KEY_ENV,
        "benchmark-key-of-differential-privacy-0123456789",
    );
    let mut group = c.benchmark_group("safepub");
    group.sample_size(10);
    for (label, model) in [
        (
            "search-100",
            serde_json::json!({"epsilon": 2.0, "delta": 1e-6, "search_budget": 0.1, "steps": 100}),
        ),
        (
            "search-300",
            serde_json::json!({"epsilon": 2.0, "delta": 1e-6, "search_budget": 0.1, "steps": 300}),
        ),
        (
            "medium",
            serde_json::json!({"epsilon": 2.0, "delta": 1e-6, "generalisation": "medium"}),
        ),
    ] {
        let (mut spec, _) = common::adult_job(&[]);
        spec.privacy.k = 1;
        spec.privacy.suppression_limit = Some(1.0);
        spec.privacy.models.clear();
        spec.privacy
            .models
            .insert("differential-privacy".into(), model);
        spec.algorithm.name = "safepub".into();
        spec.algorithm.params.clear();
        let table = common::adult_rows_table(&spec, None);
        group.bench_function(BenchmarkId::new("adult-8qi", label), |b| {
            b.iter(|| kanon_engine::anonymize(&spec, &table).unwrap())
        });
    }
    group.finish();
}

criterion_group!(benches, bench);
criterion_main!(benches);
