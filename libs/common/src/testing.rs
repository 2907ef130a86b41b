//! Test support, compiled only for tests (the `testing` feature, which dev-dependencies
//! enable): the backends a suite runs against, one test per backend ([`backend_tests!`]),
//! isolated configurations, in-process services and a scripted HTTP upstream. The embedded
//! backend (SQLite, in-process bus, blobs in a directory) always runs; the real one
//! (PostgreSQL, RabbitMQ, blobs in an S3-compatible store) when `DOCCHAT_TEST_DATABASE_URL`,
//! `DOCCHAT_TEST_AMQP_URL` and `DOCCHAT_TEST_S3_URL` are set, as `scripts/test.sh` does, and
//! its absence fails a run in CI.
#![allow(
    clippy::disallowed_methods,
    reason = "test servers live as long as the test's runtime"
)]

use std::path::Path;

use crate::config::Config;

/// Where a test's state lives.
#[derive(Debug, Clone)]
pub struct Backend {
    pub name: &'static str,
    /// A PostgreSQL server URL (any database); `None` means SQLite.
    pub postgres: Option<String>,
    /// RabbitMQ; `None` means the in-process bus.
    pub amqp: Option<String>,
    /// An S3-compatible server's endpoint for the blob store; `None` means a local
    /// directory.
    pub s3: Option<String>,
}

/// Whether this run is CI (`CI` set and not `false`/`0`): a missing backend, model or
/// server then fails the test instead of skipping it.
pub fn in_ci() -> bool {
    std::env::var("CI").is_ok_and(|v| !v.is_empty() && v != "false" && v != "0")
}

/// What a test needs is missing: in CI that fails the test; elsewhere the skip is said
/// loudly, so a green run outside CI cannot hide what did not run.
#[allow(clippy::panic, clippy::print_stderr)]
pub fn unavailable(what: &str) {
    let test = std::thread::current()
        .name()
        .map(|n| format!(" {n}"))
        .unwrap_or_default();
    if in_ci() {
        panic!("{what}: CI is set, so a missing backend, model or server fails the run");
    }
    eprintln!("\n!!! SKIPPED{test}: {what} (outside CI this is a skip; in CI it fails)\n");
}

impl Backend {
    /// SQLite and the in-process bus: always available.
    pub fn sqlite() -> Backend {
        Backend {
            name: "sqlite+memory",
            postgres: None,
            amqp: None,
            s3: None,
        }
    }

    /// PostgreSQL, RabbitMQ and an S3-compatible blob store from `DOCCHAT_TEST_DATABASE_URL`,
    /// `DOCCHAT_TEST_AMQP_URL` and `DOCCHAT_TEST_S3_URL` (scripts/test.sh sets them);
    /// `None`, after [`unavailable`], when one is unset.
    pub fn postgres() -> Option<Backend> {
        Backend::real("postgres+rabbitmq+s3", "DOCCHAT_TEST_DATABASE_URL")
    }

    /// As [`Backend::postgres`] with PostgreSQL with pgvector (`DOCCHAT_TEST_PGVECTOR_URL`,
    /// started by scripts/pgvector-server.sh).
    pub fn pgvector() -> Option<Backend> {
        Backend::real("pgvector+rabbitmq+s3", "DOCCHAT_TEST_PGVECTOR_URL")
    }

    fn real(name: &'static str, database_var: &str) -> Option<Backend> {
        match (
            std::env::var(database_var),
            std::env::var("DOCCHAT_TEST_AMQP_URL"),
            std::env::var("DOCCHAT_TEST_S3_URL"),
        ) {
            (Ok(pg), Ok(amqp), Ok(s3)) => Some(Backend {
                name,
                postgres: Some(pg),
                amqp: Some(amqp),
                s3: Some(s3),
            }),
            _ => {
                unavailable(&format!(
                    "{name} backend: {database_var} / DOCCHAT_TEST_AMQP_URL / DOCCHAT_TEST_S3_URL unset (scripts/test.sh sets them)"
                ));
                None
            }
        }
    }
}

/// One test per backend, so a failure names its backend: each
/// `async fn name(backend) { .. }` becomes the module `name` with the tests `sqlite` and
/// `postgres` (`name::sqlite`, `name::postgres`), each running the body with its
/// [`Backend`]. The real backend follows [`Backend::postgres`]: it fails in CI when it is
/// missing and says loudly that it was skipped elsewhere.
///
/// ```ignore
/// docchat_common::backend_tests! {
///     /// What the test shows.
///     async fn sessions_round_trip(backend) {
///         let app = TestApp::start(&backend).await;
///         // ...
///     }
/// }
/// ```
#[macro_export]
macro_rules! backend_tests {
    (@with $real:ident; $($(#[$attr:meta])* async fn $name:ident($backend:ident) $body:block)*) => {
        $(
            $(#[$attr])*
            mod $name {
                #[allow(unused_imports)]
                use super::*;

                async fn run($backend: $crate::testing::Backend) $body

                #[tokio::test]
                async fn sqlite() {
                    run($crate::testing::Backend::sqlite()).await
                }

                #[tokio::test]
                async fn $real() {
                    if let Some(backend) = $crate::testing::Backend::$real() {
                        run(backend).await
                    }
                }
            }
        )*
    };
    ($($tests:tt)*) => {
        $crate::backend_tests!(@with postgres; $($tests)*);
    };
}

/// As [`backend_tests!`](crate::backend_tests) for suites that search vectors: the tests
/// are `name::sqlite` and `name::pgvector` (see [`Backend::pgvector`]).
#[macro_export]
macro_rules! vector_backend_tests {
    ($($tests:tt)*) => {
        $crate::backend_tests!(@with pgvector; $($tests)*);
    };
}

/// Where tests find local models: `DOCCHAT_TEST_MODELS_DIR` (scripts/test.sh fetches them
/// there), else `DOCCHAT_MODELS_DIR`, else the repository's `models/`.
pub fn models_dir() -> std::path::PathBuf {
    match std::env::var_os("DOCCHAT_TEST_MODELS_DIR")
        .or_else(|| std::env::var_os("DOCCHAT_MODELS_DIR"))
    {
        Some(dir) => dir.into(),
        None => Path::new(env!("CARGO_MANIFEST_DIR")).join("../../models"),
    }
}

/// The MiniLM embedder's weights, relative to [`models_dir`] (`scripts/fetch-models.sh`).
pub const MINILM_WEIGHTS: &str = "all-MiniLM-L6-v2/model.safetensors";
/// The built-in local chat model (SmolLM2-135M Instruct), relative to [`models_dir`]
/// (`scripts/fetch-models.sh --with-llm`).
pub const SMOLLM2_GGUF: &str = "smollm2-135m-instruct/SmolLM2-135M-Instruct.Q4_1.gguf";
/// The base Gemma 3 270M, relative to [`models_dir`] (`scripts/fetch-models.sh
/// --with-llm`): the Gemma decoder's tests run it; chat never offers it.
pub const GEMMA_GGUF: &str = "gemma3-270m/gemma-3-270m-q4_k_m.gguf";
/// Qwen2.5-Coder-0.5B Instruct (Q4_K_M), relative to [`models_dir`]
/// (`scripts/fetch-models.sh --with-llm=qwen`): the Qwen2 decoder's tests run it.
pub const QWEN_GGUF: &str = "qwen2.5-coder-0.5b-instruct/qwen2.5-coder-0.5b-instruct-q4_k_m.gguf";

/// A model file a test needs (`relative` to [`models_dir`], e.g. [`MINILM_WEIGHTS`]);
/// `None`, after [`unavailable`] (a failure in CI), when it has not been fetched.
pub fn model_file(relative: &str) -> Option<std::path::PathBuf> {
    let path = models_dir().join(relative);
    if path.is_file() {
        return Some(path);
    }
    unavailable(&format!(
        "model file {} missing (scripts/fetch-models.sh --with-llm fetches the models, \
         --with-llm=qwen the Qwen one)",
        path.display()
    ));
    None
}

/// A fresh name for databases and bus namespaces.
pub fn unique(prefix: &str) -> String {
    let id = crate::ids::new_name();
    format!("{prefix}{}", &id[..12])
}

/// `postgres://h/any` → `postgres://h/<database>`.
pub fn postgres_database(server: &str, database: &str) -> String {
    let base = server.split('?').next().unwrap_or(server);
    let root = match base.rsplit_once('/') {
        Some((root, _)) if root.contains("//") && !root.ends_with('/') => root,
        _ => base,
    };
    format!("{root}/{database}")
}

impl Backend {
    /// A database URL for one store, fresh for this test.
    pub fn database_url(&self, data_dir: &Path, name: &str) -> String {
        match &self.postgres {
            Some(server) => postgres_database(server, &unique("dctest_")),
            None => format!("sqlite://{}/{name}.db?mode=rwc", data_dir.display()),
        }
    }

    /// A standalone configuration isolated from every other test: its own data dir,
    /// databases and bus namespace.
    pub fn config(&self, data_dir: &Path) -> Config {
        let mut config = Config::for_test(data_dir);
        config.models_dir = models_dir();
        if let Some(server) = &self.postgres {
            config.database_url = Some(postgres_database(server, &unique("dctest_")));
        }
        if let Some(amqp) = &self.amqp {
            config.amqp_url = Some(amqp.clone());
            config.bus_namespace = format!("{}.", unique("t"));
            config.bus_queue_expiry_seconds = Some(300);
        }
        if let Some(endpoint) = &self.s3 {
            // A bucket per test, which ingest-service creates when it starts.
            config.blob_url = Some(format!("s3://{}", unique("dctest-")));
            config.s3_endpoint = Some(endpoint.clone());
            config.s3_region = Some("us-east-1".into());
            config.s3_access_key_id = Some("docchat-test".into());
            config.s3_secret_access_key = Some(secrecy::SecretString::from("docchat-test-secret"));
        }
        config
    }
}

/// A loopback listener on a free port and its gRPC URL.
pub async fn bind() -> (tokio::net::TcpListener, String) {
    let listener = match tokio::net::TcpListener::bind("127.0.0.1:0").await {
        Ok(l) => l,
        Err(e) => panic_free_abort(&format!("binding a test port: {e}")),
    };
    let url = match listener.local_addr() {
        Ok(a) => format!("http://{a}"),
        Err(e) => panic_free_abort(&format!("reading a test port: {e}")),
    };
    (listener, url)
}

#[allow(clippy::print_stderr)]
fn panic_free_abort(message: &str) -> ! {
    eprintln!("{message}");
    std::process::abort()
}

/// The context services get in a test: standalone-style database naming (one server, a
/// database per service), the backend's bus, a fixed JWT secret.
pub fn context(config: Config) -> crate::grpc::ServiceContext {
    let config = std::sync::Arc::new(config);
    let secret = config
        .internal_jwt_secret
        .clone()
        .unwrap_or_else(|| secrecy::SecretString::from("test-secret-of-enough-length-0123456789"));
    crate::grpc::ServiceContext {
        bus: crate::bus::from_config(&config),
        keys: std::sync::Arc::new(crate::auth::JwtKeys::new(&secret, 120)),
        config,
        standalone: true,
    }
}

/// A service started by a test; stopped (gracefully) by [`Spawned::stop`].
pub struct Spawned {
    pub url: String,
    pub shutdown: tokio_util::sync::CancellationToken,
    handle: tokio::task::JoinHandle<anyhow::Result<()>>,
    /// One connection for every client of this service (see [`Spawned::channel`]).
    channel: tonic::transport::Channel,
}

impl Spawned {
    /// Starts `serve` on `listener` and waits until it reports healthy.
    pub async fn start<S, SF>(
        ctx: crate::grpc::ServiceContext,
        listener: tokio::net::TcpListener,
        url: String,
        serve: S,
    ) -> anyhow::Result<Spawned>
    where
        S: FnOnce(
            crate::grpc::ServiceContext,
            tokio::net::TcpListener,
            tokio_util::sync::CancellationToken,
        ) -> SF,
        SF: std::future::Future<Output = anyhow::Result<()>> + Send + 'static,
    {
        let shutdown = tokio_util::sync::CancellationToken::new();
        let handle = tokio::spawn(serve(ctx, listener, shutdown.clone()));
        let deadline = tokio::time::Instant::now() + std::time::Duration::from_secs(60);
        loop {
            if handle.is_finished() {
                return match handle.await {
                    Ok(Ok(())) => Err(anyhow::anyhow!("service exited during start")),
                    Ok(Err(e)) => Err(e),
                    Err(e) => Err(anyhow::anyhow!("service panicked: {e}")),
                };
            }
            if crate::grpc::check_health(crate::grpc::channel(&url)?).await {
                break;
            }
            if tokio::time::Instant::now() > deadline {
                anyhow::bail!("service at {url} not healthy after 60s");
            }
            tokio::time::sleep(std::time::Duration::from_millis(25)).await;
        }
        Ok(Spawned {
            channel: crate::grpc::channel(&url)?,
            url,
            shutdown,
            handle,
        })
    }

    /// A channel to the service: clones of one connection.
    pub fn channel(&self) -> tonic::transport::Channel {
        self.channel.clone()
    }

    /// Cancels and waits for a clean exit.
    pub async fn stop(self) -> anyhow::Result<()> {
        self.shutdown.cancel();
        match tokio::time::timeout(std::time::Duration::from_secs(30), self.handle).await {
            Ok(Ok(result)) => result,
            Ok(Err(e)) => Err(anyhow::anyhow!("service panicked: {e}")),
            Err(_) => Err(anyhow::anyhow!("service did not stop within 30s")),
        }
    }
}

/// A caller for tests.
pub fn user(id: &str, admin: bool) -> crate::Caller {
    crate::Caller {
        user_id: id.to_owned(),
        username: id.to_owned(),
        email: format!("{id}@example.com"),
        roles: vec![if admin { "admin" } else { "user" }.to_owned()],
        groups: Vec::new(),
        permissions: Vec::new(),
        is_admin: admin,
        is_service: false,
    }
}

/// One request a [`ScriptedHttp`] server received.
#[derive(Debug, Clone)]
pub struct SeenRequest {
    pub method: String,
    pub path: String,
    pub headers: Vec<(String, String)>,
    pub body: Vec<u8>,
}

/// The scripted answer: status, content type, body.
pub type Script = std::sync::Arc<dyn Fn(&SeenRequest) -> (u16, String, Vec<u8>) + Send + Sync>;

/// A streamed scripted answer: the body goes out in parts, each after its delay, without a
/// content length (the connection's close ends it), like an SSE upstream.
pub struct Streamed {
    pub status: u16,
    pub content_type: String,
    pub parts: Vec<(std::time::Duration, Vec<u8>)>,
}

/// The scripted answer of a streaming server.
pub type StreamScript = std::sync::Arc<dyn Fn(&SeenRequest) -> Streamed + Send + Sync>;

/// A scripted HTTP/1.1 server on loopback for upstream fakes (model servers): real HTTP,
/// deterministic answers, every request recorded. One request per connection.
pub struct ScriptedHttp {
    /// `http://127.0.0.1:<port>`
    pub base_url: String,
    seen: std::sync::Arc<std::sync::Mutex<Vec<SeenRequest>>>,
    aborted: std::sync::Arc<std::sync::atomic::AtomicUsize>,
}

impl ScriptedHttp {
    pub async fn start(script: Script) -> ScriptedHttp {
        Self::serve(Reply::Whole(script)).await
    }

    /// A server whose answers stream (see [`Streamed`]).
    pub async fn start_streaming(script: StreamScript) -> ScriptedHttp {
        Self::serve(Reply::Streamed(script)).await
    }

    async fn serve(reply: Reply) -> ScriptedHttp {
        let (listener, _) = bind().await;
        let base_url = match listener.local_addr() {
            Ok(a) => format!("http://{a}"),
            Err(e) => panic_free_abort(&format!("scripted server address: {e}")),
        };
        let seen = std::sync::Arc::new(std::sync::Mutex::new(Vec::new()));
        let aborted = std::sync::Arc::new(std::sync::atomic::AtomicUsize::new(0));
        let (recorded, cut) = (seen.clone(), aborted.clone());
        tokio::spawn(async move {
            while let Ok((stream, _)) = listener.accept().await {
                tokio::spawn(answer(stream, reply.clone(), recorded.clone(), cut.clone()));
            }
        });
        ScriptedHttp {
            base_url,
            seen,
            aborted,
        }
    }

    pub fn seen(&self) -> Vec<SeenRequest> {
        self.seen.lock().unwrap_or_else(|p| p.into_inner()).clone()
    }

    /// Streamed answers the client hung up on before their last part.
    pub fn aborted(&self) -> usize {
        self.aborted.load(std::sync::atomic::Ordering::SeqCst)
    }
}

#[derive(Clone)]
enum Reply {
    Whole(Script),
    Streamed(StreamScript),
}

async fn answer(
    mut stream: tokio::net::TcpStream,
    reply: Reply,
    seen: std::sync::Arc<std::sync::Mutex<Vec<SeenRequest>>>,
    aborted: std::sync::Arc<std::sync::atomic::AtomicUsize>,
) {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let mut buf = Vec::new();
    let head_end = loop {
        if let Some(i) = buf.windows(4).position(|w| w == b"\r\n\r\n") {
            break i + 4;
        }
        let mut chunk = [0u8; 8192];
        match stream.read(&mut chunk).await {
            Ok(0) | Err(_) => return,
            Ok(n) => buf.extend_from_slice(&chunk[..n]),
        }
    };
    let head = String::from_utf8_lossy(&buf[..head_end]).into_owned();
    let mut lines = head.split("\r\n");
    let mut first = lines.next().unwrap_or("").split(' ');
    let method = first.next().unwrap_or("").to_owned();
    let path = first.next().unwrap_or("").to_owned();
    let headers: Vec<(String, String)> = lines
        .filter_map(|l| l.split_once(':'))
        .map(|(k, v)| (k.trim().to_ascii_lowercase(), v.trim().to_owned()))
        .collect();
    let length: usize = headers
        .iter()
        .find(|(k, _)| k == "content-length")
        .and_then(|(_, v)| v.parse().ok())
        .unwrap_or(0);
    while buf.len() < head_end + length {
        let mut chunk = [0u8; 8192];
        match stream.read(&mut chunk).await {
            Ok(0) | Err(_) => return,
            Ok(n) => buf.extend_from_slice(&chunk[..n]),
        }
    }
    let request = SeenRequest {
        method,
        path,
        headers,
        body: buf[head_end..head_end + length].to_vec(),
    };
    let reply = match reply {
        Reply::Whole(script) => {
            let (status, content_type, body) = script(&request);
            seen.lock().unwrap_or_else(|p| p.into_inner()).push(request);
            let head = format!(
                "HTTP/1.1 {status} X\r\ncontent-type: {content_type}\r\ncontent-length: {}\r\nconnection: close\r\n\r\n",
                body.len()
            );
            let _ = stream.write_all(head.as_bytes()).await;
            let _ = stream.write_all(&body).await;
            let _ = stream.shutdown().await;
            return;
        }
        Reply::Streamed(script) => script(&request),
    };
    seen.lock().unwrap_or_else(|p| p.into_inner()).push(request);
    let head = format!(
        "HTTP/1.1 {} X\r\ncontent-type: {}\r\ncache-control: no-cache\r\nconnection: close\r\n\r\n",
        reply.status, reply.content_type
    );
    if stream.write_all(head.as_bytes()).await.is_err() {
        aborted.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
        return;
    }
    for (delay, part) in reply.parts {
        tokio::time::sleep(delay).await;
        // A peer that hung up shows as a failed write (or, first, a readable EOF).
        let mut probe = [0u8; 1];
        let gone = matches!(
            tokio::time::timeout(std::time::Duration::ZERO, stream.read(&mut probe)).await,
            Ok(Ok(0)) | Ok(Err(_))
        );
        if gone || stream.write_all(&part).await.is_err() || stream.flush().await.is_err() {
            aborted.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
            return;
        }
    }
    let _ = stream.shutdown().await;
}

/// A tool call a [`ScriptedTurn`] answers with.
#[derive(Debug, Clone)]
pub struct ScriptedCall {
    pub id: String,
    pub name: String,
    /// The arguments' text as the model "writes" it (may be invalid JSON on purpose).
    pub arguments: String,
}

impl ScriptedCall {
    pub fn new(id: &str, name: &str, arguments: serde_json::Value) -> ScriptedCall {
        ScriptedCall {
            id: id.into(),
            name: name.into(),
            arguments: arguments.to_string(),
        }
    }

    /// A call whose arguments are this exact text.
    pub fn raw(id: &str, name: &str, arguments: &str) -> ScriptedCall {
        ScriptedCall {
            id: id.into(),
            name: name.into(),
            arguments: arguments.into(),
        }
    }
}

/// One streamed answer of a scripted OpenAI-compatible chat upstream: some text, then tool
/// calls (several = parallel calls) whose arguments go out in pieces of `split` bytes, one
/// SSE event each, interleaved across calls by `index`; then the finish reason and usage.
#[derive(Debug, Clone)]
pub struct ScriptedTurn {
    pub text: String,
    pub calls: Vec<ScriptedCall>,
    /// Bytes of arguments per fragment (0 = whole).
    pub split: usize,
    /// Pause before each SSE event.
    pub delay: std::time::Duration,
    pub usage: (u64, u64),
}

impl ScriptedTurn {
    pub fn text(text: &str) -> ScriptedTurn {
        ScriptedTurn {
            text: text.into(),
            calls: Vec::new(),
            split: 0,
            delay: std::time::Duration::ZERO,
            usage: (10, 5),
        }
    }

    pub fn calls(calls: Vec<ScriptedCall>) -> ScriptedTurn {
        ScriptedTurn {
            calls,
            ..ScriptedTurn::text("")
        }
    }

    pub fn split(mut self, bytes: usize) -> ScriptedTurn {
        self.split = bytes;
        self
    }

    pub fn delay(mut self, delay: std::time::Duration) -> ScriptedTurn {
        self.delay = delay;
        self
    }

    pub fn usage(mut self, prompt: u64, completion: u64) -> ScriptedTurn {
        self.usage = (prompt, completion);
        self
    }

    /// The SSE events of this answer, as an OpenAI-compatible upstream streams them.
    pub fn events(&self) -> Vec<serde_json::Value> {
        use serde_json::json;
        let chunk = |delta: serde_json::Value, finish: Option<&str>| {
            json!({"object": "chat.completion.chunk",
                   "choices": [{"index": 0, "delta": delta, "finish_reason": finish}]})
        };
        let mut out = vec![chunk(json!({"role": "assistant"}), None)];
        for w in self.text.split_inclusive(' ') {
            out.push(chunk(json!({"content": w}), None));
        }
        // First fragments (id, name, empty arguments), then the arguments' pieces
        // round-robin over the calls.
        let mut pieces: Vec<Vec<String>> = Vec::new();
        for (i, call) in self.calls.iter().enumerate() {
            out.push(chunk(
                json!({"tool_calls": [{"index": i, "id": call.id, "type": "function",
                                       "function": {"name": call.name, "arguments": ""}}]}),
                None,
            ));
            let size = if self.split == 0 {
                call.arguments.len().max(1)
            } else {
                self.split
            };
            let mut parts = Vec::new();
            let mut rest = call.arguments.as_str();
            while !rest.is_empty() {
                let mut cut = size.min(rest.len());
                while !rest.is_char_boundary(cut) {
                    cut += 1;
                }
                parts.push(rest[..cut].to_owned());
                rest = &rest[cut..];
            }
            pieces.push(parts);
        }
        let longest = pieces.iter().map(Vec::len).max().unwrap_or(0);
        for round in 0..longest {
            for (i, parts) in pieces.iter().enumerate() {
                if let Some(p) = parts.get(round) {
                    out.push(chunk(
                        json!({"tool_calls": [{"index": i, "function": {"arguments": p}}]}),
                        None,
                    ));
                }
            }
        }
        let finish = if self.calls.is_empty() {
            "stop"
        } else {
            "tool_calls"
        };
        out.push(chunk(json!({}), Some(finish)));
        out.push(json!({"object": "chat.completion.chunk", "choices": [],
                        "usage": {"prompt_tokens": self.usage.0,
                                  "completion_tokens": self.usage.1}}));
        out
    }

    /// This answer as a streamed HTTP reply.
    pub fn streamed(&self) -> Streamed {
        let mut parts: Vec<(std::time::Duration, Vec<u8>)> = self
            .events()
            .into_iter()
            .map(|e| (self.delay, format!("data: {e}\n\n").into_bytes()))
            .collect();
        parts.push((std::time::Duration::ZERO, b"data: [DONE]\n\n".to_vec()));
        Streamed {
            status: 200,
            content_type: "text/event-stream".into(),
            parts,
        }
    }
}

impl ScriptedHttp {
    /// A chat upstream answering its n-th request with `turns[n]` (the last turn again once
    /// they run out). Every request is recorded ([`seen`](Self::seen)) for checks on what
    /// the client sent (tools, tool_choice, the tool messages).
    pub async fn chat_turns(turns: Vec<ScriptedTurn>) -> ScriptedHttp {
        let count = std::sync::Arc::new(std::sync::atomic::AtomicUsize::new(0));
        let turns = std::sync::Arc::new(turns);
        Self::start_streaming(std::sync::Arc::new(move |_r: &SeenRequest| {
            let n = count.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
            match turns.get(n).or_else(|| turns.last()) {
                Some(turn) => turn.streamed(),
                None => ScriptedTurn::text("").streamed(),
            }
        }))
        .await
    }

    /// The JSON bodies of the requests received so far.
    pub fn bodies(&self) -> Vec<serde_json::Value> {
        self.seen()
            .iter()
            .map(|r| serde_json::from_slice(&r.body).unwrap_or(serde_json::Value::Null))
            .collect()
    }
}
