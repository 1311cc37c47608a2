//! kanon's storage and publishing: everything between a job file and a
//! committed release that touches a file, a bucket or a table.
//!
//! The engine (`kanon_engine`) anonymises record batches and does no I/O;
//! this crate gives it rows and takes its release:
//!
//! - [`config`]: the job loader (a job file, `KANON_*` variables and a
//!   front end's overrides, read through the engine's
//!   `kanon_engine::job::overrides`, with paths resolved against the file);
//! - [`storage`]: local paths and S3 locations, credentials, listing;
//! - [`dataset`]: Parquet, CSV and Delta inputs read as Arrow batches;
//! - [`release`]: the writer of a release (parallel Parquet encoding,
//!   temporaries, multipart upload, the manifest), and [`spill`] for the
//!   buckets of a release that outgrows memory;
//! - [`delta`]: Delta Lake commits, table history and Parquet series;
//! - [`certificate`] and [`signing`]: what a release claims, signed;
//! - [`publish`]: the one [`publish::Publisher`] every front end publishes
//!   through (read back, verified, then committed);
//! - [`release_check`]: the cross-release and δ-presence checks against
//!   what was published before;
//! - [`guard`]: nothing written lands on anything read;
//! - [`exit`] and [`ops`]: failures with the exit code a scheduler acts on,
//!   progress, interrupts and deadlines.
//!
//! Errors are `anyhow` chains whose root is an [`exit::Failure`] naming its
//! exit code; the command line (`kanon`) and the embedders map them.

/// `println!` that never panics: a closed or broken standard output (`kanon
/// ... | head -1`, a reader that went away) must not turn a job whose
/// release is already committed into a crash (exit 101). What could not be
/// printed is dropped; the exit code still says how the job ended.
/// An embedded run keeps the lines instead (`ops::capture_output`).
#[macro_export]
macro_rules! outln {
    ($($arg:tt)*) => {{
        $crate::ops::out_line(format_args!($($arg)*));
    }};
}

/// `eprintln!` that never panics (see `outln!`): a closed standard error
/// must not hide an error's exit code behind a panic.
#[macro_export]
macro_rules! errln {
    ($($arg:tt)*) => {{
        use std::io::Write as _;
        let _ = writeln!(std::io::stderr().lock(), $($arg)*);
    }};
}

pub mod artefact;
pub mod certificate;
pub mod config;
pub mod dataset;
pub mod delta;
pub mod exit;
pub mod guard;
pub mod ops;
pub mod publish;
pub mod release;
pub mod release_check;
pub mod signing;
pub mod spill;
pub mod storage;
