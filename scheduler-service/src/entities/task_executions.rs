use sea_orm::entity::prelude::*;

/// One run of a task. `(task_id, scheduled_for)` is unique: a due time runs once however
/// many replicas claim it; a manual trigger's `scheduled_for` is the time it was asked for.
#[derive(Clone, Debug, PartialEq, DeriveEntityModel)]
#[sea_orm(table_name = "task_executions")]
pub struct Model {
    #[sea_orm(primary_key, auto_increment = false)]
    pub id: String,
    pub task_id: String,
    pub user_id: String,
    pub username: String,
    /// The task's name when the execution started (kept after a rename).
    pub task_name: String,
    /// running | completed | failed | cancelled
    pub status: String,
    /// scheduled | manual
    pub trigger_source: String,
    pub scheduled_for: ChronoDateTimeUtc,
    pub started_at: Option<ChronoDateTimeUtc>,
    pub completed_at: Option<ChronoDateTimeUtc>,
    /// While running: the worker renews it; a lapsed lease is recovered by the reaper.
    pub lease_until: Option<ChronoDateTimeUtc>,
    /// The replica running it.
    pub worker: String,
    pub chat_session_id: String,
    pub result_summary: String,
    pub error_message: String,
    pub created_at: ChronoDateTimeUtc,
}

#[derive(Copy, Clone, Debug, EnumIter, DeriveRelation)]
pub enum Relation {}

impl ActiveModelBehavior for ActiveModel {}
