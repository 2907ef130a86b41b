//! `chat_rate_limit_per_minute` for every replica together: one counter per user and minute
//! window in the chat database (`chat_rate_windows`), so N replicas let through what one
//! would, not N times as much.
//!
//! The limit holds over a sliding minute, estimated from two fixed windows: a request at
//! fraction `f` of the current window sees `current + previous × (1 − f)` requests before it,
//! so the boundary between two windows does not let twice the limit through. The check and
//! the count are one statement (`INSERT … ON CONFLICT DO UPDATE SET n = n + 1 WHERE n < room
//! RETURNING n`), atomic on SQLite and PostgreSQL: two replicas cannot both take the last
//! place. A refused request is not counted. Windows older than the previous one are deleted
//! when a new one starts.
//!
//! Only the limit is shared; the priority a request queues with (fairness.rs) is a scheduling
//! hint of the replica that runs it and stays local.

use chrono::{DateTime, Utc};
use docchat_common::error::{ApiError, ApiResult, ErrorCode};
use sea_orm::{ConnectionTrait, DatabaseConnection, DbBackend, Statement};

const WINDOW_SECONDS: i64 = 60;

/// The shared per-user rate limit; cheap to clone.
#[derive(Clone)]
pub struct RateLimiter {
    db: DatabaseConnection,
    limit: u32,
}

impl RateLimiter {
    pub fn new(db: DatabaseConnection, limit_per_minute: u32) -> RateLimiter {
        RateLimiter {
            db,
            limit: limit_per_minute.max(1),
        }
    }

    /// Counts a request of `user_id` now: refused (429, with when to retry) at the limit.
    pub async fn check(&self, user_id: &str) -> ApiResult<()> {
        self.check_at(user_id, docchat_common::time::now()).await
    }

    /// [`check`](Self::check) at `at` (tests move time by hand).
    pub async fn check_at(&self, user_id: &str, at: DateTime<Utc>) -> ApiResult<()> {
        let window = at.timestamp().div_euclid(WINDOW_SECONDS);
        let elapsed = at.timestamp().rem_euclid(WINDOW_SECONDS) as f64
            + f64::from(at.timestamp_subsec_millis()) / 1000.0;
        let backend = self.db.get_database_backend();
        let p = |i: usize| match backend {
            DbBackend::Postgres => format!("${i}"),
            _ => "?".to_owned(),
        };
        let previous = self
            .db
            .query_one(Statement::from_sql_and_values(
                backend,
                format!(
                    "SELECT n FROM chat_rate_windows WHERE user_id = {} AND window_start = {}",
                    p(1),
                    p(2)
                ),
                [user_id.into(), (window - 1).into()],
            ))
            .await?
            .map(|row| row.try_get::<i64>("", "n"))
            .transpose()?
            .unwrap_or(0);
        let carried = previous as f64 * (1.0 - elapsed / WINDOW_SECONDS as f64);
        // The count this window may reach: current + carried stays within the limit.
        // (A hair of slack keeps float noise from costing a place.)
        let room = (f64::from(self.limit) - carried + 1e-6).floor() as i64;
        let counted = if room <= 0 {
            None
        } else {
            self.db
                .query_one(Statement::from_sql_and_values(
                    backend,
                    format!(
                        "INSERT INTO chat_rate_windows (user_id, window_start, n) VALUES ({}, {}, 1) \
                         ON CONFLICT (user_id, window_start) DO UPDATE SET n = chat_rate_windows.n + 1 \
                         WHERE chat_rate_windows.n < {} RETURNING n",
                        p(1),
                        p(2),
                        p(3)
                    ),
                    [user_id.into(), window.into(), room.into()],
                ))
                .await?
                .map(|row| row.try_get::<i64>("", "n"))
                .transpose()?
        };
        match counted {
            Some(1) => {
                // The first request of a window: forget the windows before the previous one.
                self.db
                    .execute(Statement::from_sql_and_values(
                        backend,
                        format!(
                            "DELETE FROM chat_rate_windows WHERE window_start < {}",
                            p(1)
                        ),
                        [(window - 1).into()],
                    ))
                    .await?;
                Ok(())
            }
            Some(_) => Ok(()),
            None => {
                let current = self.current(user_id, window).await?;
                let retry = retry_after(self.limit, previous, current, elapsed);
                docchat_common::metrics::refused("chat_rate_limit");
                Err(ApiError::new(
                    ErrorCode::TooManyRequests,
                    format!(
                        "chat rate limit reached: at most {} requests per minute; retry in {retry} s",
                        self.limit
                    ),
                ))
            }
        }
    }

    async fn current(&self, user_id: &str, window: i64) -> ApiResult<i64> {
        let backend = self.db.get_database_backend();
        let sql = match backend {
            DbBackend::Postgres => {
                "SELECT n FROM chat_rate_windows WHERE user_id = $1 AND window_start = $2"
            }
            _ => "SELECT n FROM chat_rate_windows WHERE user_id = ? AND window_start = ?",
        };
        Ok(self
            .db
            .query_one(Statement::from_sql_and_values(
                backend,
                sql,
                [user_id.into(), window.into()],
            ))
            .await?
            .map(|row| row.try_get::<i64>("", "n"))
            .transpose()?
            .unwrap_or(0))
    }
}

/// Whole seconds until the sliding estimate leaves room for one more request, given the
/// previous and the current window's counts `elapsed` seconds into the current window (at
/// least 1).
fn retry_after(limit: u32, previous: i64, current: i64, elapsed: f64) -> u64 {
    let limit = f64::from(limit);
    let window = WINDOW_SECONDS as f64;
    let wait = if (current as f64) < limit && previous > 0 {
        // Within this window, as the previous one's weight fades.
        window * (1.0 - (limit - current as f64 - 1.0) / previous as f64) - elapsed
    } else {
        // In the next window, as this one's weight fades.
        (window - elapsed) + window * (1.0 - (limit - 1.0) / (current.max(1) as f64)).max(0.0)
    };
    ((wait - 1e-6).ceil().max(1.0) as u64).min(2 * WINDOW_SECONDS as u64)
}

#[cfg(test)]
mod tests {
    use super::*;
    use chrono::TimeZone;
    use sea_orm_migration::MigratorTrait;

    async fn db() -> DatabaseConnection {
        let db = docchat_common::db::connect("sqlite::memory:")
            .await
            .unwrap();
        crate::migrations::Migrator::up(&db, None).await.unwrap();
        db
    }

    fn at(seconds: i64) -> DateTime<Utc> {
        Utc.timestamp_opt(1_800_000_000 + seconds, 0).unwrap()
    }

    #[tokio::test]
    async fn rate_limit_refuses_within_the_minute_then_recovers() {
        let db = db().await;
        // Two replicas on one database share the limit.
        let (a, b) = (RateLimiter::new(db.clone(), 5), RateLimiter::new(db, 5));
        for i in 0..5 {
            let limiter = if i % 2 == 0 { &a } else { &b };
            limiter.check_at("u", at(10)).await.unwrap();
        }
        for limiter in [&a, &b] {
            let e = limiter.check_at("u", at(11)).await.unwrap_err();
            assert_eq!(e.code, ErrorCode::TooManyRequests);
            assert!(e.message.contains("5 requests per minute"), "{}", e.message);
            assert!(e.message.contains("retry in"), "{}", e.message);
        }
        // Another user is not affected.
        a.check_at("v", at(11)).await.unwrap();
        // Just after the window's end the previous one still weighs: no 2× at the boundary.
        let e = b.check_at("u", at(61)).await.unwrap_err();
        assert!(e.message.contains("retry in 11 s"), "{}", e.message);
        // Once its weight has faded enough — just when the 429 said — there is room again.
        b.check_at("u", at(71)).await.unwrap_err();
        b.check_at("u", at(72)).await.unwrap();
    }

    #[test]
    fn retry_names_when_the_estimate_drops_below_the_limit() {
        // Full this window: wait for the next one, and for this one's weight to fade there.
        assert_eq!(retry_after(5, 0, 5, 10.0), 62);
        // Room this window but the previous one weighs: wait for it to fade.
        assert_eq!(retry_after(5, 10, 0, 0.0), 36);
        assert!(retry_after(5, 5, 5, 59.5) >= 1);
    }
}
