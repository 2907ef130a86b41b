//! Tags belong to their creator: names are unique per user instead of across the
//! deployment. SQLite cannot drop the old UNIQUE(name), so both tables are rebuilt (the
//! link table too: dropping `tags` would cascade into it). A document carrying a tag of
//! another user (the old namespace let an owner apply anyone's tag by name) gets a tag of
//! its owner with that name, description and format instead.

use std::collections::HashMap;

use sea_orm::{ConnectionTrait, FromQueryResult, TransactionTrait};
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
enum TagsV2 {
    Table,
}

#[derive(DeriveIden)]
enum DocumentTagsV2 {
    Table,
}

#[derive(Debug, Clone, FromQueryResult)]
struct TagRow {
    id: String,
    name: String,
    description: Option<String>,
    format: Option<String>,
    created_by: String,
    created_at: chrono::DateTime<chrono::Utc>,
}

#[derive(Debug, FromQueryResult)]
struct LinkRow {
    document_id: String,
    tag_id: String,
    owner_id: String,
}

fn tags_table(name: impl IntoIden + 'static) -> TableCreateStatement {
    Table::create()
        .table(name)
        .col(
            ColumnDef::new(Tags::Id)
                .string_len(64)
                .not_null()
                .primary_key(),
        )
        .col(ColumnDef::new(Tags::Name).string_len(255).not_null())
        .col(ColumnDef::new(Tags::Description).text().null())
        .col(ColumnDef::new(Tags::Format).string_len(255).null())
        .col(ColumnDef::new(Tags::CreatedBy).string_len(64).not_null())
        .col(
            ColumnDef::new(Tags::CreatedAt)
                .timestamp_with_time_zone()
                .not_null(),
        )
        .to_owned()
}

fn links_table(
    name: impl IntoIden + 'static,
    tags: impl IntoIden + 'static,
) -> TableCreateStatement {
    let name = name.into_iden();
    Table::create()
        .table(name.clone())
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
                .from(name, DocumentTags::TagId)
                .to(tags, Tags::Id)
                .on_delete(ForeignKeyAction::Cascade),
        )
        .to_owned()
}

/// The tags and links of the old namespace, with each link's tag owned by its
/// document's owner.
fn split(tags: Vec<TagRow>, links: Vec<LinkRow>) -> (Vec<TagRow>, Vec<(String, String)>) {
    let by_id: HashMap<String, TagRow> = tags.iter().map(|t| (t.id.clone(), t.clone())).collect();
    let mut owned: HashMap<(String, String), String> = tags
        .iter()
        .map(|t| ((t.created_by.clone(), t.name.clone()), t.id.clone()))
        .collect();
    let mut out = tags;
    let mut pairs = Vec::with_capacity(links.len());
    for link in links {
        let Some(tag) = by_id.get(&link.tag_id) else {
            continue;
        };
        let key = (link.owner_id.clone(), tag.name.clone());
        let id = match owned.get(&key) {
            Some(id) => id.clone(),
            None => {
                let id = docchat_common::ids::new_id();
                out.push(TagRow {
                    id: id.clone(),
                    created_by: link.owner_id.clone(),
                    ..tag.clone()
                });
                owned.insert(key, id.clone());
                id
            }
        };
        pairs.push((link.document_id, id));
    }
    (out, pairs)
}

#[async_trait::async_trait]
impl MigrationTrait for Migration {
    async fn up(&self, m: &SchemaManager) -> Result<(), DbErr> {
        // One transaction (a savepoint on PostgreSQL, where the migrator already holds
        // one): a failure halfway leaves the old tables as they were.
        #[expect(
            clippy::disallowed_methods,
            reason = "a savepoint in the migrator's own transaction, at start: no caller to cancel it"
        )]
        let txn = m.get_connection().begin().await?;
        let backend = txn.get_database_backend();
        let schema = SchemaManager::new(&txn);
        schema.create_table(tags_table(TagsV2::Table)).await?;
        schema
            .create_table(links_table(DocumentTagsV2::Table, TagsV2::Table))
            .await?;

        let tags = TagRow::find_by_statement(
            backend.build(
                Query::select()
                    .columns([
                        Tags::Id,
                        Tags::Name,
                        Tags::Description,
                        Tags::Format,
                        Tags::CreatedBy,
                        Tags::CreatedAt,
                    ])
                    .from(Tags::Table),
            ),
        )
        .all(&txn)
        .await?;
        // Links to documents that no longer exist are dropped.
        let links = LinkRow::find_by_statement(sea_orm::Statement::from_string(
            backend,
            "SELECT dt.document_id AS document_id, dt.tag_id AS tag_id, d.owner_id AS owner_id \
             FROM document_tags dt JOIN documents d ON d.id = dt.document_id",
        ))
        .all(&txn)
        .await?;
        let (tags, links) = split(tags, links);
        for batch in tags.chunks(200) {
            let mut insert = Query::insert();
            insert.into_table(TagsV2::Table).columns([
                Tags::Id,
                Tags::Name,
                Tags::Description,
                Tags::Format,
                Tags::CreatedBy,
                Tags::CreatedAt,
            ]);
            for t in batch {
                insert
                    .values([
                        t.id.clone().into(),
                        t.name.clone().into(),
                        t.description.clone().into(),
                        t.format.clone().into(),
                        t.created_by.clone().into(),
                        t.created_at.into(),
                    ])
                    .map_err(|e| DbErr::Migration(e.to_string()))?;
            }
            txn.execute(backend.build(&insert)).await?;
        }
        for batch in links.chunks(400) {
            let mut insert = Query::insert();
            insert
                .into_table(DocumentTagsV2::Table)
                .columns([DocumentTags::DocumentId, DocumentTags::TagId]);
            for (document_id, tag_id) in batch {
                insert
                    .values([document_id.clone().into(), tag_id.clone().into()])
                    .map_err(|e| DbErr::Migration(e.to_string()))?;
            }
            txn.execute(backend.build(&insert)).await?;
        }

        // The links first: on SQLite, dropping `tags` would cascade into them.
        schema
            .drop_table(Table::drop().table(DocumentTags::Table).to_owned())
            .await?;
        schema
            .drop_table(Table::drop().table(Tags::Table).to_owned())
            .await?;
        // Renaming the tag table also renames the links' reference to it (SQLite ≥ 3.26,
        // PostgreSQL by identity).
        schema
            .rename_table(Table::rename().table(TagsV2::Table, Tags::Table).to_owned())
            .await?;
        schema
            .rename_table(
                Table::rename()
                    .table(DocumentTagsV2::Table, DocumentTags::Table)
                    .to_owned(),
            )
            .await?;
        schema
            .create_index(
                Index::create()
                    .name("idx_tags_owner_name")
                    .table(Tags::Table)
                    .col(Tags::CreatedBy)
                    .col(Tags::Name)
                    .unique()
                    .to_owned(),
            )
            .await?;
        schema
            .create_index(
                Index::create()
                    .name("idx_document_tags_tag")
                    .table(DocumentTags::Table)
                    .col(DocumentTags::TagId)
                    .to_owned(),
            )
            .await?;
        txn.commit().await
    }

    async fn down(&self, _m: &SchemaManager) -> Result<(), DbErr> {
        // Going back would merge different users' tags of one name into one.
        Err(DbErr::Migration(
            "tags cannot return to one namespace for all users".into(),
        ))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn tag(id: &str, name: &str, by: &str) -> TagRow {
        TagRow {
            id: id.into(),
            name: name.into(),
            description: Some(format!("{name} of {by}")),
            format: None,
            created_by: by.into(),
            created_at: chrono::Utc::now(),
        }
    }

    fn link(doc: &str, tag: &str, owner: &str) -> LinkRow {
        LinkRow {
            document_id: doc.into(),
            tag_id: tag.into(),
            owner_id: owner.into(),
        }
    }

    #[test]
    fn links_to_another_users_tag_get_a_tag_of_the_document_owner() {
        let (tags, links) = split(
            vec![tag("t1", "x", "alice"), tag("t2", "y", "bob")],
            vec![
                link("a1", "t1", "alice"),
                link("b1", "t1", "bob"),
                link("b2", "t1", "bob"),
                link("b1", "t2", "bob"),
                link("gone", "t9", "bob"),
            ],
        );
        assert_eq!(tags.len(), 3);
        let bobs_x = tags
            .iter()
            .find(|t| t.name == "x" && t.created_by == "bob")
            .unwrap();
        assert_eq!(bobs_x.description.as_deref(), Some("x of alice"));
        assert_eq!(
            links,
            [
                ("a1".to_owned(), "t1".to_owned()),
                ("b1".to_owned(), bobs_x.id.clone()),
                ("b2".to_owned(), bobs_x.id.clone()),
                ("b1".to_owned(), "t2".to_owned()),
            ]
        );
    }
}
