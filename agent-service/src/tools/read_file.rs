//! read_file: a text file of the workspace.

use serde_json::{Value, json};

use super::{Tool, ToolCtx, ToolOutput, arg, clip};
use crate::paths;

/// Bytes of a file shown to the model.
const MAX_BYTES: usize = 100_000;

pub struct ReadFile;

#[async_trait::async_trait]
impl Tool for ReadFile {
    fn writes(&self) -> bool {
        false
    }

    fn name(&self) -> &str {
        "read_file"
    }

    fn description(&self) -> &str {
        "Reads a text file of the workspace (path relative to the workspace)."
    }

    fn parameters(&self) -> Value {
        json!({"type": "object", "properties": {"path": {"type": "string", "description": "Path relative to the workspace"}},
               "required": ["path"], "additionalProperties": false})
    }

    async fn call(&self, ctx: &ToolCtx, args: Value) -> Result<ToolOutput, String> {
        let rel = arg(&args, "path")?;
        let path = paths::resolve(&ctx.workspace, rel)?;
        let bytes = tokio::fs::read(&path)
            .await
            .map_err(|e| format!("cannot read {rel}: {e}"))?;
        Ok(ToolOutput::text(clip(
            &String::from_utf8_lossy(&bytes),
            MAX_BYTES,
        )))
    }
}
