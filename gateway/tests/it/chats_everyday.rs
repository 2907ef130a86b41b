//! The everyday chat-session calls of the h2oGPTe client: counting, renaming, moving a
//! session between collections, a collection's and a document's sessions, and deleting
//! messages — each for the caller's own things only (another user's is a 404 that changes
//! nothing).

use std::time::Duration;

use docchat_common::Caller;
use docchat_common::config::Service;
use docchat_common::testing::user;
use reqwest::Method;
use serde_json::{Value, json};

use crate::completions::{ANSWER, app_with, collection_with, session, stream, upstream};
use crate::harness::{Stack, assert_error, eventually};

/// A new collection of `key`'s named `name`: its id.
async fn named_collection(app: &Stack, key: &str, name: &str) -> String {
    let (s, col) = app
        .call(
            Method::POST,
            "/api/v1/collections",
            key,
            Some(json!({"name": name, "description": ""})),
        )
        .await;
    assert_eq!(s, 201, "{col}");
    col["id"].as_str().unwrap().to_owned()
}

async fn get(app: &Stack, key: &str, path: &str) -> Value {
    let (s, body) = app.call(Method::GET, path, key, None).await;
    assert_eq!(s, 200, "{path}: {body}");
    body
}

/// The ids of a list of sessions (or messages), in order.
fn ids(list: &Value) -> Vec<String> {
    list.as_array()
        .unwrap_or_else(|| panic!("a list: {list}"))
        .iter()
        .map(|s| s["id"].as_str().unwrap().to_owned())
        .collect()
}

/// Waits until collection `cid` of `key` counts `n` chat sessions (it follows the
/// `chat.session.*` events).
async fn wait_sessions_count(app: &Stack, key: &str, cid: &str, n: u64) {
    let path = format!("/api/v1/collections/{cid}");
    eventually(&format!("{cid} has sessions_count {n}"), || async {
        app.call(Method::GET, &path, key, None).await.1["sessions_count"] == n
    })
    .await;
}

/// Rows of `table` (message_references or message_meta) of the message `id`.
async fn rows_of(app: &Stack, table: &str, id: &str) -> i64 {
    app.count_rows(Service::Chat, &format!("{table} WHERE message_id = '{id}'"))
        .await
}

/// The user behind a REST key, as agent-service acts for it.
fn acting(user_id: &str, username: &str) -> Caller {
    Caller {
        user_id: user_id.to_owned(),
        ..user(username, false)
    }
}

/// Asks `question` in `chat` (not streamed): the stored question's and reply's ids.
async fn ask(app: &Stack, key: &str, chat: &str, question: &str, rag: bool) -> (String, String) {
    let mut body = json!({"message": question, "stream": false});
    if rag {
        body["rag_config"] = json!({"rag_type": "rag"});
    }
    let (s, answer) = app
        .call(
            Method::POST,
            &format!("/api/v1/chats/{chat}/completions"),
            key,
            Some(body),
        )
        .await;
    assert_eq!(s, 200, "{answer}");
    let reply = answer["message_id"].as_str().unwrap().to_owned();
    let messages = get(app, key, &format!("/api/v1/chats/{chat}/messages")).await;
    let question_id = messages
        .as_array()
        .unwrap()
        .iter()
        .find(|m| m["id"] == reply.as_str())
        .map(|m| m["reply_to"].as_str().unwrap().to_owned())
        .unwrap();
    (question_id, reply)
}

docchat_common::backend_tests! {
    /// GET /chats/count counts the caller's sessions; `count` is not taken for a session
    /// id, and session ids still are.
    async fn chat_sessions_are_counted_per_user(backend) {
        let app = Stack::docchat(&backend).await;
        let (_, alice) = app.user("alice").await;
        let (_, bob) = app.user("bob").await;
        assert_eq!(get(&app, &alice, "/api/v1/chats/count").await, json!({"count": 0}));
        let first = session(&app, &alice, None).await;
        session(&app, &alice, None).await;
        session(&app, &bob, None).await;
        assert_eq!(
            get(&app, &alice, "/api/v1/chats/count").await,
            json!({"count": 2}),
            "{}",
            app.backend
        );
        assert_eq!(get(&app, &bob, "/api/v1/chats/count").await, json!({"count": 1}));
        // The parameter route still answers ids.
        let got = get(&app, &alice, &format!("/api/v1/chats/{first}")).await;
        assert_eq!(got["id"], first.as_str());
        let (s, b) = app
            .call(Method::DELETE, &format!("/api/v1/chats/{first}"), &alice, None)
            .await;
        assert_eq!(s, 200, "{b}");
        assert_eq!(get(&app, &alice, "/api/v1/chats/count").await, json!({"count": 1}));
        app.stop().await;
    }

    /// PATCH /chats/{id} renames the caller's session and answers it as GET does; names are
    /// checked; another user's session is a 404 and keeps its name.
    async fn chat_sessions_are_renamed_by_their_owner(backend) {
        let app = Stack::docchat(&backend).await;
        let (_, alice) = app.user("alice").await;
        let (_, bob) = app.user("bob").await;
        let chat = session(&app, &alice, None).await;
        let path = format!("/api/v1/chats/{chat}");

        let (s, renamed) = app
            .call(Method::PATCH, &path, &alice, Some(json!({"name": "  Budget 2026  ", "extra": 1})))
            .await;
        assert_eq!(s, 200, "{}: {renamed}", app.backend);
        assert_eq!(renamed["name"], "Budget 2026");
        assert_eq!(renamed, get(&app, &alice, &path).await, "the answer is the session as GET shows it");
        let listed = get(&app, &alice, "/api/v1/chats").await;
        assert_eq!(listed[0]["name"], "Budget 2026");
        let longest = "é".repeat(255);
        let (s, b) = app
            .call(Method::PATCH, &path, &alice, Some(json!({"name": longest})))
            .await;
        assert_eq!((s, &b["name"]), (200, &json!(longest)));

        // Bad names: nothing changes.
        for body in [
            json!({"name": ""}),
            json!({"name": "   "}),
            json!({"name": "é".repeat(256)}),
            json!({"name": null}),
            json!({"name": 7}),
            json!({}),
        ] {
            let (s, b) = app.call(Method::PATCH, &path, &alice, Some(body.clone())).await;
            assert_error(s, &b, 400);
        }
        assert_eq!(get(&app, &alice, &path).await["name"], json!(longest));

        // Another user's session, and one that does not exist.
        let (s, b) = app
            .call(Method::PATCH, &path, &bob, Some(json!({"name": "mine now"})))
            .await;
        assert_error(s, &b, 404);
        assert_eq!(get(&app, &alice, &path).await["name"], json!(longest));
        let (s, b) = app
            .call(
                Method::PATCH,
                &format!("/api/v1/chats/{}", uuid::Uuid::now_v7()),
                &alice,
                Some(json!({"name": "x"})),
            )
            .await;
        assert_error(s, &b, 404);
        app.stop().await;
    }

    /// GET /collections/{id}/chats and its count: the caller's sessions linked to that
    /// collection only, paged; a collection the caller cannot read is a 404.
    async fn a_collections_chat_sessions_are_listed_and_counted(backend) {
        let app = Stack::docchat(&backend).await;
        let (_, alice) = app.user("alice").await;
        let (_, bob) = app.user("bob").await;
        let alpha = named_collection(&app, &alice, "alpha").await;
        let beta = named_collection(&app, &alice, "beta").await;
        let bobs = named_collection(&app, &bob, "bobs").await;
        let a1 = session(&app, &alice, Some(&alpha)).await;
        let a2 = session(&app, &alice, Some(&alpha)).await;
        let b1 = session(&app, &alice, Some(&beta)).await;
        session(&app, &alice, None).await;
        session(&app, &bob, Some(&bobs)).await;

        let list = get(&app, &alice, &format!("/api/v1/collections/{alpha}/chats")).await;
        // Newest first, as GET /chats.
        assert_eq!(ids(&list), [a2.clone(), a1.clone()], "{}", app.backend);
        assert_eq!(list[0], get(&app, &alice, &format!("/api/v1/chats/{a2}")).await);
        assert_eq!(list[0]["collection_id"], alpha.as_str());
        assert_eq!(list[0]["collection_name"], "alpha");
        assert_eq!(
            ids(&get(&app, &alice, &format!("/api/v1/collections/{beta}/chats")).await),
            [b1]
        );
        for (query, want) in [
            ("?limit=1", vec![a2.clone()]),
            ("?offset=1&limit=1", vec![a1.clone()]),
            ("?offset=2", vec![]),
            // The client sends its username filter; the caller's own sessions are listed.
            ("?offset=0&limit=10&username=bob", vec![a2.clone(), a1.clone()]),
        ] {
            let list = get(&app, &alice, &format!("/api/v1/collections/{alpha}/chats{query}")).await;
            assert_eq!(ids(&list), want, "{query}");
        }
        let count = |key: String, cid: String| {
            let app = &app;
            async move { get(app, &key, &format!("/api/v1/collections/{cid}/chats/count")).await }
        };
        assert_eq!(count(alice.clone(), alpha.clone()).await, json!({"count": 2}));
        assert_eq!(count(alice.clone(), beta.clone()).await, json!({"count": 1}));
        assert_eq!(count(bob.clone(), bobs.clone()).await, json!({"count": 1}));

        // Another user's collection (and an unknown one) is not found, listed or counted.
        for (key, cid) in [(&bob, &alpha), (&alice, &bobs), (&alice, &uuid::Uuid::now_v7().to_string())] {
            for path in [
                format!("/api/v1/collections/{cid}/chats"),
                format!("/api/v1/collections/{cid}/chats/count"),
            ] {
                let (s, b) = app.call(Method::GET, &path, key, None).await;
                assert_error(s, &b, 404);
            }
        }
        for query in ["?offset=-1", "?limit=x", "?offset=9223372036854775808"] {
            let (s, b) = app
                .call(Method::GET, &format!("/api/v1/collections/{alpha}/chats{query}"), &alice, None)
                .await;
            assert_error(s, &b, 400);
        }
        app.stop().await;
    }

    /// PUT and DELETE /chats/{id}/collection move the caller's session between the
    /// collections the caller can read, and the collections' sessions_count follows; another
    /// user's session or collection is a 404 that changes nothing.
    async fn chat_sessions_move_between_collections(backend) {
        let app = Stack::docchat(&backend).await;
        let (_, alice) = app.user("alice").await;
        let (_, bob) = app.user("bob").await;
        let alpha = named_collection(&app, &alice, "alpha").await;
        let beta = named_collection(&app, &alice, "beta").await;
        let bobs = named_collection(&app, &bob, "bobs").await;
        let chat = session(&app, &alice, Some(&alpha)).await;
        let path = format!("/api/v1/chats/{chat}/collection");
        let session_path = format!("/api/v1/chats/{chat}");
        wait_sessions_count(&app, &alice, &alpha, 1).await;

        let (s, moved) = app
            .call(Method::PUT, &path, &alice, Some(json!({"collection_id": beta})))
            .await;
        assert_eq!(s, 200, "{}: {moved}", app.backend);
        assert_eq!(moved["collection_id"], beta.as_str());
        assert_eq!(moved["collection_name"], "beta");
        assert_eq!(moved, get(&app, &alice, &session_path).await);
        assert_eq!(get(&app, &alice, &format!("/api/v1/collections/{alpha}/chats")).await, json!([]));
        assert_eq!(ids(&get(&app, &alice, &format!("/api/v1/collections/{beta}/chats")).await), [chat.as_str()]);
        wait_sessions_count(&app, &alice, &beta, 1).await;
        wait_sessions_count(&app, &alice, &alpha, 0).await;
        // Linking it where it is changes nothing.
        let (s, same) = app
            .call(Method::PUT, &path, &alice, Some(json!({"collection_id": beta})))
            .await;
        assert_eq!((s, &same), (200, &moved));

        // Unlinked: no collection in the answer, in no collection's list or count.
        let (s, unlinked) = app.call(Method::DELETE, &path, &alice, None).await;
        assert_eq!(s, 200, "{unlinked}");
        assert_eq!(unlinked["id"], chat.as_str());
        assert!(unlinked.get("collection_id").is_none() && unlinked.get("collection_name").is_none(), "{unlinked}");
        assert_eq!(unlinked, get(&app, &alice, &session_path).await);
        assert_eq!(
            get(&app, &alice, &format!("/api/v1/collections/{beta}/chats/count")).await,
            json!({"count": 0})
        );
        wait_sessions_count(&app, &alice, &beta, 0).await;
        let (s, again) = app.call(Method::DELETE, &path, &alice, None).await;
        assert_eq!((s, &again), (200, &unlinked));

        // Another user's session, another user's collection, unknown ones: 404, unchanged.
        let bobs_chat = session(&app, &bob, Some(&bobs)).await;
        let attempts = [
            (Method::PUT, path.clone(), &bob, Some(json!({"collection_id": bobs}))),
            (Method::DELETE, format!("/api/v1/chats/{bobs_chat}/collection"), &alice, None),
            (Method::PUT, format!("/api/v1/chats/{bobs_chat}/collection"), &alice, Some(json!({"collection_id": alpha}))),
            (Method::PUT, format!("/api/v1/chats/{bobs_chat}/collection"), &bob, Some(json!({"collection_id": alpha}))),
            (Method::PUT, path.clone(), &alice, Some(json!({"collection_id": bobs}))),
            (Method::PUT, path.clone(), &alice, Some(json!({"collection_id": uuid::Uuid::now_v7().to_string()}))),
            (Method::PUT, format!("/api/v1/chats/{}/collection", uuid::Uuid::now_v7()), &alice, Some(json!({"collection_id": alpha}))),
        ];
        for (method, p, key, body) in attempts {
            let (s, b) = app.call(method.clone(), &p, key, body).await;
            assert_error(s, &b, 404);
        }
        assert_eq!(get(&app, &alice, &session_path).await, unlinked);
        assert_eq!(get(&app, &bob, &format!("/api/v1/chats/{bobs_chat}")).await["collection_id"], bobs.as_str());
        // Bad bodies.
        for body in [json!({"collection_id": ""}), json!({"collection_id": "  "}), json!({}), json!({"collection_id": 5})] {
            let (s, b) = app.call(Method::PUT, &path, &alice, Some(body)).await;
            assert_error(s, &b, 400);
        }
        let (s, b) = app.call(Method::PUT, &path, &alice, None).await;
        assert_error(s, &b, 400);

        // Linked again, then deleted: the collection's count follows it to the end.
        let (s, b) = app
            .call(Method::PUT, &path, &alice, Some(json!({"collection_id": alpha})))
            .await;
        assert_eq!(s, 200, "{b}");
        wait_sessions_count(&app, &alice, &alpha, 1).await;
        let (s, b) = app.call(Method::DELETE, &session_path, &alice, None).await;
        assert_eq!(s, 200, "{b}");
        wait_sessions_count(&app, &alice, &alpha, 0).await;
        app.stop().await;
    }

    /// GET /documents/{id}/chats: the caller's session that wrote an agent document; an
    /// uploaded document has none; a document the caller cannot read is a 404.
    async fn a_documents_chat_session_is_the_one_that_wrote_it(backend) {
        let app = Stack::docchat(&backend).await;
        let (alice_id, alice) = app.user("alice").await;
        let (_, bob) = app.user("bob").await;
        let chat = session(&app, &alice, None).await;
        let doc = app
            .put_agent_file(&acting(&alice_id, "alice"), &chat, "out/report.csv", "", b"a,b\n1,2\n")
            .await
            .unwrap();
        let path = format!("/api/v1/documents/{}/chats", doc.id);
        let list = get(&app, &alice, &path).await;
        assert_eq!(list, json!([get(&app, &alice, &format!("/api/v1/chats/{chat}")).await]), "{}", app.backend);
        assert_eq!(ids(&get(&app, &alice, &format!("{path}?offset=0&limit=1")).await), [chat.as_str()]);
        assert_eq!(get(&app, &alice, &format!("{path}?offset=1")).await, json!([]));
        for query in ["?offset=-1", "?limit=nope"] {
            let (s, b) = app.call(Method::GET, &format!("{path}{query}"), &alice, None).await;
            assert_error(s, &b, 400);
        }

        // Bob cannot read the document; nobody can read an unknown one.
        let (s, b) = app.call(Method::GET, &path, &bob, None).await;
        assert_error(s, &b, 404);
        let (s, b) = app
            .call(Method::GET, &format!("/api/v1/documents/{}/chats", uuid::Uuid::now_v7()), &alice, None)
            .await;
        assert_error(s, &b, 404);

        // An uploaded document was written by no session.
        let cid = crate::harness::collection(&app, &alice).await;
        crate::harness::ingest(&app, &alice, &cid, "plans.txt", b"quarterly plans".to_vec()).await;
        crate::harness::wait_documents(&app, &alice, &cid, 1).await;
        let docs = get(&app, &alice, &format!("/api/v1/collections/{cid}/documents")).await;
        let uploaded = docs[0]["id"].as_str().unwrap();
        assert_eq!(get(&app, &alice, &format!("/api/v1/documents/{uploaded}/chats")).await, json!([]));

        // The document stays once its session is deleted, and names no session.
        let (s, b) = app.call(Method::DELETE, &format!("/api/v1/chats/{chat}"), &alice, None).await;
        assert_eq!(s, 200, "{b}");
        assert_eq!(get(&app, &alice, &path).await, json!([]));
        app.stop().await;
    }

    /// DELETE /messages/{ids}: all or nothing, the caller's messages only; a question goes
    /// with its reply, a reply alone leaves its question; references and metadata go too,
    /// and the session's latest message follows.
    async fn chat_messages_are_deleted_all_or_nothing(backend) {
        let model = upstream(Duration::ZERO).await;
        let app = app_with(&backend, &model).await;
        let (_, alice) = app.user("alice").await;
        let (_, bob) = app.user("bob").await;
        let cid = collection_with(
            &app,
            &alice,
            "france.md",
            b"# France\n\nParis is the capital of France. The Seine flows through Paris.\n".to_vec(),
        )
        .await;
        let chat = session(&app, &alice, Some(&cid)).await;
        let (q1, r1) = ask(&app, &alice, &chat, "What is the capital of France?", true).await;
        let (q2, r2) = ask(&app, &alice, &chat, "Which river flows through Paris?", true).await;
        let (q3, r3) = ask(&app, &alice, &chat, "Anything else?", false).await;
        let bobs_chat = session(&app, &bob, None).await;
        let (bq, br) = ask(&app, &bob, &bobs_chat, "Hello?", false).await;
        for reply in [&r1, &r2] {
            assert!(rows_of(&app, "message_references", reply).await > 0, "{}: RAG cited", app.backend);
        }
        for reply in [&r1, &r2, &r3] {
            assert!(rows_of(&app, "message_meta", reply).await > 0);
        }
        let messages_path = format!("/api/v1/chats/{chat}/messages");
        let all = vec![q1.clone(), r1.clone(), q2.clone(), r2.clone(), q3.clone(), r3.clone()];
        assert_eq!(ids(&get(&app, &alice, &messages_path).await), all);

        // Any id that is not the caller's message: 404, and nothing is deleted.
        let unknown = uuid::Uuid::now_v7().to_string();
        for (key, list) in [
            (&bob, q1.clone()),
            (&alice, format!("{q1},{unknown}")),
            (&alice, format!("{q1}%2C{bq}")),
            (&alice, bq.clone()),
            (&bob, format!("{bq},{r2}")),
        ] {
            let (s, b) = app.call(Method::DELETE, &format!("/api/v1/messages/{list}"), key, None).await;
            assert_error(s, &b, 404);
        }
        // No ids, too many ids: 400.
        let many: Vec<String> = (0..1001).map(|i| format!("m{i}")).collect();
        for list in ["%2C".to_owned(), ",,".to_owned(), many.join(",")] {
            let (s, b) = app.call(Method::DELETE, &format!("/api/v1/messages/{list}"), &alice, None).await;
            assert_error(s, &b, 400);
        }
        assert_eq!(ids(&get(&app, &alice, &messages_path).await), all);
        assert_eq!(ids(&get(&app, &bob, &format!("/api/v1/chats/{bobs_chat}/messages")).await), [bq.clone(), br.clone()]);
        assert!(rows_of(&app, "message_references", &r1).await > 0);

        // A question with its reply, and a reply alone (percent-encoded, one repeated).
        let (s, b) = app
            .call(Method::DELETE, &format!("/api/v1/messages/{q1}%2C{r2}%2C{q1}"), &alice, None)
            .await;
        assert_eq!((s, &b), (204, &Value::Null), "{}", app.backend);
        assert_eq!(ids(&get(&app, &alice, &messages_path).await), [q2.clone(), q3.clone(), r3.clone()]);
        for gone in [&r1, &r2] {
            assert_eq!(rows_of(&app, "message_references", gone).await, 0);
            assert_eq!(rows_of(&app, "message_meta", gone).await, 0);
            let (s, b) = app
                .call(Method::GET, &format!("/api/v1/messages/{gone}/references"), &alice, None)
                .await;
            assert_error(s, &b, 404);
        }
        assert!(rows_of(&app, "message_meta", &r3).await > 0, "the rest keep theirs");
        let (s, b) = app.call(Method::DELETE, &format!("/api/v1/messages/{q1}"), &alice, None).await;
        assert_error(s, &b, 404);

        // The session's latest message is its newest remaining one.
        assert_eq!(get(&app, &alice, &format!("/api/v1/chats/{chat}")).await["latest_message_content"], ANSWER);
        let (s, _) = app.call(Method::DELETE, &format!("/api/v1/messages/{q3}"), &alice, None).await;
        assert_eq!(s, 204);
        assert_eq!(ids(&get(&app, &alice, &messages_path).await), [q2.as_str()]);
        assert_eq!(
            get(&app, &alice, &format!("/api/v1/chats/{chat}")).await["latest_message_content"],
            "Which river flows through Paris?"
        );
        let (s, _) = app.call(Method::DELETE, &format!("/api/v1/messages/{q2}"), &alice, None).await;
        assert_eq!(s, 204);
        assert_eq!(get(&app, &alice, &messages_path).await, json!([]));
        assert!(get(&app, &alice, &format!("/api/v1/chats/{chat}")).await["latest_message_content"].is_null());

        // Bob's conversation is untouched.
        assert_eq!(ids(&get(&app, &bob, &format!("/api/v1/chats/{bobs_chat}/messages")).await), [bq, br.clone()]);
        assert!(rows_of(&app, "message_meta", &br).await > 0);
        app.stop().await;
    }

    /// A question whose reply is being generated cannot be deleted (409, nothing deleted)
    /// until the reply is stopped and stored.
    async fn a_question_being_answered_is_not_deleted(backend) {
        let model = upstream(Duration::from_millis(300)).await;
        let app = app_with(&backend, &model).await;
        let (_, alice) = app.user("alice").await;
        let chat = session(&app, &alice, None).await;
        let mut lines = stream(&app, &alice, &chat, json!({"message": "Tell me slowly", "stream": true})).await;
        let first = lines.next(Duration::from_secs(10)).await.unwrap();
        let question = first["question_id"].as_str().unwrap().to_owned();
        let (s, b) = app.call(Method::DELETE, &format!("/api/v1/messages/{question}"), &alice, None).await;
        assert_error(s, &b, 409);
        assert_eq!(ids(&get(&app, &alice, &format!("/api/v1/chats/{chat}/messages")).await), [question.as_str()]);

        let (s, b) = app.call(Method::POST, &format!("/api/v1/messages/{question}/stop"), &alice, None).await;
        assert_eq!(s, 204, "{b}");
        let (_, last) = lines.rest(Duration::from_secs(10)).await;
        assert!(last["message_id"].is_string(), "{last}");
        let (s, b) = app.call(Method::DELETE, &format!("/api/v1/messages/{question}"), &alice, None).await;
        assert_eq!(s, 204, "{}: {b}", app.backend);
        assert_eq!(get(&app, &alice, &format!("/api/v1/chats/{chat}/messages")).await, json!([]));
        app.stop().await;
    }
}
