use sea_orm_migration::prelude::*;

#[derive(DeriveMigrationName)]
pub struct Migration;

#[derive(DeriveIden)]
enum Tags {
    Table,
    Id,
    Name,
    Description,
    Format,
    CreatedBy,
    CreatedAt,
}

#[derive(DeriveIden)]
enum DocumentTags {
    Table,
    DocumentId,
    TagId,
}

#[derive(DeriveIden)]
enum Extractors {
    Table,
    Id,
    OwnerId,
    Name,
    IsPublic,
    Spec,
    CreatedAt,
    UpdatedAt,
}

#[async_trait::async_trait]
impl MigrationTrait for Migration {
    async fn up(&self, m: &SchemaManager) -> Result<(), DbErr> {
        m.create_table(
            Table::create()
                .table(Tags::Table)
                .if_not_exists()
                .col(
                    ColumnDef::new(Tags::Id)
                        .string_len(64)
                        .not_null()
                        .primary_key(),
                )
                .col(
                    ColumnDef::new(Tags::Name)
                        .string_len(255)
                        .not_null()
                        .unique_key(),
                )
                .col(ColumnDef::new(Tags::Description).text().null())
                .col(ColumnDef::new(Tags::Format).string_len(255).null())
                .col(ColumnDef::new(Tags::CreatedBy).string_len(64).not_null())
                .col(
                    ColumnDef::new(Tags::CreatedAt)
                        .timestamp_with_time_zone()
                        .not_null(),
                )
                .to_owned(),
        )
        .await?;
        m.create_table(
            Table::create()
                .table(DocumentTags::Table)
                .if_not_exists()
                .col(
                    ColumnDef::new(DocumentTags::DocumentId)
                        .string_len(64)
                        .not_null(),
                )
                .col(
                    ColumnDef::new(DocumentTags::TagId)
                        .string_len(64)
                        .not_null(),
                )
                .primary_key(
                    Index::create()
                        .col(DocumentTags::DocumentId)
                        .col(DocumentTags::TagId),
                )
                .foreign_key(
                    ForeignKey::create()
                        .from(DocumentTags::Table, DocumentTags::TagId)
                        .to(Tags::Table, Tags::Id)
                        .on_delete(ForeignKeyAction::Cascade),
                )
                .to_owned(),
        )
        .await?;
        m.create_index(
            Index::create()
                .name("idx_document_tags_tag")
                .table(DocumentTags::Table)
                .col(DocumentTags::TagId)
                .if_not_exists()
                .to_owned(),
        )
        .await?;
        m.create_table(
            Table::create()
                .table(Extractors::Table)
                .if_not_exists()
                .col(
                    ColumnDef::new(Extractors::Id)
                        .string_len(64)
                        .not_null()
                        .primary_key(),
                )
                .col(
                    ColumnDef::new(Extractors::OwnerId)
                        .string_len(64)
                        .not_null(),
                )
                .col(ColumnDef::new(Extractors::Name).string_len(255).not_null())
                .col(
                    ColumnDef::new(Extractors::IsPublic)
                        .boolean()
                        .not_null()
                        .default(false),
                )
                .col(ColumnDef::new(Extractors::Spec).text().not_null())
                .col(
                    ColumnDef::new(Extractors::CreatedAt)
                        .timestamp_with_time_zone()
                        .not_null(),
                )
                .col(
                    ColumnDef::new(Extractors::UpdatedAt)
                        .timestamp_with_time_zone()
                        .not_null(),
                )
                .to_owned(),
        )
        .await
    }

    async fn down(&self, m: &SchemaManager) -> Result<(), DbErr> {
        for t in [
            DocumentTags::Table.into_iden(),
            Tags::Table.into_iden(),
            Extractors::Table.into_iden(),
        ] {
            m.drop_table(Table::drop().table(t).if_exists().to_owned())
                .await?;
        }
        Ok(())
    }
}
