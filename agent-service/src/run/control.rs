//! Control of a running agent (RunInput.control): stop kills running tools and keeps the
//! text; pause and resume gate the loop between steps; finish makes one last model call
//! with tool_choice none.

use std::sync::atomic::{AtomicBool, Ordering};

use tokio::sync::watch;
use tokio_util::sync::CancellationToken;

pub struct Control {
    stop: CancellationToken,
    finish: AtomicBool,
    paused: watch::Sender<bool>,
}

impl Default for Control {
    fn default() -> Self {
        Control {
            stop: CancellationToken::new(),
            finish: AtomicBool::new(false),
            paused: watch::channel(false).0,
        }
    }
}

impl Control {
    /// Applies one control word; unknown words are refused.
    pub fn apply(&self, word: &str) -> Result<(), String> {
        match word.trim() {
            "stop" => self.stop.cancel(),
            "finish" => {
                self.finish.store(true, Ordering::SeqCst);
                self.paused.send_replace(false);
            }
            "pause" => {
                self.paused.send_replace(true);
            }
            "resume" => {
                self.paused.send_replace(false);
            }
            other => {
                return Err(format!(
                    "unknown control {other:?}: pause, resume, stop or finish"
                ));
            }
        }
        Ok(())
    }

    pub fn stop_token(&self) -> &CancellationToken {
        &self.stop
    }

    pub fn stopped(&self) -> bool {
        self.stop.is_cancelled()
    }

    pub fn finishing(&self) -> bool {
        self.finish.load(Ordering::SeqCst)
    }

    /// Returns once not paused (or stopped).
    pub async fn wait_while_paused(&self) {
        let mut rx = self.paused.subscribe();
        loop {
            if !*rx.borrow_and_update() || self.stopped() {
                return;
            }
            tokio::select! {
                r = rx.changed() => if r.is_err() { return },
                () = self.stop.cancelled() => return,
            }
        }
    }
}
