use sea_orm::entity::prelude::*;

/// A question (no `reply_to`) or the model's reply to one.
#[derive(Clone, Debug, PartialEq, Eq, DeriveEntityModel)]
#[sea_orm(table_name = "messages")]
pub struct Model {
    #[sea_orm(primary_key, auto_increment = false)]
    pub id: String,
    pub session_id: String,
    pub owner_id: String,
    pub username: String,
    pub content: String,
    pub reply_to: Option<String>,
    pub votes: i64,
    pub has_references: bool,
    pub total_references: i64,
    pub error: Option<String>,
    pub created_at: ChronoDateTimeUtc,
    /// A reply's: where each line it was streamed in ends (marks.rs `Marks`), so coming
    /// back to it later replays the same lines.
    pub stream_marks: Option<String>,
}

#[derive(Copy, Clone, Debug, EnumIter, DeriveRelation)]
pub enum Relation {}

impl ActiveModelBehavior for ActiveModel {}
