//! The tonic implementation of `docchat.ingest.v1.IngestService`.

use docchat_common::auth::caller;
use docchat_common::error::ApiResult;
use docchat_common::outbox::OutboxRelay;
use docchat_common::time::{opt_to_proto, to_proto};
use docchat_proto::common::v1::{Empty, PageRequest};
use docchat_proto::ingest::v1 as pb;
use docchat_proto::ingest::v1::ingest_service_server::IngestService;
use sea_orm::DatabaseConnection;
use tonic::{Request, Response, Status};

use crate::collections::{self, CollectionView};
use crate::entities::collections as entity;

pub struct IngestGrpc {
    pub db: DatabaseConnection,
    pub relay: OutboxRelay,
}

type Reply<T> = Result<Response<T>, Status>;

fn ok<T>(result: ApiResult<T>) -> Reply<T> {
    result.map(Response::new).map_err(Status::from)
}

pub fn collection_pb(view: CollectionView) -> pb::Collection {
    let entity::Model {
        id,
        owner_id: _,
        owner_username,
        name,
        description,
        embedding_model,
        is_public,
        status,
        document_count,
        document_size,
        created_at,
        updated_at,
        description_auto_generated,
        description_generated_at,
        description_dirty_at,
        description_generation_started_at,
    } = view.collection;
    pb::Collection {
        id,
        name,
        description,
        embedding_model,
        document_count,
        document_size,
        created_at: Some(to_proto(created_at)),
        updated_at: Some(to_proto(updated_at)),
        user_count: view.user_count,
        is_public,
        username: owner_username,
        sessions_count: view.sessions_count,
        status,
        description_auto_generated,
        description_generated_at: opt_to_proto(description_generated_at),
        description_dirty_at: opt_to_proto(description_dirty_at),
        description_generation_started_at: opt_to_proto(description_generation_started_at),
    }
}

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
        } = request.into_inner();
        ok(
            collections::create(&self.db, &me, &name, &description, &embedding_model)
                .await
                .map(collection_pb),
        )
    }

    async fn list_collections(&self, request: Request<PageRequest>) -> Reply<pb::CollectionList> {
        let me = caller(&request)?;
        let PageRequest {
            offset,
            limit,
            sort_column,
            ascending,
        } = request.into_inner();
        ok(
            collections::list(&self.db, &me, offset, limit, &sort_column, ascending)
                .await
                .map(|rows| pb::CollectionList {
                    collections: rows.into_iter().map(collection_pb).collect(),
                }),
        )
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
        self.relay.notify();
        Ok(Response::new(Empty {}))
    }
}
