use sea_orm::entity::prelude::*;

#[derive(Clone, Debug, PartialEq, Eq, DeriveEntityModel)]
#[sea_orm(table_name = "memory_block_shares")]
pub struct Model {
    #[sea_orm(primary_key, auto_increment = false)]
    pub block_id: String,
    /// `user` or `group`.
    #[sea_orm(primary_key, auto_increment = false)]
    pub kind: String,
    /// The user id or the group id.
    #[sea_orm(primary_key, auto_increment = false)]
    pub principal: String,
    /// The username of a user share (empty for a group).
    pub username: String,
    pub can_edit: bool,
}

#[derive(Copy, Clone, Debug, EnumIter, DeriveRelation)]
pub enum Relation {}

impl ActiveModelBehavior for ActiveModel {}
