//! The outbox publishes exactly what committed, in order, and keeps rows the bus refused.

use std::sync::{Arc, Mutex};
use std::time::Duration;

use docchat_common::bus::memory::InProcessBus;
use docchat_common::bus::{BusError, EventBus, EventHandler, Subscription, envelope};
use docchat_common::outbox::{CreateOutbox, OutboxRelay, enqueue, enqueue_all};
use docchat_proto::events::v1::{CollectionDeleted, Envelope};
use sea_orm::{EntityTrait, PaginatorTrait, TransactionTrait};
use sea_orm_migration::prelude::*;
use tokio_util::sync::CancellationToken;
use tokio_util::task::TaskTracker;

struct Migrator;

#[async_trait::async_trait]
impl MigratorTrait for Migrator {
    fn migrations() -> Vec<Box<dyn MigrationTrait>> {
        vec![Box::new(CreateOutbox)]
    }
}

#[derive(Default)]
struct Collect(Mutex<Vec<Envelope>>);

#[async_trait::async_trait]
impl EventHandler for Collect {
    async fn handle(&self, event: &Envelope) -> anyhow::Result<()> {
        self.0.lock().unwrap().push(event.clone());
        Ok(())
    }
}

/// A bus whose broker is away.
struct DownBus;

#[async_trait::async_trait]
impl EventBus for DownBus {
    async fn publish(&self, _: &Envelope) -> Result<(), BusError> {
        Err(BusError::Unavailable("down".into()))
    }
    async fn subscribe(
        &self,
        _: Subscription,
        _: Arc<dyn EventHandler>,
        _: &TaskTracker,
        _: CancellationToken,
    ) -> Result<(), BusError> {
        Err(BusError::Unavailable("down".into()))
    }
    async fn take_dead_letters(&self, _: &str) -> Result<Vec<Envelope>, BusError> {
        Ok(Vec::new())
    }
}

fn deleted(n: u32) -> Envelope {
    envelope(
        "ingest.collection.deleted",
        "u1",
        &CollectionDeleted {
            collection_id: format!("c{n}"),
            user_id: "u1".into(),
        },
    )
}

docchat_common::backend_tests! {
    async fn publishes_committed_events_in_order_and_keeps_what_the_bus_refused(backend) {
        let dir = tempfile::tempdir().unwrap();
        let db = docchat_common::db::connect(&backend.database_url(dir.path(), "outbox"))
            .await
            .unwrap();
        docchat_common::db::migrate::<Migrator>(&db, "outbox-test")
            .await
            .unwrap();

        let bus = Arc::new(InProcessBus::new());
        let tracker = TaskTracker::new();
        let stop = CancellationToken::new();
        let seen = Arc::new(Collect::default());
        bus.subscribe(
            Subscription::new("g", &["#"]),
            seen.clone(),
            &tracker,
            stop.clone(),
        )
        .await
        .unwrap();

        // A rolled-back transaction leaves nothing to publish.
        let txn = db.begin().await.unwrap();
        enqueue(&txn, &deleted(0)).await.unwrap();
        txn.rollback().await.unwrap();

        // One by one and all at once; more than one relay batch (100) in all.
        let events: Vec<Envelope> = (1..=250).map(deleted).collect();
        let txn = db.begin().await.unwrap();
        for e in &events[..3] {
            enqueue(&txn, e).await.unwrap();
        }
        enqueue_all(&txn, &[]).await.unwrap();
        enqueue_all(&txn, &events[3..]).await.unwrap();
        txn.commit().await.unwrap();

        // The broker is away: rows stay.
        let down = OutboxRelay::new(docchat_common::config::Service::Chat, db.clone(), Arc::new(DownBus));
        assert!(down.drain().await.is_err(), "{}", backend.name);
        let pending = docchat_common::outbox::entity::Entity::find()
            .count(&db)
            .await
            .unwrap();
        assert_eq!(pending, 250, "{}", backend.name);

        // Back: everything goes out once, in commit order, and the table empties.
        let relay = OutboxRelay::new(docchat_common::config::Service::Chat, db.clone(), bus.clone());
        assert_eq!(relay.drain().await.unwrap(), 250, "{}", backend.name);
        assert_eq!(relay.drain().await.unwrap(), 0, "{}", backend.name);
        let deadline = tokio::time::Instant::now() + Duration::from_secs(5);
        while seen.0.lock().unwrap().len() < 250 && tokio::time::Instant::now() < deadline {
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
        let got: Vec<String> = seen
            .0
            .lock()
            .unwrap()
            .iter()
            .map(|e| e.id.clone())
            .collect();
        let want: Vec<String> = events.iter().map(|e| e.id.clone()).collect();
        assert_eq!(got, want, "{}", backend.name);
        stop.cancel();
        tracker.close();
        tracker.wait().await;
    }
}

docchat_common::backend_tests! {
    async fn migrations_are_idempotent_and_safe_to_run_concurrently(backend) {
        let dir = tempfile::tempdir().unwrap();
        let url = backend.database_url(dir.path(), "migrate");
        let a = docchat_common::db::connect(&url).await.unwrap();
        let b = docchat_common::db::connect(&url).await.unwrap();
        let (ra, rb) = tokio::join!(
            docchat_common::db::migrate::<Migrator>(&a, "m"),
            docchat_common::db::migrate::<Migrator>(&b, "m")
        );
        ra.unwrap();
        rb.unwrap();
        docchat_common::db::migrate::<Migrator>(&a, "m")
            .await
            .unwrap();
    }
}
