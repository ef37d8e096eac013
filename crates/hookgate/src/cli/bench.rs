//! `hookgate bench`: the load generator of the `hookgate-bench` crate (compiled in with the
//! default-on `bench` feature), fed from this crate's configuration and store.

use std::net::SocketAddr;
use std::path::Path;

use hookgate_bench::{Endpoint, GatewayConfig};
use hookgate_store::SharedStore;

pub use hookgate_bench::BenchArgs;

use crate::config::{self, Config};

/// The gateway's configuration as the bench reads it.
struct BenchConfig(Config);

impl GatewayConfig for BenchConfig {
    fn load(path: &Path) -> anyhow::Result<Self> {
        Ok(Self(Config::load(path)?))
    }

    fn endpoint(&self, id: &str) -> Option<Endpoint> {
        let endpoint = self.0.endpoint(id)?;
        let now = jiff::Timestamp::now().as_second();
        Some(Endpoint {
            id: endpoint.id.clone(),
            pack: endpoint.pack,
            signing_secret: super::send::trusted_secret_blocking(&self.0, endpoint, now)
                .ok()
                .map(std::sync::Arc::new),
            max_body_bytes: endpoint.max_body_bytes,
        })
    }

    fn webhook_url(&self, endpoint: &str) -> String {
        super::send::default_url(&self.0, endpoint)
    }

    fn admin_listen(&self) -> Option<SocketAddr> {
        self.0.admin_listen
    }

    fn store_label(&self) -> String {
        config::redact_url(&self.0.store.url)
    }

    async fn open_store(&self) -> anyhow::Result<SharedStore> {
        crate::app::open_store(&self.0).await
    }
}

/// Runs `hookgate bench` on its own runtime; returns the exit code (1 when the store
/// verification fails).
pub fn run_blocking(args: BenchArgs) -> anyhow::Result<i32> {
    hookgate_bench::run_blocking::<BenchConfig>(args)
}
