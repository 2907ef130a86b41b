//! Consumers of other services' events.

use docchat_common::bus::EventHandler;
use docchat_common::bus::topics;
use docchat_proto::events::v1::{
    ChatSessionCollectionChanged, ChatSessionCreated, ChatSessionDeleted, Envelope,
};
use prost::Message;
use sea_orm::sea_query::OnConflict;
use sea_orm::{DatabaseConnection, EntityTrait, Set};

use crate::entities::collection_sessions;

/// Keeps `collection_sessions` (and so `sessions_count`) in step with `chat.session.*`.
/// Idempotent: replays and out-of-order deliveries converge to the same rows, except that
/// a session's collection changes apply in the order they arrive (the outbox publishes
/// them in order; a redelivered older one holds until the session's next change).
pub struct SessionCounter {
    pub db: DatabaseConnection,
}

pub const SESSION_EVENTS_GROUP: &str = "ingest.chat-sessions";

#[async_trait::async_trait]
impl EventHandler for SessionCounter {
    async fn handle(&self, event: &Envelope) -> anyhow::Result<()> {
        match event.r#type.as_str() {
            topics::CHAT_SESSION_CREATED => {
                let e = ChatSessionCreated::decode(event.payload.as_slice())?;
                if e.collection_id.is_empty() {
                    return Ok(());
                }
                collection_sessions::Entity::insert(collection_sessions::ActiveModel {
                    session_id: Set(e.session_id),
                    collection_id: Set(e.collection_id),
                    deleted: Set(false),
                })
                .on_conflict(
                    OnConflict::column(collection_sessions::Column::SessionId)
                        .do_nothing()
                        .to_owned(),
                )
                .do_nothing()
                .exec(&self.db)
                .await?;
            }
            topics::CHAT_SESSION_DELETED => {
                let e = ChatSessionDeleted::decode(event.payload.as_slice())?;
                if e.collection_id.is_empty() {
                    return Ok(());
                }
                collection_sessions::Entity::insert(collection_sessions::ActiveModel {
                    session_id: Set(e.session_id),
                    collection_id: Set(e.collection_id),
                    deleted: Set(true),
                })
                .on_conflict(
                    OnConflict::column(collection_sessions::Column::SessionId)
                        .update_column(collection_sessions::Column::Deleted)
                        .to_owned(),
                )
                .exec(&self.db)
                .await?;
            }
            topics::CHAT_SESSION_COLLECTION_CHANGED => {
                let e = ChatSessionCollectionChanged::decode(event.payload.as_slice())?;
                // An unlinked session keeps its row with no collection (it counts for
                // none); only the collection changes, so a deleted one stays deleted.
                collection_sessions::Entity::insert(collection_sessions::ActiveModel {
                    session_id: Set(e.session_id),
                    collection_id: Set(e.collection_id),
                    deleted: Set(false),
                })
                .on_conflict(
                    OnConflict::column(collection_sessions::Column::SessionId)
                        .update_column(collection_sessions::Column::CollectionId)
                        .to_owned(),
                )
                .exec(&self.db)
                .await?;
            }
            other => tracing::debug!(r#type = other, "ignoring event"),
        }
        Ok(())
    }
}
