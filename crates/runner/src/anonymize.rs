//! `kanon anonymize`: two passes over the input with bounded memory.
//!
//! 1. Pass 1 reads only the QI and sensitive columns (projection pushdown)
//!    into the engine's [`Encoder`]; the algorithm computes a partition and
//!    the engine verifies it against the privacy model (fail closed).
//! 2. Pass 2 streams every column batch by batch through the engine's
//!    [`Releaser`] (passed-through columns untouched), buckets of classes
//!    wait in memory or in spill files ([`crate::spill`]), and each bucket
//!    is put in release order, checked by its published labels and
//!    written.
//!
//! Both steps are the engine's one release path ([`kanon_engine::release`]),
//! the one the DataFusion node takes too; this module adds the I/O. Only
//! when both checks passed and every row is accounted for (published or
//! counted as suppressed) is the release committed (rename, or completion of
//! the multipart uploads). Memory is the QI working set plus a few batches,
//! whatever the number of other columns: `-v` logs the working set's bytes
//! and the process's peak RSS, in total and per input row, and
//! `--metrics-json` records them under `memory`.

use std::process::ExitCode;
use std::time::Instant;

use anyhow::{Context, Result};
use arrow::array::RecordBatch;
use clap::Args;
use kanon_engine::encode::Encoder;
use kanon_engine::privacy::Privacy;
use kanon_engine::release::{Prepared, Recoded, Releaser};
use kanon_engine::spec::JobSpec;
use kanon_engine::Error;

use crate::config::Job;
use crate::dataset::Dataset;
use crate::exit::Failure;
use crate::ops::{barrier, check_interrupt, peak_rss_bytes, SpinnerProgress, Ui};
use crate::release::{parse_size, ReleaseOptions, ReleaseWriter};
use crate::spill::Spill;
use crate::storage::{Location, Storage};
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
    /// input (pass 1), without running the algorithm or writing anything.
    #[arg(long)]
    dry_run: bool,
    /// Also write every metric, the verification result and the timings as JSON.
    #[arg(long, value_name = "FILE")]
    metrics_json: Option<std::path::PathBuf>,
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

/// Runs `kanon anonymize`.
pub fn run(args: &AnonymizeArgs, ui: &Ui) -> Result<ExitCode> {
    let start = Instant::now();
    if let Some(t) = args.timeout {
        if !(t > 0.0 && t.is_finite()) {
            return Err(
                Failure::bad_input(format!("--timeout {t}: give a number of seconds > 0")).into(),
            );
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
    let options = ReleaseOptions {
        max_file_bytes,
        row_group_rows: spec.output.row_group_rows.unwrap_or(1 << 20),
        zstd_level: spec.output.compression_level.unwrap_or(3),
        overwrite,
        metadata: Vec::new(),
    };
    // Fail before any reading when the release may not be written.
    crate::release::check_destination(&storage, &output, max_file_bytes.is_some(), overwrite)?;

    let t = Instant::now();
    let pseudonymiser = job.pseudonymiser()?;
    let dataset = Dataset::open(&storage, &input, &spec.input)?;
    let fits = |r: Result<(), Error>| {
        r.with_context(|| format!("input {input} does not fit job {}", job.path.display()))
    };
    fits(kanon_engine::columns::check(
        spec,
        &dataset.schema,
        &format!("input {input}"),
    ))?;
    // Pass 1: the QI and sensitive columns only.
    let mut encoder = None;
    fits(Encoder::try_new(spec, &job.hierarchies, &dataset.schema).map(|e| encoder = Some(e)))?;
    let mut encoder = encoder.expect("encoder");
    let projection = dataset.projection(&working_columns(spec));
    let bar = ui.bar("pass 1/2", dataset.rows);
    let mut scan = dataset.scan(&storage, Some(projection), true);
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
    let qi = encoder
        .finish()
        .with_context(|| format!("input {input} does not fit job {}", job.path.display()))?;
    let read_s = t.elapsed().as_secs_f64();
    // The encoded QI and sensitive codes: what the algorithm works on.
    let working_set_bytes = qi.heap_bytes() as u64;
    tracing::info!(
        rows = rows_in,
        files = dataset.n_files(),
        seconds = read_s,
        "pass 1 done"
    );
    let privacy = Privacy::from_spec(spec)?;
    let unsatisfiable = |e: Error| {
        let hint = matches!(e, Error::Unsatisfiable(_)).then(|| {
            format!(
                " (settings `privacy.k` = {}, `privacy.suppression_limit` = {} in {})",
                spec.privacy.k,
                spec.suppression_limit(),
                job.path.display()
            )
        });
        anyhow::Error::new(e).context(format!(
            "anonymising {input} with {}{}",
            spec.algorithm.name,
            hint.unwrap_or_default()
        ))
    };
    privacy.check_feasible(&qi).map_err(unsatisfiable)?;

    if args.dry_run {
        // The algorithm must exist and accept its parameters.
        kanon_engine::algorithms::by_name(spec).map_err(unsatisfiable)?;
        if !ui.quiet {
            println!("kanon anonymize --dry-run: {input} -> {output}");
            println!(
                "  input         {} file(s), {}, {} rows, {} columns",
                dataset.n_files(),
                dataset.format.name(),
                rows_in,
                dataset.schema.fields().len()
            );
            println!(
                "  job           {} ({}), {} quasi-identifiers checked against their hierarchies",
                spec.algorithm.name,
                privacy.describe(),
                qi.n_qi()
            );
            println!("  ok            nothing was written");
        }
        tracing::info!(input = %input, rows = rows_in, "dry run passed");
        return Ok(ExitCode::SUCCESS);
    }

    let what = format!("{} on {rows_in} rows", spec.algorithm.name);
    let spinner = ui.spinner("algorithm", what.clone());
    let prepared = kanon_engine::release::prepare(
        spec,
        &qi,
        &privacy,
        &crate::ops::cancellation(),
        &SpinnerProgress::new(spinner.clone(), what),
        pseudonymiser,
    );
    spinner.finish_and_clear();
    if let Err(Error::Cancelled(_)) = &prepared {
        check_interrupt()?;
    }
    let Prepared {
        anonymization: mut result,
        recoder,
    } = prepared.map_err(unsatisfiable)?;
    check_interrupt()?;
    tracing::info!(
        algorithm = %result.algorithm,
        seconds = result.timings.algorithm.as_secs_f64(),
        classes = result.report.classes,
        "partition computed and verified"
    );

    // Pass 2: every column, recoded batch by batch.
    let t = Instant::now();
    drop(qi);
    let mut options = options;
    options.metadata = provenance(spec, &result, rows_in, fingerprint.as_deref());
    // Pass 2 needs the recoder only: free the partition (a group per row,
    // the cells of every group) before the release verifier fills up.
    drop(std::mem::take(&mut result.partition));
    // Rows are written class by class in a seeded order, never in input
    // order (kanon_engine::order). A release larger than the buffer is
    // spilled to disk in buckets of classes (crate::spill), each sorted in
    // memory: one scan of the input, bounded memory, the same bytes.
    let mut releaser = Releaser::new(
        spec,
        recoder,
        &dataset.schema,
        spec.output.buffer_rows.unwrap_or(DEFAULT_BUFFER_ROWS),
    )
    .context("cannot check the release")?;
    let out_schema = releaser.schema().clone();
    dataset.check_unchanged(&storage)?;
    barrier("between-passes")?;
    let mut writer = ReleaseWriter::create(&storage, output.clone(), out_schema.clone(), options)?;
    let mut spill = match releaser.n_buckets() {
        1 => None,
        n => Some(Spill::create(&out_schema, n)?),
    };
    let mut kept: Vec<RecordBatch> = Vec::new();
    let mut kept_groups: Vec<u32> = Vec::new();
    let bar = ui.bar("pass 2/2", Some(rows_in));
    for batch in dataset.scan(&storage, None, false) {
        check_interrupt()?;
        let batch = batch?;
        let n = batch.num_rows();
        if releaser.rows_recoded() + n > releaser.rows_expected() {
            return Err(changed(&input, rows_in, releaser.rows_recoded() + n));
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
    if releaser.rows_recoded() as u64 != rows_in {
        return Err(changed(&input, rows_in, releaser.rows_recoded()));
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
    let release_check = releaser
        .finish(&privacy, &result)
        .context("the recoded release failed verification; nothing was written")?;
    writer.close()?;
    let rows_out = writer.rows();
    let bytes_out = writer.bytes();
    let files: Vec<Location> = writer.files().to_vec();
    let write_s = t.elapsed().as_secs_f64();
    let total_s = start.elapsed().as_secs_f64();
    let r = &result.report;
    let memory = Memory::of_run(working_set_bytes, rows_in);
    // Every artefact is written before the commit, so nothing can fail
    // after the release is published; a failed commit takes it back.
    let metrics = match &args.metrics_json {
        Some(path) => {
            let json = serde_json::json!({
                "input": input.to_string(),
                "output": output.to_string(),
                "files": files.iter().map(|f| f.to_string()).collect::<Vec<_>>(),
                "input_fingerprint": fingerprint,
                "algorithm": result.algorithm,
                "privacy": privacy.describe(),
                "seed": spec.algorithm.seed,
                "report": r,
                "verified": result.verified,
                "release_verified": release_check,
                "details": result.details,
                "memory": memory,
                "timings_s": {
                    "pass1_read_encode": read_s,
                    "classes": result.timings.classes.as_secs_f64(),
                    "algorithm": result.timings.algorithm.as_secs_f64(),
                    "verify": result.timings.verify.as_secs_f64(),
                    "metrics": result.timings.metrics.as_secs_f64(),
                    "pass2_recode_verify_write": write_s,
                    "total": total_s,
                },
            });
            Some(MetricsFile::write(path, &json)?)
        }
        None => None,
    };
    barrier("before-commit")?;
    check_interrupt()?;
    let files = match writer.commit() {
        Ok(files) => files,
        Err(e) => {
            if let Some(m) = metrics {
                m.remove();
            }
            return Err(e);
        }
    };
    tracing::info!(
        output = %output,
        files = files.len(),
        rows_in = rows_in,
        rows_out = rows_out,
        suppressed = r.suppressed_rows,
        k_achieved = r.smallest_class,
        ncp = r.ncp,
        bytes = bytes_out,
        seconds = total_s,
        "release committed"
    );
    tracing::info!(
        working_set_bytes = memory.working_set_bytes,
        working_set_bytes_per_row = memory.working_set_bytes_per_row,
        peak_rss_bytes = memory.peak_rss_bytes,
        peak_rss_bytes_per_row = memory.peak_rss_bytes_per_row,
        "memory"
    );
    if !ui.quiet {
        println!("kanon anonymize: {input} -> {output}");
        println!(
            "  algorithm     {} ({})",
            result.algorithm,
            privacy.describe()
        );
        println!(
            "  rows          {} in, {} out, {} suppressed",
            r.rows_in, r.rows_out, r.suppressed_rows
        );
        println!(
            "  classes       {} (smallest {}, largest {}), k achieved {}",
            r.classes, r.smallest_class, r.largest_class, r.smallest_class
        );
        println!(
            "  loss          NCP {:.4}, granularity {:.4}, distortion ratio {:.4}",
            r.ncp, r.granularity, r.distortion_ratio
        );
        if let Some(p) = result.details.get("partitioned") {
            let f = |key: &str| p.get(key).and_then(|v| v.as_f64()).unwrap_or(0.0);
            println!(
                "  blocks        {} of {}-{} rows (partition {:.3} s, blocks {:.3} s, union {:.3} s)",
                f("blocks"),
                f("block_rows_min"),
                f("block_rows_max"),
                f("partition_s"),
                f("blocks_s"),
                f("union_s")
            );
        }
        if files.len() > 1 {
            println!("  files         {} ({} bytes)", files.len(), bytes_out);
        }
        println!(
            "  time          {:.3} s (pass 1 {:.3}, algorithm {:.3}, verify {:.3}, pass 2 {:.3})",
            total_s,
            read_s,
            result.timings.algorithm.as_secs_f64(),
            result.timings.verify.as_secs_f64(),
            write_s
        );
    }
    Ok(ExitCode::SUCCESS)
}

/// Memory of a run: the encoded working set and the process's peak resident
/// set (Linux only), in bytes and per input row. Sizes only, never data.
#[derive(Debug, serde::Serialize)]
struct Memory {
    working_set_bytes: u64,
    working_set_bytes_per_row: f64,
    peak_rss_bytes: Option<u64>,
    peak_rss_bytes_per_row: Option<f64>,
}

impl Memory {
    /// Reads the peak RSS now, at the end of a run over `rows` rows.
    fn of_run(working_set_bytes: u64, rows: u64) -> Memory {
        let per_row = |bytes: u64| bytes as f64 / rows.max(1) as f64;
        let peak_rss_bytes = peak_rss_bytes();
        Memory {
            working_set_bytes,
            working_set_bytes_per_row: per_row(working_set_bytes),
            peak_rss_bytes,
            peak_rss_bytes_per_row: peak_rss_bytes.map(per_row),
        }
    }
}

/// The metrics JSON of a run, written in full before the release is
/// committed (so its failure publishes nothing) and removed again if the
/// commit fails.
struct MetricsFile(std::path::PathBuf);

impl MetricsFile {
    fn write(path: &std::path::Path, json: &serde_json::Value) -> Result<MetricsFile> {
        let parent = match path.parent() {
            Some(d) if !d.as_os_str().is_empty() => d,
            _ => std::path::Path::new("."),
        };
        let context = || {
            format!(
                "cannot write metrics to {} (--metrics-json); nothing was published",
                path.display()
            )
        };
        let mut tmp = tempfile::Builder::new()
            .prefix(&format!("{}metrics-", crate::release::tmp_prefix()))
            .tempfile_in(parent)
            .with_context(context)?;
        std::io::Write::write_all(&mut tmp, serde_json::to_string_pretty(json)?.as_bytes())
            .with_context(context)?;
        tmp.persist(path)
            .map_err(|e| e.error)
            .with_context(context)?;
        Ok(MetricsFile(path.to_path_buf()))
    }

    fn remove(self) {
        let _ = std::fs::remove_file(&self.0);
    }
}

fn changed(input: &Location, pass1: u64, pass2: usize) -> anyhow::Error {
    Failure::bad_input(format!(
        "input {input} changed between the passes: pass 1 read {pass1} rows, pass 2 found {pass2} or more; nothing was written, run the job again"
    ))
    .into()
}

/// kanon's provenance for the release's key-value metadata. Deterministic:
/// no times, no host names, no paths.
fn provenance(
    spec: &JobSpec,
    result: &kanon_engine::Anonymization,
    rows_in: u64,
    fingerprint: Option<&str>,
) -> Vec<(String, String)> {
    let r = &result.report;
    let mut out = vec![
        ("kanon.version".into(), env!("CARGO_PKG_VERSION").into()),
        ("kanon.algorithm".into(), result.algorithm.clone()),
        (
            "kanon.algorithm.params".into(),
            serde_json::to_string(&spec.algorithm).unwrap_or_default(),
        ),
        (
            "kanon.privacy".into(),
            serde_json::to_string(&spec.privacy).unwrap_or_default(),
        ),
        ("kanon.seed".into(), spec.algorithm.seed.to_string()),
        ("kanon.k_achieved".into(), r.smallest_class.to_string()),
        ("kanon.rows_in".into(), rows_in.to_string()),
        (
            "kanon.rows_suppressed".into(),
            r.suppressed_rows.to_string(),
        ),
        ("kanon.ncp".into(), format!("{:.6}", r.ncp)),
        ("kanon.granularity".into(), format!("{:.6}", r.granularity)),
        (
            "kanon.quasi_identifiers".into(),
            spec.quasi_identifiers()
                .map(|a| a.name.as_str())
                .collect::<Vec<_>>()
                .join(","),
        ),
        (
            "kanon.sensitive".into(),
            spec.sensitive()
                .map(|a| a.name.as_str())
                .collect::<Vec<_>>()
                .join(","),
        ),
    ];
    // l achieved per sensitive column (distinct and entropy l-diversity).
    for d in &r.sensitive {
        out.push((
            format!("kanon.l_achieved.{}", d.name),
            format!(
                "{{\"distinct_l\":{},\"entropy_l\":{:.6}}}",
                d.distinct_l, d.entropy_l
            ),
        ));
    }
    if let Some(f) = fingerprint {
        out.push(("kanon.input.fingerprint".into(), f.to_string()));
    }
    out
}
