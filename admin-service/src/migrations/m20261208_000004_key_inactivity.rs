//! An API key's inactivity interval (the client's `set_api_key_inactivity_interval`): a key
//! not used for this many days stops working. Keys from before have none.

use sea_orm_migration::prelude::*;

#[derive(DeriveMigrationName)]
pub struct Migration;

#[derive(DeriveIden)]
enum ApiKeys {
    Table,
    InactivityDays,
}

#[async_trait::async_trait]
impl MigrationTrait for Migration {
    async fn up(&self, m: &SchemaManager) -> Result<(), DbErr> {
        m.alter_table(
            Table::alter()
                .table(ApiKeys::Table)
                .add_column(ColumnDef::new(ApiKeys::InactivityDays).integer().null())
                .to_owned(),
        )
        .await
    }

    async fn down(&self, m: &SchemaManager) -> Result<(), DbErr> {
        m.alter_table(
            Table::alter()
                .table(ApiKeys::Table)
                .drop_column(ApiKeys::InactivityDays)
                .to_owned(),
        )
        .await
    }
}
