//! Usage of model calls made outside a reply's transaction (the compatible API, suggested
//! questions): summed per user, model and purpose in memory and booked as one `usage.llm`
//! event per second, so a proxy answering thousands of calls a second costs one outbox
//! transaction a second, not one a call. The price is that a crash loses at most the last
//! second's sums.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use docchat_common::outbox::{self, OutboxRelay};
use docchat_inference::ModelEntry;
use docchat_proto::events::v1::LlmUsage;
use sea_orm::DatabaseConnection;
use tokio_util::sync::CancellationToken;

use docchat_common::bus::{envelope, topics};

/// How often summed usage is booked.
const BOOK_EVERY: Duration = Duration::from_secs(1);

/// What a call costs at `prices` (per million input and output tokens).
pub fn cost(prices: (f64, f64), prompt_tokens: u64, completion_tokens: u64) -> f64 {
    (prompt_tokens as f64 * prices.0 + completion_tokens as f64 * prices.1) / 1_000_000.0
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
        // Counted in the metrics only once written: sums that fail go back for the next.
        let usages: Vec<_> = sums
            .iter()
            .map(|((user_id, model, purpose), s)| LlmUsage {
                user_id: user_id.clone(),
                model: model.clone(),
                prompt_tokens: s.prompt_tokens,
                completion_tokens: s.completion_tokens,
                cost: s.cost,
                purpose: purpose.clone(),
                message_id: String::new(),
                calls: s.calls,
            })
            .collect();
        let events: Vec<_> = usages
            .iter()
            .map(|u| envelope(topics::USAGE_LLM, &u.user_id, u))
            .collect();
        match outbox::enqueue_all(db, &events).await {
            Ok(()) => {
                relay.notify();
                usages.iter().for_each(docchat_common::metrics::llm_usage);
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
    use docchat_inference::Registry;

    use super::*;

    fn entry() -> ModelEntry {
        Registry::parse(
            "[[models]]\nname = \"m\"\nbase_url = \"http://127.0.0.1:1/v1\"\ninput_price = 2.0\noutput_price = 4.0",
        )
        .unwrap()
        .resolve("m")
        .cloned()
        .unwrap()
    }

    #[test]
    fn usage_sums_per_user_model_and_purpose() {
        let book = UsageBook::default();
        let m = entry();
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
