//! The administrator's job history through the REST API: real ingestions (one that works,
//! one that fails) reach the history through the bus; pages, filters, stats, 400s and 403s;
//! a user's own jobs.

use reqwest::Method;
use serde_json::{Value, json};

use crate::documents::upload;
use crate::harness::{ADMIN_KEY, Stack, assert_error, eventually};

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
        assert_eq!(job["kind"], "ingest_upload");
        assert_eq!(job["progress"], 1.0);
        let (_, bob) = app.user("bob").await;
        let (s, b) = app.call(Method::GET, &one, &bob, None).await;
        assert_error(s, &b, 404);
        let (_, none) = app.call(Method::GET, "/api/v1/jobs", &bob, None).await;
        assert_eq!(none, json!([]));
    }
}
