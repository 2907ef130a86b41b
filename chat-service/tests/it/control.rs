//! Message control across replicas: a reply streams on replica A while the stop, pause,
//! resume and finish calls go to replica B, which does not generate it; they reach A through
//! the `chat.control` broadcast (on RabbitMQ, each replica with its own connection; on the
//! in-process bus, two replicas of one process) and act there.

use std::sync::Arc;
use std::time::Duration;

use docchat_common::Caller;
use docchat_common::testing::{ScriptedHttp, SeenRequest, Streamed};
use docchat_proto::chat::v1 as pb;
use docchat_proto::chat::v1::completion_event::Event;
use docchat_test_stack::{Stack, deltas, rest};
use serde_json::json;
use tonic::Streaming;

/// Words of the streamed answer: `w0 w1 … w7. w8 …`, a sentence every eight words.
const WORDS: usize = 400;

/// Words a control call may take to reach the other replica and act (4 s at 40 ms a word,
/// generous for a loaded machine; unreached, the reply runs to all [`WORDS`]).
const LATE: usize = 100;

/// The upstream: [`WORDS`] words, one every 40 ms (16 s in all).
async fn upstream() -> ScriptedHttp {
    ScriptedHttp::start_streaming(Arc::new(|_: &SeenRequest| {
        let mut parts: Vec<(Duration, Vec<u8>)> = (0..WORDS)
            .map(|i| {
                let end = if i % 8 == 7 { "." } else { "" };
                let chunk = json!({"choices": [{"delta": {"content": format!("w{i}{end} ")}}]});
                (
                    Duration::from_millis(40),
                    format!("data: {chunk}\n\n").into_bytes(),
                )
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

/// Two chat-service replicas on `backend` and the upstream.
async fn two_replicas(backend: &docchat_common::testing::Backend) -> (Stack, ScriptedHttp) {
    let upstream = upstream().await;
    let stack = Stack::builder(backend)
        .chat_replicas(2)
        .scripted_model(&upstream.base_url)
        .start()
        .await;
    (stack, upstream)
}

fn alice() -> Caller {
    docchat_common::testing::user("alice", false)
}

/// The words' numbers, in order: `w3 w4. w5` → 3, 4, 5.
fn numbers(text: &str) -> Vec<usize> {
    text.split_whitespace()
        .map(|w| {
            w.trim_start_matches('w')
                .trim_end_matches('.')
                .parse()
                .unwrap()
        })
        .collect()
}

/// Reads what still arrives after a pause until nothing has come for `quiet`: the text. A
/// stream that keeps sending for 6 s was not paused.
async fn until_quiet(events: &mut Streaming<pb::CompletionEvent>, quiet: Duration) -> String {
    let deadline = tokio::time::Instant::now() + Duration::from_secs(6);
    let mut text = String::new();
    loop {
        match tokio::time::timeout(quiet, events.message()).await {
            Err(_) => return text,
            Ok(next) => match next.unwrap().and_then(|e| e.event) {
                Some(Event::Delta(t)) => text.push_str(&t),
                other => panic!("a paused reply goes quiet; it sent {other:?}"),
            },
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "the reply kept streaming 6 s after the pause sent to the other replica: {text}"
        );
    }
}

docchat_common::backend_tests! {
    /// Pause on B holds A's stream (nothing arrives for over a second), resume on B lets it
    /// go on where it stopped, finish on B ends it at the end of a sentence: a partial reply,
    /// stored as streamed.
    async fn pause_resume_and_finish_on_another_replica_act_where_the_reply_streams(backend) {
        let (stack, _upstream) = two_replicas(&backend).await;
        let (a, b) = (&stack.chats[0], &stack.chats[1]);
        let alice = alice();
        let session = stack.session(b, &alice).await;
        let (question, mut events) = stack.ask(a, &alice, &session).await;
        let mut received = deltas(&mut events, 3).await;

        stack.control(b, &alice, &question, "pause").await.unwrap();
        received.push_str(&until_quiet(&mut events, Duration::from_millis(1500)).await);
        let paused_at = received.split_whitespace().count();
        assert!(paused_at < 3 + LATE, "{}: the pause took effect late: {received}", backend.name);

        stack.control(b, &alice, &question, "resume").await.unwrap();
        received.push_str(&deltas(&mut events, 3).await);
        // What the upstream sent during the pause waited in the connection and comes in
        // one piece (deltas go out as they are stored): contiguous, from where it stopped.
        let words = numbers(&received);
        assert!(words.len() >= paused_at + 3, "{}: {received}", backend.name);
        assert_eq!(
            words,
            (0..words.len()).collect::<Vec<_>>(),
            "{}: resumed where it stopped, nothing lost",
            backend.name
        );

        stack.control(b, &alice, &question, "finish").await.unwrap();
        let (tail, last) = rest(&mut events).await;
        received.push_str(&tail);
        let reply_id = match last {
            Some(Event::Done(done)) => {
                assert_eq!(done.body, received, "the final body is what was streamed");
                done.message_id
            }
            other => panic!("{}: a finished reply ends done, not {other:?}", backend.name),
        };
        let words = received.split_whitespace().count();
        assert!(
            words < WORDS * 3 / 4,
            "{}: finish ended the reply early ({words} of {WORDS} words)",
            backend.name
        );
        assert!(received.trim_end().ends_with('.'), "at a sentence's end: {received}");

        // Stored as streamed, read back through the other replica.
        let messages = stack.messages(b, &alice, &session).await;
        assert_eq!(messages.len(), 2, "{messages:?}");
        let reply = &messages[1];
        assert_eq!(reply.id, reply_id);
        assert_eq!(reply.reply_to.as_deref(), Some(question.as_str()));
        assert_eq!(reply.content, received);
        assert_eq!(reply.error, None);
        stack.stop().await;
    }
}

docchat_common::backend_tests! {
    /// Stop on B ends A's stream where it was: the upstream call is cut, the partial reply
    /// is stored as streamed.
    async fn a_stop_on_another_replica_ends_the_reply_where_it_streams(backend) {
        let (stack, upstream) = two_replicas(&backend).await;
        let (a, b) = (&stack.chats[0], &stack.chats[1]);
        let alice = alice();
        let session = stack.session(a, &alice).await;
        let (question, mut events) = stack.ask(a, &alice, &session).await;
        let mut received = deltas(&mut events, 3).await;

        stack.control(b, &alice, &question, "stop").await.unwrap();
        let (tail, last) = rest(&mut events).await;
        received.push_str(&tail);
        let reply_id = match last {
            Some(Event::Done(done)) => done.message_id,
            other => panic!("{}: a stopped reply ends done, not {other:?}", backend.name),
        };
        let words = received.split_whitespace().count();
        assert!(
            words < 3 + LATE,
            "{}: stop on the other replica ended the reply at once ({words} of {WORDS} words)",
            backend.name
        );
        // The model call was cut, not read to its end.
        let deadline = tokio::time::Instant::now() + Duration::from_secs(5);
        while upstream.aborted() == 0 {
            assert!(tokio::time::Instant::now() < deadline, "the upstream call was not cut");
            tokio::time::sleep(Duration::from_millis(50)).await;
        }

        let messages = stack.messages(b, &alice, &session).await;
        assert_eq!(messages.len(), 2, "{messages:?}");
        assert_eq!(messages[1].id, reply_id);
        assert_eq!(messages[1].content, received, "the stored reply is what was streamed");
        stack.stop().await;
    }
}

docchat_common::backend_tests! {
    /// A reply paused past `chat_max_pause_seconds` is stopped: it ends with an error saying
    /// why, keeps what was streamed, and its upstream call is cut.
    async fn a_reply_paused_too_long_is_stopped_with_an_error(backend) {
        let upstream = upstream().await;
        let stack = Stack::builder(&backend)
            .scripted_model(&upstream.base_url)
            .chat_replicas(1)
            .configure(|c| c.chat_max_pause_seconds = 1)
            .start()
            .await;
        let a = &stack.chats[0];
        let alice = alice();
        let session = stack.session(a, &alice).await;
        let (question, mut events) = stack.ask(a, &alice, &session).await;
        let mut received = deltas(&mut events, 3).await;
        stack.control(a, &alice, &question, "pause").await.unwrap();
        let (tail, last) = rest(&mut events).await;
        received.push_str(&tail);
        match last {
            Some(Event::Error(e)) => assert!(
                e.message.contains("chat_max_pause_seconds"),
                "{}: {}",
                backend.name,
                e.message
            ),
            other => panic!("{}: a reply paused too long ends with an error, not {other:?}", backend.name),
        }
        let words = received.split_whitespace().count();
        assert!(words < 3 + LATE, "{}: {words} words: the pause did not hold", backend.name);
        let deadline = tokio::time::Instant::now() + Duration::from_secs(5);
        while upstream.aborted() == 0 {
            assert!(tokio::time::Instant::now() < deadline, "the upstream call was not cut");
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
        let messages = stack.messages(a, &alice, &session).await;
        assert_eq!(messages.len(), 2, "{messages:?}");
        assert_eq!(messages[1].content, received, "the stored reply is what was streamed");
        assert!(messages[1].error.is_some(), "{messages:?}");
        stack.stop().await;
    }
}
