//! What every docchat service shares: configuration, caller identity between services, the
//! database connection and migrations, the event bus and its outbox, telemetry, the error
//! type and its HTTP/gRPC mapping, the runtime-settings client, and the ceilings on stored
//! fields and list pages.

pub mod auth;
pub mod budget;
pub mod bus;
pub mod clients;
pub mod config;
pub mod db;
pub mod error;
pub mod grpc;
pub mod host;
pub mod ids;
pub mod jobs;
pub mod limits;
pub mod metrics;
pub mod outbox;
pub mod settings;
pub mod telemetry;
#[cfg(any(test, feature = "testing"))]
pub mod testing;
pub mod time;
pub mod ttl_cache;

pub use auth::{Caller, JwtKeys};
pub use clients::Clients;
pub use config::Config;
pub use error::{ApiError, ErrorCode};
