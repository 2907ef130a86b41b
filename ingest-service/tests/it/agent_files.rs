//! Agent files as documents, over real gRPC with admin-service beside ingest-service (the
//! limit), on both backends: PutAgentFile (new, replaced in place, refused), ReadDocumentBytes
//! (who may read, pieces of 64 KiB) and DeleteSessionDocuments (that session's, the caller's,
//! bytes and events).

use std::sync::{Arc, Mutex};

use docchat_common::bus::{EventHandler, Subscription, topics};
use docchat_common::config::Service;
use docchat_common::testing::{unique, user};
use docchat_common::{ApiError, Caller};
use docchat_ingest_service::blobs::BlobStore;
use docchat_proto::events::v1::{DocumentChanged, Envelope};
use docchat_proto::ingest::v1 as pb;
use prost::Message;
use sea_orm::{ConnectionTrait, Statement};
use tokio_util::sync::CancellationToken;
use tokio_util::task::TaskTracker;
use tonic::{Code, Status};

use crate::costs::Admin;
use crate::pipeline::{Stack, model_present, stack};

/// The HTTP status the gateway would answer for a refusal.
fn http(status: &Status) -> u16 {
    ApiError::from_status(status).code.http_status()
}

fn new_session() -> String {
    docchat_common::ids::new_id()
}

/// The stack's blob store (a directory, or the backend's S3 bucket).
async fn blob_store(s: &Stack) -> BlobStore {
    BlobStore::open(&s.config).await.unwrap()
}

/// Blobs in the store (written ones, not those being written).
async fn blob_files(s: &Stack) -> usize {
    blob_store(s).await.ids().await.unwrap().len()
}

async fn documents_of(s: &Stack, who: &Caller, session: Option<&str>) -> Vec<pb::Document> {
    let request = pb::ListDocumentsRequest {
        chat_session_id: session.map(str::to_owned),
        sort_column: "name".into(),
        ascending: true,
        ..Default::default()
    };
    s.ingest_client()
        .list_documents(s.req(Service::Ingest, who, request))
        .await
        .unwrap()
        .into_inner()
        .documents
}

async fn delete_session(s: &Stack, who: &Caller, session: &str) -> Result<i64, Status> {
    let request = pb::SessionDocumentsRef {
        chat_session_id: session.into(),
    };
    s.ingest_client()
        .delete_session_documents(s.req(Service::Ingest, who, request))
        .await
        .map(|r| r.into_inner().count)
}

/// `ingest.document.*` events as they reach the bus: (type, document id, collection id).
#[derive(Default)]
struct Seen(Mutex<Vec<(String, String, String)>>);

#[async_trait::async_trait]
impl EventHandler for Seen {
    async fn handle(&self, event: &Envelope) -> anyhow::Result<()> {
        let e = DocumentChanged::decode(event.payload.as_slice())?;
        self.0
            .lock()
            .unwrap()
            .push((event.r#type.clone(), e.document_id, e.collection_id));
        Ok(())
    }
}

impl Seen {
    /// Subscribes a recorder to the stack's bus (before anything it should see happens).
    async fn subscribe(s: &Stack, tracker: &TaskTracker, stop: &CancellationToken) -> Arc<Seen> {
        let seen = Arc::new(Seen::default());
        let subscription = Subscription::new(
            unique("test.documents."),
            &[
                topics::INGEST_DOCUMENT_CREATED,
                topics::INGEST_DOCUMENT_DELETED,
            ],
        );
        s.ctx
            .bus
            .subscribe(subscription, seen.clone(), tracker, stop.clone())
            .await
            .unwrap();
        seen
    }

    /// Waits until `kind` was seen for exactly `ids` (in any order).
    async fn wait_for(&self, kind: &str, ids: &[&str]) {
        let mut want: Vec<String> = ids.iter().map(|i| (*i).to_owned()).collect();
        want.sort();
        let deadline = tokio::time::Instant::now() + std::time::Duration::from_secs(20);
        loop {
            let mut got: Vec<String> = self
                .0
                .lock()
                .unwrap()
                .iter()
                .filter(|(k, _, c)| k == kind && c.is_empty())
                .map(|(_, d, _)| d.clone())
                .collect();
            got.sort();
            if got == want {
                return;
            }
            assert!(
                tokio::time::Instant::now() < deadline,
                "{kind}: saw {got:?}, want {want:?}"
            );
            tokio::time::sleep(std::time::Duration::from_millis(50)).await;
        }
    }
}

docchat_common::backend_tests! {
    async fn agent_files_become_session_documents_replaced_in_place_and_read_back(backend) {
        let s = stack(&backend, |_| {}).await;
        let (tracker, stop) = (TaskTracker::new(), CancellationToken::new());
        let seen = Seen::subscribe(&s, &tracker, &stop).await;
        let alice = user("alice", false);
        let session = new_session();

        let plan = s
            .put_agent_file(&alice, &session, "notes/plan.md", "", b"step one\n")
            .await
            .unwrap();
        assert_eq!(
            (plan.name.as_str(), plan.r#type.as_str(), plan.size, plan.page_count),
            ("notes/plan.md", "markdown", 9, 0),
            "{}",
            backend.name
        );
        assert_eq!((plan.status.as_str(), plan.username.as_str()), ("completed", "alice"));
        assert_eq!(plan.collection_id, "", "an agent document has no collection");
        assert_eq!(plan.chat_session_id.as_deref(), Some(session.as_str()));
        assert!(!plan.chat_session_visible && plan.chat_session_name.is_none());

        // A larger file comes back in pieces of 64 KiB, bytes unchanged.
        let big: Vec<u8> = (0..200_000u32).map(|i| (i % 251) as u8).collect();
        let chart = s
            .put_agent_file(&alice, &session, "out/chart.png", "", &big)
            .await
            .unwrap();
        assert_eq!((chart.r#type.as_str(), chart.size), ("png", 200_000));
        let (doc, pieces, bytes) = s.read_document_bytes(&alice, &chart.id, true).await.unwrap();
        assert_eq!(doc.id, chart.id);
        assert_eq!(pieces, [65_536, 65_536, 65_536, 3_392], "{}", backend.name);
        assert!(bytes == big, "the bytes come back unchanged");

        let listed = documents_of(&s, &alice, Some(&session)).await;
        let names: Vec<&str> = listed.iter().map(|d| d.name.as_str()).collect();
        assert_eq!(names, ["notes/plan.md", "out/chart.png"]);
        let got = s
            .ingest_client()
            .get_document(s.req(Service::Ingest, &alice, pb::DocumentRef { id: plan.id.clone() }))
            .await
            .unwrap()
            .into_inner();
        // GetDocument answers the document in full: its metadata too ("{}": none).
        assert_eq!(
            got,
            pb::Document {
                metadata_json: Some("{}".to_owned()),
                ..plan.clone()
            }
        );
        assert_eq!((blob_files(&s).await, s.count_rows(Service::Ingest, "uploads").await), (2, 2));

        // Written again: the same document with new bytes; the old ones are gone.
        let again = s
            .put_agent_file(&alice, &session, "notes/plan.md", &plan.id, b"step one\nstep two\n")
            .await
            .unwrap();
        assert_eq!((again.id.as_str(), again.size), (plan.id.as_str(), 18), "{}", backend.name);
        assert_eq!(again.created_at, plan.created_at);
        assert!(again.updated_at.unwrap().seconds >= plan.updated_at.unwrap().seconds);
        let (_, _, bytes) = s.read_document_bytes(&alice, &plan.id, true).await.unwrap();
        assert_eq!(bytes, b"step one\nstep two\n");
        assert_eq!(documents_of(&s, &alice, None).await.len(), 2);
        assert_eq!(
            (blob_files(&s).await, s.count_rows(Service::Ingest, "uploads").await),
            (2, 2),
            "{}: the replaced bytes are removed",
            backend.name
        );

        seen.wait_for(topics::INGEST_DOCUMENT_CREATED, &[&plan.id, &chart.id]).await;
        stop.cancel();
        s.stop().await;
    }
}

docchat_common::backend_tests! {
    async fn agent_files_refuse_bad_input_and_other_users_documents(backend) {
        let s = stack(&backend, |c| c.max_body_bytes = 10_000).await;
        let (alice, bob) = (user("alice", false), user("bob", false));
        let session = new_session();

        let bad = s.put_agent_file(&alice, "not-a-uuid", "a.txt", "", b"x").await.unwrap_err();
        assert_eq!((bad.code(), http(&bad)), (Code::InvalidArgument, 400), "{bad:?}");
        let long = "x".repeat(1025);
        for path in ["", "/etc/passwd", "../up.txt", "a/../b.txt", "a//b.txt", "dir/", "a\u{7}b", &long] {
            let bad = s.put_agent_file(&alice, &session, path, "", b"x").await.unwrap_err();
            assert_eq!(http(&bad), 400, "{}: {path:?}: {bad:?}", backend.name);
        }
        // Bytes before the metadata.
        let parts = vec![pb::AgentFileChunk {
            part: Some(pb::agent_file_chunk::Part::Data(b"x".to_vec())),
        }];
        let bad = s
            .ingest_client()
            .put_agent_file(s.req(Service::Ingest, &alice, tokio_stream::iter(parts)))
            .await
            .unwrap_err();
        assert_eq!(http(&bad), 400, "{bad:?}");

        // Too large: 413, and nothing kept.
        let big = s.put_agent_file(&alice, &session, "big.bin", "", &[7u8; 20_000]).await.unwrap_err();
        assert_eq!(http(&big), 413, "{big:?}");
        assert!(documents_of(&s, &alice, None).await.is_empty());
        assert_eq!(blob_files(&s).await, 0);
        if backend.s3.is_none() {
            let tmp = s.config.data_dir.join("blobs/tmp");
            assert_eq!(std::fs::read_dir(tmp).unwrap().count(), 0);
        }

        let doc = s.put_agent_file(&alice, &session, "a.txt", "", b"alice's").await.unwrap();
        // Another user's document, another session's, an unknown id: 404, bytes untouched.
        for (who, sess, id) in [
            (&bob, session.as_str(), doc.id.as_str()),
            (&alice, new_session().as_str(), doc.id.as_str()),
            (&alice, session.as_str(), "00000000-0000-4000-8000-000000000000"),
        ] {
            let refused = s.put_agent_file(who, sess, "a.txt", id, b"changed").await.unwrap_err();
            assert_eq!(refused.code(), Code::NotFound, "{}: {refused:?}", backend.name);
        }
        let too_big = s.put_agent_file(&alice, &session, "a.txt", &doc.id, &[7u8; 20_000]).await.unwrap_err();
        assert_eq!(http(&too_big), 413);
        let (_, _, bytes) = s.read_document_bytes(&alice, &doc.id, true).await.unwrap();
        assert_eq!(bytes, b"alice's");
        assert_eq!((blob_files(&s).await, s.count_rows(Service::Ingest, "uploads").await), (1, 1));
        assert!(documents_of(&s, &bob, None).await.is_empty());
        s.stop().await;
    }
}

docchat_common::backend_tests! {
    /// agents_document_limit_per_user counts agent documents (race-safe, per user) and
    /// document_limit_per_user the others: each limit ignores the other's documents.
    async fn agent_documents_have_their_own_limit(backend) {
        // No workers: an ingestion job stays queued, and so keeps counting.
        let s = stack(&backend, |c| c.ingest_workers = 0).await;
        let admin = Admin::of(&s);
        admin.set("config_cache_ttl_seconds", "0").await;
        admin.set("agents_document_limit_per_user", "2").await;
        let (alice, bob) = (user("alice", false), user("bob", false));

        let a = s.put_agent_file(&alice, &new_session(), "a.txt", "", b"a").await.unwrap();
        s.put_agent_file(&alice, &new_session(), "b.txt", "", b"b").await.unwrap();
        let refused = s.put_agent_file(&alice, &new_session(), "c.txt", "", b"c").await.unwrap_err();
        assert_eq!(
            (refused.code(), http(&refused)),
            (Code::ResourceExhausted, 429),
            "{}: {refused:?}",
            backend.name
        );
        assert!(refused.message().contains("agent document limit reached (2)"), "{refused:?}");
        assert_eq!(documents_of(&s, &alice, None).await.len(), 2);
        assert_eq!((blob_files(&s).await, s.count_rows(Service::Ingest, "uploads").await), (2, 2), "nothing kept");
        // Rewriting a file at the limit is no new document.
        let session = a.chat_session_id.clone().unwrap();
        s.put_agent_file(&alice, &session, "a.txt", &a.id, b"a2").await.unwrap();

        // Parallel writes of one user stop at the limit exactly.
        let puts = (0..40).map(|i| {
            let (s, bob) = (&s, &bob);
            async move {
                s.put_agent_file(bob, &new_session(), &format!("f{i}.txt"), "", b"x").await
            }
        });
        let results = futures::future::join_all(puts).await;
        let stored = results.iter().filter(|r| r.is_ok()).count();
        assert_eq!(stored, 2, "{}: {results:?}", backend.name);
        assert!(results.iter().filter_map(|r| r.as_ref().err()).all(|e| e.code() == Code::ResourceExhausted));

        // document_limit_per_user leaves agent documents out: alice's two do not count.
        admin.set("document_limit_per_user", "1").await;
        let col = s.collection(&alice, "kb").await;
        let up = s.upload(&alice, "n.txt", b"notes").await.unwrap();
        s.ingest(&alice, &up.id, &col.id).await.unwrap();
        let second = s.ingest(&alice, &up.id, &col.id).await.unwrap_err();
        assert_eq!(http(&second), 403, "the queued job counts: {second:?}");
        // ... and the agent limit leaves the others out: the queued job does not count.
        admin.set("agents_document_limit_per_user", "3").await;
        s.put_agent_file(&alice, &new_session(), "c.txt", "", b"c").await.unwrap();
        s.stop().await;
    }
}

docchat_common::backend_tests! {
    async fn document_bytes_are_read_by_who_may_read_them(backend) {
        let s = stack(&backend, |_| {}).await;
        let (alice, bob) = (user("alice", false), user("bob", false));
        let doc = s.put_agent_file(&alice, &new_session(), "r.txt", "", b"report").await.unwrap();
        for owned_only in [true, false] {
            let (_, _, bytes) = s.read_document_bytes(&alice, &doc.id, owned_only).await.unwrap();
            assert_eq!(bytes, b"report");
            let denied = s.read_document_bytes(&bob, &doc.id, owned_only).await.unwrap_err();
            assert_eq!(denied.code(), Code::NotFound, "{}", backend.name);
            assert_eq!(denied.message(), format!("document {} not found", doc.id));
        }
        let unknown = s.read_document_bytes(&alice, "nope", false).await.unwrap_err();
        assert_eq!(unknown.code(), Code::NotFound);

        // A stored file that went missing is not found either.
        let db = s.database(Service::Ingest).await;
        let row = db
            .query_one(Statement::from_sql_and_values(
                db.get_database_backend(),
                match db.get_database_backend() {
                    sea_orm::DbBackend::Postgres => "SELECT upload_id FROM documents WHERE id = $1",
                    _ => "SELECT upload_id FROM documents WHERE id = ?",
                },
                [doc.id.clone().into()],
            ))
            .await
            .unwrap()
            .unwrap();
        let upload: String = row.try_get_by_index(0).unwrap();
        blob_store(&s).await.delete(&upload).await.unwrap();
        let gone = s.read_document_bytes(&alice, &doc.id, true).await.unwrap_err();
        assert_eq!(gone.code(), Code::NotFound, "{gone:?}");

        // A public collection's document: its uploaded original for any reader, but not
        // as an owned file.
        if model_present() {
            let col = s.collection(&alice, "kb").await;
            let up = s.upload(&alice, "notes.txt", b"Paris is the capital of France.").await.unwrap();
            let job = s.ingest(&alice, &up.id, &col.id).await.unwrap();
            let done = s.finished(&alice, &job.id).await;
            assert_eq!(done.status, "completed", "{:?}", done.errors);
            let id = done.document_id.unwrap();
            let denied = s.read_document_bytes(&bob, &id, false).await.unwrap_err();
            assert_eq!(denied.code(), Code::NotFound, "private so far");
            db.execute(Statement::from_sql_and_values(
                db.get_database_backend(),
                match db.get_database_backend() {
                    sea_orm::DbBackend::Postgres => "UPDATE collections SET is_public = TRUE WHERE id = $1",
                    _ => "UPDATE collections SET is_public = 1 WHERE id = ?",
                },
                [col.id.clone().into()],
            ))
            .await
            .unwrap();
            let (got, _, bytes) = s.read_document_bytes(&bob, &id, false).await.unwrap();
            assert_eq!((got.name.as_str(), bytes.as_slice()), ("notes.txt", &b"Paris is the capital of France."[..]));
            let owned = s.read_document_bytes(&bob, &id, true).await.unwrap_err();
            assert_eq!(owned.code(), Code::NotFound, "{}", backend.name);
            assert_eq!(owned.message(), format!("document {id} not found"), "as if unknown");
            s.read_document_bytes(&alice, &id, true).await.unwrap();
        }
        db.close().await.unwrap();
        s.stop().await;
    }
}

docchat_common::backend_tests! {
    async fn deleting_a_sessions_documents_takes_that_sessions_of_the_caller_only(backend) {
        let s = stack(&backend, |_| {}).await;
        let (tracker, stop) = (TaskTracker::new(), CancellationToken::new());
        let seen = Seen::subscribe(&s, &tracker, &stop).await;
        let (alice, bob) = (user("alice", false), user("bob", false));
        let (s1, s2) = (new_session(), new_session());
        let a = s.put_agent_file(&alice, &s1, "a.txt", "", b"a").await.unwrap();
        let b = s.put_agent_file(&alice, &s1, "b/c.txt", "", b"b").await.unwrap();
        let d = s.put_agent_file(&alice, &s2, "d.txt", "", b"d").await.unwrap();
        // Another user's document under the same session id is never touched.
        let e = s.put_agent_file(&bob, &s1, "e.txt", "", b"e").await.unwrap();
        s.ingest_client()
            .tag_document(s.req(Service::Ingest, &alice, pb::DocumentTagRequest {
                document_id: a.id.clone(),
                tag_name: "draft".into(),
                ..Default::default()
            }))
            .await
            .unwrap();

        let bad = delete_session(&s, &alice, "not-a-uuid").await.unwrap_err();
        assert_eq!(http(&bad), 400);
        assert_eq!(delete_session(&s, &alice, &s1).await.unwrap(), 2, "{}", backend.name);
        let left: Vec<String> = documents_of(&s, &alice, None).await.into_iter().map(|x| x.id).collect();
        assert_eq!(left, std::slice::from_ref(&d.id));
        assert_eq!(documents_of(&s, &bob, Some(&s1)).await.len(), 1);
        s.read_document_bytes(&bob, &e.id, true).await.unwrap();
        for gone in [&a.id, &b.id] {
            let status = s.read_document_bytes(&alice, gone, true).await.unwrap_err();
            assert_eq!(status.code(), Code::NotFound);
        }
        assert_eq!(
            (blob_files(&s).await, s.count_rows(Service::Ingest, "uploads").await, s.count_rows(Service::Ingest, "document_tags").await),
            (2, 2, 0),
            "{}: their bytes and tags are gone",
            backend.name
        );
        seen.wait_for(topics::INGEST_DOCUMENT_DELETED, &[&a.id, &b.id]).await;

        assert_eq!(delete_session(&s, &alice, &s1).await.unwrap(), 0, "nothing left");
        assert_eq!(delete_session(&s, &bob, &s2).await.unwrap(), 0, "not bob's");
        // One agent document deleted on its own takes its bytes too.
        s.ingest_client()
            .delete_document(s.req(Service::Ingest, &alice, pb::DocumentRef { id: d.id.clone() }))
            .await
            .unwrap();
        assert_eq!((blob_files(&s).await, s.count_rows(Service::Ingest, "uploads").await), (1, 1));
        stop.cancel();
        s.stop().await;
    }
}
