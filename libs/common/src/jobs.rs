//! The vocabulary of jobs shared by the services that run them, admin-service's history
//! and the gateway: kinds and their display names.

/// An upload ingested into a collection (ingest-service).
pub const KIND_INGEST_UPLOAD: &str = "ingest_upload";
/// A collection's description generated from its documents (ingest-service).
pub const KIND_COLLECTION_DESCRIPTION: &str = "collection_description";
/// One agent run: an agent completion of a chat (agent-service).
pub const KIND_AGENT_RUN: &str = "agent_run";
/// One execution of a scheduled task (scheduler-service).
pub const KIND_SCHEDULED_TASK: &str = "scheduled_task";
/// The client's bulk deletes, run by the gateway before it answers (admin-service records
/// them finished): collections, documents, documents of one collection, chat sessions.
pub const KIND_DELETE_COLLECTIONS: &str = "delete_collections";
pub const KIND_DELETE_DOCUMENTS: &str = "delete_documents";
pub const KIND_DELETE_DOCUMENTS_FROM_COLLECTION: &str = "delete_documents_from_collection";
pub const KIND_DELETE_CHAT_SESSIONS: &str = "delete_chat_sessions";

/// The official client's `JobKind` name of a kind, for the user-facing JobDetails (the
/// client's `Job` rejects any other value and `list_jobs` drops such jobs); the
/// administrator's job history keeps the kinds above. An agent run (and any kind the client
/// has no name for) is a `NoOpJob`: the client has no agent-run kind, and naming another
/// real kind (an evaluation, an extractor run) would tell it something false; the job's
/// `name` still says what it is.
pub fn client_kind(kind: &str) -> &'static str {
    match kind {
        KIND_INGEST_UPLOAD => "IngestUploadsJob",
        KIND_SCHEDULED_TASK => "ScheduledTaskExecutionJob",
        KIND_COLLECTION_DESCRIPTION => "RegenerateCollectionDescriptionJob",
        KIND_DELETE_COLLECTIONS => "DeleteCollectionsJob",
        KIND_DELETE_DOCUMENTS => "DeleteDocumentsJob",
        KIND_DELETE_DOCUMENTS_FROM_COLLECTION => "DeleteDocumentsFromCollectionJob",
        KIND_DELETE_CHAT_SESSIONS => "DeleteChatSessionsJob",
        _ => "NoOpJob",
    }
}

/// A readable name from the kind (`ingest_upload` → `Ingest upload`).
pub fn display_name(kind: &str) -> String {
    let spaced = kind.replace(['_', '.'], " ");
    let mut chars = spaced.chars();
    match chars.next() {
        Some(first) => first.to_uppercase().chain(chars).collect(),
        None => "Job".to_owned(),
    }
}

#[cfg(test)]
mod tests {
    #[test]
    fn display_names() {
        assert_eq!(super::display_name("ingest_upload"), "Ingest upload");
        assert_eq!(super::display_name(""), "Job");
    }

    #[test]
    fn client_kinds() {
        assert_eq!(
            super::client_kind(super::KIND_INGEST_UPLOAD),
            "IngestUploadsJob"
        );
        assert_eq!(
            super::client_kind(super::KIND_SCHEDULED_TASK),
            "ScheduledTaskExecutionJob"
        );
        assert_eq!(
            super::client_kind(super::KIND_COLLECTION_DESCRIPTION),
            "RegenerateCollectionDescriptionJob"
        );
        assert_eq!(super::client_kind(super::KIND_AGENT_RUN), "NoOpJob");
    }
}
