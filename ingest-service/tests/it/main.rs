//! ingest-service over real gRPC on loopback, on SQLite and on PostgreSQL.

#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::panic,
    clippy::print_stderr
)] // test code: fail loudly

use docchat_common::auth::authorized;
use docchat_common::bus::topics;
use docchat_common::bus::{EventHandler, envelope};
use docchat_common::config::Service;
use docchat_common::testing::user;
use docchat_proto::common::v1::PageRequest;
use docchat_proto::events::v1::{
    ChatSessionCollectionChanged, ChatSessionCreated, ChatSessionDeleted,
};
use docchat_proto::ingest::v1 as pb;
mod agent_files;
mod blobs;
mod costs;
mod ocr;
mod pipeline;
mod tags_migration;

use tonic::Code;

/// A fresh ingest database on `backend`, migrated (the directory holds SQLite's file: keep
/// it while the connection is used).
async fn migrated(
    backend: &docchat_common::testing::Backend,
) -> (tempfile::TempDir, sea_orm::DatabaseConnection) {
    let dir = tempfile::tempdir().unwrap();
    let url = backend.database_url(dir.path(), "ingest");
    let db = docchat_common::db::connect(&url).await.unwrap();
    docchat_common::db::migrate::<docchat_ingest_service::migrations::Migrator>(&db, "ingest")
        .await
        .unwrap();
    (dir, db)
}

fn req<T>(
    keys: &docchat_common::JwtKeys,
    service: Service,
    who: &docchat_common::Caller,
    msg: T,
) -> tonic::Request<T> {
    authorized(keys, who, service, msg).unwrap()
}

docchat_common::vector_backend_tests! {
    async fn collections_are_scoped_to_their_owner(backend) {
        // ingest-service reads limits from admin-service, so both run.
        let stack = pipeline::stack(&backend, |_| {}).await;
        let keys = stack.keys.clone();
        let mut c = stack.ingest_client();
        let (alice, bob) = (user("alice", false), user("bob", false));

        let created = c
            .create_collection(req(
                &keys,
                Service::Ingest,
                &alice,
                pb::CreateCollectionRequest {
                    name: "A".into(),
                    description: "d".into(),
                    embedding_model: String::new(),
                    ..Default::default()
                },
            ))
            .await
            .unwrap()
            .into_inner();
        assert_eq!(created.username, "alice");
        assert_eq!(created.embedding_model, "all-MiniLM-L6-v2");
        assert!(created.description_generated_at.is_none());
        let bad = c
            .create_collection(req(
                &keys,
                Service::Ingest,
                &alice,
                pb::CreateCollectionRequest {
                    name: String::new(),
                    description: String::new(),
                    embedding_model: String::new(),
                    ..Default::default()
                },
            ))
            .await
            .unwrap_err();
        assert_eq!(bad.code(), Code::InvalidArgument, "{}", backend.name);

        let mine = c
            .list_collections(req(&keys, Service::Ingest, &alice, PageRequest::default()))
            .await
            .unwrap()
            .into_inner();
        assert_eq!(mine.collections.len(), 1);
        let theirs = c
            .list_collections(req(&keys, Service::Ingest, &bob, PageRequest::default()))
            .await
            .unwrap()
            .into_inner();
        assert!(theirs.collections.is_empty());
        for status in [
            c.get_collection(req(
                &keys,
                Service::Ingest,
                &bob,
                pb::CollectionRef {
                    id: created.id.clone(),
                },
            ))
            .await
            .unwrap_err(),
            c.delete_collection(req(
                &keys,
                Service::Ingest,
                &bob,
                pb::CollectionRef {
                    id: created.id.clone(),
                },
            ))
            .await
            .unwrap_err(),
        ] {
            assert_eq!(status.code(), Code::NotFound, "{}", backend.name);
        }
        c.delete_collection(req(
            &keys,
            Service::Ingest,
            &alice,
            pb::CollectionRef {
                id: created.id.clone(),
            },
        ))
        .await
        .unwrap();
        let again = c
            .delete_collection(req(
                &keys,
                Service::Ingest,
                &alice,
                pb::CollectionRef {
                    id: created.id.clone(),
                },
            ))
            .await
            .unwrap_err();
        assert_eq!(again.code(), Code::NotFound);
        stack.stop().await;
    }
}

docchat_common::vector_backend_tests! {
    async fn session_counting_is_idempotent_and_order_tolerant(backend) {
        let (_dir, db) = migrated(&backend).await;
        let counter = docchat_ingest_service::events::SessionCounter { db: db.clone() };
        let created = |s: &str| {
            envelope(
                topics::CHAT_SESSION_CREATED,
                "u",
                &ChatSessionCreated {
                    session_id: s.into(),
                    user_id: "u".into(),
                    collection_id: "c1".into(),
                },
            )
        };
        let deleted = |s: &str| {
            envelope(
                topics::CHAT_SESSION_DELETED,
                "u",
                &ChatSessionDeleted {
                    session_id: s.into(),
                    user_id: "u".into(),
                    collection_id: "c1".into(),
                },
            )
        };

        let c1 = created("s1");
        counter.handle(&c1).await.unwrap();
        counter.handle(&c1).await.unwrap(); // redelivered
        counter.handle(&created("s2")).await.unwrap();
        assert_eq!(
            docchat_ingest_service::collections::sessions_count(&db, "c1")
                .await
                .unwrap(),
            2,
            "{}",
            backend.name
        );
        // A deletion overtaking its creation still ends deleted.
        counter.handle(&deleted("s3")).await.unwrap();
        counter.handle(&created("s3")).await.unwrap();
        counter.handle(&deleted("s1")).await.unwrap();
        counter.handle(&deleted("s1")).await.unwrap();
        assert_eq!(
            docchat_ingest_service::collections::sessions_count(&db, "c1")
                .await
                .unwrap(),
            1,
            "{}",
            backend.name
        );
        // Sessions without a collection are not counted anywhere.
        let none = envelope(
            topics::CHAT_SESSION_CREATED,
            "u",
            &ChatSessionCreated {
                session_id: "s9".into(),
                user_id: "u".into(),
                collection_id: String::new(),
            },
        );
        counter.handle(&none).await.unwrap();
        assert_eq!(
            docchat_ingest_service::collections::sessions_count(&db, "")
                .await
                .unwrap(),
            0
        );
        // A payload that is not the announced message is an error (redelivery, then DLQ).
        let garbage = docchat_proto::events::v1::Envelope {
            payload: vec![0xff, 0xff, 0xff],
            ..created("s4")
        };
        assert!(counter.handle(&garbage).await.is_err());
    }
}

docchat_common::vector_backend_tests! {
    /// A session moved to another collection (or unlinked) counts there, once, whatever the
    /// order its events arrive in; a deleted session stays deleted.
    async fn session_collection_changes_move_the_count(backend) {
        let (_dir, db) = migrated(&backend).await;
        let counter = docchat_ingest_service::events::SessionCounter { db: db.clone() };
        let event = |kind: &str, s: &str, c: &str| match kind {
            "created" => envelope(
                topics::CHAT_SESSION_CREATED,
                "u",
                &ChatSessionCreated {
                    session_id: s.into(),
                    user_id: "u".into(),
                    collection_id: c.into(),
                },
            ),
            "deleted" => envelope(
                topics::CHAT_SESSION_DELETED,
                "u",
                &ChatSessionDeleted {
                    session_id: s.into(),
                    user_id: "u".into(),
                    collection_id: c.into(),
                },
            ),
            _ => envelope(
                topics::CHAT_SESSION_COLLECTION_CHANGED,
                "u",
                &ChatSessionCollectionChanged {
                    session_id: s.into(),
                    user_id: "u".into(),
                    collection_id: c.into(),
                },
            ),
        };
        let counts = |db: sea_orm::DatabaseConnection| async move {
            let mut out = Vec::new();
            for c in ["c1", "c2"] {
                out.push(
                    docchat_ingest_service::collections::sessions_count(&db, c)
                        .await
                        .unwrap(),
                );
            }
            out
        };

        counter.handle(&event("created", "s1", "c1")).await.unwrap();
        let moved = event("changed", "s1", "c2");
        counter.handle(&moved).await.unwrap();
        counter.handle(&moved).await.unwrap(); // redelivered
        assert_eq!(counts(db.clone()).await, [0, 1], "{}", backend.name);
        // Unlinked: counted nowhere; linked again.
        counter.handle(&event("changed", "s1", "")).await.unwrap();
        assert_eq!(counts(db.clone()).await, [0, 0]);
        counter.handle(&event("changed", "s1", "c1")).await.unwrap();
        assert_eq!(counts(db.clone()).await, [1, 0]);
        // A session created without a collection, then linked; or whose change overtook its
        // creation: the change holds.
        counter.handle(&event("created", "s2", "")).await.unwrap();
        counter.handle(&event("changed", "s2", "c2")).await.unwrap();
        counter.handle(&event("changed", "s3", "c2")).await.unwrap();
        counter.handle(&event("created", "s3", "c1")).await.unwrap();
        assert_eq!(counts(db.clone()).await, [1, 2]);
        // Deleted where it is now; a late change does not bring it back.
        counter.handle(&event("deleted", "s2", "c2")).await.unwrap();
        counter.handle(&event("changed", "s2", "c1")).await.unwrap();
        counter.handle(&event("deleted", "s1", "c1")).await.unwrap();
        assert_eq!(counts(db.clone()).await, [0, 1]);
    }
}

docchat_common::vector_backend_tests! {
    /// A request over gRPC's 4 MiB default reaches the service (which answers for itself):
    /// the host sets the server's message limits from `max_message_bytes`, as the clients do,
    /// so a body the gateway accepts is never refused with tonic's internal text.
    async fn requests_over_four_mebibytes_reach_the_service(backend) {
        let stack = pipeline::stack(&backend, |_| {}).await;
        let alice = user("alice", false);
        let status = stack
            .ingest_client()
            .create_collection(stack.req(Service::Ingest, &alice,
                pb::CreateCollectionRequest {
                    name: "big".into(),
                    description: "x".repeat(5 << 20),
                    embedding_model: String::new(),
                    ..Default::default()
                },
            ))
            .await
            .unwrap_err();
        assert_eq!(status.code(), Code::InvalidArgument, "{status:?}");
        assert!(
            status.message().contains("description must be at most"),
            "{status:?}"
        );
        stack.stop().await;
    }
}
