//! A completion's two transactions, each one batch of statements (see [`Batch`]): the
//! question's (read the session, the history and the running count, claim a slot, insert
//! the question) and the reply's (the `usage.llm` events, the reply with its references and
//! metadata, the session's update, the slot's release).

use docchat_common::Caller;
use docchat_common::error::{ApiError, ApiResult};
use docchat_common::outbox;
use docchat_common::time::now;
use docchat_proto::events::v1::{Envelope, LlmUsage};
use docchat_proto::ingest::v1::SearchHit;
use sea_orm::sea_query::{Expr, Func};
use sea_orm::{
    ColumnTrait, ConnectionTrait, DatabaseConnection, EntityTrait, FromQueryResult, QueryFilter,
    QueryOrder, QuerySelect, QueryTrait, Set,
};

use super::Job;
use crate::batch::{Batch, TAG, tag, tagged};
use crate::entities::{chat_sessions, message_meta, message_references, messages};
use crate::events::usage_event;
use crate::limits;
use crate::marks::Marks;
use crate::usage::cost;

/// Earlier messages considered for the conversation history.
const HISTORY_MESSAGES: u64 = 20;

/// Calls made for one reply, for usage_stats and the ledger.
#[derive(Default)]
pub struct UsageLog {
    pub(super) calls: Vec<Call>,
}

pub(super) struct Call {
    pub(super) purpose: String,
    pub(super) prompt_tokens: u64,
    pub(super) completion_tokens: u64,
    pub(super) cost: f64,
    /// Already booked as `usage.llm` by the service that made it (agent-service): counted
    /// in usage_stats, not booked again.
    pub(super) booked: bool,
}

/// What a reply's model calls have used while it is generated, kept with its progress
/// (`active_completions.usage`), so the reply of a replica that dies is booked with it
/// (recovery.rs): the calls made before the answer's, and the answer's prompt; the answer's
/// completion tokens are counted from the text recovered.
#[derive(Debug, Clone, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct Spent {
    pub model: String,
    /// Per million input and output tokens.
    pub prices: (f64, f64),
    /// (purpose, prompt tokens, completion tokens) of the calls made before the answer's.
    pub calls: Vec<(String, u64, u64)>,
    /// The answer's prompt tokens.
    pub answer_prompt_tokens: u64,
}

impl Spent {
    /// The calls to book for a reply recovered with `text`: those before the answer's, and
    /// the answer's, its completion counted at 4 bytes a token (the estimate the model
    /// streams use when an upstream reports none).
    pub fn calls_with(&self, text: &str) -> UsageLog {
        let call = |purpose: &str, prompt_tokens: u64, completion_tokens: u64| Call {
            purpose: purpose.to_owned(),
            prompt_tokens,
            completion_tokens,
            cost: cost(self.prices, prompt_tokens, completion_tokens),
            booked: false,
        };
        let mut calls: Vec<Call> = self
            .calls
            .iter()
            .map(|(purpose, p, c)| call(purpose, *p, *c))
            .collect();
        calls.push(call(
            "chat",
            self.answer_prompt_tokens,
            (text.len() as u64).div_ceil(4),
        ));
        UsageLog { calls }
    }
}

impl UsageLog {
    /// What the calls so far and the answer's prompt have used (calls already booked
    /// elsewhere left out).
    pub(super) fn spent(&self, job: &Job, answer_prompt_tokens: u64) -> Spent {
        Spent {
            model: job.model_name.clone(),
            prices: job.prices,
            calls: self
                .calls
                .iter()
                .filter(|c| !c.booked)
                .map(|c| (c.purpose.clone(), c.prompt_tokens, c.completion_tokens))
                .collect(),
            answer_prompt_tokens,
        }
    }

    /// The `usage.llm` events of the calls not booked yet, for `user_id`'s message `id`.
    pub fn events(&self, user_id: &str, model: &str, id: &str) -> Vec<Envelope> {
        self.calls
            .iter()
            .filter(|call| !call.booked)
            .map(|call| {
                usage_event(&LlmUsage {
                    user_id: user_id.to_owned(),
                    model: model.to_owned(),
                    prompt_tokens: call.prompt_tokens,
                    completion_tokens: call.completion_tokens,
                    cost: call.cost,
                    purpose: call.purpose.clone(),
                    message_id: id.to_owned(),
                    calls: 1,
                })
            })
            .collect()
    }

    /// The reply's `usage_stats` metadata.
    pub fn stats(&self, model: &str, elapsed: f64, first_token: Option<f64>) -> String {
        let (prompt_tokens, completion_tokens, cost) =
            self.calls.iter().fold((0, 0, 0.0), |t, c| {
                (
                    t.0 + c.prompt_tokens,
                    t.1 + c.completion_tokens,
                    t.2 + c.cost,
                )
            });
        serde_json::json!({
            "llm": model,
            "input_tokens": prompt_tokens,
            "output_tokens": completion_tokens,
            "total_tokens": prompt_tokens + completion_tokens,
            "cost": cost,
            "response_time": elapsed,
            "time_to_first_token": first_token,
            "calls": self.calls.iter().map(|c| serde_json::json!({
                "purpose": c.purpose,
                "input_tokens": c.prompt_tokens,
                "output_tokens": c.completion_tokens,
                "cost": c.cost,
            })).collect::<Vec<_>>(),
        })
        .to_string()
    }

    /// A call another service made and booked for this reply (counted in usage_stats, not
    /// booked again).
    pub(super) fn add_booked(&mut self, purpose: &str, prompt_tokens: u64, cost: f64) {
        self.calls.push(Call {
            purpose: purpose.to_owned(),
            prompt_tokens,
            completion_tokens: 0,
            cost,
            booked: true,
        });
    }

    pub(super) fn add(
        &mut self,
        job: &Job,
        purpose: &'static str,
        prompt_tokens: u64,
        completion_tokens: u64,
    ) {
        let cost = cost(job.prices, prompt_tokens, completion_tokens);
        self.calls.push(Call {
            purpose: purpose.to_owned(),
            prompt_tokens,
            completion_tokens,
            cost,
            booked: false,
        });
    }
}

#[derive(Default)]
pub(super) struct Reply {
    pub(super) text: String,
    /// Why the reply ended early (its message is stored with it).
    pub(super) error: Option<ApiError>,
    pub(super) references: Vec<SearchHit>,
    pub(super) prompt_raw: String,
    pub(super) first_token: Option<f64>,
    /// Further metadata entries (the agent's agent_* entries).
    pub(super) meta: Vec<(&'static str, String)>,
    /// Where each line the reply was streamed in ends (set when it is sealed, marks.rs).
    pub(super) marks: Marks,
}

/// Time-ordered ids, so a reply sorts after its question even within one clock tick.
pub fn message_id() -> String {
    uuid::Uuid::now_v7().to_string()
}

/// A question to store.
pub(super) struct Question<'a> {
    pub(super) session_id: &'a str,
    pub(super) content: &'a str,
    /// Whether to read the conversation history.
    pub(super) history: bool,
    pub(super) concurrency_cap: Option<i64>,
    /// How long its claim holds without renewal.
    pub(super) lease: std::time::Duration,
}

/// A stored question with its session and the history before it.
pub(super) struct Stored {
    pub(super) session: chat_sessions::Model,
    pub(super) question: messages::Model,
    pub(super) history: Vec<messages::Model>,
}

/// Stores the question in the caller's session and claims its concurrency slot, in one
/// transaction of one batch (see [`Batch`]): the session, the history before the question
/// and the count of running completions are read in it too. `admit` then decides with the
/// session; the question is committed only when it and the concurrency cap agree.
pub(super) async fn store_question<T>(
    db: &DatabaseConnection,
    caller: &Caller,
    asked: Question<'_>,
    admit: impl FnOnce(&chat_sessions::Model) -> ApiResult<T>,
) -> ApiResult<(Stored, T)> {
    let at = now();
    let question = messages::Model {
        id: message_id(),
        session_id: asked.session_id.to_owned(),
        owner_id: caller.user_id.clone(),
        username: caller.username.clone(),
        content: asked.content.to_owned(),
        reply_to: None,
        votes: 0,
        has_references: false,
        total_references: 0,
        error: None,
        created_at: at,
        stream_marks: None,
    };
    let txn = docchat_common::db::begin(db).await?;
    let mut batch = Batch::new(txn.get_database_backend());
    batch.push(
        &chat_sessions::Entity::find_by_id(asked.session_id.to_owned())
            .filter(chat_sessions::Column::OwnerId.eq(caller.user_id.clone()))
            .expr_as(tag("session"), TAG)
            .into_query(),
    );
    if asked.history {
        batch.push(
            &messages::Entity::find()
                .filter(messages::Column::SessionId.eq(asked.session_id))
                .filter(messages::Column::Id.lt(question.id.clone()))
                .order_by_desc(messages::Column::Id)
                .limit(HISTORY_MESSAGES)
                .expr_as(tag("history"), TAG)
                .into_query(),
        );
    }
    limits::claim(
        &mut batch,
        &caller.user_id,
        &question.id,
        asked.concurrency_cap,
        asked.lease,
    );
    // The writes: nothing is read back.
    batch.push(
        &messages::Entity::insert(messages::ActiveModel::from(question.clone())).into_query(),
    );
    batch.push(
        &chat_sessions::Entity::update_many()
            .col_expr(
                chat_sessions::Column::LatestMessageContent,
                Expr::value(asked.content.to_owned()),
            )
            .col_expr(chat_sessions::Column::UpdatedAt, Expr::value(at))
            // An unnamed session is named after its first question.
            .col_expr(
                chat_sessions::Column::Name,
                Func::coalesce([
                    Expr::col(chat_sessions::Column::Name).into(),
                    Expr::val(asked.content.chars().take(60).collect::<String>()).into(),
                ])
                .into(),
            )
            .filter(chat_sessions::Column::Id.eq(asked.session_id))
            .filter(chat_sessions::Column::OwnerId.eq(caller.user_id.clone()))
            .into_query(),
    );
    let rows = match batch.run(&txn).await {
        Ok(rows) => rows,
        Err(e) => {
            // A session that does not exist fails the question's foreign key: answer 404.
            drop(txn);
            crate::sessions::get(db, caller, asked.session_id).await?;
            return Err(e.into());
        }
    };
    let admitted = tagged(&rows, "session")
        .next()
        .map(|row| chat_sessions::Model::from_query_result(row, ""))
        .transpose()?
        .ok_or_else(|| crate::sessions::not_found(asked.session_id))
        .and_then(|session| {
            let admitted = admit(&session)?;
            limits::check_claim(&rows, asked.concurrency_cap)?;
            Ok((session, admitted))
        });
    let (session, admitted) = match admitted {
        Ok(a) => a,
        Err(e) => {
            txn.rollback().await?;
            return Err(e);
        }
    };
    let mut history = tagged(&rows, "history")
        .map(|row| messages::Model::from_query_result(row, ""))
        .collect::<Result<Vec<_>, _>>()?;
    history.reverse();
    txn.commit().await?;
    Ok((
        Stored {
            session,
            question,
            history,
        },
        admitted,
    ))
}

/// Stores the reply, books its model calls and frees its concurrency slot, in one
/// transaction of one batch (see [`Batch`]). Returns the reply's id, or None when the
/// session was deleted meanwhile: the reply then has nothing to attach to, but its model
/// calls were made and are booked.
pub(super) async fn store_reply(
    db: &DatabaseConnection,
    job: &Job,
    reply: &Reply,
    usage: &UsageLog,
    elapsed: f64,
) -> ApiResult<Option<String>> {
    let id = message_id();
    match write_reply(db, job, Some((reply, elapsed)), usage, &id).await {
        Ok(()) => Ok(Some(id)),
        // The session is almost always still there, so the reply is written as if it
        // were; a deleted one fails the reply's foreign key, and only then is it asked for.
        Err(e) if session_exists(db, &job.session.id).await? => Err(e),
        Err(_) => {
            write_reply(db, job, None, usage, &id).await?;
            Ok(None)
        }
    }
}

async fn session_exists(db: &DatabaseConnection, id: &str) -> ApiResult<bool> {
    Ok(chat_sessions::Entity::find_by_id(id.to_owned())
        .select_only()
        .column(chat_sessions::Column::Id)
        .into_tuple::<String>()
        .one(db)
        .await?
        .is_some())
}

/// One transaction: the `usage.llm` events of the reply's model calls, the reply (when
/// given) with the session's update, and the release of the concurrency slot.
async fn write_reply(
    db: &DatabaseConnection,
    job: &Job,
    reply: Option<(&Reply, f64)>,
    usage: &UsageLog,
    id: &str,
) -> ApiResult<()> {
    let events = usage.events(&job.caller.user_id, &job.model_name, id);
    let txn = docchat_common::db::begin(db).await?;
    let mut batch = Batch::new(txn.get_database_backend());
    if let Some(insert) = outbox::insert_statement(&events) {
        batch.push(&insert);
    }
    if let Some((reply, elapsed)) = reply {
        reply_statements(&mut batch, job, reply, usage, elapsed, id);
    }
    batch.push(&limits::release_statement(&job.question.id));
    // Nothing is read back, and the transaction rolls back (on drop) if the batch fails.
    batch.run(&txn).await?;
    txn.commit().await?;
    Ok(())
}

/// The reply's rows (the message, its references and its metadata) and the session's
/// update.
fn reply_statements(
    batch: &mut Batch,
    job: &Job,
    reply: &Reply,
    usage: &UsageLog,
    elapsed: f64,
    id: &str,
) {
    let at = now();
    batch.push(
        &messages::Entity::insert(messages::ActiveModel {
            id: Set(id.to_owned()),
            session_id: Set(job.session.id.clone()),
            owner_id: Set(job.caller.user_id.clone()),
            username: Set(job.caller.username.clone()),
            content: Set(reply.text.clone()),
            reply_to: Set(Some(job.question.id.clone())),
            votes: Set(0),
            has_references: Set(!reply.references.is_empty()),
            total_references: Set(reply.references.len() as i64),
            error: Set(reply.error.as_ref().map(|e| e.message.clone())),
            created_at: Set(at),
            stream_marks: Set(Some(reply.marks.encode())),
        })
        .into_query(),
    );
    let references: Vec<message_references::ActiveModel> = reply
        .references
        .iter()
        .enumerate()
        .map(|(rank, hit)| message_references::ActiveModel {
            message_id: Set(id.to_owned()),
            rank: Set(rank as i32),
            document_id: Set(hit.document_id.clone()),
            document_name: Set(hit.document_name.clone()),
            collection_id: Set(hit.collection_id.clone()),
            chunk_id: Set(hit.chunk_id),
            pages: Set(hit
                .pages
                .iter()
                .map(u32::to_string)
                .collect::<Vec<_>>()
                .join(",")),
            score: Set(hit.score),
            content: Set(hit.text.clone()),
            ..Default::default()
        })
        .collect();
    if !references.is_empty() {
        batch.push(&message_references::Entity::insert_many(references).into_query());
    }
    let stats = usage.stats(&job.model_name, elapsed, reply.first_token);
    let mut meta = vec![("usage_stats", stats)];
    if !reply.prompt_raw.is_empty() {
        meta.push(("prompt_raw", reply.prompt_raw.clone()));
    }
    meta.extend(reply.meta.iter().cloned());
    batch.push(
        &message_meta::Entity::insert_many(meta.into_iter().map(|(info_type, content)| {
            message_meta::ActiveModel {
                message_id: Set(id.to_owned()),
                info_type: Set(info_type.to_owned()),
                content: Set(content),
                ..Default::default()
            }
        }))
        .into_query(),
    );
    let mut touch = chat_sessions::Entity::update_many()
        .col_expr(chat_sessions::Column::UpdatedAt, Expr::value(at));
    if !reply.text.is_empty() {
        touch = touch.col_expr(
            chat_sessions::Column::LatestMessageContent,
            Expr::value(reply.text.clone()),
        );
    }
    batch.push(
        &touch
            .filter(chat_sessions::Column::Id.eq(&job.session.id))
            .into_query(),
    );
}
