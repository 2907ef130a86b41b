//! /api/v1/memory_blocks and /api/v1/users/current/default_memory_blocks (SPEC.md "Memory
//! blocks"; shapes of the h2oGPTe client's MemoryBlock models). chat-service keeps the
//! blocks and decides access; here usernames become user ids (admin-service) and the
//! permission arrays become edit flags.

use actix_web::{HttpResponse, delete, get, post, put, web};
use chrono::{DateTime, Utc};
use docchat_common::time::{parse_datetime, to_proto};
use docchat_proto::admin::v1::FindUserRequest;
use docchat_proto::chat::v1 as pb;
use docchat_proto::common::v1::Empty;
use serde::{Deserialize, Serialize};
use utoipa::{IntoParams, ToSchema};
use utoipa_actix_web::service_config::ServiceConfig;

use super::{page, ts_req};
use crate::auth::Api;
use crate::error::{ErrorBody, HttpError, HttpResult, bad_request};

/// The share and public permission value granting edit (read is always included).
pub const EDIT: &str = "svc/memory_block/edit";
/// The same grant as the h2oGPTe client's documentation spells it; accepted, never sent.
const CLIENT_EDIT: &str = "h2ogpte/memory_block/edit";

/// Create and PUT bodies: on PUT only the fields sent change.
#[derive(Debug, Default, Deserialize, ToSchema)]
pub struct MemoryBlockBody {
    /// Unique per user; required on create.
    pub name: Option<String>,
    pub content: Option<String>,
    pub system_prompt_amendment: Option<String>,
    /// system_prompt (default), user_instruction, agent_file or agent_tool.
    pub injection_mode: Option<String>,
    /// read, write or read_write (default).
    pub access_mode: Option<String>,
    /// Characters of content; default 10000, 0 unlimited. Every block's content is also
    /// capped at the operator's runtime setting memory_block_max_content_bytes (bytes of
    /// UTF-8, default 1 MiB; larger is a 413), whatever this says.
    pub max_content_length: Option<i64>,
}

impl From<MemoryBlockBody> for pb::MemoryBlockFields {
    fn from(b: MemoryBlockBody) -> Self {
        let MemoryBlockBody {
            name,
            content,
            system_prompt_amendment,
            injection_mode,
            access_mode,
            max_content_length,
        } = b;
        pb::MemoryBlockFields {
            name,
            content,
            system_prompt_amendment,
            injection_mode,
            access_mode,
            max_content_length,
        }
    }
}

#[derive(Debug, Serialize, ToSchema)]
pub struct MemoryBlock {
    pub id: String,
    pub name: String,
    pub content: String,
    pub system_prompt_amendment: String,
    pub injection_mode: String,
    pub access_mode: String,
    pub user_id: String,
    pub username: String,
    pub created_at: DateTime<Utc>,
    pub updated_at: DateTime<Utc>,
    pub is_public: bool,
    pub is_owner: bool,
    pub max_content_length: i64,
    pub is_auto: bool,
    pub user_count: i64,
    pub group_count: i64,
}

impl TryFrom<pb::MemoryBlock> for MemoryBlock {
    type Error = HttpError;

    fn try_from(b: pb::MemoryBlock) -> Result<Self, HttpError> {
        let pb::MemoryBlock {
            id,
            name,
            content,
            system_prompt_amendment,
            injection_mode,
            access_mode,
            user_id,
            username,
            created_at,
            updated_at,
            is_public,
            is_owner,
            max_content_length,
            is_auto,
            user_count,
            group_count,
        } = b;
        Ok(MemoryBlock {
            id,
            name,
            content,
            system_prompt_amendment,
            injection_mode,
            access_mode,
            user_id,
            username,
            created_at: ts_req(created_at)?,
            updated_at: ts_req(updated_at)?,
            is_public,
            is_owner,
            max_content_length,
            is_auto,
            user_count,
            group_count,
        })
    }
}

#[derive(Debug, Serialize, ToSchema)]
pub struct MemoryBlockList {
    pub items: Vec<MemoryBlock>,
    pub total: i64,
}

#[derive(Debug, Deserialize, IntoParams)]
pub struct MemoryBlockListQuery {
    /// Rows to skip.
    #[param(minimum = 0, maximum = 9_223_372_036_854_775_807_i64)]
    pub offset: Option<u64>,
    /// Rows to return (default 100; more than 1000 returns 1000).
    #[param(minimum = 0, maximum = 9_223_372_036_854_775_807_i64)]
    pub limit: Option<u64>,
    /// A substring of the name.
    pub name_filter: Option<String>,
    /// ISO 8601; the client's `2025-01-01T00:00:00.123456+0000` too.
    pub updated_after: Option<String>,
}

/// Share bodies: omitted, null or empty permissions mean read only.
#[derive(Debug, Default, Deserialize, ToSchema)]
pub struct SharePermissionsBody {
    pub permissions: Option<Vec<String>>,
}

#[derive(Debug, Serialize, ToSchema)]
pub struct SharePermission {
    pub username: String,
    pub permissions: Vec<String>,
}

#[derive(Debug, Serialize, ToSchema)]
pub struct GroupSharePermission {
    pub group_id: String,
    pub permissions: Vec<String>,
}

#[derive(Debug, Deserialize, ToSchema)]
pub struct PrivacyBody {
    pub is_public: bool,
    /// Omitted: public edit; empty: public read-only. Ignored when is_public is false.
    pub permissions: Option<Vec<String>>,
}

#[derive(Debug, Deserialize, ToSchema)]
pub struct SetDefaultBody {
    /// llm or agent.
    pub scope: String,
    /// Omitted or null clears the default.
    pub memory_block_id: Option<String>,
}

#[derive(Debug, Serialize, ToSchema)]
pub struct SetDefaultResponse {
    pub scope: String,
    pub memory_block: Option<MemoryBlock>,
}

#[derive(Debug, Serialize, ToSchema)]
pub struct DefaultsByScope {
    pub llm: Option<MemoryBlock>,
    pub agent: Option<MemoryBlock>,
}

#[derive(Debug, Serialize, ToSchema)]
pub struct DefaultMemoryBlocks {
    pub defaults: DefaultsByScope,
}

/// Whether a permissions array grants edit; a value that is not a memory block permission
/// is a 400.
fn can_edit(permissions: Option<&[String]>) -> HttpResult<bool> {
    let mut edit = false;
    for p in permissions.unwrap_or_default() {
        match p.as_str() {
            EDIT | CLIENT_EDIT => edit = true,
            other => {
                return Err(bad_request(format!(
                    "unknown memory block permission {other}; the edit permission is {EDIT}"
                )));
            }
        }
    }
    Ok(edit)
}

/// The direct user (`group` false) or group shares of a block.
async fn shares(api: &Api, block_id: String, group: bool) -> HttpResult<Vec<pb::MemoryBlockShare>> {
    let request = pb::ListSharesRequest { block_id, group };
    let list = api
        .memory_blocks()
        .list_memory_block_shares(request)
        .await?;
    Ok(list.into_inner().shares)
}

/// Removes a user (`principal` a user id) or group share: 204.
async fn unshare(
    api: &Api,
    block_id: String,
    group: bool,
    principal: String,
) -> HttpResult<HttpResponse> {
    let share = pb::MemoryBlockShare {
        block_id,
        group,
        principal,
        ..pb::MemoryBlockShare::default()
    };
    api.memory_blocks().unshare_memory_block(share).await?;
    Ok(HttpResponse::NoContent().finish())
}

fn permissions_of(edit: bool) -> Vec<String> {
    if edit {
        vec![EDIT.to_owned()]
    } else {
        Vec::new()
    }
}

/// The query's updated_after: `+` decoded as a space is put back first.
fn updated_after(value: Option<String>) -> HttpResult<Option<docchat_proto::Timestamp>> {
    let Some(raw) = value.filter(|v| !v.is_empty()) else {
        return Ok(None);
    };
    let t = parse_datetime(&raw.replace(' ', "+"))
        .ok_or_else(|| bad_request(format!("updated_after {raw} is not an ISO 8601 time")))?;
    Ok(Some(to_proto(t)))
}

/// Registers this module's routes.
pub fn configure(cfg: &mut ServiceConfig) {
    cfg.service(create_memory_block)
        .service(list_memory_blocks)
        .service(get_memory_block)
        .service(update_memory_block)
        .service(delete_memory_block)
        .service(share_memory_block)
        .service(unshare_memory_block)
        .service(list_memory_block_permissions)
        .service(share_memory_block_with_group)
        .service(unshare_memory_block_from_group)
        .service(list_memory_block_group_permissions)
        .service(set_memory_block_privacy)
        .service(list_public_memory_block_permissions)
        .service(get_default_memory_blocks)
        .service(set_default_memory_block);
}

#[utoipa::path(tag = "Memory blocks", request_body = MemoryBlockBody,
    responses((status = 201, body = MemoryBlock), (status = 400, body = ErrorBody), (status = 401, body = ErrorBody), (status = 409, body = ErrorBody)),
    security(("bearer" = [])))]
#[post("/memory_blocks")]
pub async fn create_memory_block(
    api: Api,
    body: web::Json<MemoryBlockBody>,
) -> HttpResult<HttpResponse> {
    let body = body.into_inner();
    if body.name.is_none() {
        return Err(bad_request("name is required"));
    }
    let created = api
        .memory_blocks()
        .create_memory_block(pb::MemoryBlockFields::from(body))
        .await?;
    Ok(HttpResponse::Created().json(MemoryBlock::try_from(created.into_inner())?))
}

/// A page holds at most 8 MiB of names, contents and amendments (at least one block), so it
/// can hold fewer than `limit` while `total` counts more; then `x-next-offset` names the
/// offset of the next page.
#[utoipa::path(tag = "Memory blocks", params(MemoryBlockListQuery),
    responses((status = 200, body = MemoryBlockList, headers(("x-next-offset" = u64, description = "set when the page stopped before its limit at its byte budget: the offset of the next page"))),
        (status = 400, body = ErrorBody), (status = 401, body = ErrorBody)),
    security(("bearer" = [])))]
#[get("/memory_blocks")]
pub async fn list_memory_blocks(
    api: Api,
    query: web::Query<MemoryBlockListQuery>,
) -> HttpResult<HttpResponse> {
    let MemoryBlockListQuery {
        offset,
        limit,
        name_filter,
        updated_after: after,
    } = query.into_inner();
    let (offset, limit) = page(offset, limit)?;
    let request = pb::ListMemoryBlocksRequest {
        offset,
        limit,
        name_filter: name_filter.unwrap_or_default(),
        updated_after: updated_after(after)?,
    };
    let list = api
        .memory_blocks()
        .list_memory_blocks(request)
        .await?
        .into_inner();
    let body = MemoryBlockList {
        items: list
            .items
            .into_iter()
            .map(MemoryBlock::try_from)
            .collect::<HttpResult<_>>()?,
        total: super::json_int(list.total),
    };
    let rows = body.items.len();
    Ok(super::list_answer(&body, offset, rows, list.size_limited))
}

#[utoipa::path(tag = "Memory blocks", params(("memory_block_id" = String, Path)),
    responses((status = 200, body = MemoryBlock), (status = 401, body = ErrorBody), (status = 404, body = ErrorBody)),
    security(("bearer" = [])))]
#[get("/memory_blocks/{memory_block_id}")]
pub async fn get_memory_block(
    api: Api,
    path: web::Path<String>,
) -> HttpResult<web::Json<MemoryBlock>> {
    let id = path.into_inner();
    let found = api
        .memory_blocks()
        .get_memory_block(pb::MemoryBlockRef { id })
        .await?;
    Ok(web::Json(found.into_inner().try_into()?))
}

#[utoipa::path(tag = "Memory blocks", params(("memory_block_id" = String, Path)), request_body = MemoryBlockBody,
    responses((status = 204), (status = 400, body = ErrorBody), (status = 401, body = ErrorBody), (status = 403, body = ErrorBody), (status = 404, body = ErrorBody), (status = 409, body = ErrorBody)),
    security(("bearer" = [])))]
#[put("/memory_blocks/{memory_block_id}")]
pub async fn update_memory_block(
    api: Api,
    path: web::Path<String>,
    body: web::Json<MemoryBlockBody>,
) -> HttpResult<HttpResponse> {
    let request = pb::UpdateMemoryBlockRequest {
        id: path.into_inner(),
        fields: Some(body.into_inner().into()),
        append: false,
    };
    api.memory_blocks().update_memory_block(request).await?;
    Ok(HttpResponse::NoContent().finish())
}

#[utoipa::path(tag = "Memory blocks", params(("memory_block_id" = String, Path)),
    responses((status = 204), (status = 401, body = ErrorBody), (status = 403, body = ErrorBody), (status = 404, body = ErrorBody)),
    security(("bearer" = [])))]
#[delete("/memory_blocks/{memory_block_id}")]
pub async fn delete_memory_block(api: Api, path: web::Path<String>) -> HttpResult<HttpResponse> {
    let id = path.into_inner();
    api.memory_blocks()
        .delete_memory_block(pb::MemoryBlockRef { id })
        .await?;
    Ok(HttpResponse::NoContent().finish())
}

#[utoipa::path(tag = "Memory blocks", params(("memory_block_id" = String, Path), ("username" = String, Path)), request_body = SharePermissionsBody,
    responses((status = 204), (status = 400, body = ErrorBody), (status = 401, body = ErrorBody), (status = 403, body = ErrorBody), (status = 404, body = ErrorBody)),
    security(("bearer" = [])))]
#[put("/memory_blocks/{memory_block_id}/permissions/{username}")]
pub async fn share_memory_block(
    api: Api,
    path: web::Path<(String, String)>,
    body: Option<web::Json<SharePermissionsBody>>,
) -> HttpResult<HttpResponse> {
    let (block_id, username) = path.into_inner();
    let body = body.map(web::Json::into_inner).unwrap_or_default();
    let can_edit = can_edit(body.permissions.as_deref())?;
    let user = api
        .admin()
        .find_user(FindUserRequest { username })
        .await?
        .into_inner();
    let share = pb::MemoryBlockShare {
        block_id,
        group: false,
        principal: user.id,
        username: user.username,
        can_edit,
    };
    api.memory_blocks().share_memory_block(share).await?;
    Ok(HttpResponse::NoContent().finish())
}

#[utoipa::path(tag = "Memory blocks", params(("memory_block_id" = String, Path), ("username" = String, Path)),
    responses((status = 204), (status = 401, body = ErrorBody), (status = 403, body = ErrorBody), (status = 404, body = ErrorBody)),
    security(("bearer" = [])))]
#[delete("/memory_blocks/{memory_block_id}/permissions/{username}")]
pub async fn unshare_memory_block(
    api: Api,
    path: web::Path<(String, String)>,
) -> HttpResult<HttpResponse> {
    let (block_id, username) = path.into_inner();
    let user = api
        .admin()
        .find_user(FindUserRequest { username })
        .await?
        .into_inner();
    unshare(&api, block_id, false, user.id).await
}

#[utoipa::path(tag = "Memory blocks", params(("memory_block_id" = String, Path)),
    responses((status = 200, body = Vec<SharePermission>), (status = 401, body = ErrorBody), (status = 404, body = ErrorBody)),
    security(("bearer" = [])))]
#[get("/memory_blocks/{memory_block_id}/permissions")]
pub async fn list_memory_block_permissions(
    api: Api,
    path: web::Path<String>,
) -> HttpResult<web::Json<Vec<SharePermission>>> {
    Ok(web::Json(
        shares(&api, path.into_inner(), false)
            .await?
            .into_iter()
            .map(|s| SharePermission {
                username: s.username,
                permissions: permissions_of(s.can_edit),
            })
            .collect(),
    ))
}

#[utoipa::path(tag = "Memory blocks", params(("memory_block_id" = String, Path), ("group_id" = String, Path)), request_body = SharePermissionsBody,
    responses((status = 204), (status = 400, body = ErrorBody), (status = 401, body = ErrorBody), (status = 403, body = ErrorBody), (status = 404, body = ErrorBody)),
    security(("bearer" = [])))]
#[put("/memory_blocks/{memory_block_id}/group_permissions/{group_id}")]
pub async fn share_memory_block_with_group(
    api: Api,
    path: web::Path<(String, String)>,
    body: Option<web::Json<SharePermissionsBody>>,
) -> HttpResult<HttpResponse> {
    // chat-service checks the group-sharing permission, with the other memory-block rules.
    let (block_id, group_id) = path.into_inner();
    let body = body.map(web::Json::into_inner).unwrap_or_default();
    let share = pb::MemoryBlockShare {
        block_id,
        group: true,
        principal: group_id,
        username: String::new(),
        can_edit: can_edit(body.permissions.as_deref())?,
    };
    api.memory_blocks().share_memory_block(share).await?;
    Ok(HttpResponse::NoContent().finish())
}

#[utoipa::path(tag = "Memory blocks", params(("memory_block_id" = String, Path), ("group_id" = String, Path)),
    responses((status = 204), (status = 401, body = ErrorBody), (status = 403, body = ErrorBody), (status = 404, body = ErrorBody)),
    security(("bearer" = [])))]
#[delete("/memory_blocks/{memory_block_id}/group_permissions/{group_id}")]
pub async fn unshare_memory_block_from_group(
    api: Api,
    path: web::Path<(String, String)>,
) -> HttpResult<HttpResponse> {
    // Owner only, as every unshare; no group-sharing permission is needed to take a share
    // back (an owner who lost it can still withdraw what they shared).
    let (block_id, group_id) = path.into_inner();
    unshare(&api, block_id, true, group_id).await
}

#[utoipa::path(tag = "Memory blocks", params(("memory_block_id" = String, Path)),
    responses((status = 200, body = Vec<GroupSharePermission>), (status = 401, body = ErrorBody), (status = 404, body = ErrorBody)),
    security(("bearer" = [])))]
#[get("/memory_blocks/{memory_block_id}/group_permissions")]
pub async fn list_memory_block_group_permissions(
    api: Api,
    path: web::Path<String>,
) -> HttpResult<web::Json<Vec<GroupSharePermission>>> {
    Ok(web::Json(
        shares(&api, path.into_inner(), true)
            .await?
            .into_iter()
            .map(|s| GroupSharePermission {
                group_id: s.principal,
                permissions: permissions_of(s.can_edit),
            })
            .collect(),
    ))
}

#[utoipa::path(tag = "Memory blocks", params(("memory_block_id" = String, Path)), request_body = PrivacyBody,
    responses((status = 204), (status = 400, body = ErrorBody), (status = 401, body = ErrorBody), (status = 403, body = ErrorBody), (status = 404, body = ErrorBody)),
    security(("bearer" = [])))]
#[put("/memory_blocks/{memory_block_id}/privacy")]
pub async fn set_memory_block_privacy(
    api: Api,
    path: web::Path<String>,
    body: web::Json<PrivacyBody>,
) -> HttpResult<HttpResponse> {
    let PrivacyBody {
        is_public,
        permissions,
    } = body.into_inner();
    // Omitted permissions make a public block editable by everyone (the client's default).
    let public_edit = match permissions {
        None => true,
        Some(list) => can_edit(Some(&list))?,
    };
    let request = pb::MemoryBlockPrivacy {
        block_id: path.into_inner(),
        is_public,
        public_edit,
    };
    api.memory_blocks()
        .set_memory_block_privacy(request)
        .await?;
    Ok(HttpResponse::NoContent().finish())
}

#[utoipa::path(tag = "Memory blocks", params(("memory_block_id" = String, Path)),
    responses((status = 200, body = Vec<String>), (status = 401, body = ErrorBody)),
    security(("bearer" = [])))]
#[get("/memory_blocks/{memory_block_id}/public_permissions")]
pub async fn list_public_memory_block_permissions(
    api: Api,
    path: web::Path<String>,
) -> HttpResult<web::Json<Vec<String>>> {
    let id = path.into_inner();
    let found = api
        .memory_blocks()
        .get_public_permissions(pb::MemoryBlockRef { id })
        .await?
        .into_inner();
    Ok(web::Json(permissions_of(
        found.is_public && found.public_edit,
    )))
}

#[utoipa::path(tag = "Memory blocks",
    responses((status = 200, body = DefaultMemoryBlocks), (status = 401, body = ErrorBody)),
    security(("bearer" = [])))]
#[get("/users/current/default_memory_blocks")]
pub async fn get_default_memory_blocks(api: Api) -> HttpResult<web::Json<DefaultMemoryBlocks>> {
    let found = api
        .memory_blocks()
        .get_default_memory_blocks(Empty {})
        .await?
        .into_inner();
    Ok(web::Json(DefaultMemoryBlocks {
        defaults: DefaultsByScope {
            llm: found.llm.map(MemoryBlock::try_from).transpose()?,
            agent: found.agent.map(MemoryBlock::try_from).transpose()?,
        },
    }))
}

#[utoipa::path(tag = "Memory blocks", request_body = SetDefaultBody,
    responses((status = 200, body = SetDefaultResponse), (status = 400, body = ErrorBody), (status = 401, body = ErrorBody), (status = 404, body = ErrorBody)),
    security(("bearer" = [])))]
#[put("/users/current/default_memory_blocks")]
pub async fn set_default_memory_block(
    api: Api,
    body: web::Json<SetDefaultBody>,
) -> HttpResult<web::Json<SetDefaultResponse>> {
    let SetDefaultBody {
        scope,
        memory_block_id,
    } = body.into_inner();
    let request = pb::SetDefaultMemoryBlockRequest {
        scope,
        block_id: memory_block_id,
    };
    let set = api
        .memory_blocks()
        .set_default_memory_block(request)
        .await?
        .into_inner();
    Ok(web::Json(SetDefaultResponse {
        scope: set.scope,
        memory_block: set.block.map(MemoryBlock::try_from).transpose()?,
    }))
}
