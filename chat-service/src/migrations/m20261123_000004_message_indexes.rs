//! Indexes for the two lookups every completion makes: the history before a question
//! (`session_id = ? AND id < ? ORDER BY id DESC LIMIT n`, which sorted the whole session
//! without one) and a question's reply (`reply_to = ?`).

use sea_orm_migration::prelude::*;

#[derive(DeriveMigrationName)]
pub struct Migration;

#[derive(DeriveIden)]
enum Messages {
    Table,
    Id,
    SessionId,
    ReplyTo,
}

#[async_trait::async_trait]
impl MigrationTrait for Migration {
    async fn up(&self, m: &SchemaManager) -> Result<(), DbErr> {
        m.create_index(
            Index::create()
                .name("idx_messages_session_id")
                .table(Messages::Table)
                .col(Messages::SessionId)
                .col(Messages::Id)
                .if_not_exists()
                .to_owned(),
        )
        .await?;
        m.create_index(
            Index::create()
                .name("idx_messages_reply_to")
                .table(Messages::Table)
                .col(Messages::ReplyTo)
                .if_not_exists()
                .to_owned(),
        )
        .await
    }

    async fn down(&self, m: &SchemaManager) -> Result<(), DbErr> {
        m.drop_index(Index::drop().name("idx_messages_reply_to").to_owned())
            .await?;
        m.drop_index(Index::drop().name("idx_messages_session_id").to_owned())
            .await
    }
}
