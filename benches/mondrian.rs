//! Mondrian (`mondrian`) on the bundled Adult data (`configs/adult.toml`: 8 QIs with the
//! ARX hierarchies, age as intervals), k = 10: the default least-loss cut
//! and the paper's widest-range cut, on the first 10,000 rows and on all
//! 30,162; the hierarchy-bound preset (`mondrian-hierarchy`, the bundled
//! job's algorithm) at k = 10 and 100 on all rows; and the whole
//! pipeline's engine part (encode + anonymise + recode) on all rows.
//!
//! `cargo bench -p kanon-benches --bench mondrian -- --warm-up-time 1 --measurement-time 3`

use kanon_benches as common;

use criterion::{criterion_group, criterion_main, BenchmarkId, Criterion};
use kanon_engine::recode::Recoder;

fn bench(c: &mut Criterion) {
    let mut group = c.benchmark_group("mondrian");
    group.sample_size(10);
    let (mut spec, hierarchies) = common::adult_job(&[]);
    spec.algorithm.name = "mondrian".into();
    let all = common::adult_batches();
    for (rows, label) in [
        (Some(10_000), "adult-10000-8qi-k10"),
        (None, "adult-8qi-k10"),
    ] {
        let batches = match rows {
            Some(n) => common::first_rows(all.clone(), n),
            None => all.clone(),
        };
        let table = common::encode(&spec, &hierarchies, &batches);
        for cut in ["least-loss", "widest"] {
            let mut spec = spec.clone();
            spec.algorithm.params.insert("cut".into(), cut.into());
            group.bench_function(BenchmarkId::new(label, cut), |b| {
                b.iter(|| kanon_engine::anonymize(&spec, &table).unwrap())
            });
        }
    }
    // The bundled job's algorithm: hierarchy-bound Mondrian (residue passes,
    // gain-per-bit cuts, tidying), at the k of the job and at k = 100.
    let table = common::encode(&spec, &hierarchies, &all);
    for k in [10, 100] {
        let mut spec = spec.clone();
        spec.algorithm.name = "mondrian-hierarchy".into();
        spec.privacy.k = k;
        group.bench_function(
            BenchmarkId::new("adult-8qi", format!("mondrian-hierarchy-k{k}")),
            |b| b.iter(|| kanon_engine::anonymize(&spec, &table).unwrap()),
        );
    }
    group.bench_function("adult-8qi-k10/encode-anonymize-recode", |b| {
        b.iter(|| {
            let table = common::encode(&spec, &hierarchies, &all);
            let result = kanon_engine::anonymize(&spec, &table).unwrap();
            let recoder = Recoder::new(&spec, &table, &result.partition);
            let mut offset = 0;
            for batch in &all {
                recoder.recode(batch, offset).unwrap();
                offset += batch.num_rows();
            }
        })
    });
    group.finish();
}

criterion_group!(benches, bench);
criterion_main!(benches);
