//! Reading inputs (Parquet, CSV) and writing releases atomically.
//!
//! A release is written to a temporary file next to its destination and
//! renamed into place only after the whole file was written and closed, so a
//! failed or interrupted job leaves nothing at the destination; an existing
//! release is replaced only with `--overwrite`.

use std::fs::File;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use anyhow::{bail, Context, Result};
use arrow::array::RecordBatch;
use arrow::datatypes::SchemaRef;
use kanon_engine::spec::InputSpec;
use parquet::arrow::arrow_reader::ParquetRecordBatchReaderBuilder;
use parquet::arrow::ArrowWriter;
use parquet::basic::{Compression, ZstdLevel};
use parquet::file::metadata::KeyValue;
use parquet::file::properties::WriterProperties;

/// The formats kanon reads.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Format {
    /// Apache Parquet.
    Parquet,
    /// Delimited text with a header.
    Csv,
}

/// The format of an input: `input.format`, else the file extension.
pub fn format_of(path: &Path, spec: &InputSpec) -> Result<Format> {
    let name = spec
        .format
        .clone()
        .or_else(|| path.extension().map(|e| e.to_string_lossy().to_lowercase()))
        .unwrap_or_default();
    match name.as_str() {
        "parquet" | "pq" => Ok(Format::Parquet),
        "csv" | "txt" | "tsv" => Ok(Format::Csv),
        other => bail!(
            "cannot tell the format of {} (`{other}`): set `input.format = \"parquet\"` or `\"csv\"`",
            path.display()
        ),
    }
}

/// A whole input table in memory.
#[derive(Debug, Clone)]
pub struct Table {
    /// Its schema.
    pub schema: SchemaRef,
    /// Its batches, in file order.
    pub batches: Vec<RecordBatch>,
}

impl Table {
    /// Number of rows.
    pub fn num_rows(&self) -> usize {
        self.batches.iter().map(|b| b.num_rows()).sum()
    }
}

/// Reads an input file.
pub fn read(path: &Path, spec: &InputSpec) -> Result<Table> {
    let format = format_of(path, spec)?;
    let file = File::open(path).with_context(|| format!("cannot open input {}", path.display()))?;
    match format {
        Format::Parquet => {
            let builder = ParquetRecordBatchReaderBuilder::try_new(file)
                .with_context(|| format!("{} is not a readable Parquet file", path.display()))?;
            let schema = builder.schema().clone();
            let batches = builder
                .with_batch_size(64 * 1024)
                .build()?
                .collect::<Result<Vec<_>, _>>()
                .with_context(|| format!("corrupt Parquet data in {}", path.display()))?;
            Ok(Table { schema, batches })
        }
        Format::Csv => {
            let delimiter = match spec.delimiter.as_deref() {
                None => b',',
                Some(d) if d.len() == 1 => d.as_bytes()[0],
                Some("\\t") | Some("tab") => b'\t',
                Some(_) => bail!("`input.delimiter` must be one character, e.g. \";\""),
            };
            let format = arrow_csv::reader::Format::default()
                .with_delimiter(delimiter)
                .with_header(spec.header.unwrap_or(true));
            let (schema, _) = format
                .infer_schema(File::open(path)?, Some(10_000))
                .with_context(|| {
                    format!("cannot read the CSV header and types of {}", path.display())
                })?;
            let schema = Arc::new(schema);
            let reader = arrow_csv::ReaderBuilder::new(schema.clone())
                .with_format(format)
                .with_batch_size(64 * 1024)
                .build(file)?;
            let batches = reader
                .collect::<Result<Vec<_>, _>>()
                .with_context(|| format!("malformed CSV in {}", path.display()))?;
            Ok(Table { schema, batches })
        }
    }
}

/// Writes batches as one Parquet file, atomically: a temporary file in the
/// destination's directory, renamed into place after a successful close.
///
/// `metadata` goes into the file's key-value metadata (provenance).
pub fn write_parquet_atomic(
    dest: &Path,
    schema: SchemaRef,
    batches: impl IntoIterator<Item = Result<RecordBatch>>,
    metadata: Vec<(String, String)>,
    overwrite: bool,
) -> Result<u64> {
    if dest.exists() && !overwrite {
        bail!(
            "output {} already exists; pass --overwrite to replace it or choose another --output",
            dest.display()
        );
    }
    let dir = match dest.parent() {
        Some(d) if !d.as_os_str().is_empty() => d.to_path_buf(),
        _ => PathBuf::from("."),
    };
    std::fs::create_dir_all(&dir)
        .with_context(|| format!("cannot create output directory {}", dir.display()))?;
    let tmp = tempfile::Builder::new()
        .prefix(".kanon-")
        .suffix(".parquet.tmp")
        .tempfile_in(&dir)
        .with_context(|| format!("cannot create a temporary file in {}", dir.display()))?;
    let props = WriterProperties::builder()
        .set_compression(Compression::ZSTD(ZstdLevel::default()))
        .set_dictionary_enabled(true)
        .set_max_row_group_row_count(Some(1 << 20))
        .set_key_value_metadata(Some(
            metadata
                .into_iter()
                .map(|(k, v)| KeyValue::new(k, v))
                .collect(),
        ))
        .build();
    let mut writer = ArrowWriter::try_new(tmp.as_file().try_clone()?, schema, Some(props))?;
    let mut rows = 0u64;
    for batch in batches {
        let batch = batch?;
        rows += batch.num_rows() as u64;
        writer.write(&batch)?;
    }
    writer.close()?;
    tmp.as_file().sync_all()?;
    if overwrite {
        tmp.persist(dest).map_err(|e| e.error)
    } else {
        tmp.persist_noclobber(dest).map_err(|e| e.error)
    }
    .with_context(|| format!("cannot move the release into place at {}", dest.display()))?;
    Ok(rows)
}
