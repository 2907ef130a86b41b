//! Background responses of the compatible API: started on one replica, followed from any
//! (from the start, then again after the last line a client has), read back and cancelled
//! from another; owner only; gone after their retention.

use std::time::Duration;

use docchat_common::Caller;
use docchat_common::config::Service;
use docchat_common::testing::{Spawned, user};
use docchat_proto::chat::v1 as pb;
use docchat_proto::chat::v1::background_event::Event;
use docchat_test_stack::Stack;
use tonic::Code;

use crate::lifecycle::{WORDS, slow_upstream};

fn request() -> pb::BackgroundRequest {
    pb::BackgroundRequest {
        request: Some(pb::CompatRequest {
            model: "scripted".into(),
            messages: vec![pb::CompatMessage {
                role: "user".into(),
                text: "Tell me everything".into(),
                image_urls: Vec::new(),
            }],
            temperature: None,
            max_tokens: None,
            purpose: "compat.responses".into(),
        }),
        head: "{\"opaque\":true}".into(),
    }
}

async fn get(
    stack: &Stack,
    on: &Spawned,
    who: &Caller,
    id: &str,
) -> Result<pb::BackgroundResponse, tonic::Status> {
    stack
        .chat_client(on)
        .background_get(stack.req(Service::Chat, who, pb::BackgroundRef { id: id.into() }))
        .await
        .map(tonic::Response::into_inner)
}

/// Follows `id` on `on` after line `after`: up to `n` lines (all when None), and how it
/// ended when it did.
async fn follow(
    stack: &Stack,
    on: &Spawned,
    who: &Caller,
    id: &str,
    after: u64,
    n: Option<usize>,
) -> (Vec<(u64, String)>, Option<pb::BackgroundResponse>) {
    let mut events = stack
        .chat_client(on)
        .background_follow(stack.req(
            Service::Chat,
            who,
            pb::BackgroundFollowRequest {
                id: id.into(),
                after,
            },
        ))
        .await
        .unwrap()
        .into_inner();
    let mut lines = Vec::new();
    loop {
        if n.is_some_and(|n| lines.len() >= n) {
            return (lines, None);
        }
        let e = tokio::time::timeout(Duration::from_secs(30), events.message())
            .await
            .expect("an event within 30 s")
            .unwrap()
            .expect("the stream ends with `ended`");
        match e.event {
            Some(Event::Delta(text)) => lines.push((e.line, text)),
            Some(Event::Ended(ended)) => return (lines, Some(ended)),
            None => panic!("an empty event"),
        }
    }
}

docchat_common::backend_tests! {
    async fn background_responses_are_followed_from_any_replica_and_cancelled(backend) {
        let upstream = slow_upstream(Duration::from_millis(5)).await;
        let stack = Stack::builder(&backend)
            .scripted_model(&upstream.base_url)
            .chat_replicas(2)
            .configure(|c| {
                c.chat_stream_retention_seconds = 2;
                c.chat_completion_lease_seconds = 2;
            })
            .start()
            .await;
        let (first, second) = (&stack.chats[0], &stack.chats[1]);
        let alice = user("alice", false);
        let started = stack
            .chat_client(first)
            .background_start(stack.req(Service::Chat, &alice, request()))
            .await
            .unwrap()
            .into_inner();
        assert!(started.id.starts_with("resp_"), "{started:?}");
        assert!(matches!(started.status.as_str(), "queued" | "in_progress"), "{}: {started:?}", backend.name);
        assert_eq!((started.model.as_str(), started.head.as_str()), ("scripted", "{\"opaque\":true}"));
        let id = started.id;

        // Bob sees nothing of it, on any call.
        let bob = user("bob", false);
        assert_eq!(get(&stack, second, &bob, &id).await.unwrap_err().code(), Code::NotFound);
        let cancel = stack
            .chat_client(second)
            .background_cancel(stack.req(Service::Chat, &bob, pb::BackgroundRef { id: id.clone() }))
            .await;
        assert_eq!(cancel.unwrap_err().code(), Code::NotFound);

        // A few lines through the other replica; then the rest after them.
        let (head, _) = follow(&stack, second, &alice, &id, 0, Some(3)).await;
        assert_eq!(head.iter().map(|(n, _)| *n).collect::<Vec<_>>(), [1, 2, 3], "{}", backend.name);
        let (rest, ended) = follow(&stack, second, &alice, &id, 3, None).await;
        let ended = ended.unwrap();
        let numbers: Vec<u64> = head.iter().chain(&rest).map(|(n, _)| *n).collect();
        assert_eq!(numbers, (1..=ended.lines).collect::<Vec<_>>(), "{}: no line missing or repeated", backend.name);
        let text: String = head.iter().chain(&rest).map(|(_, t)| t.as_str()).collect();
        assert_eq!(ended.status, "completed", "{}: {ended:?}", backend.name);
        assert_eq!(text, ended.text, "{}", backend.name);
        assert_eq!(text.split_whitespace().count(), WORDS);
        let usage = ended.usage.clone().unwrap();
        assert_eq!((usage.prompt_tokens, usage.completion_tokens), (10, WORDS as u64));
        // Read back on the generating replica as it ended; a cancel now changes nothing.
        let read = get(&stack, first, &alice, &id).await.unwrap();
        assert_eq!((read.status.as_str(), read.text.as_str(), read.lines), ("completed", text.as_str(), ended.lines));
        let cancelled = stack
            .chat_client(second)
            .background_cancel(stack.req(Service::Chat, &alice, pb::BackgroundRef { id: id.clone() }))
            .await
            .unwrap()
            .into_inner();
        assert_eq!(cancelled.status, "completed");

        // Another one, cancelled through the replica that does not generate it: it stops
        // with its text so far, and its followers hear so.
        let other = stack
            .chat_client(first)
            .background_start(stack.req(Service::Chat, &alice, request()))
            .await
            .unwrap()
            .into_inner()
            .id;
        let (_, none) = follow(&stack, first, &alice, &other, 0, Some(2)).await;
        assert!(none.is_none());
        let cancelled = stack
            .chat_client(second)
            .background_cancel(stack.req(Service::Chat, &alice, pb::BackgroundRef { id: other.clone() }))
            .await
            .unwrap()
            .into_inner();
        assert_eq!(cancelled.status, "cancelled", "{}: {cancelled:?}", backend.name);
        let (lines, ended) = follow(&stack, second, &alice, &other, 0, None).await;
        let ended = ended.unwrap();
        assert_eq!(ended.status, "cancelled", "{}", backend.name);
        assert!(
            ended.text.split_whitespace().count() < WORDS,
            "{}: stopped before the end ({} words)",
            backend.name,
            ended.text.split_whitespace().count()
        );
        assert_eq!(lines.iter().map(|(_, t)| t.as_str()).collect::<String>(), ended.text);

        // Gone once the retention (2 s) has passed.
        let deadline = tokio::time::Instant::now() + Duration::from_secs(20);
        while get(&stack, second, &alice, &id).await.is_ok() {
            assert!(tokio::time::Instant::now() < deadline, "{}: never expired", backend.name);
            tokio::time::sleep(Duration::from_millis(200)).await;
        }
        stack.stop().await;
    }
}
