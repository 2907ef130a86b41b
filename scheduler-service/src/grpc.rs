//! The tonic implementation of `docchat.scheduler.v1.SchedulerService` over tasks.rs,
//! task_update.rs, executions.rs, summary.rs and the engine (manual triggers).

use std::sync::Arc;

use docchat_common::auth::caller;
use docchat_common::error::ApiResult;
use docchat_common::grpc::{Reply, ok};
use docchat_common::time::{opt_to_proto, to_proto};
use docchat_proto::common::v1::Empty;
use docchat_proto::scheduler::v1 as pb;
use docchat_proto::scheduler::v1::scheduler_service_server::SchedulerService;
use sea_orm::DatabaseConnection;
use tonic::Request;

use crate::engine::Engine;
use crate::entities::{scheduled_tasks, task_executions};
use crate::executions;
use crate::tasks::{self, Fields, Reach};
use crate::{summary, task_update};

pub struct SchedulerGrpc {
    pub db: DatabaseConnection,
    pub engine: Arc<Engine>,
    /// The byte budget of one list page (`docchat_common::limits::list_page_bytes`).
    pub page_bytes: u64,
}

fn fields(f: Option<pb::TaskFields>) -> Fields {
    let pb::TaskFields {
        name,
        description,
        schedule_type,
        schedule_expression,
        task_type,
        task_config_json,
        max_executions,
        expires_at,
        notification_email,
        status,
        task_config_patch_json,
    } = f.unwrap_or_default();
    Fields {
        name,
        description,
        schedule_type,
        schedule_expression,
        task_type,
        task_config: task_config_json,
        max_executions,
        expires_at,
        notification_email,
        status,
        task_config_patch: task_config_patch_json,
    }
}

/// A task as its owner sees it (every call reads the caller's own tasks).
pub fn task_pb(t: scheduled_tasks::Model) -> pb::Task {
    let scheduled_tasks::Model {
        id,
        user_id,
        username,
        name,
        description,
        schedule_type,
        schedule_expression,
        task_type,
        task_config,
        collection_id: _,
        status,
        execution_status,
        last_execution_at,
        next_execution_at,
        execution_count,
        max_executions,
        expires_at,
        notification_email,
        created_at,
        updated_at,
    } = t;
    pb::Task {
        id,
        user_id,
        username,
        name,
        description,
        schedule_type,
        schedule_expression,
        task_type,
        task_config_json: task_config,
        status,
        execution_status,
        last_execution_at: opt_to_proto(last_execution_at),
        next_execution_at: opt_to_proto(next_execution_at),
        execution_count,
        max_executions,
        expires_at: opt_to_proto(expires_at),
        created_at: Some(to_proto(created_at)),
        updated_at: Some(to_proto(updated_at)),
        is_owner: true,
        notification_email,
    }
}

pub fn execution_pb(e: task_executions::Model) -> pb::Execution {
    let task_executions::Model {
        id,
        task_id,
        user_id,
        username,
        task_name,
        status,
        trigger_source,
        scheduled_for,
        started_at,
        completed_at,
        lease_until: _,
        worker: _,
        chat_session_id,
        result_summary,
        error_message,
        created_at,
    } = e;
    pb::Execution {
        id,
        scheduled_task_id: task_id,
        user_id,
        username,
        status,
        trigger_source,
        task_name,
        scheduled_for: Some(to_proto(scheduled_for)),
        started_at: opt_to_proto(started_at),
        completed_at: opt_to_proto(completed_at),
        chat_session_id,
        result_summary,
        error_message,
        created_at: Some(to_proto(created_at)),
    }
}

fn execution_list(
    result: ApiResult<(Vec<task_executions::Model>, u64)>,
) -> Reply<pb::ExecutionList> {
    ok(result.map(|(items, total)| pb::ExecutionList {
        items: items.into_iter().map(execution_pb).collect(),
        total,
    }))
}

#[tonic::async_trait]
impl SchedulerService for SchedulerGrpc {
    async fn create_task(&self, request: Request<pb::TaskFields>) -> Reply<pb::Task> {
        let me = caller(&request)?;
        let f = fields(Some(request.into_inner()));
        self.engine
            .check_references(&me, f.task_config.as_deref())
            .await?;
        ok(tasks::create(&self.db, &me, f).await.map(task_pb))
    }

    async fn list_tasks(&self, request: Request<pb::ListTasksRequest>) -> Reply<pb::TaskList> {
        let me = caller(&request)?;
        let pb::ListTasksRequest {
            offset,
            limit,
            name_filter,
            status_filter,
            collection_id,
            has_collection,
            all_users,
            user_filter,
        } = request.into_inner();
        let q = tasks::ListQuery {
            offset,
            limit,
            name_filter,
            status_filter,
            collection_id,
            has_collection,
            reach: Reach::of(&me, all_users)?,
            user_filter,
        };
        ok(tasks::list(&self.db, &me, q, self.page_bytes)
            .await
            .map(|(page, total)| pb::TaskList {
                items: page.rows.into_iter().map(task_pb).collect(),
                total,
                size_limited: page.cut,
            }))
    }

    async fn get_task(&self, request: Request<pb::TaskRef>) -> Reply<pb::Task> {
        let me = caller(&request)?;
        ok(tasks::find_own(&self.db, &me, &request.get_ref().id)
            .await
            .map(task_pb))
    }

    async fn update_task(&self, request: Request<pb::UpdateTaskRequest>) -> Reply<pb::Task> {
        let me = caller(&request)?;
        let pb::UpdateTaskRequest {
            id,
            fields: f,
            any_owner,
        } = request.into_inner();
        let f = fields(f);
        // An administrator's update of any user's task is checked and applied as the
        // owner's own would be (what its config may name, `current_user`).
        let me = match Reach::of(&me, any_owner)? {
            Reach::Own => me,
            Reach::Everyone => {
                let task = tasks::find_any(&self.db, &id).await?;
                self.engine.owner_of(&task).await?
            }
        };
        // What it names (an update of another user's task is a 404 in any case).
        for sent in [f.task_config.as_deref(), f.task_config_patch.as_deref()] {
            self.engine.check_references(&me, sent).await?;
        }
        ok(task_update::update(&self.db, &me, &id, f)
            .await
            .map(task_pb))
    }

    async fn delete_task(&self, request: Request<pb::TaskRef>) -> Reply<Empty> {
        let me = caller(&request)?;
        let task = tasks::find_own(&self.db, &me, &request.get_ref().id).await?;
        ok(self
            .engine
            .delete(&me, vec![task.id])
            .await
            .map(|_| Empty {}))
    }

    async fn delete_tasks(&self, request: Request<pb::TaskIds>) -> Reply<pb::Count> {
        let me = caller(&request)?;
        let pb::TaskIds { ids, any_owner } = request.into_inner();
        let own = tasks::ids_within(&self.db, &me, Reach::of(&me, any_owner)?, ids).await?;
        ok(self
            .engine
            .delete(&me, own)
            .await
            .map(|count| pb::Count { count }))
    }

    async fn trigger_task(&self, request: Request<pb::TaskRef>) -> Reply<pb::TriggerResult> {
        let me = caller(&request)?;
        let task = tasks::find_own(&self.db, &me, &request.get_ref().id).await?;
        ok(self.engine.trigger(&me, task).await)
    }

    async fn list_task_executions(
        &self,
        request: Request<pb::ListTaskExecutionsRequest>,
    ) -> Reply<pb::ExecutionList> {
        let me = caller(&request)?;
        let r = request.get_ref();
        execution_list(executions::of_task(&self.db, &me, &r.task_id, r.offset, r.limit).await)
    }

    async fn list_executions(
        &self,
        request: Request<pb::ListExecutionsRequest>,
    ) -> Reply<pb::ExecutionList> {
        let me = caller(&request)?;
        let pb::ListExecutionsRequest {
            offset,
            limit,
            status_filter,
            name_filter,
            time_interval,
            trigger_filter,
            all_users,
            task_id,
        } = request.into_inner();
        let q = executions::ListQuery {
            offset,
            limit,
            status_filter,
            name_filter,
            time_interval,
            trigger_filter,
            reach: Reach::of(&me, all_users)?,
            task_id,
        };
        execution_list(executions::of_caller(&self.db, &me, q).await)
    }

    async fn summary(&self, request: Request<pb::SummaryRequest>) -> Reply<pb::TaskSummary> {
        let me = caller(&request)?;
        let reach = Reach::of(&me, request.get_ref().all_users)?;
        ok(summary::summary(&self.db, &me, reach).await)
    }

    async fn get_execution_stats(
        &self,
        request: Request<pb::ExecutionStatsRequest>,
    ) -> Reply<pb::ExecutionStats> {
        caller(&request)?.require_admin()?;
        ok(summary::execution_stats(&self.db, &request.get_ref().interval).await)
    }

    async fn cancel_execution(
        &self,
        request: Request<pb::CancelExecutionRequest>,
    ) -> Reply<pb::Execution> {
        let me = caller(&request)?;
        let pb::CancelExecutionRequest {
            id,
            reason,
            any_owner,
        } = request.into_inner();
        ok(self
            .engine
            .cancel(&me, &id, &reason, any_owner)
            .await
            .map(execution_pb))
    }
}
