//! general_code: a Python function uploaded as a tool. Its JSON-schema parameters come from
//! the signature (type hints → JSON types, defaults → optional) and its docstring (summary,
//! Google `Args:` or Sphinx `:param:` text), read with Python's `ast` inside the sandbox
//! when a run opens the tool; each call imports the file and runs the function there too,
//! with the arguments as JSON. Nothing of the user's code runs in this process.
//!
//! The tool's files reach the sandbox on the driver's stdin (hex in a JSON request) and
//! are written to the run's private temporary directory there, rather than through a
//! mount: every sandbox backend already gives a run stdin and a writable TMPDIR, and the
//! files are small (an upload is at most 20 MB).

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};

use serde_json::{Value, json};

use super::upload::{extension, source_path};
use crate::tools::custom::{Opener, Secrets, ToolRecord};
use crate::tools::{Opened, Tool, ToolCtx, ToolOutput, clip};
use docchat_sandbox::CodeSpec;

/// The driver run in the sandbox (general_code.py).
const DRIVER: &str = include_str!("general_code.py");
const MARK: &str = "\n@@docchat-general-code@@\n";
/// Bytes of a tool's files sent to the sandbox at most.
const MAX_FILES: u64 = 64 << 20;
/// Bytes of a result shown to the model.
const SHOWN: usize = 20_000;

/// The [`Opener`] of general_code tools. What the sandbox read of a function is kept per
/// (files directory, function): the directory's name carries the upload's hash, so a run
/// opening the tool again starts no sandbox for it.
#[derive(Default)]
pub struct GeneralCode {
    described: Mutex<HashMap<(PathBuf, String), Value>>,
}

/// Functions described at most (then the memo starts over).
const MEMO: usize = 1000;

/// The request the driver reads.
fn request(mode: &str, files: &Value, source: &str, function: &str, args: Value) -> Vec<u8> {
    json!({"mode": mode, "files": files, "source": source, "function": function, "args": args})
        .to_string()
        .into_bytes()
}

/// The tool's files as the driver takes them, and the path of the function's file.
fn files_of(dir: &Path, record: &ToolRecord) -> Result<(Value, String), String> {
    let mut files = Vec::new();
    let mut paths = Vec::new();
    let mut total = 0u64;
    let mut stack = vec![dir.to_path_buf()];
    while let Some(d) = stack.pop() {
        let entries = std::fs::read_dir(&d).map_err(|e| format!("the tool's files: {e}"))?;
        for e in entries.flatten() {
            let path = e.path();
            let kind = e
                .file_type()
                .map_err(|e| format!("the tool's files: {e}"))?;
            if kind.is_dir() {
                stack.push(path);
                continue;
            }
            if !kind.is_file() {
                continue;
            }
            let rel = path
                .strip_prefix(dir)
                .map_err(|e| e.to_string())?
                .to_string_lossy()
                .into_owned();
            let data = std::fs::read(&path).map_err(|e| format!("the tool's files: {e}"))?;
            total += data.len() as u64;
            if total > MAX_FILES {
                return Err("the tool's files are too large to run".into());
            }
            files.push(json!({
                "path": rel,
                "data": hex::encode(&data),
            }));
            paths.push(rel);
        }
    }
    let uploaded = record.file_name.as_deref().unwrap_or_default();
    let source = if extension(uploaded) == ".zip" {
        source_path(&record.tool_name, &paths)
    } else {
        paths.into_iter().find(|p| p.ends_with(".py"))
    };
    let source = source.ok_or_else(|| {
        format!(
            "custom tool {}: no Python file holds its function",
            record.tool_name
        )
    })?;
    Ok((Value::Array(files), source))
}

/// Runs the driver; its JSON answer.
async fn drive(ctx: &ToolCtx, stdin: Vec<u8>) -> Result<Value, String> {
    let spec = CodeSpec {
        argv: vec!["python3".into(), "-c".into(), DRIVER.into()],
        workspace: ctx.workspace.clone(),
        stdin: Some(stdin),
        wall_clock: ctx.timeout,
        memory_bytes: ctx.max_memory,
        documents: ctx.documents().await,
        user: ctx.caller.user_id.clone(),
        disk: ctx.disk.clone(),
    };
    let out = ctx.deps.code.run(spec, &ctx.cancel).await?;
    if out.timed_out {
        return Err("timed out".into());
    }
    if out.cancelled {
        return Err("stopped".into());
    }
    let answer = out
        .stdout
        .rsplit_once(MARK)
        .map(|(_, a)| a.trim())
        .ok_or_else(|| {
            format!(
                "the tool did not answer (exit code {:?})\n{}",
                out.exit_code,
                clip(&out.stderr, SHOWN)
            )
        })?;
    serde_json::from_str(answer).map_err(|e| format!("the tool's answer is not JSON: {e}"))
}

#[async_trait::async_trait]
impl Opener for GeneralCode {
    async fn open(
        &self,
        record: &ToolRecord,
        files: Option<&Path>,
        ctx: &ToolCtx,
        _secrets: &dyn Secrets,
    ) -> Result<Opened, String> {
        let name = &record.tool_name;
        let dir = files.ok_or_else(|| format!("custom tool {name} has no file"))?;
        if !ctx.deps.code.available() {
            return Err(format!(
                "custom tool {name} is not available: code execution is unavailable on this server"
            ));
        }
        let (files, source) = files_of(dir, record)?;
        let key = (dir.to_path_buf(), name.clone());
        let known = self
            .described
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .get(&key)
            .cloned();
        let described = match known {
            Some(d) => d,
            None => {
                let d = drive(ctx, request("describe", &files, &source, name, json!({})))
                    .await
                    .map_err(|e| format!("custom tool {name} could not be read: {e}"))?;
                if let Some(err) = d.get("error").and_then(Value::as_str) {
                    return Err(format!("custom tool {name} could not be read: {err}"));
                }
                let mut memo = self.described.lock().unwrap_or_else(|p| p.into_inner());
                if memo.len() >= MEMO {
                    memo.clear();
                }
                memo.insert(key, d.clone());
                d
            }
        };
        let doc = described
            .get("description")
            .and_then(Value::as_str)
            .unwrap_or_default();
        let description = match (record.arg("description"), doc) {
            ("", "") => format!("The Python function {name}."),
            ("", d) => d.to_owned(),
            (given, "") => given.to_owned(),
            (given, d) => format!("{given}\n\n{d}"),
        };
        let tool = FunctionTool {
            name: name.clone(),
            description,
            parameters: described
                .get("parameters")
                .cloned()
                .unwrap_or_else(|| json!({"type": "object", "properties": {}})),
            files,
            source,
        };
        let prompt = record.arg("system_prompt").trim();
        Ok(Opened {
            tools: vec![Arc::new(tool)],
            instructions: if prompt.is_empty() {
                Vec::new()
            } else {
                vec![format!("Tool {name}: {prompt}")]
            },
            notes: Vec::new(),
        })
    }
}

/// One general_code function, callable for a run.
struct FunctionTool {
    name: String,
    description: String,
    parameters: Value,
    files: Value,
    source: String,
}

#[async_trait::async_trait]
impl Tool for FunctionTool {
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
        let args = match args {
            Value::Object(_) => args,
            Value::Null => json!({}),
            _ => return Err("the arguments must be a JSON object".into()),
        };
        let answer = drive(
            ctx,
            request("call", &self.files, &self.source, &self.name, args),
        )
        .await?;
        let printed = answer
            .get("printed")
            .and_then(Value::as_str)
            .unwrap_or_default();
        if answer.get("ok").and_then(Value::as_bool) == Some(true) {
            let result = answer
                .get("result")
                .and_then(Value::as_str)
                .unwrap_or_default();
            let text = if printed.is_empty() {
                result.to_owned()
            } else {
                format!("{result}\n[printed]\n{printed}")
            };
            Ok(ToolOutput::text(clip(&text, SHOWN)))
        } else {
            let error = answer
                .get("error")
                .and_then(Value::as_str)
                .unwrap_or("the function failed");
            Err(clip(error, SHOWN))
        }
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::panic)] // test code: fail loudly
mod tests {
    use super::*;

    /// The driver's reading of a signature and docstring (run here with the host's python3,
    /// on test code only; the service runs it in the sandbox).
    fn describe(source: &str, function: &str) -> Option<Value> {
        use std::io::Write;
        let Ok(mut child) = std::process::Command::new("python3")
            .args(["-c", DRIVER])
            .stdin(std::process::Stdio::piped())
            .stdout(std::process::Stdio::piped())
            .spawn()
        else {
            docchat_common::testing::unavailable("python3 for the general_code driver");
            return None;
        };
        let files = json!([{"path": "f.py", "data": hex::encode(source)}]);
        let req = request("describe", &files, "f.py", function, json!({}));
        child.stdin.take().unwrap().write_all(&req).unwrap();
        let out = child.wait_with_output().unwrap();
        let text = String::from_utf8(out.stdout).unwrap();
        let (_, answer) = text
            .rsplit_once(MARK)
            .unwrap_or_else(|| panic!("no answer: {}", String::from_utf8_lossy(&out.stderr)));
        Some(serde_json::from_str(answer.trim()).unwrap())
    }

    #[test]
    fn signatures_and_docstrings_become_the_schema() {
        let source = r#"
from typing import List, Optional

async def lookup(city: str, days: Optional[int] = None, tags: List[str] = [], *, units: "str" = "metric", **extra) -> dict:
    """Looks the weather up.

    :param city: the city's name
    :param days: how many days
        ahead to look
    :returns: the forecast
    """
"#;
        let Some(d) = describe(source, "lookup") else {
            return;
        };
        assert_eq!(d["description"], "Looks the weather up.", "{d}");
        let p = &d["parameters"];
        assert_eq!(p["required"], json!(["city"]), "{p}");
        assert_eq!(
            p["properties"]["city"],
            json!({"type": "string", "description": "the city's name"})
        );
        assert_eq!(p["properties"]["days"]["type"], "integer", "{p}");
        assert_eq!(
            p["properties"]["days"]["description"], "how many days ahead to look",
            "{p}"
        );
        assert_eq!(
            p["properties"]["tags"],
            json!({"type": "array", "items": {"type": "string"}, "default": []})
        );
        assert_eq!(
            p["properties"]["units"],
            json!({"type": "string", "default": "metric"})
        );
        assert!(
            p.get("additionalProperties").is_none(),
            "**extra takes more: {p}"
        );
        let missing = describe(source, "nope").unwrap();
        assert!(
            missing["error"].as_str().unwrap().contains("nope"),
            "{missing}"
        );
    }
}
