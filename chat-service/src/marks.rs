//! Replies as numbered lines. A reply reaches its client in the pieces the progress writer
//! (limits.rs) cuts: each write of the text so far ends a line, and only written lines are
//! sent (generate.rs). Where each line ends is recorded with the text ([`Marks`], in the
//! progress row while the reply is generated and with the stored reply after), so any
//! replica reads the same lines from the database: line `n` is the text between the
//! (n-1)th and the nth mark. A streamed completion's lines are numbered (`seq`): 1 the
//! question's id, then the text, then the final line.

use docchat_common::error::{ApiError, ApiResult};

/// Where each line of a text ends: byte offsets, strictly ascending, on char boundaries.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Marks(Vec<usize>);

impl Marks {
    /// The stored form (`12,40,41`); absent or empty is no line.
    pub fn parse(stored: Option<&str>) -> ApiResult<Marks> {
        let Some(stored) = stored.filter(|s| !s.is_empty()) else {
            return Ok(Marks::default());
        };
        let mut ends = Vec::with_capacity(stored.len() / 3);
        for part in stored.split(',') {
            let end: usize = part.parse().map_err(|_| {
                ApiError::internal("reading a reply's line marks", format!("bad mark {part:?}"))
            })?;
            if ends.last().is_some_and(|last| *last >= end) {
                return Err(ApiError::internal(
                    "reading a reply's line marks",
                    "marks out of order",
                ));
            }
            ends.push(end);
        }
        Ok(Marks(ends))
    }

    pub fn encode(&self) -> String {
        let mut out = String::with_capacity(self.0.len() * 4);
        for (i, end) in self.0.iter().enumerate() {
            if i > 0 {
                out.push(',');
            }
            out.push_str(&end.to_string());
        }
        out
    }

    /// Ends a line at `end` (ignored unless past the last line's end).
    pub fn push(&mut self, end: usize) {
        if end > self.end() {
            self.0.push(end);
        }
    }

    pub fn len(&self) -> usize {
        self.0.len()
    }

    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }

    /// Where the last line ends (0 without lines).
    pub fn end(&self) -> usize {
        self.0.last().copied().unwrap_or(0)
    }

    /// Line `n` (1-based) of `text`; None past the last line, or when the marks do not fit
    /// `text`.
    pub fn line<'a>(&self, text: &'a str, n: usize) -> Option<&'a str> {
        let end = *self.0.get(n.checked_sub(1)?)?;
        let start = if n == 1 { 0 } else { self.0[n - 2] };
        text.get(start..end)
    }

    /// The lines of the finished `text`: these marks as far as `text` still begins with
    /// `seen` (the text they were cut from), then the rest of `text` as one more line.
    pub fn closed(&self, seen: &str, text: &str) -> Marks {
        let common = seen
            .bytes()
            .zip(text.bytes())
            .take_while(|(a, b)| a == b)
            .count();
        let kept = self
            .0
            .iter()
            .take_while(|end| **end <= common && text.is_char_boundary(**end))
            .count();
        Marks(self.0[..kept].to_vec()).through(text.len())
    }

    /// These marks with what lies past the last one, up to `len`, as one more line.
    pub fn through(mut self, len: usize) -> Marks {
        self.push(len);
        self
    }
}

/// The `seq` of a streamed completion's line of text `n` (1-based): 1 is the question's id.
pub fn text_seq(n: usize) -> u64 {
    n as u64 + 1
}

/// The `seq` of the final line of a reply with `lines` lines of text.
pub fn final_seq(lines: usize) -> u64 {
    lines as u64 + 2
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn marks_round_trip_and_cut_lines() {
        let text = "Hello wörld, again";
        let mut marks = Marks::default();
        marks.push(6);
        marks.push(6);
        marks.push(13);
        assert_eq!(marks.encode(), "6,13");
        let back = Marks::parse(Some("6,13")).unwrap();
        assert_eq!(back, marks);
        assert_eq!(back.line(text, 1), Some("Hello "));
        assert_eq!(back.line(text, 2), Some("wörld,"));
        assert_eq!(back.line(text, 3), None);
        assert_eq!(back.line(text, 0), None);
        assert_eq!(Marks::parse(None).unwrap(), Marks::default());
        assert!(Marks::parse(Some("4,2")).is_err());
        assert!(Marks::parse(Some("4,x")).is_err());
    }

    #[test]
    fn closing_keeps_what_the_final_text_still_begins_with() {
        let marks = Marks::parse(Some("3,6")).unwrap();
        // The final text extends what was seen: one more line for the rest.
        assert_eq!(marks.closed("abcdef", "abcdefgh").encode(), "3,6,8");
        // Nothing more: the lines stay.
        assert_eq!(marks.closed("abcdef", "abcdef").encode(), "3,6");
        // A final text that differs from what was cut keeps the lines it agrees with.
        assert_eq!(marks.closed("abcdef", "abcxyz!").encode(), "3,7");
        assert_eq!(Marks::default().closed("", "").encode(), "");
        assert_eq!(marks.clone().through(6).encode(), "3,6");
        assert_eq!(marks.through(9).encode(), "3,6,9");
    }
}
