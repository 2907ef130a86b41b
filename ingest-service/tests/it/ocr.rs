//! Scanned documents and images through text recognition (Debian's Tesseract and poppler's
//! pdftoppm, in the sandbox), over real gRPC on both backends: a scanned PDF, a PDF mixing
//! a text page and a scanned one, a phone photo and a two-page TIFF become documents whose
//! search hits cite the right page; a decompression bomb and a malformed TIFF fail their
//! job with a clear line while the service goes on; `ocr_model` turns recognition off or
//! forces it, and an unknown model or language is refused before anything is queued. The
//! fixtures are made by tests/fixtures/ocr/make.py. Without Tesseract, pdftoppm or a
//! sandbox these tests fail in CI (scripts/sandbox-runtime.sh installs them).

use docchat_common::config::Service;
use docchat_common::testing::user;
use docchat_proto::ingest::v1 as pb;
use tonic::Code;

use crate::pipeline::{Stack, stack};

const SCANNED: &[u8] = include_bytes!("../fixtures/ocr/scanned.pdf");
const MIXED: &[u8] = include_bytes!("../fixtures/ocr/mixed.pdf");
const PHOTO: &[u8] = include_bytes!("../fixtures/ocr/photo.jpg");
const TIFF: &[u8] = include_bytes!("../fixtures/ocr/pages.tiff");
const BOMB: &[u8] = include_bytes!("../fixtures/ocr/bomb.png");
const MALFORMED: &[u8] = include_bytes!("../fixtures/ocr/malformed.tiff");

/// Uploads `bytes` as `name` and ingests it with `ocr_model`, to its end.
async fn ingest(
    s: &Stack,
    who: &docchat_common::Caller,
    collection: &str,
    name: &str,
    bytes: &[u8],
    ocr_model: &str,
) -> pb::Job {
    let up = s.upload(who, name, bytes).await.unwrap();
    let request = pb::IngestUploadRequest {
        upload_id: up.id,
        collection_id: collection.into(),
        ocr_model: ocr_model.into(),
        ..Default::default()
    };
    let job = s.ingest_with(who, request).await.unwrap();
    s.finished(who, &job.id).await
}

/// Whether recognition runs on this host; where it cannot, says so (a failure in CI).
fn recognition_runs(job: &pb::Job) -> bool {
    if let Some(why) = job
        .errors
        .iter()
        .find(|e| e.contains("text recognition needs"))
    {
        docchat_common::testing::unavailable(why);
        return false;
    }
    true
}

async fn document(s: &Stack, who: &docchat_common::Caller, id: &str) -> pb::Document {
    s.ingest_client()
        .get_document(s.req(Service::Ingest, who, pb::DocumentRef { id: id.into() }))
        .await
        .unwrap()
        .into_inner()
}

/// The name of the best hit's document for `query`, and the page it cites first (the one
/// its matching part lies on; a chunk spanning two short pages cites both).
async fn first_page(
    s: &Stack,
    who: &docchat_common::Caller,
    collection: &str,
    query: &str,
) -> (String, u32) {
    let hits = s.search(who, collection, query, 3).await.unwrap();
    let hit = hits
        .first()
        .unwrap_or_else(|| panic!("no hit for {query:?}"));
    (
        hit.document_name.clone(),
        hit.pages.first().copied().unwrap_or(0),
    )
}

fn sources(doc: &pb::Document) -> Vec<(String, String)> {
    let mut out: Vec<(String, String)> = doc
        .page_sources
        .iter()
        .map(|(k, v)| (k.clone(), v.clone()))
        .collect();
    out.sort();
    out
}

fn pairs(items: &[(&str, &str)]) -> Vec<(String, String)> {
    items
        .iter()
        .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
        .collect()
}

docchat_common::vector_backend_tests! {
    async fn scanned_pages_and_images_become_searchable_with_their_pages(backend) {
        let s = stack(&backend, |_| {}).await;
        let alice = user("alice", false);
        let col = s.collection(&alice, "scans").await;

        let job = ingest(&s, &alice, &col.id, "ledger-scan.pdf", SCANNED, "").await;
        if !recognition_runs(&job) {
            s.stop().await;
            return;
        }
        assert_eq!(job.status, "completed", "{}: {:?}", backend.name, job.errors);
        assert!(job.errors.is_empty(), "{:?}", job.errors);
        let doc = document(&s, &alice, job.document_id.as_deref().unwrap()).await;
        assert_eq!((doc.r#type.as_str(), doc.page_count), ("pdf", 2));
        assert_eq!(sources(&doc), pairs(&[("1", "tesseract"), ("2", "tesseract")]));
        assert_eq!(doc.message, None);

        let job = ingest(&s, &alice, &col.id, "harbour.pdf", MIXED, "auto").await;
        assert_eq!(job.status, "completed", "{}: {:?}", backend.name, job.errors);
        let doc = document(&s, &alice, job.document_id.as_deref().unwrap()).await;
        assert_eq!(sources(&doc), pairs(&[("1", "text"), ("2", "tesseract")]), "a text page keeps its layer");

        let job = ingest(&s, &alice, &col.id, "orchard.jpg", PHOTO, "").await;
        assert_eq!(job.status, "completed", "{}: {:?}", backend.name, job.errors);
        let doc = document(&s, &alice, job.document_id.as_deref().unwrap()).await;
        assert_eq!((doc.r#type.as_str(), doc.page_count), ("jpg", 1), "an image is named by its format");

        let job = ingest(&s, &alice, &col.id, "pages.tiff", TIFF, "").await;
        assert_eq!(job.status, "completed", "{}: {:?}", backend.name, job.errors);
        let doc = document(&s, &alice, job.document_id.as_deref().unwrap()).await;
        assert_eq!(doc.page_count, 2, "{}: a page per frame", backend.name);

        // Search finds the recognized words on their pages.
        for (query, name, page) in [
            ("lighthouse keeper Ardnamurchan weather", "ledger-scan.pdf", 1),
            ("brass hinges delivered to Tobermory", "ledger-scan.pdf", 2),
            ("ferry timetable sailings to Mull", "harbour.pdf", 1),
            ("harbour master manifest green ink", "harbour.pdf", 2),
            ("orchard Glenbrittle kinds of apple", "orchard.jpg", 1),
            ("tiff page mentions cobalt", "pages.tiff", 2),
        ] {
            assert_eq!(first_page(&s, &alice, &col.id, query).await, (name.to_owned(), page),
                "{}: {query}", backend.name);
        }
        s.stop().await;
    }

    async fn hostile_images_fail_their_page_and_the_service_goes_on(backend) {
        let s = stack(&backend, |_| {}).await;
        let alice = user("alice", false);
        let col = s.collection(&alice, "hostile").await;
        for (name, bytes) in [("bomb.png", BOMB), ("malformed.tiff", MALFORMED)] {
            let job = ingest(&s, &alice, &col.id, name, bytes, "").await;
            if !recognition_runs(&job) {
                s.stop().await;
                return;
            }
            assert_eq!(job.status, "failed", "{}: {name}", backend.name);
            let error = &job.errors[0];
            assert!(error.starts_with(name) && (error.contains("could not be read") || error.contains("no text")),
                "{}: {name}: {error}", backend.name);
            assert!(error.len() <= 300 && !error.contains('\n'), "{error}");
        }
        // The replica is fine: the next scan is read.
        let job = ingest(&s, &alice, &col.id, "after.pdf", SCANNED, "").await;
        assert_eq!(job.status, "completed", "{}: {:?}", backend.name, job.errors);
        s.stop().await;
    }

    async fn recognition_is_turned_off_or_forced_per_upload(backend) {
        let s = stack(&backend, |_| {}).await;
        let alice = user("alice", false);
        let col = s.collection(&alice, "options").await;

        // Off: the text page only; a scan alone, or an image, fails saying why.
        let job = ingest(&s, &alice, &col.id, "harbour.pdf", MIXED, "off").await;
        assert_eq!(job.status, "completed", "{}: {:?}", backend.name, job.errors);
        let doc = document(&s, &alice, job.document_id.as_deref().unwrap()).await;
        assert!(doc.page_sources.is_empty(), "{:?}", doc.page_sources);
        for (name, bytes) in [("scan.pdf", SCANNED), ("orchard.jpg", PHOTO)] {
            let job = ingest(&s, &alice, &col.id, name, bytes, "off").await;
            assert_eq!(job.status, "failed", "{}: {name}", backend.name);
            assert!(job.errors[0].contains("ocr_model=off"), "{}", job.errors[0]);
        }
        // Forced: the text page is recognized too.
        let job = ingest(&s, &alice, &col.id, "harbour.pdf", MIXED, "tesseract").await;
        if !recognition_runs(&job) {
            s.stop().await;
            return;
        }
        assert_eq!(job.status, "completed", "{}: {:?}", backend.name, job.errors);
        let doc = document(&s, &alice, job.document_id.as_deref().unwrap()).await;
        assert_eq!(sources(&doc), pairs(&[("1", "tesseract"), ("2", "tesseract")]));

        // Bad options are refused before anything is queued.
        let up = s.upload(&alice, "x.pdf", MIXED).await.unwrap();
        for (model, language, expect) in [("docTR", "", "ocr_model"), ("auto", "klingon", "not installed"), ("auto", "eng;rm -rf", "language list")] {
            let e = s
                .ingest_client()
                .ingest_upload(s.req(Service::Ingest, &alice, pb::IngestUploadRequest {
                    upload_id: up.id.clone(),
                    collection_id: col.id.clone(),
                    ocr_model: model.into(),
                    ocr_language: language.into(),
                    ..Default::default()
                }))
                .await
                .unwrap_err();
            assert_eq!(e.code(), Code::InvalidArgument, "{model} {language}: {e:?}");
            assert!(e.message().contains(expect), "{}", e.message());
        }
        s.stop().await;
    }
}

docchat_common::backend_tests! {
    /// A heartbeat that carries progress tells the job history (a JobChanged with it, in the
    /// outbox, in the renewal's transaction); a plain one does not; a job no longer running
    /// is neither renewed nor announced.
    async fn a_renewal_with_progress_tells_the_job_history(backend) {
        use docchat_common::outbox::entity as outbox;
        use docchat_ingest_service::entities::jobs;
        use prost::Message;
        use sea_orm::{ActiveModelTrait, EntityTrait, PaginatorTrait, Set};

        let (_dir, db) = crate::migrated(&backend).await;
        let at = chrono::Utc::now();
        jobs::ActiveModel {
            id: Set("j1".into()),
            kind: Set("IngestUploadJob".into()),
            owner_id: Set("u1".into()),
            owner_username: Set("alice".into()),
            status: Set("running".into()),
            queue: Set("standard".into()),
            progress: Set(0.0),
            errors: Set("[]".into()),
            collection_id: Set("c1".into()),
            collection_name: Set("scans".into()),
            params: Set("{}".into()),
            attempts: Set(1),
            lease_until: Set(Some(at)),
            created_at: Set(at),
            updated_at: Set(at),
            started_at: Set(Some(at)),
            ..Default::default()
        }
        .insert(&db)
        .await
        .unwrap();
        let lease = chrono::Duration::seconds(30);
        let renew = docchat_ingest_service::jobs::renew;
        assert!(renew(&db, "j1", lease, 0.05, false).await.unwrap());
        assert_eq!(outbox::Entity::find().count(&db).await.unwrap(), 0, "{}", backend.name);
        assert!(renew(&db, "j1", lease, 0.31, true).await.unwrap());
        let events = outbox::Entity::find().all(&db).await.unwrap();
        assert_eq!(events.len(), 1, "{}", backend.name);
        let envelope = docchat_proto::events::v1::Envelope::decode(events[0].envelope.as_slice()).unwrap();
        let changed = docchat_proto::events::v1::JobChanged::decode(envelope.payload.as_slice()).unwrap();
        assert_eq!((changed.job_id.as_str(), changed.status.as_str(), changed.progress), ("j1", "running", 0.31));
        // Canceled meanwhile: not renewed, nothing said.
        let mut row: jobs::ActiveModel = jobs::Entity::find_by_id("j1").one(&db).await.unwrap().unwrap().into();
        row.status = Set("canceled".into());
        row.update(&db).await.unwrap();
        assert!(!renew(&db, "j1", lease, 0.5, true).await.unwrap());
        assert_eq!(outbox::Entity::find().count(&db).await.unwrap(), 1, "{}", backend.name);
    }
}
