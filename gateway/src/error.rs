//! The one place a service error becomes an HTTP answer: SPEC.md's
//! `{"code": <status>, "message": "..."}` with the status the error names.

use actix_web::http::StatusCode;
use actix_web::{HttpResponse, ResponseError};
use docchat_common::error::{ApiError, ErrorCode};
use serde::Serialize;
use utoipa::ToSchema;

/// Error body of every main-API endpoint.
#[derive(Debug, Serialize, ToSchema)]
pub struct ErrorBody {
    pub code: u16,
    pub message: String,
}

#[derive(Debug)]
pub struct HttpError(pub ApiError);

impl std::fmt::Display for HttpError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        self.0.message.fmt(f)
    }
}

impl ResponseError for HttpError {
    fn status_code(&self) -> StatusCode {
        StatusCode::from_u16(self.0.code.http_status()).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR)
    }

    fn error_response(&self) -> HttpResponse {
        HttpResponse::build(self.status_code()).json(ErrorBody {
            code: self.0.code.http_status(),
            message: self.0.message.clone(),
        })
    }
}

impl From<ApiError> for HttpError {
    fn from(e: ApiError) -> Self {
        HttpError(e)
    }
}

impl From<tonic::Status> for HttpError {
    fn from(status: tonic::Status) -> Self {
        let err = ApiError::from_status(&status);
        if err.code == ErrorCode::Internal || err.code == ErrorCode::Unavailable {
            tracing::error!(code = ?status.code(), message = status.message(), "service call failed");
        }
        HttpError(err)
    }
}

pub fn bad_request(message: impl Into<String>) -> HttpError {
    HttpError(ApiError::bad_request(message))
}

pub type HttpResult<T> = Result<T, HttpError>;

/// An error of SPEC.md's custom tool and custom agent endpoints: the same body, but a 401
/// (no key, a bad key, a missing permission) says only `Unauthorized`, as their error table
/// gives it.
#[derive(Debug)]
pub struct TerseError(pub HttpError);

impl std::fmt::Display for TerseError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        self.0.fmt(f)
    }
}

impl ResponseError for TerseError {
    fn status_code(&self) -> StatusCode {
        self.0.status_code()
    }

    fn error_response(&self) -> HttpResponse {
        let status = self.0.0.code.http_status();
        let message = if status == 401 {
            "Unauthorized".to_owned()
        } else {
            self.0.0.message.clone()
        };
        HttpResponse::build(self.status_code()).json(ErrorBody {
            code: status,
            message,
        })
    }
}

impl<E: Into<HttpError>> From<E> for TerseError {
    fn from(e: E) -> Self {
        TerseError(e.into())
    }
}

pub type TerseResult<T> = Result<T, TerseError>;
