//! The first messages of a run: the agent type's instructions, the fast_agentic_rag
//! contexts, the custom tools' instructions, the caller's extra text, the conversation and the question.

use docchat_inference::ChatMessage;
use docchat_proto::agent::v1 as pb;

use super::agents::AgentType;

pub fn messages(
    agent: AgentType,
    rag: pb::RagKind,
    start: &pb::RunStart,
    has_collection: bool,
    documents_at: Option<&str>,
    tool_instructions: &[String],
) -> Vec<ChatMessage> {
    let mut system = agent.instructions().to_owned();
    system.push_str(
        "\n\nYour workspace is a folder of files for this chat session; paths are relative to it.",
    );
    match rag {
        pb::RagKind::Agentic if has_collection => system.push_str(
            "\nThe user's documents are searchable with the search_documents tool; search them before answering and cite the documents you used.",
        ),
        pb::RagKind::Rlm => system.push_str(
            "\nAnalyse the session's documents with Python and ask_model: read them in pieces, ask the model about each piece, then combine the findings.",
        ),
        _ => {}
    }
    if let Some(at) = documents_at {
        system.push_str(&format!(
            "\nThe collection's documents are readable (not writable) by your code at {at}: each original file, and its extracted text as <name>.txt with a `--- page N ---` line before every page."
        ));
    }
    for line in tool_instructions {
        system.push('\n');
        system.push_str(line);
    }
    if !start.contexts.is_empty() {
        system.push_str("\n\nPassages retrieved from the user's documents for this question:\n");
        for (i, c) in start.contexts.iter().enumerate() {
            system.push_str(&format!(
                "\n[{}] {} (pages {:?})\n{}\n",
                i + 1,
                c.document_name,
                c.pages,
                c.text
            ));
        }
    }
    if !start.system_prompt_extra.is_empty() {
        system.push_str("\n\n");
        system.push_str(&start.system_prompt_extra);
    }
    let mut out = vec![ChatMessage::system(system)];
    for h in &start.history {
        match h.role.as_str() {
            "assistant" => out.push(ChatMessage::assistant(h.content.clone())),
            _ => out.push(ChatMessage::user(h.content.clone())),
        }
    }
    out.push(ChatMessage::user(start.question.clone()));
    out
}
