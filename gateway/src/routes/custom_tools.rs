//! /api/v1/agents/custom_tools: the caller's custom tools (SPEC.md "Custom tools"), held by
//! agent-service's CustomToolService. Errors answer SPEC.md's exact messages with
//! `{code, message}`, and a 401 says only `Unauthorized` ([`AgentsApi`], [`TerseResult`]).
//! Writes need ConfigureAgents, checked here before the body is read and again by the
//! service; reads need only a valid key.

use actix_web::http::header::CONTENT_TYPE;
use actix_web::{HttpRequest, HttpResponse, delete, get, post, put, web};
use docchat_common::auth::permissions::CONFIGURE_AGENTS;
use docchat_common::error::{ApiError, ErrorCode};
use docchat_proto::agent::v1 as pb;
use docchat_proto::common::v1::Empty;
use futures::StreamExt;
use serde::{Deserialize, Serialize};
use utoipa::ToSchema;
use utoipa_actix_web::service_config::ServiceConfig;

use super::comma_list;
use super::files::attachment;
use crate::auth::AgentsApi;
use crate::error::{ErrorBody, HttpError, TerseResult, bad_request};
use crate::form::{self, FormReader};

/// Registers this module's routes.
pub fn configure(cfg: &mut ServiceConfig) {
    cfg.service(add_custom_agent_tool)
        .service(list_custom_agent_tools)
        .service(get_custom_agent_tool)
        .service(update_custom_agent_tool)
        .service(delete_custom_agent_tools)
        .service(download_custom_agent_tool);
}

/// One created tool.
#[derive(Debug, Serialize, ToSchema)]
pub struct CreatedTool {
    pub agent_custom_tool_id: String,
}

/// A custom tool of the caller's.
#[derive(Debug, Serialize, ToSchema)]
pub struct CustomTool {
    pub id: String,
    pub tool_name: String,
    /// local_mcp, remote_mcp, browser_action, general_code
    pub tool_type: String,
    /// Its arguments (structure per tool_type).
    pub tool_args: serde_json::Value,
    pub owner_email: String,
    /// The uploaded file's name (single-tool read only; null without a file).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub file_name: Option<Option<String>>,
}

impl CustomTool {
    fn of(t: pb::CustomTool, with_file: bool) -> CustomTool {
        let file_name = with_file.then(|| Some(t.file_name).filter(|n| !n.is_empty()));
        CustomTool {
            id: t.id,
            tool_name: t.tool_name,
            tool_type: t.tool_type,
            tool_args: serde_json::from_str(&t.tool_args_json)
                .unwrap_or_else(|_| serde_json::json!({})),
            owner_email: t.owner_email,
            file_name,
        }
    }
}

/// The tool_args to change.
#[derive(Debug, Deserialize, ToSchema)]
pub struct ToolUpdate {
    /// The fields of tool_args to change (a JSON object, or the same as a JSON string).
    pub tool_args: Option<serde_json::Value>,
}

#[utoipa::path(
    tag = "Agents",
    request_body(content_type = "multipart/form-data", description = "tool_type, tool_args (a JSON string), file, filename, generate_system_prompt, system_prompt_generation_timeout"),
    responses(
        (status = 201, body = Vec<CreatedTool>),
        (status = 400, body = ErrorBody), (status = 401, body = ErrorBody),
        (status = 408, description = "the system prompt was not written in time", body = ErrorBody),
        (status = 413, body = ErrorBody), (status = 415, body = ErrorBody),
    ),
    security(("bearer" = []))
)]
#[post("/agents/custom_tools")]
pub async fn add_custom_agent_tool(
    api: AgentsApi,
    req: HttpRequest,
    payload: web::Payload,
) -> TerseResult<HttpResponse> {
    // Before the body is read (up to 20 MB): agent-service checks again.
    api.require(CONFIGURE_AGENTS)?;
    let max_body = api.state().config.max_body_bytes;
    let mut form = FormReader::open(&req, payload, max_body)?
        .read_all(form::MAX_FILE)
        .await?;
    let text = |k: &str| form.texts.get(k).map(|s| s.trim().to_owned());
    let timeout = match text("system_prompt_generation_timeout").filter(|s| !s.is_empty()) {
        None => 0,
        Some(s) => s.parse::<u32>().map_err(|_| {
            bad_request("system_prompt_generation_timeout must be a whole number of seconds.")
        })?,
    };
    let generate = text("generate_system_prompt").is_some_and(|s| s.eq_ignore_ascii_case("true"));
    let override_name = text("filename").filter(|s| !s.is_empty());
    let (file_name, file) = match form.file.take() {
        Some((name, data)) => (Some(override_name.unwrap_or(name)), data),
        None => (None, Vec::new()),
    };
    let upload = pb::CustomToolUpload {
        tool_type: text("tool_type").unwrap_or_default(),
        tool_args_json: form.texts.remove("tool_args").unwrap_or_default(),
        file_name,
        file,
        generate_system_prompt: generate,
        system_prompt_generation_timeout_seconds: timeout,
    };
    let created = api
        .custom_tools()
        .create_custom_tool(upload)
        .await?
        .into_inner();
    let body: Vec<CreatedTool> = created
        .ids
        .into_iter()
        .map(|agent_custom_tool_id| CreatedTool {
            agent_custom_tool_id,
        })
        .collect();
    Ok(HttpResponse::Created().json(body))
}

#[utoipa::path(
    tag = "Agents",
    responses((status = 200, body = Vec<CustomTool>), (status = 401, body = ErrorBody)),
    security(("bearer" = []))
)]
#[get("/agents/custom_tools")]
pub async fn list_custom_agent_tools(api: AgentsApi) -> TerseResult<HttpResponse> {
    let list = api
        .custom_tools()
        .list_custom_tools(Empty {})
        .await?
        .into_inner();
    let tools: Vec<CustomTool> = list
        .tools
        .into_iter()
        .map(|t| CustomTool::of(t, false))
        .collect();
    Ok(HttpResponse::Ok().json(tools))
}

#[utoipa::path(
    tag = "Agents",
    params(("tool_id" = String, Path)),
    responses((status = 200, body = CustomTool), (status = 401, body = ErrorBody), (status = 404, body = ErrorBody)),
    security(("bearer" = []))
)]
#[get("/agents/custom_tools/{tool_id}")]
pub async fn get_custom_agent_tool(
    api: AgentsApi,
    path: web::Path<String>,
) -> TerseResult<HttpResponse> {
    let id = path.into_inner();
    let tool = api
        .custom_tools()
        .get_custom_tool(pb::IdRef { id })
        .await?
        .into_inner();
    Ok(HttpResponse::Ok().json(CustomTool::of(tool, true)))
}

/// tool_args of a PUT: JSON `{tool_args: {...}}`, or the client's multipart with tool_args
/// as a JSON string. `None`: not given.
async fn update_args(
    req: &HttpRequest,
    mut payload: web::Payload,
    max_body: usize,
) -> Result<Option<String>, HttpError> {
    let is_json = req
        .headers()
        .get(CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .is_none_or(|v| !v.to_ascii_lowercase().starts_with("multipart/"));
    if !is_json {
        let form = FormReader::open(req, payload, max_body)?
            .read_all(form::MAX_FILE)
            .await?;
        return Ok(form.texts.get("tool_args").cloned());
    }
    let mut body = Vec::new();
    while let Some(chunk) = payload.next().await {
        let chunk = chunk.map_err(|e| bad_request(format!("unreadable body: {e}")))?;
        if body.len() + chunk.len() > form::MAX_FILE {
            return Err(HttpError(ApiError::new(
                ErrorCode::PayloadTooLarge,
                form::FILE_TOO_LARGE,
            )));
        }
        body.extend_from_slice(&chunk);
    }
    if body.iter().all(u8::is_ascii_whitespace) {
        return Ok(None);
    }
    let update: ToolUpdate = serde_json::from_slice(&body)
        .map_err(|_| bad_request("Invalid JSON format for tool_args."))?;
    Ok(match update.tool_args {
        None | Some(serde_json::Value::Null) => None,
        Some(serde_json::Value::String(s)) => Some(s),
        Some(v) => Some(v.to_string()),
    })
}

#[utoipa::path(
    tag = "Agents",
    params(("tool_id" = String, Path)),
    request_body(content = ToolUpdate, description = "JSON, or multipart/form-data with tool_args as a JSON string"),
    responses((status = 200, body = CreatedTool), (status = 400, body = ErrorBody), (status = 401, body = ErrorBody), (status = 404, body = ErrorBody)),
    security(("bearer" = []))
)]
#[put("/agents/custom_tools/{tool_id}")]
pub async fn update_custom_agent_tool(
    api: AgentsApi,
    path: web::Path<String>,
    req: HttpRequest,
    payload: web::Payload,
) -> TerseResult<HttpResponse> {
    // Before the body is read (up to 20 MB): agent-service checks again.
    api.require(CONFIGURE_AGENTS)?;
    let tool_args_json = update_args(&req, payload, api.state().config.max_body_bytes).await?;
    let update = pb::CustomToolUpdate {
        id: path.into_inner(),
        tool_args_json,
    };
    let done = api
        .custom_tools()
        .update_custom_tool(update)
        .await?
        .into_inner();
    Ok(HttpResponse::Ok().json(CreatedTool {
        agent_custom_tool_id: done.id,
    }))
}

#[utoipa::path(
    tag = "Agents",
    params(("tool_ids" = String, Path, description = "one tool id, or several comma-separated")),
    responses((status = 200, body = super::Count), (status = 401, body = ErrorBody)),
    security(("bearer" = []))
)]
#[delete("/agents/custom_tools/{tool_ids}")]
pub async fn delete_custom_agent_tools(
    api: AgentsApi,
    path: web::Path<String>,
) -> TerseResult<HttpResponse> {
    let ids = comma_list(&path);
    let count = if ids.is_empty() {
        0
    } else {
        api.custom_tools()
            .delete_custom_tools(pb::Ids { ids })
            .await?
            .into_inner()
            .count
    };
    Ok(HttpResponse::Ok().json(super::Count::of(count)))
}

#[utoipa::path(
    tag = "Agents",
    params(("tool_id" = String, Path)),
    responses(
        (status = 200, description = "the uploaded file as sent, named after it", content_type = "application/octet-stream"),
        (status = 400, description = "a remote_mcp tool (no file)", body = ErrorBody),
        (status = 401, body = ErrorBody), (status = 404, body = ErrorBody),
    ),
    security(("bearer" = []))
)]
#[get("/agents/custom_tools/{tool_id}/download")]
pub async fn download_custom_agent_tool(
    api: AgentsApi,
    path: web::Path<String>,
) -> TerseResult<HttpResponse> {
    let file = api
        .custom_tools()
        .download_custom_tool(pb::IdRef {
            id: path.into_inner(),
        })
        .await?
        .into_inner();
    Ok(HttpResponse::Ok()
        .content_type("application/octet-stream")
        .insert_header(attachment(&file.file_name))
        .insert_header(("x-content-type-options", "nosniff"))
        .body(file.data))
}
