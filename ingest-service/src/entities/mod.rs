//! sea-orm entities of ingest-service, one file per table.

pub mod chunks;
pub mod collection_sessions;
pub mod collections;
pub mod document_pages;
pub mod document_tags;
pub mod documents;
pub mod extractors;
pub mod jobs;
pub mod tags;
pub mod uploads;
