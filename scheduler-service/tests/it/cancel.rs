//! Ending running executions: a cancel by the owner (another user's is NOT_FOUND, an ended
//! one a conflict) and a task's delete, which cancels what still runs of it. Both end the
//! execution `cancelled` at once, set the task idle and reach the job history as canceled,
//! with who and why.

use std::time::Duration;

use docchat_common::config::Service;
use docchat_common::error::ErrorCode;
use docchat_common::testing::{ScriptedHttp, ScriptedTurn};
use docchat_proto::admin::v1::GetOwnJobRequest;
use docchat_proto::admin::v1::JobHistoryEntry;
use docchat_proto::admin::v1::admin_service_client::AdminServiceClient;
use docchat_test_stack::Stack;
use serde_json::json;

use crate::support::*;

async fn history_row(stack: &Stack, owner: &docchat_common::Caller, id: &str) -> JobHistoryEntry {
    until(
        20,
        "the job history shows the execution canceled",
        || async {
            AdminServiceClient::new(stack.admin().channel())
                .get_own_job(stack.req(
                    Service::Admin,
                    owner,
                    GetOwnJobRequest {
                        job_id: id.to_owned(),
                    },
                ))
                .await
                .ok()
                .map(|r| r.into_inner())
                .filter(|j| j.status == "canceled")
        },
    )
    .await
}

docchat_common::backend_tests! {
    async fn a_running_execution_is_canceled_by_its_owner_only(backend) {
        // The answer would take a minute: the execution is still running when canceled.
        let upstream = ScriptedHttp::chat_turns(vec![
            ScriptedTurn::text("too late").delay(Duration::from_secs(60)),
        ]).await;
        let stack = stack(&backend, &upstream.base_url).await;
        let db = store(&stack).await;
        let erin = owner(&stack, "erin").await;
        let mallory = owner(&stack, "mallory").await;
        let next = chrono::Utc::now() + chrono::Duration::hours(1);
        let t = task(&db, &erin, "long one", ("interval", "1 hours"), json!({"message": "take your time"}), next, |_| {}).await;
        let (engine, background) = engine_on(&stack, &db);

        let started = engine.trigger(&erin, t.clone()).await.unwrap();
        assert_eq!(started.status, "running");
        let id = started.execution_id;

        let e = engine.cancel(&mallory, &id, "mine now", false).await.unwrap_err();
        assert_eq!(e.code, ErrorCode::NotFound, "{}: another user's execution is not found", backend.name);
        assert_eq!(executions_of(&db, &t.id).await[0].status, "running", "{}: mallory changed nothing", backend.name);

        let ended = engine.cancel(&erin, &id, "not needed", false).await.unwrap();
        assert_eq!(ended.status, "cancelled", "{}", backend.name);
        assert_eq!(ended.error_message, "canceled by erin: not needed");
        let row = &executions_of(&db, &t.id).await[0];
        assert_eq!((row.status.as_str(), row.lease_until), ("cancelled", None), "{}", backend.name);
        assert!(row.completed_at.is_some());
        assert_eq!(task_row(&db, &t.id).await.execution_status, "idle", "{}: the task is idle again", backend.name);

        let again = engine.cancel(&erin, &id, "twice", false).await.unwrap_err();
        assert_eq!(again.code, ErrorCode::Conflict, "{}: an ended execution is a conflict", backend.name);

        let job = history_row(&stack, &erin, &id).await;
        assert_eq!((job.canceled_by.as_deref(), job.cancel_reason.as_deref()), (Some("erin"), Some("not needed")), "{}", backend.name);

        // The run stopped: nothing ends the execution a second time, and the service stops
        // without waiting for the minute-long answer.
        tokio::time::sleep(Duration::from_millis(500)).await;
        assert_eq!(executions_of(&db, &t.id).await[0].status, "cancelled", "{}", backend.name);
        let stopping = std::time::Instant::now();
        background.shutdown(Duration::from_secs(30)).await;
        assert!(stopping.elapsed() < Duration::from_secs(20), "{}: the canceled run had stopped", backend.name);
        stack.stop().await;
    }

    async fn deleting_a_task_cancels_its_running_execution(backend) {
        let upstream = ScriptedHttp::chat_turns(vec![
            ScriptedTurn::text("too late").delay(Duration::from_secs(60)),
        ]).await;
        let stack = stack(&backend, &upstream.base_url).await;
        let db = store(&stack).await;
        let erin = owner(&stack, "erin").await;
        let next = chrono::Utc::now() + chrono::Duration::hours(1);
        let t = task(&db, &erin, "doomed", ("interval", "1 hours"), json!({"message": "go"}), next, |_| {}).await;
        let (engine, background) = engine_on(&stack, &db);

        let started = engine.trigger(&erin, t.clone()).await.unwrap();
        assert_eq!(engine.delete(&erin, vec![t.id.clone()]).await.unwrap(), 1, "{}", backend.name);
        assert!(executions_of(&db, &t.id).await.is_empty(), "{}: the executions went with the task", backend.name);
        let job = history_row(&stack, &erin, &started.execution_id).await;
        assert_eq!(job.cancel_reason.as_deref(), Some("its task was deleted"), "{}: the history row is not left running", backend.name);
        assert_eq!(job.canceled_by.as_deref(), Some("erin"));

        background.shutdown(Duration::from_secs(30)).await;
        stack.stop().await;
    }
}
