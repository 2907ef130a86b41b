//! browser_action tools against real chromium in the real bubblewrap sandbox: a script
//! drives a page this test serves on 127.0.0.1 (allowed by name, `localhost`, as an
//! administrator would allow a host) and its answer comes back; the same page under an
//! address not allowed is refused by the egress proxy and the result says so; the sandboxed
//! script cannot reach the test's listener directly; the Landlock helper refuses browser
//! tools; and an agent run (scripted upstream) calls a browser tool end to end. Without
//! chromium or bubblewrap the tests skip loudly (they fail in CI).

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use docchat_agent_service::browser::BrowserOpener;
use docchat_agent_service::budget::Budget;
use docchat_agent_service::run::control::Control;
use docchat_agent_service::run::{Engine, RunRequest};
use docchat_agent_service::tools::custom::{NoSecrets, Opener, ToolRecord, ToolType};
use docchat_agent_service::tools::{Catalog, ExtensionTool, Extensions, Opened, ToolCtx, ToolDeps};
use docchat_common::Caller;
use docchat_common::error::ApiError;
use docchat_common::testing::{ScriptedCall, ScriptedHttp, ScriptedTurn, user};
use docchat_proto::agent::v1 as pb;
use docchat_sandbox::{Mode, Sandbox, Settings};
use serde_json::json;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio_util::sync::CancellationToken;

/// The page the browser opens: a title and a button whose text a click changes.
const PAGE: &str = "<!doctype html><title>Docchat test page</title>\
    <button id=b onclick=\"this.textContent='clicked '+location.port\">press</button>";

/// A web server on 127.0.0.1 answering [`PAGE`], counting its requests.
struct Site {
    port: u16,
    hits: Arc<AtomicUsize>,
    _tracker: tokio_util::task::TaskTracker,
}

async fn site() -> Site {
    let l = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let port = l.local_addr().unwrap().port();
    let hits = Arc::new(AtomicUsize::new(0));
    let tracker = tokio_util::task::TaskTracker::new();
    let h = hits.clone();
    tracker.spawn(async move {
        while let Ok((mut c, _)) = l.accept().await {
            let mut buf = vec![0u8; 8192];
            let mut n = 0;
            while !buf[..n].windows(4).any(|w| w == b"\r\n\r\n") && n < buf.len() {
                match c.read(&mut buf[n..]).await {
                    Ok(0) | Err(_) => break,
                    Ok(k) => n += k,
                }
            }
            if buf[..n].starts_with(b"GET / ") {
                h.fetch_add(1, Ordering::SeqCst);
            }
            let _ = c
                .write_all(
                    format!(
                        "HTTP/1.1 200 OK\r\nContent-Type: text/html\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{PAGE}",
                        PAGE.len()
                    )
                    .as_bytes(),
                )
                .await;
        }
    });
    Site {
        port,
        hits,
        _tracker: tracker,
    }
}

/// The click script: opens `url`, clicks the button, answers the title and its new text.
const CLICK: &str = r##"
def browser_click(page, url: str, selector: str = "#b") -> str:
    """Opens a page, clicks a button and answers the page's title and the button's text.

    url: the page's address
    selector: the button's CSS selector
    """
    page.goto(url).click(selector)
    return page.title() + " | " + page.text(selector)
"##;

/// A script that tries the network without the browser.
const DIRECT: &str = r#"
import socket

def run(page, port: int) -> str:
    """Connects straight to 127.0.0.1:port."""
    try:
        socket.create_connection(("127.0.0.1", port), timeout=3).close()
        return "connected"
    except OSError as e:
        return "blocked: " + str(e)
"#;

/// A bubblewrap sandbox, a workspace and the browser's prerequisites; `None` (a loud skip,
/// a failure in CI) without them.
struct Lab {
    dir: tempfile::TempDir,
    deps: Arc<ToolDeps>,
}

async fn lab(mode: Mode, n: u32) -> Option<Lab> {
    if !Path::new("/usr/lib/chromium/chromium").is_file() {
        docchat_common::testing::unavailable(
            "chromium (Debian's chromium; scripts/sandbox-runtime.sh installs it)",
        );
        return None;
    }
    let dir = tempfile::tempdir().unwrap();
    std::fs::set_permissions(
        dir.path(),
        std::os::unix::fs::PermissionsExt::from_mode(0o711),
    )
    .unwrap();
    let (name, base) = match mode {
        Mode::Bubblewrap => ("bubblewrap", 64900 + n * 4),
        _ => ("landlock", 64950 + n * 4),
    };
    let sandbox = Sandbox::start(Ok(Settings {
        mode,
        dir: dir.path().join("sandbox"),
        slots: 2,
        user_slots: 2,
        max_run: Duration::from_secs(900),
        workspace_quota: 1 << 30,
        uid_base: base,
        helper: Some(docchat_sandbox::testing::helper()),
    }))
    .await;
    if sandbox.status().backend != name {
        docchat_common::testing::unavailable(&format!(
            "the {name} sandbox: {}",
            sandbox.status().detail
        ));
        return None;
    }
    std::fs::create_dir(dir.path().join("workspace")).unwrap();
    Some(Lab {
        deps: Arc::new(ToolDeps {
            code: Arc::new(sandbox),
            clients: None,
            shelf: None,
            fetch: true,
            // As an administrator allows a host by name (DOCCHAT_AGENT_EGRESS_ALLOW).
            fetch_allow: vec!["localhost".into()],
            workspace_quota: 1 << 30,
        }),
        dir,
    })
}

impl Lab {
    fn ctx(&self) -> ToolCtx {
        ToolCtx {
            caller: user("alice", false),
            workspace: self.dir.path().join("workspace"),
            collection_id: String::new(),
            cancel: CancellationToken::new(),
            timeout: Duration::from_secs(60),
            max_memory: None,
            disk: Default::default(),
            deps: self.deps.clone(),
            asker: None,
        }
    }

    fn opener(&self) -> BrowserOpener {
        BrowserOpener::new(self.dir.path().join("browser"))
    }

    /// A stored browser_action tool whose only file is `file` with `code`.
    fn tool(&self, file: &str, code: &str) -> (ToolRecord, PathBuf) {
        let files = self.dir.path().join("files").join(file);
        std::fs::create_dir_all(&files).unwrap();
        std::fs::write(files.join(file), code).unwrap();
        let record = ToolRecord {
            id: format!("t-{file}"),
            owner_id: "alice".into(),
            owner_email: "alice@example.com".into(),
            tool_name: file.trim_end_matches(".py").into(),
            tool_type: ToolType::BrowserAction,
            args: json!({}),
            file_name: Some(file.into()),
        };
        (record, files)
    }

    async fn open(&self, file: &str, code: &str) -> Result<Opened, String> {
        let (record, files) = self.tool(file, code);
        self.opener()
            .open(&record, Some(&files), &self.ctx(), &NoSecrets)
            .await
    }
}

#[tokio::test]
async fn a_browser_action_drives_a_served_page_and_private_addresses_are_refused() {
    let Some(lab) = lab(Mode::Bubblewrap, 0).await else {
        return;
    };
    let site = site().await;
    let opened = lab.open("browser_click.py", CLICK).await.unwrap();
    let tool = &opened.tools[0];
    assert_eq!(tool.name(), "browser_click");
    assert_eq!(
        tool.description(),
        "Opens a page, clicks a button and answers the page's title and the button's text."
    );
    assert_eq!(
        tool.parameters(),
        json!({"type": "object", "additionalProperties": false, "required": ["url"],
               "properties": {"url": {"type": "string", "description": "the page's address"},
                              "selector": {"type": "string", "description": "the button's CSS selector"}}})
    );

    let ctx = lab.ctx();
    let url = format!("http://localhost:{}/", site.port);
    let out = tool.call(&ctx, json!({"url": url})).await.unwrap();
    assert_eq!(
        out.text,
        format!("Docchat test page | clicked {}", site.port),
        "the script's answer after the click"
    );
    assert_eq!(site.hits.load(Ordering::SeqCst), 1);

    // The same page under an address not allowed by name: the proxy refuses it and the
    // result says why; the site never sees the request.
    let url = format!("http://127.0.0.1:{}/", site.port);
    let err = tool.call(&ctx, json!({"url": url})).await.unwrap_err();
    assert!(
        err.contains("the egress rule refused") && err.contains("loopback, private or link-local"),
        "{err}"
    );
    assert!(!err.contains("clicked"), "{err}");
    // https goes through CONNECT, refused the same way (a navigation error).
    let url = format!("https://10.0.0.1:{}/", site.port);
    let err = tool.call(&ctx, json!({"url": url})).await.unwrap_err();
    assert!(
        err.contains("ERR_TUNNEL_CONNECTION_FAILED") && err.contains("10.0.0.1"),
        "{err}"
    );
    assert_eq!(
        site.hits.load(Ordering::SeqCst),
        1,
        "only the allowed call reached the site"
    );
}

#[tokio::test]
async fn the_sandboxed_script_reaches_nothing_but_the_proxy() {
    let Some(lab) = lab(Mode::Bubblewrap, 1).await else {
        return;
    };
    let site = site().await;
    let opened = lab.open("browser_direct.py", DIRECT).await.unwrap();
    let tool = &opened.tools[0];
    assert_eq!(tool.parameters()["required"], json!(["port"]));
    let out = tool
        .call(&lab.ctx(), json!({"port": site.port}))
        .await
        .unwrap();
    assert!(out.text.starts_with("blocked: "), "{}", out.text);
    assert_eq!(site.hits.load(Ordering::SeqCst), 0);
    // Dropping the tool removes its kit (the runner, the files, the proxy's socket).
    drop(opened);
    let kits: Vec<_> = std::fs::read_dir(lab.dir.path().join("browser"))
        .unwrap()
        .collect();
    assert!(kits.is_empty(), "{kits:?}");
}

#[tokio::test]
async fn the_landlock_helper_refuses_browser_tools() {
    let Some(lab) = lab(Mode::Landlock, 2).await else {
        return;
    };
    let err = lab
        .open("browser_click.py", CLICK)
        .await
        .err()
        .expect("refused");
    assert!(err.contains("need the bubblewrap sandbox"), "{err}");
}

#[tokio::test]
async fn a_script_without_its_function_is_not_opened() {
    let Some(lab) = lab(Mode::Bubblewrap, 3).await else {
        return;
    };
    let err = lab
        .open("browser_none.py", "def other(page):\n    pass\n")
        .await
        .err()
        .expect("refused");
    assert!(err.contains("defines no function browser_none"), "{err}");
}

/// The caller's custom tools: one browser action (what custom_tools/ does with stored ones).
struct OneBrowserTool {
    opener: BrowserOpener,
    record: ToolRecord,
    files: PathBuf,
}

#[async_trait::async_trait]
impl Extensions for OneBrowserTool {
    async fn tools(&self, _caller: &Caller) -> Result<Vec<ExtensionTool>, ApiError> {
        Ok(vec![ExtensionTool {
            name: self.record.tool_name.clone(),
            description: String::new(),
            enable_by_default: false,
        }])
    }

    async fn open(&self, _caller: &Caller, names: &[String], ctx: &ToolCtx) -> Opened {
        assert_eq!(names, std::slice::from_ref(&self.record.tool_name));
        match self
            .opener
            .open(&self.record, Some(&self.files), ctx, &NoSecrets)
            .await
        {
            Ok(o) => o,
            Err(e) => Opened {
                notes: vec![e],
                ..Opened::default()
            },
        }
    }
}

/// No cost caps.
struct Free;

#[async_trait::async_trait]
impl Budget for Free {
    async fn check(&self, _caller: &Caller) -> Result<(), ApiError> {
        Ok(())
    }
    async fn book(&self, _usage: docchat_proto::events::v1::LlmUsage) {}
}

#[tokio::test]
async fn an_agent_run_calls_a_browser_action() {
    let Some(lab) = lab(Mode::Bubblewrap, 4).await else {
        return;
    };
    let site = site().await;
    let url = format!("http://localhost:{}/", site.port);
    let upstream = ScriptedHttp::chat_turns(vec![
        ScriptedTurn::calls(vec![ScriptedCall::new(
            "c1",
            "browser_click",
            json!({"url": url}),
        )]),
        ScriptedTurn::text("The button says clicked."),
    ])
    .await;
    let registry =
        docchat_inference::Registry::parse(&docchat_test_stack::tool_models(&upstream.base_url))
            .unwrap();
    let entry = registry
        .chat_models()
        .find(|e| e.name == "scripted")
        .unwrap()
        .clone();
    let model = Arc::new(
        docchat_inference::ChatModel::from_entry(
            &entry,
            &docchat_inference::LocalOptions::default(),
        )
        .unwrap(),
    );
    let (record, files) = lab.tool("browser_click.py", CLICK);
    let engine = Engine {
        catalog: Catalog::builtin(),
        extensions: Some(Arc::new(OneBrowserTool {
            opener: lab.opener(),
            record,
            files,
        })),
        stored: None,
        deps: lab.deps.clone(),
        budget: Arc::new(Free),
    };
    let start = pb::RunStart {
        session_id: "s-browser".into(),
        question_id: "q-browser".into(),
        question: "What does the button say after a click?".into(),
        model: "scripted".into(),
        rag_kind: pb::RagKind::None as i32,
        agent_args_json: json!({"agent_tools": ["browser_click"]}).to_string(),
        ..Default::default()
    };
    let args = docchat_agent_service::run::args::parse(&start.agent_args_json).unwrap();
    let req = RunRequest {
        caller: user("alice", false),
        args,
        tools: vec!["browser_click".into()],
        workspace: lab.dir.path().join("workspace"),
        disk: Default::default(),
        model,
        entry,
        start,
        custom: None,
    };
    let (tx, mut rx) = tokio::sync::mpsc::channel(1024);
    let finished = tokio::time::timeout(
        Duration::from_secs(120),
        engine.run(req, &Control::default(), &tx),
    )
    .await
    .expect("the run ends");
    drop(tx);
    let mut events = Vec::new();
    while let Some(e) = rx.recv().await {
        events.push(e);
    }
    assert!(!finished.failed, "{}", finished.stop_reason);
    assert_eq!(finished.text, "The button says clicked.");
    let tool_ok: Vec<(String, bool)> = events
        .iter()
        .filter_map(|e| match &e.event {
            Some(pb::run_event::Event::ToolFinished(t)) => Some((t.name.clone(), t.ok)),
            _ => None,
        })
        .collect();
    assert_eq!(tool_ok, [("browser_click".to_owned(), true)]);
    // The model read the script's answer.
    let bodies = upstream.bodies();
    let tools_offered: Vec<&str> = bodies[0]["tools"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|t| t["function"]["name"].as_str())
        .collect();
    assert_eq!(tools_offered, ["browser_click"]);
    let last = crate::run::tool_messages(&bodies[1]);
    assert_eq!(
        last,
        [format!("Docchat test page | clicked {}", site.port)],
        "the tool's result the model read"
    );
}

#[tokio::test]
async fn a_zip_tool_finds_its_script_and_imports_its_own_modules() {
    let Some(lab) = lab(Mode::Bubblewrap, 5).await else {
        return;
    };
    // A ZIP's contents, extracted: the script sits in a folder beside a helper module.
    let files = lab.dir.path().join("files").join("zip");
    std::fs::create_dir_all(files.join("pkg")).unwrap();
    std::fs::write(files.join("README.txt"), "not code").unwrap();
    std::fs::write(
        files.join("pkg/shout.py"),
        "def shout(s):\n    return s.upper() + '!'\n",
    )
    .unwrap();
    std::fs::write(
        files.join("pkg/browser_shout.py"),
        "from shout import shout\n\ndef run(page, html: str) -> str:\n    \"\"\"Shouts a page's title.\"\"\"\n    return shout(page.goto('data:text/html,' + html).title())\n",
    )
    .unwrap();
    let record = ToolRecord {
        id: "t-zip".into(),
        owner_id: "alice".into(),
        owner_email: "alice@example.com".into(),
        tool_name: "shouter".into(),
        tool_type: ToolType::BrowserAction,
        args: json!({"description": "Shouts titles", "system_prompt": "Shout when asked."}),
        file_name: Some("shouter.zip".into()),
    };
    let opened = lab
        .opener()
        .open(&record, Some(&files), &lab.ctx(), &NoSecrets)
        .await
        .unwrap();
    assert_eq!(opened.instructions, ["Shout when asked."]);
    let tool = &opened.tools[0];
    assert_eq!(
        (tool.name(), tool.description()),
        ("shouter", "Shouts titles")
    );
    let out = tool
        .call(&lab.ctx(), json!({"html": "<title>quiet</title>"}))
        .await
        .unwrap();
    assert_eq!(out.text, "QUIET!");
}
