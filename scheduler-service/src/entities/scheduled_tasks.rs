use sea_orm::entity::prelude::*;

/// A scheduled task (SPEC.md "Scheduled task").
#[derive(Clone, Debug, PartialEq, DeriveEntityModel)]
#[sea_orm(table_name = "scheduled_tasks")]
pub struct Model {
    #[sea_orm(primary_key, auto_increment = false)]
    pub id: String,
    pub user_id: String,
    pub username: String,
    /// Unique per user.
    pub name: String,
    pub description: String,
    /// once | recurring | interval
    pub schedule_type: String,
    pub schedule_expression: String,
    /// chat_completion | agent_task
    pub task_type: String,
    /// The task_config object, JSON text.
    pub task_config: String,
    /// task_config's collection_id ("" for none), kept as a column for the list filters.
    pub collection_id: String,
    /// active | paused | completed | expired
    pub status: String,
    /// idle | running
    pub execution_status: String,
    pub last_execution_at: Option<ChronoDateTimeUtc>,
    /// Set for active and paused tasks; cleared when a task completes or expires.
    pub next_execution_at: Option<ChronoDateTimeUtc>,
    pub execution_count: i64,
    /// None: unlimited.
    pub max_executions: Option<i64>,
    pub expires_at: Option<ChronoDateTimeUtc>,
    /// Resolved at write time (`current_user` → the caller's address).
    pub notification_email: String,
    pub created_at: ChronoDateTimeUtc,
    pub updated_at: ChronoDateTimeUtc,
}

#[derive(Copy, Clone, Debug, EnumIter, DeriveRelation)]
pub enum Relation {}

impl ActiveModelBehavior for ActiveModel {}
