//! Scheduled tasks end to end: create and its validation, the update rules of SPEC.md,
//! pause and resume, the list's filters, deletes, the summary and the executions' listings
//! (rows written straight into scheduler-service's store: the engine that runs tasks is
//! another piece).

use chrono::{DateTime, Duration, Utc};
use docchat_common::config::Service;
use docchat_scheduler_service::entities::{scheduled_tasks, task_executions};
use reqwest::Method;
use sea_orm::{ActiveModelTrait, EntityTrait, Set};
use serde_json::{Value, json};

use crate::harness::{Stack, assert_error};

const BASE: &str = "/api/v1/scheduled_tasks";

fn task(name: &str) -> Value {
    json!({
        "name": name,
        "schedule_type": "recurring",
        "schedule_expression": "0 9 * * *",
        "task_type": "chat_completion",
        "task_config": {"message": "Summarize yesterday"},
    })
}

fn with(mut body: Value, extra: Value) -> Value {
    body.as_object_mut()
        .unwrap()
        .extend(extra.as_object().unwrap().clone());
    body
}

async fn create(app: &Stack, key: &str, body: Value) -> Value {
    let (s, b) = app.call(Method::POST, BASE, key, Some(body)).await;
    assert_eq!(s, 201, "{b}");
    b
}

async fn update(app: &Stack, key: &str, id: &str, body: Value) -> (u16, Value) {
    app.call(Method::PUT, &format!("{BASE}/{id}"), key, Some(body))
        .await
}

async fn get(app: &Stack, key: &str, path: &str) -> (u16, Value) {
    app.call(Method::GET, path, key, None).await
}

async fn list(app: &Stack, key: &str, query: &str) -> Value {
    let (s, b) = get(app, key, &format!("{BASE}{query}")).await;
    assert_eq!(s, 200, "{query}: {b}");
    b
}

fn names(list: &Value) -> Vec<&str> {
    list["items"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| t["name"].as_str().unwrap())
        .collect()
}

fn at(v: &Value) -> DateTime<Utc> {
    DateTime::parse_from_rfc3339(v.as_str().unwrap_or_else(|| panic!("a timestamp: {v}")))
        .unwrap()
        .with_timezone(&Utc)
}

fn id(v: &Value) -> String {
    v["id"].as_str().unwrap().to_owned()
}

/// Sets a stored task's columns the engine owns (status, counters).
async fn set_task(app: &Stack, id: &str, f: impl FnOnce(&mut scheduled_tasks::ActiveModel)) {
    let db = app.database(Service::Scheduler).await;
    let row = scheduled_tasks::Entity::find_by_id(id.to_owned())
        .one(&db)
        .await
        .unwrap()
        .unwrap();
    let mut active: scheduled_tasks::ActiveModel = row.into();
    f(&mut active);
    active.update(&db).await.unwrap();
    db.close().await.unwrap();
}

docchat_common::backend_tests! {
    /// Create answers 201 with the client's shape (strings never null, next run computed);
    /// every malformed field is a 400 that stores nothing; a duplicate name is 409 for its
    /// owner only; another user's task is 404.
    async fn scheduled_tasks_are_created_validated_and_private(backend) {
        let app = Stack::docchat(&backend).await;
        let (_, alice) = app.user("alice").await;
        let (_, bob) = app.user("bob").await;
        let collection = crate::harness::collection(&app, &alice).await;
        let before = Utc::now();

        let t = create(&app, &alice, with(task("daily"), json!({"notification_email": "current_user", "max_executions": 3}))).await;
        for field in ["id", "user_id", "username", "name", "description", "schedule_type", "schedule_expression",
                      "task_type", "status", "execution_status", "notification_email", "created_at", "updated_at"] {
            assert!(t[field].is_string(), "{field}: {t}");
        }
        assert_eq!((t["name"].as_str(), t["description"].as_str(), t["username"].as_str()), (Some("daily"), Some(""), Some("alice")));
        assert_eq!((t["status"].as_str(), t["execution_status"].as_str()), (Some("active"), Some("idle")));
        assert_eq!(t["task_config"], json!({"message": "Summarize yesterday"}));
        assert_eq!(t["notification_email"], "alice@example.com");
        assert_eq!((t["max_executions"].as_i64(), t["execution_count"].as_i64()), (Some(3), Some(0)));
        assert_eq!((t["is_owner"].as_bool(), t["last_execution_at"].is_null(), t["expires_at"].is_null()), (Some(true), true, true));
        let next = at(&t["next_execution_at"]);
        assert!(next > before && next <= before + Duration::days(1) && next.format("%H:%M:%S").to_string() == "09:00:00", "{next}");

        // Other schedules: an interval from now, a once time as given, a timezone, an expiry.
        let i = create(&app, &alice, with(task("every"), json!({"schedule_type": "interval", "schedule_expression": "15 minutes"}))).await;
        let next = at(&i["next_execution_at"]);
        assert!(next >= before + Duration::minutes(15) && next <= Utc::now() + Duration::minutes(15), "{i}");
        let o = create(&app, &alice, with(task("once"), json!({"schedule_type": "once", "schedule_expression": "2099-01-01T09:00:00+02:00",
            "task_type": "agent_task", "expires_at": "2099-06-01T00:00:00Z", "max_executions": null}))).await;
        assert_eq!(at(&o["next_execution_at"]), at(&json!("2099-01-01T07:00:00Z")));
        assert_eq!(at(&o["expires_at"]), at(&json!("2099-06-01T00:00:00Z")));
        assert!(o["max_executions"].is_null());
        let k = create(&app, &alice, with(task("kolkata"), json!({"task_config": {"message": "m", "timezone": "Asia/Kolkata", "collection_id": collection}}))).await;
        assert_eq!(at(&k["next_execution_at"]).format("%H:%M").to_string(), "03:30");

        // What a task names must be its owner's: another user's (or an unknown) collection
        // or memory block is a 404 at creation, and nothing is stored.
        let (s, block) = app
            .call(Method::POST, "/api/v1/memory_blocks", &alice, Some(json!({"name": "facts", "content": "x"})))
            .await;
        assert!(s == 200 || s == 201, "{block}");
        let block = block["id"].as_str().unwrap().to_owned();
        for config in [
            json!({"message": "m", "collection_id": collection}),
            json!({"message": "m", "collection_id": "00000000-0000-4000-8000-000000000000"}),
            json!({"message": "m", "llm_args": {"memory_block_id": block}}),
        ] {
            let (s, e) = app
                .call(Method::POST, BASE, &bob, Some(with(task("borrowed"), json!({"task_config": config}))))
                .await;
            assert_error(s, &e, 404);
        }
        assert_eq!(list(&app, &bob, "").await["total"], 0, "nothing stored for bob");
        create(&app, &alice, with(task("own block"), json!({"task_config": {"message": "m", "llm_args": {"memory_block_id": block}}}))).await;

        // 409 for the owner's duplicate name; bob may use it.
        let (s, e) = app.call(Method::POST, BASE, &alice, Some(task("daily"))).await;
        assert_error(s, &e, 409);
        create(&app, &bob, task("daily")).await;

        // Every bad field: 400 with its reason, nothing stored.
        let past = (Utc::now() - Duration::hours(1)).to_rfc3339();
        let soon = (Utc::now() + Duration::hours(1)).to_rfc3339();
        for (bad, why) in [
            (json!({"name": ""}), "name"),
            (json!({"name": "   "}), "name"),
            (json!({"schedule_type": "weekly"}), "schedule_type"),
            (json!({"schedule_expression": "0 0 9 * * *"}), "five-field"),
            (json!({"schedule_expression": "61 9 * * *"}), "schedule_expression"),
            (json!({"schedule_expression": format!("{} 9 * * *", (0..60).chain(0..60).map(|m| m.to_string()).collect::<Vec<_>>().join(","))}), "longer than"),
            (json!({"schedule_type": "interval", "schedule_expression": "0 minutes"}), "schedule_expression"),
            (json!({"schedule_type": "interval", "schedule_expression": "5 days"}), "schedule_expression"),
            (json!({"schedule_type": "once", "schedule_expression": "next tuesday"}), "ISO 8601"),
            (json!({"schedule_type": "once", "schedule_expression": past}), "past"),
            (json!({"task_type": "shell"}), "task_type"),
            (json!({"task_config": {}}), "message"),
            (json!({"task_config": {"message": ""}}), "message"),
            (json!({"task_config": {"message": 3}}), "message"),
            (json!({"task_config": "do it"}), "task_config"),
            (json!({"task_config": {"message": "m", "collection_id": "not-a-uuid"}}), "collection_id"),
            (json!({"task_config": {"message": "m", "timezone": "Mars/Olympus"}}), "timezone"),
            (json!({"expires_at": past}), "future"),
            (json!({"expires_at": "soon"}), "expires_at"),
            (json!({"schedule_type": "interval", "schedule_expression": "10 hours", "expires_at": soon}), "never run"),
            (json!({"max_executions": 0}), "max_executions"),
            (json!({"max_executions": -1}), "max_executions"),
            (json!({"notification_email": "nobody"}), "notification_email"),
            (json!({"status": "paused"}), "status"),
            (json!({"max_executions": "3"}), ""),
        ] {
            let (s, e) = app.call(Method::POST, BASE, &alice, Some(with(task("bad"), bad.clone()))).await;
            assert_error(s, &e, 400);
            assert!(e["message"].as_str().unwrap().contains(why), "{bad}: {e}");
        }
        for missing in ["name", "schedule_type", "schedule_expression", "task_type", "task_config"] {
            let mut body = task("bad");
            body.as_object_mut().unwrap().remove(missing);
            let (s, e) = app.call(Method::POST, BASE, &alice, Some(body)).await;
            assert_error(s, &e, 400);
            assert!(e["message"].as_str().unwrap().contains(missing), "{e}");
        }
        let r = app.http(Method::POST, BASE, Some(&alice)).header("content-type", "application/json").body("{\"name\": ").send().await.unwrap();
        let (s, e) = crate::harness::read(r).await;
        assert_error(s, &e, 400);
        assert_eq!(list(&app, &alice, "").await["total"], 5, "nothing stored by a refused create");

        // Reads: the owner's only.
        let (s, got) = get(&app, &alice, &format!("{BASE}/{}", id(&t))).await;
        assert_eq!((s, &got), (200, &t));
        for (method, path) in [(Method::GET, format!("{BASE}/{}", id(&t))), (Method::DELETE, format!("{BASE}/{}", id(&t))),
                               (Method::POST, format!("{BASE}/{}/trigger", id(&t))), (Method::GET, format!("{BASE}/{}/executions", id(&t))),
                               (Method::GET, format!("{BASE}/00000000-0000-0000-0000-000000000000"))] {
            let (s, e) = app.call(method.clone(), &path, &bob, if method == Method::POST { Some(json!({})) } else { None }).await;
            assert_error(s, &e, 404);
        }
        let (s, e) = update(&app, &bob, &id(&t), json!({"status": "paused"})).await;
        assert_error(s, &e, 404);
        assert_eq!(names(&list(&app, &bob, "").await), vec!["daily"]);
        let (_, still) = get(&app, &alice, &format!("{BASE}/{}", id(&t))).await;
        assert_eq!(still["status"], "active", "bob's refused calls changed nothing");

        // Nor can an update point a task at another user's collection.
        let bobs = crate::harness::collection(&app, &bob).await;
        for body in [json!({"task_config_patch": {"collection_id": bobs}}),
                     json!({"task_config": {"message": "m", "collection_id": bobs}})] {
            let (s, e) = update(&app, &alice, &id(&t), body).await;
            assert_error(s, &e, 404);
        }
        let (_, still) = get(&app, &alice, &format!("{BASE}/{}", id(&t))).await;
        assert_eq!(still, t, "a refused update changed nothing");
        app.stop().await;
    }

    /// SPEC.md's update rules 1–4, pause and resume, and when a completed or expired task
    /// may run again.
    async fn scheduled_task_updates_follow_the_rules(backend) {
        let app = Stack::docchat(&backend).await;
        let (_, alice) = app.user("alice").await;
        let collection = crate::harness::collection(&app, &alice).await;
        let t = create(&app, &alice, with(task("t"), json!({
            "max_executions": 5, "expires_at": "2099-01-01T00:00:00Z",
            "task_config": {"message": "m", "timezone": "UTC", "llm": "a", "llm_args": {"x": 1, "y": 2}, "collection_id": collection},
        }))).await;
        let tid = id(&t);
        let path = format!("{BASE}/{tid}");

        // Rule 1: the sentinels clear.
        let (s, u) = update(&app, &alice, &tid, json!({"max_executions": -1, "expires_at": "1970-01-01T00:00:00Z"})).await;
        assert_eq!(s, 200, "{u}");
        assert!(u["max_executions"].is_null() && u["expires_at"].is_null(), "{u}");
        let (s, u) = update(&app, &alice, &tid, json!({"max_executions": 7, "description": "d", "notification_email": "ops@example.org"})).await;
        assert_eq!(s, 200, "{u}");
        assert_eq!((u["max_executions"].as_i64(), u["description"].as_str(), u["notification_email"].as_str()), (Some(7), Some("d"), Some("ops@example.org")));
        assert_eq!(u["task_config"], t["task_config"], "fields not sent stay");

        // Rule 4 (before rule 2 changes the zone): a timezone-only patch recomputes the next run.
        assert_eq!(at(&u["next_execution_at"]).format("%H:%M").to_string(), "09:00");
        let (s, u) = update(&app, &alice, &tid, json!({"task_config_patch": {"timezone": "Asia/Kolkata"}})).await;
        assert_eq!(s, 200, "{u}");
        let next = at(&u["next_execution_at"]);
        assert_eq!(next.format("%H:%M").to_string(), "03:30", "{u}");
        assert!(next > Utc::now() && next <= Utc::now() + Duration::days(1));
        let (s, u) = update(&app, &alice, &tid, json!({"schedule_expression": "15 10 * * *"})).await;
        assert_eq!(s, 200);
        assert_eq!(at(&u["next_execution_at"]).format("%H:%M").to_string(), "04:45", "10:15 in Kolkata: {u}");

        // Rule 2: top-level merge, null removes, a nested object replaces whole; the
        // collection column follows (the list filter sees the unbinding).
        assert_eq!(list(&app, &alice, "?has_collection=true").await["total"], 1);
        let (s, u) = update(&app, &alice, &tid, json!({"task_config_patch": {"llm": null, "collection_id": null, "llm_args": {"z": 3}, "system_prompt": "S"}})).await;
        assert_eq!(s, 200, "{u}");
        assert_eq!(u["task_config"], json!({"message": "m", "timezone": "Asia/Kolkata", "llm_args": {"z": 3}, "system_prompt": "S"}));
        assert_eq!(list(&app, &alice, "?has_collection=true").await["total"], 0);

        // Rule 3: both at once, or a merged config without a message: 400, nothing changes.
        for bad in [
            json!({"task_config": {"message": "x"}, "task_config_patch": {"llm": "b"}}),
            json!({"task_config_patch": {"message": null}}),
            json!({"task_config_patch": {"message": ""}}),
            json!({"task_config_patch": "x"}),
            json!({"task_config": {"llm": "b"}}),
            json!({"task_config_patch": {"timezone": "Nowhere/Land"}}),
            json!({"status": "completed"}),
            json!({"status": "expired"}),
            json!({"status": "running"}),
            json!({"max_executions": 0}),
            json!({"max_executions": -2}),
            json!({"expires_at": "2001-01-01T00:00:00Z"}),
            json!({"name": ""}),
            json!({"schedule_expression": "* * * *"}),
            json!({"task_type": "other"}),
        ] {
            let (s, e) = update(&app, &alice, &tid, bad.clone()).await;
            assert_error(s, &e, 400);
            let (_, now) = get(&app, &alice, &path).await;
            assert_eq!(now, u, "{bad} changed the task");
        }
        // A whole task_config replaces the stored one.
        let (s, r) = update(&app, &alice, &tid, json!({"task_config": {"message": "new"}})).await;
        assert_eq!(s, 200);
        assert_eq!(r["task_config"], json!({"message": "new"}));
        assert_eq!(at(&r["next_execution_at"]).format("%H:%M").to_string(), "10:15", "the zone went back to UTC: {r}");
        create(&app, &alice, task("other")).await;
        let (s, e) = update(&app, &alice, &tid, json!({"name": "other"})).await;
        assert_error(s, &e, 409);

        // Pause keeps next_execution_at; resume recomputes it from now.
        let (s, p) = update(&app, &alice, &tid, json!({"status": "paused"})).await;
        assert_eq!((s, p["status"].as_str()), (200, Some("paused")));
        assert_eq!(p["next_execution_at"], r["next_execution_at"]);
        let stale = Utc::now() - Duration::days(3);
        set_task(&app, &tid, |t| t.next_execution_at = Set(Some(stale))).await;
        let (s, a) = update(&app, &alice, &tid, json!({"status": "active"})).await;
        assert_eq!((s, a["status"].as_str()), (200, Some("active")));
        let next = at(&a["next_execution_at"]);
        assert!(next > Utc::now() && next.format("%H:%M").to_string() == "10:15", "{a}");

        // Completed: resumes only once the limit is lifted; expired likewise for the expiry.
        set_task(&app, &tid, |t| {
            t.status = Set("completed".into());
            t.execution_count = Set(7);
            t.next_execution_at = Set(None);
        }).await;
        for refused in [json!({"status": "active"}), json!({"status": "paused"}), json!({"status": "active", "max_executions": 7})] {
            let (s, e) = update(&app, &alice, &tid, refused).await;
            assert_error(s, &e, 400);
        }
        let (s, c) = update(&app, &alice, &tid, json!({"max_executions": 8})).await;
        assert_eq!((s, c["status"].as_str()), (200, Some("completed")), "lifting alone does not resume");
        assert!(c["next_execution_at"].is_null());
        let (s, a) = update(&app, &alice, &tid, json!({"status": "active"})).await;
        assert_eq!((s, a["status"].as_str()), (200, Some("active")), "{a}");
        assert!(at(&a["next_execution_at"]) > Utc::now());

        set_task(&app, &tid, |t| {
            t.status = Set("expired".into());
            t.expires_at = Set(Some(Utc::now() - Duration::minutes(1)));
            t.next_execution_at = Set(None);
        }).await;
        let (s, e) = update(&app, &alice, &tid, json!({"status": "active"})).await;
        assert_error(s, &e, 400);
        assert!(e["message"].as_str().unwrap().contains("expires_at"), "{e}");
        let (s, a) = update(&app, &alice, &tid, json!({"status": "active", "expires_at": "1970-01-01T00:00:00Z"})).await;
        assert_eq!((s, a["status"].as_str(), a["expires_at"].is_null()), (200, Some("active"), true), "{a}");

        // A once task that ran resumes only with a new time ahead.
        let o = create(&app, &alice, with(task("o"), json!({"schedule_type": "once", "schedule_expression": "2099-01-01T00:00:00Z"}))).await;
        let past = (Utc::now() - Duration::hours(1)).to_rfc3339();
        set_task(&app, &id(&o), |t| {
            t.status = Set("completed".into());
            t.schedule_expression = Set(past.clone());
            t.execution_count = Set(1);
            t.next_execution_at = Set(None);
        }).await;
        let (s, e) = update(&app, &alice, &id(&o), json!({"status": "active"})).await;
        assert_error(s, &e, 400);
        let (s, a) = update(&app, &alice, &id(&o), json!({"status": "active", "schedule_expression": "2099-02-01T00:00:00Z"})).await;
        assert_eq!((s, a["status"].as_str()), (200, Some("active")), "{a}");
        assert_eq!(at(&a["next_execution_at"]), at(&json!("2099-02-01T00:00:00Z")));
        app.stop().await;
    }

    /// The list's filters and order, deletes with their executions, the batch count and the
    /// summary's counters.
    async fn scheduled_task_lists_deletes_and_summary(backend) {
        let app = Stack::docchat(&backend).await;
        let (_, alice) = app.user("alice").await;
        let (_, bob) = app.user("bob").await;
        let collection = crate::harness::collection(&app, &alice).await;
        let a = create(&app, &alice, with(task("Alpha report"), json!({"task_config": {"message": "m", "collection_id": collection}}))).await;
        let b = create(&app, &alice, with(task("beta_ALPHA"), json!({"schedule_type": "interval", "schedule_expression": "1 hour", "task_type": "agent_task"}))).await;
        let c = create(&app, &alice, with(task("gamma"), json!({"schedule_type": "once", "schedule_expression": "2099-01-01T00:00:00Z"}))).await;
        let d = create(&app, &alice, with(task("delta 100%"), json!({"schedule_type": "interval", "schedule_expression": "1 minute"}))).await;
        let bobs = create(&app, &bob, task("Alpha bob")).await;
        let (s, _) = update(&app, &alice, &id(&c), json!({"status": "paused"})).await;
        assert_eq!(s, 200);
        set_task(&app, &id(&d), |t| {
            t.status = Set("expired".into());
            t.next_execution_at = Set(None);
            t.execution_status = Set("running".into());
        }).await;

        assert_eq!(names(&list(&app, &alice, "").await), vec!["delta 100%", "gamma", "beta_ALPHA", "Alpha report"], "newest first");
        for (query, want) in [
            ("?name_filter=alpha", vec!["beta_ALPHA", "Alpha report"]),
            ("?name_filter=100%25", vec!["delta 100%"]),
            ("?name_filter=_", vec!["beta_ALPHA"]),
            ("?status_filter=paused", vec!["gamma"]),
            ("?status_filter=expired", vec!["delta 100%"]),
            ("?status_filter=completed", vec![]),
            ("?has_collection=true", vec!["Alpha report"]),
            ("?has_collection=false", vec!["delta 100%", "gamma", "beta_ALPHA"]),
            (&format!("?collection_id={collection}") as &str, vec!["Alpha report"]),
            ("?collection_id=00000000-0000-0000-0000-000000000000", vec![]),
            ("?status_filter=active&name_filter=ALPHA", vec!["beta_ALPHA", "Alpha report"]),
        ] {
            assert_eq!(names(&list(&app, &alice, query).await), want, "{query}");
        }
        let page = list(&app, &alice, "?offset=1&limit=2").await;
        assert_eq!((names(&page), page["total"].as_i64()), (vec!["gamma", "beta_ALPHA"], Some(4)));
        for query in [
            "?status_filter=running".to_owned(),
            "?status_filter=Active".to_owned(),
            format!("?collection_id={collection}&has_collection=true"),
            "?collection_id=nope".to_owned(),
            "?has_collection=maybe".to_owned(),
            "?limit=-1".to_owned(),
        ] {
            let (s, e) = get(&app, &alice, &format!("{BASE}{query}")).await;
            assert_error(s, &e, 400);
        }

        // Summary: the caller's tasks only.
        // Active tasks due before the end of today (UTC): beta within the hour, Alpha at 09:00.
        let midnight = (Utc::now() + Duration::days(1)).date_naive().and_hms_opt(0, 0, 0).unwrap().and_utc();
        let today = [&a, &b].iter().filter(|t| at(&t["next_execution_at"]) < midnight).count();
        let (s, sum) = get(&app, &alice, &format!("{BASE}/summary")).await;
        assert_eq!(s, 200, "{sum}");
        assert_eq!(sum, json!({
            "total_tasks": 4, "active_tasks": 2, "currently_running_tasks": 1, "paused_tasks": 1,
            "completed_tasks": 0, "expired_tasks": 1, "recurring_tasks": 3, "one_time_tasks": 1,
            "chat_completion_tasks": 3, "agent_tasks": 1, "total_executions": 0,
            "tasks_executing_today": today,
        }));

        // Deletes: the task and its executions; batch counts the caller's only.
        let db = app.database(Service::Scheduler).await;
        for (n, task) in [&a, &bobs].into_iter().enumerate() {
            task_executions::ActiveModel {
                id: Set(format!("exec-{n}")),
                task_id: Set(id(task)),
                user_id: Set(task["user_id"].as_str().unwrap().to_owned()),
                username: Set(task["username"].as_str().unwrap().to_owned()),
                task_name: Set(task["name"].as_str().unwrap().to_owned()),
                status: Set("completed".into()),
                trigger_source: Set("scheduled".into()),
                scheduled_for: Set(Utc::now()),
                started_at: Set(Some(Utc::now())),
                completed_at: Set(None),
                lease_until: Set(None),
                worker: Set(String::new()),
                chat_session_id: Set(String::new()),
                result_summary: Set(String::new()),
                error_message: Set(String::new()),
                created_at: Set(Utc::now()),
            }
            .insert(&db)
            .await
            .unwrap();
        }
        let (_, sum) = get(&app, &alice, &format!("{BASE}/summary")).await;
        assert_eq!(sum["total_executions"], 1);
        let (s, gone) = app.call(Method::DELETE, &format!("{BASE}/{}", id(&a)), &alice, None).await;
        assert_eq!((s, gone), (200, json!({"status": "deleted"})));
        assert!(task_executions::Entity::find_by_id("exec-0".to_owned()).one(&db).await.unwrap().is_none());
        assert!(task_executions::Entity::find_by_id("exec-1".to_owned()).one(&db).await.unwrap().is_some());
        let (s, e) = get(&app, &alice, &format!("{BASE}/{}", id(&a))).await;
        assert_error(s, &e, 404);

        let ids = json!({"task_ids": [id(&b), id(&c), id(&bobs), id(&a), "00000000-0000-0000-0000-000000000000"]});
        let (s, r) = app.call(Method::POST, &format!("{BASE}/batch_delete"), &alice, Some(ids)).await;
        assert_eq!((s, r), (200, json!({"status": "deleted", "count": 2})));
        assert_eq!(names(&list(&app, &alice, "").await), vec!["delta 100%"]);
        assert_eq!(names(&list(&app, &bob, "").await), vec!["Alpha bob"], "bob's task stays");
        let (s, r) = app.call(Method::POST, &format!("{BASE}/batch_delete"), &alice, Some(json!({"task_ids": []}))).await;
        assert_eq!((s, r["count"].as_i64()), (200, Some(0)));
        let many: Vec<String> = (0..1001).map(|n| n.to_string()).collect();
        for bad in [json!({}), json!({"task_ids": "x"}), json!({"task_ids": many})] {
            let (s, e) = app.call(Method::POST, &format!("{BASE}/batch_delete"), &alice, Some(bad)).await;
            assert_error(s, &e, 400);
        }
        db.close().await.unwrap();
        app.stop().await;
    }

    /// One task's full history and the caller's executions across tasks, with each filter
    /// and its refusals.
    async fn scheduled_task_executions_are_listed_and_filtered(backend) {
        let app = Stack::docchat(&backend).await;
        let (alice_id, alice) = app.user("alice").await;
        let (bob_id, bob) = app.user("bob").await;
        let report = create(&app, &alice, task("Sales Report")).await;
        let other = create(&app, &alice, task("cleanup")).await;
        let bobs = create(&app, &bob, task("Sales bob")).await;
        let db = app.database(Service::Scheduler).await;
        let now = Utc::now();
        // (id, task, owner, status, trigger, age)
        let rows = [
            ("e1", &report, &alice_id, "completed", "scheduled", Duration::minutes(10)),
            ("e2", &report, &alice_id, "failed", "manual", Duration::hours(5)),
            ("e3", &report, &alice_id, "running", "scheduled", Duration::days(3)),
            ("e4", &other, &alice_id, "cancelled", "scheduled", Duration::days(20)),
            ("e5", &other, &alice_id, "completed", "manual", Duration::days(200)),
            ("e6", &bobs, &bob_id, "completed", "scheduled", Duration::minutes(5)),
        ];
        for (eid, task, owner, status, trigger, age) in rows {
            let when = now - age;
            task_executions::ActiveModel {
                id: Set(eid.into()),
                task_id: Set(id(task)),
                user_id: Set(owner.clone()),
                username: Set(task["username"].as_str().unwrap().to_owned()),
                task_name: Set(task["name"].as_str().unwrap().to_owned()),
                status: Set(status.into()),
                trigger_source: Set(trigger.into()),
                scheduled_for: Set(when),
                started_at: Set(Some(when)),
                completed_at: Set((status != "running").then_some(when + Duration::seconds(30))),
                lease_until: Set(None),
                worker: Set(String::new()),
                chat_session_id: Set(format!("chat-{eid}")),
                result_summary: Set(format!("summary {eid}")),
                error_message: Set(if status == "failed" { "boom".into() } else { String::new() }),
                created_at: Set(when),
            }
            .insert(&db)
            .await
            .unwrap();
        }
        db.close().await.unwrap();
        let ids = |v: &Value| -> Vec<String> {
            v["items"].as_array().unwrap().iter().map(|e| e["id"].as_str().unwrap().to_owned()).collect()
        };

        // One task: full history (no time bound), newest first, paged, the client's shape.
        let (s, l) = get(&app, &alice, &format!("{BASE}/{}/executions", id(&report))).await;
        assert_eq!(s, 200, "{l}");
        assert_eq!((ids(&l), l["total"].as_i64()), (vec!["e1".to_owned(), "e2".into(), "e3".into()], Some(3)));
        let e2 = &l["items"][1];
        assert_eq!((e2["execution_id"].as_str(), e2["scheduled_task_id"].as_str()), (Some("e2"), report["id"].as_str()));
        assert_eq!((e2["status"].as_str(), e2["trigger_source"].as_str(), e2["task_name"].as_str()), (Some("failed"), Some("manual"), Some("Sales Report")));
        assert_eq!((e2["error_message"].as_str(), e2["chat_session_id"].as_str(), e2["result_summary"].as_str()), (Some("boom"), Some("chat-e2"), Some("summary e2")));
        for field in ["started_at", "completed_at", "created_at", "scheduled_for"] {
            assert!(e2[field].is_string(), "{field}: {e2}");
        }
        assert!(l["items"][2]["completed_at"].is_null());
        let (_, l) = get(&app, &alice, &format!("{BASE}/{}/executions?offset=1&limit=1", id(&report))).await;
        assert_eq!((ids(&l), l["total"].as_i64()), (vec!["e2".to_owned()], Some(3)));
        let (_, l) = get(&app, &alice, &format!("{BASE}/{}/executions", id(&other))).await;
        assert_eq!(ids(&l), vec!["e4", "e5"], "no time bound on one task's history");
        let (s, e) = get(&app, &bob, &format!("{BASE}/{}/executions", id(&report))).await;
        assert_error(s, &e, 404);

        // Across the caller's tasks: 90 days by default; each filter.
        let all = format!("{BASE}/executions");
        for (query, want) in [
            ("", vec!["e1", "e2", "e3", "e4"]),
            ("?time_interval=1+hour", vec!["e1"]),
            ("?time_interval=1%20day", vec!["e1", "e2"]),
            ("?time_interval=7+days", vec!["e1", "e2", "e3"]),
            ("?time_interval=1+month", vec!["e1", "e2", "e3", "e4"]),
            ("?time_interval=100+years", vec!["e1", "e2", "e3", "e4", "e5"]),
            ("?status_filter=completed&time_interval=100+years", vec!["e1", "e5"]),
            ("?status_filter=running", vec!["e3"]),
            ("?trigger_filter=manual&time_interval=100+years", vec!["e2", "e5"]),
            ("?trigger_filter=scheduled", vec!["e1", "e3", "e4"]),
            ("?name_filter=sales", vec!["e1", "e2", "e3"]),
            ("?name_filter=CLEAN&status_filter=cancelled", vec!["e4"]),
            ("?limit=2&offset=1", vec!["e2", "e3"]),
        ] {
            let (s, l) = get(&app, &alice, &format!("{all}{query}")).await;
            assert_eq!(s, 200, "{query}: {l}");
            assert_eq!(ids(&l), want, "{query}");
            if query.starts_with("?limit") {
                assert_eq!(l["total"], 4);
            }
        }
        let (_, l) = get(&app, &bob, &all).await;
        assert_eq!(ids(&l), vec!["e6"]);
        for query in ["?status_filter=idle", "?status_filter=canceled", "?time_interval=2+days", "?time_interval=1+week",
                      "?trigger_filter=cron", "?trigger_filter=Manual", "?offset=x"] {
            let (s, e) = get(&app, &alice, &format!("{all}{query}")).await;
            assert_error(s, &e, 400);
        }
        app.stop().await;
    }
}
