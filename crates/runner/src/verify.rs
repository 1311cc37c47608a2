//! `kanon verify`: re-check a published release against the job's privacy
//! model, by the published labels alone. Exit 0 when it holds, 1 when not.

use std::path::PathBuf;
use std::process::ExitCode;

use anyhow::{Context, Result};
use clap::Args;
use kanon_engine::privacy::Privacy;
use kanon_engine::spec::InputSpec;
use kanon_engine::verify::verify_release;
use kanon_engine::Error;

use crate::config::Job;
use crate::{exit, io, JobArgs};

/// Arguments of `kanon verify`.
#[derive(Debug, Args)]
pub struct VerifyArgs {
    #[command(flatten)]
    job: JobArgs,
    /// The release to check (Parquet or CSV).
    #[arg(long, short = 'i')]
    input: PathBuf,
}

/// Runs `kanon verify`.
pub fn run(args: &VerifyArgs) -> Result<ExitCode> {
    let job = Job::load(&args.job)?;
    let privacy = Privacy::from_spec(&job.spec)?;
    let table = io::read(&args.input, &InputSpec::default())?;
    match verify_release(&job.spec, &table.batches, &privacy) {
        Ok(v) => {
            println!(
                "{}: satisfies {} ({} rows in {} classes, smallest {})",
                args.input.display(),
                privacy.describe(),
                v.published_rows,
                v.classes,
                v.smallest_class
            );
            Ok(ExitCode::SUCCESS)
        }
        Err(Error::VerificationFailed(msg)) => {
            println!(
                "{}: does NOT satisfy {}: {msg}",
                args.input.display(),
                privacy.describe()
            );
            Ok(ExitCode::from(exit::VERIFY_FAILED))
        }
        Err(e) => Err(e).with_context(|| format!("cannot check release {}", args.input.display())),
    }
}
