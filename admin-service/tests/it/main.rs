//! admin-service over real gRPC on loopback, on SQLite and on PostgreSQL.

#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::panic,
    clippy::print_stderr
)] // test code: fail loudly

use docchat_common::Caller;
use docchat_common::auth::authorized;
use docchat_common::bus::topics;
use docchat_common::config::Service;
use docchat_common::testing::{Spawned, bind, context, user};
use docchat_proto::admin::v1 as pb;
use docchat_proto::admin::v1::admin_service_client::AdminServiceClient;
use docchat_proto::common::v1::Empty;
use tonic::Code;
use tonic::transport::Channel;

const BOOTSTRAP: &str = "sk-bootstrap-0123456789";

struct Admin {
    svc: Spawned,
    bus: std::sync::Arc<dyn docchat_common::bus::EventBus>,
    keys: std::sync::Arc<docchat_common::JwtKeys>,
    client: AdminServiceClient<Channel>,
}

impl Admin {
    fn req<T>(&self, caller: &Caller, msg: T) -> tonic::Request<T> {
        authorized(&self.keys, caller, Service::Admin, msg).unwrap()
    }
}

async fn start(config: docchat_common::Config) -> Admin {
    let (listener, url) = bind().await;
    let ctx = context(config);
    let keys = ctx.keys.clone();
    let bus = ctx.bus.clone();
    let svc = Spawned::start(ctx, listener, url, docchat_admin_service::serve)
        .await
        .unwrap();
    let client = AdminServiceClient::new(svc.channel());
    Admin {
        svc,
        bus,
        keys,
        client,
    }
}

fn gateway() -> Caller {
    Caller::service("gateway")
}

docchat_common::backend_tests! {
    async fn bootstrap_authenticate_and_restart(backend) {
        let dir = tempfile::tempdir().unwrap();
        let mut config = backend.config(dir.path());
        config.bootstrap_admin_key = Some(secrecy::SecretString::from(BOOTSTRAP));
        let admin = start(config.clone()).await;
        let mut c = admin.client.clone();

        let id = c
            .authenticate(admin.req(
                &gateway(),
                pb::AuthenticateRequest {
                    api_key: BOOTSTRAP.into(),
                },
            ))
            .await
            .unwrap()
            .into_inner();
        assert_eq!(id.username, "admin", "{}", backend.name);
        assert!(id.is_admin);
        assert_eq!(id.permissions.len(), 6);

        let bad = c
            .authenticate(admin.req(
                &gateway(),
                pb::AuthenticateRequest {
                    api_key: "sk-nope".into(),
                },
            ))
            .await
            .unwrap_err();
        assert_eq!(bad.code(), Code::Unauthenticated);
        // Only docchat components may resolve keys.
        let who = user("u1", true);
        let denied = c
            .authenticate(admin.req(
                &who,
                pb::AuthenticateRequest {
                    api_key: BOOTSTRAP.into(),
                },
            ))
            .await
            .unwrap_err();
        assert_eq!(denied.code(), Code::PermissionDenied);
        // Without a token, or with one for another service: refused before any handler.
        let no_token = c
            .list_roles(tonic::Request::new(Empty {}))
            .await
            .unwrap_err();
        assert_eq!(no_token.code(), Code::Unauthenticated);
        let wrong_aud = authorized(&admin.keys, &who, Service::Chat, Empty {}).unwrap();
        assert_eq!(
            c.list_roles(wrong_aud).await.unwrap_err().code(),
            Code::Unauthenticated
        );

        admin.svc.stop().await.unwrap();
        // A restart with the same key neither duplicates the admin nor its key.
        let admin = start(config).await;
        let mut c = admin.client.clone();
        let boss = Caller {
            is_admin: true,
            ..user(&id.user_id, true)
        };
        let users = c
            .list_users(admin.req(&boss, Default::default()))
            .await
            .unwrap()
            .into_inner();
        assert_eq!(users.users.len(), 1, "{}", backend.name);
        let keys = c
            .list_api_keys(admin.req(&boss, Default::default()))
            .await
            .unwrap()
            .into_inner();
        assert_eq!(keys.api_keys.len(), 1, "{}", backend.name);
        assert_eq!(
            keys.api_keys[0].total_calls, 1,
            "{}: one successful authentication",
            backend.name
        );
        admin.svc.stop().await.unwrap();
    }
}

docchat_common::backend_tests! {
    async fn settings_resolve_user_then_roles_by_priority_then_global(backend) {
        let dir = tempfile::tempdir().unwrap();
        let admin = start(backend.config(dir.path())).await;
        let mut c = admin.client.clone();
        let boss = user("boss", true);

        let u = c
            .create_user(admin.req(
                &boss,
                pb::CreateUserRequest {
                    username: "gina".into(),
                    email: "g@example.com".into(),
                    roles: vec![],
                    groups: vec!["team-a".into()],
                },
            ))
            .await
            .unwrap()
            .into_inner();
        assert_eq!(u.roles, ["user"]);
        assert_eq!(u.groups, ["team-a"]);
        let low = c
            .create_role(admin.req(
                &boss,
                pb::CreateRoleRequest {
                    name: "low".into(),
                    description: String::new(),
                },
            ))
            .await
            .unwrap()
            .into_inner();
        let high = c
            .create_role(admin.req(
                &boss,
                pb::CreateRoleRequest {
                    name: "high".into(),
                    description: String::new(),
                },
            ))
            .await
            .unwrap()
            .into_inner();
        c.set_role_priority(admin.req(
            &boss,
            pb::SetRolePriorityRequest {
                role_id: high.id.clone(),
                priority: 10,
            },
        ))
        .await
        .unwrap();
        c.assign_roles_to_user(admin.req(
            &boss,
            pb::UserRolesRequest {
                user_id: u.id.clone(),
                role_names: vec!["low,high".into()],
            },
        ))
        .await
        .unwrap();

        let set_role = |role: &str, v: &str| pb::SetScopedSettingRequest {
            scope_id: role.into(),
            key_name: "crawl_max_concurrent_per_user".into(),
            string_value: v.into(),
        };
        c.set_global_setting(admin.req(
            &boss,
            pb::SetGlobalSettingRequest {
                key_name: "crawl_max_concurrent_per_user".into(),
                string_value: "30".into(),
                can_overwrite: None,
                is_public: None,
            },
        ))
        .await
        .unwrap();
        let me = Caller {
            user_id: u.id.clone(),
            ..user("gina", false)
        };
        let resolve = |c: &mut AdminServiceClient<Channel>, a: &Admin| {
            let req = a.req(
                &me,
                pb::ResolveSettingsRequest {
                    user_id: String::new(),
                },
            );
            let mut c = c.clone();
            async move { c.resolve_settings(req).await.unwrap().into_inner() }
        };
        let r = resolve(&mut c, &admin).await;
        assert_eq!(
            r.values["crawl_max_concurrent_per_user"], "30",
            "{}: global",
            backend.name
        );
        assert_eq!(
            r.values["chat_max_concurrent_per_user"], "100000",
            "default"
        );
        assert_eq!(r.cache_ttl_seconds, 60);

        c.set_role_setting(admin.req(&boss, set_role(&low.id, "5")))
            .await
            .unwrap();
        c.set_role_setting(admin.req(&boss, set_role(&high.id, "9")))
            .await
            .unwrap();
        assert_eq!(
            resolve(&mut c, &admin).await.values["crawl_max_concurrent_per_user"],
            "9",
            "higher priority role wins"
        );
        c.set_role_priority(admin.req(
            &boss,
            pb::SetRolePriorityRequest {
                role_id: low.id.clone(),
                priority: 20,
            },
        ))
        .await
        .unwrap();
        assert_eq!(
            resolve(&mut c, &admin).await.values["crawl_max_concurrent_per_user"],
            "5"
        );
        c.set_user_setting(admin.req(
            &boss,
            pb::SetScopedSettingRequest {
                scope_id: u.id.clone(),
                key_name: "crawl_max_concurrent_per_user".into(),
                string_value: "2".into(),
            },
        ))
        .await
        .unwrap();
        assert_eq!(
            resolve(&mut c, &admin).await.values["crawl_max_concurrent_per_user"],
            "2",
            "user override wins"
        );
        // A global that may not be overwritten wins over every override.
        c.set_global_setting(admin.req(
            &boss,
            pb::SetGlobalSettingRequest {
                key_name: "crawl_max_concurrent_per_user".into(),
                string_value: "31".into(),
                can_overwrite: Some(false),
                is_public: None,
            },
        ))
        .await
        .unwrap();
        assert_eq!(
            resolve(&mut c, &admin).await.values["crawl_max_concurrent_per_user"],
            "31"
        );

        // Another user's settings: only administrators and components.
        let other = c
            .resolve_settings(admin.req(
                &user("someone", false),
                pb::ResolveSettingsRequest {
                    user_id: u.id.clone(),
                },
            ))
            .await
            .unwrap_err();
        assert_eq!(other.code(), Code::PermissionDenied);
        let by_service = c
            .resolve_settings(admin.req(
                &Caller::service("ingest"),
                pb::ResolveSettingsRequest {
                    user_id: u.id.clone(),
                },
            ))
            .await
            .unwrap()
            .into_inner();
        assert_eq!(by_service.values["crawl_max_concurrent_per_user"], "31");

        // Non-administrators cannot write settings (403).
        let denied = c
            .set_global_setting(admin.req(
                &me,
                pb::SetGlobalSettingRequest {
                    key_name: "collection_limit".into(),
                    string_value: "1".into(),
                    can_overwrite: None,
                    is_public: None,
                },
            ))
            .await
            .unwrap_err();
        assert_eq!(denied.code(), Code::PermissionDenied);
        admin.svc.stop().await.unwrap();
    }
}

docchat_common::backend_tests! {
    async fn settings_client_caches_for_config_cache_ttl_seconds(backend) {
        let backend = &backend;
        let dir = tempfile::tempdir().unwrap();
        let admin = start(backend.config(dir.path())).await;
        let mut c = admin.client.clone();
        let boss = user("boss", true);
        let set = |key: &str, value: &str| pb::SetGlobalSettingRequest {
            key_name: key.into(),
            string_value: value.into(),
            can_overwrite: None,
            is_public: None,
        };
        c.set_global_setting(admin.req(&boss, set("config_cache_ttl_seconds", "1")))
            .await
            .unwrap();
        c.set_global_setting(admin.req(&boss, set("collection_limit_per_user", "3")))
            .await
            .unwrap();

        let settings =
            docchat_common::settings::SettingsClient::new(admin.svc.channel(), admin.keys.clone());
        let me = user("u-cache", false);
        assert_eq!(
            settings
                .resolve(&me)
                .await
                .unwrap()
                .limit("collection_limit_per_user"),
            Some(3)
        );
        c.set_global_setting(admin.req(&boss, set("collection_limit_per_user", "4")))
            .await
            .unwrap();
        assert_eq!(
            settings
                .resolve(&me)
                .await
                .unwrap()
                .limit("collection_limit_per_user"),
            Some(3),
            "served from the cache within the TTL"
        );
        tokio::time::sleep(std::time::Duration::from_millis(1100)).await;
        assert_eq!(
            settings
                .resolve(&me)
                .await
                .unwrap()
                .limit("collection_limit_per_user"),
            Some(4)
        );
        admin.svc.stop().await.unwrap();
    }
}

docchat_common::backend_tests! {
    async fn the_llm_ledger_books_usage_events_once_and_rolls_its_24_hour_window(backend) {
        use docchat_common::bus::envelope;
        use docchat_proto::events::v1::LlmUsage;

        let dir = tempfile::tempdir().unwrap();
        let admin = start(backend.config(dir.path())).await;
        let mut c = admin.client.clone();
        let alice = user("u-alice", false);
        let usage = |cost: f64| LlmUsage {
            user_id: alice.user_id.clone(),
            model: "scripted".into(),
            prompt_tokens: 100,
            completion_tokens: 10,
            cost,
            purpose: "chat".into(),
            message_id: "m1".into(),
            calls: 1,
        };
        let spend = |c: &mut AdminServiceClient<Channel>| {
            let request = admin.req(&alice, pb::LlmSpendRequest::default());
            let mut c = c.clone();
            async move { c.get_llm_spend(request).await.unwrap().into_inner() }
        };
        assert_eq!(spend(&mut c).await.cost_total, 0.0, "{}", backend.name);

        // One call now (published twice: a redelivery counts once) and one 25 hours ago.
        let now = envelope(topics::USAGE_LLM, &alice.user_id, &usage(0.25));
        admin.bus.publish(&now).await.unwrap();
        admin.bus.publish(&now).await.unwrap();
        let mut old = envelope(topics::USAGE_LLM, &alice.user_id, &usage(1.0));
        let then = chrono::Utc::now() - chrono::Duration::hours(25);
        old.time = Some(docchat_common::time::to_proto(then));
        admin.bus.publish(&old).await.unwrap();
        // A later event proves the earlier ones were handled (one queue, in order).
        let marker = envelope(topics::USAGE_LLM, &alice.user_id, &usage(0.0));
        admin.bus.publish(&marker).await.unwrap();

        let deadline = tokio::time::Instant::now() + std::time::Duration::from_secs(20);
        let got = loop {
            let got = spend(&mut c).await;
            if got.prompt_tokens_total == 300 {
                break got;
            }
            assert!(
                tokio::time::Instant::now() < deadline,
                "not booked: {got:?}"
            );
            tokio::time::sleep(std::time::Duration::from_millis(50)).await;
        };
        assert!((got.cost_total - 1.25).abs() < 1e-9, "{got:?}");
        assert!((got.cost_last_24h - 0.25).abs() < 1e-9, "{got:?}");
        assert_eq!(got.completion_tokens_total, 30);
        let reset = docchat_common::time::from_proto(got.window_reset_at.as_ref().unwrap());
        let in_a_day = chrono::Utc::now() + chrono::Duration::hours(24);
        assert!((in_a_day - reset).num_seconds().abs() < 60, "{reset}");

        // Another user cannot read alice's spend; an administrator can.
        let bob = user("u-bob", false);
        let e = c
            .get_llm_spend(admin.req(
                &bob,
                pb::LlmSpendRequest {
                    user_id: alice.user_id.clone(),
                },
            ))
            .await
            .unwrap_err();
        assert_eq!(e.code(), Code::PermissionDenied);
        let seen = c
            .get_llm_spend(admin.req(
                &user("u-root", true),
                pb::LlmSpendRequest {
                    user_id: alice.user_id.clone(),
                },
            ))
            .await
            .unwrap()
            .into_inner();
        assert_eq!(seen.cost_total, got.cost_total);
        admin.svc.shutdown.cancel();
    }
}
mod job_history;

docchat_common::backend_tests! {
    async fn keys_are_deactivated_expired_and_given_inactivity_intervals(backend) {
        use pb::update_api_key_request::Change;
        let dir = tempfile::tempdir().unwrap();
        let mut config = backend.config(dir.path());
        config.bootstrap_admin_key = Some(secrecy::SecretString::from(BOOTSTRAP));
        let admin = start(config).await;
        let mut c = admin.client.clone();
        let authenticate = |secret: &str| {
            admin.req(
                &gateway(),
                pb::AuthenticateRequest {
                    api_key: secret.to_owned(),
                },
            )
        };
        let boss_id = c
            .authenticate(authenticate(BOOTSTRAP))
            .await
            .unwrap()
            .into_inner()
            .user_id;
        let boss = Caller {
            is_admin: true,
            ..user(&boss_id, true)
        };
        let u = c
            .create_user(admin.req(
                &boss,
                pb::CreateUserRequest {
                    username: "kim".into(),
                    email: "k@example.com".into(),
                    roles: vec![],
                    groups: vec![],
                },
            ))
            .await
            .unwrap()
            .into_inner();
        let created = c
            .create_api_key(admin.req(
                &boss,
                pb::CreateApiKeyRequest {
                    user_id: u.id.clone(),
                    name: "kim's".into(),
                    expires_in: String::new(),
                },
            ))
            .await
            .unwrap()
            .into_inner();
        let key = created.api_key.unwrap();
        let change = |key_id: &str, change: Change| {
            admin.req(
                &boss,
                pb::UpdateApiKeyRequest {
                    key_id: key_id.to_owned(),
                    change: Some(change),
                },
            )
        };
        let listed = |keys: pb::ApiKeyList, id: &str| {
            keys.api_keys.into_iter().find(|k| k.id == id).unwrap()
        };

        // An expiry, then none; an inactivity interval, then none: the key works throughout.
        c.update_api_key(change(&key.id, Change::ExpiresIn("2 hours".into())))
            .await
            .unwrap();
        let k = listed(c.list_api_keys(admin.req(&boss, Default::default())).await.unwrap().into_inner(), &key.id);
        assert!(k.expires_at.is_some() && k.is_active, "{}: {k:?}", backend.name);
        c.update_api_key(change(&key.id, Change::ExpiresIn(String::new())))
            .await
            .unwrap();
        c.update_api_key(change(&key.id, Change::InactivityDays(3)))
            .await
            .unwrap();
        let k = listed(c.list_api_keys(admin.req(&boss, Default::default())).await.unwrap().into_inner(), &key.id);
        assert!(k.expires_at.is_none() && k.inactivity_days == 3 && k.is_active, "{k:?}");
        c.authenticate(authenticate(&created.secret_key)).await.unwrap();
        let bad = c
            .update_api_key(change(&key.id, Change::ExpiresIn("soon".into())))
            .await
            .unwrap_err();
        assert_eq!(bad.code(), Code::InvalidArgument);
        let bad = c
            .update_api_key(change(&key.id, Change::InactivityDays(-1)))
            .await
            .unwrap_err();
        assert_eq!(bad.code(), Code::InvalidArgument);
        // Only administrators.
        let kim = user(&u.id, false);
        let denied = c
            .update_api_key(admin.req(
                &kim,
                pb::UpdateApiKeyRequest {
                    key_id: key.id.clone(),
                    change: Some(Change::Deactivate(true)),
                },
            ))
            .await
            .unwrap_err();
        assert_eq!(denied.code(), Code::PermissionDenied);

        // Deactivated: the key no longer resolves, for good.
        c.update_api_key(change(&key.id, Change::Deactivate(true)))
            .await
            .unwrap();
        let gone = c
            .authenticate(authenticate(&created.secret_key))
            .await
            .unwrap_err();
        assert_eq!(gone.code(), Code::Unauthenticated, "{}", backend.name);
        let k = listed(c.list_api_keys(admin.req(&boss, Default::default())).await.unwrap().into_inner(), &key.id);
        assert!(!k.is_active);
        let missing = c
            .update_api_key(change("no-such-key", Change::Deactivate(true)))
            .await
            .unwrap_err();
        assert_eq!(missing.code(), Code::NotFound);

        // The administrator's only key: neither deactivated nor expiring within the hour.
        let keys = c.list_api_keys(admin.req(&boss, Default::default())).await.unwrap().into_inner();
        let own = keys.api_keys.iter().find(|k| k.user_id == boss_id).unwrap().id.clone();
        for refused in [Change::Deactivate(true), Change::ExpiresIn("30 minutes".into())] {
            let locked = c.update_api_key(change(&own, refused)).await.unwrap_err();
            // A conflict (409 at the gateway).
            assert_eq!(locked.code(), Code::AlreadyExists, "{}: {locked:?}", backend.name);
        }
        c.authenticate(authenticate(BOOTSTRAP)).await.unwrap();
        admin.svc.stop().await.unwrap();
    }
}
