//! mcp_rate_limit and mcp_max_concurrent_jobs (SPEC.md deployment settings: MCP inspections,
//! and the `ask` and `upload_text` calls of docchat's own MCP server) of one gateway
//! replica, per user, counted in memory: a deployment with N gateways lets a user make up to
//! N times as many MCP requests.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use docchat_common::config::Config;
use docchat_common::error::{ApiError, ErrorCode};

/// Per-user request counts (this minute) and running inspections.
pub struct Limiter {
    per_minute: u32,
    concurrent: u32,
    users: Arc<Mutex<HashMap<String, Usage>>>,
}

#[derive(Default)]
struct Usage {
    window: Option<Instant>,
    count: u32,
    running: u32,
}

/// One running inspection; given back when dropped.
pub struct Slot {
    user: String,
    users: Arc<Mutex<HashMap<String, Usage>>>,
}

impl Drop for Slot {
    fn drop(&mut self) {
        let mut users = self.users.lock().unwrap_or_else(|p| p.into_inner());
        if let Some(u) = users.get_mut(&self.user) {
            u.running = u.running.saturating_sub(1);
        }
    }
}

impl Limiter {
    pub fn new(config: &Config) -> Limiter {
        Limiter {
            per_minute: config.mcp_rate_limit.max(1),
            concurrent: config.mcp_max_concurrent_jobs.max(1),
            users: Arc::new(Mutex::new(HashMap::new())),
        }
    }

    /// Counts one request of `user`; a slot while it runs, or 429.
    pub fn admit(&self, user: &str) -> Result<Slot, ApiError> {
        let mut users = self.users.lock().unwrap_or_else(|p| p.into_inner());
        let now = Instant::now();
        let u = users.entry(user.to_owned()).or_default();
        if u.window
            .is_none_or(|w| now.duration_since(w) >= Duration::from_secs(60))
        {
            u.window = Some(now);
            u.count = 0;
        }
        if u.count >= self.per_minute {
            docchat_common::metrics::refused("mcp_rate_limit");
            return Err(ApiError::new(
                ErrorCode::TooManyRequests,
                format!(
                    "too many MCP requests: at most {} per minute",
                    self.per_minute
                ),
            ));
        }
        if u.running >= self.concurrent {
            docchat_common::metrics::refused("mcp_max_concurrent_jobs");
            return Err(ApiError::new(
                ErrorCode::TooManyRequests,
                format!(
                    "too many MCP jobs running (inspections, asks, uploads): at most {} at once",
                    self.concurrent
                ),
            ));
        }
        u.count += 1;
        u.running += 1;
        Ok(Slot {
            user: user.to_owned(),
            users: self.users.clone(),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_limiter_counts_requests_and_running_inspections() {
        let config = Config {
            mcp_rate_limit: 3,
            mcp_max_concurrent_jobs: 1,
            ..Config::default()
        };
        let limiter = Limiter::new(&config);
        let first = limiter.admit("u").unwrap();
        assert_eq!(
            limiter.admit("u").err().map(|e| e.code),
            Some(ErrorCode::TooManyRequests),
            "one running at a time"
        );
        assert!(limiter.admit("v").is_ok(), "per user");
        drop(first);
        drop(limiter.admit("u").unwrap());
        drop(limiter.admit("u").unwrap());
        assert!(limiter.admit("u").is_err(), "three a minute");
    }
}
