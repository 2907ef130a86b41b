//! Replies across the life of chat-service replicas: a shutdown during a streamed reply
//! stores what was generated.

use std::sync::Arc;
use std::time::Duration;

use docchat_common::auth::authorized;
use docchat_common::config::Service;
use docchat_common::grpc::ServiceContext;
use docchat_common::testing::{
    Backend, ScriptedHttp, SeenRequest, Spawned, Streamed, bind, context,
};
use docchat_common::{Caller, Config};
use docchat_proto::chat::v1 as pb;
use docchat_proto::chat::v1::chat_service_client::ChatServiceClient;
use docchat_proto::chat::v1::completion_event::Event;
use serde_json::json;
use tonic::Streaming;
use tonic::transport::Channel;

/// Words of every streamed answer.
const WORDS: usize = 400;

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

/// admin-service on one backend, and what chat-service replicas need beside it: their
/// context, with a models file naming `upstream`.
pub(crate) struct Stack {
    pub ctx: ServiceContext,
    pub admin: Spawned,
    _dir: tempfile::TempDir,
}

impl Stack {
    pub(crate) async fn start(
        backend: &Backend,
        upstream: &str,
        tweak: impl FnOnce(&mut Config),
    ) -> Stack {
        let dir = tempfile::tempdir().unwrap();
        let mut config = backend.config(dir.path());
        let (admin_listener, admin_url) = bind().await;
        config.admin_url = admin_url.clone();
        let models = dir.path().join("models.toml");
        std::fs::write(
            &models,
            format!(
                "[[models]]\nname = \"scripted\"\nprovider = \"openai\"\nbase_url = \"{upstream}/v1\"\ncontext_length = 8192\ndefault = true\n"
            ),
        )
        .unwrap();
        config.models_file = Some(models);
        tweak(&mut config);
        let ctx = context(config);
        let admin = Spawned::start(
            ctx.clone(),
            admin_listener,
            admin_url,
            docchat_admin_service::serve,
        )
        .await
        .unwrap();
        Stack {
            ctx,
            admin,
            _dir: dir,
        }
    }

    /// A chat-service replica on the stack's database and bus.
    pub(crate) async fn replica(&self) -> Spawned {
        let (listener, url) = bind().await;
        Spawned::start(self.ctx.clone(), listener, url, docchat_chat_service::serve)
            .await
            .unwrap()
    }

    pub(crate) fn req<T>(&self, who: &Caller, msg: T) -> tonic::Request<T> {
        authorized(&self.ctx.keys, who, Service::Chat, msg).unwrap()
    }

    pub(crate) async fn session(&self, chat: &Spawned, who: &Caller) -> String {
        ChatServiceClient::new(chat.channel())
            .create_session(self.req(who, pb::CreateSessionRequest::default()))
            .await
            .unwrap()
            .into_inner()
            .id
    }

    /// Starts a completion on `chat`: its events, with the question id read.
    pub(crate) async fn ask(
        &self,
        chat: &Spawned,
        who: &Caller,
        session: &str,
    ) -> (String, Streaming<pb::CompletionEvent>) {
        let mut events = client(chat)
            .complete(self.req(
                who,
                pb::CompletionRequest {
                    session_id: session.to_owned(),
                    message: "Tell me everything".into(),
                    ..Default::default()
                },
            ))
            .await
            .unwrap()
            .into_inner();
        let question = match events.message().await.unwrap().and_then(|e| e.event) {
            Some(Event::QuestionId(id)) => id,
            other => panic!("the question id comes first, not {other:?}"),
        };
        (question, events)
    }

    pub(crate) async fn messages(
        &self,
        chat: &Spawned,
        who: &Caller,
        session: &str,
    ) -> Vec<pb::Message> {
        client(chat)
            .list_messages(self.req(
                who,
                pb::ListMessagesRequest {
                    session_id: session.to_owned(),
                    offset: 0,
                    limit: 0,
                },
            ))
            .await
            .unwrap()
            .into_inner()
            .messages
    }
}

pub(crate) fn client(chat: &Spawned) -> ChatServiceClient<Channel> {
    ChatServiceClient::new(chat.channel())
}

/// The text of the next `n` deltas.
pub(crate) async fn deltas(events: &mut Streaming<pb::CompletionEvent>, n: usize) -> String {
    let mut text = String::new();
    for _ in 0..n {
        match tokio::time::timeout(Duration::from_secs(10), events.message())
            .await
            .expect("a delta within 10 s")
            .unwrap()
            .and_then(|e| e.event)
        {
            Some(Event::Delta(t)) => text.push_str(&t),
            other => panic!("a delta, not {other:?}"),
        }
    }
    text
}

/// Reads to the end: the deltas' text and the last event.
pub(crate) async fn rest(events: &mut Streaming<pb::CompletionEvent>) -> (String, Option<Event>) {
    let mut text = String::new();
    loop {
        let next = tokio::time::timeout(Duration::from_secs(30), events.message())
            .await
            .expect("the stream ends within 30 s");
        match next.ok().flatten().and_then(|e| e.event) {
            Some(Event::Delta(t)) => text.push_str(&t),
            last => return (text, last),
        }
    }
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
        let stack = Stack::start(&backend, &upstream.base_url, |_| {}).await;
        let chat = stack.replica().await;
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
        let chat = stack.replica().await;
        let messages = stack.messages(&chat, &alice, &session).await;
        assert_eq!(messages.len(), 2, "{messages:?}");
        let reply = &messages[1];
        assert_eq!(reply.id, reply_id);
        assert_eq!(reply.reply_to.as_deref(), Some(question.as_str()));
        assert_eq!(reply.content, received, "the stored reply is what was streamed");
        assert!(reply.error.as_deref().unwrap_or_default().contains("interrupted"));
        chat.stop().await.unwrap();
        stack.admin.stop().await.unwrap();
    }
}
