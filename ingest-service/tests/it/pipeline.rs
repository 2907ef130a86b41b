//! Uploads → ingestion jobs → documents, chunks and search, over real gRPC with
//! admin-service beside it (settings), on both backends. Needs the MiniLM model
//! (scripts/fetch-models.sh; scripts/test.sh runs it).

use std::time::Duration;

use docchat_common::config::Service;
use docchat_common::testing::{Backend, Spawned, bind, context, user};
use docchat_proto::ingest::v1 as pb;
pub use docchat_test_stack::Stack;
use tonic::Code;

/// admin-service and ingest-service on `backend` (short job leases), configured by `tweak`.
pub async fn stack(backend: &Backend, tweak: impl FnOnce(&mut docchat_common::Config)) -> Stack {
    Stack::builder(backend)
        .ingest()
        .configure(|c| {
            c.job_lease_seconds = 3;
            tweak(c);
        })
        .start()
        .await
}

/// Stored chunks, and pgvector rows when that table exists.
pub async fn stored_vectors(s: &Stack) -> (i64, Option<i64>) {
    use sea_orm::{ConnectionTrait, Statement};
    let db = s.database(Service::Ingest).await;
    let count = |table: &str| {
        let db = db.clone();
        let sql = format!("SELECT COUNT(*) FROM {table}");
        async move {
            let row = db
                .query_one(Statement::from_string(db.get_database_backend(), sql))
                .await
                .ok()??;
            row.try_get_by_index::<i64>(0).ok()
        }
    };
    let chunks = count("chunks").await.unwrap();
    let vectors = count("chunk_vectors").await;
    db.close().await.unwrap();
    (chunks, vectors)
}

/// Stored page texts (`document_pages` rows) of `document`.
async fn stored_pages(s: &Stack, document: &str) -> i64 {
    use sea_orm::{ConnectionTrait, Statement};
    let db = s.database(Service::Ingest).await;
    let row = db
        .query_one(Statement::from_sql_and_values(
            db.get_database_backend(),
            match db.get_database_backend() {
                sea_orm::DatabaseBackend::Postgres => {
                    "SELECT COUNT(*) FROM document_pages WHERE document_id = $1"
                }
                _ => "SELECT COUNT(*) FROM document_pages WHERE document_id = ?",
            },
            [document.into()],
        ))
        .await
        .unwrap()
        .unwrap();
    let n = row.try_get_by_index::<i64>(0).unwrap();
    db.close().await.unwrap();
    n
}

/// Whether the MiniLM embedder was fetched; its absence fails the test in CI and is a loud
/// skip elsewhere.
pub(crate) fn model_present() -> bool {
    docchat_common::testing::model_file(docchat_common::testing::MINILM_WEIGHTS).is_some()
}

const NOTES: &str = "# Geography\n\nParis is the capital of France. The Seine flows through the city.\n\n# Programming\n\nThe Rust borrow checker prevents data races at compile time.\n";
const COOKING: &str =
    "Knead the dough for ten minutes, then let it rise for an hour before baking the bread.";

docchat_common::vector_backend_tests! {
    async fn ingested_documents_are_searchable_and_deletable(backend) {
        if !model_present() {
            return;
        }
        let s = stack(&backend, |_| {}).await;
        let alice = user("alice", false);
        let col = s.collection(&alice, "kb").await;
        assert_eq!(col.embedding_model, "all-MiniLM-L6-v2");
        let mut jobs = Vec::new();
        for (name, text) in [("notes.md", NOTES), ("bread.txt", COOKING)] {
            let up = s.upload(&alice, name, text.as_bytes()).await.unwrap();
            assert_eq!(up.size as usize, text.len());
            jobs.push(s.ingest(&alice, &up.id, &col.id).await.unwrap());
        }
        for job in &jobs {
            assert_eq!(job.status, "queued");
            let done = s.finished(&alice, &job.id).await;
            assert_eq!(
                done.status, "completed",
                "{}: {:?}",
                backend.name, done.errors
            );
            assert_eq!(done.progress, 1.0);
            assert!(done.document_id.is_some());
        }
        let got = s
            .ingest_client()
            .get_collection(s.req(Service::Ingest, &alice, pb::CollectionRef { id: col.id.clone() }))
            .await
            .unwrap()
            .into_inner();
        assert_eq!(got.document_count, 2, "{}", backend.name);
        assert_eq!(got.document_size, (NOTES.len() + COOKING.len()) as i64);
        assert!(
            got.description_dirty_at.is_some(),
            "document changes mark the description stale"
        );

        let docs = s
            .ingest_client()
            .list_documents(s.req(Service::Ingest, &alice,
                pb::ListDocumentsRequest {
                    sort_column: "name".into(),
                    ascending: true,
                    ..Default::default()
                },
            ))
            .await
            .unwrap()
            .into_inner();
        let names: Vec<&str> = docs.documents.iter().map(|d| d.name.as_str()).collect();
        assert_eq!(names, ["bread.txt", "notes.md"]);
        assert_eq!(docs.documents[1].r#type, "markdown");
        assert_eq!(docs.documents[1].status, "completed");
        assert!(docs.documents[1].page_count >= 1);

        // Hybrid search finds the right document and page.
        let hits = s
            .search(&alice, &col.id, "What is the capital of France?", 3)
            .await
            .unwrap();
        assert_eq!(
            hits[0].document_name, "notes.md",
            "{}: {hits:?}",
            backend.name
        );
        assert!(hits[0].text.contains("Paris"));
        assert_eq!(hits[0].pages, [1]);
        let bread = s
            .search(&alice, &col.id, "how long should dough rise", 1)
            .await
            .unwrap();
        assert_eq!(bread[0].document_name, "bread.txt");

        let (chunk_rows, vector_rows) = stored_vectors(&s).await;
        assert!(chunk_rows > 0);
        if backend.name.starts_with("pgvector") {
            assert_eq!(
                vector_rows,
                Some(chunk_rows),
                "every chunk has its pgvector row"
            );
        }

        // Others cannot search, read or delete it.
        let bob = user("bob", false);
        let denied = s.search(&bob, &col.id, "Paris", 3).await.unwrap_err();
        assert_eq!(denied.code(), Code::NotFound);
        let doc_id = docs.documents[1].id.clone();
        for status in [
            s.ingest_client()
                .get_document(s.req(Service::Ingest, &bob, pb::DocumentRef { id: doc_id.clone() }))
                .await
                .unwrap_err(),
            s.ingest_client()
                .delete_document(s.req(Service::Ingest, &bob, pb::DocumentRef { id: doc_id.clone() }))
                .await
                .unwrap_err(),
        ] {
            assert_eq!(status.code(), Code::NotFound);
        }

        // Its text reads back by page, in slices that continue where they stopped; only
        // for whom may read it.
        let text = |who, from_page, from_char, max_chars| {
            let mut c = s.ingest_client();
            let r = s.req(Service::Ingest, who, pb::DocumentTextRequest {
                id: doc_id.clone(),
                pages: Vec::new(),
                from_page,
                from_char,
                max_chars,
            });
            async move { c.read_document_text(r).await }
        };
        let whole = text(&alice, 0, 0, 0).await.unwrap().into_inner();
        let whole: String = whole.pages.iter().map(|p| p.text.as_str()).collect();
        assert!(whole.contains("Paris is the capital of France"), "{whole}");
        let mut pieces = String::new();
        let (mut page, mut char) = (0, 0);
        loop {
            let slice = text(&alice, page, char, 100).await.unwrap().into_inner();
            assert!(slice.pages.iter().map(|p| p.text.chars().count()).sum::<usize>() <= 100);
            pieces.extend(slice.pages.iter().map(|p| p.text.as_str()));
            match slice.next_page {
                Some(next) => (page, char) = (next, slice.next_char),
                None => break,
            }
        }
        assert_eq!(pieces, whole, "{}", backend.name);
        assert_eq!(text(&bob, 0, 0, 0).await.unwrap_err().code(), Code::NotFound);
        assert!(stored_pages(&s, &doc_id).await > 0);

        // Deleting a document removes its chunks from both search paths, and its text.
        s.ingest_client()
            .delete_document(s.req(Service::Ingest, &alice, pb::DocumentRef { id: doc_id.clone() }))
            .await
            .unwrap();
        let after = s
            .search(&alice, &col.id, "Paris capital France", 5)
            .await
            .unwrap();
        assert!(
            after.iter().all(|h| h.document_id != doc_id),
            "{}",
            backend.name
        );
        let (chunk_rows_after, vector_rows_after) = stored_vectors(&s).await;
        assert!(chunk_rows_after < chunk_rows);
        if backend.name.starts_with("pgvector") {
            assert_eq!(
                vector_rows_after,
                Some(chunk_rows_after),
                "vectors go with chunks"
            );
        }
        let got = s
            .ingest_client()
            .get_collection(s.req(Service::Ingest, &alice, pb::CollectionRef { id: col.id.clone() }))
            .await
            .unwrap()
            .into_inner();
        assert_eq!(
            (got.document_count, got.document_size),
            (1, COOKING.len() as i64)
        );
        assert_eq!(stored_pages(&s, &doc_id).await, 0, "{}", backend.name);
        // A deleted collection takes its documents' texts with it.
        let bread_id = docs.documents[0].id.clone();
        assert!(stored_pages(&s, &bread_id).await > 0);
        s.ingest_client()
            .delete_collection(s.req(Service::Ingest, &alice, pb::CollectionRef { id: col.id.clone() }))
            .await
            .unwrap();
        assert_eq!(stored_pages(&s, &bread_id).await, 0, "{}", backend.name);
        s.stop().await;
    }
}

docchat_common::vector_backend_tests! {
    async fn bad_files_fail_their_job_and_store_nothing(backend) {
        let s = stack(&backend, |_| {}).await;
        let alice = user("alice", false);
        let col = s.collection(&alice, "kb").await;
        for (name, bytes, expect) in [
            (
                "broken.pdf",
                b"%PDF-1.7 this is not really a pdf".to_vec(),
                "corrupt",
            ),
            ("song.mp3", vec![0xff, 0xfb, 0x90, 0x00], "transcription"),
            ("program.exe", vec![0x4d, 0x5a, 0x90, 0x00], "unsupported"),
            ("empty.txt", Vec::new(), ""),
        ] {
            let up = s.upload(&alice, name, &bytes).await.unwrap();
            let job = s.ingest(&alice, &up.id, &col.id).await.unwrap();
            let done = s.finished(&alice, &job.id).await;
            assert_eq!(done.status, "failed", "{}: {name}", backend.name);
            assert_eq!(done.errors.len(), 1);
            let error = done.errors[0].to_lowercase();
            assert!(error.contains(expect), "{name}: {error}");
            assert!(done.errors[0].len() <= 300 && !done.errors[0].contains('\n'));
        }
        let got = s
            .ingest_client()
            .get_collection(s.req(Service::Ingest, &alice, pb::CollectionRef { id: col.id.clone() }))
            .await
            .unwrap()
            .into_inner();
        assert_eq!(
            got.document_count, 0,
            "{}: nothing half-written",
            backend.name
        );
        let n = s
            .ingest_client()
            .count_documents(s.req(Service::Ingest, &alice, Default::default()))
            .await
            .unwrap()
            .into_inner()
            .count;
        assert_eq!(n, 0);
        s.stop().await;
    }
}

docchat_common::vector_backend_tests! {
    async fn uploads_and_collections_of_others_are_404_and_limits_refuse(backend) {
        let backend = &backend;
        let s = stack(backend, |c| c.max_body_bytes = 10_000).await;
        let (alice, bob) = (user("alice", false), user("bob", false));
        let col = s.collection(&alice, "kb").await;
        let up = s.upload(&alice, "a.txt", b"hello world").await.unwrap();
        assert_eq!(
            s.ingest(&bob, &up.id, &col.id).await.unwrap_err().code(),
            Code::NotFound,
            "bob cannot use alice's upload"
        );
        let bob_up = s.upload(&bob, "b.txt", b"hello bob").await.unwrap();
        assert_eq!(
            s.ingest(&bob, &bob_up.id, &col.id)
                .await
                .unwrap_err()
                .code(),
            Code::NotFound,
            "nor her collection"
        );
        assert_eq!(
            s.ingest(&alice, &up.id, "").await.unwrap_err().code(),
            Code::InvalidArgument
        );

        // Too large: 413 through the error detail, and nothing kept.
        let blobs = docchat_ingest_service::blobs::BlobStore::open(&s.config).await.unwrap();
        let stored = blobs.ids().await.unwrap().len();
        let big = s
            .upload(&alice, "big.txt", &vec![b'a'; 20_000])
            .await
            .unwrap_err();
        assert_eq!(
            docchat_common::ApiError::from_status(&big)
                .code
                .http_status(),
            413
        );
        assert_eq!(blobs.ids().await.unwrap().len(), stored, "{}: no blob kept", backend.name);
        if backend.s3.is_none() {
            let tmp: Vec<_> = std::fs::read_dir(s.config.data_dir.join("blobs/tmp"))
                .unwrap()
                .collect();
            assert!(tmp.is_empty(), "the partial file is removed");
        }
        s.stop().await;
    }
}

docchat_common::vector_backend_tests! {
    async fn a_job_whose_worker_died_completes_once_without_duplicate_chunks(backend) {
        if !model_present() {
            return;
        }
        // No workers at first: the job stays queued while we play the dying worker.
        let mut s = stack(&backend, |c| c.ingest_workers = 0).await;
        let alice = user("alice", false);
        let col = s.collection(&alice, "kb").await;
        let up = s
            .upload(&alice, "notes.md", NOTES.as_bytes())
            .await
            .unwrap();
        let job = s.ingest(&alice, &up.id, &col.id).await.unwrap();
        let db = s.database(Service::Ingest).await;
        let row = docchat_ingest_service::entities::jobs::Entity::find_by_id(job.id.clone());
        use sea_orm::EntityTrait;
        let model = row.one(&db).await.unwrap().unwrap();
        // A worker claims it with a short lease, and dies.
        assert!(
            docchat_ingest_service::jobs::try_claim(
                &db,
                &model,
                None,
                chrono::Duration::seconds(1)
            )
            .await
            .unwrap()
        );
        s.ingest.take().unwrap().stop().await.unwrap();

        // A new replica with workers picks the job up once the lease has lapsed.
        s.ingest = Some(s.replica(Service::Ingest, |c| c.ingest_workers = 2).await);
        let done = s.finished(&alice, &job.id).await;
        assert_eq!(
            done.status, "completed",
            "{}: {:?}",
            backend.name, done.errors
        );
        let chunks = docchat_ingest_service::entities::chunks::Entity::find()
            .all(&db)
            .await
            .unwrap();
        let mut indexes: Vec<i32> = chunks.iter().map(|c| c.chunk_index).collect();
        indexes.sort_unstable();
        let expected: Vec<i32> = (0..indexes.len() as i32).collect();
        assert!(!indexes.is_empty());
        assert_eq!(indexes, expected, "each chunk exactly once: no duplicates");
        let docs = docchat_ingest_service::entities::documents::Entity::find()
            .all(&db)
            .await
            .unwrap();
        assert_eq!(docs.len(), 1, "{}: exactly one document", backend.name);
        s.stop().await;
    }
}

docchat_common::vector_backend_tests! {
    async fn audio_is_transcribed_through_the_configured_upstream(backend) {
        use docchat_common::testing::ScriptedHttp;
        if !model_present() {
            return;
        }
        let upstream = ScriptedHttp::start(std::sync::Arc::new(|req: &docchat_common::testing::SeenRequest| {
            assert_eq!(req.path, "/v1/audio/transcriptions");
            let body = String::from_utf8_lossy(&req.body);
            assert!(body.contains("verbose_json") && body.contains("whisper-1") && body.contains("standup.mp3"));
            let answer = serde_json::json!({
                "text": "Good morning. The build is green.",
                "segments": [
                    {"start": 0.0, "end": 1.5, "text": " Good morning.", "speaker": "SPEAKER_00"},
                    {"start": 1.5, "end": 3.25, "text": " The build is green.", "speaker": "SPEAKER_01"}
                ]
            });
            (200, "application/json".to_owned(), answer.to_string().into_bytes())
        }))
        .await;
        let backend = &backend;
        let models = tempfile::tempdir().unwrap();
        let file = models.path().join("models.toml");
        std::fs::write(
            &file,
            format!(
                "[[models]]\nname = \"whisper\"\nkind = \"transcription\"\nbase_url = \"{}/v1\"\nupstream_model = \"whisper-1\"\n",
                upstream.base_url
            ),
        )
        .unwrap();
        let s = stack(backend, |c| c.models_file = Some(file.clone())).await;
        let alice = user("alice", false);
        let col = s.collection(&alice, "meetings").await;
        let up = s
            .upload(&alice, "standup.mp3", &[0xff, 0xfb, 0x90, 0x00, 1, 2, 3])
            .await
            .unwrap();
        let job = s.ingest(&alice, &up.id, &col.id).await.unwrap();
        let done = s.finished(&alice, &job.id).await;
        assert_eq!(done.status, "completed", "{:?}", done.errors);
        let doc = done.document_id.unwrap();
        let segments = s
            .ingest_client()
            .get_audio_timestamps(s.req(Service::Ingest, &alice, pb::DocumentRef { id: doc }))
            .await
            .unwrap()
            .into_inner()
            .segments;
        assert_eq!(segments.len(), 2);
        assert_eq!((segments[1].start, segments[1].end), (1.5, Some(3.25)));
        assert_eq!(segments[1].text, "The build is green.");
        assert_eq!(segments[1].speaker, "Speaker 1");
        assert_eq!(segments[1].original_speaker.as_deref(), Some("SPEAKER_01"));
        assert_eq!(upstream.seen().len(), 1);
        s.stop().await;
    }
}

docchat_common::vector_backend_tests! {
    async fn collection_descriptions_are_generated_until_a_user_writes_one(backend) {
        use docchat_common::testing::ScriptedHttp;
        if !model_present() {
            return;
        }
        let calls = std::sync::Arc::new(std::sync::atomic::AtomicUsize::new(0));
        let counter = calls.clone();
        let upstream = ScriptedHttp::start(std::sync::Arc::new(move |req: &docchat_common::testing::SeenRequest| {
            let n = counter.fetch_add(1, std::sync::atomic::Ordering::SeqCst) + 1;
            let body: serde_json::Value = serde_json::from_slice(&req.body).unwrap_or_default();
            assert_eq!(req.path, "/v1/chat/completions");
            assert_eq!(body["model"], "tiny-upstream");
            let prompt = body["messages"][1]["content"].as_str().unwrap_or("");
            assert!(prompt.contains("Document: notes.md"), "{prompt}");
            let answer = serde_json::json!({
                "choices": [{"index": 0, "message": {"role": "assistant", "content": format!("Notes on geography and Rust (v{n}).")}, "finish_reason": "stop"}],
                "usage": {"prompt_tokens": 50, "completion_tokens": 9, "total_tokens": 59}
            });
            (200, "application/json".to_owned(), answer.to_string().into_bytes())
        }))
        .await;
        let models = tempfile::tempdir().unwrap();
        let file = models.path().join("models.toml");
        std::fs::write(
            &file,
            format!("[[models]]\nname = \"tiny\"\nbase_url = \"{}/v1\"\nupstream_model = \"tiny-upstream\"\ndefault = true\n", upstream.base_url),
        )
        .unwrap();
        calls.store(0, std::sync::atomic::Ordering::SeqCst);
        let s = stack(&backend, |c| {
            c.models_file = Some(file.clone());
            c.description_interval_seconds = 1;
        })
        .await;
        let alice = user("alice", false);
        let col = s.collection(&alice, "kb").await;
        let get = || async {
            s.ingest_client()
                .get_collection(s.req(Service::Ingest, &alice, pb::CollectionRef { id: col.id.clone() }))
                .await
                .unwrap()
                .into_inner()
        };
        let up = s
            .upload(&alice, "notes.md", NOTES.as_bytes())
            .await
            .unwrap();
        let job = s.ingest(&alice, &up.id, &col.id).await.unwrap();
        assert_eq!(s.finished(&alice, &job.id).await.status, "completed");

        let deadline = tokio::time::Instant::now() + Duration::from_secs(30);
        let first = loop {
            let c = get().await;
            if c.description_generated_at.is_some() {
                break c;
            }
            assert!(
                tokio::time::Instant::now() < deadline,
                "{}: no description generated",
                backend.name
            );
            tokio::time::sleep(Duration::from_millis(100)).await;
        };
        assert_eq!(first.description, "Notes on geography and Rust (v1).");
        assert!(first.description_auto_generated);
        assert!(
            first.description_dirty_at.is_none(),
            "current after generation"
        );
        assert!(
            first.description_generation_started_at.is_none(),
            "cleared when done"
        );

        // A document change marks it stale; it is written again.
        let up = s
            .upload(&alice, "more.txt", b"Paris also has the Louvre museum.")
            .await
            .unwrap();
        let job = s.ingest(&alice, &up.id, &col.id).await.unwrap();
        assert_eq!(s.finished(&alice, &job.id).await.status, "completed");
        let deadline = tokio::time::Instant::now() + Duration::from_secs(30);
        loop {
            let c = get().await;
            if c.description.ends_with("(v2).") && c.description_dirty_at.is_none() {
                break;
            }
            assert!(
                tokio::time::Instant::now() < deadline,
                "{}: not regenerated: {c:?}",
                backend.name
            );
            tokio::time::sleep(Duration::from_millis(100)).await;
        }

        // A user's description ends automatic generation.
        let c = s
            .ingest_client()
            .update_collection(s.req(Service::Ingest, &alice,
                pb::UpdateCollectionRequest {
                    id: col.id.clone(),
                    name: None,
                    description: Some("My own words.".into()),
                },
            ))
            .await
            .unwrap()
            .into_inner();
        assert!(!c.description_auto_generated);
        let before = calls.load(std::sync::atomic::Ordering::SeqCst);
        let up = s
            .upload(&alice, "late.txt", b"Another note about rivers.")
            .await
            .unwrap();
        let job = s.ingest(&alice, &up.id, &col.id).await.unwrap();
        assert_eq!(s.finished(&alice, &job.id).await.status, "completed");
        tokio::time::sleep(Duration::from_millis(2500)).await;
        let c = get().await;
        assert_eq!(c.description, "My own words.", "{}", backend.name);
        assert!(!c.description_auto_generated);
        assert!(
            c.description_dirty_at.is_some(),
            "document changes still mark it stale"
        );
        assert_eq!(
            calls.load(std::sync::atomic::Ordering::SeqCst),
            before,
            "no more generation"
        );
        s.stop().await;
    }
}

docchat_common::vector_backend_tests! {
    async fn summaries_and_questions_come_from_the_chat_model_when_asked(backend) {
        use docchat_common::testing::ScriptedHttp;
        if !model_present() {
            return;
        }
        let upstream = ScriptedHttp::start(std::sync::Arc::new(|req: &docchat_common::testing::SeenRequest| {
            let body: serde_json::Value = serde_json::from_slice(&req.body).unwrap_or_default();
            let system = body["messages"][0]["content"].as_str().unwrap_or("").to_owned();
            let text = if system.contains("Summarize") {
                "Paris is France's capital; Rust prevents data races.".to_owned()
            } else if system.contains("questions") {
                "1. What is the capital of France?\n2. What does the borrow checker prevent?\n3. Which river flows through Paris?".to_owned()
            } else {
                "A collection about geography and Rust.".to_owned()
            };
            let answer = serde_json::json!({"choices": [{"index": 0, "message": {"role": "assistant", "content": text}, "finish_reason": "stop"}]});
            (200, "application/json".to_owned(), answer.to_string().into_bytes())
        }))
        .await;
        let models = tempfile::tempdir().unwrap();
        let file = models.path().join("models.toml");
        std::fs::write(
            &file,
            format!(
                "[[models]]\nname = \"tiny\"\nbase_url = \"{}/v1\"\n",
                upstream.base_url
            ),
        )
        .unwrap();
        let backend = &backend;
        let s = stack(backend, |c| c.models_file = Some(file.clone())).await;
        let alice = user("alice", false);
        let col = s.collection(&alice, "kb").await;
        let up = s
            .upload(&alice, "notes.md", NOTES.as_bytes())
            .await
            .unwrap();
        let job = s
            .ingest_client()
            .ingest_upload(s.req(Service::Ingest, &alice,
                pb::IngestUploadRequest {
                    upload_id: up.id.clone(),
                    collection_id: col.id.clone(),
                    gen_doc_summaries: Some(true),
                    gen_doc_questions: Some(true),
                    ..Default::default()
                },
            ))
            .await
            .unwrap()
            .into_inner();
        let done = s.finished(&alice, &job.id).await;
        assert_eq!(done.status, "completed", "{:?}", done.errors);
        assert!(done.errors.is_empty(), "{:?}", done.errors);
        let doc = s
            .ingest_client()
            .get_document(s.req(Service::Ingest, &alice,
                pb::DocumentRef {
                    id: done.document_id.clone().unwrap(),
                },
            ))
            .await
            .unwrap()
            .into_inner();
        assert_eq!(
            doc.summary.as_deref(),
            Some("Paris is France's capital; Rust prevents data races.")
        );
        let db = s.database(Service::Ingest).await;
        use sea_orm::EntityTrait;
        let row = docchat_ingest_service::entities::documents::Entity::find_by_id(doc.id.clone())
            .one(&db)
            .await
            .unwrap()
            .unwrap();
        let questions: Vec<String> = serde_json::from_str(row.questions.as_deref().unwrap()).unwrap();
        assert_eq!(questions[0], "What is the capital of France?");
        assert_eq!(questions.len(), 3);
        s.stop().await;

        // Without a chat model the document is still ingested; the job says what is missing.
        let s = stack(backend, |_| {}).await;
        let col = s.collection(&alice, "kb").await;
        let up = s
            .upload(&alice, "notes.md", NOTES.as_bytes())
            .await
            .unwrap();
        let job = s
            .ingest_client()
            .ingest_upload(s.req(Service::Ingest, &alice,
                pb::IngestUploadRequest {
                    upload_id: up.id,
                    collection_id: col.id,
                    gen_doc_summaries: Some(true),
                    gen_doc_questions: Some(false),
                    ..Default::default()
                },
            ))
            .await
            .unwrap()
            .into_inner();
        let done = s.finished(&alice, &job.id).await;
        assert_eq!(done.status, "completed");
        assert!(done.errors[0].contains("chat model"), "{:?}", done.errors);
        s.stop().await;
    }
}

docchat_common::vector_backend_tests! {
    async fn claims_respect_the_per_user_cap_and_heavy_users_queue_last(backend) {
        use docchat_ingest_service::jobs::{self, Fairness, IngestParams};
        use sea_orm::EntityTrait;
        let s = stack(&backend, |c| c.ingest_workers = 0).await;
        let db = s.database(Service::Ingest).await;
        let (alice, bob) = (user("alice", false), user("bob", false));
        let col = s.collection(&alice, "kb").await;
        let fairness = Fairness {
            enabled: true,
            fresh_window_minutes: 60,
            heavy_user_jobs_threshold: 2,
        };
        let mut queues = Vec::new();
        for _ in 0..3 {
            let queue = jobs::queue_for(&db, &alice.user_id, fairness)
                .await
                .unwrap();
            queues.push(queue);
            jobs::enqueue(
                &db,
                &alice,
                queue,
                &col.id,
                "kb",
                "u",
                &IngestParams::default(),
            )
            .await
            .unwrap();
        }
        assert_eq!(
            queues,
            ["standard", "standard", "deprioritized"],
            "{}",
            backend.name
        );
        jobs::enqueue(
            &db,
            &bob,
            "standard",
            &col.id,
            "kb",
            "u",
            &IngestParams::default(),
        )
        .await
        .unwrap();

        // Standard before deprioritized, oldest first: alice, alice, bob, then alice's third.
        let order: Vec<String> = jobs::candidates(&db, 10)
            .await
            .unwrap()
            .into_iter()
            .map(|j| format!("{}:{}", j.owner_id, j.queue))
            .collect();
        assert_eq!(
            order,
            [
                "alice:standard",
                "alice:standard",
                "bob:standard",
                "alice:deprioritized"
            ]
        );

        // A cap of 1: alice's second job waits while her first runs; bob's does not.
        let cands = jobs::candidates(&db, 10).await.unwrap();
        let lease = chrono::Duration::seconds(60);
        assert!(
            jobs::try_claim(&db, &cands[0], Some(1), lease)
                .await
                .unwrap()
        );
        assert!(
            !jobs::try_claim(&db, &cands[1], Some(1), lease)
                .await
                .unwrap(),
            "{}: cap holds",
            backend.name
        );
        assert!(
            jobs::try_claim(&db, &cands[2], Some(1), lease)
                .await
                .unwrap()
        );
        assert!(
            jobs::try_claim(&db, &cands[1], None, lease).await.unwrap(),
            "unlimited"
        );
        assert!(
            !jobs::try_claim(&db, &cands[1], None, lease).await.unwrap(),
            "a job is claimed once"
        );
        let running = docchat_ingest_service::entities::jobs::Entity::find()
            .all(&db)
            .await
            .unwrap()
            .into_iter()
            .filter(|j| j.status == "running")
            .count();
        assert_eq!(running, 3);
        s.stop().await;
    }
}

docchat_common::vector_backend_tests! {
    async fn group_by_source_chat_keeps_groups_together_and_sourceless_documents_last(backend) {
        use docchat_ingest_service::documents::{self, ListFilter, Order};
        use docchat_ingest_service::entities::documents as rows;
        use sea_orm::{ActiveModelTrait, Set};
        let (_dir, db) = crate::migrated(&backend).await;
        let alice = user("alice", false);
        let (s1, s2) = (
            "11111111-1111-4111-8111-111111111111",
            "22222222-2222-4222-8222-222222222222",
        );
        // name, source chat
        for (name, chat) in [
            ("e", None),
            ("d", Some(s2)),
            ("c", Some(s1)),
            ("b", None),
            ("a", Some(s2)),
            ("f", Some(s1)),
        ] {
            let at = docchat_common::time::now();
            rows::ActiveModel {
                id: Set(docchat_common::ids::new_id()),
                owner_id: Set(alice.user_id.clone()),
                owner_username: Set("alice".into()),
                collection_id: Set("c1".into()),
                name: Set(name.into()),
                kind: Set("text".into()),
                size: Set(1),
                page_count: Set(1),
                status: Set("completed".into()),
                upload_id: Set(None),
                chat_session_id: Set(chat.map(str::to_owned)),
                summary: Set(None),
                questions: Set(None),
                segments: Set(None),
                page_sources: Set(None),
                message: Set(None),
                metadata: Set(None),
                uri: Set(None),
                created_at: Set(at),
                updated_at: Set(at),
            }
            .insert(&db)
            .await
            .unwrap();
        }
        let order = Order {
            sort_column: "name".into(),
            ascending: true,
            group_by_source_chat: true,
            ..Order::default()
        };
        let listed = documents::list(&db, &alice, &ListFilter::default(), &order)
            .await
            .unwrap();
        let names: Vec<&str> = listed.iter().map(|d| d.name.as_str()).collect();
        assert_eq!(
            names,
            ["c", "f", "a", "d", "b", "e"],
            "{}: groups by source chat, sourceless last, name within",
            backend.name
        );
        // A page holds whole groups in that order.
        let page = Order {
            limit: 2,
            ..order.clone()
        };
        let first: Vec<String> = documents::list(&db, &alice, &ListFilter::default(), &page)
            .await
            .unwrap()
            .into_iter()
            .map(|d| d.name)
            .collect();
        assert_eq!(first, ["c", "f"]);
        // Without grouping: plain name order.
        let plain = Order {
            group_by_source_chat: false,
            ..order
        };
        let names: Vec<String> = documents::list(&db, &alice, &ListFilter::default(), &plain)
            .await
            .unwrap()
            .into_iter()
            .map(|d| d.name)
            .collect();
        assert_eq!(names, ["a", "b", "c", "d", "e", "f"]);
        // The chat_session_id filter.
        let only = ListFilter {
            chat_session_id: Some(s2.into()),
            collection_id: None,
        };
        assert_eq!(documents::count(&db, &alice, &only).await.unwrap(), 2);
    }
}

docchat_common::backend_tests! {
    /// Asking for pgvector where there is none (SQLite; PostgreSQL without the extension)
    /// refuses to start, clearly.
    async fn pgvector_where_there_is_none_refuses_to_start(backend) {
        let dir = tempfile::tempdir().unwrap();
        let mut config = backend.config(dir.path());
        config.vector_backend = "pgvector".into();
        let (listener, url) = bind().await;
        let refused = Spawned::start(
            context(config),
            listener,
            url,
            docchat_ingest_service::serve,
        )
        .await;
        let message = format!(
            "{:#}",
            refused.err().expect("pgvector without the extension must refuse")
        );
        assert!(message.contains("vector extension"), "{message}");
    }
}

/// pgvector alone (what it takes over exists only there): vectors written while they lived
/// in memory move into pgvector, and its searches honour document filters.
#[tokio::test]
async fn pgvector_takes_over_earlier_vectors_and_honours_document_filters() {
    if !model_present() {
        return;
    }
    // Without the pgvector server this fails in CI and is a loud skip elsewhere.
    let Some(backend) = Backend::pgvector() else {
        return;
    };
    // Written while vectors lived in memory only...
    let mut s = stack(&backend, |c| c.vector_backend = "memory".into()).await;
    let alice = user("alice", false);
    let col = s.collection(&alice, "kb").await;
    let mut docs = Vec::new();
    for (name, text) in [("notes.md", NOTES), ("bread.txt", COOKING)] {
        let up = s.upload(&alice, name, text.as_bytes()).await.unwrap();
        let job = s.ingest(&alice, &up.id, &col.id).await.unwrap();
        let done = s.finished(&alice, &job.id).await;
        assert_eq!(done.status, "completed", "{:?}", done.errors);
        docs.push(done.document_id.unwrap());
    }
    assert_eq!(
        stored_vectors(&s).await.1,
        None,
        "memory mode makes no pgvector table"
    );
    s.ingest.take().unwrap().stop().await.unwrap();

    // ...are copied into pgvector when a replica starts with it.
    s.ingest = Some(
        s.replica(Service::Ingest, |c| c.vector_backend = "pgvector".into())
            .await,
    );
    let (chunk_rows, vector_rows) = stored_vectors(&s).await;
    assert_eq!(vector_rows, Some(chunk_rows));

    let hits = s
        .search(&alice, &col.id, "What is the capital of France?", 3)
        .await
        .unwrap();
    assert_eq!(hits[0].document_name, "notes.md", "{hits:?}");
    // No word in common with either document, so lexical search finds nothing: only the
    // pgvector side can answer this.
    let semantic = s
        .search(
            &alice,
            &col.id,
            "Which metropolis governs that European nation?",
            3,
        )
        .await
        .unwrap();
    assert_eq!(semantic[0].document_name, "notes.md", "{semantic:?}");
    // A document filter keeps to that document even when another matches better.
    let only_bread = s
        .ingest_client()
        .search(s.req(
            Service::Ingest,
            &alice,
            pb::SearchRequest {
                collection_ids: vec![col.id.clone()],
                document_ids: vec![docs[1].clone()],
                query: "What is the capital of France?".into(),
                top_k: 3,
                no_rerank: false,
            },
        ))
        .await
        .unwrap()
        .into_inner()
        .hits;
    assert!(!only_bread.is_empty());
    assert!(
        only_bread.iter().all(|h| h.document_id == docs[1]),
        "{only_bread:?}"
    );
    s.stop().await;
}

/// A PDF of one line of text per page, written by hand (Helvetica, no compression).
fn pdf_of_lines(pages: &[&str]) -> Vec<u8> {
    let mut objects: Vec<String> = vec![
        "<< /Type /Catalog /Pages 2 0 R >>".into(),
        String::new(), // the page tree, once the pages are numbered
        "<< /Type /Font /Subtype /Type1 /BaseFont /Helvetica >>".into(),
    ];
    let mut kids = Vec::new();
    for line in pages {
        let content = format!("BT /F1 12 Tf 72 750 Td ({line}) Tj ET");
        objects.push(format!(
            "<< /Type /Page /Parent 2 0 R /Resources << /Font << /F1 3 0 R >> >> /Contents {} 0 R >>",
            objects.len() + 2
        ));
        kids.push(format!("{} 0 R", objects.len()));
        objects.push(format!(
            "<< /Length {} >>\nstream\n{content}\nendstream",
            content.len()
        ));
    }
    objects[1] = format!(
        "<< /Type /Pages /Kids [{}] /Count {} >>",
        kids.join(" "),
        pages.len()
    );
    let mut out = String::from("%PDF-1.4\n");
    let mut offsets = Vec::new();
    for (i, body) in objects.iter().enumerate() {
        offsets.push(out.len());
        out.push_str(&format!("{} 0 obj\n{body}\nendobj\n", i + 1));
    }
    let xref = out.len();
    out.push_str(&format!(
        "xref\n0 {}\n0000000000 65535 f \n",
        objects.len() + 1
    ));
    for at in offsets {
        out.push_str(&format!("{at:010} 00000 n \n"));
    }
    out.push_str(&format!(
        "trailer\n<< /Size {} /Root 1 0 R >>\nstartxref\n{xref}\n%%EOF\n",
        objects.len() + 1
    ));
    out.into_bytes()
}

docchat_common::vector_backend_tests! {
    async fn a_hit_cites_the_page_its_matching_part_lies_on(backend) {
        if !model_present() {
            return;
        }
        let s = stack(&backend, |_| {}).await;
        let alice = user("alice", false);
        let col = s.collection(&alice, "manual").await;
        // page 1 is too short for a chunk of its own: one chunk spans both pages
        let pdf = pdf_of_lines(&[
            "Boilers must be drained before the first frost of winter.",
            "Configuring the network interface needs root privileges on the host machine, and the interface restarts afterwards.",
        ]);
        let up = s.upload(&alice, "manual.pdf", &pdf).await.unwrap();
        let job = s.ingest(&alice, &up.id, &col.id).await.unwrap();
        let done = s.finished(&alice, &job.id).await;
        assert_eq!(done.status, "completed", "{}: {:?}", backend.name, done.errors);

        let cited = |query: &'static str| {
            let s = &s;
            let alice = &alice;
            let col = &col.id;
            async move {
                let hits = s.search(alice, col, query, 1).await.unwrap();
                assert_eq!(hits.len(), 1, "{query}: {hits:?}");
                hits[0].pages.clone()
            }
        };
        assert_eq!(cited("How do I configure a network interface?").await, [2], "{}", backend.name);
        assert_eq!(cited("When should the boilers be drained?").await, [1], "{}", backend.name);
        // no word in common: the page holding most of the text first, then the other
        assert_eq!(cited("zebra").await, [2, 1], "{}", backend.name);
    }
}
