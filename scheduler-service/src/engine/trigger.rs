//! A manual run (TriggerTask): an execution with trigger `manual` and `scheduled_for` = now,
//! counted in execution_count without touching the schedule; answered as soon as the row and
//! the chat session exist, the completion running in the background.

use docchat_common::Caller;
use docchat_common::error::ApiResult;
use docchat_common::time::now;
use docchat_proto::scheduler::v1 as pb;
use sea_orm::sea_query::Expr;
use sea_orm::{ActiveModelTrait, ColumnTrait, EntityTrait, QueryFilter};

use super::status::{FAILED, MANUAL, RUNNING};
use super::store::{self, Outcome};
use super::{Engine, claim, events, run};
use crate::entities::{scheduled_tasks as tasks, task_executions as executions};

impl Engine {
    /// Starts an execution of `task` (the caller's own, as grpc.rs checked) now.
    pub async fn trigger(
        &self,
        caller: &Caller,
        task: tasks::Model,
    ) -> ApiResult<pb::TriggerResult> {
        let inner = &self.0;
        let txn = docchat_common::db::begin(&inner.db).await?;
        let Some(task) = store::lock_task(&txn, &task.id).await? else {
            return Err(crate::tasks::not_found(&task.id));
        };
        let at = now();
        let execution = claim::new_execution(inner, &task, MANUAL, at, at);
        executions::ActiveModel::from(execution.clone())
            .insert(&txn)
            .await?;
        tasks::Entity::update_many()
            .col_expr(
                tasks::Column::ExecutionCount,
                Expr::col(tasks::Column::ExecutionCount).add(1),
            )
            .col_expr(tasks::Column::LastExecutionAt, Expr::value(Some(at)))
            .col_expr(tasks::Column::ExecutionStatus, Expr::value(RUNNING))
            .col_expr(tasks::Column::UpdatedAt, Expr::value(at))
            .filter(tasks::Column::Id.eq(task.id.clone()))
            .exec(&txn)
            .await?;
        events::announce(&txn, &execution, &task.collection_id, RUNNING).await?;
        txn.commit().await?;
        inner.relay.notify();
        let stop = inner.hold(&execution.id);
        // The caller is the owner; a service acting for them gets the owner's identity.
        let owner = if caller.user_id == task.user_id && !caller.is_service {
            Ok(caller.clone())
        } else {
            run::owner(inner, &task).await
        };
        let session = match owner {
            Ok(owner) => run::open_session(inner, &owner, &task)
                .await
                .map(|session| (owner, session)),
            Err(e) => Err(e),
        };
        match session {
            Ok((owner, session)) => {
                if let Err(e) = store::set_session(&inner.db, &execution.id, &session).await {
                    tracing::warn!(error = %e.message, "recording an execution's session failed");
                }
                inner.tracker.spawn(run::finish_in_session(
                    inner.clone(),
                    execution.id.clone(),
                    owner,
                    task,
                    session.clone(),
                    stop,
                ));
                Ok(pb::TriggerResult {
                    execution_id: execution.id,
                    status: RUNNING.into(),
                    session_id: session,
                })
            }
            Err(e) => {
                run::end(inner, &execution.id, Outcome::Failed(e.message)).await;
                Ok(pb::TriggerResult {
                    execution_id: execution.id,
                    status: FAILED.into(),
                    session_id: String::new(),
                })
            }
        }
    }
}
