//! Shared helpers for engine integration tests: the bundled
//! Adult data and small hand-made tables.
#![allow(dead_code)]

use std::path::PathBuf;
use std::sync::Arc;

use arrow::array::RecordBatch;
use kanon_engine::encode::{Encoder, QiTable};
use kanon_engine::hierarchy::Hierarchy;
use kanon_engine::spec::JobSpec;
use parquet::arrow::arrow_reader::ParquetRecordBatchReaderBuilder;
use rustc_hash::FxHashMap;

/// The repository root.
pub fn repo_root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../..")
}

/// The bundled Adult data as record batches.
pub fn adult_batches() -> Vec<RecordBatch> {
    adult_batches_from("data/adult/adult.parquet")
}

/// The record batches of a Parquet file, its path relative to the
/// repository root (or absolute).
pub fn adult_batches_from(path: &str) -> Vec<RecordBatch> {
    let file = std::fs::File::open(repo_root().join(path)).expect("readable Parquet input");
    ParquetRecordBatchReaderBuilder::try_new(file)
        .unwrap()
        .build()
        .unwrap()
        .collect::<Result<Vec<_>, _>>()
        .unwrap()
}

/// The bundled Adult job (`configs/adult.toml`), with its hierarchy files
/// loaded; `qis` restricts the quasi-identifiers (in the given order) when
/// not empty.
pub fn adult_job(qis: &[&str]) -> (JobSpec, FxHashMap<String, Arc<Hierarchy>>) {
    let text = std::fs::read_to_string(repo_root().join("configs/adult.toml")).unwrap();
    let mut spec: JobSpec = toml::from_str(&text).unwrap();
    if !qis.is_empty() {
        let mut attrs = Vec::new();
        for q in qis {
            let mut a = spec
                .attributes
                .iter()
                .find(|a| a.name == *q)
                .expect("known Adult attribute")
                .clone();
            a.role = kanon_engine::spec::Role::QuasiIdentifier;
            attrs.push(a);
        }
        for a in &spec.attributes {
            if !qis.contains(&a.name.as_str())
                && a.role != kanon_engine::spec::Role::QuasiIdentifier
            {
                attrs.push(a.clone());
            }
        }
        spec.attributes = attrs;
    }
    let hierarchies = load_hierarchies(&spec);
    (spec, hierarchies)
}

/// Loads every hierarchy file the spec names, relative to the repository root.
/// Loads them through [`kanon_engine::job::Job`], as every front end does.
pub fn load_hierarchies(spec: &JobSpec) -> FxHashMap<String, Arc<Hierarchy>> {
    let job = kanon_engine::job::Job::new(spec.clone(), |file| {
        std::fs::read_to_string(repo_root().join(file.path)).map(|text| {
            kanon_engine::job::HierarchyText {
                source: file.path.to_string(),
                text,
            }
        })
    })
    .unwrap();
    job.hierarchies().clone()
}

/// Encodes batches for a job.
pub fn encode(
    spec: &JobSpec,
    hierarchies: &FxHashMap<String, Arc<Hierarchy>>,
    batches: &[RecordBatch],
) -> QiTable {
    let mut enc = Encoder::try_new(spec, hierarchies, batches[0].schema().as_ref()).unwrap();
    for b in batches {
        enc.push(b).unwrap();
    }
    enc.finish().unwrap()
}

/// The Adult table encoded for the given QIs (all 8 when empty).
pub fn adult_table(qis: &[&str]) -> (JobSpec, QiTable) {
    let (spec, h) = adult_job(qis);
    let table = encode(&spec, &h, &adult_batches());
    (spec, table)
}

/// The first `n` rows of `batches`.
pub fn first_rows(batches: Vec<RecordBatch>, n: usize) -> Vec<RecordBatch> {
    let mut left = n;
    let mut out = Vec::new();
    for b in batches {
        if left == 0 {
            break;
        }
        let take = left.min(b.num_rows());
        out.push(b.slice(0, take));
        left -= take;
    }
    out
}

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
    let Prepared {
        anonymization,
        recoder,
    } = prepare(
        spec,
        &table,
        &privacy,
        kanon_engine::cancel::Cancellation::never(),
        Default::default(),
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
        out.push(releaser.release(&batches, &groups)?);
    }
    let schema = releaser.schema().clone();
    releaser.finish(&privacy, &anonymization)?;
    Ok((
        arrow::compute::concat_batches(&schema, &out)?,
        anonymization.report.suppressed_rows,
    ))
}
