//! Whole-table Mondrian on generated Adult-like rows
//! ([`kanon_benches::adult_like`], seed 1) under the bundled job
//! (`configs/adult.toml`: 8 QIs, k = 10) with `block_size = 0`, so the
//! table is never cut into blocks: a measuring tool for Mondrian's own
//! cutter at millions of rows. Prints the phase times and a SHA-256 of the
//! partition (every row's group and every group's cells), so two builds can
//! be checked to publish the same partition.
//!
//! ```text
//! cargo build --release -p kanon-engine --example mondrian_scale
//! /usr/bin/time -f "%e s %M KB" $CARGO_TARGET_DIR/release/examples/mondrian_scale 1000000 [key=JSON ...]
//! ```
//! Extra arguments set algorithm parameters, e.g. `cut="widest"`.

use std::time::Instant;

use kanon_benches as common;
use sha2::{Digest, Sha256};

fn main() {
    let mut args = std::env::args().skip(1);
    let rows: usize = args
        .next()
        .expect("usage: mondrian_scale ROWS [param=JSON ...]")
        .parse()
        .expect("ROWS is a number");
    let (mut spec, hierarchies) = common::adult_job(&[]);
    spec.algorithm.name = "mondrian".into();
    spec.algorithm.params.insert("block_size".into(), 0.into());
    for arg in args {
        let (key, value) = arg.split_once('=').expect("parameters are key=JSON");
        let v = serde_json::from_str(value).unwrap_or(serde_json::Value::String(value.into()));
        spec.algorithm.params.insert(key.into(), v);
    }
    let t = Instant::now();
    let batches = common::adult_like(rows, 1);
    let generate = t.elapsed();
    let t = Instant::now();
    let table = common::encode(&spec, &hierarchies, &batches);
    drop(batches);
    let encode = t.elapsed();
    let t = Instant::now();
    let result = kanon_engine::anonymize(&spec, &table).unwrap_or_else(|e| panic!("{e}"));
    let anonymize = t.elapsed();
    let partition = &result.partition;
    let mut hash = Sha256::new();
    for g in partition.group_of_row() {
        hash.update(g.to_le_bytes());
    }
    for g in 0..partition.n_groups() {
        hash.update(format!("{:?}", partition.tuple(g)).as_bytes());
    }
    let out = serde_json::json!({
        "rows": rows,
        "generate_s": generate.as_secs_f64(),
        "encode_s": encode.as_secs_f64(),
        "anonymize_s": anonymize.as_secs_f64(),
        "timings": result.timings,
        "details": result.details,
        "groups": partition.n_groups(),
        "ncp": result.report.ncp,
        "granularity": result.report.granularity,
        "partition_sha256": format!("{:x}", hash.finalize()),
    });
    println!("{}", serde_json::to_string_pretty(&out).unwrap());
}
