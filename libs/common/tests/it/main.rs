//! Integration tests of libs/common against the embedded and the real backends.

#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::panic,
    clippy::print_stderr,
    clippy::disallowed_methods
)] // test code: fail loudly; its tasks end with the test's runtime

mod bus;
mod errors;
mod outbox;
mod transactions;
