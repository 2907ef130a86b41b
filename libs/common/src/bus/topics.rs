//! Every routing key docchat publishes and every pattern it binds, in one place: a publisher
//! and its consumers name the same constant, so a renamed key cannot leave a consumer
//! bound to nothing. `*` matches one word, `#` zero or more (see [`super::topic_matches`]).
//! The table of who publishes what to whom is docs/ARCHITECTURE.md §4.

/// chat → ingest: a chat session was created (`ChatSessionCreated`).
pub const CHAT_SESSION_CREATED: &str = "chat.session.created";
/// chat → ingest: a chat session was deleted (`ChatSessionDeleted`).
pub const CHAT_SESSION_DELETED: &str = "chat.session.deleted";
/// chat → ingest: a chat session was linked to another collection or unlinked
/// (`ChatSessionCollectionChanged`).
pub const CHAT_SESSION_COLLECTION_CHANGED: &str = "chat.session.collection_changed";
/// Binds every chat-session event.
pub const CHAT_SESSION_ANY: &str = "chat.session.*";

/// chat replica → every chat replica (broadcast): stop, pause, resume or finish a reply
/// that may be generating on another replica (`ChatControl`).
pub const CHAT_CONTROL: &str = "chat.control";

/// ingest → chat: a collection was deleted; its sessions are detached (`CollectionDeleted`).
pub const INGEST_COLLECTION_DELETED: &str = "ingest.collection.deleted";
/// ingest → (listeners): a document was stored (`DocumentCreated`).
pub const INGEST_DOCUMENT_CREATED: &str = "ingest.document.created";
/// ingest → (listeners): a document was deleted (`DocumentDeleted`).
pub const INGEST_DOCUMENT_DELETED: &str = "ingest.document.deleted";

/// ingest → ingest workers: work is waiting in the queue named by the last word (a
/// doorbell; the job row is the truth).
pub fn ingest_work(queue: &str) -> String {
    format!("ingest.work.{queue}")
}
/// Binds every ingest work doorbell.
pub const INGEST_WORK_ANY: &str = "ingest.work.*";

/// every model caller → admin: tokens and cost of model calls (`LlmUsage`).
pub const USAGE_LLM: &str = "usage.llm";

/// A job's state change (`job.queued`, `job.running`, …), for the job history.
pub fn job(status: &str) -> String {
    format!("job.{status}")
}
/// Binds every job state change.
pub const JOB_ANY: &str = "job.*";

#[cfg(test)]
mod tests {
    use super::*;
    use crate::bus::topic_matches;

    #[test]
    fn each_binding_matches_what_its_publishers_send_and_nothing_else() {
        for key in [
            CHAT_SESSION_CREATED,
            CHAT_SESSION_DELETED,
            CHAT_SESSION_COLLECTION_CHANGED,
        ] {
            assert!(topic_matches(CHAT_SESSION_ANY, key), "{key}");
        }
        assert!(topic_matches(INGEST_WORK_ANY, &ingest_work("default")));
        assert!(topic_matches(JOB_ANY, &job("running")));
        for key in [
            CHAT_CONTROL,
            INGEST_COLLECTION_DELETED,
            INGEST_DOCUMENT_CREATED,
            INGEST_DOCUMENT_DELETED,
            USAGE_LLM,
        ] {
            assert!(!topic_matches(CHAT_SESSION_ANY, key), "{key}");
            assert!(!topic_matches(INGEST_WORK_ANY, key), "{key}");
            assert!(!topic_matches(JOB_ANY, key), "{key}");
        }
    }
}
