//! `/compat_api/v1`: the chat-completions, responses and models endpoints of the
//! OpenAI-style vendor API, over chat-service's stateless `CompatComplete`/`CompatStream`.
//!
//! Everything here speaks the vendor's shapes, errors included ([`error`]: refused keys
//! through [`auth`], unreadable bodies through [`json`]), because the callers are that
//! vendor's SDKs. One module per endpoint; streams are Server-Sent Events ([`sse`]) written
//! as chat-service yields each piece (tensorzero's `openai_compatible/` has this layout).

pub mod auth;
pub mod background;
pub mod chat_completions;
pub mod error;
pub mod json;
pub mod models;
pub mod response;
pub mod responses;
pub mod sse;

use actix_web::{HttpRequest, HttpResponse};
use utoipa_actix_web::service_config::ServiceConfig;

use self::auth::CompatApi;
use self::error::{CompatError, CompatResult};

/// Registers the compat endpoints (under `/compat_api/v1`).
pub fn configure(cfg: &mut ServiceConfig) {
    cfg.service(chat_completions::chat_completions)
        .service(responses::responses)
        .service(background::get_response)
        .service(background::cancel_response)
        .service(models::models);
}

/// Any other path under `/compat_api/v1`: the key first, then the vendor's 404.
pub async fn unknown(req: HttpRequest, _api: CompatApi) -> CompatResult<HttpResponse> {
    Err(CompatError::unknown_url(format!(
        "no route for {} {}",
        req.method(),
        req.path()
    )))
}

fn unix_now() -> i64 {
    docchat_common::time::now().timestamp()
}

fn new_id(prefix: &str) -> String {
    format!("{prefix}{}", docchat_common::ids::new_name())
}
