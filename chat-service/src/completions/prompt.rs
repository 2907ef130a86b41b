//! The messages sent to the model: the system prompt, the excerpts (or the notes
//! summarized from them) and as much recent history as fits the model's context, then the
//! question.

use docchat_inference::ChatMessage;
use docchat_proto::ingest::v1::SearchHit;

use crate::entities::messages;

const SYSTEM_PROMPT: &str =
    "You are docchat, a helpful assistant. Answer accurately and concisely.";
pub(super) const RAG_INSTRUCTIONS: &str = "Answer the question using the numbered document excerpts below. Cite the excerpts you use by their number in brackets, like [1]. If the excerpts do not contain the answer, say so.";
const NOTES_INSTRUCTIONS: &str = "Answer the question using the notes below, summarized from the documents of this chat. If the notes do not contain the answer, say so.";

/// The messages of a model call and the excerpts they cite.
pub(super) struct Prompt {
    pub(super) messages: Vec<ChatMessage>,
    pub(super) hits: Vec<SearchHit>,
    /// How the excerpts were found (JSON; the reply's `retrieval_trace`), when the
    /// collection was searched.
    pub(super) trace: Option<String>,
    /// Nothing retrieved is close enough to the question: it is answered "not in the
    /// documents", the excerpts kept as the closest references.
    pub(super) not_in_documents: bool,
}

/// The answer to a RAG question nothing in the collection comes close to.
pub(super) const NOT_IN_DOCUMENTS: &str = "I could not find this in the documents of this collection: nothing in them comes close enough to the question. The closest passages are listed as references.";

pub(super) fn pages_of(hit: &SearchHit) -> String {
    if hit.pages.is_empty() {
        String::new()
    } else {
        format!(
            ", page {}",
            hit.pages
                .iter()
                .map(u32::to_string)
                .collect::<Vec<_>>()
                .join(", ")
        )
    }
}

pub(super) fn excerpts(hits: &[SearchHit]) -> String {
    excerpts_after(RAG_INSTRUCTIONS, hits)
}

/// The numbered excerpts after `instructions`.
pub(super) fn excerpts_after(instructions: &str, hits: &[SearchHit]) -> String {
    let mut out = String::from(instructions);
    for (i, hit) in hits.iter().enumerate() {
        out.push_str(&format!(
            "\n\n[{}] {}{}\n{}",
            i + 1,
            hit.document_name,
            pages_of(hit),
            hit.text.trim()
        ));
    }
    out
}

/// What a prompt tells the model from the documents: the excerpts after `instructions`, or
/// `notes` summarized from them (the excerpts stay the references).
pub(super) struct Retrieved<'a> {
    pub instructions: &'a str,
    pub hits: Vec<SearchHit>,
    pub notes: Option<&'a str>,
}

/// System prompt, excerpts and as much recent history as fits the model's context (about
/// four characters a token), then the question.
pub(super) fn build_prompt(
    question: &str,
    history: &[messages::Model],
    retrieved: Retrieved<'_>,
    context_length: u64,
    max_new_tokens: u32,
    reserved: usize,
) -> Prompt {
    let Retrieved {
        instructions,
        mut hits,
        notes,
    } = retrieved;
    let budget = context_budget(question, context_length, max_new_tokens, reserved);
    // Excerpts first (best first), then history from the most recent back. Notes were
    // already made to fit; the excerpts they summarize stay the references.
    let context = match notes {
        Some(notes) => format!("{NOTES_INSTRUCTIONS}\n\n{notes}"),
        None => {
            let mut context = excerpts_after(instructions, &hits);
            while !hits.is_empty() && context.len() > budget {
                hits.pop();
                context = excerpts_after(instructions, &hits);
            }
            context
        }
    };
    let has_context = notes.is_some() || !hits.is_empty();
    let mut left = if has_context {
        budget.saturating_sub(context.len())
    } else {
        budget
    };
    let mut kept: Vec<ChatMessage> = Vec::new();
    for m in history.iter().rev() {
        if m.content.is_empty() || m.content.len() > left {
            break;
        }
        left -= m.content.len();
        kept.push(if m.reply_to.is_some() {
            ChatMessage::assistant(m.content.clone())
        } else {
            ChatMessage::user(m.content.clone())
        });
    }
    kept.reverse();
    let mut messages = vec![ChatMessage::system(SYSTEM_PROMPT)];
    if has_context {
        messages.push(ChatMessage::system(context));
    }
    messages.extend(kept);
    messages.push(ChatMessage::user(question));
    Prompt {
        messages,
        hits,
        trace: None,
        not_in_documents: false,
    }
}

/// Adds `text` as a system message after the ones already there, before the conversation.
pub(super) fn add_system(messages: &mut Vec<ChatMessage>, text: &str) {
    let at = messages
        .iter()
        .position(|msg| msg.role != "system")
        .unwrap_or(messages.len());
    messages.insert(at, ChatMessage::system(text));
}

/// Characters of the prompt left for context and history (about four a token), once the
/// question, docchat's system prompt and `reserved` (what is added after: the request's
/// system prompt, a memory block) are counted.
pub(super) fn context_budget(
    question: &str,
    context_length: u64,
    max_new_tokens: u32,
    reserved: usize,
) -> usize {
    (context_length.saturating_sub(u64::from(max_new_tokens)) as usize)
        .saturating_mul(4)
        .saturating_sub(question.len() + SYSTEM_PROMPT.len() + reserved)
}

#[cfg(test)]
mod tests {
    use docchat_common::time::now;

    use super::*;

    fn hit(text: &str) -> SearchHit {
        SearchHit {
            document_name: "notes.md".into(),
            text: text.into(),
            pages: vec![2],
            ..Default::default()
        }
    }

    #[test]
    fn prompts_fit_the_context_and_keep_recent_history() {
        let old = |content: &str, reply: bool| messages::Model {
            id: String::new(),
            session_id: String::new(),
            owner_id: String::new(),
            username: String::new(),
            content: content.into(),
            reply_to: reply.then(|| "q".to_owned()),
            votes: 0,
            has_references: false,
            total_references: 0,
            error: None,
            created_at: now(),
            stream_marks: None,
        };
        let history = [old("first question", false), old("first answer", true)];
        let p = build_prompt(
            "why?",
            &history,
            Retrieved {
                instructions: RAG_INSTRUCTIONS,
                hits: vec![hit("Paris is the capital.")],
                notes: None,
            },
            8192,
            1536,
            0,
        );
        let roles: Vec<&str> = p.messages.iter().map(|m| m.role.as_str()).collect();
        assert_eq!(roles, ["system", "system", "user", "assistant", "user"]);
        assert!(
            p.messages[1]
                .content
                .contains("[1] notes.md, page 2\nParis")
        );
        // A tiny context drops excerpts and history before the question.
        let p = build_prompt(
            "why?",
            &history,
            Retrieved {
                instructions: RAG_INSTRUCTIONS,
                hits: vec![hit(&"x".repeat(5000))],
                notes: None,
            },
            1600,
            1536,
            0,
        );
        assert!(p.hits.is_empty());
        assert_eq!(p.messages.last().unwrap().content, "why?");
    }
}
