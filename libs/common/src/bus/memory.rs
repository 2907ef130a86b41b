//! The in-process bus of standalone mode: same topic semantics, queues and redelivery as
//! RabbitMQ, held in memory (events do not survive the process, which in standalone mode
//! is also where their producers' outboxes live, so the outbox re-publishes after a crash).

use std::collections::{HashMap, VecDeque};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use async_trait::async_trait;
use docchat_proto::events::v1::Envelope;
use tokio::sync::Notify;
use tokio_util::sync::CancellationToken;
use tokio_util::task::TaskTracker;

use super::{BusError, EventBus, EventHandler, Subscription, topic_matches};

struct Delivery {
    event: Envelope,
    attempt: u32,
}

#[derive(Default)]
struct Queue {
    bindings: Vec<String>,
    ready: Mutex<VecDeque<Delivery>>,
    dead: Mutex<Vec<Envelope>>,
    notify: Notify,
}

impl Queue {
    fn push(&self, delivery: Delivery) {
        self.ready
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .push_back(delivery);
        self.notify.notify_one();
    }

    fn pop(&self) -> Option<Delivery> {
        self.ready
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .pop_front()
    }
}

/// Topic exchange and durable-per-process queues over tokio primitives.
#[derive(Default, Clone)]
pub struct InProcessBus {
    queues: Arc<Mutex<HashMap<String, Arc<Queue>>>>,
}

impl InProcessBus {
    pub fn new() -> Self {
        Self::default()
    }

    fn queue(&self, group: &str) -> Option<Arc<Queue>> {
        self.queues
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .get(group)
            .cloned()
    }
}

const REDELIVERY_DELAY: Duration = Duration::from_millis(50);

async fn consume(
    queue: Arc<Queue>,
    subscription: Subscription,
    handler: Arc<dyn EventHandler>,
    shutdown: CancellationToken,
) {
    loop {
        let Some(delivery) = queue.pop() else {
            tokio::select! {
                () = shutdown.cancelled() => return,
                () = queue.notify.notified() => continue,
            }
        };
        let span = tracing::info_span!("event", group = %subscription.group, r#type = %delivery.event.r#type, id = %delivery.event.id);
        crate::telemetry::set_parent_from_map(&span, &delivery.event.trace_context);
        let result = super::handle_guarded(handler.as_ref(), &delivery.event, span).await;
        crate::metrics::bus_delivery(
            &delivery.event.r#type,
            &result,
            delivery.attempt + 1 < subscription.max_attempts,
        );
        match result {
            Ok(()) => {}
            Err(e) if delivery.attempt + 1 >= subscription.max_attempts => {
                tracing::error!(group = %subscription.group, id = %delivery.event.id, error = %e, "event dead-lettered after repeated failures");
                queue
                    .dead
                    .lock()
                    .unwrap_or_else(|p| p.into_inner())
                    .push(delivery.event);
            }
            Err(e) => {
                tracing::warn!(group = %subscription.group, id = %delivery.event.id, attempt = delivery.attempt + 1, error = %e, "event handler failed, redelivering");
                let queue = queue.clone();
                let shutdown = shutdown.clone();
                // Requeue after a pause so a failing handler does not spin.
                #[expect(
                    clippy::disallowed_methods,
                    reason = "a short sleep that ends with the shutdown token; nothing to finish"
                )]
                tokio::spawn(async move {
                    tokio::select! {
                        () = shutdown.cancelled() => {}
                        () = tokio::time::sleep(REDELIVERY_DELAY) => {}
                    }
                    queue.push(Delivery {
                        event: delivery.event,
                        attempt: delivery.attempt + 1,
                    });
                });
            }
        }
    }
}

#[async_trait]
impl EventBus for InProcessBus {
    async fn publish(&self, event: &Envelope) -> Result<(), BusError> {
        crate::metrics::BUS_PUBLISHED
            .with_label_values(&[crate::metrics::event_label(&event.r#type)])
            .inc();
        let queues: Vec<Arc<Queue>> = self
            .queues
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .values()
            .filter(|q| q.bindings.iter().any(|b| topic_matches(b, &event.r#type)))
            .cloned()
            .collect();
        for q in queues {
            q.push(Delivery {
                event: event.clone(),
                attempt: 0,
            });
        }
        Ok(())
    }

    async fn subscribe(
        &self,
        subscription: Subscription,
        handler: Arc<dyn EventHandler>,
        tracker: &TaskTracker,
        shutdown: CancellationToken,
    ) -> Result<(), BusError> {
        let queue = {
            let mut queues = self.queues.lock().unwrap_or_else(|p| p.into_inner());
            let queue = queues
                .entry(subscription.group.clone())
                .or_insert_with(|| {
                    Arc::new(Queue {
                        bindings: subscription.bindings.clone(),
                        ..Queue::default()
                    })
                })
                .clone();
            if queue.bindings != subscription.bindings {
                return Err(BusError::Rejected(format!(
                    "group {} already bound differently",
                    subscription.group
                )));
            }
            queue
        };
        tracker.spawn(consume(queue, subscription, handler, shutdown));
        Ok(())
    }

    async fn take_dead_letters(&self, group: &str) -> Result<Vec<Envelope>, BusError> {
        Ok(self
            .queue(group)
            .map(|q| std::mem::take(&mut *q.dead.lock().unwrap_or_else(|p| p.into_inner())))
            .unwrap_or_default())
    }
}
