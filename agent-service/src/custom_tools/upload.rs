//! A POST /agents/custom_tools request checked into the tools to store, with SPEC.md's
//! exact messages (its custom-tool error table) and tool_args defaults (its tool_args
//! table). Nothing here writes anything: a refused upload leaves nothing behind.

use std::io::{Cursor, Read};

use docchat_common::error::{ApiError, ApiResult, ErrorCode};
use serde_json::{Map, Value, json};

use super::store::NewTool;
use crate::archive::{self, Limits};
use crate::tools::custom::ToolType;

/// SPEC.md's upload limit.
pub const MAX_UPLOAD: usize = 20 * 1024 * 1024;

pub const TOO_LARGE: &str = "File is too large, maximum size is 20MB";
pub const NO_FILE: &str = "The request does not contain a file.";
pub const BAD_ARGS: &str = "Invalid JSON format for tool_args.";

/// The parts of the upload.
pub struct Upload<'a> {
    pub tool_type: &'a str,
    pub tool_args_json: &'a str,
    pub file_name: Option<&'a str>,
    pub file: &'a [u8],
}

/// The name a file is stored under: its last path component without control characters, as
/// uploads keep it (a `filename` override of `../../ESCAPED.py` is `ESCAPED.py`, so a client
/// that downloads the tool into a folder writes inside it).
fn base_name(name: &str) -> String {
    let base = name.rsplit(['/', '\\']).next().unwrap_or(name).trim();
    let clean: String = base.chars().filter(|c| !c.is_control()).collect();
    match clean.as_str() {
        "." | ".." => String::new(),
        _ => clean,
    }
}

/// The tools the upload makes (one per server for remote_mcp), or SPEC.md's error.
pub fn prepare(up: &Upload<'_>) -> ApiResult<Vec<NewTool>> {
    let base = up.file_name.map(base_name);
    let up = &Upload {
        file_name: base.as_deref(),
        ..*up
    };
    let raw_type = up.tool_type.trim();
    if raw_type.is_empty() {
        return Err(ApiError::bad_request("tool_type is required."));
    }
    let kind = ToolType::parse(raw_type).ok_or_else(|| {
        ApiError::bad_request(format!(
            "Invalid tool_type: {raw_type}. Allowed values are local_mcp, remote_mcp, browser_action, general_code."
        ))
    })?;
    let args = parse_args(up.tool_args_json)?;
    if let Some(name) = up.file_name {
        check_extension(kind, name)?;
        if up.file.len() > MAX_UPLOAD {
            return Err(ApiError::new(ErrorCode::PayloadTooLarge, TOO_LARGE));
        }
    }
    match kind {
        ToolType::RemoteMcp => remote_mcp(args, up),
        _ => {
            let name = up.file_name.ok_or_else(|| ApiError::bad_request(NO_FILE))?;
            local(kind, args, name, up.file)
        }
    }
}

/// tool_args: a JSON object (an absent part reads as `{}`) of at most `limits::JSON_BYTES`
/// (413).
pub fn parse_args(text: &str) -> ApiResult<Map<String, Value>> {
    if text.trim().is_empty() {
        return Ok(Map::new());
    }
    docchat_common::limits::check_json("tool_args", text)?;
    match serde_json::from_str::<Value>(text) {
        Ok(Value::Object(map)) => Ok(map),
        _ => Err(ApiError::bad_request(BAD_ARGS)),
    }
}

/// The extension as SPEC.md's 415 messages show it: `.py`, `.txt` (lower-cased, with its
/// dot), and empty for a name without one (so "Invalid file extension: . Allowed …").
pub fn extension(name: &str) -> String {
    let base = name.rsplit(['/', '\\']).next().unwrap_or(name);
    match base.rfind('.') {
        Some(i) if i > 0 => base[i..].to_ascii_lowercase(),
        _ => String::new(),
    }
}

fn check_extension(kind: ToolType, name: &str) -> ApiResult<()> {
    let ext = extension(name);
    let (allowed, message): (&[&str], String) = match kind {
        ToolType::LocalMcp => (
            &[".zip"],
            format!("Invalid file extension: {ext}. Allowed extensions are .zip."),
        ),
        ToolType::RemoteMcp => (
            &[".json"],
            format!("Invalid file extension: {ext}. For remote_mcp, allowed extensions are .json."),
        ),
        ToolType::BrowserAction | ToolType::GeneralCode => (
            &[".zip", ".py"],
            format!("Invalid file extension: {ext}. Allowed extensions are .zip, .py."),
        ),
    };
    if allowed.contains(&ext.as_str()) {
        Ok(())
    } else {
        Err(ApiError::new(ErrorCode::UnsupportedMediaType, message))
    }
}

/// The file's name without directories or extension.
fn stem(name: &str) -> &str {
    let base = name.rsplit(['/', '\\']).next().unwrap_or(name);
    match base.rfind('.') {
        Some(i) if i > 0 => &base[..i],
        _ => base,
    }
}

/// Checks the common fields' types and fills SPEC.md's defaults.
fn defaults(kind: ToolType, args: &mut Map<String, Value>, file_name: &str) -> ApiResult<()> {
    let name = match args.get("tool_name") {
        None | Some(Value::Null) => stem(file_name).to_owned(),
        Some(Value::String(s)) if !s.trim().is_empty() => s.trim().to_owned(),
        Some(_) => {
            return Err(ApiError::bad_request(
                "tool_args.tool_name must be a non-empty string.",
            ));
        }
    };
    check_name(&name)?;
    args.insert("tool_name".into(), Value::String(name));
    args.entry("description").or_insert(json!(""));
    args.entry("enable_by_default").or_insert(json!(true));
    args.entry("tool_usage_mode")
        .or_insert(json!(["runner", "creator"]));
    if kind == ToolType::GeneralCode {
        args.entry("should_unzip").or_insert(json!(false));
        args.entry("system_prompt").or_insert(json!(""));
    }
    check_fields(args)
}

/// A custom tool may not take a built-in tool's name: runs name tools by name.
pub fn check_name(name: &str) -> ApiResult<()> {
    if crate::tools::Catalog::builtin().get(name).is_some() {
        return Err(ApiError::bad_request(format!(
            "tool_name {name} is the name of a built-in agent tool; choose another."
        )));
    }
    Ok(())
}

/// The types of the fields SPEC.md gives (on create and on update).
pub fn check_fields(args: &Map<String, Value>) -> ApiResult<()> {
    for key in ["description", "system_prompt"] {
        if args.get(key).is_some_and(|v| !v.is_string()) {
            return Err(ApiError::bad_request(format!(
                "tool_args.{key} must be a string."
            )));
        }
    }
    for key in ["enable_by_default", "should_unzip"] {
        if args.get(key).is_some_and(|v| !v.is_boolean()) {
            return Err(ApiError::bad_request(format!(
                "tool_args.{key} must be a boolean."
            )));
        }
    }
    if let Some(modes) = args.get("tool_usage_mode") {
        let ok = modes.as_array().is_some_and(|a| {
            a.iter()
                .all(|m| matches!(m.as_str(), Some("runner") | Some("creator")))
        });
        if !ok {
            return Err(ApiError::bad_request(
                "tool_args.tool_usage_mode must be an array of \"runner\" and \"creator\".",
            ));
        }
    }
    if args
        .get("tool_name")
        .is_some_and(|v| v.as_str().is_none_or(|s| s.trim().is_empty()))
    {
        return Err(ApiError::bad_request(
            "tool_args.tool_name must be a non-empty string.",
        ));
    }
    Ok(())
}

fn local(
    kind: ToolType,
    mut args: Map<String, Value>,
    name: &str,
    file: &[u8],
) -> ApiResult<Vec<NewTool>> {
    let ext = extension(name);
    if ext == ".zip" {
        archive::check(file, &Limits::UPLOAD)
            .map_err(|e| ApiError::bad_request(format!("The archive was refused: {e}")))?;
    }
    if kind == ToolType::BrowserAction
        && ext == ".py"
        && !name
            .rsplit('/')
            .next()
            .unwrap_or(name)
            .starts_with("browser_")
    {
        return Err(ApiError::bad_request(format!(
            "Invalid file name: {name}. A browser_action script's name must start with browser_."
        )));
    }
    defaults(kind, &mut args, name)?;
    let tool_name = args["tool_name"].as_str().unwrap_or_default().to_owned();
    if kind == ToolType::GeneralCode {
        check_function(&tool_name, name, file)?;
    }
    Ok(vec![NewTool {
        tool_name,
        tool_type: kind,
        args: Value::Object(args),
        file_name: Some(name.to_owned()),
        file: Some(file.to_vec()),
    }])
}

/// general_code: the source file that holds the tool's function. A .py upload is it; in a
/// .zip it is `<tool_name>.py`, else `main.py`, else the only `.py` file, each looked for
/// at the archive's root first, then in its single top-level folder.
pub fn source_path(tool_name: &str, entries: &[String]) -> Option<String> {
    let roots: Vec<String> = {
        let mut r = vec![String::new()];
        let tops: std::collections::BTreeSet<&str> = entries
            .iter()
            .filter_map(|p| p.split_once('/').map(|(top, _)| top))
            .collect();
        if tops.len() == 1 {
            r.push(format!("{}/", tops.iter().next().unwrap_or(&"")));
        }
        r
    };
    for root in &roots {
        for candidate in [format!("{root}{tool_name}.py"), format!("{root}main.py")] {
            if entries.contains(&candidate) {
                return Some(candidate);
            }
        }
        let py: Vec<&String> = entries
            .iter()
            .filter(|p| {
                p.ends_with(".py")
                    && p.strip_prefix(root.as_str())
                        .is_some_and(|rest| !rest.contains('/'))
            })
            .collect();
        if py.len() == 1 {
            return Some(py[0].clone());
        }
    }
    None
}

/// The text of the general_code tool's source file.
pub fn source(tool_name: &str, file_name: &str, file: &[u8]) -> ApiResult<(String, String)> {
    let (path, bytes) = if extension(file_name) == ".zip" {
        let names: Vec<String> = archive::check(file, &Limits::UPLOAD)
            .map_err(|e| ApiError::bad_request(format!("The archive was refused: {e}")))?
            .into_iter()
            .filter(|e| !e.is_dir)
            .map(|e| e.path)
            .collect();
        let mut zip = zip::ZipArchive::new(Cursor::new(file))
            .map_err(|e| ApiError::bad_request(format!("The archive was refused: {e}")))?;
        let path = source_path(tool_name, &names).ok_or_else(|| {
            ApiError::bad_request(format!(
                "The archive holds no Python file for the function {tool_name}: add {tool_name}.py or main.py at its root."
            ))
        })?;
        let mut out = Vec::new();
        zip.by_name(&path)
            .map_err(|e| ApiError::bad_request(format!("The archive was refused: {e}")))?
            .take(MAX_UPLOAD as u64 * 10)
            .read_to_end(&mut out)
            .map_err(|e| ApiError::bad_request(format!("The archive was refused: {e}")))?;
        (path, out)
    } else {
        (stem(file_name).to_owned() + ".py", file.to_vec())
    };
    let text = String::from_utf8(bytes)
        .map_err(|_| ApiError::bad_request(format!("{path} is not UTF-8 text.")))?;
    Ok((path, text))
}

/// Whether `text` defines `name` at the top level (a `def`/`async def` at column 0). The
/// sandbox reads the signature with Python's own parser when the tool is opened; this is
/// the upload's early check, without running anything.
pub fn defines(text: &str, name: &str) -> bool {
    text.lines().any(|line| {
        let rest = line
            .strip_prefix("async def ")
            .or_else(|| line.strip_prefix("def "));
        rest.is_some_and(|r| {
            r.trim_start()
                .strip_prefix(name)
                .is_some_and(|after| after.trim_start().starts_with('('))
        })
    })
}

/// general_code: tool_name must name a function defined at the top level of its file.
pub fn check_function(tool_name: &str, file_name: &str, file: &[u8]) -> ApiResult<()> {
    let is_identifier = tool_name
        .chars()
        .next()
        .is_some_and(|c| c.is_ascii_alphabetic() || c == '_')
        && tool_name
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || c == '_');
    if !is_identifier {
        return Err(ApiError::bad_request(format!(
            "tool_name {tool_name} is not a Python function name: for general_code it must name the function defined in the file."
        )));
    }
    let (path, text) = source(tool_name, file_name, file)?;
    if !defines(&text, tool_name) {
        return Err(ApiError::bad_request(format!(
            "{path} defines no top-level function {tool_name}: for general_code, tool_name must name the primary function defined in the file."
        )));
    }
    Ok(())
}

/// remote_mcp: one tool per server of `mcpServers` (from mcp_config_json, or the .json
/// file); each keeps only its own server's configuration.
fn remote_mcp(mut args: Map<String, Value>, up: &Upload<'_>) -> ApiResult<Vec<NewTool>> {
    let config_text = match up.file_name {
        Some(_) => String::from_utf8(up.file.to_vec())
            .map_err(|_| ApiError::bad_request("The MCP configuration file is not UTF-8 JSON."))?,
        None => match args.get("mcp_config_json") {
            Some(Value::String(s)) => s.clone(),
            Some(Value::Object(o)) => Value::Object(o.clone()).to_string(),
            _ => {
                return Err(ApiError::bad_request(
                    "tool_args.mcp_config_json is required for remote_mcp: a JSON string with a top-level mcpServers object.",
                ));
            }
        },
    };
    let config: Map<String, Value> = match serde_json::from_str(&config_text) {
        Ok(Value::Object(o)) => o,
        _ => {
            return Err(ApiError::bad_request(
                "mcp_config_json is not a JSON object with a top-level mcpServers object.",
            ));
        }
    };
    let servers = match config.get("mcpServers") {
        Some(Value::Object(s)) if !s.is_empty() => s.clone(),
        _ => {
            return Err(ApiError::bad_request(
                "mcp_config_json needs a top-level mcpServers object naming at least one server.",
            ));
        }
    };
    args.remove("mcp_config_json");
    args.remove("tool_name");
    args.entry("enable_by_default").or_insert(json!(true));
    if let Some(mode) = config.get("tool_usage_mode") {
        args.insert("tool_usage_mode".into(), mode.clone());
    }
    args.entry("tool_usage_mode")
        .or_insert(json!(["runner", "creator"]));
    check_fields(&args)?;
    let mut tools = Vec::new();
    for (name, server) in servers {
        check_name(&name)?;
        if !server.is_object() {
            return Err(ApiError::bad_request(format!(
                "The MCP server {name} is not a JSON object."
            )));
        }
        let mut own = Map::new();
        own.insert("mcpServers".into(), json!({ name.clone(): server }));
        if let Some(mode) = config.get("tool_usage_mode") {
            own.insert("tool_usage_mode".into(), mode.clone());
        }
        let mut tool_args = args.clone();
        tool_args.insert(
            "mcp_config_json".into(),
            Value::String(Value::Object(own).to_string()),
        );
        tools.push(NewTool {
            tool_name: name,
            tool_type: ToolType::RemoteMcp,
            args: Value::Object(tool_args),
            file_name: up.file_name.map(str::to_owned),
            file: None,
        });
    }
    Ok(tools)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn extensions_as_the_messages_show_them() {
        assert_eq!(extension("tool.PY"), ".py");
        assert_eq!(extension("archive.tar.gz"), ".gz");
        assert_eq!(extension("noext"), "");
        assert_eq!(extension(".hidden"), "");
    }

    #[test]
    fn a_file_name_override_keeps_only_its_base_name() {
        let up = Upload {
            tool_type: "general_code",
            tool_args_json: "{}",
            file_name: Some("../../ESCAPED.py"),
            file: b"def ESCAPED():\n    return 1\n",
        };
        let tools = prepare(&up).unwrap();
        assert_eq!(tools[0].file_name.as_deref(), Some("ESCAPED.py"));
        assert_eq!(base_name("..\\x\\y.zip"), "y.zip");
        assert_eq!(base_name("a/.."), "");
        assert_eq!(base_name("tab\tname.py"), "tabname.py");
    }

    #[test]
    fn top_level_functions_only() {
        let src = "import os\n\ndef helper(x):\n    def inner():\n        pass\n\nasync def fetch (a, b=1):\n    return a\n";
        assert!(defines(src, "helper"));
        assert!(defines(src, "fetch"));
        assert!(!defines(src, "inner"));
        assert!(!defines(src, "help"));
    }

    #[test]
    fn the_source_of_a_zip() {
        let names = |v: &[&str]| v.iter().map(|s| s.to_string()).collect::<Vec<_>>();
        assert_eq!(
            source_path("f", &names(&["a.py", "f.py"])),
            Some("f.py".into())
        );
        assert_eq!(
            source_path("f", &names(&["a.py", "main.py"])),
            Some("main.py".into())
        );
        assert_eq!(
            source_path("f", &names(&["pkg/", "pkg/only.py", "pkg/data.txt"])),
            Some("pkg/only.py".into())
        );
        assert_eq!(source_path("f", &names(&["a.py", "b.py"])), None);
    }
}
