//! `generate_system_prompt=true` (general_code): the default chat model reads the tool's
//! code and writes its system_prompt (when and how the agent should use it). The upload
//! waits for it; past the request's timeout it answers 408.

use std::sync::Arc;
use std::time::Duration;

use docchat_common::Caller;
use docchat_common::error::{ApiError, ApiResult, ErrorCode};
use docchat_inference::{ChatMessage, ChatModel, ModelEntry};

use crate::budget::{Budget, usage_of};

/// Writes a tool's system prompt from its code.
#[async_trait::async_trait]
pub trait PromptWriter: Send + Sync {
    async fn write(&self, caller: &Caller, tool_name: &str, source: &str) -> ApiResult<String>;
}

/// The deployment's default chat model, checked against and booked to the caller's cost
/// caps like the agent's own calls.
pub struct ModelPrompts {
    pub model: Arc<ChatModel>,
    pub entry: ModelEntry,
    pub budget: Arc<dyn Budget>,
}

/// Source bytes shown to the model (the rest is cut).
const SHOWN: usize = 60_000;

const INSTRUCTIONS: &str = "You write the system prompt an AI agent reads about one of its tools: a Python function it can call. Read the code and write a few sentences saying what the tool does, when the agent should use it, which arguments to give and what it returns. Answer with the prompt text only.";

#[async_trait::async_trait]
impl PromptWriter for ModelPrompts {
    async fn write(&self, caller: &Caller, tool_name: &str, source: &str) -> ApiResult<String> {
        self.budget.check(caller).await?;
        let messages = [
            ChatMessage::system(INSTRUCTIONS),
            ChatMessage::user(format!(
                "Tool (function) name: {tool_name}\n\nCode:\n```python\n{}\n```",
                crate::tools::clip(source, SHOWN)
            )),
        ];
        let done = self
            .model
            .complete(&messages, 1024, 0.0)
            .await
            .map_err(|e| {
                ApiError::new(
                    ErrorCode::BadGateway,
                    format!("The model could not write the system prompt: {e}"),
                )
            })?;
        let usage = usage_of(
            caller,
            &self.entry,
            "agent.custom_tool_prompt",
            "",
            (done.prompt_tokens, done.completion_tokens),
        );
        self.budget.book(usage).await;
        Ok(done.text.trim().to_owned())
    }
}

/// The system prompt of `tool_name`, or 408 past `timeout`.
pub async fn generate(
    writer: Option<&dyn PromptWriter>,
    caller: &Caller,
    tool_name: &str,
    source: &str,
    timeout: Duration,
) -> ApiResult<String> {
    let writer = writer.ok_or_else(|| {
        ApiError::bad_request(
            "generate_system_prompt needs a default chat model, and none is configured.",
        )
    })?;
    tokio::time::timeout(timeout, writer.write(caller, tool_name, source))
        .await
        .map_err(|_| {
            ApiError::new(
                ErrorCode::Timeout,
                format!(
                    "System prompt generation timed out after {} seconds.",
                    timeout.as_secs()
                ),
            )
        })?
}
