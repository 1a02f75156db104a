//! [`BodyFramer`]: where a message body ends and which of its bytes are content,
//! found as its bytes arrive, for a body delimited by its length (`Content-Length`)
//! or by the chunked transfer coding. A proxy forwards a request's body as it
//! comes, and must know where it ends: there the request is whole (its answer may
//! be awaited) and the next one starts; and it frames what it forwards itself, so
//! it takes the content and leaves the sender's framing behind. The response
//! reader reads its bodies with it too.

use super::body_error::BodyError;
use super::chunked::{ChunkGrammar, ChunkedBody};
use super::parse::Request;
use super::syntax::{checked_block, CheckedFields};

/// Reads one body as its bytes arrive: each call says how many of the bytes handed
/// in belong to the body, which of them are its content, and whether the body
/// ended with them.
///
/// The caller keeps what was not consumed and hands it in again with the bytes that
/// arrive next, as the loop does with a [`Protocol`](crate::reactor::Protocol)'s
/// input. Body bytes are consumed as they come, so the caller can forward or drop
/// them at once; only a chunked body's trailer section waits to be whole (64 KiB at
/// most) before it is consumed. A call stops at the end of a run of content (a
/// chunk's data, or what it has of it), so call again with the rest while bytes
/// remain: a body that comes one byte at a time costs one step per byte, and
/// nothing is scanned twice.
///
/// ```
/// use percore::http::{parse, BodyFramer, BodyPiece, ChunkGrammar, Limits, Parsed};
/// // A chunked request, then a pipelined one, as they arrive: cut anywhere.
/// let input = b"POST /up HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: chunked\r\n\r\n5;x=1\r\nhel";
/// let Ok(Parsed::Complete(request)) = parse(input, &Limits::default()) else { panic!() };
/// // A proxy reads the body by the strict grammar: nothing it forwards can be
/// // framed otherwise by the backend.
/// let mut body = BodyFramer::of(&request).with_grammar(ChunkGrammar::Strict);
/// // What came with the head belongs to the body: its content goes on at once.
/// let piece = body.read(&input[request.head_len..])?;
/// assert_eq!((piece.consumed, piece.content, piece.ended), (10, &b"hel"[..], false));
/// // The rest: a call per run of content, then the end, at the last chunk's empty
/// // line, with the trailer section; the next request follows.
/// let rest = b"lo\r\n0\r\nX-Sum: 1\r\n\r\nGET / HTTP/1.1\r\n";
/// let piece = body.read(rest)?;
/// assert_eq!((piece.consumed, piece.content, piece.ended), (2, &b"lo"[..], false));
/// let end = body.read(&rest[2..])?;
/// assert!(end.ended && end.content.is_empty());
/// assert_eq!(end.trailers.fields().collect::<Vec<_>>(), [(&b"X-Sum"[..], &b"1"[..])]);
/// assert_eq!(&rest[2 + end.consumed..], b"GET / HTTP/1.1\r\n");
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
    /// The rest of a chunked body, read where the last bytes left it.
    Chunked(ChunkedBody),
}

/// What one [`BodyFramer::read`] did: how many of the bytes handed in belong to the
/// body (from their start), the content among them, and whether the body ended
/// with them.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct BodyPiece<'a> {
    /// Bytes of the input that belong to the body, framing included: drop them
    /// from the input.
    pub consumed: usize,
    /// The content among them, the last of the bytes consumed: all of them for a
    /// body of known length; a chunk's data, or what came of it, without its
    /// framing, for a chunked one. Empty when only framing was consumed.
    pub content: &'a [u8],
    /// A chunked body's trailer section, where the body ended; empty otherwise.
    pub trailers: Trailers<'a>,
    /// The body ended with them: what follows is the next message.
    pub ended: bool,
}

/// The trailer section of a chunked body (RFC 9112, 7.1.2): header fields sent
/// after the content, every line checked by the body's grammar.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Trailers<'a> {
    /// The field lines, up to and including the empty line that ends them.
    block: &'a [u8],
}

impl<'a> Trailers<'a> {
    /// The fields in the order they came, each as its name and its value without
    /// the white space around it, as a head's fields are given.
    pub fn fields(&self) -> impl Iterator<Item = (&'a [u8], &'a [u8])> + Clone + 'a {
        let fields: CheckedFields<'a> = checked_block(self.block);
        fields
    }

    /// Whether the section had no field.
    pub fn is_empty(&self) -> bool {
        self.fields().next().is_none()
    }
}

impl BodyFramer {
    /// The body of `request`: chunked if it says so, else `Content-Length` bytes
    /// (none when it gave no length), read by the lenient grammar. The parse
    /// refused a request that gave both, or either twice unequal, so this is the
    /// one body every reader of it finds.
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

    /// A body in the chunked transfer coding, read by the lenient grammar: chunks
    /// up to a zero-size one, then the trailer section and its empty line.
    pub fn chunked() -> BodyFramer {
        BodyFramer { left: Left::Chunked(ChunkedBody::new(ChunkGrammar::Lenient)) }
    }

    /// This framer, reading a chunked body by `grammar` ([`ChunkGrammar::Strict`]
    /// for an intermediary). A body of known length has no grammar: it is counted.
    /// Given before the first [`read`](BodyFramer::read).
    pub fn with_grammar(self, grammar: ChunkGrammar) -> BodyFramer {
        match self.left {
            Left::Chunked(_) => BodyFramer { left: Left::Chunked(ChunkedBody::new(grammar)) },
            Left::Length(_) => self,
        }
    }

    /// Reads on through `input`, the bytes that follow those consumed so far, to
    /// the end of the first run of content in them or the body's end: how many of
    /// them belong to the body, its content among them, and whether it ended with
    /// them. Once it ended, it ends again at once with nothing consumed.
    pub fn read<'a>(&mut self, input: &'a [u8]) -> Result<BodyPiece<'a>, BodyError> {
        match &mut self.left {
            Left::Length(left) => {
                // A length larger than memory is still only counted down.
                let take = usize::try_from(*left).map_or(input.len(), |left| left.min(input.len()));
                *left -= take as u64;
                Ok(BodyPiece {
                    consumed: take,
                    content: &input[..take],
                    trailers: Trailers::default(),
                    ended: *left == 0,
                })
            }
            Left::Chunked(chunked) => {
                let read = chunked.read(input)?;
                let trailers = read.trailers.map(|(at, len)| &input[at..at + len]);
                Ok(BodyPiece {
                    consumed: read.consumed,
                    content: &input[read.consumed - read.content..read.consumed],
                    trailers: Trailers { block: trailers.unwrap_or_default() },
                    ended: trailers.is_some(),
                })
            }
        }
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

    /// A piece of a body of known length: all it consumed is content.
    fn counted(content: &[u8], ended: bool) -> Result<BodyPiece<'_>, BodyError> {
        Ok(BodyPiece { consumed: content.len(), content, trailers: Trailers::default(), ended })
    }

    #[test]
    fn a_request_without_a_body_ends_at_its_head() {
        let (mut body, rest) = after_head(b"GET / HTTP/1.1\r\nHost: a\r\n\r\nGET /next");
        assert_eq!(body.length_left(), Some(0));
        assert_eq!(body.read(rest), counted(b"", true));
    }

    #[test]
    fn a_length_is_counted_down_across_reads_and_never_read_past() {
        let (mut body, rest) = after_head(b"PUT / HTTP/1.1\r\nHost: a\r\nContent-Length: 7\r\n\r\nabc");
        assert_eq!(body.read(rest), counted(b"abc", false));
        assert_eq!(body.length_left(), Some(4));
        assert_eq!(body.read(b""), counted(b"", false));
        assert_eq!(body.read(b"defgGET"), counted(b"defg", true));
        assert_eq!(body.read(b"GET"), counted(b"", true), "ended stays ended");
        let strict = BodyFramer::length(2).with_grammar(ChunkGrammar::Strict);
        assert_eq!(strict, BodyFramer::length(2), "a length has no grammar");
    }

    #[test]
    fn a_chunked_body_is_read_as_it_arrives_one_byte_at_a_time() {
        let (mut body, _) = after_head(b"POST / HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: chunked\r\n\r\n");
        assert_eq!(body.length_left(), None);
        let chunks = b"3;x=1\r\nabc\r\n10\r\n0123456789abcdef\r\n0\r\nX-A: 1\r\n\r\n";
        let (mut held, mut content, mut ended_at) = (Vec::new(), Vec::new(), None);
        for (at, &byte) in chunks.iter().enumerate() {
            held.push(byte);
            let piece = body.read(&held).expect("a valid body");
            content.extend_from_slice(piece.content);
            let (consumed, ended) = (piece.consumed, piece.ended);
            if ended {
                assert_eq!(piece.trailers.fields().collect::<Vec<_>>(), [(&b"X-A"[..], &b"1"[..])]);
                ended_at = Some(at + 1);
            }
            held.drain(..consumed);
            if ended {
                break;
            }
        }
        assert_eq!((ended_at, held.len()), (Some(chunks.len()), 0));
        assert_eq!(content, b"abc0123456789abcdef");
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
            let mut body = BodyFramer::chunked();
            let mut rest = input;
            let refused = loop {
                match body.read(rest) {
                    Ok(piece) if piece.consumed > 0 => rest = &rest[piece.consumed..],
                    other => break other,
                }
            };
            assert_eq!(refused, Err(error), "{:?}", String::from_utf8_lossy(input));
            assert_eq!(error.status(), 400);
        }
        assert_eq!(BodyError::Trailer.to_string(), "invalid trailer line");
    }
}
