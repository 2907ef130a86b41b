//! What an execution asks chat-service for, read from the task's `task_config` (SPEC.md:
//! message, system_prompt, collection_id, timezone, llm, llm_args).

use docchat_common::error::{ApiError, ApiResult};
use docchat_proto::chat::v1 as chat;
use serde::Deserialize;
use serde_json::{Map, Value};

#[derive(Debug, Default, Deserialize)]
#[serde(default)]
pub(super) struct TaskConfig {
    pub message: String,
    pub system_prompt: Option<String>,
    pub collection_id: Option<String>,
    pub llm: Option<String>,
    pub llm_args: Option<Map<String, Value>>,
}

impl TaskConfig {
    pub fn parse(json: &str) -> ApiResult<TaskConfig> {
        serde_json::from_str(json)
            .map_err(|e| ApiError::bad_request(format!("task_config is not valid: {e}")))
    }

    /// The collection the session is linked to (None: no RAG).
    pub fn collection(&self) -> Option<&str> {
        self.collection_id
            .as_deref()
            .map(str::trim)
            .filter(|c| !c.is_empty())
    }

    /// The completion request of this task in `session`: an agent run for agent_task, a
    /// plain or RAG completion otherwise; system_prompt rides in the request's own field
    /// (the stored question stays the task's message).
    pub fn completion(&self, session_id: &str, agent: bool) -> chat::CompletionRequest {
        let args = self.llm_args.clone().unwrap_or_default();
        let message = self.message.clone();
        let agent_args: Map<String, Value> = args
            .iter()
            .filter(|(k, _)| k.starts_with("agent_"))
            .map(|(k, v)| (k.clone(), v.clone()))
            .collect();
        let text = |key: &str| args.get(key).and_then(Value::as_str).map(str::to_owned);
        chat::CompletionRequest {
            session_id: session_id.to_owned(),
            message,
            llm: self.llm.clone().unwrap_or_default(),
            include_chat_history: "off".into(),
            temperature: args.get("temperature").and_then(Value::as_f64),
            max_new_tokens: args
                .get("max_new_tokens")
                .and_then(Value::as_u64)
                .and_then(|n| u32::try_from(n).ok()),
            use_agent: agent,
            memory_block_id: text("memory_block_id"),
            memory_block_name: text("memory_block_name"),
            rag_type: String::new(),
            agent_args_json: if agent_args.is_empty() {
                String::new()
            } else {
                Value::Object(agent_args).to_string()
            },
            system_prompt: self
                .system_prompt
                .as_deref()
                .map(str::trim)
                .filter(|p| !p.is_empty())
                .map(str::to_owned),
            rerank: None,
            ..Default::default()
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_request_carries_the_config() {
        let c = TaskConfig::parse(
            r#"{"message":"hi","system_prompt":"be brief","collection_id":" ","llm":"m",
                "llm_args":{"temperature":0.5,"max_new_tokens":9,"agent_max_turns":3,"memory_block_name":"b"}}"#,
        )
        .unwrap();
        assert_eq!(c.collection(), None);
        let r = c.completion("s", true);
        assert_eq!(r.message, "hi");
        assert_eq!(r.system_prompt.as_deref(), Some("be brief"));
        assert_eq!(r.llm, "m");
        assert_eq!(r.temperature, Some(0.5));
        assert_eq!(r.max_new_tokens, Some(9));
        assert!(r.use_agent);
        assert_eq!(r.memory_block_name.as_deref(), Some("b"));
        assert_eq!(r.agent_args_json, r#"{"agent_max_turns":3}"#);
        let plain = TaskConfig::parse(r#"{"message":"hi"}"#)
            .unwrap()
            .completion("s", false);
        assert_eq!(plain.message, "hi");
        assert!(!plain.use_agent && plain.agent_args_json.is_empty());
    }
}
