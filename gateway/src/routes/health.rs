//! Health probes: /rpc/health/* (authenticated, SPEC.md) and the orchestrator's /livez and
//! /readyz on the separate probe listener.

use actix_web::{HttpResponse, get};
use docchat_common::config::Service;
use serde::Serialize;
use utoipa::ToSchema;
use utoipa_actix_web::service_config::ServiceConfig;

use crate::auth::Api;
use crate::error::ErrorBody;
use crate::state::AppState;

/// Registers this module's routes (under `/rpc/health`).
pub fn configure(cfg: &mut ServiceConfig) {
    cfg.service(liveness).service(readiness);
}

#[derive(Debug, Serialize, ToSchema)]
pub struct Health {
    /// `ok`, `ready` or `not_ready`.
    pub status: String,
    /// Services that do not answer their health check; `gateway (stopping)` from the
    /// gateway's SIGTERM until it exits (`DOCCHAT_SHUTDOWN_DELAY_SECONDS`).
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub unavailable: Vec<String>,
    /// What works only in part, and why (readiness): e.g. the agent's code sandbox, without
    /// which the python and shell tools are refused (agent-service's log says why).
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub degraded: Vec<String>,
    /// The code sandbox of the agent-service replica that answered (readiness): slots in
    /// use and runs waiting for one.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub sandbox: Option<SandboxSlots>,
}

/// A replica's sandbox slots (agent-service's `DOCCHAT_SANDBOX_SLOTS` and
/// `DOCCHAT_SANDBOX_USER_SLOTS`).
#[derive(Debug, Serialize, ToSchema)]
pub struct SandboxSlots {
    /// bubblewrap, landlock, none or unavailable.
    pub backend: String,
    /// Code runs at once on the replica, and of one user.
    pub slots: u32,
    pub user_slots: u32,
    pub in_use: u32,
    /// Runs waiting for a slot, and how many users they are of.
    pub waiting: u32,
    pub users_waiting: u32,
}

/// The answering agent-service replica's sandbox slots; `None` when it does not answer
/// within a second.
async fn sandbox_slots(state: &AppState) -> Option<SandboxSlots> {
    let mut client = state.clients.agent(&state.gateway_identity);
    let ask = client.sandbox_load(docchat_proto::common::v1::Empty {});
    let report = tokio::time::timeout(std::time::Duration::from_secs(1), ask)
        .await
        .ok()?
        .ok()?
        .into_inner();
    Some(SandboxSlots {
        backend: report.backend,
        slots: report.slots,
        user_slots: report.user_slots,
        in_use: report.in_use,
        waiting: report.waiting,
        users_waiting: report.users_waiting,
    })
}

/// Parts that work only in part, while their service is up.
async fn degraded(state: &AppState, down: &[String]) -> Vec<String> {
    let up = |service: Service| !down.contains(&format!("{}-service", service.name()));
    let part = |service: Service, name: &'static str| async move {
        let channel = state.clients.channel(service).clone();
        docchat_common::grpc::check_status(channel, name).await
    };
    let (sandbox, upstreams) = futures::future::join(
        part(Service::Agent, docchat_common::grpc::SANDBOX_HEALTH),
        part(Service::Chat, docchat_common::grpc::UPSTREAMS_HEALTH),
    )
    .await;
    let mut degraded = Vec::new();
    if up(Service::Agent) && !sandbox {
        degraded.push(
            "code sandbox: no sandbox backend works on agent-service's host, or DOCCHAT_SANDBOX=none (python and shell tools are refused or unconfined; agent-service's log says why)"
                .into(),
        );
    }
    if up(Service::Chat) && !upstreams {
        degraded.push(
            "model upstreams: an upstream named by OPENAI_BASE_URL/OPENAI_API_KEY or OLLAMA_BASE_URL did not list its models (chat-service's log says which and why; retried every DOCCHAT_UPSTREAM_REFRESH_SECONDS)"
                .into(),
        );
    }
    degraded
}

/// Services that are not serving.
pub async fn unavailable(state: &AppState) -> Vec<String> {
    let checks = Service::ALL.into_iter().map(|service| async move {
        let channel = state.clients.channel(service).clone();
        (service, docchat_common::grpc::check_health(channel).await)
    });
    futures::future::join_all(checks)
        .await
        .into_iter()
        .filter(|(_, up)| !up)
        .map(|(s, _)| format!("{}-service", s.name()))
        .collect()
}

pub async fn readiness_response(state: &AppState) -> HttpResponse {
    if state.stopping.is_cancelled() {
        // Lame duck: still serving, but whatever routes requests should stop sending them.
        return HttpResponse::ServiceUnavailable().json(Health {
            status: "not_ready".into(),
            unavailable: vec!["gateway (stopping)".into()],
            degraded: Vec::new(),
            sandbox: None,
        });
    }
    let down = unavailable(state).await;
    let (degraded, sandbox) =
        futures::future::join(degraded(state, &down), sandbox_slots(state)).await;
    let health = |status: &str| Health {
        status: status.into(),
        unavailable: down.clone(),
        degraded: degraded.clone(),
        sandbox,
    };
    if down.is_empty() {
        HttpResponse::Ok().json(health("ready"))
    } else {
        HttpResponse::ServiceUnavailable().json(health("not_ready"))
    }
}

#[utoipa::path(tag = "Health",
    responses((status = 200, body = Health), (status = 401, body = ErrorBody)),
    security(("bearer" = [])))]
#[get("/liveness")]
pub async fn liveness(_api: Api) -> HttpResponse {
    HttpResponse::Ok().json(Health {
        status: "ok".into(),
        unavailable: Vec::new(),
        degraded: Vec::new(),
        sandbox: None,
    })
}

#[utoipa::path(tag = "Health",
    responses((status = 200, body = Health), (status = 401, body = ErrorBody), (status = 503, body = Health)),
    security(("bearer" = [])))]
#[get("/readiness")]
pub async fn readiness(api: Api) -> HttpResponse {
    readiness_response(api.state()).await
}
