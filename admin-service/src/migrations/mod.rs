//! Schema of admin-service; written with the schema builder so it runs on SQLite and
//! PostgreSQL alike.

use sea_orm_migration::prelude::*;

mod m20261121_000001_identity;
mod m20261122_000002_llm_usage;
mod m20261125_000003_job_history;
mod m20261208_000004_key_inactivity;

pub struct Migrator;

#[async_trait::async_trait]
impl MigratorTrait for Migrator {
    fn migrations() -> Vec<Box<dyn MigrationTrait>> {
        vec![
            Box::new(m20261121_000001_identity::Migration),
            Box::new(m20261122_000002_llm_usage::Migration),
            Box::new(m20261125_000003_job_history::Migration),
            Box::new(m20261208_000004_key_inactivity::Migration),
        ]
    }
}
