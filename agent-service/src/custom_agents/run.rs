//! Running a custom agent: its folder, materialized on this replica's disk from the stored
//! bytes, runs IN THE SANDBOX (never in a service process) by this entry contract
//! (docs/custom-agents.md):
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
//! - its answer is what it writes on stdout, streamed line by line; stderr goes to the
//!   run's history (clipped).
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
use tokio::sync::mpsc;
use tokio_util::sync::CancellationToken;

use super::keys::KeyStore;
use super::store::{self, AgentRow};
use super::tools;
use crate::archive::{self, Limits};
use docchat_sandbox::{CodeOutput, CodeRunner, CodeSpec};

/// Sets the environment from the JSON on stdin, writes the files it names into a private
/// temporary directory, then runs the agent's command, copying its stdout as it comes to
/// [`STREAM_FILE`] in the workspace (which the service tails: the sandbox's runner returns
/// the output only at the end).
const LAUNCHER: &str = r#"
import json, os, sys, tempfile
STREAM_FILE = ".docchat-agent-answer"
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
# The answer goes to stdout and, as it comes, to a file of the workspace the service tails.
import subprocess
tee = open(os.path.join(os.getcwd(), STREAM_FILE), "wb", buffering=0)
try:
    child = subprocess.Popen(cmd, env=env, stdout=subprocess.PIPE)
except OSError as e:
    print("cannot run", cmd, ":", e, file=sys.stderr)
    sys.exit(127)
for chunk in iter(lambda: child.stdout.read1(65536), b""):
    sys.stdout.buffer.write(chunk)
    sys.stdout.buffer.flush()
    tee.write(chunk)
sys.exit(child.wait())
"#;

/// The launcher's copy of the answer in the workspace; removed before the files are stored.
pub const STREAM_FILE: &str = ".docchat-agent-answer";

/// Most bytes of an answer streamed.
const MAX_ANSWER: u64 = 4 << 20;

/// Reads the answer's new complete lines from [`STREAM_FILE`].
struct Tail {
    path: PathBuf,
    offset: u64,
    partial: Vec<u8>,
}

impl Tail {
    /// The complete lines written since the last call (`all`: the rest too, at the end).
    async fn next(&mut self, all: bool) -> String {
        use tokio::io::{AsyncReadExt, AsyncSeekExt};
        let Ok(mut f) = tokio::fs::File::open(&self.path).await else {
            return String::new();
        };
        if f.seek(std::io::SeekFrom::Start(self.offset)).await.is_err() {
            return String::new();
        }
        let mut buf = Vec::new();
        let room = MAX_ANSWER.saturating_sub(self.offset);
        let n = (&mut f).take(room).read_to_end(&mut buf).await.unwrap_or(0);
        self.offset += n as u64;
        self.partial.extend_from_slice(&buf[..n]);
        let cut = if all {
            self.partial.len()
        } else {
            self.partial
                .iter()
                .rposition(|b| *b == b'\n')
                .map_or(0, |i| i + 1)
        };
        let done: Vec<u8> = self.partial.drain(..cut).collect();
        String::from_utf8_lossy(&done).into_owned()
    }
}

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

/// What a run of a custom agent gave (its answer went out through the run's `answer`).
pub struct Outcome {
    /// What to note in the run's history (stderr, exit status), redacted.
    pub notes: Vec<String>,
    pub failed: bool,
}

/// What a custom agent's run may use: its time, memory and the caller's disk.
pub struct RunLimits {
    pub wall_clock: Duration,
    pub memory_bytes: Option<u64>,
    /// The caller's other workspaces and their total (the run writes the caller's).
    pub disk: docchat_sandbox::UserDisk,
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
        let bytes = store::folder(&self.db, &a.owner_id, &a.id)
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

    /// Runs `a` for `start` in `workspace` under the sandbox `code`; its answer goes out
    /// on `answer` as it comes.
    #[expect(
        clippy::too_many_arguments,
        reason = "one run's inputs, each used once"
    )]
    pub async fn run(
        &self,
        a: &AgentRow,
        start: &pb::RunStart,
        workspace: &Path,
        code: &dyn CodeRunner,
        limits: RunLimits,
        cancel: &CancellationToken,
        answer: mpsc::Sender<String>,
    ) -> Outcome {
        match self
            .try_run(a, start, workspace, code, limits, cancel, answer)
            .await
        {
            Ok(o) => o,
            Err(why) => Outcome {
                notes: vec![format!(
                    "the custom agent {} did not run: {why}",
                    a.agent_name
                )],
                failed: true,
            },
        }
    }

    #[expect(clippy::too_many_arguments, reason = "as run")]
    async fn try_run(
        &self,
        a: &AgentRow,
        start: &pb::RunStart,
        workspace: &Path,
        code: &dyn CodeRunner,
        limits: RunLimits,
        cancel: &CancellationToken,
        answer: mpsc::Sender<String>,
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
            wall_clock: limits.wall_clock,
            memory_bytes: limits.memory_bytes,
            // The agent's folder is the run's read-only mount.
            documents: Some(folder),
            user: a.owner_id.clone(),
            disk: limits.disk,
        };
        let redact = |s: &str| {
            secrets
                .iter()
                .fold(s.to_owned(), |acc, v| acc.replace(v.as_str(), "[redacted]"))
        };
        let mut tail = Tail {
            path: workspace.join(STREAM_FILE),
            offset: 0,
            partial: Vec::new(),
        };
        let _ = tokio::fs::remove_file(&tail.path).await;
        // Complete lines go out as they come (redacted line by line), the rest at the end.
        let out: CodeOutput = {
            let run = code.run(spec, cancel);
            tokio::pin!(run);
            loop {
                tokio::select! {
                    out = &mut run => break out?,
                    () = tokio::time::sleep(Duration::from_millis(100)) => {
                        let lines = tail.next(false).await;
                        if !lines.is_empty() {
                            let _ = answer.send(redact(&lines)).await;
                        }
                    }
                }
            }
        };
        let rest = tail.next(true).await;
        let streamed = tail.offset > 0;
        let _ = tokio::fs::remove_file(&tail.path).await;
        if !rest.is_empty() {
            let _ = answer.send(redact(&rest)).await;
        } else if !streamed && !out.stdout.is_empty() {
            // The launcher did not get as far as its copy.
            let _ = answer.send(redact(&out.stdout)).await;
        }
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
            notes,
            failed: failed && !out.cancelled,
        })
    }
}
