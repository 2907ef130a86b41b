//! Agent documents through REST: a file an agent stored (PutAgentFile with the user's
//! identity, as agent-service does) downloads from `/file` for its owner only, and lists
//! under /api/v1/documents with its chat session's name and visibility.

use std::time::Duration;

use docchat_common::Caller;
use docchat_common::config::Service;
use docchat_common::testing::user;
use reqwest::Method;
use sea_orm::{ConnectionTrait, Statement};
use serde_json::{Value, json};

use crate::completions::{app_with, collection_with, session, upstream};
use crate::harness::{Stack, assert_error, read};

/// The user behind a REST key, as agent-service acts for it.
fn acting(user_id: &str, username: &str) -> Caller {
    Caller {
        user_id: user_id.to_owned(),
        ..user(username, false)
    }
}

/// A GET of `/file` with `key`: the response, unread.
async fn download(app: &Stack, key: &str, query: &str) -> reqwest::Response {
    app.http(Method::GET, &format!("/file{query}"), Some(key))
        .send()
        .await
        .unwrap()
}

fn header<'a>(r: &'a reqwest::Response, name: &str) -> &'a str {
    r.headers()
        .get(name)
        .unwrap_or_else(|| panic!("no {name} header"))
        .to_str()
        .unwrap()
}

docchat_common::backend_tests! {
    async fn agent_files_download_from_file_for_their_owner_only(backend) {
        let app = Stack::docchat(&backend).await;
        let (alice_id, alice) = app.user("alice").await;
        let (_, bob) = app.user("bob").await;
        let chat = session(&app, &alice, None).await;
        // Over 64 KiB: the body comes in several pieces.
        let csv: Vec<u8> = "month,sales\n".bytes().chain((0..20_000).flat_map(|i| format!("{i},{}\n", i * 7).into_bytes())).collect();
        let doc = app
            .put_agent_file(&acting(&alice_id, "alice"), &chat, "reports/Q3 résumé.csv", "", &csv)
            .await
            .unwrap();

        let r = download(&app, &alice, &format!("?id={}&name=reports%2FQ3%20r%C3%A9sum%C3%A9.csv", doc.id)).await;
        assert_eq!(r.status(), 200, "{}", backend.name);
        assert_eq!(header(&r, "content-type"), "text/csv");
        assert_eq!(
            header(&r, "content-disposition"),
            "attachment; filename=\"Q3 r_sum_.csv\"; filename*=UTF-8''Q3%20r%C3%A9sum%C3%A9.csv"
        );
        assert_eq!(header(&r, "content-length"), csv.len().to_string());
        assert_eq!(header(&r, "x-content-type-options"), "nosniff");
        let body = r.bytes().await.unwrap();
        assert!(body.as_ref() == csv.as_slice(), "the file's bytes, unchanged");

        // No known extension: octet-stream; the name is optional.
        let raw = app
            .put_agent_file(&acting(&alice_id, "alice"), &chat, "out/LICENSE", "", b"MIT")
            .await
            .unwrap();
        let r = download(&app, &alice, &format!("?id={}", raw.id)).await;
        assert_eq!(r.status(), 200);
        assert_eq!(header(&r, "content-type"), "application/octet-stream");
        assert_eq!(header(&r, "content-disposition"), "attachment; filename=\"LICENSE\"; filename*=UTF-8''LICENSE");
        assert_eq!(r.bytes().await.unwrap().as_ref(), b"MIT");

        // Another user's file is not found; no id is a bad request.
        let (s, b) = read(download(&app, &bob, &format!("?id={}&name=x.csv", doc.id)).await).await;
        assert_error(s, &b, 404);
        let (s, b) = read(download(&app, &alice, "?id=00000000-0000-4000-8000-000000000000").await).await;
        assert_error(s, &b, 404);
        for query in ["", "?name=x.csv", "?id="] {
            let (s, b) = read(download(&app, &alice, query).await).await;
            assert_error(s, &b, 400);
        }
        let (s, _) = read(app.http(Method::GET, &format!("/file?id={}", doc.id), None).send().await.unwrap()).await;
        assert_eq!(s, 401);

        // A document of a public collection: bob may read it, but downloads only his own.
        let cid = collection_with(&app, &alice, "public.txt", b"Public notes.".to_vec()).await;
        let db = app.database(Service::Ingest).await;
        let sql = match db.get_database_backend() {
            sea_orm::DbBackend::Postgres => "UPDATE collections SET is_public = TRUE WHERE id = $1",
            _ => "UPDATE collections SET is_public = 1 WHERE id = ?",
        };
        db.execute(Statement::from_sql_and_values(db.get_database_backend(), sql, [cid.clone().into()]))
            .await
            .unwrap();
        db.close().await.unwrap();
        let (s, listed) = app.call(Method::GET, &format!("/api/v1/collections/{cid}/documents"), &bob, None).await;
        assert_eq!(s, 200, "{listed}");
        let public = listed[0]["id"].as_str().unwrap().to_owned();
        let (s, b) = read(download(&app, &bob, &format!("?id={public}")).await).await;
        assert_error(s, &b, 404);
        let r = download(&app, &alice, &format!("?id={public}")).await;
        assert_eq!((r.status().as_u16(), header(&r, "content-type")), (200, "text/plain"));
        assert_eq!(r.bytes().await.unwrap().as_ref(), b"Public notes.");
        app.stop().await;
    }
}

docchat_common::backend_tests! {
    async fn agent_documents_list_with_their_sessions_name_and_visibility(backend) {
        let model = upstream(Duration::ZERO).await;
        let app = app_with(&backend, &model).await;
        let (alice_id, alice) = app.user("alice").await;
        let (bob_id, bob) = app.user("bob").await;
        let (as_alice, as_bob) = (acting(&alice_id, "alice"), acting(&bob_id, "bob"));

        // A session is named after its first question.
        let named = session(&app, &alice, None).await;
        let (s, answer) = app
            .call(Method::POST, &format!("/api/v1/chats/{named}/completions"), &alice,
                Some(json!({"message": "Plan the trip", "rag_config": {"rag_type": "llm_only"}})))
            .await;
        assert_eq!(s, 200, "{answer}");
        let (_, chat) = app.call(Method::GET, &format!("/api/v1/chats/{named}"), &alice, None).await;
        assert_eq!(chat["name"], "Plan the trip", "{chat}");
        let unnamed = session(&app, &alice, None).await;

        let b = app.put_agent_file(&as_alice, &named, "b.txt", "", b"b").await.unwrap();
        let a = app.put_agent_file(&as_alice, &named, "a.txt", "", b"a").await.unwrap();
        app.put_agent_file(&as_alice, &unnamed, "c.txt", "", b"c").await.unwrap();
        collection_with(&app, &alice, "z.txt", b"Uploaded, not generated.".to_vec()).await;
        // Bob's document claims alice's session: he cannot open it, so it stays unnamed.
        app.put_agent_file(&as_bob, &named, "d.txt", "", b"d").await.unwrap();

        let list = |key: String, query: &'static str| {
            let app = &app;
            async move {
                let (s, body) = app.call(Method::GET, &format!("/api/v1/documents{query}"), &key, None).await;
                assert_eq!(s, 200, "{body}");
                body.as_array().unwrap().clone()
            }
        };
        let of_named = app
            .call(Method::GET, &format!("/api/v1/documents?chat_session_id={named}&sort_column=name&ascending=true"), &alice, None)
            .await
            .1;
        let rows = of_named.as_array().unwrap();
        let names: Vec<&str> = rows.iter().map(|d| d["name"].as_str().unwrap()).collect();
        assert_eq!(names, ["a.txt", "b.txt"], "{}: {of_named}", backend.name);
        for d in rows {
            assert_eq!((&d["chat_session_id"], &d["chat_session_name"], &d["chat_session_visible"]),
                (&json!(named), &json!("Plan the trip"), &json!(true)), "{d}");
        }
        let (s, count) = app.call(Method::GET, &format!("/api/v1/documents/count?chat_session_id={named}"), &alice, None).await;
        assert_eq!((s, &count["count"]), (200, &json!(2)));
        let (_, of_unnamed) = app.call(Method::GET, &format!("/api/v1/documents?chat_session_id={unnamed}"), &alice, None).await;
        let d = &of_unnamed[0];
        assert_eq!((&d["name"], &d["chat_session_visible"]), (&json!("c.txt"), &json!(true)), "{d}");
        assert!(d.get("chat_session_name").is_none(), "a visible session without a name: {d}");
        let (s, e) = app.call(Method::GET, "/api/v1/documents?chat_session_id=nope", &alice, None).await;
        assert_error(s, &e, 400);

        // Grouped by source chat: whole groups, uploads last, names in order within.
        let grouped = list(alice.clone(), "?group_by_source_chat=true&sort_column=name&ascending=true").await;
        let names: Vec<&str> = grouped.iter().map(|d| d["name"].as_str().unwrap()).collect();
        let want = if named < unnamed {
            ["a.txt", "b.txt", "c.txt", "z.txt"]
        } else {
            ["c.txt", "a.txt", "b.txt", "z.txt"]
        };
        assert_eq!(names, want, "{}", backend.name);
        let upload = grouped.last().unwrap();
        assert_eq!(upload["chat_session_visible"], false, "{upload}");
        assert!(upload.get("chat_session_id").is_none() && upload.get("chat_session_name").is_none(), "{upload}");

        // One document, and documents by tag, the same way.
        let (_, one) = app.call(Method::GET, &format!("/api/v1/documents/{}", a.id), &alice, None).await;
        assert_eq!((&one["chat_session_name"], &one["chat_session_visible"]), (&json!("Plan the trip"), &json!(true)), "{one}");
        let (s, _) = app.call(Method::POST, &format!("/api/v1/documents/{}/tags", b.id), &alice, Some(json!({"name": "draft"}))).await;
        assert_eq!(s, 201);
        let (_, tagged) = app.call(Method::GET, "/api/v1/tags/draft/documents", &alice, None).await;
        assert_eq!(tagged[0]["chat_session_name"], "Plan the trip", "{tagged}");

        // Bob's document under alice's session: not visible to him, no name.
        let theirs = list(bob.clone(), "").await;
        assert_eq!(theirs.len(), 1, "{theirs:?}");
        let d: &Value = &theirs[0];
        assert_eq!((&d["name"], &d["chat_session_id"], &d["chat_session_visible"]), (&json!("d.txt"), &json!(named), &json!(false)), "{d}");
        assert!(d.get("chat_session_name").is_none(), "{d}");
        app.stop().await;
    }
}
