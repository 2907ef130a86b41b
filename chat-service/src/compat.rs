//! The compatible API's backend (`/compat_api/v1`, rendered by the gateway): a stateless model
//! call with the main API's model resolution, cost caps and chat rate limit.
//!
//! Nothing is written per call. Usage is summed per user, model and purpose in memory and
//! booked as one `usage.llm` event per second ([`UsageBook`]), so a proxy answering
//! thousands of calls a second costs one outbox transaction a second, not one a call. The
//! price is that a crash loses at most the last second's sums.

use std::collections::HashMap;
use std::pin::Pin;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use docchat_common::Caller;
use docchat_common::budget::CostGuard;
use docchat_common::error::{ApiError, ApiResult, ErrorCode};
use docchat_common::outbox::{self, OutboxRelay};
use docchat_common::settings::SettingsClient;
use docchat_inference::{
    ChatMessage, ChatModel, ChatStream, ModelEntry, Registry, Sampling, StreamEvent,
};
use docchat_proto::chat::v1 as pb;
use docchat_proto::events::v1::LlmUsage;
use futures::Stream;
use sea_orm::DatabaseConnection;
use tokio_util::sync::CancellationToken;
use tonic::Status;

use crate::completions::{Models, cost, model_error};
use crate::events::usage_event;
use crate::fairness::{Fairness, Permit};

/// How often summed usage is booked.
const BOOK_EVERY: Duration = Duration::from_secs(1);
/// Longest prompt accepted, in bytes over all messages (images included, as data URLs).
const MAX_PROMPT_BYTES: usize = 32 << 20;

/// Everything a compatible-API call needs; cheap to clone.
#[derive(Clone)]
pub struct Compat {
    pub registry: Arc<Registry>,
    pub models: Arc<Models>,
    pub settings: SettingsClient,
    pub costs: CostGuard,
    pub fairness: Option<Fairness>,
    pub usage: UsageBook,
}

/// A checked call, ready to go to its model.
struct Call {
    entry: ModelEntry,
    model: Arc<ChatModel>,
    messages: Vec<ChatMessage>,
    sampling: Sampling,
    purpose: String,
    /// A fairness slot, held until the answer ends.
    slot: Option<Permit>,
}

pub type ChunkStream = Pin<Box<dyn Stream<Item = Result<pb::CompatChunk, Status>> + Send>>;

impl Compat {
    /// A whole answer.
    pub async fn complete(
        &self,
        caller: &Caller,
        request: pb::CompatRequest,
    ) -> ApiResult<pb::CompatReply> {
        let call = self.prepare(caller, request).await?;
        let done = call
            .model
            .complete_with(&call.messages, call.sampling)
            .await
            .map_err(model_error)?;
        self.usage.add(
            &caller.user_id,
            &call.entry,
            &call.purpose,
            done.prompt_tokens,
            done.completion_tokens,
        );
        Ok(pb::CompatReply {
            model: call.entry.name,
            text: done.text,
            finish_reason: done.finish_reason,
            prompt_tokens: done.prompt_tokens,
            completion_tokens: done.completion_tokens,
        })
    }

    /// A streamed answer: `start` once the model has accepted the call (failures before
    /// that are this call's error), deltas, then `done` with the usage. Dropping the stream
    /// closes the model's; what was generated until then is booked either way.
    pub async fn stream(
        &self,
        caller: &Caller,
        request: pb::CompatRequest,
    ) -> ApiResult<ChunkStream> {
        let call = self.prepare(caller, request).await?;
        let stream = call
            .model
            .stream_with(&call.messages, call.sampling)
            .await
            .map_err(model_error)?;
        let state = Streaming {
            stream,
            started: false,
            ended: false,
            booking: Some(Booking {
                book: self.usage.clone(),
                user_id: caller.user_id.clone(),
                entry: call.entry,
                purpose: call.purpose,
            }),
            _slot: call.slot,
        };
        Ok(Box::pin(futures::stream::unfold(state, Streaming::step)))
    }

    async fn prepare(&self, caller: &Caller, r: pb::CompatRequest) -> ApiResult<Call> {
        let priority = match &self.fairness {
            Some(fairness) => Some(fairness.admit(&caller.user_id)?),
            None => None,
        };
        let entry = self.registry.resolve(&r.model).ok_or_else(|| {
            if r.model.is_empty() || r.model == "auto" {
                ApiError::new(ErrorCode::Unavailable, "no chat model is configured")
            } else {
                ApiError::not_found(format!(
                    "The model `{}` does not exist or you do not have access to it.",
                    r.model
                ))
            }
        })?;
        let messages = messages(&r.messages, entry)?;
        if let Some(t) = r.temperature
            && !(0.0..=2.0).contains(&t)
        {
            return Err(ApiError::bad_request("temperature must be between 0 and 2"));
        }
        if r.max_tokens == Some(0) {
            return Err(ApiError::bad_request("max_tokens must be at least 1"));
        }
        let model = self.models.get(&entry.name)?;
        let settings = self.settings.resolve(caller).await?;
        self.costs.check(caller, &settings).await?;
        let slot = match (&self.fairness, priority) {
            (Some(fairness), Some(priority)) => Some(fairness.acquire(priority).await),
            _ => None,
        };
        Ok(Call {
            entry: entry.clone(),
            model,
            messages,
            sampling: Sampling {
                max_tokens: r.max_tokens,
                temperature: r.temperature.map(|t| t as f32),
            },
            purpose: if r.purpose.is_empty() {
                "compat".to_owned()
            } else {
                r.purpose
            },
            slot,
        })
    }
}

/// The request's messages for `entry`: known roles, images only from the user and only
/// for a vision model.
fn messages(wire: &[pb::CompatMessage], entry: &ModelEntry) -> ApiResult<Vec<ChatMessage>> {
    if wire.is_empty() {
        return Err(ApiError::bad_request("messages must not be empty"));
    }
    let mut bytes = 0;
    let mut out = Vec::with_capacity(wire.len());
    for (i, m) in wire.iter().enumerate() {
        if !matches!(m.role.as_str(), "system" | "user" | "assistant") {
            return Err(ApiError::bad_request(format!(
                "messages[{i}].role must be developer, system, user or assistant, not {:?}",
                m.role
            )));
        }
        if !m.image_urls.is_empty() {
            if m.role != "user" {
                return Err(ApiError::bad_request(format!(
                    "messages[{i}]: only user messages can carry images"
                )));
            }
            if !entry.vision {
                return Err(ApiError::bad_request(format!(
                    "messages[{i}]: model {} does not accept images; use a vision model",
                    entry.name
                )));
            }
        }
        bytes += m.text.len() + m.image_urls.iter().map(String::len).sum::<usize>();
        out.push(ChatMessage {
            role: m.role.clone(),
            content: m.text.clone(),
            images: m.image_urls.clone(),
        });
    }
    if bytes > MAX_PROMPT_BYTES {
        return Err(ApiError::bad_request(format!(
            "the messages are longer than {} MB",
            MAX_PROMPT_BYTES >> 20
        )));
    }
    Ok(out)
}

/// What a finished (or abandoned) stream books.
struct Booking {
    book: UsageBook,
    user_id: String,
    entry: ModelEntry,
    purpose: String,
}

/// A streamed answer in progress; books its usage when it ends or is dropped.
struct Streaming {
    stream: ChatStream,
    started: bool,
    ended: bool,
    booking: Option<Booking>,
    _slot: Option<Permit>,
}

impl Streaming {
    async fn step(mut self) -> Option<(Result<pb::CompatChunk, Status>, Streaming)> {
        use pb::compat_chunk::Kind;
        let chunk = |kind| pb::CompatChunk { kind: Some(kind) };
        if self.ended {
            return None;
        }
        if !self.started {
            self.started = true;
            let model = self.booking.as_ref().map(|b| b.entry.name.clone());
            return Some((Ok(chunk(Kind::Start(model.unwrap_or_default()))), self));
        }
        match self.stream.next().await {
            Some(Ok(StreamEvent::Delta(text))) => Some((Ok(chunk(Kind::Delta(text))), self)),
            Some(Err(e)) => {
                self.ended = true;
                Some((Err(Status::from(model_error(e))), self))
            }
            None => {
                self.ended = true;
                let (prompt_tokens, completion_tokens) = self.book();
                let done = pb::CompatReply {
                    model: String::new(),
                    text: String::new(),
                    finish_reason: self.stream.finish_reason().to_owned(),
                    prompt_tokens,
                    completion_tokens,
                };
                Some((Ok(chunk(Kind::Done(done))), self))
            }
        }
    }

    /// Books the usage once; answers the token counts.
    fn book(&mut self) -> (u64, u64) {
        let (prompt_tokens, completion_tokens) = self.stream.usage();
        if let Some(b) = self.booking.take() {
            b.book.add(
                &b.user_id,
                &b.entry,
                &b.purpose,
                prompt_tokens,
                completion_tokens,
            );
        }
        (prompt_tokens, completion_tokens)
    }
}

impl Drop for Streaming {
    fn drop(&mut self) {
        self.book();
    }
}

#[derive(Default, Clone, Copy, Debug, PartialEq)]
struct Sum {
    calls: u64,
    prompt_tokens: u64,
    completion_tokens: u64,
    cost: f64,
}

/// (user, model, purpose) → what their calls used since the last booking.
type Sums = HashMap<(String, String, String), Sum>;

/// Usage summed in memory and booked as `usage.llm` events once a second.
#[derive(Clone, Default)]
pub struct UsageBook {
    sums: Arc<Mutex<Sums>>,
}

impl UsageBook {
    pub fn add(
        &self,
        user_id: &str,
        entry: &ModelEntry,
        purpose: &str,
        prompt_tokens: u64,
        completion_tokens: u64,
    ) {
        let cost = cost(
            (entry.input_price, entry.output_price),
            prompt_tokens,
            completion_tokens,
        );
        let mut sums = self.sums.lock().unwrap_or_else(|e| e.into_inner());
        let sum = sums
            .entry((user_id.to_owned(), entry.name.clone(), purpose.to_owned()))
            .or_default();
        sum.calls += 1;
        sum.prompt_tokens += prompt_tokens;
        sum.completion_tokens += completion_tokens;
        sum.cost += cost;
    }

    fn take(&self) -> Sums {
        std::mem::take(&mut *self.sums.lock().unwrap_or_else(|e| e.into_inner()))
    }

    /// Puts sums that could not be booked back, to go with the next booking.
    fn restore(&self, sums: Sums) {
        let mut current = self.sums.lock().unwrap_or_else(|e| e.into_inner());
        for (key, s) in sums {
            let sum = current.entry(key).or_default();
            sum.calls += s.calls;
            sum.prompt_tokens += s.prompt_tokens;
            sum.completion_tokens += s.completion_tokens;
            sum.cost += s.cost;
        }
    }

    /// Writes what was summed to the outbox in one INSERT; answers how many events.
    pub async fn flush(&self, db: &DatabaseConnection, relay: &OutboxRelay) -> usize {
        let sums = self.take();
        if sums.is_empty() {
            return 0;
        }
        let events: Vec<_> = sums
            .iter()
            .map(|((user_id, model, purpose), s)| {
                usage_event(&LlmUsage {
                    user_id: user_id.clone(),
                    model: model.clone(),
                    prompt_tokens: s.prompt_tokens,
                    completion_tokens: s.completion_tokens,
                    cost: s.cost,
                    purpose: purpose.clone(),
                    message_id: String::new(),
                    calls: s.calls,
                })
            })
            .collect();
        match outbox::enqueue_all(db, &events).await {
            Ok(()) => {
                relay.notify();
                events.len()
            }
            Err(e) => {
                tracing::warn!(error = %e, "compat usage not booked; retrying with the next");
                self.restore(sums);
                0
            }
        }
    }

    /// Books once a second until `shutdown`, then once more.
    pub async fn run(
        self,
        db: DatabaseConnection,
        relay: OutboxRelay,
        shutdown: CancellationToken,
    ) {
        let mut tick = tokio::time::interval(BOOK_EVERY);
        tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        loop {
            tokio::select! {
                () = shutdown.cancelled() => break,
                _ = tick.tick() => {}
            }
            self.flush(&db, &relay).await;
        }
        self.flush(&db, &relay).await;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn entry(vision: bool) -> ModelEntry {
        Registry::parse(&format!(
            "[[models]]\nname = \"m\"\nbase_url = \"http://127.0.0.1:1/v1\"\ninput_price = 2.0\noutput_price = 4.0\nvision = {vision}"
        ))
        .unwrap()
        .resolve("m")
        .cloned()
        .unwrap()
    }

    fn wire(role: &str, text: &str, images: &[&str]) -> pb::CompatMessage {
        pb::CompatMessage {
            role: role.into(),
            text: text.into(),
            image_urls: images.iter().map(|s| s.to_string()).collect(),
        }
    }

    #[test]
    fn images_go_only_to_vision_models_and_only_from_users() {
        let image = ["data:image/png;base64,AAAA"];
        let ok = messages(&[wire("user", "what is this?", &image)], &entry(true)).unwrap();
        assert_eq!(ok[0].images, vec![image[0].to_owned()]);
        let err = messages(&[wire("user", "what is this?", &image)], &entry(false)).unwrap_err();
        assert!(
            err.message.contains("does not accept images"),
            "{}",
            err.message
        );
        assert!(messages(&[wire("assistant", "", &image)], &entry(true)).is_err());
        assert!(messages(&[wire("tool", "x", &[])], &entry(true)).is_err());
        assert!(messages(&[], &entry(true)).is_err());
    }

    #[test]
    fn usage_sums_per_user_model_and_purpose() {
        let book = UsageBook::default();
        let m = entry(false);
        book.add("u1", &m, "compat.chat", 1_000_000, 0);
        book.add("u1", &m, "compat.chat", 0, 500_000);
        book.add("u2", &m, "compat.chat", 10, 10);
        book.add("u1", &m, "compat.responses", 10, 10);
        let sums = book.take();
        assert_eq!(sums.len(), 3);
        let u1 = sums[&("u1".into(), "m".into(), "compat.chat".into())];
        assert_eq!(
            u1,
            Sum {
                calls: 2,
                prompt_tokens: 1_000_000,
                completion_tokens: 500_000,
                cost: 4.0,
            }
        );
        assert!(book.take().is_empty(), "taking empties the book");
        book.restore(sums);
        book.add("u2", &m, "compat.chat", 10, 10);
        let again = book.take();
        assert_eq!(
            again[&("u2".into(), "m".into(), "compat.chat".into())].calls,
            2
        );
    }
}
