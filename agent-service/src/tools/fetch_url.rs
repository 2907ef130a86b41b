//! fetch_url: GETs a web page for the model. Egress rule: the host is resolved first and
//! the request goes to the address that was checked (no second lookup); loopback, private,
//! link-local, unspecified, multicast and other special addresses are refused, so the
//! agent can never reach docchat's own ports, PostgreSQL or RabbitMQ. Redirects are
//! followed by hand, each hop checked again. DOCCHAT_AGENT_FETCH=off turns the tool off.

use std::net::{IpAddr, SocketAddr};
use std::time::Duration;

use serde_json::{Value, json};

use super::{Tool, ToolCtx, ToolOutput, arg, clip};

/// Bytes read of a page.
const MAX_BODY: usize = 2 << 20;
/// Bytes shown to the model.
const SHOWN: usize = 50_000;
const REDIRECTS: usize = 5;

pub struct FetchUrl;

/// Whether the sandbox's egress rule lets `ip` through.
pub fn public(ip: IpAddr) -> bool {
    match ip {
        IpAddr::V4(v4) => {
            let o = v4.octets();
            !(v4.is_loopback()
                || v4.is_private()
                || v4.is_link_local()
                || v4.is_unspecified()
                || v4.is_broadcast()
                || v4.is_multicast()
                || v4.is_documentation()
                || o[0] == 0
                || (o[0] == 100 && (64..128).contains(&o[1])) // CGNAT
                || (o[0] == 192 && o[1] == 0 && o[2] == 0)
                || (o[0] == 198 && (18..20).contains(&o[1]))
                || o[0] >= 240)
        }
        IpAddr::V6(v6) => {
            if let Some(v4) = v6.to_ipv4_mapped() {
                return public(IpAddr::V4(v4));
            }
            let s = v6.segments();
            !(v6.is_loopback()
                || v6.is_unspecified()
                || v6.is_multicast()
                || (s[0] & 0xfe00) == 0xfc00 // unique local
                || (s[0] & 0xffc0) == 0xfe80 // link-local
                || (s[0] == 0x2001 && s[1] == 0xdb8)
                || (s[0] == 0x64 && s[1] == 0xff9b))
        }
    }
}

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
    let addrs: Vec<SocketAddr> = tokio::net::lookup_host((bare.as_str(), port))
        .await
        .map_err(|e| format!("cannot resolve {host}: {e}"))?
        .collect();
    let allowed = ctx.deps.fetch_allow.contains(&bare);
    let addr = addrs
        .iter()
        .copied()
        .find(|a| allowed || public(a.ip()))
        .ok_or_else(|| {
            format!("{host} resolves to a loopback, private or link-local address, which the agent may not reach")
        })?;
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn special_addresses_are_refused() {
        for bad in [
            "127.0.0.1",
            "10.1.2.3",
            "172.16.0.1",
            "192.168.1.1",
            "169.254.169.254",
            "0.0.0.0",
            "100.64.0.1",
            "::1",
            "fe80::1",
            "fd00::1",
            "::ffff:127.0.0.1",
        ] {
            assert!(!public(bad.parse().unwrap()), "{bad}");
        }
        for good in ["93.184.216.34", "1.1.1.1", "2606:4700:4700::1111"] {
            assert!(public(good.parse().unwrap()), "{good}");
        }
    }
}
