//! The HTML release report a data owner signs off: `kanon report` on a
//! published release, and `kanon anonymize --report` beside the release it
//! writes.
//!
//! One self-contained HTML file (inline CSS and SVG, no script, no network):
//! the job, what the release achieves per requirement, the risk before and
//! after, the information kept, and the provenance. It shows published
//! labels and counts only: the input is read for counts ([`InputTally`]),
//! never for values.
//!
//! The module follows the data: `tally` counts encoded tables, `data` turns
//! the counts into the serialisable [`ReportData`](data::ReportData),
//! `svg` draws charts and `html` lays out the page.

mod data;
mod html;
mod svg;
mod tally;

use std::path::{Path, PathBuf};
use std::process::ExitCode;

use anyhow::{Context, Result};
use arrow::datatypes::Schema;
use clap::Args;
use kanon_engine::encode::QiTable;
use kanon_engine::metrics::risk::{encode_labels, risk_profile, RiskProfile};
use kanon_engine::privacy::Privacy;
use kanon_engine::release::Session;
use kanon_engine::spec::InputSpec;
use kanon_engine::verify::{verify_labels, ReleaseVerifier};
use kanon_engine::Error;

pub(crate) use data::{risk_measures, Sources};
pub(crate) use tally::InputTally;

use crate::artefact::Artefact;
use crate::config::Job;
use crate::dataset::Dataset;
use crate::exit::{self, Failure};
use crate::guard::Reads;
use crate::ops::{check_interrupt, Ui};
use crate::storage::{Location, Storage};
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

/// The tally of a release encoded by its published labels (what the
/// verifier checked, [`ReleaseVerifier::into_table`]), and its risk profile
/// with the job's `[risk]` settings.
pub(crate) fn release_view(
    job: &Job,
    table: &QiTable,
) -> Result<(tally::ReleaseTally, RiskProfile)> {
    let qis: Vec<_> = job.spec.quasi_identifiers().collect();
    let risk = risk_profile(table, None, &job.spec.risk.options(table.n_rows()))
        .context("cannot measure the release's risk (the job's [risk] settings)")?;
    Ok((tally::ReleaseTally::of(table, &qis, &job.hierarchies), risk))
}

/// Builds the report of `sources` and writes it to `path` in full (a
/// temporary file renamed into place), so a reader never sees half a
/// report. `flag` names the option that asked for it, for errors.
pub(crate) fn write(path: &Path, sources: &Sources, flag: &str) -> Result<Artefact> {
    let data = data::ReportData::build(sources);
    let page = html::render(&data);
    Artefact::write(path, page.as_bytes(), "the report", flag)
}

/// The release's `kanon.*` metadata (the provenance written into each
/// Parquet footer), sorted by key.
fn provenance_of(schema: &Schema) -> Vec<(String, String)> {
    let mut out: Vec<(String, String)> = schema
        .metadata()
        .iter()
        .filter(|(k, _)| k.starts_with("kanon."))
        .map(|(k, v)| (k.clone(), v.clone()))
        .collect();
    out.sort();
    out
}

/// Runs `kanon report`: reads and re-verifies the release, reads the input
/// for the "before" figures (unless `--no-input`), writes the report. Exit
/// 0 when the release verifies, 1 when it does not (the report is written
/// either way and says so).
pub fn run(args: &ReportArgs, ui: &Ui) -> Result<ExitCode> {
    let job = Job::load(&args.job)?;
    let spec = &job.spec;
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
        ReleaseVerifier::try_with_hierarchies(spec, &job.hierarchies, &release.schema)
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
    let leaked = crate::release_check::identifying_columns(spec, &release.schema);
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
                    match crate::release_check::check_presence(&job, presence, &storage, &input, &table, ui)
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
        further: data::risk_measures(before_risk.as_ref(), &after_risk),
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

/// The job's input, encoded as pass 1 of `kanon anonymize` encodes it, and
/// counted; with its fingerprint.
fn read_input(
    job: &Job,
    storage: &Storage,
    input: &Location,
    ui: &Ui,
) -> Result<(InputTally, RiskProfile, Option<String>)> {
    let spec = &job.spec;
    let dataset = Dataset::open(storage, input, &spec.input_spec())?;
    let mut session = Session::new(
        spec,
        &job.hierarchies,
        &dataset.schema,
        &format!("input {input}"),
    )?;
    let bar = ui.bar("report: input", dataset.rows);
    let mut scan = dataset.scan(storage, Some(dataset.projection(&session.columns())), true);
    for batch in scan.by_ref() {
        check_interrupt()?;
        let batch = batch?;
        session.push(&batch)?;
        bar.inc(batch.num_rows() as u64);
    }
    bar.finish_and_clear();
    // Compared with the release's, so computed as the release published it.
    let fingerprint = kanon_engine::algorithms::safepub::published_fingerprint(
        &job.spec,
        dataset.fingerprint(scan.csv_hash()),
    );
    drop(scan);
    let encoded = session.encode()?;
    let risk = input_risk(job, storage, encoded.table())?;
    Ok((InputTally::of(encoded.table()), risk, fingerprint))
}

/// The risk profile of the encoded input (its raw QI values), with the
/// job's `[risk]` settings; with `risk.population`, the population table is
/// read for journalist and marketer risk.
pub(crate) fn input_risk(job: &Job, storage: &Storage, table: &QiTable) -> Result<RiskProfile> {
    let active = table.n_rows() - table.excluded().len();
    let population = match job.population()? {
        Some(location) => Some(read_population(job, storage, &location).with_context(|| {
            format!("cannot read the population table {location} (risk.population)")
        })?),
        None => None,
    };
    risk_profile(table, population.as_ref(), &job.spec.risk.options(active))
        .context("cannot measure the input's risk (the job's [risk] settings)")
}

/// The QI columns of a population table, read as labels.
fn read_population(job: &Job, storage: &Storage, location: &Location) -> Result<QiTable> {
    let dataset = Dataset::open(storage, location, &job.spec.input_spec())?;
    let qis: Vec<String> = job
        .spec
        .quasi_identifiers()
        .map(|a| a.name.clone())
        .collect();
    let mut batches = Vec::new();
    for batch in dataset.scan(storage, Some(dataset.projection(&qis)), false) {
        check_interrupt()?;
        batches.push(batch?);
    }
    let Some(schema) = batches.first().map(|b| b.schema()) else {
        return Err(Failure::bad_input("the population table has no rows").into());
    };
    Ok(encode_labels(&job.spec, &schema, &batches)?)
}
