//! The administrator's job history: GET /api/v1/admin/jobs (keyset pages, newest first) and
//! GET /api/v1/admin/jobs/stats. admin-service keeps the rows and checks the admin-center
//! permission; this module parses the query (repeated `status`, the client's `+0000`
//! timestamps) and shapes SPEC.md's JSON.

use actix_web::{get, web};
use chrono::{DateTime, Utc};
use docchat_common::time::parse_datetime;
use docchat_proto::admin::v1 as pb;
use serde::{Deserialize, Serialize};
use utoipa::ToSchema;
use utoipa_actix_web::service_config::ServiceConfig;

use super::{ts, ts_req};
use crate::auth::Api;
use crate::error::{ErrorBody, HttpResult, bad_request};

/// The most rows one page returns.
const MAX_LIMIT: u32 = 200;

#[derive(Debug, Serialize, Deserialize, ToSchema)]
pub struct JobHistoryEntry {
    pub id: String,
    pub name: String,
    pub kind: String,
    pub username: String,
    pub user_id: String,
    pub status: String,
    pub passed: f64,
    pub failed: f64,
    pub progress: f64,
    pub errors: Vec<String>,
    pub collection_id: String,
    pub collection_name: String,
    pub canceled_by: Option<String>,
    pub cancel_reason: Option<String>,
    pub date: DateTime<Utc>,
    pub last_update_date: DateTime<Utc>,
    pub started_at: Option<DateTime<Utc>>,
    pub finished_at: Option<DateTime<Utc>>,
    pub deleted_at: Option<DateTime<Utc>>,
    pub duration: String,
    pub duration_seconds: f64,
    pub completed: bool,
    pub canceled: bool,
}

#[derive(Debug, Serialize, Deserialize, ToSchema)]
pub struct JobHistoryPage {
    pub jobs: Vec<JobHistoryEntry>,
    /// Both cursor fields are absent on the last page.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub next_cursor_created_at: Option<DateTime<Utc>>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub next_cursor_id: Option<String>,
}

#[derive(Debug, Serialize, Deserialize, ToSchema)]
pub struct JobHistoryStats {
    pub total: u64,
    pub queued: u64,
    pub running: u64,
    pub completed: u64,
    pub failed: u64,
    pub canceled: u64,
    pub timeout: u64,
    pub stale: u64,
    pub unknown: u64,
}

/// The list's query, for the published document; the handler reads the raw pairs because
/// `status` repeats.
#[derive(Debug, Deserialize, utoipa::IntoParams)]
#[allow(dead_code)] // documentation only
pub struct JobHistoryQuery {
    /// created time of the previous page's last row
    pub cursor_created_at: Option<String>,
    /// id of the previous page's last row
    pub cursor_id: Option<String>,
    /// rows per page (default 50, at most 200)
    #[param(minimum = 1)]
    pub limit: Option<u32>,
    /// repeatable: queued, running, completed, failed, canceled, timeout, stale, unknown
    pub status: Option<Vec<String>>,
    pub kind: Option<String>,
    pub user_id: Option<String>,
    pub collection_id: Option<String>,
    /// default: seven days ago
    pub created_after: Option<String>,
}

/// A query timestamp; a `+` the caller did not percent-encode arrives as a space.
fn timestamp(name: &str, value: &str) -> HttpResult<prost_types::Timestamp> {
    parse_datetime(value)
        .or_else(|| parse_datetime(&value.replace(' ', "+")))
        .map(docchat_common::time::to_proto)
        .ok_or_else(|| bad_request(format!("{name} is not a date-time: {value:?}")))
}

fn list_request(pairs: Vec<(String, String)>) -> HttpResult<pb::ListJobHistoryRequest> {
    let mut r = pb::ListJobHistoryRequest::default();
    for (key, value) in pairs {
        match key.as_str() {
            "cursor_created_at" => r.cursor_created_at = Some(timestamp(&key, &value)?),
            "created_after" => r.created_after = Some(timestamp(&key, &value)?),
            "cursor_id" => r.cursor_id = value,
            "limit" => {
                r.limit = value
                    .parse::<u32>()
                    .ok()
                    .filter(|n| *n >= 1)
                    .ok_or_else(|| bad_request("limit must be a positive integer"))?
                    .min(MAX_LIMIT);
            }
            "status" => r.statuses.push(value),
            "kind" => r.kind = value,
            "user_id" => r.user_id = value,
            "collection_id" => r.collection_id = value,
            _ => {}
        }
    }
    if r.cursor_created_at.is_some() == r.cursor_id.is_empty() {
        return Err(bad_request(
            "cursor_created_at and cursor_id must be given together",
        ));
    }
    Ok(r)
}

fn entry(j: pb::JobHistoryEntry) -> HttpResult<JobHistoryEntry> {
    Ok(JobHistoryEntry {
        completed: j.status == "completed",
        canceled: j.status == "canceled",
        duration: human_duration(j.duration_seconds),
        duration_seconds: j.duration_seconds,
        id: j.id,
        name: j.name,
        kind: j.kind,
        username: j.username,
        user_id: j.user_id,
        status: j.status,
        passed: j.passed,
        failed: j.failed,
        progress: j.progress,
        errors: j.errors,
        collection_id: j.collection_id,
        collection_name: j.collection_name,
        canceled_by: j.canceled_by,
        cancel_reason: j.cancel_reason,
        date: ts_req(j.created_at)?,
        last_update_date: ts_req(j.updated_at)?,
        started_at: ts(j.started_at),
        finished_at: ts(j.finished_at),
        deleted_at: ts(j.deleted_at),
    })
}

/// `1h 2m 3s`, `4m 0s`, `2.5s`.
pub fn human_duration(seconds: f64) -> String {
    if seconds.is_nan() || seconds < 60.0 {
        return format!("{:.1}s", seconds.max(0.0));
    }
    let total = seconds.round() as u64;
    let (h, m, s) = (total / 3600, total / 60 % 60, total % 60);
    if h > 0 {
        format!("{h}h {m}m {s}s")
    } else {
        format!("{m}m {s}s")
    }
}

/// Registers this module's routes.
pub fn configure(cfg: &mut ServiceConfig) {
    cfg.service(job_history_stats).service(list_job_history);
}

#[utoipa::path(tag = "Jobs", params(JobHistoryQuery),
    responses((status = 200, body = JobHistoryPage), (status = 400, body = ErrorBody), (status = 401, body = ErrorBody), (status = 403, body = ErrorBody)),
    security(("bearer" = [])))]
#[get("/admin/jobs")]
pub async fn list_job_history(
    api: Api,
    query: web::Query<Vec<(String, String)>>,
) -> HttpResult<web::Json<JobHistoryPage>> {
    let request = list_request(query.into_inner())?;
    let page = api.admin().list_job_history(request).await?.into_inner();
    let next_id = Some(page.next_cursor_id).filter(|id| !id.is_empty());
    Ok(web::Json(JobHistoryPage {
        jobs: page
            .jobs
            .into_iter()
            .map(entry)
            .collect::<HttpResult<_>>()?,
        next_cursor_created_at: ts(page.next_cursor_created_at).filter(|_| next_id.is_some()),
        next_cursor_id: next_id,
    }))
}

#[derive(Debug, Deserialize, utoipa::IntoParams)]
pub struct StatsQuery {
    /// default: seven days ago
    pub created_after: Option<String>,
}

#[utoipa::path(tag = "Jobs", params(StatsQuery),
    responses((status = 200, body = JobHistoryStats), (status = 400, body = ErrorBody), (status = 401, body = ErrorBody), (status = 403, body = ErrorBody)),
    security(("bearer" = [])))]
#[get("/admin/jobs/stats")]
pub async fn job_history_stats(
    api: Api,
    query: web::Query<StatsQuery>,
) -> HttpResult<web::Json<JobHistoryStats>> {
    let created_after = match &query.created_after {
        Some(v) => Some(timestamp("created_after", v)?),
        None => None,
    };
    let stats = api
        .admin()
        .get_job_history_stats(pb::JobHistoryStatsRequest { created_after })
        .await?
        .into_inner();
    let n = |status: &str| stats.by_status.get(status).copied().unwrap_or(0);
    Ok(web::Json(JobHistoryStats {
        total: stats.total,
        queued: n("queued"),
        running: n("running"),
        completed: n("completed"),
        failed: n("failed"),
        canceled: n("canceled"),
        timeout: n("timeout"),
        stale: n("stale"),
        unknown: n("unknown"),
    }))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn queries_parse_repeats_and_client_offsets() {
        let pairs = |v: &[(&str, &str)]| {
            v.iter()
                .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
                .collect::<Vec<_>>()
        };
        let r = list_request(pairs(&[
            ("status", "failed"),
            ("status", "completed"),
            ("cursor_created_at", "2026-11-21T10:00:00.123456+0000"),
            ("cursor_id", "j1"),
            ("limit", "500"),
        ]))
        .unwrap();
        assert_eq!(r.statuses, ["failed", "completed"]);
        assert_eq!(r.limit, 200);
        assert!(r.cursor_created_at.is_some());
        assert!(list_request(pairs(&[("cursor_id", "j1")])).is_err());
        assert!(list_request(pairs(&[("created_after", "yesterday")])).is_err());
        assert!(list_request(pairs(&[("limit", "0")])).is_err());
        assert_eq!(human_duration(3723.0), "1h 2m 3s");
    }
}
