//! [`ResponseError`]: why the client side refused a response, shared by the
//! response's head and body parses (`response_head`, `response`); a framed body's
//! own error ([`BodyError`]) becomes one of these.

use super::body_error::BodyError;

/// Why a response was refused. The connection cannot be used after any of them: where
/// the response ends is unknown.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ResponseError {
    /// The status line is not `HTTP/1.x SP 3DIGIT SP reason`.
    StatusLine,
    /// A header line (or trailer line) breaks the grammar.
    Header,
    /// `Content-Length` is not a number, overflows, or two of them disagree.
    ContentLength,
    /// A chunk size is not hex or overflows, a chunk extension has a control byte, or
    /// chunk data is not followed by CRLF.
    Chunk,
    /// The head is larger than 64 KiB.
    HeadTooLarge,
    /// A chunk-size line, with its extensions, is longer than 4 KiB.
    SizeLineTooLong,
    /// The trailer section of a chunked body is larger than 64 KiB.
    TrailersTooLarge,
}

impl std::fmt::Display for ResponseError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            ResponseError::StatusLine => "invalid status line",
            ResponseError::Header => "invalid header line",
            ResponseError::ContentLength => "invalid Content-Length",
            ResponseError::Chunk => "invalid chunked body",
            ResponseError::HeadTooLarge => "response head too large",
            ResponseError::SizeLineTooLong => "chunk-size line too long",
            ResponseError::TrailersTooLarge => "trailer section too large",
        })
    }
}

impl std::error::Error for ResponseError {}

/// A response's body refused by its framer: the same error a request's body gets,
/// named as the response reader names it.
impl From<BodyError> for ResponseError {
    fn from(error: BodyError) -> ResponseError {
        match error {
            BodyError::Chunk => ResponseError::Chunk,
            BodyError::SizeLineTooLong => ResponseError::SizeLineTooLong,
            BodyError::Trailer => ResponseError::Header,
            BodyError::TrailersTooLarge => ResponseError::TrailersTooLarge,
        }
    }
}
