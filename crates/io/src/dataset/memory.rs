//! A table already in memory as Arrow record batches (the Python package's
//! `pyarrow`, polars or DuckDB input), read as a [`Dataset`] without a copy:
//! its scan hands out slices of the caller's batches.

use std::sync::Arc;

use anyhow::{Context, Result};
use arrow::array::RecordBatch;
use arrow::datatypes::SchemaRef;
use sha2::{Digest, Sha256};

use super::{Dataset, Format, BATCH_ROWS};
use crate::exit::Failure;

/// Batches of a table in memory, and what names it in messages.
#[derive(Debug, Clone)]
pub struct MemoryTable {
    /// What the caller passed, for messages (`pyarrow.Table`).
    pub label: String,
    /// The schema every batch carries.
    pub schema: SchemaRef,
    /// The rows.
    pub batches: Arc<[RecordBatch]>,
}

impl MemoryTable {
    /// The table of `batches`, each checked to carry `schema`.
    ///
    /// # Errors
    /// A bad-input failure naming the batch whose columns differ.
    pub fn new(label: &str, schema: SchemaRef, batches: Vec<RecordBatch>) -> Result<MemoryTable> {
        for (i, b) in batches.iter().enumerate() {
            if b.schema().fields() != schema.fields() {
                return Err(Failure::bad_input(format!(
                    "batch {i} of the {label} has other columns than its schema: pass a table whose batches share one schema"
                ))
                .into());
            }
        }
        Ok(MemoryTable {
            label: label.to_string(),
            schema,
            batches: batches.into(),
        })
    }

    /// SHA-256 of the table as an Arrow IPC stream: the same rows in the
    /// same batches give the same fingerprint, whatever padding or slicing
    /// the caller's buffers have (IPC writes only the values).
    fn fingerprint(&self) -> Result<[u8; 32]> {
        struct Hashing(Sha256);
        impl std::io::Write for Hashing {
            fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
                self.0.update(buf);
                Ok(buf.len())
            }
            fn flush(&mut self) -> std::io::Result<()> {
                Ok(())
            }
        }
        let mut w = arrow_ipc::writer::StreamWriter::try_new(Hashing(Sha256::new()), &self.schema)
            .with_context(|| format!("cannot fingerprint the {}", self.label))?;
        for b in self.batches.iter() {
            w.write(b)
                .with_context(|| format!("cannot fingerprint the {}", self.label))?;
        }
        let h = w
            .into_inner()
            .with_context(|| format!("cannot fingerprint the {}", self.label))?;
        Ok(h.0.finalize().into())
    }
}

impl Dataset {
    /// A dataset over a table in memory: its rows and bytes known, its
    /// fingerprint the hash of its Arrow IPC stream.
    ///
    /// # Errors
    /// A table with no batches gives an empty dataset (pass 1 then says it
    /// has no rows); a failure to serialise a batch for the fingerprint.
    pub fn in_memory(table: &MemoryTable) -> Result<Dataset> {
        let rows = table.batches.iter().map(|b| b.num_rows() as u64).sum();
        let bytes = table
            .batches
            .iter()
            .map(|b| b.get_array_memory_size() as u64)
            .sum();
        Ok(Dataset {
            format: Format::Arrow,
            schema: table.schema.clone(),
            rows: Some(rows),
            bytes,
            files: Vec::new(),
            csv: None,
            csv_header: false,
            csv_infer_rows: 0,
            footer_hash: Some(table.fingerprint()?),
            delta_version: None,
            memory: Some(table.batches.clone()),
        })
    }
}

/// The batches of a table in memory, projected, in slices of at most
/// [`BATCH_ROWS`] rows (slices share the caller's buffers).
pub(super) fn slices<'a>(
    batches: &'a [RecordBatch],
    projection: Option<&[usize]>,
) -> impl Iterator<Item = Result<RecordBatch>> + 'a {
    let projection = projection.map(<[usize]>::to_vec);
    batches.iter().flat_map(move |b| {
        let b = match &projection {
            Some(p) => b.project(p).map_err(anyhow::Error::from),
            None => Ok(b.clone()),
        };
        let pieces: Vec<Result<RecordBatch>> = match b {
            Err(e) => vec![Err(e)],
            Ok(b) => (0..b.num_rows())
                .step_by(BATCH_ROWS)
                .map(|at| Ok(b.slice(at, BATCH_ROWS.min(b.num_rows() - at))))
                .collect(),
        };
        pieces
    })
}
