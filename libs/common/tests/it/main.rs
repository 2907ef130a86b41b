//! Integration tests of libs/common against the embedded and the real backends.

#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::panic,
    clippy::print_stderr
)] // test code: fail loudly

mod bus;
mod outbox;
