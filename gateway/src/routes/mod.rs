//! REST handlers, one module per route family. Handlers stay thin: extract, call one
//! service, map the answer to SPEC.md's JSON.

pub mod agent_files;
pub mod agent_keys;
pub mod agents;
pub mod chats;
pub mod collections;
pub mod compat;
pub mod completions;
pub mod configuration;
pub mod custom_agents;
pub mod custom_tools;
pub mod delete_jobs;
pub mod documents;
pub mod extractors;
pub mod files;
pub mod health;
pub mod identity;
pub mod job_history;
pub mod jobs;
pub mod mcp;
pub mod memory_blocks;
pub mod meta;
pub mod model_calls;
pub mod models;
pub mod rpc_fs;
pub mod scheduled_tasks;
pub mod tags;
pub mod uploads;
pub mod ws;

use chrono::{DateTime, Utc};
use docchat_proto::Timestamp;
use docchat_proto::common::v1::PageRequest;
use serde::{Deserialize, Serialize};
use utoipa::ToSchema;

use crate::error::{HttpResult, bad_request};

/// A wire timestamp as the JSON value (`None` stays absent).
pub(crate) fn ts(t: Option<Timestamp>) -> Option<DateTime<Utc>> {
    t.as_ref().map(docchat_common::time::from_proto)
}

/// A required wire timestamp: services always fill these, so one missing is the service's
/// fault (a logged 500), never a date of 1970.
pub(crate) fn ts_req(t: Option<Timestamp>) -> HttpResult<DateTime<Utc>> {
    ts(t).ok_or_else(|| {
        crate::error::HttpError(docchat_common::error::ApiError::internal(
            "reading a service's answer",
            "a required timestamp is missing",
        ))
    })
}

/// A comma-separated path segment (`a,b`; clients also send it percent-encoded) as its
/// non-empty items.
pub(crate) fn comma_list(list: &str) -> Vec<String> {
    list.split(',')
        .map(str::trim)
        .filter(|s| !s.is_empty())
        .map(str::to_owned)
        .collect()
}

/// The largest offset or limit a list takes: storage counts rows in signed 64-bit integers.
pub const MAX_PAGE_VALUE: u64 = i64::MAX as u64;

/// Pagination query shared by list endpoints.
#[derive(Debug, serde::Deserialize, utoipa::IntoParams)]
pub struct PageQuery {
    /// Rows to skip.
    #[param(minimum = 0, maximum = 9_223_372_036_854_775_807_i64)]
    pub offset: Option<u64>,
    /// Rows to return (default 100; more than 1000 returns 1000).
    #[param(minimum = 0, maximum = 9_223_372_036_854_775_807_i64)]
    pub limit: Option<u64>,
}

impl PageQuery {
    /// The page as the services take it; out-of-range values are a 400 here, before any
    /// service sees them.
    pub fn request(&self) -> HttpResult<PageRequest> {
        let (offset, limit) = page(self.offset, self.limit)?;
        Ok(PageRequest {
            offset,
            limit,
            ..PageRequest::default()
        })
    }
}

/// Checks a list's `offset` and `limit` (absent: 0, which services read as their default).
pub fn page(offset: Option<u64>, limit: Option<u64>) -> HttpResult<(u64, u64)> {
    for (name, value) in [("offset", offset), ("limit", limit)] {
        if value.is_some_and(|v| v > MAX_PAGE_VALUE) {
            return Err(bad_request(format!(
                "{name} must be at most {MAX_PAGE_VALUE}"
            )));
        }
    }
    Ok((offset.unwrap_or(0), limit.unwrap_or(0)))
}

/// The response header of a list page cut short by its byte budget
/// (`docchat_common::limits`): the offset the next page starts at. A page without it held
/// every row its limit asked for (or the last ones).
pub const NEXT_OFFSET: &str = "x-next-offset";

/// A 200 list answer; `size_limited` (the service stopped the page at its byte budget after
/// `rows` rows from `offset`) adds [`NEXT_OFFSET`].
pub(crate) fn list_answer<T: Serialize>(
    body: &T,
    offset: u64,
    rows: usize,
    size_limited: bool,
) -> actix_web::HttpResponse {
    let mut answer = actix_web::HttpResponse::Ok();
    if size_limited {
        let next = offset.saturating_add(u64::try_from(rows).unwrap_or(u64::MAX));
        answer.insert_header((NEXT_OFFSET, next.to_string()));
    }
    answer.json(body)
}

/// `{count}`: how many a count or a delete found. One schema for every route: two types of
/// one name overwrite each other in the published document.
#[derive(Debug, Serialize, Deserialize, ToSchema)]
pub struct Count {
    pub count: i64,
}

impl Count {
    pub fn of(n: u64) -> Count {
        Count { count: json_int(n) }
    }
}

/// A count as the JSON integer the schemas publish (i64; saturates).
pub fn json_int(n: u64) -> i64 {
    i64::try_from(n).unwrap_or(i64::MAX)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_missing_required_timestamp_is_an_error_not_1970() {
        let missing = ts_req(None).unwrap_err();
        assert_eq!(missing.0.code.http_status(), 500);
        let at =
            docchat_common::time::to_proto(DateTime::from_timestamp(1_700_000_000, 0).unwrap());
        assert_eq!(ts_req(Some(at)).unwrap().timestamp(), 1_700_000_000);
    }
}
