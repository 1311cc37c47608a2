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
//! the rows in `Scan` (`scan`); this file holds [`Dataset`] itself.

use std::path::Path;

use anyhow::Result;
use arrow::datatypes::SchemaRef;
use kanon_engine::spec::InputSpec;
use parquet::arrow::arrow_reader::ArrowReaderMetadata;

use crate::exit::Failure;
use crate::storage::{FileMeta, Location, Storage};

mod csv_input;
mod listing;
mod memory;
mod parquet_input;
mod scan;

pub use memory::MemoryTable;

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
    /// Arrow record batches in memory ([`MemoryTable`]).
    Arrow,
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
            Format::Arrow => "Arrow (in memory)",
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
#[derive(Clone)]
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
    /// Rows CSV type inference read (`input.infer_rows`); 0 for Parquet.
    csv_infer_rows: usize,
    /// Hash of each Parquet file's size and footer.
    footer_hash: Option<[u8; 32]>,
    /// The version read, when the input is a Delta table.
    pub delta_version: Option<i64>,
    /// The batches of a table in memory (no files then).
    memory: Option<std::sync::Arc<[arrow::array::RecordBatch]>>,
}

/// Its shape, never a value: a table in memory holds records.
impl std::fmt::Debug for Dataset {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Dataset")
            .field("format", &self.format)
            .field("columns", &self.schema.fields().len())
            .field("rows", &self.rows)
            .field("bytes", &self.bytes)
            .field("files", &self.files.len())
            .field("delta_version", &self.delta_version)
            .field("in_memory", &self.memory.is_some())
            .finish_non_exhaustive()
    }
}

impl Dataset {
    /// The uncompressed size of the Parquet data of every column but
    /// `except` (indices into [`Dataset::schema`]), from the files' footers;
    /// `None` for CSV.
    pub fn uncompressed_bytes(&self, except: &[usize]) -> Option<u64> {
        if self.format != Format::Parquet {
            return None;
        }
        let skipped: Vec<&str> = except
            .iter()
            .map(|&i| self.schema.field(i).name().as_str())
            .collect();
        let mut total = 0u64;
        for f in &self.files {
            let md = f.parquet.as_ref()?.metadata();
            for rg in md.row_groups() {
                for c in rg.columns() {
                    let top = c.column_path().parts().first().map(String::as_str);
                    if !top.is_some_and(|t| skipped.contains(&t)) {
                        total += c.uncompressed_size().max(0) as u64;
                    }
                }
            }
        }
        Some(total)
    }

    /// The rows of the dataset before reading it: exact for Parquet (the
    /// footers), estimated for CSV from the lines in the first MiB of the
    /// first file against the bytes of all.
    pub fn estimated_rows(&self, storage: &Storage) -> Result<u64> {
        if let Some(rows) = self.rows {
            return Ok(rows);
        }
        let Some(first) = self.files.first() else {
            return Ok(0);
        };
        let mut head = Vec::with_capacity(1 << 20);
        std::io::Read::read_to_end(
            &mut std::io::Read::take(storage.open_read(&first.meta.location)?, 1 << 20),
            &mut head,
        )?;
        let lines = head.iter().filter(|&&b| b == b'\n').count().max(1) as u64;
        let bytes_per_line = (head.len() as u64).div_ceil(lines).max(1);
        Ok(self.bytes.div_ceil(bytes_per_line))
    }

    /// The number of files.
    pub fn n_files(&self) -> usize {
        self.files.len()
    }

    /// Each file with its size, in read order.
    pub fn file_sizes(&self) -> Vec<(Location, u64)> {
        self.files
            .iter()
            .map(|f| (f.meta.location.clone(), f.meta.size))
            .collect()
    }

    /// Whether a file's footer says kanon wrote it (a `kanon.version` key
    /// in its key-value metadata): a release that should have a manifest.
    pub fn written_by_kanon(&self) -> bool {
        self.files.iter().any(|f| {
            f.parquet.as_ref().is_some_and(|m| {
                m.metadata()
                    .file_metadata()
                    .key_value_metadata()
                    .is_some_and(|kv| kv.iter().any(|kv| kv.key == "kanon.version"))
            })
        })
    }

    /// The `kanon.*` key-value metadata of each Parquet file's footer (what
    /// kanon wrote there: the release's claims), with the file, in read
    /// order; files without any are left out.
    pub fn kanon_footers(&self) -> Vec<(String, Vec<(String, String)>)> {
        self.files
            .iter()
            .filter_map(|f| {
                let kv = f
                    .parquet
                    .as_ref()?
                    .metadata()
                    .file_metadata()
                    .key_value_metadata()?;
                let claims: Vec<(String, String)> = kv
                    .iter()
                    .filter(|kv| kv.key.starts_with("kanon."))
                    .map(|kv| (kv.key.clone(), kv.value.clone().unwrap_or_default()))
                    .collect();
                (!claims.is_empty()).then(|| (f.meta.location.to_string(), claims))
            })
            .collect()
    }

    /// Where each file is, in read order.
    pub fn file_locations(&self) -> Vec<String> {
        self.files
            .iter()
            .map(|f| f.meta.location.to_string())
            .collect()
    }

    /// Whether the rows are a table in memory ([`Dataset::in_memory`]).
    pub fn is_in_memory(&self) -> bool {
        self.memory.is_some()
    }

    /// Finds the files of a dataset and reads their schemas.
    ///
    /// # Errors
    /// Bad-input failures naming the path and the setting for a missing
    /// path, no matching files, an unknown format, a corrupt footer, or files
    /// whose schemas differ; I/O failures otherwise.
    pub fn open(storage: &Storage, location: &Location, spec: &InputSpec) -> Result<Dataset> {
        let delta = match spec.format.as_deref() {
            Some("delta") => true,
            // A directory with a Delta log is read as the table it holds:
            // its files also hold rows the table removed.
            None => is_delta_table(storage, location)?,
            Some(_) => false,
        };
        if delta {
            return Self::open_delta(storage, location, spec.version, false);
        }
        if spec.version.is_some() {
            return Err(Failure::bad_input(format!(
                "`input.version` applies to Delta tables, and {location} is not one: remove it, or set `input.format = \"delta\"`"
            ))
            .into());
        }
        let declared = match spec.format.as_deref() {
            None => None,
            Some(f) => Some(Format::of_name(f).ok_or_else(|| {
                Failure::bad_input(format!(
                    "`input.format = \"{f}\"` is not a format kanon reads: use \"parquet\", \"csv\" or \"delta\""
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
            Format::Arrow => Err(Failure::bad_input(format!(
                "{location}: a table in memory is not read from storage (a bug in kanon)"
            ))
            .into()),
        }
    }

    /// A Delta table at `version` (the latest when `None`): the Parquet
    /// files of that version, as one Parquet dataset. Partitioned tables
    /// are refused unless `partitioned` (their partition columns are not in
    /// the files; `kanon verify` reads the other columns only).
    ///
    /// # Errors
    /// No table, no such version, features kanon cannot read, a data file
    /// that is missing.
    pub fn open_delta(
        storage: &Storage,
        location: &Location,
        version: Option<i64>,
        partitioned: bool,
    ) -> Result<Dataset> {
        let table = crate::delta::Table::at(storage, location)?;
        let dt = table.load_existing(storage, version)?;
        let files = crate::delta::data_files(&dt, location, partitioned)?;
        if files.is_empty() {
            return Err(Failure::bad_input(format!(
                "Delta table {location} has no rows at version {}: there is nothing to read",
                crate::delta::version_of(&dt)
            ))
            .into());
        }
        let mut ds = Self::open_files(storage, location, &files)?;
        ds.delta_version = Some(crate::delta::version_of(&dt));
        Ok(ds)
    }

    /// Parquet files given one by one, read as one dataset named `label`.
    ///
    /// # Errors
    /// A missing file; as [`Dataset::open`] for Parquet.
    pub fn open_files(storage: &Storage, label: &Location, files: &[Location]) -> Result<Dataset> {
        let metas = files
            .iter()
            .map(|f| {
                storage.head(f)?.ok_or_else(|| {
                    Failure::bad_input(format!(
                        "{f}, a data file of {label}, is missing: the table is damaged or was vacuumed meanwhile"
                    ))
                    .into()
                })
            })
            .collect::<Result<Vec<FileMeta>>>()?;
        let bytes = metas.iter().map(|m| m.size).sum();
        Self::open_parquet(storage, label, metas, bytes)
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
            Format::Parquet | Format::Arrow => self.footer_hash?,
            Format::Csv => csv_hash?,
        };
        Some(format!("sha256:{}", hex(&h)))
    }
}

/// The Parquet files of a dataset (a file, directory, glob, S3 prefix or
/// Delta table), listed without opening any: names and sizes from the
/// listing, or from a Delta table's log (its files' sizes unknown, 0).
/// What a coordinator hands to workers that read the files themselves
/// (issue 35).
///
/// # Errors
/// As [`Dataset::open`] for a missing location or no files; a CSV dataset
/// (workers read Parquet files and Delta tables only).
pub fn parquet_files(
    storage: &Storage,
    location: &Location,
    spec: &InputSpec,
) -> Result<Vec<(Location, u64)>> {
    let delta = match spec.format.as_deref() {
        Some("delta") => true,
        None => is_delta_table(storage, location)?,
        Some(_) => false,
    };
    if delta {
        let table = crate::delta::Table::at(storage, location)?;
        let dt = table.load_existing(storage, spec.version)?;
        let files = crate::delta::data_files(&dt, location, true)?;
        return Ok(files.into_iter().map(|f| (f, 0)).collect());
    }
    let csv = || -> anyhow::Error {
        Failure::bad_input(format!(
            "{location} is read as CSV, and workers read Parquet files and Delta tables only: run without --workers, or convert it to Parquet"
        ))
        .into()
    };
    let declared = match spec.format.as_deref() {
        None => None,
        Some(f) => match Format::of_name(f) {
            Some(Format::Parquet) => Some(Format::Parquet),
            Some(_) => return Err(csv()),
            None => {
                return Err(Failure::bad_input(format!(
                    "`input.format = \"{f}\"` is not a format kanon reads: use \"parquet\", \"csv\" or \"delta\""
                ))
                .into())
            }
        },
    };
    let metas = list_files(storage, location, declared)?;
    if declared.is_none()
        && metas
            .iter()
            .any(|m| Format::of_path(&location_name(&m.location)) != Some(Format::Parquet))
    {
        return Err(csv());
    }
    Ok(metas.into_iter().map(|m| (m.location, m.size)).collect())
}

/// Whether `location` is a Delta table (local directory or S3 prefix with a
/// `_delta_log`).
pub fn is_delta_table(storage: &Storage, location: &Location) -> Result<bool> {
    match location {
        Location::Local(p) => Ok(p.join("_delta_log").is_dir()),
        Location::S3 { key, .. }
            if key.contains(['*', '?', '[']) || Format::of_path(key).is_some() =>
        {
            Ok(false)
        }
        Location::S3 { .. } => storage.any_under(&location.join("_delta_log")),
    }
}

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}
