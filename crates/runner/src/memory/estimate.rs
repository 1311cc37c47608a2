//! The peak of a `kanon anonymize` run, estimated before any row is read:
//! the engine's working set ([`kanon_engine::memory::WorkingSet`]) plus
//! what the front end holds: the process itself, the batches decoded
//! ahead, the input kept from pass 1, the release's rows buffered in pass 2
//! and the row group being written.
//!
//! The bytes of a row come from a sample: the first batch of the input,
//! decoded, measured column by column as Arrow arrays.

use anyhow::Result;
use arrow::array::{Array, RecordBatch};
use kanon_engine::memory::WorkingSet;
use kanon_engine::spec::JobSpec;

use kanon_io::dataset::{Dataset, BATCH_ROWS};
use kanon_io::storage::Storage;

/// The process before any data: the binary's pages, the allocator's
/// arenas, the thread pools, the job and its hierarchies (27 MiB measured
/// at the end of pass 1 on Adult).
const PROCESS_BYTES: u64 = 32 << 20;

/// The codes' vectors while they grow in pass 1: a vector doubles its
/// capacity when full, so up to twice the codes are allocated.
const GROWING_CODES: f64 = 1.5;

/// What the allocator keeps of pass 2's buffer once it is drained to spill
/// files (fitted on 100M rows: 1 GiB and 2 GiB buffers).
const SPILLED_BUFFER_KEPT: f64 = 0.5;

/// A released row's labels against its QI and sensitive values as read
/// (generalised labels repeat and are shorter than most values: 0.49
/// measured on generated Adult rows), for the release's rows in pass 2's
/// buffer: the columns kept from the input plus this share of the rest.
const RELEASE_LABEL_SHARE: f64 = 0.5;

/// Encoded bytes of the row group being written against its rows' bytes
/// as Arrow arrays (zstd pages of repeated labels; 0.3 of them measured on
/// generated Adult rows, with a margin for the pages being encoded), plus
/// the batches in flight to the writer.
const WRITTEN_ROW_FACTOR: f64 = 0.45;

/// What the allocator keeps of what the phase before freed (blocks freed
/// among live ones, which `malloc_trim` cannot hand back): a share of that
/// phase's peak (pass 1) or working set (the algorithm), fitted on 1M to
/// 100M rows.
const RETAINED_SHARE: f64 = 0.25;

/// Bytes of every input column per row, from a decoded sample.
#[derive(Debug, Clone)]
pub(crate) struct Sample {
    /// Arrow bytes per row of each column of the dataset's schema.
    column_bytes: Vec<f64>,
    /// Distinct values of each column in the sample.
    distinct: Vec<usize>,
    /// Rows sampled.
    rows: usize,
}

impl Sample {
    /// Measures the first batch of `dataset` (one batch of at most 65,536
    /// rows of every column). An empty input measures as 16 bytes a
    /// column.
    pub fn of(dataset: &Dataset, storage: &Storage) -> Result<Sample> {
        let n = dataset.schema.fields().len();
        let batch = dataset.scan(storage, None, false).next().transpose()?;
        Ok(match batch {
            Some(b) if b.num_rows() > 0 => Sample::of_batch(&b),
            _ => Sample {
                column_bytes: vec![16.0; n],
                distinct: vec![0; n],
                rows: 0,
            },
        })
    }

    fn of_batch(batch: &RecordBatch) -> Sample {
        let rows = batch.num_rows() as f64;
        Sample {
            column_bytes: batch
                .columns()
                .iter()
                .map(|c| c.to_data().get_slice_memory_size().unwrap_or(0) as f64 / rows)
                .collect(),
            distinct: batch.columns().iter().map(distinct_values).collect(),
            rows: batch.num_rows(),
        }
    }

    /// The codes' bytes per row of the columns `columns` of a table of
    /// `rows` rows, by the width [`kanon_engine::codes`] will give each: one
    /// byte for a column whose sample holds few distinct values (under half
    /// of 256, so that the rest of the table likely stays under 256), two
    /// under half of 65,536, else four. A sample that is the whole table
    /// counts exactly.
    pub fn code_bytes_per_row(&self, columns: &[usize], rows: u64) -> f64 {
        let whole = rows <= self.rows as u64;
        columns
            .iter()
            .map(|&i| {
                let d = self.distinct[i];
                let (one, two) = match whole {
                    true => (256, 65_536),
                    false => (128, 32_768),
                };
                match d {
                    d if d <= one => 1.0,
                    d if d <= two => 2.0,
                    _ => 4.0,
                }
            })
            .sum()
    }

    /// Bytes per row of the columns `columns` (all when `None`).
    pub fn row_bytes(&self, columns: Option<&[usize]>) -> f64 {
        match columns {
            None => self.column_bytes.iter().sum(),
            Some(c) => c.iter().map(|&i| self.column_bytes[i]).sum(),
        }
    }
}

/// What a run will do, as far as memory goes.
#[derive(Debug, Clone)]
pub(crate) struct Shape {
    /// Rows of the input (exact for Parquet and Delta, estimated for CSV).
    pub rows: u64,
    /// Bytes per row of the columns pass 1 reads, of every column, and of
    /// the columns pass 1 keeps when it holds the input.
    pub work_row_bytes: f64,
    pub all_row_bytes: f64,
    pub kept_row_bytes: f64,
    /// Batches each reader decodes ahead, and the readers.
    pub ahead_batches: u64,
    pub readers: u64,
    /// Rows per row group of the release.
    pub row_group_rows: u64,
    /// The codes' bytes per row (estimated before reading, exact after).
    pub code_bytes_per_row: f64,
}

/// The estimated peak of each phase, and its parts.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Estimate {
    /// `(phase, bytes)`, in the order the phases run.
    pub phases: Vec<(&'static str, u64)>,
    /// The parts of the largest phase, `(what, bytes)`.
    pub parts: Vec<(&'static str, u64)>,
}

impl Estimate {
    /// The job's estimated peak on `shape`, pass 2 buffering at most
    /// `buffer` bytes of rows and pass 1 holding the input when `hold`.
    pub fn of(spec: &JobSpec, shape: &Shape, buffer: u64, hold: bool) -> Estimate {
        let rows = shape.rows as f64;
        let ws = WorkingSet::estimate(spec, shape.rows, shape.code_bytes_per_row);
        let batch_rows = (BATCH_ROWS as f64).min(rows.max(1.0));
        let reading = |row_bytes: f64| -> u64 {
            (shape.readers as f64 * (shape.ahead_batches as f64 + 1.0) * batch_rows * row_bytes)
                as u64
        };
        let held = match hold {
            true => ((rows * shape.kept_row_bytes) as u64).min(buffer),
            false => 0,
        };
        // The release's rows: the columns kept from the input (shared with
        // the held input's arrays) and the QIs' labels.
        let release_row_bytes = shape.kept_row_bytes + RELEASE_LABEL_SHARE * shape.work_row_bytes;
        let release = (rows * release_row_bytes) as u64;
        let buffered = release.min(buffer);
        // A release larger than the buffer is spilled: the buffer, drained
        // to spill files, is freed in pieces the allocator partly keeps
        // while the spilled buckets are read back.
        let spilled = match release > buffer {
            true => (buffer as f64 * SPILLED_BUFFER_KEPT) as u64,
            false => 0,
        };
        let writing = ((shape.row_group_rows as f64).min(rows)
            * release_row_bytes
            * WRITTEN_ROW_FACTOR) as u64
            + (2.0 * batch_rows * shape.all_row_bytes) as u64;
        let read1 = reading(match hold {
            true => shape.all_row_bytes,
            false => shape.work_row_bytes,
        });
        let pass1: Vec<(&'static str, u64)> = vec![
            ("process", PROCESS_BYTES),
            ("batches decoded ahead", read1),
            ("codes", (ws.codes as f64 * GROWING_CODES) as u64),
            ("input held for pass 2", held),
        ];
        let retained1 = (sum(&pass1) as f64 * RETAINED_SHARE) as u64;
        let algorithm = vec![
            ("process", PROCESS_BYTES),
            ("codes", ws.codes),
            ("algorithm", ws.algorithm),
            ("input held for pass 2", held),
            ("freed by pass 1, kept by the allocator", retained1),
        ];
        let read2 = match hold {
            true => 0,
            false => reading(shape.all_row_bytes),
        };
        let pass2 = vec![
            ("process", PROCESS_BYTES),
            ("batches decoded ahead", read2),
            ("release check", ws.release),
            ("release rows buffered", buffered),
            ("spilled buffer, kept by the allocator", spilled),
            ("row group being written", writing),
            (
                "freed by the algorithm, kept by the allocator",
                ((ws.codes + ws.algorithm) as f64 * RETAINED_SHARE) as u64,
            ),
        ];
        let phases = vec![
            ("pass1", sum(&pass1)),
            ("algorithm", sum(&algorithm)),
            ("pass2", sum(&pass2)),
        ];
        let largest = phases
            .iter()
            .enumerate()
            .max_by_key(|(_, (_, b))| *b)
            .map_or(0, |(i, _)| i);
        let parts = [pass1, algorithm, pass2]
            .into_iter()
            .nth(largest)
            .unwrap_or_default()
            .into_iter()
            .filter(|&(_, b)| b >= 1 << 20)
            .collect();
        Estimate { phases, parts }
    }

    /// The estimated peak of the run.
    pub fn peak(&self) -> u64 {
        self.phases.iter().map(|&(_, b)| b).max().unwrap_or(0)
    }

    /// The phase of the peak and its parts, in words.
    pub fn describe(&self) -> String {
        let (phase, peak) = self
            .phases
            .iter()
            .max_by_key(|(_, b)| *b)
            .copied()
            .unwrap_or(("pass2", 0));
        let parts: Vec<String> = self
            .parts
            .iter()
            .map(|&(what, b)| format!("{what} {}", super::human(b)))
            .collect();
        format!(
            "{} (at its peak, in {phase}: {})",
            super::human(peak),
            parts.join(", ")
        )
    }
}

/// The distinct values of a column (nulls count as one).
fn distinct_values(column: &arrow::array::ArrayRef) -> usize {
    let Ok(converter) =
        arrow::row::RowConverter::new(vec![arrow::row::SortField::new(column.data_type().clone())])
    else {
        return usize::MAX;
    };
    let Ok(rows) = converter.convert_columns(std::slice::from_ref(column)) else {
        return usize::MAX;
    };
    let seen: rustc_hash::FxHashSet<&[u8]> = rows.iter().map(|r| r.data()).collect();
    seen.len()
}

fn sum(parts: &[(&'static str, u64)]) -> u64 {
    parts.iter().map(|&(_, b)| b).sum()
}
