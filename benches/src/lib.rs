//! Shared loaders of kanon's benchmarks (`benches/*.rs`) and of the
//! engine's integration tests (`crates/engine/tests/common`): the bundled Adult
//! data (`data/adult/`) and jobs (`configs/`) of this repository, a seeded
//! generator of Adult-like rows at any size ([`adult_like`]) and the
//! engine's whole release path ([`release`]).
//!
//! Run a benchmark with `cargo bench -p kanon-benches --bench <name>`; the
//! figures and their commands are in `BENCHMARKS.md`.

use std::path::PathBuf;
use std::sync::Arc;

use arrow::array::{Array, ArrayRef, AsArray, Int64Array, RecordBatch, UInt32Array};
use arrow::datatypes::Int64Type;
use kanon_engine::encode::{Encoder, QiTable};
use kanon_engine::hierarchy::Hierarchy;
use kanon_engine::spec::JobSpec;
use parquet::arrow::arrow_reader::ParquetRecordBatchReaderBuilder;
use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;
use rustc_hash::FxHashMap;

/// The repository root (this package lives in its `benches/` directory).
pub fn repo_root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("..")
}

/// The bundled Adult data (`data/adult/adult.parquet`, 30,162 rows) as
/// record batches.
pub fn adult_batches() -> Vec<RecordBatch> {
    adult_batches_from("data/adult/adult.parquet")
}

/// The record batches of a Parquet file, its path relative to the
/// repository root (or absolute).
pub fn adult_batches_from(path: &str) -> Vec<RecordBatch> {
    let path = repo_root().join(path);
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

/// Loads every hierarchy file the spec names, relative to the repository
/// root, through [`kanon_engine::job::Job`] as every front end does.
pub fn load_hierarchies(spec: &JobSpec) -> FxHashMap<String, Arc<Hierarchy>> {
    let job = kanon_engine::job::Job::new(spec.clone(), |file| {
        std::fs::read_to_string(repo_root().join(file.path)).map(|text| {
            kanon_engine::job::HierarchyText {
                source: file.path.to_string(),
                text,
            }
        })
    })
    .unwrap_or_else(|e| panic!("{e}"));
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

/// The first `rows` Adult rows (all when `None`) encoded for `spec`, its
/// hierarchies loaded.
pub fn adult_rows_table(spec: &JobSpec, rows: Option<usize>) -> QiTable {
    let hierarchies = load_hierarchies(spec);
    let mut batches = adult_batches();
    if let Some(n) = rows {
        batches = first_rows(batches, n);
    }
    encode(spec, &hierarchies, &batches)
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

/// Rows per batch of [`adult_like`].
pub const CHUNK_ROWS: usize = 65_536;

/// The chance that an attribute of a generated row is redrawn from its
/// marginal (as `kanon generate`'s default `--noise`).
const NOISE: f64 = 0.02;

/// How far a generated age moves from its record's (as `kanon generate`).
const AGE_JITTER: i64 = 2;

/// `rows` Adult-like rows in batches of [`CHUNK_ROWS`], the same for the
/// same `seed`: Adult's nine columns with their names and types, drawn as
/// `kanon generate --like adult` draws them (the same model, not the same
/// bytes). Each row copies a uniformly drawn Adult record (so Adult's
/// correlations and class structure); each attribute is, with probability
/// 0.02, taken from another uniformly drawn record instead (a long tail of
/// rare tuples, as a larger population has); age then moves by a uniform
/// integer in `-2..=2`, clamped to Adult's range. Every categorical value is
/// one of Adult's, so the bundled hierarchies cover the rows.
pub fn adult_like(rows: usize, seed: u64) -> Vec<RecordBatch> {
    let source = adult_batches();
    let schema = source[0].schema();
    let adult = arrow::compute::concat_batches(&schema, &source).unwrap();
    let n = adult.num_rows();
    let age = schema.index_of("age").expect("Adult has an age column");
    let ages = adult.column(age).as_primitive::<Int64Type>();
    let (min_age, max_age) = (
        arrow::compute::min(ages).unwrap(),
        arrow::compute::max(ages).unwrap(),
    );
    let mut rng = ChaCha8Rng::seed_from_u64(seed);
    let mut out = Vec::with_capacity(rows.div_ceil(CHUNK_ROWS));
    let mut start = 0;
    while start < rows {
        let len = CHUNK_ROWS.min(rows - start);
        let mut picks: Vec<Vec<u32>> = vec![Vec::with_capacity(len); adult.num_columns()];
        let mut jitter = Vec::with_capacity(len);
        for _ in 0..len {
            let record = rng.gen_range(0..n) as u32;
            for column in &mut picks {
                column.push(if rng.gen_bool(NOISE) {
                    rng.gen_range(0..n) as u32
                } else {
                    record
                });
            }
            jitter.push(rng.gen_range(-AGE_JITTER..=AGE_JITTER));
        }
        let columns: Vec<ArrayRef> = picks
            .into_iter()
            .enumerate()
            .map(|(i, picks)| {
                let taken =
                    arrow::compute::take(adult.column(i), &UInt32Array::from(picks), None).unwrap();
                if i != age {
                    return taken;
                }
                let taken = taken.as_primitive::<Int64Type>();
                assert_eq!(taken.null_count(), 0, "Adult has no missing age");
                Arc::new(Int64Array::from_iter_values(
                    taken
                        .values()
                        .iter()
                        .zip(&jitter)
                        .map(|(v, j)| (v + j).clamp(min_age, max_age)),
                ))
            })
            .collect();
        out.push(RecordBatch::try_new(schema.clone(), columns).unwrap());
        start += len;
    }
    out
}

/// A release made as every front end makes it ([`kanon_engine::release`]),
/// in memory and in one bucket: `batches` encoded, anonymised (the
/// partition verified), recoded batch by batch, put in release order,
/// verified again by the labels as released, and every row accounted for.
/// Returns the release's checks.
///
/// # Panics
/// When any step fails (the job does not fit the rows, or a check fails).
pub fn release(
    spec: &JobSpec,
    hierarchies: &FxHashMap<String, Arc<Hierarchy>>,
    batches: &[RecordBatch],
) -> kanon_engine::verify::Verified {
    use kanon_engine::release::{
        MemoryBuckets, Prepared, Release, Releaser, Session, SessionOptions,
    };
    let mut session =
        Session::new(spec, hierarchies, &batches[0].schema(), "the bench input").unwrap();
    for batch in batches {
        session.push(batch).unwrap();
    }
    let encoded = session.encode().unwrap();
    let privacy = kanon_engine::privacy::Privacy::from_spec(spec).unwrap();
    let Prepared {
        anonymization,
        recoder,
    } = encoded
        .anonymise(
            &privacy,
            SessionOptions {
                cancel: kanon_engine::cancel::Cancellation::never(),
                progress: kanon_engine::progress::Silent::sink(),
                blocks: kanon_engine::algorithms::partitioned::LocalBlocks::get(),
                pseudonymiser: &Default::default(),
            },
        )
        .unwrap();
    drop(encoded);
    let releaser = Releaser::new(spec, recoder, &batches[0].schema(), u64::MAX).unwrap();
    let store = MemoryBuckets::new(&releaser);
    let mut release = Release::new(releaser, store);
    for batch in batches {
        release.push(batch).unwrap();
    }
    let mut rows = 0;
    release
        .drain(usize::MAX, |chunk| {
            rows += chunk.num_rows();
            Ok(true)
        })
        .unwrap();
    let (verified, _) = release.finish(&privacy, &anonymization).unwrap();
    assert_eq!(rows, verified.published_rows);
    verified
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn adult_like_is_seeded_with_adults_schema() {
        let rows = CHUNK_ROWS + 100;
        let a = adult_like(rows, 7);
        assert_eq!(a.len(), 2);
        assert_eq!(a.iter().map(|b| b.num_rows()).sum::<usize>(), rows);
        assert_eq!(a, adult_like(rows, 7));
        assert_ne!(a, adult_like(rows, 8));
        assert_eq!(a[0].schema(), adult_batches()[0].schema());
    }

    #[test]
    fn release_of_generated_rows_accounts_for_every_row() {
        let (spec, hierarchies) = adult_job(&[]);
        let batches = adult_like(10_000, 1);
        let verified = release(&spec, &hierarchies, &batches);
        // `Releaser::finish` has checked that every row is published or
        // counted as suppressed.
        assert!(verified.smallest_class >= 10);
        assert!(verified.published_rows > 0 && verified.published_rows <= 10_000);
    }
}
