//! The `kanon` command line as a library: the binary is `fn main` calling
//! [`run`], so an embedder can register its own algorithms, privacy models
//! and utility metrics (`kanon_engine::algorithms::registry`,
//! `kanon_engine::privacy::registry`, `kanon_engine::metrics::utility`) and
//! run them through the very path `kanon anonymize` takes (load the job,
//! run, verify, write, commit).
//!
//! Commands live in their own modules and drive the engine's release path;
//! errors are reported with their chain and mapped to exit codes that
//! schedulers can act on (`kanon_io::exit`).

#[macro_use]
extern crate kanon_io;

mod anonymize;
mod cluster;
pub mod embed;
mod generate;
mod inspect;
mod memory;
mod report;
#[cfg(feature = "sql")]
mod sql;
mod verify;

use std::ffi::OsString;
use std::path::PathBuf;
use std::process::ExitCode;

use clap::{Args, Parser, Subcommand};
use kanon_io::{exit, ops, storage};

pub use kanon_io::dataset::MemoryTable;

use kanon_io::config::{JobRequest, Override};
use kanon_io::ops::{LogFormat, Ui};

/// kanon: k-anonymity and l-diversity for tabular data.
#[derive(Debug, Parser)]
#[command(name = "kanon", version, about, long_about = None)]
struct Cli {
    /// Print nothing but errors (no summary, no progress).
    #[arg(long, short = 'q', global = true)]
    quiet: bool,
    /// More log detail on stderr: -v info, -vv debug, -vvv trace.
    #[arg(long, short = 'v', action = clap::ArgAction::Count, global = true)]
    verbose: u8,
    /// Log format on stderr: `text`, or `json` (one object per line, for
    /// schedulers; the summary is logged too).
    #[arg(long, value_enum, default_value = "text", global = true)]
    log_format: LogFormatArg,
    #[command(subcommand)]
    command: Command,
}

/// `--log-format`'s values: [`LogFormat`] on the command line.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
enum LogFormatArg {
    /// Human-readable lines.
    Text,
    /// One JSON object per line (for schedulers).
    Json,
}

impl From<LogFormatArg> for LogFormat {
    fn from(arg: LogFormatArg) -> Self {
        match arg {
            LogFormatArg::Text => LogFormat::Text,
            LogFormatArg::Json => LogFormat::Json,
        }
    }
}

#[derive(Debug, Subcommand)]
enum Command {
    /// Anonymise the job's input and write a verified release.
    Anonymize(anonymize::AnonymizeArgs),
    /// Re-check a published release against the job's privacy model.
    Verify(verify::VerifyArgs),
    /// Write the HTML release report of a published release: the job, what
    /// it achieves, the risk before and after, the information kept, and
    /// its provenance.
    Report(report::ReportArgs),
    /// Show a dataset's schema, row count and, given QIs, its current risk.
    Inspect(inspect::InspectArgs),
    /// Write an Adult-like Parquet file of any size (test data).
    Generate(generate::GenerateArgs),
    /// Run SQL over Parquet/CSV tables with anonymize(...) and kanon_risk(...).
    #[cfg(feature = "sql")]
    Sql(sql::SqlArgs),
    /// Serve a worker that clusters the blocks of other machines' jobs
    /// (`kanon anonymize --workers`, `kanon sql --workers`).
    Worker(cluster::WorkerArgs),
}

/// `--algorithm`'s help: the registered names.
fn algorithm_help() -> String {
    format!(
        "Override `algorithm.name`: {}",
        kanon_engine::algorithms::registry::names().join(", ")
    )
}

/// `--algorithm`'s long help (`--help`): each registered algorithm with its
/// summary.
fn algorithm_long_help() -> String {
    let mut help = String::from("Override `algorithm.name`, one of:");
    for r in kanon_engine::algorithms::registry::all() {
        help.push_str(&format!("\n  {}: {}", r.name, r.summary));
    }
    help
}

/// Options shared by every command that reads a job file.
#[derive(Debug, Clone, Args)]
pub(crate) struct JobArgs {
    /// The job file (TOML), e.g. configs/adult.toml.
    #[arg(long, short = 'c')]
    pub config: PathBuf,
    /// Override `privacy.k`.
    #[arg(long)]
    pub k: Option<usize>,
    // Its help lists the engine's registry when the command line is parsed,
    // so an algorithm an embedder registers before `run` is listed too.
    #[arg(long, value_name = "NAME", help = algorithm_help(), long_help = algorithm_long_help())]
    pub algorithm: Option<String>,
    /// Override `algorithm.seed`.
    #[arg(long)]
    pub seed: Option<u64>,
    /// Override `privacy.suppression_limit` (share of rows, 0..1).
    #[arg(long)]
    pub suppression_limit: Option<f64>,
    /// Override any setting: `--set section.key=value` (repeatable), e.g.
    /// `--set output.max_file_size=256MB`. Also `KANON_SECTION_KEY=value`
    /// environment variables (lower precedence than the command line).
    #[arg(long, value_name = "KEY=VALUE")]
    pub set: Vec<String>,
    /// Allow `KANON_*` variables and the flags above to weaken the job
    /// file's privacy (lower k, l or c, a higher suppression limit, a
    /// dropped requirement, ...); refused otherwise.
    #[arg(long)]
    pub weaken_privacy: bool,
    #[command(flatten)]
    pub storage: StorageArgs,
}

impl JobArgs {
    /// What the job loader is asked for: the file, `--set`, then the
    /// dedicated flags as overrides with the flag as their source.
    pub(crate) fn request(&self) -> JobRequest {
        let flag = |key: &str, value: String, source: &str| Override::parse(key, &value, source);
        let mut flags = Vec::new();
        if let Some(k) = self.k {
            flags.push(flag("privacy.k", k.to_string(), "--k"));
        }
        if let Some(a) = &self.algorithm {
            // Quoted: an algorithm name is always a string.
            flags.push(flag("algorithm.name", format!("{a:?}"), "--algorithm"));
        }
        if let Some(s) = self.seed {
            flags.push(flag("algorithm.seed", s.to_string(), "--seed"));
        }
        if let Some(s) = self.suppression_limit {
            flags.push(flag(
                "privacy.suppression_limit",
                s.to_string(),
                "--suppression-limit",
            ));
        }
        flags.extend(self.storage.overrides());
        JobRequest {
            config: self.config.clone(),
            set: self.set.clone(),
            flags,
            weaken_privacy: self.weaken_privacy,
        }
    }
}

/// Object storage settings on the command line (override `[storage]`).
#[derive(Debug, Clone, Default, Args)]
pub(crate) struct StorageArgs {
    /// Endpoint of an S3-compatible store, e.g. http://127.0.0.1:9000
    /// (`storage.endpoint`).
    #[arg(long, value_name = "URL")]
    pub s3_endpoint: Option<String>,
    /// S3 region (`storage.region`).
    #[arg(long, value_name = "REGION")]
    pub s3_region: Option<String>,
    /// Allow plain-HTTP endpoints, for local test servers
    /// (`storage.allow_http`).
    #[arg(long)]
    pub s3_allow_http: bool,
    /// Virtual-hosted-style requests (bucket in the host name) instead of
    /// path-style (`storage.virtual_hosted_style`).
    #[arg(long)]
    pub s3_virtual_hosted_style: bool,
    /// AWS profile of ~/.aws/credentials and ~/.aws/config
    /// (`storage.profile`; default AWS_PROFILE or `default`).
    #[arg(long, value_name = "NAME")]
    pub aws_profile: Option<String>,
}

impl StorageArgs {
    /// The settings given, as overrides of `storage.*`.
    pub fn overrides(&self) -> Vec<Override> {
        let mut out = Vec::new();
        let mut add = |key: &str, value: String, source: &str| {
            out.push(Override::parse(&format!("storage.{key}"), &value, source))
        };
        if let Some(e) = &self.s3_endpoint {
            add("endpoint", format!("{e:?}"), "--s3-endpoint");
        }
        if let Some(r) = &self.s3_region {
            add("region", format!("{r:?}"), "--s3-region");
        }
        if self.s3_allow_http {
            add("allow_http", "true".into(), "--s3-allow-http");
        }
        if self.s3_virtual_hosted_style {
            add(
                "virtual_hosted_style",
                "true".into(),
                "--s3-virtual-hosted-style",
            );
        }
        if let Some(p) = &self.aws_profile {
            add("profile", format!("{p:?}"), "--aws-profile");
        }
        out
    }
}

/// Runs the command line `args` (the first is the program name, as in
/// `std::env::args_os()`) and returns its exit code: success, or the code
/// of the failure, which schedulers act on: 1 verification failed, 2 bad
/// input, 3 unsatisfiable, 4 I/O, 5 output exists, 70 a bug, 124 timed out,
/// 130 interrupted, 143 terminated. Installs the SIGINT and
/// SIGTERM handlers of a command-line job (once per process).
pub fn run<I, T>(args: I) -> ExitCode
where
    I: IntoIterator<Item = T>,
    T: Into<OsString> + Clone,
{
    let cli = match Cli::try_parse_from(args) {
        Ok(cli) => cli,
        Err(e) => {
            let _ = e.print();
            return ExitCode::from(u8::try_from(e.exit_code()).unwrap_or(exit::BAD_INPUT));
        }
    };
    let ui = Ui::init(cli.quiet, cli.verbose, cli.log_format.into());
    ops::install_interrupts();
    storage::install_tls_provider();
    let result = match cli.command {
        Command::Anonymize(args) => anonymize::run(&args, &ui),
        Command::Verify(args) => verify::run(&args, &ui),
        Command::Report(args) => report::run(&args, &ui),
        Command::Inspect(args) => inspect::run(&args, &ui),
        Command::Generate(args) => generate::run(&args, ui.quiet),
        #[cfg(feature = "sql")]
        Command::Sql(args) => sql::run(&args, &ui),
        Command::Worker(args) => cluster::run_worker(&args, &ui),
    };
    match result {
        Ok(code) => code,
        Err(err) => {
            let code = exit::code_of(&err);
            match ui.format {
                LogFormat::Text => errln!("error: {err:#}"),
                LogFormat::Json => {
                    tracing::error!(exit_code = code, error = %format!("{err:#}"), "failed")
                }
            }
            ExitCode::from(code)
        }
    }
}

#[cfg(test)]
mod tests {
    use clap::CommandFactory;

    use super::Cli;

    /// `--algorithm`'s help is the registry's when the command line is
    /// built: an algorithm an embedder registers before [`super::run`] is
    /// listed with its summary, as the built-in ones are.
    #[test]
    fn algorithm_help_lists_what_the_registry_holds() {
        use kanon_engine::algorithms::registry;
        registry::register(registry::Registration {
            name: "help-probe",
            summary: "an algorithm registered by an embedder",
            ..registry::get("mondrian").unwrap()
        })
        .unwrap();
        let cli = Cli::command();
        let anonymize = cli.find_subcommand("anonymize").unwrap();
        let arg = anonymize
            .get_arguments()
            .find(|a| a.get_id() == "algorithm")
            .unwrap();
        let help = arg.get_help().unwrap().to_string();
        let long = arg.get_long_help().unwrap().to_string();
        for name in registry::names() {
            assert!(help.contains(name), "--algorithm help lacks {name}: {help}");
            assert!(long.contains(name), "--algorithm long help lacks {name}");
        }
        assert!(long.contains("help-probe: an algorithm registered by an embedder"));
    }
}
