//! Deployment-time chat fairness (SPEC.md): priority queues in front of the model calls of
//! this replica. The per-user rate limit is shared by every replica (rate.rs); the priority
//! is a scheduling hint of the replica that runs the request, so it stays local.
//!
//! A request is classified when it arrives, by what its user asked within
//! `chat_fresh_user_window_minutes`: nothing → high priority, fewer than
//! `chat_heavy_user_threshold` requests → normal, more → low. Generations take one of
//! `chat_fairness_slots` slots; when none is free they wait in their priority's queue.
//! A freed slot goes to the highest non-empty queue, except every
//! `chat_fairness_starvation_interval`-th hand-over, which serves the lowest non-empty queue
//! first so heavy users are never starved. A waiter that gives up (stop while queued, client
//! gone) is skipped.

use std::collections::{HashMap, VecDeque};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use tokio::sync::oneshot;

/// The deployment's fairness settings.
#[derive(Debug, Clone)]
pub struct FairnessConfig {
    pub fresh_window: Duration,
    pub heavy_threshold: u32,
    pub starvation_interval: u32,
    pub slots: usize,
}

impl FairnessConfig {
    pub fn from_config(c: &docchat_common::Config) -> FairnessConfig {
        FairnessConfig {
            fresh_window: Duration::from_secs(c.chat_fresh_user_window_minutes.saturating_mul(60)),
            heavy_threshold: c.chat_heavy_user_threshold,
            starvation_interval: c.chat_fairness_starvation_interval.max(1),
            slots: c.chat_fairness_slots.max(1),
        }
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum Priority {
    High = 0,
    Normal = 1,
    Low = 2,
}

impl Priority {
    /// The metrics' label.
    pub fn name(self) -> &'static str {
        match self {
            Priority::High => "high",
            Priority::Normal => "normal",
            Priority::Low => "low",
        }
    }
}

/// Where time comes from; tests move it by hand.
pub trait Clock: Send + Sync {
    fn now(&self) -> Instant;
}

pub struct SystemClock;

impl Clock for SystemClock {
    fn now(&self) -> Instant {
        Instant::now()
    }
}

struct Waiter {
    tx: oneshot::Sender<Permit>,
}

#[derive(Default)]
struct State {
    /// Arrival times of each user's requests, as far back as the longer window.
    arrivals: HashMap<String, VecDeque<Instant>>,
    queues: [VecDeque<Waiter>; 3],
    busy: usize,
    handed_over: u64,
}

/// The fairness gate of one replica.
#[derive(Clone)]
pub struct Fairness {
    config: Arc<FairnessConfig>,
    clock: Arc<dyn Clock>,
    state: Arc<Mutex<State>>,
}

/// A slot; dropping it hands the slot to the next waiter.
pub struct Permit {
    gate: Option<Fairness>,
}

impl Drop for Permit {
    fn drop(&mut self) {
        if let Some(gate) = self.gate.take() {
            gate.release();
        }
    }
}

impl Fairness {
    pub fn new(config: FairnessConfig, clock: Arc<dyn Clock>) -> Fairness {
        Fairness {
            config: Arc::new(config),
            clock,
            state: Arc::new(Mutex::new(State::default())),
        }
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Counts a request of `user_id` (the rate limit was checked before, see rate.rs): the
    /// priority it queues with.
    pub fn admit(&self, user_id: &str) -> Priority {
        let now = self.clock.now();
        let keep = self.config.fresh_window;
        let mut state = self.lock();
        let arrivals = state.arrivals.entry(user_id.to_owned()).or_default();
        while arrivals
            .front()
            .is_some_and(|t| now.saturating_duration_since(*t) >= keep)
        {
            arrivals.pop_front();
        }
        let recent = arrivals.len();
        arrivals.push_back(now);
        // Forget users who went quiet, so the map does not grow without bound.
        if state.arrivals.len() > 10_000 {
            state.arrivals.retain(|_, a| {
                a.back()
                    .is_some_and(|t| now.saturating_duration_since(*t) < keep)
            });
        }
        if recent == 0 {
            Priority::High
        } else if recent < self.config.heavy_threshold as usize {
            Priority::Normal
        } else {
            Priority::Low
        }
    }

    /// Waits for a slot. Dropping the future gives up the place in the queue.
    pub async fn acquire(&self, priority: Priority) -> Permit {
        let rx = {
            let mut state = self.lock();
            if state.busy < self.config.slots && state.queues.iter().all(VecDeque::is_empty) {
                state.busy += 1;
                return self.permit();
            }
            let (tx, rx) = oneshot::channel();
            state.queues[priority as usize].push_back(Waiter { tx });
            rx
        };
        match rx.await {
            Ok(permit) => permit,
            // The gate is gone (shutting down): run without a slot.
            Err(_) => Permit { gate: None },
        }
    }

    fn permit(&self) -> Permit {
        Permit {
            gate: Some(self.clone()),
        }
    }

    fn release(&self) {
        let mut state = self.lock();
        loop {
            let Some(waiter) = self.next_waiter(&mut state) else {
                state.busy = state.busy.saturating_sub(1);
                return;
            };
            // The slot passes straight to the waiter; `busy` is unchanged.
            match waiter.tx.send(self.permit()) {
                Ok(()) => return,
                Err(mut permit) => {
                    // The waiter gave up: take the slot back without recursing into release.
                    permit.gate = None;
                }
            }
        }
    }

    fn next_waiter(&self, state: &mut State) -> Option<Waiter> {
        if state.queues.iter().all(VecDeque::is_empty) {
            return None;
        }
        state.handed_over += 1;
        let rotate = state
            .handed_over
            .is_multiple_of(u64::from(self.config.starvation_interval));
        let order: [usize; 3] = if rotate { [2, 1, 0] } else { [0, 1, 2] };
        order.into_iter().find_map(|q| state.queues[q].pop_front())
    }

    /// Requests waiting for a slot, by priority (high, normal, low).
    pub fn queued(&self) -> [usize; 3] {
        let state = self.lock();
        [0, 1, 2].map(|q| state.queues[q].len())
    }
}

#[cfg(test)]
#[allow(clippy::disallowed_methods, reason = "test tasks end with the test")]
mod tests {
    use super::*;

    #[derive(Default)]
    struct FakeClock(Mutex<Option<Instant>>, Mutex<Duration>);

    impl FakeClock {
        fn advance(&self, d: Duration) {
            *self.1.lock().unwrap() += d;
        }
    }

    impl Clock for FakeClock {
        fn now(&self) -> Instant {
            let base = *self.0.lock().unwrap().get_or_insert_with(Instant::now);
            base + *self.1.lock().unwrap()
        }
    }

    fn config(slots: usize, interval: u32) -> FairnessConfig {
        FairnessConfig {
            fresh_window: Duration::from_secs(600),
            heavy_threshold: 3,
            starvation_interval: interval,
            slots,
        }
    }

    #[test]
    fn users_are_classified_by_recent_activity() {
        let clock = Arc::new(FakeClock::default());
        let gate = Fairness::new(config(1, 30), clock.clone());
        assert_eq!(gate.admit("u"), Priority::High);
        assert_eq!(gate.admit("u"), Priority::Normal);
        assert_eq!(gate.admit("u"), Priority::Normal);
        assert_eq!(gate.admit("u"), Priority::Low);
        // Quiet for longer than the fresh window: high again.
        clock.advance(Duration::from_secs(601));
        assert_eq!(gate.admit("u"), Priority::High);
    }

    /// Fills the queues while one slot is held, then records the order they are served in.
    async fn served_order(
        interval: u32,
        waiters: &[(Priority, &'static str)],
    ) -> Vec<&'static str> {
        let gate = Fairness::new(config(1, interval), Arc::new(SystemClock));
        let held = gate.acquire(Priority::High).await;
        let (tx, mut rx) = tokio::sync::mpsc::unbounded_channel();
        for (i, (priority, name)) in waiters.iter().copied().enumerate() {
            let gate2 = gate.clone();
            let tx = tx.clone();
            tokio::spawn(async move {
                let permit = gate2.acquire(priority).await;
                tx.send(name).unwrap();
                drop(permit);
            });
            // Queue in a known order: wait until this one is in.
            while gate.queued().iter().sum::<usize>() <= i {
                tokio::task::yield_now().await;
            }
        }
        drop(held);
        let mut order = Vec::new();
        for _ in waiters {
            order.push(rx.recv().await.unwrap());
        }
        order
    }

    #[tokio::test]
    async fn higher_priority_first_with_rotation_against_starvation() {
        use Priority::*;
        let waiters = [
            (Low, "low1"),
            (Low, "low2"),
            (Normal, "normal1"),
            (High, "high1"),
            (High, "high2"),
            (High, "high3"),
            (Normal, "normal2"),
        ];
        // No rotation in sight: strictly by priority, first come first served within one.
        assert_eq!(
            served_order(1000, &waiters).await,
            [
                "high1", "high2", "high3", "normal1", "normal2", "low1", "low2"
            ]
        );
        // Every 3rd hand-over serves the lowest non-empty queue first.
        assert_eq!(
            served_order(3, &waiters).await,
            [
                "high1", "high2", "low1", "high3", "normal1", "low2", "normal2"
            ]
        );
    }

    #[tokio::test]
    async fn a_waiter_that_gives_up_is_skipped() {
        let gate = Fairness::new(config(1, 30), Arc::new(SystemClock));
        let held = gate.acquire(Priority::High).await;
        let quitter = {
            let gate = gate.clone();
            tokio::spawn(async move { gate.acquire(Priority::High).await })
        };
        while gate.queued()[0] == 0 {
            tokio::task::yield_now().await;
        }
        quitter.abort();
        let _ = quitter.await;
        let next = {
            let gate = gate.clone();
            tokio::spawn(async move { gate.acquire(Priority::Low).await })
        };
        while gate.queued()[2] == 0 {
            tokio::task::yield_now().await;
        }
        drop(held);
        let permit = tokio::time::timeout(Duration::from_secs(5), next)
            .await
            .unwrap()
            .unwrap();
        drop(permit);
        // Every slot is free again.
        let again = tokio::time::timeout(Duration::from_secs(5), gate.acquire(Priority::Low))
            .await
            .unwrap();
        drop(again);
    }
}
