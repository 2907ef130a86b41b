//! The model calls ingest-service makes for a user (transcription, document summaries and
//! questions, collection descriptions) are booked in admin-service's ledger as `usage.llm`
//! and refused, as a job error, once the owner is over a cost cap.

use std::sync::Arc;
use std::time::Duration;

use docchat_common::Caller;
use docchat_common::auth::authorized;
use docchat_common::config::Service;
use docchat_common::testing::{ScriptedHttp, SeenRequest, user};
use docchat_proto::admin::v1 as admin_pb;
use docchat_proto::admin::v1::admin_service_client::AdminServiceClient;
use docchat_proto::ingest::v1 as pb;

use crate::pipeline::{Stack, stack};

/// Tokens each kind of call reports: (prompt, completion). At the prices of
/// [`models_file`] (1 and 2 per million) a call costs prompt + 2 × completion millionths.
const SUMMARY: (u64, u64) = (100, 10);
const QUESTIONS: (u64, u64) = (200, 20);
const DESCRIPTION: (u64, u64) = (300, 30);
const TRANSCRIPTION: (u64, u64) = (1000, 100);

fn cost(calls: &[(u64, u64)]) -> f64 {
    calls
        .iter()
        .map(|(p, c)| (*p as f64 + 2.0 * *c as f64) / 1e6)
        .sum()
}

/// A chat and transcription upstream whose answers report [`SUMMARY`], [`QUESTIONS`],
/// [`DESCRIPTION`] and [`TRANSCRIPTION`] usage.
async fn upstream() -> ScriptedHttp {
    ScriptedHttp::start(Arc::new(|req: &SeenRequest| {
        if req.path == "/v1/audio/transcriptions" {
            let answer = serde_json::json!({
                "text": "The build is green.",
                "segments": [{"start": 0.0, "end": 1.5, "text": " The build is green."}],
                "usage": {"type": "tokens", "input_tokens": TRANSCRIPTION.0, "output_tokens": TRANSCRIPTION.1}
            });
            return (200, "application/json".into(), answer.to_string().into_bytes());
        }
        let body: serde_json::Value = serde_json::from_slice(&req.body).unwrap_or_default();
        let system = body["messages"][0]["content"].as_str().unwrap_or("");
        let (text, (prompt, completion)) = if system.contains("Summarize") {
            ("A short summary.", SUMMARY)
        } else if system.contains("questions") {
            ("What is it?\nWhy?\nHow?", QUESTIONS)
        } else {
            ("A collection of notes.", DESCRIPTION)
        };
        let answer = serde_json::json!({
            "choices": [{"index": 0, "message": {"role": "assistant", "content": text}, "finish_reason": "stop"}],
            "usage": {"prompt_tokens": prompt, "completion_tokens": completion, "total_tokens": prompt + completion}
        });
        (200, "application/json".into(), answer.to_string().into_bytes())
    }))
    .await
}

fn models_file(dir: &std::path::Path, base_url: &str) -> std::path::PathBuf {
    let path = dir.join("models.toml");
    std::fs::write(
        &path,
        format!(
            "[[models]]\nname = \"tiny\"\nbase_url = \"{base_url}/v1\"\ninput_price = 1.0\noutput_price = 2.0\ndefault = true\n\n\
             [[models]]\nname = \"whisper\"\nkind = \"transcription\"\nbase_url = \"{base_url}/v1\"\ninput_price = 1.0\noutput_price = 2.0\n"
        ),
    )
    .unwrap();
    path
}

/// admin-service as an administrator: global settings, the ledger, users.
pub(crate) struct Admin {
    client: AdminServiceClient<tonic::transport::Channel>,
    keys: Arc<docchat_common::JwtKeys>,
}

impl Admin {
    pub(crate) fn of(stack: &Stack) -> Admin {
        Admin {
            client: AdminServiceClient::new(stack.admin().channel()),
            keys: stack.keys.clone(),
        }
    }

    pub(crate) async fn set(&self, key: &str, value: &str) {
        let request = admin_pb::SetGlobalSettingRequest {
            key_name: key.into(),
            string_value: value.into(),
            can_overwrite: None,
            is_public: None,
        };
        self.client
            .clone()
            .set_global_setting(
                authorized(&self.keys, &user("boss", true), Service::Admin, request).unwrap(),
            )
            .await
            .unwrap();
    }

    /// The ledger's view of `who`: (cost, prompt tokens, completion tokens).
    async fn spend(&self, who: &Caller) -> (f64, u64, u64) {
        let request = authorized(
            &self.keys,
            who,
            Service::Admin,
            admin_pb::LlmSpendRequest::default(),
        )
        .unwrap();
        let s = self
            .client
            .clone()
            .get_llm_spend(request)
            .await
            .unwrap()
            .into_inner();
        (
            s.cost_total,
            s.prompt_tokens_total,
            s.completion_tokens_total,
        )
    }

    /// Waits until the ledger holds exactly `calls` for `who`.
    async fn booked(&self, who: &Caller, calls: &[(u64, u64)]) {
        let want = (
            cost(calls),
            calls.iter().map(|c| c.0).sum::<u64>(),
            calls.iter().map(|c| c.1).sum::<u64>(),
        );
        let deadline = tokio::time::Instant::now() + Duration::from_secs(30);
        loop {
            let got = self.spend(who).await;
            if (got.0 - want.0).abs() < 1e-12 && (got.1, got.2) == (want.1, want.2) {
                return;
            }
            assert!(
                tokio::time::Instant::now() < deadline,
                "{}: booked {got:?}, want {want:?}",
                who.user_id
            );
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    }

    /// A user holding the `guest` role: its caller.
    async fn guest(&self, name: &str) -> Caller {
        let boss = user("boss", true);
        let mut c = self.client.clone();
        c.create_role(
            authorized(
                &self.keys,
                &boss,
                Service::Admin,
                admin_pb::CreateRoleRequest {
                    name: "guest".into(),
                    description: String::new(),
                },
            )
            .unwrap(),
        )
        .await
        .unwrap();
        let created = c
            .create_user(
                authorized(
                    &self.keys,
                    &boss,
                    Service::Admin,
                    admin_pb::CreateUserRequest {
                        username: name.into(),
                        email: format!("{name}@example.com"),
                        roles: vec!["guest".into()],
                        groups: vec![],
                    },
                )
                .unwrap(),
            )
            .await
            .unwrap()
            .into_inner();
        Caller {
            user_id: created.id,
            ..user(name, false)
        }
    }
}

/// Ingests `name` into `collection` with summaries and questions: the finished job.
async fn ingest_with_extras(
    s: &Stack,
    who: &Caller,
    collection: &str,
    name: &str,
    bytes: &[u8],
) -> pb::Job {
    let up = s.upload(who, name, bytes).await.unwrap();
    let request = pb::IngestUploadRequest {
        upload_id: up.id,
        collection_id: collection.into(),
        gen_doc_summaries: Some(true),
        gen_doc_questions: Some(true),
        ..Default::default()
    };
    let job = s.ingest_with(who, request).await.unwrap();
    s.finished(who, &job.id).await
}

fn assert_cap_errors(job: &pb::Job, cap: &str, n: usize) {
    assert_eq!(job.errors.len(), n, "{:?}", job.errors);
    for e in &job.errors {
        assert!(e.contains("LLM cost cap reached") && e.contains(cap), "{e}");
        assert!(
            e.len() <= 300 && !e.contains('\n'),
            "one line of at most 300 bytes: {e}"
        );
    }
}

const NOTES: &[u8] = b"# Notes\n\nParis is the capital of France. The Seine flows through it.\n";
const MP3: &[u8] = &[0xff, 0xfb, 0x90, 0x00, 1, 2, 3];

docchat_common::backend_tests! {
    /// Transcription, summaries and questions are booked for the document's owner; once
    /// the owner is over max_llm_cost_per_user they are refused as job errors and the
    /// upstream is not called.
    async fn ingestion_model_calls_are_booked_and_capped(backend) {
        let model = upstream().await;
        let dir = tempfile::tempdir().unwrap();
        let file = models_file(dir.path(), &model.base_url);
        let s = stack(&backend, |c| {
            c.models_file = Some(file.clone());
            c.description_interval_seconds = 3600;
        })
        .await;
        let admin = Admin::of(&s);
        admin.set("config_cache_ttl_seconds", "0").await;
        let alice = user("alice", false);
        let col = s.collection(&alice, "kb").await;

        let done = ingest_with_extras(&s, &alice, &col.id, "notes.md", NOTES).await;
        assert_eq!((done.status.as_str(), done.errors.len()), ("completed", 0), "{:?}", done.errors);
        let up = s.upload(&alice, "standup.mp3", MP3).await.unwrap();
        let job = s.ingest(&alice, &up.id, &col.id).await.unwrap();
        let done = s.finished(&alice, &job.id).await;
        assert_eq!(done.status, "completed", "{:?}", done.errors);
        admin.booked(&alice, &[SUMMARY, QUESTIONS, TRANSCRIPTION]).await;

        // Over the lifetime cap: no more model calls, each refusal a job error.
        admin.set("max_llm_cost_per_user", "0.001").await;
        let calls = model.seen().len();
        let done = ingest_with_extras(&s, &alice, &col.id, "more.md", NOTES).await;
        assert_eq!(done.status, "completed", "the document itself costs nothing");
        assert_cap_errors(&done, "max_llm_cost_per_user", 2);
        let doc = s
            .ingest_client()
            .get_document(s.req(Service::Ingest, &alice, pb::DocumentRef { id: done.document_id.clone().unwrap() }))
            .await
            .unwrap()
            .into_inner();
        assert_eq!(doc.summary, None);
        let up = s.upload(&alice, "meeting.mp3", MP3).await.unwrap();
        let job = s.ingest(&alice, &up.id, &col.id).await.unwrap();
        let done = s.finished(&alice, &job.id).await;
        assert_eq!(done.status, "failed");
        assert_cap_errors(&done, "max_llm_cost_per_user", 1);
        assert_eq!(model.seen().len(), calls, "{}: a refused call reaches no model", backend.name);
        admin.booked(&alice, &[SUMMARY, QUESTIONS, TRANSCRIPTION]).await;
        s.stop().await;
    }

    /// A collection description is booked for the collection's owner; a guest over
    /// max_llm_cost_per_guest gets none, and neither summaries.
    async fn descriptions_are_booked_and_guests_capped(backend) {
        let model = upstream().await;
        let dir = tempfile::tempdir().unwrap();
        let file = models_file(dir.path(), &model.base_url);
        let s = stack(&backend, |c| {
            c.models_file = Some(file.clone());
            c.description_interval_seconds = 1;
        })
        .await;
        let admin = Admin::of(&s);
        admin.set("config_cache_ttl_seconds", "0").await;
        admin.set("max_llm_cost_per_guest", "0").await;
        let carol = admin.guest("carol").await;
        let bob = user("bob", false);

        // Carol's collection is due first, so it is tried before Bob's is described.
        let carols = s.collection(&carol, "carols-notes").await;
        let done = ingest_with_extras(&s, &carol, &carols.id, "notes.md", NOTES).await;
        assert_eq!(done.status, "completed");
        assert_cap_errors(&done, "max_llm_cost_per_guest", 2);
        let bobs = s.collection(&bob, "bobs-notes").await;
        let up = s.upload(&bob, "notes.md", NOTES).await.unwrap();
        let job = s.ingest(&bob, &up.id, &bobs.id).await.unwrap();
        assert_eq!(s.finished(&bob, &job.id).await.status, "completed");
        let get = |who: &Caller, id: &str| {
            let request = s.req(Service::Ingest, who, pb::CollectionRef { id: id.into() });
            let mut c = s.ingest_client();
            async move { c.get_collection(request).await.unwrap().into_inner() }
        };
        let deadline = tokio::time::Instant::now() + Duration::from_secs(30);
        while get(&bob, &bobs.id).await.description_generated_at.is_none() {
            assert!(tokio::time::Instant::now() < deadline, "{}: no description", backend.name);
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
        assert_eq!(get(&bob, &bobs.id).await.description, "A collection of notes.");
        admin.booked(&bob, &[DESCRIPTION]).await;

        let carols = get(&carol, &carols.id).await;
        assert_eq!((carols.description.as_str(), carols.description_generated_at), ("", None));
        assert!(
            model.seen().iter().all(|r| !String::from_utf8_lossy(&r.body).contains("carols-notes")),
            "no model call for the guest's collection"
        );
        assert_eq!(admin.spend(&carol).await, (0.0, 0, 0));
        s.stop().await;
    }
}
