//! [`BodyFramer`]: where a message body ends, found as its bytes arrive, for a body
//! delimited by its length (`Content-Length`) or by the chunked transfer coding. A
//! proxy forwards a request's body as it comes, and must know where it ends: there
//! the request is whole (its answer may be awaited) and the next one starts. The
//! body is framed, never decoded: chunk framing and trailers are bytes it counts.
//! The response reader frames its bodies with it too.

use super::body_error::BodyError;
use super::chunked::ChunkedBody;
use super::parse::Request;

/// Frames one body as its bytes arrive: each call says how many of the bytes handed
/// in belong to the body, and whether the body ended with them.
///
/// The caller keeps what was not consumed and hands it in again with the bytes that
/// arrive next, as the loop does with a [`Protocol`](crate::reactor::Protocol)'s
/// input. Body bytes are consumed as they come, so the caller can forward or drop
/// them at once; only a chunked body's trailer section waits to be whole (64 KiB at
/// most) before it is consumed. A body that comes one byte at a time costs one step
/// per byte: nothing is scanned twice.
///
/// ```
/// use percore::http::{parse, BodyFramer, BodyPiece, Limits, Parsed};
/// // A chunked request, then a pipelined one, as they arrive: cut anywhere.
/// let input = b"POST /up HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: chunked\r\n\r\n5\r\nhel";
/// let Ok(Parsed::Complete(request)) = parse(input, &Limits::default()) else { panic!() };
/// let mut body = BodyFramer::of(&request);
/// // What came with the head belongs to the body: forwarded at once.
/// let piece = body.read(&input[request.head_len..])?;
/// assert_eq!(piece, BodyPiece { consumed: 6, ended: false });
/// // The rest: the body ends at the last chunk's empty line, the next request follows.
/// let rest = b"lo\r\n0\r\nX-Sum: 1\r\n\r\nGET / HTTP/1.1\r\n";
/// let piece = body.read(rest)?;
/// assert_eq!((piece.ended, &rest[piece.consumed..]), (true, &b"GET / HTTP/1.1\r\n"[..]));
/// # Ok::<(), percore::http::BodyError>(())
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct BodyFramer {
    left: Left,
}

/// What is left of the body.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Left {
    /// This many bytes.
    Length(u64),
    /// The rest of a chunked body, framed where the last bytes left it.
    Chunked(ChunkedBody),
}

/// What one [`BodyFramer::read`] did: how many of the bytes handed in belong to the
/// body (from their start), and whether the body ended with them.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct BodyPiece {
    /// Bytes of the input that belong to the body: forward them, or drop them.
    pub consumed: usize,
    /// The body ended with them: what follows is the next message.
    pub ended: bool,
}

impl BodyFramer {
    /// The body of `request`: chunked if it says so, else `Content-Length` bytes
    /// (none when it gave no length). The parse refused a request that gave both,
    /// or either twice, so this is the one body every reader of it finds.
    pub fn of(request: &Request<'_>) -> BodyFramer {
        if request.chunked {
            BodyFramer::chunked()
        } else {
            BodyFramer::length(request.content_length)
        }
    }

    /// A body of `len` bytes: one of 0 ends at once.
    pub fn length(len: u64) -> BodyFramer {
        BodyFramer { left: Left::Length(len) }
    }

    /// A body in the chunked transfer coding: chunks up to a zero-size one, then
    /// the trailer section and its empty line.
    pub fn chunked() -> BodyFramer {
        BodyFramer { left: Left::Chunked(ChunkedBody::default()) }
    }

    /// Frames on through `input`, the bytes that follow those consumed so far: how
    /// many of them belong to the body, and whether it ended with them. Once it
    /// ended, it ends again at once with nothing consumed. Unless it ended, every
    /// byte was consumed (but for a trailer section still arriving).
    pub fn read(&mut self, input: &[u8]) -> Result<BodyPiece, BodyError> {
        let (consumed, ended) = match &mut self.left {
            Left::Length(left) => {
                // A length larger than memory is still only counted down.
                let take = usize::try_from(*left).map_or(input.len(), |left| left.min(input.len()));
                *left -= take as u64;
                (take, *left == 0)
            }
            Left::Chunked(chunked) => chunked.read(input)?,
        };
        Ok(BodyPiece { consumed, ended })
    }

    /// Bytes of the body still to come, for a body of known length: a caller can
    /// move them on in one piece ([`Io::splice_some_to`](crate::reactor::Io::splice_some_to)).
    /// `None` for a chunked body, whose length is known only once it ended.
    pub fn length_left(&self) -> Option<u64> {
        match self.left {
            Left::Length(left) => Some(left),
            Left::Chunked(_) => None,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::http::{parse, Limits, Parsed};

    /// The framer of the request at the start of `input`, and the bytes after its head.
    fn after_head(input: &[u8]) -> (BodyFramer, &[u8]) {
        let Ok(Parsed::Complete(request)) = parse(input, &Limits::default()) else { panic!("a whole head") };
        (BodyFramer::of(&request), &input[request.head_len..])
    }

    #[test]
    fn a_request_without_a_body_ends_at_its_head() {
        let (mut body, rest) = after_head(b"GET / HTTP/1.1\r\nHost: a\r\n\r\nGET /next");
        assert_eq!(body.length_left(), Some(0));
        assert_eq!(body.read(rest), Ok(BodyPiece { consumed: 0, ended: true }));
    }

    #[test]
    fn a_length_is_counted_down_across_reads_and_never_read_past() {
        let (mut body, rest) = after_head(b"PUT / HTTP/1.1\r\nHost: a\r\nContent-Length: 7\r\n\r\nabc");
        assert_eq!(body.read(rest), Ok(BodyPiece { consumed: 3, ended: false }));
        assert_eq!(body.length_left(), Some(4));
        assert_eq!(body.read(b""), Ok(BodyPiece { consumed: 0, ended: false }));
        assert_eq!(body.read(b"defgGET"), Ok(BodyPiece { consumed: 4, ended: true }));
        assert_eq!(body.read(b"GET"), Ok(BodyPiece { consumed: 0, ended: true }), "ended stays ended");
    }

    #[test]
    fn a_chunked_body_is_framed_as_it_arrives_one_byte_at_a_time() {
        let (mut body, _) = after_head(b"POST / HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: chunked\r\n\r\n");
        assert_eq!(body.length_left(), None);
        let chunks = b"3;x=1\r\nabc\r\n10\r\n0123456789abcdef\r\n0\r\nX-A: 1\r\n\r\n";
        let (mut held, mut ended_at) = (Vec::new(), None);
        for (at, &byte) in chunks.iter().enumerate() {
            held.push(byte);
            let piece = body.read(&held).expect("a valid body");
            held.drain(..piece.consumed);
            if piece.ended {
                ended_at = Some(at + 1);
                break;
            }
        }
        assert_eq!((ended_at, held.len()), (Some(chunks.len()), 0));
    }

    #[test]
    fn a_chunked_body_that_breaks_the_grammar_is_refused() {
        let cases: [(&[u8], BodyError); 4] = [
            (b"zz\r\n", BodyError::Chunk),
            (b"3\r\nabcd\r\n", BodyError::Chunk),
            (b"0\r\nno colon\r\n\r\n", BodyError::Trailer),
            (&[&b"1;"[..], &[b'x'; 4096]].concat(), BodyError::SizeLineTooLong),
        ];
        for (input, error) in cases {
            assert_eq!(BodyFramer::chunked().read(input), Err(error), "{:?}", String::from_utf8_lossy(input));
            assert_eq!(error.status(), 400);
        }
        assert_eq!(BodyError::Trailer.to_string(), "invalid trailer line");
    }
}
