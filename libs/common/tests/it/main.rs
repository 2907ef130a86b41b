//! Integration tests of libs/common against the embedded and the real backends.

mod bus;
mod outbox;
