//! KACA on the bundled Adult data (8 QIs with the ARX hierarchies,
//! `configs/adult-kaca.toml`): the tuned settings of the config and the
//! paper's (random order, uniform WHD), k = 10, and the first 10,000 rows.
//!
//! `cargo bench -p kanon-benches --bench kaca -- --warm-up-time 1 --measurement-time 3`

use kanon_benches as common;

use criterion::{criterion_group, criterion_main, BenchmarkId, Criterion};
use kanon_engine::encode::QiTable;
use kanon_engine::spec::JobSpec;

fn job(rows: Option<usize>, paper: bool) -> (JobSpec, QiTable) {
    let mut spec = common::config("adult-kaca.toml");
    if paper {
        spec.algorithm.params.clear();
    }
    let table = common::adult_rows_table(&spec, rows);
    (spec, table)
}

fn bench(c: &mut Criterion) {
    let mut group = c.benchmark_group("kaca");
    group.sample_size(10);
    for (rows, label) in [
        (Some(10_000), "adult-10000-8qi-k10"),
        (None, "adult-8qi-k10"),
    ] {
        for (paper, settings) in [(false, "tuned"), (true, "paper")] {
            let (spec, table) = job(rows, paper);
            group.bench_function(BenchmarkId::new(label, settings), |b| {
                b.iter(|| kanon_engine::anonymize(&spec, &table).unwrap())
            });
        }
    }
    group.finish();
}

criterion_group!(benches, bench);
criterion_main!(benches);
