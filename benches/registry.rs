//! Every registered algorithm ([`kanon_engine::algorithms::registry`]), in
//! registry order, on the first 5,000 rows of the bundled Adult job at
//! k = 10 with its default parameters: an algorithm is benchmarked here as
//! soon as it is registered, with no bench file of its own. Each iteration
//! is a whole `anonymize`: the algorithm, verification and metrics. The
//! files beside this one measure each built-in algorithm at more settings.
//!
//! `cargo bench -p kanon-benches --bench registry -- --warm-up-time 1 --measurement-time 3`

use kanon_benches as common;

use criterion::{criterion_group, criterion_main, BenchmarkId, Criterion};
use kanon_engine::spec::JobSpec;

/// What an algorithm needs beyond k: the model it runs under.
fn needs(name: &str, spec: &mut JobSpec) {
    if name == "safepub" {
        // Differential privacy only, with a fixed key for its draws.
        std::env::set_var(
            kanon_engine::algorithms::safepub::KEY_ENV,
            "benchmark-key-of-differential-privacy-0123456789",
        );
        spec.privacy.k = 1;
        spec.privacy.suppression_limit = Some(1.0);
        spec.privacy.models.insert(
            "differential-privacy".into(),
            serde_json::json!({"epsilon": 2.0, "delta": 1e-6, "generalisation": "medium"}),
        );
    }
}

fn bench(c: &mut Criterion) {
    let mut group = c.benchmark_group("registry");
    group.sample_size(10);
    for registration in kanon_engine::algorithms::registry::all() {
        let name = registration.name;
        let (mut spec, _) = common::adult_job(&[]);
        spec.privacy.k = 10;
        spec.privacy.models.clear();
        spec.algorithm.name = name.into();
        spec.algorithm.params.clear();
        needs(name, &mut spec);
        let table = common::adult_rows_table(&spec, Some(5000));
        // A registered algorithm that cannot run this job fails the bench
        // (and CI, which runs every bench once): give it its needs above.
        if let Err(e) = kanon_engine::anonymize(&spec, &table) {
            panic!("{name} does not run on Adult at k = 10: {e}; add what it needs to `needs`");
        }
        group.bench_function(BenchmarkId::new(name, "adult-5000-k10"), |b| {
            b.iter(|| kanon_engine::anonymize(&spec, &table).unwrap())
        });
    }
    group.finish();
}

criterion_group!(benches, bench);
criterion_main!(benches);
