//! Helpers shared by the end-to-end tests of `tests/` and the runner's own
//! integration tests: where the repository is, the bundled Adult job with
//! absolute paths, and Parquet read back as one batch.

use std::path::{Path, PathBuf};

use arrow::array::RecordBatch;
use arrow::compute::concat_batches;
use parquet::arrow::arrow_reader::ParquetRecordBatchReaderBuilder;

/// The repository root (the bundled configs and data live there).
pub fn root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("..")
}

/// Reads a whole Parquet file as one batch.
pub fn read_parquet(path: &Path) -> RecordBatch {
    read_parquet_bytes(std::fs::read(path).unwrap())
}

/// Reads Parquet bytes as one batch.
pub fn read_parquet_bytes(bytes: Vec<u8>) -> RecordBatch {
    let b = ParquetRecordBatchReaderBuilder::try_new(bytes::Bytes::from(bytes)).unwrap();
    let schema = b.schema().clone();
    let batches: Vec<RecordBatch> = b.build().unwrap().map(|b| b.unwrap()).collect();
    concat_batches(&schema, &batches).unwrap()
}

/// The quasi-identifiers of the bundled Adult job (`configs/adult.toml`),
/// in its order.
pub const ADULT_QIS: [&str; 8] = [
    "age",
    "sex",
    "race",
    "marital-status",
    "education",
    "native-country",
    "workclass",
    "occupation",
];

/// A job file in `dir` from the bundled Adult job with `edit` applied to its
/// text; hierarchy paths are made absolute, and the release goes to `dir`
/// (not to the repository's `target/releases/`, where the README's own run
/// of the job leaves its release).
pub fn adult_job(dir: &Path, edit: impl Fn(String) -> String) -> PathBuf {
    let text = std::fs::read_to_string(root().join("configs/adult.toml")).unwrap();
    let root = root().canonicalize().unwrap();
    let text = text
        .replace(
            "\"data/adult/",
            &format!("\"{}/data/adult/", root.display()),
        )
        .replace(
            "\"target/releases/adult-k10.parquet\"",
            &format!("{:?}", dir.join("adult-k10.parquet").display().to_string()),
        );
    let p = dir.join("job.toml");
    std::fs::write(&p, edit(text)).unwrap();
    p
}

/// Job text `text` with its `[algorithm]` section's `name` set to
/// `algorithm`, whatever the bundled job names there (panics when the job
/// has no such line, so a test never runs another algorithm silently).
pub fn set_algorithm(text: String, algorithm: &str) -> String {
    let section = text
        .find("[algorithm]")
        .expect("the job has an [algorithm] section");
    let start = section
        + text[section..]
            .find("\nname = ")
            .expect("the [algorithm] section names its algorithm")
        + 1;
    let end = start + text[start..].find('\n').unwrap_or(text.len() - start);
    format!("{}name = {algorithm:?}{}", &text[..start], &text[end..])
}

/// Names in a directory, sorted (to check that nothing is left behind).
pub fn ls(dir: &Path) -> Vec<String> {
    let mut v: Vec<String> = std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    v.sort();
    v
}
