//! A task's schedule (SPEC.md "Scheduled tasks", AGENTS.md §5): when it is next due.
//!
//! - once: an ISO 8601 time with an offset or `Z`; a naive time is read in the task's timezone.
//! - recurring: a five-field cron string (minute hour day-of-month month day-of-week), evaluated
//!   by `croner` in the task's timezone (day-of-month OR day-of-week as in Vixie cron; Sunday is
//!   0 or 7). Seconds (six or seven fields) and `@` nicknames are refused.
//! - interval: `N minutes` or `N hours` (N ≥ 1; `1 minute` / `1 hour` too).

use std::str::FromStr;

use chrono::{DateTime, Duration, LocalResult, NaiveDateTime, TimeZone, Utc};
use docchat_common::error::{ApiError, ApiResult};

/// A parsed schedule.
#[derive(Debug, Clone)]
#[expect(
    clippy::large_enum_variant,
    reason = "the seam's API holds croner::Cron by value; a schedule is parsed per task, never stored in bulk"
)]
pub enum Schedule {
    Once(DateTime<Utc>),
    Recurring {
        cron: croner::Cron,
        tz: chrono_tz::Tz,
    },
    Interval(Duration),
}

/// The longest interval accepted (a year in hours), so arithmetic never overflows.
const MAX_INTERVAL_MINUTES: i64 = 366 * 24 * 60;

impl Schedule {
    /// Parses a task's schedule; timezone is task_config.timezone (None/"" = UTC). Bad → ApiError 400 with a clear reason.
    pub fn parse(
        schedule_type: &str,
        expression: &str,
        timezone: Option<&str>,
    ) -> ApiResult<Schedule> {
        let tz = parse_timezone(timezone)?;
        let expression = expression.trim();
        match schedule_type {
            "once" => parse_once(expression, tz).map(Schedule::Once),
            "recurring" => parse_cron(expression).map(|cron| Schedule::Recurring { cron, tz }),
            "interval" => parse_interval(expression).map(Schedule::Interval),
            other => Err(ApiError::bad_request(format!(
                "schedule_type must be once, recurring or interval, not {other:?}"
            ))),
        }
    }

    /// The first due time strictly after `after` (None: a once schedule whose time is not after `after`).
    pub fn next_after(&self, after: DateTime<Utc>) -> Option<DateTime<Utc>> {
        match self {
            Schedule::Once(at) => (*at > after).then_some(*at),
            Schedule::Recurring { cron, tz } => cron
                .find_next_occurrence(&after.with_timezone(tz), false)
                .ok()
                .map(|next| next.with_timezone(&Utc)),
            Schedule::Interval(every) => after.checked_add_signed(*every),
        }
    }
}

/// An IANA timezone name; None or "" is UTC.
pub fn parse_timezone(timezone: Option<&str>) -> ApiResult<chrono_tz::Tz> {
    match timezone.map(str::trim) {
        None | Some("") => Ok(chrono_tz::UTC),
        Some(name) => chrono_tz::Tz::from_str(name).map_err(|_| {
            ApiError::bad_request(format!(
                "timezone {name:?} is not an IANA timezone name (e.g. America/New_York)"
            ))
        }),
    }
}

/// An ISO 8601 time: with an offset or `Z` as given, naive in `tz`.
pub fn parse_datetime(text: &str, tz: chrono_tz::Tz) -> Option<DateTime<Utc>> {
    let text = text.trim();
    if let Ok(at) = DateTime::parse_from_rfc3339(text) {
        return Some(at.with_timezone(&Utc));
    }
    // ISO 8601 forms RFC 3339 refuses: a space for the T, no seconds, a `+hhmm` offset.
    for format in [
        "%Y-%m-%dT%H:%M:%S%.f%#z",
        "%Y-%m-%d %H:%M:%S%.f%#z",
        "%Y-%m-%dT%H:%M%#z",
        "%Y-%m-%d %H:%M%#z",
    ] {
        if let Ok(at) = DateTime::parse_from_str(text, format) {
            return Some(at.with_timezone(&Utc));
        }
    }
    for format in [
        "%Y-%m-%dT%H:%M:%S%.f",
        "%Y-%m-%d %H:%M:%S%.f",
        "%Y-%m-%dT%H:%M",
        "%Y-%m-%d %H:%M",
    ] {
        if let Ok(naive) = NaiveDateTime::parse_from_str(text, format) {
            return match tz.from_local_datetime(&naive) {
                LocalResult::Single(at) => Some(at.with_timezone(&Utc)),
                // A repeated local time (fall back): the first of the two.
                LocalResult::Ambiguous(first, _) => Some(first.with_timezone(&Utc)),
                // A skipped local time (spring forward): the same wall time shifted by the gap.
                LocalResult::None => tz
                    .from_local_datetime(&(naive + Duration::hours(1)))
                    .earliest()
                    .map(|at| at.with_timezone(&Utc)),
            };
        }
    }
    None
}

fn parse_once(expression: &str, tz: chrono_tz::Tz) -> ApiResult<DateTime<Utc>> {
    parse_datetime(expression, tz).ok_or_else(|| {
        ApiError::bad_request(format!(
            "schedule_expression {expression:?} is not an ISO 8601 date and time \
             (e.g. 2026-12-01T09:00:00Z) as a once schedule needs"
        ))
    })
}

fn parse_cron(expression: &str) -> ApiResult<croner::Cron> {
    let fields = expression.split_whitespace().count();
    if fields != 5 {
        return Err(ApiError::bad_request(format!(
            "schedule_expression {expression:?} must be a five-field cron string \
             (minute hour day-of-month month day-of-week), it has {fields} field(s)"
        )));
    }
    croner::Cron::from_str(expression).map_err(|err| {
        ApiError::bad_request(format!(
            "schedule_expression {expression:?} is not a valid cron string: {err}"
        ))
    })
}

fn parse_interval(expression: &str) -> ApiResult<Duration> {
    let bad = || {
        ApiError::bad_request(format!(
            "schedule_expression {expression:?} must be `N minutes` or `N hours` with N ≥ 1 \
             for an interval schedule"
        ))
    };
    let mut words = expression.split_whitespace();
    let (Some(count), Some(unit), None) = (words.next(), words.next(), words.next()) else {
        return Err(bad());
    };
    if !count.bytes().all(|b| b.is_ascii_digit()) {
        return Err(bad());
    }
    let count: i64 = count.parse().map_err(|_| bad())?;
    let minutes_per = match (unit, count) {
        ("minutes", _) | ("minute", 1) => 1,
        ("hours", _) | ("hour", 1) => 60,
        _ => return Err(bad()),
    };
    let minutes = count.checked_mul(minutes_per).ok_or_else(bad)?;
    if !(1..=MAX_INTERVAL_MINUTES).contains(&minutes) {
        return Err(if minutes < 1 {
            bad()
        } else {
            ApiError::bad_request(format!(
                "schedule_expression {expression:?}: an interval is at most 8784 hours"
            ))
        });
    }
    Ok(Duration::minutes(minutes))
}

#[cfg(test)]
mod tests {
    use super::*;
    use chrono::{Datelike, Timelike};
    use chrono_tz::America::New_York;

    fn utc(text: &str) -> DateTime<Utc> {
        DateTime::parse_from_rfc3339(text)
            .unwrap()
            .with_timezone(&Utc)
    }

    /// Every due time in `[from, to)`.
    fn runs(schedule: &Schedule, from: &str, to: &str) -> Vec<DateTime<Utc>> {
        let (mut at, end) = (utc(from) - Duration::seconds(1), utc(to));
        let mut out = Vec::new();
        while let Some(next) = schedule.next_after(at) {
            if next >= end {
                break;
            }
            out.push(next);
            at = next;
        }
        out
    }

    fn recurring(expr: &str, tz: Option<&str>) -> Schedule {
        Schedule::parse("recurring", expr, tz).unwrap()
    }

    fn reason(schedule_type: &str, expr: &str, tz: Option<&str>) -> String {
        let err = Schedule::parse(schedule_type, expr, tz).unwrap_err();
        assert_eq!(err.code.http_status(), 400, "{expr}: {err:?}");
        err.message
    }

    #[test]
    fn spring_forward_runs_a_skipped_time_once() {
        // 2026-03-08 02:00 EST jumps to 03:00 EDT: 02:30 does not exist that day.
        let s = recurring("30 2 * * *", Some("America/New_York"));
        let got = runs(&s, "2026-03-07T00:00:00Z", "2026-03-10T00:00:00Z");
        let days: Vec<_> = got
            .iter()
            .map(|t| t.with_timezone(&New_York).date_naive().day())
            .collect();
        assert_eq!(
            days,
            vec![7, 8, 9],
            "once a day, the 8th not skipped: {got:?}"
        );
        assert_eq!(got[0], utc("2026-03-07T07:30:00Z")); // 02:30 EST
        assert_eq!(got[2], utc("2026-03-09T06:30:00Z")); // 02:30 EDT
        let on_8th = got[1].with_timezone(&New_York);
        assert_eq!(
            on_8th.hour(),
            3,
            "the skipped 02:30 runs right after the gap: {on_8th}"
        );
    }

    #[test]
    fn fall_back_runs_a_repeated_time_once() {
        // 2026-11-01 02:00 EDT falls back to 01:00 EST: 01:30 happens twice, runs once.
        let s = recurring("30 1 * * *", Some("America/New_York"));
        let got = runs(&s, "2026-10-31T00:00:00Z", "2026-11-03T00:00:00Z");
        assert_eq!(
            got,
            vec![
                utc("2026-10-31T05:30:00Z"), // 01:30 EDT
                utc("2026-11-01T05:30:00Z"), // the first 01:30 (EDT) only
                utc("2026-11-02T06:30:00Z"), // 01:30 EST
            ]
        );
    }

    #[test]
    fn hourly_keeps_its_hours_across_both_changes() {
        let s = recurring("0 * * * *", Some("America/New_York"));
        // 23 real hours on the spring day, 25 on the fall day: one run per real hour.
        assert_eq!(
            runs(&s, "2026-03-08T05:00:00Z", "2026-03-09T04:00:00Z").len(),
            23
        );
        assert_eq!(
            runs(&s, "2026-11-01T04:00:00Z", "2026-11-02T05:00:00Z").len(),
            25
        );
    }

    #[test]
    fn day_of_month_or_day_of_week() {
        // 09:00 on the 13th OR on any Friday (Vixie cron), not only on Friday the 13th.
        let s = recurring("0 9 13 * 5", None);
        let got = runs(&s, "2026-03-01T00:00:00Z", "2026-04-01T00:00:00Z");
        let days: Vec<_> = got.iter().map(|t| t.day()).collect();
        // March 2026: Fridays 6, 13, 20, 27; the 13th is one of them.
        assert_eq!(days, vec![6, 13, 20, 27]);
        let got = runs(&s, "2026-04-01T00:00:00Z", "2026-05-01T00:00:00Z");
        let days: Vec<_> = got.iter().map(|t| t.day()).collect();
        // April 2026: Fridays 3, 10, 17, 24 and Monday the 13th.
        assert_eq!(days, vec![3, 10, 13, 17, 24]);
        assert!(got.iter().all(|t| t.hour() == 9 && t.minute() == 0));
    }

    #[test]
    fn sunday_is_zero_and_seven() {
        for expr in ["0 8 * * 0", "0 8 * * 7", "0 8 * * SUN"] {
            let got = runs(
                &recurring(expr, None),
                "2026-03-01T00:00:00Z",
                "2026-03-31T00:00:00Z",
            );
            let days: Vec<_> = got.iter().map(|t| t.day()).collect();
            assert_eq!(days, vec![1, 8, 15, 22, 29], "{expr}");
        }
    }

    #[test]
    fn recurring_in_a_timezone() {
        let s = recurring("0 9 * * *", Some("Asia/Kolkata"));
        assert_eq!(
            s.next_after(utc("2026-06-01T00:00:00Z")),
            Some(utc("2026-06-01T03:30:00Z"))
        );
        // Strictly after: a due time is not its own next.
        assert_eq!(
            s.next_after(utc("2026-06-01T03:30:00Z")),
            Some(utc("2026-06-02T03:30:00Z"))
        );
    }

    #[test]
    fn bad_cron_expressions() {
        for expr in [
            "",
            "* * * *",
            "0 0 9 * * *",
            "0 0 9 * * * 2026",
            "@daily",
            "60 * * * *",
            "* 24 * * *",
            "* * 32 * *",
            "* * * 13 *",
            "* * * * 8",
            "a b c d e",
            "*/0 * * * *",
        ] {
            let why = reason("recurring", expr, None);
            assert!(why.contains("schedule_expression"), "{expr}: {why}");
        }
        assert!(reason("recurring", "0 0 9 * * *", None).contains("five-field"));
    }

    #[test]
    fn intervals() {
        let at = utc("2026-01-01T00:00:00Z");
        for (expr, minutes) in [
            ("1 minute", 1),
            ("1 minutes", 1),
            ("15 minutes", 15),
            ("1 hour", 60),
            ("2 hours", 120),
            ("  3   hours ", 180),
        ] {
            let s = Schedule::parse("interval", expr, None).unwrap();
            assert_eq!(
                s.next_after(at),
                Some(at + Duration::minutes(minutes)),
                "{expr}"
            );
        }
        for expr in [
            "",
            "0 minutes",
            "-5 minutes",
            "+5 minutes",
            "2 minute",
            "2 hour",
            "5 days",
            "5",
            "minutes",
            "1.5 hours",
            "5 Minutes",
            "5 minutes later",
            "99999999999999999999 hours",
            "9999 hours",
        ] {
            reason("interval", expr, None);
        }
    }

    #[test]
    fn once_times() {
        let s = Schedule::parse("once", "2026-12-01T09:00:00Z", None).unwrap();
        let at = utc("2026-12-01T09:00:00Z");
        assert_eq!(s.next_after(at - Duration::seconds(1)), Some(at));
        assert_eq!(s.next_after(at), None, "strictly after");
        let s = Schedule::parse("once", "2026-12-01T09:00:00+05:30", Some("Europe/Paris")).unwrap();
        assert_eq!(
            s.next_after(utc("2026-01-01T00:00:00Z")),
            Some(utc("2026-12-01T03:30:00Z"))
        );
        // Naive: the task's timezone (EST in December), else UTC.
        let s = Schedule::parse("once", "2026-12-01T09:00:00", Some("America/New_York")).unwrap();
        assert_eq!(
            s.next_after(utc("2026-01-01T00:00:00Z")),
            Some(utc("2026-12-01T14:00:00Z"))
        );
        let s = Schedule::parse("once", "2026-12-01 09:00", None).unwrap();
        assert!(matches!(s, Schedule::Once(t) if t == utc("2026-12-01T09:00:00Z")));
        for expr in [
            "",
            "tomorrow",
            "2026-13-01T09:00:00Z",
            "2026-12-01",
            "1764579600",
        ] {
            reason("once", expr, None);
        }
    }

    #[test]
    fn bad_types_and_timezones() {
        assert!(reason("weekly", "1 hour", None).contains("schedule_type"));
        assert!(reason("interval", "1 hour", Some("Mars/Olympus")).contains("timezone"));
        assert!(Schedule::parse("interval", "1 hour", Some("")).is_ok());
        assert!(Schedule::parse("interval", "1 hour", Some("UTC")).is_ok());
    }
}
