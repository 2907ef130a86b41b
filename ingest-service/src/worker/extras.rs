//! What the language model adds to a document when its job asks: a summary and suggested
//! questions, within the owner's cost caps.

use docchat_inference::{ChatMessage, OpenAiChat};
use docchat_proto::events::v1::LlmUsage;

use crate::costs::{Costs, Metered};
use crate::jobs::IngestParams;

/// What the language model adds to a document when asked.
#[derive(Default)]
pub(super) struct Extras {
    pub(super) summary: Option<String>,
    pub(super) questions: Option<Vec<String>>,
    /// Why a requested extra is missing (recorded on the job; the document still counts).
    pub(super) notes: Vec<String>,
}

const EXTRA_SOURCE_CHARS: usize = 6000;

/// Summary and questions of a document, as its job asked; the calls made go to `calls`.
pub(super) async fn extras(
    chat: Option<&Metered<OpenAiChat>>,
    costs: &Costs,
    owner: &str,
    params: &IngestParams,
    name: &str,
    pieces: &[docchat_parsers::Chunk],
    calls: &mut Vec<LlmUsage>,
) -> Extras {
    let mut out = Extras::default();
    if !params.gen_doc_summaries && !params.gen_doc_questions {
        return out;
    }
    let Some(chat) = chat else {
        out.notes
            .push("summaries and questions need a chat model, and none is configured".into());
        return out;
    };
    // One look at the owner's caps for both calls: the first one's cost reaches the
    // ledger only after this document is stored anyway.
    if let Err(refused) = costs.allow(owner).await {
        for (wanted, what) in [
            (params.gen_doc_summaries, "summary"),
            (params.gen_doc_questions, "questions"),
        ] {
            if wanted {
                out.notes
                    .push(format!("{what} not generated: {}", refused.message));
            }
        }
        return out;
    }
    let mut source = String::new();
    for p in pieces {
        if source.len() + p.text.len() > EXTRA_SOURCE_CHARS {
            break;
        }
        source.push_str(&p.text);
        source.push_str("\n\n");
    }
    if params.gen_doc_summaries {
        let messages = [
            ChatMessage::system("Summarize documents in one short paragraph of plain text."),
            ChatMessage::user(format!(
                "Document: {name}\n\n{source}\nSummarize this document."
            )),
        ];
        match chat.model.complete(&messages, 300, 0.0).await {
            Ok(c) => {
                calls.push(chat.usage(owner, "summary", c.prompt_tokens, c.completion_tokens));
                if c.text.is_empty() {
                    out.notes.push("the summary came back empty".into());
                } else {
                    out.summary = Some(c.text);
                }
            }
            Err(e) => out.notes.push(format!("summary not generated: {e}")),
        }
    }
    if params.gen_doc_questions {
        let messages = [
            ChatMessage::system(
                "You suggest questions a reader could ask about a document: three questions, one per line, nothing else.",
            ),
            ChatMessage::user(format!("Document: {name}\n\n{source}")),
        ];
        match chat.model.complete(&messages, 200, 0.0).await {
            Ok(c) => {
                calls.push(chat.usage(owner, "questions", c.prompt_tokens, c.completion_tokens));
                let questions: Vec<String> = c
                    .text
                    .lines()
                    .map(|l| {
                        l.trim()
                            .trim_start_matches(|ch: char| {
                                ch.is_ascii_digit() || matches!(ch, '.' | ')' | '-' | '*')
                            })
                            .trim()
                            .to_owned()
                    })
                    .filter(|l| !l.is_empty())
                    .take(10)
                    .collect();
                if questions.is_empty() {
                    out.notes
                        .push("the suggested questions came back empty".into());
                } else {
                    out.questions = Some(questions);
                }
            }
            Err(e) => out.notes.push(format!("questions not generated: {e}")),
        }
    }
    out
}
