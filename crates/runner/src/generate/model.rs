//! The model of the generated rows: the sampled Adult columns
//! ([`Source`]) followed by the extra columns ([`Extras`]), and the
//! assembly of a chunk's columns into a batch, chunks in parallel.

use std::sync::Arc;

use anyhow::Result;
use arrow::array::RecordBatch;
use arrow::datatypes::{Schema, SchemaRef};
use rayon::prelude::*;

use super::draws::stream;
use super::extras::Extras;
use super::sampling::Source;
use super::{Like, CHUNK_ROWS};

/// Everything needed to generate any chunk of rows.
pub(super) struct Model {
    pub(super) schema: SchemaRef,
    pub(super) seed: u64,
    pub(super) source: Source,
    pub(super) extras: Extras,
}

impl Model {
    /// Loads the source table and prepares the output schema.
    pub(super) fn new(like: Like, seed: u64, noise: f64, extra_columns: usize) -> Result<Model> {
        let Like::Adult = like;
        let (source, mut fields) = Source::adult(noise)?;
        let extras = Extras::new(extra_columns);
        fields.extend(extras.fields());
        Ok(Model {
            schema: Arc::new(Schema::new(fields)),
            seed,
            source,
            extras,
        })
    }

    /// Generates the chunks in `range` (in parallel) of a file of `rows` rows.
    pub(super) fn generate(
        &self,
        range: std::ops::Range<u64>,
        rows: u64,
    ) -> Result<Vec<RecordBatch>> {
        range
            .into_par_iter()
            .map(|chunk| {
                let start = chunk * CHUNK_ROWS as u64;
                let len = (rows - start).min(CHUNK_ROWS as u64) as usize;
                self.chunk(chunk, len)
            })
            .collect()
    }

    /// Generates chunk number `chunk`, holding `len` rows: the source's
    /// columns from stream 0, extra column `i` from stream `1 + i`.
    fn chunk(&self, chunk: u64, len: usize) -> Result<RecordBatch> {
        let mut columns = self.source.columns(&mut stream(self.seed, 0, chunk), len);
        for i in 0..self.extras.len() {
            let mut rng = stream(self.seed, 1 + i as u64, chunk);
            columns.push(self.extras.column(i, &mut rng, len));
        }
        Ok(RecordBatch::try_new(self.schema.clone(), columns)?)
    }
}
