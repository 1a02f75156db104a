//! [`ResponseHead`]: a response's head, parsed whole (the status line and the header
//! block up to its empty line) and borrowed from the bytes it arrived in, and what it
//! says about its response's framing.
//!
//! RFC 9112, sections 4 and 5:
//! ```text
//! status-line   = HTTP-version SP status-code SP [ reason-phrase ]
//! status-code   = 3DIGIT
//! reason-phrase = 1*( HTAB / SP / VCHAR / obs-text )
//! field-line    = field-name ":" OWS field-value OWS
//! ```

use super::parse::{Method, Version};
use super::response_error::ResponseError;
use super::syntax::{
    agreed_length, all_bytes, checked_fields, connection_options, field_lines, is_value_byte, next_line,
    trim_ows,
};

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

/// A response's head, whole, borrowed from the input it arrived in: the status line
/// and the header fields up to the empty line that ends them, and what they say
/// about the response's framing.
///
/// ```
/// use percore::http::{BodyKind, Method, ResponseEvent, ResponseReader, Stream, Version};
/// let input = b"HTTP/1.1 404 Not Found\r\nContent-Type: text/plain\r\nContent-Length:  4 \r\n\r\n";
/// let framed = ResponseReader::new(Method::Get).read(input, Stream::Open)?;
/// let ResponseEvent::Head { head, .. } = framed.event else { panic!("the head is whole") };
/// assert_eq!((head.status(), head.reason(), head.version()), (404, &b"Not Found"[..], Version::Http11));
/// assert_eq!((head.keep_alive(), head.body()), (true, BodyKind::Length(4)));
/// let headers: Vec<_> = head.headers().collect();
/// assert_eq!(headers, [(&b"Content-Type"[..], &b"text/plain"[..]), (b"Content-Length", b"4")]);
/// assert_eq!(head.as_bytes(), &input[..]);
/// # Ok::<(), percore::http::ResponseError>(())
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ResponseHead<'a> {
    bytes: &'a [u8],
    framing: Framing,
}

impl<'a> ResponseHead<'a> {
    /// The head `bytes` (a whole one, checked) say `framing` of.
    pub(crate) fn new(bytes: &'a [u8], framing: Framing) -> ResponseHead<'a> {
        ResponseHead { bytes, framing }
    }

    /// The status code, 100 to 999; see [`is_interim`](ResponseHead::is_interim).
    pub fn status(&self) -> u16 {
        self.framing.status
    }

    /// The reason phrase, as sent; empty when the server sent none.
    pub fn reason(&self) -> &'a [u8] {
        // The status line was checked: `HTTP/1.x 200`, then the reason after one SP.
        next_line(self.bytes).0.get(13..).unwrap_or_default()
    }

    /// The version of the status line: a later 1.x minor version is answered as 1.1
    /// (RFC 9110, 2.5).
    pub fn version(&self) -> Version {
        self.framing.version
    }

    /// Whether the connection stays open after this response: for HTTP/1.1 unless
    /// `Connection: close`, for HTTP/1.0 only with `Connection: keep-alive`, and never
    /// after an [`UntilClose`](BodyKind::UntilClose) body, ambiguous framing, or a 101.
    pub fn keep_alive(&self) -> bool {
        self.framing.keep_alive
    }

    /// How the body is delimited, for the request this response answers.
    pub fn body(&self) -> BodyKind {
        self.framing.body
    }

    /// The header fields in the order they came, each as its name and its value
    /// without the white space around it (OWS), as bytes of the head.
    pub fn headers(&self) -> impl Iterator<Item = (&'a [u8], &'a [u8])> + Clone + 'a {
        checked_fields(self.bytes)
    }

    /// The head as it arrived, from the status line to the empty line included: its
    /// length is the head's on the wire.
    pub fn as_bytes(&self) -> &'a [u8] {
        self.bytes
    }

    /// An interim response (`100 Continue`, `103 Early Hints`): the final response to
    /// the same request follows it. A `101 Switching Protocols` is final: after it the
    /// connection speaks another protocol, so it is not kept alive either.
    pub fn is_interim(&self) -> bool {
        (100..200).contains(&self.framing.status) && self.framing.status != 101
    }
}

/// What a head says, borrowing nothing: the same for every response with that head
/// that answers the same method, so it is what the reader remembers.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Framing {
    status: u16,
    version: Version,
    keep_alive: bool,
    body: BodyKind,
}

impl Framing {
    /// The framing of `head`, a whole head up to its empty line, answering `method`.
    pub(crate) fn parse(head: &[u8], method: Method) -> Result<Framing, ResponseError> {
        let (line, fields) = next_line(head);
        let (version, status) = parse_status_line(line)?;
        let fields = Fields::parse(fields)?;
        let body = body_kind(status, method, &fields);
        let keep_alive = match version {
            Version::Http11 => !fields.close,
            Version::Http10 => fields.keep_alive && !fields.close,
        };
        // RFC 9112, 6.1 and 6.3: HTTP/1.0 with Transfer-Encoding, or both Transfer-Encoding
        // and Content-Length, is framing a peer may read differently; do not reuse it.
        let ambiguous =
            fields.transfer_encoding && (version == Version::Http10 || fields.content_length.is_some());
        // After a 101 the connection speaks another protocol (RFC 9110, 15.2.2).
        let keep_alive = keep_alive && !ambiguous && body != BodyKind::UntilClose && status != 101;
        Ok(Framing { status, version, keep_alive, body })
    }

    /// How the body is delimited.
    pub(crate) fn body(&self) -> BodyKind {
        self.body
    }
}

/// Refuses a head that does not start like `HTTP/1.`, as soon as what arrived shows
/// it, so a reply in another protocol fails at once instead of at 64 KiB.
pub(crate) fn check_version_prefix(input: &[u8]) -> Result<(), ResponseError> {
    const VERSION_PREFIX: &[u8] = b"HTTP/1.";
    let seen = input.len().min(VERSION_PREFIX.len());
    if input[..seen] != VERSION_PREFIX[..seen] {
        return Err(ResponseError::StatusLine);
    }
    Ok(())
}

/// `status-line = HTTP-version SP status-code SP [ reason-phrase ]`, returning the
/// version (a later 1.x minor is 1.1, RFC 9110 2.5) and the status. The SP before an
/// empty reason may be missing: servers omit it (RFC 9112, 4).
fn parse_status_line(line: &[u8]) -> Result<(Version, u16), ResponseError> {
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
    let version = if *minor == b'0' { Version::Http10 } else { Version::Http11 };
    Ok((version, status))
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
