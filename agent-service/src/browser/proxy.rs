//! The browser's only way out of the sandbox: an HTTP proxy on a unix socket (bound into the
//! sandbox with the tool's files), which applies the agent's egress rule
//! ([`crate::egress`]) to every connection: `CONNECT host:port` (https) and absolute-form
//! requests (`GET http://host/path`, plain http). A host is resolved here, once, and only a
//! public address is used unless the host is allowed by name; what is refused is answered
//! 403 and remembered, so the tool's result can say why a page did not load.

use std::path::Path;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt};
use tokio::net::{TcpStream, UnixListener, UnixStream};
use tokio_util::sync::CancellationToken;
use tokio_util::task::TaskTracker;

/// The largest request head the proxy reads.
const HEAD_BYTES: usize = 64 * 1024;
/// Resolving and connecting to a host.
const CONNECT_TIMEOUT: Duration = Duration::from_secs(15);

/// The egress proxy of one opened browser tool; it stops when dropped.
pub struct EgressProxy {
    token: CancellationToken,
    refusals: Arc<Mutex<Vec<String>>>,
}

impl EgressProxy {
    /// Listens on the unix socket `path` (connectable by the sandbox's uid), letting through
    /// public addresses and the hosts `allow` names.
    pub fn bind(path: &Path, allow: Vec<String>) -> std::io::Result<EgressProxy> {
        let listener = UnixListener::bind(path)?;
        std::fs::set_permissions(path, std::os::unix::fs::PermissionsExt::from_mode(0o666))?;
        let token = CancellationToken::new();
        let refusals = Arc::new(Mutex::new(Vec::new()));
        let shared = Arc::new(Shared {
            allow,
            refusals: refusals.clone(),
        });
        let tracker = TaskTracker::new();
        let (t, stop) = (tracker.clone(), token.clone());
        tracker.spawn(async move {
            loop {
                let conn = tokio::select! {
                    () = stop.cancelled() => break,
                    conn = listener.accept() => conn,
                };
                let Ok((conn, _)) = conn else { continue };
                let (shared, stop) = (shared.clone(), stop.clone());
                t.spawn(async move {
                    tokio::select! {
                        () = stop.cancelled() => {}
                        () = serve(conn, &shared) => {}
                    }
                });
            }
        });
        tracker.close();
        Ok(EgressProxy { token, refusals })
    }

    /// What was refused since the last call.
    pub fn take_refusals(&self) -> Vec<String> {
        std::mem::take(&mut *self.refusals.lock().unwrap_or_else(|p| p.into_inner()))
    }
}

impl Drop for EgressProxy {
    fn drop(&mut self) {
        self.token.cancel();
    }
}

struct Shared {
    allow: Vec<String>,
    refusals: Arc<Mutex<Vec<String>>>,
}

/// A parsed request head.
#[derive(Debug, PartialEq, Eq)]
struct Request {
    /// `CONNECT` or the method of an absolute-form request.
    method: String,
    host: String,
    port: u16,
    /// The head to send upstream (absolute-form requests only), in origin form.
    head: Option<Vec<u8>>,
}

async fn serve(mut conn: UnixStream, shared: &Shared) {
    let mut buf = Vec::with_capacity(4096);
    let end = loop {
        if let Some(i) = find(&buf, b"\r\n\r\n") {
            break i + 4;
        }
        if buf.len() >= HEAD_BYTES {
            return answer(&mut conn, "400 Bad Request", "request head too large").await;
        }
        let mut chunk = [0u8; 4096];
        match conn.read(&mut chunk).await {
            Ok(0) | Err(_) => return,
            Ok(n) => buf.extend_from_slice(&chunk[..n]),
        }
    };
    let req = match parse(&buf[..end]) {
        Ok(r) => r,
        Err(e) => return answer(&mut conn, "400 Bad Request", &e).await,
    };
    let rest = buf[end..].to_vec();
    let upstream = tokio::time::timeout(CONNECT_TIMEOUT, async {
        // A name that does not resolve is no refusal (chromium's own background requests
        // meet that offline); an address the rule refuses is.
        let addr = crate::egress::resolve(&req.host, req.port, &shared.allow)
            .await
            .map_err(|e| (!e.starts_with("cannot resolve"), e))?;
        TcpStream::connect(addr).await.map_err(|e| {
            (
                false,
                format!("cannot connect to {}:{}: {e}", req.host, req.port),
            )
        })
    })
    .await
    .unwrap_or_else(|_| Err((false, format!("{}:{} timed out", req.host, req.port))));
    let mut upstream = match upstream {
        Ok(u) => u,
        Err((refused, why)) => {
            tracing::info!(host = %req.host, reason = %why, "browser egress failed");
            if refused {
                shared
                    .refusals
                    .lock()
                    .unwrap_or_else(|p| p.into_inner())
                    .push(format!("{}:{}: {why}", req.host, req.port));
            }
            let status = if refused {
                "403 Forbidden"
            } else {
                "502 Bad Gateway"
            };
            return answer(&mut conn, status, &why).await;
        }
    };
    let sent = match &req.head {
        None => {
            conn.write_all(b"HTTP/1.1 200 Connection established\r\n\r\n")
                .await
        }
        Some(head) => upstream.write_all(head).await,
    };
    if sent.is_err() || upstream.write_all(&rest).await.is_err() {
        return;
    }
    splice(conn, upstream).await;
}

/// Copies both ways until either side is done.
async fn splice(
    mut a: impl AsyncRead + AsyncWrite + Unpin,
    mut b: impl AsyncRead + AsyncWrite + Unpin,
) {
    let _ = tokio::io::copy_bidirectional(&mut a, &mut b).await;
}

/// A short HTML answer (chromium shows it as the page), then the connection closes.
async fn answer(conn: &mut UnixStream, status: &str, why: &str) {
    let body = format!(
        "<!doctype html><title>docchat egress: {status}</title><p>{}</p>",
        why.replace('&', "&amp;").replace('<', "&lt;")
    );
    let msg = format!(
        "HTTP/1.1 {status}\r\nContent-Type: text/html; charset=utf-8\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}",
        body.len()
    );
    let _ = conn.write_all(msg.as_bytes()).await;
    let _ = conn.shutdown().await;
}

fn find(hay: &[u8], needle: &[u8]) -> Option<usize> {
    hay.windows(needle.len()).position(|w| w == needle)
}

/// `host:port` or `[v6]:port`, with `default` when the port is absent.
fn authority(s: &str, default: u16) -> Result<(String, u16), String> {
    let bad = || format!("bad host {s:?}");
    let (host, port) = if let Some(rest) = s.strip_prefix('[') {
        let (h, after) = rest.split_once(']').ok_or_else(bad)?;
        (h, after.strip_prefix(':'))
    } else {
        match s.rsplit_once(':') {
            Some((h, p)) => (h, Some(p)),
            None => (s, None),
        }
    };
    let port = match port {
        Some(p) => p.parse().map_err(|_| bad())?,
        None => default,
    };
    if host.is_empty() {
        return Err(bad());
    }
    Ok((host.to_owned(), port))
}

/// Parses a proxy request head (the bytes up to and including the blank line).
fn parse(head: &[u8]) -> Result<Request, String> {
    let text = std::str::from_utf8(head).map_err(|_| "request head is not UTF-8".to_owned())?;
    let mut lines = text.split("\r\n");
    let first = lines.next().unwrap_or_default();
    let mut parts = first.split(' ');
    let (Some(method), Some(target), Some(version), None) =
        (parts.next(), parts.next(), parts.next(), parts.next())
    else {
        return Err(format!("bad request line {first:?}"));
    };
    if method == "CONNECT" {
        let (host, port) = authority(target, 443)?;
        return Ok(Request {
            method: method.into(),
            host,
            port,
            head: None,
        });
    }
    let rest = target
        .strip_prefix("http://")
        .ok_or_else(|| format!("only http:// targets and CONNECT are proxied, not {target:?}"))?;
    let (auth, path) = match rest.find('/') {
        Some(i) => (&rest[..i], &rest[i..]),
        None => (rest, "/"),
    };
    let (host, port) = authority(auth, 80)?;
    let mut out = format!("{method} {path} {version}\r\n");
    for line in lines.filter(|l| !l.is_empty()) {
        let name = line
            .split(':')
            .next()
            .unwrap_or_default()
            .to_ascii_lowercase();
        if !matches!(
            name.as_str(),
            "proxy-connection" | "proxy-authorization" | "connection" | "keep-alive"
        ) {
            out.push_str(line);
            out.push_str("\r\n");
        }
    }
    // One request per connection: chromium opens another for the next one.
    out.push_str("Connection: close\r\n\r\n");
    Ok(Request {
        method: method.into(),
        host,
        port,
        head: Some(out.into_bytes()),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn connect_and_absolute_requests_are_parsed() {
        let r = parse(b"CONNECT example.com:8443 HTTP/1.1\r\nHost: example.com\r\n\r\n").unwrap();
        assert_eq!(
            (r.host.as_str(), r.port, r.head),
            ("example.com", 8443, None)
        );
        let r = parse(b"CONNECT [::1]:443 HTTP/1.1\r\n\r\n").unwrap();
        assert_eq!((r.host.as_str(), r.port), ("::1", 443));
        let r = parse(
            b"GET http://a.test/x?y=1 HTTP/1.1\r\nHost: a.test\r\nProxy-Connection: keep-alive\r\nAccept: */*\r\n\r\n",
        )
        .unwrap();
        assert_eq!(
            (r.method.as_str(), r.host.as_str(), r.port),
            ("GET", "a.test", 80)
        );
        assert_eq!(
            String::from_utf8(r.head.unwrap()).unwrap(),
            "GET /x?y=1 HTTP/1.1\r\nHost: a.test\r\nAccept: */*\r\nConnection: close\r\n\r\n"
        );
        assert!(parse(b"GET /relative HTTP/1.1\r\n\r\n").is_err());
        assert!(parse(b"GET ftp://a/ HTTP/1.1\r\n\r\n").is_err());
        assert!(parse(b"CONNECT :80 HTTP/1.1\r\n\r\n").is_err());
    }

    /// A listener on 127.0.0.1 answering one fixed response per connection.
    async fn origin() -> u16 {
        let l = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let port = l.local_addr().unwrap().port();
        let tracker = TaskTracker::new();
        tracker.spawn(async move {
            while let Ok((mut c, _)) = l.accept().await {
                let mut buf = [0u8; 4096];
                let _ = c.read(&mut buf).await;
                let _ = c
                    .write_all(b"HTTP/1.1 200 OK\r\nContent-Length: 5\r\n\r\nhello")
                    .await;
            }
        });
        port
    }

    async fn through(sock: &Path, req: String) -> String {
        let Ok(mut c) = UnixStream::connect(sock).await else {
            return String::new();
        };
        if c.write_all(req.as_bytes()).await.is_err() {
            return String::new();
        }
        let mut out = String::new();
        let _ = tokio::time::timeout(Duration::from_secs(5), c.read_to_string(&mut out)).await;
        out
    }

    #[tokio::test]
    async fn loopback_passes_only_when_allowed_by_name() {
        let port = origin().await;
        let dir = tempfile::tempdir().unwrap();
        let open = dir.path().join("open.sock");
        let shut = dir.path().join("shut.sock");
        let allowing = EgressProxy::bind(&open, vec!["localhost".into()]).unwrap();
        let refusing = EgressProxy::bind(&shut, vec![]).unwrap();
        let get = |host: &str| format!("GET http://{host}:{port}/ HTTP/1.1\r\nHost: x\r\n\r\n");

        assert!(through(&open, get("localhost")).await.ends_with("hello"));
        assert!(allowing.take_refusals().is_empty());
        // By name only: the same address under another name is refused.
        let out = through(&open, get("127.0.0.1")).await;
        assert!(out.starts_with("HTTP/1.1 403"), "{out}");
        assert_eq!(allowing.take_refusals().len(), 1);

        let out = through(&shut, get("localhost")).await;
        assert!(out.starts_with("HTTP/1.1 403"), "{out}");
        let out = through(&shut, format!("CONNECT 10.0.0.1:{port} HTTP/1.1\r\n\r\n")).await;
        assert!(out.starts_with("HTTP/1.1 403"), "{out}");
        let why = refusing.take_refusals();
        assert_eq!(why.len(), 2, "{why:?}");
        assert!(why[1].contains("private"), "{why:?}");

        // A tunnel (https): the proxy answers 200, then bytes go through both ways.
        let mut c = UnixStream::connect(&open).await.unwrap();
        c.write_all(format!("CONNECT localhost:{port} HTTP/1.1\r\n\r\n").as_bytes())
            .await
            .unwrap();
        let mut head = [0u8; 39];
        c.read_exact(&mut head).await.unwrap();
        assert_eq!(&head[..], b"HTTP/1.1 200 Connection established\r\n\r\n");
        c.write_all(b"GET / HTTP/1.1\r\n\r\n").await.unwrap();
        let mut out = String::new();
        let _ = tokio::time::timeout(Duration::from_secs(5), c.read_to_string(&mut out)).await;
        assert!(out.ends_with("hello"), "{out}");

        drop(allowing);
        tokio::time::sleep(Duration::from_millis(50)).await;
        assert!(
            !through(&open, get("localhost")).await.ends_with("hello"),
            "a dropped proxy stops serving"
        );
    }
}
