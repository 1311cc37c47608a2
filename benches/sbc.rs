//! SBC on the bundled Adult data without hierarchies
//! (`configs/adult-flexible.toml`): the thesis's 5,000-row, 3-QI table and
//! the full 30,162-row, 8-QI table, index and scan searches.
//!
//! `cargo bench -p kanon-benches --bench sbc -- --warm-up-time 1 --measurement-time 3`

use kanon_benches as common;

use criterion::{criterion_group, criterion_main, BenchmarkId, Criterion};
use kanon_engine::encode::QiTable;
use kanon_engine::spec::{JobSpec, Role};

fn job(qis: &[&str], rows: Option<usize>, k: usize, search: &str) -> (JobSpec, QiTable) {
    let mut spec = common::config("adult-flexible.toml");
    if !qis.is_empty() {
        spec.attributes
            .retain(|a| qis.contains(&a.name.as_str()) || a.role != Role::QuasiIdentifier);
    }
    spec.privacy.k = k;
    spec.algorithm
        .params
        .insert("search".into(), serde_json::Value::String(search.into()));
    let table = common::adult_rows_table(&spec, rows);
    (spec, table)
}

fn bench(c: &mut Criterion) {
    let mut group = c.benchmark_group("sbc");
    group.sample_size(10);
    for search in ["index", "scan"] {
        let (spec, table) = job(&["age", "sex", "native-country"], Some(5000), 10, search);
        group.bench_function(BenchmarkId::new("adult-5000-3qi-k10", search), |b| {
            b.iter(|| kanon_engine::anonymize(&spec, &table).unwrap())
        });
        let (spec, table) = job(&[], None, 10, search);
        group.bench_function(BenchmarkId::new("adult-full-8qi-k10", search), |b| {
            b.iter(|| kanon_engine::anonymize(&spec, &table).unwrap())
        });
    }
    group.finish();
}

criterion_group!(benches, bench);
criterion_main!(benches);
