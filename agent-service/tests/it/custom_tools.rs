//! custom_tools below the gateway: inspection turns a request into exactly one target (or
//! answers `status: error`), and the run's Extensions open each stored tool with the opener
//! of its type, on files materialized from the database, or say honestly that the type is
//! not available.

use std::path::Path;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use docchat_agent_service::custom_tools::grpc::CustomToolGrpc;
use docchat_agent_service::custom_tools::{CustomTools, store};
use docchat_agent_service::tools::custom::{
    InspectTarget, Inspector, Opener, Secrets, ToolRecord, ToolType,
};
use docchat_agent_service::tools::{Extensions, Opened, ToolCtx, ToolDeps};
use docchat_common::Caller;
use docchat_common::error::ApiError;
use docchat_common::testing::user;
use docchat_proto::agent::v1 as pb;
use docchat_proto::agent::v1::custom_tool_service_server::CustomToolService;
use docchat_sandbox::NoSandbox;
use serde_json::json;

/// Remembers what it was asked to inspect.
#[derive(Default)]
struct Recorder(Mutex<Vec<String>>);

#[async_trait::async_trait]
impl Inspector for Recorder {
    async fn inspect(
        &self,
        _caller: &Caller,
        target: InspectTarget<'_>,
        model: &str,
        _secrets: &dyn Secrets,
    ) -> Result<pb::InspectResult, ApiError> {
        let seen = match target {
            InspectTarget::Tool(r, dir) => format!("tool {} files={}", r.tool_name, dir.is_some()),
            InspectTarget::Servers(s) => format!("servers {:?}", s.keys().collect::<Vec<_>>()),
            InspectTarget::File { name, data } => format!("file {name} {}", data.len()),
        };
        self.0.lock().unwrap().push(format!("{seen} model={model}"));
        Ok(pb::InspectResult {
            status: "success".into(),
            ..Default::default()
        })
    }
}

/// Opens a tool by listing its files (what a real opener would run).
struct Lister;

#[async_trait::async_trait]
impl Opener for Lister {
    async fn open(
        &self,
        record: &ToolRecord,
        files: Option<&Path>,
        _ctx: &ToolCtx,
        _secrets: &dyn Secrets,
    ) -> Result<Opened, String> {
        let mut names: Vec<String> = walk(files.ok_or("no files")?);
        names.sort();
        Ok(Opened {
            instructions: vec![format!("{}: {}", record.tool_name, names.join(","))],
            ..Default::default()
        })
    }
}

fn walk(dir: &Path) -> Vec<String> {
    let mut out = Vec::new();
    for e in std::fs::read_dir(dir).unwrap().flatten() {
        if e.path().is_dir() {
            out.extend(
                walk(&e.path())
                    .into_iter()
                    .map(|n| format!("{}/{n}", e.file_name().to_string_lossy())),
            );
        } else {
            out.push(e.file_name().to_string_lossy().into_owned());
        }
    }
    out
}

fn configurer(id: &str) -> Caller {
    let mut c = user(id, false);
    c.permissions.push("ConfigureAgents".into());
    c
}

fn request<T>(caller: &Caller, msg: T) -> tonic::Request<T> {
    let mut r = tonic::Request::new(msg);
    r.extensions_mut().insert(caller.clone());
    r
}

fn ctx(caller: &Caller, dir: &Path) -> ToolCtx {
    ToolCtx {
        caller: caller.clone(),
        workspace: dir.to_path_buf(),
        collection_id: String::new(),
        cancel: Default::default(),
        timeout: Duration::from_secs(5),
        max_memory: None,
        disk: Default::default(),
        deps: Arc::new(ToolDeps {
            code: Arc::new(NoSandbox("tests".into())),
            clients: None,
            shelf: None,
            fetch: false,
            fetch_allow: Vec::new(),
            workspace_quota: 1 << 30,
        }),
        asker: None,
    }
}

async fn tools_on(backend: &docchat_common::testing::Backend, dir: &Path) -> CustomTools {
    let db = docchat_common::db::connect(&backend.database_url(dir, "agent"))
        .await
        .unwrap();
    docchat_common::db::migrate::<docchat_agent_service::migrations::Migrator>(&db, "agent")
        .await
        .unwrap();
    CustomTools::new(db, dir.join("custom_tools"))
}

async fn inspect(
    grpc: &CustomToolGrpc,
    caller: &Caller,
    req: pb::InspectRequest,
) -> pb::InspectResult {
    grpc.inspect_mcp(request(caller, req))
        .await
        .unwrap()
        .into_inner()
}

docchat_common::backend_tests! {
    async fn inspection_takes_exactly_one_target(backend) {
        let dir = tempfile::tempdir().unwrap();
        let mut tools = tools_on(&backend, dir.path()).await;
        let alice = configurer("alice");
        let bob = configurer("bob");
        let config = json!({"mcpServers": {"weather": {"url": "https://w.example/mcp"}}}).to_string();
        let upload = pb::CustomToolUpload {
            tool_type: "remote_mcp".into(),
            tool_args_json: json!({"mcp_config_json": config}).to_string(),
            ..Default::default()
        };

        // Without an inspector: an honest error, HTTP 200 (status error).
        let bare = CustomToolGrpc { tools: Arc::new(CustomTools::new(tools.db.clone(), tools.root.clone())), prompts: None };
        let servers = pb::InspectRequest { servers_json: r#"{"a": {"command": "x"}}"#.into(), ..Default::default() };
        let r = inspect(&bare, &alice, servers.clone()).await;
        assert_eq!((r.status.as_str(), r.error.as_str()), ("error", "MCP inspection is not available"));

        let recorder = Arc::new(Recorder::default());
        tools.inspector = Some(recorder.clone());
        let grpc = CustomToolGrpc { tools: Arc::new(tools), prompts: None };
        let id = grpc.create_custom_tool(request(&alice, upload)).await.unwrap().into_inner().ids[0].clone();

        // Without ConfigureAgents: refused.
        let err = grpc.inspect_mcp(request(&user("carol", false), servers.clone())).await.unwrap_err();
        assert_eq!(err.code(), tonic::Code::Unauthenticated);

        for (what, req) in [
            ("none", pb::InspectRequest::default()),
            ("two", pb::InspectRequest { tool_id: id.clone(), servers_json: "{}".into(), ..Default::default() }),
            ("name without data", pb::InspectRequest { file_name: "s.zip".into(), ..Default::default() }),
            ("bad base64", pb::InspectRequest { file_name: "s.zip".into(), bad_base64: true, ..Default::default() }),
            ("servers not an object", pb::InspectRequest { servers_json: "[1]".into(), ..Default::default() }),
            ("another user's tool", pb::InspectRequest { tool_id: id.clone(), ..Default::default() }),
        ] {
            let caller = if what == "another user's tool" { &bob } else { &alice };
            let r = inspect(&grpc, caller, req).await;
            assert_eq!(r.status, "error", "{what}");
            assert!(!r.error.is_empty(), "{what}");
        }
        assert!(recorder.0.lock().unwrap().is_empty(), "no refused request reached the inspector");

        inspect(&grpc, &alice, servers).await;
        inspect(&grpc, &alice, pb::InspectRequest { file_name: "s.zip".into(), file_data: b"PK".to_vec(), has_file_data: true, model: "m".into(), ..Default::default() }).await;
        inspect(&grpc, &alice, pb::InspectRequest { tool_id: id, ..Default::default() }).await;
        assert_eq!(
            *recorder.0.lock().unwrap(),
            vec!["servers [\"a\"] model=".to_owned(), "file s.zip 2 model=m".to_owned(), "tool weather files=false model=".to_owned()]
        );
    }

    async fn runs_open_tools_by_type_on_materialized_files(backend) {
        let dir = tempfile::tempdir().unwrap();
        let tools = tools_on(&backend, dir.path()).await;
        let alice = configurer("alice");
        let zip = docchat_agent_service::archive::zip_of(&[("server.py", b"print(1)"), ("lib/util.py", b"")]);
        let ids = store::insert(&tools.db, "alice", "alice@example.com", vec![
            store::NewTool {
                tool_name: "mcp_one".into(),
                tool_type: ToolType::LocalMcp,
                args: json!({"tool_name": "mcp_one", "enable_by_default": false, "tool_usage_mode": ["runner"]}),
                file_name: Some("mcp_one.zip".into()),
                file: Some(zip),
            },
            store::NewTool {
                tool_name: "clicks".into(),
                tool_type: ToolType::BrowserAction,
                args: json!({"tool_name": "clicks", "description": "clicks around"}),
                file_name: Some("browser_clicks.py".into()),
                file: Some(b"x = 1".to_vec()),
            },
            store::NewTool {
                tool_name: "creator_only".into(),
                tool_type: ToolType::LocalMcp,
                args: json!({"tool_usage_mode": ["creator"]}),
                file_name: None,
                file: None,
            },
        ]).await.unwrap();
        let tools = tools.with_opener(ToolType::LocalMcp, Arc::new(Lister));

        let listed = tools.tools(&alice).await.unwrap();
        let names: Vec<(&str, bool)> = listed.iter().map(|t| (t.name.as_str(), t.enable_by_default)).collect();
        assert_eq!(names, vec![("mcp_one", false), ("clicks", true)], "creator-only tools stay out of runs");
        assert!(tools.tools(&user("bob", false)).await.unwrap().is_empty());

        let names = vec!["mcp_one".to_owned(), "clicks".to_owned()];
        let opened = tools.open(&alice, &names, &ctx(&alice, dir.path())).await;
        assert_eq!(opened.instructions, vec!["mcp_one: lib/util.py,server.py".to_owned()]);
        assert_eq!(opened.notes.len(), 1, "{:?}", opened.notes);
        assert!(opened.notes[0].contains("clicks (browser_action) is not available on this server"), "{:?}", opened.notes);
        // The ZIP was extracted once, under <root>/<id>-<sha>; a second open reuses it.
        let made: Vec<String> = std::fs::read_dir(&tools.root).unwrap().flatten().map(|e| e.file_name().to_string_lossy().into_owned()).collect();
        assert!(made.iter().any(|n| n.starts_with(&format!("{}-", ids[0]))), "{made:?}");
        let again = tools.open(&alice, &names[..1], &ctx(&alice, dir.path())).await;
        assert_eq!(again.instructions, opened.instructions);
        // Another user opens nothing of alice's.
        let bobs = tools.open(&user("bob", false), &names, &ctx(&alice, dir.path())).await;
        assert!(bobs.tools.is_empty() && bobs.instructions.is_empty() && bobs.notes.is_empty());
    }
}
