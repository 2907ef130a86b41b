//! The memory block of a completion: the one named in llm_args (`memory_block_id` /
//! `memory_block_name`), else the caller's default for the scope (`llm` for plain and RAG
//! answers, `agent` for agent runs), injected as its injection_mode says, so `prompt_raw`
//! shows it. In agent runs system_prompt goes into the run's system prompt
//! (`RunStart.system_prompt_extra`), user_instruction ahead of the question, and agent_file
//! and agent_tool reach agent-service as `RunStart.memory` (a file of the workspace saved
//! back after the run, or the `memory` tool; agent-service saves through
//! MemoryBlockService as the caller). Plain completions ignore the two agent modes.

use docchat_common::Caller;
use docchat_common::error::{ApiError, ApiResult};
use docchat_inference::ChatMessage;
use docchat_proto::agent::v1 as apb;
use sea_orm::DatabaseConnection;

use crate::entities::memory_blocks;
use crate::memory_blocks::{self as store, Access};

/// What a completion injects.
#[derive(Debug, Clone)]
pub(super) struct Memory {
    pub(super) id: String,
    pub(super) name: String,
    pub(super) content: String,
    pub(super) amendment: String,
    pub(super) injection_mode: String,
    /// The caller may change the block: edit access, and an access_mode other than `read`.
    pub(super) editable: bool,
    pub(super) max_content_length: i64,
}

impl Memory {
    /// The characters the block adds to a prompt (plain and RAG answers inject the
    /// system_prompt and user_instruction modes).
    pub(super) fn injected_len(&self) -> usize {
        match self.injection_mode.as_str() {
            "system_prompt" | "user_instruction" => text(self).len(),
            _ => 0,
        }
    }

    /// The block with its content cut so that it adds at most `max_chars` to a prompt (on
    /// a character boundary, with a note that it was cut); unchanged when it fits.
    pub(super) fn within(&self, max_chars: usize) -> Memory {
        let over = self.injected_len().saturating_sub(max_chars);
        if over == 0 {
            return self.clone();
        }
        const CUT: &str = "\n[… cut to fit the model's context]";
        let keep = self.content.len().saturating_sub(over + CUT.len());
        let at = (0..=keep)
            .rev()
            .find(|i| self.content.is_char_boundary(*i))
            .unwrap_or(0);
        tracing::warn!(block = %self.name, kept = at, of = self.content.len(), "a memory block longer than the model's context allows was cut");
        Memory {
            content: format!("{}{CUT}", &self.content[..at]),
            ..self.clone()
        }
    }

    fn new(b: memory_blocks::Model, access: Access) -> Self {
        Memory {
            editable: access >= Access::Edit && b.access_mode != "read",
            id: b.id,
            name: b.name,
            content: b.content,
            amendment: b.system_prompt_amendment,
            injection_mode: b.injection_mode,
            max_content_length: b.max_content_length,
        }
    }
}

/// The block asked for (404 if the caller cannot read it), else the caller's default for
/// `scope` (`llm` or `agent`).
pub(super) async fn resolve(
    db: &DatabaseConnection,
    caller: &Caller,
    id: Option<&str>,
    name: Option<&str>,
    scope: &str,
) -> ApiResult<Option<Memory>> {
    let id = if let Some(id) = id.filter(|s| !s.is_empty()) {
        if uuid::Uuid::parse_str(id).is_err() {
            return Err(ApiError::bad_request(format!(
                "llm_args.memory_block_id {id} is not a UUID"
            )));
        }
        id.to_owned()
    } else if let Some(name) = name.filter(|s| !s.is_empty()) {
        store::find_by_name(db, caller, name).await?.id
    } else {
        match store::default_block(db, caller, scope).await? {
            Some(v) => v.block.id,
            None => return Ok(None),
        }
    };
    let (block, access) = store::find(db, caller, &id).await?;
    Ok(Some(Memory::new(block, access)))
}

/// The memory text with its amendment (how to use it), as one block of instructions.
fn text(m: &Memory) -> String {
    let mut out = format!("Memory \"{}\":\n{}", m.name, m.content.trim());
    if !m.amendment.trim().is_empty() {
        out.push_str(&format!("\n\n{}", m.amendment.trim()));
    }
    out
}

/// Adds the memory to `messages` (system prompt first, the question last).
pub(super) fn inject(messages: &mut Vec<ChatMessage>, m: &Memory) {
    match m.injection_mode.as_str() {
        "system_prompt" => super::prompt::add_system(messages, &text(m)),
        "user_instruction" => {
            if let Some(question) = messages.last_mut().filter(|msg| msg.role == "user") {
                question.content = format!(
                    "Instructions:\n{}\n\nMessage:\n{}",
                    text(m),
                    question.content
                );
            }
        }
        _ => {}
    }
}

/// An agent run's share of the memory: text for its system prompt, and the question with
/// the memory's instructions ahead of it.
pub(super) fn for_agent(m: Option<&Memory>, question: &str) -> (String, String) {
    match m.map(|m| (m, m.injection_mode.as_str())) {
        Some((m, "system_prompt")) => (text(m), question.to_owned()),
        Some((m, "user_instruction")) => (
            String::new(),
            format!("Instructions:\n{}\n\nMessage:\n{question}", text(m)),
        ),
        _ => (String::new(), question.to_owned()),
    }
}

/// What agent-service gets of an agent_file or agent_tool block (none for the other modes).
pub(super) fn run_memory(m: Option<&Memory>) -> Option<apb::RunMemory> {
    let m = m.filter(|m| matches!(m.injection_mode.as_str(), "agent_file" | "agent_tool"))?;
    Some(apb::RunMemory {
        id: m.id.clone(),
        name: m.name.clone(),
        content: m.content.clone(),
        injection_mode: m.injection_mode.clone(),
        editable: m.editable,
        max_content_length: m.max_content_length,
        amendment: m.amendment.clone(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn memory(mode: &str) -> Memory {
        Memory {
            id: "b1".into(),
            editable: true,
            max_content_length: 0,
            name: "prefs".into(),
            content: "likes tea".into(),
            amendment: "use it kindly".into(),
            injection_mode: mode.into(),
        }
    }

    fn prompt() -> Vec<ChatMessage> {
        vec![ChatMessage::system("sys"), ChatMessage::user("hi")]
    }

    #[test]
    fn system_prompt_mode_adds_a_system_message_before_the_conversation() {
        let mut m = prompt();
        inject(&mut m, &memory("system_prompt"));
        assert_eq!(m.len(), 3);
        assert_eq!(m[1].role, "system");
        assert!(m[1].content.contains("likes tea") && m[1].content.contains("use it kindly"));
        assert_eq!(m[2].content, "hi");
    }

    #[test]
    fn a_block_longer_than_the_room_is_cut_to_it() {
        let long = Memory {
            content: "é".repeat(5000),
            ..memory("system_prompt")
        };
        assert_eq!(memory("system_prompt").within(10_000).content, "likes tea");
        let cut = long.within(2000);
        assert!(cut.injected_len() <= 2000, "{}", cut.injected_len());
        assert!(cut.injected_len() > 1500, "{}", cut.injected_len());
        assert!(cut.content.ends_with("cut to fit the model's context]"));
        // The agent modes add nothing to the prompt.
        assert_eq!(memory("agent_file").injected_len(), 0);
    }

    #[test]
    fn agent_runs_get_the_system_prompt_or_the_instructions() {
        let m = memory("system_prompt");
        let (extra, q) = for_agent(Some(&m), "hi");
        assert!(extra.contains("likes tea") && q == "hi");
        let m = memory("user_instruction");
        let (extra, q) = for_agent(Some(&m), "hi");
        assert!(extra.is_empty() && q.contains("likes tea") && q.ends_with("hi"));
        assert_eq!(
            for_agent(Some(&memory("agent_tool")), "hi"),
            (String::new(), "hi".into())
        );
    }

    #[test]
    fn only_the_agent_modes_reach_the_run_as_its_memory() {
        for mode in ["system_prompt", "user_instruction"] {
            assert!(run_memory(Some(&memory(mode))).is_none());
        }
        for mode in ["agent_file", "agent_tool"] {
            let m = run_memory(Some(&memory(mode))).unwrap();
            assert_eq!((m.id.as_str(), m.injection_mode.as_str()), ("b1", mode));
            assert!(m.editable && m.content == "likes tea");
        }
    }

    #[test]
    fn user_instruction_mode_goes_ahead_of_the_question() {
        let mut m = prompt();
        inject(&mut m, &memory("user_instruction"));
        assert_eq!(m.len(), 2);
        assert!(
            m[1].content
                .starts_with("Instructions:\nMemory \"prefs\":\nlikes tea")
        );
        assert!(m[1].content.ends_with("Message:\nhi"));
    }

    #[test]
    fn agent_modes_add_nothing_to_a_plain_completion() {
        for mode in ["agent_file", "agent_tool"] {
            let mut m = prompt();
            inject(&mut m, &memory(mode));
            assert_eq!(m.len(), 2);
            assert_eq!(m[1].content, "hi");
        }
    }
}
