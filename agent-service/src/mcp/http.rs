//! rmcp's streamable-HTTP client trait on the workspace's reqwest (rmcp's own client needs a
//! newer reqwest; two would be built), through the agent's egress rule: the server's host is
//! resolved and checked once ([`crate::egress`]) and the client connects to that address
//! only (no second lookup, no redirects, no proxy).

use std::collections::HashMap;
use std::sync::Arc;
use std::time::Duration;

use futures::StreamExt;
use futures::stream::BoxStream;
use http::{HeaderName, HeaderValue};
use reqwest::header::{ACCEPT, CONTENT_TYPE};
use rmcp::model::{ClientJsonRpcMessage, ServerJsonRpcMessage};
use rmcp::transport::streamable_http_client::{
    SseError, StreamableHttpClient, StreamableHttpError, StreamableHttpPostResponse,
};
use sse_stream::{Sse, SseStream};

const SESSION: &str = "Mcp-Session-Id";
const LAST_EVENT: &str = "Last-Event-Id";
const EVENT_STREAM: &str = "text/event-stream";
const JSON: &str = "application/json";

/// A reqwest client bound to one checked address of one host.
#[derive(Clone)]
pub struct Http(pub reqwest::Client);

/// A client for `url`'s host through the egress rule (`allow`: hosts an administrator lets
/// through although they resolve to private addresses).
pub async fn pinned(url: &str, allow: &[String]) -> Result<reqwest::Client, String> {
    let parsed = reqwest::Url::parse(url).map_err(|e| format!("bad server URL: {e}"))?;
    if !matches!(parsed.scheme(), "http" | "https") {
        return Err("an MCP server URL must be http or https".into());
    }
    let host = parsed.host_str().ok_or("the server URL has no host")?;
    let bare = host.trim_start_matches('[').trim_end_matches(']');
    let port = parsed.port_or_known_default().unwrap_or(80);
    let addr = crate::egress::resolve(bare, port, allow).await?;
    reqwest::Client::builder()
        .redirect(reqwest::redirect::Policy::none())
        .resolve(bare, addr)
        .connect_timeout(Duration::from_secs(10))
        .no_proxy()
        .build()
        .map_err(|e| e.to_string())
}

/// A configured header's name, or why it cannot be sent.
pub fn header_name(name: &str) -> Result<HeaderName, String> {
    HeaderName::from_bytes(name.as_bytes()).map_err(|_| format!("{name:?} is not a header name"))
}

fn with_headers(
    mut req: reqwest::RequestBuilder,
    session: Option<&str>,
    auth: Option<String>,
    custom: HashMap<HeaderName, HeaderValue>,
) -> reqwest::RequestBuilder {
    if let Some(s) = session {
        req = req.header(SESSION, s);
    }
    if let Some(token) = auth {
        req = req.bearer_auth(token);
    }
    for (k, v) in custom {
        req = req.header(k, v);
    }
    req
}

fn events(response: reqwest::Response) -> BoxStream<'static, Result<Sse, SseError>> {
    SseStream::from_bytes_stream(response.bytes_stream()).boxed()
}

fn content_type(response: &reqwest::Response) -> String {
    response
        .headers()
        .get(CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .unwrap_or("")
        .to_ascii_lowercase()
}

type Failure = StreamableHttpError<reqwest::Error>;

impl StreamableHttpClient for Http {
    type Error = reqwest::Error;

    async fn post_message(
        &self,
        uri: Arc<str>,
        message: ClientJsonRpcMessage,
        session_id: Option<Arc<str>>,
        auth_header: Option<String>,
        custom_headers: HashMap<HeaderName, HeaderValue>,
    ) -> Result<StreamableHttpPostResponse, Failure> {
        let req = self
            .0
            .post(uri.as_ref())
            .header(ACCEPT, format!("{EVENT_STREAM}, {JSON}"));
        let had_session = session_id.is_some();
        let req = with_headers(req, session_id.as_deref(), auth_header, custom_headers);
        let response = req
            .json(&message)
            .send()
            .await
            .map_err(StreamableHttpError::Client)?;
        let status = response.status();
        if matches!(
            status,
            reqwest::StatusCode::ACCEPTED | reqwest::StatusCode::NO_CONTENT
        ) {
            return Ok(StreamableHttpPostResponse::Accepted);
        }
        if status == reqwest::StatusCode::NOT_FOUND && had_session {
            return Err(StreamableHttpError::SessionExpired);
        }
        let session = response
            .headers()
            .get(SESSION)
            .and_then(|v| v.to_str().ok())
            .map(str::to_owned);
        let kind = content_type(&response);
        if !status.is_success() {
            let body = response.text().await.unwrap_or_default();
            if kind.starts_with(JSON)
                && let Ok(message) = serde_json::from_str::<ServerJsonRpcMessage>(&body)
            {
                return Ok(StreamableHttpPostResponse::Json(message, session));
            }
            return Err(StreamableHttpError::UnexpectedServerResponse(
                format!("HTTP {status}: {}", crate::tools::clip(&body, 300)).into(),
            ));
        }
        if kind.starts_with(EVENT_STREAM) {
            return Ok(StreamableHttpPostResponse::Sse(events(response), session));
        }
        if kind.starts_with(JSON) {
            let bytes = response
                .bytes()
                .await
                .map_err(StreamableHttpError::Client)?;
            if bytes.is_empty() {
                return Ok(StreamableHttpPostResponse::Accepted);
            }
            let message: ServerJsonRpcMessage = serde_json::from_slice(&bytes)?;
            return Ok(StreamableHttpPostResponse::Json(message, session));
        }
        if response.content_length() == Some(0) {
            return Ok(StreamableHttpPostResponse::Accepted);
        }
        Err(StreamableHttpError::UnexpectedContentType(Some(kind)))
    }

    async fn delete_session(
        &self,
        uri: Arc<str>,
        session_id: Arc<str>,
        auth_header: Option<String>,
        custom_headers: HashMap<HeaderName, HeaderValue>,
    ) -> Result<(), Failure> {
        let req = with_headers(
            self.0.delete(uri.as_ref()),
            Some(&session_id),
            auth_header,
            custom_headers,
        );
        let response = req.send().await.map_err(StreamableHttpError::Client)?;
        if response.status() == reqwest::StatusCode::METHOD_NOT_ALLOWED {
            return Ok(());
        }
        response
            .error_for_status()
            .map(drop)
            .map_err(StreamableHttpError::Client)
    }

    async fn get_stream(
        &self,
        uri: Arc<str>,
        session_id: Option<Arc<str>>,
        last_event_id: Option<String>,
        auth_header: Option<String>,
        custom_headers: HashMap<HeaderName, HeaderValue>,
    ) -> Result<BoxStream<'static, Result<Sse, SseError>>, Failure> {
        let mut req = self
            .0
            .get(uri.as_ref())
            .header(ACCEPT, format!("{EVENT_STREAM}, {JSON}"));
        if let Some(id) = last_event_id {
            req = req.header(LAST_EVENT, id);
        }
        let req = with_headers(req, session_id.as_deref(), auth_header, custom_headers);
        let response = req.send().await.map_err(StreamableHttpError::Client)?;
        if response.status() == reqwest::StatusCode::METHOD_NOT_ALLOWED {
            return Err(StreamableHttpError::ServerDoesNotSupportSse);
        }
        let response = response
            .error_for_status()
            .map_err(StreamableHttpError::Client)?;
        let kind = content_type(&response);
        if !kind.starts_with(EVENT_STREAM) && !kind.starts_with(JSON) {
            return Err(StreamableHttpError::UnexpectedContentType(Some(kind)));
        }
        Ok(events(response))
    }
}
