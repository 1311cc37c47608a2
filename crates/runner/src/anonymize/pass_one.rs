//! Pass one: the QI and sensitive columns encoded, the batches held when they fit.

use std::time::Instant;

use anyhow::{Context, Result};
use arrow::array::RecordBatch;
use kanon_engine::release::{Encoded, Session};
use kanon_engine::Error;

use super::plan::{Input, Plan};
use crate::memory::{Budget, MemoryPlan, Sample, Shape};
use kanon_io::dataset::Dataset;
use kanon_io::delta::series::LeaveOut;
use kanon_io::exit::Failure;
use kanon_io::ops::{check_interrupt, Ui};
use kanon_io::storage::Location;

/// Warns, by column and count (never a value), about sensitive texts that
/// differ from another only by case or surrounding whitespace: they count
/// toward l as one value but are published as written.
fn warn_variants(qi: &kanon_engine::encode::QiTable) {
    for column in qi.sensitive() {
        let n = column.case_or_space_variants();
        if n > 0 {
            tracing::warn!(
                column = column.name(),
                variants = n,
                "sensitive values that differ from another only by case or surrounding whitespace count as that one value toward l and t-closeness, and are published as written; normalise them in the data to publish them alike"
            );
        }
    }
}

/// Pass 1: the QI and sensitive columns only, encoded, with what pass 2
/// needs of the input.
pub(super) struct PassOne {
    pub(super) dataset: Dataset,
    /// The input's batches, its QI and dropped columns left out, when they
    /// fit in `output.buffer_memory`: pass 2 then does not read it again.
    pub(super) held: Option<Vec<RecordBatch>>,
    /// The encoded input and who it names (the identifiers salt this
    /// release's pseudonyms).
    pub(super) encoded: Encoded,
    pub(super) rows_in: u64,
    pub(super) fingerprint: Option<String>,
    /// Rows of people a table's readable versions already publish, left
    /// out of this `append` release (`output.history`), and those people.
    pub(super) left_out: (u64, usize),
    pub(super) read_s: f64,
    /// The memory plan: the budget, pass 2's buffer, the estimate.
    pub(super) memory: MemoryPlan,
}

/// An `append` with `output.history` whose input holds nobody new.
#[derive(Debug)]
pub(super) struct NothingNew {
    pub(super) table: Location,
    pub(super) rows: u64,
    pub(super) people: usize,
}

impl std::fmt::Display for NothingNew {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "nothing new to publish: all {} rows of the input belong to the {} people Delta table {} already publishes (output.history); the table is unchanged",
            self.rows, self.people, self.table
        )
    }
}

impl std::error::Error for NothingNew {}

impl PassOne {
    pub(super) fn read(plan: &Plan, leave_out: Option<&LeaveOut>, ui: &Ui) -> Result<PassOne> {
        let (spec, input) = (plan.job.spec(), &plan.input);
        let t = Instant::now();
        let dataset = match input {
            Input::Stored(at) => Dataset::open(&plan.storage, at, &spec.input_spec())?,
            Input::Memory(t) => Dataset::in_memory(t)?,
        };
        let fits = |r: Result<(), Error>| r.with_context(|| plan.misfit());
        // Pass 1 also counts the identifying and pseudonymised columns:
        // repeated values may be one person's rows (kanon_engine::identities).
        let mut session = Session::new(
            spec,
            plan.job.hierarchies(),
            &dataset.schema,
            &format!("input {input}"),
        )
        .with_context(|| plan.misfit())?;
        let unread = kanon_engine::recode::unread_columns(spec, &dataset.schema);
        let mut memory = {
            let coded = dataset.projection(&spec.encoded_columns());
            let work = dataset.projection(&session.columns());
            let kept: Vec<usize> = (0..dataset.schema.fields().len())
                .filter(|i| !unread.contains(i))
                .collect();
            let sample = Sample::of(&dataset, &plan.storage)?;
            let (readers, ahead_batches) = dataset.read_ahead();
            let rows = dataset.estimated_rows(&plan.storage)?;
            let shape = Shape {
                rows,
                work_row_bytes: sample.row_bytes(Some(&work)),
                all_row_bytes: sample.row_bytes(None),
                kept_row_bytes: sample.row_bytes(Some(&kept)),
                ahead_batches,
                readers,
                row_group_rows: plan.options.row_group_rows as u64,
                code_bytes_per_row: sample.code_bytes_per_row(&coded, rows),
            };
            MemoryPlan::new(
                spec,
                shape,
                plan.budget.clone(),
                plan.buffer_memory,
                |buffer| plan.hold(&dataset, &unread, buffer).is_some(),
                &format!("job {} on input {input}", plan.job.path.display()),
            )?
        };
        tracing::info!(
            estimate = %memory.estimate.describe(),
            budget = %memory.budget.as_ref().map_or("none (not Linux)".into(), Budget::describe),
            buffer_memory = memory.buffer,
            "memory planned before reading"
        );
        let mut held = memory.hold.then(|| Held {
            budget: memory.buffer,
            batches: Vec::new(),
            bytes: 0,
        });
        let projection = match held {
            Some(_) => None,
            None => Some(dataset.projection(&session.columns())),
        };
        let bar = ui.bar("pass 1/2", dataset.rows);
        let mut left_rows = 0u64;
        let mut left_people: rustc_hash::FxHashSet<u128> = Default::default();
        let (read, rows_read, csv_hash) =
            dataset.with_read_ahead(&plan.storage, projection, true, |batches| -> Result<()> {
                for batch in batches {
                    check_interrupt()?;
                    let batch = batch?;
                    bar.inc(batch.num_rows() as u64);
                    let batch = match leave_out {
                        Some(l) => {
                            let (kept, left) = l.apply(batch)?;
                            left_rows += left.len() as u64;
                            left_people.extend(left);
                            kept
                        }
                        None => batch,
                    };
                    fits(session.push(&batch))?;
                    if let Some(h) = &mut held {
                        let kept = kanon_engine::recode::unread_placeholder(&batch, &unread)?;
                        h.bytes += kept.get_array_memory_size() as u64;
                        h.batches.push(kept);
                        if h.bytes > h.budget {
                            tracing::info!(
                                held_bytes = h.bytes,
                                buffer_memory = h.budget,
                                "the input outgrows output.buffer_memory: pass 2 reads it again"
                            );
                            held = None;
                        }
                    }
                }
                Ok(())
            });
        read?;
        bar.finish_and_clear();
        // A differentially private release publishes only a keyed
        // fingerprint (or none): see `published_fingerprint`.
        let fingerprint = kanon_engine::algorithms::safepub::published_fingerprint(
            spec,
            dataset.fingerprint(csv_hash),
        );
        let rows_in = rows_read - left_rows;
        if rows_in == 0 && left_rows > 0 {
            return Err(NothingNew {
                table: plan.output.clone(),
                rows: left_rows,
                people: left_people.len(),
            }
            .into());
        }
        if left_rows > 0 {
            tracing::info!(
                rows = left_rows,
                people = left_people.len(),
                "rows of people the table already publishes left out (output.history)"
            );
        }
        if rows_in == 0 {
            return Err(Failure::bad_input(format!(
                "input {input} has no rows: there is nothing to anonymise"
            ))
            .into());
        }
        let encoded = session.encode().with_context(|| plan.misfit())?;
        warn_variants(encoded.table());
        memory.recheck(
            spec,
            rows_in,
            encoded.table().heap_bytes() as u64,
            &format!("job {} on input {input}", plan.job.path.display()),
        )?;
        let read_s = t.elapsed().as_secs_f64();
        tracing::info!(
            rows = rows_in,
            files = dataset.n_files(),
            seconds = read_s,
            "pass 1 done"
        );
        Ok(PassOne {
            dataset,
            held: held.map(|h| h.batches),
            encoded,
            rows_in,
            fingerprint,
            left_out: (left_rows, left_people.len()),
            read_s,
            memory,
        })
    }
}

/// Input batches held through pass 1 within a budget of bytes.
pub(super) struct Held {
    pub(super) budget: u64,
    pub(super) batches: Vec<RecordBatch>,
    pub(super) bytes: u64,
}
