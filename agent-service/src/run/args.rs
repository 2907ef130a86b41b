//! The agent_* keys of llm_args (RunStart.agent_args_json), validated: the budgets in force
//! and the tools asked for. Keys starting with `agent_` that are not implemented are
//! accepted and ignored; a bad value of a known key is INVALID_ARGUMENT.

use std::time::Duration;

use docchat_common::error::ApiError;
use serde_json::Value;

use super::agents::AgentType;

/// Total wall clock of a run unless `agent_total_timeout` says otherwise.
pub const DEFAULT_TOTAL_TIMEOUT: Duration = Duration::from_secs(3600);

/// `agent_accuracy` presets: turns and seconds per turn (the reference client's numbers).
pub fn preset(accuracy: &str) -> Option<(u32, u64)> {
    match accuracy {
        "quick" => Some((10, 30)),
        "basic" => Some((20, 60)),
        "standard" => Some((40, 120)),
        "maximum" => Some((80, 240)),
        _ => None,
    }
}

/// Which tools the run may use.
#[derive(Debug, Clone, PartialEq)]
pub enum ToolSelection {
    /// The caller's tool preference, else the agent type's defaults.
    Auto,
    All,
    Names(Vec<String>),
}

#[derive(Debug, Clone, PartialEq)]
pub struct RunArgs {
    pub agent_type: AgentType,
    /// agent_type named no built-in agent: the name of a custom agent of the caller's,
    /// looked up by the service ([`unknown_agent_type`] when there is none).
    pub custom_agent: Option<String>,
    pub tools: ToolSelection,
    pub max_turns: u32,
    pub total_timeout: Duration,
    /// One model call, and each tool call, may take this long.
    pub turn_timeout: Duration,
    pub stream_files: bool,
    /// `agent_max_memory_usage`: the sandbox's memory limit, bytes.
    pub max_memory: Option<u64>,
}

/// agent_type names neither a built-in agent nor one of the caller's custom agents.
pub fn unknown_agent_type(t: &str) -> ApiError {
    bad(format!(
        "unknown agent_type {t:?}; one of {}",
        AgentType::NAMES.join(", ")
    ))
}

fn bad(message: impl Into<String>) -> ApiError {
    ApiError::bad_request(message)
}

/// A positive integer given as a number or a numeric string.
fn positive(v: &Value, key: &str, max: u64) -> Result<u64, ApiError> {
    let n = match v {
        Value::Number(n) => n.as_u64().or_else(|| {
            n.as_f64()
                .filter(|f| f.fract() == 0.0 && *f >= 0.0)
                .map(|f| f as u64)
        }),
        Value::String(s) => s.trim().parse::<u64>().ok(),
        _ => None,
    };
    match n {
        Some(n) if (1..=max).contains(&n) => Ok(n),
        _ => Err(bad(format!(
            "{key} must be a whole number from 1 to {max}, not {v}"
        ))),
    }
}

pub fn parse(json: &str) -> Result<RunArgs, ApiError> {
    let map = if json.trim().is_empty() {
        serde_json::Map::new()
    } else {
        match serde_json::from_str::<Value>(json) {
            Ok(Value::Object(m)) => m,
            Ok(Value::Null) => serde_json::Map::new(),
            _ => return Err(bad("the agent arguments must be a JSON object")),
        }
    };
    let text = |key: &str| -> Result<Option<String>, ApiError> {
        match map.get(key) {
            None | Some(Value::Null) => Ok(None),
            Some(Value::String(s)) => Ok(Some(s.trim().to_owned())),
            Some(other) => Err(bad(format!("{key} must be a string, not {other}"))),
        }
    };
    let (agent_type, custom_agent) = match text("agent_type")? {
        None => (AgentType::General, None),
        Some(t) => match AgentType::parse(&t) {
            Some(a) => (a, None),
            None => (AgentType::General, Some(t)),
        },
    };
    let accuracy = text("agent_accuracy")?.unwrap_or_else(|| "standard".into());
    let (preset_turns, preset_timeout) = preset(&accuracy).ok_or_else(|| {
        bad(format!(
            "unknown agent_accuracy {accuracy:?}; one of quick, basic, standard, maximum"
        ))
    })?;
    let max_turns = match map.get("agent_max_turns") {
        None | Some(Value::Null) => preset_turns,
        Some(Value::String(s)) if s.trim().is_empty() || s.trim() == "auto" => preset_turns,
        Some(v) => positive(v, "agent_max_turns", 1000)? as u32,
    };
    let total_timeout = match map.get("agent_total_timeout") {
        None | Some(Value::Null) => DEFAULT_TOTAL_TIMEOUT,
        Some(v) => Duration::from_secs(positive(v, "agent_total_timeout", 7 * 24 * 3600)?),
    };
    let turn_timeout = match map.get("agent_timeout") {
        None | Some(Value::Null) => Duration::from_secs(preset_timeout),
        Some(v) => Duration::from_secs(positive(v, "agent_timeout", 24 * 3600)?),
    };
    let tools = match map.get("agent_tools") {
        None | Some(Value::Null) => ToolSelection::Auto,
        Some(Value::String(s)) => match s.trim() {
            "" | "auto" => ToolSelection::Auto,
            "all" => ToolSelection::All,
            list => ToolSelection::Names(
                list.split(',')
                    .map(|t| t.trim().to_owned())
                    .filter(|t| !t.is_empty())
                    .collect(),
            ),
        },
        Some(Value::Array(items)) => ToolSelection::Names(
            items
                .iter()
                .map(|i| {
                    i.as_str()
                        .map(str::to_owned)
                        .ok_or_else(|| bad("agent_tools must list tool names (strings)"))
                })
                .collect::<Result<_, _>>()?,
        ),
        Some(other) => {
            return Err(bad(format!(
                "agent_tools must be \"auto\", \"all\" or a list of tool names, not {other}"
            )));
        }
    };
    let stream_files = match map.get("agent_stream_files") {
        None | Some(Value::Null) => true,
        Some(Value::Bool(b)) => *b,
        Some(other) => {
            return Err(bad(format!(
                "agent_stream_files must be a boolean, not {other}"
            )));
        }
    };
    let max_memory = match map.get("agent_max_memory_usage") {
        None | Some(Value::Null) => None,
        Some(v) => Some(positive(v, "agent_max_memory_usage", u64::MAX >> 1)?),
    };
    Ok(RunArgs {
        agent_type,
        custom_agent,
        tools,
        max_turns,
        total_timeout,
        turn_timeout,
        stream_files,
        max_memory,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn presets_apply_when_turns_are_auto() {
        let a = parse("").unwrap();
        assert_eq!((a.max_turns, a.turn_timeout.as_secs()), (40, 120));
        assert_eq!(a.total_timeout, DEFAULT_TOTAL_TIMEOUT);
        let a = parse(r#"{"agent_accuracy": "quick", "agent_max_turns": "auto"}"#).unwrap();
        assert_eq!((a.max_turns, a.turn_timeout.as_secs()), (10, 30));
        let a = parse(r#"{"agent_accuracy": "maximum", "agent_max_turns": 3, "agent_timeout": "7", "agent_unknown_key": 1}"#).unwrap();
        assert_eq!((a.max_turns, a.turn_timeout.as_secs()), (3, 7));
        assert_eq!(
            parse(r#"{"agent_tools": "a, b"}"#).unwrap().tools,
            ToolSelection::Names(vec!["a".into(), "b".into()])
        );
        assert_eq!(
            parse(r#"{"agent_tools": "all"}"#).unwrap().tools,
            ToolSelection::All
        );
        // Not built in: the service looks it up among the caller's custom agents.
        assert_eq!(
            parse(r#"{"agent_type": "wizard"}"#)
                .unwrap()
                .custom_agent
                .as_deref(),
            Some("wizard")
        );
    }

    #[test]
    fn bad_values_are_refused() {
        for bad in [
            r#"{"agent_max_turns": 0}"#,
            r#"{"agent_max_turns": "many"}"#,
            r#"{"agent_accuracy": "perfect"}"#,
            r#"{"agent_tools": 5}"#,
            r#"{"agent_total_timeout": -1}"#,
            "[1]",
        ] {
            assert!(parse(bad).is_err(), "{bad}");
        }
    }
}
