//! Following a generation's lines (marks.rs) as they are stored, from any replica: a
//! re-attached reply (attach.rs), a background response (background.rs).

use std::future::Future;
use std::time::Duration;

use docchat_common::error::{ApiError, ApiResult};
use tokio::sync::mpsc;
use tokio_util::sync::CancellationToken;
use tonic::Status;

use crate::control::Controls;
use crate::limits::PROGRESS_GAP;
use crate::marks::Marks;

/// How often a reply generated on another replica is read again by a client following it.
pub const POLL: Duration = PROGRESS_GAP;

/// A reply (or background response) as read from the database at one moment.
pub struct Snapshot<E> {
    pub text: String,
    pub marks: Marks,
    /// How it ended, once it has.
    pub last: Option<E>,
}

impl<E> Snapshot<E> {
    /// Marks that do not fit their text are a broken row: an error, not a wrong stream.
    pub fn checked(self) -> ApiResult<Snapshot<E>> {
        let fits = self.marks.end() <= self.text.len()
            && (1..=self.marks.len()).all(|n| self.marks.line(&self.text, n).is_some());
        if !fits {
            return Err(ApiError::internal(
                "reading a reply's lines",
                "its marks do not fit its text",
            ));
        }
        Ok(self)
    }
}

/// A client following a generation's lines, from whichever replica: each round subscribes
/// before it reads — when the generation runs on this replica, to its count of stored
/// lines ([`Controls::follow`]), which moves after each write and closes when it ends;
/// otherwise to a timer of [`POLL`] (one primary-key read per following client per tick,
/// nothing for generations nobody follows). A line stored between the subscription and the
/// read is in the read, and the wake-up it causes reads nothing new: lines go out by number,
/// so none is lost or sent twice. The client going away ends only the following.
pub struct Follower<'a, T> {
    pub controls: &'a Controls,
    /// The generation's id (a question's, a background response's).
    pub id: &'a str,
    pub shutdown: &'a CancellationToken,
    pub tx: mpsc::Sender<Result<T, Status>>,
}

impl<T> Follower<'_, T> {
    /// Sends the lines after `after` as `line` makes them, then the end as `last` makes it
    /// (from it and the count of lines; None: the client has it), reading with `read`;
    /// `between` runs after each subscription, before its read (where the tests store a
    /// line).
    pub async fn run<E, R, RF, H, HF>(
        self,
        after: usize,
        mut read: R,
        mut between: H,
        line: impl Fn(usize, String) -> T,
        last: impl FnOnce(E, usize) -> Option<T>,
    ) where
        R: FnMut() -> RF,
        RF: Future<Output = ApiResult<Snapshot<E>>>,
        H: FnMut() -> HF,
        HF: Future<Output = ()>,
    {
        let mut sent = after;
        loop {
            let mut local = self.controls.follow(self.id);
            between().await;
            let snapshot = match read().await.and_then(Snapshot::checked) {
                Ok(s) => s,
                Err(e) => {
                    let _ = self.tx.send(Err(Status::from(e))).await;
                    return;
                }
            };
            for n in sent + 1..=snapshot.marks.len() {
                let Some(text) = snapshot.marks.line(&snapshot.text, n) else {
                    break;
                };
                if self.tx.send(Ok(line(n, text.to_owned()))).await.is_err() {
                    return;
                }
                sent = n;
            }
            if let Some(end) = snapshot.last {
                if let Some(end) = last(end, snapshot.marks.len()) {
                    let _ = self.tx.send(Ok(end)).await;
                }
                return;
            }
            tokio::select! {
                () = self.tx.closed() => return,
                () = self.shutdown.cancelled() => return,
                () = async {
                    match local.as_mut() {
                        // Moved, or closed (the generation ended): read again either way.
                        Some(stored) => { let _ = stored.changed().await; }
                        None => tokio::time::sleep(POLL).await,
                    }
                } => {}
            }
        }
    }
}
