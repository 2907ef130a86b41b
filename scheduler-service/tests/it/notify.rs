//! Run notifications reach a local SMTP sink the test starts: one message per execution.
#![allow(
    clippy::disallowed_methods,
    reason = "the SMTP sink lives as long as the test's runtime"
)]

use std::sync::{Arc, Mutex};

use chrono::Utc;
use docchat_common::testing::{ScriptedHttp, ScriptedTurn};
use serde_json::json;
use tokio::io::{AsyncBufReadExt, AsyncWriteExt, BufReader};

use crate::support::*;

/// A minimal SMTP server on loopback: accepts everything, keeps each message's data.
pub struct SmtpSink {
    pub url: String,
    messages: Arc<Mutex<Vec<String>>>,
}

impl SmtpSink {
    pub async fn start() -> SmtpSink {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let url = format!("smtp://{}", listener.local_addr().unwrap());
        let messages = Arc::new(Mutex::new(Vec::new()));
        let kept = messages.clone();
        tokio::spawn(async move {
            while let Ok((stream, _)) = listener.accept().await {
                tokio::spawn(session(stream, kept.clone()));
            }
        });
        SmtpSink { url, messages }
    }

    /// The messages received, quoted-printable soft line breaks undone.
    pub fn messages(&self) -> Vec<String> {
        self.messages
            .lock()
            .unwrap()
            .iter()
            .map(|m| m.replace("=\n", ""))
            .collect()
    }
}

async fn session(stream: tokio::net::TcpStream, kept: Arc<Mutex<Vec<String>>>) {
    let (read, mut write) = stream.into_split();
    let mut lines = BufReader::new(read).lines();
    let _ = write.write_all(b"220 sink ESMTP\r\n").await;
    while let Ok(Some(line)) = lines.next_line().await {
        let verb = line.split(' ').next().unwrap_or("").to_ascii_uppercase();
        let reply: &[u8] = match verb.as_str() {
            "EHLO" | "HELO" => b"250 sink\r\n",
            "DATA" => {
                let _ = write.write_all(b"354 go on\r\n").await;
                let mut data = String::new();
                while let Ok(Some(l)) = lines.next_line().await {
                    if l == "." {
                        break;
                    }
                    data.push_str(l.strip_prefix('.').unwrap_or(&l));
                    data.push('\n');
                }
                kept.lock().unwrap().push(data);
                b"250 kept\r\n"
            }
            "QUIT" => {
                let _ = write.write_all(b"221 bye\r\n").await;
                return;
            }
            _ => b"250 ok\r\n",
        };
        if write.write_all(reply).await.is_err() {
            return;
        }
    }
}

docchat_common::backend_tests! {
    /// A completed and a failed execution each send one message to notification_email with
    /// the task's name, the status and the answer or the error; a task without an address
    /// sends nothing.
    async fn each_execution_sends_one_notification(backend) {
        let sink = SmtpSink::start().await;
        let upstream = ScriptedHttp::chat_turns(vec![ScriptedTurn::text("All systems nominal.")]).await;
        let stack = stack(&backend, &upstream.base_url).await;
        let db = store(&stack).await;
        let dave = owner(&stack, "dave").await;
        let now = Utc::now();
        let ok = task(&db, &dave, "status report", ("interval", "10 minutes"), json!({"message": "status?"}), now,
            |t| t.notification_email = "dave@example.com".into()).await;
        let broken = task(&db, &dave, "broken report", ("interval", "10 minutes"),
            json!({"message": "status?", "collection_id": "00000000-0000-4000-8000-000000000000"}), now,
            |t| t.notification_email = "dave@example.com".into()).await;
        let silent = task(&db, &dave, "silent", ("interval", "10 minutes"), json!({"message": "status?"}), now, |_| {}).await;
        let sink_url = sink.url.clone();
        let replica = scheduler(&stack, move |c| {
            c.smtp_url = Some(sink_url.into());
            c.smtp_from = "scheduler@docchat.test".into();
        }).await;
        for t in [&ok, &broken, &silent] {
            ended(&db, &t.id, 1).await;
        }
        let messages = until(20, "two messages reached the sink", || async {
            let m = sink.messages();
            (m.len() >= 2).then_some(m)
        }).await;
        tokio::time::sleep(std::time::Duration::from_millis(500)).await;
        assert_eq!(sink.messages().len(), 2, "{}: one message per execution with an address", backend.name);
        let of = |name: &str| messages.iter().find(|m| m.contains(&format!("Task: {name}"))).cloned()
            .unwrap_or_else(|| panic!("{}: no message about {name}: {messages:?}", backend.name));
        let good = of("status report");
        assert!(good.contains("Status: completed") && good.contains("All systems nominal."), "{good}");
        assert!(good.contains("To: dave@example.com") && good.contains("From: scheduler@docchat.test"), "{good}");
        let run = &executions_of(&db, &ok.id).await[0];
        assert!(good.contains(&run.chat_session_id), "{good}");
        let bad = of("broken report");
        assert!(bad.contains("Status: failed") && bad.contains("Error: collection 00000000-0000-4000-8000-000000000000"), "{bad}");

        replica.stop().await.unwrap();
        stack.stop().await;
    }
}
