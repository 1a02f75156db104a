//! [`BodyError`]: why a body's framer refused it, shared by the framer (`body`)
//! and the chunked coding it frames with (`chunked`).

/// Why a chunked body was refused: the connection cannot be used after it, as
/// where the body ends is unknown.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum BodyError {
    /// A chunk size is not hex or overflows, a chunk extension has a control byte,
    /// or chunk data is not followed by CRLF; by the strict grammar, also a line
    /// ended by a bare LF, white space or an extension the grammar does not allow,
    /// or a size of more than 16 digits or of 2^63 or more.
    Chunk,
    /// A chunk-size line, with its extensions, is longer than 4 KiB.
    SizeLineTooLong,
    /// A line of the trailer section breaks the field grammar (or, by the strict
    /// grammar, ends in a bare LF).
    Trailer,
    /// The trailer section is larger than 64 KiB.
    TrailersTooLarge,
}

impl BodyError {
    /// The status that answers a request whose body was refused: 400.
    pub fn status(self) -> u16 {
        400
    }
}

impl std::fmt::Display for BodyError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            BodyError::Chunk => "invalid chunked body",
            BodyError::SizeLineTooLong => "chunk-size line too long",
            BodyError::Trailer => "invalid trailer line",
            BodyError::TrailersTooLarge => "trailer section too large",
        })
    }
}

impl std::error::Error for BodyError {}
