//! REST handlers, one module per route family. Handlers stay thin: extract, call one
//! service, map the answer to SPEC.md's JSON.

pub mod chats;
pub mod collections;
pub mod compat;
pub mod completions;
pub mod configuration;
pub mod documents;
pub mod extractors;
pub mod health;
pub mod identity;
pub mod models;
pub mod tags;
pub mod uploads;

use chrono::{DateTime, Utc};
use docchat_proto::Timestamp;

/// A wire timestamp as the JSON value (`None` stays absent).
pub(crate) fn ts(t: Option<Timestamp>) -> Option<DateTime<Utc>> {
    t.as_ref().map(docchat_common::time::from_proto)
}

/// A required wire timestamp; services always fill these.
pub(crate) fn ts_req(t: Option<Timestamp>) -> DateTime<Utc> {
    ts(t).unwrap_or_default()
}

/// Pagination query shared by list endpoints.
#[derive(Debug, serde::Deserialize, utoipa::IntoParams)]
pub struct PageQuery {
    /// Rows to skip.
    pub offset: Option<u64>,
    /// Rows to return (default 100, at most 1000).
    pub limit: Option<u64>,
}
