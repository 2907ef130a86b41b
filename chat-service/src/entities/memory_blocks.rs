use sea_orm::entity::prelude::*;

#[derive(Clone, Debug, PartialEq, Eq, DeriveEntityModel)]
#[sea_orm(table_name = "memory_blocks")]
pub struct Model {
    #[sea_orm(primary_key, auto_increment = false)]
    pub id: String,
    pub owner_id: String,
    pub owner_username: String,
    pub name: String,
    pub content: String,
    pub system_prompt_amendment: String,
    pub injection_mode: String,
    pub access_mode: String,
    pub max_content_length: i64,
    pub is_auto: bool,
    pub is_public: bool,
    pub public_edit: bool,
    pub created_at: ChronoDateTimeUtc,
    pub updated_at: ChronoDateTimeUtc,
}

#[derive(Copy, Clone, Debug, EnumIter, DeriveRelation)]
pub enum Relation {}

impl ActiveModelBehavior for ActiveModel {}
