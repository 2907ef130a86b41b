//! The in-process vector index: per collection, every chunk's embedding in one contiguous
//! array, searched exactly (dot product of unit vectors = cosine). A collection is (re)loaded
//! when its stored `index_version` differs from the loaded one, so every replica follows
//! changes made by any other without extra messages.

use std::collections::{BinaryHeap, HashMap};
use std::sync::{Arc, RwLock};

use docchat_common::error::ApiResult;
use sea_orm::{ColumnTrait, DatabaseConnection, EntityTrait, QueryFilter, QuerySelect};

use crate::entities::{chunks, collections};

/// One collection's vectors.
pub struct CollectionVectors {
    pub version: i64,
    pub dim: usize,
    pub chunk_ids: Vec<i64>,
    /// Index into `documents` for each chunk.
    pub doc_of: Vec<u32>,
    pub documents: Vec<String>,
    pub data: Vec<f32>,
}

impl CollectionVectors {
    pub fn len(&self) -> usize {
        self.chunk_ids.len()
    }

    pub fn is_empty(&self) -> bool {
        self.chunk_ids.is_empty()
    }

    /// The `k` nearest chunks to `query` (restricted to `only_documents` when given), best
    /// first, as (chunk id, cosine).
    pub fn search(
        &self,
        query: &[f32],
        k: usize,
        only_documents: Option<&[String]>,
    ) -> Vec<(i64, f32)> {
        if self.dim == 0 || query.len() != self.dim || k == 0 {
            return Vec::new();
        }
        let allowed: Option<Vec<bool>> = only_documents.map(|docs| {
            self.documents
                .iter()
                .map(|d| docs.iter().any(|x| x == d))
                .collect()
        });
        // Min-heap of the best k so far.
        let mut heap: BinaryHeap<Scored> = BinaryHeap::with_capacity(k + 1);
        for (i, row) in self.data.chunks_exact(self.dim).enumerate() {
            if let Some(allowed) = &allowed
                && !allowed[self.doc_of[i] as usize]
            {
                continue;
            }
            let score = dot(row, query);
            if heap.len() < k {
                heap.push(Scored(score, i));
            } else if let Some(worst) = heap.peek()
                && score > worst.0
            {
                heap.pop();
                heap.push(Scored(score, i));
            }
        }
        let mut out: Vec<(i64, f32)> = heap
            .into_iter()
            .map(|Scored(s, i)| (self.chunk_ids[i], s))
            .collect();
        out.sort_by(|a, b| b.1.total_cmp(&a.1).then(a.0.cmp(&b.0)));
        out
    }
}

/// Ordered by score, reversed, so `BinaryHeap` keeps the worst on top.
struct Scored(f32, usize);

impl PartialEq for Scored {
    fn eq(&self, other: &Self) -> bool {
        self.0.total_cmp(&other.0).is_eq()
    }
}
impl Eq for Scored {}
impl PartialOrd for Scored {
    fn partial_cmp(&self, other: &Self) -> Option<std::cmp::Ordering> {
        Some(self.cmp(other))
    }
}
impl Ord for Scored {
    fn cmp(&self, other: &Self) -> std::cmp::Ordering {
        other.0.total_cmp(&self.0)
    }
}

/// Dot product written so the compiler vectorizes it (8 independent accumulators).
pub fn dot(a: &[f32], b: &[f32]) -> f32 {
    let mut acc = [0f32; 8];
    let chunks = a.len() / 8;
    for c in 0..chunks {
        let (x, y) = (&a[c * 8..c * 8 + 8], &b[c * 8..c * 8 + 8]);
        for j in 0..8 {
            acc[j] += x[j] * y[j];
        }
    }
    let mut sum: f32 = acc.iter().sum();
    for j in chunks * 8..a.len().min(b.len()) {
        sum += a[j] * b[j];
    }
    sum
}

pub fn encode(v: &[f32]) -> Vec<u8> {
    v.iter().flat_map(|x| x.to_le_bytes()).collect()
}

pub fn decode(bytes: &[u8]) -> Vec<f32> {
    bytes
        .chunks_exact(4)
        .map(|b| f32::from_le_bytes([b[0], b[1], b[2], b[3]]))
        .collect()
}

/// Loaded collections, shared by every request of this replica.
#[derive(Default, Clone)]
pub struct VectorIndex {
    loaded: Arc<RwLock<HashMap<String, Arc<CollectionVectors>>>>,
}

impl VectorIndex {
    /// The collection's vectors at their current stored version.
    pub async fn collection(
        &self,
        db: &DatabaseConnection,
        collection_id: &str,
    ) -> ApiResult<Arc<CollectionVectors>> {
        let version: i64 = collections::Entity::find_by_id(collection_id.to_owned())
            .select_only()
            .column(collections::Column::IndexVersion)
            .into_tuple()
            .one(db)
            .await?
            .unwrap_or(-1);
        if let Some(hit) = self.get(collection_id)
            && hit.version == version
        {
            return Ok(hit);
        }
        let rows: Vec<(i64, String, Vec<u8>)> = chunks::Entity::find()
            .select_only()
            .column(chunks::Column::Id)
            .column(chunks::Column::DocumentId)
            .column(chunks::Column::Embedding)
            .filter(chunks::Column::CollectionId.eq(collection_id))
            .into_tuple()
            .all(db)
            .await?;
        let dim = rows.first().map(|r| r.2.len() / 4).unwrap_or(0);
        let mut vectors = CollectionVectors {
            version,
            dim,
            chunk_ids: Vec::with_capacity(rows.len()),
            doc_of: Vec::with_capacity(rows.len()),
            documents: Vec::new(),
            data: Vec::with_capacity(rows.len() * dim),
        };
        let mut doc_index: HashMap<String, u32> = HashMap::new();
        for (id, doc, embedding) in rows {
            if embedding.len() / 4 != dim {
                tracing::warn!(
                    chunk_id = id,
                    "skipping a chunk whose embedding has another dimension"
                );
                continue;
            }
            let next = u32::try_from(vectors.documents.len()).unwrap_or(u32::MAX);
            let d = *doc_index.entry(doc.clone()).or_insert_with(|| {
                vectors.documents.push(doc);
                next
            });
            vectors.chunk_ids.push(id);
            vectors.doc_of.push(d);
            vectors.data.extend(decode(&embedding));
        }
        let vectors = Arc::new(vectors);
        self.loaded
            .write()
            .unwrap_or_else(|p| p.into_inner())
            .insert(collection_id.to_owned(), vectors.clone());
        Ok(vectors)
    }

    fn get(&self, collection_id: &str) -> Option<Arc<CollectionVectors>> {
        self.loaded
            .read()
            .unwrap_or_else(|p| p.into_inner())
            .get(collection_id)
            .cloned()
    }

    pub fn forget(&self, collection_id: &str) {
        self.loaded
            .write()
            .unwrap_or_else(|p| p.into_inner())
            .remove(collection_id);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn unit(v: &[f32]) -> Vec<f32> {
        let n = v.iter().map(|x| x * x).sum::<f32>().sqrt();
        v.iter().map(|x| x / n).collect()
    }

    #[test]
    fn dot_matches_naive() {
        let a: Vec<f32> = (0..389).map(|i| (i as f32 * 0.37).sin()).collect();
        let b: Vec<f32> = (0..389).map(|i| (i as f32 * 0.11).cos()).collect();
        let naive: f32 = a.iter().zip(&b).map(|(x, y)| x * y).sum();
        assert!((dot(&a, &b) - naive).abs() < 1e-3);
    }

    #[test]
    fn search_returns_nearest_first_and_filters_documents() {
        let rows = [
            unit(&[1.0, 0.0, 0.0]),
            unit(&[0.9, 0.1, 0.0]),
            unit(&[0.0, 1.0, 0.0]),
            unit(&[0.0, 0.0, 1.0]),
        ];
        let v = CollectionVectors {
            version: 1,
            dim: 3,
            chunk_ids: vec![10, 11, 12, 13],
            doc_of: vec![0, 1, 0, 1],
            documents: vec!["a".into(), "b".into()],
            data: rows.concat(),
        };
        let hits = v.search(&unit(&[1.0, 0.05, 0.0]), 2, None);
        assert_eq!(hits.iter().map(|h| h.0).collect::<Vec<_>>(), [10, 11]);
        let only_a = v.search(&unit(&[1.0, 0.05, 0.0]), 2, Some(&["a".to_owned()]));
        assert_eq!(only_a.iter().map(|h| h.0).collect::<Vec<_>>(), [10, 12]);
        assert!(v.search(&[1.0, 0.0], 2, None).is_empty(), "wrong dimension");
    }

    #[test]
    fn embeddings_round_trip() {
        let v = vec![0.5f32, -1.25, 3.0];
        assert_eq!(decode(&encode(&v)), v);
    }
}
