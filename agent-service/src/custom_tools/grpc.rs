//! The gRPC `CustomToolService` (proto/docchat/agent/v1/extensions.proto): SPEC.md's custom
//! tool endpoints for the caller of the internal JWT. Writes (create, update, delete,
//! inspect) need ConfigureAgents; reads (list, get, download) only a valid caller, as the
//! custom agents' reads do: a user who lost the permission still sees what they own.

use std::sync::Arc;
use std::time::Duration;

use docchat_common::Caller;
use docchat_common::auth::{caller, permissions::CONFIGURE_AGENTS};
use docchat_common::error::{ApiError, ApiResult};
use docchat_proto::agent::v1 as pb;
use docchat_proto::agent::v1::custom_tool_service_server::CustomToolService;
use docchat_proto::common::v1::Empty;
use serde_json::Value;
use tonic::{Request, Response, Status};

use super::prompt::{self, PromptWriter};
use super::upload::{self, Upload};
use super::{CustomTools, files, store};
use crate::tools::custom::{InspectTarget, ToolRecord, ToolType};

pub const NOT_FOUND: &str = "Custom agent tool not found or no changes made.";

/// SPEC.md's default of system_prompt_generation_timeout.
pub const DEFAULT_PROMPT_TIMEOUT: Duration = Duration::from_secs(600);

pub struct CustomToolGrpc {
    pub tools: Arc<CustomTools>,
    /// Writes a general_code tool's system_prompt; `None` without a default chat model.
    pub prompts: Option<Arc<dyn PromptWriter>>,
}

fn wire(r: ToolRecord) -> pb::CustomTool {
    pb::CustomTool {
        id: r.id,
        tool_name: r.tool_name,
        tool_type: r.tool_type.as_str().to_owned(),
        tool_args_json: r.args.to_string(),
        owner_email: r.owner_email,
        file_name: r.file_name.unwrap_or_default(),
    }
}

impl CustomToolGrpc {
    async fn create(&self, caller: &Caller, req: pb::CustomToolUpload) -> ApiResult<Vec<String>> {
        caller.require_permission(CONFIGURE_AGENTS)?;
        let mut tools = upload::prepare(&Upload {
            tool_type: &req.tool_type,
            tool_args_json: &req.tool_args_json,
            file_name: req.file_name.as_deref(),
            file: &req.file,
        })?;
        if req.generate_system_prompt {
            for tool in tools
                .iter_mut()
                .filter(|t| t.tool_type == ToolType::GeneralCode)
            {
                let timeout = match req.system_prompt_generation_timeout_seconds {
                    0 => DEFAULT_PROMPT_TIMEOUT,
                    s => Duration::from_secs(u64::from(s)),
                };
                let (_, source) = upload::source(
                    &tool.tool_name,
                    tool.file_name.as_deref().unwrap_or_default(),
                    tool.file.as_deref().unwrap_or_default(),
                )?;
                let text = prompt::generate(
                    self.prompts.as_deref(),
                    caller,
                    &tool.tool_name,
                    &source,
                    timeout,
                )
                .await?;
                if let Some(args) = tool.args.as_object_mut() {
                    args.insert("system_prompt".into(), Value::String(text));
                }
            }
        }
        store::insert(&self.tools.db, &caller.user_id, &caller.email, tools).await
    }

    async fn update(&self, caller: &Caller, req: pb::CustomToolUpdate) -> ApiResult<String> {
        caller.require_permission(CONFIGURE_AGENTS)?;
        let text = req
            .tool_args_json
            .ok_or_else(|| ApiError::bad_request("tool_args is required for update."))?;
        let changes = upload::parse_args(&text)?;
        upload::check_fields(&changes)?;
        let record = store::get(&self.tools.db, &caller.user_id, &req.id)
            .await?
            .ok_or_else(|| ApiError::not_found(NOT_FOUND))?;
        let mut args = record.args.as_object().cloned().unwrap_or_default();
        for (k, v) in changes {
            args.insert(k, v);
        }
        let args = Value::Object(args);
        if args == record.args {
            return Err(ApiError::not_found(NOT_FOUND));
        }
        let tool_name = match (
            record.tool_type,
            args.get("tool_name").and_then(Value::as_str),
        ) {
            // A remote_mcp tool is its server: its name stays.
            (ToolType::RemoteMcp, _) | (_, None) => record.tool_name.clone(),
            (_, Some(name)) => name.trim().to_owned(),
        };
        if tool_name != record.tool_name {
            upload::check_name(&tool_name)?;
        }
        if record.tool_type == ToolType::GeneralCode && tool_name != record.tool_name {
            let file = store::file(&self.tools.db, &caller.user_id, &req.id)
                .await?
                .ok_or_else(|| ApiError::not_found(NOT_FOUND))?;
            upload::check_function(&tool_name, &file.name, &file.data)?;
        }
        if !store::update(&self.tools.db, &caller.user_id, &req.id, &tool_name, &args).await? {
            return Err(ApiError::not_found(NOT_FOUND));
        }
        Ok(req.id)
    }

    async fn download(&self, caller: &Caller, id: &str) -> ApiResult<pb::ToolFile> {
        let missing = || ApiError::not_found("Custom agent tool not found.");
        let record = store::get(&self.tools.db, &caller.user_id, id)
            .await?
            .ok_or_else(missing)?;
        if record.tool_type == ToolType::RemoteMcp {
            return Err(ApiError::bad_request(
                "Only local_mcp, browser_action and general_code tools can be downloaded; remote_mcp tools have no file.",
            ));
        }
        let file = store::file(&self.tools.db, &caller.user_id, id)
            .await?
            .ok_or_else(missing)?;
        Ok(pb::ToolFile {
            file_name: file.name,
            data: file.data,
        })
    }

    async fn inspect(
        &self,
        caller: &Caller,
        req: pb::InspectRequest,
    ) -> ApiResult<pb::InspectResult> {
        caller.require_permission(CONFIGURE_AGENTS)?;
        let failed = |error: String| pb::InspectResult {
            status: "error".into(),
            servers: Vec::new(),
            error,
        };
        if req.bad_base64 {
            return Ok(failed("file_data_base64 is not valid base64.".into()));
        }
        let modes = [
            !req.tool_id.is_empty(),
            !req.servers_json.is_empty(),
            !req.file_name.is_empty() || req.has_file_data,
        ]
        .into_iter()
        .filter(|m| *m)
        .count();
        if modes != 1 {
            return Ok(failed(
                "Give exactly one of tool_id, servers, or file_name with file_data_base64.".into(),
            ));
        }
        let Some(inspector) = self.tools.inspector.clone() else {
            return Ok(failed("MCP inspection is not available".into()));
        };
        let secrets = self.tools.secrets.clone();
        if !req.tool_id.is_empty() {
            let Some(record) = store::get(&self.tools.db, &caller.user_id, &req.tool_id).await?
            else {
                return Ok(failed(format!("No custom tool {} of yours.", req.tool_id)));
            };
            if !matches!(record.tool_type, ToolType::LocalMcp | ToolType::RemoteMcp) {
                return Ok(failed(format!(
                    "The tool {} is a {} tool, not an MCP server.",
                    record.tool_name,
                    record.tool_type.as_str()
                )));
            }
            let dir = match self.tools.files_of(&record).await {
                Ok(d) => d,
                Err(e) => return Ok(failed(e)),
            };
            let target = InspectTarget::Tool(&record, dir.as_deref());
            return inspector
                .inspect(caller, target, &req.model, secrets.as_ref())
                .await;
        }
        if !req.servers_json.is_empty() {
            let Ok(Value::Object(servers)) = serde_json::from_str::<Value>(&req.servers_json)
            else {
                return Ok(failed(
                    "servers must be a JSON object of server name to configuration.".into(),
                ));
            };
            let target = InspectTarget::Servers(servers);
            return inspector
                .inspect(caller, target, &req.model, secrets.as_ref())
                .await;
        }
        if req.file_name.is_empty() || !req.has_file_data {
            return Ok(failed("file_name and file_data_base64 go together.".into()));
        }
        let target = InspectTarget::File {
            name: &req.file_name,
            data: &req.file_data,
        };
        inspector
            .inspect(caller, target, &req.model, secrets.as_ref())
            .await
    }
}

#[tonic::async_trait]
impl CustomToolService for CustomToolGrpc {
    async fn create_custom_tool(
        &self,
        request: Request<pb::CustomToolUpload>,
    ) -> Result<Response<pb::CreatedIds>, Status> {
        let caller = caller(&request)?;
        let ids = self.create(&caller, request.into_inner()).await?;
        Ok(Response::new(pb::CreatedIds { ids }))
    }

    async fn list_custom_tools(
        &self,
        request: Request<Empty>,
    ) -> Result<Response<pb::CustomToolList>, Status> {
        let caller = caller(&request)?;
        let tools = store::list(&self.tools.db, &caller.user_id).await?;
        Ok(Response::new(pb::CustomToolList {
            tools: tools.into_iter().map(wire).collect(),
        }))
    }

    async fn get_custom_tool(
        &self,
        request: Request<pb::IdRef>,
    ) -> Result<Response<pb::CustomTool>, Status> {
        let caller = caller(&request)?;
        let record = store::get(&self.tools.db, &caller.user_id, &request.get_ref().id)
            .await?
            .ok_or_else(|| ApiError::not_found("Custom agent tool not found."))?;
        Ok(Response::new(wire(record)))
    }

    async fn update_custom_tool(
        &self,
        request: Request<pb::CustomToolUpdate>,
    ) -> Result<Response<pb::IdRef>, Status> {
        let caller = caller(&request)?;
        let id = self.update(&caller, request.into_inner()).await?;
        Ok(Response::new(pb::IdRef { id }))
    }

    async fn delete_custom_tools(
        &self,
        request: Request<pb::Ids>,
    ) -> Result<Response<pb::Count>, Status> {
        let caller = caller(&request)?;
        caller.require_permission(CONFIGURE_AGENTS)?;
        let ids = &request.get_ref().ids;
        let deleted = store::delete(&self.tools.db, &caller.user_id, ids).await?;
        for id in &deleted {
            files::forget(&self.tools.root, id);
        }
        Ok(Response::new(pb::Count {
            count: deleted.len() as u64,
        }))
    }

    async fn download_custom_tool(
        &self,
        request: Request<pb::IdRef>,
    ) -> Result<Response<pb::ToolFile>, Status> {
        let caller = caller(&request)?;
        Ok(Response::new(
            self.download(&caller, &request.get_ref().id).await?,
        ))
    }

    async fn inspect_mcp(
        &self,
        request: Request<pb::InspectRequest>,
    ) -> Result<Response<pb::InspectResult>, Status> {
        let caller = caller(&request)?;
        Ok(Response::new(
            self.inspect(&caller, request.into_inner()).await?,
        ))
    }
}
