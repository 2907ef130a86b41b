//! sea-orm entities of ingest-service, one file per table.

pub mod collection_sessions;
pub mod collections;
