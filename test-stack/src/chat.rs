//! chat-service calls a test makes through the stack, on a replica it names: sessions,
//! streamed completions, their control, the stored messages.

use std::time::Duration;

use docchat_common::Caller;
use docchat_common::config::Service;
use docchat_common::testing::Spawned;
use docchat_proto::chat::v1 as pb;
use docchat_proto::chat::v1::chat_service_client::ChatServiceClient;
use docchat_proto::chat::v1::completion_event::Event;
use tonic::Streaming;
use tonic::transport::Channel;

use crate::Stack;

impl Stack {
    /// The first chat-service replica.
    pub fn chat(&self) -> &Spawned {
        self.chats.first().expect("the stack runs chat-service")
    }

    /// A client of one chat-service replica.
    pub fn chat_client(&self, replica: &Spawned) -> ChatServiceClient<Channel> {
        ChatServiceClient::new(replica.channel())
    }

    /// Creates a session without a collection on `replica`; its id.
    pub async fn session(&self, replica: &Spawned, who: &Caller) -> String {
        self.chat_client(replica)
            .create_session(self.req(Service::Chat, who, pb::CreateSessionRequest::default()))
            .await
            .unwrap()
            .into_inner()
            .id
    }

    /// Starts a completion on `replica`: the question's id (the first event) and the rest of
    /// the events.
    pub async fn ask(
        &self,
        replica: &Spawned,
        who: &Caller,
        session: &str,
    ) -> (String, Streaming<pb::CompletionEvent>) {
        let mut events = self
            .chat_client(replica)
            .complete(self.req(
                Service::Chat,
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

    /// A control call (pause, resume, stop, finish) on `replica`.
    pub async fn control(
        &self,
        replica: &Spawned,
        who: &Caller,
        question: &str,
        action: &str,
    ) -> Result<(), tonic::Status> {
        self.chat_client(replica)
            .control_message(self.req(
                Service::Chat,
                who,
                pb::ControlRequest {
                    question_id: question.to_owned(),
                    action: action.to_owned(),
                },
            ))
            .await
            .map(|_| ())
    }

    /// Re-attaches to `question`'s reply on `replica`: its lines after seq `after`.
    pub async fn attach(
        &self,
        replica: &Spawned,
        who: &Caller,
        question: &str,
        after: u64,
    ) -> Result<Streaming<pb::CompletionEvent>, tonic::Status> {
        self.chat_client(replica)
            .attach(self.req(
                Service::Chat,
                who,
                pb::AttachRequest {
                    question_id: question.to_owned(),
                    after,
                },
            ))
            .await
            .map(tonic::Response::into_inner)
    }

    /// A session's messages, oldest first, as `replica` reads them.
    pub async fn messages(
        &self,
        replica: &Spawned,
        who: &Caller,
        session: &str,
    ) -> Vec<pb::Message> {
        self.chat_client(replica)
            .list_messages(self.req(
                Service::Chat,
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

/// The text of the next `n` deltas (each within 10 s).
pub async fn deltas(events: &mut Streaming<pb::CompletionEvent>, n: usize) -> String {
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

/// Reads to the end (within 30 s): the deltas' text and the last event.
pub async fn rest(events: &mut Streaming<pb::CompletionEvent>) -> (String, Option<Event>) {
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

/// A streamed line as a test compares it: its seq and its delta (the question's id, or the
/// final event, as text).
pub type Line = (u64, String);

fn line_of(e: pb::CompletionEvent) -> (Line, bool) {
    match e.event {
        Some(Event::QuestionId(id)) => ((e.seq, format!("question {id}")), false),
        Some(Event::Delta(t)) => ((e.seq, t), false),
        Some(Event::Done(d)) => ((e.seq, format!("done {}", d.message_id)), true),
        Some(Event::Error(err)) => ((e.seq, format!("error {}", err.message)), true),
        None => ((e.seq, String::new()), true),
    }
}

/// The next `n` lines (each within 10 s).
pub async fn lines(events: &mut Streaming<pb::CompletionEvent>, n: usize) -> Vec<Line> {
    let mut out = Vec::with_capacity(n);
    for _ in 0..n {
        let e = tokio::time::timeout(Duration::from_secs(10), events.message())
            .await
            .expect("a line within 10 s")
            .unwrap()
            .expect("the stream goes on");
        out.push(line_of(e).0);
    }
    out
}

/// The lines to the end, the final one included (within `within`).
pub async fn lines_to_end(
    events: &mut Streaming<pb::CompletionEvent>,
    within: Duration,
) -> Vec<Line> {
    let deadline = tokio::time::Instant::now() + within;
    let mut out = Vec::new();
    loop {
        let e = tokio::time::timeout_at(deadline, events.message())
            .await
            .expect("the stream ends in time")
            .unwrap()
            .expect("a final line before the end");
        let (line, last) = line_of(e);
        out.push(line);
        if last {
            return out;
        }
    }
}
