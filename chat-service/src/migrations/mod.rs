//! Schema of chat-service (SQLite and PostgreSQL).

use sea_orm_migration::prelude::*;

mod m20261121_000001_sessions;
mod m20261122_000002_replies;
mod m20261122_000003_active;
mod m20261123_000004_message_indexes;
mod m20261124_000005_reference_deleted;
mod m20261124_000006_rate_windows;
mod m20261124_000007_completion_progress;
mod m20261125_000001_memory_blocks;
mod m20261129_000001_completion_usage;
mod m20261130_000001_reply_streams;

pub struct Migrator;

#[async_trait::async_trait]
impl MigratorTrait for Migrator {
    fn migrations() -> Vec<Box<dyn MigrationTrait>> {
        vec![
            Box::new(docchat_common::outbox::CreateOutbox),
            Box::new(m20261121_000001_sessions::Migration),
            Box::new(m20261122_000002_replies::Migration),
            Box::new(m20261122_000003_active::Migration),
            Box::new(m20261123_000004_message_indexes::Migration),
            Box::new(m20261124_000005_reference_deleted::Migration),
            Box::new(m20261124_000006_rate_windows::Migration),
            Box::new(m20261124_000007_completion_progress::Migration),
            Box::new(m20261125_000001_memory_blocks::Migration),
            Box::new(m20261129_000001_completion_usage::Migration),
            Box::new(m20261130_000001_reply_streams::Migration),
        ]
    }
}
