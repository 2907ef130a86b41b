//! Each execution is a job of the administrator's job history: `job.<status>` events
//! (running, then completed, failed, or stale when its replica died), written to the outbox in
//! the transaction that changes the execution.

use docchat_common::bus::{envelope, topics};
use docchat_common::jobs::KIND_SCHEDULED_TASK;
use docchat_common::outbox;
use docchat_common::time::{opt_to_proto, to_proto};
use docchat_proto::events::v1::JobChanged;
use sea_orm::{ConnectionTrait, DbErr};

use crate::entities::task_executions;

/// Enqueues `job.<status>` for `execution` (its own status unless `status` says otherwise,
/// as `stale` for a lapsed lease does).
pub(super) async fn announce<C: ConnectionTrait>(
    conn: &C,
    execution: &task_executions::Model,
    collection_id: &str,
    status: &str,
) -> Result<(), DbErr> {
    let job = job(execution, collection_id, status);
    enqueue(conn, &job).await
}

/// Enqueues `job.canceled` for `execution`, canceled by `by` for `reason`.
pub(super) async fn announce_canceled<C: ConnectionTrait>(
    conn: &C,
    execution: &task_executions::Model,
    collection_id: &str,
    by: &str,
    reason: &str,
) -> Result<(), DbErr> {
    let job = JobChanged {
        canceled_by: Some(by.to_owned()),
        cancel_reason: Some(reason.to_owned()),
        errors: Vec::new(),
        ..job(execution, collection_id, "canceled")
    };
    enqueue(conn, &job).await
}

async fn enqueue<C: ConnectionTrait>(conn: &C, job: &JobChanged) -> Result<(), DbErr> {
    outbox::enqueue(
        conn,
        &envelope(&topics::job(&job.status), &job.user_id, job),
    )
    .await
}

fn job(execution: &task_executions::Model, collection_id: &str, status: &str) -> JobChanged {
    JobChanged {
        job_id: execution.id.clone(),
        kind: KIND_SCHEDULED_TASK.into(),
        name: execution.task_name.clone(),
        status: status.to_owned(),
        progress: if status == super::status::RUNNING {
            0.0
        } else {
            1.0
        },
        errors: if execution.error_message.is_empty() {
            Vec::new()
        } else {
            vec![execution.error_message.clone()]
        },
        user_id: execution.user_id.clone(),
        username: execution.username.clone(),
        collection_id: collection_id.to_owned(),
        collection_name: String::new(),
        created_at: Some(to_proto(execution.created_at)),
        started_at: opt_to_proto(execution.started_at),
        finished_at: opt_to_proto(execution.completed_at),
        canceled_by: None,
        cancel_reason: None,
    }
}
