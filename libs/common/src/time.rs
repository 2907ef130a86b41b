//! Timestamps: chrono inside services, `google.protobuf.Timestamp` on the wire.

use chrono::{DateTime, TimeZone, Utc};
use prost_types::Timestamp;

/// Now, truncated to microseconds so values survive a database round trip unchanged.
pub fn now() -> DateTime<Utc> {
    let now = Utc::now();
    let micros = now.timestamp_micros();
    Utc.timestamp_micros(micros).single().unwrap_or(now)
}

pub fn to_proto(t: DateTime<Utc>) -> Timestamp {
    Timestamp {
        seconds: t.timestamp(),
        nanos: i32::try_from(t.timestamp_subsec_nanos()).unwrap_or(0),
    }
}

pub fn opt_to_proto(t: Option<DateTime<Utc>>) -> Option<Timestamp> {
    t.map(to_proto)
}

pub fn from_proto(t: &Timestamp) -> DateTime<Utc> {
    Utc.timestamp_opt(t.seconds, u32::try_from(t.nanos).unwrap_or(0))
        .single()
        .unwrap_or_default()
}

/// Parses RFC 3339 and the client's `+0000` offsets (no colon).
pub fn parse_datetime(s: &str) -> Option<DateTime<Utc>> {
    if let Ok(t) = DateTime::parse_from_rfc3339(s) {
        return Some(t.with_timezone(&Utc));
    }
    DateTime::parse_from_str(s, "%Y-%m-%dT%H:%M:%S%.f%z")
        .ok()
        .map(|t| t.with_timezone(&Utc))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn proto_round_trip() {
        let t = now();
        assert_eq!(from_proto(&to_proto(t)), t);
    }

    #[test]
    fn parses_client_offsets() {
        let a = parse_datetime("2026-11-21T10:00:00.123456+0000").unwrap();
        let b = parse_datetime("2026-11-21T10:00:00.123456Z").unwrap();
        assert_eq!(a, b);
        assert!(parse_datetime("yesterday").is_none());
    }
}
