//! sea-orm entities of chat-service, one file per table.

pub mod chat_sessions;
pub mod messages;
