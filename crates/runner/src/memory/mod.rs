//! Memory a scheduler can trust (issue 38): the job's budget, an estimate
//! of its peak made before any reading, and each phase's measured peak.

mod budget;
mod estimate;
mod phases;

use anyhow::Result;
use kanon_engine::spec::JobSpec;

pub(crate) use budget::Budget;
pub(crate) use estimate::{Estimate, Sample, Shape};
use kanon_io::exit::Failure;
pub(crate) use phases::Phases;

/// `bytes` for a person: `1.9 GiB`, `312 MiB`.
pub(crate) fn human(bytes: u64) -> String {
    const GIB: f64 = (1u64 << 30) as f64;
    const MIB: f64 = (1u64 << 20) as f64;
    let b = bytes as f64;
    if b >= GIB {
        format!("{:.2} GiB", b / GIB)
    } else {
        format!("{:.0} MiB", b / MIB)
    }
}

/// Less than this left for pass 2's buffer once the rest of the job is
/// counted (or than the job's own `output.buffer_memory`, when smaller),
/// and the job is refused: spilling every few thousand rows would take
/// hours, and the estimate's margin is gone.
const MIN_BUFFER: u64 = 32 << 20;

/// The memory plan of a run, made before any row is read: the budget, the
/// buffer it leaves for pass 2, whether pass 1 holds the input, and the
/// estimate of the peak.
#[derive(Debug, Clone)]
pub(crate) struct MemoryPlan {
    /// The job's budget (`None`: unknown, the job runs unbudgeted).
    pub budget: Option<Budget>,
    /// Bytes of rows pass 2 holds before it spills.
    pub buffer: u64,
    /// Whether pass 1 keeps the input's batches for pass 2.
    pub hold: bool,
    /// The run's shape, as measured before reading.
    pub shape: Shape,
    /// The estimated peak (after pass 1: with the exact rows and codes).
    pub estimate: Estimate,
    /// The estimated peak before any row was read.
    pub before_reading: u64,
}

impl MemoryPlan {
    /// Plans `spec`'s memory on `shape` within `budget`, with at most
    /// `buffer` bytes (`output.buffer_memory`) for pass 2 and pass 1
    /// holding the input when `hold(buffer)` says so.
    ///
    /// # Errors
    /// Exit 2 when the job does not fit its budget: the estimate, the
    /// budget and what to change.
    pub fn new(
        spec: &JobSpec,
        shape: Shape,
        budget: Option<Budget>,
        buffer: u64,
        hold: impl Fn(u64) -> bool,
        what: &str,
    ) -> Result<MemoryPlan> {
        let Some(b) = &budget else {
            let hold = hold(buffer);
            let estimate = Estimate::of(spec, &shape, buffer, hold);
            return Ok(MemoryPlan {
                budget,
                buffer,
                hold,
                shape,
                before_reading: estimate.peak(),
                estimate,
            });
        };
        // The buffer is what the budget leaves. Pass 1's held input is
        // bounded by it too, and pass 2 consumes the held batches as the
        // release's rows fill the buffer.
        let room = b
            .bytes
            .saturating_sub(Estimate::of(spec, &shape, 0, false).peak());
        // The budget may lower the buffer the job asks for, down to
        // MIN_BUFFER (or the job's own, when smaller), not below.
        let needed = buffer.min(MIN_BUFFER);
        let buffer = buffer.min(room);
        let hold = hold(buffer);
        let estimate = Estimate::of(spec, &shape, buffer.max(needed), hold);
        if buffer < needed || estimate.peak() > b.bytes {
            return Err(Failure::bad_input(format!(
                "{what} is estimated to need {} of memory, more than its budget of {}; nothing was read or written. Give it more (`resources.memory` in the job, `--memory`, or a larger container limit), or make it smaller: fewer quasi-identifiers or sensitive columns, `algorithm.block_size` for an algorithm that runs on the whole table, `--workers` for a block-wise run, or smaller Parquet row groups in the input",
                estimate.describe(),
                b.describe()
            ))
            .into());
        }
        Ok(MemoryPlan {
            budget,
            buffer,
            hold,
            shape,
            before_reading: estimate.peak(),
            estimate,
        })
    }

    /// After pass 1: the estimate again with the exact row count and the
    /// codes' exact widths; the job stops (exit 2, nothing written) before
    /// the algorithm when it no longer fits.
    ///
    /// # Errors
    /// As [`MemoryPlan::new`].
    pub fn recheck(
        &mut self,
        spec: &JobSpec,
        rows: u64,
        code_bytes: u64,
        what: &str,
    ) -> Result<()> {
        self.shape.rows = rows;
        self.shape.code_bytes_per_row = code_bytes as f64 / rows.max(1) as f64;
        self.estimate = Estimate::of(spec, &self.shape, self.buffer, self.hold);
        if let Some(b) = &self.budget {
            if self.estimate.peak() > b.bytes {
                return Err(Failure::bad_input(format!(
                    "{what} is estimated to need {} of memory once its {rows} rows are encoded, more than its budget of {}; stopped before the algorithm, nothing was written. Give it more (`resources.memory`, `--memory`, or a larger container limit), or make it smaller (fewer quasi-identifiers, `algorithm.block_size`, `--workers`)",
                    self.estimate.describe(),
                    b.describe()
                ))
                .into());
            }
        }
        Ok(())
    }
}
