//! The chunked transfer coding, framed as it arrives: where a chunked body ends,
//! found by a state machine that resumes where the last bytes left it, so a body
//! that comes one byte at a time costs one step per byte and is never scanned again.
//!
//! RFC 9112, 7.1:
//! ```text
//! chunked-body    = *chunk last-chunk trailer-section CRLF
//! chunk           = chunk-size [ chunk-ext ] CRLF chunk-data CRLF
//! chunk-size      = 1*HEXDIG
//! last-chunk      = 1*("0") [ chunk-ext ] CRLF
//! chunk-data      = 1*OCTET ; a sequence of chunk-size octets
//! chunk-ext       = *( BWS ";" BWS chunk-ext-name [ BWS "=" BWS chunk-ext-val ] )
//! trailer-section = *( field-line CRLF )
//! ```
//! As everywhere in percore, a bare LF ends a line as CRLF does (RFC 9112, 2.2).

use super::body_error::BodyError;
use super::syntax::{field_lines, find_head_end, is_value_byte};

/// The longest chunk-size line, extensions and line end included. Extensions are
/// ignored, and no server sends kilobytes of them; without a limit a server could
/// keep one line going forever and the response would never end nor fail.
pub(crate) const MAX_SIZE_LINE: usize = 4 * 1024;

/// The largest trailer section, its empty line included. It is checked whole before
/// it is consumed, so the caller holds it meanwhile: the same 64 KiB as a head.
pub(crate) const MAX_TRAILERS: usize = 64 * 1024;

/// How far a chunked body has been framed.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub(crate) struct ChunkedBody {
    part: Part,
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
    /// Frames on through `body`, the bytes that follow those consumed so far: how
    /// many of them were consumed, and whether the body ended there. Bytes left
    /// unconsumed (an incomplete trailer section) must be handed in again, with what
    /// arrives next.
    pub(crate) fn read(&mut self, body: &[u8]) -> Result<(usize, bool), BodyError> {
        let mut at = 0;
        loop {
            let rest = &body[at..];
            match &mut self.part {
                Part::SizeLine(line) => {
                    let Some((len, size)) = line.read(rest)? else { return Ok((body.len(), false)) };
                    at += len;
                    self.part = match size {
                        0 => Part::Trailers { scanned: 0 },
                        left => Part::Data { left },
                    };
                }
                Part::Data { left } => {
                    // A chunk larger than memory is still only counted down.
                    let take = usize::try_from(*left).map_or(rest.len(), |left| left.min(rest.len()));
                    at += take;
                    *left -= take as u64;
                    if *left > 0 {
                        return Ok((at, false));
                    }
                    self.part = Part::DataEnd { cr: false };
                }
                Part::DataEnd { cr } => match (rest.first(), *cr) {
                    (None, _) => return Ok((at, false)),
                    (Some(b'\r'), false) => {
                        *cr = true;
                        at += 1;
                    }
                    (Some(b'\n'), _) => {
                        at += 1;
                        self.part = Part::default();
                    }
                    _ => return Err(BodyError::Chunk),
                },
                Part::Trailers { scanned } => {
                    return match trailers_len(rest, *scanned)? {
                        Some(len) => Ok((at + len, true)),
                        None => {
                            *scanned = rest.len();
                            Ok((at, false))
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
    phase: Phase,
}

#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
enum Phase {
    /// `chunk-size`: hex digits.
    #[default]
    Digits,
    /// After the digits: white space, then `chunk-ext` once its `;` came (`named`).
    Extensions { named: bool },
    /// A CR, which only an LF may follow.
    Cr,
}

impl SizeLine {
    /// Reads on through `bytes`: once the line ends, how many of them it took and
    /// the chunk size; `None` while it goes on (then all of them belong to it).
    fn read(&mut self, bytes: &[u8]) -> Result<Option<(usize, u64)>, BodyError> {
        for (at, &byte) in bytes.iter().enumerate() {
            self.len += 1;
            if self.len > MAX_SIZE_LINE {
                return Err(BodyError::SizeLineTooLong);
            }
            if self.ends_with(byte)? {
                return Ok(Some((at + 1, self.size)));
            }
        }
        Ok(None)
    }

    /// Takes one byte of the line; whether it is the line's last.
    fn ends_with(&mut self, byte: u8) -> Result<bool, BodyError> {
        if self.phase == Phase::Digits {
            match char::from(byte).to_digit(16) {
                Some(digit) => {
                    let size = self.size.checked_mul(16).and_then(|size| size.checked_add(u64::from(digit)));
                    self.size = size.ok_or(BodyError::Chunk)?;
                    return Ok(false);
                }
                // `1*HEXDIG`: the size may not be missing.
                None if self.len == 1 => return Err(BodyError::Chunk),
                None => self.phase = Phase::Extensions { named: false },
            }
        }
        // Extensions are ignored, so only what could hide a line end is refused: a
        // control byte, or anything but white space before the first `;`. Trailing
        // white space is let through, as servers send it.
        match (self.phase, byte) {
            (Phase::Extensions { .. } | Phase::Cr, b'\n') => Ok(true),
            (Phase::Extensions { .. }, b'\r') => {
                self.phase = Phase::Cr;
                Ok(false)
            }
            (Phase::Extensions { named: false }, b' ' | b'\t') => Ok(false),
            (Phase::Extensions { .. }, b';') => {
                self.phase = Phase::Extensions { named: true };
                Ok(false)
            }
            (Phase::Extensions { named: true }, byte) if is_value_byte(byte) => Ok(false),
            _ => Err(BodyError::Chunk),
        }
    }
}

/// The length of `trailer-section CRLF` at the start of `section`, every field line
/// checked, or `None` while its empty line has not arrived; `scanned` bytes of it
/// were searched before, so only the new ones are.
fn trailers_len(section: &[u8], scanned: usize) -> Result<Option<usize>, BodyError> {
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
    for field in field_lines(&section[..end]) {
        field.map_err(|_| BodyError::Trailer)?;
    }
    Ok(Some(end))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Frames `body` handed in `piece` bytes at a time, as a caller does: what is
    /// left unconsumed comes again with the next piece. Returns the bytes consumed
    /// when the body ended (`None` if it did not) and the most bytes ever handed in.
    fn frame_in_pieces(body: &[u8], piece: usize) -> Result<(Option<usize>, usize), BodyError> {
        let (mut chunked, mut consumed, mut most_handed) = (ChunkedBody::default(), 0, 0);
        let mut received = 0;
        while received < body.len() {
            received = (received + piece).min(body.len());
            let handed = &body[consumed..received];
            most_handed = most_handed.max(handed.len());
            let (len, ended) = chunked.read(handed)?;
            assert!(len <= handed.len());
            consumed += len;
            if ended {
                return Ok((Some(consumed), most_handed));
            }
        }
        Ok((None, most_handed))
    }

    #[test]
    fn a_body_fed_one_byte_at_a_time_is_consumed_as_it_comes() {
        let mut body = Vec::new();
        for size in 1..200 {
            body.extend_from_slice(format!("{size:x};ext=\"v\"\r\n").as_bytes());
            body.extend(std::iter::repeat_n(b'x', size));
            body.extend_from_slice(b"\r\n");
        }
        let trailers = "0\r\nX-Trailer: 1\r\n\r\n";
        body.extend_from_slice(trailers.as_bytes());
        // Every byte is consumed as it comes, but for the trailer section, held back
        // until it is whole: a caller hands each byte in once, and the framer steps
        // through it once, so the work is linear in the body's length.
        assert_eq!(frame_in_pieces(&body, 1), Ok((Some(body.len()), trailers.len() - 3)));
        assert_eq!(frame_in_pieces(&body, body.len()), Ok((Some(body.len()), body.len())));
    }

    #[test]
    fn a_size_line_is_limited() {
        assert_eq!(MAX_SIZE_LINE, 4096, "4 KiB, as documented");
        let padding = " ".repeat(MAX_SIZE_LINE - 3);
        let longest = format!("5{padding}\r\nhello\r\n0\r\n\r\n");
        assert_eq!(frame_in_pieces(longest.as_bytes(), 7), Ok((Some(longest.len()), 7)));
        let too_long = format!("5{padding} \r\nhello\r\n0\r\n\r\n");
        assert_eq!(frame_in_pieces(too_long.as_bytes(), 7), Err(BodyError::SizeLineTooLong));
        let endless = format!("5;{}", "x".repeat(MAX_SIZE_LINE));
        assert_eq!(frame_in_pieces(endless.as_bytes(), 1000), Err(BodyError::SizeLineTooLong));
    }

    #[test]
    fn a_trailer_section_is_limited() {
        let field = |len: usize| format!("X: {}\r\n", "t".repeat(len - 5));
        let largest = format!("0\r\n{}\r\n", field(MAX_TRAILERS - 2));
        assert_eq!(frame_in_pieces(largest.as_bytes(), 4096), Ok((Some(largest.len()), MAX_TRAILERS)));
        let too_large = format!("0\r\n{}\r\n", field(MAX_TRAILERS - 1));
        assert_eq!(frame_in_pieces(too_large.as_bytes(), 4096), Err(BodyError::TrailersTooLarge));
        let endless = format!("0\r\n{}", "X: t\r\n".repeat(MAX_TRAILERS));
        assert_eq!(frame_in_pieces(endless.as_bytes(), 4096), Err(BodyError::TrailersTooLarge));
    }

    #[test]
    fn a_chunk_larger_than_memory_is_counted_down() {
        let mut chunked = ChunkedBody::default();
        assert_eq!(chunked.read(b"fffffffffffffff0\r\nabc"), Ok((21, false)));
        assert_eq!(chunked.part, Part::Data { left: 0xffff_ffff_ffff_fff0 - 3 });
    }
}
