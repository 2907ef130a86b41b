//! memory: the run's agent_tool memory block (RunStart.memory), read and — with edit
//! access — replaced or appended to through chat-service's MemoryBlockService as the
//! caller, so the block's access rules and max_content_length are chat-service's, applied
//! there once. Offered only in runs whose memory block is in agent_tool mode; never in the
//! catalogue (agent_tools cannot name it).

use docchat_proto::agent::v1 as pb;
use docchat_proto::chat::v1 as chat;
use serde_json::{Value, json};

use super::{Tool, ToolCtx, ToolOutput, arg, clip};

pub const NAME: &str = "memory";

/// Bytes of content shown to the model at once.
const MAX_SHOWN: usize = 100_000;

pub struct MemoryTool {
    block: pb::RunMemory,
    description: String,
}

impl MemoryTool {
    pub fn new(block: pb::RunMemory) -> MemoryTool {
        let limit = limit_words(block.max_content_length);
        let rights = if block.editable {
            format!(
                "action `read` returns its content, `replace` sets it to `content`, `append` adds `content` to its end; {limit}"
            )
        } else {
            "it is read-only for you: only action `read` (its content) works".to_owned()
        };
        let description = format!(
            "The memory block \"{}\": notes kept between chats for you and the user. Read it before you answer; {rights}.",
            block.name
        );
        MemoryTool { block, description }
    }
}

/// How the limit reads in a description or a system prompt.
pub fn limit_words(max: i64) -> String {
    if max > 0 {
        format!("it holds at most {max} characters")
    } else {
        "its length is not limited".to_owned()
    }
}

/// What the model reads when chat-service refused a call.
fn refused(s: &tonic::Status) -> String {
    match s.code() {
        tonic::Code::PermissionDenied => {
            "the memory block is read-only for you; nothing was changed".into()
        }
        tonic::Code::NotFound => {
            "the memory block no longer exists or is no longer shared with you".into()
        }
        tonic::Code::InvalidArgument => format!("not saved: {}", s.message()),
        _ => format!("the memory block is unavailable: {}", s.message()),
    }
}

#[async_trait::async_trait]
impl Tool for MemoryTool {
    fn writes(&self) -> bool {
        false
    }

    fn name(&self) -> &str {
        NAME
    }

    fn description(&self) -> &str {
        &self.description
    }

    fn parameters(&self) -> Value {
        json!({"type": "object", "properties": {
                  "action": {"type": "string", "enum": ["read", "replace", "append"]},
                  "content": {"type": "string", "description": "The new content (replace) or the text to add (append)"}},
               "required": ["action"], "additionalProperties": false})
    }

    async fn call(&self, ctx: &ToolCtx, args: Value) -> Result<ToolOutput, String> {
        let action = arg(&args, "action")?;
        let Some(clients) = &ctx.deps.clients else {
            return Err("memory blocks are unavailable here".into());
        };
        let mut client = clients.memory_blocks(&ctx.caller);
        if action == "read" {
            let block = client
                .get_memory_block(chat::MemoryBlockRef {
                    id: self.block.id.clone(),
                })
                .await
                .map_err(|s| refused(&s))?
                .into_inner();
            return Ok(ToolOutput::text(if block.content.is_empty() {
                "(the memory block is empty)".to_owned()
            } else {
                clip(&block.content, MAX_SHOWN)
            }));
        }
        if !self.block.editable {
            return Err("the memory block is read-only for you; nothing was changed".into());
        }
        let content = arg(&args, "content")?.to_owned();
        let chars = content.chars().count() as u64;
        let max = self.block.max_content_length;
        if action == "replace" && max > 0 && chars > max.unsigned_abs() {
            return Err(format!(
                "not saved: {chars} characters, over the block's limit of {max}; shorten it"
            ));
        }
        let request = chat::UpdateMemoryBlockRequest {
            id: self.block.id.clone(),
            fields: Some(chat::MemoryBlockFields {
                content: Some(content),
                ..Default::default()
            }),
            append: action == "append",
        };
        client
            .update_memory_block(request)
            .await
            .map_err(|s| refused(&s))?;
        Ok(ToolOutput::text(match action {
            "append" => format!("appended {chars} characters to the memory block"),
            _ => format!("the memory block now holds the {chars} characters given"),
        }))
    }
}
