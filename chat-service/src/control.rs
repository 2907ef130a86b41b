//! Control of replies being generated: pause, resume, stop, finish (SPEC.md's streaming
//! state table). Each generation registers its question here; a control call changes the
//! state, and the generating loop watches it. Calls reach the replica that generates through
//! `chat.control`, broadcast to every replica: a replica without the question ignores it.

use docchat_common::bus::topics;
use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use docchat_common::bus::EventHandler;
use docchat_proto::events::v1::{ChatControl, Envelope};
use prost::Message;
use tokio::sync::{Notify, watch};

pub const CONTROL_GROUP: &str = "chat.control";

/// Where a reply's generation stands.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum State {
    Streaming,
    /// Held: nothing is read from the model, nothing sent.
    Paused,
    /// Cancelled for good; the partial reply is kept.
    Stopped,
    /// The model may end its current thought, then the reply ends.
    Finishing,
}

/// A control action of the REST API.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Action {
    Pause,
    Resume,
    Stop,
    Finish,
}

impl Action {
    pub fn parse(action: &str) -> Option<Action> {
        Some(match action {
            "pause" => Action::Pause,
            "resume" => Action::Resume,
            "stop" => Action::Stop,
            "finish" => Action::Finish,
            _ => return None,
        })
    }

    pub fn as_str(self) -> &'static str {
        match self {
            Action::Pause => "pause",
            Action::Resume => "resume",
            Action::Stop => "stop",
            Action::Finish => "finish",
        }
    }

    /// The state after this action. Stopped is final; finish while paused finishes (the
    /// reply resumes to end its thought); resume only leaves a pause.
    pub fn apply(self, state: State) -> State {
        match (self, state) {
            (_, State::Stopped) => State::Stopped,
            (Action::Stop, _) => State::Stopped,
            (Action::Pause, State::Streaming) => State::Paused,
            (Action::Pause, other) => other,
            (Action::Resume, State::Paused) => State::Streaming,
            (Action::Resume, other) => other,
            (Action::Finish, _) => State::Finishing,
        }
    }
}

/// The generations running on this replica, by question id.
#[derive(Clone, Default)]
pub struct Controls {
    running: Arc<Mutex<HashMap<String, Running>>>,
    /// Rung when a generation's text grows: the progress writer (limits.rs) wakes.
    grown: Arc<Notify>,
}

struct Running {
    state: watch::Sender<State>,
    progress: Arc<Mutex<Progress>>,
    /// Bytes of the text stored in the question's row: the client is sent no more.
    stored: watch::Sender<usize>,
}

/// A generation's text so far, and whether it changed since it was last taken; with what
/// its model calls have used (JSON, written once, with the next text).
#[derive(Default)]
struct Progress {
    text: String,
    changed: bool,
    usage: Option<String>,
}

/// What the progress writer writes of one generation.
pub struct Grown {
    pub question_id: String,
    pub text: String,
    pub usage: Option<String>,
}

impl Controls {
    /// Registers a generation; dropping the guard unregisters it.
    pub fn register(&self, question_id: &str) -> (watch::Receiver<State>, Registration) {
        let (tx, rx) = watch::channel(State::Streaming);
        let (stored, stored_rx) = watch::channel(0);
        let progress = Arc::new(Mutex::new(Progress::default()));
        self.running
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .insert(
                question_id.to_owned(),
                Running {
                    state: tx,
                    progress: progress.clone(),
                    stored,
                },
            );
        (
            rx,
            Registration {
                controls: self.clone(),
                question_id: question_id.to_owned(),
                progress,
                stored: stored_rx,
            },
        )
    }

    /// Waits until a generation's text grew (a wake-up may be left from before).
    pub async fn grown(&self) {
        self.grown.notified().await;
    }

    /// Records that the first `bytes` of `question_id`'s text are stored in its row.
    pub fn mark_stored(&self, question_id: &str, bytes: usize) {
        let running = self.running.lock().unwrap_or_else(|p| p.into_inner());
        if let Some(r) = running.get(question_id) {
            r.stored.send_if_modified(|at| {
                let moved = bytes > *at;
                *at = (*at).max(bytes);
                moved
            });
        }
    }

    /// The text of the generations that grew since the last call.
    pub fn take_progress(&self) -> Vec<Grown> {
        let running = self.running.lock().unwrap_or_else(|p| p.into_inner());
        running
            .iter()
            .filter_map(|(id, r)| {
                let mut progress = r.progress.lock().unwrap_or_else(|p| p.into_inner());
                std::mem::take(&mut progress.changed).then(|| Grown {
                    question_id: id.clone(),
                    text: progress.text.clone(),
                    // Written once, with the first text after it was recorded.
                    usage: progress.usage.take(),
                })
            })
            .collect()
    }

    /// The questions generating on this replica.
    pub fn running_ids(&self) -> Vec<String> {
        self.running
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .keys()
            .cloned()
            .collect()
    }

    /// Applies an action if the question is generating here; says whether it was.
    pub fn apply(&self, question_id: &str, action: Action) -> bool {
        let running = self.running.lock().unwrap_or_else(|p| p.into_inner());
        match running.get(question_id) {
            Some(r) => {
                r.state.send_modify(|state| *state = action.apply(*state));
                true
            }
            None => false,
        }
    }
}

/// Keeps a generation registered while it lives.
pub struct Registration {
    controls: Controls,
    question_id: String,
    progress: Arc<Mutex<Progress>>,
    stored: watch::Receiver<usize>,
}

impl Registration {
    /// Adds generated text to the progress the lease renewal writes (limits.rs), and wakes
    /// the writer.
    pub fn record(&self, text: &str) {
        let mut progress = self.progress.lock().unwrap_or_else(|p| p.into_inner());
        progress.text.push_str(text);
        progress.changed = true;
        drop(progress);
        self.controls.grown.notify_one();
    }

    /// Records what the generation's model calls have used (written with its text).
    pub fn spent(&self, usage: String) {
        self.progress
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .usage = Some(usage);
    }

    /// How many bytes of the recorded text are stored in the question's row.
    pub fn stored(&self) -> watch::Receiver<usize> {
        self.stored.clone()
    }
}

impl Drop for Registration {
    fn drop(&mut self) {
        self.controls
            .running
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .remove(&self.question_id);
    }
}

/// Applies `chat.control` events from other replicas.
pub struct ControlHandler(pub Controls);

#[async_trait::async_trait]
impl EventHandler for ControlHandler {
    async fn handle(&self, event: &Envelope) -> anyhow::Result<()> {
        if event.r#type == topics::CHAT_CONTROL {
            let control = ChatControl::decode(event.payload.as_slice())?;
            if let Some(action) = Action::parse(&control.action) {
                self.0.apply(&control.question_id, action);
            }
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn state_table() {
        use Action::*;
        use State::*;
        assert_eq!(Pause.apply(Streaming), Paused);
        assert_eq!(Resume.apply(Paused), Streaming);
        assert_eq!(Stop.apply(Streaming), Stopped);
        assert_eq!(Stop.apply(Paused), Stopped);
        assert_eq!(Finish.apply(Streaming), Finishing);
        assert_eq!(Finish.apply(Paused), Finishing);
        assert_eq!(Resume.apply(Stopped), Stopped);
        assert_eq!(Pause.apply(Finishing), Finishing);
        assert_eq!(Resume.apply(Streaming), Streaming);
    }

    #[test]
    fn registrations_end_with_their_guard() {
        let controls = Controls::default();
        let (rx, guard) = controls.register("q");
        assert!(controls.apply("q", Action::Pause));
        assert_eq!(*rx.borrow(), State::Paused);
        drop(guard);
        assert!(!controls.apply("q", Action::Resume));
    }

    #[test]
    fn stored_bytes_only_grow() {
        let controls = Controls::default();
        let (_rx, guard) = controls.register("q");
        let mut stored = guard.stored();
        controls.mark_stored("q", 5);
        assert!(stored.has_changed().unwrap());
        assert_eq!(*stored.borrow_and_update(), 5);
        controls.mark_stored("q", 3);
        assert!(!stored.has_changed().unwrap(), "never backwards");
        controls.mark_stored("other", 9);
        assert_eq!(*stored.borrow(), 5);
    }

    #[test]
    fn progress_is_taken_once_per_change() {
        let controls = Controls::default();
        let (_rx, guard) = controls.register("q");
        assert!(controls.take_progress().is_empty());
        guard.record("Hello ");
        guard.spent("{}".into());
        guard.record("world");
        let taken: Vec<_> = controls
            .take_progress()
            .into_iter()
            .map(|g| (g.question_id, g.text, g.usage))
            .collect();
        assert_eq!(
            taken,
            [(
                "q".to_owned(),
                "Hello world".to_owned(),
                Some("{}".to_owned())
            )]
        );
        assert!(controls.take_progress().is_empty());
        drop(guard);
        assert!(controls.take_progress().is_empty());
    }
}
