use sea_orm::entity::prelude::*;

/// The truth about a piece of work: workers claim queued rows, renew a lease while they
/// run, and a lease that lapsed means the worker died and the job is queued again.
#[derive(Clone, Debug, PartialEq, DeriveEntityModel)]
#[sea_orm(table_name = "jobs")]
pub struct Model {
    #[sea_orm(primary_key, auto_increment = false)]
    pub id: String,
    pub kind: String,
    pub owner_id: String,
    pub owner_username: String,
    pub status: String,
    pub queue: String,
    pub progress: f64,
    /// JSON array of one-line summaries.
    pub errors: String,
    pub collection_id: String,
    pub collection_name: String,
    pub upload_id: Option<String>,
    pub document_id: Option<String>,
    /// JSON object of the job's options.
    pub params: String,
    pub attempts: i32,
    pub lease_until: Option<ChronoDateTimeUtc>,
    pub created_at: ChronoDateTimeUtc,
    pub updated_at: ChronoDateTimeUtc,
    pub started_at: Option<ChronoDateTimeUtc>,
    pub finished_at: Option<ChronoDateTimeUtc>,
    /// The username that canceled the job, and the reason given.
    pub canceled_by: Option<String>,
    pub cancel_reason: Option<String>,
}

#[derive(Copy, Clone, Debug, EnumIter, DeriveRelation)]
pub enum Relation {}

impl ActiveModelBehavior for ActiveModel {}
