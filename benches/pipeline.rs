//! The engine's whole pipeline, as `kanon anonymize` runs it in memory:
//! encode -> anonymise (the partition verified) -> recode -> release order
//! -> verify the release by its labels ([`kanon_engine::release`], via
//! `kanon_benches::release`), on generated Adult-like rows
//! ([`kanon_benches::adult_like`], seed 1) under the bundled job
//! (`configs/adult.toml` with `mondrian`: 8 QIs, k = 10, no `block_size`, so
//! tables above 100,000 rows run in blocks of 10,000), at 10,000 and 100,000
//! rows, and 1,000,000 with `KANON_BENCH_LARGE=1` (peak RSS about 450 MB).
//! Generating the rows is not timed.
//!
//! ```text
//! cargo bench -p kanon-benches --bench pipeline -- --warm-up-time 1 --measurement-time 3
//! KANON_BENCH_LARGE=1 cargo bench -p kanon-benches --bench pipeline -- --warm-up-time 1 --measurement-time 3
//! ```

use criterion::{criterion_group, criterion_main, BenchmarkId, Criterion, Throughput};
use kanon_benches as common;

/// Set to `1` to add the 1,000,000-row size.
const LARGE: &str = "KANON_BENCH_LARGE";

fn bench(c: &mut Criterion) {
    let (mut spec, hierarchies) = common::adult_job(&[]);
    spec.algorithm.name = "mondrian".into();
    let mut sizes = vec![10_000, 100_000];
    if std::env::var(LARGE).is_ok_and(|v| v == "1") {
        sizes.push(1_000_000);
    }
    let mut group = c.benchmark_group("pipeline");
    group.sample_size(10);
    for rows in sizes {
        let batches = common::adult_like(rows, 1);
        // Once outside the timing: the release is complete and k-anonymous.
        let verified = common::release(&spec, &hierarchies, &batches);
        assert!(verified.smallest_class >= spec.privacy.k);
        group.throughput(Throughput::Elements(rows as u64));
        group.bench_with_input(
            BenchmarkId::new("adult-like-8qi-k10/mondrian", rows),
            &batches,
            |b, batches| b.iter(|| common::release(&spec, &hierarchies, batches)),
        );
    }
    group.finish();
}

criterion_group!(benches, bench);
criterion_main!(benches);
