//! Events chat-service publishes, and its consumers of other services' events.

use docchat_common::bus::topics;
use docchat_common::bus::{EventHandler, envelope};
use docchat_proto::events::v1::{CollectionDeleted, Envelope, LlmUsage};
use prost::Message;
use sea_orm::DatabaseConnection;

pub const COLLECTION_EVENTS_GROUP: &str = "chat.collections";

/// Model calls made for a user; admin-service books them into its cost ledger.
pub fn usage_event(usage: &LlmUsage) -> Envelope {
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
