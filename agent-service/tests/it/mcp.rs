//! MCP servers as tools and their inspection, against real servers the tests start: the
//! FastMCP server of `mcp_data/server.py` (PyPI `mcp<2`) as a local_mcp package (the
//! package vendors `mcp` and its dependencies, installed once into ~/.cache/docchat and run
//! by the sandbox's /usr/bin/python3) and over streamable HTTP and legacy SSE (the venv's
//! python). Without python, `mcp` or a sandbox the tests skip loudly (they fail in CI).

use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::sync::Arc;
use std::time::Duration;

use docchat_agent_service::mcp::inspect::McpInspector;
use docchat_agent_service::mcp::{McpOpener, Settings};
use docchat_agent_service::tools::custom::{
    InspectTarget, Inspector, NoSecrets, Opener, Secrets, ToolRecord, ToolType,
};
use docchat_agent_service::tools::{Tool, ToolCtx, ToolDeps};
use docchat_common::testing::{unavailable, user};
use docchat_sandbox::{CodeRunner, NoSandbox};
use docchat_sandbox::{Mode, Sandbox, Settings as SandboxSettings};
use serde_json::{Value, json};
use tokio_util::sync::CancellationToken;

const SERVER: &str = include_str!("mcp_data/server.py");
const MCP: &str = "mcp==1.30.0";
/// What server.py expects in the Authorization header (without "Bearer ").
const KEY: &str = "k-7f3a9c";

/// The test venv's python with `mcp` importable, or `None` (a loud skip).
fn python() -> Option<PathBuf> {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("..");
    let out = std::process::Command::new("bash")
        .arg(root.join("scripts/python-env.sh"))
        .output()
        .ok()?;
    let python = PathBuf::from(String::from_utf8_lossy(&out.stdout).trim());
    let ok = std::process::Command::new(&python)
        .args(["-c", "import mcp.server.fastmcp"])
        .status()
        .is_ok_and(|s| s.success());
    if !ok {
        unavailable("python with PyPI mcp<2 (scripts/python-env.sh installs it)");
        return None;
    }
    Some(python)
}

/// `mcp` and its dependencies installed for a package (once, cached).
#[expect(
    clippy::disallowed_methods,
    reason = "the cache lives under the test user's HOME"
)]
fn vendored(python: &Path) -> Option<PathBuf> {
    let home = std::env::var_os("HOME").map(PathBuf::from)?;
    let dir = home.join(".cache/docchat/mcp-vendor").join(MCP);
    if dir.join("mcp").is_dir() {
        return Some(dir);
    }
    let tmp = dir.with_extension(format!("tmp{}", std::process::id()));
    let ok = std::process::Command::new(python)
        .args([
            "-m",
            "pip",
            "install",
            "--quiet",
            "--disable-pip-version-check",
        ])
        .arg("--target")
        .arg(&tmp)
        .arg(MCP)
        .status()
        .is_ok_and(|s| s.success());
    let moved = ok && std::fs::rename(&tmp, &dir).is_ok();
    let _ = std::fs::remove_dir_all(&tmp);
    if !moved && !dir.join("mcp").is_dir() {
        unavailable("pip install --target of mcp for the package");
        return None;
    }
    Some(dir)
}

fn copy_tree(from: &Path, to: &Path) {
    std::fs::create_dir_all(to).unwrap();
    for entry in std::fs::read_dir(from).unwrap() {
        let entry = entry.unwrap();
        let target = to.join(entry.file_name());
        if entry.file_type().unwrap().is_dir() {
            copy_tree(&entry.path(), &target);
        } else {
            std::fs::copy(entry.path(), &target).unwrap();
        }
    }
}

fn files_of(dir: &Path, prefix: &str, out: &mut Vec<(String, Vec<u8>)>) {
    for entry in std::fs::read_dir(dir).unwrap() {
        let entry = entry.unwrap();
        let name = format!("{prefix}{}", entry.file_name().to_string_lossy());
        if entry.file_type().unwrap().is_dir() {
            files_of(&entry.path(), &format!("{name}/"), out);
        } else {
            out.push((name, std::fs::read(entry.path()).unwrap()));
        }
    }
}

/// A test's directory (searchable by the sandbox's slot uids), its sandbox and a package
/// (`server`: the server's source) with `mcp` vendored.
struct Lab {
    dir: tempfile::TempDir,
    sandbox: Arc<dyn CodeRunner>,
    package: PathBuf,
}

async fn lab(n: u32, server: &str) -> Option<Lab> {
    lab_on(Mode::Auto, n, server).await
}

/// As [`lab`], on the backend `mode` (a loud skip when this host does not offer it).
async fn lab_on(mode: Mode, n: u32, server: &str) -> Option<Lab> {
    let python = python()?;
    let vendor = vendored(&python)?;
    let dir = tempfile::tempdir().unwrap();
    std::fs::set_permissions(
        dir.path(),
        std::os::unix::fs::PermissionsExt::from_mode(0o711),
    )
    .unwrap();
    let wanted = match mode {
        Mode::Bubblewrap => Some("bubblewrap"),
        Mode::Landlock => Some("landlock"),
        _ => None,
    };
    let sandbox = Sandbox::start(Ok(SandboxSettings {
        mode,
        dir: dir.path().join("sandbox"),
        slots: 2,
        user_slots: 2,
        max_run: Duration::from_secs(900),
        workspace_quota: 1 << 30,
        uid_base: 64900 + n * 4,
        helper: Some(docchat_sandbox::testing::helper()),
    }))
    .await;
    if !sandbox.status().isolated() || wanted.is_some_and(|w| w != sandbox.status().backend) {
        unavailable(&format!("a code sandbox ({})", sandbox.status().detail));
        return None;
    }
    let package = dir.path().join("package");
    copy_tree(&vendor, &package);
    std::fs::write(package.join("server.py"), server).unwrap();
    Some(Lab {
        dir,
        sandbox: Arc::new(sandbox),
        package,
    })
}

impl Lab {
    fn settings(&self, allow: &[&str]) -> Settings {
        let mut s = Settings::new(
            self.dir.path().join("scratch"),
            allow.iter().map(|h| h.to_string()).collect(),
        );
        s.wait = Duration::from_secs(20);
        s
    }

    fn ctx(&self) -> ToolCtx {
        let workspace = self.dir.path().join("workspace");
        std::fs::create_dir_all(&workspace).unwrap();
        ctx_with(self.sandbox.clone(), workspace)
    }

    fn inspector(&self, wait: Duration, allow: &[&str]) -> McpInspector {
        let mut settings = self.settings(allow);
        settings.wait = wait;
        McpInspector {
            code: self.sandbox.clone(),
            settings,
            reviewer: None,
        }
    }
}

fn ctx_with(code: Arc<dyn CodeRunner>, workspace: PathBuf) -> ToolCtx {
    ToolCtx {
        caller: user("alice", false),
        workspace,
        collection_id: String::new(),
        cancel: CancellationToken::new(),
        timeout: Duration::from_secs(30),
        max_memory: None,
        disk: Default::default(),
        deps: Arc::new(ToolDeps {
            code,
            clients: None,
            shelf: None,
            fetch: false,
            fetch_allow: Vec::new(),
            workspace_quota: 1 << 30,
        }),
        asker: None,
    }
}

fn record(name: &str, kind: ToolType, args: Value) -> ToolRecord {
    ToolRecord {
        id: format!("t-{name}"),
        owner_id: "alice".into(),
        owner_email: "alice@example.com".into(),
        tool_name: name.into(),
        tool_type: kind,
        args,
        file_name: None,
    }
}

async fn call(
    tools: &[Arc<dyn Tool>],
    ctx: &ToolCtx,
    name: &str,
    args: Value,
) -> Result<String, String> {
    let tool = tools
        .iter()
        .find(|t| t.name() == name)
        .unwrap_or_else(|| panic!("no tool {name}"));
    tool.call(ctx, args).await.map(|o| o.text)
}

/// Python processes whose command line mentions `needle`.
fn processes_with(needle: &str) -> usize {
    std::fs::read_dir("/proc")
        .unwrap()
        .filter_map(Result::ok)
        .filter(|e| e.file_name().to_string_lossy().parse::<u32>().is_ok())
        .filter(|e| {
            std::fs::read(e.path().join("cmdline"))
                .is_ok_and(|c| String::from_utf8_lossy(&c).contains(needle))
        })
        .count()
}

#[tokio::test]
async fn a_local_package_runs_in_bubblewrap_and_its_tools_are_called() {
    local_package(Mode::Bubblewrap, 0).await;
}

#[tokio::test]
async fn a_local_package_runs_under_the_landlock_helper_and_its_tools_are_called() {
    local_package(Mode::Landlock, 3).await;
}

async fn local_package(mode: Mode, n: u32) {
    // A server that outlives its stdin (a thread that does not end): only killing it ends it.
    let lingering = SERVER.replacen(
        "mcp = FastMCP(",
        "import threading, time\nthreading.Thread(target=time.sleep, args=(600,)).start()\nmcp = FastMCP(",
        1,
    );
    let Some(lab) = lab_on(mode, n, &lingering).await else {
        return;
    };
    let ctx = lab.ctx();
    let opener = McpOpener {
        settings: lab.settings(&[]),
    };
    let opened = opener
        .open(
            &record("calc", ToolType::LocalMcp, json!({})),
            Some(&lab.package),
            &ctx,
            &NoSecrets,
        )
        .await
        .unwrap();
    let mut names: Vec<&str> = opened.tools.iter().map(|t| t.name()).collect();
    names.sort();
    assert_eq!(
        names,
        [
            "calc__add",
            "calc__fail",
            "calc__key_seen",
            "calc__slow",
            "calc__write_note"
        ]
    );
    let add = opened
        .tools
        .iter()
        .find(|t| t.name() == "calc__add")
        .unwrap();
    assert_eq!(add.description(), "Adds two numbers.");
    assert_eq!(add.parameters()["properties"]["a"]["type"], "integer");
    assert!(add.writes(), "a local server may write the workspace");

    assert_eq!(
        call(&opened.tools, &ctx, "calc__add", json!({"a": 2, "b": 3})).await,
        Ok("5".into())
    );
    let failed = call(
        &opened.tools,
        &ctx,
        "calc__fail",
        json!({"reason": "broken on purpose"}),
    )
    .await;
    assert!(
        failed
            .as_ref()
            .is_err_and(|e| e.contains("broken on purpose")),
        "{failed:?}"
    );
    assert_eq!(
        call(
            &opened.tools,
            &ctx,
            "calc__write_note",
            json!({"text": "from mcp"})
        )
        .await,
        Ok("written".into())
    );
    assert_eq!(
        std::fs::read_to_string(ctx.workspace.join("note.txt")).unwrap(),
        "from mcp",
        "the server writes the session's workspace"
    );

    // The package is read-only for the server.
    let marker = lab.package.display().to_string();
    assert!(
        processes_with(&marker) > 0,
        "the server runs while the tools live"
    );
    drop(opened);
    for _ in 0..100 {
        if processes_with(&marker) == 0 {
            break;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    assert_eq!(
        processes_with(&marker),
        0,
        "dropping the tools ends the server"
    );
}

#[tokio::test]
async fn a_zip_package_is_inspected_in_the_sandbox() {
    let Some(lab) = lab(1, SERVER).await else {
        return;
    };
    let mut files = Vec::new();
    files_of(&lab.package, "calc/", &mut files);
    let entries: Vec<(&str, &[u8])> = files
        .iter()
        .map(|(n, d)| (n.as_str(), d.as_slice()))
        .collect();
    let zip = docchat_agent_service::archive::zip_of(&entries);
    let result = lab
        .inspector(Duration::from_secs(20), &[])
        .inspect(
            &user("alice", false),
            InspectTarget::File {
                name: "calc.zip",
                data: &zip,
            },
            "",
            &NoSecrets,
        )
        .await
        .unwrap();
    assert_eq!(result.status, "success", "{}", result.error);
    let [server] = result.servers.as_slice() else {
        panic!("{result:?}")
    };
    assert_eq!(server.server_name, "calc");
    assert_eq!(server.server_type, "fastmcp");
    assert_eq!(server.status, "success");
    assert_eq!(server.security_json, "{}");
    assert_eq!(server.tools.len(), 5);
    let add = server.tools.iter().find(|t| t.name == "add").unwrap();
    let params: Value = serde_json::from_str(&add.parameters_json).unwrap();
    assert_eq!(params["required"], json!(["a", "b"]));

    // A tool stored as uploaded (its directory holds the ZIP): unpacked, then run.
    let stored = lab.dir.path().join("stored");
    std::fs::create_dir(&stored).unwrap();
    std::fs::write(stored.join("calc.zip"), &zip).unwrap();
    let ctx = lab.ctx();
    let opened = McpOpener {
        settings: lab.settings(&[]),
    }
    .open(
        &record("calc", ToolType::LocalMcp, json!({})),
        Some(&stored),
        &ctx,
        &NoSecrets,
    )
    .await
    .unwrap();
    assert_eq!(
        call(&opened.tools, &ctx, "calc__add", json!({"a": 1, "b": 1})).await,
        Ok("2".into())
    );
}

#[tokio::test]
async fn inspect_failures_answer_status_error() {
    let crash = "import sys\nsys.stderr.write('cannot start: missing config\\n')\nsys.exit(3)\n";
    let Some(lab) = lab(2, crash).await else {
        return;
    };
    let inspector = lab.inspector(Duration::from_secs(3), &[]);
    let alice = user("alice", false);
    let stored = record("broken", ToolType::LocalMcp, json!({}));
    let result = inspector
        .inspect(
            &alice,
            InspectTarget::Tool(&stored, Some(&lab.package)),
            "",
            &NoSecrets,
        )
        .await
        .unwrap();
    assert_eq!(result.status, "error");
    assert_eq!(result.servers[0].status, "error");
    assert!(
        result.servers[0]
            .error
            .contains("cannot start: missing config"),
        "the server's own words: {}",
        result.servers[0].error
    );

    // A server that never answers: bounded.
    std::fs::write(
        lab.package.join("server.py"),
        "import time\ntime.sleep(600)\n",
    )
    .unwrap();
    let started = std::time::Instant::now();
    let result = inspector
        .inspect(
            &alice,
            InspectTarget::Tool(&stored, Some(&lab.package)),
            "",
            &NoSecrets,
        )
        .await
        .unwrap();
    assert!(
        started.elapsed() < Duration::from_secs(15),
        "{:?}",
        started.elapsed()
    );
    assert_eq!(result.status, "error");
    assert!(
        result.servers[0].error.contains("within"),
        "{}",
        result.servers[0].error
    );

    // Not a package at all, and a configuration that is not an object.
    let result = inspector
        .inspect(
            &alice,
            InspectTarget::File {
                name: "x.zip",
                data: b"not a zip",
            },
            "",
            &NoSecrets,
        )
        .await
        .unwrap();
    assert_eq!(result.status, "error");
    assert!(!result.error.is_empty());
    let mut servers = serde_json::Map::new();
    servers.insert("odd".into(), json!("http://x"));
    let result = inspector
        .inspect(&alice, InspectTarget::Servers(servers), "", &NoSecrets)
        .await
        .unwrap();
    assert_eq!(result.status, "error");
    assert_eq!(result.servers[0].server_name, "odd");
}

/// A server.py over HTTP, killed when dropped.
struct Remote {
    _child: tokio::process::Child,
    port: u16,
}

async fn remote(python: &Path, transport: &str) -> Remote {
    let port = {
        let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        l.local_addr().unwrap().port()
    };
    let dir = tempfile::tempdir().unwrap().keep();
    std::fs::write(dir.join("server.py"), SERVER).unwrap();
    let child = tokio::process::Command::new(python)
        .arg(dir.join("server.py"))
        .args([transport, &port.to_string()])
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .kill_on_drop(true)
        .spawn()
        .unwrap();
    for _ in 0..200 {
        if tokio::net::TcpStream::connect(("127.0.0.1", port))
            .await
            .is_ok()
        {
            return Remote {
                _child: child,
                port,
            };
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    panic!("the {transport} server did not listen");
}

struct Keys;

#[async_trait::async_trait]
impl Secrets for Keys {
    async fn value(&self, owner: &str, name: &str) -> Option<String> {
        (owner == "alice" && name == "CALC_KEY").then(|| KEY.to_owned())
    }
}

fn remote_record(url: &str) -> ToolRecord {
    record(
        "calc",
        ToolType::RemoteMcp,
        json!({"mcp_config_json": json!({"mcpServers": {"calc": {
            "url": url,
            "headers": {"Authorization": "Bearer ${CALC_KEY}"}
        }}}).to_string()}),
    )
}

#[tokio::test]
async fn remote_servers_over_streamable_http_and_sse() {
    let Some(python) = python() else { return };
    let http = remote(&python, "streamable-http").await;
    let sse = remote(&python, "sse").await;
    let workspace = tempfile::tempdir().unwrap();
    let ctx = ctx_with(
        Arc::new(NoSandbox("no code here".into())),
        workspace.path().to_path_buf(),
    );
    let scratch = tempfile::tempdir().unwrap();
    let mut settings = Settings::new(scratch.path().to_path_buf(), vec!["127.0.0.1".into()]);
    settings.wait = Duration::from_secs(10);
    for (url, kind) in [
        (format!("http://127.0.0.1:{}/mcp", http.port), "http"),
        (format!("http://127.0.0.1:{}/sse", sse.port), "sse"),
    ] {
        let opened = McpOpener {
            settings: settings.clone(),
        }
        .open(&remote_record(&url), None, &ctx, &Keys)
        .await
        .unwrap_or_else(|e| panic!("{kind}: {e}"));
        assert_eq!(opened.tools.len(), 5, "{kind}");
        assert!(opened.tools.iter().all(|t| !t.writes()), "{kind}");
        assert_eq!(
            call(&opened.tools, &ctx, "calc__add", json!({"a": 40, "b": 2})).await,
            Ok("42".into()),
            "{kind}"
        );
        assert_eq!(
            call(&opened.tools, &ctx, "calc__key_seen", json!({})).await,
            Ok("key: yes".into()),
            "{kind}: the stored key is resolved server-side"
        );

        // Each call is bounded by the run's per-call timeout.
        let mut hasty = ctx.clone();
        hasty.timeout = Duration::from_millis(500);
        let late = call(&opened.tools, &hasty, "calc__slow", json!({"seconds": 5})).await;
        assert!(
            late.as_ref().is_err_and(|e| e.contains("within")),
            "{kind}: {late:?}"
        );

        let inspector = McpInspector {
            code: Arc::new(NoSandbox("no code here".into())),
            settings: settings.clone(),
            reviewer: None,
        };
        let mut servers = serde_json::Map::new();
        servers.insert(
            "calc".into(),
            json!({"url": url, "headers": {"Authorization": "Bearer ${CALC_KEY}"}}),
        );
        let result = inspector
            .inspect(
                &user("alice", false),
                InspectTarget::Servers(servers),
                "",
                &Keys,
            )
            .await
            .unwrap();
        assert_eq!(result.status, "success", "{kind}: {}", result.error);
        assert_eq!(result.servers[0].server_type, kind);
        assert_eq!(result.servers[0].tools.len(), 5);
        assert!(
            !format!("{result:?}").contains(KEY),
            "{kind}: the key is never answered"
        );
        // The same configuration as an uploaded .json file.
        let file = json!({"mcpServers": {"calc": {"url": url}}}).to_string();
        let result = inspector
            .inspect(
                &user("alice", false),
                InspectTarget::File {
                    name: "servers.json",
                    data: file.as_bytes(),
                },
                "",
                &Keys,
            )
            .await
            .unwrap();
        assert_eq!(result.status, "success", "{kind}: {}", result.error);
        assert_eq!(result.servers[0].server_name, "calc");
    }
}

#[tokio::test]
async fn a_private_address_is_refused_unless_allowed() {
    let Some(python) = python() else { return };
    let http = remote(&python, "streamable-http").await;
    let url = format!("http://127.0.0.1:{}/mcp", http.port);
    let workspace = tempfile::tempdir().unwrap();
    let ctx = ctx_with(
        Arc::new(NoSandbox("none".into())),
        workspace.path().to_path_buf(),
    );
    let scratch = tempfile::tempdir().unwrap();
    let settings = Settings::new(scratch.path().to_path_buf(), Vec::new());
    let refused = McpOpener {
        settings: settings.clone(),
    }
    .open(&remote_record(&url), None, &ctx, &Keys)
    .await
    .err()
    .unwrap();
    assert!(
        refused.contains("loopback, private or link-local"),
        "{refused}"
    );

    // Allowed, but nothing listens: the error quotes the URL without the key in it.
    let closed = {
        let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        l.local_addr().unwrap().port()
    };
    let allowed = Settings::new(scratch.path().to_path_buf(), vec!["127.0.0.1".into()]);
    let failed = McpOpener { settings: allowed }
        .open(
            &remote_record(&format!(
                "http://127.0.0.1:{closed}/mcp?token=${{CALC_KEY}}"
            )),
            None,
            &ctx,
            &Keys,
        )
        .await
        .err()
        .unwrap();
    assert!(failed.contains("token=***"), "{failed}");
    assert!(!failed.contains(KEY), "the key never appears: {failed}");

    let mut servers = serde_json::Map::new();
    servers.insert("calc".into(), json!({"url": url}));
    let inspector = McpInspector {
        code: Arc::new(NoSandbox("none".into())),
        settings,
        reviewer: None,
    };
    let result = inspector
        .inspect(
            &user("alice", false),
            InspectTarget::Servers(servers),
            "",
            &Keys,
        )
        .await
        .unwrap();
    assert_eq!(result.status, "error");
    assert!(
        result.servers[0].error.contains("loopback"),
        "{}",
        result.servers[0].error
    );
}

docchat_common::backend_tests! {
    async fn an_agent_run_calls_a_remote_mcp_tool(backend) {
        use docchat_agent_service::tools::Catalog;
        use docchat_common::testing::{ScriptedCall, ScriptedHttp, ScriptedTurn};
        use docchat_proto::agent::v1::run_event::Event;

        let Some(python) = python() else { return };
        let http = remote(&python, "streamable-http").await;
        let upstream = ScriptedHttp::chat_turns(vec![
            ScriptedTurn::calls(vec![ScriptedCall::new("c1", "calc__add", json!({"a": 40, "b": 2}))]),
            ScriptedTurn::text("The sum is 42."),
        ])
        .await;
        let agents = crate::run::Agents::start(&backend, &upstream).await;

        // The MCP server's tools, opened as the custom-tools registry opens them for a run.
        let workspace = tempfile::tempdir().unwrap();
        let ctx = ctx_with(Arc::new(NoSandbox("none".into())), workspace.path().to_path_buf());
        let scratch = tempfile::tempdir().unwrap();
        let opened = McpOpener {
            settings: Settings::new(scratch.path().to_path_buf(), vec!["127.0.0.1".into()]),
        }
        .open(&remote_record(&format!("http://127.0.0.1:{}/mcp", http.port)), None, &ctx, &Keys)
        .await
        .unwrap();
        let mut catalog = Catalog::builtin();
        for tool in opened.tools {
            catalog = catalog.with(tool);
        }
        let replica = agents.stack().agent_with(catalog, Vec::new()).await;

        let (_tx, mut events) = agents
            .run_on(
                &replica,
                &user("alice", false),
                crate::run::start("s-mcp", "Add 40 and 2", json!({"agent_tools": ["calc__add"]})),
            )
            .await;
        let (seen, finished) = crate::run::events_until_finished(&mut events).await;
        assert!(!finished.failed, "{}: {}", backend.name, finished.stop_reason);
        let tools: Vec<(&str, bool)> = seen
            .iter()
            .filter_map(|e| match e {
                Event::ToolFinished(t) => Some((t.name.as_str(), t.ok)),
                _ => None,
            })
            .collect();
        assert_eq!(tools, [("calc__add", true)], "{}", backend.name);
        assert_eq!(finished.text, "The sum is 42.", "{}", backend.name);
        let bodies = upstream.bodies();
        assert_eq!(bodies[0]["tools"][0]["function"]["name"], "calc__add", "{}", backend.name);
        assert_eq!(
            bodies[0]["tools"][0]["function"]["parameters"]["required"],
            json!(["a", "b"]),
            "{}: the MCP input schema is the tool's parameters",
            backend.name
        );
        let messages = bodies[1]["messages"].as_array().unwrap();
        let result = messages.iter().find(|m| m["role"] == "tool").unwrap();
        assert_eq!(result["content"], "42", "{}: the model reads the MCP tool's answer", backend.name);
        replica.stop().await.unwrap();
    }
}

#[tokio::test]
async fn inspect_with_a_model_reviews_the_tools() {
    use docchat_agent_service::mcp::review::ModelReviewer;
    use docchat_common::testing::{ScriptedHttp, ScriptedTurn};

    let Some(python) = python() else { return };
    let http = remote(&python, "streamable-http").await;
    let upstream = ScriptedHttp::chat_turns(vec![ScriptedTurn::text(
        "Verdict:\n```json\n{\"risk\": \"high\", \"prompt_injection\": false, \"over_broad\": true, \"findings\": [\"write_note writes files\"]}\n```",
    )])
    .await;
    let dir = tempfile::tempdir().unwrap();
    let models = dir.path().join("models.toml");
    std::fs::write(&models, docchat_test_stack::tool_models(&upstream.base_url)).unwrap();
    let registry = docchat_inference::Registry::load(Some(&models)).unwrap();
    let mut settings = Settings::new(dir.path().join("scratch"), vec!["127.0.0.1".into()]);
    settings.wait = Duration::from_secs(10);
    let inspector = McpInspector {
        code: Arc::new(NoSandbox("none".into())),
        settings,
        reviewer: Some(Arc::new(ModelReviewer { registry })),
    };
    let mut servers = serde_json::Map::new();
    servers.insert(
        "calc".into(),
        json!({"url": format!("http://127.0.0.1:{}/mcp", http.port)}),
    );
    let result = inspector
        .inspect(
            &user("alice", false),
            InspectTarget::Servers(servers),
            "scripted",
            &NoSecrets,
        )
        .await
        .unwrap();
    assert_eq!(result.status, "success", "{}", result.error);
    let security: Value = serde_json::from_str(&result.servers[0].security_json).unwrap();
    assert_eq!(security["risk"], "high", "{security}");
    assert_eq!(security["over_broad"], true, "{security}");
    assert_eq!(security["model"], "scripted", "{security}");
    let asked = upstream.bodies();
    let prompt = asked[0]["messages"][1]["content"].as_str().unwrap();
    assert!(
        prompt.contains("Adds two numbers."),
        "the model reads the descriptions: {prompt}"
    );
}
