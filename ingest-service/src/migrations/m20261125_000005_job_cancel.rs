//! Who canceled a job and why (issue 17: the history row shows them).

use sea_orm_migration::prelude::*;

#[derive(DeriveMigrationName)]
pub struct Migration;

#[derive(DeriveIden)]
enum Jobs {
    Table,
    CanceledBy,
    CancelReason,
}

#[async_trait::async_trait]
impl MigrationTrait for Migration {
    async fn up(&self, m: &SchemaManager) -> Result<(), DbErr> {
        // SQLite adds one column per statement.
        for column in [Jobs::CanceledBy, Jobs::CancelReason] {
            m.alter_table(
                Table::alter()
                    .table(Jobs::Table)
                    .add_column(ColumnDef::new(column).text().null())
                    .to_owned(),
            )
            .await?;
        }
        Ok(())
    }

    async fn down(&self, m: &SchemaManager) -> Result<(), DbErr> {
        for column in [Jobs::CanceledBy, Jobs::CancelReason] {
            m.alter_table(
                Table::alter()
                    .table(Jobs::Table)
                    .drop_column(column)
                    .to_owned(),
            )
            .await?;
        }
        Ok(())
    }
}
