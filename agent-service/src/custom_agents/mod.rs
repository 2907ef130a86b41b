//! Custom agents (issue 16): agents users upload as a ZIP of folders, associated with their
//! MCP tools and stored keys, and run by name in a completion — in the sandbox, by the entry
//! contract of [`run`] (docs/custom-agents.md).
//!
//! - [`upload`]: reading an upload (folders, metadata.json, envs.json);
//! - [`store`]: agents and associations in the database (the folder's bytes included, so
//!   every replica materializes them, see [`run`]);
//! - [`keys`] and [`cipher`]: stored keys, sealed at rest, also the [`Secrets`] of tools;
//! - [`view`]: their wire forms; [`service`]: CustomAgentService;
//! - [`tools`]: the caller's custom tools as rows.
//!
//! [`Secrets`]: crate::tools::custom::Secrets

pub mod cipher;
pub mod grpc;
pub mod keys;
pub mod run;
pub mod store;
pub mod tools;
pub mod upload;
pub mod view;

use docchat_common::error::ApiError;

fn db_error(e: sea_orm::DbErr) -> ApiError {
    ApiError::database("custom agents", e)
}
