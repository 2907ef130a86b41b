//! Coming back to a reply (`GET /messages/{question_id}/stream?after=`): its lines after
//! `after`, from whichever replica the request reaches, then the live lines as they are
//! stored, then the final line. Everything is read from the database — the progress row
//! while the reply is generated, the stored reply after (marks.rs numbers both alike) —
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
use crate::marks::{Marks, final_seq, text_seq};
use crate::stream::{Follower, Snapshot};

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

/// The reply the caller's session `session_id` is still generating (its question's id), and
/// the seq of its last line stored so far; 404 when the session is not the caller's.
pub async fn running_in_session(
    db: &DatabaseConnection,
    caller: &Caller,
    session_id: &str,
) -> ApiResult<pb::RunningQuestionReply> {
    crate::sessions::get(db, caller, session_id).await?;
    let active: Vec<active_completions::Model> = active_completions::Entity::find()
        .filter(active_completions::Column::UserId.eq(caller.user_id.clone()))
        .all(db)
        .await?;
    if active.is_empty() {
        return Ok(pb::RunningQuestionReply::default());
    }
    let question = messages::Entity::find()
        .filter(messages::Column::SessionId.eq(session_id))
        .filter(messages::Column::Id.is_in(active.iter().map(|a| a.question_id.clone())))
        .order_by_desc(messages::Column::Id)
        .one(db)
        .await?;
    let Some(question) = question else {
        return Ok(pb::RunningQuestionReply::default());
    };
    let lines = active
        .iter()
        .find(|a| a.question_id == question.id)
        .map(|a| Marks::parse(a.marks.as_deref()).map(|m| m.len()))
        .transpose()?
        .unwrap_or(0);
    Ok(pb::RunningQuestionReply {
        question_id: Some(question.id),
        seq: if lines == 0 { 1 } else { text_seq(lines) },
    })
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
    let marks = Marks::parse(reply.stream_marks.as_deref())?.through(reply.content.len());
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

#[cfg(test)]
mod tests {
    use std::sync::Arc;
    use std::time::Duration;

    use docchat_common::time::now;
    use sea_orm::{ActiveModelTrait, ConnectionTrait, Set};
    use sea_orm_migration::MigratorTrait;

    use super::*;
    use crate::control::{Kind, Registration};
    use crate::entities::chat_sessions;
    use crate::limits::write_progress;

    const LEASE: Duration = Duration::from_secs(60);

    /// A database with user u's session s, question q and q's progress row.
    async fn db() -> DatabaseConnection {
        let db = docchat_common::db::connect("sqlite::memory:")
            .await
            .unwrap();
        crate::migrations::Migrator::up(&db, None).await.unwrap();
        let at = now();
        chat_sessions::ActiveModel {
            id: Set("s".into()),
            owner_id: Set("u".into()),
            owner_username: Set("u".into()),
            name: Set(None),
            collection_id: Set(None),
            collection_name: Set(None),
            latest_message_content: Set(None),
            created_at: Set(at),
            updated_at: Set(at),
        }
        .insert(&db)
        .await
        .unwrap();
        message("q", None, "Why?", None).insert(&db).await.unwrap();
        active_completions::ActiveModel {
            question_id: Set("q".into()),
            user_id: Set("u".into()),
            started_at: Set(at),
            lease_until: Set(at + chrono::Duration::seconds(60)),
            progress: Set(None),
            usage: Set(None),
            marks: Set(None),
        }
        .insert(&db)
        .await
        .unwrap();
        db
    }

    fn message(
        id: &str,
        reply_to: Option<&str>,
        content: &str,
        marks: Option<&str>,
    ) -> messages::ActiveModel {
        messages::ActiveModel {
            id: Set(id.into()),
            session_id: Set("s".into()),
            owner_id: Set("u".into()),
            username: Set("u".into()),
            content: Set(content.into()),
            reply_to: Set(reply_to.map(str::to_owned)),
            votes: Set(0),
            has_references: Set(false),
            total_references: Set(0),
            error: Set(None),
            created_at: Set(now()),
            stream_marks: Set(marks.map(str::to_owned)),
        }
    }

    /// The generating replica's side: records `text` and writes it (one line).
    async fn generate(db: &DatabaseConnection, controls: &Controls, at: &Registration, text: &str) {
        at.record(text);
        write_progress(db, controls, LEASE).await.unwrap();
    }

    /// The next line within two seconds: (seq, delta or final marker).
    async fn next(rx: &mut Lines) -> (u64, String) {
        let e = tokio::time::timeout(Duration::from_secs(2), rx.recv())
            .await
            .expect("a line within 2 s")
            .expect("the stream goes on")
            .unwrap();
        let what = match e.event.unwrap() {
            Event::QuestionId(id) => format!("question {id}"),
            Event::Delta(text) => text,
            Event::Done(done) => format!("done {}", done.message_id),
            Event::Error(e) => format!("error {}", e.message),
        };
        (e.seq, what)
    }

    /// A line stored between the follower's subscription and its read is sent at once,
    /// and once — on the replica that generates (woken by its count of stored lines) and
    /// on another one (woken by its timer); then the live lines, then the final line read
    /// from the stored reply.
    #[tokio::test]
    async fn a_line_stored_between_subscribing_and_reading_is_sent_once() {
        for same_replica in [true, false] {
            let db = db().await;
            let generating = Controls::default();
            let (_state, registration) = generating.register("q", Kind::Completion);
            let registration = Arc::new(registration);
            generate(&db, &generating, &registration, "a ").await;
            let attach = Attach {
                db: db.clone(),
                controls: if same_replica {
                    generating.clone()
                } else {
                    Controls::default()
                },
                tasks: TaskTracker::new(),
                shutdown: CancellationToken::new(),
            };
            let (tx, mut rx) = mpsc::channel(16);
            // Stores "b " in the first round only (and lets go of the registration then).
            let hook = {
                let (db, generating) = (db.clone(), generating.clone());
                let mut once = Some(registration.clone());
                move || {
                    let (db, generating, first) = (db.clone(), generating.clone(), once.take());
                    async move {
                        if let Some(registration) = first {
                            generate(&db, &generating, &registration, "b ").await;
                        }
                    }
                }
            };
            let follower = {
                let me = attach.clone();
                attach
                    .tasks
                    .spawn(async move { me.follow("q", 0, tx, hook).await })
            };
            assert_eq!(next(&mut rx).await, (1, "question q".into()));
            assert_eq!(next(&mut rx).await, (2, "a ".into()));
            // Nothing else is generated meanwhile: it comes from the first read.
            assert_eq!(
                next(&mut rx).await,
                (3, "b ".into()),
                "same replica: {same_replica}"
            );
            generate(&db, &generating, &registration, "c ").await;
            assert_eq!(next(&mut rx).await, (4, "c ".into()));

            // The reply is stored (its row deleted in the same transaction) with the
            // lines the progress had, then the generation ends.
            let marks = registration.lines().seal("a b c ");
            let txn = docchat_common::db::begin(&db).await.unwrap();
            message("r", Some("q"), "a b c ", Some(&marks.encode()))
                .insert(&txn)
                .await
                .unwrap();
            txn.execute(
                txn.get_database_backend()
                    .build(&crate::limits::release_statement("q")),
            )
            .await
            .unwrap();
            txn.commit().await.unwrap();
            assert!(
                Arc::into_inner(registration).is_some(),
                "the generation ends"
            );
            assert_eq!(next(&mut rx).await, (5, "done r".into()));
            follower.await.unwrap();
            assert!(rx.recv().await.is_none(), "nothing after the final line");

            // Later, from the stored text: the same lines after any seq.
            let (tx, mut rx) = mpsc::channel(16);
            attach.follow("q", 2, tx, || async {}).await;
            assert_eq!(next(&mut rx).await, (3, "b ".into()));
            assert_eq!(next(&mut rx).await, (4, "c ".into()));
            assert_eq!(next(&mut rx).await, (5, "done r".into()));
            let (tx, mut rx) = mpsc::channel(16);
            attach.follow("q", 5, tx, || async {}).await;
            assert!(rx.recv().await.is_none(), "the client has every line");
        }
    }
}
