//! Running a custom agent: its folder, materialized on this replica's disk from the stored
//! bytes, runs IN THE SANDBOX (never in a service process) by this entry contract (README
//! "Custom agents"):
//!
//! - metadata.json's `command` (default `python3 main.py`) runs with the session's
//!   workspace as its working directory (writable; files it writes there are stored like
//!   any agent's); a command word naming a file of the folder is given as that file's path;
//! - the folder is read-only at `$AGENT_DIR` (also on `PYTHONPATH`, for vendored
//!   dependencies);
//! - `$AGENT_MESSAGE`: the user's message; `$AGENT_HISTORY_FILE`: a JSON list of the
//!   conversation before it (`{role, content}`); `$AGENT_MCP_SERVERS_FILE`: a JSON list of its
//!   associated MCP servers (`{server, tool_name, tool_type, tool_args}`); `$AGENT_ARGS`:
//!   the agent's agent_args (JSON);
//! - each associated key as an environment variable named by its env_key_name (a declared
//!   optional key with a default gets the default when no key is given);
//! - its answer is what it writes on stdout; stderr goes to the run's history (clipped).
//!
//! The keys reach the sandbox on the program's stdin (read by a small launcher that sets
//! them in the environment and then runs the command), never in argv, a file or a log; any
//! key value the agent echoes is redacted from what it answers.

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use docchat_common::error::ApiResult;
use docchat_proto::agent::v1 as pb;
use sea_orm::DatabaseConnection;
use serde_json::json;
use tokio_util::sync::CancellationToken;

use super::keys::KeyStore;
use super::store::{self, AgentRow};
use super::tools;
use crate::archive::{self, Limits};
use crate::tools::{CodeOutput, CodeRunner, CodeSpec};

/// Sets the environment from the JSON on stdin, writes the files it names into a private
/// temporary directory, then replaces itself with the agent's command.
const LAUNCHER: &str = r#"
import json, os, sys, tempfile
spec = json.load(sys.stdin)
agent_dir = sys.argv[1]
tmp = tempfile.mkdtemp(prefix="agent-")
def put(name, value):
    path = os.path.join(tmp, name)
    with open(path, "w") as f:
        json.dump(value, f)
    return path
env = dict(os.environ)
env.update(spec["env"])
env["AGENT_DIR"] = agent_dir
env["AGENT_MESSAGE"] = spec["message"]
env["AGENT_ARGS"] = json.dumps(spec["agent_args"])
env["AGENT_HISTORY_FILE"] = put("history.json", spec["history"])
env["AGENT_MCP_SERVERS_FILE"] = put("mcp_servers.json", spec["mcp_servers"])
env["PYTHONPATH"] = agent_dir + (":" + env["PYTHONPATH"] if env.get("PYTHONPATH") else "")
env["PYTHONUNBUFFERED"] = "1"
cmd = [os.path.join(agent_dir, w) if i > 0 and os.path.isfile(os.path.join(agent_dir, w)) else w
       for i, w in enumerate(sys.argv[2:])]
if cmd and os.path.isfile(os.path.join(agent_dir, cmd[0])):
    cmd[0] = os.path.join(agent_dir, cmd[0])
sys.stdout.flush()
os.execvpe(cmd[0], cmd, env)
"#;

/// A custom agent chosen for a run, with what runs it.
#[derive(Clone)]
pub struct CustomRun {
    pub runner: Arc<Runner>,
    pub agent: AgentRow,
}

/// Runs the callers' custom agents on this replica.
pub struct Runner {
    pub db: DatabaseConnection,
    pub keys: KeyStore,
    /// `<data_dir>/agent/custom_agents`
    pub dir: PathBuf,
}

/// What a run of a custom agent gave.
pub struct Outcome {
    /// stdout, with key values redacted.
    pub text: String,
    /// What to note in the run's history (stderr, exit status), redacted.
    pub notes: Vec<String>,
    pub failed: bool,
}

impl Runner {
    /// The caller's custom agent called `name`, if any.
    pub async fn find(
        self: &Arc<Self>,
        owner_id: &str,
        name: &str,
    ) -> ApiResult<Option<CustomRun>> {
        Ok(store::agents(&self.db, owner_id, None, Some(name))
            .await?
            .into_iter()
            .next()
            .map(|agent| CustomRun {
                runner: self.clone(),
                agent,
            }))
    }

    /// The agent's folder on this disk, `<dir>/<id>-<short sha>/`, extracted from the
    /// stored bytes when this replica has not got it yet.
    async fn materialize(&self, a: &AgentRow) -> Result<PathBuf, String> {
        let short = a.folder_sha256.get(..12).unwrap_or(&a.folder_sha256);
        let dest = self.dir.join(format!("{}-{short}", a.id));
        if tokio::fs::metadata(&dest).await.is_ok_and(|m| m.is_dir()) {
            return Ok(dest);
        }
        let bytes = store::folder(&self.db, &a.id)
            .await
            .map_err(|e| e.message)?;
        let target = dest.clone();
        tokio::task::spawn_blocking(move || {
            match archive::extract(&bytes, &target, &Limits::UPLOAD) {
                Ok(_) => Ok(()),
                // Another run extracted it meanwhile.
                Err(_) if target.is_dir() => Ok(()),
                Err(e) => Err(e.0),
            }
        })
        .await
        .map_err(|e| e.to_string())??;
        Ok(dest)
    }

    /// The environment of a run: each associated key by its env_key_name.
    async fn env(&self, a: &AgentRow) -> ApiResult<serde_json::Map<String, serde_json::Value>> {
        let mut env = serde_json::Map::new();
        for k in store::key_associations(&self.db, &a.owner_id, Some(&a.id)).await? {
            let value = match &k.key_id {
                Some(id) => self.keys.value_of(&a.owner_id, id).await?,
                None => k.default_value.clone(),
            };
            if let Some(v) = value {
                env.insert(k.env_key_name, v.into());
            }
        }
        Ok(env)
    }

    async fn servers(&self, a: &AgentRow) -> ApiResult<serde_json::Value> {
        let tools = tools::of_owner(&self.db, &a.owner_id).await?;
        let assoc = store::tool_associations(&self.db, &a.owner_id, Some(&a.id)).await?;
        Ok(assoc
            .iter()
            .filter_map(|t| {
                let tool = tools.iter().find(|r| Some(&r.id) == t.tool_id.as_ref())?;
                Some(json!({
                    "server": t.mcp_server_name,
                    "tool_name": tool.tool_name,
                    "tool_type": tool.tool_type,
                    "tool_args": serde_json::from_str::<serde_json::Value>(&tool.tool_args).unwrap_or_default(),
                }))
            })
            .collect())
    }

    /// Runs `a` for `start` in `workspace` under the sandbox `code`.
    pub async fn run(
        &self,
        a: &AgentRow,
        start: &pb::RunStart,
        workspace: &Path,
        code: &dyn CodeRunner,
        limits: (Duration, Option<u64>),
        cancel: &CancellationToken,
    ) -> Outcome {
        match self
            .try_run(a, start, workspace, code, limits, cancel)
            .await
        {
            Ok(o) => o,
            Err(why) => Outcome {
                text: String::new(),
                notes: vec![format!(
                    "the custom agent {} did not run: {why}",
                    a.agent_name
                )],
                failed: true,
            },
        }
    }

    async fn try_run(
        &self,
        a: &AgentRow,
        start: &pb::RunStart,
        workspace: &Path,
        code: &dyn CodeRunner,
        (wall_clock, memory_bytes): (Duration, Option<u64>),
        cancel: &CancellationToken,
    ) -> Result<Outcome, String> {
        if !code.available() {
            return Err("code execution is unavailable on this server (no sandbox)".into());
        }
        let folder = self.materialize(a).await?;
        let env = self.env(a).await.map_err(|e| e.message)?;
        let secrets: Vec<String> = env
            .values()
            .filter_map(|v| v.as_str())
            .filter(|v| v.len() >= 4)
            .map(str::to_owned)
            .collect();
        let history: Vec<serde_json::Value> = start
            .history
            .iter()
            .map(|h| json!({"role": h.role, "content": h.content}))
            .collect();
        let input = json!({
            "env": env,
            "message": start.question,
            "history": history,
            "mcp_servers": self.servers(a).await.map_err(|e| e.message)?,
            "agent_args": a.agent_args,
        });
        let agent_dir = code.documents_at(&folder).display().to_string();
        let mut argv = vec!["python3".into(), "-c".into(), LAUNCHER.into(), agent_dir];
        argv.extend(a.command.iter().cloned());
        let spec = CodeSpec {
            argv,
            workspace: workspace.to_path_buf(),
            stdin: Some(input.to_string().into_bytes()),
            wall_clock,
            memory_bytes,
            // The agent's folder is the run's read-only mount.
            documents: Some(folder),
        };
        let out: CodeOutput = code.run(spec, cancel).await?;
        let redact = |s: &str| {
            secrets
                .iter()
                .fold(s.to_owned(), |acc, v| acc.replace(v.as_str(), "[redacted]"))
        };
        let mut notes = Vec::new();
        if !out.stderr.trim().is_empty() {
            notes.push(format!(
                "the agent's stderr:\n{}",
                crate::tools::clip(&redact(&out.stderr), 4000)
            ));
        }
        let failed = out.timed_out || out.cancelled || out.exit_code != Some(0);
        if out.timed_out {
            notes.push("the custom agent ran out of time".into());
        } else if out.cancelled {
            notes.push("the custom agent was stopped".into());
        } else if out.exit_code != Some(0) {
            notes.push(format!("the custom agent exited with {:?}", out.exit_code));
        }
        Ok(Outcome {
            text: redact(&out.stdout),
            notes,
            failed: failed && !out.cancelled,
        })
    }
}
