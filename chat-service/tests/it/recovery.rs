//! A replica killed while it streams a reply (kill -9: nothing of it runs after): another
//! replica stores the reply as interrupted, with at least what its client had seen, in its
//! place after its question, with its usage booked, once the dead one's lease runs out;
//! control calls on the question then answer 204 and change nothing.

use std::time::Duration;

use docchat_common::config::Service;
use docchat_common::testing::context;
use docchat_proto::admin::v1::LlmSpendRequest;
use docchat_proto::admin::v1::admin_service_client::AdminServiceClient;
use docchat_proto::chat::v1 as pb;
use docchat_test_stack::{Stack, deltas, lines_to_end, rest};
use sea_orm::{ConnectionTrait, DbBackend, Statement};
use tokio_util::sync::CancellationToken;

use crate::lifecycle::{WORDS, slow_upstream};

/// A chat-service replica on a runtime of its own, with its own bus connection: `kill`
/// drops the runtime, so no shutdown path of it runs — as after kill -9.
struct Doomed {
    runtime: Option<tokio::runtime::Runtime>,
    url: String,
}

impl Drop for Doomed {
    fn drop(&mut self) {
        if let Some(runtime) = self.runtime.take() {
            runtime.shutdown_background();
        }
    }
}

impl Doomed {
    async fn start(stack: &Stack) -> Doomed {
        let runtime = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(2)
            .enable_all()
            .build()
            .unwrap();
        let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        listener.set_nonblocking(true).unwrap();
        let url = format!("http://{}", listener.local_addr().unwrap());
        let config = stack.config.clone();
        runtime.spawn(async move {
            let listener = tokio::net::TcpListener::from_std(listener).unwrap();
            docchat_chat_service::serve(context(config), listener, CancellationToken::new()).await
        });
        let deadline = tokio::time::Instant::now() + Duration::from_secs(60);
        while !docchat_common::grpc::check_health(docchat_common::grpc::channel(&url).unwrap())
            .await
        {
            assert!(
                tokio::time::Instant::now() < deadline,
                "the replica did not start"
            );
            tokio::time::sleep(Duration::from_millis(25)).await;
        }
        Doomed {
            runtime: Some(runtime),
            url,
        }
    }

    fn kill(self) {
        drop(self);
    }
}

/// Rows of `sql` (one text column `v`) in the chat database.
async fn texts(stack: &Stack, sql: &str, question: &str) -> Vec<Option<String>> {
    let db = stack.database(Service::Chat).await;
    let backend = db.get_database_backend();
    let sql = match backend {
        DbBackend::Postgres => sql.replace('?', "$1"),
        _ => sql.to_owned(),
    };
    let rows = db
        .query_all(Statement::from_sql_and_values(
            backend,
            sql,
            [question.into()],
        ))
        .await
        .unwrap();
    let values = rows
        .iter()
        .map(|r| r.try_get::<Option<String>>("", "v").unwrap())
        .collect();
    db.close().await.unwrap();
    values
}

fn script() -> String {
    (0..WORDS).map(|i| format!("w{i} ")).collect()
}

docchat_common::backend_tests! {
    async fn a_killed_replicas_reply_is_recovered_as_interrupted(backend) {
        let upstream = slow_upstream(Duration::from_millis(25)).await;
        let stack = Stack::builder(&backend)
            .scripted_model(&upstream.base_url)
            .chat_replicas(1)
            .configure(|c| c.chat_completion_lease_seconds = 2)
            .start()
            .await;
        let doomed = Doomed::start(&stack).await;
        let alice = docchat_common::testing::user("alice", false);
        let mut chat = client_at(&doomed.url);
        let session = chat
            .create_session(stack.req(Service::Chat, &alice, pb::CreateSessionRequest::default()))
            .await
            .unwrap()
            .into_inner()
            .id;
        let mut events = chat
            .complete(stack.req(
                Service::Chat,
                &alice,
                pb::CompletionRequest {
                    session_id: session.clone(),
                    message: "Tell me everything".into(),
                    ..Default::default()
                },
            ))
            .await
            .unwrap()
            .into_inner();
        let question = match events.message().await.unwrap().and_then(|e| e.event) {
            Some(pb::completion_event::Event::QuestionId(id)) => id,
            other => panic!("the question id comes first, not {other:?}"),
        };
        // About two seconds of streaming: the progress was written at least once.
        let received = deltas(&mut events, 80).await;
        assert!(script().starts_with(&received));
        // A client re-attaches through a live replica, after the 80 lines it has (seq 81).
        let live = &stack.chats[0];
        let mut attached = stack.attach(live, &alice, &question, 81).await.unwrap();
        doomed.kill();
        drop(events);

        // Nothing stored the reply on the way down; the row holds the text so far.
        tokio::time::sleep(Duration::from_millis(300)).await;
        let replies = texts(&stack, "SELECT content AS v FROM messages WHERE reply_to = ?", &question).await;
        assert!(replies.is_empty(), "{}: no shutdown path ran: {replies:?}", backend.name);
        let progress = texts(&stack, "SELECT progress AS v FROM active_completions WHERE question_id = ?", &question).await;
        let progress = progress.first().cloned().flatten().unwrap_or_default();
        assert!(!progress.is_empty() && script().starts_with(&progress), "{progress:?}");
        assert!(
            progress.starts_with(&received),
            "{}: the row holds what the client saw: {progress:?} against {received:?}",
            backend.name
        );

        // Meanwhile the conversation goes on (on another replica): the recovered reply
        // still takes its place right after its question.
        let (later, mut later_events) = stack.ask(live, &alice, &session).await;
        deltas(&mut later_events, 2).await;
        stack.control(live, &alice, &later, "stop").await.unwrap();
        rest(&mut later_events).await;

        // Another replica on the same database recovers it once the lease runs out.
        let survivor = stack.replica(Service::Chat, |_| {}).await;
        let deadline = tokio::time::Instant::now() + Duration::from_secs(20);
        let reply = loop {
            let messages = stack.messages(&survivor, &alice, &session).await;
            if let Some(reply) = messages.iter().find(|m| m.reply_to.as_deref() == Some(question.as_str())) {
                break reply.clone();
            }
            assert!(tokio::time::Instant::now() < deadline, "{}: the reply was never recovered", backend.name);
            tokio::time::sleep(Duration::from_millis(100)).await;
        };
        assert!(reply.error.as_deref().unwrap_or_default().contains("interrupted"), "{reply:?}");
        let words = reply.content.split_whitespace().count();
        assert!(
            reply.content.starts_with("w0 w1 ") && script().starts_with(&reply.content) && words < WORDS,
            "{}: the generated prefix is kept: {:?}",
            backend.name,
            reply.content
        );
        assert!(
            reply.content.starts_with(&received),
            "{}: the stored reply holds at least what the client saw ({words} words stored, {} seen)",
            backend.name,
            received.split_whitespace().count()
        );
        // The re-attached stream ended with the interrupted error and the text recovered:
        // with what the client had, the stored reply.
        let tail = lines_to_end(&mut attached, Duration::from_secs(30)).await;
        let (last_seq, last) = tail.last().cloned().unwrap();
        assert!(last.starts_with("error ") && last.contains("interrupted"), "{}: {last}", backend.name);
        let attached_text: String = tail[..tail.len() - 1].iter().map(|(_, t)| t.as_str()).collect();
        assert_eq!(format!("{received}{attached_text}"), reply.content, "{}: nothing lost or repeated", backend.name);
        assert_eq!(
            tail.iter().map(|(seq, _)| *seq).collect::<Vec<_>>(),
            (82..=last_seq).collect::<Vec<_>>(),
            "{}",
            backend.name
        );
        let listed = stack.messages(&survivor, &alice, &session).await;
        assert_eq!(listed.len(), 4, "recovered once: {listed:?}");
        assert_eq!(
            listed.iter().map(|m| (m.id.clone(), m.reply_to.clone())).collect::<Vec<_>>(),
            [
                (question.clone(), None),
                (reply.id.clone(), Some(question.clone())),
                (later.clone(), None),
                (listed[3].id.clone(), Some(later.clone())),
            ],
            "{}: the recovered reply is listed after its question",
            backend.name
        );

        // Its usage is booked with it: the answer's prompt, and its completion counted from
        // the recovered text (4 bytes a token); the ledger gets it once, beside the later
        // reply's.
        let stats = usage_stats(&stack, &survivor, &alice, &reply.id).await;
        assert_eq!(stats["llm"], "scripted", "{}: {stats}", backend.name);
        assert_eq!(
            stats["output_tokens"].as_u64(),
            Some((reply.content.len() as u64).div_ceil(4)),
            "{}: {stats}",
            backend.name
        );
        assert!(stats["input_tokens"].as_u64() > Some(0), "{}: {stats}", backend.name);
        let later_reply = &listed[3].id;
        let expected = stats["cost"].as_f64().unwrap()
            + usage_stats(&stack, &survivor, &alice, later_reply).await["cost"].as_f64().unwrap();
        assert!(expected > 0.0, "{}", backend.name);
        let deadline = tokio::time::Instant::now() + Duration::from_secs(20);
        while spend(&stack, &alice).await < expected - 1e-12 {
            assert!(tokio::time::Instant::now() < deadline, "{}: the recovered reply's usage was never booked", backend.name);
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
        tokio::time::sleep(Duration::from_millis(500)).await;
        let spent = spend(&stack, &alice).await;
        assert!((spent - expected).abs() < 1e-12, "{}: booked {spent}, not {expected}", backend.name);

        // The question is not being generated any more: control calls are no-ops that
        // succeed (204 through REST) and leave the recovered reply as it is.
        for action in ["stop", "pause", "resume", "finish"] {
            stack
                .control(&survivor, &alice, &question, action)
                .await
                .unwrap_or_else(|e| panic!("{action} on an interrupted reply: {e:?}"));
        }
        let after = stack.messages(&survivor, &alice, &session).await;
        assert_eq!(after.len(), 4, "control stored nothing more");
        let kept = after.iter().find(|m| m.reply_to.as_deref() == Some(question.as_str()));
        assert_eq!(kept.map(|m| &m.content), Some(&reply.content), "control changed the reply");
        survivor.stop().await.unwrap();
        stack.stop().await;
    }
}

/// A message's usage_stats, as its owner reads it.
async fn usage_stats(
    stack: &Stack,
    replica: &docchat_common::testing::Spawned,
    who: &docchat_common::Caller,
    message_id: &str,
) -> serde_json::Value {
    let entries = stack
        .chat_client(replica)
        .get_message_meta(stack.req(
            Service::Chat,
            who,
            pb::MessageMetaRequest {
                message_id: message_id.into(),
                info_type: "usage_stats".into(),
            },
        ))
        .await
        .unwrap()
        .into_inner()
        .entries;
    let content = entries
        .first()
        .map(|e| e.content.as_str())
        .unwrap_or_else(|| panic!("no usage_stats on {message_id}"));
    serde_json::from_str(content).unwrap()
}

/// What `who`'s model calls cost, as the ledger has booked them.
async fn spend(stack: &Stack, who: &docchat_common::Caller) -> f64 {
    AdminServiceClient::new(stack.admin().channel())
        .get_llm_spend(stack.req(Service::Admin, who, LlmSpendRequest::default()))
        .await
        .unwrap()
        .into_inner()
        .cost_total
}

fn client_at(url: &str) -> pb::chat_service_client::ChatServiceClient<tonic::transport::Channel> {
    pb::chat_service_client::ChatServiceClient::new(docchat_common::grpc::channel(url).unwrap())
}
