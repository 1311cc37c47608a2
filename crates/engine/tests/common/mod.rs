//! Shared helpers for engine integration tests: the loaders of the bundled
//! Adult data are the benchmarks' (`kanon-benches`, one copy), and a release
//! made through the engine's release path.
#![allow(dead_code)]

use std::sync::Arc;

use arrow::array::RecordBatch;
use kanon_engine::hierarchy::Hierarchy;
use kanon_engine::spec::JobSpec;
use rustc_hash::FxHashMap;

// Each test binary uses some of them.
#[allow(unused_imports)]
pub use kanon_benches::{
    adult_batches, adult_batches_from, adult_job, adult_table, config, encode, first_rows,
    load_hierarchies, repo_root,
};

/// A release made as every front end makes it ([`kanon_engine::release`]):
/// `input` encoded, anonymised, recoded in two batches (exercising the row
/// offsets), kept in memory in buckets of at most `bucket_rows` rows, put in
/// release order,
/// verified by its labels and accounted for. Returns the release and the
/// number of suppressed rows.
pub fn release(
    spec: &JobSpec,
    hierarchies: &FxHashMap<String, Arc<Hierarchy>>,
    input: &RecordBatch,
    bucket_rows: u64,
) -> kanon_engine::Result<(RecordBatch, usize)> {
    use kanon_engine::release::{MemoryBuckets, Prepared, Release, Releaser, Session};
    let privacy = kanon_engine::privacy::Privacy::from_spec(spec)?;
    let mut session = Session::new(spec, hierarchies, &input.schema(), "the test input")?;
    let half = input.num_rows() / 2;
    let parts = [
        input.slice(0, half),
        input.slice(half, input.num_rows() - half),
    ];
    for part in &parts {
        session.push(part)?;
    }
    let encoded = session.encode()?;
    // One test key for every pseudonymised column.
    let keys = kanon_engine::recode::Pseudonymiser::from_lookup(spec, |_| {
        Some("engine-tests-key-0123456789abcdef".into())
    })?;
    let Prepared {
        anonymization,
        recoder,
    } = encoded.anonymise(
        &privacy,
        kanon_engine::release::SessionOptions {
            cancel: kanon_engine::cancel::Cancellation::never(),
            progress: kanon_engine::progress::Silent::sink(),
            blocks: kanon_engine::algorithms::partitioned::LocalBlocks::get(),
            pseudonymiser: &keys,
        },
    )?;
    let releaser = Releaser::new(spec, recoder, &input.schema(), bucket_rows)?;
    let schema = releaser.schema().clone();
    let store = MemoryBuckets::new(&releaser);
    let mut release = Release::new(releaser, store);
    for part in &parts {
        release.push(part)?;
    }
    let mut out = Vec::new();
    release.drain(usize::MAX, |chunk| {
        out.push(chunk);
        Ok(true)
    })?;
    release.finish(&privacy, &anonymization)?;
    Ok((
        arrow::compute::concat_batches(&schema, &out)?,
        anonymization.report.suppressed_rows,
    ))
}

/// A column of a batch as strings.
pub fn strings(batch: &RecordBatch, name: &str) -> Vec<String> {
    use arrow::array::{Array, AsArray};
    let col = batch.column_by_name(name).unwrap();
    let col = arrow::compute::cast(col, &arrow::datatypes::DataType::Utf8).unwrap();
    let col = col.as_string::<i32>();
    (0..col.len()).map(|i| col.value(i).to_string()).collect()
}

/// The published classes of a release (rows with equal QI labels), each as
/// its rows' values of `sensitive`, from the labels alone.
pub fn released_classes(
    spec: &JobSpec,
    release: &RecordBatch,
    sensitive: &str,
) -> Vec<Vec<String>> {
    let qis: Vec<Vec<String>> = spec
        .quasi_identifiers()
        .map(|a| strings(release, &a.name))
        .collect();
    let mut classes: std::collections::HashMap<Vec<&str>, Vec<String>> = Default::default();
    for (r, v) in strings(release, sensitive).into_iter().enumerate() {
        classes
            .entry(qis.iter().map(|q| q[r].as_str()).collect())
            .or_default()
            .push(v);
    }
    classes.into_values().collect()
}
