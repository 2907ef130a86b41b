use sea_orm::entity::prelude::*;
use sea_orm::{DerivePartialModel, FromQueryResult};

use super::{JsonText, Owned};

/// A custom tool with its uploaded file's bytes.
#[derive(Clone, Debug, PartialEq, Eq, DeriveEntityModel)]
#[sea_orm(table_name = "custom_tools")]
pub struct Model {
    #[sea_orm(
        primary_key,
        auto_increment = false,
        column_type = "String(StringLen::N(36))"
    )]
    pub id: String,
    #[sea_orm(column_type = "String(StringLen::N(64))")]
    pub owner_id: String,
    #[sea_orm(column_type = "Text")]
    pub owner_email: String,
    #[sea_orm(column_type = "Text")]
    pub tool_name: String,
    #[sea_orm(column_type = "String(StringLen::N(32))")]
    pub tool_type: String,
    /// A JSON object.
    #[sea_orm(column_type = "Text")]
    pub tool_args: JsonText<serde_json::Value>,
    #[sea_orm(column_type = "Text", nullable)]
    pub file_name: Option<String>,
    /// The upload as sent (the migration's `binary()`); NULL without a file.
    #[sea_orm(column_type = "Binary(1)", nullable)]
    pub file_data: Option<Vec<u8>>,
    #[sea_orm(column_type = "String(StringLen::N(64))", nullable)]
    pub file_sha256: Option<String>,
    pub created_at: ChronoDateTimeUtc,
    pub updated_at: ChronoDateTimeUtc,
}

/// A tool's row without its file's bytes (what listing and running a tool need).
#[derive(Clone, Debug, PartialEq, Eq, DerivePartialModel, FromQueryResult)]
#[sea_orm(entity = "Entity")]
pub struct Head {
    pub id: String,
    pub owner_id: String,
    pub owner_email: String,
    pub tool_name: String,
    pub tool_type: String,
    pub tool_args: JsonText<serde_json::Value>,
    pub file_name: Option<String>,
}

#[derive(Copy, Clone, Debug, EnumIter, DeriveRelation)]
pub enum Relation {}

impl ActiveModelBehavior for ActiveModel {}

impl Owned for Entity {
    fn owner_column() -> Column {
        Column::OwnerId
    }

    fn id_column() -> Column {
        Column::Id
    }
}
