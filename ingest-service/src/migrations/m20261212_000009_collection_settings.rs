//! What the h2oGPTe client stores with a collection and a document: a collection's
//! `collection_settings` and `chat_settings` (JSON objects of the client's CollectionSettings
//! and ChatSettings) and `metadata` (any JSON object); a document's `metadata` (any JSON
//! object) and `uri` (where it came from). Rows from before stay `NULL`: no settings, no
//! metadata, no URI.

use sea_orm_migration::prelude::*;

#[derive(DeriveMigrationName)]
pub struct Migration;

#[derive(DeriveIden)]
enum Collections {
    Table,
    CollectionSettings,
    ChatSettings,
    Metadata,
}

#[derive(DeriveIden)]
enum Documents {
    Table,
    Metadata,
    Uri,
}

#[async_trait::async_trait]
impl MigrationTrait for Migration {
    async fn up(&self, m: &SchemaManager) -> Result<(), DbErr> {
        // One column per statement: SQLite adds one at a time.
        for column in [
            Collections::CollectionSettings,
            Collections::ChatSettings,
            Collections::Metadata,
        ] {
            m.alter_table(
                Table::alter()
                    .table(Collections::Table)
                    .add_column(ColumnDef::new(column).text().null())
                    .to_owned(),
            )
            .await?;
        }
        for column in [Documents::Metadata, Documents::Uri] {
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
        for column in [
            Collections::CollectionSettings,
            Collections::ChatSettings,
            Collections::Metadata,
        ] {
            m.alter_table(
                Table::alter()
                    .table(Collections::Table)
                    .drop_column(column)
                    .to_owned(),
            )
            .await?;
        }
        for column in [Documents::Metadata, Documents::Uri] {
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
