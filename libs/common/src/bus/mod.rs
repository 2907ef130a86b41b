//! The event bus: topic routing keys (`chat.session.created`), one durable queue per consumer
//! group, at-least-once delivery, redelivery when a handler fails, and a dead-letter queue
//! for events that keep failing. Two implementations share one contract:
//! [`memory::InProcessBus`] (standalone) and [`amqp::AmqpBus`] (RabbitMQ).

pub mod amqp;
pub mod memory;
pub mod topics;

use std::sync::Arc;

use async_trait::async_trait;
use docchat_proto::events::v1::Envelope;
use prost::Message;
use tokio_util::sync::CancellationToken;
use tokio_util::task::TaskTracker;

/// Exchange every event is published to.
pub const EXCHANGE: &str = "docchat.events";
/// Where events that keep failing end up (queue `<group>.dlq`).
pub const DEAD_LETTER_EXCHANGE: &str = "docchat.events.dlx";

#[derive(Debug, thiserror::Error)]
pub enum BusError {
    #[error("event bus unavailable: {0}")]
    Unavailable(String),
    #[error("event rejected: {0}")]
    Rejected(String),
}

/// A consumer group: its queue receives every event whose routing key matches a binding.
#[derive(Debug, Clone)]
pub struct Subscription {
    /// Queue name; replicas of one service share it and compete for its events.
    pub group: String,
    /// Topic patterns: `*` matches one word, `#` zero or more.
    pub bindings: Vec<String>,
    /// Deliveries (first one included) before an event goes to the dead-letter queue.
    pub max_attempts: u32,
    /// Every replica gets every event (see [`Subscription::broadcast`]).
    pub broadcast: bool,
}

impl Subscription {
    pub fn new(group: impl Into<String>, bindings: &[&str]) -> Self {
        Subscription {
            group: group.into(),
            bindings: bindings.iter().map(|b| (*b).to_owned()).collect(),
            max_attempts: 5,
            broadcast: false,
        }
    }

    /// A subscription of this replica alone, so that every replica receives every matching
    /// event (fanout): its queue is named uniquely, is not durable, has no dead-letter queue
    /// and disappears with the replica's connection. For signals that only matter while
    /// their sender waits, such as `chat.control`.
    pub fn broadcast(group: &str, bindings: &[&str]) -> Self {
        let id = crate::ids::new_name();
        Subscription {
            broadcast: true,
            max_attempts: 1,
            ..Subscription::new(format!("{group}.{}", &id[..12]), bindings)
        }
    }
}

/// Handles one event. Returning an error asks for redelivery; handlers are idempotent on
/// the envelope id because delivery is at least once.
#[async_trait]
pub trait EventHandler: Send + Sync + 'static {
    async fn handle(&self, event: &Envelope) -> anyhow::Result<()>;
}

#[async_trait]
pub trait EventBus: Send + Sync + 'static {
    /// Publishes durably: returns once the broker has confirmed the event.
    async fn publish(&self, event: &Envelope) -> Result<(), BusError>;

    /// Declares the group's queue and bindings (before returning, so events published
    /// afterwards are kept), then consumes on `tracker` until `shutdown`.
    async fn subscribe(
        &self,
        subscription: Subscription,
        handler: Arc<dyn EventHandler>,
        tracker: &TaskTracker,
        shutdown: CancellationToken,
    ) -> Result<(), BusError>;

    /// Removes and returns the events in a group's dead-letter queue.
    async fn take_dead_letters(&self, group: &str) -> Result<Vec<Envelope>, BusError>;
}

/// Runs a handler inside its span; a panic counts as a failure (redelivery), so one bad
/// event cannot kill a consumer.
pub(crate) async fn handle_guarded(
    handler: &dyn EventHandler,
    event: &Envelope,
    span: tracing::Span,
) -> anyhow::Result<()> {
    use futures::FutureExt;
    let fut = tracing::Instrument::instrument(handler.handle(event), span);
    match std::panic::AssertUnwindSafe(fut).catch_unwind().await {
        Ok(result) => result,
        Err(_) => Err(anyhow::anyhow!("event handler panicked")),
    }
}

/// Builds an envelope for `payload`, stamped with a new id, the time and the trace context.
pub fn envelope(event_type: &str, actor: &str, payload: &impl Message) -> Envelope {
    Envelope {
        id: crate::ids::new_id(),
        r#type: event_type.to_owned(),
        time: Some(crate::time::to_proto(crate::time::now())),
        actor: actor.to_owned(),
        trace_context: crate::telemetry::current_context_map(),
        payload: payload.encode_to_vec(),
    }
}

/// AMQP topic matching: words split on `.`, `*` is exactly one word, `#` zero or more.
pub fn topic_matches(pattern: &str, key: &str) -> bool {
    fn go(p: &[&str], k: &[&str]) -> bool {
        match (p.first(), k.first()) {
            (None, None) => true,
            (Some(&"#"), _) => go(&p[1..], k) || (!k.is_empty() && go(p, &k[1..])),
            (Some(&"*"), Some(_)) => go(&p[1..], &k[1..]),
            (Some(a), Some(b)) if a == b => go(&p[1..], &k[1..]),
            _ => false,
        }
    }
    let p: Vec<&str> = pattern.split('.').collect();
    let k: Vec<&str> = key.split('.').collect();
    go(&p, &k)
}

/// The bus a process uses: RabbitMQ when `amqp_url` is set, otherwise in-process.
pub fn from_config(config: &crate::Config) -> Arc<dyn EventBus> {
    match &config.amqp_url {
        Some(url) => {
            let bus = amqp::AmqpBus::new(url, &config.bus_namespace);
            match config.bus_queue_expiry_seconds {
                Some(s) => Arc::new(bus.with_queue_expiry(std::time::Duration::from_secs(s))),
                None => Arc::new(bus),
            }
        }
        None => Arc::new(memory::InProcessBus::new()),
    }
}

#[cfg(test)]
mod tests {
    use super::topic_matches;

    #[test]
    fn topic_patterns() {
        assert!(topic_matches("chat.session.*", "chat.session.created"));
        assert!(!topic_matches("chat.session.*", "chat.session"));
        assert!(!topic_matches("chat.session.*", "chat.session.a.b"));
        assert!(topic_matches("job.#", "job"));
        assert!(topic_matches("job.#", "job.ingest.done"));
        assert!(topic_matches("#", "anything.at.all"));
        assert!(topic_matches("#.deleted", "ingest.collection.deleted"));
        assert!(!topic_matches("usage.llm", "usage.llm.x"));
        assert!(topic_matches("*.*.deleted", "ingest.document.deleted"));
    }
}
