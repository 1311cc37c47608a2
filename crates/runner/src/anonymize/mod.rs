//! `kanon anonymize`: two passes over the input with bounded memory.
//!
//! 1. Pass 1 reads the QI and sensitive columns (projection pushdown) into
//!    the engine's [`Encoder`], decoding on other threads
//!    ([`Dataset::with_read_ahead`]); when the input likely fits in
//!    `output.buffer_memory` it reads every column once and keeps the ones
//!    the release needs, so pass 2 does not read it again. The algorithm
//!    computes a partition and the engine verifies it against the privacy
//!    model (fail closed).
//! 2. Pass 2 recodes every batch through the engine's [`Releaser`]
//!    (passed-through columns untouched) and partitions the rows into
//!    buckets of classes as they come ([`buffer`]), in memory up to
//!    `output.buffer_memory` and in spill files beyond it
//!    ([`kanon_io::spill`]); each bucket is put in release order, checked by
//!    its published labels and written, on a thread of its own while the
//!    next bucket is ordered, the Parquet writer encoding the columns of
//!    each batch in parallel (`release::parallel`). The bytes are the same
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

mod buckets;
mod buffer;
mod report;

use std::process::ExitCode;
use std::time::Instant;

use anyhow::{Context, Result};
use arrow::array::RecordBatch;
use clap::Args;
use kanon_engine::algorithms::partitioned::{BlockExecutor, LocalBlocks};
use kanon_engine::encode::QiTable;
use kanon_engine::privacy::Privacy;
use kanon_engine::recode::Pseudonymiser;
use kanon_engine::release::{Encoded, Prepared, Release, Releaser, Session, SessionOptions};
use kanon_engine::verify::Verified;
use kanon_engine::{Anonymization, Error};

use crate::memory::{Budget, MemoryPlan, Phases, Sample, Shape};
use crate::JobArgs;
use buckets::ReleaseBuckets;
use kanon_engine::metrics::risk::RiskProfile;
use kanon_io::artefact::Artefact;
use kanon_io::certificate::{Certificate, InputIdentity};
use kanon_io::config::JobFile;
use kanon_io::dataset::Dataset;
use kanon_io::delta::series::{LeaveOut, Policy};
use kanon_io::delta::{DeltaOutput, Mode, Table};
use kanon_io::exit::Failure;
use kanon_io::guard::Reads;
use kanon_io::ops::{barrier, check_interrupt, SpinnerProgress, Ui};
use kanon_io::publish::{Published, Publisher, Target};
use kanon_io::release::{parse_size, ReleaseOptions};
use kanon_io::storage::{Location, Storage};
use kanon_report::{InputTally, ReleaseTally, Sources};

/// Rows of a spilled bucket, sorted in memory at once (`output.buffer_rows`).
const DEFAULT_BUFFER_ROWS: u64 = 2_000_000;

/// Bytes of released rows held in memory before pass 2 spills
/// (`output.buffer_memory`).
const DEFAULT_BUFFER_BYTES: u64 = 2 << 30;

/// Rows per batch handed to the release writer, at most: a bucket's rows
/// (about `buffer::SORT_ROWS`) go in batches of their own, and the buckets
/// are the same whatever the memory, so the file's bytes are too.
const WRITE_ROWS: usize = 65_536;

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

/// What a job reads: stored files, or a table in memory.
#[derive(Debug)]
enum Input {
    Stored(Location),
    Memory(kanon_io::dataset::MemoryTable),
}

impl std::fmt::Display for Input {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Input::Stored(l) => l.fmt(f),
            Input::Memory(t) => f.write_str(&t.label),
        }
    }
}

/// Runs `kanon anonymize`: the plan, pass 1, the algorithm, pass 2, the
/// artefacts, the commit.
pub fn run(args: &AnonymizeArgs, ui: &Ui) -> Result<ExitCode> {
    let start = Instant::now();
    let mut phases = Phases::start();
    let mut plan = Plan::new(args)?;
    let executor = args.workers.executor()?;
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

/// What a run is asked to do, checked before any data is read: the job,
/// where it reads and writes, and how the release is written.
struct Plan {
    job: JobFile,
    storage: Storage,
    input: Input,
    output: Location,
    options: ReleaseOptions,
    pseudonymiser: Pseudonymiser,
    /// A Delta release: where and how, and the table.
    delta: Option<(DeltaOutput, Table)>,
    /// How a Delta release meets the table's readable versions.
    series: Option<Policy>,
    /// The public key that signs the certificate (`KANON_SIGNING_KEY`),
    /// read before any work so that a malformed key stops the job first.
    signed_by: Option<String>,
    /// `--dry-run`: pass 1 only, which then keeps nothing for pass 2.
    dry_run: bool,
    /// `output.buffer_memory`: the bytes of rows pass 2 holds in memory
    /// (after pass 1: at most what the memory budget leaves).
    buffer_memory: u64,
    /// The job's memory budget (`resources.memory`, the cgroup's limit or
    /// a share of physical memory).
    budget: Option<Budget>,
}

impl Plan {
    /// Where the release is published.
    fn target(&self) -> Target {
        match &self.delta {
            Some((d, table)) => Target::Delta(d.clone(), table.clone()),
            None => Target::Parquet(self.output.clone()),
        }
    }

    /// Loads the job and fails before any reading when the release may not
    /// be written (an output inside the input, an existing release without
    /// `--overwrite`, a missing pseudonym key).
    fn new(args: &AnonymizeArgs) -> Result<Plan> {
        if let Some(t) = args.timeout {
            if !(t > 0.0 && t.is_finite()) {
                return Err(Failure::bad_input(format!(
                    "--timeout {t}: give a number of seconds > 0"
                ))
                .into());
            }
            kanon_io::ops::set_timeout(t);
        }
        let mut job_args = args.job.clone();
        if let Some(s) = &args.max_file_size {
            job_args.set.push(format!("output.max_file_size={s:?}"));
        }
        if let Some(s) = &args.memory {
            job_args.set.push(format!("resources.memory={s:?}"));
        }
        let job = JobFile::load(&job_args.request())?;
        let spec = job.spec();
        let storage = Storage::new(&spec.storage);
        let input = match &args.table {
            Some(t) => Input::Memory(t.clone()),
            None => Input::Stored(job.input(args.input.as_deref())?),
        };
        let output = job.output(args.output.as_deref())?;
        // Nothing the run writes may land on what it reads (the job file,
        // the hierarchies, the population), nor on another of its outputs.
        let mut reads = Reads::of_job(&job)?;
        if let Input::Stored(input) = &input {
            if output.overlaps(input) {
                return Err(Failure::bad_input(format!(
                    "output {output} is, contains or lies inside the input {input}: writing it could overwrite the input or be read back as input by the next run; choose an --output outside the input"
                ))
                .into());
            }
            reads.add("the input", input.clone());
        }
        reads.claim("the release (--output, output.path)", output.clone())?;
        for (flag, path) in [
            ("the metrics JSON (--metrics-json)", &args.metrics_json),
            ("the report (--report)", &args.report),
        ] {
            if let Some(path) = path {
                reads.claim(flag, Location::Local(path.clone()))?;
            }
        }
        let overwrite = args.overwrite || spec.output.overwrite.unwrap_or(false);
        let max_file_bytes = spec
            .output
            .max_file_size
            .as_deref()
            .map(|s| parse_size("output.max_file_size", s))
            .transpose()?;
        let delta = DeltaOutput::of_spec(&spec.output, &output, args.overwrite)?;
        // A single-file release's manifest lies beside it, outside the
        // release's own path.
        if delta.is_none() && max_file_bytes.is_none() {
            reads.claim(
                "the release's manifest",
                kanon_io::release::manifest_location(&output, false),
            )?;
        }
        let options = ReleaseOptions {
            max_file_bytes,
            row_group_rows: spec.output.row_group_rows.unwrap_or(1 << 20),
            zstd_level: spec.output.compression_level.unwrap_or(3),
            overwrite,
            metadata: Vec::new(),
            direct: delta.as_ref().map(|_| kanon_io::delta::run_token()),
        };
        let series = match &delta {
            Some(d) => Some(Policy::of(&job, &d.location)?),
            None if spec.output.history.is_some() => {
                return Err(Failure::bad_input(
                    "`output.history` applies to Delta tables, whose versions readers can time-travel to: set `output.format = \"delta\"` to publish a checked series, or remove it (a Parquet release is replaced, not versioned)",
                )
                .into())
            }
            None => None,
        };
        if let Some(Policy::Checked { state, .. }) = &series {
            reads.claim("the table history (output.history)", state.clone())?;
        }
        let delta = match delta {
            None => {
                kanon_io::release::check_destination(
                    &storage,
                    &output,
                    max_file_bytes.is_some(),
                    overwrite,
                )?;
                None
            }
            Some(d) => {
                let table = Table::at(&storage, &d.location)?;
                Some((d, table))
            }
        };
        // Publication without --overwrite and Delta commits rely on the
        // store's conditional writes: probe them before any work.
        if delta.is_some() || !overwrite {
            storage.check_conditional_writes(&output)?;
        }
        let pseudonymiser = job.pseudonymiser()?;
        let signed_by =
            kanon_io::signing::signing_key()?.map(|k| kanon_io::signing::public_hex(&k));
        let buffer_memory = match &spec.output.buffer_memory {
            Some(s) => parse_size("output.buffer_memory", s)?,
            None => DEFAULT_BUFFER_BYTES,
        };
        let budget = Budget::of(spec)?;
        Ok(Plan {
            job,
            storage,
            input,
            output,
            options,
            pseudonymiser,
            delta,
            series,
            signed_by,
            dry_run: args.dry_run,
            buffer_memory,
            budget,
        })
    }

    /// A Parquet release replaced by a release of the same job on another
    /// input is a series: readers who kept the first can diff the two
    /// (issue 31, item 2). Refused (exit 3) unless the job file accepts it
    /// (`output.unchecked_series = true`); the same input again gives the
    /// same bytes, and another job's release is not this job's series.
    fn refuse_parquet_series(&self, fingerprint: Option<&str>) -> Result<()> {
        if !self.options.overwrite || self.job.spec().output.unchecked_series == Some(true) {
            return Ok(());
        }
        let split = self.options.max_file_bytes.is_some();
        let at = kanon_io::release::manifest_location(&self.output, split);
        if self.storage.head(&at)?.is_none() {
            return Ok(());
        }
        let mut bytes = Vec::new();
        std::io::Read::read_to_end(&mut self.storage.open_read(&at)?, &mut bytes)
            .with_context(|| format!("cannot read the manifest {at}"))?;
        let Ok(manifest) = serde_json::from_slice::<kanon_io::release::Manifest>(&bytes) else {
            return Ok(());
        };
        let c = &manifest.certificate;
        let same_job = c.job_hash == kanon_io::certificate::job_hash(&self.job);
        let other_input = c.input.fingerprint.as_deref() != fingerprint || fingerprint.is_none();
        if same_job && other_input {
            return Err(Failure::new(
                kanon_io::exit::UNSATISFIABLE,
                format!(
                    "{} holds this job's release of another input: replacing it publishes a series, and whoever kept the first release can diff the two class by class and single out the people added, removed or relabelled; nothing was written. Publish each release to a new location, publish the series to a Delta table with `output.history` (checked, each person published once), or, if readers comparing releases is acceptable, say so in the job file with `output.unchecked_series = true`",
                    self.output
                ),
            )
            .into());
        }
        Ok(())
    }

    /// With `output.history`, the people the table's readable versions
    /// publish (loaded before any reading, so that a history kanon cannot
    /// check stops the job first): left out of an `append` release.
    fn leave_out(&self) -> Result<Option<LeaveOut>> {
        let (Some((d, table)), Some(policy @ Policy::Checked { .. })) = (&self.delta, &self.series)
        else {
            return Ok(None);
        };
        let people =
            kanon_io::delta::series::before_work(&self.storage, table, policy)?.unwrap_or_default();
        if d.mode != Mode::Append {
            return Ok(None);
        }
        let column = self
            .job
            .spec()
            .entity_column()
            .context("output.history without privacy.entity (a bug in kanon)")?;
        let fingerprinter = self.pseudonymiser.fingerprinter(column)?;
        Ok(Some(LeaveOut::new(fingerprinter, people)))
    }

    /// Whether pass 1 keeps the input's batches for pass 2 (and within
    /// which budget): when the columns the release reads from the input
    /// (all but `unread`) likely fit in `output.buffer_memory`, reading
    /// every column once costs less than reading the QI columns, then every
    /// column again. The estimate (twice the Parquet data's uncompressed
    /// size, or twice the CSV bytes) only chooses; pass 1 stops holding
    /// when the batches outgrow the budget.
    fn hold(&self, dataset: &Dataset, unread: &[usize], budget: u64) -> Option<u64> {
        if self.dry_run {
            return None;
        }
        let estimate = dataset.uncompressed_bytes(unread).unwrap_or(dataset.bytes);
        (estimate.saturating_mul(2) <= budget).then_some(budget)
    }

    /// `e` of the engine, with the job's settings that decide whether a
    /// release is possible.
    fn unsatisfiable(&self, e: Error) -> anyhow::Error {
        let spec = self.job.spec();
        let hint = matches!(e, Error::Unsatisfiable(_)).then(|| {
            format!(
                " (settings `privacy.k` = {}, `privacy.suppression_limit` = {} in {})",
                spec.privacy.k,
                spec.suppression_limit(),
                self.job.path.display()
            )
        });
        anyhow::Error::new(e).context(format!(
            "anonymising {} with {}{}",
            self.input,
            spec.algorithm.name,
            hint.unwrap_or_default()
        ))
    }

    /// The context of an input that does not fit the job.
    fn misfit(&self) -> String {
        format!(
            "input {} does not fit job {}",
            self.input,
            self.job.path.display()
        )
    }
}

/// Pass 1: the QI and sensitive columns only, encoded.
/// Warns, by column and count (never a value), about sensitive texts that
/// differ from another only by case or surrounding whitespace: they count
/// toward l as one value but are published as written.
pub(crate) fn warn_variants(qi: &kanon_engine::encode::QiTable) {
    for column in qi.sensitive() {
        let n = column.case_or_space_variants();
        if n > 0 {
            tracing::warn!(
                column = column.name(),
                variants = n,
                "sensitive values that differ from another only by case or surrounding whitespace count as that one value toward l and t-closeness, and are published as written; normalise them in the data to publish them alike"
            );
        }
    }
}

struct PassOne {
    dataset: Dataset,
    /// The input's batches, its QI and dropped columns left out, when they
    /// fit in `output.buffer_memory`: pass 2 then does not read it again.
    held: Option<Vec<RecordBatch>>,
    /// The encoded input and who it names (the identifiers salt this
    /// release's pseudonyms).
    encoded: Encoded,
    rows_in: u64,
    fingerprint: Option<String>,
    /// Rows of people a table's readable versions already publish, left
    /// out of this `append` release (`output.history`), and those people.
    left_out: (u64, usize),
    read_s: f64,
    /// The memory plan: the budget, pass 2's buffer, the estimate.
    memory: MemoryPlan,
}

/// An `append` with `output.history` whose input holds nobody new.
#[derive(Debug)]
struct NothingNew {
    table: Location,
    rows: u64,
    people: usize,
}

impl std::fmt::Display for NothingNew {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "nothing new to publish: all {} rows of the input belong to the {} people Delta table {} already publishes (output.history); the table is unchanged",
            self.rows, self.people, self.table
        )
    }
}

impl std::error::Error for NothingNew {}

impl PassOne {
    fn read(plan: &Plan, leave_out: Option<&LeaveOut>, ui: &Ui) -> Result<PassOne> {
        let (spec, input) = (plan.job.spec(), &plan.input);
        let t = Instant::now();
        let dataset = match input {
            Input::Stored(at) => Dataset::open(&plan.storage, at, &spec.input_spec())?,
            Input::Memory(t) => Dataset::in_memory(t)?,
        };
        let fits = |r: Result<(), Error>| r.with_context(|| plan.misfit());
        // Pass 1 also counts the identifying and pseudonymised columns:
        // repeated values may be one person's rows (kanon_engine::identities).
        let mut session = Session::new(
            spec,
            plan.job.hierarchies(),
            &dataset.schema,
            &format!("input {input}"),
        )
        .with_context(|| plan.misfit())?;
        let unread = kanon_engine::recode::unread_columns(spec, &dataset.schema);
        let mut memory = {
            let coded = dataset.projection(&spec.encoded_columns());
            let work = dataset.projection(&session.columns());
            let kept: Vec<usize> = (0..dataset.schema.fields().len())
                .filter(|i| !unread.contains(i))
                .collect();
            let sample = Sample::of(&dataset, &plan.storage)?;
            let (readers, ahead_batches) = dataset.read_ahead();
            let rows = dataset.estimated_rows(&plan.storage)?;
            let shape = Shape {
                rows,
                work_row_bytes: sample.row_bytes(Some(&work)),
                all_row_bytes: sample.row_bytes(None),
                kept_row_bytes: sample.row_bytes(Some(&kept)),
                ahead_batches,
                readers,
                row_group_rows: plan.options.row_group_rows as u64,
                code_bytes_per_row: sample.code_bytes_per_row(&coded, rows),
            };
            MemoryPlan::new(
                spec,
                shape,
                plan.budget.clone(),
                plan.buffer_memory,
                |buffer| plan.hold(&dataset, &unread, buffer).is_some(),
                &format!("job {} on input {input}", plan.job.path.display()),
            )?
        };
        tracing::info!(
            estimate = %memory.estimate.describe(),
            budget = %memory.budget.as_ref().map_or("none (not Linux)".into(), Budget::describe),
            buffer_memory = memory.buffer,
            "memory planned before reading"
        );
        let mut held = memory.hold.then(|| Held {
            budget: memory.buffer,
            batches: Vec::new(),
            bytes: 0,
        });
        let projection = match held {
            Some(_) => None,
            None => Some(dataset.projection(&session.columns())),
        };
        let bar = ui.bar("pass 1/2", dataset.rows);
        let mut left_rows = 0u64;
        let mut left_people: rustc_hash::FxHashSet<u128> = Default::default();
        let (read, rows_read, csv_hash) =
            dataset.with_read_ahead(&plan.storage, projection, true, |batches| -> Result<()> {
                for batch in batches {
                    check_interrupt()?;
                    let batch = batch?;
                    bar.inc(batch.num_rows() as u64);
                    let batch = match leave_out {
                        Some(l) => {
                            let (kept, left) = l.apply(batch)?;
                            left_rows += left.len() as u64;
                            left_people.extend(left);
                            kept
                        }
                        None => batch,
                    };
                    fits(session.push(&batch))?;
                    if let Some(h) = &mut held {
                        let kept = kanon_engine::recode::unread_placeholder(&batch, &unread)?;
                        h.bytes += kept.get_array_memory_size() as u64;
                        h.batches.push(kept);
                        if h.bytes > h.budget {
                            tracing::info!(
                                held_bytes = h.bytes,
                                buffer_memory = h.budget,
                                "the input outgrows output.buffer_memory: pass 2 reads it again"
                            );
                            held = None;
                        }
                    }
                }
                Ok(())
            });
        read?;
        bar.finish_and_clear();
        // A differentially private release publishes only a keyed
        // fingerprint (or none): see `published_fingerprint`.
        let fingerprint = kanon_engine::algorithms::safepub::published_fingerprint(
            spec,
            dataset.fingerprint(csv_hash),
        );
        let rows_in = rows_read - left_rows;
        if rows_in == 0 && left_rows > 0 {
            return Err(NothingNew {
                table: plan.output.clone(),
                rows: left_rows,
                people: left_people.len(),
            }
            .into());
        }
        if left_rows > 0 {
            tracing::info!(
                rows = left_rows,
                people = left_people.len(),
                "rows of people the table already publishes left out (output.history)"
            );
        }
        if rows_in == 0 {
            return Err(Failure::bad_input(format!(
                "input {input} has no rows: there is nothing to anonymise"
            ))
            .into());
        }
        let encoded = session.encode().with_context(|| plan.misfit())?;
        warn_variants(encoded.table());
        memory.recheck(
            spec,
            rows_in,
            encoded.table().heap_bytes() as u64,
            &format!("job {} on input {input}", plan.job.path.display()),
        )?;
        let read_s = t.elapsed().as_secs_f64();
        tracing::info!(
            rows = rows_in,
            files = dataset.n_files(),
            seconds = read_s,
            "pass 1 done"
        );
        Ok(PassOne {
            dataset,
            held: held.map(|h| h.batches),
            encoded,
            rows_in,
            fingerprint,
            left_out: (left_rows, left_people.len()),
            read_s,
            memory,
        })
    }
}

/// Input batches held through pass 1 within a budget of bytes.
struct Held {
    budget: u64,
    batches: Vec<RecordBatch>,
    bytes: u64,
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

/// Pass 2: every column, recoded batch by batch, put in release order,
/// checked by its published labels and written (not yet committed).
///
/// Rows are written class by class in a seeded order, never in input order
/// (kanon_engine::order). A release that fits in `output.buffer_memory` is
/// ordered in memory; a larger one is spilled to disk in buckets of classes
/// (kanon_io::spill) from the moment it outgrows the buffer, and each bucket
/// is ordered in memory: one scan of the input, bounded memory, the same
/// bytes.
#[allow(clippy::too_many_arguments)]
fn pass_two<'p>(
    plan: &'p Plan,
    dataset: &Dataset,
    held_input: Option<Vec<RecordBatch>>,
    rows_in: u64,
    leave_out: Option<&LeaveOut>,
    recoder: kanon_engine::recode::Recoder,
    options: ReleaseOptions,
    privacy: &Privacy,
    result: &Anonymization,
    report: bool,
    ui: &Ui,
) -> Result<(Publisher<'p>, Verified, Option<QiTable>)> {
    let spec = plan.job.spec();
    let budget = plan.buffer_memory;
    let buffer_rows = spec.output.buffer_rows.unwrap_or(DEFAULT_BUFFER_ROWS);
    let mut releaser = Releaser::new(
        spec,
        recoder,
        &dataset.schema,
        buffer::SORT_ROWS.min(buffer_rows),
    )
    .context("cannot check the release")?;
    // With a table history, the people of the release are recorded.
    if let Some(Policy::Checked { .. }) = &plan.series {
        let column = spec
            .entity_column()
            .context("output.history without privacy.entity (a bug in kanon)")?;
        let ledger =
            kanon_engine::history::Ledger::new(spec, plan.pseudonymiser.fingerprinter(column)?)?;
        releaser = releaser.with_ledger(ledger);
    }
    let out_schema = releaser.schema().clone();
    dataset.check_unchanged(&plan.storage)?;
    barrier("between-passes")?;
    let mut writer = Publisher::create(&plan.storage, plan.target(), out_schema, options)?;
    let store = ReleaseBuckets::new(&releaser, budget, buffer_rows);
    let mut release = Release::new(releaser, store);
    let bar = ui.bar("pass 2/2", Some(rows_in));
    let from_pass_one = held_input.is_some();
    let mut recode_all = |batches: &mut dyn Iterator<Item = Result<RecordBatch>>| -> Result<()> {
        for batch in batches {
            check_interrupt()?;
            let batch = batch?;
            bar.inc(batch.num_rows() as u64);
            // Batches held from pass 1 were left out of already.
            let batch = match leave_out.filter(|_| !from_pass_one) {
                Some(l) => l.apply(batch)?.0,
                None => batch,
            };
            let recoded = release.releaser().rows_recoded() + batch.num_rows();
            if recoded > release.releaser().rows_expected() {
                return Err(changed(&plan.input, rows_in, recoded));
            }
            release.push(&batch)?;
        }
        Ok(())
    };
    match held_input {
        Some(batches) => recode_all(&mut batches.into_iter().map(Ok))?,
        None => {
            dataset
                .with_read_ahead(&plan.storage, None, false, recode_all)
                .0?
        }
    }
    if release.releaser().rows_recoded() as u64 != rows_in {
        return Err(changed(
            &plan.input,
            rows_in,
            release.releaser().rows_recoded(),
        ));
    }
    // The writer sees each bucket's rows in batches of their own: the
    // buckets, and so the file's pages and bytes, are the same whether the
    // release was held in memory or spilled. Ordering and gathering the
    // next rows overlaps encoding the last ones: a thread writes while this
    // one produces.
    std::thread::scope(|scope| -> Result<()> {
        let (tx, rx) = std::sync::mpsc::sync_channel::<RecordBatch>(2);
        let writer = &mut writer;
        let writing = scope.spawn(move || -> Result<()> {
            for batch in rx {
                writer.write(&batch)?;
            }
            Ok(())
        });
        let produced = release.drain(WRITE_ROWS, |chunk| {
            check_interrupt()?;
            // A closed channel: the writer failed, and says why.
            Ok(tx.send(chunk).is_ok())
        });
        drop(tx);
        let written = writing.join().unwrap_or_else(|_| {
            Err(anyhow::anyhow!(
                "the release writer failed (a bug in kanon); nothing was written"
            ))
        });
        written.and(produced)
    })?;
    bar.finish_and_clear();
    // The report and the metrics read the labels the verifier encoded.
    // The file's footer is written while the labels are checked; the
    // release is committed only after both.
    writer.set_people(
        release
            .releaser()
            .take_ledger()
            .context("the release's people could not be recorded; nothing was written")?,
    );
    let (checked, closed) = rayon::join(|| release.finish(privacy, result), || writer.close());
    let (release_check, labels) =
        checked.context("the recoded release failed verification; nothing was written")?;
    closed?;
    Ok((writer, release_check, report.then_some(labels)))
}

fn changed(input: &Input, pass1: u64, pass2: usize) -> anyhow::Error {
    Failure::bad_input(format!(
        "input {input} changed between the passes: pass 1 read {pass1} rows, pass 2 found {pass2} or more; nothing was written, run the job again"
    ))
    .into()
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
