//! ingest-service calls a test makes through the stack: uploads, collections, ingestion
//! jobs, search, agent files.

use std::time::Duration;

use docchat_common::Caller;
use docchat_common::config::Service;
use docchat_proto::ingest::v1 as pb;
use docchat_proto::ingest::v1::ingest_service_client::IngestServiceClient;
use docchat_proto::ingest::v1::upload_chunk::Part;
use docchat_proto::ingest::v1::{agent_file_chunk, document_bytes};
use tonic::transport::Channel;

use crate::Stack;

impl Stack {
    /// A client of the stack's ingest-service.
    pub fn ingest_client(&self) -> IngestServiceClient<Channel> {
        let ingest = self.ingest.as_ref().expect("the stack runs ingest-service");
        IngestServiceClient::new(ingest.channel())
    }

    /// Uploads `bytes` as `name`, in 4 KiB pieces.
    pub async fn upload(
        &self,
        who: &Caller,
        name: &str,
        bytes: &[u8],
    ) -> Result<pb::UploadedFile, tonic::Status> {
        let mut parts = vec![pb::UploadChunk {
            part: Some(Part::Meta(pb::UploadMeta {
                filename: name.into(),
            })),
        }];
        for piece in bytes.chunks(4096) {
            parts.push(pb::UploadChunk {
                part: Some(Part::Data(piece.to_vec())),
            });
        }
        let request = self.req(Service::Ingest, who, tokio_stream::iter(parts));
        self.ingest_client()
            .upload(request)
            .await
            .map(|r| r.into_inner())
    }

    /// Stores `bytes` as the file `path` of chat session `session` (PutAgentFile, as
    /// agent-service does), in 4 KiB pieces; with `document_id` non-empty, as new bytes of
    /// that document.
    pub async fn put_agent_file(
        &self,
        who: &Caller,
        session: &str,
        path: &str,
        document_id: &str,
        bytes: &[u8],
    ) -> Result<pb::Document, tonic::Status> {
        let mut parts = vec![pb::AgentFileChunk {
            part: Some(agent_file_chunk::Part::Meta(pb::AgentFileMeta {
                chat_session_id: session.into(),
                path: path.into(),
                document_id: document_id.into(),
            })),
        }];
        for piece in bytes.chunks(4096) {
            parts.push(pb::AgentFileChunk {
                part: Some(agent_file_chunk::Part::Data(piece.to_vec())),
            });
        }
        let request = self.req(Service::Ingest, who, tokio_stream::iter(parts));
        self.ingest_client()
            .put_agent_file(request)
            .await
            .map(|r| r.into_inner())
    }

    /// A document's stored file through ReadDocumentBytes: the document, and the data
    /// messages' lengths and bytes in order.
    pub async fn read_document_bytes(
        &self,
        who: &Caller,
        id: &str,
        owned_only: bool,
    ) -> Result<(pb::Document, Vec<usize>, Vec<u8>), tonic::Status> {
        let request = pb::ReadDocumentBytesRequest {
            id: id.into(),
            owned_only,
        };
        let mut stream = self
            .ingest_client()
            .read_document_bytes(self.req(Service::Ingest, who, request))
            .await?
            .into_inner();
        let mut doc = None;
        let (mut pieces, mut bytes) = (Vec::new(), Vec::new());
        while let Some(message) = stream.message().await? {
            match message.part {
                Some(document_bytes::Part::Document(d)) => {
                    assert!(
                        doc.is_none() && bytes.is_empty(),
                        "the document comes first, once"
                    );
                    doc = Some(d);
                }
                Some(document_bytes::Part::Data(data)) => {
                    pieces.push(data.len());
                    bytes.extend_from_slice(&data);
                }
                None => {}
            }
        }
        Ok((doc.expect("the stream carries its document"), pieces, bytes))
    }

    /// Creates a collection (the default embedder).
    pub async fn collection(&self, who: &Caller, name: &str) -> pb::Collection {
        self.ingest_client()
            .create_collection(self.req(
                Service::Ingest,
                who,
                pb::CreateCollectionRequest {
                    name: name.into(),
                    description: String::new(),
                    embedding_model: String::new(),
                    ..Default::default()
                },
            ))
            .await
            .unwrap()
            .into_inner()
    }

    /// Starts ingesting an upload into a collection (no summaries, no questions).
    pub async fn ingest(
        &self,
        who: &Caller,
        upload: &str,
        collection: &str,
    ) -> Result<pb::Job, tonic::Status> {
        self.ingest_with(
            who,
            pb::IngestUploadRequest {
                upload_id: upload.into(),
                collection_id: collection.into(),
                ..Default::default()
            },
        )
        .await
    }

    /// Starts ingesting as `request` asks (its upload, collection and options).
    pub async fn ingest_with(
        &self,
        who: &Caller,
        request: pb::IngestUploadRequest,
    ) -> Result<pb::Job, tonic::Status> {
        self.ingest_client()
            .ingest_upload(self.req(Service::Ingest, who, request))
            .await
            .map(|r| r.into_inner())
    }

    /// Hybrid search in one collection.
    pub async fn search(
        &self,
        who: &Caller,
        collection: &str,
        query: &str,
        top_k: u32,
    ) -> Result<Vec<pb::SearchHit>, tonic::Status> {
        let request = pb::SearchRequest {
            collection_ids: vec![collection.to_owned()],
            document_ids: vec![],
            query: query.to_owned(),
            top_k,
            no_rerank: false,
        };
        self.ingest_client()
            .search(self.req(Service::Ingest, who, request))
            .await
            .map(|r| r.into_inner().hits)
    }

    /// Waits (up to 120 s) for a job to finish: completed, failed or canceled.
    pub async fn finished(&self, who: &Caller, job: &str) -> pb::Job {
        let deadline = tokio::time::Instant::now() + Duration::from_secs(120);
        let mut client = self.ingest_client();
        loop {
            let j = client
                .get_job(self.req(Service::Ingest, who, pb::JobRef { id: job.into() }))
                .await
                .unwrap()
                .into_inner();
            if matches!(j.status.as_str(), "completed" | "failed" | "canceled") {
                return j;
            }
            assert!(
                tokio::time::Instant::now() < deadline,
                "job {job} stuck in {}",
                j.status
            );
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    }
}
