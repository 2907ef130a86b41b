//! Control of replies being generated: pause, resume, stop, finish (SPEC.md's streaming
//! state table). Each generation registers its question here; a control call changes the
//! state, and the generating loop watches it. Calls reach the replica that generates through
//! `chat.control`, broadcast to every replica: a replica without the question ignores it.

use docchat_common::Caller;
use docchat_common::bus::{EventBus, envelope, topics};
use docchat_common::error::{ApiError, ApiResult};
use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use docchat_common::bus::EventHandler;
use docchat_proto::events::v1::{ChatControl, Envelope};
use prost::Message;
use tokio::sync::{Notify, watch};

use crate::marks::Marks;

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

/// Where a generation's progress is written (limits.rs).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    /// A chat completion: its `active_completions` row.
    Completion,
    /// A background response of the compatible API: its `background_responses` row.
    Background,
}

struct Running {
    state: watch::Sender<State>,
    progress: Arc<Mutex<Progress>>,
    /// Lines of the text stored in the generation's row: the client is sent no more.
    stored: watch::Sender<usize>,
    kind: Kind,
}

/// A generation's text so far, and whether it changed since it was last taken; with what
/// its model calls have used (JSON, written once, with the next text) and where each line
/// taken so far ends. Sealed when the generation ends: no more lines are cut.
#[derive(Default)]
struct Progress {
    text: String,
    changed: bool,
    usage: Option<String>,
    marks: Marks,
    sealed: bool,
}

/// What the progress writer writes of one generation.
pub struct Grown {
    pub question_id: String,
    pub kind: Kind,
    pub text: String,
    /// The stored form of the marks, the last one at the end of `text`.
    pub marks: String,
    /// Lines of `text`.
    pub lines: usize,
    pub usage: Option<String>,
}

impl Controls {
    /// Registers a generation; dropping the guard unregisters it.
    pub fn register(
        &self,
        question_id: &str,
        kind: Kind,
    ) -> (watch::Receiver<State>, Registration) {
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
                    kind,
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

    /// Records that the first `lines` lines of `question_id`'s text are stored in its row.
    pub fn mark_stored(&self, question_id: &str, lines: usize) {
        let running = self.running.lock().unwrap_or_else(|p| p.into_inner());
        if let Some(r) = running.get(question_id) {
            r.stored.send_if_modified(|at| {
                let moved = lines > *at;
                *at = (*at).max(lines);
                moved
            });
        }
    }

    /// When `question_id` is generated here: the count of its lines stored, which changes
    /// as more are and closes when the generation ends (a re-attached client's wake-up).
    pub fn follow(&self, question_id: &str) -> Option<watch::Receiver<usize>> {
        let running = self.running.lock().unwrap_or_else(|p| p.into_inner());
        running.get(question_id).map(|r| r.stored.subscribe())
    }

    /// The text of the generations that grew since the last call, each ending a line.
    pub fn take_progress(&self) -> Vec<Grown> {
        let running = self.running.lock().unwrap_or_else(|p| p.into_inner());
        running
            .iter()
            .filter_map(|(id, r)| {
                let mut progress = r.progress.lock().unwrap_or_else(|p| p.into_inner());
                if progress.sealed || !std::mem::take(&mut progress.changed) {
                    return None;
                }
                let end = progress.text.len();
                progress.marks.push(end);
                Some(Grown {
                    question_id: id.clone(),
                    kind: r.kind,
                    text: progress.text.clone(),
                    marks: progress.marks.encode(),
                    lines: progress.marks.len(),
                    // Written once, with the first text after it was recorded.
                    usage: progress.usage.take(),
                })
            })
            .collect()
    }

    /// The generations running here of `kind`.
    pub fn running_of(&self, kind: Kind) -> Vec<String> {
        self.running
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .iter()
            .filter(|(_, r)| r.kind == kind)
            .map(|(id, _)| id.clone())
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

    /// The generation's lines, for the client it streams to.
    pub fn lines(&self) -> Lines {
        Lines {
            progress: self.progress.clone(),
            stored: self.stored.clone(),
        }
    }
}

/// A generation's lines as its client is sent them: only lines stored in its row while it
/// runs ([`Lines::stored`]), all of them once it is sealed and its reply stored.
pub struct Lines {
    progress: Arc<Mutex<Progress>>,
    stored: watch::Receiver<usize>,
}

impl Lines {
    /// Waits until more lines are stored; false once no more will be (unregistered).
    pub async fn changed(&mut self) -> bool {
        self.stored.changed().await.is_ok()
    }

    /// How many lines are stored in the generation's row.
    pub fn stored(&mut self) -> usize {
        *self.stored.borrow_and_update()
    }

    /// Lines `from..=upto` (1-based) of `text`, as cut so far; a line that does not fit
    /// `text` is left out.
    pub fn texts(&self, text: &str, from: usize, upto: usize) -> Vec<(usize, String)> {
        let progress = self.progress.lock().unwrap_or_else(|p| p.into_inner());
        (from..=upto)
            .filter_map(|n| progress.marks.line(text, n).map(|l| (n, l.to_owned())))
            .collect()
    }

    /// Ends the cutting: the lines of the final `text` (those cut while it still begins
    /// with what they were cut from, then the rest as one line), to store with the reply.
    pub fn seal(&self, text: &str) -> Marks {
        let mut progress = self.progress.lock().unwrap_or_else(|p| p.into_inner());
        progress.sealed = true;
        progress.marks.closed(&progress.text, text)
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

/// Applies `action` to generation `id`: here if this replica runs it, else on the replica
/// that does, through `chat.control` (every replica hears it; one without it ignores it).
pub async fn send(
    controls: &Controls,
    bus: &dyn EventBus,
    caller: &Caller,
    id: &str,
    action: Action,
) -> ApiResult<()> {
    if controls.apply(id, action) {
        return Ok(());
    }
    let event = envelope(
        topics::CHAT_CONTROL,
        &caller.user_id,
        &ChatControl {
            question_id: id.to_owned(),
            action: action.as_str().to_owned(),
        },
    );
    bus.publish(&event)
        .await
        .map_err(|e| ApiError::internal("publishing a control", e))
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
        let (rx, guard) = controls.register("q", Kind::Completion);
        assert!(controls.apply("q", Action::Pause));
        assert_eq!(*rx.borrow(), State::Paused);
        drop(guard);
        assert!(!controls.apply("q", Action::Resume));
    }

    #[test]
    fn stored_lines_only_grow() {
        let controls = Controls::default();
        let (_rx, guard) = controls.register("q", Kind::Completion);
        let mut lines = guard.lines();
        let follower = controls.follow("q").unwrap();
        controls.mark_stored("q", 5);
        assert!(follower.has_changed().unwrap());
        assert_eq!(lines.stored(), 5);
        controls.mark_stored("q", 3);
        assert!(!lines.stored.has_changed().unwrap(), "never backwards");
        controls.mark_stored("other", 9);
        assert_eq!(lines.stored(), 5);
        assert!(controls.follow("other").is_none());
        drop(guard);
        assert!(follower.has_changed().is_err(), "ends with the generation");
    }

    #[test]
    fn each_take_ends_a_line_until_sealed() {
        let controls = Controls::default();
        let (_rx, guard) = controls.register("q", Kind::Background);
        assert!(controls.take_progress().is_empty());
        guard.record("Hello ");
        guard.spent("{}".into());
        guard.record("world");
        let taken: Vec<_> = controls
            .take_progress()
            .into_iter()
            .map(|g| (g.question_id, g.kind, g.text, g.marks, g.lines, g.usage))
            .collect();
        assert_eq!(
            taken,
            [(
                "q".to_owned(),
                Kind::Background,
                "Hello world".to_owned(),
                "11".to_owned(),
                1,
                Some("{}".to_owned())
            )]
        );
        assert!(controls.take_progress().is_empty());
        guard.record("!");
        let again = controls.take_progress();
        assert_eq!((again[0].marks.as_str(), again[0].lines), ("11,12", 2));
        let lines = guard.lines();
        assert_eq!(
            lines.texts("Hello world!", 1, 2),
            [(1, "Hello world".to_owned()), (2, "!".to_owned())]
        );
        guard.record(" Bye.");
        // Sealed: the rest is one line of the final text, and nothing more is taken.
        assert_eq!(lines.seal("Hello world! Bye.").encode(), "11,12,17");
        assert!(controls.take_progress().is_empty());
        assert_eq!(controls.running_of(Kind::Background), ["q".to_owned()]);
        assert!(controls.running_of(Kind::Completion).is_empty());
        drop(guard);
        assert!(controls.take_progress().is_empty());
    }
}
