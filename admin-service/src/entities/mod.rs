//! sea-orm entities of admin-service, one file per table.

pub mod api_keys;
pub mod job_history;
pub mod llm_usage;
pub mod llm_usage_totals;
pub mod role_permissions;
pub mod roles;
pub mod settings;
pub mod user_groups;
pub mod user_roles;
pub mod users;
