//! `kanon verify`: re-check a published release against the job's privacy
//! model, by the published labels alone. Exit 0 when it holds, 1 when not.
//!
//! The release may be a file, a directory or glob of parts, or an s3://
//! object or prefix; only its QI and sensitive columns are read.

use std::process::ExitCode;

use anyhow::{Context, Result};
use clap::Args;
use kanon_engine::privacy::Privacy;
use kanon_engine::spec::InputSpec;
use kanon_engine::verify::ReleaseVerifier;
use kanon_engine::Error;

use crate::config::Job;
use crate::dataset::Dataset;
use crate::ops::{check_interrupt, Ui};
use crate::storage::{Location, Storage};
use crate::{exit, JobArgs};

/// Arguments of `kanon verify`.
#[derive(Debug, Args)]
pub struct VerifyArgs {
    #[command(flatten)]
    job: JobArgs,
    /// The release to check (Parquet or CSV; a path, directory, glob or
    /// s3:// URL).
    #[arg(long, short = 'i')]
    input: String,
}

/// Runs `kanon verify`.
pub fn run(args: &VerifyArgs, ui: &Ui) -> Result<ExitCode> {
    let job = Job::load(&args.job)?;
    let privacy = Privacy::from_spec(&job.spec)?;
    let storage = Storage::new(&job.spec.storage);
    let location = Location::parse(&args.input)?;
    let dataset = Dataset::open(&storage, &location, &InputSpec::default())?;
    let mut columns: Vec<String> = job
        .spec
        .quasi_identifiers()
        .chain(job.spec.sensitive())
        .map(|a| a.name.clone())
        .collect();
    columns.dedup();
    // Direct identifiers must be gone: an identifying column (or, under
    // `[columns] unlisted = "identifying"`, any column the job does not
    // list) in the release is a violation, whatever the classes.
    let leaked = identifying_columns(&job.spec, &dataset.schema);
    if !leaked.is_empty() {
        println!(
            "{location}: does NOT satisfy the job: it holds identifying column(s) {}, which a release must drop",
            leaked.join(", ")
        );
        tracing::warn!(release = %location, "release holds identifying columns");
        return Ok(ExitCode::from(exit::VERIFY_FAILED));
    }
    // Pseudonymised columns must hold pseudonyms only (64 hex digits):
    // anything else is a raw identifier published by mistake.
    let pseudonymised: Vec<String> = job
        .spec
        .attributes
        .iter()
        .filter(|a| {
            a.role == kanon_engine::spec::Role::Pseudonymised
                && dataset.schema.index_of(&a.name).is_ok()
        })
        .map(|a| a.name.clone())
        .collect();
    if !pseudonymised.is_empty() {
        for batch in dataset.scan(&storage, Some(dataset.projection(&pseudonymised)), false) {
            check_interrupt()?;
            let batch = batch?;
            for name in &pseudonymised {
                let Some(array) = batch.column_by_name(name) else {
                    continue;
                };
                match kanon_engine::recode::check_pseudonymised(name, array.as_ref()) {
                    Ok(()) => {}
                    Err(Error::VerificationFailed(msg)) => {
                        println!("{location}: does NOT satisfy the job: {msg}");
                        tracing::warn!(release = %location, column = %name, "release holds raw values of a pseudonymised column");
                        return Ok(ExitCode::from(exit::VERIFY_FAILED));
                    }
                    Err(e) => {
                        return Err(e).with_context(|| format!("cannot check release {location}"))
                    }
                }
            }
        }
    }
    let mut verifier =
        ReleaseVerifier::try_with_hierarchies(&job.spec, &job.hierarchies, &dataset.schema)
            .with_context(|| format!("cannot check release {location}"))?;
    let bar = ui.bar("verify", dataset.rows);
    for batch in dataset.scan(&storage, Some(dataset.projection(&columns)), false) {
        check_interrupt()?;
        let batch = batch?;
        verifier
            .push(&batch)
            .with_context(|| format!("cannot check release {location}"))?;
        bar.inc(batch.num_rows() as u64);
    }
    bar.finish_and_clear();
    match verifier.finish(&privacy) {
        Ok(v) => {
            if !ui.quiet {
                println!(
                    "{location}: satisfies {} ({} rows in {} classes, smallest {})",
                    privacy.describe(),
                    v.published_rows,
                    v.classes,
                    v.smallest_class
                );
            }
            tracing::info!(release = %location, rows = v.published_rows, classes = v.classes, smallest = v.smallest_class, "release verified");
            Ok(ExitCode::SUCCESS)
        }
        Err(Error::VerificationFailed(msg)) => {
            println!("{location}: does NOT satisfy {}: {msg}", privacy.describe());
            tracing::warn!(release = %location, "release does not satisfy the privacy model");
            Ok(ExitCode::from(exit::VERIFY_FAILED))
        }
        Err(e) => Err(e).with_context(|| format!("cannot check release {location}")),
    }
}

/// The release's columns that are identifying for `spec` (by role, or as
/// unlisted columns under `[columns] unlisted = "identifying"`), each as
/// `` `name` ``: a release must have dropped them all.
pub(crate) fn identifying_columns(
    spec: &kanon_engine::spec::JobSpec,
    schema: &arrow::datatypes::Schema,
) -> Vec<String> {
    schema
        .fields()
        .iter()
        .map(|f| f.name().as_str())
        .filter(|n| {
            kanon_engine::columns::role_of(spec, n) == Some(kanon_engine::spec::Role::Identifying)
        })
        .map(|n| format!("`{n}`"))
        .collect()
}
