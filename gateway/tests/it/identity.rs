//! Keys, users, roles, permissions and runtime settings through the REST API.

use std::time::Duration;

use reqwest::Method;
use serde_json::json;

use crate::harness::{ADMIN_KEY, Stack, assert_error, read};

docchat_common::backend_tests! {
    async fn missing_bad_and_deleted_keys_are_401_before_any_service(backend) {
        let app = Stack::docchat(&backend).await;
        for path in [
            "/api/v1/collections",
            "/rpc/health/liveness",
            "/rpc/health/readiness",
            "/api/v1/models",
        ] {
            let (s, b) = read(app.http(Method::GET, path, None).send().await.unwrap()).await;
            assert_error(s, &b, 401);
            let (s, b) = read(
                app.http(Method::GET, path, Some("sk-wrong"))
                    .send()
                    .await
                    .unwrap(),
            )
            .await;
            assert_error(s, &b, 401);
        }
        let (s, b) = read(
            app.http(Method::GET, "/api/v1/collections", None)
                .header("authorization", "Basic Zm9vOmJhcg==")
                .send()
                .await
                .unwrap(),
        )
        .await;
        assert_error(s, &b, 401);

        let (_, key) = app.user("carol").await;
        let (s, _) = app
            .call(Method::GET, "/api/v1/collections", &key, None)
            .await;
        assert_eq!(s, 200);
        let (_, keys) = app
            .call(Method::GET, "/api/v1/admin/api_keys", ADMIN_KEY, None)
            .await;
        let entry = keys
            .as_array()
            .unwrap()
            .iter()
            .find(|k| k["username"] == "carol")
            .unwrap()
            .clone();
        for f in [
            "id",
            "username",
            "name",
            "hint",
            "created_at",
            "total_calls",
            "is_active",
            "is_global_key",
        ] {
            assert!(entry.get(f).is_some(), "api key info lacks {f}");
        }
        assert!(
            !entry.to_string().contains(&key),
            "the secret is never listed"
        );
        let (s, _) = app
            .call(
                Method::DELETE,
                &format!("/api/v1/admin/api_keys/{}", entry["id"].as_str().unwrap()),
                ADMIN_KEY,
                None,
            )
            .await;
        assert_eq!(s, 204);
        // Within the auth cache TTL (500 ms in tests), the key stops working.
        tokio::time::sleep(Duration::from_millis(700)).await;
        let (s, b) = app
            .call(Method::GET, "/api/v1/collections", &key, None)
            .await;
        assert_error(s, &b, 401);
        app.stop().await;
    }
}

docchat_common::backend_tests! {
    async fn identity_management_is_for_administrators(backend) {
        let app = Stack::docchat(&backend).await;
        let (uid, key) = app.user("dave").await;
        let (s, b) = app
            .call(
                Method::POST,
                "/api/v1/admin/users",
                &key,
                Some(json!({"username": "eve"})),
            )
            .await;
        assert_error(s, &b, 403);
        let (s, b) = app
            .call(Method::GET, "/api/v1/admin/api_keys", &key, None)
            .await;
        assert_error(s, &b, 403);
        let (s, b) = app
            .call(
                Method::POST,
                "/api/v1/admin/users",
                ADMIN_KEY,
                Some(json!({"username": "dave"})),
            )
            .await;
        assert_error(s, &b, 409);
        let (s, b) = app
            .call(
                Method::POST,
                "/api/v1/admin/users",
                ADMIN_KEY,
                Some(json!({"username": "x", "roles": ["nope"]})),
            )
            .await;
        assert_error(s, &b, 400);
        let (s, b) = app
            .call(
                Method::POST,
                "/api/v1/admin/api_keys",
                ADMIN_KEY,
                Some(json!({"user_id": "missing"})),
            )
            .await;
        assert_error(s, &b, 404);
        let (s, b) = app
            .call(
                Method::POST,
                "/api/v1/admin/api_keys",
                ADMIN_KEY,
                Some(json!({"user_id": uid, "expires_in": "whenever"})),
            )
            .await;
        assert_error(s, &b, 400);

        let (s, me) = app
            .call(Method::GET, "/api/v1/users/current", &key, None)
            .await;
        assert_eq!(s, 200);
        assert_eq!(me["username"], "dave");
        assert_eq!(me["roles"], json!(["user"]));
        let (_, perms) = app
            .call(Method::GET, "/api/v1/users/current/permissions", &key, None)
            .await;
        assert_eq!(perms, json!([]));

        // A role with a permission; assigning it shows up in the caller's permissions.
        let (s, role) = app
            .call(
                Method::POST,
                "/api/v1/roles",
                ADMIN_KEY,
                Some(json!({"name": "editors", "description": "edit"})),
            )
            .await;
        assert_eq!(s, 201);
        let rid = role["id"].as_str().unwrap();
        let (s, b) = app
            .call(
                Method::PUT,
                &format!("/api/v1/roles/{rid}/permissions/NotAPermission"),
                ADMIN_KEY,
                None,
            )
            .await;
        assert_error(s, &b, 400);
        let (s, _) = app
            .call(
                Method::PUT,
                &format!("/api/v1/roles/{rid}/permissions/EditExtractors"),
                ADMIN_KEY,
                None,
            )
            .await;
        assert_eq!(s, 204);
        let (s, _) = app
            .call(
                Method::PUT,
                &format!("/api/v1/users/{uid}/roles/editors"),
                ADMIN_KEY,
                None,
            )
            .await;
        assert_eq!(s, 204);
        let (_, perms) = app
            .call(Method::GET, "/api/v1/users/current/permissions", &key, None)
            .await;
        assert_eq!(perms[0]["name"], "EditExtractors");
        let (_, perms) = app
            .call(
                Method::GET,
                "/api/v1/users/current/permissions",
                ADMIN_KEY,
                None,
            )
            .await;
        assert_eq!(
            perms.as_array().unwrap().len(),
            6,
            "administrators hold every permission"
        );
        app.stop().await;
    }
}

docchat_common::backend_tests! {
    async fn runtime_settings_are_validated_and_resolved(backend) {
        let app = Stack::docchat(&backend).await;
        let (uid, key) = app.user("frank").await;
        let put = |k: &'static str, v: &'static str| json!({"string_value": v, "can_overwrite": true, "is_public": false, "k": k});

        // Every setting of the runtime table exists with its default.
        let (s, all) = app
            .call(Method::GET, "/api/v1/configurations", ADMIN_KEY, None)
            .await;
        assert_eq!(s, 200);
        let names: Vec<&str> = all
            .as_array()
            .unwrap()
            .iter()
            .map(|i| i["key_name"].as_str().unwrap())
            .collect();
        for n in [
            "collection_limit",
            "collection_limit_per_user",
            "document_limit_per_user",
            "agents_document_limit_per_user",
            "default_collection_size_limit",
            "max_llm_cost_per_user_per_24h",
            "max_llm_cost_per_user",
            "max_llm_cost_per_guest",
            "llm_cost_units",
            "chat_max_concurrent_per_user",
            "crawl_max_concurrent_per_user",
            "config_cache_ttl_seconds",
        ] {
            assert!(names.contains(&n), "{n} missing");
        }
        let value = |all: &serde_json::Value, k: &str| {
            all.as_array()
                .unwrap()
                .iter()
                .find(|i| i["key_name"] == k)
                .unwrap()["string_value"]
                .clone()
        };
        assert_eq!(value(&all, "crawl_max_concurrent_per_user"), "25");
        assert_eq!(value(&all, "chat_max_concurrent_per_user"), "100000");

        // Bad values: 400 and nothing stored; non-admins: 403.
        for (k, v) in [
            ("chat_max_concurrent_per_user", "1000001"),
            ("crawl_max_concurrent_per_user", "ten"),
            ("default_collection_size_limit", "10"),
            ("config_cache_ttl_seconds", "3601"),
            ("max_llm_cost_per_user", "-5"),
            ("no_such_setting", "1"),
        ] {
            let (s, b) = app
                .call(
                    Method::PUT,
                    &format!("/api/v1/configurations/{k}"),
                    ADMIN_KEY,
                    Some(put(k, v)),
                )
                .await;
            assert_error(s, &b, 400);
        }
        let (s, b) = app
            .call(
                Method::PUT,
                "/api/v1/configurations/collection_limit",
                &key,
                Some(put("", "5")),
            )
            .await;
        assert_error(s, &b, 403);
        let (_, after) = app
            .call(Method::GET, "/api/v1/configurations", ADMIN_KEY, None)
            .await;
        assert_eq!(after, all, "refused values changed nothing");

        let (s, items) = app
            .call(
                Method::PUT,
                "/api/v1/configurations/crawl_max_concurrent_per_user",
                ADMIN_KEY,
                Some(put("", "40")),
            )
            .await;
        assert_eq!(s, 200);
        assert_eq!(value(&items, "crawl_max_concurrent_per_user"), "40");
        for f in [
            "key_name",
            "string_value",
            "value_type",
            "can_overwrite",
            "is_public",
        ] {
            assert!(items[0].get(f).is_some());
        }

        // Overrides: only for overridable settings; role and user scope.
        let (_, role) = app
            .call(
                Method::POST,
                "/api/v1/roles",
                ADMIN_KEY,
                Some(json!({"name": "heavy", "description": ""})),
            )
            .await;
        let rid = role["id"].as_str().unwrap();
        let (s, b) = app
            .call(
                Method::PUT,
                &format!("/api/v1/roles/{rid}/configurations/collection_limit"),
                ADMIN_KEY,
                Some(put("", "3")),
            )
            .await;
        assert_error(s, &b, 400);
        let (s, items) = app
            .call(
                Method::PUT,
                &format!("/api/v1/roles/{rid}/configurations/crawl_max_concurrent_per_user"),
                ADMIN_KEY,
                Some(put("", "7")),
            )
            .await;
        assert_eq!(s, 200, "{items}");
        assert_eq!(items[0]["string_value"], "7");
        let (s, b) = app
            .call(
                Method::PUT,
                "/api/v1/roles/missing/configurations/crawl_max_concurrent_per_user",
                ADMIN_KEY,
                Some(put("", "7")),
            )
            .await;
        assert_error(s, &b, 404);
        let (s, _) = app
            .call(
                Method::PUT,
                &format!("/api/v1/users/{uid}/configurations/chat_max_concurrent_per_user"),
                ADMIN_KEY,
                Some(put("", "2")),
            )
            .await;
        assert_eq!(s, 200);
        let (_, mine) = app
            .call(
                Method::GET,
                "/api/v1/users/current/configurations",
                &key,
                None,
            )
            .await;
        assert_eq!(mine[0]["key_name"], "chat_max_concurrent_per_user");
        app.stop().await;
    }
}
