//! Datafly and Incognito (full-domain recoding, issue 3) on the bundled
//! Adult job: 8 QIs with their hierarchies, 6,480 lattice nodes.
//!
//! ```text
//! cargo bench -p kanon-benches --bench full_domain -- --warm-up-time 1 --measurement-time 3
//! ```

use kanon_benches as common;

use criterion::{criterion_group, criterion_main, BenchmarkId, Criterion};
use kanon_engine::algorithms::{by_name, Context};
use kanon_engine::encode::EquivalenceClasses;
use kanon_engine::privacy::Privacy;

fn full_domain(c: &mut Criterion) {
    let (mut spec, table) = common::adult_table(&[]);
    let classes = EquivalenceClasses::of(&table);
    let mut group = c.benchmark_group("adult_8_qis");
    group.sample_size(10);
    for algorithm in ["datafly", "incognito"] {
        spec.algorithm.name = algorithm.to_string();
        spec.algorithm.params.clear();
        let run = by_name(&spec).unwrap();
        for (k, limit) in [(2, 0.0), (10, 0.0), (100, 0.0), (10, 0.02)] {
            let privacy = Privacy::k_anonymity(k).with_suppression_limit(limit);
            let ctx = Context {
                table: &table,
                classes: &classes,
                privacy: &privacy,
                spec: &spec,
                cancel: kanon_engine::cancel::Cancellation::never(),
                progress: kanon_engine::progress::Silent::sink(),
                blocks: kanon_engine::algorithms::partitioned::LocalBlocks::get(),
            };
            group.bench_with_input(
                BenchmarkId::new(algorithm, format!("k={k},s={limit}")),
                &ctx,
                |b, ctx| b.iter(|| run.run(ctx).unwrap()),
            );
        }
    }
    group.finish();
}

criterion_group!(benches, full_domain);
criterion_main!(benches);
