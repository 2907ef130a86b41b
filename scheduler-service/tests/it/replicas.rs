//! Several replicas on PostgreSQL + RabbitMQ: each due time runs exactly once (also when
//! replicas race for the same due rows), and a replica killed with -9 mid-execution leaves
//! nothing running for ever.

use std::collections::BTreeSet;
use std::process::Stdio;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use chrono::{DateTime, DurationRound, TimeDelta, Utc};
use docchat_common::config::Service;
use docchat_common::testing::{Backend, ScriptedHttp, ScriptedTurn, SeenRequest, Streamed};
use docchat_scheduler_service::entities::scheduled_tasks as tasks;
use sea_orm::sea_query::Expr;
use sea_orm::{ColumnTrait, EntityTrait, QueryFilter};
use secrecy::ExposeSecret;
use serde_json::json;

use crate::support::*;

/// The next whole minute after `t`.
fn next_minute(t: DateTime<Utc>) -> DateTime<Utc> {
    t.duration_trunc(TimeDelta::minutes(1)).unwrap() + TimeDelta::minutes(1)
}

/// Two replicas, five tasks due every minute (`* * * * *`) for three minutes in real time:
/// every due time of every task has exactly one execution and one model call, all completed.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn multi_replica_two_schedulers_run_each_due_minute_exactly_once() {
    let Some(backend) = Backend::postgres() else {
        return;
    };
    let upstream = ScriptedHttp::chat_turns(vec![ScriptedTurn::text("tick")]).await;
    let stack = stack(&backend, &upstream.base_url).await;
    let db = store(&stack).await;
    let frank = owner(&stack, "frank").await;
    let first = next_minute(Utc::now());
    let mut ids = Vec::new();
    for i in 0..5 {
        let t = task(
            &db,
            &frank,
            &format!("every minute {i}"),
            ("recurring", "* * * * *"),
            json!({"message": format!("minute task {i}")}),
            first,
            |_| {},
        )
        .await;
        ids.push(t.id);
    }
    let a = scheduler(&stack, |_| {}).await;
    let b = scheduler(&stack, |_| {}).await;
    // Three due times: first, first + 1 min, first + 2 min; stop well before the fourth.
    let stop_at = first + TimeDelta::minutes(2) + TimeDelta::seconds(20);
    tokio::time::sleep((stop_at - Utc::now()).to_std().unwrap_or_default()).await;
    for id in &ids {
        ended(&db, id, 3).await;
    }
    a.stop().await.unwrap();
    b.stop().await.unwrap();

    let expected: BTreeSet<_> = (0..3).map(|m| first + TimeDelta::minutes(m)).collect();
    let mut workers = BTreeSet::new();
    for id in &ids {
        let runs = executions_of(&db, id).await;
        let due: BTreeSet<_> = runs.iter().map(|r| r.scheduled_for).collect();
        assert_eq!(runs.len(), 3, "task {id}: {runs:#?}");
        assert_eq!(due, expected, "task {id}: one execution per due minute");
        assert!(runs.iter().all(|r| r.status == "completed"), "{runs:#?}");
        workers.extend(runs.iter().map(|r| r.worker.clone()));
        let row = task_row(&db, id).await;
        assert_eq!(row.execution_count, 3);
        assert_eq!(row.next_execution_at, Some(first + TimeDelta::minutes(3)));
    }
    let calls = upstream.bodies();
    assert_eq!(calls.len(), 15, "one model call per execution");
    for i in 0..5 {
        let marker = format!("minute task {i}");
        assert_eq!(
            calls
                .iter()
                .filter(|b| b.to_string().contains(&marker))
                .count(),
            3,
            "{marker}"
        );
    }
    eprintln!(
        "executions ran on {} replica(s): {workers:?}",
        workers.len()
    );
    stack.stop().await;
}

/// scheduler-service's binary claims a task and hangs on the model; `kill -9` ends it. An
/// in-process replica's reaper fails the execution once its lease lapses and sets the task
/// idle; the task's next due time then runs exactly once.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_killed_replicas_execution_is_reaped_and_the_next_time_runs_once() {
    let Some(backend) = Backend::postgres() else {
        return;
    };
    // The first model call hangs (the child is killed in it); later ones answer.
    let calls = Arc::new(AtomicUsize::new(0));
    let counted = calls.clone();
    let upstream = ScriptedHttp::start_streaming(Arc::new(move |_r: &SeenRequest| {
        if counted.fetch_add(1, Ordering::SeqCst) == 0 {
            Streamed {
                status: 200,
                content_type: "text/event-stream".into(),
                parts: vec![(Duration::from_secs(600), b"data: [DONE]\n\n".to_vec())],
            }
        } else {
            ScriptedTurn::text("recovered").streamed()
        }
    }))
    .await;
    let stack = stack(&backend, &upstream.base_url).await;
    let db = store(&stack).await;
    let gina = owner(&stack, "gina").await;
    let t = task(
        &db,
        &gina,
        "hourly",
        ("interval", "1 hours"),
        json!({"message": "work"}),
        Utc::now(),
        |_| {},
    )
    .await;

    let config = &stack.config;
    #[expect(
        clippy::disallowed_methods,
        reason = "the child gets only the test's PATH of its environment"
    )]
    let mut child = std::process::Command::new(env!("CARGO_BIN_EXE_scheduler-service"))
        .env_clear()
        .env("PATH", std::env::var("PATH").unwrap_or_default())
        .env("DOCCHAT_GRPC_ADDR", "127.0.0.1:0")
        .env("DOCCHAT_DATA_DIR", stack.data_dir())
        .env(
            "DOCCHAT_DATABASE_URL",
            stack.ctx.database_url(Service::Scheduler),
        )
        .env("DOCCHAT_AMQP_URL", config.amqp_url.clone().unwrap())
        .env("DOCCHAT_BUS_NAMESPACE", &config.bus_namespace)
        .env("DOCCHAT_ADMIN_URL", &config.admin_url)
        .env("DOCCHAT_CHAT_URL", &config.chat_url)
        .env("DOCCHAT_INGEST_URL", &config.ingest_url)
        .env(
            "DOCCHAT_INTERNAL_JWT_SECRET",
            config.internal_jwt_secret.as_ref().unwrap().expose_secret(),
        )
        .env("DOCCHAT_SCHEDULER_TICK_MS", "100")
        .env("DOCCHAT_SCHEDULER_LEASE_SECONDS", "2")
        .stdout(Stdio::null())
        .stderr(Stdio::inherit())
        .spawn()
        .unwrap();
    let running = until(
        60,
        "the child claimed the task and reached the model",
        || async {
            let runs = executions_of(&db, &t.id).await;
            (runs.len() == 1
                && !runs[0].chat_session_id.is_empty()
                && calls.load(Ordering::SeqCst) == 1)
                .then(|| runs[0].clone())
        },
    )
    .await;
    assert_eq!(running.status, "running");
    // kill -9 (SIGKILL): no shutdown code runs.
    child.kill().unwrap();
    child.wait().unwrap();
    let killed_worker = running.worker.clone();

    let replica = scheduler(&stack, |_| {}).await;
    let reaped = ended(&db, &t.id, 1).await;
    assert_eq!(reaped[0].status, "failed");
    assert_eq!(
        reaped[0].error_message,
        "the scheduler replica running it stopped"
    );
    assert!(reaped[0].completed_at.is_some());
    let row = task_row(&db, &t.id).await;
    assert_eq!(
        (
            row.execution_status.as_str(),
            row.status.as_str(),
            row.execution_count
        ),
        ("idle", "active", 1)
    );

    // The next due time (an hour away, brought forward) runs once, on the live replica.
    bring_forward(&db, &t.id).await;
    let runs = ended(&db, &t.id, 2).await;
    tokio::time::sleep(Duration::from_secs(1)).await;
    let runs_after = executions_of(&db, &t.id).await;
    assert_eq!(runs_after.len(), 2, "{runs_after:#?}");
    let next = runs.iter().find(|r| r.id != running.id).unwrap();
    assert_eq!(next.status, "completed", "{}", next.error_message);
    assert_eq!(next.result_summary, "recovered");
    assert_ne!(next.worker, killed_worker);
    assert_eq!(calls.load(Ordering::SeqCst), 2);
    assert_eq!(task_row(&db, &t.id).await.execution_status, "idle");

    replica.stop().await.unwrap();
    stack.stop().await;
}

/// Three replicas ticking every 10 ms, then 60 hourly tasks made due at one instant (one
/// UPDATE turns them from paused to active, due a second ago): the replicas race for the same
/// rows, and each task still has exactly one execution — of its due time — and one model
/// call, and more than one replica claimed work (the race was real).
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn multi_replica_racing_replicas_claim_each_due_time_once() {
    const TASKS: usize = 60;
    const REPLICAS: usize = 3;
    let Some(backend) = Backend::postgres() else {
        return;
    };
    let upstream = ScriptedHttp::chat_turns(vec![ScriptedTurn::text("raced")]).await;
    let stack = stack(&backend, &upstream.base_url).await;
    let db = store(&stack).await;
    let hank = owner(&stack, "hank").await;
    let due = micros(Utc::now() - TimeDelta::seconds(1));
    let mut ids = Vec::new();
    for i in 0..TASKS {
        let t = task(
            &db,
            &hank,
            &format!("racing {i}"),
            ("interval", "1 hours"),
            json!({"message": format!("racing task <{i:03}>")}),
            due,
            |t| t.status = "paused".into(),
        )
        .await;
        ids.push(t.id);
    }
    // Started together, all ticking before anything is due.
    let replicas = futures::future::join_all(
        (0..REPLICAS).map(|_| scheduler(&stack, |c| c.scheduler_tick_ms = 10)),
    )
    .await;
    tokio::time::sleep(Duration::from_millis(300)).await;
    let activated = tasks::Entity::update_many()
        .col_expr(tasks::Column::Status, Expr::value("active"))
        .filter(tasks::Column::Id.is_in(ids.clone()))
        .exec(&db)
        .await
        .unwrap();
    assert_eq!(activated.rows_affected, TASKS as u64);

    for id in &ids {
        ended(&db, id, 1).await;
    }
    // A late second claim would show up now: wait again for everything to end.
    tokio::time::sleep(Duration::from_secs(1)).await;
    for id in &ids {
        ended(&db, id, 1).await;
    }
    for r in replicas {
        r.stop().await.unwrap();
    }

    let calls = upstream.bodies();
    let mut workers = BTreeSet::new();
    let mut wrong = Vec::new();
    let (mut executions, mut duplicated) = (0, 0);
    for (i, id) in ids.iter().enumerate() {
        let runs = executions_of(&db, id).await;
        executions += runs.len();
        duplicated += usize::from(runs.len() > 1);
        workers.extend(runs.iter().map(|r| r.worker.clone()));
        let row = task_row(&db, id).await;
        let marker = format!("racing task <{i:03}>");
        let model_calls = calls
            .iter()
            .filter(|b| b.to_string().contains(&marker))
            .count();
        let once = runs.len() == 1
            && runs[0].scheduled_for == due
            && runs[0].status == "completed"
            && row.execution_count == 1
            && model_calls == 1;
        if !once {
            wrong.push(format!(
                "task {i}: {} execution(s) {:?}, execution_count {}, {model_calls} model call(s)",
                runs.len(),
                runs.iter()
                    .map(|r| (r.scheduled_for, r.status.as_str(), r.worker.as_str()))
                    .collect::<Vec<_>>(),
                row.execution_count
            ));
        }
    }
    assert!(
        wrong.is_empty(),
        "{} of {TASKS} tasks did not run their due time exactly once; {duplicated} ran more than \
         once ({executions} executions, {} model calls in all):\n{}",
        wrong.len(),
        calls.len(),
        wrong.join("\n")
    );
    assert_eq!(calls.len(), TASKS, "one model call per task");
    eprintln!(
        "executions ran on {} replica(s): {workers:?}",
        workers.len()
    );
    assert!(
        workers.len() > 1,
        "only one replica claimed anything, so no race was observed: {workers:?}"
    );
    stack.stop().await;
}
