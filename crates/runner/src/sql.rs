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
use datafusion::logical_expr::LogicalPlan;
use datafusion::physical_plan::ExecutionPlan;
use datafusion::prelude::{CsvReadOptions, ParquetReadOptions, SessionContext};
use futures::StreamExt;
use kanon_datafusion::AnonymizeExec;
use kanon_engine::privacy::Privacy;
use kanon_engine::spec::StorageSpec;

use kanon_io::certificate::Certificate;
use kanon_io::config::JobFile;
use kanon_io::config::{apply_overrides, env_overrides, parse_set};
use kanon_io::dataset::Format;
use kanon_io::delta::DeltaOutput;
use kanon_io::exit::{self, Failure};
use kanon_io::ops::{check_interrupt, Ui};
use kanon_io::publish::{Published, Publisher, Target};
use kanon_io::release::{parse_size, ReleaseOptions};
use kanon_io::release_check::{Checked, ReleaseCheck};
use kanon_io::storage::{Location, Storage};

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
    /// `INSERT INTO` a Delta table that readers can already read rows of:
    /// accept that they compare its versions (each release is still checked
    /// on its own). Without it such an INSERT is refused (exit 3): kanon sql
    /// keeps no table history (`output.history` is `kanon anonymize`'s).
    #[arg(long)]
    pub unchecked_series: bool,
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
        .filter(|o| o.section() == "storage")
        .collect();
    for s in &args.set {
        let o = parse_set(s)?;
        if o.section() != "storage" {
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

/// The schema of a CSV table as `kanon anonymize` reads it: a column whose
/// sampled text a number would change (`007`, `+7`) is text, so that type
/// inference never merges values (issue 32, item 5). `None` for other
/// tables.
fn csv_schema(
    storage: &Storage,
    t: &TableArg,
    args: &SqlArgs,
) -> Result<Option<datafusion::arrow::datatypes::Schema>> {
    let is_csv = match &t.location {
        Location::Local(p) => {
            !p.is_dir() && Format::of_path(&p.to_string_lossy()) == Some(Format::Csv)
        }
        Location::S3 { key, .. } => {
            !key.ends_with('/') && Format::of_path(key) == Some(Format::Csv)
        }
    };
    if !is_csv {
        return Ok(None);
    }
    let delimiter = match args.delimiter.as_deref() {
        Some("\\t") | Some("tab") => Some("\t".to_string()),
        d => d.map(String::from),
    };
    let spec = kanon_engine::spec::InputSpec {
        format: Some("csv".into()),
        delimiter,
        header: Some(!args.no_header),
        ..Default::default()
    };
    let dataset = kanon_io::dataset::Dataset::open(storage, &t.location, &spec)
        .with_context(|| format!("--table {}", t.name))?;
    Ok(Some(dataset.schema.as_ref().clone()))
}

async fn register(
    ctx: &SessionContext,
    storage: &Storage,
    t: &TableArg,
    args: &SqlArgs,
    csv_schema: Option<&datafusion::arrow::datatypes::Schema>,
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
            let mut options = CsvReadOptions::new()
                .delimiter(delimiter)
                .has_header(!args.no_header)
                .file_extension(&ext);
            if let Some(schema) = csv_schema {
                options = options.schema(schema);
            }
            ctx.register_csv(&t.name, &url, options).await
        }
        Format::Arrow => bail!(
            "--table {}={url}: a table in memory is not a file (a bug in kanon)",
            t.name
        ),
    }
    .with_context(|| format!("cannot register table {} from {url}", t.name))
}

/// Registers a Delta table (its latest version) through delta-rs's
/// provider, which also takes `INSERT INTO` (a Delta commit).
fn register_delta(ctx: &SessionContext, storage: &Storage, t: &TableArg) -> Result<()> {
    let table = kanon_io::delta::Table::at(storage, &t.location)?;
    let dt = table.load_existing(storage, None)?;
    let provider = storage
        .block_on(async { dt.table_provider().await })
        .with_context(|| format!("cannot read Delta table {} ({})", t.name, t.location))?;
    ctx.register_table(t.name.as_str(), provider)
        .with_context(|| format!("cannot register table {}", t.name))?;
    Ok(())
}

/// The exit code of a failed query: an engine error raised by
/// anonymize() or kanon_risk() by its kind, as `kanon anonymize` maps it
/// (an unsatisfiable model is 3, a failed verification 70, ...; found
/// through the wrappers of sinks such as a Delta table's INSERT); otherwise
/// a memory limit or I/O failure is 4, a DataFusion bug 70, the rest the
/// user's (2).
fn code_of(e: &DataFusionError) -> u8 {
    if let Some(engine) = kanon_datafusion::FunctionError::find(e) {
        return exit::engine_code(engine);
    }
    match e.find_root() {
        DataFusionError::ResourcesExhausted(_) | DataFusionError::IoError(_) => exit::IO,
        DataFusionError::ObjectStore(_) => exit::IO,
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
        kanon_io::release::check_destination(
            &storage,
            out,
            max_file_bytes.is_some(),
            args.overwrite,
        )?;
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
    let mut delta_tables = Vec::new();
    for t in &tables {
        if kanon_io::dataset::is_delta_table(&storage, &t.location)? {
            register_delta(&ctx, &storage, t)?;
            delta_tables.push(t);
        } else {
            let schema = csv_schema(&storage, t, args)?;
            rt.block_on(register(&ctx, &storage, t, args, schema.as_ref()))?;
        }
    }
    let df = match rt.block_on(ctx.sql(&args.query)) {
        Ok(df) => df,
        Err(e) => return Ok(fail(&e)),
    };
    // A write into a registered table is kanon's to publish (INSERT INTO a
    // Delta table), or refused: DataFusion's and delta-rs's sinks would
    // commit it with no verification of the table's rows and no
    // certificate.
    if let LogicalPlan::Dml(dml) = df.logical_plan() {
        let table = inserted_delta_table(dml, &delta_tables)?;
        if output.is_some() {
            return Err(Failure::bad_input(
                "--output and INSERT INTO both say where the result goes: drop --output",
            )
            .into());
        }
        let input = dml.input.as_ref().clone();
        return insert_into(&rt, &ctx, input, table, &storage, max_file_bytes, args, ui);
    }
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
    match output {
        Some(out) => {
            let plan = df.logical_plan().clone();
            write_output(&rt, &ctx, plan, out, &storage, max_file_bytes, args, ui)
        }
        None => print_result(&rt, df, args),
    }
}

/// `INSERT INTO` a registered Delta table: the query's rows published
/// through the [`Publisher`] as an append, verified and certified.
#[allow(clippy::too_many_arguments)]
fn insert_into(
    rt: &tokio::runtime::Runtime,
    ctx: &SessionContext,
    input: LogicalPlan,
    table: &TableArg,
    storage: &Storage,
    max_file_bytes: Option<u64>,
    args: &SqlArgs,
    ui: &Ui,
) -> Result<ExitCode> {
    let delta = DeltaOutput {
        location: table.location.clone(),
        mode: kanon_io::delta::Mode::Append,
        partition: Default::default(),
    };
    storage.check_conditional_writes(&table.location)?;
    let target = Target::Delta(delta, kanon_io::delta::Table::at(storage, &table.location)?);
    let options = ReleaseOptions {
        max_file_bytes,
        row_group_rows: 1 << 20,
        zstd_level: 3,
        overwrite: false,
        metadata: provenance(),
        direct: Some(kanon_io::delta::run_token()),
    };
    let what = format!("INSERT INTO {}", table.name);
    let published = publish_query(
        rt,
        ctx,
        input,
        storage,
        target,
        options,
        &what,
        args.unchecked_series,
        ui,
    )?;
    let (rows, version) = match published {
        Ok((rows, Published::Committed { delta_version, .. })) => (rows, delta_version),
        Ok((_, Published::AlreadyReleased { version })) => (0, Some(version)),
        Err(code) => return Ok(code),
    };
    if !ui.quiet {
        outln!(
            "kanon sql: {rows} rows -> Delta table {} version {} (append, with its certificate)",
            table.location,
            version.unwrap_or(-1)
        );
    }
    Ok(ExitCode::SUCCESS)
}

/// `--output`: the query's rows published through the [`Publisher`] as a
/// Parquet release with its manifest and certificate.
#[allow(clippy::too_many_arguments)]
fn write_output(
    rt: &tokio::runtime::Runtime,
    ctx: &SessionContext,
    plan: LogicalPlan,
    out: Location,
    storage: &Storage,
    max_file_bytes: Option<u64>,
    args: &SqlArgs,
    ui: &Ui,
) -> Result<ExitCode> {
    let options = ReleaseOptions {
        max_file_bytes,
        row_group_rows: 1 << 20,
        zstd_level: 3,
        overwrite: args.overwrite,
        metadata: provenance(),
        direct: None,
    };
    let published = publish_query(
        rt,
        ctx,
        plan,
        storage,
        Target::Parquet(out.clone()),
        options,
        "--output",
        false,
        ui,
    )?;
    let rows = match published {
        Ok((rows, _)) => rows,
        Err(code) => return Ok(code),
    };
    if !ui.quiet {
        outln!("kanon sql: {rows} rows -> {out} (with its manifest and certificate)");
    }
    Ok(ExitCode::SUCCESS)
}

/// A query without `--output`: its result printed (at most `--max-rows`
/// rows), and a `COPY ... TO` target kept.
fn print_result(
    rt: &tokio::runtime::Runtime,
    df: datafusion::dataframe::DataFrame,
    args: &SqlArgs,
) -> Result<ExitCode> {
    let mut copy_target = CopyTarget::of(df.logical_plan());
    let planned = rt.block_on(df.execute_stream());
    let mut stream = match planned {
        Ok(s) => s,
        Err(e) => return Ok(fail(&e)),
    };
    let schema = stream.schema();
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

/// The table an `INSERT INTO` writes, when it is a registered Delta
/// table: every other write into a registered table is refused.
fn inserted_delta_table<'t>(
    dml: &datafusion::logical_expr::DmlStatement,
    delta_tables: &[&'t TableArg],
) -> Result<&'t TableArg> {
    use datafusion::logical_expr::dml::InsertOp;
    use datafusion::logical_expr::WriteOp;
    let name = dml.table_name.table();
    let table = delta_tables.iter().find(|t| t.name == name).or_else(|| {
        delta_tables
            .iter()
            .find(|t| t.name.eq_ignore_ascii_case(name))
    });
    match (&dml.op, table) {
        (WriteOp::Insert(InsertOp::Append), Some(t)) => Ok(t),
        (WriteOp::Insert(InsertOp::Append), None) => Err(Failure::bad_input(format!(
            "INSERT INTO {name}: kanon sql publishes into Delta tables only (their commits carry the release's certificate); write a Parquet release with --output instead"
        ))
        .into()),
        (op, _) => Err(Failure::bad_input(format!(
            "{} on table {name} is refused: kanon sql changes a table only by INSERT INTO a Delta table of releases (a commit verified and certified as a whole); a {} would change published classes without verifying them",
            op.name(),
            op.name()
        ))
        .into()),
    }
}

/// The `anonymize()` nodes of a physical plan.
fn anonymize_nodes(plan: &Arc<dyn ExecutionPlan>) -> Vec<Arc<dyn ExecutionPlan>> {
    let mut found = Vec::new();
    let mut stack = vec![Arc::clone(plan)];
    while let Some(node) = stack.pop() {
        if node.is::<AnonymizeExec>() {
            found.push(Arc::clone(&node));
        }
        stack.extend(node.children().into_iter().cloned());
    }
    found
}

/// Runs `plan` and publishes its result through the [`Publisher`] at
/// `target` (`what` names the destination in messages): the result must
/// come from exactly one `anonymize(...)`, and is verified against its job
/// by the published labels (classes, models, identifying and pseudonymised
/// columns) before it is committed with its certificate. A filter, join,
/// `LIMIT` or union after anonymize() that breaks its classes is refused.
///
/// Returns the rows published and what the publisher did, or the exit code
/// of a failed query (its error printed).
///
/// # Errors
/// Bad-input failures for a result kanon cannot certify; write and commit
/// failures (nothing is published then).
#[allow(clippy::too_many_arguments)]
fn publish_query(
    rt: &tokio::runtime::Runtime,
    ctx: &SessionContext,
    plan: LogicalPlan,
    storage: &Storage,
    target: Target,
    options: ReleaseOptions,
    what: &str,
    unchecked_series: bool,
    ui: &Ui,
) -> Result<std::result::Result<(u64, Published), ExitCode>> {
    let physical = match rt.block_on(ctx.state().create_physical_plan(&plan)) {
        Ok(p) => p,
        Err(e) => return Ok(Err(fail(&e))),
    };
    let nodes = anonymize_nodes(&physical);
    let [node] = nodes.as_slice() else {
        return Err(Failure::bad_input(format!(
            "{what} publishes a release, verified against and certified for the job of one anonymize(...), but the query reads {} anonymize() calls; publish one anonymize()'s result (e.g. SELECT * FROM anonymize(...)), or export another result with COPY (...) TO 'file' STORED AS PARQUET, which writes no certificate",
            nodes.len()
        ))
        .into());
    };
    let exec = node
        .downcast_ref::<AnonymizeExec>()
        .expect("an anonymize node");
    let mut output = exec.job().spec().output.clone();
    if unchecked_series {
        output.unchecked_series = Some(true);
    }
    let job = JobFile::new(
        exec.job().engine_job().clone().with_output(output),
        Default::default(),
    );
    let privacy = Privacy::from_spec(job.spec())?;
    // δ-presence is the release and the population together: a query's
    // result cannot be recounted against the population anonymize() read.
    if privacy.presence().is_some() {
        return Err(Failure::bad_input(format!(
            "{what}: anonymize()'s job names `privacy.models.delta-presence`, whose release is verified against the population it was drawn from, which a query's result cannot be recounted against; publish it with `kanon anonymize` (its input is the population), or export the result with COPY (...) TO 'file' STORED AS PARQUET, which writes no certificate"
        ))
        .into());
    }
    let schema = physical.schema();
    let mut check = ReleaseCheck::new(&job, &schema, what).map_err(|e| {
        Failure::bad_input(format!(
            "{what}: the query's result cannot be checked against anonymize()'s job ({e:#}); publish a result that keeps anonymize()'s quasi-identifier and sensitive columns"
        ))
    })?;
    let mut publisher = Publisher::create(storage, target, schema, options)?;
    // Executing a plan may spawn its input tasks: inside the runtime.
    let started = {
        let _runtime = rt.enter();
        datafusion::physical_plan::execute_stream(physical, ctx.task_ctx())
    };
    let mut stream = match started {
        Ok(s) => s,
        Err(e) => return Ok(Err(fail(&e))),
    };
    while let Some(b) = rt.block_on(stream.next()) {
        check_interrupt()?;
        match b {
            Ok(b) => {
                check.push(&b)?;
                publisher.write(&b)?;
            }
            Err(e) => return Ok(Err(fail(&e))),
        }
    }
    drop(stream);
    let rows_in = exec
        .metrics()
        .and_then(|m| m.sum_by_name("rows_in"))
        .map_or(0, |v| v.as_usize() as u64);
    let (checked, labels) = check.finish(&privacy)?;
    let (verified, labels) = match (checked, labels) {
        (Checked::Holds(v), Some(labels)) => (v, labels),
        (Checked::Fails(msg), _) => {
            return Err(Failure::bad_input(format!(
                "{what}: the query's result does NOT satisfy anonymize()'s job: {msg}; nothing was written. A filter, join, LIMIT or union after anonymize() can break its classes: publish anonymize()'s rows as it returns them"
            ))
            .into())
        }
        (Checked::Holds(_), None) => {
            return Err(anyhow::anyhow!(
                "{what}: the check kept no labels (a bug in kanon); nothing was written"
            ))
        }
    };
    let diversity = kanon_engine::metrics::release_diversity(&labels);
    let certificate = Certificate::of_labels(&job, &verified, &diversity, rows_in);
    let rows = publisher.rows();
    let published = publisher.publish(&job, &privacy, &verified, &certificate, None, ui)?;
    Ok(Ok((rows, published)))
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
        // By the engine's kind, not the text: a message that merely
        // mentions unsatisfiable models is the user's.
        let unsatisfiable = kanon_engine::Error::Unsatisfiable("k".into());
        assert_eq!(
            code_of(&DataFusionError::External(Box::new(unsatisfiable)).context("INSERT")),
            exit::UNSATISFIABLE
        );
        assert_eq!(
            code_of(&DataFusionError::Execution(
                "anonymize(): privacy model cannot be satisfied: k".into()
            )),
            exit::BAD_INPUT
        );
        let bug = kanon_engine::Error::VerificationFailed("x".into());
        assert_eq!(
            code_of(&DataFusionError::External(Box::new(bug))),
            exit::INTERNAL
        );
        assert_eq!(
            code_of(&DataFusionError::ResourcesExhausted("x".into())),
            exit::IO
        );
    }
}
