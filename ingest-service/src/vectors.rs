//! Where chunk vectors are searched: the in-process index (standalone, and PostgreSQL
//! without pgvector), or pgvector with HNSW indexes (distributed deployments).
//!
//! The chunk row's `embedding` bytes stay the source of truth in both modes; pgvector keeps
//! a copy in `chunk_vectors` (one row per chunk, deleted with it by a foreign key cascade),
//! written in the same transaction as the chunks. Collections may use embedders of different
//! sizes, so the column is an undimensioned `vector` with one partial HNSW index per
//! dimension, over `embedding::vector(<dim>)` where `dim = <dim>`, as pgvector's
//! documentation recommends; a dimension's index is created the first time one is written.

use std::collections::HashSet;
use std::fmt::Write as _;
use std::sync::{Arc, Mutex};

use docchat_common::config::Config;
use docchat_common::error::{ApiError, ApiResult};
use sea_orm::{ConnectionTrait, DatabaseConnection, DbBackend, Statement, Value};

use crate::index::VectorIndex;
use crate::sql::placeholders;

/// The vector side of retrieval.
#[derive(Clone)]
pub enum VectorStore {
    Memory(VectorIndex),
    PgVector(PgVector),
}

impl VectorStore {
    /// Picks the backend `config.vector_backend` asks for; with pgvector, prepares the table
    /// and copies in the vectors of chunks written before it existed.
    pub async fn open(db: &DatabaseConnection, config: &Config) -> anyhow::Result<VectorStore> {
        let wanted = config.vector_backend.as_str();
        if wanted == "memory" {
            return Ok(VectorStore::Memory(VectorIndex::default()));
        }
        if !PgVector::available(db).await? {
            if wanted == "pgvector" {
                anyhow::bail!(
                    "DOCCHAT_VECTOR_BACKEND=pgvector needs a PostgreSQL database with the vector extension available"
                );
            }
            return Ok(VectorStore::Memory(VectorIndex::default()));
        }
        match PgVector::prepare(db, config.pgvector_ef_search).await {
            Ok(store) => Ok(VectorStore::PgVector(store)),
            Err(e) if wanted == "pgvector" => Err(e.context("preparing pgvector")),
            // Typically a role that may not CREATE EXTENSION: say so, and keep serving.
            Err(e) => {
                tracing::warn!(
                    error = format!("{e:#}"),
                    "pgvector is installed but could not be prepared; using the in-process index"
                );
                Ok(VectorStore::Memory(VectorIndex::default()))
            }
        }
    }

    pub fn name(&self) -> &'static str {
        match self {
            VectorStore::Memory(_) => "in-process",
            VectorStore::PgVector(_) => "pgvector",
        }
    }

    /// The `k` nearest chunks of these collections (all embedded by one model) to `query`,
    /// best first, as (chunk id, cosine).
    pub async fn nearest(
        &self,
        db: &DatabaseConnection,
        collection_ids: &[String],
        query: &[f32],
        k: usize,
        only_documents: Option<&[String]>,
    ) -> ApiResult<Vec<(i64, f32)>> {
        match self {
            VectorStore::Memory(index) => {
                let mut hits = Vec::new();
                for id in collection_ids {
                    let vectors = index.collection(db, id).await?;
                    hits.extend(vectors.search(query, k, only_documents));
                }
                hits.sort_by(|a, b| b.1.total_cmp(&a.1).then(a.0.cmp(&b.0)));
                hits.truncate(k);
                Ok(hits)
            }
            VectorStore::PgVector(pg) => {
                pg.nearest(db, collection_ids, query, k, only_documents)
                    .await
            }
        }
    }

    /// Copies a just-written document's vectors into the vector backend, inside the
    /// transaction that wrote its chunks.
    pub async fn write_document<C: ConnectionTrait>(
        &self,
        txn: &C,
        collection_id: &str,
        document_id: &str,
        vectors: &[Vec<f32>],
    ) -> ApiResult<()> {
        match self {
            VectorStore::Memory(_) => Ok(()),
            VectorStore::PgVector(pg) => {
                pg.write_document(txn, collection_id, document_id, vectors)
                    .await
            }
        }
    }

    /// Drops what this replica holds of a collection (its stored rows go with the chunks).
    pub fn forget(&self, collection_id: &str) {
        if let VectorStore::Memory(index) = self {
            index.forget(collection_id);
        }
    }
}

/// pgvector: `chunk_vectors` with per-dimension partial HNSW indexes (cosine).
#[derive(Clone)]
pub struct PgVector {
    db: DatabaseConnection,
    ef_search: u32,
    /// Dimensions whose HNSW index is known to exist.
    indexed: Arc<Mutex<HashSet<usize>>>,
}

/// Filters keeping at most this many rows are searched exactly, not through HNSW.
const EXACT_LIMIT: i64 = 20_000;

/// Chunks copied per statement when filling `chunk_vectors` from existing chunks.
const BACKFILL_BATCH: u64 = 500;

impl PgVector {
    /// Whether `db` is PostgreSQL with the `vector` extension installed or installable.
    pub async fn available(db: &DatabaseConnection) -> ApiResult<bool> {
        if db.get_database_backend() != DbBackend::Postgres {
            return Ok(false);
        }
        let row = db
            .query_one(Statement::from_string(
                DbBackend::Postgres,
                "SELECT 1 FROM pg_available_extensions WHERE name = 'vector'",
            ))
            .await?;
        Ok(row.is_some())
    }

    /// Creates the extension, the table and the known dimensions' indexes (idempotent, safe
    /// from several replicas at once), then backfills vectors of older chunks.
    pub async fn prepare(db: &DatabaseConnection, ef_search: u32) -> anyhow::Result<PgVector> {
        let txn = docchat_common::db::begin(db).await?;
        // Replicas starting together would race on CREATE EXTENSION / CREATE TABLE.
        txn.execute_unprepared("SELECT pg_advisory_xact_lock(7412903321)")
            .await?;
        txn.execute_unprepared("CREATE EXTENSION IF NOT EXISTS vector")
            .await?;
        txn.execute_unprepared(
            "CREATE TABLE IF NOT EXISTS chunk_vectors (
                chunk_id BIGINT PRIMARY KEY REFERENCES chunks(id) ON DELETE CASCADE,
                collection_id TEXT NOT NULL,
                document_id TEXT NOT NULL,
                dim INTEGER NOT NULL,
                embedding vector NOT NULL
            )",
        )
        .await?;
        txn.execute_unprepared(
            "CREATE INDEX IF NOT EXISTS chunk_vectors_collection ON chunk_vectors (collection_id, dim)",
        )
        .await?;
        txn.commit().await?;
        let store = PgVector {
            db: db.clone(),
            ef_search,
            indexed: Arc::default(),
        };
        let copied = store.backfill().await?;
        if copied > 0 {
            tracing::info!(
                chunks = copied,
                "copied existing chunk vectors into pgvector"
            );
        }
        Ok(store)
    }

    /// Copies vectors of chunks that have none in `chunk_vectors` (written before pgvector
    /// was enabled). Returns how many were copied.
    async fn backfill(&self) -> ApiResult<u64> {
        let mut copied = 0;
        loop {
            let rows = self
                .db
                .query_all(Statement::from_string(
                    DbBackend::Postgres,
                    format!(
                        "SELECT c.id, c.collection_id, c.document_id, c.embedding FROM chunks c \
                         WHERE NOT EXISTS (SELECT 1 FROM chunk_vectors v WHERE v.chunk_id = c.id) \
                         AND length(c.embedding) > 0 ORDER BY c.id LIMIT {BACKFILL_BATCH}"
                    ),
                ))
                .await?;
            if rows.is_empty() {
                return Ok(copied);
            }
            let mut batch: Vec<(i64, String, String, Vec<f32>)> = Vec::with_capacity(rows.len());
            for row in &rows {
                batch.push((
                    row.try_get_by_index(0)?,
                    row.try_get_by_index(1)?,
                    row.try_get_by_index(2)?,
                    crate::index::decode(&row.try_get_by_index::<Vec<u8>>(3)?),
                ));
            }
            for dim in batch.iter().map(|b| b.3.len()).collect::<HashSet<_>>() {
                self.ensure_index(dim).await?;
            }
            let rows: Vec<Row> = batch
                .iter()
                .map(|(id, c, d, v)| Row {
                    chunk_id: *id,
                    collection_id: c,
                    document_id: d,
                    vector: v,
                })
                .collect();
            let inserted = insert(&self.db, &rows, true).await?;
            if inserted == 0 {
                // Every remaining row was skipped (e.g. deleted meanwhile): nothing to gain
                // from asking again for the same rows.
                return Ok(copied);
            }
            copied += inserted;
        }
    }

    /// Creates the HNSW index for `dim` if this replica has not seen it yet.
    async fn ensure_index(&self, dim: usize) -> ApiResult<()> {
        if dim == 0
            || self
                .indexed
                .lock()
                .unwrap_or_else(|p| p.into_inner())
                .contains(&dim)
        {
            return Ok(());
        }
        let txn = docchat_common::db::begin(&self.db).await?;
        txn.execute_unprepared("SELECT pg_advisory_xact_lock(7412903322)")
            .await?;
        txn.execute_unprepared(&hnsw_index_sql(dim)).await?;
        txn.commit().await?;
        self.indexed
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .insert(dim);
        Ok(())
    }

    async fn write_document<C: ConnectionTrait>(
        &self,
        txn: &C,
        collection_id: &str,
        document_id: &str,
        vectors: &[Vec<f32>],
    ) -> ApiResult<()> {
        for dim in vectors.iter().map(Vec::len).collect::<HashSet<_>>() {
            self.ensure_index(dim).await?;
        }
        // Chunk ids were assigned by the insert; chunk_index is the vector's position.
        let rows = txn
            .query_all(Statement::from_sql_and_values(
                DbBackend::Postgres,
                "SELECT id, chunk_index FROM chunks WHERE document_id = $1",
                [Value::from(document_id.to_owned())],
            ))
            .await?;
        let mut batch: Vec<Row> = Vec::with_capacity(rows.len());
        for row in &rows {
            let id: i64 = row.try_get_by_index(0)?;
            let index: i32 = row.try_get_by_index(1)?;
            if let Some(v) = usize::try_from(index).ok().and_then(|i| vectors.get(i)) {
                batch.push(Row {
                    chunk_id: id,
                    collection_id,
                    document_id,
                    vector: v,
                });
            }
        }
        for part in batch.chunks(BACKFILL_BATCH as usize) {
            insert(txn, part, false).await?;
        }
        Ok(())
    }

    async fn nearest(
        &self,
        db: &DatabaseConnection,
        collection_ids: &[String],
        query: &[f32],
        k: usize,
        only_documents: Option<&[String]>,
    ) -> ApiResult<Vec<(i64, f32)>> {
        let dim = query.len();
        if dim == 0 || k == 0 || collection_ids.is_empty() {
            return Ok(Vec::new());
        }
        // `WHERE` of both statements, its placeholders numbered from `first`.
        let filter = |first: usize| {
            let mut sql = format!(
                "FROM chunk_vectors WHERE dim = {dim} AND collection_id IN ({})",
                placeholders(DbBackend::Postgres, first, collection_ids.len())
            );
            if let Some(docs) = only_documents {
                sql.push_str(&format!(
                    " AND document_id IN ({})",
                    placeholders(
                        DbBackend::Postgres,
                        first + collection_ids.len(),
                        docs.len()
                    )
                ));
            }
            sql
        };
        let filter_values: Vec<Value> = collection_ids
            .iter()
            .chain(only_documents.unwrap_or_default())
            .map(|v| Value::from(v.clone()))
            .collect();
        let txn = docchat_common::db::begin(db).await?;
        // A filter that keeps few rows is searched exactly: a graph walk that discards most
        // of what it visits loses recall (0.91 recall@10 for 10k of 100k rows here), while
        // scanning that many vectors takes milliseconds.
        let few = txn
            .query_one(Statement::from_sql_and_values(
                DbBackend::Postgres,
                format!(
                    "SELECT COUNT(*) FROM (SELECT 1 {} LIMIT {}) f",
                    filter(1),
                    EXACT_LIMIT + 1
                ),
                filter_values.clone(),
            ))
            .await?
            .map(|r| r.try_get_by_index::<i64>(0))
            .transpose()?
            .is_some_and(|n| n <= EXACT_LIMIT);
        if few {
            txn.execute_unprepared("SELECT set_config('enable_indexscan', 'off', true)")
                .await?;
        }
        let sql = format!(
            "SELECT chunk_id, (embedding::vector({dim}) <=> $1::vector({dim}))::float8 {} \
             ORDER BY embedding::vector({dim}) <=> $1::vector({dim}) LIMIT {k}",
            filter(2)
        );
        let mut values: Vec<Value> = vec![vector_literal(query).into()];
        values.extend(filter_values);
        // Search settings are per transaction. Iterative scans keep filtered graph walks
        // from coming back short; custom plans let the planner see the filter's values.
        let ef = self
            .ef_search
            .max(u32::try_from(k).unwrap_or(u32::MAX))
            .min(1000);
        txn.execute_unprepared(&format!(
            "SELECT set_config('hnsw.ef_search', '{ef}', true), \
                    set_config('hnsw.iterative_scan', 'relaxed_order', true), \
                    set_config('plan_cache_mode', 'force_custom_plan', true)"
        ))
        .await?;
        let rows = txn
            .query_all(Statement::from_sql_and_values(
                DbBackend::Postgres,
                sql,
                values,
            ))
            .await?;
        txn.commit().await?;
        let mut hits = Vec::with_capacity(rows.len());
        for row in &rows {
            let id: i64 = row.try_get_by_index(0)?;
            let distance: f64 = row.try_get_by_index(1)?;
            hits.push((id, (1.0 - distance) as f32));
        }
        // relaxed_order may return neighbours slightly out of order.
        hits.sort_by(|a, b| b.1.total_cmp(&a.1).then(a.0.cmp(&b.0)));
        Ok(hits)
    }
}

/// The HNSW index of one dimension (pgvector's defaults: m 16, ef_construction 64). `dim` is a
/// number we computed, never caller text.
pub fn hnsw_index_sql(dim: usize) -> String {
    format!(
        "CREATE INDEX IF NOT EXISTS chunk_vectors_hnsw_{dim} ON chunk_vectors \
         USING hnsw ((embedding::vector({dim})) vector_cosine_ops) WHERE dim = {dim}"
    )
}

/// A chunk's vector on its way into `chunk_vectors`.
struct Row<'a> {
    chunk_id: i64,
    collection_id: &'a str,
    document_id: &'a str,
    vector: &'a [f32],
}

/// Inserts rows, skipping chunks already there. With `only_existing`, rows whose chunk is
/// gone meanwhile are skipped too (backfill runs beside live deletes); the ingestion path
/// writes chunks in the same transaction and needs no such check. The rows travel as one
/// JSON parameter, and no statement joins `chunks` on a guessed plan: a generic plan made
/// while the table was small would scan it whole for every document.
async fn insert<C: ConnectionTrait>(
    conn: &C,
    rows: &[Row<'_>],
    only_existing: bool,
) -> ApiResult<u64> {
    let rows: Vec<&Row> = rows.iter().filter(|r| !r.vector.is_empty()).collect();
    if rows.is_empty() {
        return Ok(0);
    }
    let mut json = String::with_capacity(rows.len() * (rows[0].vector.len() * 12 + 120));
    json.push('[');
    for (n, row) in rows.iter().enumerate() {
        if n > 0 {
            json.push(',');
        }
        let _ = write!(
            json,
            "{{\"id\":{},\"c\":{},\"d\":{},\"e\":\"{}\"}}",
            row.chunk_id,
            serde_json::Value::from(row.collection_id),
            serde_json::Value::from(row.document_id),
            vector_literal(row.vector)
        );
    }
    json.push(']');
    let guard = if only_existing {
        " WHERE EXISTS (SELECT 1 FROM chunks c WHERE c.id = v.id)"
    } else {
        ""
    };
    let done = conn
        .execute(Statement::from_sql_and_values(
            DbBackend::Postgres,
            format!(
                "INSERT INTO chunk_vectors (chunk_id, collection_id, document_id, dim, embedding) \
                 SELECT v.id, v.c, v.d, vector_dims(v.e::vector), v.e::vector \
                 FROM jsonb_to_recordset($1::jsonb) AS v(id BIGINT, c TEXT, d TEXT, e TEXT){guard} \
                 ON CONFLICT (chunk_id) DO NOTHING"
            ),
            [Value::from(json)],
        ))
        .await
        .map_err(ApiError::from)?;
    Ok(done.rows_affected())
}

/// pgvector's text form: `[0.1,0.2,...]` (Rust's shortest round-trip float formatting).
fn vector_literal(v: &[f32]) -> String {
    let mut out = String::with_capacity(v.len() * 12 + 2);
    out.push('[');
    for (i, x) in v.iter().enumerate() {
        if i > 0 {
            out.push(',');
        }
        // NaN and infinities are not valid vector elements.
        let x = if x.is_finite() { *x } else { 0.0 };
        let _ = write!(out, "{x}");
    }
    out.push(']');
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn vector_literals_are_pgvector_text() {
        assert_eq!(vector_literal(&[0.5, -1.25, 3.0]), "[0.5,-1.25,3]");
        assert_eq!(vector_literal(&[f32::NAN, 1e-8]), "[0,0.00000001]");
    }
}
