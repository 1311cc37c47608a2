//! HeuristicMin on Adult (the HeuristicMin paper): the paper's search alone and with the
//! proof of optimality, five QIs at k = 10.
//!
//! ```text
//! cargo bench -p kanon-benches --bench heuristic_min -- --warm-up-time 1 --measurement-time 3
//! ```

use kanon_benches as common;

use criterion::{criterion_group, criterion_main, Criterion};
use kanon_engine::anonymize;

fn adult_five_qis(c: &mut Criterion) {
    let qis = ["age", "sex", "race", "marital-status", "education"];
    let (mut spec, table) = common::adult_table(&qis);
    spec.algorithm.name = "heuristic-min".into();
    spec.privacy.k = 10;
    let mut group = c.benchmark_group("heuristic-min/adult-5qi-k10");
    group.sample_size(10);
    for (name, prove) in [("paper-search", false), ("paper-search+proof", true)] {
        let mut s = spec.clone();
        s.algorithm
            .params
            .insert("prove".into(), serde_json::Value::Bool(prove));
        group.bench_function(name, |b| b.iter(|| anonymize(&s, &table).unwrap()));
    }
    group.finish();
}

criterion_group!(benches, adult_five_qis);
criterion_main!(benches);
