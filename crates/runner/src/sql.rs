//! `kanon sql`: run a SQL query over Parquet and CSV tables in a DataFusion
//! session with kanon's `anonymize(...)` and `kanon_risk(...)` registered;
//! print the result as a table or write it to Parquet atomically.
//!
//! Tables are local files (or directories of Parquet files) for now; `s3://`
//! URLs join when the runner's object-store support is wired in.

use std::path::{Path, PathBuf};
use std::process::ExitCode;

use anyhow::{bail, Context, Result};
use clap::Args;
use datafusion::arrow::util::pretty::pretty_format_batches;
use datafusion::error::DataFusionError;
use datafusion::prelude::{CsvReadOptions, ParquetReadOptions, SessionContext};
use futures::StreamExt;
use kanon_engine::spec::InputSpec;

use crate::{exit, io};

/// Arguments of `kanon sql`.
#[derive(Debug, Args)]
pub struct SqlArgs {
    /// The query, e.g. "SELECT * FROM anonymize('adult', 'config = \"configs/adult.toml\"')".
    pub query: String,
    /// Register a table as NAME=PATH: a Parquet or CSV file (by extension)
    /// or a directory of Parquet files. Repeat for more tables.
    #[arg(long = "table", short = 't', value_name = "NAME=PATH")]
    pub tables: Vec<String>,
    /// Field delimiter of CSV tables (one character), default `,`.
    #[arg(long)]
    pub delimiter: Option<String>,
    /// CSV tables have no header row.
    #[arg(long)]
    pub no_header: bool,
    /// Write the result to this Parquet file (atomically) instead of printing it.
    #[arg(long, short = 'o')]
    pub output: Option<PathBuf>,
    /// Replace an existing --output.
    #[arg(long)]
    pub overwrite: bool,
    /// Print at most this many rows (0: all).
    #[arg(long, default_value_t = 100)]
    pub max_rows: usize,
}

/// A `--table NAME=PATH`.
#[derive(Debug, Clone, PartialEq, Eq)]
struct TableArg {
    name: String,
    path: PathBuf,
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
    if path.contains("://") {
        bail!(
            "--table {arg}: URLs are not supported by `kanon sql` yet (object-store support comes with the runner's storage layer); copy the file to local disk"
        );
    }
    Ok(TableArg {
        name: name.to_string(),
        path: PathBuf::from(path),
    })
}

async fn register(ctx: &SessionContext, t: &TableArg, args: &SqlArgs) -> Result<()> {
    let path = t
        .path
        .to_str()
        .with_context(|| format!("--table {}: the path is not UTF-8", t.name))?;
    if !t.path.exists() {
        bail!(
            "--table {}={}: no such file or directory",
            t.name,
            t.path.display()
        );
    }
    let format = if t.path.is_dir() {
        io::Format::Parquet
    } else {
        io::format_of(&t.path, &InputSpec::default())
            .with_context(|| format!("--table {}", t.name))?
    };
    match format {
        io::Format::Parquet => {
            ctx.register_parquet(&t.name, path, ParquetReadOptions::default())
                .await
        }
        io::Format::Csv => {
            let delimiter = match args.delimiter.as_deref() {
                None => b',',
                Some("\\t") | Some("tab") => b'\t',
                Some(d) if d.len() == 1 => d.as_bytes()[0],
                Some(d) => bail!("--delimiter `{d}` must be one character, e.g. --delimiter ';'"),
            };
            let ext = t
                .path
                .extension()
                .map(|e| format!(".{}", e.to_string_lossy()))
                .unwrap_or_default();
            let options = CsvReadOptions::new()
                .delimiter(delimiter)
                .has_header(!args.no_header)
                .file_extension(&ext);
            ctx.register_csv(&t.name, path, options).await
        }
    }
    .with_context(|| format!("cannot register table {} from {}", t.name, t.path.display()))
}

/// The exit code of a failed query: a plan error is the user's (2), an
/// unsatisfiable model is 3, a memory limit or I/O failure 4, the rest 2.
fn code_of(e: &DataFusionError) -> u8 {
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

/// Runs `kanon sql`.
pub fn run(args: &SqlArgs) -> Result<ExitCode> {
    let tables = args
        .tables
        .iter()
        .map(|t| parse_table(t))
        .collect::<Result<Vec<_>>>()?;
    if let Some(out) = &args.output {
        if out.exists() && !args.overwrite {
            bail!(
                "output {} already exists; pass --overwrite to replace it or choose another --output",
                out.display()
            );
        }
    }
    let rt = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .context("cannot start the query runtime")?;
    let ctx = SessionContext::new();
    kanon_datafusion::register(&ctx).context("cannot register kanon's SQL functions")?;
    for t in &tables {
        rt.block_on(register(&ctx, t, args))?;
    }
    let planned = rt.block_on(async {
        let df = ctx.sql(&args.query).await?;
        df.execute_stream().await
    });
    let mut stream = match planned {
        Ok(s) => s,
        Err(e) => return Ok(fail(&e)),
    };
    let schema = stream.schema();
    match &args.output {
        Some(out) => {
            let mut failure: Option<DataFusionError> = None;
            let batches = std::iter::from_fn(|| match rt.block_on(stream.next()) {
                Some(Ok(b)) => Some(Ok(b)),
                Some(Err(e)) => {
                    let msg = format!("{e}");
                    failure = Some(e);
                    Some(Err(anyhow::anyhow!(msg)))
                }
                None => None,
            });
            let written = write(out, schema, batches, args.overwrite);
            if let Some(e) = failure {
                return Ok(fail(&e));
            }
            let rows = written?;
            println!("kanon sql: {rows} rows -> {}", out.display());
        }
        None => {
            let mut shown = Vec::new();
            let (mut rows, mut kept) = (0usize, 0usize);
            while let Some(b) = rt.block_on(stream.next()) {
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
                println!("{}", pretty_format_batches(&shown)?);
            }
            if kept < rows {
                println!("({rows} rows, {kept} shown; --max-rows 0 shows all)");
            } else {
                println!("({rows} rows)");
            }
        }
    }
    Ok(ExitCode::SUCCESS)
}

fn write(
    out: &Path,
    schema: datafusion::arrow::datatypes::SchemaRef,
    batches: impl Iterator<Item = Result<datafusion::arrow::array::RecordBatch>>,
    overwrite: bool,
) -> Result<u64> {
    // Not the query text: its literals may name people (`WHERE name <> ...`)
    // and the file is what gets published.
    let metadata = vec![
        (
            "kanon.version".to_string(),
            env!("CARGO_PKG_VERSION").to_string(),
        ),
        ("kanon.command".to_string(), "sql".to_string()),
    ];
    io::write_parquet_atomic(out, schema, batches, metadata, overwrite)
}

fn fail(e: &DataFusionError) -> ExitCode {
    eprintln!("error: {e}");
    ExitCode::from(code_of(e))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn table_arguments() {
        let t = parse_table("adult=data/adult/adult.parquet").unwrap();
        assert_eq!(t.name, "adult");
        assert_eq!(t.path, PathBuf::from("data/adult/adult.parquet"));
        for bad in ["adult", "=x.csv", "1a=x.csv", "a-b=x.csv"] {
            assert!(parse_table(bad).is_err(), "{bad}");
        }
        let e = parse_table("a=s3://bucket/a.parquet")
            .unwrap_err()
            .to_string();
        assert!(e.contains("URLs are not supported"), "{e}");
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
