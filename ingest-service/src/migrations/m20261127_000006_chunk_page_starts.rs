//! Where each page's part of a chunk starts (issue 18: a hit cites the page its matching
//! part lies on). Rows from before stay `NULL` and cite every page they touch.

use sea_orm_migration::prelude::*;

#[derive(DeriveMigrationName)]
pub struct Migration;

#[derive(DeriveIden)]
enum Chunks {
    Table,
    PageStarts,
}

#[async_trait::async_trait]
impl MigrationTrait for Migration {
    async fn up(&self, m: &SchemaManager) -> Result<(), DbErr> {
        m.alter_table(
            Table::alter()
                .table(Chunks::Table)
                .add_column(ColumnDef::new(Chunks::PageStarts).text().null())
                .to_owned(),
        )
        .await
    }

    async fn down(&self, m: &SchemaManager) -> Result<(), DbErr> {
        m.alter_table(
            Table::alter()
                .table(Chunks::Table)
                .drop_column(Chunks::PageStarts)
                .to_owned(),
        )
        .await
    }
}
