use sea_orm::entity::prelude::*;

/// One file of a session's workspace manifest: the document holding it.
#[derive(Clone, Debug, PartialEq, Eq, DeriveEntityModel)]
#[sea_orm(table_name = "workspace_files")]
pub struct Model {
    #[sea_orm(
        primary_key,
        auto_increment = false,
        column_type = "String(StringLen::N(128))"
    )]
    pub session_id: String,
    #[sea_orm(primary_key, auto_increment = false, column_type = "Text")]
    pub path: String,
    #[sea_orm(column_type = "String(StringLen::N(64))")]
    pub document_id: String,
    #[sea_orm(column_type = "String(StringLen::N(64))")]
    pub sha256: String,
    pub size: i64,
    #[sea_orm(column_type = "String(StringLen::N(64))")]
    pub question_id: String,
    pub updated_at: ChronoDateTimeUtc,
}

#[derive(Copy, Clone, Debug, EnumIter, DeriveRelation)]
pub enum Relation {}

impl ActiveModelBehavior for ActiveModel {}
