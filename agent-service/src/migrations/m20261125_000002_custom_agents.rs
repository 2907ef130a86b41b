//! Custom agents (issue 16): the agents users upload (their folder's bytes kept here, so
//! every replica can materialize them), their MCP-server → tool associations, their declared
//! environment keys → stored key associations, and the stored keys themselves (values
//! encrypted at rest; see custom_agents::cipher).

use sea_orm_migration::prelude::*;

#[derive(DeriveMigrationName)]
pub struct Migration;

#[derive(DeriveIden)]
enum CustomAgents {
    Table,
    Id,
    OwnerId,
    OwnerEmail,
    AgentName,
    AgentType,
    AgentArgs,
    Description,
    /// JSON list of `{name, args}`: metadata.json's mcp_servers.
    McpServers,
    /// The command metadata.json names (JSON list of strings).
    Command,
    /// A ZIP of the agent's folder alone.
    Folder,
    FolderSha256,
    CreatedAt,
    UpdatedAt,
}

#[derive(DeriveIden)]
enum CustomAgentToolAssociations {
    Table,
    Id,
    AgentId,
    OwnerId,
    McpServerName,
    /// NULL: unresolved.
    ToolId,
    CreatedAt,
}

#[derive(DeriveIden)]
enum CustomAgentKeyAssociations {
    Table,
    Id,
    AgentId,
    OwnerId,
    EnvKeyName,
    /// NULL: declared in envs.json, no key given yet.
    KeyId,
    RequirementType,
    /// envs.json's default for optional_with_default.
    DefaultValue,
    CreatedAt,
}

#[derive(DeriveIden)]
enum AgentKeys {
    Table,
    Id,
    OwnerId,
    OwnerEmail,
    Name,
    KeyType,
    Description,
    /// nonce ‖ ciphertext ‖ tag (ChaCha20-Poly1305).
    Sealed,
    CreatedAt,
    UpdatedAt,
}

fn id(c: impl IntoIden) -> ColumnDef {
    ColumnDef::new(c).string_len(64).not_null().to_owned()
}

fn at(c: impl IntoIden) -> ColumnDef {
    ColumnDef::new(c)
        .timestamp_with_time_zone()
        .not_null()
        .to_owned()
}

#[async_trait::async_trait]
impl MigrationTrait for Migration {
    async fn up(&self, m: &SchemaManager) -> Result<(), DbErr> {
        m.create_table(
            Table::create()
                .table(CustomAgents::Table)
                .if_not_exists()
                .col(id(CustomAgents::Id).primary_key())
                .col(id(CustomAgents::OwnerId))
                .col(ColumnDef::new(CustomAgents::OwnerEmail).text().not_null())
                .col(
                    ColumnDef::new(CustomAgents::AgentName)
                        .string_len(255)
                        .not_null(),
                )
                .col(
                    ColumnDef::new(CustomAgents::AgentType)
                        .string_len(32)
                        .not_null(),
                )
                .col(ColumnDef::new(CustomAgents::AgentArgs).text().not_null())
                .col(ColumnDef::new(CustomAgents::Description).text().not_null())
                .col(ColumnDef::new(CustomAgents::McpServers).text().not_null())
                .col(ColumnDef::new(CustomAgents::Command).text().not_null())
                .col(ColumnDef::new(CustomAgents::Folder).blob().not_null())
                .col(
                    ColumnDef::new(CustomAgents::FolderSha256)
                        .string_len(64)
                        .not_null(),
                )
                .col(at(CustomAgents::CreatedAt))
                .col(at(CustomAgents::UpdatedAt))
                .to_owned(),
        )
        .await?;
        m.create_index(
            Index::create()
                .if_not_exists()
                .name("custom_agents_owner_name")
                .table(CustomAgents::Table)
                .col(CustomAgents::OwnerId)
                .col(CustomAgents::AgentName)
                .unique()
                .to_owned(),
        )
        .await?;
        m.create_table(
            Table::create()
                .table(CustomAgentToolAssociations::Table)
                .if_not_exists()
                .col(id(CustomAgentToolAssociations::Id).primary_key())
                .col(id(CustomAgentToolAssociations::AgentId))
                .col(id(CustomAgentToolAssociations::OwnerId))
                .col(
                    ColumnDef::new(CustomAgentToolAssociations::McpServerName)
                        .string_len(255)
                        .not_null(),
                )
                .col(
                    ColumnDef::new(CustomAgentToolAssociations::ToolId)
                        .string_len(64)
                        .null(),
                )
                .col(at(CustomAgentToolAssociations::CreatedAt))
                .to_owned(),
        )
        .await?;
        m.create_table(
            Table::create()
                .table(CustomAgentKeyAssociations::Table)
                .if_not_exists()
                .col(id(CustomAgentKeyAssociations::Id).primary_key())
                .col(id(CustomAgentKeyAssociations::AgentId))
                .col(id(CustomAgentKeyAssociations::OwnerId))
                .col(
                    ColumnDef::new(CustomAgentKeyAssociations::EnvKeyName)
                        .string_len(255)
                        .not_null(),
                )
                .col(
                    ColumnDef::new(CustomAgentKeyAssociations::KeyId)
                        .string_len(64)
                        .null(),
                )
                .col(
                    ColumnDef::new(CustomAgentKeyAssociations::RequirementType)
                        .string_len(32)
                        .not_null(),
                )
                .col(
                    ColumnDef::new(CustomAgentKeyAssociations::DefaultValue)
                        .text()
                        .null(),
                )
                .col(at(CustomAgentKeyAssociations::CreatedAt))
                .to_owned(),
        )
        .await?;
        m.create_table(
            Table::create()
                .table(AgentKeys::Table)
                .if_not_exists()
                .col(id(AgentKeys::Id).primary_key())
                .col(id(AgentKeys::OwnerId))
                .col(ColumnDef::new(AgentKeys::OwnerEmail).text().not_null())
                .col(ColumnDef::new(AgentKeys::Name).string_len(255).not_null())
                .col(ColumnDef::new(AgentKeys::KeyType).string_len(16).not_null())
                .col(ColumnDef::new(AgentKeys::Description).text().not_null())
                .col(ColumnDef::new(AgentKeys::Sealed).blob().not_null())
                .col(at(AgentKeys::CreatedAt))
                .col(at(AgentKeys::UpdatedAt))
                .to_owned(),
        )
        .await?;
        m.create_index(
            Index::create()
                .if_not_exists()
                .name("agent_keys_owner_name")
                .table(AgentKeys::Table)
                .col(AgentKeys::OwnerId)
                .col(AgentKeys::Name)
                .unique()
                .to_owned(),
        )
        .await
    }

    async fn down(&self, m: &SchemaManager) -> Result<(), DbErr> {
        for t in [
            AgentKeys::Table.into_iden(),
            CustomAgentKeyAssociations::Table.into_iden(),
            CustomAgentToolAssociations::Table.into_iden(),
            CustomAgents::Table.into_iden(),
        ] {
            m.drop_table(Table::drop().table(t).to_owned()).await?;
        }
        Ok(())
    }
}
