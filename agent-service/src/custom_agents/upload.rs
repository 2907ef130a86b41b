//! An uploaded agent ZIP, read: one agent per top-level folder (or the whole archive as one
//! agent when its files sit at the top), each with its metadata.json (description, command,
//! mcp_servers) and envs.json (declared environment keys). The archive is checked
//! ([`crate::archive`]) before anything is read; each agent's folder is kept as a ZIP of its
//! own files.

use std::collections::BTreeMap;
use std::io::{Cursor, Read};

use docchat_common::error::{ApiError, ErrorCode};
use serde_json::Value;
use zip::ZipArchive;

use crate::archive::{self, Limits};

pub use crate::entities::custom_agents::Declared;

/// The upload limit (SPEC.md "Limits").
pub const MAX_UPLOAD: usize = 20 * 1024 * 1024;

/// SPEC.md's framework stand-ins, and the client's names they stand for (in order).
const FRAMEWORKS: [(&str, &str); 4] = [
    ("framework_1", "langgraph"),
    ("framework_2", "crewai"),
    ("framework_3", "openai"),
    ("framework_4", "claude"),
];

/// The framework an agent_type names either way: its (stand-in, client name) pair.
fn named(t: &str) -> Option<(&'static str, &'static str)> {
    let t = t.trim();
    FRAMEWORKS
        .iter()
        .find(|(stand_in, name)| t.eq_ignore_ascii_case(stand_in) || t.eq_ignore_ascii_case(name))
        .copied()
}

/// The agent_type to store: the spelling the uploader used (a stand-in or a client name, in
/// lower case), so that it reads back as given; `None` when it names no framework.
pub fn stored_type(t: &str) -> Option<&'static str> {
    let (stand_in, name) = named(t)?;
    Some(if t.trim().eq_ignore_ascii_case(stand_in) {
        stand_in
    } else {
        name
    })
}

/// The client's name of an agent_type given either way (GET /agents items' `type`, which the
/// client's model restricts to those names); a stored value naming no framework as it is.
pub fn client_type(t: &str) -> &str {
    named(t).map_or(t, |(_, name)| name)
}

/// A declared environment key.
#[derive(Debug, Clone, PartialEq)]
pub struct EnvKey {
    pub name: String,
    /// required | optional_with_default | optional_no_default
    pub requirement: &'static str,
    pub default: Option<String>,
}

/// One agent folder of an upload.
#[derive(Debug, Clone)]
pub struct AgentFolder {
    pub name: String,
    pub description: String,
    /// The command that runs it (metadata.json `command`, default `python3 main.py`).
    pub command: Vec<String>,
    pub servers: Vec<Declared>,
    pub envs: Vec<EnvKey>,
    /// A ZIP of the folder's files, paths relative to the folder.
    pub zip: Vec<u8>,
}

pub fn too_large() -> ApiError {
    ApiError::new(
        ErrorCode::PayloadTooLarge,
        "File is too large, maximum size is 20MB",
    )
}

/// SPEC.md's 415 for a file that is not a .zip.
pub fn check_extension(file_name: &str) -> Result<(), ApiError> {
    let ext = std::path::Path::new(file_name)
        .extension()
        .map(|e| format!(".{}", e.to_string_lossy()))
        .unwrap_or_default();
    if ext.eq_ignore_ascii_case(".zip") {
        Ok(())
    } else {
        Err(ApiError::new(
            ErrorCode::UnsupportedMediaType,
            format!("Invalid file extension: {ext}. Allowed extensions are .zip."),
        ))
    }
}

/// The agent folders of `bytes` (a ZIP named `file_name`); `rename` names the only one.
pub fn read(
    bytes: &[u8],
    file_name: &str,
    rename: Option<&str>,
) -> Result<Vec<AgentFolder>, ApiError> {
    let bad = |m: String| ApiError::bad_request(m);
    let entries = archive::check(bytes, &Limits::UPLOAD).map_err(|e| bad(e.0))?;
    let mut zip = ZipArchive::new(Cursor::new(bytes)).map_err(|e| bad(e.to_string()))?;
    let mut files: Vec<(String, Vec<u8>)> = Vec::new();
    for (i, e) in entries.iter().enumerate() {
        if e.is_dir || e.path.starts_with("__MACOSX/") {
            continue;
        }
        let mut data = Vec::with_capacity(e.size as usize);
        zip.by_index(i)
            .map_err(|err| {
                bad(format!(
                    "the archive entry {:?} is unreadable ({err})",
                    e.path
                ))
            })?
            .take(e.size + 1)
            .read_to_end(&mut data)
            .map_err(|err| {
                bad(format!(
                    "the archive entry {:?} does not unpack ({err})",
                    e.path
                ))
            })?;
        files.push((e.path.clone(), data));
    }
    let flat = files.iter().any(|(p, _)| !p.contains('/'));
    let mut groups: BTreeMap<String, Vec<(String, Vec<u8>)>> = BTreeMap::new();
    if flat {
        let stem = std::path::Path::new(file_name)
            .file_stem()
            .map(|s| s.to_string_lossy().into_owned())
            .unwrap_or_else(|| "agent".into());
        groups.insert(stem, files);
    } else {
        for (path, data) in files {
            let (top, rest) = path.split_once('/').unwrap_or(("", &path));
            groups
                .entry(top.to_owned())
                .or_default()
                .push((rest.to_owned(), data));
        }
    }
    if groups.is_empty() {
        return Err(bad("the archive holds no agent folder".into()));
    }
    let only = groups.len() == 1;
    groups
        .into_iter()
        .map(|(name, files)| {
            let name = match rename.map(str::trim).filter(|r| !r.is_empty()) {
                Some(r) if only => r.to_owned(),
                _ => name,
            };
            folder(name, files)
        })
        .collect()
}

fn json_file(files: &[(String, Vec<u8>)], agent: &str, name: &str) -> Result<Value, ApiError> {
    match files.iter().find(|(p, _)| p == name) {
        None => Ok(Value::Null),
        Some((_, data)) => serde_json::from_slice(data)
            .map_err(|e| ApiError::bad_request(format!("{agent}/{name} is not valid JSON: {e}"))),
    }
}

fn folder(name: String, files: Vec<(String, Vec<u8>)>) -> Result<AgentFolder, ApiError> {
    let meta = json_file(&files, &name, "metadata.json")?;
    let envs = json_file(&files, &name, "envs.json")?;
    let description = meta
        .get("description")
        .and_then(Value::as_str)
        .unwrap_or("")
        .to_owned();
    let command = match meta.get("command") {
        Some(Value::String(s)) => s.split_whitespace().map(str::to_owned).collect(),
        Some(Value::Array(a)) => a
            .iter()
            .map(|v| v.as_str().map(str::to_owned))
            .collect::<Option<Vec<_>>>()
            .ok_or_else(|| {
                ApiError::bad_request(format!("{name}/metadata.json: command must list strings"))
            })?,
        _ => Vec::new(),
    };
    let command = if command.is_empty() {
        vec!["python3".into(), "main.py".into()]
    } else {
        command
    };
    let servers = match meta.get("mcp_servers") {
        Some(Value::Object(m)) => m
            .iter()
            .map(|(k, v)| Declared {
                name: k.clone(),
                args: v.clone(),
            })
            .collect(),
        Some(Value::Array(items)) => items
            .iter()
            .filter_map(|i| match i {
                Value::String(s) => Some(Declared {
                    name: s.clone(),
                    args: Value::Object(Default::default()),
                }),
                Value::Object(o) => o.get("name").and_then(Value::as_str).map(|n| Declared {
                    name: n.to_owned(),
                    args: i.clone(),
                }),
                _ => None,
            })
            .collect(),
        _ => Vec::new(),
    };
    let envs = match envs {
        Value::Object(m) => m.iter().map(|(k, v)| env_key(k, v)).collect(),
        Value::Array(items) => items
            .iter()
            .filter_map(Value::as_str)
            .map(|k| env_key(k, &Value::Null))
            .collect(),
        _ => Vec::new(),
    };
    let refs: Vec<(&str, &[u8])> = files
        .iter()
        .map(|(p, d)| (p.as_str(), d.as_slice()))
        .collect();
    Ok(AgentFolder {
        name,
        description,
        command,
        servers,
        envs,
        zip: archive::zip_of(&refs),
    })
}

/// envs.json's value for a key: one of the requirement types, `null`/`""` (required), or
/// any other string (optional, with that default).
fn env_key(name: &str, v: &Value) -> EnvKey {
    let key = |requirement, default| EnvKey {
        name: name.to_owned(),
        requirement,
        default,
    };
    match v {
        Value::String(s) => match s.as_str() {
            "" | "required" => key("required", None),
            "optional_no_default" | "optional" => key("optional_no_default", None),
            "optional_with_default" => key("optional_with_default", Some(String::new())),
            other => key("optional_with_default", Some(other.to_owned())),
        },
        Value::Object(o) => {
            let default = o.get("default").and_then(Value::as_str).map(str::to_owned);
            let required = o
                .get("required")
                .and_then(Value::as_bool)
                .unwrap_or(default.is_none());
            match (required, default) {
                (true, _) => key("required", None),
                (false, Some(d)) => key("optional_with_default", Some(d)),
                (false, None) => key("optional_no_default", None),
            }
        }
        _ => key("required", None),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn folders_become_agents_with_their_declarations() {
        let zip = archive::zip_of(&[
            ("a/main.py", b"print(1)"),
            (
                "a/metadata.json",
                br#"{"description": "A", "mcp_servers": {"weather": {"x": 1}}}"#,
            ),
            (
                "a/envs.json",
                br#"{"API_KEY": "required", "MODE": "fast", "OPT": "optional_no_default"}"#,
            ),
            ("b/main.py", b"print(2)"),
        ]);
        let agents = read(&zip, "two.zip", Some("ignored")).unwrap();
        assert_eq!(agents.len(), 2);
        let a = &agents[0];
        assert_eq!((a.name.as_str(), a.description.as_str()), ("a", "A"));
        assert_eq!(a.servers[0].name, "weather");
        assert_eq!(a.command, ["python3", "main.py"]);
        let req: Vec<_> = a
            .envs
            .iter()
            .map(|e| (e.name.as_str(), e.requirement))
            .collect();
        assert_eq!(
            req,
            [
                ("API_KEY", "required"),
                ("MODE", "optional_with_default"),
                ("OPT", "optional_no_default")
            ]
        );
        let one = read(
            &archive::zip_of(&[("main.py", b"x")]),
            "solo.zip",
            Some("Renamed"),
        )
        .unwrap();
        assert_eq!(one[0].name, "Renamed");
        // Stored as given (either spelling), listed by the client's name.
        assert_eq!(stored_type("framework_3"), Some("framework_3"));
        assert_eq!(stored_type(" Framework_1 "), Some("framework_1"));
        assert_eq!(stored_type("claude"), Some("claude"));
        assert_eq!(stored_type("autogen"), None);
        assert_eq!(client_type("framework_3"), "openai");
        assert_eq!(client_type("claude"), "claude");
        assert!(
            check_extension("a.tar.gz")
                .unwrap_err()
                .message
                .contains(".gz")
        );
    }
}
