//! End-to-end REST tests: the gateway in front of every service (each its own `serve()` on real
//! loopback gRPC, docchat_test_stack), on SQLite + in-process bus and on PostgreSQL + RabbitMQ.

#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::panic,
    clippy::print_stderr,
    clippy::disallowed_methods
)] // test code: fail loudly; its tasks end with the test's runtime

mod admin_keys;
mod agent;
mod agent_documents;
mod agent_files;
mod api_spec;
mod ceilings;
mod chats_everyday;
mod collections_everyday;
mod compat;
mod completions;
mod concurrency;
mod custom_agents;
mod custom_tools;
mod documents;
mod edge;
mod followups;
mod harness;
mod identity;
mod job_history;
mod limits;
mod mcp;
mod mcp_server;
mod memory_agent;
mod memory_blocks;
mod metrics;
mod not_in_documents;
mod readiness;
mod references;
mod rerank;
mod scheduled_tasks;
mod slice;
mod tags_extractors;
mod tags_per_user;
mod upstream_errors;
mod upstreams;
