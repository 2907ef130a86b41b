use sea_orm_migration::prelude::*;

#[derive(DeriveMigrationName)]
pub struct Migration;

#[derive(DeriveIden)]
enum ChatSessions {
    Table,
    Id,
    OwnerId,
    OwnerUsername,
    Name,
    CollectionId,
    CollectionName,
    LatestMessageContent,
    CreatedAt,
    UpdatedAt,
}

#[derive(DeriveIden)]
enum Messages {
    Table,
    Id,
    SessionId,
    OwnerId,
    Username,
    Content,
    ReplyTo,
    Votes,
    HasReferences,
    TotalReferences,
    Error,
    CreatedAt,
}

#[async_trait::async_trait]
impl MigrationTrait for Migration {
    async fn up(&self, m: &SchemaManager) -> Result<(), DbErr> {
        m.create_table(
            Table::create()
                .table(ChatSessions::Table)
                .if_not_exists()
                .col(ColumnDef::new(ChatSessions::Id).string_len(64).not_null().primary_key())
                .col(ColumnDef::new(ChatSessions::OwnerId).string_len(64).not_null())
                .col(ColumnDef::new(ChatSessions::OwnerUsername).string_len(255).not_null())
                .col(ColumnDef::new(ChatSessions::Name).string_len(255).null())
                .col(ColumnDef::new(ChatSessions::CollectionId).string_len(64).null())
                .col(ColumnDef::new(ChatSessions::CollectionName).string_len(255).null())
                .col(ColumnDef::new(ChatSessions::LatestMessageContent).text().null())
                .col(ColumnDef::new(ChatSessions::CreatedAt).timestamp_with_time_zone().not_null())
                .col(ColumnDef::new(ChatSessions::UpdatedAt).timestamp_with_time_zone().not_null())
                .to_owned(),
        )
        .await?;
        m.create_index(
            Index::create()
                .name("idx_chat_sessions_owner_updated")
                .table(ChatSessions::Table)
                .col(ChatSessions::OwnerId)
                .col(ChatSessions::UpdatedAt)
                .if_not_exists()
                .to_owned(),
        )
        .await?;
        m.create_table(
            Table::create()
                .table(Messages::Table)
                .if_not_exists()
                .col(ColumnDef::new(Messages::Id).string_len(64).not_null().primary_key())
                .col(ColumnDef::new(Messages::SessionId).string_len(64).not_null())
                .col(ColumnDef::new(Messages::OwnerId).string_len(64).not_null())
                .col(ColumnDef::new(Messages::Username).string_len(255).not_null())
                .col(ColumnDef::new(Messages::Content).text().not_null())
                .col(ColumnDef::new(Messages::ReplyTo).string_len(64).null())
                .col(ColumnDef::new(Messages::Votes).big_integer().not_null().default(0))
                .col(ColumnDef::new(Messages::HasReferences).boolean().not_null().default(false))
                .col(ColumnDef::new(Messages::TotalReferences).big_integer().not_null().default(0))
                .col(ColumnDef::new(Messages::Error).text().null())
                .col(ColumnDef::new(Messages::CreatedAt).timestamp_with_time_zone().not_null())
                .foreign_key(
                    ForeignKey::create()
                        .from(Messages::Table, Messages::SessionId)
                        .to(ChatSessions::Table, ChatSessions::Id)
                        .on_delete(ForeignKeyAction::Cascade),
                )
                .to_owned(),
        )
        .await?;
        m.create_index(
            Index::create()
                .name("idx_messages_session_created")
                .table(Messages::Table)
                .col(Messages::SessionId)
                .col(Messages::CreatedAt)
                .if_not_exists()
                .to_owned(),
        )
        .await
    }

    async fn down(&self, m: &SchemaManager) -> Result<(), DbErr> {
        m.drop_table(Table::drop().table(Messages::Table).if_exists().to_owned())
            .await?;
        m.drop_table(Table::drop().table(ChatSessions::Table).if_exists().to_owned())
            .await
    }
}
