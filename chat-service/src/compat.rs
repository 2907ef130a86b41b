//! The compatible API's backend (`/compat_api/v1`, rendered by the gateway): a stateless model
//! call through the [`ModelGate`] of the main API (chat rate limit, model resolution, cost
//! caps). Nothing is written per call: usage goes to the gate's [`UsageBook`](crate::usage::UsageBook).

use std::pin::Pin;
use std::sync::Arc;

use docchat_common::Caller;
use docchat_common::error::{ApiError, ApiResult};
use docchat_inference::{ChatMessage, ChatModel, ChatStream, ModelEntry, Sampling, StreamEvent};
use docchat_proto::chat::v1 as pb;
use futures::Stream;
use tonic::Status;

use crate::fairness::{Permit, Priority};
use crate::gate::{ModelGate, model_error};
/// Longest prompt accepted, in bytes over all messages (images included, as data URLs).
const MAX_PROMPT_BYTES: usize = 32 << 20;

/// Everything a compatible-API call needs; cheap to clone.
#[derive(Clone)]
pub struct Compat {
    pub gate: ModelGate,
}

/// A checked call, ready to go to its model.
pub(crate) struct Call {
    pub(crate) entry: ModelEntry,
    pub(crate) model: Arc<ChatModel>,
    pub(crate) messages: Vec<ChatMessage>,
    pub(crate) sampling: Sampling,
    pub(crate) purpose: String,
    /// Where it queues for a fairness slot, when chat fairness is on.
    pub(crate) priority: Option<Priority>,
    /// A fairness slot, held until the answer ends.
    pub(crate) slot: Option<Permit>,
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
        self.gate.book(
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
                gate: self.gate.clone(),
                user_id: caller.user_id.clone(),
                entry: call.entry,
                purpose: call.purpose,
            }),
            _slot: call.slot,
        };
        Ok(Box::pin(futures::stream::unfold(state, Streaming::step)))
    }

    /// Admits the call, then waits for its fairness slot.
    async fn prepare(&self, caller: &Caller, r: pb::CompatRequest) -> ApiResult<Call> {
        let mut call = self.admit(caller, r).await?;
        call.slot = self.gate.slot(call.priority).await;
        Ok(call)
    }

    /// Checks the call (rate limit, model, caps, messages) without waiting for a slot.
    pub(crate) async fn admit(&self, caller: &Caller, r: pb::CompatRequest) -> ApiResult<Call> {
        let priority = self.gate.count(caller).await?;
        let admitted = self
            .gate
            .clear(caller, &r.model, |name| {
                ApiError::not_found(format!(
                    "The model `{name}` does not exist or you do not have access to it."
                ))
            })
            .await?;
        let messages = messages(&r.messages, &admitted.entry)?;
        if let Some(t) = r.temperature
            && !(0.0..=2.0).contains(&t)
        {
            return Err(ApiError::bad_request("temperature must be between 0 and 2"));
        }
        if r.max_tokens == Some(0) {
            return Err(ApiError::bad_request("max_tokens must be at least 1"));
        }
        Ok(Call {
            entry: admitted.entry,
            model: admitted.model,
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
            priority,
            slot: None,
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
            ..ChatMessage::default()
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
    gate: ModelGate,
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
            b.gate.book(
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

#[cfg(test)]
mod tests {
    use docchat_inference::Registry;

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
}
