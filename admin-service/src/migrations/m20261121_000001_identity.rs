use sea_orm_migration::prelude::*;

#[derive(DeriveMigrationName)]
pub struct Migration;

#[derive(DeriveIden)]
enum Users {
    Table,
    Id,
    Username,
    Email,
    CreatedAt,
}

#[derive(DeriveIden)]
enum ApiKeys {
    Table,
    Id,
    UserId,
    Name,
    KeyHash,
    Hint,
    CreatedAt,
    ExpiresAt,
    LastUsedAt,
    TotalCalls,
    IsActive,
}

#[derive(DeriveIden)]
enum Roles {
    Table,
    Id,
    Name,
    Description,
    Priority,
    CreatedAt,
}

#[derive(DeriveIden)]
enum RolePermissions {
    Table,
    RoleId,
    Permission,
}

#[derive(DeriveIden)]
enum UserRoles {
    Table,
    UserId,
    RoleId,
}

#[derive(DeriveIden)]
enum UserGroups {
    Table,
    UserId,
    GroupId,
}

#[derive(DeriveIden)]
enum Settings {
    Table,
    Scope,
    ScopeId,
    KeyName,
    StringValue,
    CanOverwrite,
    IsPublic,
    UpdatedAt,
}

fn id(col: impl IntoIden) -> ColumnDef {
    ColumnDef::new(col).string_len(64).not_null().to_owned()
}

fn ts(col: impl IntoIden) -> ColumnDef {
    ColumnDef::new(col)
        .timestamp_with_time_zone()
        .not_null()
        .to_owned()
}

#[async_trait::async_trait]
impl MigrationTrait for Migration {
    async fn up(&self, m: &SchemaManager) -> Result<(), DbErr> {
        m.create_table(
            Table::create()
                .table(Users::Table)
                .if_not_exists()
                .col(id(Users::Id).primary_key())
                .col(
                    ColumnDef::new(Users::Username)
                        .string_len(255)
                        .not_null()
                        .unique_key(),
                )
                .col(ColumnDef::new(Users::Email).string_len(255).not_null())
                .col(ts(Users::CreatedAt))
                .to_owned(),
        )
        .await?;
        m.create_table(
            Table::create()
                .table(ApiKeys::Table)
                .if_not_exists()
                .col(id(ApiKeys::Id).primary_key())
                .col(id(ApiKeys::UserId))
                .col(ColumnDef::new(ApiKeys::Name).string_len(255).not_null())
                .col(
                    ColumnDef::new(ApiKeys::KeyHash)
                        .string_len(64)
                        .not_null()
                        .unique_key(),
                )
                .col(ColumnDef::new(ApiKeys::Hint).string_len(32).not_null())
                .col(ts(ApiKeys::CreatedAt))
                .col(
                    ColumnDef::new(ApiKeys::ExpiresAt)
                        .timestamp_with_time_zone()
                        .null(),
                )
                .col(
                    ColumnDef::new(ApiKeys::LastUsedAt)
                        .timestamp_with_time_zone()
                        .null(),
                )
                .col(
                    ColumnDef::new(ApiKeys::TotalCalls)
                        .big_integer()
                        .not_null()
                        .default(0),
                )
                .col(
                    ColumnDef::new(ApiKeys::IsActive)
                        .boolean()
                        .not_null()
                        .default(true),
                )
                .foreign_key(
                    ForeignKey::create()
                        .from(ApiKeys::Table, ApiKeys::UserId)
                        .to(Users::Table, Users::Id)
                        .on_delete(ForeignKeyAction::Cascade),
                )
                .to_owned(),
        )
        .await?;
        m.create_index(
            Index::create()
                .name("idx_api_keys_user")
                .table(ApiKeys::Table)
                .col(ApiKeys::UserId)
                .if_not_exists()
                .to_owned(),
        )
        .await?;
        m.create_table(
            Table::create()
                .table(Roles::Table)
                .if_not_exists()
                .col(id(Roles::Id).primary_key())
                .col(
                    ColumnDef::new(Roles::Name)
                        .string_len(255)
                        .not_null()
                        .unique_key(),
                )
                .col(ColumnDef::new(Roles::Description).text().not_null())
                .col(
                    ColumnDef::new(Roles::Priority)
                        .integer()
                        .not_null()
                        .default(0),
                )
                .col(ts(Roles::CreatedAt))
                .to_owned(),
        )
        .await?;
        m.create_table(
            Table::create()
                .table(RolePermissions::Table)
                .if_not_exists()
                .col(id(RolePermissions::RoleId))
                .col(
                    ColumnDef::new(RolePermissions::Permission)
                        .string_len(255)
                        .not_null(),
                )
                .primary_key(
                    Index::create()
                        .col(RolePermissions::RoleId)
                        .col(RolePermissions::Permission),
                )
                .foreign_key(
                    ForeignKey::create()
                        .from(RolePermissions::Table, RolePermissions::RoleId)
                        .to(Roles::Table, Roles::Id)
                        .on_delete(ForeignKeyAction::Cascade),
                )
                .to_owned(),
        )
        .await?;
        m.create_table(
            Table::create()
                .table(UserRoles::Table)
                .if_not_exists()
                .col(id(UserRoles::UserId))
                .col(id(UserRoles::RoleId))
                .primary_key(
                    Index::create()
                        .col(UserRoles::UserId)
                        .col(UserRoles::RoleId),
                )
                .foreign_key(
                    ForeignKey::create()
                        .from(UserRoles::Table, UserRoles::UserId)
                        .to(Users::Table, Users::Id)
                        .on_delete(ForeignKeyAction::Cascade),
                )
                .foreign_key(
                    ForeignKey::create()
                        .from(UserRoles::Table, UserRoles::RoleId)
                        .to(Roles::Table, Roles::Id)
                        .on_delete(ForeignKeyAction::Cascade),
                )
                .to_owned(),
        )
        .await?;
        m.create_table(
            Table::create()
                .table(UserGroups::Table)
                .if_not_exists()
                .col(id(UserGroups::UserId))
                .col(
                    ColumnDef::new(UserGroups::GroupId)
                        .string_len(255)
                        .not_null(),
                )
                .primary_key(
                    Index::create()
                        .col(UserGroups::UserId)
                        .col(UserGroups::GroupId),
                )
                .foreign_key(
                    ForeignKey::create()
                        .from(UserGroups::Table, UserGroups::UserId)
                        .to(Users::Table, Users::Id)
                        .on_delete(ForeignKeyAction::Cascade),
                )
                .to_owned(),
        )
        .await?;
        m.create_table(
            Table::create()
                .table(Settings::Table)
                .if_not_exists()
                .col(ColumnDef::new(Settings::Scope).string_len(16).not_null())
                .col(ColumnDef::new(Settings::ScopeId).string_len(64).not_null())
                .col(ColumnDef::new(Settings::KeyName).string_len(128).not_null())
                .col(ColumnDef::new(Settings::StringValue).text().not_null())
                .col(
                    ColumnDef::new(Settings::CanOverwrite)
                        .boolean()
                        .not_null()
                        .default(true),
                )
                .col(
                    ColumnDef::new(Settings::IsPublic)
                        .boolean()
                        .not_null()
                        .default(false),
                )
                .col(ts(Settings::UpdatedAt))
                .primary_key(
                    Index::create()
                        .col(Settings::Scope)
                        .col(Settings::ScopeId)
                        .col(Settings::KeyName),
                )
                .to_owned(),
        )
        .await?;
        Ok(())
    }

    async fn down(&self, m: &SchemaManager) -> Result<(), DbErr> {
        for t in [
            Settings::Table.into_iden(),
            UserGroups::Table.into_iden(),
            UserRoles::Table.into_iden(),
            RolePermissions::Table.into_iden(),
            Roles::Table.into_iden(),
            ApiKeys::Table.into_iden(),
            Users::Table.into_iden(),
        ] {
            m.drop_table(Table::drop().table(t).if_exists().to_owned())
                .await?;
        }
        Ok(())
    }
}
