//! Transactional outbox: a service writes the event row in the same transaction as the state
//! change; [`OutboxRelay`] publishes rows in order and deletes a batch once the bus confirmed
//! it. A crash between commit and publish only delays the event; a crash between publish and
//! delete publishes it again, which consumers absorb (they are idempotent on the event id).

use std::sync::Arc;
use std::time::Duration;

use docchat_proto::events::v1::Envelope;
use prost::Message;
use sea_orm::sea_query::InsertStatement;
use sea_orm::{
    ColumnTrait, ConnectionTrait, DatabaseConnection, DbErr, EntityTrait, PaginatorTrait,
    QueryFilter, QueryOrder, QuerySelect, QueryTrait, Set,
};
use tokio::sync::Notify;
use tokio_util::sync::CancellationToken;

use crate::bus::EventBus;

/// The `outbox_events` table.
pub mod entity {
    use sea_orm::entity::prelude::*;

    #[derive(Clone, Debug, PartialEq, Eq, DeriveEntityModel)]
    #[sea_orm(table_name = "outbox_events")]
    pub struct Model {
        #[sea_orm(primary_key)]
        pub seq: i64,
        #[sea_orm(unique)]
        pub event_id: String,
        pub routing_key: String,
        pub envelope: Vec<u8>,
        pub created_at: ChronoDateTimeUtc,
    }

    #[derive(Copy, Clone, Debug, EnumIter, DeriveRelation)]
    pub enum Relation {}

    impl ActiveModelBehavior for ActiveModel {}
}

pub use migration::CreateOutbox;

mod migration {
    use sea_orm_migration::prelude::*;

    /// Migration creating `outbox_events`; every service that publishes includes it.
    pub struct CreateOutbox;

    impl MigrationName for CreateOutbox {
        fn name(&self) -> &str {
            "m20261121_000000_create_outbox"
        }
    }

    #[derive(DeriveIden)]
    enum OutboxEvents {
        Table,
        Seq,
        EventId,
        RoutingKey,
        Envelope,
        CreatedAt,
    }

    #[async_trait::async_trait]
    impl MigrationTrait for CreateOutbox {
        async fn up(&self, manager: &SchemaManager) -> Result<(), DbErr> {
            manager
                .create_table(
                    Table::create()
                        .table(OutboxEvents::Table)
                        .if_not_exists()
                        .col(
                            ColumnDef::new(OutboxEvents::Seq)
                                .big_integer()
                                .not_null()
                                .auto_increment()
                                .primary_key(),
                        )
                        .col(
                            ColumnDef::new(OutboxEvents::EventId)
                                .string()
                                .not_null()
                                .unique_key(),
                        )
                        .col(ColumnDef::new(OutboxEvents::RoutingKey).string().not_null())
                        .col(ColumnDef::new(OutboxEvents::Envelope).binary().not_null())
                        .col(
                            ColumnDef::new(OutboxEvents::CreatedAt)
                                .timestamp_with_time_zone()
                                .not_null(),
                        )
                        .to_owned(),
                )
                .await
        }

        async fn down(&self, manager: &SchemaManager) -> Result<(), DbErr> {
            manager
                .drop_table(Table::drop().table(OutboxEvents::Table).to_owned())
                .await
        }
    }
}

/// Adds `event` to the outbox inside the caller's transaction.
pub async fn enqueue<C: ConnectionTrait>(conn: &C, event: &Envelope) -> Result<(), DbErr> {
    enqueue_all(conn, std::slice::from_ref(event)).await
}

/// Adds `events` to the outbox inside the caller's transaction: one INSERT, nothing read
/// back.
pub async fn enqueue_all<C: ConnectionTrait>(conn: &C, events: &[Envelope]) -> Result<(), DbErr> {
    if let Some(insert) = insert_statement(events) {
        conn.execute(conn.get_database_backend().build(&insert))
            .await?;
    }
    Ok(())
}

/// The INSERT adding `events` to the outbox (None for no events), for a caller that sends
/// it along with its other statements.
pub fn insert_statement(events: &[Envelope]) -> Option<InsertStatement> {
    if events.is_empty() {
        return None;
    }
    let at = crate::time::now();
    Some(
        entity::Entity::insert_many(events.iter().map(|event| entity::ActiveModel {
            event_id: Set(event.id.clone()),
            routing_key: Set(event.r#type.clone()),
            envelope: Set(event.encode_to_vec()),
            created_at: Set(at),
            ..Default::default()
        }))
        .into_query(),
    )
}

/// Publishes outbox rows to the bus in insertion order.
#[derive(Clone)]
pub struct OutboxRelay {
    /// Whose outbox: the metrics' `service` label.
    service: &'static str,
    db: DatabaseConnection,
    bus: Arc<dyn EventBus>,
    wake: Arc<Notify>,
    min_interval: Duration,
}

const BATCH: u64 = 100;
const POLL: Duration = Duration::from_millis(500);

impl OutboxRelay {
    pub fn new(
        service: crate::config::Service,
        db: DatabaseConnection,
        bus: Arc<dyn EventBus>,
    ) -> Self {
        OutboxRelay {
            service: service.name(),
            db,
            bus,
            wake: Arc::new(Notify::new()),
            min_interval: Duration::ZERO,
        }
    }

    /// Drains at most once per `interval`: a notification sooner after the last drain waits
    /// for the rest of it, so events written in quick succession go out in one batch (one
    /// read and one delete for all of them). An event after a quiet spell goes out at once.
    pub fn with_min_interval(mut self, interval: Duration) -> Self {
        self.min_interval = interval;
        self
    }

    /// Call after committing a transaction that enqueued events, to publish them now
    /// rather than at the next poll.
    pub fn notify(&self) {
        self.wake.notify_one();
    }

    /// Publishes what is pending; returns how many rows went out.
    pub async fn drain(&self) -> anyhow::Result<usize> {
        let mut sent = 0;
        loop {
            let rows = entity::Entity::find()
                .order_by_asc(entity::Column::Seq)
                .limit(BATCH)
                .all(&self.db)
                .await?;
            if rows.is_empty() {
                return Ok(sent);
            }
            let mut seqs = Vec::with_capacity(rows.len());
            for row in rows {
                match Envelope::decode(row.envelope.as_slice()) {
                    Ok(event) => self.bus.publish(&event).await?,
                    Err(e) => {
                        tracing::error!(event_id = %row.event_id, error = %e, "dropping undecodable outbox row");
                    }
                }
                seqs.push(row.seq);
            }
            // One DELETE a batch: a crash before it republishes at most a batch, and
            // consumers are idempotent on the envelope id.
            let batch = seqs.len();
            sent += batch;
            entity::Entity::delete_many()
                .filter(entity::Column::Seq.is_in(seqs))
                .exec(&self.db)
                .await?;
            crate::metrics::OUTBOX_RELAYED
                .with_label_values(&[self.service])
                .inc_by(u64::try_from(batch).unwrap_or(u64::MAX));
        }
    }

    /// Sets the backlog gauges: empty after a drain that succeeded, else what the table
    /// holds (one count and one row, read only when the bus is failing).
    async fn record_backlog(&self, drained: bool) {
        let (backlog, age) = if drained {
            (0, 0)
        } else {
            let count = entity::Entity::find().count(&self.db).await.unwrap_or(0);
            let oldest = entity::Entity::find()
                .order_by_asc(entity::Column::Seq)
                .one(&self.db)
                .await
                .ok()
                .flatten()
                .map(|row| (crate::time::now() - row.created_at).num_seconds().max(0))
                .unwrap_or(0);
            (i64::try_from(count).unwrap_or(i64::MAX), oldest)
        };
        crate::metrics::OUTBOX_BACKLOG
            .with_label_values(&[self.service])
            .set(backlog);
        crate::metrics::OUTBOX_OLDEST_AGE
            .with_label_values(&[self.service])
            .set(age);
    }

    /// Relays until `shutdown`, then makes one last attempt.
    pub async fn run(self, shutdown: CancellationToken) {
        loop {
            let drained = self.drain().await;
            if let Err(e) = &drained {
                tracing::warn!(error = %e, "outbox relay failed, retrying");
            }
            self.record_backlog(drained.is_ok()).await;
            let drained = tokio::time::Instant::now();
            tokio::select! {
                () = shutdown.cancelled() => break,
                () = self.wake.notified() => {}
                () = tokio::time::sleep(POLL) => {}
            }
            if !self.min_interval.is_zero() {
                tokio::select! {
                    () = shutdown.cancelled() => break,
                    () = tokio::time::sleep_until(drained + self.min_interval) => {}
                }
            }
        }
        if let Err(e) = self.drain().await {
            tracing::warn!(error = %e, "outbox not fully drained at shutdown; rows stay for the next start");
        }
    }
}
