use sea_orm::entity::prelude::*;

/// The lease of a running agent run, renewed by the replica running it.
#[derive(Clone, Debug, PartialEq, Eq, DeriveEntityModel)]
#[sea_orm(table_name = "run_leases")]
pub struct Model {
    #[sea_orm(
        primary_key,
        auto_increment = false,
        column_type = "String(StringLen::N(64))"
    )]
    pub job_id: String,
    #[sea_orm(column_type = "String(StringLen::N(64))")]
    pub user_id: String,
    #[sea_orm(column_type = "Text")]
    pub username: String,
    #[sea_orm(column_type = "String(StringLen::N(64))")]
    pub collection_id: String,
    pub created_at: ChronoDateTimeUtc,
    #[sea_orm(column_type = "Text")]
    pub worker: String,
    pub lease_until: ChronoDateTimeUtc,
}

#[derive(Copy, Clone, Debug, EnumIter, DeriveRelation)]
pub enum Relation {}

impl ActiveModelBehavior for ActiveModel {}
