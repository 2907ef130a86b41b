//! A user's own jobs: GET /api/v1/jobs and GET /api/v1/jobs/{job_id} in the client's
//! JobDetails shape, read from the job history (another user's job is a 404).

use actix_web::{get, web};
use chrono::{DateTime, Utc};
use docchat_proto::admin::v1 as pb;
use docchat_proto::common::v1::Empty;
use serde::{Deserialize, Serialize};
use utoipa::ToSchema;
use utoipa_actix_web::service_config::ServiceConfig;

use super::job_history::human_duration;
use super::{ts, ts_req};
use crate::auth::Api;
use crate::error::{ErrorBody, HttpResult};

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

fn details(j: pb::JobHistoryEntry) -> JobDetails {
    JobDetails {
        statuses: vec![JobDetailsStatus {
            id: j.id.clone(),
            status: j.status.clone(),
        }],
        overall_status: j.status.clone(),
        status: Some(j.status),
        duration: human_duration(j.duration_seconds),
        duration_seconds: j.duration_seconds,
        start_time: ts(j.started_at).map(|t| t.timestamp_micros() as f64 / 1e6),
        id: j.id,
        name: j.name,
        passed_percentage: j.passed,
        failed_percentage: j.failed,
        progress: j.progress,
        created_at: ts_req(j.created_at),
        updated_at: ts_req(j.updated_at),
        kind: j.kind,
        errors: j.errors,
        canceled_by: j.canceled_by,
        cancel_reason: j.cancel_reason,
    }
}

/// Registers this module's routes.
pub fn configure(cfg: &mut ServiceConfig) {
    cfg.service(list_jobs).service(get_job);
}

#[utoipa::path(tag = "Jobs",
    responses((status = 200, body = Vec<JobDetails>), (status = 401, body = ErrorBody)),
    security(("bearer" = [])))]
#[get("/jobs")]
pub async fn list_jobs(api: Api) -> HttpResult<web::Json<Vec<JobDetails>>> {
    let page = api.admin().list_own_jobs(Empty {}).await?.into_inner();
    Ok(web::Json(page.jobs.into_iter().map(details).collect()))
}

#[utoipa::path(tag = "Jobs", params(("job_id" = String, Path)),
    responses((status = 200, body = JobDetails), (status = 401, body = ErrorBody), (status = 404, body = ErrorBody)),
    security(("bearer" = [])))]
#[get("/jobs/{job_id}")]
pub async fn get_job(api: Api, path: web::Path<String>) -> HttpResult<web::Json<JobDetails>> {
    let request = pb::GetOwnJobRequest {
        job_id: path.into_inner(),
    };
    let job = api.admin().get_own_job(request).await?.into_inner();
    Ok(web::Json(details(job)))
}
