//! The tools docchat offers an MCP client: what they take (JSON schemas an assistant can act
//! on), what they answer, and the calls behind them — the same gRPC calls, on behalf of the
//! same caller, as the REST routes that do the same thing.
//!
//! Every answer is a JSON object, sent as `structuredContent` and, serialized, as the text
//! content (for clients that read text only). A failure the caller can act on (an unknown
//! collection, a model refusing) is a tool result with `isError`; arguments that do not
//! match the schema are a JSON-RPC `invalid params` error.

use std::sync::Arc;

use docchat_common::error::{ApiError, ErrorCode};
use docchat_proto::chat::v1 as chat;
use docchat_proto::chat::v1::completion_event::Event;
use docchat_proto::common::v1::PageRequest;
use docchat_proto::ingest::v1 as ingest;
use futures::StreamExt;
use rmcp::model::{JsonObject, Tool, ToolAnnotations};
use serde::Deserialize;
use serde::de::DeserializeOwned;
use serde_json::{Value, json};

use crate::auth::Api;

/// The most characters of document text one `get_document` call returns.
pub const DOCUMENT_SLICE_CHARS: u32 = 20_000;
/// The most page numbers one `get_document` call may name (ingest-service's bound too).
const MAX_PAGES: usize = 1000;
/// The default and the most hits `search` returns.
const DEFAULT_TOP_K: u32 = 8;
const MAX_TOP_K: u32 = 50;
/// The default and the most rows of a list.
const DEFAULT_LIMIT: u64 = 100;
const MAX_LIMIT: u64 = 1000;
/// Progress notifications of `ask` are sent at most this often.
const PROGRESS_EVERY: std::time::Duration = std::time::Duration::from_millis(250);

/// A tool's failure: the caller's mistake in its arguments (a JSON-RPC error) or what the
/// tool met while running (a tool result with `isError`).
#[derive(Debug)]
pub enum Failure {
    Arguments(String),
    Tool(String),
}

impl From<tonic::Status> for Failure {
    fn from(status: tonic::Status) -> Failure {
        Failure::from(ApiError::from_status(&status))
    }
}

impl From<ApiError> for Failure {
    fn from(e: ApiError) -> Failure {
        // The services' internal detail stays in their logs, as on REST.
        if e.code == ErrorCode::Internal {
            return Failure::Tool("docchat failed to answer; try again".to_owned());
        }
        Failure::Tool(e.message)
    }
}

pub type Outcome = Result<Value, Failure>;

/// Where `ask` reports how far its answer got.
pub trait Progress: Send {
    /// `characters` of the answer are generated (more than at the last report).
    fn report(&mut self, characters: usize) -> impl Future<Output = ()> + Send;
}

/// The tools offered: the read tools always, `upload_text` when the operator enabled
/// write tools.
pub fn list(write_tools: bool) -> Vec<Tool> {
    let read_only = ToolAnnotations::new()
        .read_only(true)
        .destructive(false)
        .idempotent(true)
        .open_world(false);
    let mut tools = vec![
        tool(
            "list_collections",
            "List the caller's docchat collections (their own and those shared with them): id, \
             name, description and number of documents. Use an id with search, ask and \
             list_documents.",
            json!({
                "type": "object",
                "properties": {
                    "offset": {"type": "integer", "minimum": 0, "description": "Collections to skip."},
                    "limit": {"type": "integer", "minimum": 1, "maximum": MAX_LIMIT, "description": "Most collections to return (default 100)."}
                },
                "additionalProperties": false
            }),
            read_only.clone(),
        ),
        tool(
            "search",
            "Search the caller's documents and return the best matching passages, best first: \
             each with its document name and id, collection id, page numbers, score and text. \
             The same hybrid retrieval (and reranker, when configured) docchat's RAG answers \
             use. Give collection_id to search one collection, else all of the caller's.",
            json!({
                "type": "object",
                "properties": {
                    "query": {"type": "string", "minLength": 1, "description": "What to look for, in natural language or keywords."},
                    "collection_id": {"type": "string", "description": "Search only this collection (from list_collections)."},
                    "top_k": {"type": "integer", "minimum": 1, "maximum": MAX_TOP_K, "description": "Passages to return (default 8)."}
                },
                "required": ["query"],
                "additionalProperties": false
            }),
            read_only.clone(),
        ),
        tool(
            "ask",
            "Ask docchat a question and get its answer with references (documents and pages). \
             With collection_id the answer is grounded in that collection's documents \
             (retrieval-augmented); without, the model answers alone. Runs as a chat in the \
             caller's docchat account (kept in their chat history) under their limits and \
             cost caps; sends progress notifications while it generates.",
            json!({
                "type": "object",
                "properties": {
                    "question": {"type": "string", "minLength": 1, "description": "The question."},
                    "collection_id": {"type": "string", "description": "Answer from this collection's documents."},
                    "llm": {"type": "string", "description": "A model name from docchat's models (default: chosen by docchat)."}
                },
                "required": ["question"],
                "additionalProperties": false
            }),
            ToolAnnotations::new()
                .read_only(false)
                .destructive(false)
                .idempotent(false)
                .open_world(false),
        ),
        tool(
            "get_document",
            "Read a document's text by page. Give pages to read only those; a long text comes \
             in parts: when next_cursor is set, call again with cursor=next_cursor for the \
             rest.",
            json!({
                "type": "object",
                "properties": {
                    "document_id": {"type": "string", "minLength": 1, "description": "The document (from search or list_documents)."},
                    "pages": {"type": "array", "items": {"type": "integer", "minimum": 1}, "maxItems": 1000, "description": "Only these page numbers."},
                    "cursor": {"type": "string", "description": "next_cursor of the previous call, to continue."}
                },
                "required": ["document_id"],
                "additionalProperties": false
            }),
            read_only.clone(),
        ),
        tool(
            "list_documents",
            "List the documents of a collection: id, name, page count, size and status.",
            json!({
                "type": "object",
                "properties": {
                    "collection_id": {"type": "string", "minLength": 1, "description": "The collection (from list_collections)."},
                    "offset": {"type": "integer", "minimum": 0, "description": "Documents to skip."},
                    "limit": {"type": "integer", "minimum": 1, "maximum": MAX_LIMIT, "description": "Most documents to return (default 100)."}
                },
                "required": ["collection_id"],
                "additionalProperties": false
            }),
            read_only,
        ),
    ];
    if write_tools {
        tools.push(tool(
            "upload_text",
            "Add a text document to one of the caller's collections and index it, so that \
             search and ask find it. Answers once it is searchable (or with the ingestion \
             job's id when that takes long).",
            json!({
                "type": "object",
                "properties": {
                    "collection_id": {"type": "string", "minLength": 1, "description": "The collection to add to."},
                    "name": {"type": "string", "minLength": 1, "maxLength": 200, "description": "The document's file name, such as notes.md (.txt when it has no extension)."},
                    "text": {"type": "string", "minLength": 1, "description": "The document's text (plain text or Markdown)."}
                },
                "required": ["collection_id", "name", "text"],
                "additionalProperties": false
            }),
            ToolAnnotations::new()
                .read_only(false)
                .destructive(true)
                .idempotent(false)
                .open_world(false),
        ));
    }
    tools
}

fn tool(
    name: &'static str,
    description: &'static str,
    schema: Value,
    hints: ToolAnnotations,
) -> Tool {
    let schema: JsonObject = match schema {
        Value::Object(map) => map,
        _ => JsonObject::new(),
    };
    Tool::new(name, description, Arc::new(schema)).with_annotations(hints)
}

/// The arguments of a call, read into `T`; a mismatch is the caller's mistake.
fn arguments<T: DeserializeOwned>(args: Option<JsonObject>) -> Result<T, Failure> {
    serde_json::from_value(Value::Object(args.unwrap_or_default()))
        .map_err(|e| Failure::Arguments(format!("invalid arguments: {e}")))
}

/// Runs tool `name` for `api`'s caller.
pub async fn call(
    api: &Api,
    name: &str,
    args: Option<JsonObject>,
    write_tools: bool,
    progress: impl Progress,
) -> Outcome {
    match name {
        "list_collections" => list_collections(api, arguments(args)?).await,
        "search" => search(api, arguments(args)?).await,
        "ask" => ask(api, arguments(args)?, progress).await,
        "get_document" => get_document(api, arguments(args)?).await,
        "list_documents" => list_documents(api, arguments(args)?).await,
        "upload_text" if write_tools => upload_text(api, arguments(args)?).await,
        other => Err(Failure::Arguments(format!("unknown tool: {other}"))),
    }
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct Page {
    offset: Option<u64>,
    limit: Option<u64>,
}

/// A list's offset and limit: REST's bounds (what storage can bind), then the tool's.
fn page_of(offset: Option<u64>, limit: Option<u64>) -> Result<(u64, u64), Failure> {
    let (offset, _) =
        crate::routes::page(offset, None).map_err(|e| Failure::Arguments(e.0.message))?;
    let limit = limit.unwrap_or(DEFAULT_LIMIT);
    if limit == 0 || limit > MAX_LIMIT {
        return Err(Failure::Arguments(format!(
            "limit must be between 1 and {MAX_LIMIT}"
        )));
    }
    Ok((offset, limit))
}

async fn list_collections(api: &Api, args: Page) -> Outcome {
    let (offset, limit) = page_of(args.offset, args.limit)?;
    let list = api
        .ingest()
        .list_collections(PageRequest {
            offset,
            limit,
            sort_column: String::new(),
            ascending: false,
        })
        .await?
        .into_inner();
    let collections: Vec<Value> = list
        .collections
        .into_iter()
        .map(|c| {
            json!({
                "id": c.id,
                "name": c.name,
                "description": c.description,
                "document_count": c.document_count,
            })
        })
        .collect();
    Ok(json!({ "collections": collections }))
}

/// Every collection the caller can read (for a search across all of them).
async fn all_collection_ids(api: &Api) -> Result<Vec<String>, Failure> {
    let mut ids = Vec::new();
    loop {
        let list = api
            .ingest()
            .list_collections(PageRequest {
                offset: ids.len() as u64,
                limit: MAX_LIMIT,
                sort_column: String::new(),
                ascending: false,
            })
            .await?
            .into_inner();
        let got = list.collections.len();
        ids.extend(list.collections.into_iter().map(|c| c.id));
        if got == 0 || (!list.size_limited && got < MAX_LIMIT as usize) {
            return Ok(ids);
        }
    }
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct SearchArgs {
    query: String,
    collection_id: Option<String>,
    top_k: Option<u32>,
}

async fn search(api: &Api, args: SearchArgs) -> Outcome {
    if args.query.trim().is_empty() {
        return Err(Failure::Arguments("query must not be empty".to_owned()));
    }
    let top_k = args.top_k.unwrap_or(DEFAULT_TOP_K);
    if top_k == 0 || top_k > MAX_TOP_K {
        return Err(Failure::Arguments(format!(
            "top_k must be between 1 and {MAX_TOP_K}"
        )));
    }
    let collection_ids = match args.collection_id {
        Some(id) => vec![id],
        None => all_collection_ids(api).await?,
    };
    if collection_ids.is_empty() {
        return Ok(json!({ "results": [] }));
    }
    let found = api
        .ingest()
        .search(ingest::SearchRequest {
            collection_ids,
            document_ids: Vec::new(),
            query: args.query,
            top_k,
            no_rerank: false,
        })
        .await?
        .into_inner();
    let results: Vec<Value> = found
        .hits
        .into_iter()
        .map(|h| {
            json!({
                "document_id": h.document_id,
                "document_name": h.document_name,
                "collection_id": h.collection_id,
                "pages": h.pages,
                "score": h.score,
                "text": h.text,
            })
        })
        .collect();
    Ok(json!({ "results": results }))
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct AskArgs {
    question: String,
    collection_id: Option<String>,
    llm: Option<String>,
}

async fn ask(api: &Api, args: AskArgs, mut progress: impl Progress) -> Outcome {
    if args.question.trim().is_empty() {
        return Err(Failure::Arguments("question must not be empty".to_owned()));
    }
    let _slot = api.state().mcp.admit(&api.caller().user_id)?;
    let session = api
        .chat()
        .create_session(chat::CreateSessionRequest {
            collection_id: args.collection_id.clone(),
        })
        .await?
        .into_inner();
    let rag_type = if args.collection_id.is_some() {
        "rag"
    } else {
        "llm_only"
    };
    let mut events = api
        .chat()
        .complete(chat::CompletionRequest {
            session_id: session.id.clone(),
            message: args.question,
            llm: args.llm.unwrap_or_default(),
            rag_type: rag_type.to_owned(),
            ..Default::default()
        })
        .await?
        .into_inner();
    let mut answer = String::new();
    // Progress only ever increases (the protocol's rule): characters of the answer so far.
    let mut reported_at = std::time::Instant::now();
    let mut reported = 0usize;
    let done = loop {
        let Some(item) = events.next().await else {
            return Err(Failure::Tool(
                "the answer ended before it was finished; try again".to_owned(),
            ));
        };
        match item?.event {
            Some(Event::Delta(text)) => {
                answer.push_str(&text);
                let characters = answer.chars().count();
                if reported_at.elapsed() >= PROGRESS_EVERY && characters > reported {
                    reported_at = std::time::Instant::now();
                    reported = characters;
                    progress.report(characters).await;
                }
            }
            Some(Event::Done(done)) => break done,
            Some(Event::Error(e)) => return Err(Failure::Tool(e.message)),
            Some(Event::QuestionId(_)) | None => {}
        }
    };
    let characters = done.body.chars().count();
    if characters > reported {
        progress.report(characters).await;
    }
    let references = api
        .chat()
        .list_references(chat::MessageRef {
            id: done.message_id.clone(),
        })
        .await?
        .into_inner()
        .references
        .into_iter()
        .map(|r| {
            json!({
                "document_id": r.document_id,
                "document_name": r.document_name,
                "collection_id": r.collection_id,
                "pages": r.pages,
                "score": r.score,
            })
        })
        .collect::<Vec<_>>();
    Ok(json!({
        "answer": done.body,
        "references": references,
        "chat_session_id": session.id,
        "message_id": done.message_id,
    }))
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct GetDocumentArgs {
    document_id: String,
    #[serde(default)]
    pages: Vec<u32>,
    cursor: Option<String>,
}

/// A continuation: `page:char`.
fn parse_cursor(cursor: &str) -> Option<(u32, u64)> {
    let (page, at) = cursor.split_once(':')?;
    Some((page.parse().ok()?, at.parse().ok()?))
}

async fn get_document(api: &Api, args: GetDocumentArgs) -> Outcome {
    if args.pages.contains(&0) {
        return Err(Failure::Arguments("pages are numbered from 1".to_owned()));
    }
    if args.pages.len() > MAX_PAGES {
        return Err(Failure::Arguments(format!(
            "at most {MAX_PAGES} pages at a time"
        )));
    }
    let (from_page, from_char) = match args.cursor.as_deref() {
        Some(c) => {
            parse_cursor(c).ok_or_else(|| Failure::Arguments(format!("invalid cursor {c:?}")))?
        }
        None => (0, 0),
    };
    let text = read_text(api, &args.document_id, args.pages, from_page, from_char).await?;
    let document = text.document.unwrap_or_default();
    let pages: Vec<Value> = text
        .pages
        .into_iter()
        .map(|p| json!({"page": p.page, "text": p.text}))
        .collect();
    Ok(json!({
        "document_id": document.id,
        "name": document.name,
        "collection_id": document.collection_id,
        "page_count": document.page_count,
        "pages": pages,
        "next_cursor": text.next_page.map(|p| format!("{p}:{}", text.next_char)),
    }))
}

/// One slice of a document's text (ingest's ReadDocumentText).
pub async fn read_text(
    api: &Api,
    id: &str,
    pages: Vec<u32>,
    from_page: u32,
    from_char: u64,
) -> Result<ingest::DocumentText, Failure> {
    Ok(api
        .ingest()
        .read_document_text(ingest::DocumentTextRequest {
            id: id.to_owned(),
            pages,
            from_page,
            from_char,
            max_chars: DOCUMENT_SLICE_CHARS,
        })
        .await?
        .into_inner())
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct ListDocumentsArgs {
    collection_id: String,
    offset: Option<u64>,
    limit: Option<u64>,
}

async fn list_documents(api: &Api, args: ListDocumentsArgs) -> Outcome {
    let (offset, limit) = page_of(args.offset, args.limit)?;
    // An unknown collection (or another user's) is ingest's "not found", not an empty list.
    let list = api
        .ingest()
        .list_documents(ingest::ListDocumentsRequest {
            offset,
            limit,
            collection_id: Some(args.collection_id),
            ..Default::default()
        })
        .await?
        .into_inner();
    let documents: Vec<Value> = list.documents.into_iter().map(document_json).collect();
    Ok(json!({ "documents": documents }))
}

fn document_json(d: ingest::Document) -> Value {
    json!({
        "id": d.id,
        "name": d.name,
        "page_count": d.page_count,
        "size": d.size,
        "status": d.status,
    })
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct UploadTextArgs {
    collection_id: String,
    name: String,
    text: String,
}

/// How long `upload_text` waits for its ingestion before answering with the job.
const INGEST_WAIT: std::time::Duration = std::time::Duration::from_secs(120);

async fn upload_text(api: &Api, args: UploadTextArgs) -> Outcome {
    let name = args.name.trim();
    if name.is_empty() || name.contains(['/', '\\']) {
        return Err(Failure::Arguments(
            "name must be a file name without a path".to_owned(),
        ));
    }
    let name = if name.contains('.') {
        name.to_owned()
    } else {
        format!("{name}.txt")
    };
    let _slot = api.state().mcp.admit(&api.caller().user_id)?;
    api.ingest()
        .get_collection(ingest::CollectionRef {
            id: args.collection_id.clone(),
        })
        .await?;
    if args.text.len() > api.state().config.max_body_bytes {
        return Err(Failure::Arguments(format!(
            "text must be at most {} bytes",
            api.state().config.max_body_bytes
        )));
    }
    let parts = [
        ingest::upload_chunk::Part::Meta(ingest::UploadMeta {
            filename: name.clone(),
        }),
        ingest::upload_chunk::Part::Data(args.text.into_bytes()),
    ]
    .map(|part| ingest::UploadChunk { part: Some(part) });
    let upload = api
        .ingest()
        .upload(futures::stream::iter(parts))
        .await?
        .into_inner();
    let job = api
        .ingest()
        .ingest_upload(ingest::IngestUploadRequest {
            collection_id: args.collection_id,
            upload_id: upload.id,
            // The collection's settings say whether to write a summary and questions.
            ..Default::default()
        })
        .await?
        .into_inner();
    let started = std::time::Instant::now();
    let mut job = job;
    while !matches!(job.status.as_str(), "completed" | "failed" | "canceled")
        && started.elapsed() < INGEST_WAIT
    {
        tokio::time::sleep(std::time::Duration::from_millis(200)).await;
        job = api
            .ingest()
            .get_job(ingest::JobRef { id: job.id.clone() })
            .await?
            .into_inner();
    }
    if job.status == "failed" {
        return Err(Failure::Tool(format!(
            "ingesting {name} failed: {}",
            job.errors.join("; ")
        )));
    }
    Ok(json!({
        "job_id": job.id,
        "status": job.status,
        "document_id": job.document_id,
    }))
}
