//! Events chat-service publishes, and its consumers of other services' events.

use docchat_common::bus::topics;
use docchat_common::bus::{EventHandler, envelope};
use docchat_proto::events::v1::{CollectionDeleted, DocumentChanged, Envelope, LlmUsage};
use prost::Message;
use sea_orm::sea_query::Expr;
use sea_orm::{ColumnTrait, DatabaseConnection, EntityTrait, QueryFilter};

use crate::entities::message_references;

pub const COLLECTION_EVENTS_GROUP: &str = "chat.collections";
pub const DOCUMENT_EVENTS_GROUP: &str = "chat.documents";

/// Model calls made for a user; admin-service books them into its cost ledger. Counted in
/// the usage metrics ([`docchat_common::metrics::llm_usage`]) as it is made.
pub fn usage_event(usage: &LlmUsage) -> Envelope {
    docchat_common::metrics::llm_usage(usage);
    envelope(topics::USAGE_LLM, &usage.user_id, usage)
}

/// Detaches sessions from collections that were deleted. Idempotent.
pub struct CollectionCleanup {
    pub db: DatabaseConnection,
}

#[async_trait::async_trait]
impl EventHandler for CollectionCleanup {
    async fn handle(&self, event: &Envelope) -> anyhow::Result<()> {
        if event.r#type == topics::INGEST_COLLECTION_DELETED {
            let e = CollectionDeleted::decode(event.payload.as_slice())?;
            let n = crate::sessions::detach_collection(&self.db, &e.collection_id)
                .await
                .map_err(|e| anyhow::anyhow!(e.message))?;
            tracing::debug!(collection_id = %e.collection_id, sessions = n, "detached sessions from deleted collection");
        }
        Ok(())
    }
}

/// Marks the references to deleted documents (`were_references_deleted`). Idempotent.
pub struct DocumentCleanup {
    pub db: DatabaseConnection,
}

#[async_trait::async_trait]
impl EventHandler for DocumentCleanup {
    async fn handle(&self, event: &Envelope) -> anyhow::Result<()> {
        if event.r#type == topics::INGEST_DOCUMENT_DELETED {
            let e = DocumentChanged::decode(event.payload.as_slice())?;
            let marked = mark_document_deleted(&self.db, &e.document_id).await?;
            tracing::debug!(document_id = %e.document_id, references = marked, "marked references to deleted document");
        }
        Ok(())
    }
}

/// Marks every stored reference to `document_id` as deleted; how many were.
pub async fn mark_document_deleted(
    db: &DatabaseConnection,
    document_id: &str,
) -> Result<u64, sea_orm::DbErr> {
    Ok(message_references::Entity::update_many()
        .col_expr(
            message_references::Column::DocumentDeleted,
            Expr::value(true),
        )
        .filter(message_references::Column::DocumentId.eq(document_id))
        .filter(message_references::Column::DocumentDeleted.eq(false))
        .exec(db)
        .await?
        .rows_affected)
}
