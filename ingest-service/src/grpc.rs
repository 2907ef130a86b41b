//! The tonic implementation of `docchat.ingest.v1.IngestService`: unpack, authorize, call the
//! domain, pack (the proto conversions are in `conversions.rs`).

use std::sync::Arc;

use docchat_common::auth::{caller, permissions};
use docchat_common::error::{ApiError, ApiResult};
use docchat_common::grpc::{Reply, ok};
use docchat_common::outbox::OutboxRelay;
use docchat_common::settings::SettingsClient;
use docchat_proto::common::v1::{Empty, PageRequest};
use docchat_proto::ingest::v1 as pb;
use docchat_proto::ingest::v1::document_bytes::Part as DocumentPart;
use docchat_proto::ingest::v1::ingest_service_server::IngestService;
use futures::StreamExt;
use sea_orm::DatabaseConnection;
use tokio::sync::Notify;
use tonic::Streaming;
use tonic::{Request, Response, Status};

use crate::agent_files::AgentFiles;
use crate::blobs::BlobStore;
use crate::collection_settings::{self, Asked, Effective};
use crate::collections;
use crate::conversions::{
    audio_segment_pb, collection_pb, document_in_full_pb, document_pb, extractor_pb, fields_in,
    hit_pb, job_pb, list_filter, queue_length_pb, rerank_pb, tag_pb,
};
use crate::documents;
use crate::entities::jobs as job_entity;
use crate::ingestion;
use crate::jobs::{Fairness, IngestParams};
use crate::search::Searcher;

pub struct IngestGrpc {
    pub db: DatabaseConnection,
    pub relay: OutboxRelay,
    pub blobs: BlobStore,
    pub settings: SettingsClient,
    pub fairness: Fairness,
    pub searcher: Searcher,
    pub max_upload_bytes: u64,
    /// The byte budget of one list page (`docchat_common::limits::list_page_bytes`).
    pub page_bytes: u64,
    /// Wakes this replica's workers right after a local enqueue.
    pub wake: Arc<Notify>,
    /// The jobs this replica's workers run (a cancel stops its worker at once).
    pub running: crate::worker::Running,
    /// Text recognition (checks an upload's languages).
    pub ocr: Arc<crate::ocr::Ocr>,
}

impl IngestGrpc {
    /// An ingestion's options, its recognition settings checked (400 before anything is
    /// queued: an unknown `ocr_model`, a language not installed).
    fn params(&self, options: &Effective) -> Result<IngestParams, ApiError> {
        let Effective {
            gen_doc_summaries,
            gen_doc_questions,
            ocr_model,
            ocr_language,
        } = options;
        let ocr = crate::jobs::OcrMode::parse(ocr_model).map_err(ApiError::bad_request)?;
        let ocr_language = match ocr {
            crate::jobs::OcrMode::Off => String::new(),
            _ if ocr_language.trim().is_empty() => String::new(),
            _ => self
                .ocr
                .language(ocr_language)
                .map_err(ApiError::bad_request)?,
        };
        Ok(IngestParams {
            gen_doc_summaries: *gen_doc_summaries,
            gen_doc_questions: *gen_doc_questions,
            ocr,
            ocr_language,
        })
    }

    /// An ingestion's options: what it asked, else the collection's settings (when the
    /// collection is the caller's; otherwise the ingestion answers 404 itself).
    async fn ingest_params(
        &self,
        me: &docchat_common::Caller,
        collection_id: &str,
        asked: Asked,
    ) -> ApiResult<IngestParams> {
        let settings = collections::ingest_defaults(&self.db, me, collection_id).await?;
        self.params(&asked.or(settings.as_ref()))
    }

    /// Collection settings as the client sent them, checked against its model and against
    /// what this server can do with the ones that act (`ocr_model`, `tesseract_lang`): their
    /// stored JSON.
    fn checked_settings(&self, json: &str) -> ApiResult<String> {
        let settings = collection_settings::collection_settings(json)?;
        self.params(&Asked::default().or(Some(&settings)))
            .map_err(|e| ApiError::bad_request(format!("collection_settings: {}", e.message)))?;
        Ok(collection_settings::stored(&settings))
    }

    fn agent_files(&self) -> AgentFiles<'_> {
        AgentFiles {
            db: &self.db,
            blobs: &self.blobs,
            settings: &self.settings,
            max_bytes: self.max_upload_bytes,
        }
    }

    /// Queues the ingestion of `upload_ids` into the collection, all or none
    /// ([`ingestion::start_many`]), and wakes the relay and the workers.
    async fn queue_ingestion(
        &self,
        me: &docchat_common::Caller,
        upload_ids: &[String],
        collection_id: &str,
        params: &IngestParams,
    ) -> ApiResult<Vec<job_entity::Model>> {
        let resolved = self.settings.resolve(me).await?;
        let jobs = ingestion::start_many(
            &self.db,
            me,
            &resolved,
            self.fairness,
            upload_ids,
            collection_id,
            params,
        )
        .await?;
        self.relay.notify();
        self.wake.notify_waiters();
        Ok(jobs)
    }
}

/// The most texts one `Embed` call encodes.
const MAX_EMBED_TEXTS: usize = 256;

#[tonic::async_trait]
impl IngestService for IngestGrpc {
    async fn create_collection(
        &self,
        request: Request<pb::CreateCollectionRequest>,
    ) -> Reply<pb::Collection> {
        let me = caller(&request)?;
        let pb::CreateCollectionRequest {
            name,
            description,
            embedding_model,
            collection_settings_json,
            chat_settings_json,
        } = request.into_inner();
        let kept = collections::Kept {
            collection_settings: collection_settings_json
                .map(|json| self.checked_settings(&json))
                .transpose()?,
            chat_settings: chat_settings_json
                .as_deref()
                .map(collection_settings::stored_chat_settings)
                .transpose()?,
        };
        let limits = collections::Limits::of(&self.settings.resolve(&me).await?);
        let embedding_model = if embedding_model.trim().is_empty() {
            self.searcher
                .embedders
                .default_name()
                .unwrap_or(collections::DEFAULT_EMBEDDING_MODEL)
                .to_owned()
        } else if self
            .searcher
            .embedders
            .get(embedding_model.trim())
            .is_none()
        {
            return Err(docchat_common::ApiError::bad_request(format!(
                "unknown embedding_model {:?}; available: {}",
                embedding_model.trim(),
                self.searcher.embedders.names().join(", ")
            ))
            .into());
        } else {
            embedding_model
        };
        ok(collections::create(
            &self.db,
            &me,
            &name,
            &description,
            &embedding_model,
            limits,
            kept,
        )
        .await
        .map(collection_pb))
    }

    async fn list_collections(&self, request: Request<PageRequest>) -> Reply<pb::CollectionList> {
        let me = caller(&request)?;
        let PageRequest {
            offset,
            limit,
            sort_column,
            ascending,
        } = request.into_inner();
        let page_bytes = self.page_bytes;
        ok(collections::list(
            &self.db,
            &me,
            offset,
            limit,
            &sort_column,
            ascending,
            page_bytes,
        )
        .await
        .map(|(rows, size_limited)| pb::CollectionList {
            collections: rows.into_iter().map(collection_pb).collect(),
            size_limited,
        }))
    }

    async fn get_collection(&self, request: Request<pb::CollectionRef>) -> Reply<pb::Collection> {
        let me = caller(&request)?;
        ok(collections::get(&self.db, &me, &request.get_ref().id)
            .await
            .map(collection_pb))
    }

    async fn delete_collection(&self, request: Request<pb::CollectionRef>) -> Reply<Empty> {
        let me = caller(&request)?;
        collections::delete(&self.db, &me, &request.get_ref().id).await?;
        self.searcher.vectors.forget(&request.get_ref().id);
        self.relay.notify();
        Ok(Response::new(Empty {}))
    }

    async fn update_collection(
        &self,
        request: Request<pb::UpdateCollectionRequest>,
    ) -> Reply<pb::Collection> {
        let me = caller(&request)?;
        let pb::UpdateCollectionRequest {
            id,
            name,
            description,
        } = request.into_inner();
        ok(collections::update(&self.db, &me, &id, name, description)
            .await
            .map(collection_pb))
    }

    async fn count_collections(&self, request: Request<Empty>) -> Reply<pb::Count> {
        let me = caller(&request)?;
        let n = collections::count_owned(&self.db, &me).await?;
        Ok(Response::new(pb::Count {
            count: i64::try_from(n).unwrap_or(i64::MAX),
        }))
    }

    async fn list_all_collections(
        &self,
        request: Request<pb::ListAllCollectionsRequest>,
    ) -> Reply<pb::CollectionList> {
        let me = caller(&request)?;
        if !me.has_permission(permissions::ADMIN_CENTER) {
            return Err(ApiError::forbidden(format!(
                "missing required permission {}",
                permissions::ADMIN_CENTER
            ))
            .into());
        }
        let pb::ListAllCollectionsRequest {
            offset,
            limit,
            sort_column,
            ascending,
            filter,
        } = request.into_inner();
        ok(collections::list_all(
            &self.db,
            offset,
            limit,
            &sort_column,
            ascending,
            &filter,
            self.page_bytes,
        )
        .await
        .map(|(rows, size_limited)| pb::CollectionList {
            collections: rows.into_iter().map(collection_pb).collect(),
            size_limited,
        }))
    }

    async fn get_collection_settings(
        &self,
        request: Request<pb::CollectionRef>,
    ) -> Reply<pb::CollectionSettings> {
        let me = caller(&request)?;
        let stored = collections::stored(&self.db, &me, &request.get_ref().id).await?;
        Ok(Response::new(pb::CollectionSettings {
            collection_settings_json: stored.collection_settings,
            chat_settings_json: stored.chat_settings,
            metadata_json: stored.metadata,
        }))
    }

    async fn update_collection_settings(
        &self,
        request: Request<pb::UpdateCollectionSettingsRequest>,
    ) -> Reply<Empty> {
        let me = caller(&request)?;
        let pb::UpdateCollectionSettingsRequest {
            id,
            collection_settings_json,
            chat_settings_json,
            metadata_json,
        } = request.into_inner();
        let changes = collections::StoredChanges {
            collection_settings: collection_settings_json
                .map(|json| self.checked_settings(&json))
                .transpose()?,
            chat_settings: chat_settings_json
                .as_deref()
                .map(collection_settings::stored_chat_settings)
                .transpose()?,
            metadata: metadata_json
                .map(|json| {
                    collection_settings::metadata(&json).map(|m| collection_settings::stored(&m))
                })
                .transpose()?,
        };
        collections::store(&self.db, &me, &id, changes).await?;
        Ok(Response::new(Empty {}))
    }

    async fn upload(
        &self,
        request: Request<Streaming<pb::UploadChunk>>,
    ) -> Reply<pb::UploadedFile> {
        let me = caller(&request)?;
        let stream = request.into_inner();
        let row =
            crate::uploads::receive(&self.db, &self.blobs, &me, stream, self.max_upload_bytes)
                .await?;
        Ok(Response::new(pb::UploadedFile {
            id: row.id,
            filename: row.filename,
            size: row.size,
        }))
    }

    async fn list_uploads(&self, request: Request<Empty>) -> Reply<pb::UploadList> {
        let me = caller(&request)?;
        let uploads = crate::uploads::pending(&self.db, &me).await?;
        Ok(Response::new(pb::UploadList {
            uploads: uploads
                .into_iter()
                .map(|row| pb::UploadedFile {
                    id: row.id,
                    filename: row.filename,
                    size: row.size,
                })
                .collect(),
        }))
    }

    async fn delete_upload(&self, request: Request<pb::UploadRef>) -> Reply<Empty> {
        let me = caller(&request)?;
        crate::uploads::delete(&self.db, &self.blobs, &me, &request.get_ref().id).await?;
        Ok(Response::new(Empty {}))
    }

    async fn ingest_upload(&self, request: Request<pb::IngestUploadRequest>) -> Reply<pb::Job> {
        let me = caller(&request)?;
        let pb::IngestUploadRequest {
            upload_id,
            collection_id,
            gen_doc_summaries,
            gen_doc_questions,
            ocr_model,
            ocr_language,
        } = request.into_inner();
        let asked = Asked {
            gen_doc_summaries,
            gen_doc_questions,
            ocr_model,
            ocr_language,
        };
        let params = self.ingest_params(&me, &collection_id, asked).await?;
        let job = self
            .queue_ingestion(&me, &[upload_id], &collection_id, &params)
            .await?
            .pop()
            .ok_or_else(|| ApiError::internal("starting an ingestion", "no job"))?;
        Ok(Response::new(job_pb(job)))
    }

    async fn ingest_uploads(
        &self,
        request: Request<pb::IngestUploadsRequest>,
    ) -> Reply<pb::JobList> {
        let me = caller(&request)?;
        let pb::IngestUploadsRequest {
            upload_ids,
            collection_id,
            gen_doc_summaries,
            gen_doc_questions,
            ocr_model,
            ocr_language,
        } = request.into_inner();
        let asked = Asked {
            gen_doc_summaries,
            gen_doc_questions,
            ocr_model,
            ocr_language,
        };
        let params = self.ingest_params(&me, &collection_id, asked).await?;
        let jobs = self
            .queue_ingestion(&me, &upload_ids, &collection_id, &params)
            .await?;
        Ok(Response::new(pb::JobList {
            jobs: jobs.into_iter().map(job_pb).collect(),
        }))
    }

    async fn get_job(&self, request: Request<pb::JobRef>) -> Reply<pb::Job> {
        let me = caller(&request)?;
        ok(crate::jobs::get(&self.db, &me, &request.get_ref().id)
            .await
            .map(job_pb))
    }

    async fn cancel_job(&self, request: Request<pb::CancelJobRequest>) -> Reply<pb::Job> {
        let me = caller(&request)?;
        let pb::CancelJobRequest {
            id,
            reason,
            any_owner,
        } = request.into_inner();
        if any_owner && !me.has_permission(permissions::ADMIN_CENTER) {
            return Err(ApiError::forbidden(format!(
                "missing required permission {}",
                permissions::ADMIN_CENTER
            ))
            .into());
        }
        let who = crate::jobs::Cancel {
            caller: &me,
            reason: &reason,
            any_owner,
        };
        let job = crate::jobs::cancel(&self.db, &id, &who).await?;
        self.running.stop(&job.id);
        self.relay.notify();
        Ok(Response::new(job_pb(job)))
    }

    async fn count_pending_jobs(&self, request: Request<Empty>) -> Reply<pb::PendingJobs> {
        caller(&request)?;
        let queues = crate::jobs::pending(&self.db).await?;
        Ok(Response::new(pb::PendingJobs {
            count: queues.iter().map(|(_, n)| n).sum(),
            queues: queues.into_iter().map(queue_length_pb).collect(),
        }))
    }

    async fn list_embedding_models(
        &self,
        request: Request<Empty>,
    ) -> Reply<pb::EmbeddingModelList> {
        caller(&request)?;
        let embedders = &self.searcher.embedders;
        let default = embedders.default_name();
        Ok(Response::new(pb::EmbeddingModelList {
            models: embedders
                .iter()
                .map(|e| pb::EmbeddingModel {
                    name: e.name().to_owned(),
                    dimension: e.dimension() as u64,
                    max_tokens: e.max_tokens() as u64,
                    is_default: default == Some(e.name()),
                    languages: e.languages().iter().map(|&l| l.to_owned()).collect(),
                })
                .collect(),
        }))
    }

    async fn embed(&self, request: Request<pb::EmbedRequest>) -> Reply<pb::EmbedReply> {
        caller(&request)?;
        let pb::EmbedRequest { model, texts } = request.into_inner();
        if texts.is_empty() || texts.len() > MAX_EMBED_TEXTS {
            return Err(docchat_common::ApiError::bad_request(format!(
                "name 1 to {MAX_EMBED_TEXTS} texts to encode, not {}",
                texts.len()
            ))
            .into());
        }
        let embedder = self.searcher.embedders.get(&model).ok_or_else(|| {
            docchat_common::ApiError::not_found(format!("embedding model {model} not found"))
        })?;
        let vectors = embedder
            .embed(&texts)
            .await
            .map_err(|e| docchat_common::ApiError::internal("encoding texts", e))?;
        Ok(Response::new(pb::EmbedReply {
            vectors: vectors
                .into_iter()
                .map(|values| pb::Vector { values })
                .collect(),
        }))
    }

    async fn list_documents(
        &self,
        request: Request<pb::ListDocumentsRequest>,
    ) -> Reply<pb::DocumentList> {
        let me = caller(&request)?;
        let r = request.into_inner();
        let page = documents::Order {
            offset: r.offset,
            limit: r.limit,
            sort_column: r.sort_column.clone(),
            ascending: r.ascending,
            group_by_source_chat: r.group_by_source_chat,
        };
        let rows = documents::list(&self.db, &me, &list_filter(&r), &page).await?;
        Ok(Response::new(pb::DocumentList {
            documents: rows.into_iter().map(document_pb).collect(),
        }))
    }

    async fn count_documents(
        &self,
        request: Request<pb::ListDocumentsRequest>,
    ) -> Reply<pb::Count> {
        let me = caller(&request)?;
        let n = documents::count(&self.db, &me, &list_filter(request.get_ref())).await?;
        Ok(Response::new(pb::Count {
            count: i64::try_from(n).unwrap_or(i64::MAX),
        }))
    }

    async fn get_document(&self, request: Request<pb::DocumentRef>) -> Reply<pb::Document> {
        let me = caller(&request)?;
        let doc = documents::get(&self.db, &me, &request.get_ref().id).await?;
        Ok(Response::new(document_in_full_pb(doc)))
    }

    async fn update_document(
        &self,
        request: Request<pb::UpdateDocumentRequest>,
    ) -> Reply<pb::Document> {
        let me = caller(&request)?;
        let pb::UpdateDocumentRequest {
            id,
            name,
            uri,
            metadata_json,
        } = request.into_inner();
        let update = documents::Update {
            name,
            uri,
            metadata: metadata_json
                .map(|json| {
                    collection_settings::metadata(&json).map(|m| collection_settings::stored(&m))
                })
                .transpose()?,
        };
        ok(documents::update(&self.db, &me, &id, update)
            .await
            .map(document_pb))
    }

    async fn list_collections_for_document(
        &self,
        request: Request<pb::DocumentCollectionsRequest>,
    ) -> Reply<pb::CollectionList> {
        let me = caller(&request)?;
        let pb::DocumentCollectionsRequest {
            document_id,
            offset,
            limit,
        } = request.into_inner();
        ok(
            documents::collections_of(&self.db, &me, &document_id, offset, limit)
                .await
                .map(|rows| pb::CollectionList {
                    collections: rows.into_iter().map(collection_pb).collect(),
                    size_limited: false,
                }),
        )
    }

    async fn list_document_chunks(
        &self,
        request: Request<pb::DocumentChunksRequest>,
    ) -> Reply<pb::ChunkList> {
        let me = caller(&request)?;
        let pb::DocumentChunksRequest {
            document_id,
            collection_id,
        } = request.into_inner();
        let collection_id = Some(collection_id).filter(|c| !c.is_empty());
        let (doc, rows, more) = documents::chunks_of(
            &self.db,
            &me,
            &document_id,
            collection_id.as_deref(),
            self.page_bytes,
        )
        .await?;
        Ok(Response::new(pb::ChunkList {
            chunks: rows
                .into_iter()
                .map(|chunk| {
                    let pages = crate::pages::all_pages(&chunk);
                    let hit = crate::search::Hit {
                        chunk,
                        document_name: doc.name.clone(),
                        score: 0.0,
                    };
                    hit_pb(hit, pages)
                })
                .collect(),
            more,
        }))
    }

    async fn delete_document(&self, request: Request<pb::DocumentRef>) -> Reply<Empty> {
        let me = caller(&request)?;
        let doc = documents::delete(&self.db, &me, &request.get_ref().id).await?;
        self.agent_files().drop_bytes(&me, &doc).await;
        self.searcher.vectors.forget(&doc.collection_id);
        self.relay.notify();
        Ok(Response::new(Empty {}))
    }

    async fn read_document_text(
        &self,
        request: Request<pb::DocumentTextRequest>,
    ) -> Reply<pb::DocumentText> {
        let me = caller(&request)?;
        let r = request.into_inner();
        let slice = crate::document_text::read(
            &self.db,
            &me,
            &r.id,
            &r.pages,
            crate::document_text::Position {
                page: r.from_page,
                char: r.from_char,
            },
            r.max_chars,
        )
        .await?;
        Ok(Response::new(pb::DocumentText {
            document: Some(document_pb(slice.document)),
            pages: slice
                .parts
                .into_iter()
                .map(|p| pb::PageText {
                    page: p.page,
                    start_char: p.start_char,
                    text: p.text,
                })
                .collect(),
            next_page: slice.next.map(|n| n.page),
            next_char: slice.next.map_or(0, |n| n.char),
        }))
    }

    async fn get_audio_timestamps(
        &self,
        request: Request<pb::DocumentRef>,
    ) -> Reply<pb::AudioSegmentList> {
        let me = caller(&request)?;
        let segments = documents::audio_segments(&self.db, &me, &request.get_ref().id).await?;
        Ok(Response::new(pb::AudioSegmentList {
            segments: segments.into_iter().map(audio_segment_pb).collect(),
        }))
    }

    async fn put_agent_file(
        &self,
        request: Request<Streaming<pb::AgentFileChunk>>,
    ) -> Reply<pb::Document> {
        let me = caller(&request)?;
        let doc = self.agent_files().put(&me, request.into_inner()).await?;
        self.relay.notify();
        Ok(Response::new(document_pb(doc)))
    }

    type ReadDocumentBytesStream = std::pin::Pin<
        Box<dyn futures::Stream<Item = Result<pb::DocumentBytes, Status>> + Send + 'static>,
    >;

    async fn read_document_bytes(
        &self,
        request: Request<pb::ReadDocumentBytesRequest>,
    ) -> Reply<Self::ReadDocumentBytesStream> {
        let me = caller(&request)?;
        let pb::ReadDocumentBytesRequest { id, owned_only } = request.into_inner();
        let (doc, bytes) = self.agent_files().read(&me, &id, owned_only).await?;
        let first = pb::DocumentBytes {
            part: Some(DocumentPart::Document(document_pb(doc))),
        };
        let rest = bytes.map(|piece| {
            piece
                .map(|data| pb::DocumentBytes {
                    part: Some(DocumentPart::Data(data)),
                })
                .map_err(Status::from)
        });
        Ok(Response::new(Box::pin(
            futures::stream::once(async { Ok(first) }).chain(rest),
        )))
    }

    async fn delete_session_documents(
        &self,
        request: Request<pb::SessionDocumentsRef>,
    ) -> Reply<pb::Count> {
        let me = caller(&request)?;
        let session = &request.get_ref().chat_session_id;
        let n = self.agent_files().delete_session(&me, session).await?;
        self.relay.notify();
        Ok(Response::new(pb::Count {
            count: i64::try_from(n).unwrap_or(i64::MAX),
        }))
    }

    async fn create_tag(&self, request: Request<pb::TagRequest>) -> Reply<pb::Tag> {
        let me = caller(&request)?;
        let pb::TagRequest {
            name,
            description,
            format,
        } = request.into_inner();
        ok(
            crate::tags::create(&self.db, &me, &name, description, format)
                .await
                .map(tag_pb),
        )
    }

    async fn list_tags(&self, request: Request<pb::ListTagsRequest>) -> Reply<pb::TagList> {
        let me = caller(&request)?;
        // Every tag the caller sees is in its user scope (see tags::list).
        let pb::ListTagsRequest {
            linked_only,
            user_scope: _,
        } = request.into_inner();
        ok(crate::tags::list(&self.db, &me, linked_only)
            .await
            .map(|t| pb::TagList {
                tags: t.into_iter().map(tag_pb).collect(),
            }))
    }

    async fn get_tag(&self, request: Request<pb::TagRequest>) -> Reply<pb::Tag> {
        let me = caller(&request)?;
        ok(crate::tags::get(&self.db, &me, &request.get_ref().name)
            .await
            .map(tag_pb))
    }

    async fn update_tag(&self, request: Request<pb::TagRequest>) -> Reply<pb::Tag> {
        let me = caller(&request)?;
        let pb::TagRequest {
            name,
            description,
            format,
        } = request.into_inner();
        ok(
            crate::tags::update(&self.db, &me, &name, description, format)
                .await
                .map(tag_pb),
        )
    }

    async fn delete_tag(&self, request: Request<pb::TagRequest>) -> Reply<pb::Tag> {
        let me = caller(&request)?;
        ok(crate::tags::delete(&self.db, &me, &request.get_ref().name)
            .await
            .map(tag_pb))
    }

    async fn tag_document(&self, request: Request<pb::DocumentTagRequest>) -> Reply<pb::Tag> {
        let me = caller(&request)?;
        let pb::DocumentTagRequest {
            document_id,
            tag_name,
            description,
            format,
        } = request.into_inner();
        ok(
            crate::tags::tag_document(&self.db, &me, &document_id, &tag_name, description, format)
                .await
                .map(tag_pb),
        )
    }

    async fn untag_document(&self, request: Request<pb::DocumentTagRequest>) -> Reply<pb::Tag> {
        let me = caller(&request)?;
        let pb::DocumentTagRequest {
            document_id,
            tag_name,
            ..
        } = request.into_inner();
        ok(
            crate::tags::untag_document(&self.db, &me, &document_id, &tag_name)
                .await
                .map(tag_pb),
        )
    }

    async fn list_documents_for_tags(
        &self,
        request: Request<pb::DocumentsForTagsRequest>,
    ) -> Reply<pb::DocumentList> {
        let me = caller(&request)?;
        let pb::DocumentsForTagsRequest {
            tag_names,
            collection_id,
        } = request.into_inner();
        ok(
            crate::tags::documents_for_tags(&self.db, &me, &tag_names, collection_id.as_deref())
                .await
                .map(|d| pb::DocumentList {
                    documents: d.into_iter().map(document_pb).collect(),
                }),
        )
    }

    async fn create_extractor(
        &self,
        request: Request<pb::ExtractorFields>,
    ) -> Reply<pb::Extractor> {
        let me = caller(&request)?;
        let fields = fields_in(Some(request.into_inner()))?;
        let row = crate::extractors::create(&self.db, &me, fields).await?;
        ok(extractor_pb(row))
    }

    async fn list_extractors(
        &self,
        request: Request<pb::ListExtractorsRequest>,
    ) -> Reply<pb::ExtractorList> {
        let me = caller(&request)?;
        let pb::ListExtractorsRequest {
            offset,
            limit,
            name_filter,
        } = request.into_inner();
        let page =
            crate::extractors::list(&self.db, &me, offset, limit, &name_filter, self.page_bytes)
                .await?;
        ok(page
            .rows
            .into_iter()
            .map(extractor_pb)
            .collect::<ApiResult<Vec<_>>>()
            .map(|extractors| pb::ExtractorList {
                extractors,
                size_limited: page.cut,
            }))
    }

    async fn get_extractor(&self, request: Request<pb::ExtractorRef>) -> Reply<pb::Extractor> {
        let me = caller(&request)?;
        let row = crate::extractors::get(&self.db, &me, &request.get_ref().id).await?;
        ok(extractor_pb(row))
    }

    async fn update_extractor(
        &self,
        request: Request<pb::UpdateExtractorRequest>,
    ) -> Reply<pb::Extractor> {
        let me = caller(&request)?;
        let pb::UpdateExtractorRequest { id, fields } = request.into_inner();
        let fields = fields_in(fields)?;
        let row = crate::extractors::update(&self.db, &me, &id, fields).await?;
        ok(extractor_pb(row))
    }

    async fn delete_extractor(&self, request: Request<pb::ExtractorRef>) -> Reply<Empty> {
        let me = caller(&request)?;
        crate::extractors::delete(&self.db, &me, &request.get_ref().id).await?;
        Ok(Response::new(Empty {}))
    }

    async fn list_chunks(&self, request: Request<pb::ListChunksRequest>) -> Reply<pb::ChunkList> {
        let me = caller(&request)?;
        let r = request.into_inner();
        let (chunks, more) = self
            .searcher
            .chunks_in_order(
                &me,
                &r.collection_id,
                &r.around,
                r.neighbours,
                r.offset,
                u64::from(r.limit),
            )
            .await?;
        Ok(Response::new(pb::ChunkList {
            chunks: chunks
                .into_iter()
                .map(|h| {
                    let pages = crate::pages::all_pages(&h.chunk);
                    hit_pb(h, pages)
                })
                .collect(),
            more,
        }))
    }

    async fn search(&self, request: Request<pb::SearchRequest>) -> Reply<pb::SearchResponse> {
        let me = caller(&request)?;
        let pb::SearchRequest {
            collection_ids,
            document_ids,
            query,
            top_k,
            no_rerank,
        } = request.into_inner();
        let searched = self
            .searcher
            .search(
                &me,
                &collection_ids,
                &document_ids,
                &query,
                top_k as usize,
                !no_rerank,
            )
            .await?;
        Ok(Response::new(pb::SearchResponse {
            hits: searched
                .hits
                .into_iter()
                .map(|h| {
                    let pages = crate::pages::cited(&h.chunk, &query);
                    hit_pb(h, pages)
                })
                .collect(),
            trace_json: serde_json::to_string(&searched.trace).unwrap_or_default(),
            top_similarity: searched.top_similarity,
            rerank: searched.rerank_usage.map(rerank_pb),
        }))
    }
}
