//! Due tasks run once through chat-service as their owner; the task advances or ends.

use chrono::{Duration, Utc};
use docchat_common::config::Service;
use docchat_common::metrics::sample;
use docchat_common::testing::{ScriptedHttp, ScriptedTurn};
use docchat_proto::admin::v1::GetOwnJobRequest;
use docchat_proto::admin::v1::admin_service_client::AdminServiceClient;
use docchat_proto::chat::v1 as chat;
use docchat_proto::chat::v1::memory_block_service_client::MemoryBlockServiceClient;
use docchat_proto::ingest::v1::{CollectionRef, CreateCollectionRequest};
use docchat_scheduler_service::entities::task_executions as executions;
use sea_orm::ActiveModelTrait;
use serde_json::json;

use crate::support::*;

docchat_common::backend_tests! {
    /// The owner's default memory block reaches the model (chat-service applies the owner's
    /// defaults, limits and caps by itself), the execution keeps the session, the answer and
    /// its times, the task advances, the job history sees the run, and a notification that
    /// cannot be sent (nothing listens at the SMTP URL) changes nothing.
    async fn a_due_task_runs_once_through_chat_service(backend) {
        let upstream = ScriptedHttp::chat_turns(vec![ScriptedTurn::text("The answer is 42.")]).await;
        let stack = stack(&backend, &upstream.base_url).await;
        let db = store(&stack).await;
        let alice = owner(&stack, "alice").await;
        let mut blocks = MemoryBlockServiceClient::new(stack.chat().channel());
        let block = blocks
            .create_memory_block(stack.req(Service::Chat, &alice, chat::MemoryBlockFields {
                name: Some("prefs".into()),
                content: Some("alice likes tea".into()),
                ..Default::default()
            }))
            .await
            .unwrap()
            .into_inner();
        blocks
            .set_default_memory_block(stack.req(Service::Chat, &alice, chat::SetDefaultMemoryBlockRequest {
                scope: "llm".into(),
                block_id: Some(block.id.clone()),
            }))
            .await
            .unwrap();
        let before = Utc::now();
        let t = task(&db, &alice, "daily", ("interval", "10 minutes"),
            json!({"message": "What is the answer?", "system_prompt": "Answer in one line."}),
            before - Duration::seconds(1),
            |t| t.notification_email = "alice@example.com".into()).await;
        let replica = scheduler(&stack, |c| {
            c.smtp_url = Some("smtp://127.0.0.1:1".to_owned().into());
        }).await;

        let runs = ended(&db, &t.id, 1).await;
        let after = Utc::now();
        assert_eq!(runs.len(), 1, "{}", backend.name);
        let run = &runs[0];
        assert_eq!(run.status, "completed", "{}: {}", backend.name, run.error_message);
        assert_eq!(run.result_summary, "The answer is 42.");
        assert_eq!(run.trigger_source, "scheduled");
        assert_eq!(run.scheduled_for, t.next_execution_at.unwrap());
        assert!(run.started_at.unwrap() >= before && run.completed_at.unwrap() <= after);
        assert!(run.started_at <= run.completed_at);
        assert!(!run.chat_session_id.is_empty());
        assert!(run.lease_until.is_none());

        let messages = stack.messages(stack.chat(), &alice, &run.chat_session_id).await;
        assert_eq!(messages.len(), 2, "{}: the question and the reply in alice's session", backend.name);
        assert_eq!(messages[0].content, "What is the answer?", "{}: the question as the task asks it", backend.name);
        assert_eq!(messages[1].content, "The answer is 42.");

        let bodies = upstream.bodies();
        assert_eq!(bodies.len(), 1, "{}: one model call", backend.name);
        assert!(bodies[0].to_string().contains("alice likes tea"), "{}: the owner's default memory block: {}", backend.name, bodies[0]);
        let system: Vec<&str> = bodies[0]["messages"]
            .as_array()
            .unwrap()
            .iter()
            .filter(|m| m["role"] == "system")
            .filter_map(|m| m["content"].as_str())
            .collect();
        assert!(system.contains(&"Answer in one line."), "{}: the task's system_prompt is a system message: {system:?}", backend.name);

        let task = task_row(&db, &t.id).await;
        assert_eq!(task.execution_count, 1);
        assert_eq!(task.status, "active");
        assert_eq!(task.execution_status, "idle");
        let last = task.last_execution_at.unwrap();
        assert!(last >= before && last <= after);
        let next = task.next_execution_at.unwrap();
        assert!(next >= before + Duration::minutes(10) && next <= after + Duration::minutes(10),
            "{}: next {next} is 10 minutes after the run", backend.name);

        let job = until(20, "the job history has the run", || async {
            AdminServiceClient::new(stack.admin().channel())
                .get_own_job(stack.req(Service::Admin, &alice, GetOwnJobRequest { job_id: run.id.clone() }))
                .await
                .ok()
                .map(|r| r.into_inner())
                .filter(|j| j.status == "completed")
        }).await;
        assert_eq!(job.kind, "scheduled_task");
        assert_eq!(job.name, "daily", "{}: the history names the job after its task", backend.name);
        // The replica counted one due time claimed, its lag, and one scheduled run completed.
        counted(&[("trigger", "scheduled"), ("outcome", "completed")], 1.0).await;
        assert_eq!(sample("docchat_scheduler_claims_total", &[("result", "claimed")]), 1.0, "{}", backend.name);
        assert_eq!(sample("docchat_scheduler_claim_lag_seconds", &[]), 1.0, "{}", backend.name);
        assert_eq!(sample("docchat_scheduler_executions_total", &[("outcome", "failed")]), 0.0, "{}", backend.name);

        replica.stop().await.unwrap();
        stack.stop().await;
    }

    /// once → completed; max_executions → completed; a next time past expires_at → expired
    /// after the run; a due time past it → expired without a run; a missed time runs once.
    async fn tasks_complete_expire_and_catch_up_once(backend) {
        let upstream = ScriptedHttp::chat_turns(vec![ScriptedTurn::text("done")]).await;
        let stack = stack(&backend, &upstream.base_url).await;
        let db = store(&stack).await;
        let bob = owner(&stack, "bob").await;
        let now = Utc::now();
        let msg = json!({"message": "go"});
        let once = task(&db, &bob, "once", ("once", &(now - Duration::seconds(1)).to_rfc3339()), msg.clone(), now - Duration::seconds(1), |_| {}).await;
        let capped = task(&db, &bob, "capped", ("interval", "1 minutes"), msg.clone(), now, |t| t.max_executions = Some(1)).await;
        let expiring = task(&db, &bob, "expiring", ("interval", "10 minutes"), msg.clone(), now, |t| t.expires_at = Some(now + Duration::minutes(5))).await;
        let stale = task(&db, &bob, "stale", ("interval", "10 minutes"), msg.clone(), now - Duration::minutes(20), |t| t.expires_at = Some(now - Duration::minutes(10))).await;
        let missed = task(&db, &bob, "missed", ("interval", "1 minutes"), msg.clone(), now - Duration::minutes(30), |_| {}).await;
        // Due at a time that already has its execution (it ran): moves on without running.
        let ran = task(&db, &bob, "ran", ("interval", "10 minutes"), msg.clone(), now - Duration::minutes(1), |t| t.execution_count = 1).await;
        executions::ActiveModel::from(executions::Model {
            id: docchat_common::ids::new_id(),
            task_id: ran.id.clone(),
            user_id: bob.user_id.clone(),
            username: bob.username.clone(),
            task_name: ran.name.clone(),
            status: "completed".into(),
            trigger_source: "scheduled".into(),
            scheduled_for: ran.next_execution_at.unwrap(),
            started_at: Some(now),
            completed_at: Some(now),
            lease_until: None,
            worker: "earlier".into(),
            chat_session_id: String::new(),
            result_summary: "done".into(),
            error_message: String::new(),
            created_at: now,
        })
        .insert(&db)
        .await
        .unwrap();
        let replica = scheduler(&stack, |_| {}).await;

        for (t, status) in [(&once, "completed"), (&capped, "completed"), (&expiring, "expired")] {
            let runs = ended(&db, &t.id, 1).await;
            assert_eq!(runs.len(), 1, "{}: {}", backend.name, t.name);
            assert_eq!(runs[0].status, "completed", "{}: {}", backend.name, t.name);
            let row = task_row(&db, &t.id).await;
            assert_eq!((row.status.as_str(), row.next_execution_at, row.execution_count), (status, None, 1),
                "{}: {}", backend.name, t.name);
            assert_eq!(row.execution_status, "idle");
        }
        let caught_up = ended(&db, &missed.id, 1).await;
        let row = until(10, "the stale task expired", || async {
            let r = task_row(&db, &stale.id).await;
            (r.status == "expired").then_some(r)
        }).await;
        assert_eq!((row.next_execution_at, row.execution_count), (None, 0));
        assert!(executions_of(&db, &stale.id).await.is_empty(), "{}: an expired task does not run", backend.name);
        // Thirty missed minutes: one run, then the schedule from now on.
        tokio::time::sleep(std::time::Duration::from_secs(1)).await;
        assert_eq!(executions_of(&db, &missed.id).await.len(), 1, "{}: a missed time runs once, not a burst", backend.name);
        assert_eq!(caught_up[0].scheduled_for, micros(now - Duration::minutes(30)));
        let next = task_row(&db, &missed.id).await.next_execution_at.unwrap();
        assert!(next > Utc::now(), "{}: the next time is after now", backend.name);
        let moved = until(10, "the task whose due time had run moved on", || async {
            let r = task_row(&db, &ran.id).await;
            r.next_execution_at.filter(|n| *n > now).map(|_| r)
        }).await;
        assert_eq!((moved.status.as_str(), moved.execution_count, moved.execution_status.as_str()), ("active", 1, "idle"), "{}", backend.name);
        assert_eq!(executions_of(&db, &ran.id).await.len(), 1, "{}: the due time did not run twice", backend.name);
        assert_eq!(upstream.bodies().len(), 4, "{}", backend.name);
        // Four due times claimed and run; the stale one and the one that had run moved on.
        counted(&[("trigger", "scheduled"), ("outcome", "completed")], 4.0).await;
        assert_eq!(sample("docchat_scheduler_claims_total", &[("result", "claimed")]), 4.0, "{}", backend.name);
        assert_eq!(sample("docchat_scheduler_claims_total", &[("result", "skipped")]), 2.0, "{}", backend.name);

        replica.stop().await.unwrap();
        stack.stop().await;
    }

    /// A collection deleted after the task was made fails each due time with a line naming it;
    /// the task stays active.
    async fn a_deleted_collection_fails_its_next_run_clearly_and_pauses_the_task(backend) {
        let upstream = ScriptedHttp::chat_turns(vec![ScriptedTurn::text("never")]).await;
        let stack = stack(&backend, &upstream.base_url).await;
        let db = store(&stack).await;
        let carol = owner(&stack, "carol").await;
        let mut ingest = stack.ingest_client();
        let collection = ingest
            .create_collection(stack.req(Service::Ingest, &carol, CreateCollectionRequest {
                name: "reports".into(),
                description: String::new(),
                embedding_model: String::new(),
                ..Default::default()
            }))
            .await
            .unwrap()
            .into_inner();
        ingest
            .delete_collection(stack.req(Service::Ingest, &carol, CollectionRef { id: collection.id.clone() }))
            .await
            .unwrap();
        let t = task(&db, &carol, "report", ("interval", "10 minutes"),
            json!({"message": "summarize", "collection_id": collection.id}), Utc::now(), |_| {}).await;
        let replica = scheduler(&stack, |_| {}).await;

        let runs = ended(&db, &t.id, 1).await;
        for run in &runs {
            assert_eq!(run.status, "failed", "{}", backend.name);
            assert!(run.error_message.contains(&collection.id) && run.error_message.contains("no longer exists")
                && run.error_message.ends_with("the task is paused"),
                "{}: {}", backend.name, run.error_message);
            assert!(!run.error_message.contains('\n'));
            assert!(run.result_summary.is_empty() && run.completed_at.is_some());
        }
        let row = task_row(&db, &t.id).await;
        assert_eq!((row.status.as_str(), row.execution_status.as_str(), row.execution_count), ("paused", "idle", 1),
            "{}: the task stops running", backend.name);
        // Its next due time, brought forward: a paused task does not run.
        bring_forward(&db, &t.id).await;
        tokio::time::sleep(std::time::Duration::from_secs(2)).await;
        assert_eq!(task_row(&db, &t.id).await.execution_count, 1, "{}", backend.name);
        assert!(upstream.bodies().is_empty(), "{}: no model call", backend.name);

        replica.stop().await.unwrap();
        stack.stop().await;
    }
}
