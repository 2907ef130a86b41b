//! A user's own jobs in the client's JobDetails shape, read from the job history (another
//! user's job is a 404): GET /api/v1/jobs, GET and DELETE /api/v1/jobs/{job_id} (a delete
//! clears a finished job from the list; the history keeps it), POST
//! /api/v1/jobs/{job_id}/cancel (an ingestion job or a scheduled task's execution), GET /api/v1/jobs/pending/count; and the administrator's
//! GET /api/v1/user_jobs (every user's recent jobs) and POST /api/v1/user_jobs/{job_id}/cancel.

use std::collections::BTreeMap;

use actix_web::{HttpResponse, delete, get, post, web};
use chrono::{DateTime, Utc};
use docchat_proto::admin::v1 as pb;
use docchat_proto::common::v1::Empty;
use docchat_proto::ingest::v1 as ingest;
use docchat_proto::scheduler::v1 as scheduler;
use serde::{Deserialize, Serialize};
use utoipa::ToSchema;
use utoipa_actix_web::service_config::ServiceConfig;

use super::job_history::human_duration;
use super::{ts, ts_req};
use crate::auth::Api;
use crate::error::{ErrorBody, HttpResult};
use docchat_common::jobs::client_kind;

/// One step of a job; these jobs have one, the job itself.
#[derive(Debug, Serialize, Deserialize, ToSchema)]
pub struct JobDetailsStatus {
    pub id: String,
    pub status: String,
}

#[derive(Debug, Serialize, Deserialize, ToSchema)]
pub struct JobDetails {
    pub id: String,
    pub name: String,
    pub overall_status: String,
    pub status: Option<String>,
    pub passed_percentage: f64,
    pub failed_percentage: f64,
    pub progress: f64,
    pub created_at: DateTime<Utc>,
    pub updated_at: DateTime<Utc>,
    /// The client's `JobKind` name (`IngestUploadsJob`, `ScheduledTaskExecutionJob`,
    /// `RegenerateCollectionDescriptionJob`, `NoOpJob` for an agent run); the
    /// administrator's job history keeps docchat's own kind.
    pub kind: String,
    pub statuses: Vec<JobDetailsStatus>,
    pub errors: Vec<String>,
    pub duration: String,
    pub duration_seconds: f64,
    pub canceled_by: Option<String>,
    pub cancel_reason: Option<String>,
    /// Unix seconds the job started.
    pub start_time: Option<f64>,
}

/// The client's `overall_status` (`in progress | completed | failed | canceled`) of a
/// status of the history; `status` keeps the history's own.
fn overall(status: &str) -> &'static str {
    match status {
        "queued" | "running" => "in progress",
        "completed" => "completed",
        "canceled" => "canceled",
        _ => "failed",
    }
}

pub(crate) fn details(j: pb::JobHistoryEntry) -> HttpResult<JobDetails> {
    Ok(JobDetails {
        statuses: vec![JobDetailsStatus {
            id: j.id.clone(),
            status: j.status.clone(),
        }],
        overall_status: overall(&j.status).to_owned(),
        status: Some(j.status),
        duration: human_duration(j.duration_seconds),
        duration_seconds: j.duration_seconds,
        start_time: ts(j.started_at).map(|t| t.timestamp_micros() as f64 / 1e6),
        id: j.id,
        name: j.name,
        passed_percentage: j.passed,
        failed_percentage: j.failed,
        progress: j.progress,
        created_at: ts_req(j.created_at)?,
        updated_at: ts_req(j.updated_at)?,
        kind: client_kind(&j.kind).to_owned(),
        errors: j.errors,
        canceled_by: j.canceled_by,
        cancel_reason: j.cancel_reason,
    })
}

/// Seconds from `started` to `finished` (now while unfinished); 0 when it never started.
fn seconds_between(started: Option<DateTime<Utc>>, finished: Option<DateTime<Utc>>) -> f64 {
    started
        .map(|s| {
            let end = finished.unwrap_or_else(Utc::now);
            ((end - s).num_microseconds().unwrap_or(0) as f64 / 1e6).max(0.0)
        })
        .unwrap_or(0.0)
}

/// An ingestion job as JobDetails (the answer of a cancel and of a new ingestion job, and a
/// poll's answer before the history has caught up).
pub(crate) fn ingest_details(j: ingest::Job) -> HttpResult<JobDetails> {
    let created_at = ts_req(j.created_at)?;
    let started = ts(j.started_at);
    let duration_seconds = seconds_between(started, ts(j.finished_at));
    let (passed, failed) = match j.status.as_str() {
        "completed" => (1.0, 0.0),
        "failed" | "timeout" | "stale" => (0.0, 1.0),
        _ => (0.0, 0.0),
    };
    Ok(JobDetails {
        statuses: vec![JobDetailsStatus {
            id: j.id.clone(),
            status: j.status.clone(),
        }],
        overall_status: overall(&j.status).to_owned(),
        status: Some(j.status),
        name: docchat_common::jobs::display_name(&j.kind),
        duration: human_duration(duration_seconds),
        duration_seconds,
        start_time: started.map(|t| t.timestamp_micros() as f64 / 1e6),
        id: j.id,
        passed_percentage: passed,
        failed_percentage: failed,
        progress: j.progress,
        created_at,
        updated_at: ts(j.updated_at).unwrap_or(created_at),
        kind: client_kind(&j.kind).to_owned(),
        errors: j.errors,
        canceled_by: j.canceled_by,
        cancel_reason: j.cancel_reason,
    })
}

/// The client's CancelUserJobRequest (also accepted on the user's own cancel).
#[derive(Debug, Default, Deserialize, ToSchema)]
pub struct CancelJobBody {
    pub cancel_reason: Option<String>,
}

/// The client's CountWithQueueDetails.
#[derive(Debug, Serialize, Deserialize, ToSchema)]
pub struct PendingCount {
    pub count: u64,
    pub queue_infos: Vec<QueueInfo>,
}

#[derive(Debug, Serialize, Deserialize, ToSchema)]
pub struct QueueInfo {
    pub name: String,
    pub length: u64,
}

/// The client's UserJobDetails: one user's jobs.
#[derive(Debug, Serialize, Deserialize, ToSchema)]
pub struct UserJobs {
    pub username: String,
    pub user_id: String,
    pub jobs: Vec<JobDetails>,
}

/// Registers this module's routes.
pub fn configure(cfg: &mut ServiceConfig) {
    cfg.service(list_jobs)
        .service(count_pending_jobs)
        .service(get_job)
        .service(delete_job)
        .service(cancel_job)
        .service(list_user_jobs)
        .service(cancel_user_job);
}

#[utoipa::path(tag = "Jobs",
    responses((status = 200, body = Vec<JobDetails>), (status = 401, body = ErrorBody)),
    security(("bearer" = [])))]
#[get("/jobs")]
pub async fn list_jobs(api: Api) -> HttpResult<web::Json<Vec<JobDetails>>> {
    let page = api.admin().list_own_jobs(Empty {}).await?.into_inner();
    Ok(web::Json(
        page.jobs
            .into_iter()
            .map(details)
            .collect::<HttpResult<_>>()?,
    ))
}

#[utoipa::path(tag = "Jobs", params(("job_id" = String, Path)),
    responses((status = 200, body = JobDetails), (status = 401, body = ErrorBody), (status = 404, body = ErrorBody)),
    security(("bearer" = [])))]
#[get("/jobs/{job_id}")]
pub async fn get_job(api: Api, path: web::Path<String>) -> HttpResult<web::Json<JobDetails>> {
    let job_id = path.into_inner();
    let request = pb::GetOwnJobRequest {
        job_id: job_id.clone(),
    };
    match api.admin().get_own_job(request).await {
        Ok(job) => Ok(web::Json(details(job.into_inner())?)),
        Err(status) if status.code() == tonic::Code::NotFound => unfinished_ingestion(&api, job_id)
            .await?
            .ok_or(status.into()),
        Err(status) => Err(status.into()),
    }
}

/// The history is fed by events, so a just-created ingestion job (POST
/// /uploads/{id}/ingest/job, whose answer the client polls at once) may have no row yet:
/// ingest-service's own job answers then, while it is queued or running. A finished job
/// without a row is not answered from there: a job the user deleted from their list is
/// always finished and must stay a 404.
async fn unfinished_ingestion(api: &Api, id: String) -> HttpResult<Option<web::Json<JobDetails>>> {
    match api.ingest().get_job(ingest::JobRef { id }).await {
        Ok(job) => {
            let job = job.into_inner();
            let unfinished = matches!(job.status.as_str(), "queued" | "running");
            Ok(if unfinished {
                Some(web::Json(ingest_details(job)?))
            } else {
                None
            })
        }
        Err(status) if status.code() == tonic::Code::NotFound => Ok(None),
        Err(status) => Err(status.into()),
    }
}

#[utoipa::path(tag = "Jobs",
    responses((status = 200, body = PendingCount), (status = 401, body = ErrorBody)),
    security(("bearer" = [])))]
#[get("/jobs/pending/count")]
pub async fn count_pending_jobs(api: Api) -> HttpResult<web::Json<PendingCount>> {
    let pending = api
        .ingest()
        .count_pending_jobs(Empty {})
        .await?
        .into_inner();
    Ok(web::Json(PendingCount {
        count: pending.count,
        queue_infos: pending
            .queues
            .into_iter()
            .map(|q| QueueInfo {
                name: q.name,
                length: q.length,
            })
            .collect(),
    }))
}

#[utoipa::path(tag = "Jobs", params(("job_id" = String, Path)),
    responses((status = 204), (status = 401, body = ErrorBody), (status = 404, body = ErrorBody), (status = 409, body = ErrorBody)),
    security(("bearer" = [])))]
#[delete("/jobs/{job_id}")]
pub async fn delete_job(api: Api, path: web::Path<String>) -> HttpResult<HttpResponse> {
    let request = pb::GetOwnJobRequest {
        job_id: path.into_inner(),
    };
    api.admin().delete_own_job(request).await?;
    Ok(HttpResponse::NoContent().finish())
}

#[utoipa::path(tag = "Jobs", params(("job_id" = String, Path)), request_body = Option<CancelJobBody>,
    responses((status = 200, body = JobDetails), (status = 401, body = ErrorBody), (status = 404, body = ErrorBody), (status = 409, body = ErrorBody)),
    security(("bearer" = [])))]
#[post("/jobs/{job_id}/cancel")]
pub async fn cancel_job(
    api: Api,
    path: web::Path<String>,
    body: Option<web::Json<CancelJobBody>>,
) -> HttpResult<web::Json<JobDetails>> {
    let reason = body.and_then(|b| b.into_inner().cancel_reason);
    let job = cancel(&api, path.into_inner(), reason, false).await?;
    Ok(web::Json(job))
}

#[utoipa::path(tag = "Jobs",
    responses((status = 200, body = Vec<UserJobs>), (status = 401, body = ErrorBody), (status = 403, body = ErrorBody)),
    security(("bearer" = [])))]
#[get("/user_jobs")]
pub async fn list_user_jobs(api: Api) -> HttpResult<web::Json<Vec<UserJobs>>> {
    // The week's newest jobs (one page of the history), grouped by user.
    let request = pb::ListJobHistoryRequest {
        limit: 200,
        ..Default::default()
    };
    let page = api.admin().list_job_history(request).await?.into_inner();
    let mut users: BTreeMap<String, UserJobs> = BTreeMap::new();
    for job in page.jobs {
        users
            .entry(job.user_id.clone())
            .or_insert_with(|| UserJobs {
                username: job.username.clone(),
                user_id: job.user_id.clone(),
                jobs: Vec::new(),
            })
            .jobs
            .push(details(job)?);
    }
    let mut users: Vec<UserJobs> = users.into_values().collect();
    users.sort_by(|a, b| a.username.cmp(&b.username));
    Ok(web::Json(users))
}

#[utoipa::path(tag = "Jobs", params(("job_id" = String, Path)), request_body = Option<CancelJobBody>,
    responses((status = 204), (status = 401, body = ErrorBody), (status = 403, body = ErrorBody), (status = 404, body = ErrorBody), (status = 409, body = ErrorBody)),
    security(("bearer" = [])))]
#[post("/user_jobs/{job_id}/cancel")]
pub async fn cancel_user_job(
    api: Api,
    path: web::Path<String>,
    body: Option<web::Json<CancelJobBody>>,
) -> HttpResult<HttpResponse> {
    let reason = body.and_then(|b| b.into_inner().cancel_reason);
    cancel(&api, path.into_inner(), reason, true).await?;
    Ok(HttpResponse::NoContent().finish())
}

/// Cancels through the service that runs the job: an ingestion job (ingest-service) or a
/// scheduled task's execution (scheduler-service). Another kind of job that the caller can
/// see (an agent run: stopped from its chat) is a 409 that says so.
///
/// Asked in turn rather than routed by the history row's kind: the history is fed by events,
/// so a job created a moment ago (a new ingestion job the client polls at once, a task run
/// just triggered) has no row yet, and routing by the row would need this same chain for
/// exactly those jobs.
async fn cancel(
    api: &Api,
    id: String,
    reason: Option<String>,
    any_owner: bool,
) -> HttpResult<JobDetails> {
    let reason = reason.filter(|r| !r.trim().is_empty()).unwrap_or_else(|| {
        if any_owner {
            "canceled by an administrator".to_owned()
        } else {
            "canceled by its owner".to_owned()
        }
    });
    let request = ingest::CancelJobRequest {
        id: id.clone(),
        reason: reason.clone(),
        any_owner,
    };
    match api.ingest().cancel_job(request).await {
        Ok(job) => return ingest_details(job.into_inner()),
        Err(status) if status.code() == tonic::Code::NotFound => {}
        Err(status) => return Err(status.into()),
    }
    let request = scheduler::CancelExecutionRequest {
        id: id.clone(),
        reason: reason.clone(),
        any_owner,
    };
    match api.scheduler().cancel_execution(request).await {
        Ok(execution) => canceled_execution(execution.into_inner(), &api.caller().username, reason),
        Err(status) if status.code() == tonic::Code::NotFound && !any_owner => {
            // Another service's job of the caller (an agent run …): say why it stays.
            let own = api
                .admin()
                .get_own_job(pb::GetOwnJobRequest { job_id: id.clone() })
                .await?
                .into_inner();
            Err(docchat_common::ApiError::conflict(format!(
                "job {id} is a {} job ({}); only ingestion jobs and scheduled task executions can be canceled here (an agent run stops from its chat)",
                own.kind, own.status
            ))
            .into())
        }
        Err(status) => Err(status.into()),
    }
}

/// A scheduled task's execution that `by` just canceled for `reason`, as JobDetails (the
/// cancel's answer, before the history has the event).
fn canceled_execution(e: scheduler::Execution, by: &str, reason: String) -> HttpResult<JobDetails> {
    let created_at = ts_req(e.created_at)?;
    let started = ts(e.started_at);
    let finished = ts(e.completed_at);
    let duration_seconds = seconds_between(started, finished);
    // The history's status name (the execution's own is `cancelled`).
    let status = "canceled".to_owned();
    Ok(JobDetails {
        statuses: vec![JobDetailsStatus {
            id: e.id.clone(),
            status: status.clone(),
        }],
        overall_status: overall(&status).to_owned(),
        passed_percentage: 0.0,
        failed_percentage: 0.0,
        progress: 1.0,
        status: Some(status),
        name: e.task_name,
        duration: human_duration(duration_seconds),
        duration_seconds,
        start_time: started.map(|t| t.timestamp_micros() as f64 / 1e6),
        id: e.id,
        created_at,
        updated_at: finished.unwrap_or(created_at),
        kind: client_kind(docchat_common::jobs::KIND_SCHEDULED_TASK).to_owned(),
        errors: Vec::new(),
        canceled_by: Some(by.to_owned()),
        cancel_reason: Some(reason),
    })
}
