//! Coming back to a reply: a client reads part of a stream through one replica, goes away,
//! and re-attaches through another (and through the same one) with the last seq it has —
//! it gets exactly the remaining lines, numbered on, then the final line; once the reply is
//! stored the whole of it replays from the stored text. Closing a stream stops nothing;
//! another user's question is a 404.

use std::time::Duration;

use docchat_common::testing::user;
use docchat_test_stack::{Line, Stack, lines, lines_to_end};
use tonic::Code;

use crate::lifecycle::{WORDS, slow_upstream};

/// The text of `lines`' deltas (the question line and the final one left out).
fn text(lines: &[Line]) -> String {
    lines
        .iter()
        .filter(|(_, t)| {
            !t.starts_with("question ") && !t.starts_with("done ") && !t.starts_with("error ")
        })
        .map(|(_, t)| t.as_str())
        .collect()
}

docchat_common::backend_tests! {
    async fn a_dropped_stream_is_picked_up_on_any_replica_without_a_line_lost_or_repeated(backend) {
        let upstream = slow_upstream(Duration::from_millis(5)).await;
        let stack = Stack::builder(&backend)
            .scripted_model(&upstream.base_url)
            .chat_replicas(2)
            .start()
            .await;
        let (first, second) = (&stack.chats[0], &stack.chats[1]);
        let alice = user("alice", false);
        let session = stack.session(first, &alice).await;
        let (question, mut events) = stack.ask(first, &alice, &session).await;
        let mut seen = vec![(1, format!("question {question}"))];
        seen.extend(lines(&mut events, 5).await);
        assert_eq!(
            seen.iter().map(|(seq, _)| *seq).collect::<Vec<_>>(),
            [1, 2, 3, 4, 5, 6],
            "{}: lines are numbered from 1",
            backend.name
        );
        // The client goes away: nothing stops.
        drop(events);

        // Another user's question is not there for bob, on either replica.
        for replica in [first, second] {
            let denied = stack.attach(replica, &user("bob", false), &question, 0).await;
            assert_eq!(denied.unwrap_err().code(), Code::NotFound, "{}", backend.name);
        }
        // Back through the other replica (it reads the progress row) and through the
        // generating one (woken by its own writes), each after what it has.
        let mut elsewhere = stack.attach(second, &alice, &question, 6).await.unwrap();
        let mut here = stack.attach(first, &alice, &question, 3).await.unwrap();
        let (rest_elsewhere, rest_here) = tokio::join!(
            lines_to_end(&mut elsewhere, Duration::from_secs(30)),
            lines_to_end(&mut here, Duration::from_secs(30)),
        );
        let mut whole = seen.clone();
        whole.extend(rest_elsewhere.iter().cloned());
        let seqs: Vec<u64> = whole.iter().map(|(seq, _)| *seq).collect();
        assert_eq!(
            seqs,
            (1..=whole.len() as u64).collect::<Vec<_>>(),
            "{}: no seq missing or repeated",
            backend.name
        );
        assert_eq!(&whole[3..], &rest_here[..], "{}: both replicas answer the same lines", backend.name);
        let last = &whole.last().unwrap().1;
        let reply_id = last.strip_prefix("done ").unwrap_or_else(|| panic!("{}: ends done, not {last}", backend.name));

        // Byte for byte the stored reply, which closing the stream did not stop.
        let messages = stack.messages(second, &alice, &session).await;
        let reply = messages.iter().find(|m| m.id == reply_id).expect("the reply is stored");
        assert_eq!(reply.error, None, "{}", backend.name);
        assert_eq!(text(&whole), reply.content, "{}", backend.name);
        assert_eq!(reply.content.split_whitespace().count(), WORDS, "{}: generated to the end", backend.name);

        // Once stored, the whole reply replays from its stored text, with the same lines.
        for replica in [first, second] {
            let mut again = stack.attach(replica, &alice, &question, 0).await.unwrap();
            let replayed = lines_to_end(&mut again, Duration::from_secs(10)).await;
            assert_eq!(replayed, whole, "{}: the replay is the stream", backend.name);
        }
        let mut tail = stack.attach(second, &alice, &question, whole.len() as u64 - 2).await.unwrap();
        assert_eq!(lines_to_end(&mut tail, Duration::from_secs(10)).await, whole[whole.len() - 2..], "{}", backend.name);
        stack.stop().await;
    }
}
