//! Schema of ingest-service (SQLite and PostgreSQL).

use sea_orm_migration::prelude::*;

mod m20261121_000001_collections;
mod m20261122_000002_documents;
mod m20261122_000003_tags_extractors;
mod m20261123_000004_tags_per_user;
mod m20261125_000005_job_cancel;
mod m20261127_000006_chunk_page_starts;
mod m20261205_000007_document_pages;
mod m20261206_000008_document_reading;
mod m20261212_000009_collection_settings;

pub struct Migrator;

#[async_trait::async_trait]
impl MigratorTrait for Migrator {
    fn migrations() -> Vec<Box<dyn MigrationTrait>> {
        vec![
            Box::new(docchat_common::outbox::CreateOutbox),
            Box::new(m20261121_000001_collections::Migration),
            Box::new(m20261122_000002_documents::Migration),
            Box::new(m20261122_000003_tags_extractors::Migration),
            Box::new(m20261123_000004_tags_per_user::Migration),
            Box::new(m20261125_000005_job_cancel::Migration),
            Box::new(m20261127_000006_chunk_page_starts::Migration),
            Box::new(m20261205_000007_document_pages::Migration),
            Box::new(m20261206_000008_document_reading::Migration),
            Box::new(m20261212_000009_collection_settings::Migration),
        ]
    }
}
