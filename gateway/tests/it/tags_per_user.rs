//! A tag belongs to the user who created it: names are unique per user, and nobody sees or
//! changes another user's tags (except through documents they can read).

use reqwest::Method;
use serde_json::{Value, json};

use crate::documents::upload;
use crate::harness::{Stack, assert_error, eventually};

/// (name, description) of each tag, sorted by name.
fn tags(v: &Value) -> Vec<(String, Option<String>)> {
    let mut out: Vec<(String, Option<String>)> = v
        .as_array()
        .unwrap()
        .iter()
        .map(|t| {
            (
                t["name"].as_str().unwrap().to_owned(),
                t["description"].as_str().map(str::to_owned),
            )
        })
        .collect();
    out.sort();
    out
}

fn tag(name: &str, description: Option<&str>) -> (String, Option<String>) {
    (name.to_owned(), description.map(str::to_owned))
}

/// A document of `key`'s, ingested: its id.
async fn document(app: &Stack, key: &str) -> String {
    let (_, col) = app
        .call(
            Method::POST,
            "/api/v1/collections",
            key,
            Some(json!({"name": "kb", "description": ""})),
        )
        .await;
    let cid = col["id"].as_str().unwrap().to_owned();
    let (_, up) = upload(
        app,
        key,
        "plans.txt",
        b"quarterly plans and budgets".to_vec(),
    )
    .await;
    let (s, b) = app
        .call(
            Method::POST,
            &format!(
                "/api/v1/uploads/{}/ingest?collection_id={cid}",
                up["id"].as_str().unwrap()
            ),
            key,
            None,
        )
        .await;
    assert_eq!(s, 204, "{b}");
    eventually("ingested", || async {
        app.call(Method::GET, "/api/v1/documents/count", key, None)
            .await
            .1["count"]
            == 1
    })
    .await;
    let (_, docs) = app.call(Method::GET, "/api/v1/documents", key, None).await;
    docs[0]["id"].as_str().unwrap().to_owned()
}

docchat_common::backend_tests! {
    /// Alice's tag names and descriptions stay hers: Bob does not see them, may use the
    /// same names for his own tags, and deleting his tag leaves hers on her document.
    async fn tags_belong_to_their_creator(backend) {
        let app = Stack::docchat(&backend).await;
        let (_, alice) = app.user("alice").await;
        let (_, bob) = app.user("bob").await;
        let doc = document(&app, &alice).await;
        let (s, t) = app
            .call(
                Method::POST,
                &format!("/api/v1/documents/{doc}/tags"),
                &alice,
                Some(json!({"name": "x"})),
            )
            .await;
        assert_eq!(s, 201, "{t}");
        let (s, _) = app
            .call(
                Method::PATCH,
                "/api/v1/tags/x",
                &alice,
                Some(json!({"description": "alice's x"})),
            )
            .await;
        assert_eq!(s, 200);
        let (s, _) = app
            .call(
                Method::POST,
                "/api/v1/tags",
                &alice,
                Some(json!({"name": "secret", "description": "merger plans"})),
            )
            .await;
        assert_eq!(s, 201);

        // Bob sees none of it, in any scope.
        for query in ["", "?linked_only=true", "?user_scope=true", "?linked_only=true&user_scope=true"] {
            let (s, list) = app
                .call(Method::GET, &format!("/api/v1/tags{query}"), &bob, None)
                .await;
            assert_eq!((s, &list), (200, &json!([])), "{}: {query}", app.backend);
        }
        for name in ["x", "secret"] {
            let (s, b) = app
                .call(Method::GET, &format!("/api/v1/tags/{name}"), &bob, None)
                .await;
            assert_error(s, &b, 404);
            let (s, b) = app
                .call(
                    Method::PATCH,
                    &format!("/api/v1/tags/{name}"),
                    &bob,
                    Some(json!({"description": "bob was here"})),
                )
                .await;
            assert_error(s, &b, 404);
            let (s, b) = app
                .call(Method::DELETE, &format!("/api/v1/tags/{name}"), &bob, None)
                .await;
            assert_error(s, &b, 404);
        }
        let (s, b) = app
            .call(
                Method::DELETE,
                &format!("/api/v1/documents/{doc}/tags/x"),
                &bob,
                None,
            )
            .await;
        assert_error(s, &b, 404);

        // The same names are free for Bob's own tags (a second one of his is a conflict).
        for (name, description) in [("secret", "bob's secret"), ("x", "bob's x")] {
            let (s, t) = app
                .call(
                    Method::POST,
                    "/api/v1/tags",
                    &bob,
                    Some(json!({"name": name, "description": description})),
                )
                .await;
            assert_eq!(s, 201, "{}: {t}", app.backend);
        }
        let (s, b) = app
            .call(Method::POST, "/api/v1/tags", &bob, Some(json!({"name": "x"})))
            .await;
        assert_error(s, &b, 409);
        let (_, list) = app.call(Method::GET, "/api/v1/tags", &bob, None).await;
        assert_eq!(
            tags(&list),
            [tag("secret", Some("bob's secret")), tag("x", Some("bob's x"))]
        );
        let (s, b) = app
            .call(
                Method::PATCH,
                "/api/v1/tags/secret",
                &bob,
                Some(json!({"description": "bob's plans"})),
            )
            .await;
        assert_eq!(s, 200, "{b}");

        // Deleting Bob's x leaves Alice's x on her document, and her descriptions as they were.
        let (s, _) = app
            .call(Method::DELETE, "/api/v1/tags/x", &bob, None)
            .await;
        assert_eq!(s, 200);
        let (_, list) = app.call(Method::GET, "/api/v1/tags", &alice, None).await;
        assert_eq!(
            tags(&list),
            [tag("secret", Some("merger plans")), tag("x", Some("alice's x"))]
        );
        let (s, tagged) = app
            .call(Method::GET, "/api/v1/tags/x/documents", &alice, None)
            .await;
        assert_eq!(s, 200);
        assert_eq!(tagged.as_array().unwrap().len(), 1, "{tagged}");
        assert_eq!(tagged[0]["id"], json!(doc));
        let (_, linked) = app
            .call(Method::GET, "/api/v1/tags?linked_only=true", &alice, None)
            .await;
        assert_eq!(tags(&linked), [tag("x", Some("alice's x"))]);
        let (_, list) = app.call(Method::GET, "/api/v1/tags", &bob, None).await;
        assert_eq!(tags(&list), [tag("secret", Some("bob's plans"))]);
        let (s, none) = app
            .call(Method::GET, "/api/v1/tags/x/documents", &bob, None)
            .await;
        assert_eq!((s, none), (200, json!([])));
        app.stop().await;
    }
}
