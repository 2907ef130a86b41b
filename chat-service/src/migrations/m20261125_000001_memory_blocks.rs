//! Memory blocks (memory_blocks.rs): the blocks, their user and group shares, and each
//! user's default block per scope (llm, agent).

use sea_orm_migration::prelude::*;

#[derive(DeriveMigrationName)]
pub struct Migration;

#[derive(DeriveIden)]
enum MemoryBlocks {
    Table,
    Id,
    OwnerId,
    OwnerUsername,
    Name,
    Content,
    SystemPromptAmendment,
    InjectionMode,
    AccessMode,
    MaxContentLength,
    IsAuto,
    IsPublic,
    PublicEdit,
    CreatedAt,
    UpdatedAt,
}

/// One row per grant: `kind` user (principal = user id) or group (principal = group id).
#[derive(DeriveIden)]
enum MemoryBlockShares {
    Table,
    BlockId,
    Kind,
    Principal,
    Username,
    CanEdit,
}

#[derive(DeriveIden)]
enum MemoryBlockDefaults {
    Table,
    UserId,
    Scope,
    BlockId,
}

#[async_trait::async_trait]
impl MigrationTrait for Migration {
    async fn up(&self, m: &SchemaManager) -> Result<(), DbErr> {
        m.create_table(
            Table::create()
                .table(MemoryBlocks::Table)
                .if_not_exists()
                .col(
                    ColumnDef::new(MemoryBlocks::Id)
                        .string_len(64)
                        .not_null()
                        .primary_key(),
                )
                .col(ColumnDef::new(MemoryBlocks::OwnerId).string_len(64).not_null())
                .col(ColumnDef::new(MemoryBlocks::OwnerUsername).string().not_null())
                .col(ColumnDef::new(MemoryBlocks::Name).string().not_null())
                .col(ColumnDef::new(MemoryBlocks::Content).text().not_null())
                .col(
                    ColumnDef::new(MemoryBlocks::SystemPromptAmendment)
                        .text()
                        .not_null(),
                )
                .col(ColumnDef::new(MemoryBlocks::InjectionMode).string_len(32).not_null())
                .col(ColumnDef::new(MemoryBlocks::AccessMode).string_len(32).not_null())
                .col(ColumnDef::new(MemoryBlocks::MaxContentLength).big_integer().not_null())
                .col(ColumnDef::new(MemoryBlocks::IsAuto).boolean().not_null().default(false))
                .col(ColumnDef::new(MemoryBlocks::IsPublic).boolean().not_null().default(false))
                .col(ColumnDef::new(MemoryBlocks::PublicEdit).boolean().not_null().default(false))
                .col(
                    ColumnDef::new(MemoryBlocks::CreatedAt)
                        .timestamp_with_time_zone()
                        .not_null(),
                )
                .col(
                    ColumnDef::new(MemoryBlocks::UpdatedAt)
                        .timestamp_with_time_zone()
                        .not_null(),
                )
                .to_owned(),
        )
        .await?;
        // The name is unique per owner (409 on a duplicate, even under a race).
        m.create_index(
            Index::create()
                .name("idx_memory_blocks_owner_name")
                .table(MemoryBlocks::Table)
                .col(MemoryBlocks::OwnerId)
                .col(MemoryBlocks::Name)
                .unique()
                .if_not_exists()
                .to_owned(),
        )
        .await?;
        m.create_table(
            Table::create()
                .table(MemoryBlockShares::Table)
                .if_not_exists()
                .col(ColumnDef::new(MemoryBlockShares::BlockId).string_len(64).not_null())
                .col(ColumnDef::new(MemoryBlockShares::Kind).string_len(8).not_null())
                .col(ColumnDef::new(MemoryBlockShares::Principal).string().not_null())
                .col(ColumnDef::new(MemoryBlockShares::Username).string().not_null())
                .col(ColumnDef::new(MemoryBlockShares::CanEdit).boolean().not_null())
                .primary_key(
                    Index::create()
                        .col(MemoryBlockShares::BlockId)
                        .col(MemoryBlockShares::Kind)
                        .col(MemoryBlockShares::Principal),
                )
                .to_owned(),
        )
        .await?;
        m.create_index(
            Index::create()
                .name("idx_memory_block_shares_principal")
                .table(MemoryBlockShares::Table)
                .col(MemoryBlockShares::Principal)
                .if_not_exists()
                .to_owned(),
        )
        .await?;
        m.create_table(
            Table::create()
                .table(MemoryBlockDefaults::Table)
                .if_not_exists()
                .col(ColumnDef::new(MemoryBlockDefaults::UserId).string_len(64).not_null())
                .col(ColumnDef::new(MemoryBlockDefaults::Scope).string_len(16).not_null())
                .col(ColumnDef::new(MemoryBlockDefaults::BlockId).string_len(64).not_null())
                .primary_key(
                    Index::create()
                        .col(MemoryBlockDefaults::UserId)
                        .col(MemoryBlockDefaults::Scope),
                )
                .to_owned(),
        )
        .await
    }

    async fn down(&self, m: &SchemaManager) -> Result<(), DbErr> {
        m.drop_table(Table::drop().table(MemoryBlockDefaults::Table).to_owned())
            .await?;
        m.drop_table(Table::drop().table(MemoryBlockShares::Table).to_owned())
            .await?;
        m.drop_table(Table::drop().table(MemoryBlocks::Table).to_owned())
            .await
    }
}
