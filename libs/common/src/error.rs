//! One error vocabulary for every service, mapped to gRPC codes on the wire and to HTTP
//! statuses at the gateway.

use docchat_proto::common::v1::ErrorDetail;
use prost::Message;
use tonic::{Code, Status};

/// The kinds of failure a caller can see. Each maps to exactly one HTTP status.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ErrorCode {
    BadRequest,
    Unauthenticated,
    Forbidden,
    NotFound,
    Timeout,
    Conflict,
    PayloadTooLarge,
    UnsupportedMediaType,
    TooManyRequests,
    Internal,
    /// An upstream this service calls (a model server) answered wrongly or not at all.
    BadGateway,
    Unavailable,
    /// An upstream this service calls (a model server) did not answer in time.
    GatewayTimeout,
}

impl ErrorCode {
    /// The HTTP status the gateway answers for this code.
    pub fn http_status(self) -> u16 {
        match self {
            ErrorCode::BadRequest => 400,
            ErrorCode::Unauthenticated => 401,
            ErrorCode::Forbidden => 403,
            ErrorCode::NotFound => 404,
            ErrorCode::Timeout => 408,
            ErrorCode::Conflict => 409,
            ErrorCode::PayloadTooLarge => 413,
            ErrorCode::UnsupportedMediaType => 415,
            ErrorCode::TooManyRequests => 429,
            ErrorCode::Internal => 500,
            ErrorCode::BadGateway => 502,
            ErrorCode::Unavailable => 503,
            ErrorCode::GatewayTimeout => 504,
        }
    }

    /// The gRPC code used on the wire between services.
    pub fn grpc_code(self) -> Code {
        match self {
            ErrorCode::BadRequest => Code::InvalidArgument,
            ErrorCode::Unauthenticated => Code::Unauthenticated,
            ErrorCode::Forbidden => Code::PermissionDenied,
            ErrorCode::NotFound => Code::NotFound,
            ErrorCode::Timeout => Code::DeadlineExceeded,
            ErrorCode::Conflict => Code::AlreadyExists,
            ErrorCode::PayloadTooLarge => Code::OutOfRange,
            ErrorCode::UnsupportedMediaType => Code::InvalidArgument,
            ErrorCode::TooManyRequests => Code::ResourceExhausted,
            ErrorCode::Internal => Code::Internal,
            // The detail carries 502/504; a peer without it reads Unavailable/DeadlineExceeded.
            ErrorCode::BadGateway => Code::Unavailable,
            ErrorCode::Unavailable => Code::Unavailable,
            ErrorCode::GatewayTimeout => Code::DeadlineExceeded,
        }
    }

    /// The code a gRPC status stands for when it carries no [`ErrorDetail`].
    pub fn from_grpc(code: Code) -> ErrorCode {
        match code {
            Code::InvalidArgument | Code::FailedPrecondition | Code::OutOfRange => {
                ErrorCode::BadRequest
            }
            Code::Unauthenticated => ErrorCode::Unauthenticated,
            Code::PermissionDenied => ErrorCode::Forbidden,
            Code::NotFound => ErrorCode::NotFound,
            Code::DeadlineExceeded => ErrorCode::Timeout,
            Code::AlreadyExists | Code::Aborted => ErrorCode::Conflict,
            Code::ResourceExhausted => ErrorCode::TooManyRequests,
            Code::Unavailable => ErrorCode::Unavailable,
            Code::Ok
            | Code::Cancelled
            | Code::Unknown
            | Code::Unimplemented
            | Code::Internal
            | Code::DataLoss => ErrorCode::Internal,
        }
    }

    /// What a caller is told when the only text there is is internal.
    pub fn plain_message(self) -> &'static str {
        match self {
            ErrorCode::BadRequest => "the request was refused",
            ErrorCode::Unauthenticated => "not authenticated",
            ErrorCode::Forbidden => "not allowed",
            ErrorCode::NotFound => "not found",
            ErrorCode::Timeout => "a service did not answer in time",
            ErrorCode::Conflict => "the request conflicts with the current state",
            ErrorCode::PayloadTooLarge => "the request is larger than the services accept",
            ErrorCode::UnsupportedMediaType => "unsupported media type",
            ErrorCode::TooManyRequests => "too many requests",
            ErrorCode::Internal => "internal error",
            ErrorCode::BadGateway => "the model upstream failed",
            ErrorCode::Unavailable => "service unavailable",
            ErrorCode::GatewayTimeout => "the model upstream did not answer in time",
        }
    }

    /// The code of an HTTP status docchat answers with, if it is one.
    pub fn from_http(status: u16) -> Option<ErrorCode> {
        Some(match status {
            400 => ErrorCode::BadRequest,
            401 => ErrorCode::Unauthenticated,
            403 => ErrorCode::Forbidden,
            404 => ErrorCode::NotFound,
            408 => ErrorCode::Timeout,
            409 => ErrorCode::Conflict,
            413 => ErrorCode::PayloadTooLarge,
            415 => ErrorCode::UnsupportedMediaType,
            429 => ErrorCode::TooManyRequests,
            500 => ErrorCode::Internal,
            502 => ErrorCode::BadGateway,
            503 => ErrorCode::Unavailable,
            504 => ErrorCode::GatewayTimeout,
            _ => return None,
        })
    }
}

/// An error a caller may see: a code and a message safe to show.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{message}")]
pub struct ApiError {
    pub code: ErrorCode,
    pub message: String,
}

impl ApiError {
    pub fn new(code: ErrorCode, message: impl Into<String>) -> Self {
        ApiError {
            code,
            message: message.into(),
        }
    }

    pub fn bad_request(message: impl Into<String>) -> Self {
        Self::new(ErrorCode::BadRequest, message)
    }

    pub fn not_found(message: impl Into<String>) -> Self {
        Self::new(ErrorCode::NotFound, message)
    }

    pub fn unauthenticated(message: impl Into<String>) -> Self {
        Self::new(ErrorCode::Unauthenticated, message)
    }

    pub fn forbidden(message: impl Into<String>) -> Self {
        Self::new(ErrorCode::Forbidden, message)
    }

    pub fn conflict(message: impl Into<String>) -> Self {
        Self::new(ErrorCode::Conflict, message)
    }

    /// Logs the cause with context and answers an opaque 500: internals never reach a caller.
    pub fn internal(context: &str, cause: impl std::fmt::Display) -> Self {
        tracing::error!(error = %cause, "{context}");
        Self::new(ErrorCode::Internal, "internal error")
    }

    /// A database error: a fault ([`ApiError::internal`], logged with `context`) but for one
    /// cause that is the request's. PostgreSQL refuses text holding NUL, as `text` (SQLSTATE
    /// 22021, "invalid byte sequence") and inside `jsonb` (22P05, "unsupported Unicode escape
    /// sequence"); the gateway refuses NUL at the edge, but a multipart field or a compressed
    /// body could still carry it. Told by the SQLSTATE, not the message, which the server's
    /// `lc_messages` may translate.
    pub fn database(context: &str, err: sea_orm::DbErr) -> Self {
        if matches!(sqlstate(&err).as_deref(), Some("22021" | "22P05")) {
            return Self::bad_request("text may not contain the NUL character (\\u0000)");
        }
        Self::internal(context, err)
    }

    /// Recovers the error from a gRPC status received from another service. A status
    /// without docchat's [`ErrorDetail`] did not come from a service's own error but from
    /// tonic, HTTP/2 or the transport (a message over the size limit, a refused connection):
    /// its text is internal, so it is logged and the caller gets a plain message for its code.
    pub fn from_status(status: &Status) -> ApiError {
        let ours = ErrorDetail::decode(status.details())
            .ok()
            .and_then(|d| ErrorCode::from_http(d.http_status as u16));
        let Some(code) = ours else {
            let code = match status.code() {
                // tonic's answer to a message over the configured size.
                Code::OutOfRange => ErrorCode::PayloadTooLarge,
                // The peer went away in the middle of the call (killed, restarted, its
                // connection reset): a transient failure the caller may retry, not a bug.
                Code::Unknown | Code::Cancelled if peer_went_away(status) => ErrorCode::Unavailable,
                other => ErrorCode::from_grpc(other),
            };
            tracing::warn!(
                grpc_code = ?status.code(),
                message = status.message(),
                "a service call failed outside the service"
            );
            return ApiError::new(code, code.plain_message());
        };
        let message = match code {
            // A peer's panic or a bug must not leak its text.
            ErrorCode::Internal => "internal error".to_owned(),
            ErrorCode::Unavailable if status.message().is_empty() => {
                "service unavailable".to_owned()
            }
            _ => status.message().to_owned(),
        };
        ApiError { code, message }
    }
}

/// Whether a status that tonic made itself (no [`ErrorDetail`]) says the connection to the
/// peer broke mid-call: HTTP/2 stream or connection errors, the transport, a reset stream.
fn peer_went_away(status: &Status) -> bool {
    let message = status.message();
    status.code() == Code::Cancelled
        || message.starts_with("h2 protocol error")
        || message.starts_with("transport error")
        || message.contains("connection reset")
        || message.contains("error reading a body from connection")
}

impl From<ApiError> for Status {
    fn from(err: ApiError) -> Status {
        let detail = ErrorDetail {
            http_status: u32::from(err.code.http_status()),
        };
        Status::with_details(
            err.code.grpc_code(),
            err.message,
            detail.encode_to_vec().into(),
        )
    }
}

/// A failed call to another service: `?` on a client call gives the callee's error (its
/// message, or an opaque one for internal failures).
impl From<Status> for ApiError {
    fn from(status: Status) -> Self {
        ApiError::from_status(&status)
    }
}

/// [`ApiError::database`] with a generic context.
impl From<sea_orm::DbErr> for ApiError {
    fn from(err: sea_orm::DbErr) -> Self {
        ApiError::database("database error", err)
    }
}

/// The SQLSTATE of an error the database server returned, if that is what `err` is.
fn sqlstate(err: &sea_orm::DbErr) -> Option<String> {
    use sea_orm::{DbErr, RuntimeErr};
    match err {
        DbErr::Query(RuntimeErr::SqlxError(e))
        | DbErr::Exec(RuntimeErr::SqlxError(e))
        | DbErr::Conn(RuntimeErr::SqlxError(e)) => {
            Some(e.as_database_error()?.code()?.into_owned())
        }
        _ => None,
    }
}

impl From<sea_orm::TransactionError<ApiError>> for ApiError {
    fn from(err: sea_orm::TransactionError<ApiError>) -> Self {
        match err {
            sea_orm::TransactionError::Connection(e) => e.into(),
            sea_orm::TransactionError::Transaction(e) => e,
        }
    }
}

/// Shorthand for service results.
pub type ApiResult<T> = Result<T, ApiError>;

/// SPEC.md: a job's error lines are at most 300 bytes.
pub const ERROR_LINE_BYTES: usize = 300;

/// A job error as SPEC.md shows it: the first line only (no stack traces), trimmed, at most
/// [`ERROR_LINE_BYTES`] bytes, cut on a character boundary.
pub fn error_line(message: &str) -> String {
    let line = message.lines().next().unwrap_or("").trim();
    if line.len() <= ERROR_LINE_BYTES {
        return line.to_owned();
    }
    let mut end = ERROR_LINE_BYTES;
    while !line.is_char_boundary(end) {
        end -= 1;
    }
    line[..end].to_owned()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn status_round_trip_keeps_http_status_the_code_cannot_carry() {
        for code in [
            ErrorCode::BadRequest,
            ErrorCode::Unauthenticated,
            ErrorCode::Forbidden,
            ErrorCode::NotFound,
            ErrorCode::Timeout,
            ErrorCode::Conflict,
            ErrorCode::PayloadTooLarge,
            ErrorCode::UnsupportedMediaType,
            ErrorCode::TooManyRequests,
            ErrorCode::BadGateway,
            ErrorCode::Unavailable,
            ErrorCode::GatewayTimeout,
        ] {
            let status: Status = ApiError::new(code, "boom").into();
            let back = ApiError::from_status(&status);
            assert_eq!(back.code, code);
            assert_eq!(back.message, "boom");
        }
    }

    #[test]
    fn internal_errors_are_opaque() {
        let status = Status::internal("db password is hunter2");
        let err = ApiError::from_status(&status);
        assert_eq!(err.code.http_status(), 500);
        assert_eq!(err.message, "internal error");
    }

    #[test]
    fn statuses_not_from_a_service_show_no_text() {
        let too_large = Status::out_of_range(
            "Error, decoded message length too large: found 5000000 bytes, the limit is: 4194304 bytes",
        );
        let err = ApiError::from_status(&too_large);
        assert_eq!(err.code.http_status(), 413);
        assert!(!err.message.contains("4194304"), "{}", err.message);
        let refused = ApiError::from_status(&Status::unavailable("tcp connect error: refused"));
        assert_eq!(refused.code.http_status(), 503);
        assert_eq!(refused.message, "service unavailable");
        let bad = ApiError::from_status(&Status::invalid_argument("h2 protocol error: xyz"));
        assert_eq!(bad.code.http_status(), 400);
        assert!(!bad.message.contains("h2"), "{}", bad.message);
    }

    #[test]
    fn internal_errors_keep_their_cause_to_themselves() {
        let err = ApiError::internal("database error", "disk full at /var/lib/postgresql");
        assert_eq!(err.code.http_status(), 500);
        assert_eq!(err.message, "internal error");
    }

    /// A peer killed mid-call (what tonic reports when agent-service's replica died during a
    /// run, tests/compose/faults.py agent-kill) is a 503 the caller may retry, not a 500.
    #[test]
    fn a_peer_gone_mid_call_is_unavailable() {
        for status in [
            Status::unknown("h2 protocol error: error reading a body from connection"),
            Status::unknown("transport error"),
            Status::cancelled("operation was canceled"),
        ] {
            let err = ApiError::from_status(&status);
            assert_eq!(err.code.http_status(), 503, "{status:?}");
            assert_eq!(err.message, "service unavailable");
        }
        let bug = ApiError::from_status(&Status::unknown("something else"));
        assert_eq!(bug.code.http_status(), 500);
    }

    #[test]
    fn plain_statuses_map_by_code() {
        assert_eq!(
            ApiError::from_status(&Status::not_found("x"))
                .code
                .http_status(),
            404
        );
        assert_eq!(
            ApiError::from_status(&Status::unavailable(""))
                .code
                .http_status(),
            503
        );
    }
}
