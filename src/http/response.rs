//! The client side's response parse, for a load generator and for a proxy:
//! [`ResponseReader`] reads the responses of one connection as their bytes arrive and
//! tells, one event per call, each response's head once it is whole, then its body
//! as it comes (its content, without a chunked body's framing), then where the
//! response ends and whether the connection can carry the next request.
//!
//! RFC 9112, sections 2.2 and 6.3:
//! ```text
//! HTTP-message  = start-line CRLF *( field-line CRLF ) CRLF [ message-body ]
//! ```
//! As in the request parse, a bare LF ends a line as CRLF does (section 2.2). Only the
//! head must be whole before it is parsed; a body is consumed as it comes, so however
//! long a server's body (or however endless), the caller's memory stays bounded.

use super::body::{BodyFramer, BodyPiece, Trailers};
use super::chunked::ChunkGrammar;
use super::parse::Method;
use super::response_error::ResponseError;
use super::response_head::{check_version_prefix, BodyKind, Framing, ResponseHead};
use super::syntax::find_head_end;

/// The largest response head accepted, from the status line to the empty line. Twice
/// the server side's 32 KiB: a client should not fail on a verbose server.
pub(crate) const MAX_HEAD: usize = 64 * 1024;

/// Whether more input may follow what [`ResponseReader::read`] is given.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Stream {
    /// The connection is open: more bytes may come.
    Open,
    /// The server closed the connection: these are the last bytes, and a body
    /// delimited by the close ([`BodyKind::UntilClose`]) ends with them.
    Ended,
}

/// What one [`ResponseReader::read`] did: the bytes it used up, and what they were.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Framed<'a> {
    /// Bytes of the input used up, from its start: the caller drops them (or forwards
    /// them), and hands the rest in again with whatever arrives next.
    pub consumed: usize,
    /// What those bytes were.
    pub event: ResponseEvent<'a>,
}

/// The next step of a response, in the order they come: its head, then its body
/// piece by piece, up to the piece that ends it. A response that arrives whole (a
/// head whose body is empty, or whose body of known length came with it) is one
/// event.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ResponseEvent<'a> {
    /// Nothing was consumed: more input is needed. At [`Stream::Ended`] none will
    /// come: a response begun and not ended was cut short.
    Partial,
    /// The head is whole: `consumed` is its length when the body is still to come.
    /// When `ended`, the response ended within the input: its body, if it has one,
    /// came whole and was consumed with the head (`input[head.as_bytes().len()..consumed]`,
    /// its content: a chunked body always comes as [`Body`](ResponseEvent::Body)
    /// events, which give its content without its framing).
    Head {
        /// The head, borrowed from the input.
        head: ResponseHead<'a>,
        /// The response ended with the bytes consumed.
        ended: bool,
    },
    /// `consumed` bytes of the body, chunk framing and trailers included (as they are
    /// on the wire), the content among them, and whether the body, and so the
    /// response, ended with them. A call stops at the end of a run of content (a
    /// chunk's data); call again with the rest.
    Body {
        /// The content among the bytes consumed, their last: a chunk's data (or what
        /// came of it) without its framing; all of them for a body of known length
        /// or one delimited by the close.
        content: &'a [u8],
        /// A chunked body's trailer section, on the piece that ended it; else empty.
        trailers: Trailers<'a>,
        /// The response ended with the bytes consumed.
        ended: bool,
    },
}

impl Framed<'_> {
    /// More input is needed.
    const PARTIAL: Framed<'static> = Framed { consumed: 0, event: ResponseEvent::Partial };
}

/// Reads the responses of one connection as their bytes arrive, one event per call:
/// each response's head, then its body, then its end.
///
/// The caller keeps what the reader did not consume and hands it in again, with the
/// bytes that arrived since, as the loop does with a [`Protocol`](crate::reactor::Protocol)'s
/// input. Only a head waits to be whole (64 KiB at most) and, after a chunked body,
/// its trailer section (64 KiB too); body bytes are consumed as they come, so the
/// caller can drop them, and a chunked body is framed where the last bytes left it.
/// A whole response in the input is one call, the next starts where it ended: a
/// pipeline of small responses costs one call each.
///
/// A server answers a benchmark with the same head every time (but once a second,
/// when its Date changes), and a head that is byte for byte the last one is framed
/// the same, so it is recognised by one comparison instead of parsed again.
///
/// ```
/// use percore::http::{Method, ResponseEvent, ResponseReader, Stream};
/// let mut reader = ResponseReader::new(Method::Get);
/// let input = b"HTTP/1.1 200 OK\r\nContent-Length: 5\r\n\r\nhel";
/// // The head first, alone: its body has not all come.
/// let head = reader.read(input, Stream::Open)?;
/// assert!(matches!(head.event, ResponseEvent::Head { ended: false, .. }));
/// assert_eq!(head.consumed, 38);
/// let body = reader.read(&input[38..], Stream::Open)?;
/// let content = b"hel";
/// assert_eq!((body.consumed, body.event), (3, ResponseEvent::Body { content, trailers: Default::default(), ended: false }));
/// // The rest of the body, and the response ends; the next one is left for the next call.
/// let input = b"loHTTP/1.1 204 No Content\r\n\r\n";
/// let rest = reader.read(input, Stream::Open)?;
/// assert!(matches!(rest.event, ResponseEvent::Body { content: b"lo", ended: true, .. }));
/// assert_eq!(rest.consumed, 2);
/// // A 204 has no body: its head ends it.
/// let next = reader.read(&input[2..], Stream::Open)?;
/// let ResponseEvent::Head { head, ended: true } = next.event else { panic!("a whole response") };
/// assert_eq!((next.consumed, head.status()), (27, 204));
/// # Ok::<(), percore::http::ResponseError>(())
/// ```
#[derive(Clone, Debug)]
pub struct ResponseReader {
    method: Method,
    grammar: ChunkGrammar,
    state: State,
    /// The last head parsed, and what it says.
    last_head: Vec<u8>,
    last_framing: Option<Framing>,
}

/// Where the reader is in the stream of responses.
#[derive(Clone, Copy, Debug)]
enum State {
    /// Before a head, `scanned` bytes of which were searched for its end already.
    Head { scanned: usize },
    /// In a body, with what is left of it.
    Body(BodyLeft),
}

/// What is left of a body.
#[derive(Clone, Copy, Debug)]
enum BodyLeft {
    Nothing,
    /// Delimited by its length or the chunked coding.
    Framed(BodyFramer),
    UntilClose,
}

impl Default for ResponseReader {
    /// A reader of the responses to `GET` requests.
    fn default() -> ResponseReader {
        ResponseReader::new(Method::Get)
    }
}

impl ResponseReader {
    /// A reader of the responses to requests of `method`: for [`Method::Head`] no
    /// response has a body, whatever its head says (RFC 9112, 6.3).
    pub fn new(method: Method) -> ResponseReader {
        ResponseReader {
            method,
            grammar: ChunkGrammar::Lenient,
            state: State::Head { scanned: 0 },
            last_head: Vec::new(),
            last_framing: None,
        }
    }

    /// This reader, reading chunked bodies by `grammar` ([`ChunkGrammar::Strict`] for
    /// a proxy, which frames what it forwards again); lenient by default.
    pub fn with_grammar(self, grammar: ChunkGrammar) -> ResponseReader {
        ResponseReader { grammar, ..self }
    }

    /// Reads the responses that follow to requests of `method`, from the next head on:
    /// a connection may carry a `HEAD` after a `GET`.
    pub fn set_method(&mut self, method: Method) {
        if method != self.method {
            self.method = method;
            // The remembered head was framed for the other method.
            self.last_framing = None;
        }
    }

    /// Reads on through `input`, the bytes of the connection that follow those
    /// consumed so far: the next event, and the bytes it used up. Consumes the rest of
    /// the current response at most, so call again with the rest while events come
    /// (until [`Partial`](ResponseEvent::Partial)). A response cut short by the end of
    /// the stream never ends. After an error the connection is lost: the reader's
    /// answers are then meaningless. After a 101 the connection speaks another
    /// protocol, which this reader does not read.
    pub fn read<'a>(&mut self, input: &'a [u8], stream: Stream) -> Result<Framed<'a>, ResponseError> {
        match self.state {
            State::Body(mut left) => {
                let piece = left.read(input, stream)?;
                let ended = piece.ended;
                self.state = if ended { State::Head { scanned: 0 } } else { State::Body(left) };
                if piece.consumed == 0 && !ended {
                    return Ok(Framed::PARTIAL);
                }
                let event = ResponseEvent::Body { content: piece.content, trailers: piece.trailers, ended };
                Ok(Framed { consumed: piece.consumed, event })
            }
            State::Head { scanned } => {
                let Some((head, framing)) = self.head(input, scanned)? else {
                    self.state = State::Head { scanned: input.len() };
                    return Ok(Framed::PARTIAL);
                };
                let left = BodyLeft::of(framing.body(), self.grammar);
                // A body that came whole with its head is consumed with it, and the
                // response ends in one call. One that did not, or that breaks the
                // grammar, is left for the calls that follow: the head comes first.
                // A chunked body too, whose content is not the bytes after the head.
                let mut trial = left;
                let (consumed, ended) = match trial.read(&input[head.len()..], stream) {
                    Ok(piece) if piece.ended && framing.body() != BodyKind::Chunked => {
                        (head.len() + piece.consumed, true)
                    }
                    _ => (head.len(), false),
                };
                self.state = if ended { State::Head { scanned: 0 } } else { State::Body(left) };
                let head = ResponseHead::new(head, framing);
                Ok(Framed { consumed, event: ResponseEvent::Head { head, ended } })
            }
        }
    }

    /// Bytes of the current response's body still to come, when its head gave its
    /// length (`Content-Length`): a caller with a bound on a response's size can
    /// refuse it at its head.
    pub fn body_left(&self) -> Option<u64> {
        match self.state {
            State::Body(BodyLeft::Framed(framer)) => framer.length_left(),
            _ => None,
        }
    }

    /// The head at the start of `input` and what it says, `None` while it is still
    /// arriving.
    fn head<'a>(
        &mut self,
        input: &'a [u8],
        scanned: usize,
    ) -> Result<Option<(&'a [u8], Framing)>, ResponseError> {
        // The remembered head ends at its first empty line, so input that starts
        // with it has that head, whatever follows.
        if let Some(framing) = self.last_framing.filter(|_| input.starts_with(&self.last_head)) {
            return Ok(Some((&input[..self.last_head.len()], framing)));
        }
        check_version_prefix(input)?;
        // Unlike a request, no empty line may come before the status line. Three
        // bytes back: a head's end seen in part last time ("\r\n\r").
        let head_end = find_head_end(input, scanned.saturating_sub(3));
        // Checked complete or not, so that however the bytes arrive the answer is one.
        if head_end.unwrap_or(input.len()) > MAX_HEAD {
            return Err(ResponseError::HeadTooLarge);
        }
        let Some(head_len) = head_end else { return Ok(None) };
        let head = &input[..head_len];
        let framing = Framing::parse(head, self.method)?;
        self.last_head.clear();
        self.last_head.extend_from_slice(head);
        self.last_framing = Some(framing);
        Ok(Some((head, framing)))
    }
}

impl BodyLeft {
    /// All of a body delimited as `kind` says, a chunked one read by `grammar`.
    fn of(kind: BodyKind, grammar: ChunkGrammar) -> BodyLeft {
        match kind {
            BodyKind::None => BodyLeft::Nothing,
            BodyKind::Length(length) => BodyLeft::Framed(BodyFramer::length(length)),
            BodyKind::Chunked => BodyLeft::Framed(BodyFramer::chunked().with_grammar(grammar)),
            BodyKind::UntilClose => BodyLeft::UntilClose,
        }
    }

    /// Consumes what belongs to the body from `body`, to the end of a run of content:
    /// how much, the content, and whether the body ended there.
    fn read<'a>(&mut self, body: &'a [u8], stream: Stream) -> Result<BodyPiece<'a>, ResponseError> {
        match self {
            BodyLeft::Nothing => {
                Ok(BodyPiece { consumed: 0, content: &[], trailers: Trailers::default(), ended: true })
            }
            BodyLeft::Framed(framer) => Ok(framer.read(body)?),
            BodyLeft::UntilClose => {
                let ended = stream == Stream::Ended;
                Ok(BodyPiece { consumed: body.len(), content: body, trailers: Trailers::default(), ended })
            }
        }
    }
}

#[cfg(test)]
mod tests;
