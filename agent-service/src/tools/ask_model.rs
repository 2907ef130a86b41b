//! ask_model: asks the run's model about a piece of text (rlm_rag reads documents in
//! pieces this way); the call is checked against the cost caps and booked like the run's
//! own calls.

use serde_json::{Value, json};

use super::{Tool, ToolCtx, ToolOutput, arg};

/// Characters of text sent with one question.
const MAX_TEXT: usize = 200_000;

pub struct AskModel;

#[async_trait::async_trait]
impl Tool for AskModel {
    fn writes(&self) -> bool {
        false
    }

    fn name(&self) -> &str {
        "ask_model"
    }

    fn description(&self) -> &str {
        "Asks the language model a question about a piece of text (for example a part of a long document) and returns its answer."
    }

    fn parameters(&self) -> Value {
        json!({"type": "object", "properties": {"question": {"type": "string"}, "text": {"type": "string"}},
               "required": ["question", "text"], "additionalProperties": false})
    }

    async fn call(&self, ctx: &ToolCtx, args: Value) -> Result<ToolOutput, String> {
        let question = arg(&args, "question")?;
        let text: String = arg(&args, "text")?.chars().take(MAX_TEXT).collect();
        let Some(asker) = &ctx.asker else {
            return Err("the model cannot be asked here".into());
        };
        Ok(ToolOutput::text(asker.ask(question, &text).await?))
    }
}
