//! Schema of agent-service (SQLite and PostgreSQL). Its domain tables arrive with the agent
//! issue; the outbox is here from the start because every service publishes `job.*`.

use sea_orm_migration::prelude::*;

pub struct Migrator;

#[async_trait::async_trait]
impl MigratorTrait for Migrator {
    fn migrations() -> Vec<Box<dyn MigrationTrait>> {
        vec![Box::new(docchat_common::outbox::CreateOutbox)]
    }
}
