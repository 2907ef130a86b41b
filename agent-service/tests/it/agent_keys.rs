//! Stored agent keys as the `Secrets` custom tools and custom agents resolve: by owner and
//! name, decrypted only here, sealed in the database (the plaintext is nowhere in the row),
//! and unreadable under another deployment secret.

use std::sync::Arc;

use docchat_agent_service::custom_agents::cipher::Cipher;
use docchat_agent_service::custom_agents::keys::KeyStore;
use docchat_agent_service::tools::custom::Secrets;
use docchat_common::Caller;
use docchat_proto::agent::v1 as pb;
use sea_orm::{ConnectionTrait, Statement};

fn caller(id: &str) -> Caller {
    Caller {
        user_id: id.into(),
        username: id.into(),
        email: format!("{id}@example.com"),
        roles: Vec::new(),
        groups: Vec::new(),
        permissions: Vec::new(),
        is_admin: false,
        is_service: false,
    }
}

docchat_common::backend_tests! {
    async fn stored_keys_resolve_by_owner_and_name_and_are_sealed_at_rest(backend) {
        let dir = tempfile::tempdir().unwrap();
        let db = docchat_common::db::connect(&backend.database_url(dir.path(), "agent")).await.unwrap();
        docchat_common::db::migrate::<docchat_agent_service::migrations::Migrator>(&db, "agent").await.unwrap();
        let store = KeyStore { db: db.clone(), cipher: Arc::new(Cipher::new(b"deployment secret one")) };
        let alice = caller("alice");
        let key = store
            .create(&alice, pb::NewAgentKey { name: "weather".into(), r#type: "private".into(), value: "wx-plain-123".into(), description: String::new() })
            .await
            .unwrap();
        assert_eq!(store.value("alice", "weather").await.as_deref(), Some("wx-plain-123"));
        assert_eq!(store.value("bob", "weather").await, None, "{}: another owner's name", backend.name);
        assert_eq!(store.value_of("alice", &key.id).await.unwrap().as_deref(), Some("wx-plain-123"));

        let rows = db
            .query_all(Statement::from_string(db.get_database_backend(), "SELECT * FROM agent_keys"))
            .await
            .unwrap();
        let sealed: Vec<u8> = rows[0].try_get("", "sealed").unwrap();
        assert!(!sealed.windows(12).any(|w| w == b"wx-plain-123"), "{}: the value is stored in clear", backend.name);

        let other = KeyStore { db: db.clone(), cipher: Arc::new(Cipher::new(b"deployment secret two")) };
        assert_eq!(other.value("alice", "weather").await, None, "{}", backend.name);
    }
}
