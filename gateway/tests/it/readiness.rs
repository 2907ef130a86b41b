//! Readiness reflects the services: the gateway alone, with admin-service up and the other
//! four unreachable, is live but not ready.

use docchat_common::testing::bind;
use reqwest::Method;

use crate::harness::{ADMIN_KEY, Stack, read};

docchat_common::backend_tests! {
    async fn readiness_is_503_while_a_service_is_down(backend) {
        // The gateway with admin-service alone; nothing listens where the others should be.
        let mut closed = Vec::new();
        for _ in 0..4 {
            let (listener, url) = bind().await;
            drop(listener);
            closed.push(url);
        }
        let app = Stack::builder(&backend)
            .configure(|c| {
                c.ingest_url = closed[0].clone();
                c.chat_url = closed[1].clone();
                c.agent_url = closed[2].clone();
                c.scheduler_url = closed[3].clone();
            })
            .gateway()
            .start()
            .await;
        // Live (the start waited for that), not ready.
        let (s, body) = read(
            app.http(Method::GET, "/rpc/health/readiness", Some(ADMIN_KEY))
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
            app.http(Method::GET, "/api/v1/collections", Some(ADMIN_KEY))
                .send()
                .await
                .unwrap(),
        )
        .await;
        crate::harness::assert_error(s, &body, 503);
        app.stop().await;
    }
}
