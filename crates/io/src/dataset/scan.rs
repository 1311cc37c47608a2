//! [`Scan`]: the record batches of a dataset, file after file, projected
//! to some columns, each batch carrying the dataset's schema; Parquet read
//! locally or by ranged requests, CSV streamed (and hashed when asked).

use std::cell::RefCell;
use std::io::Read;
use std::rc::Rc;
use std::sync::Arc;

use anyhow::{Context, Result};
use arrow::array::RecordBatch;
use arrow::datatypes::SchemaRef;
use futures::StreamExt;
use parquet::arrow::arrow_reader::ParquetRecordBatchReaderBuilder;
use parquet::arrow::async_reader::ParquetRecordBatchStreamBuilder;
use parquet::arrow::ProjectionMask;
use sha2::{Digest, Sha256};

use super::csv_input::{csv_read_error, Hashing};
use super::parquet_input::ObjectReader;
use super::{csv_error, Dataset, Format, BATCH_ROWS};
use crate::exit::Failure;
use crate::storage::{Location, Storage};

/// Batches a [`Dataset::with_read_ahead`] reader decodes ahead of their
/// consumer: enough to keep it busy, few enough to bound memory (each batch
/// is `BATCH_ROWS` rows of every column).
const READ_AHEAD_BATCHES: usize = 4;

/// Threads decoding the row groups of local Parquet input side by side.
const PARALLEL_READERS: usize = 2;

impl Dataset {
    /// Runs `consume` on the dataset's batches (projected to `projection`,
    /// or every column, in scan order) while a second thread reads and
    /// decodes the next ones, so that decoding runs on one core while
    /// `consume` works on another. When `consume` returns early (an error,
    /// an interrupt), the reader stops after the batch it is decoding;
    /// nothing outlives the call. Returns what `consume` returned, the rows
    /// read and, with `fingerprint`, the hash of the CSV bytes read (see
    /// [`Dataset::scan`]).
    pub fn with_read_ahead<T>(
        &self,
        storage: &Storage,
        projection: Option<Vec<usize>>,
        fingerprint: bool,
        consume: impl FnOnce(&mut dyn Iterator<Item = Result<RecordBatch>>) -> T,
    ) -> (T, u64, Option<[u8; 32]>) {
        if let Some(units) = self.local_row_groups() {
            return self.read_row_groups_in_parallel(&units, projection, consume);
        }
        std::thread::scope(|s| {
            let (tx, rx) = std::sync::mpsc::sync_channel(READ_AHEAD_BATCHES);
            let reader = s.spawn(move || {
                let mut scan = self.scan(storage, projection, fingerprint);
                for batch in scan.by_ref() {
                    if tx.send(batch).is_err() {
                        break;
                    }
                }
                (scan.rows(), scan.csv_hash())
            });
            let consumed = consume(&mut rx.into_iter());
            let (rows, hash) = reader.join().unwrap_or((0, None));
            (consumed, rows, hash)
        })
    }

    /// How [`Dataset::with_read_ahead`] will read: `(readers, batches each
    /// decodes ahead)`, for the memory estimate.
    pub fn read_ahead(&self) -> (u64, u64) {
        match self.local_row_groups() {
            Some(units) => {
                let most_rows = units.iter().map(|u| u.2).max().unwrap_or(0);
                (
                    PARALLEL_READERS as u64,
                    (most_rows.div_ceil(BATCH_ROWS) + 1) as u64,
                )
            }
            None => (1, READ_AHEAD_BATCHES as u64),
        }
    }

    /// Every row group of a dataset of local Parquet files, in scan order
    /// (file, row group, its rows), when there are several to read side by
    /// side.
    fn local_row_groups(&self) -> Option<Vec<(usize, usize, usize)>> {
        let mut units = Vec::new();
        for (i, f) in self.files.iter().enumerate() {
            let (Some(meta), Location::Local(_)) = (&f.parquet, &f.meta.location) else {
                return None;
            };
            for (g, rg) in meta.metadata().row_groups().iter().enumerate() {
                units.push((i, g, rg.num_rows().max(0) as usize));
            }
        }
        (units.len() > 1).then_some(units)
    }

    /// [`Dataset::with_read_ahead`] over local Parquet row groups, decoded
    /// by [`PARALLEL_READERS`] threads (row group `i` by thread `i mod
    /// n`), each a row group ahead, and handed to `consume` in scan order.
    fn read_row_groups_in_parallel<T>(
        &self,
        units: &[(usize, usize, usize)],
        projection: Option<Vec<usize>>,
        consume: impl FnOnce(&mut dyn Iterator<Item = Result<RecordBatch>>) -> T,
    ) -> (T, u64, Option<[u8; 32]>) {
        let schema = match &projection {
            Some(p) => Arc::new(self.schema.project(p).expect("projection in range")),
            None => self.schema.clone(),
        };
        let most_rows = units.iter().map(|u| u.2).max().unwrap_or(0);
        let ahead = most_rows.div_ceil(BATCH_ROWS) + 1;
        std::thread::scope(|s| {
            let mut receivers = Vec::with_capacity(PARALLEL_READERS);
            for t in 0..PARALLEL_READERS {
                let (tx, rx) = std::sync::mpsc::sync_channel::<Option<Result<RecordBatch>>>(ahead);
                receivers.push(rx);
                let (projection, schema) = (projection.clone(), schema.clone());
                s.spawn(move || {
                    for &(file, group, _) in units.iter().skip(t).step_by(PARALLEL_READERS) {
                        let batches = self.row_group(file, group, projection.as_deref(), &schema);
                        for b in batches {
                            let failed = b.is_err();
                            if tx.send(Some(b)).is_err() || failed {
                                return;
                            }
                        }
                        if tx.send(None).is_err() {
                            return;
                        }
                    }
                });
            }
            let mut rows = 0u64;
            let mut unit = 0usize;
            let mut failed = false;
            let mut batches = std::iter::from_fn(|| {
                while unit < units.len() && !failed {
                    match receivers[unit % PARALLEL_READERS].recv() {
                        Ok(Some(Ok(b))) => {
                            rows += b.num_rows() as u64;
                            return Some(Ok(b));
                        }
                        Ok(Some(Err(e))) => {
                            failed = true;
                            return Some(Err(e));
                        }
                        Ok(None) => unit += 1,
                        Err(_) => {
                            failed = true;
                            return Some(Err(anyhow::anyhow!(
                                "a Parquet reader thread stopped (a bug in kanon); nothing was written"
                            )));
                        }
                    }
                }
                None
            });
            let consumed = consume(&mut batches);
            drop(receivers);
            (consumed, rows, None)
        })
    }

    /// The batches of one row group of a local Parquet file, projected,
    /// carrying `schema`.
    fn row_group<'a>(
        &'a self,
        file: usize,
        group: usize,
        projection: Option<&[usize]>,
        schema: &'a SchemaRef,
    ) -> Box<dyn Iterator<Item = Result<RecordBatch>> + 'a> {
        let f = &self.files[file];
        let (Some(meta), Location::Local(p)) = (&f.parquet, &f.meta.location) else {
            unreachable!("local Parquet row groups only");
        };
        let loc = &f.meta.location;
        let reader = std::fs::File::open(p)
            .with_context(|| format!("cannot open input {}", p.display()))
            .and_then(|file| {
                let mut b = ParquetRecordBatchReaderBuilder::new_with_metadata(file, meta.clone())
                    .with_batch_size(BATCH_ROWS)
                    .with_row_groups(vec![group]);
                if let Some(p) = projection {
                    b = b.with_projection(ProjectionMask::roots(
                        meta.parquet_schema(),
                        p.iter().copied(),
                    ));
                }
                b.build()
                    .with_context(|| format!("cannot read Parquet file {loc}"))
            });
        match reader {
            Err(e) => Box::new(std::iter::once(Err(e))),
            Ok(r) => Box::new(r.map(move |b| {
                let b = b.map_err(|e| {
                    anyhow::Error::new(Failure::bad_input(format!(
                        "corrupt Parquet data in {loc}: {e}"
                    )))
                })?;
                with_schema(b, schema, loc)
            })),
        }
    }

    /// Streams the dataset, projected to the columns `projection` (indices
    /// into [`Dataset::schema`], ascending), or every column.
    ///
    /// With `fingerprint` set, CSV bytes are hashed while they are read (see
    /// `Scan::csv_hash` and [`Dataset::fingerprint`]).
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
            slices: self.memory.as_deref().map(
                |b| -> Box<dyn Iterator<Item = Result<RecordBatch>> + 'a> {
                    Box::new(super::memory::slices(b, projection.as_deref()))
                },
            ),
            dataset: self,
            storage,
            projection,
            schema,
            next_file: 0,
            current: None,
            hasher: (fingerprint && self.format == Format::Csv)
                .then(|| Rc::new(RefCell::new(Sha256::new()))),
            rows: 0,
            file_rows: 0,
            done: false,
        }
    }
}

enum Reader<'a> {
    ParquetLocal(parquet::arrow::arrow_reader::ParquetRecordBatchReader),
    ParquetRemote(Box<parquet::arrow::async_reader::ParquetRecordBatchStream<ObjectReader>>),
    Csv(Box<arrow_csv::reader::Reader<Box<dyn Read + 'a>>>),
}

/// A stream of record batches over every file of a dataset.
pub struct Scan<'a> {
    /// The slices of a table in memory, read instead of files.
    slices: Option<Box<dyn Iterator<Item = Result<RecordBatch>> + 'a>>,
    dataset: &'a Dataset,
    storage: &'a Storage,
    projection: Option<Vec<usize>>,
    schema: SchemaRef,
    next_file: usize,
    current: Option<(Reader<'a>, Location)>,
    hasher: Option<Rc<RefCell<Sha256>>>,
    rows: u64,
    /// Rows read from the current file.
    file_rows: u64,
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
                // Numbers and booleans are read as text and checked to
                // print back before they are converted, in every row (not
                // only the rows type inference saw): `007` must not become 7.
                let mut b =
                    arrow_csv::ReaderBuilder::new(super::csv_input::as_read(&dataset.schema))
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
        if let Some(slices) = &mut self.slices {
            return match slices.next().transpose()? {
                Some(b) => {
                    self.rows += b.num_rows() as u64;
                    RecordBatch::try_new(self.schema.clone(), b.columns().to_vec())
                        .context("a batch in memory does not match its table's schema")
                        .map(Some)
                }
                None => Ok(None),
            };
        }
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
                            .and_then(|b| {
                                let first_line = header as u64 + self.file_rows + 1;
                                super::csv_input::typed(
                                    b,
                                    &self.schema,
                                    loc,
                                    first_line,
                                    self.dataset.csv_infer_rows,
                                )
                            })
                    })
                }
            };
            match next {
                None => {
                    self.current = None;
                    self.file_rows = 0;
                }
                Some(Err(e)) => return Err(e),
                Some(Ok(b)) => {
                    self.rows += b.num_rows() as u64;
                    self.file_rows += b.num_rows() as u64;
                    return with_schema(b, &self.schema, loc).map(Some);
                }
            }
        }
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

/// `batch` carrying `schema` (batches of every file carry the dataset's
/// schema); an error naming the file `loc` when its columns do not fit it.
fn with_schema(batch: RecordBatch, schema: &SchemaRef, loc: &Location) -> Result<RecordBatch> {
    if batch.schema() == *schema {
        Ok(batch)
    } else {
        RecordBatch::try_new(schema.clone(), batch.columns().to_vec())
            .with_context(|| format!("{loc} does not match the dataset schema"))
    }
}
