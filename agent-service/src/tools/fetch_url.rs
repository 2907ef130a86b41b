//! fetch_url: GETs a web page for the model through the agent's egress rule
//! ([`crate::egress`]): the host is resolved and checked once and the request goes to the
//! checked address (no second lookup). Redirects are followed by hand, each hop checked
//! again. DOCCHAT_AGENT_FETCH=off turns the tool off.

use std::time::Duration;

use serde_json::{Value, json};

use super::{Tool, ToolCtx, ToolOutput, arg, clip};

/// Bytes read of a page.
const MAX_BODY: usize = 2 << 20;
/// Bytes shown to the model.
const SHOWN: usize = 50_000;
const REDIRECTS: usize = 5;

pub struct FetchUrl;

#[async_trait::async_trait]
impl Tool for FetchUrl {
    fn writes(&self) -> bool {
        false
    }

    fn name(&self) -> &str {
        "fetch_url"
    }

    fn description(&self) -> &str {
        "Fetches a public web page (http or https) and returns its text."
    }

    fn parameters(&self) -> Value {
        json!({"type": "object", "properties": {"url": {"type": "string"}},
               "required": ["url"], "additionalProperties": false})
    }

    async fn call(&self, ctx: &ToolCtx, args: Value) -> Result<ToolOutput, String> {
        if !ctx.deps.fetch {
            return Err("fetching URLs is turned off by the administrator".into());
        }
        let mut url =
            reqwest::Url::parse(arg(&args, "url")?).map_err(|e| format!("bad URL: {e}"))?;
        for _ in 0..=REDIRECTS {
            let response = tokio::select! {
                r = fetch_once(ctx, &url) => r?,
                () = ctx.cancel.cancelled() => return Err("stopped".into()),
            };
            if response.status().is_redirection() {
                let next = response
                    .headers()
                    .get(reqwest::header::LOCATION)
                    .and_then(|l| l.to_str().ok())
                    .ok_or("a redirect without a location")?;
                url = url.join(next).map_err(|e| format!("bad redirect: {e}"))?;
                continue;
            }
            let status = response.status();
            let body = read_capped(response).await?;
            let text = String::from_utf8_lossy(&body);
            if !status.is_success() {
                return Err(format!(
                    "the server answered {status}: {}",
                    clip(&text, 2000)
                ));
            }
            return Ok(ToolOutput::text(clip(&text, SHOWN)));
        }
        Err("too many redirects".into())
    }
}

async fn fetch_once(ctx: &ToolCtx, url: &reqwest::Url) -> Result<reqwest::Response, String> {
    if !matches!(url.scheme(), "http" | "https") {
        return Err("only http and https URLs can be fetched".into());
    }
    let host = url.host_str().ok_or("the URL has no host")?.to_owned();
    let port = url.port_or_known_default().unwrap_or(80);
    let bare = host
        .trim_start_matches('[')
        .trim_end_matches(']')
        .to_owned();
    let addr = crate::egress::resolve(&bare, port, &ctx.deps.fetch_allow).await?;
    let client = reqwest::Client::builder()
        .redirect(reqwest::redirect::Policy::none())
        .resolve(&bare, addr)
        .connect_timeout(Duration::from_secs(10))
        .timeout(ctx.timeout.min(Duration::from_secs(60)))
        .no_proxy()
        .build()
        .map_err(|e| e.to_string())?;
    client
        .get(url.clone())
        .header(reqwest::header::USER_AGENT, "docchat-agent")
        .send()
        .await
        .map_err(|e| format!("fetch failed: {e}"))
}

async fn read_capped(response: reqwest::Response) -> Result<Vec<u8>, String> {
    use futures::StreamExt;
    let mut body = Vec::new();
    let mut stream = response.bytes_stream();
    while let Some(chunk) = stream.next().await {
        let chunk = chunk.map_err(|e| format!("reading the page failed: {e}"))?;
        let room = MAX_BODY - body.len();
        body.extend_from_slice(&chunk[..chunk.len().min(room)]);
        if body.len() >= MAX_BODY {
            break;
        }
    }
    Ok(body)
}
