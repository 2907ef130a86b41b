//! chat-service over real gRPC on loopback with ingest-service beside it, on SQLite +
//! in-process bus and on PostgreSQL + RabbitMQ.

#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::panic,
    clippy::print_stderr
)] // test code: fail loudly

use std::time::Duration;

use docchat_common::config::Service;
use docchat_common::testing::user;
use docchat_proto::chat::v1 as pb;
use docchat_proto::common::v1::{Empty, PageRequest};
use docchat_proto::ingest::v1::{CollectionRef, CreateCollectionRequest};
use docchat_test_stack::Stack;
use tonic::Code;

mod agent;
mod attach;
mod background;
mod control;
mod lifecycle;
mod rate;
mod recovery;

docchat_common::backend_tests! {
    async fn sessions_link_collections_and_announce_themselves(backend) {
        // ingest-service reads its limits from admin-service.
        let stack = Stack::builder(&backend)
            .ingest()
            .chat_replicas(1)
            .models("[[models]]\nname = \"m1\"\ndisplay_name = \"Model One\"\nbase_url = \"http://127.0.0.1:1/v1\"\ndefault = true\n")
            .start()
            .await;
        let mut ic = stack.ingest_client();
        let mut cc = stack.chat_client(stack.chat());
        let alice = user("alice", false);
        let bob = user("bob", false);

        let col = ic
            .create_collection(stack.req(Service::Ingest,
                &alice,
                CreateCollectionRequest {
                    name: "c".into(),
                    description: String::new(),
                    embedding_model: String::new(),
                    ..Default::default()
                },
            ))
            .await
            .unwrap()
            .into_inner();
        let denied = cc
            .create_session(stack.req(Service::Chat,
                &bob,
                pb::CreateSessionRequest {
                    collection_id: Some(col.id.clone()),
                },
            ))
            .await
            .unwrap_err();
        assert_eq!(
            denied.code(),
            Code::NotFound,
            "{}: bob cannot link alice's collection",
            backend.name
        );
        let s = cc
            .create_session(stack.req(Service::Chat,
                &alice,
                pb::CreateSessionRequest {
                    collection_id: Some(col.id.clone()),
                },
            ))
            .await
            .unwrap()
            .into_inner();
        assert_eq!(s.collection_name.as_deref(), Some("c"));

        let deadline = tokio::time::Instant::now() + Duration::from_secs(20);
        loop {
            let got = ic
                .get_collection(stack.req(Service::Ingest,
                    &alice,
                    CollectionRef { id: col.id.clone() },
                ))
                .await
                .unwrap()
                .into_inner();
            if got.sessions_count == 1 {
                break;
            }
            assert!(
                tokio::time::Instant::now() < deadline,
                "{}: sessions_count never reached 1",
                backend.name
            );
            tokio::time::sleep(Duration::from_millis(50)).await;
        }

        let listed = cc
            .list_sessions(stack.req(Service::Chat, &bob, PageRequest::default()))
            .await
            .unwrap()
            .into_inner();
        assert!(listed.sessions.is_empty());
        let msgs = cc
            .list_messages(stack.req(Service::Chat,
                &alice,
                pb::ListMessagesRequest {
                    session_id: s.id.clone(),
                    offset: 0,
                    limit: 0,
                },
            ))
            .await
            .unwrap()
            .into_inner();
        assert!(msgs.messages.is_empty());
        let models = cc
            .list_models(stack.req(Service::Chat, &alice, Empty {}))
            .await
            .unwrap()
            .into_inner();
        // The models file's model (local GGUF models found in the models dir come after it).
        let configured: Vec<_> = models
            .models
            .iter()
            .filter(|m| m.provider != "local")
            .collect();
        assert_eq!(configured.len(), 1, "{models:?}");
        assert_eq!(configured[0].display_name, "Model One");
        assert!(configured[0].is_default);
        assert!(models.models.iter().filter(|m| m.is_default).count() == 1);

        let deleted = cc
            .delete_session(stack.req(Service::Chat,
                &alice,
                pb::SessionRef { id: s.id.clone() },
            ))
            .await
            .unwrap()
            .into_inner();
        assert_eq!(deleted.id, s.id);
        assert_eq!(
            cc.get_session(stack.req(Service::Chat,
                &alice,
                pb::SessionRef { id: s.id.clone() }
            ))
            .await
            .unwrap_err()
            .code(),
            Code::NotFound
        );
        stack.stop().await;
    }
}

docchat_common::backend_tests! {
    /// SessionNames answers the caller's sessions among the ids, with their names, and
    /// leaves out another user's and unknown ones.
    async fn session_names_answer_only_the_callers_sessions(backend) {
        use sea_orm::{ConnectionTrait, Statement};
        let stack = Stack::builder(&backend).chat_replicas(1).start().await;
        let (alice, bob) = (user("alice", false), user("bob", false));
        let named = stack.session(stack.chat(), &alice).await;
        let unnamed = stack.session(stack.chat(), &alice).await;
        let bobs = stack.session(stack.chat(), &bob).await;
        // A session is named by its first question; here directly.
        let db = stack.database(Service::Chat).await;
        let sql = match db.get_database_backend() {
            sea_orm::DbBackend::Postgres => "UPDATE chat_sessions SET name = 'Plans' WHERE id = $1",
            _ => "UPDATE chat_sessions SET name = 'Plans' WHERE id = ?",
        };
        db.execute(Statement::from_sql_and_values(db.get_database_backend(), sql, [named.clone().into()]))
            .await
            .unwrap();
        db.close().await.unwrap();

        let ask = |who, ids: Vec<String>| {
            let mut cc = stack.chat_client(stack.chat());
            let request = stack.req(Service::Chat, who, pb::SessionIds { ids });
            async move { cc.session_names(request).await.map(|r| r.into_inner().sessions) }
        };
        let ids = vec![named.clone(), unnamed.clone(), bobs.clone(), "nope".to_owned()];
        let mut got = ask(&alice, ids.clone()).await.unwrap();
        got.sort_by(|a, b| a.id.cmp(&b.id));
        let mut want = vec![
            pb::SessionName { id: named.clone(), name: Some("Plans".into()) },
            pb::SessionName { id: unnamed.clone(), name: None },
        ];
        want.sort_by(|a, b| a.id.cmp(&b.id));
        assert_eq!(got, want, "{}", backend.name);
        let theirs = ask(&bob, ids).await.unwrap();
        assert_eq!(theirs, [pb::SessionName { id: bobs, name: None }]);
        assert!(ask(&alice, vec![]).await.unwrap().is_empty());
        let many = ask(&alice, vec![named; 1001]).await.unwrap_err();
        assert_eq!(many.code(), Code::InvalidArgument);
        stack.stop().await;
    }
}
