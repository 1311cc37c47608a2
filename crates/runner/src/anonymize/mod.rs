//! `kanon anonymize`: two passes over the input with bounded memory.
//!
//! 1. Pass 1 reads the QI and sensitive columns (projection pushdown) into
//!    the engine's `Encoder` (through `release::Session`), decoding on other
//!    threads (`kanon_io::dataset::Dataset::with_read_ahead`); when the input likely fits in
//!    `output.buffer_memory` it reads every column once and keeps the ones
//!    the release needs, so pass 2 does not read it again. The algorithm
//!    computes a partition and the engine verifies it against the privacy
//!    model (fail closed).
//! 2. Pass 2 recodes every batch through the engine's `Releaser`
//!    (passed-through columns untouched) and partitions the rows into
//!    buckets of classes as they come ([`buffer`]), in memory up to
//!    `output.buffer_memory` and in spill files beyond it
//!    ([`kanon_io::spill`]); each bucket is put in release order, checked by
//!    its published labels and written, on a thread of its own while the
//!    next bucket is ordered, the Parquet writer encoding the columns of
//!    each batch in parallel (`kanon_io::release`). The bytes are the same
//!    whatever the number of threads and whatever the buffer.
//!
//! Both steps are the engine's one release path ([`kanon_engine::release`]),
//! the one the DataFusion node takes too; this module adds the I/O. Only
//! when both checks passed and every row is accounted for (published or
//! counted as suppressed) is the release committed (rename, or completion of
//! the multipart uploads). Memory is the QI working set plus at most
//! `output.buffer_memory` of rows (default 2 GiB), whatever the size of the
//! input: `-v` logs the working set's bytes and the process's peak RSS, in
//! total and per input row, and `--metrics-json` records them under
//! `memory`.
//!
//! The files follow the run: `plan` (what a run is asked to do, checked
//! before any data is read), `pass_one`, this file (the checks before any
//! work, the algorithm, the artefacts and the commit), `pass_two` with
//! `buckets` and `buffer` (where released rows wait for their turn), and
//! `report` (what the run prints, logs and records).

pub(crate) mod buckets;
pub(crate) mod buffer;
mod on_workers;
mod pass_one;
pub(crate) mod pass_two;
pub(crate) mod plan;
mod report;

use pass_one::{NothingNew, PassOne};
use pass_two::pass_two;
use plan::Plan;

use std::process::ExitCode;
use std::time::Instant;

use anyhow::Result;
use clap::Args;
use kanon_engine::algorithms::partitioned::{BlockExecutor, LocalBlocks};
use kanon_engine::privacy::Privacy;
use kanon_engine::release::{Prepared, SessionOptions};
use kanon_engine::Error;

use crate::memory::Phases;
use crate::JobArgs;
use kanon_engine::metrics::risk::RiskProfile;
use kanon_io::artefact::Artefact;
use kanon_io::certificate::{Certificate, InputIdentity};
use kanon_io::delta::series::Policy;
use kanon_io::ops::{barrier, check_interrupt, SpinnerProgress, Ui};
use kanon_io::publish::Published;
use kanon_io::storage::Location;
use kanon_report::{InputTally, ReleaseTally, Sources};

/// Arguments of `kanon anonymize`.
#[derive(Debug, Args)]
pub struct AnonymizeArgs {
    #[command(flatten)]
    job: JobArgs,
    #[command(flatten)]
    workers: crate::cluster::WorkersArg,
    /// Read this path or URL instead of `input.path` (a file, a directory,
    /// a glob, or an s3:// object or prefix).
    #[arg(long, short = 'i')]
    input: Option<String>,
    /// Write the release here instead of `output.path` (a path or s3:// URL).
    #[arg(long, short = 'o')]
    output: Option<String>,
    /// Replace an existing release.
    #[arg(long)]
    overwrite: bool,
    /// Split the release into files of about this size, e.g. 256MB (the
    /// output is then a directory or prefix); `output.max_file_size`.
    #[arg(long, value_name = "SIZE")]
    max_file_size: Option<String>,
    /// Check the job, the schema, the hierarchies and the data against the
    /// input (pass 1), without running the algorithm or writing anything
    /// (so not with `--metrics-json` or `--report`, which it could not
    /// write).
    #[arg(long, conflicts_with_all = ["metrics_json", "report"])]
    dry_run: bool,
    /// Also write every metric, the verification result and the timings as JSON.
    #[arg(long, value_name = "FILE")]
    metrics_json: Option<std::path::PathBuf>,
    /// Also write the HTML release report (self-contained: the job, what
    /// the release achieves, its risk before and after, the information
    /// kept, its provenance); written before the commit, like the release.
    #[arg(long, value_name = "FILE")]
    report: Option<std::path::PathBuf>,
    /// The job's memory budget, e.g. 4GB (`resources.memory`; default the
    /// container's cgroup limit, else 80 % of physical memory): a job whose
    /// estimated peak exceeds it is refused before reading (exit 2).
    #[arg(long, value_name = "SIZE")]
    memory: Option<String>,
    /// Stop the job (exit 124, nothing written) after this many seconds,
    /// wherever it is, the algorithm included.
    #[arg(long, value_name = "SECONDS")]
    timeout: Option<f64>,
    /// A table in memory to read instead of `input.path` (an embedder's
    /// data: the Python package's `kanon.anonymize(table, ...)`).
    #[arg(skip)]
    pub(crate) table: Option<kanon_io::dataset::MemoryTable>,
}

/// Runs `kanon anonymize`: the plan, pass 1, the algorithm, pass 2, the
/// artefacts, the commit.
pub fn run(args: &AnonymizeArgs, ui: &Ui) -> Result<ExitCode> {
    let start = Instant::now();
    let mut phases = Phases::start();
    let mut plan = Plan::new(args)?;
    let executor = args.workers.executor()?;
    if on_workers::applies(args, &plan) {
        return on_workers::run(args, plan, ui, start);
    }
    let spec = plan.job.spec();
    let leave_out = plan.leave_out()?;
    let first = match PassOne::read(&plan, leave_out.as_ref(), ui) {
        Err(e) if e.downcast_ref::<NothingNew>().is_some() => {
            outln!("{e}");
            return Ok(ExitCode::SUCCESS);
        }
        first => first?,
    };
    phases.end("pass1");
    plan.buffer_memory = first.memory.buffer;
    let (estimates, budget_bytes) = (
        (first.memory.before_reading, first.memory.estimate.peak()),
        first.memory.budget.as_ref().map(|b| b.bytes),
    );
    let privacy = Privacy::from_spec(spec)?;
    let app_id = match before_work(args, &plan, &first, &privacy, ui)? {
        Go::On { app_id } => app_id,
        Go::Done => return Ok(ExitCode::SUCCESS),
    };
    let Prepared {
        anonymization: mut result,
        recoder,
    } = anonymise(&plan, &first, &privacy, ui, executor.as_deref())?;

    let t = Instant::now();
    let PassOne {
        dataset,
        held,
        encoded,
        rows_in,
        fingerprint,
        read_s,
        left_out,
        ..
    } = first;
    let qi = encoded.table();
    let working_set_bytes = qi.heap_bytes() as u64;
    // The report's "before" figures: counts of the raw QI values, no value;
    // and the input's risk for the report and the metrics JSON.
    let before = args.report.as_ref().map(|_| InputTally::of(qi));
    let want_risk = args.report.is_some() || args.metrics_json.is_some();
    let before_risk = match want_risk {
        true => Some(kanon_report::input_risk(&plan.job, &plan.storage, qi)?),
        false => None,
    };
    // Pass 2 needs the recoder only: free the encoded table and the
    // partition (a group per row, the cells of every group) before the
    // release verifier fills up.
    drop(encoded);
    drop(std::mem::take(&mut result.partition));
    phases.end("algorithm");
    let mut options = plan.options.clone();
    options.metadata = report::provenance(
        spec,
        &result,
        rows_in,
        fingerprint.as_deref(),
        dataset.delta_version,
    );
    let metadata = options.metadata.clone();
    let delta_version = dataset.delta_version;
    let (writer, release_check, labels) = pass_two(
        &plan,
        &dataset,
        held,
        rows_in,
        leave_out.as_ref(),
        recoder,
        options,
        &privacy,
        &result,
        want_risk,
        ui,
    )?;
    phases.end("pass2");
    let after = labels
        .map(|t| kanon_report::release_view(&plan.job, &t))
        .transpose()?;
    let run = report::Run {
        plan: &plan,
        privacy: &privacy,
        result: &result,
        release_check: &release_check,
        fingerprint: fingerprint.as_deref(),
        rows_in,
        bytes_out: writer.bytes(),
        read_s,
        write_s: t.elapsed().as_secs_f64(),
        total_s: start.elapsed().as_secs_f64(),
        memory: report::Memory::of_run(
            working_set_bytes,
            rows_in,
            &phases,
            Some(estimates),
            budget_bytes,
        ),
        risk: match (&before_risk, &after) {
            (Some(b), Some((_, a))) => Some((b, a)),
            _ => None,
        },
        left_out,
    };
    // Every artefact is written before the commit, so nothing can fail
    // after the release is published; a failed commit takes it back.
    let artefacts = Artefacts::write(
        args,
        &run,
        writer.files(),
        before.as_ref(),
        after.as_ref(),
        metadata,
    )?;
    if let Err(e) = barrier("before-commit").and_then(|()| check_interrupt()) {
        artefacts.take_back();
        return Err(e);
    }
    let rows_out = writer.rows();
    let certificate = Certificate::new(
        &plan.job,
        &result,
        &release_check,
        rows_in,
        InputIdentity {
            fingerprint: fingerprint.clone(),
            delta_version,
        },
    );
    let published = writer.publish(
        &plan.job,
        &privacy,
        &release_check,
        &certificate,
        app_id.as_deref(),
        ui,
    );
    let (files, delta_version) = match published {
        Ok(Published::Committed {
            files,
            delta_version,
        }) => (files, delta_version),
        Ok(Published::AlreadyReleased { version }) => {
            artefacts.take_back();
            already_released(ui, &plan, version);
            return Ok(ExitCode::SUCCESS);
        }
        Err(e) => {
            artefacts.take_back();
            return Err(e);
        }
    };
    run.log_committed(files.len(), rows_out);
    if !ui.quiet {
        print_committed(args, &run, files.len(), delta_version);
    }
    Ok(ExitCode::SUCCESS)
}

/// The metrics JSON and the HTML report of a run: written before its
/// commit, so that nothing can fail once the release is published, and
/// taken back when it is not published.
#[derive(Default)]
struct Artefacts {
    metrics: Option<Artefact>,
    report: Option<Artefact>,
}

impl Artefacts {
    /// Writes what `args` asks for (`--metrics-json`, `--report`) about
    /// `run`, whose release files are `files`; the report needs the input's
    /// tally (`before`) and the release's with its risk (`after`).
    fn write(
        args: &AnonymizeArgs,
        run: &report::Run,
        files: &[Location],
        before: Option<&InputTally>,
        after: Option<&(ReleaseTally, RiskProfile)>,
        metadata: Vec<(String, String)>,
    ) -> Result<Artefacts> {
        let mut out = Artefacts::default();
        if let Some(path) = &args.metrics_json {
            out.metrics = Some(report::write_metrics(path, &run.metrics_json(files))?);
        }
        let (Some(path), Some((after, after_risk))) = (&args.report, after) else {
            return Ok(out);
        };
        let sources = Sources {
            job: &run.plan.job,
            privacy: run.privacy,
            release: run.plan.output.to_string(),
            input: Some(run.plan.input.to_string()),
            before,
            before_note: None,
            after,
            verified: Ok(run.release_check),
            rows_in: Some(run.rows_in),
            metrics: Some(&run.result.report),
            metadata,
            files: files.iter().map(|f| f.to_string()).collect(),
            further: kanon_report::risk_measures(run.risk.map(|(b, _)| b), after_risk),
        };
        match kanon_report::write(path, &sources, "--report") {
            Ok(f) => out.report = Some(f),
            Err(e) => {
                out.take_back();
                return Err(e);
            }
        }
        Ok(out)
    }

    /// Removes what was written: the release was not published.
    fn take_back(self) {
        for artefact in [self.metrics, self.report].into_iter().flatten() {
            artefact.remove();
        }
    }
}

/// The summary of a committed run, after the run's own lines
/// (`report::Run::print_summary`): the Delta version, the signing key and
/// the report.
fn print_committed(
    args: &AnonymizeArgs,
    run: &report::Run,
    files: usize,
    delta_version: Option<i64>,
) {
    run.print_summary(files);
    if let (Some((d, _)), Some(version)) = (&run.plan.delta, delta_version) {
        outln!(
            "  Delta table   {} version {version} ({})",
            d.location,
            d.mode.name()
        );
    }
    if let Some(key) = &run.plan.signed_by {
        outln!("  signed        certificate signed by Ed25519 key {key} (kanon verify --trusted-key {key})");
    }
    if let Some(path) = &args.report {
        outln!("  report        {}", path.display());
    }
}

/// Whether a run goes on to the algorithm after pass one.
enum Go {
    /// On, with the Delta commit's idempotence key.
    On { app_id: Option<String> },
    /// Done without work: a dry run, or a release the table already holds.
    Done,
}

/// The checks between pass one and the algorithm: the models can be met
/// on this input; a Delta table does not already hold this job's release
/// of it, and its readable versions are no reason to refuse the run; a
/// Parquet output is no series; a dry run stops here.
fn before_work(
    args: &AnonymizeArgs,
    plan: &Plan,
    first: &PassOne,
    privacy: &Privacy,
    ui: &Ui,
) -> Result<Go> {
    let spec = plan.job.spec();
    privacy
        .check_feasible(first.encoded.table())
        .map_err(|e| plan.unsatisfiable(e))?;
    let app_id = plan.delta.as_ref().and_then(|(d, _)| {
        kanon_io::delta::app_id(
            &kanon_io::certificate::job_hash(&plan.job),
            first.fingerprint.as_deref(),
            d,
        )
    });
    if let Some((d, table)) = &plan.delta {
        if let kanon_io::delta::Prepared::AlreadyReleased { version } =
            kanon_io::delta::prepare(&plan.storage, table, d, app_id.as_deref())?
        {
            already_released(ui, plan, version);
            return Ok(Go::Done);
        }
        // Without a history, a table readers can already read is refused
        // (unless the job file accepts it): before any work.
        if let Some(policy @ Policy::Refused) = &plan.series {
            kanon_io::delta::series::before_work(&plan.storage, table, policy)?;
        }
    }
    if plan.delta.is_none() {
        plan.refuse_parquet_series(first.fingerprint.as_deref())?;
    }
    if args.dry_run {
        // The algorithm must exist and accept its parameters.
        kanon_engine::algorithms::by_name(spec).map_err(|e| plan.unsatisfiable(e))?;
        report::dry_run(ui, plan, first, privacy);
        return Ok(Go::Done);
    }
    Ok(Go::On { app_id })
}

/// The job's algorithm on the encoded table, its partition verified, under
/// the process's cancellation and with its progress on a spinner.
fn anonymise(
    plan: &Plan,
    first: &PassOne,
    privacy: &Privacy,
    ui: &Ui,
    workers: Option<&dyn BlockExecutor>,
) -> Result<Prepared> {
    let spec = plan.job.spec();
    let what = format!("{} on {} rows", spec.algorithm.name, first.rows_in);
    let spinner = ui.spinner("algorithm", what.clone());
    let prepared = first.encoded.anonymise(
        privacy,
        SessionOptions {
            cancel: &kanon_io::ops::cancellation(),
            progress: &SpinnerProgress::new(spinner.clone(), what),
            blocks: workers.unwrap_or(LocalBlocks::get()),
            pseudonymiser: &plan.pseudonymiser,
        },
    );
    spinner.finish_and_clear();
    if let Err(Error::Cancelled(why)) = &prepared {
        // The interrupt or time limit sets the exit code; the engine's
        // message says where it stopped (e.g. which workers were slow).
        check_interrupt().map_err(|e| e.context(why.clone()))?;
    }
    let prepared = prepared.map_err(|e| plan.unsatisfiable(e))?;
    check_interrupt()?;
    tracing::info!(
        algorithm = %prepared.anonymization.algorithm,
        seconds = prepared.anonymization.timings.algorithm.as_secs_f64(),
        classes = prepared.anonymization.report.classes,
        "partition computed and verified"
    );
    let on_workers = prepared.anonymization.details["partitioned"]["executor"].is_object();
    if workers.is_some() && !on_workers {
        tracing::warn!(
            "--workers: the job ran on this machine only: it did not run in blocks \
             (at most 100,000 rows, or an algorithm that runs on the whole table); \
             set algorithm.block_size to send its blocks to the workers"
        );
    }
    Ok(prepared)
}

/// The end of a run whose release is already in its Delta table.
fn already_released(ui: &Ui, plan: &Plan, version: i64) {
    tracing::info!(output = %plan.output, table_version = version, "already released: nothing to do");
    if !ui.quiet {
        outln!(
            "kanon anonymize: Delta table {} already holds this job's release of this input (table at version {version}); nothing to do",
            plan.output
        );
    }
}
