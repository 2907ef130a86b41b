//! The REST gateway in front of the stack (feature `gateway`), and the calls a test makes
//! through it.
#![allow(
    clippy::disallowed_methods,
    reason = "the gateway's task lives as long as the test's runtime"
)]

use std::time::Duration;

use docchat_common::grpc::ServiceContext;
use reqwest::{Client, Method, RequestBuilder, Response};
use serde_json::{Value, json};
use tokio_util::sync::CancellationToken;

use crate::{ADMIN_KEY, Stack};

pub(crate) struct Gateway {
    base: String,
    http: Client,
    shutdown: CancellationToken,
    task: tokio::task::JoinHandle<anyhow::Result<()>>,
}

impl Gateway {
    /// Serves REST on a free port; returns once it is live, and ready when `all` services
    /// run.
    pub(crate) async fn start(ctx: &ServiceContext, all: bool) -> Gateway {
        let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        listener.set_nonblocking(true).unwrap();
        let base = format!("http://{}", listener.local_addr().unwrap());
        let shutdown = CancellationToken::new();
        let task = tokio::spawn(docchat_gateway::serve_http(
            ctx.config.clone(),
            ctx.keys.clone(),
            listener,
            shutdown.clone(),
        ));
        let gateway = Gateway {
            base,
            http: Client::new(),
            shutdown,
            task,
        };
        let probe = if all {
            "/rpc/health/readiness"
        } else {
            "/rpc/health/liveness"
        };
        let deadline = tokio::time::Instant::now() + Duration::from_secs(60);
        loop {
            if let Ok(r) = gateway
                .http
                .get(format!("{}{probe}", gateway.base))
                .bearer_auth(ADMIN_KEY)
                .send()
                .await
                && r.status() == 200
            {
                break;
            }
            assert!(
                !gateway.task.is_finished(),
                "the gateway stopped during start"
            );
            assert!(
                tokio::time::Instant::now() < deadline,
                "the gateway did not answer 200 on {probe} within 60 s"
            );
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
        gateway
    }

    pub(crate) async fn stop(self) {
        self.shutdown.cancel();
        tokio::time::timeout(Duration::from_secs(30), self.task)
            .await
            .expect("the gateway stops within 30 s")
            .unwrap()
            .unwrap();
    }
}

impl Stack {
    fn gateway(&self) -> &Gateway {
        self.gateway.as_ref().expect("the stack has a gateway")
    }

    /// The gateway's base URL (`http://127.0.0.1:<port>`).
    pub fn base(&self) -> &str {
        &self.gateway().base
    }

    /// A request to the gateway, with `key` as the bearer token.
    pub fn http(&self, method: Method, path: &str, key: Option<&str>) -> RequestBuilder {
        let gateway = self.gateway();
        let r = gateway
            .http
            .request(method, format!("{}{path}", gateway.base));
        match key {
            Some(k) => r.bearer_auth(k),
            None => r,
        }
    }

    /// One call with an optional JSON body: the status and the body (JSON, else a string).
    pub async fn call(
        &self,
        method: Method,
        path: &str,
        key: &str,
        body: Option<Value>,
    ) -> (u16, Value) {
        let mut r = self.http(method, path, Some(key));
        if let Some(b) = body {
            r = r.json(&b);
        }
        read(r.send().await.unwrap()).await
    }

    /// Creates a user with an API key through the administrator's key: (user id, key).
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
}

/// A response's status and body (JSON, else the text as a string; `null` when empty).
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
