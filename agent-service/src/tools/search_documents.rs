//! search_documents: the session collection's hybrid search (ingest Search); the hits are
//! the run's references.

use docchat_proto::agent::v1 as pb;
use docchat_proto::ingest::v1::SearchRequest;
use serde_json::{Value, json};

use super::{Tool, ToolCtx, ToolOutput, arg, clip};

pub struct SearchDocuments;

#[async_trait::async_trait]
impl Tool for SearchDocuments {
    fn writes(&self) -> bool {
        false
    }

    fn name(&self) -> &str {
        "search_documents"
    }

    fn description(&self) -> &str {
        "Searches the documents of the chat session's collection and returns the most relevant passages with their document names and pages."
    }

    fn parameters(&self) -> Value {
        json!({"type": "object", "properties": {
                  "query": {"type": "string"},
                  "top_k": {"type": "integer", "minimum": 1, "maximum": 20}},
               "required": ["query"], "additionalProperties": false})
    }

    async fn call(&self, ctx: &ToolCtx, args: Value) -> Result<ToolOutput, String> {
        let query = arg(&args, "query")?;
        let top_k = args.get("top_k").and_then(Value::as_u64).unwrap_or(6) as u32;
        if ctx.collection_id.is_empty() {
            return Err("this chat session has no collection to search".into());
        }
        let Some(clients) = &ctx.deps.clients else {
            return Err("document search is unavailable".into());
        };
        let hits = clients
            .ingest(&ctx.caller)
            .search(SearchRequest {
                collection_ids: vec![ctx.collection_id.clone()],
                document_ids: vec![],
                query: query.chars().take(10_000).collect(),
                top_k,
                no_rerank: false,
            })
            .await
            .map_err(|s| format!("search failed: {}", s.message()))?
            .into_inner()
            .hits;
        if hits.is_empty() {
            return Ok(ToolOutput::text("no passage matched"));
        }
        let mut text = String::new();
        let mut references = Vec::new();
        for (i, h) in hits.into_iter().enumerate() {
            let pages = if h.pages.is_empty() {
                String::new()
            } else {
                format!(
                    ", pages {}",
                    h.pages
                        .iter()
                        .map(u32::to_string)
                        .collect::<Vec<_>>()
                        .join(", ")
                )
            };
            text.push_str(&format!(
                "[{}] {}{}\n{}\n\n",
                i + 1,
                h.document_name,
                pages,
                clip(&h.text, 4000)
            ));
            references.push(pb::Excerpt::from(h));
        }
        Ok(ToolOutput { text, references })
    }
}
