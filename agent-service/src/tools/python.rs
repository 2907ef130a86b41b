//! python: runs Python code in the sandbox, in the session's workspace. Model code never
//! runs outside a sandbox: without one, the tool answers that code execution is
//! unavailable. [`docchat_sandbox::CodeRunner`] is the face of the sandbox the code tools hold.

use docchat_sandbox::{CodeOutput, CodeSpec};
use serde_json::{Value, json};

use super::{Tool, ToolCtx, ToolOutput, arg, clip};

/// Bytes of stdout/stderr shown to the model.
const SHOWN: usize = 20_000;

/// What the model reads of a run.
pub fn report(out: &CodeOutput) -> Result<ToolOutput, String> {
    let mut text = String::new();
    if !out.stdout.is_empty() {
        text.push_str(&clip(&out.stdout, SHOWN));
    }
    if !out.stderr.is_empty() {
        if !text.is_empty() {
            text.push('\n');
        }
        text.push_str("[stderr]\n");
        text.push_str(&clip(&out.stderr, SHOWN));
    }
    if let Some(quota) = out.over_quota {
        return Err(format!("{}; output so far:\n{text}", quota.message()));
    }
    if out.timed_out {
        return Err(format!("timed out; output so far:\n{text}"));
    }
    if out.cancelled {
        return Err("stopped".into());
    }
    match out.exit_code {
        Some(0) => Ok(ToolOutput::text(if text.is_empty() {
            "(no output)".into()
        } else {
            text
        })),
        Some(code) => Err(format!("exit code {code}\n{text}")),
        None => Err(format!("killed\n{text}")),
    }
}

pub struct Python;

#[async_trait::async_trait]
impl Tool for Python {
    fn name(&self) -> &str {
        "python"
    }

    fn description(&self) -> &str {
        "Runs Python 3 code in a sandbox whose working directory is the workspace (numpy, pandas, matplotlib available; no network). Print what you want to see; save files to keep them."
    }

    fn parameters(&self) -> Value {
        json!({"type": "object", "properties": {"code": {"type": "string"}},
               "required": ["code"], "additionalProperties": false})
    }

    async fn call(&self, ctx: &ToolCtx, args: Value) -> Result<ToolOutput, String> {
        let code = arg(&args, "code")?;
        let spec = CodeSpec {
            argv: vec!["python3".into(), "-".into()],
            workspace: ctx.workspace.clone(),
            stdin: Some(code.as_bytes().to_vec()),
            wall_clock: ctx.timeout,
            memory_bytes: ctx.max_memory,
            documents: ctx.documents().await,
            user: ctx.caller.user_id.clone(),
            disk: ctx.disk.clone(),
        };
        report(&ctx.deps.code.run(spec, &ctx.cancel).await?)
    }
}
