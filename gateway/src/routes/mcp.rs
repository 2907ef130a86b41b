//! POST /api/v1/agents/mcp/inspect_tool (ConfigureAgents): agent-service starts or connects
//! to the MCP server(s) and lists their tools. Malformed JSON is the only 400; every
//! semantic failure is a 200 with `status: error` (SPEC.md). The deployment settings
//! `mcp_rate_limit` (429), `mcp_max_body_size_mb` (413) and `mcp_max_concurrent_jobs` (429)
//! apply here, per user and per gateway replica (counted in memory: a deployment with N
//! gateways lets a user make up to N times as many).

use actix_web::{post, web};
use base64::Engine;
use docchat_common::auth::permissions;
use docchat_common::error::{ApiError, ErrorCode};
use docchat_proto::agent::v1 as pb;
use futures::StreamExt;
use serde::Serialize;
use serde_json::{Map, Value};
use utoipa::ToSchema;
use utoipa_actix_web::service_config::ServiceConfig;

use crate::auth::AgentsApi;
use crate::error::{ErrorBody, TerseResult, bad_request};

/// An inspected package's decoded size cap (SPEC.md: about 100 MB).
pub const MAX_FILE_BYTES: usize = 100 * 1000 * 1000;

pub fn configure(cfg: &mut ServiceConfig) {
    cfg.service(inspect_mcp_tool);
}

/// The request (SPEC.md): exactly one of `tool_id`, `servers`, `file_name` +
/// `file_data_base64`; `model` reviews the tools.
#[derive(Debug, ToSchema)]
#[allow(dead_code)] // the schema of the body read by hand below
pub struct InspectMcpToolRequest {
    pub tool_id: Option<String>,
    #[schema(value_type = Option<Object>)]
    pub servers: Option<Value>,
    pub file_name: Option<String>,
    pub file_data_base64: Option<String>,
    pub model: Option<String>,
}

#[derive(Debug, Serialize, ToSchema)]
pub struct InspectedTool {
    pub name: String,
    pub description: String,
    #[schema(value_type = Object)]
    pub parameters: Value,
}

#[derive(Debug, Serialize, ToSchema)]
pub struct InspectedServer {
    pub server_name: String,
    pub server_type: String,
    pub tools: Vec<InspectedTool>,
    pub tool_count: usize,
    pub total_tool_count: usize,
    /// Always null at inspection.
    #[schema(value_type = Option<Vec<String>>)]
    pub allowed_tools_filter: Option<Vec<String>>,
    pub status: String,
    #[schema(value_type = Object)]
    pub security: Value,
    pub error: Option<String>,
    pub detection_method: String,
}

#[derive(Debug, Serialize, ToSchema)]
pub struct InspectMcpToolResponse {
    pub status: String,
    pub servers: Vec<InspectedServer>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
}

impl From<pb::InspectResult> for InspectMcpToolResponse {
    fn from(r: pb::InspectResult) -> Self {
        let servers = r
            .servers
            .into_iter()
            .map(|s| {
                let tools: Vec<InspectedTool> = s
                    .tools
                    .into_iter()
                    .map(|t| InspectedTool {
                        name: t.name,
                        description: t.description,
                        parameters: object(&t.parameters_json),
                    })
                    .collect();
                InspectedServer {
                    server_name: s.server_name,
                    server_type: s.server_type,
                    tool_count: tools.len(),
                    total_tool_count: tools.len(),
                    tools,
                    allowed_tools_filter: None,
                    status: s.status,
                    security: object(&s.security_json),
                    error: (!s.error.is_empty()).then_some(s.error),
                    detection_method: s.detection_method,
                }
            })
            .collect();
        InspectMcpToolResponse {
            status: r.status,
            servers,
            error: (!r.error.is_empty()).then_some(r.error),
        }
    }
}

/// A JSON object from its text (`{}` when it is not one).
fn object(text: &str) -> Value {
    match serde_json::from_str::<Value>(text) {
        Ok(v @ Value::Object(_)) => v,
        _ => Value::Object(Map::new()),
    }
}

fn failed(error: impl Into<String>) -> web::Json<InspectMcpToolResponse> {
    web::Json(InspectMcpToolResponse {
        status: "error".into(),
        servers: Vec::new(),
        error: Some(error.into()),
    })
}

fn too_large(what: String) -> ApiError {
    ApiError::new(ErrorCode::PayloadTooLarge, what)
}

/// The body, up to `max` bytes (413 beyond).
pub(crate) async fn read_body(mut payload: web::Payload, max: usize) -> Result<Vec<u8>, ApiError> {
    let mut body = Vec::new();
    while let Some(chunk) = payload.next().await {
        let chunk = chunk.map_err(|e| bad_request(format!("reading the body failed: {e}")).0)?;
        if body.len() + chunk.len() > max {
            return Err(too_large(format!(
                "the request body is larger than {} MB",
                max / 1_000_000
            )));
        }
        body.extend_from_slice(&chunk);
    }
    Ok(body)
}

/// The request as agent-service takes it, or the semantic failure to answer.
fn request(body: Map<String, Value>) -> Result<pb::InspectRequest, ApiError> {
    let text = |key: &str| -> Result<String, ApiError> {
        match body.get(key) {
            None | Some(Value::Null) => Ok(String::new()),
            Some(Value::String(s)) => Ok(s.clone()),
            Some(_) => Err(bad_request(format!("{key} must be a string")).0),
        }
    };
    let servers_json = match body.get("servers") {
        None | Some(Value::Null) => String::new(),
        Some(v @ Value::Object(_)) => v.to_string(),
        Some(_) => return Err(bad_request("servers must be an object").0),
    };
    let mut req = pb::InspectRequest {
        tool_id: text("tool_id")?,
        servers_json,
        file_name: text("file_name")?,
        model: text("model")?,
        ..Default::default()
    };
    if let Some(data) = body.get("file_data_base64").filter(|v| !v.is_null()) {
        let data = data
            .as_str()
            .ok_or_else(|| bad_request("file_data_base64 must be a string").0)?;
        req.has_file_data = true;
        match base64::engine::general_purpose::STANDARD.decode(data.trim()) {
            Ok(bytes) if bytes.len() > MAX_FILE_BYTES => {
                return Err(too_large(
                    "File is too large, maximum size is 100MB".to_owned(),
                ));
            }
            Ok(bytes) => req.file_data = bytes,
            Err(_) => req.bad_base64 = true,
        }
    }
    Ok(req)
}

#[utoipa::path(tag = "Agents", request_body = InspectMcpToolRequest,
    responses((status = 200, body = InspectMcpToolResponse), (status = 400, body = ErrorBody), (status = 401, body = ErrorBody),
        (status = 413, body = ErrorBody), (status = 429, body = ErrorBody)),
    security(("bearer" = [])))]
#[post("/agents/mcp/inspect_tool")]
pub async fn inspect_mcp_tool(
    api: AgentsApi,
    payload: web::Payload,
) -> TerseResult<web::Json<InspectMcpToolResponse>> {
    // Before the body is read and a rate-limit slot is taken: agent-service checks again.
    api.require(permissions::CONFIGURE_AGENTS)?;
    let config = &api.state().config;
    let max = usize::try_from(config.mcp_max_body_size_mb.saturating_mul(1_000_000))
        .unwrap_or(usize::MAX);
    let _slot = api.state().mcp.admit(&api.caller().user_id)?;
    let body = read_body(payload, max).await?;
    let body: Value = serde_json::from_slice(&body)
        .map_err(|e| bad_request(format!("invalid JSON body: {e}")))?;
    let Value::Object(body) = body else {
        return Ok(failed("the request must be a JSON object"));
    };
    let req = match request(body) {
        Ok(req) => req,
        Err(e) if e.code == ErrorCode::BadRequest => return Ok(failed(e.message)),
        Err(e) => return Err(e.into()),
    };
    let result = api.custom_tools().inspect_mcp(req).await?.into_inner();
    Ok(web::Json(result.into()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_result_maps_to_the_client_shape() {
        let r = pb::InspectResult {
            status: "success".into(),
            servers: vec![pb::InspectedServer {
                server_name: "calc".into(),
                server_type: "http".into(),
                tools: vec![pb::InspectedTool {
                    name: "add".into(),
                    description: "Adds".into(),
                    parameters_json: r#"{"type":"object"}"#.into(),
                }],
                status: "success".into(),
                security_json: "{}".into(),
                error: String::new(),
                detection_method: "config".into(),
            }],
            error: String::new(),
        };
        let json = serde_json::to_value(InspectMcpToolResponse::from(r)).unwrap();
        assert_eq!(
            json,
            serde_json::json!({"status": "success", "servers": [{
                "server_name": "calc", "server_type": "http",
                "tools": [{"name": "add", "description": "Adds", "parameters": {"type": "object"}}],
                "tool_count": 1, "total_tool_count": 1, "allowed_tools_filter": null,
                "status": "success", "security": {}, "error": null, "detection_method": "config"
            }]})
        );
    }
}
