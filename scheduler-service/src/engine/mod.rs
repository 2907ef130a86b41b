//! Placeholder for the execution engine (branch ext-sched-run builds the real one: due-task
//! claiming, runs through chat/agent, leases, notifications). Until it is merged a manual
//! trigger answers 503.

use docchat_common::Caller;
use docchat_common::error::{ApiError, ApiResult, ErrorCode};
use docchat_proto::scheduler::v1 as pb;

use crate::entities::scheduled_tasks;

pub struct Engine;

impl Engine {
    /// Starts an execution of `task` (already checked to be the caller's) now.
    pub async fn trigger(
        &self,
        _caller: &Caller,
        _task: scheduled_tasks::Model,
    ) -> ApiResult<pb::TriggerResult> {
        Err(ApiError::new(
            ErrorCode::Unavailable,
            "executions are not available yet",
        ))
    }
}
