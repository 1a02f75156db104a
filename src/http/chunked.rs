//! The chunked transfer coding, read as it arrives: where a chunked body ends and
//! which of its bytes are content, found by a state machine that resumes where the
//! last bytes left it, so a body that comes one byte at a time costs one step per
//! byte and is never scanned again.
//!
//! RFC 9112, 7.1:
//! ```text
//! chunked-body    = *chunk last-chunk trailer-section CRLF
//! chunk           = chunk-size [ chunk-ext ] CRLF chunk-data CRLF
//! chunk-size      = 1*HEXDIG
//! last-chunk      = 1*("0") [ chunk-ext ] CRLF
//! chunk-data      = 1*OCTET ; a sequence of chunk-size octets
//! chunk-ext       = *( BWS ";" BWS chunk-ext-name [ BWS "=" BWS chunk-ext-val ] )
//! chunk-ext-name  = token
//! chunk-ext-val   = token / quoted-string
//! trailer-section = *( field-line CRLF )
//! ```
//! Two grammars: an endpoint's ([`ChunkGrammar::Lenient`]), which ends a line at a
//! bare LF as at CRLF (RFC 9112, 2.2), lets white space trail a size and skips
//! extensions unchecked; and an intermediary's ([`ChunkGrammar::Strict`]), which
//! takes exactly the grammar above, so that nothing it forwards could be framed
//! otherwise by the next hop.

use super::body_error::BodyError;
use super::syntax::{field_lines, find_head_end, is_tchar, is_value_byte};

/// The longest chunk-size line, extensions and line end included. Extensions are
/// ignored, and no server sends kilobytes of them; without a limit a server could
/// keep one line going forever and the response would never end nor fail.
pub(crate) const MAX_SIZE_LINE: usize = 4 * 1024;

/// The largest trailer section, its empty line included. It is checked whole before
/// it is consumed, so the caller holds it meanwhile: the same 64 KiB as a head.
pub(crate) const MAX_TRAILERS: usize = 64 * 1024;

/// The most hex digits of a chunk size the strict grammar takes: 16 make any size
/// below 2^64, and a sender has no use for leading zeros past them.
const MAX_SIZE_DIGITS: u8 = 16;

/// How strictly a chunked body's framing is read: as an endpoint may, or as an
/// intermediary must, so that what it forwards cannot be framed two ways.
///
/// ```
/// use percore::http::{BodyError, BodyFramer, ChunkGrammar};
/// // A size line ended by a bare LF inside an extension: a backend that ends size
/// // lines only at CRLF reads `xx` as part of the extension, not as data.
/// let body = b"2;\nxx\r\n0\r\n\r\n";
/// assert!(BodyFramer::chunked().read(body).is_ok());
/// let strict = BodyFramer::chunked().with_grammar(ChunkGrammar::Strict).read(body);
/// assert_eq!(strict, Err(BodyError::Chunk));
/// ```
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum ChunkGrammar {
    /// An endpoint's reading (RFC 9112, 2.2): a bare LF ends a line as CRLF does,
    /// white space may trail the size, extensions are skipped unchecked (but for
    /// control bytes), and a size may have any number of leading zeros. What
    /// `percore bench` reads servers' answers with.
    #[default]
    Lenient,
    /// An intermediary's reading (RFC 9112, 7.1, exactly): CRLF only, in size
    /// lines, after data and in the trailer section; extensions checked
    /// (`;name[=token|quoted-string]`, white space only where `BWS` is); at most 16
    /// hex digits and a size below 2^63. What a proxy reads bodies with before it
    /// frames them again.
    Strict,
}

/// How far a chunked body has been read.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub(crate) struct ChunkedBody {
    part: Part,
    grammar: ChunkGrammar,
}

/// What one [`ChunkedBody::read`] found: the bytes consumed, the content among them
/// (their last `content` bytes), and, once the body ended, its trailer section.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Chunked {
    pub(crate) consumed: usize,
    pub(crate) content: usize,
    /// The trailer section's field lines and its empty line, where the body ended.
    pub(crate) trailers: Option<(usize, usize)>,
}

/// The part of the body the next byte belongs to.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Part {
    /// A chunk-size line, read byte by byte (and so never held back).
    SizeLine(SizeLine),
    /// Chunk data, `left` bytes of it still to come.
    Data { left: u64 },
    /// The line end after chunk data; `cr` once its CR was seen.
    DataEnd { cr: bool },
    /// The trailer section, left unconsumed until its empty line arrives;
    /// `scanned` bytes of it were searched for that line already.
    Trailers { scanned: usize },
}

impl Default for Part {
    fn default() -> Part {
        Part::SizeLine(SizeLine::default())
    }
}

impl ChunkedBody {
    pub(crate) fn new(grammar: ChunkGrammar) -> ChunkedBody {
        ChunkedBody { part: Part::default(), grammar }
    }

    /// Reads on through `body`, the bytes that follow those consumed so far, up to
    /// the end of the first run of content in them (or the body's end): how many
    /// bytes were consumed, how many of the last of them are content, and the
    /// trailer section's place if the body ended. Call again with the rest while
    /// the body goes on. Bytes left unconsumed (an incomplete trailer section) must
    /// be handed in again, with what arrives next.
    pub(crate) fn read(&mut self, body: &[u8]) -> Result<Chunked, BodyError> {
        let strict = self.grammar == ChunkGrammar::Strict;
        let mut at = 0;
        loop {
            let rest = &body[at..];
            match &mut self.part {
                Part::SizeLine(line) => {
                    let Some((len, size)) = line.read(rest, self.grammar)? else {
                        return Ok(Chunked { consumed: body.len(), content: 0, trailers: None });
                    };
                    at += len;
                    self.part = match size {
                        0 => Part::Trailers { scanned: 0 },
                        left => Part::Data { left },
                    };
                }
                Part::Data { left } => {
                    // A chunk larger than memory is still only counted down.
                    let take = usize::try_from(*left).map_or(rest.len(), |left| left.min(rest.len()));
                    *left -= take as u64;
                    if *left == 0 {
                        self.part = Part::DataEnd { cr: false };
                    }
                    return Ok(Chunked { consumed: at + take, content: take, trailers: None });
                }
                Part::DataEnd { cr } => match (rest.first(), *cr) {
                    (None, _) => return Ok(Chunked { consumed: at, content: 0, trailers: None }),
                    (Some(b'\r'), false) => {
                        *cr = true;
                        at += 1;
                    }
                    (Some(b'\n'), cr) if cr || !strict => {
                        at += 1;
                        self.part = Part::default();
                    }
                    _ => return Err(BodyError::Chunk),
                },
                Part::Trailers { scanned } => {
                    return match trailers_len(rest, *scanned, self.grammar)? {
                        Some(len) => {
                            Ok(Chunked { consumed: at + len, content: 0, trailers: Some((at, len)) })
                        }
                        None => {
                            *scanned = rest.len();
                            Ok(Chunked { consumed: at, content: 0, trailers: None })
                        }
                    };
                }
            }
        }
    }
}

/// A chunk-size line so far: its length, the size its digits make, and where in the
/// line the next byte falls.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
struct SizeLine {
    len: usize,
    size: u64,
    digits: u8,
    phase: Phase,
}

/// Where in a chunk-size line the next byte falls. The lenient grammar knows the
/// digits, the rest of the line, and a CR; the strict one walks `chunk-ext`.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
enum Phase {
    /// `chunk-size`: hex digits.
    #[default]
    Digits,
    /// Lenient: after the digits, white space, then anything once a `;` came (`named`).
    Skipped { named: bool },
    /// Strict: after the size or an extension; `BWS ";"`, or the CR.
    AfterPart,
    /// Strict: `BWS` that only a `;` may follow (after the size or a value), or a
    /// `;` or `=` (after a name: `or_value`).
    Space { or_value: bool },
    /// Strict: after `;`, `BWS` then a name.
    NameStart,
    /// Strict: in `chunk-ext-name`.
    Name,
    /// Strict: after `=`, `BWS` then a token or a quoted string.
    ValueStart,
    /// Strict: in a token value.
    Token,
    /// Strict: in a quoted string; `escaped` after its backslash.
    Quoted { escaped: bool },
    /// A CR, which only an LF may follow.
    Cr,
}

impl SizeLine {
    /// Reads on through `bytes`: once the line ends, how many of them it took and
    /// the chunk size; `None` while it goes on (then all of them belong to it).
    fn read(&mut self, bytes: &[u8], grammar: ChunkGrammar) -> Result<Option<(usize, u64)>, BodyError> {
        for (at, &byte) in bytes.iter().enumerate() {
            self.len += 1;
            if self.len > MAX_SIZE_LINE {
                return Err(BodyError::SizeLineTooLong);
            }
            let ended = match grammar {
                ChunkGrammar::Lenient => self.lenient(byte)?,
                ChunkGrammar::Strict => self.strict(byte)?,
            };
            if ended {
                return Ok(Some((at + 1, self.size)));
            }
        }
        Ok(None)
    }

    /// Takes a hex digit of the size: whether `byte` was one.
    fn digit(&mut self, byte: u8, grammar: ChunkGrammar) -> Result<bool, BodyError> {
        let Some(digit) = char::from(byte).to_digit(16) else {
            // `1*HEXDIG`: the size may not be missing.
            return if self.digits == 0 { Err(BodyError::Chunk) } else { Ok(false) };
        };
        self.digits = self.digits.saturating_add(1);
        let size = self.size.checked_mul(16).and_then(|size| size.checked_add(u64::from(digit)));
        self.size = size.ok_or(BodyError::Chunk)?;
        if grammar == ChunkGrammar::Strict && (self.digits > MAX_SIZE_DIGITS || self.size >= 1 << 63) {
            return Err(BodyError::Chunk);
        }
        Ok(true)
    }

    /// One byte, by the lenient grammar: whether it ends the line. Extensions are
    /// skipped, so only what could hide a line end is refused: a control byte, or
    /// anything but white space before the first `;`.
    fn lenient(&mut self, byte: u8) -> Result<bool, BodyError> {
        if self.phase == Phase::Digits {
            if self.digit(byte, ChunkGrammar::Lenient)? {
                return Ok(false);
            }
            self.phase = Phase::Skipped { named: false };
        }
        match (self.phase, byte) {
            (_, b'\n') => Ok(true),
            (Phase::Cr, _) => Err(BodyError::Chunk),
            (_, b'\r') => {
                self.phase = Phase::Cr;
                Ok(false)
            }
            (Phase::Skipped { named: false }, b' ' | b'\t') => Ok(false),
            (_, b';') => {
                self.phase = Phase::Skipped { named: true };
                Ok(false)
            }
            (Phase::Skipped { named: true }, byte) if is_value_byte(byte) => Ok(false),
            _ => Err(BodyError::Chunk),
        }
    }

    /// One byte, by the strict grammar: whether it ends the line.
    fn strict(&mut self, byte: u8) -> Result<bool, BodyError> {
        let is_space = matches!(byte, b' ' | b'\t');
        self.phase = match (self.phase, byte) {
            (Phase::Digits, _) if self.digit(byte, ChunkGrammar::Strict)? => Phase::Digits,
            (Phase::Cr, b'\n') => return Ok(true),
            (Phase::Cr, _) => return Err(BodyError::Chunk),
            // Where the line may end: after the size, a name, or a value.
            (Phase::Digits | Phase::AfterPart | Phase::Name | Phase::Token, b'\r') => Phase::Cr,
            (Phase::Digits | Phase::AfterPart | Phase::Name | Phase::Token | Phase::Space { .. }, b';') => {
                Phase::NameStart
            }
            (Phase::Name | Phase::Space { or_value: true }, b'=') => Phase::ValueStart,
            (Phase::Digits | Phase::AfterPart | Phase::Token, _) if is_space => {
                Phase::Space { or_value: false }
            }
            (Phase::Name, _) if is_space => Phase::Space { or_value: true },
            (space @ (Phase::Space { .. } | Phase::NameStart | Phase::ValueStart), _) if is_space => space,
            (Phase::NameStart | Phase::Name, _) if is_tchar(byte) => Phase::Name,
            (Phase::ValueStart | Phase::Token, _) if is_tchar(byte) => Phase::Token,
            (Phase::ValueStart, b'"') => Phase::Quoted { escaped: false },
            (Phase::Quoted { escaped: false }, b'"') => Phase::AfterPart,
            (Phase::Quoted { escaped: false }, b'\\') => Phase::Quoted { escaped: true },
            // qdtext and quoted-pair: HTAB, SP, VCHAR, obs-text (the `"` and `\` of
            // qdtext were taken above).
            (Phase::Quoted { .. }, _) if is_value_byte(byte) => Phase::Quoted { escaped: false },
            _ => return Err(BodyError::Chunk),
        };
        Ok(false)
    }
}

/// The length of `trailer-section CRLF` at the start of `section`, every field line
/// checked, or `None` while its empty line has not arrived; `scanned` bytes of it
/// were searched before, so only the new ones are.
fn trailers_len(section: &[u8], scanned: usize, grammar: ChunkGrammar) -> Result<Option<usize>, BodyError> {
    let end = match section {
        // No trailers: the empty line comes at once, with no line end before it.
        [b'\n', ..] => Some(1),
        [b'\r', b'\n', ..] => Some(2),
        // Three bytes back: an end seen in part last time ("\r\n\r").
        _ => find_head_end(section, scanned.saturating_sub(3)),
    };
    // Checked complete or not, so that however the bytes arrive the answer is one.
    if end.unwrap_or(section.len()) > MAX_TRAILERS {
        return Err(BodyError::TrailersTooLarge);
    }
    let Some(end) = end else { return Ok(None) };
    let section = &section[..end];
    if grammar == ChunkGrammar::Strict && has_bare_lf(section) {
        return Err(BodyError::Trailer);
    }
    for field in field_lines(section) {
        field.map_err(|_| BodyError::Trailer)?;
    }
    Ok(Some(end))
}

/// Whether a line of `section` ends in an LF without its CR.
fn has_bare_lf(section: &[u8]) -> bool {
    section.iter().enumerate().any(|(at, &b)| b == b'\n' && (at == 0 || section[at - 1] != b'\r'))
}

#[cfg(test)]
mod tests;
