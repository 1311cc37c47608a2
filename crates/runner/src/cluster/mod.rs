//! Runs on more than one machine (issue 18): `kanon worker` serves a
//! datafusion-distributed worker, and `--workers URL,...` sends the blocks
//! of a block-wise run to such workers
//! ([`kanon_datafusion::distributed::Cluster`]). Everything else of the job
//! (pass 1, the cuts, verification, pass 2, the commit) stays in the
//! process that runs it. `kanon inspect --workers` has the workers read the
//! table themselves ([`census`], issue 35). Built with the `distributed`
//! feature.

#[cfg(feature = "distributed")]
pub mod census;
#[cfg(feature = "distributed")]
pub mod part;

use std::process::ExitCode;
use std::sync::Arc;

use anyhow::Result;
use clap::Args;
use kanon_engine::algorithms::partitioned::BlockExecutor;

use kanon_io::exit::Failure;
use kanon_io::ops::Ui;

/// Where the blocks of a block-wise run are clustered.
#[derive(Debug, Clone, Default, Args)]
pub struct WorkersArg {
    /// Cluster the blocks of a block-wise run on these `kanon worker`s
    /// (`http://HOST:PORT` or `HOST:PORT`, comma-separated; `dns://NAME:PORT`
    /// stands for every address NAME resolves to, e.g. a Kubernetes
    /// headless Service over a worker Deployment). The job reads,
    /// cuts, verifies and writes here; the release is the same as on one
    /// machine. A job runs in blocks above 100,000 rows or with
    /// `algorithm.block_size`.
    #[arg(long, value_delimiter = ',', value_name = "URL")]
    pub workers: Vec<String>,
}

impl WorkersArg {
    /// The cluster of the named workers, or `None` without any.
    ///
    /// # Errors
    /// An address that is not a URL; `--workers` in a build without the
    /// `distributed` feature.
    pub fn executor(&self) -> Result<Option<Arc<dyn BlockExecutor>>> {
        if self.workers.is_empty() {
            return Ok(None);
        }
        let cluster = connect(&self.workers)?;
        #[cfg(feature = "distributed")]
        return Ok(Some(Arc::new(Checkpointed(cluster))));
        #[cfg(not(feature = "distributed"))]
        match cluster {}
    }

    /// The cluster of the named workers, or `None` without any.
    ///
    /// # Errors
    /// As [`WorkersArg::executor`].
    #[cfg(feature = "distributed")]
    pub fn cluster(&self) -> Result<Option<kanon_datafusion::distributed::Cluster>> {
        match self.workers.is_empty() {
            true => Ok(None),
            false => connect(&self.workers).map(Some),
        }
    }
}

/// Without the `distributed` feature there is no cluster.
#[cfg(not(feature = "distributed"))]
pub enum NoCluster {}

#[cfg(feature = "distributed")]
pub(crate) fn connect(workers: &[String]) -> Result<kanon_datafusion::distributed::Cluster> {
    let mut urls = Vec::new();
    for w in workers {
        urls.extend(worker_urls(w.trim())?);
    }
    let mut seen = std::collections::BTreeSet::new();
    if let Some(twice) = urls.iter().find(|u| !seen.insert(u.as_str().to_string())) {
        return Err(Failure::bad_input(format!(
            "--workers: {twice} is named twice; name each worker once"
        ))
        .into());
    }
    Ok(kanon_datafusion::distributed::Cluster::connect(&urls)
        .map_err(|e| Failure::bad_input(format!("--workers: {e}")))?)
}

#[cfg(not(feature = "distributed"))]
pub(crate) fn connect(_: &[String]) -> Result<NoCluster> {
    Err(Failure::bad_input(
        "--workers: this kanon was built without distributed runs; build it with `cargo build --release --features distributed` (the container image has them)",
    )
    .into())
}

/// The URLs of one `--workers` entry: itself, or every address a `dns://`
/// name resolves to, sorted.
#[cfg(feature = "distributed")]
fn worker_urls(w: &str) -> Result<Vec<url::Url>> {
    let bad = |e: String| {
        Failure::bad_input(format!(
            "--workers: `{w}` is not a worker address ({e}); give http://HOST:PORT, HOST:PORT or dns://NAME:PORT"
        ))
    };
    if let Some(name) = w.strip_prefix("dns://") {
        use std::net::ToSocketAddrs;
        let name = name.trim_end_matches('/');
        if !name.contains(':') {
            return Err(bad("a dns:// name needs its port".into()).into());
        }
        let mut addrs: Vec<std::net::SocketAddr> = name
            .to_socket_addrs()
            .map_err(|e| bad(format!("it does not resolve: {e}")))?
            .collect();
        addrs.sort();
        addrs.dedup();
        if addrs.is_empty() {
            return Err(bad("it resolves to no address".into()).into());
        }
        return addrs
            .iter()
            .map(|a| url::Url::parse(&format!("http://{a}")).map_err(|e| bad(e.to_string()).into()))
            .collect();
    }
    let url = match w.contains("://") {
        true => w.to_string(),
        false => format!("http://{w}"),
    };
    Ok(vec![url::Url::parse(&url).map_err(|e| bad(e.to_string()))?])
}

/// The cluster, with the test barrier `blocks` before the blocks leave
/// (kanon_io::ops::barrier): tests stop a worker at that exact step.
#[cfg(feature = "distributed")]
#[derive(Debug)]
struct Checkpointed(kanon_datafusion::distributed::Cluster);

#[cfg(feature = "distributed")]
impl BlockExecutor for Checkpointed {
    fn run(
        &self,
        blocks: &kanon_engine::algorithms::partitioned::Blocks<'_>,
    ) -> kanon_engine::Result<kanon_engine::algorithms::partitioned::BlocksRun> {
        kanon_io::ops::barrier("blocks")
            .map_err(|e| kanon_engine::Error::Cancelled(format!("{e:#}")))?;
        self.0.run(blocks)
    }
}

/// `kanon worker`.
#[derive(Debug, Args)]
pub struct WorkerArgs {
    /// Address to listen on (`HOST:PORT`; port 0 picks a free one). The
    /// address actually bound is printed on stdout as
    /// `kanon worker listening on http://HOST:PORT`.
    #[arg(long, default_value = "127.0.0.1:50051", value_name = "HOST:PORT")]
    pub listen: String,
}

/// Runs a worker until SIGINT or SIGTERM (then exits 0).
///
/// # Errors
/// An address that cannot be bound; a build without `distributed`.
#[cfg(feature = "distributed")]
pub fn run_worker(args: &WorkerArgs, ui: &Ui) -> Result<ExitCode> {
    use std::io::Write;

    let listener = std::net::TcpListener::bind(&args.listen).map_err(|e| {
        Failure::bad_input(format!(
            "kanon worker: cannot listen on {} ({e}); choose another --listen HOST:PORT",
            args.listen
        ))
    })?;
    listener.set_nonblocking(true)?;
    let addr = listener.local_addr()?;
    let rt = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .map_err(|e| anyhow::anyhow!("cannot start the worker's runtime: {e}"))?;
    let mut out = std::io::stdout().lock();
    writeln!(out, "kanon worker listening on http://{addr}")?;
    out.flush()?;
    drop(out);
    tracing::info!(%addr, "worker listening");
    let _ = ui;
    rt.block_on(async move {
        let listener = tokio::net::TcpListener::from_std(listener)?;
        let stop = async {
            while kanon_io::ops::check_interrupt().is_ok() {
                tokio::time::sleep(std::time::Duration::from_millis(200)).await;
            }
        };
        let tasks = kanon_datafusion::distributed::Tasks::default()
            .with(census::KIND, census::run)
            .with(part::KIND, part::run);
        kanon_datafusion::distributed::serve(listener, tasks, stop)
            .await
            .map_err(|e| anyhow::anyhow!("kanon worker on {addr}: {e}"))
    })?;
    tracing::info!(%addr, "worker stopped");
    Ok(ExitCode::SUCCESS)
}

/// Without the `distributed` feature.
///
/// # Errors
/// Always: the build has no worker.
#[cfg(not(feature = "distributed"))]
pub fn run_worker(_: &WorkerArgs, _: &Ui) -> Result<ExitCode> {
    Err(Failure::bad_input(
        "kanon worker: this kanon was built without distributed runs; build it with `cargo build --release --features distributed`",
    )
    .into())
}

#[cfg(all(test, feature = "distributed"))]
mod tests {
    use super::worker_urls;

    #[test]
    fn worker_addresses_and_dns_names() {
        let one = |w: &str| -> Vec<String> {
            worker_urls(w)
                .unwrap()
                .iter()
                .map(|u| u.to_string())
                .collect()
        };
        assert_eq!(one("127.0.0.1:7"), ["http://127.0.0.1:7/"]);
        assert_eq!(one("http://10.0.0.1:50051"), ["http://10.0.0.1:50051/"]);
        assert_eq!(one("dns://127.0.0.1:7"), ["http://127.0.0.1:7/"]);
        let err = worker_urls("dns://localhost").unwrap_err().to_string();
        assert!(err.contains("needs its port"), "{err}");
        let err = worker_urls("dns://no-such-host.invalid:1")
            .unwrap_err()
            .to_string();
        assert!(err.contains("does not resolve"), "{err}");
    }
}
