//! write_file: creates or replaces a file of the workspace (parents created).

use serde_json::{Value, json};

use super::{Tool, ToolCtx, ToolOutput, arg};
use crate::paths;

/// Largest file written at once.
const MAX_BYTES: usize = 20 << 20;

pub struct WriteFile;

#[async_trait::async_trait]
impl Tool for WriteFile {
    fn name(&self) -> &str {
        "write_file"
    }

    fn description(&self) -> &str {
        "Writes a text file in the workspace (path relative to the workspace), replacing it if it exists. Files in the workspace are given to the user."
    }

    fn parameters(&self) -> Value {
        json!({"type": "object", "properties": {
                  "path": {"type": "string", "description": "Path relative to the workspace"},
                  "content": {"type": "string"}},
               "required": ["path", "content"], "additionalProperties": false})
    }

    async fn call(&self, ctx: &ToolCtx, args: Value) -> Result<ToolOutput, String> {
        let rel = arg(&args, "path")?;
        let content = arg(&args, "content")?;
        if content.len() > MAX_BYTES {
            return Err(format!("the content is larger than {MAX_BYTES} bytes"));
        }
        let path = paths::resolve(&ctx.workspace, rel)?;
        if path == ctx.workspace {
            return Err("a file name is needed".into());
        }
        if let Some(parent) = path.parent() {
            tokio::fs::create_dir_all(parent)
                .await
                .map_err(|e| format!("cannot create the folder of {rel}: {e}"))?;
        }
        // Never through a link, even one that appeared after the check.
        if tokio::fs::symlink_metadata(&path)
            .await
            .is_ok_and(|m| m.file_type().is_symlink())
        {
            return Err(format!("{rel} is a link; links are not written through"));
        }
        // The disk quotas hold for files written here as for the code's.
        let replacing = tokio::fs::symlink_metadata(&path).await.map_or(0, |m| {
            std::os::unix::fs::MetadataExt::blocks(&m).saturating_mul(512)
        });
        docchat_sandbox::quota::Watch::new(
            ctx.workspace.clone(),
            ctx.deps.workspace_quota,
            ctx.disk.clone(),
        )
        .fits(content.len() as u64, replacing)
        .await
        .map_err(|past| {
            format!(
                "{rel} was not written: it would pass {}; delete files to make room",
                past.what()
            )
        })?;
        tokio::fs::write(&path, content)
            .await
            .map_err(|e| format!("cannot write {rel}: {e}"))?;
        Ok(ToolOutput::text(format!(
            "wrote {} bytes to {}",
            content.len(),
            paths::display(&ctx.workspace, &path)
        )))
    }
}
