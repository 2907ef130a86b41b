//! Replies across the life of chat-service replicas: a shutdown during a streamed reply
//! stores what was generated.

use std::sync::Arc;
use std::time::Duration;

use docchat_common::Caller;
use docchat_common::config::Service;
use docchat_common::testing::{ScriptedHttp, SeenRequest, Streamed};
use docchat_proto::chat::v1::completion_event::Event;
use docchat_test_stack::{Stack, deltas, rest};
use serde_json::json;

/// Words of every streamed answer.
pub(crate) const WORDS: usize = 400;

/// An upstream that streams [`WORDS`] words, one every `delay`.
pub(crate) async fn slow_upstream(delay: Duration) -> ScriptedHttp {
    ScriptedHttp::start_streaming(Arc::new(move |_: &SeenRequest| {
        let mut parts: Vec<(Duration, Vec<u8>)> = (0..WORDS)
            .map(|i| {
                let chunk = json!({"choices": [{"delta": {"content": format!("w{i} ")}}]});
                (delay, format!("data: {chunk}\n\n").into_bytes())
            })
            .collect();
        let usage =
            json!({"choices": [], "usage": {"prompt_tokens": 10, "completion_tokens": WORDS}});
        parts.push((
            Duration::ZERO,
            format!("data: {usage}\n\ndata: [DONE]\n\n").into_bytes(),
        ));
        Streamed {
            status: 200,
            content_type: "text/event-stream".into(),
            parts,
        }
    }))
    .await
}

fn alice() -> Caller {
    docchat_common::testing::user("alice", false)
}

docchat_common::backend_tests! {
    /// SIGTERM (the shutdown token) while a reply streams: generation stops, the partial
    /// reply is stored with an error saying why before the database closes, and the client
    /// hears how it ended.
    async fn a_shutdown_during_a_streamed_reply_stores_the_partial_reply(backend) {
        let upstream = slow_upstream(Duration::from_millis(25)).await;
        let stack = Stack::builder(&backend)
            .scripted_model(&upstream.base_url)
            .start()
            .await;
        let chat = stack.replica(Service::Chat, |_| {}).await;
        let alice = alice();
        let session = stack.session(&chat, &alice).await;
        let (question, mut events) = stack.ask(&chat, &alice, &session).await;
        let mut received = deltas(&mut events, 5).await;

        let (stopped, (tail, last)) = tokio::join!(chat.stop(), rest(&mut events));
        stopped.unwrap();
        received.push_str(&tail);
        let reply_id = match last {
            Some(Event::Error(e)) => {
                assert!(e.message.contains("interrupted"), "{}", e.message);
                e.message_id.expect("the partial reply was stored")
            }
            other => panic!("the stream ends with an error naming the stored reply, not {other:?}"),
        };
        let words = received.split_whitespace().count();
        assert!(words < WORDS / 2, "shutdown stopped generation early: {words} words");

        // A new replica on the same database reads it back.
        let chat = stack.replica(Service::Chat, |_| {}).await;
        let messages = stack.messages(&chat, &alice, &session).await;
        assert_eq!(messages.len(), 2, "{messages:?}");
        let reply = &messages[1];
        assert_eq!(reply.id, reply_id);
        assert_eq!(reply.reply_to.as_deref(), Some(question.as_str()));
        assert_eq!(reply.content, received, "the stored reply is what was streamed");
        assert!(reply.error.as_deref().unwrap_or_default().contains("interrupted"));
        chat.stop().await.unwrap();
        stack.stop().await;
    }
}
