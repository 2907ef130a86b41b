//! Replies as numbered lines, so a client that lost its connection can come back to one.
//!
//! A reply reaches its client in the pieces the progress writer (limits.rs) cuts: each write
//! of the text so far ends a line, and only written lines are sent (generate.rs). Where each
//! line ends is recorded with the text ([`Marks`], in the progress row while the reply is
//! generated and with the stored reply after), so any replica reads the same lines from the
//! database: line `n` is the text between the (n-1)th and the nth mark. A streamed
//! completion's lines are numbered (`seq`): 1 the question's id, then the text, then the
//! final line; [`crate::attach`] answers them again from any `seq` on.

use std::future::Future;
use std::time::Duration;

use docchat_common::error::{ApiError, ApiResult};
use tokio::sync::mpsc;
use tokio_util::sync::CancellationToken;
use tonic::Status;

use crate::control::Controls;
use crate::limits::PROGRESS_GAP;

/// Where each line of a text ends: byte offsets, strictly ascending, on char boundaries.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Marks(Vec<usize>);

impl Marks {
    /// The stored form (`12,40,41`); absent or empty is no line.
    pub fn parse(stored: Option<&str>) -> ApiResult<Marks> {
        let Some(stored) = stored.filter(|s| !s.is_empty()) else {
            return Ok(Marks::default());
        };
        let mut ends = Vec::with_capacity(stored.len() / 3);
        for part in stored.split(',') {
            let end: usize = part.parse().map_err(|_| {
                ApiError::internal("reading a reply's line marks", format!("bad mark {part:?}"))
            })?;
            if ends.last().is_some_and(|last| *last >= end) {
                return Err(ApiError::internal(
                    "reading a reply's line marks",
                    "marks out of order",
                ));
            }
            ends.push(end);
        }
        Ok(Marks(ends))
    }

    pub fn encode(&self) -> String {
        let mut out = String::with_capacity(self.0.len() * 4);
        for (i, end) in self.0.iter().enumerate() {
            if i > 0 {
                out.push(',');
            }
            out.push_str(&end.to_string());
        }
        out
    }

    /// Ends a line at `end` (ignored unless past the last line's end).
    pub fn push(&mut self, end: usize) {
        if end > self.end() {
            self.0.push(end);
        }
    }

    pub fn len(&self) -> usize {
        self.0.len()
    }

    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }

    /// Where the last line ends (0 without lines).
    pub fn end(&self) -> usize {
        self.0.last().copied().unwrap_or(0)
    }

    /// Line `n` (1-based) of `text`; None past the last line, or when the marks do not fit
    /// `text`.
    pub fn line<'a>(&self, text: &'a str, n: usize) -> Option<&'a str> {
        let end = *self.0.get(n.checked_sub(1)?)?;
        let start = if n == 1 { 0 } else { self.0[n - 2] };
        text.get(start..end)
    }

    /// The lines of the finished `text`: these marks as far as `text` still begins with
    /// `seen` (the text they were cut from), then the rest of `text` as one more line.
    pub fn closed(&self, seen: &str, text: &str) -> Marks {
        let common = seen
            .bytes()
            .zip(text.bytes())
            .take_while(|(a, b)| a == b)
            .count();
        let mut ends: Vec<usize> = self
            .0
            .iter()
            .copied()
            .take_while(|end| *end <= common && text.is_char_boundary(*end))
            .collect();
        if text.len() > ends.last().copied().unwrap_or(0) {
            ends.push(text.len());
        }
        Marks(ends)
    }
}

/// The `seq` of a streamed completion's line of text `n` (1-based): 1 is the question's id.
pub fn text_seq(n: usize) -> u64 {
    n as u64 + 1
}

/// The `seq` of the final line of a reply with `lines` lines of text.
pub fn final_seq(lines: usize) -> u64 {
    lines as u64 + 2
}

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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn marks_round_trip_and_cut_lines() {
        let text = "Hello wörld, again";
        let mut marks = Marks::default();
        marks.push(6);
        marks.push(6);
        marks.push(13);
        assert_eq!(marks.encode(), "6,13");
        let back = Marks::parse(Some("6,13")).unwrap();
        assert_eq!(back, marks);
        assert_eq!(back.line(text, 1), Some("Hello "));
        assert_eq!(back.line(text, 2), Some("wörld,"));
        assert_eq!(back.line(text, 3), None);
        assert_eq!(back.line(text, 0), None);
        assert_eq!(Marks::parse(None).unwrap(), Marks::default());
        assert!(Marks::parse(Some("4,2")).is_err());
        assert!(Marks::parse(Some("4,x")).is_err());
    }

    #[test]
    fn closing_keeps_what_the_final_text_still_begins_with() {
        let marks = Marks::parse(Some("3,6")).unwrap();
        // The final text extends what was seen: one more line for the rest.
        assert_eq!(marks.closed("abcdef", "abcdefgh").encode(), "3,6,8");
        // Nothing more: the lines stay.
        assert_eq!(marks.closed("abcdef", "abcdef").encode(), "3,6");
        // A final text that differs from what was cut keeps the lines it agrees with.
        assert_eq!(marks.closed("abcdef", "abcxyz!").encode(), "3,7");
        assert_eq!(Marks::default().closed("", "").encode(), "");
    }
}
