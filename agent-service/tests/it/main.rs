//! agent-service starts on both backends, migrates its store, answers gRPC health and stops
//! cleanly.

#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::panic,
    clippy::print_stderr
)] // test code: fail loudly

mod agent_bench;
mod agent_keys;
mod browser;
mod custom_tools;
mod sandbox_bench;
mod slots;

use docchat_common::testing::{Spawned, bind, context};

mod files;
mod mcp;
mod run;
mod run_leases;
mod stores;

docchat_common::backend_tests! {
    async fn serves_health_and_stops_cleanly(backend) {
        let dir = tempfile::tempdir().unwrap();
        let config = backend.config(dir.path());
        for _ in 0..2 {
            // Twice on the same store: migrations are idempotent.
            let (listener, url) = bind().await;
            let svc = Spawned::start(
                context(config.clone()),
                listener,
                url,
                docchat_agent_service::serve,
            )
            .await
            .unwrap();
            assert!(
                docchat_common::grpc::check_health(svc.channel()).await,
                "{}",
                backend.name
            );
            svc.stop().await.unwrap();
        }
    }
}
