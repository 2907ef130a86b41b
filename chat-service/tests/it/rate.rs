//! chat_rate_limit_per_minute is one limit per user across every chat-service replica.

use std::time::Duration;

use docchat_common::config::Service;
use docchat_proto::chat::v1 as pb;
use docchat_proto::chat::v1::completion_event::Event;
use docchat_test_stack::{Stack, rest};
use tonic::Code;

use crate::lifecycle::slow_upstream;

docchat_common::backend_tests! {
    /// Two replicas on one database: with a limit of 3, three requests pass across both and
    /// the fourth is refused (429) on either — per-replica counting let 3 through on each.
    async fn the_chat_rate_limit_holds_across_replicas(backend) {
        let upstream = slow_upstream(Duration::ZERO).await;
        let stack = Stack::builder(&backend)
            .chat_replicas(2)
            .scripted_model(&upstream.base_url)
            .configure(|c| {
                c.chat_fairness_enabled = true;
                c.chat_rate_limit_per_minute = 3;
            })
            .start()
            .await;
        let (a, b) = (&stack.chats[0], &stack.chats[1]);
        let alice = docchat_common::testing::user("alice", false);
        let session = stack.session(a, &alice).await;
        for chat in [a, b, a] {
            let (_, mut events) = stack.ask(chat, &alice, &session).await;
            let (_, last) = rest(&mut events).await;
            assert!(matches!(last, Some(Event::Done(_))), "{}: {last:?}", backend.name);
        }
        for chat in [b, a] {
            let refused = stack
                .chat_client(chat)
                .complete(stack.req(
                    Service::Chat,
                    &alice,
                    pb::CompletionRequest {
                        session_id: session.clone(),
                        message: "one too many".into(),
                        ..Default::default()
                    },
                ))
                .await
                .expect_err("the fourth request within the minute is refused");
            assert_eq!(refused.code(), Code::ResourceExhausted, "{refused:?}");
            assert!(
                refused.message().contains("3 requests per minute")
                    && refused.message().contains("retry in"),
                "{}",
                refused.message()
            );
        }
        // Another user is not affected.
        let bob = docchat_common::testing::user("bob", false);
        let bobs = stack.session(b, &bob).await;
        let (_, mut events) = stack.ask(b, &bob, &bobs).await;
        assert!(matches!(rest(&mut events).await.1, Some(Event::Done(_))));
        stack.stop().await;
    }
}
