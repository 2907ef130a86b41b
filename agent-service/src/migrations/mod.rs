//! Schema of agent-service (SQLite and PostgreSQL). Tool preferences, session workspaces and their files' documents (issue 15); custom tools (issue 16); run leases (issue 17); the outbox is here from the start because every service publishes `job.*`.

use sea_orm_migration::prelude::*;

mod m20261124_000001_tool_preferences;
mod m20261124_000002_session_workspaces;
mod m20261124_000003_workspace_files;
mod m20261125_000001_custom_tools;
mod m20261125_000002_custom_agents;
mod m20261127_000001_run_leases;

pub struct Migrator;

#[async_trait::async_trait]
impl MigratorTrait for Migrator {
    fn migrations() -> Vec<Box<dyn MigrationTrait>> {
        vec![
            Box::new(docchat_common::outbox::CreateOutbox),
            Box::new(m20261124_000001_tool_preferences::Migration),
            Box::new(m20261124_000002_session_workspaces::Migration),
            Box::new(m20261124_000003_workspace_files::Migration),
            Box::new(m20261125_000001_custom_tools::Migration),
            Box::new(m20261125_000002_custom_agents::Migration),
            Box::new(m20261127_000001_run_leases::Migration),
        ]
    }
}
