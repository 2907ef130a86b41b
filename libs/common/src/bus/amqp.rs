//! RabbitMQ implementation of the bus (lapin): a durable topic exchange, a durable queue per
//! consumer group with a dead-letter exchange, persistent messages, publisher confirms, ack
//! only after the handler succeeded, and reconnection after the broker goes away.

use std::sync::Arc;
use std::time::Duration;

use async_trait::async_trait;
use docchat_proto::events::v1::Envelope;
use futures::StreamExt;
use lapin::options::{
    BasicAckOptions, BasicConsumeOptions, BasicGetOptions, BasicNackOptions, BasicPublishOptions,
    BasicQosOptions, ConfirmSelectOptions, ExchangeDeclareOptions, QueueBindOptions,
    QueueDeclareOptions,
};
use lapin::publisher_confirm::Confirmation;
use lapin::types::{AMQPValue, FieldTable, ShortString};
use lapin::{BasicProperties, Channel, Connection, ConnectionProperties, ExchangeKind};
use prost::Message;
use tokio::sync::Mutex;
use tokio_util::sync::CancellationToken;
use tokio_util::task::TaskTracker;

use super::{BusError, DEAD_LETTER_EXCHANGE, EXCHANGE, EventBus, EventHandler, Subscription};

const ATTEMPT_HEADER: &str = "x-docchat-attempt";
/// How long a publish keeps retrying while the broker is away.
const PUBLISH_DEADLINE: Duration = Duration::from_secs(60);
const PREFETCH: u16 = 32;

fn unavailable(e: impl std::fmt::Display) -> BusError {
    BusError::Unavailable(e.to_string())
}

async fn connect(url: &str, name: &str) -> Result<Connection, BusError> {
    let props = ConnectionProperties::default()
        .with_executor(tokio_executor_trait::Tokio::current())
        .with_reactor(tokio_reactor_trait::Tokio)
        .with_connection_name(name.into());
    tokio::time::timeout(Duration::from_secs(10), Connection::connect(url, props))
        .await
        .map_err(|_| unavailable("connect timed out"))?
        .map_err(unavailable)
}

/// Exchange and queue names, optionally prefixed so independent deployments (or parallel
/// tests) can share one broker.
#[derive(Clone)]
struct Names {
    prefix: String,
    /// Queues unused this long are deleted by the broker (test namespaces only).
    expiry_ms: Option<u32>,
}

impl Names {
    fn exchange(&self) -> String {
        format!("{}{EXCHANGE}", self.prefix)
    }

    fn dead_letter_exchange(&self) -> String {
        format!("{}{DEAD_LETTER_EXCHANGE}", self.prefix)
    }

    fn queue(&self, group: &str) -> String {
        format!("{}{group}", self.prefix)
    }
}

/// Declares the exchanges every party relies on.
async fn declare_exchanges(channel: &Channel, names: &Names) -> Result<(), BusError> {
    let durable = ExchangeDeclareOptions {
        durable: true,
        ..ExchangeDeclareOptions::default()
    };
    channel
        .exchange_declare(
            &names.exchange(),
            ExchangeKind::Topic,
            durable,
            FieldTable::default(),
        )
        .await
        .map_err(unavailable)?;
    channel
        .exchange_declare(
            &names.dead_letter_exchange(),
            ExchangeKind::Direct,
            durable,
            FieldTable::default(),
        )
        .await
        .map_err(unavailable)?;
    Ok(())
}

/// Declares `<group>` (dead-lettering to `<group>.dlq`) and binds it.
async fn declare_group(
    channel: &Channel,
    names: &Names,
    subscription: &Subscription,
) -> Result<(), BusError> {
    declare_exchanges(channel, names).await?;
    let queue = names.queue(&subscription.group);
    if subscription.broadcast {
        let mut args = FieldTable::default();
        // Gone with the connection; the expiry is a backstop should auto-delete not fire.
        args.insert("x-expires".into(), AMQPValue::LongUInt(60_000));
        let transient = QueueDeclareOptions {
            durable: false,
            auto_delete: true,
            ..QueueDeclareOptions::default()
        };
        channel
            .queue_declare(&queue, transient, args)
            .await
            .map_err(unavailable)?;
        return bind(channel, names, &queue, subscription).await;
    }
    let durable = QueueDeclareOptions {
        durable: true,
        ..QueueDeclareOptions::default()
    };
    let dlq = format!("{queue}.dlq");
    let mut dlq_args = FieldTable::default();
    if let Some(ms) = names.expiry_ms {
        dlq_args.insert("x-expires".into(), AMQPValue::LongUInt(ms));
    }
    channel
        .queue_declare(&dlq, durable, dlq_args)
        .await
        .map_err(unavailable)?;
    channel
        .queue_bind(
            &dlq,
            &names.dead_letter_exchange(),
            &queue,
            QueueBindOptions::default(),
            FieldTable::default(),
        )
        .await
        .map_err(unavailable)?;
    let mut args = FieldTable::default();
    args.insert(
        "x-dead-letter-exchange".into(),
        AMQPValue::LongString(names.dead_letter_exchange().into()),
    );
    args.insert(
        "x-dead-letter-routing-key".into(),
        AMQPValue::LongString(queue.as_str().into()),
    );
    if let Some(ms) = names.expiry_ms {
        args.insert("x-expires".into(), AMQPValue::LongUInt(ms));
    }
    channel
        .queue_declare(&queue, durable, args)
        .await
        .map_err(unavailable)?;
    bind(channel, names, &queue, subscription).await
}

/// Binds `queue` to the exchange with the subscription's patterns.
async fn bind(
    channel: &Channel,
    names: &Names,
    queue: &str,
    subscription: &Subscription,
) -> Result<(), BusError> {
    for binding in &subscription.bindings {
        channel
            .queue_bind(
                queue,
                &names.exchange(),
                binding,
                QueueBindOptions::default(),
                FieldTable::default(),
            )
            .await
            .map_err(unavailable)?;
    }
    Ok(())
}

fn properties(event: &Envelope, attempt: u32) -> BasicProperties {
    let mut headers = FieldTable::default();
    headers.insert(ATTEMPT_HEADER.into(), AMQPValue::LongUInt(attempt));
    // Trace context also travels as AMQP headers, for tools that read them.
    for (k, v) in &event.trace_context {
        headers.insert(k.as_str().into(), AMQPValue::LongString(v.as_str().into()));
    }
    BasicProperties::default()
        .with_delivery_mode(2)
        .with_content_type("application/x-protobuf".into())
        .with_message_id(event.id.as_str().into())
        .with_type(event.r#type.as_str().into())
        .with_headers(headers)
}

fn attempt_of(props: &BasicProperties) -> u32 {
    props
        .headers()
        .as_ref()
        .and_then(|h| h.inner().get(&ShortString::from(ATTEMPT_HEADER)).cloned())
        .and_then(|v| match v {
            AMQPValue::LongUInt(n) => Some(n),
            AMQPValue::LongLongInt(n) => u32::try_from(n).ok(),
            AMQPValue::LongInt(n) => u32::try_from(n).ok(),
            _ => None,
        })
        .unwrap_or(0)
}

struct PublisherState {
    connection: Connection,
    channel: Channel,
}

/// RabbitMQ bus. Cheap to share: one publishing connection, one connection per subscription.
pub struct AmqpBus {
    url: String,
    names: Names,
    publisher: Mutex<Option<PublisherState>>,
}

impl AmqpBus {
    /// A bus on `url`; `namespace` prefixes every exchange and queue name (empty in
    /// production, unique per test).
    pub fn new(url: &str, namespace: &str) -> Self {
        AmqpBus {
            url: url.to_owned(),
            names: Names {
                prefix: namespace.to_owned(),
                expiry_ms: None,
            },
            publisher: Mutex::new(None),
        }
    }

    /// Lets the broker delete this bus's queues once unused for `expiry` (for throwaway
    /// namespaces such as tests').
    pub fn with_queue_expiry(mut self, expiry: Duration) -> Self {
        self.names.expiry_ms = Some(u32::try_from(expiry.as_millis()).unwrap_or(u32::MAX));
        self
    }

    async fn publisher_channel(&self) -> Result<Channel, BusError> {
        let mut state = self.publisher.lock().await;
        if let Some(s) = state.as_ref()
            && s.connection.status().connected()
            && s.channel.status().connected()
        {
            return Ok(s.channel.clone());
        }
        let connection = connect(&self.url, "docchat-publisher").await?;
        let channel = connection.create_channel().await.map_err(unavailable)?;
        channel
            .confirm_select(ConfirmSelectOptions::default())
            .await
            .map_err(unavailable)?;
        declare_exchanges(&channel, &self.names).await?;
        *state = Some(PublisherState {
            connection,
            channel: channel.clone(),
        });
        Ok(channel)
    }

    async fn reset_publisher(&self) {
        if let Some(old) = self.publisher.lock().await.take() {
            let _ = old.connection.close(200, "reconnecting").await;
        }
    }

    /// One confirmed publish to `exchange`/`routing_key`, retried across reconnects.
    async fn publish_raw(
        &self,
        exchange: &str,
        routing_key: &str,
        event: &Envelope,
        attempt: u32,
    ) -> Result<(), BusError> {
        let payload = event.encode_to_vec();
        let deadline = tokio::time::Instant::now() + PUBLISH_DEADLINE;
        let mut backoff = Duration::from_millis(100);
        loop {
            let result = async {
                let channel = self.publisher_channel().await?;
                let confirm = channel
                    .basic_publish(
                        exchange,
                        routing_key,
                        BasicPublishOptions::default(),
                        &payload,
                        properties(event, attempt),
                    )
                    .await
                    .map_err(unavailable)?;
                match confirm.await.map_err(unavailable)? {
                    Confirmation::Ack(_) | Confirmation::NotRequested => Ok(()),
                    Confirmation::Nack(_) => Err(unavailable("broker nacked the event")),
                }
            }
            .await;
            match result {
                Ok(()) => return Ok(()),
                Err(e) if tokio::time::Instant::now() + backoff < deadline => {
                    tracing::warn!(error = %e, "publish failed, reconnecting");
                    self.reset_publisher().await;
                    tokio::time::sleep(backoff).await;
                    backoff = (backoff * 2).min(Duration::from_secs(2));
                }
                Err(e) => return Err(e),
            }
        }
    }
}

/// Runs one connection's worth of consuming; returns when the connection is lost (Err) or
/// on shutdown (Ok).
async fn consume_once(
    bus: &AmqpBus,
    subscription: &Subscription,
    handler: &Arc<dyn EventHandler>,
    shutdown: &CancellationToken,
) -> Result<(), BusError> {
    let connection = connect(
        &bus.url,
        &format!("docchat-consumer-{}", subscription.group),
    )
    .await?;
    let channel = connection.create_channel().await.map_err(unavailable)?;
    channel
        .basic_qos(PREFETCH, BasicQosOptions::default())
        .await
        .map_err(unavailable)?;
    declare_group(&channel, &bus.names, subscription).await?;
    let mut consumer = channel
        .basic_consume(
            &bus.names.queue(&subscription.group),
            "",
            BasicConsumeOptions::default(),
            FieldTable::default(),
        )
        .await
        .map_err(unavailable)?;
    tracing::info!(group = %subscription.group, "consuming events");
    loop {
        let delivery = tokio::select! {
            () = shutdown.cancelled() => {
                let _ = connection.close(200, "shutdown").await;
                return Ok(());
            }
            next = consumer.next() => next,
        };
        let delivery = match delivery {
            Some(Ok(d)) => d,
            Some(Err(e)) => return Err(unavailable(e)),
            None => return Err(unavailable("consumer stream ended")),
        };
        let attempt = attempt_of(&delivery.properties);
        let Ok(event) = Envelope::decode(delivery.data.as_slice()) else {
            tracing::error!(group = %subscription.group, "undecodable event dead-lettered");
            delivery
                .nack(BasicNackOptions {
                    requeue: false,
                    ..BasicNackOptions::default()
                })
                .await
                .map_err(unavailable)?;
            continue;
        };
        let span = tracing::info_span!("event", group = %subscription.group, r#type = %event.r#type, id = %event.id);
        crate::telemetry::set_parent_from_map(&span, &event.trace_context);
        let result = super::handle_guarded(handler.as_ref(), &event, span).await;
        crate::metrics::bus_delivery(
            &event.r#type,
            &result,
            attempt + 1 < subscription.max_attempts,
        );
        match result {
            Ok(()) => delivery
                .ack(BasicAckOptions::default())
                .await
                .map_err(unavailable)?,
            Err(e) if attempt + 1 >= subscription.max_attempts => {
                tracing::error!(group = %subscription.group, id = %event.id, error = %e, "event dead-lettered after repeated failures");
                delivery
                    .nack(BasicNackOptions {
                        requeue: false,
                        ..BasicNackOptions::default()
                    })
                    .await
                    .map_err(unavailable)?;
            }
            Err(e) => {
                tracing::warn!(group = %subscription.group, id = %event.id, attempt = attempt + 1, error = %e, "event handler failed, redelivering");
                tokio::time::sleep(Duration::from_millis(50)).await;
                // Requeue a copy carrying the attempt count (a plain requeue cannot), then
                // ack the original; if we die in between, the broker redelivers the original.
                bus.publish_raw(
                    "",
                    &bus.names.queue(&subscription.group),
                    &event,
                    attempt + 1,
                )
                .await?;
                delivery
                    .ack(BasicAckOptions::default())
                    .await
                    .map_err(unavailable)?;
            }
        }
    }
}

#[async_trait]
impl EventBus for AmqpBus {
    async fn publish(&self, event: &Envelope) -> Result<(), BusError> {
        self.publish_raw(&self.names.exchange(), &event.r#type, event, 0)
            .await?;
        crate::metrics::BUS_PUBLISHED
            .with_label_values(&[crate::metrics::event_label(&event.r#type)])
            .inc();
        Ok(())
    }

    async fn subscribe(
        &self,
        subscription: Subscription,
        handler: Arc<dyn EventHandler>,
        tracker: &TaskTracker,
        shutdown: CancellationToken,
    ) -> Result<(), BusError> {
        // Declare before returning so nothing published from now on is dropped.
        {
            let connection = connect(&self.url, "docchat-declare").await?;
            let channel = connection.create_channel().await.map_err(unavailable)?;
            declare_group(&channel, &self.names, &subscription).await?;
            let _ = connection.close(200, "declared").await;
        }
        let bus = AmqpBus {
            url: self.url.clone(),
            names: self.names.clone(),
            publisher: Mutex::new(None),
        };
        tracker.spawn(async move {
            let mut backoff = Duration::from_millis(200);
            while !shutdown.is_cancelled() {
                match consume_once(&bus, &subscription, &handler, &shutdown).await {
                    Ok(()) => break,
                    Err(e) => {
                        tracing::warn!(group = %subscription.group, error = %e, "consumer lost its connection, reconnecting");
                        tokio::select! {
                            () = shutdown.cancelled() => break,
                            () = tokio::time::sleep(backoff) => {}
                        }
                        backoff = (backoff * 2).min(Duration::from_secs(5));
                    }
                }
            }
            bus.reset_publisher().await;
        });
        Ok(())
    }

    async fn take_dead_letters(&self, group: &str) -> Result<Vec<Envelope>, BusError> {
        let connection = connect(&self.url, "docchat-dlq").await?;
        let channel = connection.create_channel().await.map_err(unavailable)?;
        let dlq = format!("{}.dlq", self.names.queue(group));
        let mut out = Vec::new();
        while let Some(message) = channel
            .basic_get(&dlq, BasicGetOptions::default())
            .await
            .map_err(unavailable)?
        {
            if let Ok(event) = Envelope::decode(message.delivery.data.as_slice()) {
                out.push(event);
            }
            message
                .delivery
                .ack(BasicAckOptions::default())
                .await
                .map_err(unavailable)?;
        }
        let _ = connection.close(200, "done").await;
        Ok(out)
    }
}
