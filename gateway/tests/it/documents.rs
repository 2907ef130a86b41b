//! Uploads, ingestion and documents through the REST API (multipart upload, asynchronous
//! ingestion, document listing and counting, transcripts, ownership, limits).

use std::time::Duration;

use docchat_common::config::Service;
use reqwest::Method;
use reqwest::multipart::{Form, Part};
use serde_json::{Value, json};

use crate::harness::{Stack, assert_error, eventually, read};

pub async fn upload(app: &Stack, key: &str, name: &str, bytes: Vec<u8>) -> (u16, Value) {
    let form = Form::new().part("file", Part::bytes(bytes).file_name(name.to_owned()));
    read(
        app.http(Method::PUT, "/api/v1/uploads", Some(key))
            .multipart(form)
            .send()
            .await
            .unwrap(),
    )
    .await
}

const VTT: &str = "WEBVTT\n\n00:00:01.000 --> 00:00:04.500\n<v Alice Smith>Welcome to the quarterly review.</v>\n\n00:00:05.000 --> 00:00:08.000\nBob: Revenue grew by twelve percent.\n";

docchat_common::backend_tests! {
    async fn upload_ingest_and_read_documents(backend) {
        let app = Stack::docchat(&backend).await;
        let name = app.backend;
        let (_, alice) = app.user("alice").await;
        let (_, bob) = app.user("bob").await;
        let (_, col) = app
            .call(
                Method::POST,
                "/api/v1/collections",
                &alice,
                Some(json!({"name": "kb", "description": ""})),
            )
            .await;
        let cid = col["id"].as_str().unwrap().to_owned();

        let (s, up) = upload(
            &app,
            &alice,
            "guide.md",
            b"# Setup\n\nInstall the package and run it.\n".to_vec(),
        )
        .await;
        assert_eq!(s, 200, "{name}: {up}");
        assert_eq!(up["filename"], "guide.md");
        let (s, vtt) = upload(&app, &alice, "meeting.vtt", VTT.as_bytes().to_vec()).await;
        assert_eq!(s, 200);

        // Bob can neither ingest Alice's upload nor into her collection.
        let (s, b) = app
            .call(
                Method::POST,
                &format!(
                    "/api/v1/uploads/{}/ingest?collection_id={cid}",
                    up["id"].as_str().unwrap()
                ),
                &bob,
                None,
            )
            .await;
        assert_error(s, &b, 404);
        let (s, b) = app
            .call(
                Method::POST,
                &format!("/api/v1/uploads/{}/ingest", up["id"].as_str().unwrap()),
                &alice,
                None,
            )
            .await;
        assert_error(s, &b, 400);

        let ids = format!(
            "{},{}",
            up["id"].as_str().unwrap(),
            vtt["id"].as_str().unwrap()
        );
        let (s, b) = app
            .call(
                Method::POST,
                &format!(
                    "/api/v1/uploads/{ids}/ingest?collection_id={cid}&gen_doc_summaries=false"
                ),
                &alice,
                Some(json!({})),
            )
            .await;
        assert_eq!((s, b), (204, Value::Null), "{name}");

        let path = format!("/api/v1/collections/{cid}");
        eventually("two documents ingested", || async {
            app.call(Method::GET, &path, &alice, None).await.1["document_count"] == 2
        })
        .await;

        let (s, docs) = app
            .call(
                Method::GET,
                "/api/v1/documents?sort_column=name&ascending=true",
                &alice,
                None,
            )
            .await;
        assert_eq!(s, 200);
        let docs = docs.as_array().unwrap().clone();
        assert_eq!(docs.len(), 2);
        let guide = &docs[0];
        for f in [
            "id",
            "name",
            "username",
            "type",
            "size",
            "page_count",
            "status",
            "created_at",
            "updated_at",
            "chat_session_visible",
        ] {
            assert!(
                guide.get(f).is_some(),
                "{name}: document lacks {f}: {guide}"
            );
        }
        assert_eq!(guide["name"], "guide.md");
        assert_eq!(guide["status"], "completed");
        assert_eq!(guide["username"], "alice");
        assert!(guide.get("chat_session_id").is_none(), "absent for uploads");
        let (_, count) = app
            .call(Method::GET, "/api/v1/documents/count", &alice, None)
            .await;
        assert_eq!(count, json!({"count": 2}));
        let (s, b) = app
            .call(
                Method::GET,
                "/api/v1/documents?chat_session_id=not-a-uuid",
                &alice,
                None,
            )
            .await;
        assert_error(s, &b, 400);
        let (s, b) = app
            .call(
                Method::GET,
                "/api/v1/documents/count?chat_session_id=nope",
                &alice,
                None,
            )
            .await;
        assert_error(s, &b, 400);
        let (_, none) = app
            .call(
                Method::GET,
                "/api/v1/documents?chat_session_id=7d9d2c3e-0d7b-4a3a-9d55-2b8f0c1e2a11",
                &alice,
                None,
            )
            .await;
        assert_eq!(none, json!([]));
        let (_, grouped) = app
            .call(
                Method::GET,
                "/api/v1/documents?group_by_source_chat=true&sort_column=name",
                &alice,
                None,
            )
            .await;
        assert_eq!(grouped.as_array().unwrap().len(), 2);
        let (_, in_col) = app
            .call(
                Method::GET,
                &format!("/api/v1/collections/{cid}/documents"),
                &alice,
                None,
            )
            .await;
        assert_eq!(in_col.as_array().unwrap().len(), 2);
        let (_, n) = app
            .call(
                Method::GET,
                &format!("/api/v1/collections/{cid}/documents/count"),
                &alice,
                None,
            )
            .await;
        assert_eq!(n["count"], 2);

        // Transcript segments; other documents have none.
        let meeting = docs.iter().find(|d| d["name"] == "meeting.vtt").unwrap();
        let (s, segs) = app
            .call(
                Method::GET,
                &format!(
                    "/api/v1/documents/{}/audio_timestamps",
                    meeting["id"].as_str().unwrap()
                ),
                &alice,
                None,
            )
            .await;
        assert_eq!(s, 200, "{segs}");
        assert_eq!(segs[0]["start"], 1.0);
        assert_eq!(segs[0]["end"], 4.5);
        assert_eq!(segs[0]["speaker"], "Alice Smith");
        assert_eq!(segs[0]["text"], "Welcome to the quarterly review.");
        assert_eq!(segs[1]["speaker"], "Bob");
        assert_eq!(segs[1]["original_speaker"], "Bob");
        let (_, none) = app
            .call(
                Method::GET,
                &format!(
                    "/api/v1/documents/{}/audio_timestamps",
                    guide["id"].as_str().unwrap()
                ),
                &alice,
                None,
            )
            .await;
        assert_eq!(none, json!([]));

        // Ownership.
        let gid = guide["id"].as_str().unwrap();
        for (m, p) in [
            (Method::GET, format!("/api/v1/documents/{gid}")),
            (Method::DELETE, format!("/api/v1/documents/{gid}")),
            (
                Method::GET,
                format!("/api/v1/documents/{gid}/audio_timestamps"),
            ),
            (Method::GET, format!("/api/v1/collections/{cid}/documents")),
        ] {
            let (s, b) = app.call(m, &p, &bob, None).await;
            assert_error(s, &b, 404);
        }
        let (_, bobs) = app.call(Method::GET, "/api/v1/documents", &bob, None).await;
        assert_eq!(bobs, json!([]));

        // Delete: the counts follow.
        let (s, _) = app
            .call(
                Method::DELETE,
                &format!("/api/v1/documents/{gid}"),
                &alice,
                None,
            )
            .await;
        assert_eq!(s, 204);
        let (s, b) = app
            .call(
                Method::DELETE,
                &format!("/api/v1/documents/{gid}"),
                &alice,
                None,
            )
            .await;
        assert_error(s, &b, 404);
        let (_, c) = app.call(Method::GET, &path, &alice, None).await;
        assert_eq!(c["document_count"], 1);
        assert!(
            c.get("description_dirty_at").is_some(),
            "a document change marks the description stale"
        );
        app.stop().await;
    }
}

docchat_common::backend_tests! {
    async fn uploads_without_a_file_or_too_large_are_refused(backend) {
        let app = Stack::docchat(&backend).await;
        let (_, key) = app.user("carol").await;
        let form = Form::new().text("not_file", "x");
        let (s, b) = read(
            app.http(Method::PUT, "/api/v1/uploads", Some(&key))
                .multipart(form)
                .send()
                .await
                .unwrap(),
        )
        .await;
        assert_error(s, &b, 400);
        assert_eq!(b["message"], "The request does not contain a file.");
        let (s, b) = read(
            app.http(Method::PUT, "/api/v1/uploads", Some(&key))
                .header("content-type", "application/json")
                .body("{}")
                .send()
                .await
                .unwrap(),
        )
        .await;
        assert_error(s, &b, 400);
        // Above the limit (140 MB; announced by Content-Length): 413 before anything is stored.
        let body = vec![b'x'; 141 * 1000 * 1000];
        let (s, b) = upload(&app, &key, "huge.txt", body).await;
        assert_error(s, &b, 413);
        tokio::time::sleep(Duration::from_millis(100)).await;
        app.stop().await;
    }
}

docchat_common::backend_tests! {
    async fn runtime_limits_refuse_and_change_nothing(backend) {
        let app = Stack::docchat(&backend).await;
        let (uid, key) = app.user("gail").await;
        // Resolved settings are cached for config_cache_ttl_seconds: shorten it to 1 s.
        let (s, _) = app
            .call(
                Method::PUT,
                "/api/v1/configurations/config_cache_ttl_seconds",
                crate::harness::ADMIN_KEY,
                Some(json!({"string_value": "1"})),
            )
            .await;
        assert_eq!(s, 200);
        let set = |k: &str, v: &str| {
            (
                format!("/api/v1/users/{uid}/configurations/{k}"),
                json!({"string_value": v}),
            )
        };
        let (path, body) = set("collection_limit_per_user", "1");
        let (s, _) = app
            .call(Method::PUT, &path, crate::harness::ADMIN_KEY, Some(body))
            .await;
        assert_eq!(s, 200);
        let (s, col) = app
            .call(
                Method::POST,
                "/api/v1/collections",
                &key,
                Some(json!({"name": "one", "description": ""})),
            )
            .await;
        assert_eq!(s, 201);
        let (s, b) = app
            .call(
                Method::POST,
                "/api/v1/collections",
                &key,
                Some(json!({"name": "two", "description": ""})),
            )
            .await;
        assert_error(s, &b, 403);
        let (_, list) = app
            .call(Method::GET, "/api/v1/collections", &key, None)
            .await;
        assert_eq!(list.as_array().unwrap().len(), 1, "nothing created");

        let cid = col["id"].as_str().unwrap();
        let (path, body) = set("document_limit_per_user", "0");
        app.call(Method::PUT, &path, crate::harness::ADMIN_KEY, Some(body))
            .await;
        // A global limit on collection size (1 MB minimum) refuses a larger upload's ingestion.
        let (s, _) = app
            .call(
                Method::PUT,
                "/api/v1/configurations/default_collection_size_limit",
                crate::harness::ADMIN_KEY,
                Some(json!({"string_value": "1048576"})),
            )
            .await;
        assert_eq!(s, 200);
        let (_, big) = upload(&app, &key, "big.txt", vec![b'a'; 1_100_000]).await;
        let ingest = format!(
            "/api/v1/uploads/{}/ingest?collection_id={cid}",
            big["id"].as_str().unwrap()
        );
        tokio::time::sleep(std::time::Duration::from_millis(1100)).await;
        // No documents allowed: 403.
        let (s, b) = app.call(Method::POST, &ingest, &key, None).await;
        assert_error(s, &b, 403);
        // Documents allowed again, but the file exceeds the collection size limit: 413.
        let (path, body) = set("document_limit_per_user", "-1");
        app.call(Method::PUT, &path, crate::harness::ADMIN_KEY, Some(body))
            .await;
        tokio::time::sleep(std::time::Duration::from_millis(1100)).await;
        let (s, b) = app.call(Method::POST, &ingest, &key, None).await;
        assert_error(s, &b, 413);
        let (_, count) = app
            .call(Method::GET, "/api/v1/documents/count", &key, None)
            .await;
        assert_eq!(count["count"], 0);
        app.stop().await;
    }
}

/// Ingestion jobs ingest-service holds, whatever their state.
async fn ingestion_jobs(app: &Stack) -> i64 {
    use sea_orm::{ConnectionTrait, Statement};
    let db = app.database(Service::Ingest).await;
    let backend = db.get_database_backend();
    let row = db
        .query_one(Statement::from_string(
            backend,
            "SELECT COUNT(*) FROM jobs WHERE kind = 'ingest_upload'",
        ))
        .await
        .unwrap()
        .unwrap();
    db.close().await.unwrap();
    row.try_get_by_index::<i64>(0).unwrap()
}

docchat_common::backend_tests! {
    /// POST /uploads/{a},{b}/ingest is all or nothing (issue 37): every id and the per-user
    /// document limit are checked for the whole list before any job is queued, so a refused
    /// list leaves the caller's uploads as they were, ingestable.
    async fn a_multi_id_ingest_queues_all_or_nothing(backend) {
        let app = Stack::docchat(&backend).await;
        let name = app.backend;
        crate::harness::set_global(&app, "document_limit_per_user", "5").await;
        let (_, alice) = app.user("alice").await;
        let (_, bob) = app.user("bob").await;
        let cid = crate::harness::collection(&app, &alice).await;
        let ingest = |ids: &str| {
            format!("/api/v1/uploads/{ids}/ingest?collection_id={cid}&gen_doc_summaries=false")
        };
        let upload_id = |key: String, i: usize| {
            let app = &app;
            async move {
                let text = format!("Document {i} is about topic number {i} and nothing else.");
                let (s, up) = upload(app, &key, &format!("doc{i}.txt"), text.into_bytes()).await;
                assert_eq!(s, 200, "{up}");
                up["id"].as_str().unwrap().to_owned()
            }
        };
        let documents = || async {
            let (s, n) = app
                .call(Method::GET, "/api/v1/documents/count", &alice, None)
                .await;
            assert_eq!(s, 200, "{n}");
            n["count"].as_i64().unwrap()
        };
        let mine = upload_id(alice.clone(), 0).await;
        let bobs = upload_id(bob.clone(), 100).await;

        // Her own upload, then Bob's (as the client sends a list, `%2C`-separated): 404, and
        // hers is not queued either; an unknown id first is the same.
        let (s, b) = app
            .call(Method::POST, &ingest(&format!("{mine}%2C{bobs}")), &alice, None)
            .await;
        assert_error(s, &b, 404);
        assert!(b["message"].as_str().unwrap().contains(&bobs), "{b}");
        let (s, b) = app
            .call(Method::POST, &ingest(&format!("{mine},no-such-upload")), &alice, None)
            .await;
        assert_error(s, &b, 404);
        assert_eq!(ingestion_jobs(&app).await, 0, "{name}: nothing queued");
        // Her upload is still there and ingests on its own, once.
        let (s, b) = app.call(Method::POST, &ingest(&mine), &alice, None).await;
        assert_eq!((s, b), (204, Value::Null), "{name}");
        eventually("her upload ingested", || async { documents().await == 1 }).await;
        assert_eq!(ingestion_jobs(&app).await, 1, "{name}");

        // Ten ids against a limit of five: 403 and nothing queued. Five more do not fit
        // either, with one document held: the list counts as a whole.
        let mut ids = Vec::new();
        for i in 1..=10 {
            ids.push(upload_id(alice.clone(), i).await);
        }
        let (s, b) = app
            .call(Method::POST, &ingest(&ids.join(",")), &alice, None)
            .await;
        assert_error(s, &b, 403);
        let (s, b) = app
            .call(Method::POST, &ingest(&ids[..5].join(",")), &alice, None)
            .await;
        assert_error(s, &b, 403);
        assert_eq!(ingestion_jobs(&app).await, 1, "{name}: nothing more queued");
        assert_eq!(documents().await, 1, "{name}");

        // Four that fit, one of them named twice, are ingested once each.
        let four = format!("{},{}", ids[..4].join(","), ids[0]);
        let (s, b) = app.call(Method::POST, &ingest(&four), &alice, None).await;
        assert_eq!((s, b), (204, Value::Null), "{name}");
        assert_eq!(ingestion_jobs(&app).await, 5, "{name}");
        eventually("four more documents", || async { documents().await == 5 }).await;
        assert_eq!(
            app.count_rows(Service::Ingest, "uploads").await,
            12,
            "{name}: every upload kept"
        );
        app.stop().await;
    }
}
