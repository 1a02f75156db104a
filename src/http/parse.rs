//! The request head parse: the request line, then one pass over the header block for
//! the four fields that decide framing and keep-alive. No allocation; the result
//! borrows from the input.
//!
//! RFC 9112, section 2.2 and 3:
//! ```text
//! HTTP-message = start-line CRLF *( field-line CRLF ) CRLF [ message-body ]
//! request-line = method SP request-target SP HTTP-version
//! field-line   = field-name ":" OWS field-value OWS
//! ```
//! A bare LF ends a line as CRLF does, and one empty line before the request line is
//! skipped (both allowed by section 2.2). Everything else that breaks the grammar is
//! an error, because a minimal server must never guess where a request ends.

use super::syntax::{
    agreed_length, all_bytes, checked_fields, connection_options, field_lines, find_head_end, is_host_byte,
    is_target_byte, is_tchar, next_line,
};

/// The outcome of parsing a buffer that may hold only the start of a request.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Parsed<T> {
    /// The request head is complete.
    Complete(T),
    /// More bytes are needed.
    Partial,
}

/// The request method: the standard ones (RFC 9110, 9.3; `PATCH`, RFC 5789) by name,
/// matched case-sensitively as the RFC says, any other token as `Other` (its bytes:
/// [`Request::method_bytes`]). A response to `HEAD` has no body,
/// both when the server answers it and when a client frames the answer.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Method {
    /// `GET`
    Get,
    /// `HEAD`: the same head as `GET`, no body.
    Head,
    /// `POST`
    Post,
    /// `PUT`
    Put,
    /// `DELETE`
    Delete,
    /// `CONNECT`
    Connect,
    /// `OPTIONS`
    Options,
    /// `TRACE`
    Trace,
    /// `PATCH`
    Patch,
    /// Any other valid method token.
    Other,
}

/// The protocol version of a request line or a status line.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Version {
    /// `HTTP/1.0`: the connection closes after the response unless
    /// `Connection: keep-alive` says otherwise.
    Http10,
    /// `HTTP/1.1` (and any later 1.x minor version): the connection stays open unless
    /// `Connection: close` says otherwise.
    Http11,
}

/// A parsed request head, borrowing from the buffer: what percore's own servers
/// need, read once, and the whole head for the rest ([`headers`](Request::headers),
/// [`as_bytes`](Request::as_bytes)).
///
/// ```
/// use percore::http::{parse, Limits, Method, Parsed};
/// let input = b"POST /form HTTP/1.1\r\nHost: a\r\nX-Id:  7 \r\nContent-Length: 2\r\n\r\nhi";
/// let Ok(Parsed::Complete(request)) = parse(input, &Limits::default()) else { panic!() };
/// assert_eq!((request.method, request.content_length), (Method::Post, 2));
/// let headers: Vec<_> = request.headers().collect();
/// assert_eq!(headers, [(&b"Host"[..], &b"a"[..]), (b"X-Id", b"7"), (b"Content-Length", b"2")]);
/// assert_eq!(request.as_bytes(), &input[..input.len() - 2]);
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Request<'a> {
    /// The method.
    pub method: Method,
    /// The request target, as sent.
    pub target: &'a [u8],
    /// The version.
    pub version: Version,
    /// Whether the connection stays open after the response (RFC 9112, 9.3):
    /// HTTP/1.1 unless `Connection: close`, HTTP/1.0 only with
    /// `Connection: keep-alive`.
    pub keep_alive: bool,
    /// The body length from `Content-Length`, 0 when absent.
    pub content_length: u64,
    /// The body is `Transfer-Encoding: chunked`.
    pub chunked: bool,
    /// The `Host` value, if sent.
    pub host: Option<&'a [u8]>,
    /// Bytes of the head, up to and including the empty line (and the one empty
    /// line allowed before the request line).
    pub head_len: usize,
    /// The head from its request line to its empty line included.
    head: &'a [u8],
}

impl<'a> Request<'a> {
    /// The header fields in the order they came, each as its name (as sent: compare
    /// it with `eq_ignore_ascii_case`) and its value without the white space around
    /// it, as bytes of the head; no allocation. Every line was checked by the parse.
    pub fn headers(&self) -> impl Iterator<Item = (&'a [u8], &'a [u8])> + Clone + 'a {
        checked_fields(self.head)
    }

    /// The head as it arrived, from the request line to the empty line included.
    pub fn as_bytes(&self) -> &'a [u8] {
        self.head
    }

    /// The method's token as sent: the name of a [`Method::Other`], to forward it.
    ///
    /// ```
    /// use percore::http::{parse, Limits, Method, Parsed};
    /// let input = b"\r\nPROPFIND /d HTTP/1.1\r\nHost: a\r\n\r\n";
    /// let Ok(Parsed::Complete(request)) = parse(input, &Limits::default()) else { panic!() };
    /// assert_eq!((request.method, request.method_bytes()), (Method::Other, &b"PROPFIND"[..]));
    /// ```
    pub fn method_bytes(&self) -> &'a [u8] {
        let end = self.head.iter().position(|&b| b == b' ').unwrap_or(self.head.len());
        &self.head[..end]
    }
}

/// Why a request head was refused. Each maps to one response status.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Error {
    /// The method is not a token (or the input is not HTTP at all).
    Method,
    /// The target is empty or has a space or control byte.
    Target,
    /// The version is not `HTTP/1.x` (and not a later major version).
    Version,
    /// `HTTP/2.0` or later on an HTTP/1 connection, such as the HTTP/2 preface.
    UnsupportedVersion,
    /// A header line breaks the grammar: no colon, a bad name, a control byte, obs-fold.
    Header,
    /// `Content-Length` is not a number, overflows, or two of them disagree.
    ContentLength,
    /// `Transfer-Encoding` other than `chunked`, or together with `Content-Length`.
    TransferEncoding,
    /// An HTTP/1.1 request without `Host`, any request with two, or an invalid one.
    Host,
    /// The request line is longer than the limit.
    RequestLineTooLong,
    /// The head is larger than the limit.
    HeadTooLarge,
}

impl Error {
    /// The response status for this error: 414 for a request line too long, 431
    /// for a head too large, 505 for HTTP/2 or later, 400 for every other.
    pub fn status(self) -> u16 {
        match self {
            Error::UnsupportedVersion => 505,
            Error::RequestLineTooLong => 414,
            Error::HeadTooLarge => 431,
            _ => 400,
        }
    }
}

impl std::fmt::Display for Error {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            Error::Method => "invalid method",
            Error::Target => "invalid request target",
            Error::Version => "invalid HTTP version",
            Error::UnsupportedVersion => "HTTP version not supported",
            Error::Header => "invalid header line",
            Error::ContentLength => "invalid Content-Length",
            Error::TransferEncoding => "unsupported Transfer-Encoding",
            Error::Host => "missing, repeated or invalid Host",
            Error::RequestLineTooLong => "request line too long",
            Error::HeadTooLarge => "request head too large",
        })
    }
}

impl std::error::Error for Error {}

/// Size limits of a request head.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Limits {
    /// Longest request line, without its line ending.
    pub request_line: usize,
    /// Largest head, from the request line to the empty line.
    pub head: usize,
}

impl Default for Limits {
    /// nginx's defaults: 8 KiB for a line, 32 KiB for the head.
    fn default() -> Limits {
        Limits { request_line: 8 * 1024, head: 32 * 1024 }
    }
}

/// Parses the request at the start of `buf`.
///
/// ```
/// use percore::http::{parse, Limits, Method, Parsed};
/// let Ok(Parsed::Complete(req)) = parse(b"GET / HTTP/1.1\r\nHost: a\r\n\r\n", &Limits::default())
/// else { panic!() };
/// assert_eq!((req.method, req.target, req.keep_alive), (Method::Get, &b"/"[..], true));
/// ```
pub fn parse<'a>(buf: &'a [u8], limits: &Limits) -> Result<Parsed<Request<'a>>, Error> {
    Progress::default().parse(buf, limits)
}

/// A resumable parse for input that arrives in pieces: it remembers how far it looked
/// for the end of the head, and whether the request line already passed its checks,
/// so a client sending one byte at a time costs one byte of scanning per byte, not a
/// re-scan of everything it sent.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Progress {
    scanned: u32,
    line_checked: bool,
}

impl Progress {
    /// Parses the request at the start of `buf`, which must start where the previous
    /// call's `buf` started (and extend it) until the result is not `Partial`. A
    /// complete head starts it afresh, ready for the next request; after an error,
    /// start from `Progress::default()`.
    pub fn parse<'a>(&mut self, buf: &'a [u8], limits: &Limits) -> Result<Parsed<Request<'a>>, Error> {
        let start = skip_empty_line(buf);
        // Three bytes back: a head's end seen in part last time ("\r\n\r").
        let Some(head_len) = find_head_end(buf, (self.scanned as usize).saturating_sub(3)) else {
            self.scanned = buf.len() as u32;
            self.check_partial(&buf[start..], limits)?;
            return Ok(Parsed::Partial);
        };
        *self = Progress::default();
        parse_head(&buf[start..head_len], limits, head_len).map(Parsed::Complete)
    }
}

/// One empty line before the request line is skipped (RFC 9112, 2.2).
fn skip_empty_line(buf: &[u8]) -> usize {
    match buf {
        [b'\n', ..] => 1,
        [b'\r', b'\n', ..] => 2,
        _ => 0,
    }
}

impl Progress {
    /// Refuses an incomplete head early when what arrived already breaks a rule: a
    /// method that is no token (so binary garbage gets its 400 at once), or a size
    /// limit. A request line that has ended was checked whole; after it only the
    /// head's size is left to check.
    fn check_partial(&mut self, line_start: &[u8], limits: &Limits) -> Result<(), Error> {
        if self.line_checked {
            return if line_start.len() > limits.head { Err(Error::HeadTooLarge) } else { Ok(()) };
        }
        if line_start == b"\r" {
            // The start of the empty line that may come before the request line.
            return Ok(());
        }
        // The line as the whole head's parse will see it: without its line end, nor a
        // CR that arrived last (an LF may follow it). Checked by the same rules, in the
        // same order, so that a partial head is refused only as the whole one would be.
        let line = next_line(line_start).0;
        if !all_bytes(method_window(line, limits), is_tchar) {
            return Err(Error::Method);
        }
        if line.len() > limits.request_line {
            return Err(Error::RequestLineTooLong);
        }
        if line_start.len() > limits.head {
            return Err(Error::HeadTooLarge);
        }
        self.line_checked = line_start.contains(&b'\n');
        Ok(())
    }
}

/// The bytes of a request `line` (without its line end, as [`next_line`] gives it)
/// that the method check looks at, first of all checks: up to the line's first
/// space, within the longest line allowed. In a partial head and a whole one alike,
/// so that the same bytes get the same answer however they arrive (a method checked
/// past the limit in one and not the other would make it 400 or 414 by chance).
fn method_window<'a>(line: &'a [u8], limits: &Limits) -> &'a [u8] {
    let line = &line[..line.len().min(limits.request_line + 1)];
    &line[..line.iter().position(|&b| b == b' ').unwrap_or(line.len())]
}

fn parse_head<'a>(head: &'a [u8], limits: &Limits, head_len: usize) -> Result<Request<'a>, Error> {
    let (line, rest) = next_line(head);
    if !all_bytes(method_window(line, limits), is_tchar) {
        return Err(Error::Method);
    }
    if line.len() > limits.request_line {
        return Err(Error::RequestLineTooLong);
    }
    if head.len() > limits.head {
        return Err(Error::HeadTooLarge);
    }
    let (method, target, version) = parse_request_line(line)?;
    let mut fields = Fields::default();
    for field in field_lines(rest) {
        let (name, value) = field.map_err(|_| Error::Header)?;
        fields.add(name, value)?;
    }
    let keep_alive = match version {
        Version::Http11 => !fields.close,
        Version::Http10 => fields.keep_alive && !fields.close,
    };
    if fields.hosts > 1 || (fields.hosts == 0 && version == Version::Http11) {
        return Err(Error::Host);
    }
    if fields.chunked && (fields.content_length.is_some() || version == Version::Http10) {
        return Err(Error::TransferEncoding);
    }
    Ok(Request {
        method,
        target,
        version,
        keep_alive,
        content_length: fields.content_length.unwrap_or(0),
        chunked: fields.chunked,
        host: fields.host,
        head_len,
        head,
    })
}

fn parse_request_line(line: &[u8]) -> Result<(Method, &[u8], Version), Error> {
    let mut parts = line.splitn(3, |&b| b == b' ');
    let method = parts.next().unwrap_or_default();
    if method.is_empty() || !all_bytes(method, is_tchar) {
        return Err(Error::Method);
    }
    let target = parts.next().ok_or(Error::Version)?;
    if target.is_empty() || !all_bytes(target, is_target_byte) {
        return Err(Error::Target);
    }
    let version = parse_version(parts.next().ok_or(Error::Version)?)?;
    let method = match method {
        b"GET" => Method::Get,
        b"HEAD" => Method::Head,
        b"POST" => Method::Post,
        b"PUT" => Method::Put,
        b"DELETE" => Method::Delete,
        b"CONNECT" => Method::Connect,
        b"OPTIONS" => Method::Options,
        b"TRACE" => Method::Trace,
        b"PATCH" => Method::Patch,
        _ => Method::Other,
    };
    Ok((method, target, version))
}

/// `HTTP-version = "HTTP/" DIGIT "." DIGIT`, case-sensitive (RFC 9112, 2.3).
fn parse_version(version: &[u8]) -> Result<Version, Error> {
    match version {
        b"HTTP/1.1" => Ok(Version::Http11),
        b"HTTP/1.0" => Ok(Version::Http10),
        [b'H', b'T', b'T', b'P', b'/', major, b'.', minor]
            if major.is_ascii_digit() && minor.is_ascii_digit() =>
        {
            match major {
                b'0' => Err(Error::Version),
                // A later minor version is answered as the highest we speak (RFC 9110, 2.5).
                b'1' => Ok(Version::Http11),
                _ => Err(Error::UnsupportedVersion),
            }
        }
        _ => Err(Error::Version),
    }
}

/// What the header block says about framing and keep-alive.
#[derive(Default)]
struct Fields<'a> {
    close: bool,
    keep_alive: bool,
    content_length: Option<u64>,
    chunked: bool,
    host: Option<&'a [u8]>,
    hosts: u32,
}

impl<'a> Fields<'a> {
    fn add(&mut self, name: &[u8], value: &'a [u8]) -> Result<(), Error> {
        if name.eq_ignore_ascii_case(b"host") {
            if !all_bytes(value, is_host_byte) {
                return Err(Error::Host);
            }
            self.host = Some(value);
            self.hosts += 1;
        } else if name.eq_ignore_ascii_case(b"connection") {
            let (close, keep_alive) = connection_options(value);
            self.close |= close;
            self.keep_alive |= keep_alive;
        } else if name.eq_ignore_ascii_case(b"content-length") {
            self.content_length =
                Some(agreed_length(self.content_length, value).ok_or(Error::ContentLength)?);
        } else if name.eq_ignore_ascii_case(b"transfer-encoding") {
            // Only a lone `chunked` frames a body we can find the end of.
            if self.chunked || !value.eq_ignore_ascii_case(b"chunked") {
                return Err(Error::TransferEncoding);
            }
            self.chunked = true;
        }
        Ok(())
    }
}
