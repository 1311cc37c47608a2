//! kanon for embedders in another language (the Python package,
//! `crates/python`): a command runs from its argument list exactly as on
//! the command line, with the same job loading, checks and fail-closed
//! rules, and optionally a table in memory as its input; what it would
//! print is returned, and a failure comes back with its exit code.
//!
//! The command line's process-wide state (the interrupt flag, the time
//! limit, the progress on show) serves one command at a time: [`run`]
//! takes a lock, so commands of one process run one after another.
//! Signals are left to the embedder, which stops a command with
//! [`interrupt`] (the Python package does on `KeyboardInterrupt`).

use std::process::ExitCode;
use std::sync::Mutex;

use clap::Parser;

use crate::{exit, Cli, Command};
use kanon_io::dataset::MemoryTable;
use kanon_io::ops::Ui;

pub use kanon_io::ops::{interrupt, progress_now, ProgressNow};

/// A command that did not succeed: its exit code (as on the command line:
/// 1 verification failed, 2 bad input, 3 unsatisfiable, 4 I/O, 5 output
/// exists, 70 a bug, 124 timed out, 130 interrupted) and its message.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Failed {
    /// The exit code.
    pub code: u8,
    /// What the command line prints on stderr (without `error: `), or, for
    /// a failed verification, what it prints on stdout.
    pub message: String,
}

impl std::fmt::Display for Failed {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{} (exit code {})", self.message, self.code)
    }
}

impl std::error::Error for Failed {}

/// Commands of one process run one at a time (see the module's docs).
static ONE_AT_A_TIME: Mutex<()> = Mutex::new(());

/// Runs the command `args` (without the program name: `["anonymize",
/// "--config", "job.toml", ...]`), reading `table` instead of the job's
/// input when given (`anonymize` and `inspect` only), and returns what it
/// printed on standard output.
///
/// # Errors
/// [`Failed`] with the command line's exit code and message.
pub fn run(args: &[String], table: Option<MemoryTable>) -> Result<String, Failed> {
    let _one = ONE_AT_A_TIME.lock().unwrap_or_else(|e| e.into_inner());
    let cli = Cli::try_parse_from(std::iter::once("kanon".to_string()).chain(args.iter().cloned()))
        .map_err(|e| Failed {
            code: u8::try_from(e.exit_code()).unwrap_or(exit::BAD_INPUT),
            message: e.to_string().trim_end().to_string(),
        })?;
    let ui = Ui::embedded();
    kanon_io::ops::start_job();
    kanon_io::storage::install_tls_provider();
    let (result, printed) = kanon_io::ops::capture_output(|| match cli.command {
        Command::Anonymize(mut a) => {
            a.table = table;
            crate::anonymize::run(&a, &ui)
        }
        Command::Inspect(mut a) => {
            a.table = table;
            crate::inspect::run(&a, &ui)
        }
        _ if table.is_some() => Err(kanon_io::exit::Failure::bad_input(
            "only `anonymize` and `inspect` read a table given in memory",
        )
        .into()),
        Command::Verify(a) => crate::verify::run(&a, &ui),
        Command::Report(a) => crate::report::run(&a, &ui),
        Command::Generate(a) => crate::generate::run(&a, true),
        #[cfg(feature = "sql")]
        Command::Sql(a) => crate::sql::run(&a, &ui),
        Command::Worker(_) => Err(kanon_io::exit::Failure::bad_input(
            "`kanon worker` serves until stopped: run it as a process, not embedded",
        )
        .into()),
    });
    kanon_io::ops::start_job();
    match result {
        Ok(code) if code == ExitCode::SUCCESS => Ok(printed),
        // A failed verification is a result, printed, with exit code 1.
        Ok(_) => Err(Failed {
            code: exit::VERIFY_FAILED,
            message: printed.trim_end().to_string(),
        }),
        Err(err) => Err(Failed {
            code: exit::code_of(&err),
            message: format!("{err:#}"),
        }),
    }
}
