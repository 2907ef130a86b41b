//! Schema of scheduler-service (SQLite and PostgreSQL): the outbox every service has, then
//! the tasks and their executions.

use sea_orm_migration::prelude::*;

mod m20261125_000001_tasks;

pub struct Migrator;

#[async_trait::async_trait]
impl MigratorTrait for Migrator {
    fn migrations() -> Vec<Box<dyn MigrationTrait>> {
        vec![
            Box::new(docchat_common::outbox::CreateOutbox),
            Box::new(m20261125_000001_tasks::Migration),
        ]
    }
}
