//! shell: runs a shell command in the sandbox, in the session's workspace.

use serde_json::{Value, json};

use super::python::report;
use super::{Tool, ToolCtx, ToolOutput, arg};
use docchat_sandbox::CodeSpec;

pub struct Shell;

#[async_trait::async_trait]
impl Tool for Shell {
    fn name(&self) -> &str {
        "shell"
    }

    fn description(&self) -> &str {
        "Runs a shell command (sh -c) in a sandbox whose working directory is the workspace; no network."
    }

    fn parameters(&self) -> Value {
        json!({"type": "object", "properties": {"command": {"type": "string"}},
               "required": ["command"], "additionalProperties": false})
    }

    async fn call(&self, ctx: &ToolCtx, args: Value) -> Result<ToolOutput, String> {
        let command = arg(&args, "command")?;
        let spec = CodeSpec {
            argv: vec!["sh".into(), "-c".into(), command.to_owned()],
            workspace: ctx.workspace.clone(),
            stdin: None,
            wall_clock: ctx.timeout,
            memory_bytes: ctx.max_memory,
            documents: ctx.documents().await,
            user: ctx.caller.user_id.clone(),
            disk: ctx.disk.clone(),
        };
        report(&ctx.deps.code.run(spec, &ctx.cancel).await?)
    }
}
