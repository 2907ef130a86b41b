use sea_orm::entity::prelude::*;

use super::Owned;

/// Whose a session's workspace is (the session belongs to chat-service), with the session's
/// preview.
#[derive(Clone, Debug, PartialEq, Eq, DeriveEntityModel)]
#[sea_orm(table_name = "session_workspaces")]
pub struct Model {
    #[sea_orm(
        primary_key,
        auto_increment = false,
        column_type = "String(StringLen::N(128))"
    )]
    pub session_id: String,
    #[sea_orm(column_type = "String(StringLen::N(64))")]
    pub user_id: String,
    #[sea_orm(column_type = "Text")]
    pub chat_preview: String,
    pub created_at: ChronoDateTimeUtc,
    pub updated_at: ChronoDateTimeUtc,
}

#[derive(Copy, Clone, Debug, EnumIter, DeriveRelation)]
pub enum Relation {}

impl ActiveModelBehavior for ActiveModel {}

impl Owned for Entity {
    fn owner_column() -> Column {
        Column::UserId
    }

    fn id_column() -> Column {
        Column::SessionId
    }
}
