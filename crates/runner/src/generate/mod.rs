//! `kanon generate`: Adult-like test data at any scale.
//!
//! `kanon generate --like adult --rows N --seed S --extra-columns C OUTPUT`
//! writes a Parquet file with Adult's nine columns (the eight
//! quasi-identifiers and the salary class, same names and types) followed by
//! `C` extra columns `extra_0 ..`.
//!
//! # How rows are drawn
//! The bundled Adult table (`data/adult/adult.parquet`, 30,162 records) is
//! embedded in the binary, so the command works from any directory.
//! 1. Each row starts as a copy of a uniformly drawn Adult record: the joint
//!    distribution of the attributes, and with it the class structure, is
//!    Adult's.
//! 2. Each attribute of the row (salary class included) is, with probability
//!    `--noise` (default 0.02), replaced by the same attribute of another
//!    uniformly drawn record, i.e. redrawn from its marginal distribution.
//! 3. Age then moves by a uniform integer in `-2..=2`, clamped to Adult's
//!    range (17..=90).
//!
//! Without steps 2 and 3 a large file would only repeat Adult's 18,109
//! distinct QI tuples; with them it has a long tail of rare tuples, as a real
//! population of that size would, while keeping Adult's correlations. Every
//! categorical value is one of Adult's, so the bundled hierarchies cover it.
//!
//! Extra column `extra_i` has type `[int64, float64, string, timestamp(us,
//! UTC)][i % 4]`; string columns alternate between low cardinality
//! (`cat_000`..`cat_999`, for even `i / 4`) and high cardinality (16 hex
//! digits); the share of nulls is `[0, 1 %, 10 %][i % 3]`.
//!
//! # Determinism
//! Rows are made in fixed chunks of [`CHUNK_ROWS`]; each chunk draws from its
//! own ChaCha8 stream per column group, keyed by (seed, column, chunk index).
//! The file is therefore byte-identical for the same arguments whatever the
//! number of threads, and the Adult columns do not depend on `--extra-columns`.
//!
//! # Memory and speed
//! Chunks are generated in parallel (rayon) while the previous window of
//! chunks is encoded, with the columns of each chunk encoded in parallel
//! into the current row group. Memory is one row group's encoded pages plus
//! two windows of chunks, whatever `--rows` is.
//!
//! # Atomicity
//! The file is written under a temporary name in the destination directory
//! and renamed into place once complete and synced; an existing file is kept
//! unless `--overwrite` is given.
//!
//! # Layout
//! The command (arguments, checks, the atomic write) is here; the model of
//! the rows (chunk assembly) is in `model`, the embedded table and the
//! drawing of its columns in `sampling`, the extra columns in `extras`, the
//! keyed random streams in `draws`, and the parallel Parquet encoding in
//! `writer`.

use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Instant;

use anyhow::{bail, ensure, Context, Result};
use clap::{Args, ValueEnum};
use parquet::file::metadata::KeyValue;

mod draws;
mod extras;
mod model;
mod sampling;
#[cfg(test)]
mod tests;
mod writer;

use model::Model;
use writer::write;

/// Rows per generated chunk: the unit of randomness (one stream per chunk)
/// and of parallel work. Fixed, so that the output does not depend on the
/// thread count or the row-group size.
pub const CHUNK_ROWS: usize = 65_536;

/// Largest accepted `--extra-columns`.
const MAX_EXTRA_COLUMNS: usize = 10_000;

/// Arguments of `kanon generate`.
#[derive(Debug, Args)]
pub struct GenerateArgs {
    /// The table whose distribution the rows follow.
    #[arg(long, value_enum, default_value_t = Like::Adult)]
    like: Like,
    /// Number of rows to write.
    #[arg(long)]
    rows: u64,
    /// Seed: the same arguments give a byte-identical file.
    #[arg(long, default_value_t = 1)]
    seed: u64,
    /// Number of extra non-QI columns `extra_0 ..` (int64, float64, string,
    /// timestamp in turn, some with nulls).
    #[arg(long, default_value_t = 0)]
    extra_columns: usize,
    /// Probability that an attribute of a row is redrawn from its marginal
    /// distribution instead of copied from the sampled Adult record (0..=1).
    #[arg(long, default_value_t = 0.02)]
    noise: f64,
    /// Rows per Parquet row group.
    #[arg(long, default_value_t = 1 << 20)]
    row_group_rows: usize,
    /// Replace OUTPUT if it exists.
    #[arg(long)]
    overwrite: bool,
    /// The Parquet file to write.
    output: PathBuf,
}

/// Tables `kanon generate` can imitate.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum Like {
    /// The bundled UCI Adult table (8 QIs and the salary class).
    Adult,
}

impl Like {
    /// The name used on the command line.
    fn name(self) -> &'static str {
        match self {
            Like::Adult => "adult",
        }
    }
}

/// Runs `kanon generate`.
pub fn run(args: &GenerateArgs, quiet: bool) -> Result<ExitCode> {
    let start = Instant::now();
    ensure!(
        args.rows >= 1,
        "--rows must be at least 1 (got {})",
        args.rows
    );
    ensure!(
        args.row_group_rows >= 1,
        "--row-group-rows must be at least 1 (got {})",
        args.row_group_rows
    );
    ensure!(
        args.extra_columns <= MAX_EXTRA_COLUMNS,
        "--extra-columns must be at most {MAX_EXTRA_COLUMNS} (got {})",
        args.extra_columns
    );
    ensure!(
        (0.0..=1.0).contains(&args.noise),
        "--noise is a probability and must be within 0..=1 (got {})",
        args.noise
    );
    let dest = &args.output;
    if dest.is_dir() {
        bail!(
            "output {} is a directory; give a file name such as {}",
            dest.display(),
            dest.join("generated.parquet").display()
        );
    }
    if dest.exists() && !args.overwrite {
        bail!(
            "output {} already exists; pass --overwrite to replace it or choose another OUTPUT",
            dest.display()
        );
    }
    let model = Model::new(args.like, args.seed, args.noise, args.extra_columns)?;
    let dir = match dest.parent() {
        Some(d) if !d.as_os_str().is_empty() => d.to_path_buf(),
        _ => PathBuf::from("."),
    };
    std::fs::create_dir_all(&dir)
        .with_context(|| format!("cannot create output directory {}", dir.display()))?;
    let tmp = tempfile::Builder::new()
        .prefix(".kanon-generate-")
        .suffix(".parquet.tmp")
        .tempfile_in(&dir)
        .with_context(|| format!("cannot create a temporary file in {}", dir.display()))?;
    let file = tmp.as_file().try_clone()?;
    let metadata = vec![
        KeyValue::new(
            "kanon.version".into(),
            env!("CARGO_PKG_VERSION").to_string(),
        ),
        KeyValue::new(
            "kanon.generate".into(),
            serde_json::json!({
                "like": args.like.name(),
                "rows": args.rows,
                "seed": args.seed,
                "extra_columns": args.extra_columns,
                "noise": args.noise,
                "row_group_rows": args.row_group_rows,
            })
            .to_string(),
        ),
    ];
    let row_groups = write(&model, args.rows, args.row_group_rows, file, metadata)
        .with_context(|| format!("cannot write {}", dest.display()))?;
    tmp.as_file()
        .sync_all()
        .with_context(|| format!("cannot sync {}", tmp.path().display()))?;
    if args.overwrite {
        tmp.persist(dest).map_err(|e| e.error)
    } else {
        tmp.persist_noclobber(dest).map_err(|e| e.error)
    }
    .with_context(|| {
        format!(
            "cannot move the generated file into place at {}",
            dest.display()
        )
    })?;
    if !quiet {
        let bytes = std::fs::metadata(dest).map(|m| m.len()).unwrap_or(0);
        outln!(
            "kanon generate: {} rows like {} (seed {}, {} extra columns) -> {} ({:.1} MB, {} row groups) in {:.2} s",
            args.rows,
            args.like.name(),
            args.seed,
            args.extra_columns,
            dest.display(),
            bytes as f64 / 1e6,
            row_groups,
            start.elapsed().as_secs_f64()
        );
    }
    Ok(ExitCode::SUCCESS)
}
