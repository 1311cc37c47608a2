//! `kanon sql`: run a SQL query over Parquet and CSV tables (local files,
//! directories, or `s3://` objects and prefixes) in a DataFusion session
//! with kanon's `anonymize(...)` and `kanon_risk(...)` registered; print
//! the result as a table, or write it as a Parquet release committed
//! atomically, locally or on S3, through the same writer as
//! `kanon anonymize`.

use std::process::ExitCode;
use std::sync::Arc;

use anyhow::{bail, Context, Result};
use clap::Args;
use datafusion::arrow::util::pretty::pretty_format_batches;
use datafusion::error::DataFusionError;
use datafusion::execution::object_store::ObjectStoreUrl;
use datafusion::prelude::{CsvReadOptions, ParquetReadOptions, SessionContext};
use futures::StreamExt;
use kanon_engine::spec::StorageSpec;

use crate::config::{apply_overrides, env_overrides, parse_set};
use crate::dataset::Format;
use crate::exit::{self, Failure};
use crate::ops::{check_interrupt, Ui};
use crate::release::{parse_size, ReleaseOptions, ReleaseWriter};
use crate::storage::{Location, Storage};

/// Arguments of `kanon sql`.
#[derive(Debug, Args)]
pub struct SqlArgs {
    /// The query, e.g. "SELECT * FROM anonymize('adult', 'config = \"configs/adult.toml\"')".
    pub query: String,
    /// Register a table as NAME=PATH: a Parquet or CSV file (by extension),
    /// a directory of Parquet files, a Delta table (a directory or prefix
    /// with a `_delta_log`, at its latest version; `INSERT INTO` it commits),
    /// or an s3:// object or prefix (a prefix ends with `/`). Repeat for
    /// more tables.
    #[arg(long = "table", short = 't', value_name = "NAME=PATH")]
    pub tables: Vec<String>,
    /// Field delimiter of CSV tables (one character), default `,`.
    #[arg(long)]
    pub delimiter: Option<String>,
    /// CSV tables have no header row.
    #[arg(long)]
    pub no_header: bool,
    /// Write the result as Parquet to this file or s3:// object
    /// (atomically) instead of printing it.
    #[arg(long, short = 'o')]
    pub output: Option<String>,
    /// Replace an existing --output.
    #[arg(long)]
    pub overwrite: bool,
    /// Split --output into files of about this size (e.g. 256MB); --output
    /// then names a directory or prefix.
    #[arg(long)]
    pub max_file_size: Option<String>,
    /// Storage settings as in a job file's `[storage]`, e.g.
    /// `--set storage.endpoint=http://127.0.0.1:9000` (also `KANON_STORAGE_*`).
    #[arg(long = "set", value_name = "storage.KEY=VALUE")]
    pub set: Vec<String>,
    /// Let the options of anonymize() and kanon_risk() read files (`config`,
    /// hierarchy files) under DIR; repeat for more. Default: the current
    /// directory only.
    #[arg(long = "allow-dir", value_name = "DIR")]
    pub allow_dirs: Vec<std::path::PathBuf>,
    /// Print at most this many rows (0: all).
    #[arg(long, default_value_t = 100)]
    pub max_rows: usize,
    #[command(flatten)]
    pub workers: crate::cluster::WorkersArg,
}

/// A `--table NAME=PATH`.
#[derive(Debug, Clone, PartialEq, Eq)]
struct TableArg {
    name: String,
    location: Location,
}

fn parse_table(arg: &str) -> Result<TableArg> {
    let Some((name, path)) = arg.split_once('=') else {
        bail!("--table {arg}: expected NAME=PATH, e.g. --table adult=data/adult/adult.parquet");
    };
    let name = name.trim();
    if name.is_empty()
        || !name.chars().all(|c| c.is_ascii_alphanumeric() || c == '_')
        || name.starts_with(|c: char| c.is_ascii_digit())
    {
        bail!("--table {arg}: the name `{name}` must be letters, digits and `_`, not starting with a digit");
    }
    let location = Location::parse(path).with_context(|| format!("--table {name}"))?;
    Ok(TableArg {
        name: name.to_string(),
        location,
    })
}

/// The `[storage]` settings from `KANON_STORAGE_*` and `--set storage.*`.
fn storage_spec(args: &SqlArgs) -> Result<StorageSpec> {
    let mut overrides: Vec<_> = env_overrides(std::env::vars())
        .0
        .into_iter()
        .filter(|o| o.key.starts_with("storage."))
        .collect();
    for s in &args.set {
        let o = parse_set(s)?;
        if !o.key.starts_with("storage.") {
            return Err(Failure::bad_input(format!(
                "--set `{s}`: `kanon sql` takes only storage.* settings; the privacy settings go into anonymize()'s options"
            ))
            .into());
        }
        overrides.push(o);
    }
    let mut doc = toml::Table::new();
    apply_overrides(&mut doc, &overrides)?;
    let storage = doc
        .remove("storage")
        .unwrap_or_else(|| toml::Value::Table(toml::Table::new()));
    storage.try_into().map_err(|e: toml::de::Error| {
        Failure::bad_input(format!("storage settings: {}", e.message())).into()
    })
}

async fn register(
    ctx: &SessionContext,
    storage: &Storage,
    t: &TableArg,
    args: &SqlArgs,
) -> Result<()> {
    let (url, is_dir) = match &t.location {
        Location::Local(p) => {
            if !p.exists() {
                return Err(Failure::bad_input(format!(
                    "--table {}={}: no such file or directory",
                    t.name,
                    p.display()
                ))
                .into());
            }
            let url = p
                .to_str()
                .with_context(|| format!("--table {}: the path is not UTF-8", t.name))?
                .to_string();
            (url, p.is_dir())
        }
        Location::S3 { bucket, key } => {
            let store = storage.s3(bucket)?;
            let base = ObjectStoreUrl::parse(format!("s3://{bucket}"))
                .map_err(|e| Failure::bad_input(format!("--table {}: {e}", t.name)))?;
            ctx.register_object_store(base.as_ref(), store);
            (t.location.to_string(), key.is_empty() || key.ends_with('/'))
        }
    };
    let format = if is_dir {
        Format::Parquet
    } else {
        Format::of_path(&url).ok_or_else(|| {
            Failure::bad_input(format!(
                "--table {}={url}: cannot tell the format from the extension; name a .parquet or .csv file, or a directory of Parquet files",
                t.name
            ))
        })?
    };
    match format {
        Format::Parquet => {
            ctx.register_parquet(&t.name, &url, ParquetReadOptions::default())
                .await
        }
        Format::Csv => {
            let delimiter = match args.delimiter.as_deref() {
                None => b',',
                Some("\\t") | Some("tab") => b'\t',
                Some(d) if d.len() == 1 => d.as_bytes()[0],
                Some(d) => bail!("--delimiter `{d}` must be one character, e.g. --delimiter ';'"),
            };
            let ext = std::path::Path::new(&url)
                .extension()
                .map(|e| format!(".{}", e.to_string_lossy()))
                .unwrap_or_default();
            let options = CsvReadOptions::new()
                .delimiter(delimiter)
                .has_header(!args.no_header)
                .file_extension(&ext);
            ctx.register_csv(&t.name, &url, options).await
        }
    }
    .with_context(|| format!("cannot register table {} from {url}", t.name))
}

/// Registers a Delta table (its latest version) through delta-rs's
/// provider, which also takes `INSERT INTO` (a Delta commit).
fn register_delta(ctx: &SessionContext, storage: &Storage, t: &TableArg) -> Result<()> {
    let table = crate::delta::Table::at(storage, &t.location)?;
    let dt = table.load_existing(storage, None)?;
    let provider = storage
        .block_on(async { dt.table_provider().await })
        .with_context(|| format!("cannot read Delta table {} ({})", t.name, t.location))?;
    ctx.register_table(t.name.as_str(), provider)
        .with_context(|| format!("cannot register table {}", t.name))?;
    Ok(())
}

/// The exit code of a failed query: a plan error is the user's (2), an
/// unsatisfiable model is 3, a memory limit or I/O failure 4, the rest 2.
fn code_of(e: &DataFusionError) -> u8 {
    // Sinks (a Delta table's INSERT) wrap the error of anonymize() as an
    // external error: the text still says what it was.
    let text = e.to_string();
    if text.contains("anonymize(): privacy model cannot be satisfied") {
        return exit::UNSATISFIABLE;
    }
    match e.find_root() {
        DataFusionError::ResourcesExhausted(_) | DataFusionError::IoError(_) => exit::IO,
        DataFusionError::ObjectStore(_) => exit::IO,
        DataFusionError::Execution(m) if m.contains("privacy model cannot be satisfied") => {
            exit::UNSATISFIABLE
        }
        DataFusionError::Execution(m)
            if m.contains("verification failed") || m.contains("a bug in kanon") =>
        {
            exit::INTERNAL
        }
        DataFusionError::Internal(_) => exit::INTERNAL,
        _ => exit::BAD_INPUT,
    }
}

/// Where a `COPY ... TO` writes, as a location (local paths with or
/// without `file://`, S3 URLs); `None` for other plans or schemes.
fn copy_location(plan: &datafusion::logical_expr::LogicalPlan) -> Option<Location> {
    let datafusion::logical_expr::LogicalPlan::Copy(copy) = plan else {
        return None;
    };
    let url = copy.output_url.as_str();
    match url.strip_prefix("file://") {
        Some(p) => Some(Location::Local(p.into())),
        None => Location::parse(url).ok(),
    }
}

/// The local file or directory a `COPY ... TO` writes, when it did not
/// exist before the query: removed unless the query succeeds, since
/// DataFusion's `COPY` writes in place and leaves a partial (or zero-row)
/// file when the query fails, e.g. when `anonymize()` refuses.
struct CopyTarget {
    path: Option<std::path::PathBuf>,
}

impl CopyTarget {
    fn of(plan: &datafusion::logical_expr::LogicalPlan) -> Option<CopyTarget> {
        let datafusion::logical_expr::LogicalPlan::Copy(copy) = plan else {
            return None;
        };
        let url = copy.output_url.as_str();
        let path = match url.strip_prefix("file://") {
            Some(p) => p,
            None if url.contains("://") => return None,
            None => url,
        };
        let path = std::path::PathBuf::from(path);
        (!path.exists()).then_some(CopyTarget { path: Some(path) })
    }

    fn keep(&mut self) {
        self.path = None;
    }
}

impl Drop for CopyTarget {
    fn drop(&mut self) {
        if let Some(p) = self.path.take() {
            let _ = match p.is_dir() {
                true => std::fs::remove_dir_all(&p),
                false => std::fs::remove_file(&p),
            };
        }
    }
}

/// Runs `kanon sql`.
pub fn run(args: &SqlArgs, ui: &Ui) -> Result<ExitCode> {
    let tables = args
        .tables
        .iter()
        .map(|t| parse_table(t))
        .collect::<Result<Vec<_>>>()?;
    let storage = Storage::new(&storage_spec(args)?);
    let output = args.output.as_deref().map(Location::parse).transpose()?;
    let max_file_bytes = args
        .max_file_size
        .as_deref()
        .map(|s| parse_size("--max-file-size", s))
        .transpose()?;
    if let Some(out) = &output {
        if let Some(t) = tables.iter().find(|t| out.overlaps(&t.location)) {
            return Err(Failure::bad_input(format!(
                "output {out} is, contains or lies inside --table {}={}: writing it would overwrite what the query reads; choose another --output",
                t.name, t.location
            ))
            .into());
        }
        crate::release::check_destination(&storage, out, max_file_bytes.is_some(), args.overwrite)?;
        if !args.overwrite {
            storage.check_conditional_writes(out)?;
        }
    }
    let rt = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .context("cannot start the query runtime")?;
    let mut config = datafusion::prelude::SessionConfig::new();
    if let Some(executor) = args.workers.executor()? {
        config = config.with_extension(Arc::new(kanon_datafusion::BlockExecutors::new(executor)));
    }
    let ctx = SessionContext::new_with_config(config);
    let options = match args.allow_dirs.as_slice() {
        [] => kanon_datafusion::Options::default(),
        dirs => kanon_datafusion::Options::allowed_dirs(dirs.iter().cloned()),
    };
    kanon_datafusion::register_with(&ctx, options)
        .context("cannot register kanon's SQL functions (check --allow-dir)")?;
    for t in &tables {
        if crate::dataset::is_delta_table(&storage, &t.location)? {
            register_delta(&ctx, &storage, t)?;
        } else {
            rt.block_on(register(&ctx, &storage, t, args))?;
        }
    }
    let df = match rt.block_on(ctx.sql(&args.query)) {
        Ok(df) => df,
        Err(e) => return Ok(fail(&e)),
    };
    // DataFusion's COPY truncates its target before the query runs: a
    // target that is a table of the query would lose the input.
    if let Some(target) = copy_location(df.logical_plan()) {
        if let Some(t) = tables.iter().find(|t| target.overlaps(&t.location)) {
            return Err(Failure::bad_input(format!(
                "COPY ... TO {target} is, contains or lies inside --table {}={}: the query would overwrite the table it reads; copy to another path",
                t.name, t.location
            ))
            .into());
        }
    }
    let mut copy_target = CopyTarget::of(df.logical_plan());
    let planned = rt.block_on(df.execute_stream());
    let mut stream = match planned {
        Ok(s) => s,
        Err(e) => return Ok(fail(&e)),
    };
    let schema = stream.schema();
    match output {
        Some(out) => {
            let options = ReleaseOptions {
                max_file_bytes,
                row_group_rows: 1 << 20,
                zstd_level: 3,
                overwrite: args.overwrite,
                metadata: provenance(),
                direct: None,
            };
            let mut writer = ReleaseWriter::create(&storage, out.clone(), schema, options)?;
            while let Some(b) = rt.block_on(stream.next()) {
                check_interrupt()?;
                match b {
                    Ok(b) => writer.write(&b)?,
                    Err(e) => return Ok(fail(&e)),
                }
            }
            let rows = writer.rows();
            writer.commit()?;
            if !ui.quiet {
                outln!("kanon sql: {rows} rows -> {out}");
            }
        }
        None => {
            let mut shown = Vec::new();
            let (mut rows, mut kept) = (0usize, 0usize);
            while let Some(b) = rt.block_on(stream.next()) {
                check_interrupt()?;
                let b = match b {
                    Ok(b) => b,
                    Err(e) => return Ok(fail(&e)),
                };
                rows += b.num_rows();
                if args.max_rows == 0 || kept < args.max_rows {
                    let take = if args.max_rows == 0 {
                        b.num_rows()
                    } else {
                        b.num_rows().min(args.max_rows - kept)
                    };
                    kept += take;
                    shown.push(b.slice(0, take));
                }
            }
            if !schema.fields().is_empty() {
                outln!("{}", pretty_format_batches(&shown)?);
            }
            if kept < rows {
                outln!("({rows} rows, {kept} shown; --max-rows 0 shows all)");
            } else {
                outln!("({rows} rows)");
            }
        }
    }
    if let Some(t) = copy_target.as_mut() {
        t.keep();
    }
    Ok(ExitCode::SUCCESS)
}

/// The release's key-value metadata. Not the query text: its literals may
/// name people (`WHERE name <> ...`) and the file is what gets published.
fn provenance() -> Vec<(String, String)> {
    vec![
        (
            "kanon.version".to_string(),
            env!("CARGO_PKG_VERSION").to_string(),
        ),
        ("kanon.command".to_string(), "sql".to_string()),
    ]
}

fn fail(e: &DataFusionError) -> ExitCode {
    errln!("error: {e}");
    ExitCode::from(code_of(e))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn table_arguments() {
        let t = parse_table("adult=data/adult/adult.parquet").unwrap();
        assert_eq!(t.name, "adult");
        assert_eq!(
            t.location,
            Location::Local("data/adult/adult.parquet".into())
        );
        for bad in ["adult", "=x.csv", "1a=x.csv", "a-b=x.csv"] {
            assert!(parse_table(bad).is_err(), "{bad}");
        }
        let t = parse_table("a=s3://bucket/dir/a.parquet").unwrap();
        assert_eq!(
            t.location,
            Location::S3 {
                bucket: "bucket".into(),
                key: "dir/a.parquet".into()
            }
        );
        assert!(parse_table("a=gs://bucket/a.parquet").is_err());
    }

    #[test]
    fn exit_codes_by_fault() {
        assert_eq!(code_of(&DataFusionError::Plan("x".into())), exit::BAD_INPUT);
        assert_eq!(
            code_of(&DataFusionError::Execution(
                "anonymize(): privacy model cannot be satisfied: k".into()
            )),
            exit::UNSATISFIABLE
        );
        assert_eq!(
            code_of(&DataFusionError::ResourcesExhausted("x".into())),
            exit::IO
        );
    }
}
