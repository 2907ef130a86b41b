//! Readiness reflects the services: the gateway alone, with admin-service up and the other
//! four unreachable, is live but not ready.

use std::sync::Arc;

use docchat_common::testing::{Spawned, bind, context};
use reqwest::Method;
use tokio_util::sync::CancellationToken;

use crate::harness::{ADMIN_KEY, read};

docchat_common::backend_tests! {
    async fn readiness_is_503_while_a_service_is_down(backend) {
        let dir = tempfile::tempdir().unwrap();
        let mut config = backend.config(dir.path());
        config.bootstrap_admin_key = Some(secrecy::SecretString::from(ADMIN_KEY));
        let (admin_listener, admin_url) = bind().await;
        config.admin_url = admin_url.clone();
        // Nothing listens on these.
        for url in [
            &mut config.ingest_url,
            &mut config.chat_url,
            &mut config.agent_url,
            &mut config.scheduler_url,
        ] {
            let (closed, closed_url) = bind().await;
            drop(closed);
            *url = closed_url;
        }
        let ctx = context(config);
        let admin = Spawned::start(
            ctx.clone(),
            admin_listener,
            admin_url,
            docchat_admin_service::serve,
        )
        .await
        .unwrap();

        let http = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        http.set_nonblocking(true).unwrap();
        let base = format!("http://{}", http.local_addr().unwrap());
        let stop = CancellationToken::new();
        let gateway = tokio::spawn(docchat_gateway::serve_http(
            ctx.config.clone(),
            Arc::clone(&ctx.keys),
            http,
            stop.clone(),
        ));
        let client = reqwest::Client::new();
        let mut live = None;
        for _ in 0..100 {
            if let Ok(r) = client
                .request(Method::GET, format!("{base}/rpc/health/liveness"))
                .bearer_auth(ADMIN_KEY)
                .send()
                .await
            {
                live = Some(r.status().as_u16());
                break;
            }
            tokio::time::sleep(std::time::Duration::from_millis(50)).await;
        }
        assert_eq!(live, Some(200));
        let (s, body) = read(
            client
                .request(Method::GET, format!("{base}/rpc/health/readiness"))
                .bearer_auth(ADMIN_KEY)
                .send()
                .await
                .unwrap(),
        )
        .await;
        assert_eq!(s, 503, "{body}");
        let down: Vec<&str> = body["unavailable"]
            .as_array()
            .unwrap()
            .iter()
            .map(|v| v.as_str().unwrap())
            .collect();
        assert_eq!(
            down,
            [
                "ingest-service",
                "chat-service",
                "agent-service",
                "scheduler-service"
            ]
        );
        // A route whose service is down answers 503 with the error body, not a hang or a 500.
        let (s, body) = read(
            client
                .request(Method::GET, format!("{base}/api/v1/collections"))
                .bearer_auth(ADMIN_KEY)
                .send()
                .await
                .unwrap(),
        )
        .await;
        crate::harness::assert_error(s, &body, 503);
        stop.cancel();
        gateway.await.unwrap().unwrap();
        admin.stop().await.unwrap();
    }
}
