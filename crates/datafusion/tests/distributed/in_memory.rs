//! An in-process cluster for the distributed tests: gRPC clients over a
//! tokio duplex to one worker service, and `n` worker URLs that all reach it.
//!
//! Adapted from datafusion-distributed 4.0.0,
//! `src/test_utils/in_memory_channel_resolver.rs` (Apache-2.0), which is
//! only compiled with that crate's `integration` feature; that feature turns
//! on Arrow's `test_utils` and would give the tests a build of Arrow and
//! DataFusion of their own (see this crate's Cargo.toml).

use async_trait::async_trait;
use datafusion::common::DataFusionError;
use datafusion_distributed::{
    grpc, ChannelResolver, DistributedExt, MappedWorkerSessionBuilderExt, Worker, WorkerChannel,
    WorkerResolver, WorkerSessionBuilder,
};
use hyper_util::rt::TokioIo;
use tonic::transport::{Endpoint, Server};
use url::Url;

const DUMMY_URL: &str = "http://localhost:50051";
const DUMMY_URL_PREFIX: &str = "http://url-";

/// Hands out clients of the one in-memory worker service.
#[derive(Clone)]
pub struct InMemoryChannelResolver {
    channel: grpc::BoxCloneSyncChannel,
}

impl InMemoryChannelResolver {
    /// Starts the worker service on the current tokio runtime, its sessions
    /// built by `builder`.
    pub fn from_session_builder(
        builder: impl WorkerSessionBuilder + Send + Sync + 'static,
    ) -> Self {
        let (client, server) = tokio::io::duplex(1024 * 1024);
        let mut client = Some(client);
        let channel = Endpoint::try_from(DUMMY_URL)
            .expect("a valid constant URL")
            .connect_with_connector_lazy(tower::service_fn(move |_| {
                let client = client.take().expect("one connection to the duplex");
                async move { Ok::<_, std::io::Error>(TokioIo::new(client)) }
            }));
        let this = Self {
            channel: grpc::BoxCloneSyncChannel::new(channel),
        };
        let resolver = this.clone();
        let worker = Worker::from_session_builder(builder.map(move |builder| {
            Ok(builder
                .with_distributed_channel_resolver(resolver.clone())
                .build())
        }));
        tokio::spawn(async move {
            Server::builder()
                .add_service(worker.into_worker_server())
                .serve_with_incoming(tokio_stream::once(Ok::<_, std::io::Error>(server)))
                .await
        });
        this
    }
}

#[async_trait]
impl ChannelResolver for InMemoryChannelResolver {
    async fn get_worker_client_for_url(
        &self,
        _: &Url,
    ) -> Result<Box<dyn WorkerChannel>, DataFusionError> {
        Ok(grpc::create_worker_client(self.channel.clone()))
    }
}

/// `n` worker URLs, all served by the in-memory worker.
pub struct InMemoryWorkerResolver {
    n_workers: usize,
}

impl InMemoryWorkerResolver {
    pub fn new(n_workers: usize) -> Self {
        Self { n_workers }
    }
}

impl WorkerResolver for InMemoryWorkerResolver {
    fn get_urls(&self) -> Result<Vec<Url>, DataFusionError> {
        (0..self.n_workers)
            .map(|i| Url::parse(&format!("{DUMMY_URL_PREFIX}{i}")))
            .collect::<Result<Vec<_>, _>>()
            .map_err(|err| DataFusionError::External(Box::new(err)))
    }
}
