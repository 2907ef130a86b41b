//! What a reply being generated has used so far (its model calls, JSON), written with its
//! progress, so a reply recovered from a dead replica books its usage (recovery.rs).

use sea_orm_migration::prelude::*;

#[derive(DeriveMigrationName)]
pub struct Migration;

#[derive(DeriveIden)]
enum ActiveCompletions {
    Table,
    Usage,
}

#[async_trait::async_trait]
impl MigrationTrait for Migration {
    async fn up(&self, m: &SchemaManager) -> Result<(), DbErr> {
        m.alter_table(
            Table::alter()
                .table(ActiveCompletions::Table)
                .add_column(ColumnDef::new(ActiveCompletions::Usage).text().null())
                .to_owned(),
        )
        .await
    }

    async fn down(&self, m: &SchemaManager) -> Result<(), DbErr> {
        m.alter_table(
            Table::alter()
                .table(ActiveCompletions::Table)
                .drop_column(ActiveCompletions::Usage)
                .to_owned(),
        )
        .await
    }
}
