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
    }
}

/// `docchat.scheduler.v1`: scheduled tasks.
pub mod scheduler {
    pub mod v1 {
        tonic::include_proto!("docchat.scheduler.v1");
    }
}

pub use prost_types::Timestamp;
