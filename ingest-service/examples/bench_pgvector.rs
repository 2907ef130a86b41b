//! pgvector HNSW against exact search over 100k chunks (384 dimensions, the MiniLM size):
//! recall@10 and latency of the path the Search RPC takes (`VectorStore::nearest`).
//!
//!   scripts/pgvector-server.sh        # PostgreSQL 18 + pgvector on 127.0.0.1:5433
//!   cargo run --release -p docchat-ingest-service --example bench_pgvector [chunks]
//!
//! Two data sets: `clustered` (points around 2,000 topics, like real sentence embeddings,
//! whose intrinsic dimension is far below 384) and `uniform` (random directions: every
//! distance alike, the worst case for any graph index). Two layouts: one collection holding
//! everything, and a search in one of ten collections (a filtered HNSW scan). Ground truth is
//! the in-process exact index. Run it alone (2 cores: parallel loads spoil it).

#![allow(clippy::print_stdout, clippy::unwrap_used, clippy::expect_used)] // a benchmark binary

use std::collections::HashSet;
use std::time::Instant;

mod support;

use docchat_common::config::Config;
use docchat_ingest_service::entities::chunks;
use docchat_ingest_service::index::{CollectionVectors, encode};
use docchat_ingest_service::vectors::{VectorStore, hnsw_index_sql};
use sea_orm::{ActiveValue::Set, ConnectionTrait, DatabaseConnection, EntityTrait};
use support::{Rng, percentile, unit};

const DIM: usize = 384;
const K: usize = 10;
const QUERIES: usize = 500;
const PER_DOCUMENT: usize = 100;
/// hnsw.ef_search values measured on each loaded set (the default is 100).
const EF_SEARCH: [u32; 4] = [40, 100, 200, 400];

/// `n` points (and `QUERIES` queries) of the named kind.
fn data(kind: &str, n: usize, rng: &mut Rng) -> (Vec<Vec<f32>>, Vec<Vec<f32>>) {
    match kind {
        "clustered" => {
            let centers: Vec<Vec<f32>> = (0..2000).map(|_| unit(rng.raw(DIM))).collect();
            let point = |rng: &mut Rng| {
                let c = &centers[(rng.0 % centers.len() as u64) as usize];
                let noise = unit(rng.raw(DIM));
                unit(c.iter().zip(&noise).map(|(c, e)| c + 0.6 * e).collect())
            };
            let points = (0..n).map(|_| point(rng)).collect();
            let queries = (0..QUERIES).map(|_| point(rng)).collect();
            (points, queries)
        }
        _ => (
            (0..n).map(|_| unit(rng.raw(DIM))).collect(),
            (0..QUERIES).map(|_| unit(rng.raw(DIM))).collect(),
        ),
    }
}

async fn fresh_database(server: &str) -> (DatabaseConnection, String) {
    let name = docchat_common::testing::unique("dcbench_");
    let url = docchat_common::testing::postgres_database(server, &name);
    let db = docchat_common::db::connect(&url).await.unwrap();
    docchat_common::db::migrate::<docchat_ingest_service::migrations::Migrator>(&db, "ingest")
        .await
        .unwrap();
    // The bench writes chunks alone, without document and collection rows.
    db.execute_unprepared(
        "DO $$ DECLARE c text; BEGIN \
         FOR c IN SELECT conname FROM pg_constraint WHERE conrelid = 'chunks'::regclass AND contype = 'f' \
         LOOP EXECUTE format('ALTER TABLE chunks DROP CONSTRAINT %I', c); END LOOP; END $$",
    )
    .await
    .unwrap();
    (db, name)
}

/// Stores the points as chunks of `collections` collections (round robin by document),
/// through the same write path as ingestion, then builds the HNSW index in bulk (inserting
/// into a live HNSW index is ~5x slower per row here; the tests cover that path). Returns
/// each point's collection and the index build time.
async fn load(
    db: &DatabaseConnection,
    store: &VectorStore,
    points: &[Vec<f32>],
    collections: usize,
) -> (Vec<usize>, f64) {
    let mut collection_of = Vec::with_capacity(points.len());
    for (d, doc) in points.chunks(PER_DOCUMENT).enumerate() {
        let collection = d % collections;
        let document_id = format!("doc-{d}");
        let rows: Vec<chunks::ActiveModel> = doc
            .iter()
            .enumerate()
            .map(|(i, v)| chunks::ActiveModel {
                document_id: Set(document_id.clone()),
                collection_id: Set(format!("col-{collection}")),
                chunk_index: Set(i as i32),
                text: Set(format!("chunk {i} of {document_id}")),
                pages: Set("1".into()),
                heading: Set(None),
                start_time: Set(None),
                end_time: Set(None),
                embedding: Set(encode(v)),
                ..Default::default()
            })
            .collect();
        let txn = docchat_common::db::begin(db).await.unwrap();
        chunks::Entity::insert_many(rows).exec(&txn).await.unwrap();
        store
            .write_document(&txn, &format!("col-{collection}"), &document_id, doc)
            .await
            .unwrap();
        txn.commit().await.unwrap();
        if d == 0 {
            // The first write made the index; load the rest without it.
            db.execute_unprepared(&format!("DROP INDEX chunk_vectors_hnsw_{DIM}"))
                .await
                .unwrap();
        }
        collection_of.extend(std::iter::repeat_n(collection, doc.len()));
    }
    let started = Instant::now();
    let txn = docchat_common::db::begin(db).await.unwrap();
    txn.execute_unprepared("SET LOCAL maintenance_work_mem = '2GB'")
        .await
        .unwrap();
    txn.execute_unprepared(&hnsw_index_sql(DIM)).await.unwrap();
    txn.commit().await.unwrap();
    (collection_of, started.elapsed().as_secs_f64())
}

#[tokio::main]
#[expect(clippy::disallowed_methods, reason = "a benchmark's settings")]
async fn main() {
    let n: usize = std::env::args()
        .nth(1)
        .and_then(|a| a.parse().ok())
        .unwrap_or(100_000);
    let server = std::env::var("DOCCHAT_BENCH_PGVECTOR_URL")
        .unwrap_or_else(|_| "postgres://postgres@127.0.0.1:5433/postgres".into());
    let config = Config {
        vector_backend: "pgvector".into(),
        ..Config::default()
    };
    println!(
        "pgvector HNSW (m 16, ef_construction 64) vs exact: {n} chunks x {DIM} dims, {QUERIES} queries, top-{K}"
    );
    println!(
        "{:<10} {:<24} {:>9} {:>9} {:>8} {:>8} {:>8} {:>8}",
        "data", "layout", "ef_search", "recall@10", "p50 ms", "p99 ms", "load s", "index s"
    );
    // DOCCHAT_BENCH_DATA=clustered runs one data set.
    let only = std::env::var("DOCCHAT_BENCH_DATA").ok();
    for kind in ["clustered", "uniform"]
        .into_iter()
        .filter(|k| only.as_deref().is_none_or(|o| o == *k))
    {
        for collections in [1usize, 10] {
            let mut rng = Rng(0x9e37_79b9_7f4a_7c15);
            let (points, queries) = data(kind, n, &mut rng);
            let (db, name) = fresh_database(&server).await;
            let store = VectorStore::open(&db, &config).await.unwrap();
            let started = Instant::now();
            let (collection_of, build_s) = load(&db, &store, &points, collections).await;
            let load_s = started.elapsed().as_secs_f64();
            db.execute_unprepared("ANALYZE chunk_vectors")
                .await
                .unwrap();

            // Exact answers for the queried collection (col-0).
            let members: Vec<usize> = (0..points.len())
                .filter(|&i| collection_of[i] == 0)
                .collect();
            let exact = CollectionVectors {
                version: 0,
                dim: DIM,
                chunk_ids: members.iter().map(|&i| i as i64).collect(),
                doc_of: vec![0; members.len()],
                documents: vec!["all".into()],
                data: members.iter().flat_map(|&i| points[i].clone()).collect(),
            };
            // Chunk ids are assigned in insertion order from 1.
            let first_id: i64 = db
                .query_one(sea_orm::Statement::from_string(
                    db.get_database_backend(),
                    "SELECT MIN(id) FROM chunks",
                ))
                .await
                .unwrap()
                .unwrap()
                .try_get_by_index(0)
                .unwrap();
            let target = vec!["col-0".to_owned()];
            let truths: Vec<HashSet<i64>> = queries
                .iter()
                .map(|q| {
                    exact
                        .search(q, K, None)
                        .into_iter()
                        .map(|(i, _)| i + first_id)
                        .collect()
                })
                .collect();
            let layout = if collections == 1 {
                "1 collection".to_owned()
            } else {
                format!("1 of {collections} collections")
            };
            for ef in EF_SEARCH {
                let store = VectorStore::open(
                    &db,
                    &Config {
                        pgvector_ef_search: ef,
                        ..config.clone()
                    },
                )
                .await
                .unwrap();
                let mut found = 0usize;
                let mut times = Vec::with_capacity(QUERIES);
                for (q, truth) in queries.iter().zip(&truths) {
                    let t = Instant::now();
                    let hits = store.nearest(&db, &target, q, K, None).await.unwrap();
                    times.push(t.elapsed().as_secs_f64() * 1000.0);
                    found += hits.iter().filter(|(id, _)| truth.contains(id)).count();
                }
                times.sort_by(f64::total_cmp);
                println!(
                    "{:<10} {:<24} {:>9} {:>9.4} {:>8.2} {:>8.2} {:>8.1} {:>8.1}",
                    kind,
                    layout,
                    ef,
                    found as f64 / (QUERIES * K) as f64,
                    percentile(&times, 0.5),
                    percentile(&times, 0.99),
                    load_s,
                    build_s
                );
            }
            db.close().await.unwrap();
            let admin = docchat_common::db::connect(&server).await.unwrap();
            admin
                .execute_unprepared(&format!("DROP DATABASE IF EXISTS \"{name}\" WITH (FORCE)"))
                .await
                .unwrap();
            admin.close().await.unwrap();
        }
    }
}
