//! Administrators cannot lock everyone out: the last usable key of the caller, or a change
//! that leaves no administrator with a usable key, is refused with 409.

use std::time::Duration;

use reqwest::Method;
use serde_json::{Value, json};

use crate::harness::{ADMIN_KEY, Stack, assert_error};

/// Ids of the keys `username` holds.
async fn keys_of(app: &Stack, key: &str, username: &str) -> Vec<String> {
    let (s, keys) = app
        .call(Method::GET, "/api/v1/admin/api_keys", key, None)
        .await;
    assert_eq!(s, 200, "{keys}");
    keys.as_array()
        .unwrap()
        .iter()
        .filter(|k| k["username"] == username)
        .map(|k| k["id"].as_str().unwrap().to_owned())
        .collect()
}

/// A new key of `user_id`, made with `admin_key`: (key id, secret).
async fn new_key(app: &Stack, admin_key: &str, user_id: &str) -> (String, String) {
    let (s, key) = app
        .call(
            Method::POST,
            "/api/v1/admin/api_keys",
            admin_key,
            Some(json!({"user_id": user_id, "name": "spare"})),
        )
        .await;
    assert_eq!(s, 201, "{key}");
    (
        key["api_key"]["id"].as_str().unwrap().to_owned(),
        key["secret_key"].as_str().unwrap().to_owned(),
    )
}

fn message(body: &Value) -> &str {
    body["message"].as_str().unwrap()
}

docchat_common::backend_tests! {
    /// The last key of an administrator stays; a spare one can go. Another administrator's
    /// key, or the admin role, can go only while some administrator keeps a usable key.
    async fn the_last_administrator_key_cannot_be_deleted(backend) {
        let app = Stack::docchat(&backend).await;
        let (_, me) = app
            .call(Method::GET, "/api/v1/users/current", ADMIN_KEY, None)
            .await;
        let admin_id = me["id"].as_str().unwrap().to_owned();
        let bootstrap = keys_of(&app, ADMIN_KEY, "admin").await;
        assert_eq!(bootstrap.len(), 1, "{}", app.backend);

        let (s, b) = app
            .call(
                Method::DELETE,
                &format!("/api/v1/admin/api_keys/{}", bootstrap[0]),
                ADMIN_KEY,
                None,
            )
            .await;
        assert_error(s, &b, 409);
        assert!(message(&b).contains("last"), "{b}");
        let (s, _) = app
            .call(Method::GET, "/api/v1/admin/api_keys", ADMIN_KEY, None)
            .await;
        assert_eq!(s, 200, "the key still works");

        // With a spare key, the first one may go.
        let (spare_id, spare) = new_key(&app, ADMIN_KEY, &admin_id).await;
        let (s, b) = app
            .call(
                Method::DELETE,
                &format!("/api/v1/admin/api_keys/{}", bootstrap[0]),
                ADMIN_KEY,
                None,
            )
            .await;
        assert_eq!(s, 204, "{b}");
        tokio::time::sleep(Duration::from_millis(700)).await;
        let (s, b) = app
            .call(Method::GET, "/api/v1/admin/api_keys", ADMIN_KEY, None)
            .await;
        assert_error(s, &b, 401);
        let (s, b) = app
            .call(
                Method::DELETE,
                &format!("/api/v1/admin/api_keys/{spare_id}"),
                &spare,
                None,
            )
            .await;
        assert_error(s, &b, 409);
        assert_eq!(keys_of(&app, &spare, "admin").await, [spare_id.as_str()]);

        // A second administrator may delete the first one's last key: it keeps its own.
        let (s, user) = app
            .call(
                Method::POST,
                "/api/v1/admin/users",
                &spare,
                Some(json!({"username": "root2", "email": "root2@example.com", "roles": ["admin"]})),
            )
            .await;
        assert_eq!(s, 201, "{user}");
        let root2_id = user["id"].as_str().unwrap().to_owned();
        let (_, root2) = new_key(&app, &spare, &root2_id).await;
        let (s, b) = app
            .call(
                Method::DELETE,
                &format!("/api/v1/admin/api_keys/{spare_id}"),
                &root2,
                None,
            )
            .await;
        assert_eq!(s, 204, "{b}");
        assert!(keys_of(&app, &root2, "admin").await.is_empty());

        // root2 is now the only administrator with a key: neither its key nor its admin
        // role may go.
        let own = keys_of(&app, &root2, "root2").await;
        let (s, b) = app
            .call(
                Method::DELETE,
                &format!("/api/v1/admin/api_keys/{}", own[0]),
                &root2,
                None,
            )
            .await;
        assert_error(s, &b, 409);
        let (s, b) = app
            .call(
                Method::DELETE,
                &format!("/api/v1/users/{root2_id}/roles/admin"),
                &root2,
                None,
            )
            .await;
        assert_error(s, &b, 409);
        assert!(message(&b).contains("administrator"), "{b}");
        let (s, _) = app
            .call(Method::GET, "/api/v1/admin/api_keys", &root2, None)
            .await;
        assert_eq!(s, 200, "root2 is still an administrator");

        // Once the first administrator has a key again, root2 may step down.
        let (_, again) = new_key(&app, &root2, &admin_id).await;
        let (s, b) = app
            .call(
                Method::DELETE,
                &format!("/api/v1/users/{root2_id}/roles/admin"),
                &root2,
                None,
            )
            .await;
        assert_eq!(s, 204, "{b}");
        let (s, _) = app
            .call(Method::GET, "/api/v1/admin/api_keys", &again, None)
            .await;
        assert_eq!(s, 200);
        app.stop().await;
    }

    /// An expired key stops working when it expires, however long the gateway caches keys;
    /// an expiry past the clock's range is a 400, not a failed admin-service.
    async fn a_key_stops_working_when_it_expires(backend) {
        let app = Stack::builder(&backend)
            .everything()
            .configure(|c| c.auth_cache_ttl_ms = 600_000)
            .start()
            .await;
        let (_, me) = app.call(Method::GET, "/api/v1/users/current", ADMIN_KEY, None).await;
        let admin_id = me["id"].as_str().unwrap().to_owned();
        for huge in ["300000 years", "9223372036854775807 seconds"] {
            let (s, b) = app
                .call(Method::POST, "/api/v1/admin/api_keys", ADMIN_KEY, Some(json!({"user_id": admin_id, "expires_in": huge})))
                .await;
            assert_error(s, &b, 400);
        }
        // A key that expires in 20 s is no spare: deleting the administrator's other key
        // would lock them out soon after, so it is refused as for a last key.
        let bootstrap = keys_of(&app, ADMIN_KEY, "admin").await;
        let (s, short) = app
            .call(Method::POST, "/api/v1/admin/api_keys", ADMIN_KEY, Some(json!({"user_id": admin_id, "expires_in": "20 seconds"})))
            .await;
        assert_eq!(s, 201, "{short}");
        let (s, b) = app
            .call(Method::DELETE, &format!("/api/v1/admin/api_keys/{}", bootstrap[0]), ADMIN_KEY, None)
            .await;
        assert_error(s, &b, 409);
        let (_, user) = app
            .call(Method::POST, "/api/v1/admin/users", ADMIN_KEY, Some(json!({"username": "erin", "email": "erin@example.com"})))
            .await;
        let uid = user["id"].as_str().unwrap().to_owned();
        let (s, key) = app
            .call(Method::POST, "/api/v1/admin/api_keys", ADMIN_KEY, Some(json!({"user_id": uid, "expires_in": "2 seconds"})))
            .await;
        assert_eq!(s, 201, "{key}");
        let secret = key["secret_key"].as_str().unwrap().to_owned();
        // Works (and is cached) while it lives …
        let (s, _) = app.call(Method::GET, "/api/v1/users/current", &secret, None).await;
        assert_eq!(s, 200);
        tokio::time::sleep(Duration::from_millis(2_300)).await;
        // … and not a moment after, though the cache would keep it ten minutes.
        let (s, b) = app.call(Method::GET, "/api/v1/users/current", &secret, None).await;
        assert_error(s, &b, 401);
        app.stop().await;
    }
}
