//! One opened browser action: each call runs the runner's `call` in the sandbox with the
//! model's arguments on stdin and answers what the script returned, with what the egress
//! proxy refused during the call.

use std::path::PathBuf;

use serde_json::Value;

use super::{ADDRESS_SPACE, EgressProxy, Kit, PROCESSES};
use crate::tools::{Tool, ToolCtx, ToolOutput, clip};
use docchat_sandbox::{CodeSpec, Grants};

/// Bytes of the script's answer (or its error) the model reads.
const SHOWN: usize = 20_000;

pub struct BrowserTool {
    pub(super) name: String,
    pub(super) description: String,
    pub(super) parameters: Value,
    /// The script's function.
    pub(super) function: String,
    /// The script, as the sandbox sees it.
    pub(super) script: PathBuf,
    /// The kit, as the sandbox sees it.
    pub(super) inside: PathBuf,
    /// Removed when the run drops the tool.
    pub(super) kit: Kit,
}

#[async_trait::async_trait]
impl Tool for BrowserTool {
    fn name(&self) -> &str {
        &self.name
    }

    fn description(&self) -> &str {
        &self.description
    }

    fn parameters(&self) -> Value {
        self.parameters.clone()
    }

    async fn call(&self, ctx: &ToolCtx, args: Value) -> Result<ToolOutput, String> {
        // A proxy of this call's own: what it refused is this call's, and it ends with it.
        let socket = format!("proxy-{}.sock", docchat_common::ids::new_name());
        let proxy = EgressProxy::bind(&self.kit.path.join(&socket), ctx.deps.fetch_allow.clone())
            .map_err(|e| format!("the egress proxy: {e}"))?;
        let spec = CodeSpec {
            argv: vec![
                "python3".into(),
                self.inside.join("runner.py").display().to_string(),
                "call".into(),
                self.script.display().to_string(),
                self.function.clone(),
                self.inside.join(&socket).display().to_string(),
                ctx.timeout.as_secs().max(1).to_string(),
            ],
            workspace: ctx.workspace.clone(),
            stdin: Some(args.to_string().into_bytes()),
            wall_clock: ctx.timeout,
            memory_bytes: Some(ADDRESS_SPACE),
            documents: Some(self.kit.path.clone()),
            user: ctx.caller.user_id.clone(),
            disk: ctx.disk.clone(),
        };
        let grants = Grants {
            processes: Some(PROCESSES),
        };
        let out = ctx.deps.code.run_with(spec, &grants, &ctx.cancel).await?;
        let mut refused = proxy.take_refusals();
        drop(proxy);
        let _ = std::fs::remove_file(self.kit.path.join(&socket));
        refused.dedup();
        let note = if refused.is_empty() {
            String::new()
        } else {
            format!(
                "\n[the egress rule refused: {}]",
                clip(&refused.join("; "), 2000)
            )
        };
        if out.cancelled {
            return Err("stopped".into());
        }
        if out.timed_out {
            return Err(format!("the browser action timed out{note}"));
        }
        if out.exit_code == Some(0) {
            let text = clip(out.stdout.trim_end(), SHOWN);
            return Ok(ToolOutput::text(format!("{text}{note}")));
        }
        // The script's traceback ends with what went wrong.
        let err = out.stderr.trim();
        let tail = err.len().saturating_sub(SHOWN);
        let tail = (tail..err.len())
            .find(|i| err.is_char_boundary(*i))
            .map_or("", |i| &err[i..]);
        Err(format!(
            "the browser action failed (exit {:?}):\n{tail}{note}",
            out.exit_code
        ))
    }
}
