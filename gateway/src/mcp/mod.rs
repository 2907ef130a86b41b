//! docchat as an MCP server: `{base_url}/mcp`, Streamable HTTP, for any assistant that
//! speaks the Model Context Protocol.
//!
//! - **Transport**: rmcp's Streamable HTTP service (a tower service) behind an actix route.
//!   Stateless: no session is kept between requests (protocol 2026-07-28 has none; older
//!   revisions are served without `Mcp-Session-Id`), so any gateway replica answers any
//!   request. A request whose tool reports progress answers as an event stream; the others
//!   as plain JSON.
//! - **Auth**: the API key as a bearer token, resolved like every REST call ([`Api`]); 401
//!   before MCP is spoken. Each tool calls the services as that caller, so a user sees
//!   exactly what REST shows them (another user's collection is "not found").
//! - **Limits**: the deployment's `mcp_max_body_size_mb` (413) on the body; `mcp_rate_limit`
//!   and `mcp_max_concurrent_jobs` per user on `ask` and `upload_text` (mcp_limits.rs).
//! - **Tools** (tools.rs) and **resources**: documents as `docchat://documents/{id}`,
//!   listable, read as one text content per page.

pub mod tools;

use std::convert::Infallible;

use actix_web::http::StatusCode;
use actix_web::{HttpRequest, HttpResponse, post, web};
use docchat_proto::ingest::v1 as ingest;
use futures::StreamExt;
use http_body_util::{BodyExt, BodyStream, Full};
use rmcp::model::{
    CallToolRequestParams, CallToolResponse, CallToolResult, ContentBlock, Implementation,
    InitializeResult, ListResourceTemplatesResult, ListResourcesResult, ListToolsResult,
    PaginatedRequestParams, ProgressNotificationParam, ReadResourceRequestParams,
    ReadResourceResponse, ReadResourceResult, Resource, ResourceContents, ResourceTemplate,
    ServerCapabilities, ServerConfig,
};
use rmcp::service::RequestContext;
use rmcp::transport::StreamableHttpServerConfig;
use rmcp::transport::StreamableHttpService;
use rmcp::transport::streamable_http_server::session::never::NeverSessionManager;
use rmcp::{ErrorData as McpError, RoleServer, ServerHandler};
use serde_json::json;

use crate::auth::Api;
use crate::error::{ErrorBody, HttpError};
use crate::mcp::tools::Failure;

/// The URI scheme of a document resource: `docchat://documents/{id}`.
const DOCUMENT_URI: &str = "docchat://documents/";
/// Documents listed per `resources/list` page.
const RESOURCES_PER_PAGE: u64 = 100;
/// The most text (characters) one resource read returns; a longer document ends with a
/// note to read the rest with `get_document`.
const RESOURCE_CHARS: usize = 500_000;

/// The MCP service of one gateway worker.
pub type Service = StreamableHttpService<Docchat, NeverSessionManager>;

/// Builds the service: stateless, answering JSON where it can.
pub fn service(write_tools: bool, max_body_bytes: usize) -> Service {
    let config = StreamableHttpServerConfig::default()
        .with_legacy_session_mode(false)
        .with_json_response(true)
        .with_max_request_body_bytes(max_body_bytes)
        // Deployed under any host name: callers are authenticated by key, so the loopback
        // default (a guard for unauthenticated local servers) does not apply.
        .disable_allowed_hosts();
    StreamableHttpService::new(
        move || Ok(Docchat { write_tools }),
        std::sync::Arc::new(NeverSessionManager::default()),
        config,
    )
}

/// The handler rmcp runs per request; the caller comes with the request ([`Api`] in the
/// HTTP request's extensions).
#[derive(Clone)]
pub struct Docchat {
    write_tools: bool,
}

fn caller(context: &RequestContext<RoleServer>) -> Result<Api, McpError> {
    context
        .extensions
        .get::<http::request::Parts>()
        .and_then(|parts| parts.extensions.get::<Api>())
        .cloned()
        .ok_or_else(|| McpError::internal_error("the request carries no caller", None))
}

/// `ask`'s progress, as MCP progress notifications when the client asked for them.
struct Notifier {
    context: RequestContext<RoleServer>,
}

impl tools::Progress for Notifier {
    async fn report(&mut self, characters: usize) {
        let Some(token) = self.context.meta.get_progress_token() else {
            return;
        };
        let note = ProgressNotificationParam::new(token, characters as f64)
            .with_message(format!("{characters} characters of the answer generated"));
        // A client gone away stops nothing: the answer is still stored in its chat.
        let _ = self.context.peer.notify_progress(note).await;
    }
}

impl ServerHandler for Docchat {
    fn get_info(&self) -> ServerConfig {
        InitializeResult::new(
            ServerCapabilities::builder()
                .enable_tools()
                .enable_resources()
                .build(),
        )
        .with_server_info(Implementation::new("docchat", env!("CARGO_PKG_VERSION")))
        .with_instructions(
            "docchat holds the user's document collections. list_collections shows them; \
             search finds passages (with document and pages); ask answers a question from a \
             collection with references; get_document reads a document by page; documents \
             are also resources (docchat://documents/{id}).",
        )
    }

    async fn list_tools(
        &self,
        _request: Option<PaginatedRequestParams>,
        _context: RequestContext<RoleServer>,
    ) -> Result<ListToolsResult, McpError> {
        Ok(ListToolsResult::with_all_items(tools::list(
            self.write_tools,
        )))
    }

    async fn call_tool(
        &self,
        request: CallToolRequestParams,
        context: RequestContext<RoleServer>,
    ) -> Result<CallToolResponse, McpError> {
        let api = caller(&context)?;
        let outcome = tools::call(
            &api,
            &request.name,
            request.arguments,
            self.write_tools,
            Notifier { context },
        )
        .await;
        match outcome {
            Ok(value) => Ok(CallToolResult::structured(value).into()),
            Err(Failure::Tool(message)) => {
                Ok(CallToolResult::error(vec![ContentBlock::text(message)]).into())
            }
            Err(Failure::Arguments(message)) => Err(McpError::invalid_params(message, None)),
        }
    }

    async fn list_resources(
        &self,
        request: Option<PaginatedRequestParams>,
        context: RequestContext<RoleServer>,
    ) -> Result<ListResourcesResult, McpError> {
        let api = caller(&context)?;
        let offset = match request.and_then(|r| r.cursor) {
            Some(cursor) => cursor
                .parse::<u64>()
                .ok()
                .and_then(|offset| crate::routes::page(Some(offset), None).ok())
                .map(|(offset, _)| offset)
                .ok_or_else(|| McpError::invalid_params("invalid cursor", None))?,
            None => 0,
        };
        let list = api
            .ingest()
            .list_documents(ingest::ListDocumentsRequest {
                offset,
                limit: RESOURCES_PER_PAGE,
                ..Default::default()
            })
            .await
            .map_err(tool_error)?
            .into_inner();
        let more = list.documents.len() as u64 == RESOURCES_PER_PAGE;
        let count = list.documents.len() as u64;
        let resources = list
            .documents
            .into_iter()
            .map(|d| {
                Resource::new(format!("{DOCUMENT_URI}{}", d.id), d.name)
                    .with_description(format!(
                        "{} pages, in collection {}",
                        d.page_count, d.collection_id
                    ))
                    .with_mime_type("text/plain")
            })
            .collect();
        let mut result = ListResourcesResult::with_all_items(resources);
        if more {
            result.next_cursor = Some((offset + count).to_string());
        }
        Ok(result)
    }

    async fn list_resource_templates(
        &self,
        _request: Option<PaginatedRequestParams>,
        _context: RequestContext<RoleServer>,
    ) -> Result<ListResourceTemplatesResult, McpError> {
        Ok(ListResourceTemplatesResult::with_all_items(vec![
            ResourceTemplate::new(format!("{DOCUMENT_URI}{{id}}"), "document")
                .with_description("A docchat document's text, one content per page")
                .with_mime_type("text/plain"),
        ]))
    }

    async fn read_resource(
        &self,
        request: ReadResourceRequestParams,
        context: RequestContext<RoleServer>,
    ) -> Result<ReadResourceResponse, McpError> {
        let api = caller(&context)?;
        let uri = request.uri;
        let id = uri
            .strip_prefix(DOCUMENT_URI)
            .filter(|id| !id.is_empty() && !id.contains(['/', '#', '?']))
            .ok_or_else(|| {
                McpError::resource_not_found(
                    format!("no resource {uri}"),
                    Some(json!({ "uri": uri })),
                )
            })?;
        let mut contents: Vec<ResourceContents> = Vec::new();
        let mut read = 0usize;
        let (mut page, mut char) = (0u32, 0u64);
        loop {
            let slice = match tools::read_text(&api, id, Vec::new(), page, char).await {
                Ok(slice) => slice,
                Err(Failure::Tool(message) | Failure::Arguments(message)) => {
                    return Err(McpError::resource_not_found(
                        message,
                        Some(json!({ "uri": uri })),
                    ));
                }
            };
            for part in slice.pages {
                read += part.text.chars().count();
                let page_uri = format!("{uri}#page={}", part.page);
                // A page cut between two slices continues its content.
                match contents.last_mut() {
                    Some(ResourceContents::TextResourceContents { uri, text, .. })
                        if part.start_char > 0 && *uri == page_uri =>
                    {
                        text.push_str(&part.text);
                    }
                    _ => contents.push(
                        ResourceContents::text(part.text, page_uri).with_mime_type("text/plain"),
                    ),
                }
            }
            match slice.next_page {
                Some(next) if read < RESOURCE_CHARS => (page, char) = (next, slice.next_char),
                Some(next) => {
                    contents.push(ResourceContents::text(
                        format!(
                            "[the document continues at page {next}: read the rest with the \
                             get_document tool, cursor \"{next}:{}\"]",
                            slice.next_char
                        ),
                        format!("{uri}#continued"),
                    ));
                    break;
                }
                None => break,
            }
        }
        Ok(ReadResourceResult::new(contents).into())
    }
}

/// A service's refusal while listing resources: a JSON-RPC error carrying its message.
fn tool_error(status: tonic::Status) -> McpError {
    match Failure::from(status) {
        Failure::Tool(m) | Failure::Arguments(m) => McpError::internal_error(m, None),
    }
}

/// The request (a JSON-RPC message) and its answer (JSON-RPC, as JSON or as an event
/// stream): see the MCP specification's Streamable HTTP transport.
#[derive(utoipa::ToSchema)]
#[allow(dead_code)] // documents the body rmcp reads
pub struct JsonRpcMessage {
    pub jsonrpc: String,
    #[schema(value_type = Option<Object>)]
    pub id: Option<serde_json::Value>,
    pub method: Option<String>,
    #[schema(value_type = Option<Object>)]
    pub params: Option<serde_json::Value>,
}

#[utoipa::path(
    tag = "MCP",
    request_body(content = JsonRpcMessage, content_type = "application/json",
        description = "One JSON-RPC message of the Model Context Protocol (Streamable HTTP, stateless: no Mcp-Session-Id). Send Accept: application/json, text/event-stream. Tools: list_collections, search, ask, get_document, list_documents (upload_text when DOCCHAT_MCP_WRITE_TOOLS is set); resources docchat://documents/{id}. GET and DELETE answer 405 (no sessions)."),
    responses(
        (status = 200, description = "The JSON-RPC answer: application/json, or text/event-stream when the call sends notifications first (ask's progress)", body = Object),
        (status = 202, description = "A notification or response was accepted"),
        (status = 400, description = "Not a JSON-RPC message, or a JSON-RPC error", body = Object),
        (status = 401, body = ErrorBody),
        (status = 404, description = "An unknown JSON-RPC method", body = Object),
        (status = 406, description = "Accept does not name both application/json and text/event-stream", body = ErrorBody),
        (status = 413, body = ErrorBody),
        (status = 415, description = "Content-Type is not application/json", body = ErrorBody)),
    security(("bearer" = []))
)]
#[post("/mcp")]
pub async fn endpoint(
    api: Api,
    req: HttpRequest,
    payload: web::Payload,
    service: web::Data<Service>,
) -> Result<HttpResponse, HttpError> {
    forward(api, req, payload, service).await
}

/// `GET|DELETE /mcp`: rmcp answers (405: there are no sessions to stream or end).
pub async fn other_methods(
    api: Api,
    req: HttpRequest,
    payload: web::Payload,
    service: web::Data<Service>,
) -> Result<HttpResponse, HttpError> {
    forward(api, req, payload, service).await
}

/// The key was checked (by [`Api`]); the request goes to rmcp with the caller in its
/// extensions, and rmcp's answer streams back as it comes (events while `ask` generates).
async fn forward(
    api: Api,
    req: HttpRequest,
    payload: web::Payload,
    service: web::Data<Service>,
) -> Result<HttpResponse, HttpError> {
    let max = usize::try_from(
        api.state()
            .config
            .mcp_max_body_size_mb
            .saturating_mul(1_000_000),
    )
    .unwrap_or(usize::MAX);
    let body = web::Bytes::from(crate::routes::mcp::read_body(payload, max).await?);
    let mut builder = http::Request::builder()
        .method(req.method().as_str())
        .uri(req.uri().to_string());
    for (name, value) in req.headers() {
        builder = builder.header(name.as_str(), value.as_bytes());
    }
    let request = builder
        .extension(api)
        .body(Full::new(body))
        .map_err(|e| HttpError(docchat_common::error::ApiError::bad_request(e.to_string())))?;
    let response = match tower_service::Service::call(&mut service.get_ref().clone(), request).await
    {
        Ok(response) => response,
        Err(never) => match never {},
    };
    let (parts, body) = response.into_parts();
    let status = StatusCode::from_u16(parts.status.as_u16()).unwrap_or(StatusCode::BAD_GATEWAY);
    let json = parts
        .headers
        .get(http::header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .is_some_and(|v| v.starts_with("application/json"));
    // rmcp's own refusals (a wrong Accept or Content-Type, a malformed body) come as plain
    // text: they answer with docchat's error body like every other route.
    if status.is_client_error() && !json {
        let text = body
            .collect()
            .await
            .map(|b| String::from_utf8_lossy(&b.to_bytes()).into_owned())
            .unwrap_or_default();
        return Ok(HttpResponse::build(status).json(ErrorBody {
            code: status.as_u16(),
            message: if text.is_empty() {
                status.canonical_reason().unwrap_or("refused").to_owned()
            } else {
                text
            },
        }));
    }
    let mut out = HttpResponse::build(status);
    for (name, value) in &parts.headers {
        out.insert_header((name.as_str(), value.as_bytes()));
    }
    let frames = BodyStream::new(body).filter_map(|frame| async move {
        match frame {
            Ok(frame) => frame.into_data().ok().map(Ok::<_, Infallible>),
            Err(never) => match never {},
        }
    });
    Ok(out.streaming(frames))
}
