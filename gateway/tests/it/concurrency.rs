//! Many requests at once: the per-user and system-wide limits hold exactly (the check and
//! the insert are one step), and concurrent writers to one database all succeed (on SQLite
//! a write waits its turn instead of failing with "database is locked").

use futures::future::join_all;
use reqwest::Method;
use serde_json::{Value, json};

use crate::documents::upload;
use crate::harness::{ADMIN_KEY, Stack, collection, eventually, set_global};

/// `n` collection creates of `key`, all at once: their statuses.
async fn create_collections(app: &Stack, key: &str, n: usize) -> Vec<u16> {
    join_all((0..n).map(|i| async move {
        let (s, b) = app
            .call(
                Method::POST,
                "/api/v1/collections",
                key,
                Some(json!({"name": format!("c{i}"), "description": ""})),
            )
            .await;
        assert!(s == 201 || s == 403, "{s}: {b}");
        s
    }))
    .await
}

async fn collection_count(app: &Stack, key: &str) -> usize {
    let (s, list) = app
        .call(Method::GET, "/api/v1/collections?limit=1000", key, None)
        .await;
    assert_eq!(s, 200, "{list}");
    list.as_array().unwrap().len()
}

fn count(statuses: &[u16], status: u16) -> usize {
    statuses.iter().filter(|s| **s == status).count()
}

/// Upload ids of `n` small text files.
async fn uploads(app: &Stack, key: &str, n: usize) -> Vec<String> {
    let mut ids = Vec::new();
    for i in 0..n {
        let text = format!("Document {i} is about topic number {i} and nothing else.");
        let (s, up) = upload(app, key, &format!("doc{i}.txt"), text.into_bytes()).await;
        assert_eq!(s, 200, "{up}");
        ids.push(up["id"].as_str().unwrap().to_owned());
    }
    ids
}

async fn ingest_all(app: &Stack, key: &str, collection: &str, ids: &[String]) -> Vec<u16> {
    join_all(ids.iter().map(|id| async move {
        let (s, b) = app
            .call(
                Method::POST,
                &format!("/api/v1/uploads/{id}/ingest?collection_id={collection}"),
                key,
                None,
            )
            .await;
        assert!(s == 204 || s == 403, "{s}: {b}");
        s
    }))
    .await
}

async fn document_count(app: &Stack, key: &str) -> i64 {
    let (s, n) = app
        .call(Method::GET, "/api/v1/documents/count", key, None)
        .await;
    assert_eq!(s, 200, "{n}");
    n["count"].as_i64().unwrap()
}

docchat_common::backend_tests! {
    /// Twenty creates at once against collection_limit_per_user = 5 make exactly five
    /// collections; against collection_limit (system-wide) exactly what is left of it.
    async fn parallel_creates_stop_exactly_at_the_collection_limits(backend) {
        let app = Stack::docchat(&backend).await;
        set_global(&app, "collection_limit_per_user", "5").await;
        let (_, alice) = app.user("alice").await;
        let statuses = create_collections(&app, &alice, 20).await;
        assert_eq!(count(&statuses, 201), 5, "{}: {statuses:?}", app.backend);
        assert_eq!(collection_count(&app, &alice).await, 5);

        // System-wide: alice holds 5 of 8, so two users racing for 20 more get 3.
        set_global(&app, "collection_limit", "8").await;
        let (_, bob) = app.user("bob").await;
        let (_, carol) = app.user("carol").await;
        let (b, c) = futures::join!(
            create_collections(&app, &bob, 10),
            create_collections(&app, &carol, 10)
        );
        assert_eq!(count(&b, 201) + count(&c, 201), 3, "{b:?} {c:?}");
        assert_eq!(
            collection_count(&app, &bob).await + collection_count(&app, &carol).await,
            3
        );
        app.stop().await;
    }

    /// Twenty ingestions at once against document_limit_per_user = 5 queue exactly five
    /// jobs and store exactly five documents.
    async fn parallel_ingests_stop_exactly_at_the_document_limit(backend) {
        let app = Stack::docchat(&backend).await;
        set_global(&app, "document_limit_per_user", "5").await;
        let (_, alice) = app.user("alice").await;
        let cid = collection(&app, &alice).await;
        let ids = uploads(&app, &alice, 20).await;
        let statuses = ingest_all(&app, &alice, &cid, &ids).await;
        assert_eq!(count(&statuses, 204), 5, "{}: {statuses:?}", app.backend);
        eventually("five documents stored", || async {
            document_count(&app, &alice).await == 5
        })
        .await;
        // Finished jobs count as documents: still no room.
        let more = uploads(&app, &alice, 1).await;
        assert_eq!(ingest_all(&app, &alice, &cid, &more).await, [403]);
        assert_eq!(document_count(&app, &alice).await, 5);
        app.stop().await;
    }

    /// Role changes, user creations, first uses of keys (each books the key's use), tags
    /// and document deletions, all at once while ingestion workers write: every request
    /// succeeds and every write is kept.
    async fn concurrent_writers_all_succeed(backend) {
        let app = Stack::docchat(&backend).await;
        let (s, b) = app
            .call(
                Method::POST,
                "/api/v1/roles",
                ADMIN_KEY,
                Some(json!({"name": "reviewers", "description": ""})),
            )
            .await;
        assert_eq!(s, 201, "{b}");
        let mut users = Vec::new();
        for i in 0..8 {
            users.push(app.user(&format!("user{i}")).await);
        }
        let (_, alice) = app.user("alice").await;
        let cid = collection(&app, &alice).await;
        let first = uploads(&app, &alice, 6).await;
        assert_eq!(ingest_all(&app, &alice, &cid, &first).await, [204; 6]);
        eventually("six documents", || async {
            document_count(&app, &alice).await == 6
        })
        .await;
        let (_, docs) = app
            .call(Method::GET, "/api/v1/documents", &alice, None)
            .await;
        let docs: Vec<String> = docs
            .as_array()
            .unwrap()
            .iter()
            .map(|d| d["id"].as_str().unwrap().to_owned())
            .collect();
        let second = uploads(&app, &alice, 10).await;
        let api = &app;

        let roles = users.iter().map(|(uid, _)| async move {
            let mut out = Vec::new();
            for method in [Method::PUT, Method::DELETE, Method::PUT] {
                let path = format!("/api/v1/users/{uid}/roles/reviewers");
                out.push(api.call(method, &path, ADMIN_KEY, None).await);
            }
            out
        });
        let keys = users.iter().map(|(_, key)| async move {
            vec![api.call(Method::GET, "/api/v1/users/current", key, None).await]
        });
        let creations = (0..8).map(|i| async move {
            vec![api
                .call(
                    Method::POST,
                    "/api/v1/admin/users",
                    ADMIN_KEY,
                    Some(json!({"username": format!("new{i}"), "email": format!("new{i}@example.com")})),
                )
                .await]
        });
        let tags = docs[..4].iter().map(|doc| {
            let alice = alice.clone();
            async move {
                let mut out = Vec::new();
                for tag in ["red", "green", "blue"] {
                    let path = format!("/api/v1/documents/{doc}/tags");
                    out.push(api.call(Method::POST, &path, &alice, Some(json!({"name": tag}))).await);
                }
                out
            }
        });
        let deletions = docs[4..].iter().map(|doc| {
            let alice = alice.clone();
            async move {
                let path = format!("/api/v1/documents/{doc}");
                vec![api.call(Method::DELETE, &path, &alice, None).await]
            }
        });
        let (roles, keys, creations, tags, deletions, ingests) = futures::join!(
            join_all(roles),
            join_all(keys),
            join_all(creations),
            join_all(tags),
            join_all(deletions),
            ingest_all(&app, &alice, &cid, &second),
        );
        let answers: Vec<(u16, Value)> = [roles, keys, creations, tags, deletions]
            .into_iter()
            .flatten()
            .flatten()
            .collect();
        let failed: Vec<&(u16, Value)> = answers.iter().filter(|(s, _)| *s >= 300).collect();
        assert!(failed.is_empty(), "{}: {failed:?}", app.backend);
        assert_eq!(ingests, [204; 10]);

        eventually("every ingestion stored", || async {
            document_count(&app, &alice).await == 14
        })
        .await;
        let (_, listed) = app
            .call(Method::GET, "/api/v1/users?limit=100", ADMIN_KEY, None)
            .await;
        let listed = listed.as_array().unwrap();
        for (uid, _) in &users {
            let user = listed.iter().find(|u| u["id"] == json!(uid)).unwrap();
            assert!(
                user["roles"].as_array().unwrap().contains(&json!("reviewers")),
                "{user}"
            );
        }
        assert_eq!(listed.len(), 1 + 8 + 1 + 8, "admin, users, alice, new users");
        for tag in ["red", "green", "blue"] {
            let (s, tagged) = app
                .call(Method::GET, &format!("/api/v1/tags/{tag}/documents"), &alice, None)
                .await;
            assert_eq!(s, 200);
            assert_eq!(tagged.as_array().unwrap().len(), 4, "{tag}: {tagged}");
        }
        app.stop().await;
    }
}
