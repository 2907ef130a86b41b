//! The jobs this replica's workers run, so a cancel arriving here reaches its worker.

use std::collections::HashMap;
use std::sync::Arc;

use tokio_util::sync::CancellationToken;

/// The jobs this replica's workers run, so a cancel arriving here stops its worker at once
/// (other replicas' workers notice at their next heartbeat, when the row is no longer theirs).
#[derive(Clone, Default)]
pub struct Running(Arc<std::sync::Mutex<HashMap<String, CancellationToken>>>);

/// Removes its job from [`Running`] when the worker is done with it.
pub(super) struct Registered {
    running: Running,
    job_id: String,
}

impl Drop for Registered {
    fn drop(&mut self) {
        self.running.lock().remove(&self.job_id);
    }
}

impl Running {
    fn lock(&self) -> std::sync::MutexGuard<'_, HashMap<String, CancellationToken>> {
        self.0
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    pub(super) fn register(&self, job_id: &str, stop: &CancellationToken) -> Registered {
        self.lock().insert(job_id.to_owned(), stop.clone());
        Registered {
            running: self.clone(),
            job_id: job_id.to_owned(),
        }
    }

    /// Stops the worker running `job_id` here, if one does.
    pub fn stop(&self, job_id: &str) {
        if let Some(token) = self.lock().get(job_id) {
            token.cancel();
        }
    }
}
