//! Datafly and Incognito (full-domain recoding, issue 3) on the bundled
//! Adult job: 8 QIs with their hierarchies, 6,480 lattice nodes; and both
//! under δ-presence (issue 36, `configs/adult-delta-presence.toml`: the
//! 30,162 records as the population, 9,195 in the study), where every node
//! also counts the population and Incognito cannot prune.
//!
//! ```text
//! cargo bench -p kanon-benches --bench full_domain -- --warm-up-time 1 --measurement-time 3
//! ```

use kanon_benches as common;

use criterion::{criterion_group, criterion_main, BenchmarkId, Criterion};
use kanon_engine::algorithms::{by_name, Context};
use kanon_engine::encode::EquivalenceClasses;
use kanon_engine::encode::QiTable;
use kanon_engine::privacy::Privacy;
use kanon_engine::spec::JobSpec;

/// The context of a whole-table run on this machine.
fn context<'a>(
    table: &'a QiTable,
    classes: &'a EquivalenceClasses,
    privacy: &'a Privacy,
    spec: &'a JobSpec,
) -> Context<'a> {
    Context {
        table,
        classes,
        privacy,
        spec,
        cancel: kanon_engine::cancel::Cancellation::never(),
        progress: kanon_engine::progress::Silent::sink(),
        blocks: kanon_engine::algorithms::partitioned::LocalBlocks::get(),
    }
}

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
            let ctx = context(&table, &classes, &privacy, &spec);
            group.bench_with_input(
                BenchmarkId::new(algorithm, format!("k={k},s={limit}")),
                &ctx,
                |b, ctx| b.iter(|| run.run(ctx).unwrap()),
            );
        }
    }
    group.finish();
}

fn delta_presence(c: &mut Criterion) {
    let mut spec = common::config("adult-delta-presence.toml");
    let hierarchies = common::load_hierarchies(&spec);
    let table = common::encode(
        &spec,
        &hierarchies,
        &common::adult_batches_from("data/adult/adult-presence.parquet"),
    );
    let classes = EquivalenceClasses::of(&table);
    let mut group = c.benchmark_group("adult_delta_presence");
    group.sample_size(10);
    for algorithm in ["datafly", "incognito"] {
        spec.algorithm.name = algorithm.to_string();
        let privacy = Privacy::from_spec(&spec).unwrap();
        let run = by_name(&spec).unwrap();
        let ctx = context(&table, &classes, &privacy, &spec);
        group.bench_with_input(
            BenchmarkId::new(algorithm, "k=5,d=[0.05,0.5],s=0.05"),
            &ctx,
            |b, ctx| b.iter(|| run.run(ctx).unwrap()),
        );
    }
    group.finish();
}

criterion_group!(benches, full_domain, delta_presence);
criterion_main!(benches);
