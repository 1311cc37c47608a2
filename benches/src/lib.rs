//! Shared loaders of kanon's benchmarks (`benches/*.rs`): the bundled Adult
//! data (`data/adult/`) and jobs (`configs/`) of this repository.
//!
//! Run a benchmark with `cargo bench -p kanon-benches --bench <name>`; the
//! figures and their commands are in `BENCHMARKS.md`.

use std::path::PathBuf;
use std::sync::Arc;

use arrow::array::RecordBatch;
use kanon_engine::encode::{Encoder, QiTable};
use kanon_engine::hierarchy::Hierarchy;
use kanon_engine::spec::JobSpec;
use parquet::arrow::arrow_reader::ParquetRecordBatchReaderBuilder;
use rustc_hash::FxHashMap;

/// The repository root (this package lives in its `benches/` directory).
pub fn repo_root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("..")
}

/// The bundled Adult data (`data/adult/adult.parquet`, 30,162 rows) as
/// record batches.
pub fn adult_batches() -> Vec<RecordBatch> {
    let path = repo_root().join("data/adult/adult.parquet");
    let file = std::fs::File::open(&path)
        .unwrap_or_else(|e| panic!("cannot open {}: {e}", path.display()));
    ParquetRecordBatchReaderBuilder::try_new(file)
        .unwrap()
        .build()
        .unwrap()
        .collect::<Result<Vec<_>, _>>()
        .unwrap()
}

/// A job file of `configs/` (e.g. `"adult.toml"`), parsed.
pub fn config(name: &str) -> JobSpec {
    let path = repo_root().join("configs").join(name);
    let text = std::fs::read_to_string(&path)
        .unwrap_or_else(|e| panic!("cannot read {}: {e}", path.display()));
    toml::from_str(&text).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

/// The bundled Adult job (`configs/adult.toml`), with its hierarchy files
/// loaded; `qis` restricts the quasi-identifiers (in the given order) when
/// not empty.
pub fn adult_job(qis: &[&str]) -> (JobSpec, FxHashMap<String, Arc<Hierarchy>>) {
    let mut spec = config("adult.toml");
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
pub fn load_hierarchies(spec: &JobSpec) -> FxHashMap<String, Arc<Hierarchy>> {
    spec.hierarchy_files()
        .map(|(_, path, delim)| {
            let text = std::fs::read_to_string(repo_root().join(path)).unwrap();
            (
                path.to_string(),
                Arc::new(Hierarchy::from_csv(path, &text, delim).unwrap()),
            )
        })
        .collect()
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
