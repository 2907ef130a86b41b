//! Legacy SSE servers (MCP's HTTP+SSE transport of 2024-11-05, which rmcp dropped): a GET
//! opens an event stream whose first `endpoint` event names where to POST messages; the
//! server's replies arrive as `message` events on the stream. The endpoint must be on the
//! server's own origin (the client is pinned to its checked address).

use std::time::Duration;

use futures::StreamExt;
use futures::stream::BoxStream;
use rmcp::RoleClient;
use rmcp::model::ServerJsonRpcMessage;
use rmcp::service::{RxJsonRpcMessage, TxJsonRpcMessage};
use rmcp::transport::Transport;
use sse_stream::{Error as SseError, Sse, SseStream};

/// One connection to a legacy SSE server.
pub struct Legacy {
    client: reqwest::Client,
    endpoint: reqwest::Url,
    headers: Vec<(String, String)>,
    events: BoxStream<'static, Result<Sse, SseError>>,
}

fn io(e: impl std::fmt::Display) -> std::io::Error {
    std::io::Error::other(e.to_string())
}

impl Legacy {
    /// Opens the event stream of `url` and waits (up to `wait`) for its endpoint.
    pub async fn connect(
        client: reqwest::Client,
        url: &str,
        headers: Vec<(String, String)>,
        wait: Duration,
    ) -> Result<Legacy, String> {
        let base = reqwest::Url::parse(url).map_err(|e| format!("bad server URL: {e}"))?;
        let mut req = client
            .get(base.clone())
            .header(reqwest::header::ACCEPT, "text/event-stream");
        for (k, v) in &headers {
            req = req.header(k, v);
        }
        let response = req
            .send()
            .await
            .map_err(|e| format!("cannot reach the SSE server: {e}"))?;
        if !response.status().is_success() {
            return Err(format!("the SSE server answered {}", response.status()));
        }
        let mut events = SseStream::from_bytes_stream(response.bytes_stream()).boxed();
        let endpoint = tokio::time::timeout(wait, async {
            while let Some(event) = events.next().await {
                let event = event.map_err(|e| format!("the SSE stream failed: {e}"))?;
                if event.event.as_deref() == Some("endpoint") {
                    return Ok(event.data.unwrap_or_default());
                }
            }
            Err("the SSE stream ended before it named its endpoint".to_owned())
        })
        .await
        .map_err(|_| "the SSE server did not name its endpoint in time".to_owned())??;
        let endpoint = base
            .join(endpoint.trim())
            .map_err(|e| format!("the SSE server named a bad endpoint: {e}"))?;
        if endpoint.origin() != base.origin() {
            return Err("the SSE server named an endpoint on another origin".into());
        }
        Ok(Legacy {
            client,
            endpoint,
            headers,
            events,
        })
    }
}

impl Transport<RoleClient> for Legacy {
    type Error = std::io::Error;

    fn send(
        &mut self,
        item: TxJsonRpcMessage<RoleClient>,
    ) -> impl Future<Output = Result<(), Self::Error>> + Send + 'static {
        let mut req = self.client.post(self.endpoint.clone()).json(&item);
        for (k, v) in &self.headers {
            req = req.header(k, v);
        }
        async move {
            let response = req.send().await.map_err(io)?;
            if response.status().is_success() {
                Ok(())
            } else {
                Err(io(format!(
                    "the SSE server refused a message: {}",
                    response.status()
                )))
            }
        }
    }

    async fn receive(&mut self) -> Option<RxJsonRpcMessage<RoleClient>> {
        while let Some(event) = self.events.next().await {
            let Ok(event) = event else { return None };
            if !matches!(event.event.as_deref(), None | Some("message")) {
                continue;
            }
            let Some(data) = event.data else { continue };
            match serde_json::from_str::<ServerJsonRpcMessage>(&data) {
                Ok(message) => return Some(message),
                Err(e) => {
                    tracing::debug!(error = %e, "an SSE event that is not a JSON-RPC message")
                }
            }
        }
        None
    }

    async fn close(&mut self) -> Result<(), Self::Error> {
        Ok(())
    }
}
