//! What a reply being generated holds so far, written by its replica at a bounded rate
//! (limits.rs), so a replica that dies leaves it to be recovered (recovery.rs).

use sea_orm_migration::prelude::*;

#[derive(DeriveMigrationName)]
pub struct Migration;

#[derive(DeriveIden)]
enum ActiveCompletions {
    Table,
    Progress,
}

#[async_trait::async_trait]
impl MigrationTrait for Migration {
    async fn up(&self, m: &SchemaManager) -> Result<(), DbErr> {
        m.alter_table(
            Table::alter()
                .table(ActiveCompletions::Table)
                .add_column(ColumnDef::new(ActiveCompletions::Progress).text().null())
                .to_owned(),
        )
        .await
    }

    async fn down(&self, m: &SchemaManager) -> Result<(), DbErr> {
        m.alter_table(
            Table::alter()
                .table(ActiveCompletions::Table)
                .drop_column(ActiveCompletions::Progress)
                .to_owned(),
        )
        .await
    }
}
