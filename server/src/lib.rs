//! docchat's executable, `gateway`: the REST gateway alone (services at `DOCCHAT_*_URL`), or
//! with every service in its process (`--standalone`, [`standalone`]). The one crate that
//! depends on every service, so that the gateway library and the services depend on none of
//! each other.

pub mod mcp_stdio;
pub mod standalone;
