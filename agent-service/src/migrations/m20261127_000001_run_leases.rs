//! Run leases: every agent run holds a row while it runs, renewed by its replica; a row whose
//! lease lapsed (its replica died) is reaped as a `stale` job by any replica.

use sea_orm_migration::prelude::*;

#[derive(DeriveMigrationName)]
pub struct Migration;

#[derive(DeriveIden)]
enum RunLeases {
    Table,
    JobId,
    UserId,
    Username,
    CollectionId,
    CreatedAt,
    Worker,
    LeaseUntil,
}

#[async_trait::async_trait]
impl MigrationTrait for Migration {
    async fn up(&self, m: &SchemaManager) -> Result<(), DbErr> {
        m.create_table(
            Table::create()
                .table(RunLeases::Table)
                .if_not_exists()
                .col(
                    ColumnDef::new(RunLeases::JobId)
                        .string_len(64)
                        .not_null()
                        .primary_key(),
                )
                .col(ColumnDef::new(RunLeases::UserId).string_len(64).not_null())
                .col(ColumnDef::new(RunLeases::Username).text().not_null())
                .col(
                    ColumnDef::new(RunLeases::CollectionId)
                        .string_len(64)
                        .not_null(),
                )
                .col(
                    ColumnDef::new(RunLeases::CreatedAt)
                        .timestamp_with_time_zone()
                        .not_null(),
                )
                .col(ColumnDef::new(RunLeases::Worker).text().not_null())
                .col(
                    ColumnDef::new(RunLeases::LeaseUntil)
                        .timestamp_with_time_zone()
                        .not_null(),
                )
                .to_owned(),
        )
        .await?;
        m.create_index(
            Index::create()
                .name("idx_run_leases_lease_until")
                .table(RunLeases::Table)
                .col(RunLeases::LeaseUntil)
                .if_not_exists()
                .to_owned(),
        )
        .await
    }

    async fn down(&self, m: &SchemaManager) -> Result<(), DbErr> {
        m.drop_table(Table::drop().table(RunLeases::Table).to_owned())
            .await
    }
}
