//! The client side's response parse, for a load generator: where a response ends, and
//! whether the connection can carry the next request. Nothing is decoded, only framed,
//! and [`parse_response`] allocates nothing.
//!
//! RFC 9112, sections 2.2, 4, 6.3 and 7.1:
//! ```text
//! HTTP-message  = start-line CRLF *( field-line CRLF ) CRLF [ message-body ]
//! status-line   = HTTP-version SP status-code SP [ reason-phrase ]
//! status-code   = 3DIGIT
//! reason-phrase = 1*( HTAB / SP / VCHAR / obs-text )
//! field-line    = field-name ":" OWS field-value OWS
//! ```
//! As in the request parse, a bare LF ends a line as CRLF does (section 2.2). The parse
//! is stateless: the caller keeps reading into one buffer and calls again until the
//! whole response is there, then drops `len` bytes and parses the next one.
//! [`ResponseParser`] gives the same answers, remembering the last head it parsed.

use super::chunked::chunked_len;
use super::parse::Status;
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

/// A parsed response: its status, its framing, and how many bytes of the buffer it took.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ResponseHead {
    /// The status code, 100 to 999. A 1xx is an interim response: the final one follows.
    pub status: u16,
    /// Whether the connection stays open after this response: for HTTP/1.1 unless
    /// `Connection: close`, for HTTP/1.0 only with `Connection: keep-alive`, and never
    /// after an [`UntilClose`](BodyKind::UntilClose) body or ambiguous framing.
    pub keep_alive: bool,
    /// How the body is delimited.
    pub body: BodyKind,
    /// Bytes of the whole response: head and body, with chunk framing and trailers.
    pub len: usize,
}

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
    TooLarge,
}

impl std::fmt::Display for ResponseError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            ResponseError::StatusLine => "invalid status line",
            ResponseError::Header => "invalid header line",
            ResponseError::ContentLength => "invalid Content-Length",
            ResponseError::Chunk => "invalid chunked body",
            ResponseError::TooLarge => "response head too large",
        })
    }
}

impl std::error::Error for ResponseError {}

/// Parses the response at the start of `buf`.
///
/// `head_request`: the request was HEAD, so there is no body whatever the headers say
/// (nor is there one after a 1xx, 204 or 304). `at_eof`: the server closed the
/// connection, so an [`UntilClose`](BodyKind::UntilClose) body ends at `buf.len()`;
/// without EOF such a response is `Partial`. `Complete` only once the whole response is
/// in `buf`; a `Partial` at EOF means the response was cut short.
///
/// ```
/// use percore::http::{parse_response, BodyKind, Status};
/// let buf = b"HTTP/1.1 200 OK\r\nContent-Length: 5\r\n\r\nhelloHTTP/1.1 204 No Content\r\n\r\n";
/// let Ok(Status::Complete(first)) = parse_response(buf, false, false) else { panic!() };
/// assert_eq!((first.status, first.body, first.keep_alive), (200, BodyKind::Length(5), true));
/// let Ok(Status::Complete(second)) = parse_response(&buf[first.len..], false, false) else { panic!() };
/// assert_eq!((second.status, second.body, second.len), (204, BodyKind::None, 27));
/// ```
pub fn parse_response(
    buf: &[u8],
    head_request: bool,
    at_eof: bool,
) -> Result<Status<ResponseHead>, ResponseError> {
    match frame(buf, head_request)? {
        Some((head_len, framing)) => framing.complete(buf, head_len, at_eof),
        None => Ok(Status::Partial),
    }
}

/// [`parse_response`] with a memory of the last head it parsed. A server answers a
/// benchmark with the same head every time (but once a second, when its Date
/// changes), and a head that is byte for byte the last one is framed the same, so
/// it is recognised by one comparison instead of parsed again. The answers are
/// exactly `parse_response`'s.
///
/// ```
/// use percore::http::{parse_response, ResponseParser};
/// let buf = b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nhiHTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nhi";
/// let mut parser = ResponseParser::new(false);
/// assert_eq!(parser.parse(buf, false), parse_response(buf, false, false));
/// assert_eq!(parser.parse(&buf[40..], false), parse_response(&buf[40..], false, false)); // remembered
/// ```
#[derive(Clone, Debug)]
pub struct ResponseParser {
    head_request: bool,
    /// The last complete head parsed, and what it says.
    head: Vec<u8>,
    framing: Option<Framing>,
}

impl ResponseParser {
    /// A parser for the responses to requests of one method: `head_request` as in
    /// [`parse_response`].
    pub fn new(head_request: bool) -> ResponseParser {
        ResponseParser { head_request, head: Vec::new(), framing: None }
    }

    /// Parses the response at the start of `buf`, as [`parse_response`] does.
    pub fn parse(&mut self, buf: &[u8], at_eof: bool) -> Result<Status<ResponseHead>, ResponseError> {
        // The remembered head ends at its first empty line, so a buffer that starts
        // with it has that head, whatever follows.
        if let Some(framing) = self.framing.filter(|_| buf.starts_with(&self.head)) {
            return framing.complete(buf, self.head.len(), at_eof);
        }
        let Some((head_len, framing)) = frame(buf, self.head_request)? else { return Ok(Status::Partial) };
        self.head.clear();
        self.head.extend_from_slice(&buf[..head_len]);
        self.framing = Some(framing);
        framing.complete(buf, head_len, at_eof)
    }
}

/// What a head says about its response; the same for every response with that head.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct Framing {
    status: u16,
    keep_alive: bool,
    body: BodyKind,
}

/// Parses the head at the start of `buf`: its length and framing, `None` while it is
/// still arriving.
fn frame(buf: &[u8], head_request: bool) -> Result<Option<(usize, Framing)>, ResponseError> {
    // Unlike a request, no empty line may come before the status line.
    let Some(head_len) = find_head_end(buf, 0) else {
        check_partial_head(buf)?;
        return Ok(None);
    };
    if head_len > MAX_HEAD {
        // Also when complete, so that a prefix and the whole never disagree.
        return Err(ResponseError::TooLarge);
    }
    let (version_11, status, fields) = parse_head(&buf[..head_len])?;
    let body = body_kind(status, head_request, &fields);
    let keep_alive = match version_11 {
        true => !fields.close,
        false => fields.keep_alive && !fields.close,
    };
    // RFC 9112, 6.1 and 6.3: HTTP/1.0 with Transfer-Encoding, or both Transfer-Encoding
    // and Content-Length, is framing a peer may read differently; do not reuse it.
    let ambiguous = fields.transfer_encoding && (!version_11 || fields.content_length.is_some());
    let keep_alive = keep_alive && !ambiguous && body != BodyKind::UntilClose;
    Ok(Some((head_len, Framing { status, keep_alive, body })))
}

impl Framing {
    /// The response whose head, of `head_len` bytes, starts `buf`: complete once its
    /// whole body is there too.
    fn complete(
        self,
        buf: &[u8],
        head_len: usize,
        at_eof: bool,
    ) -> Result<Status<ResponseHead>, ResponseError> {
        let body_len = match self.body {
            BodyKind::None => Some(0),
            BodyKind::Length(length) => usize::try_from(length).ok().filter(|&n| n <= buf.len() - head_len),
            BodyKind::Chunked => chunked_len(&buf[head_len..])?,
            BodyKind::UntilClose => at_eof.then_some(buf.len() - head_len),
        };
        let Some(body_len) = body_len else { return Ok(Status::Partial) };
        let Framing { status, keep_alive, body } = self;
        Ok(Status::Complete(ResponseHead { status, keep_alive, body, len: head_len + body_len }))
    }
}

/// Refuses an incomplete head that is already too large, or that does not start like
/// `HTTP/1.` (so a reply in another protocol fails at once instead of at 64 KiB).
fn check_partial_head(buf: &[u8]) -> Result<(), ResponseError> {
    if buf.len() > MAX_HEAD {
        return Err(ResponseError::TooLarge);
    }
    let seen = buf.len().min(VERSION_PREFIX.len());
    if buf[..seen] != VERSION_PREFIX[..seen] {
        return Err(ResponseError::StatusLine);
    }
    Ok(())
}

const VERSION_PREFIX: &[u8] = b"HTTP/1.";

/// The status line and the header block: (is HTTP/1.1 or later 1.x, status, fields).
fn parse_head(head: &[u8]) -> Result<(bool, u16, Fields), ResponseError> {
    let (line, rest) = next_line(head);
    let (version_11, status) = parse_status_line(line)?;
    let mut fields = Fields::default();
    for field in field_lines(rest) {
        let (name, value) = field.map_err(|_| ResponseError::Header)?;
        fields.add(name, value)?;
    }
    Ok((version_11, status, fields))
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
fn body_kind(status: u16, head_request: bool, fields: &Fields) -> BodyKind {
    if head_request || status < 200 || status == 204 || status == 304 {
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
