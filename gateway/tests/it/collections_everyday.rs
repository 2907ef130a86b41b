//! The h2oGPTe client's everyday collection and document calls: counting and listing
//! collections (their literal routes before `/collections/{id}`), a collection's settings,
//! chat settings and metadata (the settings act as ingestion defaults), a document's
//! metadata, name and URI and its other follow-up reads, chunks by id and by search, a
//! document's chunks and collections; each only for whom it belongs to, and the migration
//! that stores it.

use std::sync::Arc;
use std::time::Duration;

use docchat_common::config::Service;
use docchat_common::testing::{ScriptedHttp, SeenRequest, Streamed};
use docchat_ingest_service::entities::{collections, documents};
use docchat_ingest_service::migrations::Migrator;
use reqwest::Method;
use sea_orm::{ConnectionTrait, EntityTrait, Set, Statement};
use sea_orm_migration::MigratorTrait;
use serde_json::{Value, json};

use crate::documents::upload;
use crate::harness::{ADMIN_KEY, Stack, assert_error, collection, ingest, read, wait_documents};

/// An image: with recognition off its ingestion fails, saying so.
const PHOTO: &[u8] = include_bytes!("../../../ingest-service/tests/fixtures/ocr/photo.jpg");

/// A collection of `key`'s made with `body` (name "kb" unless given): its id.
async fn collection_from(app: &Stack, key: &str, body: Value) -> String {
    let mut body = body;
    body.as_object_mut()
        .unwrap()
        .entry("name")
        .or_insert(json!("kb"));
    body.as_object_mut()
        .unwrap()
        .entry("description")
        .or_insert(json!(""));
    let (s, col) = app
        .call(Method::POST, "/api/v1/collections", key, Some(body))
        .await;
    assert_eq!(s, 201, "{col}");
    col["id"].as_str().unwrap().to_owned()
}

/// GET `path` as `key`: the status and body.
async fn get(app: &Stack, key: &str, path: &str) -> (u16, Value) {
    app.call(Method::GET, path, key, None).await
}

/// The first document of `key`'s collection `cid`.
async fn only_document(app: &Stack, key: &str, cid: &str) -> Value {
    let (s, docs) = get(app, key, &format!("/api/v1/collections/{cid}/documents")).await;
    assert_eq!(s, 200, "{docs}");
    docs[0].clone()
}

/// Makes a collection public (no endpoint does).
async fn make_public(app: &Stack, cid: &str) {
    let db = app.database(Service::Ingest).await;
    let sql = match db.get_database_backend() {
        sea_orm::DbBackend::Postgres => "UPDATE collections SET is_public = TRUE WHERE id = $1",
        _ => "UPDATE collections SET is_public = 1 WHERE id = ?",
    };
    db.execute(Statement::from_sql_and_values(
        db.get_database_backend(),
        sql,
        [cid.into()],
    ))
    .await
    .unwrap();
    db.close().await.unwrap();
}

docchat_common::backend_tests! {
    /// Settings, chat settings and metadata: stored at creation and by PUT (each replaced
    /// whole), read back by anyone who can read the collection, checked against the
    /// client's models, written only by the owner.
    async fn collection_settings_are_stored_checked_and_the_owners(backend) {
        let app = Stack::docchat(&backend).await;
        let name = app.backend;
        let (_, alice) = app.user("alice").await;
        let (_, bob) = app.user("bob").await;
        // As the client sends them: from_dict's defaults, an unknown field (dropped).
        let settings = json!({
            "gen_doc_summaries": false, "gen_doc_questions": false, "audio_input_language": "auto",
            "ocr_model": "auto", "max_tokens_per_chunk": 320, "ingest_mode": "lite",
            "guardrails_settings": {"pii_detection_parse_action": "redact", "column_redaction_config": [["ssn", "SSN"]],
                                    "guardrails_entities": {"Safe": "fine"}},
        });
        let chat = json!({"llm": "auto", "include_chat_history": "off", "tags": {"include": ["a"]}, "rag_config": {"rag_type": "rag"}});
        let mut sent = settings.clone();
        sent["not_a_setting"] = json!(1);
        let cid = collection_from(&app, &alice, json!({"collection_settings": sent, "chat_settings": chat})).await;
        let base = format!("/api/v1/collections/{cid}");
        assert_eq!(get(&app, &alice, &format!("{base}/settings")).await, (200, settings.clone()), "{name}");
        assert_eq!(get(&app, &alice, &format!("{base}/chat_settings")).await, (200, chat.clone()));
        assert_eq!(get(&app, &alice, &format!("{base}/metadata")).await, (200, json!({})));
        // Never set: empty objects.
        let plain = collection(&app, &alice).await;
        for what in ["settings", "chat_settings", "metadata"] {
            assert_eq!(get(&app, &alice, &format!("/api/v1/collections/{plain}/{what}")).await, (200, json!({})), "{what}");
        }

        // PUT replaces each whole.
        let replaced = json!({"ocr_model": "off", "chunk_by_page": true});
        for (what, body) in [
            ("settings", replaced.clone()),
            ("chat_settings", json!({"tags": ["x", "y"]})),
            ("metadata", json!({"team": "blue", "n": 3, "nested": {"k": [1, null]}})),
        ] {
            let (s, b) = app.call(Method::PUT, &format!("{base}/{what}"), &alice, Some(body.clone())).await;
            assert_eq!((s, b), (204, Value::Null), "{what}");
            assert_eq!(get(&app, &alice, &format!("{base}/{what}")).await, (200, body), "{name}: {what}");
        }
        let current = |what: &'static str| {
            let (app, alice, base) = (&app, &alice, &base);
            async move { get(app, alice, &format!("{base}/{what}")).await.1 }
        };
        let before = (current("settings").await, current("chat_settings").await, current("metadata").await);

        // Invalid values: 400 with the standard body, and nothing changes.
        for (what, body) in [
            ("settings", json!({"ingest_mode": "fast"})),
            ("settings", json!({"gen_doc_summaries": "yes"})),
            ("settings", json!({"max_depth": 1.5})),
            ("settings", json!({"guardrails_settings": {"pii_detection_llm_output_action": "drop"}})),
            ("settings", json!({"guardrails_settings": {"column_redaction_config": [["only one"]]}})),
            ("settings", json!({"ocr_model": "docTR"})),
            ("settings", json!(["ocr_model"])),
            ("settings", json!("off")),
            ("chat_settings", json!({"include_chat_history": "sometimes"})),
            ("chat_settings", json!({"tags": "a"})),
            ("chat_settings", json!({"llm_args": [1]})),
            ("metadata", json!([1, 2])),
            ("metadata", json!(null)),
        ] {
            let (s, b) = app.call(Method::PUT, &format!("{base}/{what}"), &alice, Some(body.clone())).await;
            assert_error(s, &b, 400);
            assert!(b["message"].as_str().unwrap().len() > 10, "{what} {body}: {b}");
        }
        let sent = app
            .http(Method::PUT, &format!("{base}/metadata"), Some(&alice))
            .header("content-type", "application/json")
            .body("{not json")
            .send()
            .await
            .unwrap();
        let (s, b) = read(sent).await;
        assert_error(s, &b, 400);
        // Past 64 KiB: 413.
        let big = json!({"blob": "x".repeat(70 * 1024)});
        for what in ["settings", "chat_settings", "metadata"] {
            let body = if what == "metadata" { big.clone() } else { json!({"llm": "x".repeat(70 * 1024), "root_dir": "x".repeat(70 * 1024)}) };
            let (s, b) = app.call(Method::PUT, &format!("{base}/{what}"), &alice, Some(body)).await;
            assert_error(s, &b, 413);
        }
        assert_eq!(
            (current("settings").await, current("chat_settings").await, current("metadata").await),
            before,
            "{name}"
        );
        // A creation with invalid settings creates nothing.
        let (_, count) = get(&app, &alice, "/api/v1/collections/count").await;
        for body in [
            json!({"name": "bad", "description": "", "collection_settings": {"ingest_mode": "fast"}}),
            json!({"name": "bad", "description": "", "chat_settings": {"include_chat_history": 1}}),
            json!({"name": "bad", "description": "", "collection_settings": [1]}),
        ] {
            let (s, b) = app.call(Method::POST, "/api/v1/collections", &alice, Some(body)).await;
            assert_error(s, &b, 400);
        }
        assert_eq!(get(&app, &alice, "/api/v1/collections/count").await.1, count);

        // Bob: another user's private collection is a 404 on every read and write.
        for what in ["settings", "chat_settings", "metadata"] {
            let (s, b) = get(&app, &bob, &format!("{base}/{what}")).await;
            assert_error(s, &b, 404);
            let (s, b) = app.call(Method::PUT, &format!("{base}/{what}"), &bob, Some(json!({}))).await;
            assert_error(s, &b, 404);
        }
        // Public: Bob reads, still may not write.
        make_public(&app, &cid).await;
        assert_eq!(get(&app, &bob, &format!("{base}/metadata")).await, (200, before.2.clone()));
        assert_eq!(get(&app, &bob, &format!("{base}/settings")).await, (200, before.0.clone()));
        for what in ["settings", "chat_settings", "metadata"] {
            let (s, b) = app.call(Method::PUT, &format!("{base}/{what}"), &bob, Some(json!({}))).await;
            assert_error(s, &b, 404);
        }
        assert_eq!(
            (current("settings").await, current("chat_settings").await, current("metadata").await),
            before,
            "{name}"
        );
        let (s, b) = get(&app, &alice, "/api/v1/collections/no-such-id/settings").await;
        assert_error(s, &b, 404);
        app.stop().await;
    }
}

/// An OpenAI-compatible JSON answer (a summary call).
const SUMMARY: &str = r#"{"id":"c","object":"chat.completion","created":0,"model":"scripted","choices":[{"index":0,"message":{"role":"assistant","content":"Notes about Paris."},"finish_reason":"stop"}],"usage":{"prompt_tokens":5,"completion_tokens":3,"total_tokens":8}}"#;

/// Uploads `bytes` as `name` and ingests it into `cid` with `query` (`&a=b...`) as a job,
/// to its end: the finished job (JobDetails).
async fn ingest_job(
    app: &Stack,
    key: &str,
    cid: &str,
    name: &str,
    bytes: Vec<u8>,
    query: &str,
) -> Value {
    let (s, up) = upload(app, key, name, bytes).await;
    assert_eq!(s, 200, "{up}");
    let path = format!(
        "/api/v1/uploads/{}/ingest/job?collection_id={cid}{query}",
        up["id"].as_str().unwrap()
    );
    let (s, job) = app.call(Method::POST, &path, key, Some(json!({}))).await;
    assert_eq!(s, 201, "{job}");
    let id = job["id"].as_str().unwrap().to_owned();
    let deadline = tokio::time::Instant::now() + Duration::from_secs(60);
    loop {
        let (_, job) = get(app, key, &format!("/api/v1/jobs/{id}")).await;
        if job["overall_status"] != "in progress" {
            return job;
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "the ingestion of {name} did not end: {job}"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

/// The summary calls the upstream saw.
fn summary_calls(upstream: &ScriptedHttp) -> usize {
    upstream
        .seen()
        .iter()
        .filter(|r| String::from_utf8_lossy(&r.body).contains("Summarize this document."))
        .count()
}

/// The stored options of ingestion job `id`: (gen_doc_summaries, ocr, ocr_language).
async fn job_options(app: &Stack, id: &str) -> (bool, String, String) {
    let db = app.database(Service::Ingest).await;
    let sql = match db.get_database_backend() {
        sea_orm::DbBackend::Postgres => "SELECT params FROM jobs WHERE id = $1",
        _ => "SELECT params FROM jobs WHERE id = ?",
    };
    let row = db
        .query_one(Statement::from_sql_and_values(
            db.get_database_backend(),
            sql,
            [id.into()],
        ))
        .await
        .unwrap()
        .unwrap();
    db.close().await.unwrap();
    let params: Value = serde_json::from_str(&row.try_get_by_index::<String>(0).unwrap()).unwrap();
    (
        params["gen_doc_summaries"].as_bool().unwrap(),
        params["ocr"].as_str().unwrap_or("auto").to_owned(),
        params["ocr_language"].as_str().unwrap_or("").to_owned(),
    )
}

docchat_common::backend_tests! {
    /// An ingestion that does not give gen_doc_summaries, ocr_model or tesseract_lang
    /// takes the collection's settings; one that gives them keeps its own.
    async fn collection_settings_are_the_defaults_of_an_ingestion(backend) {
        let upstream = ScriptedHttp::start_streaming(Arc::new(|_r: &SeenRequest| Streamed {
            status: 200,
            content_type: "application/json".into(),
            parts: vec![(Duration::ZERO, SUMMARY.as_bytes().to_vec())],
        }))
        .await;
        let app = Stack::builder(&backend)
            .everything()
            .scripted_model(&upstream.base_url)
            .configure(|c| c.description_interval_seconds = 86_400)
            .start()
            .await;
        let name = app.backend;
        let (_, alice) = app.user("alice").await;
        let text = |t: &str| format!("# {t}\n\nThe Eiffel Tower stands in Paris.\n").into_bytes();
        let settled = collection_from(
            &app,
            &alice,
            json!({"collection_settings": {"gen_doc_summaries": true, "ocr_model": "tesseract", "tesseract_lang": "eng"}}),
        )
        .await;
        let plain = collection(&app, &alice).await;

        // Nothing given: the collection's settings.
        let job = ingest_job(&app, &alice, &settled, "a.md", text("a"), "").await;
        assert_eq!(job["overall_status"], "completed", "{name}: {job}");
        assert_eq!(job_options(&app, job["id"].as_str().unwrap()).await, (true, "force".into(), "eng".into()), "{name}");
        let doc = only_document(&app, &alice, &settled).await;
        assert_eq!(doc["summary"], "Notes about Paris.", "{name}: {doc}");

        // Given: the ingestion's own (the language still the collection's).
        let job = ingest_job(&app, &alice, &settled, "b.md", text("b"), "&gen_doc_summaries=false&ocr_model=auto").await;
        assert_eq!(job["overall_status"], "completed", "{job}");
        assert_eq!(job_options(&app, job["id"].as_str().unwrap()).await, (false, "auto".into(), "eng".into()));
        // A collection without settings: docchat's defaults.
        let job = ingest_job(&app, &alice, &plain, "c.md", text("c"), "").await;
        assert_eq!(job_options(&app, job["id"].as_str().unwrap()).await, (false, "auto".into(), String::new()));
        let doc = only_document(&app, &alice, &plain).await;
        assert!(doc.get("summary").is_none(), "{doc}");
        let summaries = summary_calls(&upstream);
        assert_eq!(summaries, 1, "{name}: one summary call, for a.md");

        // New settings replace the old whole: recognition off, no summaries any more.
        let (s, b) = app
            .call(Method::PUT, &format!("/api/v1/collections/{settled}/settings"), &alice, Some(json!({"ocr_model": "off"})))
            .await;
        assert_eq!(s, 204, "{b}");
        let job = ingest_job(&app, &alice, &settled, "orchard.jpg", PHOTO.to_vec(), "").await;
        assert_eq!(job["overall_status"], "failed", "{name}: {job}");
        assert!(job["errors"][0].as_str().unwrap().contains("ocr_model=off"), "{name}: {job}");
        let job = ingest_job(&app, &alice, &settled, "d.md", text("d"), "").await;
        assert_eq!(job_options(&app, job["id"].as_str().unwrap()).await, (false, "off".into(), String::new()));
        assert_eq!(summary_calls(&upstream), summaries, "no summary asked for d.md");
        // The same image where recognition is not turned off is not refused for that.
        let job = ingest_job(&app, &alice, &plain, "orchard.jpg", PHOTO.to_vec(), "").await;
        assert!(!job["errors"].to_string().contains("ocr_model=off"), "{name}: {job}");
        app.stop().await;
    }
}

docchat_common::backend_tests! {
    /// count and all are routes of their own, not collection ids; count is the caller's
    /// own collections; all is every user's, for administrators only.
    async fn count_and_all_collections(backend) {
        let app = Stack::docchat(&backend).await;
        let name = app.backend;
        let (_, alice) = app.user("alice").await;
        let (_, bob) = app.user("bob").await;
        assert_eq!(get(&app, &alice, "/api/v1/collections/count").await, (200, json!({"count": 0})), "{name}");
        let a1 = collection_from(&app, &alice, json!({"name": "alpha reports"})).await;
        let a2 = collection_from(&app, &alice, json!({"name": "beta"})).await;
        let b1 = collection_from(&app, &bob, json!({"name": "gamma"})).await;
        make_public(&app, &a1).await;
        assert_eq!(get(&app, &alice, "/api/v1/collections/count").await, (200, json!({"count": 2})));
        // Alice's public collection is Bob's to read, not his to count.
        assert_eq!(get(&app, &bob, "/api/v1/collections/count").await, (200, json!({"count": 1})));
        let (s, one) = get(&app, &alice, &format!("/api/v1/collections/{a2}")).await;
        assert_eq!((s, one["name"].clone()), (200, json!("beta")));

        let ids = |list: &Value| -> Vec<String> {
            list.as_array().unwrap().iter().map(|c| c["id"].as_str().unwrap().to_owned()).collect()
        };
        let (s, all) = get(&app, ADMIN_KEY, "/api/v1/collections/all?sort_column=name&ascending=true").await;
        assert_eq!(s, 200, "{all}");
        assert_eq!(ids(&all), [a1.clone(), a2.clone(), b1.clone()], "{name}: {all}");
        assert_eq!(all[2]["username"], "bob");
        let (_, page) = get(&app, ADMIN_KEY, "/api/v1/collections/all?sort_column=name&ascending=true&offset=1&limit=1").await;
        assert_eq!(ids(&page), [a2.as_str()]);
        for (filter, want) in [("bob", vec![b1.clone()]), ("ALPHA", vec![a1.clone()]), (a2.as_str(), vec![a2.clone()]), ("%", vec![]), ("_", vec![])] {
            let (s, found) = get(&app, ADMIN_KEY, &format!("/api/v1/collections/all?filter={filter}")).await;
            assert_eq!((s, ids(&found)), (200, want), "{name}: {filter}");
        }
        // The client's other calls: default paging and an empty filter.
        let (_, every) = get(&app, ADMIN_KEY, "/api/v1/collections/all?offset=0&limit=100&sort_column=updated_at&ascending=false&filter=").await;
        assert_eq!(ids(&every).len(), 3);
        for key in [&alice, &bob] {
            let (s, b) = get(&app, key, "/api/v1/collections/all").await;
            assert_error(s, &b, 403);
        }
        for query in ["?sort_column=owner", "?limit=-1", "?ascending=maybe"] {
            let (s, b) = get(&app, ADMIN_KEY, &format!("/api/v1/collections/all{query}")).await;
            assert_error(s, &b, 400);
        }
        let (s, b) = app.call(Method::GET, "/api/v1/collections/count", "sk-not-a-key", None).await;
        assert_error(s, &b, 401);
        app.stop().await;
    }
}

docchat_common::backend_tests! {
    /// get_document's follow-up reads, metadata, renaming and a URI, a document's chunks
    /// and collections: for whoever may read the document; writes for its owner only.
    async fn document_metadata_name_uri_and_follow_ups(backend) {
        let app = Stack::docchat(&backend).await;
        let name = app.backend;
        let (_, alice) = app.user("alice").await;
        let (_, bob) = app.user("bob").await;
        let cid = collection(&app, &alice).await;
        let other = collection(&app, &alice).await;
        let long = (0..400).map(|i| format!("Sentence {i} about harbour cranes and tides.")).collect::<Vec<_>>().join(" ");
        ingest(&app, &alice, &cid, "plans.txt", long.clone().into_bytes()).await;
        wait_documents(&app, &alice, &cid, 1).await;
        let doc = only_document(&app, &alice, &cid).await;
        let id = doc["id"].as_str().unwrap().to_owned();
        let base = format!("/api/v1/documents/{id}");
        assert!(doc.get("uri").is_none(), "{doc}");

        assert_eq!(get(&app, &alice, &format!("{base}/internal_metadata")).await, (200, json!({})), "{name}");
        for what in ["user_source_file", "guardrails_settings", "page_layout"] {
            assert_eq!(get(&app, &alice, &format!("{base}/{what}")).await, (204, Value::Null), "{what}");
        }
        let metadata = json!({"source": "crm", "year": 2024, "tags": ["a", "b"], "deep": {"x": null}});
        let (s, b) = app.call(Method::PUT, &format!("{base}/metadata"), &alice, Some(metadata.clone())).await;
        assert_eq!((s, b), (204, Value::Null));
        assert_eq!(get(&app, &alice, &format!("{base}/internal_metadata")).await, (200, metadata.clone()));

        // Renaming follows the upload's file-name rules; a URI is kept and cleared.
        let (s, renamed) = app.call(Method::PATCH, &base, &alice, Some(json!({"name": " ../q3/report.txt "}))).await;
        assert_eq!((s, renamed["name"].clone(), renamed["id"].clone()), (200, json!("report.txt"), json!(id)), "{renamed}");
        let (s, with_uri) = app.call(Method::PATCH, &base, &alice, Some(json!({"uri": " https://example.com/q3 "}))).await;
        assert_eq!((s, with_uri["uri"].clone(), with_uri["name"].clone()), (200, json!("https://example.com/q3"), json!("report.txt")));
        let (_, read) = get(&app, &alice, &base).await;
        assert_eq!((read["name"].clone(), read["uri"].clone()), (json!("report.txt"), json!("https://example.com/q3")), "{name}");
        for body in [json!({"name": ""}), json!({"name": " / "}), json!({"name": ".."}), json!({"name": "x".repeat(256)}),
                     json!({}), json!({"uri": "a\nb"}), json!({"name": 5})] {
            let (s, b) = app.call(Method::PATCH, &base, &alice, Some(body.clone())).await;
            assert_error(s, &b, 400);
        }
        for body in [json!([1]), json!("x"), json!(null)] {
            let (s, b) = app.call(Method::PUT, &format!("{base}/metadata"), &alice, Some(body)).await;
            assert_error(s, &b, 400);
        }
        let (s, b) = app.call(Method::PUT, &format!("{base}/metadata"), &alice, Some(json!({"x": "y".repeat(70 * 1024)}))).await;
        assert_error(s, &b, 413);
        let (_, read) = get(&app, &alice, &base).await;
        assert_eq!((read["name"].clone(), read["uri"].clone()), (json!("report.txt"), json!("https://example.com/q3")));
        assert_eq!(get(&app, &alice, &format!("{base}/internal_metadata")).await.1, metadata);

        // Its chunks, in order, and its collection.
        let (s, chunks) = get(&app, &alice, &format!("{base}/chunks")).await;
        assert_eq!(s, 200, "{chunks}");
        let chunks = chunks.as_array().unwrap().clone();
        assert!(chunks.len() >= 2, "{name}: a long text makes several chunks: {}", chunks.len());
        let joined: String = chunks.iter().map(|c| c["text"].as_str().unwrap()).collect::<Vec<_>>().join(" ");
        assert!(joined.contains("Sentence 0 ") && joined.contains("Sentence 399 "), "{name}");
        for c in &chunks {
            assert_eq!((c["topic"].clone(), c["name"].clone(), c["score"].clone()), (json!(id), json!("report.txt"), json!(0.0)));
            assert_eq!(c["size"], json!(c["text"].as_str().unwrap().chars().count()));
            assert_eq!(c["pages"], "1");
        }
        let (s, same) = get(&app, &alice, &format!("{base}/chunks?collection_id={cid}")).await;
        assert_eq!((s, same.as_array().unwrap().len()), (200, chunks.len()));
        let (s, b) = get(&app, &alice, &format!("{base}/chunks?collection_id={other}")).await;
        assert_error(s, &b, 404);
        let (s, cols) = get(&app, &alice, &format!("{base}/collections?offset=0&limit=1")).await;
        assert_eq!((s, cols.as_array().unwrap().len(), cols[0]["id"].clone()), (200, 1, json!(cid)), "{cols}");
        assert_eq!(get(&app, &alice, &format!("{base}/collections?offset=1")).await, (200, json!([])));

        // Bob: 404 on every read and write of Alice's private document; nothing changes.
        let reads = ["", "/internal_metadata", "/user_source_file", "/guardrails_settings", "/page_layout", "/chunks", "/collections"];
        for path in reads {
            let (s, b) = get(&app, &bob, &format!("{base}{path}")).await;
            assert_error(s, &b, 404);
        }
        let (s, b) = app.call(Method::PATCH, &base, &bob, Some(json!({"name": "mine.txt"}))).await;
        assert_error(s, &b, 404);
        let (s, b) = app.call(Method::PUT, &format!("{base}/metadata"), &bob, Some(json!({"owner": "bob"}))).await;
        assert_error(s, &b, 404);
        // Public: Bob reads all of it, still writes nothing.
        make_public(&app, &cid).await;
        assert_eq!(get(&app, &bob, &format!("{base}/internal_metadata")).await, (200, metadata.clone()));
        assert_eq!(get(&app, &bob, &format!("{base}/page_layout")).await.0, 204);
        assert_eq!(get(&app, &bob, &format!("{base}/collections")).await.1[0]["id"], json!(cid));
        let (s, b) = app.call(Method::PATCH, &base, &bob, Some(json!({"uri": "https://bob.example"}))).await;
        assert_error(s, &b, 404);
        let (s, b) = app.call(Method::PUT, &format!("{base}/metadata"), &bob, Some(json!({}))).await;
        assert_error(s, &b, 404);
        let (_, read) = get(&app, &alice, &base).await;
        assert_eq!((read["name"].clone(), read["uri"].clone()), (json!("report.txt"), json!("https://example.com/q3")));
        assert_eq!(get(&app, &alice, &format!("{base}/internal_metadata")).await.1, metadata);

        // A URI set to empty is cleared.
        let (s, cleared) = app.call(Method::PATCH, &base, &alice, Some(json!({"uri": ""}))).await;
        assert_eq!(s, 200);
        assert!(cleared.get("uri").is_none(), "{cleared}");
        let (s, b) = get(&app, &alice, "/api/v1/documents/no-such-document/internal_metadata").await;
        assert_error(s, &b, 404);
        app.stop().await;
    }
}

docchat_common::backend_tests! {
    /// Chunks by id and by search, in the client's shapes; ids of another collection are
    /// a 404 naming them; paging within the best 100 hits.
    async fn chunks_by_id_and_by_search(backend) {
        let app = Stack::docchat(&backend).await;
        let name = app.backend;
        let (_, alice) = app.user("alice").await;
        let (_, bob) = app.user("bob").await;
        let cid = collection(&app, &alice).await;
        let other = collection(&app, &alice).await;
        ingest(&app, &alice, &cid, "tower.txt", b"The Eiffel Tower is a wrought-iron lattice tower in Paris.".to_vec()).await;
        ingest(&app, &alice, &cid, "bread.txt", b"Sourdough bread rises slowly with wild yeast.".to_vec()).await;
        wait_documents(&app, &alice, &cid, 2).await;
        ingest(&app, &alice, &other, "moon.txt", b"The Moon orbits the Earth.".to_vec()).await;
        wait_documents(&app, &alice, &other, 1).await;
        let search = format!("/api/v1/collections/{cid}/chunks/search");

        let body = |query: &str, topics: Value, offset: i64, limit: i64| json!({"query": query, "topics": topics, "offset": offset, "limit": limit});
        let (s, hits) = app.call(Method::POST, &search, &alice, Some(body("Eiffel tower in Paris", json!([]), 0, 10))).await;
        assert_eq!(s, 200, "{hits}");
        let hits = hits.as_array().unwrap().clone();
        assert_eq!(hits.len(), 2, "{name}: both chunks of the collection, none of the other");
        assert_eq!(hits[0]["name"], "tower.txt", "{name}: {hits:?}");
        let tower_doc = hits[0]["topic"].as_str().unwrap().to_owned();
        let bread_doc = hits[1]["topic"].as_str().unwrap().to_owned();
        for h in &hits {
            assert!(h["score"].is_number() && h["id"].is_i64() && h["pages"] == "1", "{h}");
            assert_eq!(h["size"], json!(h["text"].as_str().unwrap().chars().count()));
        }
        assert!(hits[0]["score"].as_f64().unwrap() >= hits[1]["score"].as_f64().unwrap());
        // topics: only those documents; offset and limit page the hits.
        let (_, only) = app.call(Method::POST, &search, &alice, Some(body("Eiffel tower in Paris", json!([bread_doc]), 0, 10))).await;
        assert_eq!(only.as_array().unwrap().iter().map(|h| h["topic"].clone()).collect::<Vec<_>>(), [json!(bread_doc)], "{only}");
        let (_, second) = app.call(Method::POST, &search, &alice, Some(body("Eiffel tower in Paris", json!([]), 1, 1))).await;
        assert_eq!(second, json!([hits[1]]), "{name}");
        let (_, first) = app.call(Method::POST, &search, &alice, Some(body("Eiffel tower in Paris", json!([]), 0, 1))).await;
        assert_eq!(first, json!([hits[0]]));
        for bad in [body("x", json!([]), -1, 5), body("x", json!([]), 0, -5), body("x", json!([]), 0, 0),
                    body("x", json!([]), 0, 101), body("x", json!([]), 99, 2), body("x", json!([]), 0, i64::MAX),
                    body("", json!([]), 0, 5), json!({"topics": []}), json!({"query": "x", "topics": "doc"})] {
            let (s, b) = app.call(Method::POST, &search, &alice, Some(bad.clone())).await;
            assert_error(s, &b, 400);
        }

        // By id, in the order asked; also percent-encoded; a repeated id once.
        let (tower, bread) = (hits[0]["id"].as_i64().unwrap(), hits[1]["id"].as_i64().unwrap());
        let chunks = format!("/api/v1/collections/{cid}/chunks");
        for list in [format!("{bread},{tower}"), format!("{bread}%2C{tower}"), format!("{bread}%2c{tower},{bread}")] {
            let (s, got) = get(&app, &alice, &format!("{chunks}/{list}")).await;
            assert_eq!(s, 200, "{list}: {got}");
            assert_eq!(got.as_array().unwrap().len(), 2, "{name}: {list}: {got}");
            assert_eq!((got[0]["id"].clone(), got[1]["id"].clone()), (json!(bread), json!(tower)));
            assert_eq!(got[1]["text"], hits[0]["text"]);
            assert_eq!((got[1]["name"].clone(), got[1]["pages"].clone()), (json!("tower.txt"), json!("1")));
            assert_eq!(got[1]["size"], hits[0]["size"]);
            assert!(got[1].get("topic").is_none());
        }
        // A chunk of another collection, or none at all: 404 naming it.
        let (_, moon) = app.call(Method::POST, &format!("/api/v1/collections/{other}/chunks/search"), &alice,
            Some(body("moon", json!([]), 0, 1))).await;
        let moon = moon[0]["id"].as_i64().unwrap();
        for (list, missing) in [(format!("{tower},{moon}"), moon), (format!("{}", i64::MAX), i64::MAX)] {
            let (s, b) = get(&app, &alice, &format!("{chunks}/{list}")).await;
            assert_error(s, &b, 404);
            assert!(b["message"].as_str().unwrap().contains(&missing.to_string()), "{b}");
        }
        for list in ["x", "1,two", ",", "1.5"] {
            let (s, b) = get(&app, &alice, &format!("{chunks}/{list}")).await;
            assert_error(s, &b, 400);
        }
        let too_many = (1..=201).map(|i| i.to_string()).collect::<Vec<_>>().join(",");
        let (s, b) = get(&app, &alice, &format!("{chunks}/{too_many}")).await;
        assert_error(s, &b, 400);

        // Bob reads neither the chunks nor a search of Alice's private collection.
        let (s, b) = get(&app, &bob, &format!("{chunks}/{tower}")).await;
        assert_error(s, &b, 404);
        let (s, b) = app.call(Method::POST, &search, &bob, Some(body("tower", json!([]), 0, 5))).await;
        assert_error(s, &b, 404);
        let _ = tower_doc;
        app.stop().await;
    }
}

/// Migrations before the one storing settings and metadata: the outbox and eight more.
const BEFORE_SETTINGS: u32 = 9;

docchat_common::backend_tests! {
    /// The migration adds nullable columns: rows from before read as "never set", the
    /// columns then take JSON text, and it rolls back and forward again.
    async fn the_settings_migration_keeps_old_rows(backend) {
        let dir = tempfile::tempdir().unwrap();
        let db = docchat_common::db::connect(&backend.database_url(dir.path(), "ingest")).await.unwrap();
        Migrator::up(&db, Some(BEFORE_SETTINGS)).await.unwrap();
        let backend_kind = db.get_database_backend();
        let at = chrono::Utc::now();
        // Only the columns of before: the new ones are not there yet.
        let collection = collections::ActiveModel {
            id: Set("c1".into()),
            owner_id: Set("u1".into()),
            owner_username: Set("alice".into()),
            name: Set("kb".into()),
            description: Set(String::new()),
            embedding_model: Set("m".into()),
            is_public: Set(false),
            status: Set("active".into()),
            document_count: Set(1),
            document_size: Set(1),
            created_at: Set(at),
            updated_at: Set(at),
            description_auto_generated: Set(false),
            index_version: Set(0),
            ..Default::default()
        };
        collections::Entity::insert(collection).exec_without_returning(&db).await.unwrap();
        let document = documents::ActiveModel {
            id: Set("d1".into()),
            owner_id: Set("u1".into()),
            owner_username: Set("alice".into()),
            collection_id: Set("c1".into()),
            name: Set("a.txt".into()),
            kind: Set("txt".into()),
            size: Set(1),
            page_count: Set(1),
            status: Set("completed".into()),
            created_at: Set(at),
            updated_at: Set(at),
            ..Default::default()
        };
        documents::Entity::insert(document).exec_without_returning(&db).await.unwrap();
        Migrator::up(&db, None).await.unwrap();
        let c = collections::Entity::find_by_id("c1").one(&db).await.unwrap().unwrap();
        assert_eq!((c.collection_settings, c.chat_settings, c.metadata), (None, None, None), "{}", backend.name);
        let d = documents::Entity::find_by_id("d1").one(&db).await.unwrap().unwrap();
        assert_eq!((d.metadata, d.uri), (None, None));
        let update = match backend_kind {
            sea_orm::DbBackend::Postgres => "UPDATE collections SET collection_settings = $1, chat_settings = $1, metadata = $1 WHERE id = 'c1'",
            _ => "UPDATE collections SET collection_settings = ?1, chat_settings = ?1, metadata = ?1 WHERE id = 'c1'",
        };
        db.execute(Statement::from_sql_and_values(backend_kind, update, ["{\"k\":1}".into()])).await.unwrap();
        let c = collections::Entity::find_by_id("c1").one(&db).await.unwrap().unwrap();
        assert_eq!(c.metadata.as_deref(), Some("{\"k\":1}"));
        assert_eq!(c.name, "kb");

        // Down: the columns go, the rows stay; up again: they are back, empty.
        Migrator::down(&db, Some(1)).await.unwrap();
        let old = db
            .query_one(Statement::from_string(backend_kind, "SELECT name FROM collections WHERE id = 'c1'"))
            .await
            .unwrap()
            .unwrap();
        assert_eq!(old.try_get_by_index::<String>(0).unwrap(), "kb");
        assert!(db.query_one(Statement::from_string(backend_kind, "SELECT metadata FROM collections")).await.is_err());
        Migrator::up(&db, None).await.unwrap();
        let c = collections::Entity::find_by_id("c1").one(&db).await.unwrap().unwrap();
        assert_eq!(c.metadata, None);
        db.close().await.unwrap();
    }
}
