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
        });
    }
    let down = unavailable(state).await;
    let degraded = degraded(state, &down).await;
    if down.is_empty() {
        HttpResponse::Ok().json(Health {
            status: "ready".into(),
            unavailable: down,
            degraded,
        })
    } else {
        HttpResponse::ServiceUnavailable().json(Health {
            status: "not_ready".into(),
            unavailable: down,
            degraded,
        })
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
    })
}

#[utoipa::path(tag = "Health",
    responses((status = 200, body = Health), (status = 401, body = ErrorBody), (status = 503, body = Health)),
    security(("bearer" = [])))]
#[get("/readiness")]
pub async fn readiness(api: Api) -> HttpResponse {
    readiness_response(api.state()).await
}
