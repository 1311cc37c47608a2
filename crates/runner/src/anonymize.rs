//! `kanon anonymize`: read, encode, anonymise, verify, recode, verify the
//! recoded release again by its labels, and only then write it.

use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Instant;

use anyhow::{bail, Context, Result};
use clap::Args;
use kanon_engine::encode::Encoder;
use kanon_engine::privacy::Privacy;
use kanon_engine::recode::Recoder;
use kanon_engine::verify::verify_release;

use crate::config::Job;
use crate::{io, JobArgs};

/// Arguments of `kanon anonymize`.
#[derive(Debug, Args)]
pub struct AnonymizeArgs {
    #[command(flatten)]
    job: JobArgs,
    /// Read this file instead of `input.path`.
    #[arg(long)]
    input: Option<PathBuf>,
    /// Write the release here instead of `output.path`.
    #[arg(long, short = 'o')]
    output: Option<PathBuf>,
    /// Replace an existing release.
    #[arg(long)]
    overwrite: bool,
    /// Also write every metric, the verification result and the timings as JSON.
    #[arg(long)]
    metrics_json: Option<PathBuf>,
    /// Print nothing on success.
    #[arg(long, short = 'q')]
    quiet: bool,
}

/// Runs `kanon anonymize`.
pub fn run(args: &AnonymizeArgs) -> Result<ExitCode> {
    let start = Instant::now();
    let job = Job::load(&args.job)?;
    let spec = &job.spec;
    let input = job.input(args.input.as_deref())?;
    let output = match (&args.output, spec.output.path.as_deref()) {
        (Some(o), _) => o.clone(),
        (None, Some(o)) => job.resolve_output(o),
        (None, None) => bail!(
            "no output: set `output.path` in {} or pass --output",
            job.path.display()
        ),
    };
    if output.exists() && !args.overwrite {
        bail!(
            "output {} already exists; pass --overwrite to replace it or choose another --output",
            output.display()
        );
    }
    let t = Instant::now();
    let table = io::read(&input, &spec.input)?;
    let read_s = t.elapsed().as_secs_f64();
    let rows_in = table.num_rows();
    if rows_in == 0 {
        bail!(
            "input {} has no rows: there is nothing to anonymise",
            input.display()
        );
    }
    let t = Instant::now();
    let qi = (|| {
        let mut enc = Encoder::try_new(spec, &job.hierarchies, &table.schema)?;
        for b in &table.batches {
            enc.push(b)?;
        }
        enc.finish()
    })()
    .with_context(|| {
        format!(
            "input {} does not fit job {}",
            input.display(),
            job.path.display()
        )
    })?;
    let encode_s = t.elapsed().as_secs_f64();
    let privacy = Privacy::from_spec(spec)?;
    let result =
        kanon_engine::pipeline::anonymize_with(spec, &qi, &privacy).with_context(|| {
            format!(
                "anonymising {} with {}",
                input.display(),
                spec.algorithm.name
            )
        })?;
    let t = Instant::now();
    let recoder = Recoder::new(spec, &qi, &result.partition);
    let out_schema = recoder.output_schema(&table.schema);
    let mut offset = 0;
    let mut released = Vec::with_capacity(table.batches.len());
    for b in &table.batches {
        released.push(recoder.recode(b, offset)?);
        offset += b.num_rows();
    }
    let release_check = verify_release(spec, &released, &privacy)
        .context("the recoded release failed verification; nothing was written")?;
    if release_check.published_rows != result.verified.published_rows {
        bail!(kanon_engine::Error::Internal(format!(
            "the recoded release holds {} rows but the partition publishes {}",
            release_check.published_rows, result.verified.published_rows
        )));
    }
    let recode_s = t.elapsed().as_secs_f64();
    let t = Instant::now();
    let metadata = provenance(spec, &result, rows_in);
    io::write_parquet_atomic(
        &output,
        out_schema,
        released.into_iter().map(Ok),
        metadata,
        args.overwrite,
    )?;
    let write_s = t.elapsed().as_secs_f64();
    let total_s = start.elapsed().as_secs_f64();
    let r = &result.report;
    if let Some(path) = &args.metrics_json {
        let json = serde_json::json!({
            "input": input.display().to_string(),
            "output": output.display().to_string(),
            "algorithm": result.algorithm,
            "privacy": privacy.describe(),
            "seed": spec.algorithm.seed,
            "report": r,
            "verified": result.verified,
            "details": result.details,
            "timings_s": {
                "read": read_s, "encode": encode_s,
                "classes": result.timings.classes.as_secs_f64(),
                "algorithm": result.timings.algorithm.as_secs_f64(),
                "verify": result.timings.verify.as_secs_f64(),
                "metrics": result.timings.metrics.as_secs_f64(),
                "recode_and_verify_release": recode_s, "write": write_s, "total": total_s,
            },
        });
        std::fs::write(path, serde_json::to_string_pretty(&json)?)
            .with_context(|| format!("cannot write metrics to {}", path.display()))?;
    }
    if !args.quiet {
        println!(
            "kanon anonymize: {} -> {}",
            input.display(),
            output.display()
        );
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
        println!(
            "  time          {:.3} s (read {:.3}, encode {:.3}, algorithm {:.3}, verify {:.3}, recode {:.3}, write {:.3})",
            total_s,
            read_s,
            encode_s,
            result.timings.algorithm.as_secs_f64(),
            result.timings.verify.as_secs_f64(),
            recode_s,
            write_s
        );
    }
    Ok(ExitCode::SUCCESS)
}

/// kanon's provenance for the release's key-value metadata.
fn provenance(
    spec: &kanon_engine::spec::JobSpec,
    result: &kanon_engine::Anonymization,
    rows_in: usize,
) -> Vec<(String, String)> {
    let r = &result.report;
    vec![
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
    ]
}
