//! How each page of a document was read (issue 43: scanned pages and images go through text
//! recognition): `page_sources` is a JSON object from page number to `text` (its text
//! layer), `tesseract` (recognized) or `failed`; `message` says which pages could not be
//! read and why. Documents from before, and those no page of which needed recognition, stay
//! `NULL`.

use sea_orm_migration::prelude::*;

#[derive(DeriveMigrationName)]
pub struct Migration;

#[derive(DeriveIden)]
enum Documents {
    Table,
    PageSources,
    Message,
}

#[async_trait::async_trait]
impl MigrationTrait for Migration {
    async fn up(&self, m: &SchemaManager) -> Result<(), DbErr> {
        // One column per statement: SQLite adds one at a time.
        for column in [Documents::PageSources, Documents::Message] {
            m.alter_table(
                Table::alter()
                    .table(Documents::Table)
                    .add_column(ColumnDef::new(column).text().null())
                    .to_owned(),
            )
            .await?;
        }
        Ok(())
    }

    async fn down(&self, m: &SchemaManager) -> Result<(), DbErr> {
        for column in [Documents::PageSources, Documents::Message] {
            m.alter_table(
                Table::alter()
                    .table(Documents::Table)
                    .drop_column(column)
                    .to_owned(),
            )
            .await?;
        }
        Ok(())
    }
}
