//! Extractors that refuse in the vendor's shape: the JSON body (413 over the body limit, 400
//! for a body that is not the endpoint's JSON, serde's message saying which field) and the
//! query string (400).

use std::future::Future;
use std::pin::Pin;

use actix_web::error::PayloadError;
use actix_web::web::Bytes;
use actix_web::{FromRequest, HttpRequest, dev::Payload};
use docchat_common::error::{ApiError, ErrorCode};
use serde::de::DeserializeOwned;

use super::error::CompatError;

/// The request body as `T`.
pub struct CompatJson<T>(pub T);

impl<T: DeserializeOwned + 'static> FromRequest for CompatJson<T> {
    type Error = CompatError;
    type Future = Pin<Box<dyn Future<Output = Result<CompatJson<T>, CompatError>>>>;

    fn from_request(req: &HttpRequest, payload: &mut Payload) -> Self::Future {
        // The bytes as the scope's PayloadConfig allows (the main API's body limit).
        let body = Bytes::from_request(req, payload);
        Box::pin(async move {
            let body = body.await.map_err(|e| match e.as_error::<PayloadError>() {
                Some(PayloadError::Overflow) => CompatError::from(ApiError::new(
                    ErrorCode::PayloadTooLarge,
                    "the request body is larger than this server accepts",
                )),
                _ => CompatError::invalid(format!("could not read the request body: {e}")),
            })?;
            serde_json::from_slice(&body)
                .map(CompatJson)
                .map_err(|e| CompatError::invalid(format!("invalid JSON body: {e}")))
        })
    }
}

/// The query string as `T`.
pub struct CompatQuery<T>(pub T);

impl<T: DeserializeOwned + 'static> FromRequest for CompatQuery<T> {
    type Error = CompatError;
    type Future = std::future::Ready<Result<CompatQuery<T>, CompatError>>;

    fn from_request(req: &HttpRequest, _: &mut Payload) -> Self::Future {
        std::future::ready(
            actix_web::web::Query::<T>::from_query(req.query_string())
                .map(|q| CompatQuery(q.into_inner()))
                .map_err(|e| CompatError::invalid(format!("invalid query: {e}"))),
        )
    }
}
