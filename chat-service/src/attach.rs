//! Coming back to a reply (`GET /messages/{question_id}/stream?after=`): its lines after
//! `after`, from whichever replica the request reaches, then the live lines as they are
//! stored, then the final line. Everything is read from the database — the progress row
//! while the reply is generated, the stored reply after (stream.rs numbers both alike) —
//! so what any replica answers is what the generating replica's own client was sent; how
//! a client follows live lines without losing or doubling one is [`Follower`]'s.

use std::future::Future;

use docchat_common::Caller;
use docchat_common::error::ApiResult;
use docchat_proto::chat::v1 as pb;
use docchat_proto::chat::v1::completion_event::Event;
use sea_orm::{ColumnTrait, DatabaseConnection, EntityTrait, QueryFilter, QueryOrder};
use tokio::sync::mpsc;
use tokio_util::sync::CancellationToken;
use tokio_util::task::TaskTracker;
use tonic::Status;

use crate::completions::event;
use crate::control::Controls;
use crate::entities::{active_completions, messages};
use crate::stream::{Follower, Marks, Snapshot, final_seq, text_seq};

/// Lines buffered towards a re-attached client.
const BUFFER: usize = 16;

pub type Lines = mpsc::Receiver<Result<pb::CompletionEvent, Status>>;

/// What re-attaching needs; cheap to clone.
#[derive(Clone)]
pub struct Attach {
    pub db: DatabaseConnection,
    pub controls: Controls,
    /// Where followers run (they end at shutdown).
    pub tasks: TaskTracker,
    /// The service's shutdown: re-attached streams end (the client can come back).
    pub shutdown: CancellationToken,
}

impl Attach {
    /// The lines of the caller's question `question_id` after `after` (404 when it is not
    /// the caller's question).
    pub async fn attach(&self, caller: &Caller, question_id: &str, after: u64) -> ApiResult<Lines> {
        crate::replies::question(&self.db, caller, question_id).await?;
        let (tx, rx) = mpsc::channel(BUFFER);
        let me = self.clone();
        let question_id = question_id.to_owned();
        self.tasks.spawn(async move {
            me.follow(&question_id, after, tx, || async {}).await;
        });
        Ok(rx)
    }

    /// Sends `question_id`'s lines after `after` to `tx` until the final one or until `tx`
    /// closes; `between` runs after each subscription, before its read.
    pub async fn follow<H, F>(
        &self,
        question_id: &str,
        after: u64,
        tx: mpsc::Sender<Result<pb::CompletionEvent, Status>>,
        between: H,
    ) where
        H: FnMut() -> F,
        F: Future<Output = ()>,
    {
        if after < 1
            && tx
                .send(Ok(event(Event::QuestionId(question_id.to_owned()), 1)))
                .await
                .is_err()
        {
            return;
        }
        // Seq 1 is the question's id: text line n is seq n + 1.
        let after_lines = usize::try_from(after.saturating_sub(1)).unwrap_or(usize::MAX);
        Follower {
            controls: &self.controls,
            id: question_id,
            shutdown: &self.shutdown,
            tx,
        }
        .run(
            after_lines,
            || read(&self.db, question_id),
            between,
            |n, text| event(Event::Delta(text), text_seq(n)),
            |last, lines| (final_seq(lines) > after).then(|| event(last, final_seq(lines))),
        )
        .await;
    }
}

/// Where `question_id`'s reply stands. The progress row is read before the reply: the
/// transaction that stores a reply deletes its row, so a row gone means a reply stored (or
/// none at all: it could not be stored).
async fn read(db: &DatabaseConnection, question_id: &str) -> ApiResult<Snapshot<Event>> {
    if let Some(row) = active_completions::Entity::find_by_id(question_id.to_owned())
        .one(db)
        .await?
    {
        return Ok(Snapshot {
            marks: Marks::parse(row.marks.as_deref())?,
            text: row.progress.unwrap_or_default(),
            last: None,
        });
    }
    let Some(reply) = messages::Entity::find()
        .filter(messages::Column::ReplyTo.eq(question_id))
        .order_by_desc(messages::Column::Id)
        .one(db)
        .await?
    else {
        return Ok(Snapshot {
            text: String::new(),
            marks: Marks::default(),
            last: Some(Event::Error(pb::CompletionError {
                message: format!("question {question_id} has no reply: it could not be stored"),
                message_id: None,
                status: 500,
            })),
        });
    };
    // A reply stored before its lines were recorded is one line.
    let marks = Marks::parse(reply.stream_marks.as_deref())?.closed(&reply.content, &reply.content);
    let last = match reply.error {
        Some(message) => Event::Error(pb::CompletionError {
            message,
            message_id: Some(reply.id),
            status: 0,
        }),
        None => Event::Done(pb::CompletionDone {
            message_id: reply.id,
            body: reply.content.clone(),
        }),
    };
    Ok(Snapshot {
        text: reply.content,
        marks,
        last: Some(last),
    })
}
