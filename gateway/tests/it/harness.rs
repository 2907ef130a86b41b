//! Starts docchat standalone on a free port with an isolated backend.

use std::time::Duration;

use docchat_common::testing::Backend;
use reqwest::{Client, Method, RequestBuilder, Response};
use serde_json::{Value, json};
use tokio_util::sync::CancellationToken;

pub const ADMIN_KEY: &str = "sk-test-admin-key-0123456789";

pub struct TestApp {
    pub base: String,
    pub http: Client,
    pub backend: &'static str,
    shutdown: CancellationToken,
    task: Option<tokio::task::JoinHandle<anyhow::Result<()>>>,
    _dir: tempfile::TempDir,
}

impl TestApp {
    pub async fn start(backend: &Backend) -> TestApp {
        Self::start_with(backend, |_| {}).await
    }

    /// Starts with a changed configuration (a models file, say).
    pub async fn start_with(
        backend: &Backend,
        tweak: impl FnOnce(&mut docchat_common::Config),
    ) -> TestApp {
        let dir = tempfile::tempdir().unwrap();
        let mut config = backend.config(dir.path());
        config.bootstrap_admin_key = Some(secrecy::SecretString::from(ADMIN_KEY));
        config.auth_cache_ttl_ms = 500;
        tweak(&mut config);
        let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        listener.set_nonblocking(true).unwrap();
        let base = format!("http://{}", listener.local_addr().unwrap());
        let shutdown = CancellationToken::new();
        let task = tokio::spawn(docchat_gateway::standalone::run(
            config,
            listener,
            shutdown.clone(),
        ));
        let app = TestApp {
            base,
            http: Client::new(),
            backend: backend.name,
            shutdown,
            task: Some(task),
            _dir: dir,
        };
        let deadline = tokio::time::Instant::now() + Duration::from_secs(60);
        loop {
            if let Ok(r) = app
                .req(Method::GET, "/rpc/health/readiness", Some(ADMIN_KEY))
                .send()
                .await
                && r.status() == 200
            {
                break;
            }
            assert!(
                tokio::time::Instant::now() < deadline,
                "docchat did not become ready"
            );
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
        app
    }

    pub fn req(&self, method: Method, path: &str, key: Option<&str>) -> RequestBuilder {
        let r = self.http.request(method, format!("{}{path}", self.base));
        match key {
            Some(k) => r.bearer_auth(k),
            None => r,
        }
    }

    pub async fn call(
        &self,
        method: Method,
        path: &str,
        key: &str,
        body: Option<Value>,
    ) -> (u16, Value) {
        let mut r = self.req(method, path, Some(key));
        if let Some(b) = body {
            r = r.json(&b);
        }
        read(r.send().await.unwrap()).await
    }

    /// Creates a user with a key; returns (user id, key).
    pub async fn user(&self, username: &str) -> (String, String) {
        let (s, user) = self
            .call(
                Method::POST,
                "/api/v1/admin/users",
                ADMIN_KEY,
                Some(json!({"username": username, "email": format!("{username}@example.com")})),
            )
            .await;
        assert_eq!(s, 201, "{user}");
        let id = user["id"].as_str().unwrap().to_owned();
        let (s, key) = self
            .call(
                Method::POST,
                "/api/v1/admin/api_keys",
                ADMIN_KEY,
                Some(json!({"user_id": id, "name": "k"})),
            )
            .await;
        assert_eq!(s, 201, "{key}");
        (id, key["secret_key"].as_str().unwrap().to_owned())
    }

    pub async fn stop(mut self) {
        self.shutdown.cancel();
        if let Some(task) = self.task.take() {
            tokio::time::timeout(Duration::from_secs(30), task)
                .await
                .expect("graceful shutdown")
                .unwrap()
                .unwrap();
        }
    }
}

pub async fn read(r: Response) -> (u16, Value) {
    let status = r.status().as_u16();
    let text = r.text().await.unwrap();
    let value = if text.is_empty() {
        Value::Null
    } else {
        serde_json::from_str(&text).unwrap_or(Value::String(text))
    };
    (status, value)
}

/// The error body of SPEC.md, exactly.
pub fn assert_error(status: u16, body: &Value, want: u16) {
    assert_eq!(status, want, "{body}");
    let obj = body
        .as_object()
        .unwrap_or_else(|| panic!("error body is an object: {body}"));
    assert_eq!(obj.len(), 2, "only code and message: {body}");
    assert_eq!(obj["code"], json!(want));
    assert!(!obj["message"].as_str().unwrap().is_empty());
}

pub async fn eventually<F, Fut>(what: &str, mut f: F)
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = bool>,
{
    let deadline = tokio::time::Instant::now() + Duration::from_secs(20);
    while !f().await {
        assert!(tokio::time::Instant::now() < deadline, "timed out: {what}");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}
