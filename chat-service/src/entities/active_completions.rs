use sea_orm::entity::prelude::*;

/// A completion being generated; counts against chat_max_concurrent_per_user while its
/// lease holds.
#[derive(Clone, Debug, PartialEq, Eq, DeriveEntityModel)]
#[sea_orm(table_name = "active_completions")]
pub struct Model {
    #[sea_orm(primary_key, auto_increment = false)]
    pub question_id: String,
    pub user_id: String,
    pub started_at: ChronoDateTimeUtc,
    pub lease_until: ChronoDateTimeUtc,
    /// The reply's text so far, written at a bounded rate while it is generated.
    pub progress: Option<String>,
    /// What its model calls have used so far (JSON, completions/store.rs `Spent`), written
    /// with the progress: a recovered reply books it.
    pub usage: Option<String>,
    /// Where each streamed line of `progress` ends (marks.rs `Marks`), written with it.
    pub marks: Option<String>,
}

#[derive(Copy, Clone, Debug, EnumIter, DeriveRelation)]
pub enum Relation {}

impl ActiveModelBehavior for ActiveModel {}
