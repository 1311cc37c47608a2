//! Runs a job file on its (Parquet) input through the engine alone and prints
//! the report as JSON: a measuring tool for algorithm work before the CLI.
//!
//! ```text
//! cargo run --release -p kanon-engine --example run_job -- configs/adult.toml [key=value ...]
//! ```
//! Overrides: `k=10`, `l=4`, `diversity=entropy`, `c=2`, `algorithm=kaca`, `suppression_limit=0.02`, `qis=age,sex,race` (keeps those QIs in
//! that order, other QIs become insensitive), `rows=5000` (first rows only),
//! `windows=2,3,4` (or `windows=` for hierarchy nodes only) on every QI with intervals,
//! and any algorithm parameter as `param.NAME=JSON` (e.g. `param.strategy="random"`);
//! `requirement=age,sex:10` adds an anonymity requirement `<shield, k>`
//! (repeatable; `k=0` leaves only the requirements).

#[path = "../tests/common/mod.rs"]
mod common;

use std::time::Instant;

fn main() {
    let mut args = std::env::args().skip(1);
    let config = args.next().expect("usage: run_job CONFIG [key=value ...]");
    let text = std::fs::read_to_string(&config).expect("readable config");
    let mut spec: kanon_engine::spec::JobSpec = toml::from_str(&text).expect("valid job file");
    let mut rows: Option<usize> = None;
    for arg in args {
        let (key, value) = arg.split_once('=').expect("overrides are key=value");
        match key {
            "k" => spec.privacy.k = value.parse().expect("k is a number"),
            "l" => spec.privacy.l = Some(value.parse().expect("l is a number")),
            "diversity" => {
                spec.privacy.diversity =
                    Some(serde_json::from_value(value.into()).expect("distinct|entropy|recursive"))
            }
            "c" => spec.privacy.c = Some(value.parse().expect("c is a number")),
            "algorithm" => spec.algorithm.name = value.to_string(),
            "seed" => spec.algorithm.seed = value.parse().expect("seed is a number"),
            "suppression_limit" => {
                spec.privacy.suppression_limit = Some(value.parse().expect("a share in 0..=1"))
            }
            "rows" => rows = Some(value.parse().expect("rows is a number")),
            "requirement" => spec
                .privacy
                .requirements
                .push(value.parse().unwrap_or_else(|e| panic!("{e}"))),
            "qis" => {
                let wanted: Vec<&str> = value.split(',').collect();
                let mut attrs = Vec::new();
                for w in &wanted {
                    let mut a = spec
                        .attributes
                        .iter()
                        .find(|a| a.name == *w)
                        .expect("known attribute")
                        .clone();
                    a.role = kanon_engine::spec::Role::QuasiIdentifier;
                    attrs.push(a);
                }
                for a in &spec.attributes {
                    if !wanted.contains(&a.name.as_str()) {
                        let mut a = a.clone();
                        if a.role == kanon_engine::spec::Role::QuasiIdentifier {
                            a.role = kanon_engine::spec::Role::Insensitive;
                        }
                        attrs.push(a);
                    }
                }
                spec.attributes = attrs;
            }
            "windows" => {
                // `windows=` (nodes only) or `windows=2,3,4`, on every
                // attribute with intervals or cuts.
                let widths: Vec<usize> = value
                    .split(',')
                    .filter(|w| !w.is_empty())
                    .map(|w| w.parse().expect("windows are widths"))
                    .collect();
                for a in &mut spec.attributes {
                    if a.intervals.is_some() || a.cuts.is_some() {
                        a.windows = widths.clone();
                    }
                }
            }
            p if p.starts_with("param.") => {
                let v = serde_json::from_str(value)
                    .unwrap_or(serde_json::Value::String(value.to_string()));
                spec.algorithm
                    .params
                    .insert(p["param.".len()..].to_string(), v);
            }
            other => panic!("unknown override {other}"),
        }
    }
    let hierarchies = common::load_hierarchies(&spec);
    let mut batches = common::adult_batches_from(spec.input.path.as_deref().expect("input.path"));
    if let Some(n) = rows {
        batches = common::first_rows(batches, n);
    }
    let t = Instant::now();
    let table = common::encode(&spec, &hierarchies, &batches);
    let encode = t.elapsed();
    let t = Instant::now();
    let result = kanon_engine::anonymize(&spec, &table).unwrap_or_else(|e| panic!("{e}"));
    let total = t.elapsed();
    let mut sizes = result.partition.group_sizes();
    sizes.retain(|&s| s > 0);
    sizes.sort_unstable();
    let k = spec.privacy.k;
    let quantile = |p: f64| {
        sizes
            .get(((sizes.len() as f64 - 1.0) * p).round() as usize)
            .copied()
    };
    // The published groups' sizes against k: how far the classes overshoot.
    let group_sizes = serde_json::json!({
        "groups": sizes.len(),
        "min": sizes.first(),
        "max": sizes.last(),
        "mean": sizes.iter().sum::<usize>() as f64 / sizes.len().max(1) as f64,
        "p50": quantile(0.5),
        "p90": quantile(0.9),
        "p99": quantile(0.99),
        "at_least_2k": sizes.iter().filter(|&&s| s >= 2 * k).count(),
        "rows_in_groups_of_at_least_2k": sizes.iter().filter(|&&s| s >= 2 * k).sum::<usize>(),
    });
    let out = serde_json::json!({
        "algorithm": result.algorithm,
        "k": spec.privacy.k,
        "encode_s": encode.as_secs_f64(),
        "anonymize_s": total.as_secs_f64(),
        "timings": result.timings,
        "details": result.details,
        "group_sizes": group_sizes,
        "verified": result.verified,
        "report": result.report,
    });
    println!("{}", serde_json::to_string_pretty(&out).unwrap());
}
