//! sea-orm entities of chat-service, one file per table.

pub mod active_completions;
pub mod chat_sessions;
pub mod message_meta;
pub mod message_references;
pub mod messages;
