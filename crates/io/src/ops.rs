//! Operability: logs (`-v`, `--log-format json`), progress bars on a
//! terminal, and interrupts (Ctrl-C, SIGTERM) that stop a job before it
//! commits anything.

use std::io::IsTerminal;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, OnceLock};
use std::time::Duration;

use anyhow::Result;
use indicatif::{ProgressBar, ProgressDrawTarget, ProgressStyle};
use tracing_subscriber::filter::{LevelFilter, Targets};
use tracing_subscriber::layer::SubscriberExt;
use tracing_subscriber::util::SubscriberInitExt;

use crate::exit::{Failure, INTERRUPTED, TERMINATED, TIMED_OUT};

/// How logs are written to stderr.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum LogFormat {
    /// Human-readable lines.
    Text,
    /// One JSON object per line (for schedulers).
    Json,
}

/// Output settings shared by every command.
#[derive(Debug, Clone, Copy)]
pub struct Ui {
    /// Print nothing but errors.
    pub quiet: bool,
    /// Log format.
    pub format: LogFormat,
    /// Whether progress bars are drawn.
    pub progress: bool,
    /// Whether the bar or spinner on show is published for a watcher on
    /// another thread ([`progress_now`]; the Python package's callback)
    /// instead of drawn.
    pub watched: bool,
}

impl Ui {
    /// Sets up logging: warnings by default (info with JSON logs), more per
    /// `-v`; and progress bars when stderr is a terminal.
    pub fn init(quiet: bool, verbose: u8, format: LogFormat) -> Ui {
        use tracing::Level;
        let base = match format {
            LogFormat::Text => 0,
            LogFormat::Json => 1,
        };
        let level = if quiet {
            Level::ERROR
        } else {
            match base + verbose {
                0 => Level::WARN,
                1 => Level::INFO,
                2 => Level::DEBUG,
                _ => Level::TRACE,
            }
        };
        // The AWS SDK logs each credential source it tries as a warning;
        // kanon reports a failure itself (naming the profile and the fix),
        // so the SDK's lines show from -vv on.
        let sdk = if verbose >= 2 {
            LevelFilter::from_level(level)
        } else {
            LevelFilter::ERROR
        };
        let targets = Targets::new()
            .with_default(level)
            .with_target("aws_config", sdk)
            .with_target("aws_smithy", sdk)
            .with_target("aws_sdk", sdk);
        let builder = tracing_subscriber::fmt()
            .with_writer(std::io::stderr)
            // A closed standard error must not crash the job: tracing's
            // own report of a failed write is `eprintln!`, which panics.
            .log_internal_errors(false)
            .with_max_level(level)
            .with_target(verbose >= 2);
        let _ = match format {
            LogFormat::Text => builder
                .with_ansi(std::io::stderr().is_terminal())
                .without_time()
                .finish()
                .with(targets)
                .try_init(),
            LogFormat::Json => builder
                .json()
                .flatten_event(true)
                .finish()
                .with(targets)
                .try_init(),
        };
        Ui {
            quiet,
            format,
            progress: !quiet && format == LogFormat::Text && std::io::stderr().is_terminal(),
            watched: false,
        }
    }

    /// An embedded run's settings (the Python package): nothing drawn on
    /// the terminal, the summary kept for the caller ([`capture_output`]),
    /// and the progress published for a watcher ([`progress_now`]). Logs
    /// go to stderr at warning level (set up once per process).
    pub fn embedded() -> Ui {
        let ui = Ui::init(false, 0, LogFormat::Text);
        Ui {
            progress: false,
            watched: true,
            ..ui
        }
    }

    /// A hidden bar published as the one on show, when watched.
    fn watch(&self, label: &str, pb: ProgressBar) -> ProgressBar {
        pb.set_prefix(label.to_string());
        if let Ok(mut w) = WATCHED.lock() {
            *w = Some(pb.clone());
        }
        pb
    }

    /// A progress bar for a pass (hidden when not on a terminal).
    pub fn bar(&self, label: &str, total: Option<u64>) -> ProgressBar {
        if self.watched {
            return self.watch(
                label,
                ProgressBar::with_draw_target(total, ProgressDrawTarget::hidden()),
            );
        }
        if !self.progress {
            return ProgressBar::hidden();
        }
        let pb = match total {
            Some(n) => ProgressBar::with_draw_target(Some(n), ProgressDrawTarget::stderr())
                .with_style(
                ProgressStyle::with_template(
                    "{prefix:>12} [{bar:30}] {human_pos}/{human_len} rows ({elapsed}, ETA {eta})",
                )
                .expect("template")
                .progress_chars("=> "),
            ),
            None => ProgressBar::with_draw_target(None, ProgressDrawTarget::stderr()).with_style(
                ProgressStyle::with_template("{prefix:>12} {spinner} {human_pos} rows ({elapsed})")
                    .expect("template"),
            ),
        };
        pb.set_prefix(label.to_string());
        pb.enable_steady_tick(Duration::from_millis(200));
        pb
    }

    /// A spinner for a step without a row count (the algorithm).
    pub fn spinner(&self, label: &str, message: String) -> ProgressBar {
        if self.watched {
            let pb = self.watch(label, ProgressBar::hidden());
            pb.set_message(message);
            return pb;
        }
        if !self.progress {
            return ProgressBar::hidden();
        }
        let pb = ProgressBar::with_draw_target(None, ProgressDrawTarget::stderr()).with_style(
            ProgressStyle::with_template("{prefix:>12} {spinner} {msg} ({elapsed})")
                .expect("template"),
        );
        pb.set_prefix(label.to_string());
        pb.set_message(message);
        pb.enable_steady_tick(Duration::from_millis(200));
        pb
    }
}

/// The engine's progress reports on a spinner: its message becomes
/// `WHAT: PHASE DONE/TOTAL` (e.g. `kaca on 10000000 rows: blocks 12/1000`).
#[derive(Debug)]
pub struct SpinnerProgress {
    spinner: ProgressBar,
    what: String,
}

impl SpinnerProgress {
    /// Reports to `spinner`, prefixing `what`.
    pub fn new(spinner: ProgressBar, what: String) -> Self {
        SpinnerProgress { spinner, what }
    }
}

impl kanon_engine::progress::Progress for SpinnerProgress {
    fn update(&self, phase: &'static str, done: u64, total: u64) {
        self.spinner
            .set_message(format!("{}: {phase} {done}/{total}", self.what));
    }
}

/// The process's peak resident set size in bytes so far: `VmHWM` of
/// `/proc/self/status` on Linux; `None` elsewhere or when it cannot be read.
pub fn peak_rss_bytes() -> Option<u64> {
    #[cfg(target_os = "linux")]
    {
        parse_vm_hwm(&std::fs::read_to_string("/proc/self/status").ok()?)
    }
    #[cfg(not(target_os = "linux"))]
    {
        None
    }
}

/// The `VmHWM:  1234 kB` line of a `/proc/<pid>/status` text, in bytes.
#[cfg(any(target_os = "linux", test))]
fn parse_vm_hwm(status: &str) -> Option<u64> {
    let line = status.lines().find_map(|l| l.strip_prefix("VmHWM:"))?;
    let kib: u64 = line.trim().strip_suffix("kB")?.trim().parse().ok()?;
    Some(kib * 1024)
}

/// The bar or spinner on show in a watched run ([`Ui::embedded`]).
static WATCHED: Mutex<Option<ProgressBar>> = Mutex::new(None);

/// Where a watched run is: what [`progress_now`] returns.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ProgressNow {
    /// The step: `pass 1/2`, `algorithm`, `pass 2/2`.
    pub step: String,
    /// Rows done in a pass; the engine's phase and count in the algorithm
    /// are in `message`.
    pub done: u64,
    /// Rows in all, when known.
    pub total: Option<u64>,
    /// The algorithm's own report (`kaca on 32561 rows: blocks 3/10`).
    pub message: String,
}

/// The progress of the watched run on show, if any: read by another
/// thread (the Python package calls its callback with it).
pub fn progress_now() -> Option<ProgressNow> {
    let w = WATCHED.lock().ok()?;
    let pb = w.as_ref()?;
    Some(ProgressNow {
        step: pb.prefix(),
        done: pb.position(),
        total: pb.length(),
        message: pb.message(),
    })
}

static INTERRUPTED_FLAG: OnceLock<Arc<AtomicBool>> = OnceLock::new();
/// Set (with the flag above) when the signal was SIGTERM.
static TERMINATED_FLAG: OnceLock<Arc<AtomicBool>> = OnceLock::new();
/// The job's time limit (`--timeout`): a lock, not a cell, so that a
/// process running job after job (the Python package) starts each afresh.
static DEADLINE: Mutex<Option<(std::time::Instant, f64)>> = Mutex::new(None);

fn deadline() -> Option<(std::time::Instant, f64)> {
    DEADLINE.lock().ok().and_then(|d| *d)
}

/// Sets the job's time limit: past it, [`check_interrupt`] and the
/// algorithms' [`cancellation`] token stop the job (exit 124).
pub fn set_timeout(seconds: f64) {
    if let Ok(mut d) = DEADLINE.lock() {
        *d = Some((
            std::time::Instant::now() + Duration::from_secs_f64(seconds.max(0.0)),
            seconds,
        ));
    }
}

/// Asks the running job to stop, as Ctrl-C does (exit 130, nothing
/// written): the Python package calls it on `KeyboardInterrupt`.
pub fn interrupt() {
    INTERRUPTED_FLAG
        .get_or_init(|| Arc::new(AtomicBool::new(false)))
        .store(true, Ordering::SeqCst);
}

/// Clears what a previous job of the process left: the interrupt, the time
/// limit and the progress on show. For embedders that run job after job;
/// the command line runs one.
pub fn start_job() {
    if let Some(f) = INTERRUPTED_FLAG.get() {
        f.store(false, Ordering::SeqCst);
    }
    if let Some(f) = TERMINATED_FLAG.get() {
        f.store(false, Ordering::SeqCst);
    }
    if let Ok(mut d) = DEADLINE.lock() {
        *d = None;
    }
    if let Ok(mut w) = WATCHED.lock() {
        *w = None;
    }
}

thread_local! {
    /// What `outln!` printed on this thread while captured.
    static CAPTURED: std::cell::RefCell<Option<String>> = const { std::cell::RefCell::new(None) };
}

/// Runs `f` with what it prints on standard output (`outln!`, on this
/// thread) kept and returned instead: an embedded run's summary.
pub fn capture_output<T>(f: impl FnOnce() -> T) -> (T, String) {
    CAPTURED.with(|c| *c.borrow_mut() = Some(String::new()));
    let out = f();
    let text = CAPTURED.with(|c| c.borrow_mut().take()).unwrap_or_default();
    (out, text)
}

/// A line for standard output, or for the capture of [`capture_output`].
#[doc(hidden)]
pub fn out_line(line: std::fmt::Arguments<'_>) {
    let kept = CAPTURED.with(|c| match c.borrow_mut().as_mut() {
        Some(s) => {
            use std::fmt::Write as _;
            let _ = writeln!(s, "{line}");
            true
        }
        None => false,
    });
    if !kept {
        use std::io::Write as _;
        let _ = writeln!(std::io::stdout().lock(), "{line}");
    }
}

/// The token the engine's algorithms check in their inner loops: fired by
/// SIGINT/SIGTERM and by the job's time limit.
pub fn cancellation() -> kanon_engine::cancel::Cancellation {
    let flag = INTERRUPTED_FLAG
        .get_or_init(|| Arc::new(AtomicBool::new(false)))
        .clone();
    let c = kanon_engine::cancel::Cancellation::from_flag(flag);
    match deadline() {
        Some((deadline, _)) => c.with_deadline(deadline),
        None => c,
    }
}

/// Catches SIGINT and SIGTERM: the first sets a flag that the job checks
/// between batches and steps (it then cleans up and exits 130); a second
/// one exits at once.
pub fn install_interrupts() {
    static INSTALLED: std::sync::Once = std::sync::Once::new();
    INSTALLED.call_once(install_interrupts_now);
}

fn install_interrupts_now() {
    let flag = INTERRUPTED_FLAG.get_or_init(|| Arc::new(AtomicBool::new(false)));
    let terminated = TERMINATED_FLAG.get_or_init(|| Arc::new(AtomicBool::new(false)));
    let _ = signal_hook::flag::register(signal_hook::consts::SIGTERM, terminated.clone());
    for sig in [signal_hook::consts::SIGINT, signal_hook::consts::SIGTERM] {
        // Registered first, so it sees the flag as the previous signal left it.
        let _ =
            signal_hook::flag::register_conditional_shutdown(sig, INTERRUPTED as i32, flag.clone());
        let _ = signal_hook::flag::register(sig, flag.clone());
    }
}

/// Fails with exit code 130 once SIGINT was received, 143 for SIGTERM, 124
/// once the job's time limit passed.
///
/// # Errors
/// The interrupt, as a failure.
pub fn check_interrupt() -> Result<()> {
    if INTERRUPTED_FLAG
        .get()
        .is_some_and(|f| f.load(Ordering::SeqCst))
    {
        let term = TERMINATED_FLAG
            .get()
            .is_some_and(|f| f.load(Ordering::SeqCst));
        return Err(Failure::new(
            if term { TERMINATED } else { INTERRUPTED },
            format!(
                "{}; nothing was written and temporary files were removed",
                if term {
                    "terminated (SIGTERM)"
                } else {
                    "interrupted"
                }
            ),
        )
        .into());
    }
    if let Some((deadline, seconds)) = deadline() {
        if std::time::Instant::now() >= deadline {
            return Err(Failure::new(
                TIMED_OUT,
                format!("the job ran past its time limit (--timeout {seconds} s); nothing was written and temporary files were removed"),
            )
            .into());
        }
    }
    Ok(())
}

/// A test hook: with `KANON_TEST_BARRIER=DIR` set and a file
/// `DIR/<point>.wait` present, the job creates `DIR/<point>` when it reaches
/// `point` and waits until `DIR/<point>.wait` is removed (or an interrupt
/// arrives). Integration tests use it to stop a server or send Ctrl-C at an
/// exact step. Inert without the variable and the file.
///
/// # Errors
/// An interrupt while waiting, or a barrier that is never released.
pub fn barrier(point: &str) -> Result<()> {
    let Some(dir) = std::env::var_os("KANON_TEST_BARRIER") else {
        return Ok(());
    };
    let dir = std::path::Path::new(&dir);
    let wait = dir.join(format!("{point}.wait"));
    if !wait.exists() {
        return Ok(());
    }
    std::fs::write(dir.join(point), b"")?;
    let start = std::time::Instant::now();
    while wait.exists() {
        check_interrupt()?;
        if start.elapsed() > Duration::from_secs(300) {
            anyhow::bail!("test barrier {} was not released", wait.display());
        }
        std::thread::sleep(Duration::from_millis(10));
    }
    check_interrupt()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn peak_rss_is_read_from_vm_hwm() {
        let status = "Name:\tkanon\nVmPeak:\t  200000 kB\nVmHWM:\t   12345 kB\nVmRSS:\t 100 kB\n";
        assert_eq!(parse_vm_hwm(status), Some(12345 * 1024));
        assert_eq!(parse_vm_hwm("VmRSS:\t100 kB\n"), None);
        assert_eq!(parse_vm_hwm("VmHWM:\tlots kB\n"), None);
        #[cfg(target_os = "linux")]
        assert!(peak_rss_bytes().is_some_and(|b| b > 0));
    }
}
