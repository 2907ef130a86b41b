//! Runtime settings: PUT /api/v1/configurations/{key_name} and role / user overrides, read
//! and removed.

use actix_web::{delete, get, post, put, web};
use chrono::{DateTime, Utc};
use docchat_proto::admin::v1 as pb;
use docchat_proto::common::v1::Empty;
use serde::{Deserialize, Serialize};
use utoipa::ToSchema;
use utoipa_actix_web::service_config::ServiceConfig;

use super::{comma_list, ts};
use crate::auth::Api;
use crate::error::{ErrorBody, HttpResult};

#[derive(Debug, Serialize, Deserialize, ToSchema)]
pub struct GlobalConfigurationItem {
    pub key_name: String,
    pub string_value: String,
    pub value_type: String,
    pub can_overwrite: bool,
    pub is_public: bool,
    pub description: String,
}

#[derive(Debug, Serialize, Deserialize, ToSchema)]
pub struct UserConfigurationItem {
    pub key_name: String,
    pub string_value: String,
    pub value_type: String,
    pub updated_at: Option<DateTime<Utc>>,
}

/// `string_value` is required; the client's flags are optional and keep their stored value
/// when omitted.
#[derive(Debug, Deserialize, ToSchema)]
pub struct SetConfiguration {
    pub string_value: String,
    #[serde(default)]
    pub can_overwrite: Option<bool>,
    #[serde(default)]
    pub is_public: Option<bool>,
}

fn global(list: pb::GlobalSettingList) -> Vec<GlobalConfigurationItem> {
    list.settings
        .into_iter()
        .map(|s| GlobalConfigurationItem {
            key_name: s.key_name,
            string_value: s.string_value,
            value_type: s.value_type,
            can_overwrite: s.can_overwrite,
            is_public: s.is_public,
            description: s.description,
        })
        .collect()
}

fn scoped(list: pb::ScopedSettingList) -> Vec<UserConfigurationItem> {
    list.settings
        .into_iter()
        .map(|s| UserConfigurationItem {
            key_name: s.key_name,
            string_value: s.string_value,
            value_type: s.value_type,
            updated_at: ts(s.updated_at),
        })
        .collect()
}

/// Registers this module's routes.
pub fn configure(cfg: &mut ServiceConfig) {
    cfg.service(list_global_configurations)
        .service(set_global_configuration)
        .service(set_role_configuration)
        .service(set_user_configuration)
        .service(list_current_user_configurations)
        .service(delete_global_configurations)
        // After /users/current/configurations: `current` is not a user id.
        .service(list_user_configurations)
        .service(delete_user_configurations)
        .service(reset_user_configuration)
        .service(list_role_configurations)
        .service(delete_role_configurations);
}

#[utoipa::path(tag = "Configuration",
    responses((status = 200, body = Vec<GlobalConfigurationItem>), (status = 401, body = ErrorBody)),
    security(("bearer" = [])))]
#[get("/configurations")]
pub async fn list_global_configurations(
    api: Api,
) -> HttpResult<web::Json<Vec<GlobalConfigurationItem>>> {
    let list = api.admin().list_global_settings(Empty {}).await?;
    Ok(web::Json(global(list.into_inner())))
}

#[utoipa::path(tag = "Configuration", params(("key_name" = String, Path)), request_body = SetConfiguration,
    responses((status = 200, body = Vec<GlobalConfigurationItem>), (status = 400, body = ErrorBody), (status = 401, body = ErrorBody), (status = 403, body = ErrorBody)),
    security(("bearer" = [])))]
#[put("/configurations/{key_name}")]
pub async fn set_global_configuration(
    api: Api,
    path: web::Path<String>,
    body: web::Json<SetConfiguration>,
) -> HttpResult<web::Json<Vec<GlobalConfigurationItem>>> {
    let SetConfiguration {
        string_value,
        can_overwrite,
        is_public,
    } = body.into_inner();
    let request = pb::SetGlobalSettingRequest {
        key_name: path.into_inner(),
        string_value,
        can_overwrite,
        is_public,
    };
    let list = api.admin().set_global_setting(request).await?;
    Ok(web::Json(global(list.into_inner())))
}

/// A role's or user's override: `scope_id` names the role or user.
fn scoped_request(
    (scope_id, key_name): (String, String),
    body: SetConfiguration,
) -> pb::SetScopedSettingRequest {
    pb::SetScopedSettingRequest {
        scope_id,
        key_name,
        string_value: body.string_value,
    }
}

#[utoipa::path(tag = "Configuration", params(("role_id" = String, Path), ("key_name" = String, Path)), request_body = SetConfiguration,
    responses((status = 200, body = Vec<UserConfigurationItem>), (status = 400, body = ErrorBody), (status = 401, body = ErrorBody), (status = 403, body = ErrorBody), (status = 404, body = ErrorBody)),
    security(("bearer" = [])))]
#[put("/roles/{role_id}/configurations/{key_name}")]
pub async fn set_role_configuration(
    api: Api,
    path: web::Path<(String, String)>,
    body: web::Json<SetConfiguration>,
) -> HttpResult<web::Json<Vec<UserConfigurationItem>>> {
    let request = scoped_request(path.into_inner(), body.into_inner());
    let list = api.admin().set_role_setting(request).await?;
    Ok(web::Json(scoped(list.into_inner())))
}

#[utoipa::path(tag = "Configuration", params(("user_id" = String, Path), ("key_name" = String, Path)), request_body = SetConfiguration,
    responses((status = 200, body = Vec<UserConfigurationItem>), (status = 400, body = ErrorBody), (status = 401, body = ErrorBody), (status = 403, body = ErrorBody), (status = 404, body = ErrorBody)),
    security(("bearer" = [])))]
#[put("/users/{user_id}/configurations/{key_name}")]
pub async fn set_user_configuration(
    api: Api,
    path: web::Path<(String, String)>,
    body: web::Json<SetConfiguration>,
) -> HttpResult<web::Json<Vec<UserConfigurationItem>>> {
    let request = scoped_request(path.into_inner(), body.into_inner());
    let list = api.admin().set_user_setting(request).await?;
    Ok(web::Json(scoped(list.into_inner())))
}

#[utoipa::path(tag = "Configuration",
    responses((status = 200, body = Vec<UserConfigurationItem>), (status = 401, body = ErrorBody)),
    security(("bearer" = [])))]
#[get("/users/current/configurations")]
pub async fn list_current_user_configurations(
    api: Api,
) -> HttpResult<web::Json<Vec<UserConfigurationItem>>> {
    let request = pb::ListUserSettingsRequest {
        user_id: String::new(),
    };
    let list = api.admin().list_user_settings(request).await?;
    Ok(web::Json(scoped(list.into_inner())))
}

/// Removes global values (administrators): each falls back to its default. Answers every
/// global setting afterwards.
#[utoipa::path(tag = "Configuration",
    params(("key_names" = String, Path, description = "comma-separated setting names")),
    responses((status = 200, body = Vec<GlobalConfigurationItem>), (status = 400, body = ErrorBody), (status = 401, body = ErrorBody), (status = 403, body = ErrorBody)),
    security(("bearer" = [])))]
#[delete("/configurations/{key_names}")]
pub async fn delete_global_configurations(
    api: Api,
    path: web::Path<String>,
) -> HttpResult<web::Json<Vec<GlobalConfigurationItem>>> {
    let request = pb::DeleteSettingsRequest {
        scope_id: String::new(),
        key_names: comma_list(&path.into_inner()),
    };
    let list = api.admin().delete_global_settings(request).await?;
    Ok(web::Json(global(list.into_inner())))
}

/// A user's overrides (administrators, or the user).
#[utoipa::path(tag = "Configuration", params(("user_id" = String, Path)),
    responses((status = 200, body = Vec<UserConfigurationItem>), (status = 401, body = ErrorBody), (status = 403, body = ErrorBody)),
    security(("bearer" = [])))]
#[get("/users/{user_id}/configurations")]
pub async fn list_user_configurations(
    api: Api,
    path: web::Path<String>,
) -> HttpResult<web::Json<Vec<UserConfigurationItem>>> {
    let request = pb::ListUserSettingsRequest {
        user_id: path.into_inner(),
    };
    let list = api.admin().list_user_settings(request).await?;
    Ok(web::Json(scoped(list.into_inner())))
}

async fn delete_user_overrides(
    api: &Api,
    user_id: String,
    key_names: Vec<String>,
) -> HttpResult<web::Json<Vec<UserConfigurationItem>>> {
    let request = pb::DeleteSettingsRequest {
        scope_id: user_id,
        key_names,
    };
    let list = api.admin().delete_user_settings(request).await?;
    Ok(web::Json(scoped(list.into_inner())))
}

/// Removes a user's overrides (administrators): the role's or global value is in force
/// again. Answers the user's remaining overrides.
#[utoipa::path(tag = "Configuration",
    params(("user_id" = String, Path), ("key_names" = String, Path, description = "comma-separated setting names")),
    responses((status = 200, body = Vec<UserConfigurationItem>), (status = 400, body = ErrorBody), (status = 401, body = ErrorBody), (status = 403, body = ErrorBody), (status = 404, body = ErrorBody)),
    security(("bearer" = [])))]
#[delete("/users/{user_id}/configurations/{key_names}")]
pub async fn delete_user_configurations(
    api: Api,
    path: web::Path<(String, String)>,
) -> HttpResult<web::Json<Vec<UserConfigurationItem>>> {
    let (user_id, key_names) = path.into_inner();
    delete_user_overrides(&api, user_id, comma_list(&key_names)).await
}

/// Resets one of a user's settings to what is in force above the user (administrators).
#[utoipa::path(tag = "Configuration", params(("user_id" = String, Path), ("key_name" = String, Path)),
    responses((status = 200, body = Vec<UserConfigurationItem>), (status = 400, body = ErrorBody), (status = 401, body = ErrorBody), (status = 403, body = ErrorBody), (status = 404, body = ErrorBody)),
    security(("bearer" = [])))]
#[post("/users/{user_id}/configurations/{key_name}/reset")]
pub async fn reset_user_configuration(
    api: Api,
    path: web::Path<(String, String)>,
) -> HttpResult<web::Json<Vec<UserConfigurationItem>>> {
    let (user_id, key_name) = path.into_inner();
    delete_user_overrides(&api, user_id, vec![key_name]).await
}

/// A role's overrides (administrators).
#[utoipa::path(tag = "Configuration", params(("role_id" = String, Path)),
    responses((status = 200, body = Vec<UserConfigurationItem>), (status = 401, body = ErrorBody), (status = 403, body = ErrorBody), (status = 404, body = ErrorBody)),
    security(("bearer" = [])))]
#[get("/roles/{role_id}/configurations")]
pub async fn list_role_configurations(
    api: Api,
    path: web::Path<String>,
) -> HttpResult<web::Json<Vec<UserConfigurationItem>>> {
    let request = pb::ListRoleSettingsRequest {
        role_id: path.into_inner(),
    };
    let list = api.admin().list_role_settings(request).await?;
    Ok(web::Json(scoped(list.into_inner())))
}

/// Removes a role's overrides (administrators). Answers the role's remaining overrides.
#[utoipa::path(tag = "Configuration",
    params(("role_id" = String, Path), ("key_names" = String, Path, description = "comma-separated setting names")),
    responses((status = 200, body = Vec<UserConfigurationItem>), (status = 400, body = ErrorBody), (status = 401, body = ErrorBody), (status = 403, body = ErrorBody), (status = 404, body = ErrorBody)),
    security(("bearer" = [])))]
#[delete("/roles/{role_id}/configurations/{key_names}")]
pub async fn delete_role_configurations(
    api: Api,
    path: web::Path<(String, String)>,
) -> HttpResult<web::Json<Vec<UserConfigurationItem>>> {
    let (role_id, key_names) = path.into_inner();
    let request = pb::DeleteSettingsRequest {
        scope_id: role_id,
        key_names: comma_list(&key_names),
    };
    let list = api.admin().delete_role_settings(request).await?;
    Ok(web::Json(scoped(list.into_inner())))
}
