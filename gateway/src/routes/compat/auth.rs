//! The compat API's caller: the main API's [`Api`] extractor, refusing in the vendor's shape.

use std::future::Future;
use std::pin::Pin;

use actix_web::{FromRequest, HttpRequest, dev::Payload};

use super::error::CompatError;
use crate::auth::Api;

/// The caller of a compat request and its service clients; a bad key answers in the
/// vendor's shape.
pub struct CompatApi(pub Api);

impl FromRequest for CompatApi {
    type Error = CompatError;
    type Future = Pin<Box<dyn Future<Output = Result<CompatApi, CompatError>>>>;

    fn from_request(req: &HttpRequest, payload: &mut Payload) -> Self::Future {
        let api = Api::from_request(req, payload);
        Box::pin(async move { Ok(CompatApi(api.await?)) })
    }
}
