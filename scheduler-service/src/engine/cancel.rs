//! Ending running executions on request: a cancel (the owner's, or an administrator's
//! through the job history) and a task's delete, which cancels what still runs of it. The
//! execution ends `cancelled` in the transaction that holds its task, with its `job.canceled`
//! event (who, why); its run stops at once on this replica, and on the replica running it at
//! that replica's next lease renewal, which also tells chat-service to stop the reply.

use docchat_common::Caller;
use docchat_common::error::{ApiError, ApiResult};
use sea_orm::{ColumnTrait, EntityTrait, QueryFilter};

use super::status::RUNNING;
use super::{Engine, events, store};
use crate::entities::task_executions as executions;

/// The reason a task's delete gives its running executions.
const TASK_DELETED: &str = "its task was deleted";

impl Engine {
    /// Cancels the running execution `id`: the caller's own, or anyone's with `any_owner`
    /// (administrators). NOT_FOUND for a missing or another user's execution, CONFLICT for
    /// one that already ended.
    pub async fn cancel(
        &self,
        caller: &Caller,
        id: &str,
        reason: &str,
        any_owner: bool,
    ) -> ApiResult<executions::Model> {
        let inner = &self.0;
        let txn = docchat_common::db::begin(&inner.db).await?;
        let execution = executions::Entity::find_by_id(id.to_owned())
            .one(&txn)
            .await?
            .filter(|e| any_owner || e.user_id == caller.user_id)
            .ok_or_else(|| ApiError::not_found(format!("execution {id} not found")))?;
        let task = store::lock_task(&txn, &execution.task_id).await?;
        let Some(ended) = store::cancel(&txn, &execution, &caller.username, reason).await? else {
            return Err(ApiError::conflict(format!(
                "execution {id} already ended ({}): only a running execution can be canceled",
                execution.status
            )));
        };
        let collection = task.map(|t| t.collection_id).unwrap_or_default();
        events::announce_canceled(&txn, &ended, &collection, &caller.username, reason).await?;
        txn.commit().await?;
        inner.relay.notify();
        inner.stop(id);
        tracing::info!(execution_id = id, by = %caller.username, "task execution canceled");
        Ok(ended)
    }

    /// Deletes the tasks `ids` (the caller's own, as grpc.rs checked) with their executions;
    /// the ones still running are canceled first. How many tasks went.
    pub async fn delete(&self, caller: &Caller, ids: Vec<String>) -> ApiResult<u64> {
        let inner = &self.0;
        if ids.is_empty() {
            return Ok(0);
        }
        let txn = docchat_common::db::begin(&inner.db).await?;
        let mut stopped = Vec::new();
        for id in &ids {
            let Some(task) = store::lock_task(&txn, id).await? else {
                continue;
            };
            let running = executions::Entity::find()
                .filter(executions::Column::TaskId.eq(id.as_str()))
                .filter(executions::Column::Status.eq(RUNNING))
                .all(&txn)
                .await?;
            for execution in running {
                if let Some(ended) =
                    store::cancel(&txn, &execution, &caller.username, TASK_DELETED).await?
                {
                    events::announce_canceled(
                        &txn,
                        &ended,
                        &task.collection_id,
                        &caller.username,
                        TASK_DELETED,
                    )
                    .await?;
                    stopped.push(ended.id);
                }
            }
        }
        let count = crate::tasks::delete_ids(&txn, ids).await?;
        txn.commit().await?;
        if !stopped.is_empty() {
            inner.relay.notify();
        }
        for id in &stopped {
            inner.stop(id);
        }
        Ok(count)
    }
}
