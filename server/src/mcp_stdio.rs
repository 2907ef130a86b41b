//! `gateway mcp --url <docchat> [--key <API key>]`: docchat's MCP server for desktop
//! assistants that start their servers as a command. It speaks MCP on stdin/stdout (one
//! JSON-RPC message per line) and forwards every message to a running docchat's `/mcp`
//! (Streamable HTTP) with the key as its bearer token; the answers, and the notifications
//! sent before them (`ask`'s progress), come back as lines in the order docchat sent them.
//!
//! It is a transport bridge, not a second MCP implementation: it reads no more of a message
//! than the protocol version an `initialize` answer names (sent back on later requests as
//! `MCP-Protocol-Version`) and the id a failed request needs for its JSON-RPC error. Nothing
//! but MCP goes to stdout; diagnostics go to stderr.

use std::sync::{Arc, Mutex};

use anyhow::Context;
use futures::StreamExt;
use serde_json::{Value, json};
use tokio::io::{AsyncBufReadExt, AsyncWriteExt, BufReader};
use tokio::sync::mpsc;
use tokio_util::task::TaskTracker;

/// The environment variable the key may come from (keeps it out of process listings).
pub const KEY_VARIABLE: &str = "DOCCHAT_API_KEY";

/// What the bridge needs: where docchat is and the key to call it with.
#[derive(Debug, PartialEq, Eq)]
pub struct Options {
    pub endpoint: String,
    pub key: String,
}

impl Options {
    /// `--url <base url> [--key <key>]`; without `--key`, the key is `env_key`.
    pub fn parse(args: &[String], env_key: Option<String>) -> anyhow::Result<Options> {
        let mut url = None;
        let mut key = None;
        for pair in args.chunks(2) {
            let slot = match pair[0].as_str() {
                "--url" => &mut url,
                "--key" => &mut key,
                other => anyhow::bail!(
                    "unknown argument {other:?}: use --url <docchat URL> [--key <API key>]"
                ),
            };
            let value = pair
                .get(1)
                .with_context(|| format!("{} needs a value", pair[0]))?;
            *slot = Some(value.clone());
        }
        let url =
            url.context("--url <docchat URL> is required (for example http://127.0.0.1:8000)")?;
        let key = key
            .or(env_key)
            .filter(|k| !k.trim().is_empty())
            .with_context(|| format!("an API key is required: --key <key> or {KEY_VARIABLE}"))?;
        let base = url.trim_end_matches('/');
        let endpoint = if base.ends_with("/mcp") {
            base.to_owned()
        } else {
            format!("{base}/mcp")
        };
        Ok(Options { endpoint, key })
    }
}

/// Serves MCP on stdin/stdout until stdin ends, then waits for the answers under way.
pub async fn run(options: Options) -> anyhow::Result<()> {
    let client = reqwest::Client::builder()
        .build()
        .context("building the HTTP client")?;
    let bridge = Arc::new(Bridge {
        client,
        options,
        protocol: Mutex::new(None),
    });
    let (tx, mut rx) = mpsc::channel::<String>(64);
    let tasks = TaskTracker::new();
    tasks.spawn(async move {
        let mut stdout = tokio::io::stdout();
        while let Some(line) = rx.recv().await {
            if stdout.write_all(line.as_bytes()).await.is_err()
                || stdout.write_all(b"\n").await.is_err()
                || stdout.flush().await.is_err()
            {
                break;
            }
        }
    });
    let mut lines = BufReader::new(tokio::io::stdin()).lines();
    while let Some(line) = lines.next_line().await.context("reading stdin")? {
        if line.trim().is_empty() {
            continue;
        }
        // Each message on its own: a long `ask` does not hold up a `ping` behind it.
        let bridge = bridge.clone();
        let tx = tx.clone();
        tasks.spawn(async move { bridge.forward(line, tx).await });
    }
    // The writer ends once every answer under way is written (the last sender dropped).
    drop(tx);
    tasks.close();
    tasks.wait().await;
    Ok(())
}

struct Bridge {
    client: reqwest::Client,
    options: Options,
    /// The protocol version the `initialize` answer named.
    protocol: Mutex<Option<String>>,
}

impl Bridge {
    /// Sends one message and writes what comes back as it comes (nothing for an accepted
    /// notification; `ask`'s progress before its answer, not with it).
    async fn forward(&self, line: String, out: mpsc::Sender<String>) {
        let id = serde_json::from_str::<Value>(&line)
            .ok()
            .and_then(|m| m.get("id").cloned());
        if let Err(message) = self.post(line, &out).await {
            #[expect(clippy::print_stderr, reason = "stdout carries MCP only")]
            {
                eprintln!("docchat mcp: {message}");
            }
            // A request always gets an answer; a notification's failure is only logged.
            if let Some(id) = id {
                let _ = out.send(error_answer(id, &message)).await;
            }
        }
    }

    /// Writes one message of docchat's to stdout (through the writer).
    async fn deliver(&self, out: &mpsc::Sender<String>, message: String) {
        self.learn_protocol(&message);
        let _ = out.send(message).await;
    }

    /// Posts `line` and delivers docchat's messages in order; an error when no answer came.
    async fn post(&self, line: String, out: &mpsc::Sender<String>) -> Result<(), String> {
        let mut request = self
            .client
            .post(&self.options.endpoint)
            .bearer_auth(&self.options.key)
            .header(reqwest::header::CONTENT_TYPE, "application/json")
            .header(
                reqwest::header::ACCEPT,
                "application/json, text/event-stream",
            )
            .body(line);
        let protocol = self
            .protocol
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .clone();
        if let Some(version) = protocol {
            request = request.header("MCP-Protocol-Version", version);
        }
        let response = request
            .send()
            .await
            .map_err(|e| format!("cannot reach {}: {e}", self.options.endpoint))?;
        let status = response.status();
        let content_type = response
            .headers()
            .get(reqwest::header::CONTENT_TYPE)
            .and_then(|v| v.to_str().ok())
            .unwrap_or_default()
            .to_owned();
        if status == reqwest::StatusCode::ACCEPTED {
            return Ok(());
        }
        if content_type.starts_with("text/event-stream") {
            return self.relay_events(response, out).await;
        }
        let body = response
            .text()
            .await
            .map_err(|e| format!("reading docchat's answer: {e}"))?;
        match serde_json::from_str::<Value>(&body) {
            // A JSON-RPC answer (a result or an error), whatever the status.
            Ok(message) if message.get("jsonrpc").is_some() => {
                self.deliver(out, message.to_string()).await;
                Ok(())
            }
            Ok(Value::Array(batch)) => {
                for message in batch {
                    self.deliver(out, message.to_string()).await;
                }
                Ok(())
            }
            // docchat's own refusal ({"code": 401, "message": ...}).
            Ok(refusal) => Err(format!(
                "docchat answered {status}: {}",
                refusal
                    .get("message")
                    .and_then(Value::as_str)
                    .unwrap_or(body.as_str())
            )),
            Err(_) => Err(format!("docchat answered {status}: {body}")),
        }
    }

    /// Delivers the `data` of each event of an event stream as it arrives; an error only
    /// when the stream broke before its answer (a message with a result or an error).
    async fn relay_events(
        &self,
        response: reqwest::Response,
        out: &mpsc::Sender<String>,
    ) -> Result<(), String> {
        let mut answered = false;
        let mut buffer = String::new();
        let mut pending = Vec::new();
        let mut body = response.bytes_stream();
        loop {
            let chunk = match body.next().await {
                Some(Ok(chunk)) => chunk,
                Some(Err(e)) if !answered => return Err(format!("reading docchat's events: {e}")),
                Some(Err(_)) | None => break,
            };
            pending.extend_from_slice(&chunk);
            decode_utf8(&mut pending, &mut buffer);
            for message in complete_events(&mut buffer) {
                answered |= is_answer(&message);
                self.deliver(out, message).await;
            }
        }
        buffer.push_str(&String::from_utf8_lossy(&pending));
        buffer.push_str("\n\n");
        for message in complete_events(&mut buffer) {
            answered |= is_answer(&message);
            self.deliver(out, message).await;
        }
        if answered {
            Ok(())
        } else {
            Err("docchat's event stream ended without an answer".to_owned())
        }
    }

    fn learn_protocol(&self, answer: &str) {
        let Ok(message) = serde_json::from_str::<Value>(answer) else {
            return;
        };
        if let Some(version) = message
            .pointer("/result/protocolVersion")
            .and_then(Value::as_str)
        {
            *self.protocol.lock().unwrap_or_else(|p| p.into_inner()) = Some(version.to_owned());
        }
    }
}

/// Whether `message` answers a request (a JSON-RPC result or error), not a notification.
fn is_answer(message: &str) -> bool {
    serde_json::from_str::<Value>(message)
        .is_ok_and(|m| m.get("result").is_some() || m.get("error").is_some())
}

/// Moves the complete UTF-8 text at the front of `pending` onto `text`, keeping a character
/// split between two chunks of the body for the next one (a chunk ends wherever the network
/// cut it; decoding each on its own turned such a character into two U+FFFD). Bytes that can
/// never be UTF-8 are replaced, as before.
fn decode_utf8(pending: &mut Vec<u8>, text: &mut String) {
    let complete = match std::str::from_utf8(pending) {
        Ok(all) => {
            text.push_str(all);
            pending.len()
        }
        // Only an unfinished character at the end: keep it.
        Err(e) if e.error_len().is_none() => {
            text.push_str(&String::from_utf8_lossy(&pending[..e.valid_up_to()]));
            e.valid_up_to()
        }
        Err(_) => {
            text.push_str(&String::from_utf8_lossy(pending));
            pending.len()
        }
    };
    pending.drain(..complete);
}

/// Takes the complete events (ended by a blank line) off the front of `buffer` and returns
/// their data; events without data (priming, keep-alive comments) are skipped.
fn complete_events(buffer: &mut String) -> Vec<String> {
    let mut out = Vec::new();
    loop {
        let normalized = buffer.replace("\r\n", "\n");
        let Some(end) = normalized.find("\n\n") else {
            *buffer = normalized;
            return out;
        };
        let data: Vec<&str> = normalized[..end]
            .lines()
            .filter_map(|l| l.strip_prefix("data:"))
            .map(|d| d.strip_prefix(' ').unwrap_or(d))
            .collect();
        if !data.is_empty() && !data.iter().all(|d| d.is_empty()) {
            out.push(data.join("\n"));
        }
        *buffer = normalized[end + 2..].to_owned();
    }
}

/// A JSON-RPC error answering request `id` (docchat could not be reached or refused).
fn error_answer(id: Value, message: &str) -> String {
    json!({
        "jsonrpc": "2.0",
        "id": id,
        "error": {"code": -32603, "message": message},
    })
    .to_string()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn args(list: &[&str]) -> Vec<String> {
        list.iter().map(|s| (*s).to_owned()).collect()
    }

    #[test]
    fn options_come_from_flags_or_the_environment() {
        let o = Options::parse(&args(&["--url", "http://h:1/", "--key", "k"]), None).unwrap();
        assert_eq!(o.endpoint, "http://h:1/mcp");
        assert_eq!(o.key, "k");
        let o = Options::parse(&args(&["--url", "http://h:1/mcp"]), Some("e".into())).unwrap();
        assert_eq!(
            (o.endpoint.as_str(), o.key.as_str()),
            ("http://h:1/mcp", "e")
        );
        assert!(Options::parse(&args(&["--url", "http://h"]), None).is_err());
        assert!(Options::parse(&args(&["--key", "k"]), None).is_err());
        assert!(Options::parse(&args(&["--url"]), Some("k".into())).is_err());
        assert!(Options::parse(&args(&["--bogus", "x"]), Some("k".into())).is_err());
    }

    #[test]
    fn events_are_split_at_blank_lines_and_keep_only_their_data() {
        let mut buffer = String::from(
            "id: 1\r\nretry: 3000\r\ndata:\r\n\r\nevent: message\ndata: {\"a\":1}\n\ndata: {\"b\"",
        );
        assert_eq!(complete_events(&mut buffer), vec![r#"{"a":1}"#.to_owned()]);
        buffer.push_str(":2}\n\n");
        assert_eq!(complete_events(&mut buffer), vec![r#"{"b":2}"#.to_owned()]);
        assert!(buffer.is_empty());
    }

    #[test]
    fn a_character_split_between_chunks_arrives_whole() {
        let event = "data: {\"text\":\"Zürich — 東京\"}\n\n".as_bytes();
        // Every place a chunk could end, including inside each multi-byte character.
        for cut in 0..=event.len() {
            let (mut pending, mut text) = (Vec::new(), String::new());
            for chunk in [&event[..cut], &event[cut..]] {
                pending.extend_from_slice(chunk);
                decode_utf8(&mut pending, &mut text);
            }
            assert!(pending.is_empty(), "cut at {cut}");
            assert_eq!(
                complete_events(&mut text),
                vec![r#"{"text":"Zürich — 東京"}"#.to_owned()],
                "cut at {cut}"
            );
        }
        // Bytes that are never UTF-8 still go through, replaced.
        let (mut pending, mut text) = (b"data: \xff\xfe x".to_vec(), String::new());
        decode_utf8(&mut pending, &mut text);
        assert!(pending.is_empty());
        assert_eq!(text, "data: \u{fffd}\u{fffd} x");
    }

    #[test]
    fn an_answer_is_a_result_or_an_error_not_a_notification() {
        assert!(is_answer(r#"{"jsonrpc":"2.0","id":1,"result":{}}"#));
        assert!(is_answer(
            r#"{"jsonrpc":"2.0","id":1,"error":{"code":-1,"message":"x"}}"#
        ));
        assert!(!is_answer(
            r#"{"jsonrpc":"2.0","method":"notifications/progress","params":{}}"#
        ));
    }
}
