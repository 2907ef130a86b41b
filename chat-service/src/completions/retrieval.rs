//! What an answer reads from the session's collection: search hits (for HyDE, searched
//! with a drafted answer), hits with their neighbouring chunks, or every chunk; what does
//! not fit the model's context is summarized recursively for the question.

use docchat_common::error::ApiResult;
use docchat_inference::ChatMessage;
use docchat_proto::ingest::v1::{
    DocumentsForTagsRequest, ListChunksRequest, ListDocumentsRequest, SearchHit, SearchRequest,
    SearchResponse,
};
use futures::StreamExt;

use super::prompt::{
    Prompt, RAG_INSTRUCTIONS, Retrieved, build_prompt, context_budget, excerpts, pages_of,
};
use super::request::RagMode;
use super::scope::{MAX_SCOPE_DOCUMENTS, SCOPE_PAGE};
use super::store::UsageLog;
use super::{Completer, Job};
use crate::gate::model_error;

/// Excerpts retrieved for an answer.
const TOP_K: u32 = 8;
/// Chunks either side of each retrieved one in rag+ answers.
const NEIGHBOURS: u32 = 1;
/// Most chunks an all_data answer reads.
const MAX_ALL_DATA_CHUNKS: u32 = 2000;
const SUMMARY_PROMPT: &str = "Summarize the document excerpts below, keeping every fact, number and name that could help answer the question. Say which document each fact comes from. Write only the summary.";
/// Tokens of one summary in the recursive summarization.
const SUMMARY_TOKENS: u32 = 512;
const MAX_SUMMARY_ROUNDS: usize = 4;
/// Summary calls in flight at once.
const SUMMARY_CONCURRENCY: usize = 4;
const CONDENSE_PROMPT: &str = "Rewrite the user's last question as one standalone search query for the documents: replace what it refers to in the conversation (it, that, the same, its default...) by what it means, keep the user's own words otherwise, and add nothing else. Write only the query.";
/// Tokens of a condensed query at most.
const CONDENSE_TOKENS: u32 = 96;
/// The longest a condensing call may take; past it the question is searched as asked.
const CONDENSE_TIMEOUT: std::time::Duration = std::time::Duration::from_secs(20);
/// Earlier messages a condensing call reads (the most recent), each cut to this many bytes.
const CONDENSE_HISTORY: usize = 6;
const CONDENSE_MESSAGE_BYTES: usize = 600;
const HYDE_PROMPT: &str = "Write a short passage that answers the question, as a document on the subject would. It is used to search documents, so be specific.";

/// The job's memory block, its content cut to half of what the context leaves (a block of
/// unlimited length must not push the question out of the model's context).
fn memory_within(job: &Job, question: &str) -> Option<super::memory::Memory> {
    let room = context_budget(question, job.context_length, job.max_new_tokens, 0) / 2;
    job.memory.as_ref().map(|m| m.within(room))
}

/// What the prompt gains after the context is fitted: the request's system prompt and the
/// memory block, counted against the context's budget.
fn reserved(job: &Job, memory: Option<&super::memory::Memory>) -> usize {
    job.system_prompt.as_ref().map_or(0, String::len)
        + memory.map_or(0, super::memory::Memory::injected_len)
}

impl Completer {
    /// The messages sent to the model, with the excerpts they cite.
    pub(super) async fn prompt(&self, job: &Job, usage: &mut UsageLog) -> ApiResult<Prompt> {
        let question = job.question.content.as_str();
        let memory = memory_within(job, question);
        let reserved = reserved(job, memory.as_ref());
        let mut traced = Traced::default();
        // A follow-up is searched as the standalone question it stands for.
        let searched_for = match job.mode {
            RagMode::Rag | RagMode::Hyde1 | RagMode::Hyde2 | RagMode::RagPlus => {
                self.standalone(job, question, usage, &mut traced).await
            }
            RagMode::LlmOnly | RagMode::AllData | RagMode::Agent(_) => question.to_owned(),
        };
        let question_asked = question;
        let question = searched_for.as_str();
        let (hits, notes) = match job.mode {
            // The agent builds its own prompt (see super::agent); nothing to retrieve here.
            RagMode::LlmOnly | RagMode::Agent(_) => (Vec::new(), None),
            RagMode::Rag => (
                self.traced_search(job, question, "question", usage, &mut traced)
                    .await?,
                None,
            ),
            RagMode::Hyde1 | RagMode::Hyde2 => {
                let draft = self.draft(job, question, &[], usage).await?;
                let query = format!("{question}\n{draft}");
                let mut hits = self
                    .traced_search(job, &query, "hyde", usage, &mut traced)
                    .await?;
                if job.mode == RagMode::Hyde2 {
                    let draft = self.draft(job, question, &hits, usage).await?;
                    let query = format!("{question}\n{draft}");
                    hits = self
                        .traced_search(job, &query, "hyde2", usage, &mut traced)
                        .await?;
                }
                (hits, None)
            }
            RagMode::RagPlus => {
                let found = self
                    .traced_search(job, question, "question", usage, &mut traced)
                    .await?;
                let ids: Vec<i64> = found.iter().map(|h| h.chunk_id).collect();
                let mut chunks = self.chunks(job, ids, NEIGHBOURS).await?;
                for c in &mut chunks {
                    c.score = found
                        .iter()
                        .find(|h| h.chunk_id == c.chunk_id)
                        .map_or(0.0, |h| h.score);
                }
                self.fit(job, question, chunks, reserved, usage).await?
            }
            RagMode::AllData => {
                let chunks = self.chunks(job, Vec::new(), 0).await?;
                self.fit(job, question, chunks, reserved, usage).await?
            }
        };
        let asked = match &job.prompt_query {
            Some(before) => format!("{before}{question_asked}"),
            None => question_asked.to_owned(),
        };
        let retrieved = Retrieved {
            instructions: job.pre_prompt_query.as_deref().unwrap_or(RAG_INSTRUCTIONS),
            hits,
            notes: notes.as_deref(),
        };
        let mut prompt = build_prompt(
            &asked,
            &job.history,
            retrieved,
            job.context_length,
            job.max_new_tokens,
            reserved,
        );
        if let Some(instructions) = &job.system_prompt {
            super::prompt::add_system(&mut prompt.messages, instructions);
        }
        if let Some(memory) = &memory {
            super::memory::inject(&mut prompt.messages, memory);
        }
        // The collection does not come close to the question (the last search decides: its
        // hits are the excerpts): said rather than left to the model to invent.
        if self.min_similarity > 0.0
            && !traced.searches.is_empty()
            && traced
                .top_similarity
                .is_none_or(|s| s < self.min_similarity)
        {
            prompt.not_in_documents = true;
            traced.not_in_documents = Some(serde_json::json!({
                "top_similarity": traced.top_similarity,
                "threshold": self.min_similarity,
            }));
        }
        prompt.trace = traced.finish(job, &prompt.hits);
        Ok(prompt)
    }

    /// [`search`](Self::search), its trace kept in `traced` and its reranker call (booked by
    /// ingest-service) counted in the reply's usage.
    async fn traced_search(
        &self,
        job: &Job,
        query: &str,
        purpose: &'static str,
        usage: &mut UsageLog,
        traced: &mut Traced,
    ) -> ApiResult<Vec<SearchHit>> {
        let started = std::time::Instant::now();
        let found = self.searched(job, query).await?;
        if let Some(r) = &found.rerank {
            usage.add_booked("rerank", r.tokens, r.cost);
        }
        traced.top_similarity = found.top_similarity;
        let search: serde_json::Value =
            serde_json::from_str(&found.trace_json).unwrap_or(serde_json::Value::Null);
        traced.searches.push(serde_json::json!({
            "purpose": purpose,
            "milliseconds": started.elapsed().as_secs_f64() * 1000.0,
            "search": search,
        }));
        Ok(found.hits)
    }

    /// Chunks of the session's collection in document order: around `ids` (with
    /// `neighbours` either side), or all of them when `ids` is empty.
    async fn chunks(&self, job: &Job, ids: Vec<i64>, neighbours: u32) -> ApiResult<Vec<SearchHit>> {
        let Some(collection_id) = job.session.collection_id.clone() else {
            return Ok(Vec::new());
        };
        if ids.is_empty() && neighbours > 0 {
            return Ok(Vec::new());
        }
        let list = self
            .clients
            .ingest(&job.caller)
            .list_chunks(ListChunksRequest {
                collection_id,
                around: ids,
                neighbours,
                offset: 0,
                limit: MAX_ALL_DATA_CHUNKS,
            })
            .await?
            .into_inner();
        if list.more {
            tracing::warn!(question = %job.question.id, "the collection has more than {MAX_ALL_DATA_CHUNKS} chunks; the answer reads the first ones");
        }
        let mut chunks = list.chunks;
        if let Some(ids) = self.scope(job).await? {
            chunks.retain(|c| ids.contains(&c.document_id));
        }
        Ok(chunks)
    }

    /// The chunks as they are when they fit the prompt; otherwise summarized recursively
    /// (groups that fit one model call, each summarized for the question, then the
    /// summaries grouped again) into notes that fit. The chunks stay the references.
    async fn fit(
        &self,
        job: &Job,
        question: &str,
        chunks: Vec<SearchHit>,
        reserved: usize,
        usage: &mut UsageLog,
    ) -> ApiResult<(Vec<SearchHit>, Option<String>)> {
        let budget = context_budget(question, job.context_length, job.max_new_tokens, reserved) / 2;
        if excerpts(&chunks).len() <= budget {
            return Ok((chunks, None));
        }
        // One summary call reads at most this many characters.
        let per_call =
            (context_budget(question, job.context_length, SUMMARY_TOKENS, 0) / 2).max(500);
        let mut pieces: Vec<String> = chunks.iter().map(excerpt_text).collect();
        for _round in 0..MAX_SUMMARY_ROUNDS {
            let total: usize = pieces.iter().map(|p| p.len() + 2).sum();
            if total <= budget {
                break;
            }
            let groups = group(&pieces, per_call);
            let calls = futures::stream::iter(groups.into_iter().map(|text| {
                let messages = vec![
                    ChatMessage::system(format!("{SUMMARY_PROMPT}\n\nQuestion: {question}")),
                    ChatMessage::user(text),
                ];
                let model = job.model.clone();
                async move { model.complete(&messages, SUMMARY_TOKENS, 0.0).await }
            }))
            .buffered(SUMMARY_CONCURRENCY)
            .collect::<Vec<_>>()
            .await;
            let mut next = Vec::with_capacity(calls.len());
            for done in calls {
                let done = done.map_err(model_error)?;
                usage.add(job, "summary", done.prompt_tokens, done.completion_tokens);
                next.push(done.text.trim().to_owned());
            }
            if next.iter().map(String::len).sum::<usize>() >= total {
                // Summaries no shorter than their input: stop rather than loop.
                pieces = next;
                break;
            }
            pieces = next;
        }
        let mut notes = pieces.join("\n\n");
        if notes.len() > budget {
            let cut = (0..=budget)
                .rev()
                .find(|i| notes.is_char_boundary(*i))
                .unwrap_or(0);
            notes.truncate(cut);
        }
        Ok((chunks, Some(notes)))
    }

    /// The question to search for: as asked in a session without earlier questions (or
    /// with include_chat_history off, which leaves the history empty); otherwise rewritten
    /// by the chat model into a standalone query with the conversation in mind (bounded in
    /// tokens and time, booked as `condense`). A call that fails or takes too long leaves
    /// the question as asked; the trace says what was searched and why.
    async fn standalone(
        &self,
        job: &Job,
        question: &str,
        usage: &mut UsageLog,
        traced: &mut Traced,
    ) -> String {
        if !job.history.iter().any(|m| m.reply_to.is_none()) {
            return question.to_owned();
        }
        let start = job.history.len().saturating_sub(CONDENSE_HISTORY);
        let mut conversation = String::new();
        for m in &job.history[start..] {
            let who = if m.reply_to.is_some() {
                "Assistant"
            } else {
                "User"
            };
            let end = (0..=m.content.len().min(CONDENSE_MESSAGE_BYTES))
                .rev()
                .find(|i| m.content.is_char_boundary(*i))
                .unwrap_or(0);
            conversation.push_str(&format!("{who}: {}\n", m.content[..end].trim()));
        }
        let messages = vec![
            ChatMessage::system(CONDENSE_PROMPT),
            ChatMessage::user(format!(
                "Conversation:\n{conversation}\nLast question: {question}"
            )),
        ];
        let started = std::time::Instant::now();
        let call = job.model.complete(&messages, CONDENSE_TOKENS, 0.0);
        let outcome = match tokio::time::timeout(CONDENSE_TIMEOUT, call).await {
            Ok(Ok(done)) => {
                usage.add(job, "condense", done.prompt_tokens, done.completion_tokens);
                let query = done.text.trim().trim_matches('"').trim().to_owned();
                if query.is_empty() {
                    Err("the model wrote no query".to_owned())
                } else {
                    Ok(query)
                }
            }
            Ok(Err(e)) => Err(format!("the model failed: {e}")),
            Err(_) => Err(format!("no query within {} s", CONDENSE_TIMEOUT.as_secs())),
        };
        let milliseconds = started.elapsed().as_secs_f64() * 1000.0;
        match outcome {
            Ok(query) => {
                traced.condensed = Some(serde_json::json!({
                    "question": question,
                    "query": query,
                    "milliseconds": milliseconds,
                }));
                query
            }
            Err(why) => {
                tracing::warn!(question = %job.question.id, reason = %why, "the follow-up was searched as asked");
                traced.condensed = Some(serde_json::json!({
                    "question": question,
                    "query": question,
                    "failed": why,
                    "milliseconds": milliseconds,
                }));
                question.to_owned()
            }
        }
    }

    /// A HyDE draft: what an answer might say, to search with.
    async fn draft(
        &self,
        job: &Job,
        question: &str,
        hits: &[SearchHit],
        usage: &mut UsageLog,
    ) -> ApiResult<String> {
        let mut messages = vec![ChatMessage::system(HYDE_PROMPT)];
        if !hits.is_empty() {
            messages.push(ChatMessage::system(excerpts(hits)));
        }
        messages.push(ChatMessage::user(question));
        let done = job
            .model
            .complete(&messages, 256.min(job.max_new_tokens), 0.0)
            .await
            .map_err(model_error)?;
        usage.add(job, "hyde", done.prompt_tokens, done.completion_tokens);
        Ok(done.text)
    }

    /// The session collection's best excerpts for `query`.
    pub(super) async fn search(&self, job: &Job, query: &str) -> ApiResult<Vec<SearchHit>> {
        Ok(self.searched(job, query).await?.hits)
    }

    /// The documents this completion may read (None: every one of the collection's).
    async fn scope<'j>(&self, job: &'j Job) -> ApiResult<Option<&'j [String]>> {
        if job.scope.is_all() {
            return Ok(None);
        }
        let ids = job
            .scope
            .resolved
            .get_or_try_init(|| self.resolve_scope(job))
            .await?;
        Ok(Some(ids.as_slice()))
    }

    /// The document ids a scope stands for, within the session's collection.
    async fn resolve_scope(&self, job: &Job) -> ApiResult<Vec<String>> {
        let scope = &job.scope;
        if !scope.documents.is_empty() {
            return Ok(scope.documents.clone());
        }
        let Some(collection_id) = job.session.collection_id.clone() else {
            return Ok(Vec::new());
        };
        let mut ingest = self.clients.ingest(&job.caller);
        let tagged = |names: Vec<String>| DocumentsForTagsRequest {
            tag_names: names,
            collection_id: Some(collection_id.clone()),
        };
        let mut ids: Vec<String> = if scope.include.is_empty() {
            let mut all = Vec::new();
            let mut offset = 0;
            while offset < MAX_SCOPE_DOCUMENTS {
                let page = ingest
                    .list_documents(ListDocumentsRequest {
                        offset,
                        limit: SCOPE_PAGE,
                        collection_id: Some(collection_id.clone()),
                        ..ListDocumentsRequest::default()
                    })
                    .await?
                    .into_inner()
                    .documents;
                let read = page.len() as u64;
                all.extend(page.into_iter().map(|d| d.id));
                if read < SCOPE_PAGE {
                    break;
                }
                offset += read;
            }
            all
        } else {
            ingest
                .list_documents_for_tags(tagged(scope.include.clone()))
                .await?
                .into_inner()
                .documents
                .into_iter()
                .map(|d| d.id)
                .collect()
        };
        if !scope.exclude.is_empty() {
            let excluded: std::collections::HashSet<String> = ingest
                .list_documents_for_tags(tagged(scope.exclude.clone()))
                .await?
                .into_inner()
                .documents
                .into_iter()
                .map(|d| d.id)
                .collect();
            ids.retain(|id| !excluded.contains(id));
        }
        Ok(ids)
    }

    /// ingest-service's answer to a search of the session's collection for `query`.
    async fn searched(&self, job: &Job, query: &str) -> ApiResult<SearchResponse> {
        let Some(collection_id) = job.session.collection_id.clone() else {
            return Ok(SearchResponse::default());
        };
        let document_ids = match self.scope(job).await? {
            None => Vec::new(),
            // The tags choose no document: nothing to find.
            Some([]) => return Ok(SearchResponse::default()),
            Some(ids) => ids.to_vec(),
        };
        Ok(self
            .clients
            .ingest(&job.caller)
            .search(SearchRequest {
                collection_ids: vec![collection_id],
                document_ids,
                query: query.chars().take(10_000).collect(),
                top_k: TOP_K,
                no_rerank: !job.rerank,
            })
            .await?
            .into_inner())
    }
}

/// What a reply's searches did, for its `retrieval_trace`.
#[derive(Default)]
struct Traced {
    /// A follow-up's standalone query: the question, the query searched, and how long
    /// writing it took (or why it failed).
    condensed: Option<serde_json::Value>,
    /// Each search: why it was made, how long it took, and ingest-service's trace.
    searches: Vec<serde_json::Value>,
    /// The last search's highest dense similarity.
    top_similarity: Option<f64>,
    /// Set when the answer is "not in the documents": the similarity and the threshold.
    not_in_documents: Option<serde_json::Value>,
}

impl Traced {
    /// The trace as stored with the reply (none when nothing was searched): the searches,
    /// then the excerpts the prompt kept (those that fit the model's context).
    fn finish(self, job: &Job, kept: &[SearchHit]) -> Option<String> {
        if self.searches.is_empty() {
            return None;
        }
        let kept: Vec<serde_json::Value> = kept
            .iter()
            .enumerate()
            .map(|(i, h)| {
                serde_json::json!({
                    "rank": i + 1,
                    "chunk_id": h.chunk_id,
                    "document_id": h.document_id,
                    "document_name": h.document_name,
                    "pages": h.pages,
                    "score": h.score,
                })
            })
            .collect();
        Some(
            serde_json::json!({
                "rag_type": job.mode.name(),
                "reranker_requested": job.rerank,
                "condensed": self.condensed,
                "top_similarity": self.top_similarity,
                "not_in_documents": self.not_in_documents,
                "searches": self.searches,
                "kept": kept,
            })
            .to_string(),
        )
    }
}

/// A chunk as summarization reads it: where it comes from, then its text.
fn excerpt_text(hit: &SearchHit) -> String {
    format!(
        "{}{}\n{}",
        hit.document_name,
        pages_of(hit),
        hit.text.trim()
    )
}

/// Consecutive pieces joined into groups of at most `limit` characters (a longer piece is
/// a group of its own, cut to the limit).
fn group(pieces: &[String], limit: usize) -> Vec<String> {
    let mut groups: Vec<String> = Vec::new();
    let mut current = String::new();
    for piece in pieces {
        if !current.is_empty() && current.len() + piece.len() + 2 > limit {
            groups.push(std::mem::take(&mut current));
        }
        if !current.is_empty() {
            current.push_str("\n\n");
        }
        let end = (0..=piece.len().min(limit))
            .rev()
            .find(|i| piece.is_char_boundary(*i))
            .unwrap_or(0);
        current.push_str(&piece[..end]);
    }
    if !current.is_empty() {
        groups.push(current);
    }
    groups
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pieces_group_within_the_limit_in_order() {
        let pieces: Vec<String> = ["aaaa", "bbbb", "cccc", "dddddddddddd"]
            .iter()
            .map(|s| (*s).to_owned())
            .collect();
        let groups = group(&pieces, 10);
        assert_eq!(groups, ["aaaa\n\nbbbb", "cccc", "dddddddddd"]);
        assert!(group(&[], 10).is_empty());
    }
}
