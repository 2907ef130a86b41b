//! agent-service's stores on both backends, below gRPC: tool preferences, session
//! workspaces (an owner kept, previews found by any case with LIKE's wildcards taken
//! literally), the workspace manifest's upserts, custom agents and tools scoped to their
//! owner, and JSON columns that no longer decode being an error rather than a silent default.

use docchat_agent_service::custom_agents::store::{self as agents, Associations};
use docchat_agent_service::custom_agents::upload::{AgentFolder, Declared, EnvKey};
use docchat_agent_service::custom_tools::store::{self as tools, NewTool};
use docchat_agent_service::stored::manifest::{self, Entry};
use docchat_agent_service::tools::custom::ToolType;
use docchat_agent_service::{preferences, workspaces};
use docchat_common::Caller;
use docchat_common::error::ErrorCode;
use docchat_common::testing::Backend;
use sea_orm::{ConnectionTrait, DatabaseConnection};
use serde_json::json;

async fn store(backend: &Backend, dir: &std::path::Path) -> DatabaseConnection {
    let db = docchat_common::db::connect(&backend.database_url(dir, "agent"))
        .await
        .unwrap();
    docchat_common::db::migrate::<docchat_agent_service::migrations::Migrator>(&db, "agent")
        .await
        .unwrap();
    db
}

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

/// Runs `sql` as it is (what a bad hand edit of the database would do).
async fn raw(db: &DatabaseConnection, sql: &str) {
    db.execute_unprepared(sql).await.unwrap();
}

fn entry(path: &str, document_id: &str) -> Entry {
    Entry {
        path: path.into(),
        document_id: document_id.into(),
        sha256: "ab".repeat(32),
        size: 3,
        question_id: "q1".into(),
        stored_at: 0,
    }
}

fn tool(name: &str) -> NewTool {
    NewTool {
        tool_name: name.into(),
        tool_type: ToolType::LocalMcp,
        args: json!({"description": "weather"}),
        file_name: Some("w.zip".into()),
        file: Some(b"zip bytes".to_vec()),
    }
}

fn folder() -> AgentFolder {
    AgentFolder {
        name: "helper".into(),
        description: "helps".into(),
        command: vec!["python3".into(), "main.py".into()],
        servers: vec![
            Declared {
                name: "weather".into(),
                args: json!({"x": 1}),
            },
            Declared {
                name: "none".into(),
                args: json!(null),
            },
        ],
        envs: vec![EnvKey {
            name: "API_KEY".into(),
            requirement: "required",
            default: None,
        }],
        zip: b"agent zip".to_vec(),
    }
}

docchat_common::backend_tests! {
    async fn tool_preferences_are_set_replaced_and_deleted(backend) {
        let dir = tempfile::tempdir().unwrap();
        let db = store(&backend, dir.path()).await;
        assert_eq!(preferences::get(&db, "u1").await.unwrap(), None, "{}", backend.name);
        preferences::set(&db, "u1", &["search".into(), "python".into()]).await.unwrap();
        preferences::set(&db, "u1", &["python".into()]).await.unwrap();
        let got = preferences::get(&db, "u1").await.unwrap();
        assert_eq!(got, Some(vec!["python".to_owned()]), "{}", backend.name);
        assert_eq!(preferences::get(&db, "u2").await.unwrap(), None, "{}", backend.name);
        preferences::delete(&db, "u1").await.unwrap();
        assert_eq!(preferences::get(&db, "u1").await.unwrap(), None, "{}", backend.name);
    }

    async fn session_workspaces_keep_their_owner_and_page_by_preview(backend) {
        let dir = tempfile::tempdir().unwrap();
        let db = store(&backend, dir.path()).await;
        workspaces::record(&db, "s1", "alice", "Plot 100% of the Sales").await.unwrap();
        workspaces::record(&db, "s2", "alice", "plot 100 points").await.unwrap();
        workspaces::record(&db, "s3", "alice", "a_b c").await.unwrap();
        // Another user's run in alice's session neither takes it nor changes its preview.
        workspaces::record(&db, "s1", "bob", "bob's words").await.unwrap();
        assert!(workspaces::owned(&db, "s1", "alice").await.unwrap(), "{}", backend.name);
        let err = workspaces::owned(&db, "s1", "bob").await.unwrap_err();
        assert_eq!(err.code, ErrorCode::NotFound, "{}", backend.name);
        assert!(!workspaces::owned(&db, "none", "bob").await.unwrap(), "{}", backend.name);

        // Most recently used first: s1 is used again now.
        workspaces::record(&db, "s1", "alice", "Plot 100% of the Sales").await.unwrap();
        let all = workspaces::page(&db, "alice", "", 0, 10).await.unwrap();
        let ids: Vec<&str> = all.iter().map(|(id, _)| id.as_str()).collect();
        assert_eq!(ids, ["s1", "s3", "s2"], "{}", backend.name);
        assert_eq!(all[0].1, "Plot 100% of the Sales", "{}", backend.name);
        let percent = workspaces::page(&db, "alice", "100%", 0, 10).await.unwrap();
        assert_eq!(percent.len(), 1, "{}: % is literal", backend.name);
        let underscore = workspaces::page(&db, "alice", "A_B", 0, 10).await.unwrap();
        assert_eq!(underscore.len(), 1, "{}: _ is literal, any case", backend.name);
        let second = workspaces::page(&db, "alice", "plot", 1, 1).await.unwrap();
        assert_eq!(second.len(), 1, "{}", backend.name);
        assert_eq!(second[0].0, "s2", "{}", backend.name);
        assert!(workspaces::page(&db, "bob", "", 0, 10).await.unwrap().is_empty(), "{}", backend.name);

        let disk = workspaces::user_disk(&db, dir.path(), "alice", "s1", 10).await.unwrap();
        let mut others: Vec<_> = disk.others.iter().cloned().collect();
        others.sort();
        assert_eq!(others, [dir.path().join("s2"), dir.path().join("s3")], "{}", backend.name);

        assert!(workspaces::recorded(&db, "s2").await.unwrap(), "{}", backend.name);
        workspaces::forget(&db, "s2").await.unwrap();
        assert!(!workspaces::recorded(&db, "s2").await.unwrap(), "{}", backend.name);
    }

    async fn the_manifest_upserts_by_session_and_path(backend) {
        let dir = tempfile::tempdir().unwrap();
        let db = store(&backend, dir.path()).await;
        manifest::put(&db, "s1", &entry("b.txt", "d1")).await.unwrap();
        manifest::put(&db, "s1", &entry("a.txt", "d2")).await.unwrap();
        manifest::put(&db, "s1", &entry("b.txt", "d3")).await.unwrap();
        manifest::put(&db, "s2", &entry("a.txt", "d4")).await.unwrap();
        let s1 = manifest::entries(&db, "s1").await.unwrap();
        let listed: Vec<(&str, &str)> =
            s1.iter().map(|e| (e.path.as_str(), e.document_id.as_str())).collect();
        assert_eq!(listed, [("a.txt", "d2"), ("b.txt", "d3")], "{}", backend.name);
        assert!(s1.iter().all(|e| e.stored_at > 0), "{}", backend.name);
        let sessions = ["s1".to_owned(), "s2".to_owned(), "s3".to_owned()];
        let both = manifest::entries_of(&db, &sessions).await.unwrap();
        assert_eq!(both.len(), 2, "{}", backend.name);
        manifest::remove(&db, "s1", "a.txt").await.unwrap();
        assert_eq!(manifest::entries(&db, "s1").await.unwrap().len(), 1, "{}", backend.name);
        manifest::clear(&db, "s1").await.unwrap();
        assert!(manifest::entries(&db, "s1").await.unwrap().is_empty(), "{}", backend.name);
        assert_eq!(manifest::entries(&db, "s2").await.unwrap().len(), 1, "{}", backend.name);
    }

    async fn custom_tools_are_their_owners_alone(backend) {
        let dir = tempfile::tempdir().unwrap();
        let db = store(&backend, dir.path()).await;
        let ids = tools::insert(&db, "alice", "alice@example.com", vec![tool("wx"), tool("maps")])
            .await
            .unwrap();
        let names: Vec<String> =
            tools::list(&db, "alice").await.unwrap().into_iter().map(|t| t.tool_name).collect();
        assert_eq!(names, ["wx", "maps"], "{}: in upload order", backend.name);
        assert!(tools::get(&db, "bob", &ids[0]).await.unwrap().is_none(), "{}", backend.name);
        assert!(tools::file(&db, "bob", &ids[0]).await.unwrap().is_none(), "{}", backend.name);
        assert!(tools::file_hash(&db, "bob", &ids[0]).await.unwrap().is_none(), "{}", backend.name);
        let file = tools::file(&db, "alice", &ids[0]).await.unwrap().unwrap();
        assert_eq!((file.name.as_str(), file.data.as_slice()), ("w.zip", &b"zip bytes"[..]), "{}", backend.name);
        let hash = tools::file_hash(&db, "alice", &ids[0]).await.unwrap();
        assert_eq!(hash, Some(file.sha256), "{}", backend.name);
        let stolen = tools::update(&db, "bob", &ids[0], "stolen", &json!({})).await.unwrap();
        assert!(!stolen, "{}", backend.name);
        assert!(tools::update(&db, "alice", &ids[0], "weather", &json!({"a": 1})).await.unwrap(), "{}", backend.name);
        let wx = tools::get(&db, "alice", &ids[0]).await.unwrap().unwrap();
        assert_eq!((wx.tool_name.as_str(), &wx.args), ("weather", &json!({"a": 1})), "{}", backend.name);
        assert!(tools::delete(&db, "bob", &ids).await.unwrap().is_empty(), "{}", backend.name);
        assert_eq!(tools::delete(&db, "alice", &ids).await.unwrap(), ids, "{}", backend.name);
    }

    async fn custom_agents_and_their_associations_are_their_owners_alone(backend) {
        let dir = tempfile::tempdir().unwrap();
        let db = store(&backend, dir.path()).await;
        let alice = caller("alice");
        let bob = caller("bob");
        let ids = tools::insert(&db, "alice", "", vec![tool("weather")]).await.unwrap();
        let folder = folder();
        let id = agents::save(&db, &alice, "langgraph", &json!({"t": 1}), &folder).await.unwrap();
        // The same name again replaces it under its id.
        let again = agents::save(&db, &alice, "langgraph", &json!({"t": 2}), &folder).await.unwrap();
        assert_eq!(again, id, "{}", backend.name);
        let a = agents::agent(&db, "alice", &id).await.unwrap();
        assert_eq!(a.agent_args, json!({"t": 2}), "{}", backend.name);
        assert_eq!((&a.command, &a.servers), (&folder.command, &folder.servers), "{}", backend.name);
        assert_eq!(agents::folder(&db, "alice", &id).await.unwrap(), b"agent zip", "{}", backend.name);
        let foreign = agents::folder(&db, "bob", &id).await.unwrap_err();
        assert_eq!(foreign.code, ErrorCode::NotFound, "{}", backend.name);
        assert!(agents::agents(&db, "bob", None, None).await.unwrap().is_empty(), "{}", backend.name);

        let tool_assoc = agents::tool_associations(&db, "alice", Some(&id)).await.unwrap();
        let resolved: Vec<(&str, Option<&str>)> = tool_assoc
            .iter()
            .map(|t| (t.mcp_server_name.as_str(), t.tool_id.as_deref()))
            .collect();
        assert_eq!(resolved, [("weather", Some(ids[0].as_str())), ("none", None)], "{}", backend.name);
        let keys = agents::key_associations(&db, "alice", Some(&id)).await.unwrap();
        assert_eq!(keys.len(), 1, "{}", backend.name);
        agents::give_key(&db, "bob", &keys[0].id, "k1").await.unwrap();
        let given = agents::key_associations(&db, "alice", None).await.unwrap();
        assert_eq!(given[0].key_id, None, "{}: not bob's to give", backend.name);
        agents::give_key(&db, "alice", &keys[0].id, "k1").await.unwrap();
        let given = agents::key_associations(&db, "alice", None).await.unwrap();
        assert_eq!(given[0].key_id.as_deref(), Some("k1"), "{}", backend.name);

        let one = [tool_assoc[1].id.clone()];
        let n = agents::delete_associations(&db, Associations::Tool, "bob", &one).await.unwrap();
        assert_eq!(n, 0, "{}", backend.name);
        let n = agents::delete_associations(&db, Associations::Tool, "alice", &one).await.unwrap();
        assert_eq!(n, 1, "{}", backend.name);
        assert_eq!(agents::delete(&db, &bob, std::slice::from_ref(&id)).await.unwrap(), 0, "{}", backend.name);
        assert_eq!(agents::delete(&db, &alice, &[id.clone(), id.clone()]).await.unwrap(), 1, "{}", backend.name);
        assert!(agents::tool_associations(&db, "alice", None).await.unwrap().is_empty(), "{}", backend.name);
        assert!(agents::key_associations(&db, "alice", None).await.unwrap().is_empty(), "{}", backend.name);
    }

    async fn json_columns_that_do_not_decode_are_errors_not_defaults(backend) {
        let dir = tempfile::tempdir().unwrap();
        let db = store(&backend, dir.path()).await;
        let alice = caller("alice");

        preferences::set(&db, "u1", &["python".into()]).await.unwrap();
        raw(&db, "UPDATE tool_preferences SET tools = 'not json'").await;
        let err = preferences::get(&db, "u1").await.unwrap_err();
        assert_eq!(err.code, ErrorCode::Internal, "{}: tool_preferences.tools", backend.name);

        tools::insert(&db, "alice", "", vec![tool("wx")]).await.unwrap();
        raw(&db, "UPDATE custom_tools SET tool_args = '{broken'").await;
        let err = tools::list(&db, "alice").await.unwrap_err();
        assert_eq!(err.code, ErrorCode::Internal, "{}: custom_tools.tool_args", backend.name);
        raw(&db, "DELETE FROM custom_tools").await;

        for (column, text) in [("command", r#"{"not": "a list"}"#), ("mcp_servers", "[1]"), ("agent_args", "")] {
            raw(&db, "DELETE FROM custom_agents").await;
            agents::save(&db, &alice, "langgraph", &json!({}), &folder()).await.unwrap();
            assert_eq!(agents::agents(&db, "alice", None, None).await.unwrap().len(), 1, "{}", backend.name);
            raw(&db, &format!("UPDATE custom_agents SET {column} = '{text}'")).await;
            let err = agents::agents(&db, "alice", None, None).await.unwrap_err();
            assert_eq!(err.code, ErrorCode::Internal, "{}: custom_agents.{column}", backend.name);
        }
    }
}
