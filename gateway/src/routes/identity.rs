//! Identity (ARCHITECTURE.md §9): users, API keys, roles, permissions.

use actix_web::{HttpResponse, delete, get, patch, post, put, web};
use chrono::{DateTime, Utc};
use docchat_proto::admin::v1 as pb;
use docchat_proto::common::v1::Empty;
use serde::{Deserialize, Serialize};
use utoipa::ToSchema;
use utoipa_actix_web::service_config::ServiceConfig;

use super::{PageQuery, ts, ts_req};
use crate::auth::Api;
use crate::error::{ErrorBody, HttpError, HttpResult, bad_request};

#[derive(Debug, Serialize, Deserialize, ToSchema)]
pub struct UserInfo {
    pub id: String,
    pub username: String,
    pub email: String,
    pub roles: Vec<String>,
    pub groups: Vec<String>,
}

impl From<pb::User> for UserInfo {
    fn from(u: pb::User) -> Self {
        let pb::User {
            id,
            username,
            email,
            roles,
            groups,
            created_at: _,
        } = u;
        UserInfo {
            id,
            username,
            email,
            roles,
            groups,
        }
    }
}

#[derive(Debug, Deserialize, ToSchema)]
pub struct CreateUser {
    /// 1 to 128 letters, digits or `_ - . @`.
    #[schema(min_length = 1, max_length = 128)]
    pub username: String,
    /// An address (with `@`), at most 255 characters; may be empty.
    #[serde(default)]
    #[schema(max_length = 255)]
    pub email: String,
    /// Role names; default `user`.
    #[serde(default)]
    pub roles: Vec<String>,
    /// Identity-provider group ids.
    #[serde(default)]
    pub groups: Vec<String>,
}

#[derive(Debug, Serialize, Deserialize, ToSchema)]
pub struct ApiKeyInfo {
    pub id: String,
    pub user_id: String,
    pub username: String,
    pub name: String,
    pub hint: String,
    pub created_at: DateTime<Utc>,
    pub expires_at: Option<DateTime<Utc>>,
    pub last_used_at: Option<DateTime<Utc>>,
    pub total_calls: i64,
    /// Whether the key works now: not deactivated, expired or lapsed for inactivity.
    pub is_active: bool,
    /// Days without a call after which the key stops working; absent: never.
    pub inactivity_interval: Option<i32>,
    pub is_global_key: bool,
    pub collection_id: Option<String>,
    pub collection_name: Option<String>,
}

impl TryFrom<pb::ApiKey> for ApiKeyInfo {
    type Error = HttpError;

    fn try_from(k: pb::ApiKey) -> Result<Self, HttpError> {
        let pb::ApiKey {
            id,
            user_id,
            username,
            name,
            hint,
            created_at,
            expires_at,
            last_used_at,
            total_calls,
            is_active,
            inactivity_days,
        } = k;
        Ok(ApiKeyInfo {
            id,
            user_id,
            username,
            name,
            hint,
            created_at: ts_req(created_at)?,
            expires_at: ts(expires_at),
            last_used_at: ts(last_used_at),
            total_calls,
            is_active,
            inactivity_interval: (inactivity_days != 0).then_some(inactivity_days),
            is_global_key: true,
            collection_id: None,
            collection_name: None,
        })
    }
}

#[derive(Debug, Deserialize, ToSchema)]
pub struct CreateApiKey {
    pub user_id: String,
    /// At most 255 characters; default `api key`.
    #[serde(default)]
    #[schema(max_length = 255)]
    pub name: Option<String>,
    /// For example `30 days`; omitted means no expiry.
    #[serde(default)]
    pub expires_in: Option<String>,
}

/// The secret is shown once: only its hash is stored.
#[derive(Debug, Serialize, Deserialize, ToSchema)]
pub struct ApiKeyResult {
    pub secret_key: String,
    pub api_key: ApiKeyInfo,
}

#[derive(Debug, Serialize, Deserialize, ToSchema)]
pub struct RoleInfo {
    pub id: String,
    pub name: String,
    pub description: String,
    /// Higher wins when roles override the same setting.
    pub priority: i32,
}

impl From<pb::Role> for RoleInfo {
    fn from(r: pb::Role) -> Self {
        let pb::Role {
            id,
            name,
            description,
            priority,
        } = r;
        RoleInfo {
            id,
            name,
            description,
            priority,
        }
    }
}

#[derive(Debug, Deserialize, ToSchema)]
pub struct CreateRole {
    /// 1 to 255 characters, no commas.
    #[schema(min_length = 1, max_length = 255)]
    pub name: String,
    #[serde(default)]
    pub description: String,
}

#[derive(Debug, Deserialize, ToSchema)]
pub struct SetRolePriority {
    pub priority: i32,
}

#[derive(Debug, Serialize, Deserialize, ToSchema)]
pub struct UserPermission {
    pub id: String,
    pub name: String,
    pub description: String,
}

/// Registers this module's routes.
pub fn configure(cfg: &mut ServiceConfig) {
    cfg.service(create_user)
        .service(list_users)
        .service(get_current_user)
        .service(get_current_user_permissions)
        .service(create_api_key)
        .service(list_api_keys)
        .service(deactivate_api_key)
        .service(set_api_key_expiry)
        .service(set_api_key_inactivity)
        .service(delete_api_key)
        .service(create_role)
        .service(list_roles)
        .service(set_role_priority)
        .service(assign_permission_to_role)
        .service(remove_permission_from_role)
        .service(assign_roles_to_user)
        .service(remove_roles_from_user);
}

#[utoipa::path(tag = "Identity", request_body = CreateUser,
    responses((status = 201, body = UserInfo), (status = 400, body = ErrorBody), (status = 401, body = ErrorBody), (status = 403, body = ErrorBody), (status = 409, body = ErrorBody)),
    security(("bearer" = [])))]
#[post("/admin/users")]
pub async fn create_user(api: Api, body: web::Json<CreateUser>) -> HttpResult<HttpResponse> {
    let CreateUser {
        username,
        email,
        roles,
        groups,
    } = body.into_inner();
    let request = pb::CreateUserRequest {
        username,
        email,
        roles,
        groups,
    };
    let user = api.admin().create_user(request).await?.into_inner();
    Ok(HttpResponse::Created().json(UserInfo::from(user)))
}

#[utoipa::path(tag = "Identity", params(PageQuery),
    responses((status = 200, body = Vec<UserInfo>), (status = 400, body = ErrorBody), (status = 401, body = ErrorBody), (status = 403, body = ErrorBody)),
    security(("bearer" = [])))]
#[get("/users")]
pub async fn list_users(
    api: Api,
    query: web::Query<PageQuery>,
) -> HttpResult<web::Json<Vec<UserInfo>>> {
    let list = api.admin().list_users(query.request()?).await?.into_inner();
    Ok(web::Json(
        list.users.into_iter().map(UserInfo::from).collect(),
    ))
}

#[utoipa::path(tag = "Identity", responses((status = 200, body = UserInfo), (status = 401, body = ErrorBody)), security(("bearer" = [])))]
#[get("/users/current")]
pub async fn get_current_user(api: Api) -> HttpResult<web::Json<UserInfo>> {
    let user = api.admin().get_current_user(Empty {}).await?.into_inner();
    Ok(web::Json(user.into()))
}

#[utoipa::path(tag = "Identity", responses((status = 200, body = Vec<UserPermission>), (status = 401, body = ErrorBody)), security(("bearer" = [])))]
#[get("/users/current/permissions")]
pub async fn get_current_user_permissions(api: Api) -> HttpResult<web::Json<Vec<UserPermission>>> {
    let list = api.admin().get_current_user_permissions(Empty {}).await?;
    Ok(web::Json(
        list.into_inner()
            .permissions
            .into_iter()
            .map(|p| UserPermission {
                id: p.id,
                name: p.name,
                description: p.description,
            })
            .collect(),
    ))
}

#[utoipa::path(tag = "Identity", request_body = CreateApiKey,
    responses((status = 201, body = ApiKeyResult), (status = 400, body = ErrorBody), (status = 401, body = ErrorBody), (status = 403, body = ErrorBody), (status = 404, body = ErrorBody)),
    security(("bearer" = [])))]
#[post("/admin/api_keys")]
pub async fn create_api_key(api: Api, body: web::Json<CreateApiKey>) -> HttpResult<HttpResponse> {
    let CreateApiKey {
        user_id,
        name,
        expires_in,
    } = body.into_inner();
    let request = pb::CreateApiKeyRequest {
        user_id,
        name: name.unwrap_or_default(),
        expires_in: expires_in.unwrap_or_default(),
    };
    let created = api.admin().create_api_key(request).await?.into_inner();
    let api_key = created.api_key.map(ApiKeyInfo::try_from).ok_or_else(|| {
        docchat_common::ApiError::internal("create api key", "no key in answer")
    })??;
    Ok(HttpResponse::Created().json(ApiKeyResult {
        secret_key: created.secret_key,
        api_key,
    }))
}

#[utoipa::path(tag = "Identity", params(PageQuery),
    responses((status = 200, body = Vec<ApiKeyInfo>), (status = 400, body = ErrorBody), (status = 401, body = ErrorBody), (status = 403, body = ErrorBody)),
    security(("bearer" = [])))]
#[get("/admin/api_keys")]
pub async fn list_api_keys(
    api: Api,
    query: web::Query<PageQuery>,
) -> HttpResult<web::Json<Vec<ApiKeyInfo>>> {
    let list = api
        .admin()
        .list_api_keys(query.request()?)
        .await?
        .into_inner();
    Ok(web::Json(
        list.api_keys
            .into_iter()
            .map(ApiKeyInfo::try_from)
            .collect::<HttpResult<_>>()?,
    ))
}

#[utoipa::path(tag = "Identity", params(("key_id" = String, Path)),
    responses((status = 204), (status = 401, body = ErrorBody), (status = 403, body = ErrorBody), (status = 404, body = ErrorBody),
        (status = 409, description = "the caller's last usable key, or the last usable key of any administrator", body = ErrorBody)),
    security(("bearer" = [])))]
#[delete("/admin/api_keys/{key_id}")]
pub async fn delete_api_key(api: Api, path: web::Path<String>) -> HttpResult<HttpResponse> {
    let key_id = path.into_inner();
    api.admin()
        .delete_api_key(pb::DeleteApiKeyRequest { key_id })
        .await?;
    api.forget_cached_keys();
    Ok(HttpResponse::NoContent().finish())
}

/// The client's `set_api_key_expiration` body.
#[derive(Debug, Deserialize, ToSchema)]
pub struct ApiKeyExpiry {
    /// `30 days`, `12 hours`, …; absent or null removes the expiry.
    pub expires_in: Option<String>,
}

/// The client's `set_api_key_inactivity_interval` body.
#[derive(Debug, Deserialize, ToSchema)]
pub struct ApiKeyInactivity {
    /// Days (1 to 36,500) without a call after which the key stops working; absent or null
    /// removes the interval.
    pub inactivity_interval: Option<i32>,
}

async fn update_api_key(
    api: &Api,
    key_id: String,
    change: pb::update_api_key_request::Change,
) -> HttpResult<HttpResponse> {
    api.admin()
        .update_api_key(pb::UpdateApiKeyRequest {
            key_id,
            change: Some(change),
        })
        .await?;
    api.forget_cached_keys();
    Ok(HttpResponse::NoContent().finish())
}

/// Deactivates a key for good (administrators).
#[utoipa::path(tag = "Identity", params(("key_id" = String, Path)),
    responses((status = 204), (status = 401, body = ErrorBody), (status = 403, body = ErrorBody), (status = 404, body = ErrorBody),
        (status = 409, description = "the caller's last usable key, or the last usable key of any administrator", body = ErrorBody)),
    security(("bearer" = [])))]
#[post("/admin/api_keys/deactivate/{key_id}")]
pub async fn deactivate_api_key(api: Api, path: web::Path<String>) -> HttpResult<HttpResponse> {
    use pb::update_api_key_request::Change;
    update_api_key(&api, path.into_inner(), Change::Deactivate(true)).await
}

/// Sets (from now) or removes a key's expiry (administrators).
#[utoipa::path(tag = "Identity", params(("key_id" = String, Path)), request_body = ApiKeyExpiry,
    responses((status = 204), (status = 400, body = ErrorBody), (status = 401, body = ErrorBody), (status = 403, body = ErrorBody), (status = 404, body = ErrorBody),
        (status = 409, description = "the caller's last usable key, or the last usable key of any administrator, would expire within the hour", body = ErrorBody)),
    security(("bearer" = [])))]
#[patch("/admin/api_keys/expire/{key_id}")]
pub async fn set_api_key_expiry(
    api: Api,
    path: web::Path<String>,
    body: web::Json<ApiKeyExpiry>,
) -> HttpResult<HttpResponse> {
    use pb::update_api_key_request::Change;
    let expires_in = body.into_inner().expires_in.unwrap_or_default();
    update_api_key(&api, path.into_inner(), Change::ExpiresIn(expires_in)).await
}

/// Sets or removes a key's inactivity interval (administrators).
#[utoipa::path(tag = "Identity", params(("key_id" = String, Path)), request_body = ApiKeyInactivity,
    responses((status = 204), (status = 400, body = ErrorBody), (status = 401, body = ErrorBody), (status = 403, body = ErrorBody), (status = 404, body = ErrorBody),
        (status = 409, description = "the caller's last usable key, or the last usable key of any administrator, would lapse", body = ErrorBody)),
    security(("bearer" = [])))]
#[patch("/admin/api_keys/inactivity_interval/{key_id}")]
pub async fn set_api_key_inactivity(
    api: Api,
    path: web::Path<String>,
    body: web::Json<ApiKeyInactivity>,
) -> HttpResult<HttpResponse> {
    use pb::update_api_key_request::Change;
    let days = match body.into_inner().inactivity_interval {
        None => 0,
        Some(days) if days >= 1 => days,
        Some(days) => {
            return Err(bad_request(format!(
                "inactivity_interval must be at least 1 day, not {days}"
            )));
        }
    };
    update_api_key(&api, path.into_inner(), Change::InactivityDays(days)).await
}

#[utoipa::path(tag = "Identity", request_body = CreateRole,
    responses((status = 201, body = RoleInfo), (status = 400, body = ErrorBody), (status = 401, body = ErrorBody), (status = 403, body = ErrorBody), (status = 409, body = ErrorBody)),
    security(("bearer" = [])))]
#[post("/roles")]
pub async fn create_role(api: Api, body: web::Json<CreateRole>) -> HttpResult<HttpResponse> {
    let CreateRole { name, description } = body.into_inner();
    let request = pb::CreateRoleRequest { name, description };
    let role = api.admin().create_role(request).await?.into_inner();
    Ok(HttpResponse::Created().json(RoleInfo::from(role)))
}

#[utoipa::path(tag = "Identity", responses((status = 200, body = Vec<RoleInfo>), (status = 401, body = ErrorBody)), security(("bearer" = [])))]
#[get("/roles")]
pub async fn list_roles(api: Api) -> HttpResult<web::Json<Vec<RoleInfo>>> {
    let list = api.admin().list_roles(Empty {}).await?.into_inner();
    Ok(web::Json(
        list.roles.into_iter().map(RoleInfo::from).collect(),
    ))
}

#[utoipa::path(tag = "Identity", params(("role_id" = String, Path)), request_body = SetRolePriority,
    responses((status = 200, body = RoleInfo), (status = 400, body = ErrorBody), (status = 401, body = ErrorBody), (status = 403, body = ErrorBody), (status = 404, body = ErrorBody)),
    security(("bearer" = [])))]
#[put("/roles/{role_id}/priority")]
pub async fn set_role_priority(
    api: Api,
    path: web::Path<String>,
    body: web::Json<SetRolePriority>,
) -> HttpResult<web::Json<RoleInfo>> {
    let request = pb::SetRolePriorityRequest {
        role_id: path.into_inner(),
        priority: body.priority,
    };
    let role = api.admin().set_role_priority(request).await?.into_inner();
    Ok(web::Json(role.into()))
}

#[utoipa::path(tag = "Identity", params(("role_id" = String, Path), ("permission_name" = String, Path)),
    responses((status = 204), (status = 400, body = ErrorBody), (status = 401, body = ErrorBody), (status = 403, body = ErrorBody), (status = 404, body = ErrorBody)),
    security(("bearer" = [])))]
#[put("/roles/{role_id}/permissions/{permission_name}")]
pub async fn assign_permission_to_role(
    api: Api,
    path: web::Path<(String, String)>,
) -> HttpResult<HttpResponse> {
    let (role_id, permission_name) = path.into_inner();
    let request = pb::RolePermissionRequest {
        role_id,
        permission_name,
    };
    api.admin().assign_permission_to_role(request).await?;
    api.forget_cached_keys();
    Ok(HttpResponse::NoContent().finish())
}

#[utoipa::path(tag = "Identity", params(("role_id" = String, Path), ("permission_name" = String, Path)),
    responses((status = 204), (status = 400, description = "unknown permission", body = ErrorBody), (status = 401, body = ErrorBody), (status = 403, body = ErrorBody), (status = 404, body = ErrorBody)),
    security(("bearer" = [])))]
#[delete("/roles/{role_id}/permissions/{permission_name}")]
pub async fn remove_permission_from_role(
    api: Api,
    path: web::Path<(String, String)>,
) -> HttpResult<HttpResponse> {
    let (role_id, permission_name) = path.into_inner();
    let request = pb::RolePermissionRequest {
        role_id,
        permission_name,
    };
    api.admin().remove_permission_from_role(request).await?;
    api.forget_cached_keys();
    Ok(HttpResponse::NoContent().finish())
}

#[utoipa::path(tag = "Identity", params(("user_id" = String, Path), ("role_names" = String, Path, description = "comma-separated role names")),
    responses((status = 204), (status = 401, body = ErrorBody), (status = 403, body = ErrorBody), (status = 404, body = ErrorBody)),
    security(("bearer" = [])))]
#[put("/users/{user_id}/roles/{role_names}")]
pub async fn assign_roles_to_user(
    api: Api,
    path: web::Path<(String, String)>,
) -> HttpResult<HttpResponse> {
    let (user_id, role_names) = path.into_inner();
    let request = pb::UserRolesRequest {
        user_id,
        role_names: vec![role_names],
    };
    api.admin().assign_roles_to_user(request).await?;
    api.forget_cached_keys();
    Ok(HttpResponse::NoContent().finish())
}

#[utoipa::path(tag = "Identity", params(("user_id" = String, Path), ("role_names" = String, Path, description = "comma-separated role names")),
    responses((status = 204), (status = 401, body = ErrorBody), (status = 403, body = ErrorBody), (status = 404, body = ErrorBody),
        (status = 409, description = "removing `admin` would leave no administrator with a usable key", body = ErrorBody)),
    security(("bearer" = [])))]
#[delete("/users/{user_id}/roles/{role_names}")]
pub async fn remove_roles_from_user(
    api: Api,
    path: web::Path<(String, String)>,
) -> HttpResult<HttpResponse> {
    let (user_id, role_names) = path.into_inner();
    let request = pb::UserRolesRequest {
        user_id,
        role_names: vec![role_names],
    };
    api.admin().remove_roles_from_user(request).await?;
    api.forget_cached_keys();
    Ok(HttpResponse::NoContent().finish())
}
