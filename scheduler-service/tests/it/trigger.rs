//! A manual run answers at once with the execution running and its session, then completes;
//! the schedule does not move, the count does.

use std::time::Duration;

use chrono::Utc;
use docchat_common::testing::{ScriptedHttp, ScriptedTurn};
use serde_json::json;

use crate::support::*;

docchat_common::backend_tests! {
    async fn trigger_answers_running_then_completes(backend) {
        // A slow answer: the trigger must not wait for it.
        let upstream = ScriptedHttp::chat_turns(vec![
            ScriptedTurn::text("slow and steady answer").delay(Duration::from_millis(300)),
        ]).await;
        let stack = stack(&backend, &upstream.base_url).await;
        let db = store(&stack).await;
        let erin = owner(&stack, "erin").await;
        let next = Utc::now() + chrono::Duration::hours(1);
        let t = task(&db, &erin, "on demand", ("interval", "1 hours"), json!({"message": "now please"}), next, |_| {}).await;
        let (engine, background) = engine_on(&stack, &db);

        let answer = engine.trigger(&erin, t.clone()).await.unwrap();
        assert_eq!(answer.status, "running", "{}", backend.name);
        assert!(!answer.session_id.is_empty());
        let runs = executions_of(&db, &t.id).await;
        assert_eq!(runs.len(), 1);
        assert_eq!((runs[0].id.as_str(), runs[0].status.as_str(), runs[0].trigger_source.as_str()),
            (answer.execution_id.as_str(), "running", "manual"), "{}: answered before the reply", backend.name);
        assert_eq!(runs[0].chat_session_id, answer.session_id);
        assert_eq!(task_row(&db, &t.id).await.execution_status, "running");

        let done = ended(&db, &t.id, 1).await;
        assert_eq!(done[0].status, "completed", "{}: {}", backend.name, done[0].error_message);
        assert_eq!(done[0].result_summary, "slow and steady answer");
        let row = task_row(&db, &t.id).await;
        assert_eq!((row.execution_count, row.execution_status.as_str(), row.status.as_str()), (1, "idle", "active"));
        assert_eq!(row.next_execution_at, t.next_execution_at, "{}: the schedule did not move", backend.name);
        assert!(row.last_execution_at.is_some());
        let messages = stack.messages(stack.chat(), &erin, &answer.session_id).await;
        assert_eq!(messages.last().map(|m| m.content.as_str()), Some("slow and steady answer"));
        // Counted as a manual run; no due time was claimed.
        counted(&[("trigger", "manual"), ("outcome", "completed")], 1.0).await;
        assert_eq!(docchat_common::metrics::sample("docchat_scheduler_claims_total", &[]), 0.0, "{}", backend.name);

        background.shutdown(Duration::from_secs(10)).await;
        stack.stop().await;
    }
}
