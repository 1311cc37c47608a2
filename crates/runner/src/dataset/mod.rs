//! Input datasets: one file, a directory, a glob, or an S3 prefix of many
//! Parquet (or CSV) files read as one table, in key order.
//!
//! [`Dataset::open`] lists the files and reads what is cheap: each Parquet
//! footer (schema, row count, and the bytes of the input fingerprint), or
//! the first rows of a CSV file to infer its types. [`Dataset::scan`] then
//! streams record batches, optionally projected to some columns (pass 1
//! reads only the QI and sensitive columns), file after file.
//!
//! Errors name the file and, for CSV, the column and line, never the value
//! (arrow's CSV messages quote the offending value and row, so they are
//! rewritten here).
//!
//! The module is split by concept: finding the files of a location in
//! `listing`, opening Parquet files (footers, schema unification, ranged
//! reads of objects) in `parquet_input`, opening CSV files (format settings,
//! error messages without values, hashing) in `csv_input`, and streaming
//! the rows in [`Scan`](scan::Scan) (`scan`); this file holds [`Dataset`] itself.

use std::path::Path;

use anyhow::Result;
use arrow::datatypes::SchemaRef;
use kanon_engine::spec::InputSpec;
use parquet::arrow::arrow_reader::ArrowReaderMetadata;

use crate::exit::Failure;
use crate::storage::{FileMeta, Location, Storage};

mod csv_input;
mod listing;
mod parquet_input;
mod scan;

pub use csv_input::csv_error;

use listing::{list_files, location_name};

/// Rows per record batch while streaming.
pub const BATCH_ROWS: usize = 64 * 1024;

/// The formats kanon reads.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Format {
    /// Apache Parquet.
    Parquet,
    /// Delimited text.
    Csv,
}

impl Format {
    fn of_name(name: &str) -> Option<Format> {
        match name.to_ascii_lowercase().as_str() {
            "parquet" | "pq" => Some(Format::Parquet),
            "csv" | "txt" | "tsv" => Some(Format::Csv),
            _ => None,
        }
    }

    /// The format named by a path's extension.
    pub fn of_path(p: &str) -> Option<Format> {
        Path::new(p)
            .extension()
            .and_then(|e| e.to_str())
            .and_then(Format::of_name)
    }

    /// Its name.
    pub fn name(self) -> &'static str {
        match self {
            Format::Parquet => "Parquet",
            Format::Csv => "CSV",
        }
    }
}

/// One input file.
#[derive(Debug, Clone)]
struct InputFile {
    meta: FileMeta,
    /// Parquet footer, decoded.
    parquet: Option<ArrowReaderMetadata>,
}

/// A table stored in one or more files.
#[derive(Debug, Clone)]
pub struct Dataset {
    /// Its format.
    pub format: Format,
    /// Its schema: the first file's, with a field nullable when it is in any
    /// file.
    pub schema: SchemaRef,
    /// Rows, when known without a scan (Parquet).
    pub rows: Option<u64>,
    /// Total size in bytes.
    pub bytes: u64,
    files: Vec<InputFile>,
    csv: Option<arrow_csv::reader::Format>,
    csv_header: bool,
    /// Hash of each Parquet file's size and footer.
    footer_hash: Option<[u8; 32]>,
}

impl Dataset {
    /// The number of files.
    pub fn n_files(&self) -> usize {
        self.files.len()
    }

    /// Where each file is, in read order.
    pub fn file_locations(&self) -> Vec<String> {
        self.files
            .iter()
            .map(|f| f.meta.location.to_string())
            .collect()
    }

    /// Finds the files of a dataset and reads their schemas.
    ///
    /// # Errors
    /// Bad-input failures naming the path and the setting for a missing
    /// path, no matching files, an unknown format, a corrupt footer, or files
    /// whose schemas differ; I/O failures otherwise.
    pub fn open(storage: &Storage, location: &Location, spec: &InputSpec) -> Result<Dataset> {
        let declared = match spec.format.as_deref() {
            None => None,
            Some(f) => Some(Format::of_name(f).ok_or_else(|| {
                Failure::bad_input(format!(
                    "`input.format = \"{f}\"` is not a format kanon reads: use \"parquet\" or \"csv\""
                ))
            })?),
        };
        let metas = list_files(storage, location, declared)?;
        let format = match declared {
            Some(f) => f,
            None => Format::of_path(&location_name(&metas[0].location)).ok_or_else(|| {
                Failure::bad_input(format!(
                    "cannot tell the format of {}: set `input.format = \"parquet\"` or `\"csv\"`",
                    metas[0].location
                ))
            })?,
        };
        let bytes = metas.iter().map(|m| m.size).sum();
        match format {
            Format::Parquet => Self::open_parquet(storage, location, metas, bytes),
            Format::Csv => Self::open_csv(storage, metas, bytes, spec),
        }
    }

    /// Column indices of `names` in the schema (names missing from it are
    /// left out: the encoder reports them with the list of columns).
    pub fn projection(&self, names: &[String]) -> Vec<usize> {
        let mut idx: Vec<usize> = names
            .iter()
            .filter_map(|n| self.schema.index_of(n).ok())
            .collect();
        idx.sort_unstable();
        idx.dedup();
        idx
    }

    /// Checks that no file changed since [`Dataset::open`] (between the two
    /// passes): same files, sizes and versions.
    ///
    /// # Errors
    /// A bad-input failure naming the changed file.
    pub fn check_unchanged(&self, storage: &Storage) -> Result<()> {
        for f in &self.files {
            let now = storage.head(&f.meta.location)?;
            if now.as_ref() != Some(&f.meta) {
                return Err(Failure::bad_input(format!(
                    "input {} changed while kanon was reading it (between the two passes); nothing was written, run the job again",
                    f.meta.location
                ))
                .into());
            }
        }
        Ok(())
    }

    /// The input fingerprint: SHA-256 over each file's size and Parquet
    /// footer (which holds the sizes and statistics of every column chunk),
    /// or, for CSV, over each file's bytes (from a scan with
    /// `fingerprint = true`).
    pub fn fingerprint(&self, csv_hash: Option<[u8; 32]>) -> Option<String> {
        let h = match self.format {
            Format::Parquet => self.footer_hash?,
            Format::Csv => csv_hash?,
        };
        Some(format!("sha256:{}", hex(&h)))
    }
}

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}
