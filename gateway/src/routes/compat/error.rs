//! The vendor's error shape, `{"error": {"message", "type", "param", "code"}}`: what every
//! compat answer that is not a success carries, refused keys and bodies included, because
//! the callers are that vendor's SDKs.

use actix_web::http::StatusCode;
use actix_web::{HttpResponse, ResponseError};
use docchat_common::error::{ApiError, ErrorCode};
use serde::Serialize;
use utoipa::ToSchema;

use crate::error::HttpError;

/// An error in the vendor's shape.
#[derive(Debug)]
pub struct CompatError {
    pub(super) status: u16,
    pub(super) message: String,
    pub(super) kind: &'static str,
    pub(super) param: Option<&'static str>,
    pub(super) code: Option<&'static str>,
}

pub type CompatResult<T> = Result<T, CompatError>;

impl CompatError {
    /// A 400 `invalid_request_error`.
    pub fn invalid(message: impl Into<String>) -> CompatError {
        CompatError {
            status: 400,
            message: message.into(),
            kind: "invalid_request_error",
            param: None,
            code: None,
        }
    }

    /// Names the request field at fault.
    pub fn param(mut self, param: &'static str) -> CompatError {
        self.param = Some(param);
        self
    }

    /// 404 for a path under `/compat_api/v1` that has no endpoint.
    pub fn unknown_url(message: String) -> CompatError {
        CompatError {
            status: 404,
            message,
            kind: "invalid_request_error",
            param: None,
            code: Some("unknown_url"),
        }
    }

    /// The `error` object, also sent as a stream's last event.
    pub fn body(&self) -> ErrorObject<'_> {
        ErrorObject {
            message: &self.message,
            kind: self.kind,
            param: self.param,
            code: self.code,
        }
    }
}

/// The `error` member of a vendor error.
#[derive(Serialize, ToSchema)]
#[schema(as = CompatErrorObject)]
pub struct ErrorObject<'a> {
    pub message: &'a str,
    /// invalid_request_error, authentication_error, permission_error, rate_limit_error,
    /// server_error …
    #[serde(rename = "type")]
    pub kind: &'a str,
    pub param: Option<&'a str>,
    pub code: Option<&'a str>,
}

/// The vendor's error body.
#[derive(Serialize, ToSchema)]
#[schema(as = CompatErrorBody)]
pub struct ErrorBody<'a> {
    pub error: ErrorObject<'a>,
}

impl std::fmt::Display for CompatError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        self.message.fmt(f)
    }
}

impl ResponseError for CompatError {
    fn status_code(&self) -> StatusCode {
        StatusCode::from_u16(self.status).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR)
    }

    fn error_response(&self) -> HttpResponse {
        HttpResponse::build(self.status_code()).json(ErrorBody { error: self.body() })
    }
}

impl From<ApiError> for CompatError {
    fn from(e: ApiError) -> CompatError {
        let status = e.code.http_status();
        // Every code named: a new one must choose its vendor type here.
        let (kind, param, code) = match e.code {
            // The compat RPCs answer NOT_FOUND for one thing only: the model.
            ErrorCode::NotFound => (
                "invalid_request_error",
                Some("model"),
                Some("model_not_found"),
            ),
            ErrorCode::Unauthenticated => ("invalid_request_error", None, Some("invalid_api_key")),
            ErrorCode::Forbidden => ("permission_error", None, None),
            ErrorCode::TooManyRequests => ("rate_limit_error", None, Some("rate_limit_exceeded")),
            ErrorCode::PayloadTooLarge => {
                ("invalid_request_error", None, Some("payload_too_large"))
            }
            ErrorCode::BadRequest
            | ErrorCode::Conflict
            | ErrorCode::UnsupportedMediaType
            | ErrorCode::Timeout => ("invalid_request_error", None, None),
            ErrorCode::Internal
            | ErrorCode::BadGateway
            | ErrorCode::Unavailable
            | ErrorCode::GatewayTimeout => ("server_error", None, None),
        };
        CompatError {
            status,
            message: e.message,
            kind,
            param,
            code,
        }
    }
}

impl From<HttpError> for CompatError {
    fn from(e: HttpError) -> CompatError {
        e.0.into()
    }
}

impl From<tonic::Status> for CompatError {
    fn from(status: tonic::Status) -> CompatError {
        HttpError::from(status).0.into()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn unknown_model_error_has_the_vendor_shape() {
        let err = CompatError::from(ApiError::not_found("The model `nope` does not exist"));
        let body = serde_json::to_value(ErrorBody { error: err.body() }).unwrap();
        assert_eq!(
            body,
            serde_json::json!({"error": {
                "message": "The model `nope` does not exist",
                "type": "invalid_request_error",
                "param": "model",
                "code": "model_not_found"
            }})
        );
        assert_eq!(err.status, 404);
    }

    #[test]
    fn internal_failures_show_no_internals() {
        let status = tonic::Status::internal("decoded message length too large: 4194304");
        let err = CompatError::from(status);
        assert_eq!(err.status, 500);
        assert_eq!(err.kind, "server_error");
        assert!(!err.message.contains("4194304"), "{}", err.message);
    }
}
