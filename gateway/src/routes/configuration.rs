//! Runtime settings: PUT /api/v1/configurations/{key_name} and role / user overrides.

use actix_web::{get, put, web};
use chrono::{DateTime, Utc};
use docchat_proto::admin::v1 as pb;
use docchat_proto::common::v1::Empty;
use serde::{Deserialize, Serialize};
use utoipa::ToSchema;
use utoipa_actix_web::service_config::ServiceConfig;

use super::ts;
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
        .service(list_current_user_configurations);
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
