//! The history check of a Delta table's versions (issue 31, item 2):
//! `kanon_engine::history::check` over 30 daily versions of an `append`
//! series, day 1 publishing `people` people in classes of 5 and every later
//! day 1 % more in classes of their own, each version holding every day
//! before it (what a reader of the table can time-travel to). Every person
//! is in every version from their day on: the check tracks each person
//! over 30 versions and forms the atoms of every class.
//!
//! `cargo bench -p kanon-benches --bench history -- --warm-up-time 1 --measurement-time 5`

use criterion::{criterion_group, criterion_main, BenchmarkId, Criterion};
use kanon_engine::history::{check, Published, View};

/// The releases of 30 days: day 1 `people` people, later days 1 % of it.
fn days(people: usize) -> Vec<Vec<Published>> {
    let mut out = Vec::new();
    let mut next = 0u128;
    for day in 0..30 {
        let n = if day == 0 { people } else { people / 100 };
        out.push(
            (0..n)
                .map(|i| {
                    let id = next + i as u128;
                    Published {
                        person: id.wrapping_mul(0x9e37_79b9_7f4a_7c15_f39c_c060_5ced_c835),
                        // Classes of 5 people; a day's classes are its own.
                        labels: (day as u64) << 40 | (i / 5) as u64,
                        rows: id as u64,
                        values: vec![(i % 5) as u64],
                    }
                })
                .collect(),
        );
        next += n as u128;
    }
    out
}

fn bench(c: &mut Criterion) {
    let mut g = c.benchmark_group("history_check_30_versions");
    g.sample_size(10);
    for people in [100_000usize, 1_000_000] {
        let releases = days(people);
        let views: Vec<View<'_>> = (0..30)
            .map(|v| View {
                version: v as i64,
                releases: releases[..=v].iter().map(Vec::as_slice).collect(),
            })
            .collect();
        assert!(check(&views, 5, 2).is_empty());
        g.bench_with_input(BenchmarkId::from_parameter(people), &views, |b, views| {
            b.iter(|| check(views, 5, 2))
        });
    }
    g.finish();
}

criterion_group!(benches, bench);
criterion_main!(benches);
