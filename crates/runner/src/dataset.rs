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

use std::cell::RefCell;
use std::io::Read;
use std::path::{Path, PathBuf};
use std::rc::Rc;
use std::sync::Arc;

use anyhow::{Context, Result};
use arrow::array::RecordBatch;
use arrow::datatypes::{Field, Schema, SchemaRef};
use arrow::error::ArrowError;
use futures::{StreamExt, TryStreamExt};
use kanon_engine::spec::InputSpec;
use parquet::arrow::arrow_reader::{
    ArrowReaderMetadata, ArrowReaderOptions, ParquetRecordBatchReaderBuilder,
};
use parquet::arrow::async_reader::{AsyncFileReader, ParquetRecordBatchStreamBuilder};
use parquet::arrow::ProjectionMask;
use parquet::file::metadata::ParquetMetaDataReader;
use sha2::{Digest, Sha256};

use crate::exit::Failure;
use crate::storage::{FileMeta, Location, Storage};

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

fn one_char(setting: &str, v: &Option<String>) -> Result<Option<u8>> {
    match v.as_deref() {
        None => Ok(None),
        Some("\\t") | Some("tab") => Ok(Some(b'\t')),
        Some(s) if s.len() == 1 => Ok(Some(s.as_bytes()[0])),
        Some(_) => Err(Failure::bad_input(format!(
            "`input.{setting}` must be one ASCII character, e.g. \";\""
        ))
        .into()),
    }
}

fn has_glob(s: &str) -> bool {
    s.contains(['*', '?', '['])
}

fn is_hidden(name: &str) -> bool {
    name.starts_with('.') || name.starts_with('_')
}

impl Dataset {
    /// The number of files.
    pub fn n_files(&self) -> usize {
        self.files.len()
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

    fn open_parquet(
        storage: &Storage,
        location: &Location,
        metas: Vec<FileMeta>,
        bytes: u64,
    ) -> Result<Dataset> {
        let footers: Vec<(FileMeta, Vec<u8>)> = if location.is_remote() {
            // Footers of many objects: a few requests in flight at once.
            storage.block_on(
                futures::stream::iter(metas.into_iter().map(|m| async move {
                    let footer = remote_footer(storage, &m).await?;
                    Ok::<_, anyhow::Error>((m, footer))
                }))
                .buffered(8)
                .try_collect(),
            )?
        } else {
            metas
                .into_iter()
                .map(|m| {
                    let footer = read_footer(storage, &m)?;
                    Ok((m, footer))
                })
                .collect::<Result<_>>()?
        };
        let opened = footers.into_iter().map(|(m, footer)| {
            let md = ParquetMetaDataReader::decode_metadata(&footer).map_err(|e| {
                Failure::bad_input(format!(
                    "{} is not a readable Parquet file (corrupt footer: {e})",
                    m.location
                ))
            })?;
            let arrow = ArrowReaderMetadata::try_new(Arc::new(md), ArrowReaderOptions::new())
                .map_err(|e| {
                    Failure::bad_input(format!(
                        "{} has a Parquet schema kanon cannot read: {e}",
                        m.location
                    ))
                })?;
            let mut h = Sha256::new();
            h.update(m.size.to_le_bytes());
            h.update(&footer);
            Ok::<_, anyhow::Error>((
                InputFile {
                    meta: m,
                    parquet: Some(arrow),
                },
                h.finalize().to_vec(),
            ))
        });
        let opened: Vec<(InputFile, Vec<u8>)> = opened.collect::<Result<_>>()?;
        let mut hasher = Sha256::new();
        let mut files = Vec::with_capacity(opened.len());
        for (f, h) in opened {
            hasher.update(h);
            files.push(f);
        }
        let schema = unify_schemas(files.iter().map(|f| {
            (
                &f.meta.location,
                f.parquet.as_ref().expect("parquet").schema(),
            )
        }))?;
        let rows = files
            .iter()
            .map(|f| {
                f.parquet
                    .as_ref()
                    .expect("parquet")
                    .metadata()
                    .file_metadata()
                    .num_rows() as u64
            })
            .sum();
        Ok(Dataset {
            format: Format::Parquet,
            schema,
            rows: Some(rows),
            bytes,
            files,
            csv: None,
            csv_header: false,
            footer_hash: Some(hasher.finalize().into()),
        })
    }

    fn open_csv(
        storage: &Storage,
        metas: Vec<FileMeta>,
        bytes: u64,
        spec: &InputSpec,
    ) -> Result<Dataset> {
        let mut format = arrow_csv::reader::Format::default()
            .with_delimiter(one_char("delimiter", &spec.delimiter)?.unwrap_or(b','))
            .with_header(spec.header.unwrap_or(true));
        if let Some(q) = one_char("quote", &spec.quote)? {
            format = format.with_quote(q);
        }
        if let Some(e) = one_char("escape", &spec.escape)? {
            format = format.with_escape(e);
        }
        if let Some(c) = one_char("comment", &spec.comment)? {
            format = format.with_comment(c);
        }
        let first = &metas[0];
        let reader = storage.open_read(&first.location)?;
        let (schema, _) = format
            .infer_schema(reader, Some(spec.infer_rows.unwrap_or(10_000).max(1)))
            .map_err(|e| csv_error(e, &first.location, None, 0))
            .with_context(|| {
                format!(
                    "cannot read the CSV header and types of {} (check `input.delimiter`, `input.header`, `input.quote`)",
                    first.location
                )
            })?;
        Ok(Dataset {
            format: Format::Csv,
            schema: Arc::new(schema),
            rows: None,
            bytes,
            files: metas
                .into_iter()
                .map(|meta| InputFile {
                    meta,
                    parquet: None,
                })
                .collect(),
            csv: Some(format),
            csv_header: spec.header.unwrap_or(true),
            footer_hash: None,
        })
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

    /// Streams the dataset, projected to the columns `projection` (indices
    /// into [`Dataset::schema`], ascending), or every column.
    ///
    /// With `fingerprint` set, CSV bytes are hashed while they are read (see
    /// [`Scan::csv_hash`] and [`Dataset::fingerprint`]).
    pub fn scan<'a>(
        &'a self,
        storage: &'a Storage,
        projection: Option<Vec<usize>>,
        fingerprint: bool,
    ) -> Scan<'a> {
        let schema = match &projection {
            Some(p) => Arc::new(self.schema.project(p).expect("projection in range")),
            None => self.schema.clone(),
        };
        Scan {
            dataset: self,
            storage,
            projection,
            schema,
            next_file: 0,
            current: None,
            hasher: (fingerprint && self.format == Format::Csv)
                .then(|| Rc::new(RefCell::new(Sha256::new()))),
            rows: 0,
            done: false,
        }
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

fn location_name(l: &Location) -> String {
    match l {
        Location::Local(p) => p.display().to_string(),
        Location::S3 { key, .. } => key.clone(),
    }
}

fn matches_format(name: &str, format: Option<Format>) -> bool {
    match (Format::of_path(name), format) {
        (Some(f), Some(want)) => f == want,
        (Some(_), None) => true,
        (None, _) => false,
    }
}

/// The files of a dataset location, sorted by path.
fn list_files(storage: &Storage, loc: &Location, format: Option<Format>) -> Result<Vec<FileMeta>> {
    let not_found = |what: String| -> anyhow::Error {
        Failure::bad_input(format!("{what}; check `input.path` in the job or --input")).into()
    };
    let mut files: Vec<FileMeta> = match loc {
        Location::Local(p) => {
            let s = p.to_string_lossy();
            if has_glob(&s) {
                let mut out = Vec::new();
                for entry in glob::glob(&s).map_err(|e| {
                    Failure::bad_input(format!("input pattern `{s}` is not a valid glob: {e}"))
                })? {
                    let path = entry.context("cannot list the input files")?;
                    if path.is_file() {
                        out.push(local_meta(&path)?);
                    }
                }
                if out.is_empty() {
                    return Err(not_found(format!("no file matches the input pattern {s}")));
                }
                out
            } else if p.is_dir() {
                let mut out = Vec::new();
                walk(p, &mut out)?;
                let out: Vec<FileMeta> = out
                    .into_iter()
                    .filter(|m| matches_format(&location_name(&m.location), format))
                    .collect();
                if out.is_empty() {
                    return Err(not_found(format!(
                        "input directory {} holds no Parquet or CSV files",
                        p.display()
                    )));
                }
                out
            } else if p.exists() {
                vec![local_meta(p)?]
            } else {
                return Err(not_found(format!("input {} does not exist", p.display())));
            }
        }
        Location::S3 { bucket, key } => {
            if has_glob(key) {
                let cut = key[..key.find(['*', '?', '[']).unwrap_or(key.len())]
                    .rfind('/')
                    .map_or(0, |i| i + 1);
                let prefix = Location::S3 {
                    bucket: bucket.clone(),
                    key: key[..cut].to_string(),
                };
                let pattern = glob::Pattern::new(key).map_err(|e| {
                    Failure::bad_input(format!("input pattern `{loc}` is not a valid glob: {e}"))
                })?;
                let opts = glob::MatchOptions {
                    case_sensitive: true,
                    require_literal_separator: true,
                    require_literal_leading_dot: true,
                };
                let out: Vec<FileMeta> = storage
                    .list(&prefix)?
                    .into_iter()
                    .filter(|m| pattern.matches_with(&location_name(&m.location), opts))
                    .collect();
                if out.is_empty() {
                    return Err(not_found(format!(
                        "no object matches the input pattern {loc}"
                    )));
                }
                out
            } else if let Some(m) = storage.head(loc)? {
                vec![m]
            } else {
                let out: Vec<FileMeta> = storage
                    .list(loc)?
                    .into_iter()
                    .filter(|m| {
                        let name = location_name(&m.location);
                        let base = name.rsplit('/').next().unwrap_or(&name);
                        !is_hidden(base) && matches_format(&name, format)
                    })
                    .collect();
                if out.is_empty() {
                    return Err(not_found(format!(
                        "input {loc} does not exist (no object and no Parquet or CSV objects under that prefix)"
                    )));
                }
                out
            }
        }
    };
    files.sort_by_key(|m| location_name(&m.location));
    Ok(files)
}

fn local_meta(p: &Path) -> Result<FileMeta> {
    let m = std::fs::metadata(p).with_context(|| format!("cannot look at {}", p.display()))?;
    Ok(FileMeta {
        location: Location::Local(p.to_path_buf()),
        size: m.len(),
        version: m.modified().ok().and_then(|t| {
            t.duration_since(std::time::UNIX_EPOCH)
                .ok()
                .map(|d| d.as_nanos().to_string())
        }),
    })
}

fn walk(dir: &Path, out: &mut Vec<FileMeta>) -> Result<()> {
    let mut entries: Vec<PathBuf> = std::fs::read_dir(dir)
        .with_context(|| format!("cannot list input directory {}", dir.display()))?
        .map(|e| e.map(|e| e.path()))
        .collect::<std::io::Result<_>>()?;
    entries.sort();
    for p in entries {
        let name = p.file_name().and_then(|n| n.to_str()).unwrap_or("");
        if is_hidden(name) {
            continue;
        }
        if p.is_dir() {
            walk(&p, out)?;
        } else {
            out.push(local_meta(&p)?);
        }
    }
    Ok(())
}

fn not_parquet(m: &FileMeta, why: &str) -> anyhow::Error {
    Failure::bad_input(format!(
        "{} is not a readable Parquet file ({why}); check the file, or set `input.format = \"csv\"` if it is CSV",
        m.location
    ))
    .into()
}

/// The footer length from a file's last 8 bytes.
fn footer_len(m: &FileMeta, tail: &[u8]) -> Result<u64> {
    if m.size < 12 {
        return Err(not_parquet(m, "too short"));
    }
    if &tail[4..8] != b"PAR1" {
        return Err(not_parquet(m, "no Parquet magic at its end"));
    }
    let len = u32::from_le_bytes(tail[..4].try_into().expect("4 bytes")) as u64;
    if len + 12 > m.size {
        return Err(not_parquet(m, "footer length beyond the file"));
    }
    Ok(len)
}

/// The bytes of a local Parquet file's footer (the Thrift metadata).
fn read_footer(storage: &Storage, m: &FileMeta) -> Result<Vec<u8>> {
    if m.size < 12 {
        return Err(not_parquet(m, "too short"));
    }
    let tail = storage.read_range(&m.location, m.size - 8..m.size)?;
    let len = footer_len(m, &tail)?;
    Ok(storage
        .read_range(&m.location, m.size - 8 - len..m.size - 8)?
        .to_vec())
}

/// [`read_footer`] of an object, async (many in flight).
async fn remote_footer(storage: &Storage, m: &FileMeta) -> Result<Vec<u8>> {
    use object_store::ObjectStoreExt;
    if m.size < 12 {
        return Err(not_parquet(m, "too short"));
    }
    let Location::S3 { bucket, .. } = &m.location else {
        unreachable!("remote footer of a local file")
    };
    let store = storage.s3(bucket)?;
    let path = m.location.object_path().expect("s3 path");
    // One request for the usual footer sizes, a second for larger ones.
    let guess = m.size.min(64 * 1024);
    let tail = store
        .get_range(&path, m.size - guess..m.size)
        .await
        .map_err(|e| crate::storage::s3_error(e, &m.location))?;
    let len = footer_len(m, &tail[tail.len() - 8..])?;
    if len + 8 <= guess {
        let start = (guess - 8 - len) as usize;
        return Ok(tail[start..tail.len() - 8].to_vec());
    }
    Ok(store
        .get_range(&path, m.size - 8 - len..m.size - 8)
        .await
        .map_err(|e| crate::storage::s3_error(e, &m.location))?
        .to_vec())
}

/// The dataset schema: every file must have the same column names and
/// types; a column is nullable when it is in any file; metadata is the
/// first file's.
fn unify_schemas<'a>(
    mut schemas: impl Iterator<Item = (&'a Location, &'a SchemaRef)>,
) -> Result<SchemaRef> {
    let (first_loc, first) = schemas.next().expect("at least one file");
    let mut fields: Vec<Field> = first.fields().iter().map(|f| f.as_ref().clone()).collect();
    for (loc, s) in schemas {
        let same = s.fields().len() == fields.len()
            && s.fields()
                .iter()
                .zip(&fields)
                .all(|(a, b)| a.name() == b.name() && a.data_type() == b.data_type());
        if !same {
            let describe =
                |fs: &mut dyn Iterator<Item = (&String, &arrow::datatypes::DataType)>| {
                    fs.map(|(n, t)| format!("{n}: {t}"))
                        .collect::<Vec<_>>()
                        .join(", ")
                };
            return Err(Failure::bad_input(format!(
                "input files have different schemas: {first_loc} has [{}] but {loc} has [{}]; a dataset's files must share one schema",
                describe(&mut fields.iter().map(|f| (f.name(), f.data_type()))),
                describe(&mut s.fields().iter().map(|f| (f.name(), f.data_type())))
            ))
            .into());
        }
        for (f, g) in fields.iter_mut().zip(s.fields()) {
            if g.is_nullable() && !f.is_nullable() {
                *f = f.clone().with_nullable(true);
            }
        }
    }
    Ok(Arc::new(Schema::new_with_metadata(
        fields,
        first.metadata().clone(),
    )))
}

/// A CSV error without record values: arrow's parse errors quote the value
/// and the whole row, so only the column and line are kept.
pub fn csv_error(
    e: ArrowError,
    file: &Location,
    schema: Option<&Schema>,
    header_lines: usize,
) -> anyhow::Error {
    let text = e.to_string();
    let message = if let Some(pos) = text.find(" as type '") {
        let rest = &text[pos + 10..];
        let ty = rest.split('\'').next().unwrap_or("?");
        let column = rest
            .split("for column ")
            .nth(1)
            .and_then(|r| r.split_whitespace().next())
            .and_then(|c| c.parse::<usize>().ok());
        // arrow counts data rows from 1; the file has the header above them.
        let line = rest
            .split(" at line ")
            .nth(1)
            .and_then(|r| r.split(|c: char| !c.is_ascii_digit()).next())
            .and_then(|l| l.parse::<usize>().ok())
            .map_or("?".to_string(), |l| (l + header_lines).to_string());
        let name = match (column, schema) {
            (Some(c), Some(s)) if c < s.fields().len() => format!("`{}`", s.field(c).name()),
            (Some(c), _) => format!("number {c}"),
            _ => "?".into(),
        };
        format!(
            "malformed CSV in {file}: a value of column {name} on line {line} is not of type {ty} (inferred from the first rows); fix the data, or raise `input.infer_rows` so that the type is inferred from more rows"
        )
    } else if text.contains("Row data") || text.contains("value '") {
        format!("malformed CSV in {file} (details withheld: they would show record values)")
    } else {
        format!("malformed CSV in {file}: {text}")
    };
    anyhow::Error::new(Failure::bad_input(message))
}

/// A CSV `Read` that hashes the bytes it passes on.
struct Hashing<R> {
    inner: R,
    hasher: Rc<RefCell<Sha256>>,
}

impl<R: Read> Read for Hashing<R> {
    fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
        let n = self.inner.read(buf)?;
        self.hasher.borrow_mut().update(&buf[..n]);
        Ok(n)
    }
}

/// Byte ranges of one object for the async Parquet reader; the footer was
/// already read by [`Dataset::open`].
struct ObjectReader {
    store: Arc<dyn object_store::ObjectStore>,
    path: object_store::path::Path,
    metadata: Arc<parquet::file::metadata::ParquetMetaData>,
}

impl AsyncFileReader for ObjectReader {
    fn get_bytes(
        &mut self,
        range: std::ops::Range<u64>,
    ) -> futures::future::BoxFuture<'_, parquet::errors::Result<bytes::Bytes>> {
        use object_store::ObjectStoreExt;
        Box::pin(async move {
            self.store
                .get_range(&self.path, range)
                .await
                .map_err(|e| parquet::errors::ParquetError::External(Box::new(e)))
        })
    }

    fn get_byte_ranges(
        &mut self,
        ranges: Vec<std::ops::Range<u64>>,
    ) -> futures::future::BoxFuture<'_, parquet::errors::Result<Vec<bytes::Bytes>>> {
        Box::pin(async move {
            self.store
                .get_ranges(&self.path, &ranges)
                .await
                .map_err(|e| parquet::errors::ParquetError::External(Box::new(e)))
        })
    }

    fn get_metadata<'a>(
        &'a mut self,
        _options: Option<&'a ArrowReaderOptions>,
    ) -> futures::future::BoxFuture<
        'a,
        parquet::errors::Result<Arc<parquet::file::metadata::ParquetMetaData>>,
    > {
        let m = self.metadata.clone();
        Box::pin(async move { Ok(m) })
    }
}

enum Reader<'a> {
    ParquetLocal(parquet::arrow::arrow_reader::ParquetRecordBatchReader),
    ParquetRemote(Box<parquet::arrow::async_reader::ParquetRecordBatchStream<ObjectReader>>),
    Csv(Box<arrow_csv::reader::Reader<Box<dyn Read + 'a>>>),
}

/// A stream of record batches over every file of a dataset.
pub struct Scan<'a> {
    dataset: &'a Dataset,
    storage: &'a Storage,
    projection: Option<Vec<usize>>,
    schema: SchemaRef,
    next_file: usize,
    current: Option<(Reader<'a>, Location)>,
    hasher: Option<Rc<RefCell<Sha256>>>,
    rows: u64,
    done: bool,
}

impl<'a> Scan<'a> {
    /// Rows read so far.
    pub fn rows(&self) -> u64 {
        self.rows
    }

    /// The hash of the CSV bytes read (after the whole scan).
    pub fn csv_hash(&self) -> Option<[u8; 32]> {
        self.hasher
            .as_ref()
            .map(|h| h.borrow().clone().finalize().into())
    }

    fn open_next(&mut self) -> Result<bool> {
        let dataset: &'a Dataset = self.dataset;
        let storage: &'a Storage = self.storage;
        let Some(f) = dataset.files.get(self.next_file) else {
            return Ok(false);
        };
        self.next_file += 1;
        let loc = f.meta.location.clone();
        let reader = match (&f.parquet, &loc) {
            (Some(meta), Location::Local(p)) => {
                let file = std::fs::File::open(p)
                    .with_context(|| format!("cannot open input {}", p.display()))?;
                let mut b = ParquetRecordBatchReaderBuilder::new_with_metadata(file, meta.clone())
                    .with_batch_size(BATCH_ROWS);
                if let Some(p) = &self.projection {
                    b = b.with_projection(ProjectionMask::roots(
                        meta.parquet_schema(),
                        p.iter().copied(),
                    ));
                }
                Reader::ParquetLocal(
                    b.build()
                        .with_context(|| format!("cannot read Parquet file {loc}"))?,
                )
            }
            (Some(meta), Location::S3 { bucket, .. }) => {
                let store = storage.s3(bucket)?;
                let path = loc.object_path().expect("s3 path");
                let reader = ObjectReader {
                    store,
                    path,
                    metadata: meta.metadata().clone(),
                };
                let mut b =
                    ParquetRecordBatchStreamBuilder::new_with_metadata(reader, meta.clone())
                        .with_batch_size(BATCH_ROWS);
                if let Some(p) = &self.projection {
                    b = b.with_projection(ProjectionMask::roots(
                        meta.parquet_schema(),
                        p.iter().copied(),
                    ));
                }
                Reader::ParquetRemote(Box::new(
                    b.build()
                        .with_context(|| format!("cannot read Parquet object {loc}"))?,
                ))
            }
            (None, _) => {
                let raw = storage.open_read(&loc)?;
                let raw: Box<dyn Read + 'a> = match &self.hasher {
                    Some(h) => Box::new(Hashing {
                        inner: raw,
                        hasher: h.clone(),
                    }),
                    None => raw,
                };
                let mut b = arrow_csv::ReaderBuilder::new(dataset.schema.clone())
                    .with_format(
                        dataset
                            .csv
                            .clone()
                            .expect("csv format")
                            .with_header_validation(self.next_file > 1),
                    )
                    .with_batch_size(BATCH_ROWS);
                if let Some(p) = &self.projection {
                    b = b.with_projection(p.clone());
                }
                Reader::Csv(Box::new(
                    b.build(raw)
                        .map_err(|e| csv_error(e, &loc, Some(&dataset.schema), 0))?,
                ))
            }
        };
        self.current = Some((reader, loc));
        Ok(true)
    }

    fn next_batch(&mut self) -> Result<Option<RecordBatch>> {
        loop {
            if self.current.is_none() && !self.open_next()? {
                return Ok(None);
            }
            let (reader, loc) = self.current.as_mut().expect("open reader");
            let next: Option<Result<RecordBatch>> = match reader {
                Reader::ParquetLocal(r) => r.next().map(|b| {
                    b.map_err(|e| {
                        anyhow::Error::new(Failure::bad_input(format!(
                            "corrupt Parquet data in {loc}: {e}"
                        )))
                    })
                }),
                Reader::ParquetRemote(s) => self.storage.block_on(s.next()).map(|b| {
                    b.map_err(|e| match e {
                        parquet::errors::ParquetError::External(_) => anyhow::Error::new(e)
                            .context(format!("cannot read Parquet object {loc}")),
                        e => anyhow::Error::new(Failure::bad_input(format!(
                            "corrupt Parquet data in {loc}: {e}"
                        ))),
                    })
                }),
                Reader::Csv(r) => {
                    let header = usize::from(self.dataset.csv_header);
                    r.next().map(|b| {
                        b.map_err(|e| csv_read_error(e, loc, &self.dataset.schema, header))
                    })
                }
            };
            match next {
                None => self.current = None,
                Some(Err(e)) => return Err(e),
                Some(Ok(b)) => {
                    self.rows += b.num_rows() as u64;
                    // Batches of every file carry the dataset's schema.
                    let b = if b.schema() == self.schema {
                        b
                    } else {
                        RecordBatch::try_new(self.schema.clone(), b.columns().to_vec())
                            .with_context(|| format!("{loc} does not match the dataset schema"))?
                    };
                    return Ok(Some(b));
                }
            }
        }
    }
}

fn csv_read_error(e: ArrowError, loc: &Location, schema: &Schema, header: usize) -> anyhow::Error {
    match e {
        ArrowError::IoError(msg, io) => anyhow::Error::new(io).context(format!(
            "cannot read {loc}: {}",
            msg.split(" value '").next().unwrap_or("")
        )),
        ArrowError::ExternalError(inner) => {
            anyhow::anyhow!(inner).context(format!("cannot read {loc}"))
        }
        e => csv_error(e, loc, Some(schema), header),
    }
}

impl Iterator for Scan<'_> {
    type Item = Result<RecordBatch>;

    fn next(&mut self) -> Option<Self::Item> {
        if self.done {
            return None;
        }
        match self.next_batch() {
            Ok(Some(b)) => Some(Ok(b)),
            Ok(None) => {
                self.done = true;
                None
            }
            Err(e) => {
                self.done = true;
                Some(Err(e))
            }
        }
    }
}
