//! `GET /rpc/meta`: who the caller is and what the server is, in the shape the h2oGPTe
//! client's `Meta` model reads. The client asks for it when it is constructed (its version
//! check), so without it `H2OGPTE(address, api_key)` cannot start.

use actix_web::{get, web};
use docchat_common::budget::is_guest;
use docchat_proto::admin::v1 as pb;
use docchat_proto::common::v1::Empty;
use serde::Serialize;
use utoipa::ToSchema;
use utoipa_actix_web::service_config::ServiceConfig;

use crate::auth::Api;
use crate::error::{ErrorBody, HttpResult};

/// The interface version this server implements (SPEC.md's, the client's release).
pub const INTERFACE_VERSION: &str = "1.7.5";

/// Registers this module's routes.
pub fn configure(cfg: &mut ServiceConfig) {
    cfg.service(get_meta);
}

#[derive(Debug, Serialize, ToSchema)]
pub struct GlobalConfigItem {
    pub key_name: String,
    pub string_value: String,
    pub value_type: String,
    pub can_overwrite: bool,
    pub is_public: bool,
}

#[derive(Debug, Serialize, ToSchema)]
pub struct ConfigItem {
    pub key_name: String,
    pub string_value: String,
    pub value_type: String,
}

/// What a user interface shows; docchat has none, so these are plain defaults.
#[derive(Debug, Serialize, ToSchema)]
pub struct UiConfig {
    pub logo: String,
    pub chat_logo: String,
    pub primary_color: String,
    pub chat_name: String,
    pub greeting: String,
    pub show_private_button: bool,
    pub show_workers_status: bool,
    pub show_live_logs: bool,
    pub show_eval: bool,
    pub show_extractors: bool,
    pub public_mode: bool,
}

#[derive(Debug, Serialize, ToSchema)]
pub struct Meta {
    /// The interface version (`1.7.5`).
    pub version: String,
    /// This server's build: `docchat <crate version>`.
    pub build: String,
    pub username: String,
    pub user_id: String,
    /// The caller's id at the identity provider: the user id here.
    pub subject: String,
    pub email: String,
    pub is_guest: bool,
    pub license_expired: bool,
    /// Empty: docchat has no license.
    pub license_expiry_date: String,
    /// The global settings the caller may read.
    pub global_configs: Vec<GlobalConfigItem>,
    /// The caller's own overrides.
    pub user_configs: Vec<ConfigItem>,
    pub picture: Option<String>,
    pub groups: Vec<String>,
    pub workspaces: Vec<String>,
    pub permissions: Vec<String>,
    pub ui_config: UiConfig,
}

#[utoipa::path(tag = "Identity",
    responses((status = 200, body = Meta), (status = 401, body = ErrorBody)),
    security(("bearer" = [])))]
#[get("/rpc/meta")]
pub async fn get_meta(api: Api) -> HttpResult<web::Json<Meta>> {
    let user_settings = pb::ListUserSettingsRequest {
        user_id: String::new(),
    };
    let (mut admin, mut mine) = (api.admin(), api.admin());
    let (global, mine) = futures::try_join!(
        admin.list_global_settings(Empty {}),
        mine.list_user_settings(user_settings),
    )?;
    let caller = api.caller();
    Ok(web::Json(Meta {
        version: INTERFACE_VERSION.to_owned(),
        build: format!("docchat {}", env!("CARGO_PKG_VERSION")),
        username: caller.username.clone(),
        user_id: caller.user_id.clone(),
        subject: caller.user_id.clone(),
        email: caller.email.clone(),
        is_guest: is_guest(caller),
        license_expired: false,
        license_expiry_date: String::new(),
        global_configs: global
            .into_inner()
            .settings
            .into_iter()
            .map(|s| GlobalConfigItem {
                key_name: s.key_name,
                string_value: s.string_value,
                value_type: s.value_type,
                can_overwrite: s.can_overwrite,
                is_public: s.is_public,
            })
            .collect(),
        user_configs: mine
            .into_inner()
            .settings
            .into_iter()
            .map(|s| ConfigItem {
                key_name: s.key_name,
                string_value: s.string_value,
                value_type: s.value_type,
            })
            .collect(),
        picture: None,
        groups: caller.groups.clone(),
        workspaces: Vec::new(),
        permissions: caller.permissions.clone(),
        ui_config: UiConfig {
            logo: String::new(),
            chat_logo: String::new(),
            primary_color: String::new(),
            chat_name: "docchat".to_owned(),
            greeting: String::new(),
            show_private_button: false,
            show_workers_status: false,
            show_live_logs: false,
            show_eval: false,
            show_extractors: true,
            public_mode: false,
        },
    }))
}
