//! The one error type of the crate.

/// Why a file could not be turned into text.
///
/// Every message is one line that tells the uploader what is wrong and, where there is
/// something to do, what to do about it.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ParseError {
    /// The file type is not one docchat can read (the payload names it, e.g. `.exe`).
    #[error("unsupported file type {0}")]
    Unsupported(String),
    /// The file claims a type but its content is damaged or not of that type.
    ///
    /// The payload starts with the format, e.g. `PDF: missing %PDF header`, so the
    /// message reads `corrupt PDF: missing %PDF header`.
    #[error("corrupt {0}")]
    Corrupt(String),
    /// The file is protected by a password (the payload names the format).
    #[error("{0} is password-protected; remove the password and upload it again")]
    Encrypted(String),
    /// The file is empty or holds no extractable text (for example a scanned PDF
    /// without a text layer).
    #[error(
        "no text found: the file is empty or holds no text (a PDF drawn only with shapes, or blank pages)"
    )]
    Empty,
    /// The file, or what it expands to, is over one of the parser's limits.
    #[error("document too large: {0}")]
    TooLarge(String),
}

impl ParseError {
    /// A [`ParseError::Corrupt`] for the format `format` (e.g. `"PDF"`).
    pub(crate) fn corrupt(format: &str, reason: impl std::fmt::Display) -> Self {
        let reason = reason.to_string();
        let reason = reason.lines().next().unwrap_or_default().trim().to_owned();
        if reason.is_empty() {
            Self::Corrupt(format!("{format}: unreadable content"))
        } else {
            Self::Corrupt(format!("{format}: {reason}"))
        }
    }
}
