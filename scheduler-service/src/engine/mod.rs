//! The engine of scheduled tasks (AGENTS.md §5, docs/ARCHITECTURE.md "Scheduler"): every
//! replica claims due tasks ([`claim`]), runs each execution as the task's owner through
//! chat-service ([`run`]), holds a lease on what it runs and fails what another replica left
//! behind ([`lease`]), records each outcome ([`store`]) as a job-history event ([`events`])
//! and, when asked for, an email ([`notify`]). [`Engine::trigger`] starts a run on demand;
//! [`Engine::cancel`] and [`Engine::delete`] end running ones ([`cancel`]).

mod cancel;
mod claim;
mod config;
mod events;
mod lease;
mod notify;
mod references;
mod run;
mod store;
mod trigger;

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use docchat_common::clients::Clients;
use docchat_common::grpc::{Background, ServiceContext};
use docchat_common::outbox::OutboxRelay;
use sea_orm::DatabaseConnection;
use tokio_util::sync::CancellationToken;
use tokio_util::task::TaskTracker;

pub use notify::Notifier;

/// Status values of tasks and executions (entities/ documents them).
pub(crate) mod status {
    pub const ACTIVE: &str = "active";
    pub const PAUSED: &str = "paused";
    pub const COMPLETED: &str = "completed";
    pub const EXPIRED: &str = "expired";
    pub const IDLE: &str = "idle";
    pub const RUNNING: &str = "running";
    pub const FAILED: &str = "failed";
    pub const CANCELLED: &str = "cancelled";
    pub const SCHEDULED: &str = "scheduled";
    pub const MANUAL: &str = "manual";
}

/// The engine of one replica; cheap to clone.
#[derive(Clone)]
pub struct Engine(Arc<Inner>);

pub(crate) struct Inner {
    db: DatabaseConnection,
    clients: Clients,
    relay: OutboxRelay,
    /// This replica's name on the executions it runs.
    worker: String,
    tick: Duration,
    lease: chrono::Duration,
    notifier: Option<Notifier>,
    /// Executions this replica runs now (the ones whose lease it renews), each with the
    /// token that stops its run when it is canceled or deleted.
    running: Mutex<HashMap<String, CancellationToken>>,
    tracker: TaskTracker,
    token: CancellationToken,
}

impl Engine {
    /// An engine on `db` whose runs live on `background` (stopped with the service).
    pub fn new(
        ctx: &ServiceContext,
        db: DatabaseConnection,
        relay: OutboxRelay,
        background: &Background,
    ) -> anyhow::Result<Engine> {
        let config = &ctx.config;
        let worker = format!(
            "{}-{}",
            config.hostname.as_deref().unwrap_or("scheduler"),
            docchat_common::ids::short()
        );
        Ok(Engine(Arc::new(Inner {
            db,
            clients: Clients::new(config, ctx.keys.clone())?,
            relay,
            worker,
            tick: Duration::from_millis(config.scheduler_tick_ms),
            lease: chrono::Duration::seconds(
                i64::try_from(config.scheduler_lease_seconds).unwrap_or(30),
            ),
            notifier: Notifier::from_config(config)?,
            running: Mutex::new(HashMap::new()),
            tracker: background.tracker.clone(),
            token: background.token.clone(),
        })))
    }

    /// Starts the claim loop and the lease keeper (renewal and reaper) on the background.
    pub fn start(&self) {
        self.0.tracker.spawn(claim::run_loop(self.0.clone()));
        self.0.tracker.spawn(lease::run_loop(self.0.clone()));
    }

    /// This replica's worker name.
    pub fn worker(&self) -> &str {
        &self.0.worker
    }
}

impl Inner {
    fn lease_until(&self) -> chrono::DateTime<chrono::Utc> {
        docchat_common::time::now() + self.lease
    }

    /// Holds `execution_id` (its lease is renewed); the token stops its run.
    fn hold(&self, execution_id: &str) -> CancellationToken {
        let stop = self.token.child_token();
        self.running
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .insert(execution_id.to_owned(), stop.clone());
        stop
    }

    /// Stops the run of `execution_id` if this replica runs it (it was canceled).
    fn stop(&self, execution_id: &str) {
        if let Some(stop) = self
            .running
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .get(execution_id)
        {
            stop.cancel();
        }
    }

    fn release(&self, execution_id: &str) {
        self.running
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .remove(execution_id);
    }

    fn held(&self) -> Vec<String> {
        self.running
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .keys()
            .cloned()
            .collect()
    }
}
