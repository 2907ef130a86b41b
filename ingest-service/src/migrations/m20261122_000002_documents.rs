//! Uploads, ingestion jobs, documents and chunks. Lexical search needs backend-specific DDL
//! (an FTS5 table on SQLite, a generated tsvector with a GIN index on PostgreSQL); that part
//! is raw SQL, the rest the schema builder.

use sea_orm_migration::prelude::*;
use sea_orm_migration::sea_orm::{ConnectionTrait, DbBackend};

#[derive(DeriveMigrationName)]
pub struct Migration;

#[derive(DeriveIden)]
enum Uploads {
    Table,
    Id,
    OwnerId,
    Filename,
    Size,
    Sha256,
    CreatedAt,
}

#[derive(DeriveIden)]
enum Jobs {
    Table,
    Id,
    Kind,
    OwnerId,
    OwnerUsername,
    Status,
    Queue,
    Progress,
    Errors,
    CollectionId,
    CollectionName,
    UploadId,
    DocumentId,
    Params,
    Attempts,
    LeaseUntil,
    CreatedAt,
    UpdatedAt,
    StartedAt,
    FinishedAt,
}

#[derive(DeriveIden)]
enum Documents {
    Table,
    Id,
    OwnerId,
    OwnerUsername,
    CollectionId,
    Name,
    Kind,
    Size,
    PageCount,
    Status,
    UploadId,
    ChatSessionId,
    Summary,
    Questions,
    Segments,
    CreatedAt,
    UpdatedAt,
}

#[derive(DeriveIden)]
enum Chunks {
    Table,
    Id,
    DocumentId,
    CollectionId,
    ChunkIndex,
    Text,
    Pages,
    Heading,
    StartTime,
    EndTime,
    Embedding,
}

#[derive(DeriveIden)]
enum Collections {
    Table,
    IndexVersion,
}

fn ts(col: impl IntoIden) -> ColumnDef {
    ColumnDef::new(col)
        .timestamp_with_time_zone()
        .not_null()
        .to_owned()
}

fn ts_null(col: impl IntoIden) -> ColumnDef {
    ColumnDef::new(col)
        .timestamp_with_time_zone()
        .null()
        .to_owned()
}

fn id(col: impl IntoIden) -> ColumnDef {
    ColumnDef::new(col).string_len(64).not_null().to_owned()
}

#[async_trait::async_trait]
impl MigrationTrait for Migration {
    async fn up(&self, m: &SchemaManager) -> Result<(), DbErr> {
        m.create_table(
            Table::create()
                .table(Uploads::Table)
                .if_not_exists()
                .col(id(Uploads::Id).primary_key())
                .col(id(Uploads::OwnerId))
                .col(
                    ColumnDef::new(Uploads::Filename)
                        .string_len(1024)
                        .not_null(),
                )
                .col(ColumnDef::new(Uploads::Size).big_integer().not_null())
                .col(ColumnDef::new(Uploads::Sha256).string_len(64).not_null())
                .col(ts(Uploads::CreatedAt))
                .to_owned(),
        )
        .await?;
        m.create_table(
            Table::create()
                .table(Jobs::Table)
                .if_not_exists()
                .col(id(Jobs::Id).primary_key())
                .col(ColumnDef::new(Jobs::Kind).string_len(64).not_null())
                .col(id(Jobs::OwnerId))
                .col(
                    ColumnDef::new(Jobs::OwnerUsername)
                        .string_len(255)
                        .not_null(),
                )
                .col(ColumnDef::new(Jobs::Status).string_len(16).not_null())
                .col(ColumnDef::new(Jobs::Queue).string_len(16).not_null())
                .col(
                    ColumnDef::new(Jobs::Progress)
                        .double()
                        .not_null()
                        .default(0.0),
                )
                .col(ColumnDef::new(Jobs::Errors).text().not_null())
                .col(id(Jobs::CollectionId))
                .col(
                    ColumnDef::new(Jobs::CollectionName)
                        .string_len(255)
                        .not_null(),
                )
                .col(ColumnDef::new(Jobs::UploadId).string_len(64).null())
                .col(ColumnDef::new(Jobs::DocumentId).string_len(64).null())
                .col(ColumnDef::new(Jobs::Params).text().not_null())
                .col(
                    ColumnDef::new(Jobs::Attempts)
                        .integer()
                        .not_null()
                        .default(0),
                )
                .col(ts_null(Jobs::LeaseUntil))
                .col(ts(Jobs::CreatedAt))
                .col(ts(Jobs::UpdatedAt))
                .col(ts_null(Jobs::StartedAt))
                .col(ts_null(Jobs::FinishedAt))
                .to_owned(),
        )
        .await?;
        m.create_index(
            Index::create()
                .name("idx_jobs_status_queue_created")
                .table(Jobs::Table)
                .col(Jobs::Status)
                .col(Jobs::Queue)
                .col(Jobs::CreatedAt)
                .if_not_exists()
                .to_owned(),
        )
        .await?;
        m.create_index(
            Index::create()
                .name("idx_jobs_owner_created")
                .table(Jobs::Table)
                .col(Jobs::OwnerId)
                .col(Jobs::CreatedAt)
                .if_not_exists()
                .to_owned(),
        )
        .await?;
        m.create_table(
            Table::create()
                .table(Documents::Table)
                .if_not_exists()
                .col(id(Documents::Id).primary_key())
                .col(id(Documents::OwnerId))
                .col(
                    ColumnDef::new(Documents::OwnerUsername)
                        .string_len(255)
                        .not_null(),
                )
                .col(id(Documents::CollectionId))
                .col(ColumnDef::new(Documents::Name).string_len(1024).not_null())
                .col(ColumnDef::new(Documents::Kind).string_len(32).not_null())
                .col(ColumnDef::new(Documents::Size).big_integer().not_null())
                .col(
                    ColumnDef::new(Documents::PageCount)
                        .big_integer()
                        .not_null(),
                )
                .col(ColumnDef::new(Documents::Status).string_len(16).not_null())
                .col(ColumnDef::new(Documents::UploadId).string_len(64).null())
                .col(
                    ColumnDef::new(Documents::ChatSessionId)
                        .string_len(64)
                        .null(),
                )
                .col(ColumnDef::new(Documents::Summary).text().null())
                .col(ColumnDef::new(Documents::Questions).text().null())
                .col(ColumnDef::new(Documents::Segments).text().null())
                .col(ts(Documents::CreatedAt))
                .col(ts(Documents::UpdatedAt))
                .to_owned(),
        )
        .await?;
        for (name, col) in [
            ("idx_documents_collection", Documents::CollectionId),
            ("idx_documents_owner", Documents::OwnerId),
            ("idx_documents_chat_session", Documents::ChatSessionId),
        ] {
            m.create_index(
                Index::create()
                    .name(name)
                    .table(Documents::Table)
                    .col(col)
                    .if_not_exists()
                    .to_owned(),
            )
            .await?;
        }
        m.create_table(
            Table::create()
                .table(Chunks::Table)
                .if_not_exists()
                .col(
                    ColumnDef::new(Chunks::Id)
                        .big_integer()
                        .not_null()
                        .auto_increment()
                        .primary_key(),
                )
                .col(id(Chunks::DocumentId))
                .col(id(Chunks::CollectionId))
                .col(ColumnDef::new(Chunks::ChunkIndex).integer().not_null())
                .col(ColumnDef::new(Chunks::Text).text().not_null())
                .col(ColumnDef::new(Chunks::Pages).string_len(1024).not_null())
                .col(ColumnDef::new(Chunks::Heading).text().null())
                .col(ColumnDef::new(Chunks::StartTime).double().null())
                .col(ColumnDef::new(Chunks::EndTime).double().null())
                .col(ColumnDef::new(Chunks::Embedding).binary().not_null())
                .foreign_key(
                    ForeignKey::create()
                        .from(Chunks::Table, Chunks::DocumentId)
                        .to(Documents::Table, Documents::Id)
                        .on_delete(ForeignKeyAction::Cascade),
                )
                .to_owned(),
        )
        .await?;
        m.create_index(
            Index::create()
                .name("idx_chunks_collection")
                .table(Chunks::Table)
                .col(Chunks::CollectionId)
                .if_not_exists()
                .to_owned(),
        )
        .await?;
        m.create_index(
            Index::create()
                .name("idx_chunks_document")
                .table(Chunks::Table)
                .col(Chunks::DocumentId)
                .col(Chunks::ChunkIndex)
                .unique()
                .if_not_exists()
                .to_owned(),
        )
        .await?;
        // Bumped on every change to a collection's chunks: replicas reload their in-process
        // vector index when the stored version differs from theirs.
        m.alter_table(
            Table::alter()
                .table(Collections::Table)
                .add_column(
                    ColumnDef::new(Collections::IndexVersion)
                        .big_integer()
                        .not_null()
                        .default(0),
                )
                .to_owned(),
        )
        .await?;

        let db = m.get_connection();
        match db.get_database_backend() {
            DbBackend::Sqlite => {
                db.execute_unprepared(
                    "CREATE VIRTUAL TABLE IF NOT EXISTS chunks_fts USING fts5(
                        text, content='chunks', content_rowid='id', tokenize='porter unicode61');
                     CREATE TRIGGER IF NOT EXISTS chunks_ai AFTER INSERT ON chunks BEGIN
                        INSERT INTO chunks_fts(rowid, text) VALUES (new.id, new.text);
                     END;
                     CREATE TRIGGER IF NOT EXISTS chunks_ad AFTER DELETE ON chunks BEGIN
                        INSERT INTO chunks_fts(chunks_fts, rowid, text) VALUES ('delete', old.id, old.text);
                     END;",
                )
                .await?;
            }
            DbBackend::Postgres => {
                db.execute_unprepared(
                    "ALTER TABLE chunks ADD COLUMN IF NOT EXISTS tsv tsvector
                        GENERATED ALWAYS AS (to_tsvector('english', text)) STORED;
                     CREATE INDEX IF NOT EXISTS idx_chunks_tsv ON chunks USING GIN (tsv);",
                )
                .await?;
            }
            DbBackend::MySql => {
                return Err(DbErr::Migration("MySQL is not supported".into()));
            }
        }
        Ok(())
    }

    async fn down(&self, m: &SchemaManager) -> Result<(), DbErr> {
        let db = m.get_connection();
        if db.get_database_backend() == DbBackend::Sqlite {
            db.execute_unprepared("DROP TABLE IF EXISTS chunks_fts")
                .await?;
        }
        for t in [
            Chunks::Table.into_iden(),
            Documents::Table.into_iden(),
            Jobs::Table.into_iden(),
            Uploads::Table.into_iden(),
        ] {
            m.drop_table(Table::drop().table(t).if_exists().to_owned())
                .await?;
        }
        Ok(())
    }
}
