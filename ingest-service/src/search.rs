//! Hybrid retrieval: vector similarity (in-process index or pgvector) and lexical search (SQLite FTS5 /
//! PostgreSQL full-text), fused as [`fusion`](crate::fusion) describes; then, when a
//! reranker is configured, fusion's best candidates (`DOCCHAT_RERANK_CANDIDATES`, 40) are
//! ordered by it ([`RerankStage`]). Every search says how it found its hits ([`Trace`]).

use std::collections::HashMap;
use std::sync::Arc;
use std::time::{Duration, Instant};

use docchat_common::Caller;
use docchat_common::error::{ApiError, ApiResult, ErrorCode};
use docchat_common::outbox::{self, OutboxRelay};
use docchat_inference::{Embedders, Reranker};
use docchat_proto::events::v1::LlmUsage;
use sea_orm::{
    ColumnTrait, Condition, ConnectionTrait, DatabaseConnection, DbBackend, EntityTrait,
    PaginatorTrait, QueryFilter, QueryOrder, QuerySelect, Statement,
};
use serde::Serialize;
use tracing::Instrument;

use crate::entities::{chunks, collections, documents};
use crate::fusion;
use crate::sql::placeholders;
use crate::vectors::VectorStore;

pub const DEFAULT_TOP_K: usize = 8;
pub const MAX_TOP_K: usize = 100;

#[derive(Debug, Clone)]
pub struct Hit {
    pub chunk: chunks::Model,
    pub document_name: String,
    pub score: f64,
}

/// The words of a query, safe to splice into FTS5 / tsquery syntax.
pub fn terms(query: &str) -> Vec<String> {
    let mut out: Vec<String> = Vec::new();
    for word in query.split(|c: char| !c.is_alphanumeric()) {
        let w = word.to_lowercase();
        if w.chars().count() >= 2 && !out.contains(&w) {
            out.push(w);
        }
        if out.len() == 32 {
            break;
        }
    }
    out
}

/// Chunks matching the query's words, best first, with their score (higher is better: BM25
/// on SQLite, `ts_rank` on PostgreSQL).
pub async fn lexical(
    db: &DatabaseConnection,
    collection_ids: &[String],
    document_ids: &[String],
    query: &str,
    limit: usize,
) -> ApiResult<Vec<(i64, f64)>> {
    let words = terms(query);
    if words.is_empty() || collection_ids.is_empty() {
        return Ok(Vec::new());
    }
    let backend = db.get_database_backend();
    let mut values: Vec<sea_orm::Value> = Vec::new();
    let sql = match backend {
        DbBackend::Postgres => {
            values.push(words.join(" | ").into());
            let cols = placeholders(backend, 2, collection_ids.len());
            values.extend(collection_ids.iter().map(|c| c.clone().into()));
            let mut sql = format!(
                "SELECT id, ts_rank(tsv, to_tsquery('english', $1))::float8 FROM chunks WHERE tsv @@ to_tsquery('english', $1) AND collection_id IN ({cols})"
            );
            if !document_ids.is_empty() {
                let docs = placeholders(backend, 2 + collection_ids.len(), document_ids.len());
                values.extend(document_ids.iter().map(|d| d.clone().into()));
                sql.push_str(&format!(" AND document_id IN ({docs})"));
            }
            sql.push_str(&format!(
                " ORDER BY ts_rank(tsv, to_tsquery('english', $1)) DESC, id LIMIT {limit}"
            ));
            sql
        }
        _ => {
            let fts: Vec<String> = words.iter().map(|w| format!("\"{w}\"")).collect();
            values.push(fts.join(" OR ").into());
            values.extend(collection_ids.iter().map(|c| c.clone().into()));
            let mut sql = format!(
                "SELECT c.id, -bm25(chunks_fts) FROM chunks_fts JOIN chunks c ON c.id = chunks_fts.rowid \
                 WHERE chunks_fts MATCH ? AND c.collection_id IN ({})",
                placeholders(backend, 0, collection_ids.len())
            );
            if !document_ids.is_empty() {
                values.extend(document_ids.iter().map(|d| d.clone().into()));
                sql.push_str(&format!(
                    " AND c.document_id IN ({})",
                    placeholders(backend, 0, document_ids.len())
                ));
            }
            sql.push_str(&format!(" ORDER BY bm25(chunks_fts), c.id LIMIT {limit}"));
            sql
        }
    };
    let rows = db
        .query_all(Statement::from_sql_and_values(backend, sql, values))
        .await?;
    rows.iter()
        .map(|r| Ok((r.try_get_by_index::<i64>(0)?, r.try_get_by_index::<f64>(1)?)))
        .collect()
}

/// Retrieval's optional second stage (issue 38): fusion's best candidates read together
/// with the query by a cross-encoder upstream ([`Reranker`]), whose scores order the hits.
pub struct RerankStage {
    pub reranker: Reranker,
    /// Fusion's best candidates the reranker reads (`DOCCHAT_RERANK_CANDIDATES`).
    pub candidates: usize,
    /// The reranker's time for one search (`DOCCHAT_RERANK_TIMEOUT_MS`); past it, or when
    /// it fails, fusion's order stands and the trace says why.
    pub budget: Duration,
}

#[derive(Clone)]
pub struct Searcher {
    pub db: DatabaseConnection,
    pub vectors: VectorStore,
    pub embedders: Arc<Embedders>,
    /// `None` without a reranker configured.
    pub rerank: Option<Arc<RerankStage>>,
    /// Told when a reranker call was booked.
    pub relay: Option<OutboxRelay>,
}

/// What a search found and how.
pub struct Searched {
    pub hits: Vec<Hit>,
    pub trace: Trace,
    /// The reranker's call, booked for the caller.
    pub rerank_usage: Option<LlmUsage>,
    /// The highest dense similarity of any candidate to the query.
    pub top_similarity: Option<f64>,
}

/// How one search found its hits (the `trace_json` of SearchResponse; chat-service keeps it
/// in a reply's `retrieval_trace`).
#[derive(Debug, Clone, Default, Serialize)]
pub struct Trace {
    pub query: String,
    /// Fusion's candidates (at most [`TRACE_CANDIDATES`]), in the order they were returned
    /// or, past the hits, fusion's.
    pub candidates: Vec<Candidate>,
    pub reranker: RerankTrace,
    /// Milliseconds of each stage.
    pub timings_ms: Timings,
}

/// One candidate chunk and where each stage put it (ranks from 1).
#[derive(Debug, Clone, Default, Serialize)]
pub struct Candidate {
    pub chunk_id: i64,
    pub document_id: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub lexical: Option<Placed>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub dense: Option<Placed>,
    /// Reciprocal-rank fusion, its chunks ordered within each document.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub fused: Option<Placed>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub reranked: Option<Placed>,
    /// Its rank among the hits returned, if it is one.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub returned: Option<usize>,
}

#[derive(Debug, Clone, Copy, Serialize)]
pub struct Placed {
    pub score: f64,
    pub rank: usize,
}

/// What became of the reranker.
#[derive(Debug, Clone, Default, Serialize)]
pub struct RerankTrace {
    /// `used`, `failed` (fusion's order stands), `off` (the request opted out) or
    /// `none` (no reranker configured).
    pub status: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub model: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub reason: Option<String>,
    pub candidates: usize,
}

#[derive(Debug, Clone, Default, Serialize)]
pub struct Timings {
    pub embed: f64,
    pub dense: f64,
    pub lexical: f64,
    pub fusion: f64,
    pub rerank: f64,
    pub total: f64,
}

/// Candidates a trace lists at most.
pub const TRACE_CANDIDATES: usize = 60;

fn ms(since: Instant) -> f64 {
    (since.elapsed().as_secs_f64() * 1e6).round() / 1e3
}

fn placed(ranking: &[(i64, f64)]) -> HashMap<i64, Placed> {
    ranking
        .iter()
        .enumerate()
        .map(|(i, &(id, score))| (id, Placed { score, rank: i + 1 }))
        .collect()
}

impl Searcher {
    /// The hits for `query` (see the module documentation), with how they were found;
    /// `rerank` false leaves out the reranker.
    pub async fn search(
        &self,
        caller: &Caller,
        collection_ids: &[String],
        document_ids: &[String],
        query: &str,
        top_k: usize,
        rerank: bool,
    ) -> ApiResult<Searched> {
        let began = Instant::now();
        let query = query.trim();
        if query.is_empty() {
            return Err(ApiError::bad_request("the search query must not be empty"));
        }
        if query.chars().count() > 10_000 {
            return Err(ApiError::bad_request(
                "the search query is longer than 10000 characters",
            ));
        }
        if collection_ids.is_empty() {
            return Err(ApiError::bad_request(
                "search needs at least one collection",
            ));
        }
        let top_k = if top_k == 0 {
            DEFAULT_TOP_K
        } else {
            top_k.min(MAX_TOP_K)
        };
        let stage = self.rerank.as_ref().filter(|_| rerank);
        // Fusion's best candidates: the hits, or what the reranker reads.
        let pool = stage.map_or(top_k, |r| r.candidates.max(top_k));
        let candidates = (pool * 4).max(50);
        let mut trace = Trace {
            query: query.to_owned(),
            ..Trace::default()
        };

        let visible = collections::Entity::find()
            .filter(collections::Column::Id.is_in(collection_ids.iter().cloned()))
            .filter(crate::collections::visible_to(caller))
            .all(&self.db)
            .await?;
        for id in collection_ids {
            if !visible.iter().any(|c| &c.id == id) {
                return Err(ApiError::not_found(format!("collection {id} not found")));
            }
        }

        // Vector side: one query embedding per embedder, nearest chunks per collection.
        let mut by_model: HashMap<&str, Vec<&collections::Model>> = HashMap::new();
        for c in &visible {
            by_model
                .entry(c.embedding_model.as_str())
                .or_default()
                .push(c);
        }
        let docs_filter = (!document_ids.is_empty()).then_some(document_ids);
        let mut vector_hits: Vec<(i64, f32)> = Vec::new();
        for (model, cols) in by_model {
            let ids: Vec<String> = cols.iter().map(|c| c.id.clone()).collect();
            let embedder = self.embedders.get(model).ok_or_else(|| {
                ApiError::new(
                    ErrorCode::Unavailable,
                    format!("embedding model {model} is not available"),
                )
            })?;
            let at = Instant::now();
            let query_vec = embedder
                .embed(&[query.to_owned()])
                .instrument(tracing::info_span!("retrieval.embed", model = %model))
                .await
                .map_err(|e| ApiError::internal("embedding the query", e))?
                .pop()
                .ok_or_else(|| {
                    ApiError::internal("embedding the query", "the embedder returned no vector")
                })?;
            trace.timings_ms.embed += ms(at);
            let at = Instant::now();
            vector_hits.extend(
                self.vectors
                    .nearest(&self.db, &ids, &query_vec, candidates, docs_filter)
                    .instrument(tracing::info_span!("retrieval.dense", candidates))
                    .await?,
            );
            trace.timings_ms.dense += ms(at);
        }
        vector_hits.sort_by(|a, b| b.1.total_cmp(&a.1).then(a.0.cmp(&b.0)));
        vector_hits.truncate(candidates);
        let at = Instant::now();
        let lexical_hits = lexical(&self.db, collection_ids, document_ids, query, candidates)
            .instrument(tracing::info_span!("retrieval.lexical", candidates))
            .await?;
        trace.timings_ms.lexical = ms(at);
        let at = Instant::now();
        let dense_hits: Vec<(i64, f64)> = vector_hits
            .iter()
            .map(|&(id, s)| (id, f64::from(s)))
            .collect();
        let ranked = fusion::rrf(&[
            dense_hits.iter().map(|h| h.0).collect(),
            lexical_hits.iter().map(|h| h.0).collect(),
        ]);
        let document_of: HashMap<i64, String> = chunks::Entity::find()
            .select_only()
            .column(chunks::Column::Id)
            .column(chunks::Column::DocumentId)
            .filter(chunks::Column::Id.is_in(ranked.iter().map(|r| r.0)))
            .into_tuple::<(i64, String)>()
            .all(&self.db)
            .await?
            .into_iter()
            .collect();
        let fused = fusion::order_within_documents(
            &ranked,
            pool,
            &fusion::blend(&dense_hits, &lexical_hits),
            &document_of,
        );
        let rows: HashMap<i64, chunks::Model> = chunks::Entity::find()
            .filter(chunks::Column::Id.is_in(fused.iter().map(|f| f.0)))
            .all(&self.db)
            .await?
            .into_iter()
            .map(|c| (c.id, c))
            .collect();
        let doc_ids: Vec<String> = rows.values().map(|c| c.document_id.clone()).collect();
        let names: HashMap<String, String> = documents::Entity::find()
            .filter(documents::Column::Id.is_in(doc_ids))
            .all(&self.db)
            .await?
            .into_iter()
            .map(|d| (d.id, d.name))
            .collect();
        trace.timings_ms.fusion = ms(at);

        // The reranker orders fusion's pool; without it, or when it fails, fusion's order.
        let mut reranked: Option<Vec<(i64, f64)>> = None;
        let mut rerank_usage = None;
        trace.reranker.status = match (&self.rerank, stage) {
            (None, _) => "none".to_owned(),
            (Some(_), None) => "off".to_owned(),
            (Some(_), Some(_)) => String::new(),
        };
        if let Some(stage) = stage
            && !fused.is_empty()
        {
            let at = Instant::now();
            let texts: Vec<String> = fused
                .iter()
                .map(|(id, _)| {
                    rows.get(id).map_or_else(String::new, |c| {
                        let name = names.get(&c.document_id).map_or("", String::as_str);
                        format!("{name}\n{}", c.text)
                    })
                })
                .collect();
            trace.reranker.model = Some(stage.reranker.name().to_owned());
            trace.reranker.candidates = texts.len();
            let reranking = stage.reranker.rerank(query, &texts, stage.budget).instrument(
                tracing::info_span!("retrieval.rerank", model = %stage.reranker.name(), candidates = texts.len()),
            );
            match reranking.await {
                Ok(done) => {
                    trace.reranker.status = "used".to_owned();
                    reranked = Some(
                        done.scores
                            .iter()
                            .map(|&(i, score)| (fused[i].0, score))
                            .collect(),
                    );
                    rerank_usage = Some(self.book(caller, stage, done.tokens, done.cost).await);
                }
                Err(e) => {
                    tracing::warn!(error = %e, "the reranker failed; fusion's order stands");
                    trace.reranker.status = "failed".to_owned();
                    trace.reranker.reason = Some(e.to_string());
                }
            }
            trace.timings_ms.rerank = ms(at);
        }
        // The reranker's order when it answered, else fusion's.
        let order = reranked.as_deref().unwrap_or(&fused);
        let hits: Vec<Hit> = order
            .iter()
            .take(top_k)
            .filter_map(|&(id, score)| {
                let chunk = rows.get(&id)?.clone();
                Some(Hit {
                    document_name: names.get(&chunk.document_id).cloned().unwrap_or_default(),
                    chunk,
                    score,
                })
            })
            .collect();

        // The trace: the hits first, then fusion's other candidates.
        let (dense_at, lexical_at, fused_at) =
            (placed(&dense_hits), placed(&lexical_hits), placed(&fused));
        let reranked_at = reranked.as_deref().map(placed).unwrap_or_default();
        let mut listed: Vec<i64> = hits.iter().map(|h| h.chunk.id).collect();
        for (id, _) in order.iter().chain(&ranked) {
            if listed.len() >= TRACE_CANDIDATES {
                break;
            }
            if !listed.contains(id) {
                listed.push(*id);
            }
        }
        trace.candidates = listed
            .into_iter()
            .map(|id| Candidate {
                chunk_id: id,
                document_id: document_of.get(&id).cloned().unwrap_or_default(),
                lexical: lexical_at.get(&id).copied(),
                dense: dense_at.get(&id).copied(),
                fused: fused_at.get(&id).copied(),
                reranked: reranked_at.get(&id).copied(),
                returned: hits.iter().position(|h| h.chunk.id == id).map(|i| i + 1),
            })
            .collect();
        trace.timings_ms.total = ms(began);
        let t = &trace.timings_ms;
        crate::metrics::searched(&[
            ("embed", t.embed),
            ("dense", t.dense),
            ("lexical", t.lexical),
            ("fusion", t.fusion),
            ("rerank", t.rerank),
            ("total", t.total),
        ]);
        Ok(Searched {
            top_similarity: dense_hits.first().map(|h| h.1),
            hits,
            trace,
            rerank_usage,
        })
    }

    /// Books a reranker call for `caller` (its `usage.llm` event through the outbox); a
    /// failure to book is logged, not the search's.
    async fn book(&self, caller: &Caller, stage: &RerankStage, tokens: u64, cost: f64) -> LlmUsage {
        let usage = LlmUsage {
            user_id: caller.user_id.clone(),
            model: stage.reranker.name().to_owned(),
            prompt_tokens: tokens,
            completion_tokens: 0,
            cost,
            purpose: "rerank".to_owned(),
            message_id: String::new(),
            calls: 1,
        };
        match outbox::enqueue_all(
            &self.db,
            &crate::costs::events(std::slice::from_ref(&usage)),
        )
        .await
        {
            Ok(()) => {
                if let Some(relay) = &self.relay {
                    relay.notify();
                }
            }
            Err(e) => tracing::warn!(error = %e, "a reranker call was not booked"),
        }
        usage
    }
}

/// Most chunks one [`Searcher::chunks_in_order`] call returns.
pub const MAX_CHUNKS_PAGE: u64 = 2000;

impl Searcher {
    /// Chunks of one collection in document order (oldest document first, then position):
    /// every chunk, paged, or when `around` names chunks, those with `neighbours` chunks
    /// either side in the same document. Says whether more follow (whole-collection paging).
    pub async fn chunks_in_order(
        &self,
        caller: &Caller,
        collection_id: &str,
        around: &[i64],
        neighbours: u32,
        offset: u64,
        limit: u64,
    ) -> ApiResult<(Vec<Hit>, bool)> {
        let visible = collections::Entity::find_by_id(collection_id.to_owned())
            .filter(crate::collections::visible_to(caller))
            .one(&self.db)
            .await?;
        if visible.is_none() {
            return Err(ApiError::not_found(format!(
                "collection {collection_id} not found"
            )));
        }
        let limit = if limit == 0 {
            MAX_CHUNKS_PAGE
        } else {
            limit.min(MAX_CHUNKS_PAGE)
        };
        // Around given chunks: those chunks' documents, within `neighbours` positions.
        let mut near = None;
        if !around.is_empty() {
            let targets = chunks::Entity::find()
                .filter(chunks::Column::CollectionId.eq(collection_id))
                .filter(chunks::Column::Id.is_in(around.iter().copied().take(200)))
                .all(&self.db)
                .await?;
            if targets.is_empty() {
                return Ok((Vec::new(), false));
            }
            let n = i32::try_from(neighbours.min(20)).unwrap_or(0);
            let mut any = Condition::any();
            for t in &targets {
                any = any.add(
                    Condition::all()
                        .add(chunks::Column::DocumentId.eq(t.document_id.clone()))
                        .add(
                            chunks::Column::ChunkIndex
                                .between(t.chunk_index - n, t.chunk_index + n),
                        ),
                );
            }
            near = Some(any);
        }
        let docs: Vec<documents::Model> = documents::Entity::find()
            .filter(documents::Column::CollectionId.eq(collection_id))
            .order_by_asc(documents::Column::CreatedAt)
            .order_by_asc(documents::Column::Id)
            .all(&self.db)
            .await?;
        let position: HashMap<&str, usize> = docs
            .iter()
            .enumerate()
            .map(|(i, d)| (d.id.as_str(), i))
            .collect();
        // Chunks in document order: the documents' order is known, so page through their
        // chunks one document at a time without loading the rest.
        let mut rows: Vec<chunks::Model> = Vec::new();
        let mut more = false;
        if let Some(near) = near {
            rows = chunks::Entity::find()
                .filter(chunks::Column::CollectionId.eq(collection_id))
                .filter(near)
                .all(&self.db)
                .await?;
            rows.sort_by_key(|c| {
                (
                    position
                        .get(c.document_id.as_str())
                        .copied()
                        .unwrap_or(usize::MAX),
                    c.chunk_index,
                )
            });
            rows.truncate(usize::try_from(limit).unwrap_or(usize::MAX));
        } else {
            let mut skip = offset;
            for d in &docs {
                if rows.len() as u64 >= limit {
                    more = true;
                    break;
                }
                let count = chunks::Entity::find()
                    .filter(chunks::Column::DocumentId.eq(d.id.clone()))
                    .filter(chunks::Column::CollectionId.eq(collection_id))
                    .count(&self.db)
                    .await?;
                if skip >= count {
                    skip -= count;
                    continue;
                }
                let want = limit - rows.len() as u64;
                let page = chunks::Entity::find()
                    .filter(chunks::Column::DocumentId.eq(d.id.clone()))
                    .filter(chunks::Column::CollectionId.eq(collection_id))
                    .order_by_asc(chunks::Column::ChunkIndex)
                    .offset(skip)
                    .limit(want)
                    .all(&self.db)
                    .await?;
                if count - skip > want {
                    more = true;
                }
                skip = 0;
                rows.extend(page);
                if more {
                    break;
                }
            }
        }
        let names: HashMap<&str, &str> = docs
            .iter()
            .map(|d| (d.id.as_str(), d.name.as_str()))
            .collect();
        Ok((
            rows.into_iter()
                .map(|mut chunk| {
                    chunk.embedding = Vec::new();
                    Hit {
                        document_name: names
                            .get(chunk.document_id.as_str())
                            .map(|n| (*n).to_owned())
                            .unwrap_or_default(),
                        chunk,
                        score: 0.0,
                    }
                })
                .collect(),
            more,
        ))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn terms_are_sanitized() {
        assert_eq!(
            terms("What's \"DROP TABLE\"; x OR y*"),
            ["what", "drop", "table", "or"]
        );
        assert!(terms("a ; '").is_empty());
    }
}
