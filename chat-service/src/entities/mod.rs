//! sea-orm entities of chat-service, one file per table.

pub mod active_completions;
pub mod background_responses;
pub mod chat_sessions;
pub mod memory_block_defaults;
pub mod memory_block_shares;
pub mod memory_blocks;
pub mod message_meta;
pub mod message_references;
pub mod messages;
