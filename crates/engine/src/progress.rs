//! Progress of a run: algorithms report how much of a phase is done to a
//! sink the front end provides (the CLI draws a bar on a terminal), beside
//! the cancellation token they check. Reporting is optional and cheap: an
//! algorithm reports what it can count (blocks of a block-wise run, merges,
//! lattice nodes), at most a few times per second's worth of work, and
//! never values of records.

use std::fmt::Debug;

/// Where progress goes.
pub trait Progress: Send + Sync + Debug {
    /// `done` of `total` units of `phase` (e.g. `"blocks"`) are finished.
    fn update(&self, phase: &'static str, done: u64, total: u64);
}

/// Progress that goes nowhere (library calls without a display).
#[derive(Debug, Clone, Copy, Default)]
pub struct Silent;

impl Progress for Silent {
    fn update(&self, _phase: &'static str, _done: u64, _total: u64) {}
}

impl Silent {
    /// A sink that drops every report, for callers without a display.
    pub fn sink() -> &'static dyn Progress {
        static SILENT: Silent = Silent;
        &SILENT
    }
}
