//! The administrator's job history through the REST API: real ingestions (one that works,
//! one that fails) reach the history through the bus; pages, filters, stats, 400s and 403s;
//! a user's own jobs; cancel (the user's and the administrator's), delete, the pending
//! count, the administrator's list of every user's jobs; timeout and stale.

use std::sync::Arc;
use std::time::Duration;

use docchat_common::config::Service;
use docchat_common::testing::{ScriptedHttp, ScriptedTurn, SeenRequest, Streamed};
use reqwest::Method;
use sea_orm::{ConnectionTrait, Statement};
use serde_json::{Value, json};

use crate::completions::{collection_with, session, stream};
use crate::documents::upload;
use crate::harness::{ADMIN_KEY, Stack, assert_error, collection, eventually};

/// SPEC.md's job history row, every field.
const FIELDS: [&str; 23] = [
    "id",
    "name",
    "kind",
    "username",
    "user_id",
    "status",
    "passed",
    "failed",
    "progress",
    "errors",
    "collection_id",
    "collection_name",
    "canceled_by",
    "cancel_reason",
    "date",
    "last_update_date",
    "started_at",
    "finished_at",
    "deleted_at",
    "duration",
    "duration_seconds",
    "completed",
    "canceled",
];

async fn ingest(app: &Stack, key: &str, cid: &str, name: &str, bytes: &[u8]) {
    let (s, up) = upload(app, key, name, bytes.to_vec()).await;
    assert_eq!(s, 200, "{up}");
    let path = format!(
        "/api/v1/uploads/{}/ingest?collection_id={cid}&gen_doc_summaries=false",
        up["id"].as_str().unwrap()
    );
    let (s, b) = app.call(Method::POST, &path, key, Some(json!({}))).await;
    assert_eq!(s, 204, "{b}");
}

docchat_common::backend_tests! {
    async fn ingestions_show_up_in_the_job_history(backend) {
        let app = Stack::docchat(&backend).await;
        let name = app.backend;
        let (alice_id, alice) = app.user("alice").await;
        let (_, col) = app
            .call(
                Method::POST,
                "/api/v1/collections",
                &alice,
                Some(json!({"name": "kb", "description": ""})),
            )
            .await;
        let cid = col["id"].as_str().unwrap().to_owned();
        ingest(&app, &alice, &cid, "guide.md", b"# Setup\n\nInstall it and run it.\n").await;
        ingest(&app, &alice, &cid, "blank.txt", b"   \n\n  \n").await;

        let mine = format!("/api/v1/admin/jobs?user_id={alice_id}");
        eventually("both jobs finished in the history", || async {
            let (s, page) = app.call(Method::GET, &mine, ADMIN_KEY, None).await;
            assert_eq!(s, 200, "{page}");
            let statuses: Vec<_> = page["jobs"]
                .as_array()
                .unwrap()
                .iter()
                .map(|j| j["status"].as_str().unwrap().to_owned())
                .collect();
            statuses.len() == 2 && statuses.iter().all(|s| s == "completed" || s == "failed")
        })
        .await;
        let (_, page) = app.call(Method::GET, &mine, ADMIN_KEY, None).await;
        let jobs: &Vec<Value> = page["jobs"].as_array().unwrap();
        for j in jobs {
            for f in FIELDS {
                assert!(j.get(f).is_some(), "{name}: a row lacks {f}: {j}");
            }
            assert_eq!(j["kind"], "ingest_upload");
            assert_eq!(j["username"], "alice");
            assert_eq!(j["collection_id"], cid.as_str());
            assert!(j["duration"].as_str().unwrap().ends_with('s'), "{j}");
        }
        // Newest first: the failing one was ingested last.
        let (failed, done) = (&jobs[0], &jobs[1]);
        assert_eq!(done["status"], "completed", "{name}: {done}");
        assert_eq!(done["completed"], true);
        assert_eq!(done["errors"], json!([]));
        assert_eq!(failed["status"], "failed", "{name}: {failed}");
        let errors = failed["errors"].as_array().unwrap();
        assert_eq!(errors.len(), 1, "{failed}");
        let line = errors[0].as_str().unwrap();
        assert!(!line.contains('\n') && line.len() <= 300 && !line.is_empty(), "{line}");

        // Pages of one: the cursor of the first leads to the second, the last has none.
        let (_, first) = app
            .call(Method::GET, &format!("{mine}&limit=1"), ADMIN_KEY, None)
            .await;
        assert_eq!(first["jobs"][0]["id"], failed["id"]);
        let at = first["next_cursor_created_at"].as_str().unwrap();
        let next = format!(
            "{mine}&limit=1&cursor_created_at={}&cursor_id={}",
            at.replace('+', "%2B"),
            first["next_cursor_id"].as_str().unwrap()
        );
        let (s, second) = app.call(Method::GET, &next, ADMIN_KEY, None).await;
        assert_eq!(s, 200, "{second}");
        assert_eq!(second["jobs"][0]["id"], done["id"]);
        assert!(second.get("next_cursor_created_at").is_none(), "{second}");
        assert!(second.get("next_cursor_id").is_none(), "{second}");

        // Filters, including repeated status and the client's `+0000` timestamps.
        let (_, only_failed) = app
            .call(Method::GET, &format!("{mine}&status=failed"), ADMIN_KEY, None)
            .await;
        assert_eq!(only_failed["jobs"].as_array().unwrap().len(), 1);
        let (_, both) = app
            .call(
                Method::GET,
                &format!("{mine}&status=failed&status=completed&kind=ingest_upload&collection_id={cid}"),
                ADMIN_KEY,
                None,
            )
            .await;
        assert_eq!(both["jobs"].as_array().unwrap().len(), 2);
        let future = (chrono::Utc::now() + chrono::Duration::hours(1))
            .format("%Y-%m-%dT%H:%M:%S%.6f%%2B0000")
            .to_string();
        let (s, none) = app
            .call(Method::GET, &format!("{mine}&created_after={future}"), ADMIN_KEY, None)
            .await;
        assert_eq!(s, 200, "{none}");
        assert_eq!(none["jobs"], json!([]));

        let (s, stats) = app
            .call(Method::GET, "/api/v1/admin/jobs/stats", ADMIN_KEY, None)
            .await;
        assert_eq!(s, 200, "{stats}");
        assert_eq!(stats["total"], 2, "{name}: {stats}");
        assert_eq!(stats["completed"], 1);
        assert_eq!(stats["failed"], 1);
        for f in ["queued", "running", "canceled", "timeout", "stale", "unknown"] {
            assert_eq!(stats[f], 0, "{f}");
        }
        let (_, later) = app
            .call(
                Method::GET,
                &format!("/api/v1/admin/jobs/stats?created_after={future}"),
                ADMIN_KEY,
                None,
            )
            .await;
        assert_eq!(later["total"], 0);

        // Malformed filters and cursors: 400.
        for bad in [
            "/api/v1/admin/jobs?created_after=yesterday",
            "/api/v1/admin/jobs?cursor_id=abc",
            "/api/v1/admin/jobs?cursor_created_at=2026-11-21T10:00:00Z",
            "/api/v1/admin/jobs?cursor_created_at=soon&cursor_id=abc",
            "/api/v1/admin/jobs?status=done",
            "/api/v1/admin/jobs?limit=0",
            "/api/v1/admin/jobs?limit=many",
            "/api/v1/admin/jobs/stats?created_after=tomorrow",
        ] {
            let (s, b) = app.call(Method::GET, bad, ADMIN_KEY, None).await;
            assert_error(s, &b, 400);
        }
        // Without the admin-center permission: 403.
        for path in ["/api/v1/admin/jobs", "/api/v1/admin/jobs/stats"] {
            let (s, b) = app.call(Method::GET, path, &alice, None).await;
            assert_error(s, &b, 403);
        }

        // A user sees their own jobs (the client's JobDetails); another user's job is a 404.
        let (s, own) = app.call(Method::GET, "/api/v1/jobs", &alice, None).await;
        assert_eq!(s, 200, "{own}");
        let own = own.as_array().unwrap();
        assert_eq!(own.len(), 2, "{name}: {own:?}");
        assert_eq!(own[0]["id"], failed["id"]);
        assert_eq!(own[0]["overall_status"], "failed");
        assert_eq!(own[0]["failed_percentage"], 1.0);
        assert_eq!(own[1]["statuses"], json!([{"id": done["id"], "status": "completed"}]));
        let one = format!("/api/v1/jobs/{}", done["id"].as_str().unwrap());
        let (s, job) = app.call(Method::GET, &one, &alice, None).await;
        assert_eq!(s, 200, "{job}");
        // The user-facing kind is the client's JobKind name (the history keeps its own).
        assert_eq!(job["kind"], "IngestUploadsJob");
        assert_eq!(job["progress"], 1.0);
        let (_, bob) = app.user("bob").await;
        let (s, b) = app.call(Method::GET, &one, &bob, None).await;
        assert_error(s, &b, 404);
        let (_, none) = app.call(Method::GET, "/api/v1/jobs", &bob, None).await;
        assert_eq!(none, json!([]));
    }
}

/// A chat upstream that never finishes answering: a space every 100 ms (JSON may start with
/// whitespace) for two minutes, so an ingestion asking for a summary stays running, and a
/// worker that drops the call shows as a hung-up request ([`ScriptedHttp::aborted`]).
async fn hanging_model() -> ScriptedHttp {
    ScriptedHttp::start_streaming(Arc::new(|_r: &SeenRequest| Streamed {
        status: 200,
        content_type: "application/json".into(),
        parts: (0..1200)
            .map(|_| (Duration::from_millis(100), b" ".to_vec()))
            .collect(),
    }))
    .await
}

/// docchat whose default chat model is `upstream`, one ingestion worker, short leases, no
/// description runs (they would call the model too), and `tweak`.
async fn app_with_model(
    backend: &docchat_common::testing::Backend,
    upstream: &ScriptedHttp,
    tweak: impl FnOnce(&mut docchat_common::config::Config),
) -> Stack {
    Stack::builder(backend)
        .everything()
        .scripted_model(&upstream.base_url)
        .configure(|c| {
            c.ingest_workers = 1;
            c.job_lease_seconds = 3;
            c.description_interval_seconds = 86_400;
        })
        .configure(tweak)
        .start()
        .await
}

async fn start_ingest(app: &Stack, key: &str, cid: &str, name: &str, summaries: bool) {
    let (s, up) = upload(
        app,
        key,
        name,
        format!("# {name}\n\nSome text to index.\n").into_bytes(),
    )
    .await;
    assert_eq!(s, 200, "{up}");
    let path = format!(
        "/api/v1/uploads/{}/ingest?collection_id={cid}&gen_doc_summaries={summaries}",
        up["id"].as_str().unwrap()
    );
    let (s, b) = app.call(Method::POST, &path, key, Some(json!({}))).await;
    assert_eq!(s, 204, "{b}");
}

/// The user's own jobs (JobDetails), newest first, once `ready` holds for them.
async fn own_jobs_when(
    app: &Stack,
    key: &str,
    what: &str,
    ready: impl Fn(&[Value]) -> bool,
) -> Vec<Value> {
    let deadline = tokio::time::Instant::now() + Duration::from_secs(20);
    loop {
        let (s, b) = app.call(Method::GET, "/api/v1/jobs", key, None).await;
        assert_eq!(s, 200, "{b}");
        let jobs = b.as_array().unwrap().clone();
        if ready(&jobs) {
            return jobs;
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "timed out: {what}: {jobs:?}"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

/// The administrator's row of job `id` once `ready` holds for it.
async fn history_row_when(
    app: &Stack,
    user_id: &str,
    id: &str,
    what: &str,
    ready: impl Fn(&Value) -> bool,
) -> Value {
    let path = format!("/api/v1/admin/jobs?user_id={user_id}");
    let deadline = tokio::time::Instant::now() + Duration::from_secs(20);
    loop {
        let (s, page) = app.call(Method::GET, &path, ADMIN_KEY, None).await;
        assert_eq!(s, 200, "{page}");
        let row = page["jobs"]
            .as_array()
            .unwrap()
            .iter()
            .find(|j| j["id"] == id)
            .cloned()
            .unwrap_or(Value::Null);
        if !row.is_null() && ready(&row) {
            return row;
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "timed out: {what}: {page}"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

docchat_common::backend_tests! {
    async fn a_user_cancels_a_running_ingestion_and_nothing_of_it_remains(backend) {
        let upstream = hanging_model().await;
        let app = app_with_model(&backend, &upstream, |_| {}).await;
        let name = app.backend;
        let (alice_id, alice) = app.user("alice").await;
        let (_, bob) = app.user("bob").await;
        let cid = collection(&app, &alice).await;

        // A: running, held in its summary call; B: queued behind it (one worker).
        start_ingest(&app, &alice, &cid, "slow.md", true).await;
        eventually("the worker is in the summary call", || async { upstream.seen().len() == 1 }).await;
        start_ingest(&app, &alice, &cid, "waiting.md", false).await;
        let jobs = own_jobs_when(&app, &alice, "A running and B queued in the history", |j| {
            j.len() == 2 && j[0]["status"] == "queued" && j[1]["status"] == "running"
        })
        .await;
        let (b, a) = (jobs[0]["id"].as_str().unwrap().to_owned(), jobs[1]["id"].as_str().unwrap().to_owned());
        assert_eq!(jobs[1]["overall_status"], "in progress", "{name}: {jobs:?}");

        let (s, pending) = app.call(Method::GET, "/api/v1/jobs/pending/count", &alice, None).await;
        assert_eq!(s, 200, "{pending}");
        assert_eq!(
            pending,
            json!({"count": 1, "queue_infos": [{"name": "standard", "length": 1}, {"name": "deprioritized", "length": 0}]}),
            "{name}"
        );

        // Not yours: 404; a running job cannot be deleted; a user is no administrator.
        let cancel_a = format!("/api/v1/jobs/{a}/cancel");
        let (s, e) = app.call(Method::POST, &cancel_a, &bob, None).await;
        assert_error(s, &e, 404);
        let (s, e) = app.call(Method::DELETE, &format!("/api/v1/jobs/{a}"), &bob, None).await;
        assert_error(s, &e, 404);
        let (s, e) = app.call(Method::DELETE, &format!("/api/v1/jobs/{a}"), &alice, None).await;
        assert_error(s, &e, 409);
        let (s, e) = app
            .call(Method::POST, &format!("/api/v1/user_jobs/{a}/cancel"), &alice, Some(json!({})))
            .await;
        assert_error(s, &e, 403);
        let (s, e) = app.call(Method::GET, "/api/v1/user_jobs", &alice, None).await;
        assert_error(s, &e, 403);

        // The administrator cancels the queued B with a reason (the client's cancel_user_job).
        let (s, e) = app
            .call(
                Method::POST,
                &format!("/api/v1/user_jobs/{b}/cancel"),
                ADMIN_KEY,
                Some(json!({"cancel_reason": "not needed"})),
            )
            .await;
        assert_eq!(s, 204, "{e}");
        let (_, pending) = app.call(Method::GET, "/api/v1/jobs/pending/count", &alice, None).await;
        assert_eq!(pending["count"], 0, "{pending}");

        // Alice cancels the running A: the answer already says so; the worker hangs up.
        let (s, job) = app.call(Method::POST, &cancel_a, &alice, None).await;
        assert_eq!(s, 200, "{job}");
        assert_eq!(job["id"], a.as_str());
        assert_eq!(job["overall_status"], "canceled", "{job}");
        assert_eq!(job["status"], "canceled");
        assert_eq!(job["canceled_by"], "alice");
        assert_eq!(job["cancel_reason"], "canceled by its owner");
        eventually("the worker dropped the model call", || async { upstream.aborted() == 1 }).await;
        let (s, e) = app.call(Method::POST, &cancel_a, &alice, None).await;
        assert_error(s, &e, 409);

        let (_, me) = app.call(Method::GET, "/api/v1/users/current", ADMIN_KEY, None).await;
        let row_b = history_row_when(&app, &alice_id, &b, "B canceled in the history", |r| r["status"] == "canceled").await;
        assert_eq!(row_b["canceled_by"], me["username"], "{name}: {row_b}");
        assert_eq!(row_b["cancel_reason"], "not needed");
        assert_eq!(row_b["canceled"], true);
        let row_a = history_row_when(&app, &alice_id, &a, "A canceled in the history", |r| r["status"] == "canceled").await;
        assert_eq!(row_a["canceled_by"], "alice", "{name}: {row_a}");
        assert_eq!(row_a["cancel_reason"], "canceled by its owner");
        assert!(row_a["finished_at"].is_string(), "{row_a}");

        // Nothing of either job was stored, and the worker takes new work.
        let docs = format!("/api/v1/collections/{cid}/documents");
        let (_, listed) = app.call(Method::GET, &docs, &alice, None).await;
        assert_eq!(listed, json!([]), "{name}");
        assert_eq!(app.count_rows(Service::Ingest, "documents").await, 0);
        assert_eq!(app.count_rows(Service::Ingest, "chunks").await, 0);
        start_ingest(&app, &alice, &cid, "after.md", false).await;
        let jobs = own_jobs_when(&app, &alice, "the new ingestion completed", |j| {
            j.len() == 3 && j[0]["status"] == "completed"
        })
        .await;
        let c = jobs[0]["id"].as_str().unwrap().to_owned();
        let (_, listed) = app.call(Method::GET, &docs, &alice, None).await;
        let names: Vec<_> = listed.as_array().unwrap().iter().map(|d| d["name"].clone()).collect();
        assert_eq!(names, vec![json!("after.md")], "{name}");
        assert!(app.count_rows(Service::Ingest, "chunks").await > 0);

        // Deleting a finished job clears it from the user's list; the history keeps it.
        let (s, e) = app.call(Method::DELETE, &format!("/api/v1/jobs/{a}"), &alice, None).await;
        assert_eq!(s, 204, "{e}");
        let (s, e) = app.call(Method::GET, &format!("/api/v1/jobs/{a}"), &alice, None).await;
        assert_error(s, &e, 404);
        let (s, e) = app.call(Method::DELETE, &format!("/api/v1/jobs/{a}"), &alice, None).await;
        assert_error(s, &e, 404);
        let (_, own) = app.call(Method::GET, "/api/v1/jobs", &alice, None).await;
        let ids: Vec<_> = own.as_array().unwrap().iter().map(|j| j["id"].as_str().unwrap().to_owned()).collect();
        assert_eq!(ids, vec![c.clone(), b.clone()], "{name}");
        let row_a = history_row_when(&app, &alice_id, &a, "A still in the history", |_| true).await;
        assert!(row_a["deleted_at"].is_string(), "{row_a}");
        assert_eq!(row_a["status"], "canceled");
        let (_, stats) = app.call(Method::GET, "/api/v1/admin/jobs/stats", ADMIN_KEY, None).await;
        assert_eq!((stats["total"].clone(), stats["canceled"].clone(), stats["completed"].clone()), (json!(3), json!(2), json!(1)), "{name}: {stats}");

        // The administrator's list of every user's jobs (the client's list_all_jobs).
        let (s, users) = app.call(Method::GET, "/api/v1/user_jobs", ADMIN_KEY, None).await;
        assert_eq!(s, 200, "{users}");
        let users = users.as_array().unwrap();
        assert_eq!(users.len(), 1, "{users:?}");
        assert_eq!(users[0]["username"], "alice");
        assert_eq!(users[0]["user_id"], alice_id.as_str());
        assert_eq!(users[0]["jobs"].as_array().unwrap().len(), 3);
        app.stop().await;
    }

    async fn a_job_past_its_budget_times_out_and_a_lapsed_lease_goes_stale(backend) {
        let upstream = hanging_model().await;
        let app = app_with_model(&backend, &upstream, |c| c.job_timeout_seconds = 2).await;
        let name = app.backend;
        let (alice_id, alice) = app.user("alice").await;
        let cid = collection(&app, &alice).await;

        start_ingest(&app, &alice, &cid, "slow.md", true).await;
        let jobs = own_jobs_when(&app, &alice, "the job timed out", |j| {
            j.len() == 1 && j[0]["status"] == "timeout"
        })
        .await;
        let job = &jobs[0];
        assert_eq!(job["overall_status"], "failed", "{name}: {job}");
        let errors = job["errors"].as_array().unwrap();
        assert_eq!(errors.len(), 1, "{job}");
        let line = errors[0].as_str().unwrap();
        assert!(line.starts_with("timeout:") && line.contains("budget of 2 s"), "{line}");
        eventually("the worker dropped the model call", || async { upstream.aborted() == 1 }).await;
        let (_, listed) = app.call(Method::GET, &format!("/api/v1/collections/{cid}/documents"), &alice, None).await;
        assert_eq!(listed, json!([]), "{name}");

        // A job whose worker died three times: its lease lapsed again, and it is not retried.
        let stale = docchat_common::testing::unique("stale-");
        let db = app.database(Service::Ingest).await;
        let backend_kind = db.get_database_backend();
        let sql = match backend_kind {
            sea_orm::DbBackend::Postgres => "INSERT INTO jobs (id, kind, owner_id, owner_username, status, queue, progress, errors, collection_id, collection_name, upload_id, document_id, params, attempts, lease_until, created_at, updated_at, started_at, finished_at) VALUES ($1, 'ingest_upload', $2, 'alice', 'running', 'standard', 0.5, '[]', $3, 'kb', NULL, NULL, '{}', 3, $4, $5, $5, $5, NULL)",
            _ => "INSERT INTO jobs (id, kind, owner_id, owner_username, status, queue, progress, errors, collection_id, collection_name, upload_id, document_id, params, attempts, lease_until, created_at, updated_at, started_at, finished_at) VALUES (?, 'ingest_upload', ?, 'alice', 'running', 'standard', 0.5, '[]', ?, 'kb', NULL, NULL, '{}', 3, ?, ?, ?, ?, NULL)",
        };
        let now = chrono::Utc::now();
        let lapsed = now - chrono::Duration::seconds(30);
        let mut values: Vec<sea_orm::Value> = vec![stale.clone().into(), alice_id.clone().into(), cid.clone().into(), lapsed.into(), now.into()];
        if backend_kind != sea_orm::DbBackend::Postgres {
            values.extend([now.into(), now.into()]);
        }
        db.execute(Statement::from_sql_and_values(backend_kind, sql, values)).await.unwrap();
        db.close().await.unwrap();
        let row = history_row_when(&app, &alice_id, &stale, "the lapsed job is stale", |r| r["status"] == "stale").await;
        let errors = row["errors"].as_array().unwrap();
        assert_eq!(errors.len(), 1, "{name}: {row}");
        assert!(errors[0].as_str().unwrap().starts_with("stale:"), "{row}");
        assert_eq!(row["failed"], 1.0);
        let (_, stats) = app.call(Method::GET, "/api/v1/admin/jobs/stats", ADMIN_KEY, None).await;
        assert_eq!((stats["timeout"].clone(), stats["stale"].clone()), (json!(1), json!(1)), "{name}: {stats}");
        app.stop().await;
    }
}

/// An OpenAI-compatible JSON answer (a call without `stream`: descriptions, summaries).
const COMPLETION: &str = r#"{"id":"c","object":"chat.completion","created":0,"model":"scripted","choices":[{"index":0,"message":{"role":"assistant","content":"Notes about Paris."},"finish_reason":"stop"}],"usage":{"prompt_tokens":5,"completion_tokens":3,"total_tokens":8}}"#;

docchat_common::backend_tests! {
    async fn agent_runs_and_description_runs_are_jobs_of_the_history(backend) {
        let upstream = ScriptedHttp::start_streaming(Arc::new(|r: &SeenRequest| {
            let body: Value = serde_json::from_slice(&r.body).unwrap_or(Value::Null);
            if body["stream"] == true {
                ScriptedTurn::text("Done.").streamed()
            } else {
                Streamed {
                    status: 200,
                    content_type: "application/json".into(),
                    parts: vec![(Duration::ZERO, COMPLETION.as_bytes().to_vec())],
                }
            }
        }))
        .await;
        let app = Stack::builder(&backend)
            .everything()
            .tool_models(&upstream.base_url)
            .configure(|c| c.description_interval_seconds = 1)
            .start()
            .await;
        let name = app.backend;
        let (alice_id, alice) = app.user("alice").await;
        let cid = collection_with(&app, &alice, "paris.txt", b"The Eiffel Tower stands in Paris.".to_vec()).await;
        let chat = session(&app, &alice, Some(&cid)).await;
        let mut lines = stream(
            &app,
            &alice,
            &chat,
            json!({"message": "Say done", "stream": true,
                   "llm_args": {"use_agent": true, "agent_max_turns": 2},
                   "rag_config": {"rag_type": "agent_only"}}),
        )
        .await;
        let (body, last) = lines.rest(Duration::from_secs(30)).await;
        assert!(last["error"].is_null(), "{name}: {last}");
        assert!(body.contains("Done."), "{body}");

        let jobs = own_jobs_when(&app, &alice, "the agent run and a description run finished", |j| {
            ["NoOpJob", "RegenerateCollectionDescriptionJob", "IngestUploadsJob"]
                .iter()
                .all(|k| j.iter().any(|x| x["kind"] == *k && x["status"] == "completed"))
        })
        .await;
        let run = jobs.iter().find(|j| j["kind"] == "NoOpJob").unwrap();
        assert_eq!(run["overall_status"], "completed", "{name}: {run}");
        assert_eq!(run["name"], "Agent run");
        assert_eq!(run["errors"], json!([]));
        let (s, page) = app
            .call(Method::GET, &format!("/api/v1/admin/jobs?kind=agent_run&user_id={alice_id}"), ADMIN_KEY, None)
            .await;
        assert_eq!(s, 200, "{page}");
        let rows = page["jobs"].as_array().unwrap();
        assert_eq!(rows.len(), 1, "{name}: {page}");
        assert_eq!(rows[0]["username"], "alice");
        assert_eq!(rows[0]["collection_id"], cid.as_str());
        assert!(rows[0]["finished_at"].is_string() && rows[0]["completed"] == true, "{page}");
        let (_, page) = app
            .call(Method::GET, &format!("/api/v1/admin/jobs?kind=collection_description&user_id={alice_id}"), ADMIN_KEY, None)
            .await;
        let described = &page["jobs"][0];
        assert_eq!(described["collection_id"], cid.as_str(), "{name}: {page}");
        assert_eq!(described["collection_name"], "kb");
        assert_eq!(described["status"], "completed");
        let (_, col) = app.call(Method::GET, &format!("/api/v1/collections/{cid}"), &alice, None).await;
        assert_eq!(col["description"], "Notes about Paris.", "{col}");
        app.stop().await;
    }
}

/// JobDetails' fields as the client's model names them.
const JOB_DETAILS_FIELDS: [&str; 17] = [
    "id",
    "name",
    "overall_status",
    "status",
    "passed_percentage",
    "failed_percentage",
    "progress",
    "created_at",
    "updated_at",
    "kind",
    "statuses",
    "errors",
    "duration",
    "duration_seconds",
    "canceled_by",
    "cancel_reason",
    "start_time",
];

docchat_common::backend_tests! {
    async fn the_clients_ingest_upload_job_answers_201_and_is_polled_to_completion(backend) {
        let app = Stack::docchat(&backend).await;
        let name = app.backend;
        let (_, alice) = app.user("alice").await;
        let (_, bob) = app.user("bob").await;
        let cid = collection(&app, &alice).await;
        let (s, up) = upload(&app, &alice, "job.txt", b"The job ingests this text.".to_vec()).await;
        assert_eq!(s, 200, "{up}");
        let up_id = up["id"].as_str().unwrap().to_owned();
        let job_path = |ids: &str, cid: &str| {
            format!("/api/v1/uploads/{ids}/ingest/job?collection_id={cid}&gen_doc_summaries=false&restricted=false")
        };

        // Bad input is a 400 and starts nothing: several ids (one upload per job), no collection.
        let (_, other) = upload(&app, &alice, "other.txt", b"Another text.".to_vec()).await;
        let two = format!("{up_id},{}", other["id"].as_str().unwrap());
        let (s, e) = app.call(Method::POST, &job_path(&two, &cid), &alice, Some(json!({"metadata": null}))).await;
        assert_error(s, &e, 400);
        let (s, e) = app
            .call(Method::POST, &format!("/api/v1/uploads/{up_id}/ingest/job"), &alice, None)
            .await;
        assert_error(s, &e, 400);
        // Another user's upload, an unknown upload: 404.
        let bob_cid = collection(&app, &bob).await;
        let (s, e) = app.call(Method::POST, &job_path(&up_id, &bob_cid), &bob, None).await;
        assert_error(s, &e, 404);
        let (s, e) = app.call(Method::POST, &job_path("no-such-upload", &cid), &alice, None).await;
        assert_error(s, &e, 404);
        let (_, none) = app.call(Method::GET, "/api/v1/jobs", &alice, None).await;
        assert_eq!(none, json!([]), "{name}: a rejected request started a job");

        let (s, job) = app
            .call(Method::POST, &job_path(&up_id, &cid), &alice, Some(json!({"metadata": null})))
            .await;
        assert_eq!(s, 201, "{name}: {job}");
        for field in JOB_DETAILS_FIELDS {
            assert!(job.get(field).is_some(), "{name}: {field} missing in {job}");
        }
        let id = job["id"].as_str().unwrap().to_owned();
        assert_eq!(job["kind"], "IngestUploadsJob");
        assert_eq!(job["name"], "Ingest upload");
        assert_eq!(job["errors"], json!([]));
        assert_eq!(job["statuses"][0]["id"], id);
        assert!(
            ["in progress", "completed"].contains(&job["overall_status"].as_str().unwrap()),
            "{name}: {job}"
        );

        // The client polls at once: the job is there, and ends completed with the document in.
        let one = format!("/api/v1/jobs/{id}");
        let (s, first) = app.call(Method::GET, &one, &alice, None).await;
        assert_eq!(s, 200, "{name}: {first}");
        assert_eq!(first["id"], id);
        eventually("the job completes", || async {
            let (_, j) = app.call(Method::GET, &one, &alice, None).await;
            j["overall_status"] == "completed" && j["kind"] == "IngestUploadsJob"
        })
        .await;
        let (_, c) = app.call(Method::GET, &format!("/api/v1/collections/{cid}"), &alice, None).await;
        assert_eq!(c["document_count"], 1, "{name}: {c}");
        let (s, e) = app.call(Method::GET, &one, &bob, None).await;
        assert_error(s, &e, 404);
    }
}

docchat_common::backend_tests! {
    /// A task triggered through REST runs as its execution; its owner cancels it through the
    /// jobs API (another user gets 404, a second cancel 409), the execution ends cancelled
    /// and the history says who and why; deleting a task cancels what still runs of it.
    async fn a_scheduled_execution_is_canceled_through_the_jobs_api(backend) {
        let upstream = hanging_model().await;
        let app = app_with_model(&backend, &upstream, |_| {}).await;
        let name = app.backend;
        let (alice_id, alice) = app.user("alice").await;
        let (_, bob) = app.user("bob").await;
        let body = json!({"name": "slow report", "schedule_type": "recurring", "schedule_expression": "0 9 * * *",
                          "task_type": "chat_completion", "task_config": {"message": "Summarize yesterday"}});
        let (s, task) = app.call(Method::POST, "/api/v1/scheduled_tasks", &alice, Some(body)).await;
        assert_eq!(s, 201, "{task}");
        let task_id = task["id"].as_str().unwrap().to_owned();

        let trigger = format!("/api/v1/scheduled_tasks/{task_id}/trigger");
        let (s, started) = app.call(Method::POST, &trigger, &alice, None).await;
        assert_eq!((s, started["status"].as_str()), (200, Some("running")), "{name}: {started}");
        let execution = started["execution_id"].as_str().unwrap().to_owned();
        eventually("the execution's model call is under way", || async { !upstream.seen().is_empty() }).await;

        let cancel = format!("/api/v1/jobs/{execution}/cancel");
        let (s, e) = app.call(Method::POST, &cancel, &bob, None).await;
        assert_error(s, &e, 404);
        let (s, job) = app.call(Method::POST, &cancel, &alice, Some(json!({"cancel_reason": "wrong day"}))).await;
        assert_eq!(s, 200, "{name}: {job}");
        assert_eq!((job["status"].as_str(), job["overall_status"].as_str()), (Some("canceled"), Some("canceled")), "{job}");
        assert_eq!((job["canceled_by"].as_str(), job["cancel_reason"].as_str()), (Some("alice"), Some("wrong day")), "{job}");
        assert_eq!(job["kind"], "ScheduledTaskExecutionJob");
        let (s, e) = app.call(Method::POST, &cancel, &alice, None).await;
        assert_error(s, &e, 409);

        let (s, runs) = app.call(Method::GET, &format!("/api/v1/scheduled_tasks/{task_id}/executions"), &alice, None).await;
        assert_eq!(s, 200, "{runs}");
        assert_eq!(runs["items"][0]["status"], "cancelled", "{name}: {runs}");
        let (_, task) = app.call(Method::GET, &format!("/api/v1/scheduled_tasks/{task_id}"), &alice, None).await;
        assert_eq!(task["execution_status"], "idle", "{name}: {task}");
        let row = history_row_when(&app, &alice_id, &execution, "the execution canceled in the history", |r| r["status"] == "canceled").await;
        assert_eq!((row["canceled_by"].as_str(), row["cancel_reason"].as_str()), (Some("alice"), Some("wrong day")), "{name}: {row}");

        // Deleted while running: the execution's history row ends canceled, not running.
        let (s, started) = app.call(Method::POST, &trigger, &alice, None).await;
        assert_eq!(s, 200, "{started}");
        let second = started["execution_id"].as_str().unwrap().to_owned();
        let (s, e) = app.call(Method::DELETE, &format!("/api/v1/scheduled_tasks/{task_id}"), &alice, None).await;
        assert!(s == 200 || s == 204, "{s} {e}");
        let row = history_row_when(&app, &alice_id, &second, "the deleted task's execution canceled", |r| r["status"] == "canceled").await;
        assert_eq!(row["cancel_reason"], "its task was deleted", "{name}: {row}");
        app.stop().await;
    }
}
