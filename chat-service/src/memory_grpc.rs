//! The tonic implementation of `docchat.chat.v1.MemoryBlockService` over memory_blocks.rs.

use docchat_common::Caller;
use docchat_common::auth::caller;
use docchat_common::error::{ApiError, ApiResult};
use docchat_common::grpc::{Reply, ok};
use docchat_common::limits;
use docchat_common::settings::SettingsClient;
use docchat_common::time::{from_proto, to_proto};
use docchat_proto::chat::v1 as pb;
use docchat_proto::chat::v1::memory_block_service_server::MemoryBlockService;
use docchat_proto::common::v1::Empty;
use sea_orm::DatabaseConnection;
use tonic::{Request, Response};

use crate::memory_blocks::{self as store, Fields, ListQuery, Share, View};

pub struct MemoryGrpc {
    pub db: DatabaseConnection,
    /// Resolves the operator's ceiling on block content (a runtime setting).
    pub settings: SettingsClient,
    /// The byte budget of one list page (`limits::list_page_bytes`).
    pub page_bytes: u64,
}

impl MemoryGrpc {
    /// The ceiling on a block's content in bytes, as the runtime setting says now.
    async fn content_ceiling(&self, me: &Caller) -> ApiResult<usize> {
        let setting = self
            .settings
            .resolve(me)
            .await?
            .limit(limits::MEMORY_BLOCK_CONTENT_SETTING)
            .unwrap_or(limits::MEMORY_BLOCK_CONTENT_BYTES);
        Ok(usize::try_from(setting).unwrap_or(0))
    }
}

fn empty(result: ApiResult<()>) -> Reply<Empty> {
    ok(result.map(|()| Empty {}))
}

fn fields(f: Option<pb::MemoryBlockFields>) -> Fields {
    let pb::MemoryBlockFields {
        name,
        content,
        system_prompt_amendment,
        injection_mode,
        access_mode,
        max_content_length,
    } = f.unwrap_or_default();
    Fields {
        name,
        content,
        system_prompt_amendment,
        injection_mode,
        access_mode,
        max_content_length,
    }
}

pub fn block_pb(v: View) -> pb::MemoryBlock {
    let View {
        block,
        is_owner,
        user_count,
        group_count,
    } = v;
    pb::MemoryBlock {
        id: block.id,
        name: block.name,
        content: block.content,
        system_prompt_amendment: block.system_prompt_amendment,
        injection_mode: block.injection_mode,
        access_mode: block.access_mode,
        user_id: block.owner_id,
        username: block.owner_username,
        created_at: Some(to_proto(block.created_at)),
        updated_at: Some(to_proto(block.updated_at)),
        is_public: block.is_public,
        is_owner,
        max_content_length: block.max_content_length,
        is_auto: block.is_auto,
        user_count,
        group_count,
    }
}

#[tonic::async_trait]
impl MemoryBlockService for MemoryGrpc {
    async fn create_memory_block(
        &self,
        request: Request<pb::MemoryBlockFields>,
    ) -> Reply<pb::MemoryBlock> {
        let me = caller(&request)?;
        let f = fields(Some(request.into_inner()));
        let ceiling = self.content_ceiling(&me).await?;
        ok(store::create(&self.db, &me, f, ceiling).await.map(block_pb))
    }

    async fn list_memory_blocks(
        &self,
        request: Request<pb::ListMemoryBlocksRequest>,
    ) -> Reply<pb::MemoryBlockList> {
        let me = caller(&request)?;
        let pb::ListMemoryBlocksRequest {
            offset,
            limit,
            name_filter,
            updated_after,
        } = request.into_inner();
        let q = ListQuery {
            offset,
            limit,
            name_filter,
            updated_after: updated_after.as_ref().map(from_proto),
        };
        ok(store::list(&self.db, &me, q, self.page_bytes)
            .await
            .map(|page| pb::MemoryBlockList {
                items: page.items.into_iter().map(block_pb).collect(),
                total: page.total,
                size_limited: page.size_limited,
            }))
    }

    async fn get_memory_block(
        &self,
        request: Request<pb::MemoryBlockRef>,
    ) -> Reply<pb::MemoryBlock> {
        let me = caller(&request)?;
        ok(store::get(&self.db, &me, &request.get_ref().id)
            .await
            .map(block_pb))
    }

    async fn update_memory_block(
        &self,
        request: Request<pb::UpdateMemoryBlockRequest>,
    ) -> Reply<Empty> {
        let me = caller(&request)?;
        let pb::UpdateMemoryBlockRequest {
            id,
            fields: f,
            append,
        } = request.into_inner();
        let ceiling = self.content_ceiling(&me).await?;
        if !append {
            return empty(store::update(&self.db, &me, &id, fields(f), ceiling).await);
        }
        match fields(f) {
            Fields {
                content: Some(text),
                name: None,
                system_prompt_amendment: None,
                injection_mode: None,
                access_mode: None,
                max_content_length: None,
            } => empty(store::append(&self.db, &me, &id, &text, ceiling).await),
            _ => Err(ApiError::bad_request("an append sends the content alone").into()),
        }
    }

    async fn delete_memory_block(&self, request: Request<pb::MemoryBlockRef>) -> Reply<Empty> {
        let me = caller(&request)?;
        empty(store::delete(&self.db, &me, &request.get_ref().id).await)
    }

    async fn share_memory_block(&self, request: Request<pb::MemoryBlockShare>) -> Reply<Empty> {
        let me = caller(&request)?;
        let pb::MemoryBlockShare {
            block_id,
            group,
            principal,
            username,
            can_edit,
        } = request.into_inner();
        let share = Share {
            group,
            principal,
            username,
            can_edit,
        };
        empty(store::share(&self.db, &me, &block_id, share).await)
    }

    async fn unshare_memory_block(&self, request: Request<pb::MemoryBlockShare>) -> Reply<Empty> {
        let me = caller(&request)?;
        let s = request.get_ref();
        empty(store::unshare(&self.db, &me, &s.block_id, s.group, &s.principal).await)
    }

    async fn list_memory_block_shares(
        &self,
        request: Request<pb::ListSharesRequest>,
    ) -> Reply<pb::MemoryBlockShareList> {
        let me = caller(&request)?;
        let r = request.get_ref();
        ok(store::shares(&self.db, &me, &r.block_id, r.group)
            .await
            .map(|rows| pb::MemoryBlockShareList {
                shares: rows
                    .into_iter()
                    .map(|s| pb::MemoryBlockShare {
                        group: r.group,
                        block_id: s.block_id,
                        principal: s.principal,
                        username: s.username,
                        can_edit: s.can_edit,
                    })
                    .collect(),
            }))
    }

    async fn set_memory_block_privacy(
        &self,
        request: Request<pb::MemoryBlockPrivacy>,
    ) -> Reply<Empty> {
        let me = caller(&request)?;
        let p = request.get_ref();
        empty(store::set_privacy(&self.db, &me, &p.block_id, p.is_public, p.public_edit).await)
    }

    async fn get_public_permissions(
        &self,
        request: Request<pb::MemoryBlockRef>,
    ) -> Reply<pb::PublicPermissions> {
        let me = caller(&request)?;
        ok(
            store::public_permissions(&self.db, &me, &request.get_ref().id)
                .await
                .map(|(is_public, public_edit)| pb::PublicPermissions {
                    is_public,
                    public_edit,
                }),
        )
    }

    async fn get_default_memory_blocks(
        &self,
        request: Request<Empty>,
    ) -> Reply<pb::DefaultMemoryBlocks> {
        let me = caller(&request)?;
        let llm = store::default_block(&self.db, &me, "llm").await?;
        let agent = store::default_block(&self.db, &me, "agent").await?;
        Ok(Response::new(pb::DefaultMemoryBlocks {
            llm: llm.map(block_pb),
            agent: agent.map(block_pb),
        }))
    }

    async fn set_default_memory_block(
        &self,
        request: Request<pb::SetDefaultMemoryBlockRequest>,
    ) -> Reply<pb::DefaultMemoryBlock> {
        let me = caller(&request)?;
        let pb::SetDefaultMemoryBlockRequest { scope, block_id } = request.into_inner();
        let block = store::set_default(&self.db, &me, &scope, block_id.as_deref()).await?;
        Ok(Response::new(pb::DefaultMemoryBlock {
            scope,
            block: block.map(block_pb),
        }))
    }
}
