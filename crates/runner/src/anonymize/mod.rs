//! `kanon anonymize`: two passes over the input with bounded memory.
//!
//! 1. Pass 1 reads only the QI and sensitive columns (projection pushdown)
//!    into the engine's [`Encoder`]; the algorithm computes a partition and
//!    the engine verifies it against the privacy model (fail closed).
//! 2. Pass 2 streams every column batch by batch through the engine's
//!    [`Releaser`] (passed-through columns untouched), buckets of classes
//!    wait in memory or in spill files ([`crate::spill`]), and each bucket
//!    is put in release order, checked by its published labels and
//!    written. Pass 2 uses every core: a second thread reads and decodes
//!    the next batches ([`Dataset::with_read_ahead`]) while batches are
//!    recoded, and the Parquet writer encodes and compresses the columns of
//!    each batch in parallel (`release::parallel`); the bytes are the same
//!    whatever the number of threads.
//!
//! Both steps are the engine's one release path ([`kanon_engine::release`]),
//! the one the DataFusion node takes too; this module adds the I/O. Only
//! when both checks passed and every row is accounted for (published or
//! counted as suppressed) is the release committed (rename, or completion of
//! the multipart uploads). Memory is the QI working set plus a few batches,
//! whatever the number of other columns: `-v` logs the working set's bytes
//! and the process's peak RSS, in total and per input row, and
//! `--metrics-json` records them under `memory`.

mod report;

use std::process::ExitCode;
use std::time::Instant;

use anyhow::{Context, Result};
use arrow::array::RecordBatch;
use clap::Args;
use kanon_engine::algorithms::partitioned::{BlockExecutor, LocalBlocks};
use kanon_engine::encode::{Encoder, QiTable};
use kanon_engine::privacy::Privacy;
use kanon_engine::recode::Pseudonymiser;
use kanon_engine::release::{Prepared, Recoded, Releaser};
use kanon_engine::spec::JobSpec;
use kanon_engine::verify::Verified;
use kanon_engine::{Anonymization, Error};

use crate::artefact::Artefact;
use crate::certificate::{Certificate, InputIdentity};
use crate::config::Job;
use crate::dataset::Dataset;
use crate::delta::{DeltaOutput, Outcome, Table, WrittenFile};
use crate::exit::Failure;
use crate::ops::{barrier, check_interrupt, SpinnerProgress, Ui};
use crate::release::{parse_size, Manifest, ReleaseOptions, ReleaseWriter};
use crate::report::{InputTally, Sources};
use crate::spill::Spill;
use crate::storage::{Location, Storage};
use crate::verify::Checked;
use crate::JobArgs;

/// Rows of the release sorted in memory at once (`output.buffer_rows`).
const DEFAULT_BUFFER_ROWS: u64 = 2_000_000;

/// Rows per batch handed to the release writer.
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
    /// Stop the job (exit 124, nothing written) after this many seconds,
    /// wherever it is, the algorithm included.
    #[arg(long, value_name = "SECONDS")]
    timeout: Option<f64>,
}

/// The QI and sensitive columns of a job (what pass 1 reads).
fn working_columns(spec: &JobSpec) -> Vec<String> {
    spec.quasi_identifiers()
        .chain(spec.sensitive())
        .map(|a| a.name.clone())
        .collect()
}

/// Runs `kanon anonymize`: the plan, pass 1, the algorithm, pass 2, the
/// artefacts, the commit.
pub fn run(args: &AnonymizeArgs, ui: &Ui) -> Result<ExitCode> {
    let start = Instant::now();
    let plan = Plan::new(args)?;
    let executor = args.workers.executor()?;
    let spec = &plan.job.spec;
    let first = PassOne::read(&plan, ui)?;
    let privacy = Privacy::from_spec(spec)?;
    privacy
        .check_feasible(&first.qi)
        .map_err(|e| plan.unsatisfiable(e))?;
    let app_id = plan.delta.as_ref().and_then(|(d, _)| {
        crate::delta::app_id(
            &crate::certificate::job_hash(&plan.job),
            first.fingerprint.as_deref(),
            d,
        )
    });
    if let Some((d, table)) = &plan.delta {
        if let crate::delta::Prepared::AlreadyReleased { version } =
            crate::delta::prepare(&plan.storage, table, d, app_id.as_deref())?
        {
            already_released(ui, &plan, version);
            return Ok(ExitCode::SUCCESS);
        }
    }
    if args.dry_run {
        // The algorithm must exist and accept its parameters.
        kanon_engine::algorithms::by_name(spec).map_err(|e| plan.unsatisfiable(e))?;
        report::dry_run(ui, &plan, &first, &privacy);
        return Ok(ExitCode::SUCCESS);
    }
    let Prepared {
        anonymization: mut result,
        recoder,
    } = anonymise(&plan, &first, &privacy, ui, executor.as_deref())?;

    let t = Instant::now();
    let PassOne {
        dataset,
        qi,
        rows_in,
        fingerprint,
        read_s,
    } = first;
    let working_set_bytes = qi.heap_bytes() as u64;
    // The report's "before" figures: counts of the raw QI values, no value;
    // and the input's risk for the report and the metrics JSON.
    let before = args.report.as_ref().map(|_| InputTally::of(&qi));
    let want_risk = args.report.is_some() || args.metrics_json.is_some();
    let before_risk = match want_risk {
        true => Some(crate::report::input_risk(&plan.job, &plan.storage, &qi)?),
        false => None,
    };
    // Pass 2 needs the recoder only: free the encoded table and the
    // partition (a group per row, the cells of every group) before the
    // release verifier fills up.
    drop(qi);
    drop(std::mem::take(&mut result.partition));
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
        &plan, &dataset, rows_in, recoder, options, &privacy, &result, want_risk, ui,
    )?;
    let after = labels
        .map(|t| crate::report::release_view(&plan.job, &t))
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
        memory: report::Memory::of_run(working_set_bytes, rows_in),
        risk: match (&before_risk, &after) {
            (Some(b), Some((_, a))) => Some((b, a)),
            _ => None,
        },
    };
    // Every artefact is written before the commit, so nothing can fail
    // after the release is published; a failed commit takes it back.
    let metrics = match &args.metrics_json {
        Some(path) => Some(report::write_metrics(
            path,
            &run.metrics_json(writer.files()),
        )?),
        None => None,
    };
    let report_file = match (&args.report, &after) {
        (Some(path), Some((after, after_risk))) => {
            let sources = Sources {
                job: &plan.job,
                privacy: &privacy,
                release: plan.output.to_string(),
                input: Some(plan.input.to_string()),
                before: before.as_ref(),
                before_note: None,
                after,
                verified: Ok(&release_check),
                rows_in: Some(rows_in),
                metrics: Some(&result.report),
                metadata,
                files: writer.files().iter().map(|f| f.to_string()).collect(),
                further: crate::report::risk_measures(before_risk.as_ref(), after_risk),
            };
            match crate::report::write(path, &sources, "--report") {
                Ok(f) => Some(f),
                Err(e) => {
                    if let Some(m) = metrics {
                        m.remove();
                    }
                    return Err(e);
                }
            }
        }
        _ => None,
    };
    let take_back = |metrics: Option<Artefact>, report_file: Option<Artefact>| {
        if let Some(m) = metrics {
            m.remove();
        }
        if let Some(r) = report_file {
            r.remove();
        }
    };
    if let Err(e) = barrier("before-commit").and_then(|()| check_interrupt()) {
        take_back(metrics, report_file);
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
    let committed = match &plan.delta {
        None => {
            let mut writer = writer;
            let files: Vec<(Location, u64, u64)> = writer
                .files()
                .iter()
                .zip(writer.file_sizes())
                .map(|(l, &(rows, bytes))| (l.clone(), rows, bytes))
                .collect();
            writer.set_manifest(&Manifest::new(&plan.output, &files, certificate.clone()));
            writer.commit().map(|files| Some((files, None)))
        }
        Some(delta) => commit_delta(
            &plan,
            delta,
            writer,
            &privacy,
            &release_check,
            &certificate,
            app_id.as_deref(),
            ui,
        ),
    };
    let (files, delta_version) = match committed {
        Ok(Some(committed)) => committed,
        Ok(None) => {
            take_back(metrics, report_file);
            return Ok(ExitCode::SUCCESS);
        }
        Err(e) => {
            take_back(metrics, report_file);
            return Err(e);
        }
    };
    run.log_committed(files.len(), rows_out);
    if !ui.quiet {
        run.print_summary(files.len());
        if let (Some((d, _)), Some(version)) = (&plan.delta, delta_version) {
            println!(
                "  Delta table   {} version {version} ({})",
                d.location,
                d.mode.name()
            );
        }
        if let Some(path) = &args.report {
            println!("  report        {}", path.display());
        }
    }
    Ok(ExitCode::SUCCESS)
}

/// What a run is asked to do, checked before any data is read: the job,
/// where it reads and writes, and how the release is written.
struct Plan {
    job: Job,
    storage: Storage,
    input: Location,
    output: Location,
    options: ReleaseOptions,
    pseudonymiser: Pseudonymiser,
    /// A Delta release: where and how, and the table.
    delta: Option<(DeltaOutput, Table)>,
}

impl Plan {
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
            crate::ops::set_timeout(t);
        }
        let mut job_args = args.job.clone();
        if let Some(s) = &args.max_file_size {
            job_args.set.push(format!("output.max_file_size={s:?}"));
        }
        let job = Job::load(&job_args)?;
        let spec = &job.spec;
        let storage = Storage::new(&spec.storage);
        let input = job.input(args.input.as_deref())?;
        let output = job.output(args.output.as_deref())?;
        if output.overlaps(&input) {
            return Err(Failure::bad_input(format!(
                "output {output} is, contains or lies inside the input {input}: writing it could overwrite the input or be read back as input by the next run; choose an --output outside the input"
            ))
            .into());
        }
        let overwrite = args.overwrite || spec.output.overwrite.unwrap_or(false);
        let max_file_bytes = spec
            .output
            .max_file_size
            .as_deref()
            .map(|s| parse_size("output.max_file_size", s))
            .transpose()?;
        let delta = DeltaOutput::of_spec(&spec.output, &output, args.overwrite)?;
        let options = ReleaseOptions {
            max_file_bytes,
            row_group_rows: spec.output.row_group_rows.unwrap_or(1 << 20),
            zstd_level: spec.output.compression_level.unwrap_or(3),
            overwrite,
            metadata: Vec::new(),
            direct: delta.as_ref().map(|_| crate::delta::run_token()),
        };
        let delta = match delta {
            None => {
                crate::release::check_destination(
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
        let pseudonymiser = job.pseudonymiser()?;
        Ok(Plan {
            job,
            storage,
            input,
            output,
            options,
            pseudonymiser,
            delta,
        })
    }

    /// `e` of the engine, with the job's settings that decide whether a
    /// release is possible.
    fn unsatisfiable(&self, e: Error) -> anyhow::Error {
        let spec = &self.job.spec;
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
struct PassOne {
    dataset: Dataset,
    qi: QiTable,
    rows_in: u64,
    fingerprint: Option<String>,
    read_s: f64,
}

impl PassOne {
    fn read(plan: &Plan, ui: &Ui) -> Result<PassOne> {
        let (spec, input) = (&plan.job.spec, &plan.input);
        let t = Instant::now();
        let dataset = Dataset::open(&plan.storage, input, &spec.input)?;
        let fits = |r: Result<(), Error>| r.with_context(|| plan.misfit());
        fits(kanon_engine::columns::check(
            spec,
            &dataset.schema,
            &format!("input {input}"),
        ))?;
        let mut encoder = None;
        fits(
            Encoder::try_new(spec, &plan.job.hierarchies, &dataset.schema)
                .map(|e| encoder = Some(e)),
        )?;
        let mut encoder = encoder.expect("encoder");
        let projection = dataset.projection(&working_columns(spec));
        let bar = ui.bar("pass 1/2", dataset.rows);
        let mut scan = dataset.scan(&plan.storage, Some(projection), true);
        for batch in scan.by_ref() {
            check_interrupt()?;
            let batch = batch?;
            fits(encoder.push(&batch))?;
            bar.inc(batch.num_rows() as u64);
        }
        bar.finish_and_clear();
        let rows_in = scan.rows();
        let fingerprint = dataset.fingerprint(scan.csv_hash());
        drop(scan);
        if rows_in == 0 {
            return Err(Failure::bad_input(format!(
                "input {input} has no rows: there is nothing to anonymise"
            ))
            .into());
        }
        let qi = encoder.finish().with_context(|| plan.misfit())?;
        let read_s = t.elapsed().as_secs_f64();
        tracing::info!(
            rows = rows_in,
            files = dataset.n_files(),
            seconds = read_s,
            "pass 1 done"
        );
        Ok(PassOne {
            dataset,
            qi,
            rows_in,
            fingerprint,
            read_s,
        })
    }
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
    let spec = &plan.job.spec;
    let what = format!("{} on {} rows", spec.algorithm.name, first.rows_in);
    let spinner = ui.spinner("algorithm", what.clone());
    let prepared = kanon_engine::release::prepare(
        spec,
        &first.qi,
        privacy,
        &crate::ops::cancellation(),
        &SpinnerProgress::new(spinner.clone(), what),
        workers.unwrap_or(LocalBlocks::get()),
        plan.pseudonymiser.clone(),
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
/// (kanon_engine::order). A release larger than the buffer is spilled to
/// disk in buckets of classes (crate::spill), each sorted in memory: one
/// scan of the input, bounded memory, the same bytes.
#[allow(clippy::too_many_arguments)]
fn pass_two<'p>(
    plan: &'p Plan,
    dataset: &Dataset,
    rows_in: u64,
    recoder: kanon_engine::recode::Recoder,
    options: ReleaseOptions,
    privacy: &Privacy,
    result: &Anonymization,
    report: bool,
    ui: &Ui,
) -> Result<(ReleaseWriter<'p>, Verified, Option<QiTable>)> {
    let spec = &plan.job.spec;
    let mut releaser = Releaser::new(
        spec,
        recoder,
        &dataset.schema,
        spec.output.buffer_rows.unwrap_or(DEFAULT_BUFFER_ROWS),
    )
    .context("cannot check the release")?;
    let out_schema = releaser.schema().clone();
    dataset.check_unchanged(&plan.storage)?;
    barrier("between-passes")?;
    let destination = match &plan.delta {
        Some((d, _)) => d.data_dir(),
        None => plan.output.clone(),
    };
    let mut writer =
        ReleaseWriter::create(&plan.storage, destination, out_schema.clone(), options)?;
    let mut spill = match releaser.n_buckets() {
        1 => None,
        n => Some(Spill::create(&out_schema, n)?),
    };
    let mut kept: Vec<RecordBatch> = Vec::new();
    let mut kept_groups: Vec<u32> = Vec::new();
    let bar = ui.bar("pass 2/2", Some(rows_in));
    dataset.with_read_ahead(&plan.storage, |batches| -> Result<()> {
        for batch in batches {
            check_interrupt()?;
            let batch = batch?;
            let n = batch.num_rows();
            if releaser.rows_recoded() + n > releaser.rows_expected() {
                return Err(changed(&plan.input, rows_in, releaser.rows_recoded() + n));
            }
            let Recoded {
                batch: released,
                groups,
            } = releaser.recode(&batch)?;
            match &mut spill {
                None => {
                    kept_groups.extend(groups);
                    kept.push(released);
                }
                Some(spill) => spill.push(&released, &groups, |g| releaser.bucket_of(g))?,
            }
            bar.inc(n as u64);
        }
        Ok(())
    })?;
    if releaser.rows_recoded() as u64 != rows_in {
        return Err(changed(&plan.input, rows_in, releaser.rows_recoded()));
    }
    let mut pending: Vec<RecordBatch> = Vec::new();
    let mut pending_rows = 0usize;
    for bucket in 0..releaser.n_buckets() {
        check_interrupt()?;
        if let Some(spill) = &mut spill {
            (kept, kept_groups) = spill.take(bucket)?;
        }
        let sorted = releaser.release(&kept, &kept_groups)?;
        kept.clear();
        // The writer sees the same batches whatever the buckets: its pages
        // and so the file's bytes do not depend on the buffer size.
        pending_rows += sorted.num_rows();
        pending.push(sorted);
        while pending_rows >= WRITE_ROWS {
            let all = arrow::compute::concat_batches(&out_schema, &pending)?;
            writer.write(&all.slice(0, WRITE_ROWS))?;
            pending_rows -= WRITE_ROWS;
            pending = vec![all.slice(WRITE_ROWS, pending_rows)];
        }
    }
    if pending_rows > 0 {
        writer.write(&arrow::compute::concat_batches(&out_schema, &pending)?)?;
    }
    drop(spill);
    bar.finish_and_clear();
    // The report and the metrics read the labels the verifier encoded.
    let (release_check, labels) = releaser
        .finish_with_labels(privacy, result)
        .context("the recoded release failed verification; nothing was written")?;
    writer.close()?;
    Ok((writer, release_check, report.then_some(labels)))
}

fn changed(input: &Location, pass1: u64, pass2: usize) -> anyhow::Error {
    Failure::bad_input(format!(
        "input {input} changed between the passes: pass 1 read {pass1} rows, pass 2 found {pass2} or more; nothing was written, run the job again"
    ))
    .into()
}

/// The end of a run whose release is already in its Delta table.
fn already_released(ui: &Ui, plan: &Plan, version: i64) {
    tracing::info!(output = %plan.output, table_version = version, "already released: nothing to do");
    if !ui.quiet {
        println!(
            "kanon anonymize: Delta table {} already holds this job's release of this input (table at version {version}); nothing to do",
            plan.output
        );
    }
}

/// Publishes a Delta release: the data files are completed in place, read
/// back and verified against the job (they must be the release pass 2
/// verified), and only then committed with the certificate. Returns the
/// files and the table version, or `None` when the release was in the
/// table already (a concurrent run committed it). Whatever fails, the data files are
/// removed and the table is unchanged.
#[allow(clippy::too_many_arguments)]
fn commit_delta(
    plan: &Plan,
    (output, table): &(DeltaOutput, Table),
    writer: ReleaseWriter<'_>,
    privacy: &Privacy,
    release_check: &Verified,
    certificate: &Certificate,
    app_id: Option<&str>,
    ui: &Ui,
) -> Result<Option<(Vec<Location>, Option<i64>)>> {
    let storage = &plan.storage;
    let schema = writer.schema().clone();
    let sizes = writer.file_sizes().to_vec();
    let files = writer.commit()?;
    let published = verify_and_commit(
        plan,
        output,
        table,
        &files,
        &sizes,
        &schema,
        privacy,
        release_check,
        certificate,
        app_id,
        ui,
    );
    let remove = || {
        for f in &files {
            if let Err(e) = storage.delete(f) {
                tracing::warn!(file = %f, error = %e, "cannot remove a data file no version references; VACUUM removes it");
            }
        }
    };
    match published {
        Ok(Outcome::Committed { version }) => {
            tracing::info!(output = %table.location, table_version = version, "Delta version committed");
            Ok(Some((files, Some(version))))
        }
        Ok(Outcome::AlreadyReleased { version }) => {
            remove();
            already_released(ui, plan, version);
            Ok(None)
        }
        Err(e) => {
            remove();
            Err(e)
        }
    }
}

#[allow(clippy::too_many_arguments)]
fn verify_and_commit(
    plan: &Plan,
    output: &DeltaOutput,
    table: &Table,
    files: &[Location],
    sizes: &[(u64, u64)],
    schema: &arrow::datatypes::SchemaRef,
    privacy: &Privacy,
    release_check: &Verified,
    certificate: &Certificate,
    app_id: Option<&str>,
    ui: &Ui,
) -> Result<Outcome> {
    let storage = &plan.storage;
    barrier("delta-verify")?;
    check_interrupt()?;
    let t = Instant::now();
    let dataset = Dataset::open_files(storage, &table.location, files)?;
    let label = format!("the data files written to {}", table.location);
    let failed = |msg: String| -> anyhow::Error {
        Failure::new(
            crate::exit::VERIFY_FAILED,
            format!("{label} {msg}; nothing was committed"),
        )
        .into()
    };
    match crate::verify::check(&plan.job, privacy, storage, &dataset, &label, ui)? {
        Checked::Holds(v)
            if v.published_rows == release_check.published_rows
                && v.classes == release_check.classes
                && v.smallest_class == release_check.smallest_class => {}
        Checked::Holds(v) => {
            return Err(failed(format!(
                "are not the release kanon verified ({} rows in {} classes read back, {} in {} verified)",
                v.published_rows, v.classes, release_check.published_rows, release_check.classes
            )))
        }
        Checked::Fails(msg) => return Err(failed(format!("fail verification: {msg}"))),
    }
    tracing::info!(
        files = files.len(),
        seconds = t.elapsed().as_secs_f64(),
        "Delta data files read back and verified"
    );
    check_interrupt()?;
    let t = Instant::now();
    let written: Vec<WrittenFile> = files
        .iter()
        .zip(sizes)
        .map(|(location, &(rows, bytes))| WrittenFile {
            location: location.clone(),
            rows,
            bytes,
        })
        .collect();
    let outcome = crate::delta::commit(
        storage,
        table,
        output,
        schema,
        &written,
        certificate,
        app_id,
    )?;
    tracing::info!(seconds = t.elapsed().as_secs_f64(), "Delta log commit done");
    Ok(outcome)
}
