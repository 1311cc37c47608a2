//! `kanon generate`: Adult-like test data at any scale.
//!
//! `kanon generate --like adult --rows N --seed S --extra-columns C OUTPUT`
//! writes a Parquet file with Adult's nine columns (the eight
//! quasi-identifiers and the salary class, same names and types) followed by
//! `C` extra columns `extra_0 ..`.
//!
//! # How rows are drawn
//! The bundled Adult table (`data/adult/adult.parquet`, 30,162 records) is
//! embedded in the binary, so the command works from any directory.
//! 1. Each row starts as a copy of a uniformly drawn Adult record: the joint
//!    distribution of the attributes, and with it the class structure, is
//!    Adult's.
//! 2. Each attribute of the row (salary class included) is, with probability
//!    `--noise` (default 0.02), replaced by the same attribute of another
//!    uniformly drawn record, i.e. redrawn from its marginal distribution.
//! 3. Age then moves by a uniform integer in `-2..=2`, clamped to Adult's
//!    range (17..=90).
//!
//! Without steps 2 and 3 a large file would only repeat Adult's 18,109
//! distinct QI tuples; with them it has a long tail of rare tuples, as a real
//! population of that size would, while keeping Adult's correlations. Every
//! categorical value is one of Adult's, so the bundled hierarchies cover it.
//!
//! Extra column `extra_i` has type `[int64, float64, string, timestamp(us,
//! UTC)][i % 4]`; string columns alternate between low cardinality
//! (`cat_000`..`cat_999`, for even `i / 4`) and high cardinality (16 hex
//! digits); the share of nulls is `[0, 1 %, 10 %][i % 3]`.
//!
//! # Determinism
//! Rows are made in fixed chunks of [`CHUNK_ROWS`]; each chunk draws from its
//! own ChaCha8 stream per column group, keyed by (seed, column, chunk index).
//! The file is therefore byte-identical for the same arguments whatever the
//! number of threads, and the Adult columns do not depend on `--extra-columns`.
//!
//! # Memory and speed
//! Chunks are generated in parallel (rayon) while the previous window of
//! chunks is encoded, with the columns of each chunk encoded in parallel
//! into the current row group. Memory is one row group's encoded pages plus
//! two windows of chunks, whatever `--rows` is.
//!
//! # Atomicity
//! The file is written under a temporary name in the destination directory
//! and renamed into place once complete and synced; an existing file is kept
//! unless `--overwrite` is given.

use std::fs::File;
use std::path::PathBuf;
use std::process::ExitCode;
use std::sync::Arc;
use std::time::Instant;

use anyhow::{bail, ensure, Context, Result};
use arrow::array::{
    ArrayRef, AsArray, Float64Array, Int64Array, RecordBatch, StringArray, StringBuilder,
    TimestampMicrosecondArray,
};
use arrow::buffer::NullBuffer;
use arrow::datatypes::{DataType, Field, Int64Type, Schema, SchemaRef, TimeUnit};
use clap::{Args, ValueEnum};
use parquet::arrow::arrow_reader::ParquetRecordBatchReaderBuilder;
use parquet::arrow::arrow_writer::{
    compute_leaves, ArrowColumnChunk, ArrowColumnWriter, ArrowRowGroupWriterFactory,
};
use parquet::arrow::ArrowWriter;
use parquet::basic::{Compression, ZstdLevel};
use parquet::file::metadata::KeyValue;
use parquet::file::properties::WriterProperties;
use parquet::file::writer::SerializedFileWriter;
use rand::{Rng, RngCore, SeedableRng};
use rand_chacha::ChaCha8Rng;
use rayon::prelude::*;

/// The bundled Adult table, embedded so that `kanon generate` needs no data
/// directory (88 kB).
const ADULT_PARQUET: &[u8] = include_bytes!("../../../data/adult/adult.parquet");

/// Rows per generated chunk: the unit of randomness (one stream per chunk)
/// and of parallel work. Fixed, so that the output does not depend on the
/// thread count or the row-group size.
pub const CHUNK_ROWS: usize = 65_536;

/// Largest accepted `--extra-columns`.
const MAX_EXTRA_COLUMNS: usize = 10_000;

/// How far age is jittered either way.
const AGE_JITTER: i64 = 2;

/// Distinct values of a low-cardinality extra string column.
const LOW_CARDINALITY: usize = 1_000;

/// Timestamps are drawn from [2000-01-01, 2025-01-01) UTC, whole seconds.
const TIMESTAMP_FROM_S: i64 = 946_684_800;
const TIMESTAMP_SPAN_S: i64 = 788_918_400;

/// Domain separation for the random streams: changing the generator's
/// algorithm should change this, so old and new files are never confused.
const STREAM_TAG: &[u8; 16] = b"kanon-generate-1";

/// Arguments of `kanon generate`.
#[derive(Debug, Args)]
pub struct GenerateArgs {
    /// The table whose distribution the rows follow.
    #[arg(long, value_enum, default_value_t = Like::Adult)]
    like: Like,
    /// Number of rows to write.
    #[arg(long)]
    rows: u64,
    /// Seed: the same arguments give a byte-identical file.
    #[arg(long, default_value_t = 1)]
    seed: u64,
    /// Number of extra non-QI columns `extra_0 ..` (int64, float64, string,
    /// timestamp in turn, some with nulls).
    #[arg(long, default_value_t = 0)]
    extra_columns: usize,
    /// Probability that an attribute of a row is redrawn from its marginal
    /// distribution instead of copied from the sampled Adult record (0..=1).
    #[arg(long, default_value_t = 0.02)]
    noise: f64,
    /// Rows per Parquet row group.
    #[arg(long, default_value_t = 1 << 20)]
    row_group_rows: usize,
    /// Replace OUTPUT if it exists.
    #[arg(long)]
    overwrite: bool,
    /// The Parquet file to write.
    output: PathBuf,
}

/// Tables `kanon generate` can imitate.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum Like {
    /// The bundled UCI Adult table (8 QIs and the salary class).
    Adult,
}

impl Like {
    /// The name used on the command line.
    fn name(self) -> &'static str {
        match self {
            Like::Adult => "adult",
        }
    }
}

/// Runs `kanon generate`.
pub fn run(args: &GenerateArgs, quiet: bool) -> Result<ExitCode> {
    let start = Instant::now();
    ensure!(
        args.rows >= 1,
        "--rows must be at least 1 (got {})",
        args.rows
    );
    ensure!(
        args.row_group_rows >= 1,
        "--row-group-rows must be at least 1 (got {})",
        args.row_group_rows
    );
    ensure!(
        args.extra_columns <= MAX_EXTRA_COLUMNS,
        "--extra-columns must be at most {MAX_EXTRA_COLUMNS} (got {})",
        args.extra_columns
    );
    ensure!(
        (0.0..=1.0).contains(&args.noise),
        "--noise is a probability and must be within 0..=1 (got {})",
        args.noise
    );
    let dest = &args.output;
    if dest.is_dir() {
        bail!(
            "output {} is a directory; give a file name such as {}",
            dest.display(),
            dest.join("generated.parquet").display()
        );
    }
    if dest.exists() && !args.overwrite {
        bail!(
            "output {} already exists; pass --overwrite to replace it or choose another OUTPUT",
            dest.display()
        );
    }
    let model = Model::new(args.like, args.seed, args.noise, args.extra_columns)?;
    let dir = match dest.parent() {
        Some(d) if !d.as_os_str().is_empty() => d.to_path_buf(),
        _ => PathBuf::from("."),
    };
    std::fs::create_dir_all(&dir)
        .with_context(|| format!("cannot create output directory {}", dir.display()))?;
    let tmp = tempfile::Builder::new()
        .prefix(".kanon-generate-")
        .suffix(".parquet.tmp")
        .tempfile_in(&dir)
        .with_context(|| format!("cannot create a temporary file in {}", dir.display()))?;
    let file = tmp.as_file().try_clone()?;
    let metadata = vec![
        KeyValue::new(
            "kanon.version".into(),
            env!("CARGO_PKG_VERSION").to_string(),
        ),
        KeyValue::new(
            "kanon.generate".into(),
            serde_json::json!({
                "like": args.like.name(),
                "rows": args.rows,
                "seed": args.seed,
                "extra_columns": args.extra_columns,
                "noise": args.noise,
                "row_group_rows": args.row_group_rows,
            })
            .to_string(),
        ),
    ];
    let row_groups = write(&model, args.rows, args.row_group_rows, file, metadata)
        .with_context(|| format!("cannot write {}", dest.display()))?;
    tmp.as_file()
        .sync_all()
        .with_context(|| format!("cannot sync {}", tmp.path().display()))?;
    if args.overwrite {
        tmp.persist(dest).map_err(|e| e.error)
    } else {
        tmp.persist_noclobber(dest).map_err(|e| e.error)
    }
    .with_context(|| {
        format!(
            "cannot move the generated file into place at {}",
            dest.display()
        )
    })?;
    if !quiet {
        let bytes = std::fs::metadata(dest).map(|m| m.len()).unwrap_or(0);
        println!(
            "kanon generate: {} rows like {} (seed {}, {} extra columns) -> {} ({:.1} MB, {} row groups) in {:.2} s",
            args.rows,
            args.like.name(),
            args.seed,
            args.extra_columns,
            dest.display(),
            bytes as f64 / 1e6,
            row_groups,
            start.elapsed().as_secs_f64()
        );
    }
    Ok(ExitCode::SUCCESS)
}

/// Writes `rows` generated rows as Parquet to `file`; returns the number of
/// row groups.
fn write(
    model: &Model,
    rows: u64,
    row_group_rows: usize,
    file: File,
    metadata: Vec<KeyValue>,
) -> Result<usize> {
    let props = WriterProperties::builder()
        .set_compression(Compression::ZSTD(ZstdLevel::try_new(1)?))
        .set_dictionary_enabled(true)
        .set_max_row_group_row_count(Some(row_group_rows))
        .set_key_value_metadata(Some(metadata))
        .build();
    // ArrowWriter embeds the Arrow schema (timestamp time zone, ...) in the
    // footer; its lower half lets us encode the columns in parallel.
    let (file_writer, factory) =
        ArrowWriter::try_new(file, model.schema.clone(), Some(props))?.into_serialized_writer()?;
    let mut out = RowGroups {
        schema: model.schema.clone(),
        writers: factory.create_column_writers(0)?,
        factory,
        file_writer,
        capacity: row_group_rows,
        rows: 0,
        done: 0,
    };
    let chunks = rows.div_ceil(CHUNK_ROWS as u64);
    let window = (2 * rayon::current_num_threads()).max(2) as u64;
    let windows = chunks.div_ceil(window);
    let window_of = |w: u64| (w * window)..((w + 1) * window).min(chunks);
    let mut current = model.generate(window_of(0), rows)?;
    for w in 1..=windows {
        let (next, written) = rayon::join(
            || {
                if w < windows {
                    model.generate(window_of(w), rows)
                } else {
                    Ok(Vec::new())
                }
            },
            || out.write(std::mem::take(&mut current)),
        );
        written?;
        current = next?;
    }
    if out.rows > 0 {
        out.flush()?;
    }
    let done = out.done;
    out.file_writer.close()?;
    Ok(done)
}

/// The file being written: its current row group's column writers.
struct RowGroups {
    schema: SchemaRef,
    factory: ArrowRowGroupWriterFactory,
    file_writer: SerializedFileWriter<File>,
    writers: Vec<ArrowColumnWriter>,
    /// Rows per row group.
    capacity: usize,
    /// Rows in the current row group.
    rows: usize,
    /// Row groups written.
    done: usize,
}

impl RowGroups {
    /// Appends batches, starting a new row group whenever one is full.
    fn write(&mut self, batches: Vec<RecordBatch>) -> Result<()> {
        for batch in batches {
            let mut offset = 0;
            while offset < batch.num_rows() {
                let take = (batch.num_rows() - offset).min(self.capacity - self.rows);
                let slice = batch.slice(offset, take);
                let mut leaves = Vec::with_capacity(self.writers.len());
                for (field, column) in self.schema.fields().iter().zip(slice.columns()) {
                    leaves.extend(compute_leaves(field, column)?);
                }
                self.writers
                    .par_iter_mut()
                    .zip(leaves.into_par_iter())
                    .try_for_each(|(w, leaf)| w.write(&leaf))?;
                self.rows += take;
                offset += take;
                if self.rows == self.capacity {
                    self.flush()?;
                }
            }
        }
        Ok(())
    }

    /// Closes the current row group and appends it to the file.
    fn flush(&mut self) -> Result<()> {
        let next = self.factory.create_column_writers(self.done + 1)?;
        let writers = std::mem::replace(&mut self.writers, next);
        let chunks = writers
            .into_par_iter()
            .map(ArrowColumnWriter::close)
            .collect::<parquet::errors::Result<Vec<ArrowColumnChunk>>>()?;
        let mut row_group = self.file_writer.next_row_group()?;
        for chunk in chunks {
            chunk.append_to_row_group(&mut row_group)?;
        }
        row_group.close()?;
        self.done += 1;
        self.rows = 0;
        Ok(())
    }
}

/// One column of the source table.
enum SourceColumn {
    /// Integers (Adult: age): copied, then jittered and clamped to the
    /// observed range.
    Integer {
        values: Vec<i64>,
        jitter: i64,
        min: i64,
        max: i64,
    },
    /// Strings, as codes into their distinct values.
    Category {
        values: Vec<String>,
        codes: Vec<u16>,
    },
}

/// The kind of an extra column.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum ExtraKind {
    Int,
    Float,
    LowCardinalityString,
    HighCardinalityString,
    Timestamp,
}

/// Kind and share of nulls of `extra_{i}`.
fn extra_column(i: usize) -> (ExtraKind, f64) {
    let kind = match i % 4 {
        0 => ExtraKind::Int,
        1 => ExtraKind::Float,
        2 if (i / 4) % 2 == 0 => ExtraKind::LowCardinalityString,
        2 => ExtraKind::HighCardinalityString,
        _ => ExtraKind::Timestamp,
    };
    (kind, [0.0, 0.01, 0.1][i % 3])
}

/// Everything needed to generate any chunk of rows.
struct Model {
    schema: SchemaRef,
    seed: u64,
    source: Vec<SourceColumn>,
    records: u32,
    /// A draw `next_u32() < noise` redraws an attribute.
    noise: u64,
    extras: Vec<(ExtraKind, u64)>,
    labels: Vec<String>,
}

/// A probability as a threshold on a uniform `u32`.
fn threshold(p: f64) -> u64 {
    (p * (1u64 << 32) as f64).round() as u64
}

/// Whether a draw falls under a threshold made by [`threshold`].
#[inline]
fn hit(rng: &mut ChaCha8Rng, t: u64) -> bool {
    (rng.next_u32() as u64) < t
}

/// The random stream of one column group of one chunk.
fn stream(seed: u64, column: u64, chunk: u64) -> ChaCha8Rng {
    let mut key = [0u8; 32];
    key[..8].copy_from_slice(&seed.to_le_bytes());
    key[8..16].copy_from_slice(&column.to_le_bytes());
    key[16..].copy_from_slice(STREAM_TAG);
    let mut rng = ChaCha8Rng::from_seed(key);
    rng.set_stream(chunk);
    rng
}

impl Model {
    /// Loads the source table and prepares the output schema.
    fn new(like: Like, seed: u64, noise: f64, extra_columns: usize) -> Result<Model> {
        let Like::Adult = like;
        let reader =
            ParquetRecordBatchReaderBuilder::try_new(bytes::Bytes::from_static(ADULT_PARQUET))
                .context("the embedded Adult table is unreadable (a bug in this kanon build)")?
                .build()?;
        let batches = reader.collect::<Result<Vec<_>, _>>()?;
        let schema = batches
            .first()
            .map(|b| b.schema())
            .context("the embedded Adult table is empty (a bug in this kanon build)")?;
        let mut fields: Vec<Field> = Vec::new();
        let mut source = Vec::new();
        for (i, field) in schema.fields().iter().enumerate() {
            let columns: Vec<&ArrayRef> = batches.iter().map(|b| b.column(i)).collect();
            match field.data_type() {
                DataType::Int64 => {
                    let mut values = Vec::new();
                    for c in columns {
                        values.extend(c.as_primitive::<Int64Type>().iter().flatten());
                    }
                    let min = values.iter().copied().min().unwrap_or(0);
                    let max = values.iter().copied().max().unwrap_or(0);
                    source.push(SourceColumn::Integer {
                        values,
                        jitter: if field.name() == "age" { AGE_JITTER } else { 0 },
                        min,
                        max,
                    });
                    fields.push(field.as_ref().clone());
                }
                DataType::Utf8 | DataType::LargeUtf8 | DataType::Utf8View => {
                    let mut values: Vec<String> = Vec::new();
                    let mut index = rustc_hash::FxHashMap::<String, u16>::default();
                    let mut codes = Vec::new();
                    for c in columns {
                        let c = arrow::compute::cast(c, &DataType::Utf8)?;
                        for v in c.as_string::<i32>().iter() {
                            let v = v.context("the embedded Adult table has a null")?;
                            let code = match index.get(v) {
                                Some(&code) => code,
                                None => {
                                    let code = u16::try_from(values.len())?;
                                    values.push(v.to_string());
                                    index.insert(v.to_string(), code);
                                    code
                                }
                            };
                            codes.push(code);
                        }
                    }
                    source.push(SourceColumn::Category { values, codes });
                    fields.push(field.as_ref().clone().with_data_type(DataType::Utf8));
                }
                other => bail!(
                    "the embedded Adult table has column `{}` of unsupported type {other}",
                    field.name()
                ),
            }
        }
        let records = batches.iter().map(|b| b.num_rows()).sum::<usize>();
        let records = u32::try_from(records)?;
        ensure!(records > 0, "the embedded Adult table has no rows");
        let mut extras = Vec::with_capacity(extra_columns);
        for i in 0..extra_columns {
            let (kind, nulls) = extra_column(i);
            let data_type = match kind {
                ExtraKind::Int => DataType::Int64,
                ExtraKind::Float => DataType::Float64,
                ExtraKind::LowCardinalityString | ExtraKind::HighCardinalityString => {
                    DataType::Utf8
                }
                ExtraKind::Timestamp => {
                    DataType::Timestamp(TimeUnit::Microsecond, Some("UTC".into()))
                }
            };
            fields.push(Field::new(format!("extra_{i}"), data_type, true));
            extras.push((kind, threshold(nulls)));
        }
        Ok(Model {
            schema: Arc::new(Schema::new(fields)),
            seed,
            source,
            records,
            noise: threshold(noise),
            extras,
            labels: (0..LOW_CARDINALITY)
                .map(|i| format!("cat_{i:03}"))
                .collect(),
        })
    }

    /// Generates the chunks in `range` (in parallel) of a file of `rows` rows.
    fn generate(&self, range: std::ops::Range<u64>, rows: u64) -> Result<Vec<RecordBatch>> {
        range
            .into_par_iter()
            .map(|chunk| {
                let start = chunk * CHUNK_ROWS as u64;
                let len = (rows - start).min(CHUNK_ROWS as u64) as usize;
                self.chunk(chunk, len)
            })
            .collect()
    }

    /// Generates chunk number `chunk`, holding `len` rows.
    fn chunk(&self, chunk: u64, len: usize) -> Result<RecordBatch> {
        let mut columns = self.source_columns(chunk, len);
        for (i, &(kind, nulls)) in self.extras.iter().enumerate() {
            let mut rng = stream(self.seed, 1 + i as u64, chunk);
            columns.push(self.extra(kind, nulls, &mut rng, len));
        }
        Ok(RecordBatch::try_new(self.schema.clone(), columns)?)
    }

    /// The source table's columns for one chunk: a sampled record per row,
    /// each attribute redrawn from its marginal with probability `noise`,
    /// integers jittered.
    fn source_columns(&self, chunk: u64, len: usize) -> Vec<ArrayRef> {
        let mut rng = stream(self.seed, 0, chunk);
        let n = self.records;
        let mut ints: Vec<Vec<i64>> = Vec::new();
        let mut codes: Vec<Vec<u16>> = Vec::new();
        for c in &self.source {
            match c {
                SourceColumn::Integer { .. } => ints.push(Vec::with_capacity(len)),
                SourceColumn::Category { .. } => codes.push(Vec::with_capacity(len)),
            }
        }
        for _ in 0..len {
            let record = rng.gen_range(0..n) as usize;
            let (mut i, mut s) = (0, 0);
            for c in &self.source {
                let r = if hit(&mut rng, self.noise) {
                    rng.gen_range(0..n) as usize
                } else {
                    record
                };
                match c {
                    SourceColumn::Integer {
                        values,
                        jitter,
                        min,
                        max,
                    } => {
                        let mut v = values[r];
                        if *jitter > 0 {
                            v = (v + rng.gen_range(-jitter..=*jitter)).clamp(*min, *max);
                        }
                        ints[i].push(v);
                        i += 1;
                    }
                    SourceColumn::Category { codes: src, .. } => {
                        codes[s].push(src[r]);
                        s += 1;
                    }
                }
            }
        }
        let (mut ints, mut codes) = (ints.into_iter(), codes.into_iter());
        self.source
            .iter()
            .map(|c| -> ArrayRef {
                match c {
                    SourceColumn::Integer { .. } => {
                        Arc::new(Int64Array::from(ints.next().unwrap_or_default()))
                    }
                    SourceColumn::Category { values, .. } => {
                        let codes = codes.next().unwrap_or_default();
                        Arc::new(strings(values, &codes))
                    }
                }
            })
            .collect()
    }

    /// One extra column for one chunk.
    fn extra(&self, kind: ExtraKind, nulls: u64, rng: &mut ChaCha8Rng, len: usize) -> ArrayRef {
        let mut valid = Vec::with_capacity(len);
        match kind {
            ExtraKind::Int => {
                let mut v = Vec::with_capacity(len);
                for _ in 0..len {
                    valid.push(!hit(rng, nulls));
                    v.push(rng.gen_range(0..1_000_000i64));
                }
                Arc::new(Int64Array::new(v.into(), null_buffer(valid)))
            }
            ExtraKind::Float => {
                let mut v = Vec::with_capacity(len);
                for _ in 0..len {
                    valid.push(!hit(rng, nulls));
                    // An amount with cents, 0.00 ..= 1000.00.
                    v.push(rng.gen_range(0..=100_000i64) as f64 / 100.0);
                }
                Arc::new(Float64Array::new(v.into(), null_buffer(valid)))
            }
            ExtraKind::Timestamp => {
                let mut v = Vec::with_capacity(len);
                for _ in 0..len {
                    valid.push(!hit(rng, nulls));
                    let s = TIMESTAMP_FROM_S + rng.gen_range(0..TIMESTAMP_SPAN_S);
                    v.push(s * 1_000_000);
                }
                Arc::new(
                    TimestampMicrosecondArray::new(v.into(), null_buffer(valid))
                        .with_timezone("UTC"),
                )
            }
            ExtraKind::LowCardinalityString => {
                let mut b = StringBuilder::with_capacity(len, len * 7);
                for _ in 0..len {
                    let null = hit(rng, nulls);
                    let label = &self.labels[rng.gen_range(0..LOW_CARDINALITY)];
                    if null {
                        b.append_null();
                    } else {
                        b.append_value(label);
                    }
                }
                Arc::new(b.finish())
            }
            ExtraKind::HighCardinalityString => {
                const HEX: &[u8; 16] = b"0123456789abcdef";
                let mut b = StringBuilder::with_capacity(len, len * 16);
                let mut text = [0u8; 16];
                for _ in 0..len {
                    let null = hit(rng, nulls);
                    let mut x = rng.next_u64();
                    for t in text.iter_mut().rev() {
                        *t = HEX[(x & 15) as usize];
                        x >>= 4;
                    }
                    if null {
                        b.append_null();
                    } else {
                        // The bytes are ASCII hex digits.
                        b.append_value(std::str::from_utf8(&text).unwrap_or_default());
                    }
                }
                Arc::new(b.finish())
            }
        }
    }
}

/// A validity buffer, or none when every value is valid.
fn null_buffer(valid: Vec<bool>) -> Option<NullBuffer> {
    if valid.iter().all(|&v| v) {
        None
    } else {
        Some(NullBuffer::from(valid))
    }
}

/// A string array from codes into `values`.
fn strings(values: &[String], codes: &[u16]) -> StringArray {
    let bytes = codes.iter().map(|&c| values[c as usize].len()).sum();
    let mut b = StringBuilder::with_capacity(codes.len(), bytes);
    for &c in codes {
        b.append_value(&values[c as usize]);
    }
    b.finish()
}

#[cfg(test)]
mod tests {
    use super::*;
    use arrow::array::Array;

    const QIS: [&str; 8] = [
        "age",
        "sex",
        "race",
        "marital-status",
        "education",
        "native-country",
        "workclass",
        "occupation",
    ];

    /// The number of distinct tuples of `columns` in `batches`.
    fn distinct_tuples(batches: &[RecordBatch], columns: &[&str]) -> usize {
        let mut seen = std::collections::HashSet::new();
        for b in batches {
            let cols: Vec<ArrayRef> = columns
                .iter()
                .map(|c| {
                    arrow::compute::cast(b.column_by_name(c).unwrap(), &DataType::Utf8).unwrap()
                })
                .collect();
            for r in 0..b.num_rows() {
                let key: Vec<String> = cols
                    .iter()
                    .map(|c| c.as_string::<i32>().value(r).to_string())
                    .collect();
                seen.insert(key);
            }
        }
        seen.len()
    }

    fn adult() -> Vec<RecordBatch> {
        ParquetRecordBatchReaderBuilder::try_new(bytes::Bytes::from_static(ADULT_PARQUET))
            .unwrap()
            .build()
            .unwrap()
            .collect::<Result<Vec<_>, _>>()
            .unwrap()
    }

    fn rows(model: &Model, n: u64) -> Vec<RecordBatch> {
        model.generate(0..n.div_ceil(CHUNK_ROWS as u64), n).unwrap()
    }

    #[test]
    fn schema_is_adults_then_extras() {
        let m = Model::new(Like::Adult, 1, 0.02, 9).unwrap();
        let names: Vec<&str> = m
            .schema
            .fields()
            .iter()
            .map(|f| f.name().as_str())
            .collect();
        assert_eq!(
            names,
            [
                "sex",
                "age",
                "race",
                "marital-status",
                "education",
                "native-country",
                "workclass",
                "occupation",
                "salary-class",
                "extra_0",
                "extra_1",
                "extra_2",
                "extra_3",
                "extra_4",
                "extra_5",
                "extra_6",
                "extra_7",
                "extra_8",
            ]
        );
        assert_eq!(m.records, 30_162);
        assert_eq!(m.schema.field(1).data_type(), &DataType::Int64);
        assert_eq!(m.schema.field(9).data_type(), &DataType::Int64);
        assert_eq!(m.schema.field(10).data_type(), &DataType::Float64);
        assert_eq!(m.schema.field(11).data_type(), &DataType::Utf8);
        assert!(matches!(
            m.schema.field(12).data_type(),
            DataType::Timestamp(TimeUnit::Microsecond, Some(tz)) if tz.as_ref() == "UTC"
        ));
    }

    #[test]
    fn chunks_are_deterministic_and_independent_of_window_and_extras() {
        let a = Model::new(Like::Adult, 7, 0.02, 4).unwrap();
        let b = Model::new(Like::Adult, 7, 0.02, 0).unwrap();
        let n = 3 * CHUNK_ROWS as u64 + 5;
        let all = a.generate(0..4, n).unwrap();
        let one_by_one: Vec<RecordBatch> = (0..4)
            .map(|c| a.generate(c..c + 1, n).unwrap().remove(0))
            .collect();
        assert_eq!(all, one_by_one);
        assert_eq!(all[3].num_rows(), 5);
        let adult_only = b.generate(0..4, n).unwrap();
        for (x, y) in all.iter().zip(&adult_only) {
            assert_eq!(x.columns()[..9], y.columns()[..]);
        }
        let other_seed = Model::new(Like::Adult, 8, 0.02, 4).unwrap();
        assert_ne!(other_seed.generate(0..1, n).unwrap()[0], all[0]);
    }

    #[test]
    fn without_noise_every_row_is_an_adult_record_up_to_age() {
        let m = Model::new(Like::Adult, 3, 0.0, 0).unwrap();
        let source = adult();
        let key = |b: &RecordBatch, r: usize| -> Vec<String> {
            b.columns()
                .iter()
                .zip(b.schema().fields())
                .filter(|(_, f)| f.name() != "age")
                .map(|(c, _)| c.as_string::<i32>().value(r).to_string())
                .collect()
        };
        let mut known = std::collections::HashSet::new();
        for b in &source {
            for r in 0..b.num_rows() {
                known.insert(key(b, r));
            }
        }
        for b in rows(&m, 20_000) {
            let age = b.column_by_name("age").unwrap().as_primitive::<Int64Type>();
            for r in 0..b.num_rows() {
                assert!(known.contains(&key(&b, r)), "row {r} is not an Adult tuple");
                assert!((17..=90).contains(&age.value(r)));
            }
        }
    }

    #[test]
    fn marginals_follow_adult() {
        let m = Model::new(Like::Adult, 5, 0.02, 0).unwrap();
        let share = |batches: &[RecordBatch], col: &str, value: &str| {
            let (mut hits, mut all) = (0usize, 0usize);
            for b in batches {
                let c = b.column_by_name(col).unwrap().as_string::<i32>();
                hits += c.iter().filter(|v| *v == Some(value)).count();
                all += c.len();
            }
            hits as f64 / all as f64
        };
        let source = adult();
        let generated = rows(&m, 100_000);
        for (col, value) in [
            ("sex", "Male"),
            ("salary-class", ">50K"),
            ("race", "White"),
            ("native-country", "United-States"),
        ] {
            let (s, g) = (share(&source, col, value), share(&generated, col, value));
            assert!(
                (s - g).abs() < 0.01,
                "{col}={value}: Adult {s:.4}, generated {g:.4}"
            );
        }
    }

    #[test]
    fn class_structure_is_plausible() {
        // Adult itself has 18,109 distinct QI tuples in 30,162 rows. A plain
        // resample of 100k rows would have at most 18,109; the noise adds a
        // tail of new tuples, but most rows still fall in shared classes.
        let m = Model::new(Like::Adult, 1, 0.02, 0).unwrap();
        let d = distinct_tuples(&rows(&m, 100_000), &QIS);
        assert!(
            (25_000..=75_000).contains(&d),
            "{d} distinct QI tuples in 100k rows"
        );
        let plain = Model::new(Like::Adult, 1, 0.0, 0).unwrap();
        assert!(distinct_tuples(&rows(&plain, 100_000), &QIS) < d);
    }

    #[test]
    fn extras_have_their_nulls_and_ranges() {
        let m = Model::new(Like::Adult, 2, 0.02, 12).unwrap();
        let batches = rows(&m, 100_000);
        for i in 0..12 {
            let name = format!("extra_{i}");
            let nulls: usize = batches
                .iter()
                .map(|b| b.column_by_name(&name).unwrap().null_count())
                .sum();
            let expected = [0.0, 0.01, 0.1][i % 3] * 100_000.0;
            assert!(
                (nulls as f64 - expected).abs() <= 0.1 * expected + 1.0,
                "{name}: {nulls} nulls, expected about {expected}"
            );
        }
        let b = &batches[0];
        let distinct = |name: &str| {
            let c = b.column_by_name(name).unwrap().as_string::<i32>();
            c.iter()
                .flatten()
                .collect::<std::collections::HashSet<_>>()
                .len()
        };
        assert!(distinct("extra_2") <= LOW_CARDINALITY);
        assert!(distinct("extra_6") > 60_000);
        let ts = b.column_by_name("extra_3").unwrap();
        let ts = ts.as_primitive::<arrow::datatypes::TimestampMicrosecondType>();
        assert!(ts.iter().flatten().all(|t| {
            (TIMESTAMP_FROM_S * 1_000_000..(TIMESTAMP_FROM_S + TIMESTAMP_SPAN_S) * 1_000_000)
                .contains(&t)
        }));
    }

    #[test]
    fn row_groups_split_chunks() {
        let m = Model::new(Like::Adult, 1, 0.02, 2).unwrap();
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("g.parquet");
        let groups = write(
            &m,
            150_000,
            40_000,
            File::create(&path).unwrap(),
            Vec::new(),
        )
        .unwrap();
        assert_eq!(groups, 4);
        let r = ParquetRecordBatchReaderBuilder::try_new(File::open(&path).unwrap()).unwrap();
        let sizes: Vec<i64> = r
            .metadata()
            .row_groups()
            .iter()
            .map(|g| g.num_rows())
            .collect();
        assert_eq!(sizes, [40_000, 40_000, 40_000, 30_000]);
        let read: Vec<RecordBatch> = r.build().unwrap().collect::<Result<_, _>>().unwrap();
        let read = arrow::compute::concat_batches(&m.schema, &read).unwrap();
        let made = arrow::compute::concat_batches(&m.schema, &rows(&m, 150_000)).unwrap();
        assert_eq!(read, made);
    }

    #[test]
    fn thresholds() {
        assert_eq!(threshold(0.0), 0);
        assert_eq!(threshold(1.0), 1 << 32);
        let mut rng = stream(1, 0, 0);
        assert!((0..1000).all(|_| hit(&mut rng, threshold(1.0))));
        assert!((0..1000).all(|_| !hit(&mut rng, threshold(0.0))));
    }
}
