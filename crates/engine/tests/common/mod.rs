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
/// offsets), put in release order in buckets of at most `bucket_rows` rows,
/// verified by its labels and accounted for. Returns the release and the
/// number of suppressed rows.
pub fn release(
    spec: &JobSpec,
    hierarchies: &FxHashMap<String, Arc<Hierarchy>>,
    input: &RecordBatch,
    bucket_rows: u64,
) -> kanon_engine::Result<(RecordBatch, usize)> {
    use kanon_engine::release::{prepare, Prepared, Releaser};
    let table = encode(spec, hierarchies, std::slice::from_ref(input));
    let privacy = kanon_engine::privacy::Privacy::from_spec(spec)?;
    // The people of an entity job, counted as the front ends count them.
    let entities = match spec.entity_column() {
        Some(_) => {
            let mut check = kanon_engine::identities::IdentityCheck::new(spec);
            check.push(input)?;
            check.finish()?.entities
        }
        None => None,
    };
    let Prepared {
        anonymization,
        recoder,
    } = prepare(
        spec,
        &table,
        entities,
        &privacy,
        kanon_engine::cancel::Cancellation::never(),
        kanon_engine::progress::Silent::sink(),
        kanon_engine::algorithms::partitioned::LocalBlocks::get(),
        // One test key for every pseudonymised column.
        kanon_engine::recode::Pseudonymiser::from_lookup(spec, |_| {
            Some("engine-tests-key-0123456789abcdef".into())
        })?,
    )?;
    let mut releaser = Releaser::new(spec, recoder, &input.schema(), bucket_rows)?;
    let half = input.num_rows() / 2;
    let mut rows: Vec<(RecordBatch, Vec<u32>)> = Vec::new();
    for part in [
        input.slice(0, half),
        input.slice(half, input.num_rows() - half),
    ] {
        let r = releaser.recode(&part)?;
        rows.push((r.batch, r.groups));
    }
    let mut out = Vec::new();
    for bucket in 0..releaser.n_buckets() {
        let mut batches = Vec::new();
        let mut groups = Vec::new();
        for (batch, g) in &rows {
            let keep: Vec<u32> = (0..g.len() as u32)
                .filter(|&i| releaser.bucket_of(g[i as usize]) == bucket)
                .collect();
            batches.push(arrow::compute::take_record_batch(
                batch,
                &arrow::array::UInt32Array::from(keep.clone()),
            )?);
            groups.extend(keep.iter().map(|&i| g[i as usize]));
        }
        out.push(releaser.release(batches, &groups)?.all()?);
    }
    let schema = releaser.schema().clone();
    releaser.finish(&privacy, &anonymization)?;
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
