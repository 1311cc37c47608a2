//! `kanon report`: the HTML release report of a published release (the
//! report itself is the `kanon_report` crate's).

use std::path::PathBuf;
use std::process::ExitCode;

use anyhow::{Context, Result};
use clap::Args;
use kanon_engine::privacy::Privacy;
use kanon_engine::spec::InputSpec;
use kanon_engine::verify::{verify_labels, ReleaseVerifier};
use kanon_engine::Error;
use kanon_io::config::JobFile;
use kanon_io::dataset::Dataset;
use kanon_io::exit;
use kanon_io::guard::Reads;
use kanon_io::ops::{check_interrupt, Ui};
use kanon_io::storage::{Location, Storage};
use kanon_report::{provenance_of, read_input, release_view, risk_measures, write, Sources};

use crate::JobArgs;

/// Arguments of `kanon report`.
#[derive(Debug, Args)]
pub struct ReportArgs {
    #[command(flatten)]
    job: JobArgs,
    /// The release to report on (Parquet or CSV; a path, directory, glob or
    /// s3:// URL), as for `kanon verify -i`.
    release: String,
    /// Write the HTML report here.
    #[arg(long, short = 'o', value_name = "FILE")]
    output: PathBuf,
    /// Read the job's input from this path or URL instead of `input.path`
    /// (for the "before" figures).
    #[arg(long, short = 'i')]
    input: Option<String>,
    /// Do not read the job's input (when it is no longer available): the
    /// "before" figures are left out and the report says so.
    #[arg(long, conflicts_with = "input")]
    no_input: bool,
}

/// Runs `kanon report`: reads and re-verifies the release, reads the input
/// for the "before" figures (unless `--no-input`), writes the report. Exit
/// 0 when the release verifies, 1 when it does not (the report is written
/// either way and says so).
pub fn run(args: &ReportArgs, ui: &Ui) -> Result<ExitCode> {
    let job = JobFile::load(&args.job.request())?;
    let spec = job.spec();
    let privacy = Privacy::from_spec(spec)?;
    let storage = Storage::new(&spec.storage);
    let location = Location::parse(&args.release)?;
    // The report may not land on the release, the job's files or its input.
    let mut reads = Reads::of_job(&job)?;
    reads.add("the release (RELEASE)", location.clone());
    if let (false, Ok(input)) = (args.no_input, job.input(args.input.as_deref())) {
        reads.add("the input", input);
    }
    reads.check("the report (-o)", &Location::Local(args.output.clone()))?;
    let release = Dataset::open(&storage, &location, &InputSpec::default())
        .with_context(|| format!("cannot open the release {location} (RELEASE argument)"))?;
    let metadata = provenance_of(&release.schema);
    let columns: Vec<String> = spec
        .quasi_identifiers()
        .chain(spec.sensitive())
        .map(|a| a.name.clone())
        .collect();
    let mut verifier =
        ReleaseVerifier::try_with_hierarchies(spec, job.hierarchies(), &release.schema)
            .with_context(|| format!("cannot check release {location}"))?;
    let bar = ui.bar("report: release", release.rows);
    for batch in release.scan(&storage, Some(release.projection(&columns)), false) {
        check_interrupt()?;
        let batch = batch?;
        verifier
            .push(&batch)
            .with_context(|| format!("cannot check release {location}"))?;
        bar.inc(batch.num_rows() as u64);
    }
    bar.finish_and_clear();
    let leaked = kanon_io::release_check::identifying_columns(spec, &release.schema);
    let table = verifier
        .into_table()
        .with_context(|| format!("cannot check release {location}"))?;
    let verified = match verify_labels(&table, &privacy) {
        Ok(_) if !leaked.is_empty() => Err(format!(
            "the release holds identifying column(s) {}, which a release must drop",
            leaked.join(", ")
        )),
        Ok(v) => Ok(v),
        Err(Error::VerificationFailed(msg)) => Err(format!(
            "the published labels do NOT satisfy {}: {msg}",
            privacy.describe()
        )),
        Err(e) => return Err(e).with_context(|| format!("cannot check release {location}")),
    };
    // δ-presence is the release and the population together: recounted
    // from the input, or not verified without it.
    let verified = match (verified, privacy.presence()) {
        (Ok(v), Some(presence)) => {
            match (args.no_input, job.input(args.input.as_deref())) {
                (false, Ok(input)) => {
                    match kanon_io::release_check::check_presence(&job, presence, &storage, &input, &table, ui)
                        .with_context(|| format!("cannot recount delta-presence over {input}"))?
                    {
                        Ok(_) => Ok(v),
                        Err(problem) => Err(format!(
                            "the published labels do NOT satisfy {}: {problem}",
                            privacy.describe()
                        )),
                    }
                }
                _ => Err("delta-presence was not recounted: it needs the population the release was drawn from (the job's input); run without --no-input".to_string()),
            }
        }
        (verified, _) => verified,
    };
    let (after, after_risk) = release_view(&job, &table)?;
    let recorded_rows_in = metadata
        .iter()
        .find(|(k, _)| k == "kanon.rows_in")
        .and_then(|(_, v)| v.parse::<u64>().ok());
    let (before, before_note, input, before_risk) = if args.no_input {
        (
            None,
            Some("the input was not read (--no-input): the figures before anonymisation are left out".to_string()),
            None,
            None,
        )
    } else {
        let hint = |input: &dyn std::fmt::Display| {
            format!("cannot read the job's input {input} for the \"before\" figures; give it with --input, or leave them out with --no-input")
        };
        let given = args.input.as_deref();
        let input = job
            .input(given)
            .with_context(|| hint(&given.unwrap_or("(input.path)")))?;
        let (tally, risk, fingerprint) =
            read_input(&job, &storage, &input, ui).with_context(|| hint(&input))?;
        let recorded = metadata
            .iter()
            .find(|(k, _)| k == "kanon.input.fingerprint")
            .map(|(_, v)| v.as_str());
        let note = match (recorded, fingerprint.as_deref()) {
            (Some(r), Some(f)) if r != f => Some(format!(
                "the input read now ({input}) is not the input of this release: its fingerprint {f} differs from the release's; the figures before anonymisation describe the input read now"
            )),
            (None, _) => Some("the release records no input fingerprint: the input read now is assumed to be the release's".into()),
            _ => None,
        };
        (Some(tally), note, Some(input.to_string()), Some(risk))
    };
    let verified_ok = verified.is_ok();
    let sources = Sources {
        job: &job,
        privacy: &privacy,
        release: location.to_string(),
        input,
        before: before.as_ref(),
        before_note,
        after: &after,
        verified: verified.as_ref().map_err(|m| m.clone()),
        rows_in: recorded_rows_in,
        metrics: None,
        metadata,
        files: release.file_locations(),
        further: risk_measures(before_risk.as_ref(), &after_risk),
    };
    write(&args.output, &sources, "--output")?;
    if !ui.quiet {
        outln!(
            "kanon report: {location} -> {} (release {})",
            args.output.display(),
            if verified_ok {
                "verified"
            } else {
                "NOT verified"
            }
        );
    }
    tracing::info!(release = %location, report = %args.output.display(), verified = verified_ok, "report written");
    if let Err(msg) = &verified {
        outln!("{location}: {msg}");
        return Ok(ExitCode::from(exit::VERIFY_FAILED));
    }
    Ok(ExitCode::SUCCESS)
}
