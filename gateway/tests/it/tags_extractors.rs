//! Tags on documents (linked_only, user_scope) and extractors (the PATCH rules of SPEC.md).

use reqwest::Method;
use serde_json::{Value, json};

use crate::documents::upload;
use crate::harness::{ADMIN_KEY, Stack, assert_error, eventually};

fn names(v: &Value) -> Vec<String> {
    let mut n: Vec<String> = v
        .as_array()
        .unwrap()
        .iter()
        .map(|t| t["name"].as_str().unwrap().to_owned())
        .collect();
    n.sort();
    n
}

docchat_common::backend_tests! {
    async fn tags_on_documents_and_their_scopes(backend) {
        let app = Stack::docchat(&backend).await;
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
        let (_, up) = upload(
            &app,
            &alice,
            "a.txt",
            b"tagged content about invoices".to_vec(),
        )
        .await;
        let (s, _) = app
            .call(
                Method::POST,
                &format!(
                    "/api/v1/uploads/{}/ingest?collection_id={cid}",
                    up["id"].as_str().unwrap()
                ),
                &alice,
                None,
            )
            .await;
        assert_eq!(s, 204);
        let path = format!("/api/v1/collections/{cid}");
        eventually("ingested", || async {
            app.call(Method::GET, &path, &alice, None).await.1["document_count"] == 1
        })
        .await;
        let (_, docs) = app
            .call(Method::GET, "/api/v1/documents", &alice, None)
            .await;
        let doc = docs[0]["id"].as_str().unwrap().to_owned();

        // Tags: one applied by alice, one of hers unlinked, two of bob's unlinked (names are
        // per user: bob's "draft" is his own).
        let (s, t) = app
            .call(
                Method::POST,
                &format!("/api/v1/documents/{doc}/tags"),
                &alice,
                Some(json!({"name": "finance", "description": "money matters", "format": "label"})),
            )
            .await;
        assert_eq!(s, 201, "{t}");
        assert_eq!(t["name"], "finance");
        // The description and format given with it are kept (they were dropped).
        assert_eq!((t["description"].as_str(), t["format"].as_str()), (Some("money matters"), Some("label")), "{t}");
        let (s, again) = app
            .call(Method::POST, &format!("/api/v1/documents/{doc}/tags"), &alice, Some(json!({"name": "finance", "description": "budgets"})))
            .await;
        assert_eq!(s, 201, "{again}");
        assert_eq!((again["id"].clone(), again["description"].as_str(), again["format"].as_str()), (t["id"].clone(), Some("budgets"), Some("label")), "{again}");
        let (s, _) = app
            .call(
                Method::POST,
                "/api/v1/tags",
                &alice,
                Some(json!({"name": "draft"})),
            )
            .await;
        assert_eq!(s, 201);
        let (s, _) = app
            .call(
                Method::POST,
                "/api/v1/tags",
                &bob,
                Some(json!({"name": "bobs"})),
            )
            .await;
        assert_eq!(s, 201);
        let (s, b) = app
            .call(
                Method::POST,
                "/api/v1/tags",
                &bob,
                Some(json!({"name": "draft"})),
            )
            .await;
        assert_eq!(s, 201, "{b}");
        let (s, b) = app
            .call(
                Method::POST,
                "/api/v1/tags",
                &bob,
                Some(json!({"name": "bobs"})),
            )
            .await;
        assert_error(s, &b, 409);
        let (s, b) = app
            .call(
                Method::POST,
                &format!("/api/v1/documents/{doc}/tags"),
                &bob,
                Some(json!({"name": "mine-now"})),
            )
            .await;
        assert_error(s, &b, 404);

        let (_, all) = app.call(Method::GET, "/api/v1/tags", &alice, None).await;
        assert_eq!(names(&all), ["draft", "finance"], "her own: bob's are his");
        let (_, linked) = app
            .call(Method::GET, "/api/v1/tags?linked_only=true", &bob, None)
            .await;
        assert_eq!(
            linked,
            json!([]),
            "alice's document, and so its tag, is not bob's to read"
        );
        let (_, scoped) = app
            .call(Method::GET, "/api/v1/tags?user_scope=true", &alice, None)
            .await;
        assert_eq!(
            names(&scoped),
            ["draft", "finance"],
            "on her documents plus her own"
        );
        let (_, both) = app
            .call(
                Method::GET,
                "/api/v1/tags?user_scope=true&linked_only=true",
                &alice,
                None,
            )
            .await;
        assert_eq!(names(&both), ["finance"], "own unlinked tags dropped");
        let (_, bob_scoped) = app
            .call(Method::GET, "/api/v1/tags?user_scope=true", &bob, None)
            .await;
        assert_eq!(names(&bob_scoped), ["bobs", "draft"]);

        let (s, tagged) = app
            .call(Method::GET, "/api/v1/tags/finance/documents", &alice, None)
            .await;
        assert_eq!(s, 200);
        assert_eq!(tagged[0]["id"], json!(doc));
        let (_, none) = app
            .call(Method::GET, "/api/v1/tags/finance/documents", &bob, None)
            .await;
        assert_eq!(none, json!([]), "bob cannot read alice's document");

        let (s, t) = app
            .call(
                Method::PATCH,
                "/api/v1/tags/draft",
                &alice,
                Some(json!({"description": "work in progress"})),
            )
            .await;
        assert_eq!((s, &t["description"]), (200, &json!("work in progress")));
        let (s, b) = app
            .call(
                Method::PATCH,
                "/api/v1/tags/draft",
                &bob,
                Some(json!({"description": "x"})),
            )
            .await;
        assert_eq!((s, &b["description"]), (200, &json!("x")), "his own draft");
        let (_, t) = app
            .call(Method::GET, "/api/v1/tags/draft", &alice, None)
            .await;
        assert_eq!(t["description"], "work in progress", "hers unchanged");
        let (s, r) = app
            .call(
                Method::DELETE,
                &format!("/api/v1/documents/{doc}/tags/finance"),
                &alice,
                None,
            )
            .await;
        assert_eq!(s, 200);
        assert!(r["tag_id"].is_string());
        let (s, b) = app
            .call(
                Method::DELETE,
                &format!("/api/v1/documents/{doc}/tags/finance"),
                &alice,
                None,
            )
            .await;
        assert_error(s, &b, 404);
        let (_, linked) = app
            .call(Method::GET, "/api/v1/tags?linked_only=true", &alice, None)
            .await;
        assert_eq!(linked, json!([]));
        let (s, _) = app
            .call(Method::DELETE, "/api/v1/tags/draft", &alice, None)
            .await;
        assert_eq!(s, 200);
        let (s, b) = app
            .call(Method::GET, "/api/v1/tags/draft", &alice, None)
            .await;
        assert_error(s, &b, 404);
        app.stop().await;
    }
}

docchat_common::backend_tests! {
    async fn extractors_follow_the_update_rules(backend) {
        let app = Stack::docchat(&backend).await;
        let (uid, key) = app.user("erin").await;
        let (s, e) = app
            .call(Method::POST, "/api/v1/extractors", &key, Some(json!({"name": "invoice", "description": "totals", "llm": "auto", "schema": "{\"type\": \"object\"}"})))
            .await;
        assert_eq!(s, 200, "{e}");
        for f in [
            "id",
            "name",
            "description",
            "llm",
            "schema",
            "prompt",
            "is_public",
            "created_at",
            "vision",
        ] {
            assert!(e.get(f).is_some(), "extractor lacks {f}");
        }
        let id = e["id"].as_str().unwrap().to_owned();
        let path = format!("/api/v1/extractors/{id}");
        let (s, b) = app
            .call(
                Method::POST,
                "/api/v1/extractors",
                &key,
                Some(json!({"name": "x", "description": ""})),
            )
            .await;
        assert_error(s, &b, 400);

        // PATCH needs EditExtractors: 401 without it.
        let (s, b) = app
            .call(Method::PATCH, &path, &key, Some(json!({"name": "renamed"})))
            .await;
        assert_error(s, &b, 401);
        let (_, role) = app
            .call(
                Method::POST,
                "/api/v1/roles",
                ADMIN_KEY,
                Some(json!({"name": "extractors", "description": ""})),
            )
            .await;
        let rid = role["id"].as_str().unwrap();
        app.call(
            Method::PUT,
            &format!("/api/v1/roles/{rid}/permissions/EditExtractors"),
            ADMIN_KEY,
            None,
        )
        .await;
        app.call(
            Method::PUT,
            &format!("/api/v1/users/{uid}/roles/extractors"),
            ADMIN_KEY,
            None,
        )
        .await;
        tokio::time::sleep(std::time::Duration::from_millis(600)).await; // auth cache

        let before = app.call(Method::GET, &path, &key, None).await.1;
        for bad in [
            json!({}),
            json!({"name": null}),
            json!({"llm": ""}),
            json!({"vision_llm": ""}),
            json!({"vision": "sometimes"}),
            json!({"max_num_chunks": 0}),
            json!({"name": "changed", "llm": ""}),
        ] {
            let (s, b) = app
                .call(Method::PATCH, &path, &key, Some(bad.clone()))
                .await;
            assert_error(s, &b, 400);
        }
        let (s, b) = app
            .call(Method::PATCH, &path, &key, Some(json!("not an object")))
            .await;
        assert_error(s, &b, 400);
        assert_eq!(
            app.call(Method::GET, &path, &key, None).await.1,
            before,
            "refused updates changed nothing"
        );

        let (s, e) = app
            .call(Method::PATCH, &path, &key, Some(json!({"name": "renamed", "schema": "", "prompt": "", "vision": "off", "max_num_chunks": 3, "guardrails_settings": {"exception_message": "no"}})))
            .await;
        assert_eq!(s, 200, "{e}");
        assert_eq!(e["name"], "renamed");
        assert_eq!(e["vision"], "off");
        assert_eq!(e["max_num_chunks"], 3);
        assert_ne!(
            e["schema"], before["schema"],
            "empty schema resets to the default"
        );
        assert_ne!(e["prompt"], "", "empty prompt resets to the default");
        assert_eq!(
            e["description"], "totals",
            "omitted fields keep their value"
        );
        let (_, e) = app
            .call(
                Method::PATCH,
                &path,
                &key,
                Some(json!({"guardrails_settings": {"guardrails_llm": "m"}})),
            )
            .await;
        assert_eq!(
            e["guardrails_settings"],
            json!({"guardrails_llm": "m"}),
            "replaced whole"
        );

        // Another user: 404 for read, update and delete.
        let (_, other) = app.user("frank").await;
        for (m, body) in [(Method::GET, None), (Method::DELETE, None)] {
            let (s, b) = app.call(m, &path, &other, body).await;
            assert_error(s, &b, 404);
        }
        let (s, b) = app
            .call(
                Method::PATCH,
                &path,
                ADMIN_KEY,
                Some(json!({"name": "admin's"})),
            )
            .await;
        assert_error(s, &b, 404);
        let (_, list) = app
            .call(
                Method::GET,
                "/api/v1/extractors?name_filter=ren",
                &key,
                None,
            )
            .await;
        assert_eq!(list.as_array().unwrap().len(), 1);
        let (s, _) = app.call(Method::DELETE, &path, &key, None).await;
        assert_eq!(s, 204);
        let (s, b) = app
            .call(Method::PATCH, &path, &key, Some(json!({"name": "gone"})))
            .await;
        assert_error(s, &b, 404);
        app.stop().await;
    }
}
