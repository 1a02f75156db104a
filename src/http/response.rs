//! The client side's response parse, for a load generator: [`ResponseReader`] frames
//! the responses of one connection as their bytes arrive, telling where each ends and
//! whether the connection can carry the next request. Nothing is decoded, only framed.
//!
//! RFC 9112, sections 2.2, 4 and 6.3:
//! ```text
//! HTTP-message  = start-line CRLF *( field-line CRLF ) CRLF [ message-body ]
//! status-line   = HTTP-version SP status-code SP [ reason-phrase ]
//! status-code   = 3DIGIT
//! reason-phrase = 1*( HTAB / SP / VCHAR / obs-text )
//! field-line    = field-name ":" OWS field-value OWS
//! ```
//! As in the request parse, a bare LF ends a line as CRLF does (section 2.2). Only the
//! head must be whole before it is parsed; a body is consumed as it comes, so however
//! long a server's body (or however endless), the caller's memory stays bounded.

use super::chunked::ChunkedBody;
use super::parse::Method;
use super::response_error::ResponseError;
use super::syntax::{
    agreed_length, all_bytes, connection_options, field_lines, find_head_end, is_value_byte, next_line,
    trim_ows,
};

/// The largest response head accepted, from the status line to the empty line. Twice
/// the server side's 32 KiB: a load generator should not fail on a verbose server.
pub(crate) const MAX_HEAD: usize = 64 * 1024;

/// How the body of a response is delimited (RFC 9112, 6.3).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum BodyKind {
    /// `Content-Length` bytes follow the head.
    Length(u64),
    /// `Transfer-Encoding` ending in `chunked`: chunks up to a zero-size one, then trailers.
    Chunked,
    /// Neither: the body is everything until the server closes the connection.
    UntilClose,
    /// No body at all: a response to HEAD, or a 1xx, 204 or 304.
    None,
}

/// A response framed whole: its status, its framing, and its length on the wire.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ResponseHead {
    /// The status code, 100 to 999; see [`is_interim`](ResponseHead::is_interim).
    pub status: u16,
    /// Whether the connection stays open after this response: for HTTP/1.1 unless
    /// `Connection: close`, for HTTP/1.0 only with `Connection: keep-alive`, and never
    /// after an [`UntilClose`](BodyKind::UntilClose) body, ambiguous framing, or a 101.
    pub keep_alive: bool,
    /// How the body is delimited.
    pub body: BodyKind,
    /// Bytes of the whole response: head and body, with chunk framing and trailers.
    pub len: u64,
}

impl ResponseHead {
    /// An interim response (`100 Continue`, `103 Early Hints`): the final response to
    /// the same request follows it. A `101 Switching Protocols` is final: after it the
    /// connection speaks another protocol, so it is not kept alive either.
    pub fn is_interim(&self) -> bool {
        (100..200).contains(&self.status) && self.status != 101
    }
}

/// Whether more input may follow what [`ResponseReader::read`] is given.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Stream {
    /// The connection is open: more bytes may come.
    Open,
    /// The server closed the connection: these are the last bytes, and a body
    /// delimited by the close ([`BodyKind::UntilClose`]) ends with them.
    Ended,
}

/// What one [`ResponseReader::read`] did.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Framed {
    /// Bytes of the input used up: the caller drops them, and hands the rest in again
    /// with whatever arrives next.
    pub consumed: usize,
    /// The response that ended within those bytes, one per call at most. `None`: more
    /// input is needed (at [`Stream::Ended`]: the response was cut short).
    pub completed: Option<ResponseHead>,
}

/// Frames the responses of one connection as their bytes arrive.
///
/// The caller keeps what the reader did not consume and hands it in again, with the
/// bytes that arrived since, as the loop does with a [`Protocol`](crate::reactor::Protocol)'s
/// input. Only a head waits to be whole (64 KiB at most) and, after a chunked body,
/// its trailer section (64 KiB too); body bytes are consumed as they come, so the
/// caller can drop them, and a chunked body is framed where the last bytes left it.
///
/// A server answers a benchmark with the same head every time (but once a second,
/// when its Date changes), and a head that is byte for byte the last one is framed
/// the same, so it is recognised by one comparison instead of parsed again.
///
/// ```
/// use percore::http::{BodyKind, Framed, Method, ResponseReader, Stream};
/// let mut reader = ResponseReader::new(Method::Get);
/// let first = reader.read(b"HTTP/1.1 200 OK\r\nContent-Length: 5\r\n\r\nhel", Stream::Open)?;
/// assert_eq!(first, Framed { consumed: 41, completed: None });
/// let rest = reader.read(b"loHTTP/1.1 204 No Content\r\n\r\n", Stream::Open)?;
/// let response = rest.completed.expect("the body ended");
/// assert_eq!((rest.consumed, response.status, response.body, response.len), (2, 200, BodyKind::Length(5), 43));
/// # Ok::<(), percore::http::ResponseError>(())
/// ```
#[derive(Clone, Debug)]
pub struct ResponseReader {
    method: Method,
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
    /// In the body of `response`, whose `len` counts the bytes consumed so far.
    Body { response: ResponseHead, left: BodyLeft },
}

/// What is left of a body.
#[derive(Clone, Copy, Debug)]
enum BodyLeft {
    Nothing,
    Length(u64),
    Chunked(ChunkedBody),
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
            state: State::Head { scanned: 0 },
            last_head: Vec::new(),
            last_framing: None,
        }
    }

    /// Frames on through `input`: the bytes of the connection that follow those
    /// consumed so far. Consumes the rest of the current response at most, so call
    /// again with the rest while a response completes. A response cut short by the
    /// end of the stream never completes. After an error the connection is lost: the
    /// reader's answers are then meaningless.
    pub fn read(&mut self, input: &[u8], stream: Stream) -> Result<Framed, ResponseError> {
        let (mut response, mut left, head_len) = match self.state {
            State::Body { response, left } => (response, left, 0),
            State::Head { scanned } => match self.head(input, scanned)? {
                Some((head_len, framing)) => {
                    let (response, left) = framing.start();
                    (response, left, head_len)
                }
                None => {
                    self.state = State::Head { scanned: input.len() };
                    return Ok(Framed { consumed: 0, completed: None });
                }
            },
        };
        let (body_len, ended) = left.read(&input[head_len..], stream)?;
        let consumed = head_len + body_len;
        response.len += consumed as u64;
        self.state = if ended { State::Head { scanned: 0 } } else { State::Body { response, left } };
        Ok(Framed { consumed, completed: ended.then_some(response) })
    }

    /// Bytes of the current response's body still to come, when its head gave its
    /// length (`Content-Length`): a caller with a bound on a response's size can
    /// refuse it at its head.
    pub fn body_left(&self) -> Option<u64> {
        match self.state {
            State::Body { left: BodyLeft::Length(left), .. } => Some(left),
            _ => None,
        }
    }

    /// The head at the start of `input`: its length and framing, `None` while it is
    /// still arriving.
    fn head(&mut self, input: &[u8], scanned: usize) -> Result<Option<(usize, Framing)>, ResponseError> {
        // The remembered head ends at its first empty line, so input that starts
        // with it has that head, whatever follows.
        if let Some(framing) = self.last_framing.filter(|_| input.starts_with(&self.last_head)) {
            return Ok(Some((self.last_head.len(), framing)));
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
        let framing = Framing::parse(&input[..head_len], self.method)?;
        self.last_head.clear();
        self.last_head.extend_from_slice(&input[..head_len]);
        self.last_framing = Some(framing);
        Ok(Some((head_len, framing)))
    }
}

impl BodyLeft {
    /// Consumes what belongs to the body from `body`: how much, and whether the body
    /// ended there.
    fn read(&mut self, body: &[u8], stream: Stream) -> Result<(usize, bool), ResponseError> {
        match self {
            BodyLeft::Nothing => Ok((0, true)),
            BodyLeft::Length(left) => {
                // A length larger than memory is still only counted down.
                let take = usize::try_from(*left).map_or(body.len(), |left| left.min(body.len()));
                *left -= take as u64;
                Ok((take, *left == 0))
            }
            BodyLeft::Chunked(chunked) => chunked.read(body),
            BodyLeft::UntilClose => Ok((body.len(), stream == Stream::Ended)),
        }
    }
}

/// What a head says about its response; the same for every response with that head.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct Framing {
    status: u16,
    keep_alive: bool,
    body: BodyKind,
}

impl Framing {
    /// The framing of `head`, a whole head up to its empty line, answering `method`.
    fn parse(head: &[u8], method: Method) -> Result<Framing, ResponseError> {
        let (line, fields) = next_line(head);
        let (version_11, status) = parse_status_line(line)?;
        let fields = Fields::parse(fields)?;
        let body = body_kind(status, method, &fields);
        let keep_alive = match version_11 {
            true => !fields.close,
            false => fields.keep_alive && !fields.close,
        };
        // RFC 9112, 6.1 and 6.3: HTTP/1.0 with Transfer-Encoding, or both Transfer-Encoding
        // and Content-Length, is framing a peer may read differently; do not reuse it.
        let ambiguous = fields.transfer_encoding && (!version_11 || fields.content_length.is_some());
        // After a 101 the connection speaks another protocol (RFC 9110, 15.2.2).
        let keep_alive = keep_alive && !ambiguous && body != BodyKind::UntilClose && status != 101;
        Ok(Framing { status, keep_alive, body })
    }

    /// The response this head starts, with its head counted, and its whole body left.
    fn start(self) -> (ResponseHead, BodyLeft) {
        let Framing { status, keep_alive, body } = self;
        let left = match body {
            BodyKind::None => BodyLeft::Nothing,
            BodyKind::Length(length) => BodyLeft::Length(length),
            BodyKind::Chunked => BodyLeft::Chunked(ChunkedBody::default()),
            BodyKind::UntilClose => BodyLeft::UntilClose,
        };
        (ResponseHead { status, keep_alive, body, len: 0 }, left)
    }
}

/// Refuses a head that does not start like `HTTP/1.`, as soon as what arrived shows
/// it, so a reply in another protocol fails at once instead of at 64 KiB.
fn check_version_prefix(input: &[u8]) -> Result<(), ResponseError> {
    const VERSION_PREFIX: &[u8] = b"HTTP/1.";
    let seen = input.len().min(VERSION_PREFIX.len());
    if input[..seen] != VERSION_PREFIX[..seen] {
        return Err(ResponseError::StatusLine);
    }
    Ok(())
}

/// `status-line = HTTP-version SP status-code SP [ reason-phrase ]`, returning whether
/// the version is 1.1 or a later 1.x (answered as 1.1, RFC 9110 2.5) and the status.
/// The SP before an empty reason may be missing: servers omit it, and the reason is
/// ignored anyway (RFC 9112, 4).
fn parse_status_line(line: &[u8]) -> Result<(bool, u16), ResponseError> {
    let [b'H', b'T', b'T', b'P', b'/', b'1', b'.', minor, b' ', d1, d2, d3, rest @ ..] = line else {
        return Err(ResponseError::StatusLine);
    };
    let digits = [*minor, *d1, *d2, *d3];
    if !digits.iter().all(u8::is_ascii_digit) || *d1 == b'0' {
        // A first digit of 0 is no status class (RFC 9110, 15).
        return Err(ResponseError::StatusLine);
    }
    let reason = match rest {
        [] => rest,
        [b' ', reason @ ..] => reason,
        _ => return Err(ResponseError::StatusLine),
    };
    if !all_bytes(reason, is_value_byte) {
        return Err(ResponseError::StatusLine);
    }
    let status = u16::from(d1 - b'0') * 100 + u16::from(d2 - b'0') * 10 + u16::from(d3 - b'0');
    Ok((*minor != b'0', status))
}

/// What the header block says about framing and keep-alive.
#[derive(Default)]
struct Fields {
    close: bool,
    keep_alive: bool,
    content_length: Option<u64>,
    /// A `Transfer-Encoding` field was sent.
    transfer_encoding: bool,
    /// The last transfer coding of all `Transfer-Encoding` fields is `chunked`.
    chunked: bool,
}

impl Fields {
    /// The fields of a header block, up to and including its empty line.
    fn parse(block: &[u8]) -> Result<Fields, ResponseError> {
        let mut fields = Fields::default();
        for field in field_lines(block) {
            let (name, value) = field.map_err(|_| ResponseError::Header)?;
            fields.add(name, value)?;
        }
        Ok(fields)
    }

    fn add(&mut self, name: &[u8], value: &[u8]) -> Result<(), ResponseError> {
        if name.eq_ignore_ascii_case(b"connection") {
            let (close, keep_alive) = connection_options(value);
            self.close |= close;
            self.keep_alive |= keep_alive;
        } else if name.eq_ignore_ascii_case(b"content-length") {
            // Refused even beside Transfer-Encoding, which would override it (RFC 9112, 11.1).
            let length = agreed_length(self.content_length, value).ok_or(ResponseError::ContentLength)?;
            self.content_length = Some(length);
        } else if name.eq_ignore_ascii_case(b"transfer-encoding") {
            self.transfer_encoding = true;
            // Several fields make one list; empty list elements are allowed (RFC 9110, 5.6.1).
            let last = value.rsplit(|&b| b == b',').map(trim_ows).find(|c| !c.is_empty());
            if let Some(last) = last {
                self.chunked = last.eq_ignore_ascii_case(b"chunked");
            }
        }
        Ok(())
    }
}

/// RFC 9112, 6.3, in its order: no body for HEAD, 1xx, 204, 304; then
/// Transfer-Encoding (chunked last, or else read until close); then Content-Length;
/// then until close.
fn body_kind(status: u16, method: Method, fields: &Fields) -> BodyKind {
    if method == Method::Head || status < 200 || status == 204 || status == 304 {
        BodyKind::None
    } else if fields.transfer_encoding {
        if fields.chunked {
            BodyKind::Chunked
        } else {
            BodyKind::UntilClose
        }
    } else if let Some(length) = fields.content_length {
        BodyKind::Length(length)
    } else {
        BodyKind::UntilClose
    }
}

#[cfg(test)]
mod tests;
