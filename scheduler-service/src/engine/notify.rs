//! Run notifications: when a task has a notification_email and `DOCCHAT_SMTP_URL` is set, one
//! plain-text message per execution (task name, status, the result summary or the error, the
//! chat session), sent with `lettre` (`smtp://` plain or STARTTLS per its `tls` parameter,
//! `smtps://` TLS; user:pass@ authenticates) from `DOCCHAT_SMTP_FROM`. A failed send is
//! logged; it never changes the execution.

use std::time::Duration;

use docchat_common::config::Config;
use lettre::message::Mailbox;
use lettre::message::header::ContentType;
use lettre::{AsyncSmtpTransport, AsyncTransport, Message, Tokio1Executor};
use secrecy::ExposeSecret;

use crate::entities::task_executions as executions;

/// How long one send may take.
const SEND_TIMEOUT: Duration = Duration::from_secs(30);

/// An SMTP transport and the sender.
pub struct Notifier {
    transport: AsyncSmtpTransport<Tokio1Executor>,
    from: Mailbox,
}

impl Notifier {
    /// None when `smtp_url` is unset; an error for a URL or sender that cannot work.
    pub fn from_config(config: &Config) -> anyhow::Result<Option<Notifier>> {
        let Some(url) = &config.smtp_url else {
            return Ok(None);
        };
        let transport = AsyncSmtpTransport::<Tokio1Executor>::from_url(url.expose_secret())
            .map_err(|e| anyhow::anyhow!("DOCCHAT_SMTP_URL is not usable: {e}"))?
            .timeout(Some(SEND_TIMEOUT))
            .build();
        let from = config
            .smtp_from
            .parse()
            .map_err(|e| anyhow::anyhow!("DOCCHAT_SMTP_FROM is not an address: {e}"))?;
        Ok(Some(Notifier { transport, from }))
    }

    async fn deliver(&self, to: &str, execution: &executions::Model) -> anyhow::Result<()> {
        let message = Message::builder()
            .from(self.from.clone())
            .to(to.parse()?)
            .subject(format!(
                "Scheduled task \"{}\": {}",
                execution.task_name, execution.status
            ))
            .header(ContentType::TEXT_PLAIN)
            .body(body(execution))?;
        self.transport.send(message).await?;
        Ok(())
    }
}

/// The message text.
pub fn body(execution: &executions::Model) -> String {
    let mut text = format!(
        "Task: {}\nStatus: {}\nExecution: {} ({})\n",
        execution.task_name, execution.status, execution.id, execution.trigger_source
    );
    if !execution.chat_session_id.is_empty() {
        text.push_str(&format!("Chat session: {}\n", execution.chat_session_id));
    }
    if !execution.error_message.is_empty() {
        text.push_str(&format!("Error: {}\n", execution.error_message));
    }
    if !execution.result_summary.is_empty() {
        text.push_str(&format!("\nResult:\n{}\n", execution.result_summary));
    }
    text
}

/// Sends the message of `execution` to `to` if both an address and a notifier exist.
pub(super) async fn send(notifier: Option<&Notifier>, to: &str, execution: &executions::Model) {
    let (Some(notifier), false) = (notifier, to.trim().is_empty()) else {
        return;
    };
    if let Err(e) = notifier.deliver(to.trim(), execution).await {
        tracing::warn!(execution_id = %execution.id, error = %format!("{e:#}"), "sending a task notification failed");
    }
}
