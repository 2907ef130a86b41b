//! browser_action custom tools: a user's Python script drives a headless chromium (Debian's
//! `chromium`) inside the sandbox, reaching the web only through the egress proxy
//! ([`proxy`]), which applies the agent's egress rule ([`crate::egress`]).
//!
//! The script contract (docs/browser-actions.md): a `browser_*.py` (or a ZIP holding one)
//! defines a function named as the tool (its `tool_name`; `run` also works) whose first
//! parameter is the page (`runner.py`'s `Page`: `goto`, `title`, `text`, `click`, `fill`,
//! `wait_for`, `evaluate`, `screenshot`, `send` for any DevTools command) and whose other
//! parameters are the model's arguments; it returns the text the model reads. Its JSON
//! schema comes from the signature (annotations give the types, defaults make a parameter
//! optional) and its docstring (the first paragraph describes the tool, `name: text` lines
//! describe parameters), read with Python's `ast` in the sandbox without running the script.
//!
//! Each call is one sandboxed process (bubblewrap only: the browser needs a network namespace
//! of its own, whose loopback carries chromium's proxy traffic to a forwarder that hands it to
//! the proxy's unix socket; the Landlock helper's seccomp filter refuses AF_INET, so browser
//! tools are refused there with a clear note). The tool's files, the runner and the call's
//! proxy socket (a proxy per call, so what it refused is that call's) are bound read-only
//! (the run's read-only mount, `/documents`); the session's workspace is writable
//! (screenshots are kept like any file a run writes).

mod proxy;
mod tool;

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use serde_json::Value;

pub use proxy::EgressProxy;
pub use tool::BrowserTool;

use crate::tools::custom::{Opener, Secrets, ToolRecord};
use crate::tools::{Opened, ToolCtx};
use docchat_sandbox::{CodeSpec, Grants};

/// The runner the sandbox's python executes (see its docstring).
const RUNNER: &str = include_str!("runner.py");

/// chromium's threads and processes (it fails to start with the sandbox's default of 64).
pub const PROCESSES: u64 = 256;
/// chromium reserves address space far beyond what it uses (V8's and Oilpan's cages): it
/// does not start under 128 GiB of RLIMIT_AS, so the limit is no bound on its memory here
/// (its JavaScript heap is capped by a flag instead, see runner.py).
pub const ADDRESS_SPACE: u64 = 256 << 30;
/// Reading the script's signature.
const DESCRIBE_TIMEOUT: Duration = Duration::from_secs(30);

/// Opens browser_action tools (see the module documentation).
pub struct BrowserOpener {
    /// Where each opened tool's kit (runner, files, proxy sockets) lives while a run uses it.
    dir: PathBuf,
}

impl BrowserOpener {
    /// Kits under `dir` (agent-service's data directory `agent/browser`). The hosts allowed
    /// by name are the run's `ToolDeps::fetch_allow` (the administrator's
    /// `DOCCHAT_AGENT_EGRESS_ALLOW`, and the tests' own), as for fetch_url and remote MCP.
    pub fn new(dir: PathBuf) -> BrowserOpener {
        BrowserOpener { dir }
    }
}

/// One opened tool's directory: removed with the tool.
pub(crate) struct Kit {
    pub(crate) path: PathBuf,
}

impl Drop for Kit {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.path);
    }
}

/// What the runner's `describe` prints.
#[derive(serde::Deserialize)]
struct Described {
    function: String,
    description: String,
    parameters: Value,
}

#[async_trait::async_trait]
impl Opener for BrowserOpener {
    async fn open(
        &self,
        record: &ToolRecord,
        files: Option<&Path>,
        ctx: &ToolCtx,
        _secrets: &dyn Secrets,
    ) -> Result<Opened, String> {
        let code = &ctx.deps.code;
        if !code.available() || !code.private_network() {
            return Err(format!(
                "browser action {}: browser actions need the bubblewrap sandbox (a network namespace of its own for the browser); this replica's sandbox cannot give one",
                record.tool_name
            ));
        }
        if !Path::new("/usr/lib/chromium/chromium").is_file() {
            return Err(format!(
                "browser action {}: chromium is not installed (scripts/sandbox-runtime.sh installs it)",
                record.tool_name
            ));
        }
        let files = files.ok_or_else(|| format!("browser action {}: no file", record.tool_name))?;
        let kit = make_kit(&self.dir, files)
            .map_err(|e| format!("browser action {}: {e}", record.tool_name))?;
        let script =
            find_script(&kit.path.join("tool"), record.file_name.as_deref()).ok_or_else(|| {
                format!(
                    "browser action {}: no browser_*.py in its files",
                    record.tool_name
                )
            })?;
        let inside = code.documents_at(&kit.path);
        let script_inside = inside.join(script.strip_prefix(&kit.path).unwrap_or(&script));
        let described = describe(ctx, &kit, &inside, &script_inside, &record.tool_name).await?;
        let description = match record.arg("description") {
            "" => described.description,
            d => d.to_owned(),
        };
        let mut opened = Opened::default();
        if !record.arg("system_prompt").is_empty() {
            opened
                .instructions
                .push(record.arg("system_prompt").to_owned());
        }
        opened.tools.push(Arc::new(BrowserTool {
            name: record.tool_name.clone(),
            description,
            parameters: described.parameters,
            function: described.function,
            script: script_inside,
            inside,
            kit,
        }));
        Ok(opened)
    }
}

/// A directory of its own under `dir` holding the runner and a copy of the tool's files
/// (`tool/`), readable by the sandbox's uid.
fn make_kit(dir: &Path, files: &Path) -> std::io::Result<Kit> {
    std::fs::create_dir_all(dir)?;
    let path = dir.join(format!("kit-{}", docchat_common::ids::new_name()));
    std::fs::create_dir(&path)?;
    let kit = Kit { path };
    set_mode(&kit.path, 0o755)?;
    std::fs::write(kit.path.join("runner.py"), RUNNER)?;
    set_mode(&kit.path.join("runner.py"), 0o644)?;
    copy_tree(files, &kit.path.join("tool"))?;
    Ok(kit)
}

fn set_mode(p: &Path, mode: u32) -> std::io::Result<()> {
    std::fs::set_permissions(p, std::os::unix::fs::PermissionsExt::from_mode(mode))
}

/// Copies regular files and directories (links are skipped: the archive checks refused them
/// already).
fn copy_tree(from: &Path, to: &Path) -> std::io::Result<()> {
    std::fs::create_dir_all(to)?;
    set_mode(to, 0o755)?;
    for entry in std::fs::read_dir(from)? {
        let entry = entry?;
        let kind = entry.file_type()?;
        let dest = to.join(entry.file_name());
        if kind.is_dir() {
            copy_tree(&entry.path(), &dest)?;
        } else if kind.is_file() {
            std::fs::copy(entry.path(), &dest)?;
            set_mode(&dest, 0o644)?;
        }
    }
    Ok(())
}

/// The script: the uploaded `.py` itself, else the shallowest `browser_*.py` of the ZIP's
/// contents (by name, for a stable choice).
fn find_script(tool: &Path, file_name: Option<&str>) -> Option<PathBuf> {
    if let Some(name) = file_name.filter(|n| n.ends_with(".py")) {
        let p = tool.join(name);
        if p.is_file() {
            return Some(p);
        }
    }
    let mut level = vec![tool.to_path_buf()];
    while !level.is_empty() {
        let mut found: Vec<PathBuf> = Vec::new();
        let mut next = Vec::new();
        for dir in level {
            for e in std::fs::read_dir(dir).ok()?.flatten() {
                let name = e.file_name().to_string_lossy().into_owned();
                if e.path().is_dir() {
                    next.push(e.path());
                } else if name.starts_with("browser_") && name.ends_with(".py") {
                    found.push(e.path());
                }
            }
        }
        found.sort();
        if let Some(first) = found.into_iter().next() {
            return Some(first);
        }
        level = next;
    }
    None
}

/// The tool's function, description and parameters, read in the sandbox.
async fn describe(
    ctx: &ToolCtx,
    kit: &Kit,
    inside: &Path,
    script: &Path,
    name: &str,
) -> Result<Described, String> {
    let spec = CodeSpec {
        argv: vec![
            "python3".into(),
            inside.join("runner.py").display().to_string(),
            "describe".into(),
            script.display().to_string(),
            name.into(),
        ],
        workspace: ctx.workspace.clone(),
        stdin: None,
        wall_clock: DESCRIBE_TIMEOUT,
        memory_bytes: ctx.max_memory,
        documents: Some(kit.path.clone()),
        user: ctx.caller.user_id.clone(),
        disk: ctx.disk.clone(),
    };
    let out = ctx
        .deps
        .code
        .run_with(spec, &Grants::default(), &ctx.cancel)
        .await
        .map_err(|e| format!("browser action {name}: {e}"))?;
    if out.exit_code != Some(0) {
        return Err(format!(
            "browser action {name}: its script cannot be read: {}",
            out.stderr.trim()
        ));
    }
    serde_json::from_str(out.stdout.trim())
        .map_err(|e| format!("browser action {name}: the runner's description: {e}"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_script_is_the_upload_or_the_shallowest_browser_py() {
        let dir = tempfile::tempdir().unwrap();
        let tool = dir.path();
        std::fs::create_dir_all(tool.join("pkg/deeper")).unwrap();
        std::fs::write(tool.join("pkg/browser_b.py"), "").unwrap();
        std::fs::write(tool.join("pkg/browser_a.py"), "").unwrap();
        std::fs::write(tool.join("pkg/deeper/browser_0.py"), "").unwrap();
        std::fs::write(tool.join("helper.py"), "").unwrap();
        assert_eq!(
            find_script(tool, Some("x.zip")),
            Some(tool.join("pkg/browser_a.py"))
        );
        std::fs::write(tool.join("browser_top.py"), "").unwrap();
        assert_eq!(
            find_script(tool, Some("browser_top.py")),
            Some(tool.join("browser_top.py"))
        );
        assert_eq!(
            find_script(&tool.join("pkg/deeper"), None)
                .unwrap()
                .file_name()
                .unwrap(),
            "browser_0.py"
        );
        std::fs::remove_dir_all(tool.join("pkg")).unwrap();
        std::fs::remove_file(tool.join("browser_top.py")).unwrap();
        assert_eq!(find_script(tool, None), None);
    }
}
