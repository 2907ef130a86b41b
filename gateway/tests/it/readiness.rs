//! Readiness reflects the services: the gateway alone, with admin-service up and the other
//! four unreachable, is live but not ready.

use docchat_common::testing::bind;
use reqwest::Method;
use serde_json::Value;

use crate::harness::{ADMIN_KEY, Stack, read};

/// GET /rpc/health/readiness as the administrator: status and body.
async fn readiness(app: &Stack) -> (u16, Value) {
    read(
        app.http(Method::GET, "/rpc/health/readiness", Some(ADMIN_KEY))
            .send()
            .await
            .unwrap(),
    )
    .await
}

docchat_common::backend_tests! {
    async fn readiness_is_503_while_a_service_is_down(backend) {
        // The gateway with admin-service alone; nothing listens where the others should be:
        // privileged ports of the loopback no test binds (a port bound and let go could be
        // taken by a test running beside this one).
        let closed: Vec<String> = (1..=4).map(|p| format!("http://127.0.0.1:{p}")).collect();
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
        let (s, body) = readiness(&app).await;
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

    async fn readiness_says_when_the_agent_runs_code_without_a_sandbox(backend) {
        // An agent-service stand-in that is up but reports no code sandbox (and stands in for
        // scheduler-service too, which only needs to be up).
        let (listener, url) = bind().await;
        let (reporter, health) = tonic_health::server::health_reporter();
        reporter
            .set_service_status("", tonic_health::ServingStatus::Serving)
            .await;
        reporter
            .set_service_status(docchat_common::grpc::SANDBOX_HEALTH, tonic_health::ServingStatus::NotServing)
            .await;
        let stop = tokio_util::sync::CancellationToken::new();
        let server = tonic::transport::Server::builder()
            .add_service(health)
            .serve_with_incoming_shutdown(
                tokio_stream::wrappers::TcpListenerStream::new(listener),
                stop.clone().cancelled_owned(),
            );
        #[expect(clippy::disallowed_methods, reason = "the test's stand-in server, stopped and joined below")]
        let server = tokio::task::spawn(server);
        // ingest and chat for real; agent-service and scheduler-service are the stand-in.
        let app = Stack::builder(&backend)
            .ingest()
            .chat_replicas(1)
            .configure(move |c| {
                c.agent_url = url.clone();
                c.scheduler_url = url;
            })
            .gateway()
            .start()
            .await;
        let (s, body) = readiness(&app).await;
        assert_eq!(s, 200, "{body}");
        let degraded = body["degraded"].as_array().cloned().unwrap_or_default();
        assert_eq!(degraded.len(), 1, "{body}");
        assert!(degraded[0].as_str().unwrap().starts_with("code sandbox"), "{body}");
        app.stop().await;
        stop.cancel();
        let _ = server.await;
    }

    async fn readiness_is_plain_when_the_agent_has_its_sandbox(backend) {
        let app = Stack::builder(&backend).everything().start().await;
        let (s, body) = readiness(&app).await;
        assert_eq!(s, 200, "{body}");
        if body.get("degraded").is_some() {
            docchat_common::testing::unavailable(&format!(
                "a code sandbox on this host (scripts/sandbox-runtime.sh installs bubblewrap): {body}"
            ));
        }
        assert_eq!(body.get("degraded"), None::<&Value>, "{body}");
        // The answering replica's slots: 16, a quarter of them per user, none in use.
        let slots = &body["sandbox"];
        assert!(matches!(slots["backend"].as_str(), Some("bubblewrap" | "landlock")), "{body}");
        assert_eq!(
            [&slots["slots"], &slots["user_slots"], &slots["in_use"], &slots["waiting"]],
            [16, 4, 0, 0],
            "{body}"
        );
        app.stop().await;
    }
}
