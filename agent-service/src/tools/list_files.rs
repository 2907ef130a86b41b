//! list_files: the files under a folder of the workspace.

use serde_json::{Value, json};

use super::{Tool, ToolCtx, ToolOutput};
use crate::paths;

/// Entries listed at most.
const MAX_ENTRIES: usize = 1000;

pub struct ListFiles;

#[async_trait::async_trait]
impl Tool for ListFiles {
    fn writes(&self) -> bool {
        false
    }

    fn name(&self) -> &str {
        "list_files"
    }

    fn description(&self) -> &str {
        "Lists the files of the workspace (or of one folder of it), with their sizes."
    }

    fn parameters(&self) -> Value {
        json!({"type": "object", "properties": {"path": {"type": "string", "description": "Folder relative to the workspace (default: the whole workspace)"}},
               "additionalProperties": false})
    }

    async fn call(&self, ctx: &ToolCtx, args: Value) -> Result<ToolOutput, String> {
        let rel = args.get("path").and_then(Value::as_str).unwrap_or(".");
        let start = paths::resolve(&ctx.workspace, rel)?;
        let root = ctx.workspace.clone();
        let lines = tokio::task::spawn_blocking(move || walk(&root, &start))
            .await
            .map_err(|e| format!("listing failed: {e}"))??;
        if lines.is_empty() {
            return Ok(ToolOutput::text("(no files)"));
        }
        Ok(ToolOutput::text(lines.join("\n")))
    }
}

fn walk(root: &std::path::Path, start: &std::path::Path) -> Result<Vec<String>, String> {
    let mut out = Vec::new();
    let mut stack = vec![start.to_path_buf()];
    while let Some(dir) = stack.pop() {
        let mut entries: Vec<_> = std::fs::read_dir(&dir)
            .map_err(|e| format!("cannot list {}: {e}", paths::display(root, &dir)))?
            .filter_map(Result::ok)
            .collect();
        entries.sort_by_key(|e| e.file_name());
        for e in entries {
            let Ok(meta) = e.path().symlink_metadata() else {
                continue;
            };
            let shown = paths::display(root, &e.path());
            if meta.is_dir() {
                stack.push(e.path());
            } else if meta.file_type().is_symlink() {
                out.push(format!("{shown} (link)"));
            } else {
                out.push(format!("{shown}\t{} bytes", meta.len()));
            }
            if out.len() >= MAX_ENTRIES {
                out.push("… (more files not listed)".into());
                return Ok(out);
            }
        }
    }
    out.sort();
    Ok(out)
}
