//! Generated gRPC and event types shared by every docchat service.
//!
//! Packages are versioned (`docchat.<service>.v1`); each is exposed as `<service>::v1`.

#![allow(clippy::all, clippy::pedantic, missing_docs)]

/// `docchat.common.v1`: error details, pagination.
pub mod common {
    pub mod v1 {
        tonic::include_proto!("docchat.common.v1");
    }
}

/// `docchat.events.v1`: the bus envelope and the event payloads.
pub mod events {
    pub mod v1 {
        tonic::include_proto!("docchat.events.v1");
    }
}

/// `docchat.admin.v1`: identity, keys, roles, settings.
pub mod admin {
    pub mod v1 {
        tonic::include_proto!("docchat.admin.v1");
    }
}

/// `docchat.ingest.v1`: collections, documents, retrieval.
pub mod ingest {
    pub mod v1 {
        tonic::include_proto!("docchat.ingest.v1");
    }
}

/// `docchat.chat.v1`: sessions, messages, completions, models.
pub mod chat {
    pub mod v1 {
        tonic::include_proto!("docchat.chat.v1");
    }
}

/// `docchat.agent.v1`: agents and tools.
pub mod agent {
    pub mod v1 {
        tonic::include_proto!("docchat.agent.v1");

        use super::super::ingest::v1::SearchHit;

        /// A search hit as the agent passes it on (citations, fast_agentic_rag contexts).
        impl From<SearchHit> for Excerpt {
            fn from(h: SearchHit) -> Self {
                Excerpt {
                    chunk_id: h.chunk_id,
                    document_id: h.document_id,
                    document_name: h.document_name,
                    collection_id: h.collection_id,
                    text: h.text,
                    pages: h.pages,
                    score: h.score,
                }
            }
        }

        /// An excerpt stored as a reply's reference (no chunk index or timing).
        impl From<Excerpt> for SearchHit {
            fn from(e: Excerpt) -> Self {
                SearchHit {
                    chunk_id: e.chunk_id,
                    document_id: e.document_id,
                    document_name: e.document_name,
                    collection_id: e.collection_id,
                    text: e.text,
                    pages: e.pages,
                    score: e.score,
                    ..SearchHit::default()
                }
            }
        }
    }
}

/// `docchat.scheduler.v1`: scheduled tasks.
pub mod scheduler {
    pub mod v1 {
        tonic::include_proto!("docchat.scheduler.v1");
    }
}

pub use prost_types::Timestamp;
