//! ask_model's way to the run's model: checked and booked like the run's own calls.

use std::sync::{Arc, Mutex};

use docchat_common::Caller;
use docchat_inference::{ChatMessage, ChatModel, ModelEntry, Sampling};
use docchat_proto::agent::v1 as pb;

use crate::budget::{Budget, usage_of};
use crate::tools::Asker;

pub struct RunAsker {
    pub model: Arc<ChatModel>,
    pub entry: ModelEntry,
    pub budget: Arc<dyn Budget>,
    pub caller: Caller,
    pub question_id: String,
    pub calls: Arc<Mutex<Vec<pb::ModelCall>>>,
    pub max_tokens: Option<u32>,
}

#[async_trait::async_trait]
impl Asker for RunAsker {
    async fn ask(&self, question: &str, text: &str) -> Result<String, String> {
        self.budget
            .check(&self.caller)
            .await
            .map_err(|e| e.message)?;
        let messages = [
            ChatMessage::system("Answer the question about the text. Be precise and brief."),
            ChatMessage::user(format!("Text:\n{text}\n\nQuestion: {question}")),
        ];
        let sampling = Sampling {
            max_tokens: self.max_tokens,
            temperature: Some(0.0),
        };
        let done = self
            .model
            .complete_with(&messages, sampling)
            .await
            .map_err(|e| format!("the model failed: {e}"))?;
        let usage = usage_of(
            &self.caller,
            &self.entry,
            "agent.ask_model",
            &self.question_id,
            (done.prompt_tokens, done.completion_tokens),
        );
        record(&self.calls, &usage);
        self.budget.book(usage).await;
        Ok(done.text)
    }
}

/// Adds a booked call to the run's list (RunFinished.calls).
pub fn record(calls: &Mutex<Vec<pb::ModelCall>>, usage: &docchat_proto::events::v1::LlmUsage) {
    calls
        .lock()
        .unwrap_or_else(|p| p.into_inner())
        .push(pb::ModelCall {
            purpose: usage.purpose.clone(),
            prompt_tokens: usage.prompt_tokens,
            completion_tokens: usage.completion_tokens,
            cost: usage.cost,
        });
}
