use sea_orm::entity::prelude::*;

/// One job as the history shows it, from the newest `job.*` event that did not move it
/// backwards.
#[derive(Clone, Debug, PartialEq, DeriveEntityModel)]
#[sea_orm(table_name = "job_history")]
pub struct Model {
    #[sea_orm(primary_key, auto_increment = false)]
    pub id: String,
    pub name: String,
    pub kind: String,
    pub username: String,
    pub user_id: String,
    pub status: String,
    /// queued 0 < running 1 < terminal 2.
    pub status_rank: i32,
    pub progress: f64,
    /// JSON array of one-line errors.
    pub errors: String,
    pub collection_id: String,
    pub collection_name: String,
    pub canceled_by: Option<String>,
    pub cancel_reason: Option<String>,
    pub created_at: ChronoDateTimeUtc,
    /// The time of the event the row holds.
    pub updated_at: ChronoDateTimeUtc,
    pub started_at: Option<ChronoDateTimeUtc>,
    pub finished_at: Option<ChronoDateTimeUtc>,
    pub deleted_at: Option<ChronoDateTimeUtc>,
}

#[derive(Copy, Clone, Debug, EnumIter, DeriveRelation)]
pub enum Relation {}

impl ActiveModelBehavior for ActiveModel {}
