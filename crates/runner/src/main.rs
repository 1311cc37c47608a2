//! `kanon`: anonymise Parquet and CSV tables from a job file.
//!
//! Thin wiring: commands live in their own modules and drive the engine's
//! pipeline; errors are reported with their chain and mapped to exit codes
//! that schedulers can act on (see [`exit`]).

mod anonymize;
mod config;
mod exit;
mod io;
#[cfg(feature = "sql")]
mod sql;
mod verify;

use std::path::PathBuf;
use std::process::ExitCode;

use clap::{Args, Parser, Subcommand};

/// kanon: k-anonymity and l-diversity for tabular data.
#[derive(Debug, Parser)]
#[command(name = "kanon", version, about, long_about = None)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Debug, Subcommand)]
enum Command {
    /// Anonymise the job's input and write a verified release.
    Anonymize(anonymize::AnonymizeArgs),
    /// Re-check a published release against the job's privacy model.
    Verify(verify::VerifyArgs),
    /// Run SQL over Parquet/CSV tables with anonymize(...) and kanon_risk(...).
    #[cfg(feature = "sql")]
    Sql(sql::SqlArgs),
}

/// Options shared by every command that reads a job file.
#[derive(Debug, Clone, Args)]
pub struct JobArgs {
    /// The job file (TOML), e.g. configs/adult.toml.
    #[arg(long, short = 'c')]
    pub config: PathBuf,
    /// Override `privacy.k`.
    #[arg(long)]
    pub k: Option<usize>,
    /// Override `algorithm.name` (mondrian, ...).
    #[arg(long)]
    pub algorithm: Option<String>,
    /// Override `algorithm.seed`.
    #[arg(long)]
    pub seed: Option<u64>,
    /// Override `privacy.suppression_limit` (share of rows, 0..1).
    #[arg(long)]
    pub suppression_limit: Option<f64>,
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    let result = match cli.command {
        Command::Anonymize(args) => anonymize::run(&args),
        Command::Verify(args) => verify::run(&args),
        #[cfg(feature = "sql")]
        Command::Sql(args) => sql::run(&args),
    };
    match result {
        Ok(code) => code,
        Err(err) => {
            eprintln!("error: {err:#}");
            exit::code_of(&err)
        }
    }
}
