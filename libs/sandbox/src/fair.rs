//! Fair shares of the sandbox's slots (issue 37): a replica runs at most `total` sandboxes at
//! once, and one user at most `share` of them, so one user's flood of long tool calls leaves
//! room for everyone else's. A run that finds no slot it may take waits; a freed slot goes to
//! the waiting user who holds the fewest slots, ties broken by who has waited for a turn the
//! longest, and within a user first come first served (the same hand-over as chat fairness,
//! chat-service's fairness.rs, with users in place of priorities). A waiter that gives up
//! (cancelled run) is skipped.

use std::collections::{HashMap, VecDeque};
use std::sync::{Arc, Mutex, MutexGuard};

use tokio::sync::oneshot;

/// Slots in use and waiting, for readiness.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Load {
    pub total: u32,
    pub share: u32,
    pub in_use: u32,
    pub waiting: u32,
    /// Users with at least one waiting run.
    pub users_waiting: u32,
}

#[derive(Default)]
struct State {
    in_use: usize,
    /// Slots held, by user (no entry: none).
    held: HashMap<String, usize>,
    /// Each user's waiting runs, oldest first.
    waiting: HashMap<String, VecDeque<oneshot::Sender<Share>>>,
    /// Users with waiting runs, the one longest without a turn first.
    turns: VecDeque<String>,
}

/// The slots of one replica.
#[derive(Clone)]
pub struct FairSlots {
    total: usize,
    share: usize,
    state: Arc<Mutex<State>>,
}

/// A slot held for `user`; dropping it hands the slot on.
pub struct Share {
    slots: Option<FairSlots>,
    user: String,
}

impl Drop for Share {
    fn drop(&mut self) {
        if let Some(slots) = self.slots.take() {
            slots.release(&self.user);
        }
    }
}

impl FairSlots {
    /// `total` slots (at least one), at most `share` (clamped to 1..=total) held by one user.
    pub fn new(total: usize, share: usize) -> FairSlots {
        let total = total.max(1);
        FairSlots {
            total,
            share: share.clamp(1, total),
            state: Arc::new(Mutex::new(State::default())),
        }
    }

    fn lock(&self) -> MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Waits for a slot `user` may take. Dropping the future gives up the place in line.
    pub async fn acquire(&self, user: &str) -> Share {
        let rx = {
            let mut state = self.lock();
            // Free slots are always handed to eligible waiters at once (`dispatch`), so a
            // free slot here means nobody this run would overtake may use it.
            if state.in_use < self.total && state.held.get(user).copied().unwrap_or(0) < self.share
            {
                state.in_use += 1;
                *state.held.entry(user.to_owned()).or_default() += 1;
                return self.share_of(user);
            }
            let (tx, rx) = oneshot::channel();
            let queue = state.waiting.entry(user.to_owned()).or_default();
            queue.retain(|tx| !tx.is_closed());
            queue.push_back(tx);
            if queue.len() == 1 {
                state.turns.push_back(user.to_owned());
            }
            rx
        };
        match rx.await {
            Ok(share) => share,
            // Never: the sender lives in `state` as long as `self` does.
            Err(_) => Share {
                slots: None,
                user: user.to_owned(),
            },
        }
    }

    fn share_of(&self, user: &str) -> Share {
        Share {
            slots: Some(self.clone()),
            user: user.to_owned(),
        }
    }

    fn release(&self, user: &str) {
        let mut state = self.lock();
        state.in_use = state.in_use.saturating_sub(1);
        if let Some(n) = state.held.get_mut(user) {
            *n = n.saturating_sub(1);
            if *n == 0 {
                state.held.remove(user);
            }
        }
        self.dispatch(&mut state);
    }

    /// Hands free slots to waiters: each to the eligible user holding the fewest.
    fn dispatch(&self, state: &mut State) {
        while state.in_use < self.total {
            let next = state
                .turns
                .iter()
                .enumerate()
                .map(|(i, u)| (state.held.get(u).copied().unwrap_or(0), i))
                .filter(|(held, _)| *held < self.share)
                .min();
            let Some((_, i)) = next else { return };
            let Some(user) = state.turns.remove(i) else {
                return;
            };
            let Some(queue) = state.waiting.get_mut(&user) else {
                continue;
            };
            let waiter = queue.pop_front();
            let more = !queue.is_empty();
            if !more {
                state.waiting.remove(&user);
            }
            let Some(tx) = waiter else { continue };
            match tx.send(self.share_of(&user)) {
                Ok(()) => {
                    state.in_use += 1;
                    *state.held.entry(user.clone()).or_default() += 1;
                    if more {
                        // Served: to the back of the line of users.
                        state.turns.push_back(user);
                    }
                }
                Err(mut share) => {
                    // The waiter gave up: nothing was taken (and no release under our lock).
                    share.slots = None;
                    if more {
                        // Its user keeps the place it had.
                        state.turns.insert(i, user);
                    }
                }
            }
        }
    }

    /// Slots in use and waiting.
    pub fn load(&self) -> Load {
        let state = self.lock();
        let n = |v: usize| u32::try_from(v).unwrap_or(u32::MAX);
        Load {
            total: n(self.total),
            share: n(self.share),
            in_use: n(state.in_use),
            waiting: n(state
                .waiting
                .values()
                .map(|q| q.iter().filter(|tx| !tx.is_closed()).count())
                .sum()),
            users_waiting: n(state
                .waiting
                .values()
                .filter(|q| q.iter().any(|tx| !tx.is_closed()))
                .count()),
        }
    }
}

#[cfg(test)]
#[expect(
    clippy::disallowed_methods,
    reason = "the waiters are plain tasks that end with the test"
)]
mod tests {
    use std::time::Duration;

    use super::*;

    async fn waits(slots: &FairSlots, user: &str) -> bool {
        tokio::time::timeout(Duration::from_millis(30), slots.acquire(user))
            .await
            .is_err()
    }

    #[tokio::test]
    async fn one_user_holds_at_most_its_share() {
        let slots = FairSlots::new(4, 2);
        let _a1 = slots.acquire("a").await;
        let _a2 = slots.acquire("a").await;
        assert!(waits(&slots, "a").await, "a third run of a waits");
        // Others still find slots.
        let _b1 = slots.acquire("b").await;
        let _c1 = slots.acquire("c").await;
        assert_eq!(slots.load().in_use, 4);
        assert!(waits(&slots, "d").await, "all four slots are taken");
    }

    #[tokio::test]
    async fn a_freed_slot_goes_to_the_user_holding_fewest() {
        let slots = FairSlots::new(2, 2);
        let a1 = slots.acquire("a").await;
        let _a2 = slots.acquire("a").await;
        // a queues first, b after: b holds none, so b is served first.
        let a3 = tokio::spawn({
            let s = slots.clone();
            async move { s.acquire("a").await }
        });
        tokio::time::sleep(Duration::from_millis(20)).await;
        let b1 = tokio::spawn({
            let s = slots.clone();
            async move { s.acquire("b").await }
        });
        tokio::time::sleep(Duration::from_millis(20)).await;
        assert_eq!(slots.load().waiting, 2);
        assert_eq!(slots.load().users_waiting, 2);
        drop(a1);
        let b1 = tokio::time::timeout(Duration::from_secs(1), b1)
            .await
            .expect("b is served first")
            .unwrap();
        assert!(!a3.is_finished(), "a waits: it already holds a slot");
        drop(b1);
        tokio::time::timeout(Duration::from_secs(1), a3)
            .await
            .expect("then a")
            .unwrap();
    }

    #[tokio::test]
    async fn a_waiter_that_gives_up_is_skipped() {
        let slots = FairSlots::new(1, 1);
        let a = slots.acquire("a").await;
        assert!(waits(&slots, "b").await, "gives up after 30 ms");
        let c = tokio::spawn({
            let s = slots.clone();
            async move { s.acquire("c").await }
        });
        tokio::time::sleep(Duration::from_millis(20)).await;
        assert_eq!(slots.load().waiting, 1, "b's dropped wait does not count");
        drop(a);
        let c = tokio::time::timeout(Duration::from_secs(1), c)
            .await
            .expect("the slot skips b and goes to c")
            .unwrap();
        assert_eq!(slots.load().in_use, 1);
        drop(c);
        assert_eq!(slots.load().in_use, 0);
        let _again = slots.acquire("b").await;
    }
}
