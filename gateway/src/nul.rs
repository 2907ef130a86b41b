//! Text holding the NUL character (U+0000) is refused at the edge with a 400. PostgreSQL
//! cannot store it in text (SQLite can), so without this the same request would be a 500 on
//! the distributed backend and stored on the standalone one (schemathesis found it on the
//! compose stack). In a URL NUL is `%00`; in a JSON body it can only be the escape `\u0000`
//! (a raw control character is not JSON), found while the body streams in, before any
//! handler parses it.

use std::pin::Pin;

use actix_web::HttpMessage;
use actix_web::body::{BoxBody, MessageBody};
use actix_web::dev::{Payload, ServiceRequest, ServiceResponse};
use actix_web::error::PayloadError;
use actix_web::middleware::Next;
use actix_web::web::Bytes;
use futures::{Stream, StreamExt};

use crate::error::bad_request;

/// What the caller is told.
pub const REFUSED: &str = "text may not contain the NUL character (\\u0000)";

/// Where a scan is inside the body's escapes.
#[derive(Debug, Default, Clone, Copy)]
enum State {
    #[default]
    Plain,
    /// After a backslash.
    Escape,
    /// In `\uXXXX`: hex digits seen, and whether all were `0`.
    Unicode { seen: u8, zero: bool },
}

/// Finds a `\u0000` escape in JSON text fed in pieces of any size.
#[derive(Debug, Default)]
pub struct Scan(State);

impl Scan {
    /// Feeds the next bytes; true once a `\u0000` escape is complete.
    pub fn feed(&mut self, bytes: &[u8]) -> bool {
        for &b in bytes {
            self.0 = match (self.0, b) {
                (State::Plain, b'\\') => State::Escape,
                (State::Plain, _) => State::Plain,
                (State::Escape, b'u') => State::Unicode {
                    seen: 0,
                    zero: true,
                },
                // `\\`, `\"`, `\n`, ...: the escape is over.
                (State::Escape, _) => State::Plain,
                (State::Unicode { seen, zero }, _) => {
                    let zero = zero && b == b'0';
                    if seen == 3 {
                        if zero {
                            return true;
                        }
                        State::Plain
                    } else {
                        State::Unicode {
                            seen: seen + 1,
                            zero,
                        }
                    }
                }
            };
        }
        false
    }
}

/// Whether a URL (path and query, still percent-encoded) names a NUL character.
pub fn in_url(path_and_query: &str) -> bool {
    path_and_query.contains("%00")
}

/// The middleware: URLs with `%00` are refused at once; JSON bodies are scanned as they
/// stream, the extractor failing with [`REFUSED`] (a 400) at the first `\u0000`.
pub async fn refuse(
    mut req: ServiceRequest,
    next: Next<impl MessageBody + 'static>,
) -> Result<ServiceResponse<BoxBody>, actix_web::Error> {
    let url = req.uri().path_and_query().map_or("", |p| p.as_str());
    if in_url(url) {
        return Err(bad_request(REFUSED).into());
    }
    let json = req
        .headers()
        .get(actix_web::http::header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .is_some_and(|v| v.to_ascii_lowercase().contains("json"));
    if json {
        let mut scan = Scan::default();
        let body = req.take_payload().map(move |chunk| {
            let chunk: Bytes = chunk?;
            if scan.feed(&chunk) {
                return Err(PayloadError::Io(std::io::Error::new(
                    std::io::ErrorKind::InvalidData,
                    REFUSED,
                )));
            }
            Ok(chunk)
        });
        let body: Pin<Box<dyn Stream<Item = Result<Bytes, PayloadError>>>> = Box::pin(body);
        req.set_payload(Payload::from(body));
    }
    Ok(next.call(req).await?.map_into_boxed_body())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn found(text: &str, piece: usize) -> bool {
        let mut scan = Scan::default();
        text.as_bytes().chunks(piece).any(|c| scan.feed(c))
    }

    #[test]
    fn finds_the_nul_escape_in_pieces_of_any_size() {
        for piece in [1, 2, 3, 5, 64] {
            assert!(found(r#"{"name": "a\u0000b"}"#, piece), "{piece}");
            assert!(found(r#"{"name": "\"\\\u0000"}"#, piece), "{piece}");
            // An escaped backslash then the text u0000; other escapes; other code points.
            assert!(!found(r#"{"name": "a\\u0000b"}"#, piece), "{piece}");
            assert!(
                !found(r#"{"name": "\u0001 \u1000 \n \u00e9"}"#, piece),
                "{piece}"
            );
            assert!(!found(r#"{"n": "\u000"}"#, piece), "{piece}");
        }
    }

    #[test]
    fn finds_nul_in_urls() {
        assert!(in_url("/api/v1/collections/%00"));
        assert!(in_url("/api/v1/collections?name_filter=a%00b"));
        assert!(!in_url("/api/v1/collections?name_filter=%2500"));
    }
}
