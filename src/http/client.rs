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

use super::parse::Status;
use super::syntax::{
    agreed_length, all_bytes, complete_line, connection_options, field_lines, find_head_end, is_value_byte,
    next_line, number, split_field, trim_ows,
};

/// The largest response head accepted, from the status line to the empty line. Twice
/// the server side's 32 KiB: a load generator should not fail on a verbose server.
const MAX_HEAD: usize = 64 * 1024;

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

/// The length of a complete chunked body at the start of `body`, `None` if more is
/// needed (RFC 9112, 7.1):
/// ```text
/// chunked-body   = *chunk last-chunk trailer-section CRLF
/// chunk          = chunk-size [ chunk-ext ] CRLF chunk-data CRLF
/// chunk-size     = 1*HEXDIG
/// last-chunk     = 1*("0") [ chunk-ext ] CRLF
/// trailer-section = *( field-line CRLF )
/// ```
fn chunked_len(body: &[u8]) -> Result<Option<usize>, ResponseError> {
    let mut at = 0;
    loop {
        let Some((line, after)) = complete_line(&body[at..]) else {
            check_partial_size_line(&body[at..])?;
            return Ok(None);
        };
        let size = chunk_size(line)?;
        at += after;
        if size == 0 {
            return Ok(trailers_len(&body[at..])?.map(|len| at + len));
        }
        // Bigger than what is buffered (or than memory): more is needed.
        let Some(size) = usize::try_from(size).ok().filter(|&n| n <= body.len() - at) else {
            return Ok(None);
        };
        at += size;
        match &body[at..] {
            [b'\n', ..] => at += 1,
            [b'\r', b'\n', ..] => at += 2,
            [] | [b'\r'] => return Ok(None),
            _ => return Err(ResponseError::Chunk),
        }
    }
}

/// `chunk-size [ chunk-ext ]`: the size, with overflow refused.
fn chunk_size(line: &[u8]) -> Result<u64, ResponseError> {
    let digits = line.iter().position(|b| !b.is_ascii_hexdigit()).unwrap_or(line.len());
    if digits == 0 {
        return Err(ResponseError::Chunk);
    }
    let size = number(&line[..digits], 16);
    check_chunk_ext(&line[digits..])?;
    size.ok_or(ResponseError::Chunk)
}

/// `chunk-ext = *( BWS ";" BWS chunk-ext-name [ BWS "=" BWS chunk-ext-val ] )`.
/// Extensions are ignored, so only what could hide a line end is checked: control
/// bytes. Trailing white space is let through, as servers send it.
fn check_chunk_ext(ext: &[u8]) -> Result<(), ResponseError> {
    let ext = trim_ows(ext);
    if !ext.is_empty() && (ext[0] != b';' || !all_bytes(ext, is_value_byte)) {
        return Err(ResponseError::Chunk);
    }
    Ok(())
}

/// Refuses a size line still arriving once what is there cannot start a valid one, so
/// a garbage body fails at once rather than when the caller's buffer is full.
fn check_partial_size_line(partial: &[u8]) -> Result<(), ResponseError> {
    let partial = partial.strip_suffix(b"\r").unwrap_or(partial);
    if partial.is_empty() {
        return Ok(());
    }
    chunk_size(partial).map(drop)
}

/// The length of `trailer-section CRLF` at the start of `buf`, `None` if more is needed.
fn trailers_len(buf: &[u8]) -> Result<Option<usize>, ResponseError> {
    let mut at = 0;
    while let Some((line, after)) = complete_line(&buf[at..]) {
        at += after;
        if line.is_empty() {
            return Ok(Some(at));
        }
        split_field(line).ok_or(ResponseError::Header)?;
    }
    Ok(None)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn head(status: u16, keep_alive: bool, body: BodyKind, len: usize) -> ResponseHead {
        ResponseHead { status, keep_alive, body, len }
    }

    /// One valid response, the flags it is parsed with, and what it parses to; `len` is
    /// always the whole text.
    struct Case {
        name: &'static str,
        text: String,
        head_request: bool,
        at_eof: bool,
        status: u16,
        keep_alive: bool,
        body: BodyKind,
    }

    /// A case named `name` expected to parse to this status, keep-alive and body.
    fn case(name: &'static str, status: u16, keep_alive: bool, body: BodyKind) -> Case {
        Case { name, text: String::new(), head_request: false, at_eof: false, status, keep_alive, body }
    }

    impl Case {
        fn text(mut self, text: impl Into<String>) -> Case {
            self.text = text.into();
            self
        }

        fn answering_head(mut self) -> Case {
            self.head_request = true;
            self
        }

        fn at_eof(mut self) -> Case {
            self.at_eof = true;
            self
        }

        fn expected(&self) -> Status<ResponseHead> {
            Status::Complete(head(self.status, self.keep_alive, self.body, self.text.len()))
        }

        fn parse(&self, len: usize, at_eof: bool) -> Result<Status<ResponseHead>, ResponseError> {
            parse_response(&self.text.as_bytes()[..len], self.head_request, at_eof)
        }
    }

    /// A 26-byte chunk of data, 0x1A.
    const ALPHABET: &str = "abcdefghijklmnopqrstuvwxyz";

    const KEEP: bool = true;
    const CLOSE: bool = false;

    fn valid_cases() -> Vec<Case> {
        use BodyKind::{Chunked, Length, None as NoBody, UntilClose};
        let chunked = "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n";
        vec![
            case("200 Content-Length", 200, KEEP, Length(5))
                .text("HTTP/1.1 200 OK\r\nContent-Length: 5\r\n\r\nhello"),
            case("Content-Length 0", 200, KEEP, Length(0))
                .text("HTTP/1.1 200 OK\r\nContent-Length:0\r\n\r\n"),
            case("equal Content-Lengths", 200, KEEP, Length(2))
                .text("HTTP/1.1 200 OK\r\nContent-Length: 2\r\ncontent-length: 2\r\n\r\nhi"),
            case("204 no body", 204, KEEP, NoBody).text("HTTP/1.1 204 No Content\r\n\r\n"),
            case("HEAD with Content-Length", 200, KEEP, NoBody)
                .text("HTTP/1.1 200 OK\r\nContent-Length: 1234\r\n\r\n")
                .answering_head(),
            case("304 with Content-Length", 304, KEEP, NoBody)
                .text("HTTP/1.1 304 Not Modified\r\nContent-Length: 10\r\n\r\n"),
            case("100 Continue", 100, KEEP, NoBody).text("HTTP/1.1 100 Continue\r\n\r\n"),
            case("chunked", 200, KEEP, Chunked).text(format!("{chunked}5\r\nhello\r\n0\r\n\r\n")),
            case("chunked with extensions and trailers", 200, KEEP, Chunked).text(format!(
                "{chunked}5;name=value\r\nhello\r\n1A ; a=\"b c\";x\r\n{ALPHABET}\r\n\
                 000;last\r\nExpires: never\r\nX-Sum:1\r\n\r\n"
            )),
            case("chunked, bare LF", 200, KEEP, Chunked)
                .text("HTTP/1.1 200 OK\nTransfer-Encoding: chunked\n\n5\nhello\n0\n\n"),
            case("chunked last of a list", 200, KEEP, Chunked).text(
                "HTTP/1.1 200 OK\r\nTransfer-Encoding: gzip\r\nTransfer-Encoding: chunked,\r\n\r\n0\r\n\r\n",
            ),
            case("chunked over Content-Length", 200, CLOSE, Chunked)
                .text("HTTP/1.1 200 OK\r\nContent-Length: 3\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\n"),
            case("HTTP/1.0 with Transfer-Encoding", 200, CLOSE, Chunked).text(
                "HTTP/1.0 200 OK\r\nConnection: keep-alive\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\n",
            ),
            case("HTTP/1.0 keep-alive", 200, KEEP, Length(2))
                .text("HTTP/1.0 200 OK\r\nConnection: Keep-Alive\r\nContent-Length: 2\r\n\r\nhi"),
            case("HTTP/1.0 default close", 200, CLOSE, Length(2))
                .text("HTTP/1.0 200 OK\r\nContent-Length: 2\r\n\r\nhi"),
            case("Connection: close", 200, CLOSE, Length(2))
                .text("HTTP/1.1 200 OK\r\nConnection: foo, close\r\nContent-Length: 2\r\n\r\nhi"),
            case("UntilClose at EOF", 200, CLOSE, UntilClose)
                .text("HTTP/1.1 200 OK\r\n\r\nall of it")
                .at_eof(),
            case("UntilClose, chunked not last", 200, CLOSE, UntilClose)
                .text("HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked, gzip\r\n\r\nxyz")
                .at_eof(),
            case("empty reason", 404, KEEP, Length(0)).text("HTTP/1.1 404 \r\nContent-Length: 0\r\n\r\n"),
            case("no SP before empty reason", 503, KEEP, Length(0))
                .text("HTTP/1.1 503\r\nContent-Length: 0\r\n\r\n"),
            case("later 1.x minor", 200, KEEP, Length(0))
                .text("HTTP/1.2 200 OK\r\nContent-Length: 0\r\n\r\n"),
            case("obs-text, tab, OWS", 200, KEEP, Length(0))
                .text("HTTP/1.1 200 \tOKé\r\nX-A:\t v \t\r\nContent-Length: 0\r\n\r\n"),
        ]
    }

    #[test]
    fn valid_responses_parse_to_their_whole_length() {
        for case in valid_cases() {
            assert_eq!(case.parse(case.text.len(), case.at_eof), Ok(case.expected()), "{}", case.name);
        }
    }

    #[test]
    fn every_prefix_is_partial_and_the_whole_complete() {
        for case in valid_cases() {
            for split in 0..case.text.len() {
                // At EOF, a prefix of an UntilClose response would be a shorter whole one.
                assert_eq!(case.parse(split, false), Ok(Status::Partial), "{}, split at {split}", case.name);
                let whole = case.parse(case.text.len(), case.at_eof);
                assert_eq!(whole, Ok(case.expected()), "{}, split at {split}", case.name);
            }
        }
    }

    #[test]
    fn bytes_after_a_response_do_not_change_it() {
        for case in valid_cases().into_iter().filter(|case| case.body != BodyKind::UntilClose) {
            let pipelined = format!("{}HTTP/1.1 200 OK\r\nContent-Length: 1\r\n\r\nx", case.text);
            let got = parse_response(pipelined.as_bytes(), case.head_request, case.at_eof);
            assert_eq!(got, Ok(case.expected()), "{}", case.name);
        }
    }

    #[test]
    fn until_close_without_eof_is_partial() {
        let buf = b"HTTP/1.1 200 OK\r\nServer: x\r\n\r\nsome body";
        assert_eq!(parse_response(buf, false, false), Ok(Status::Partial));
        let Ok(Status::Complete(at_eof)) = parse_response(buf, false, true) else { panic!() };
        assert_eq!(at_eof, head(200, false, BodyKind::UntilClose, buf.len()));
    }

    #[test]
    fn a_short_body_at_eof_is_still_partial() {
        let buf = b"HTTP/1.1 200 OK\r\nContent-Length: 10\r\n\r\nshort";
        assert_eq!(parse_response(buf, false, true), Ok(Status::Partial));
    }

    #[test]
    fn two_pipelined_responses_parse_one_after_the_other() {
        let first = "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n3\r\nabc\r\n0\r\n\r\n";
        let second = "HTTP/1.1 404 Not Found\r\nContent-Length: 4\r\nConnection: close\r\n\r\nnope";
        let buf = format!("{first}{second}");
        let Ok(Status::Complete(one)) = parse_response(buf.as_bytes(), false, false) else { panic!() };
        assert_eq!(one, head(200, true, BodyKind::Chunked, first.len()));
        let rest = &buf.as_bytes()[one.len..];
        let Ok(Status::Complete(two)) = parse_response(rest, false, false) else { panic!() };
        assert_eq!(two, head(404, false, BodyKind::Length(4), second.len()));
        assert_eq!(one.len + two.len, buf.len());
    }

    #[test]
    fn errors() {
        use ResponseError::*;
        let chunked = "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n";
        let cases: Vec<(&str, String, ResponseError)> = vec![
            ("HTTP/2", "HTTP/2 200 OK\r\n\r\n".into(), StatusLine),
            ("HTTP/2.0", "HTTP/2.0 200 OK\r\n\r\n".into(), StatusLine),
            ("lower-case version", "http/1.1 200 OK\r\n\r\n".into(), StatusLine),
            ("not HTTP, before the line ends", "SSH-2.0-OpenSSH".into(), StatusLine),
            ("two-digit status", "HTTP/1.1 20 OK\r\n\r\n".into(), StatusLine),
            ("four-digit status", "HTTP/1.1 2000 OK\r\n\r\n".into(), StatusLine),
            ("status below 100", "HTTP/1.1 099 OK\r\n\r\n".into(), StatusLine),
            ("no SP before reason", "HTTP/1.1 200OK\r\n\r\n".into(), StatusLine),
            ("two SP before status", "HTTP/1.1  200 OK\r\n\r\n".into(), StatusLine),
            ("control byte in reason", "HTTP/1.1 200 O\x01K\r\n\r\n".into(), StatusLine),
            ("empty status line", "\r\n\r\n".into(), StatusLine),
            ("no colon", "HTTP/1.1 200 OK\r\nBad Header\r\n\r\n".into(), Header),
            ("obs-fold", "HTTP/1.1 200 OK\r\nA: b\r\n c\r\n\r\n".into(), Header),
            ("space before colon", "HTTP/1.1 200 OK\r\nContent-Length : 1\r\n\r\nx".into(), Header),
            ("NUL in value", "HTTP/1.1 200 OK\r\nA: b\0c\r\n\r\n".into(), Header),
            (
                "Content-Length not digits",
                "HTTP/1.1 200 OK\r\nContent-Length: abc\r\n\r\n".into(),
                ContentLength,
            ),
            ("Content-Length signed", "HTTP/1.1 200 OK\r\nContent-Length: +1\r\n\r\nx".into(), ContentLength),
            ("Content-Length list", "HTTP/1.1 200 OK\r\nContent-Length: 1, 1\r\n\r\nx".into(), ContentLength),
            ("Content-Length empty", "HTTP/1.1 200 OK\r\nContent-Length:\r\n\r\n".into(), ContentLength),
            (
                "Content-Length conflict",
                "HTTP/1.1 200 OK\r\nContent-Length: 5\r\nContent-Length: 6\r\n\r\n".into(),
                ContentLength,
            ),
            (
                "Content-Length overflow",
                "HTTP/1.1 200 OK\r\nContent-Length: 18446744073709551616\r\n\r\n".into(),
                ContentLength,
            ),
            ("chunk size not hex", format!("{chunked}zz\r\n"), Chunk),
            ("chunk size not hex, partial", format!("{chunked}g"), Chunk),
            ("chunk size missing", format!("{chunked};ext\r\n"), Chunk),
            ("chunk size overflow", format!("{chunked}10000000000000000\r\n"), Chunk),
            ("chunk size overflow, partial", format!("{chunked}fffffffffffffffff"), Chunk),
            ("chunk ext without ;", format!("{chunked}5 x\r\nhello\r\n0\r\n\r\n"), Chunk),
            ("CR in chunk ext", format!("{chunked}5;a\rb\r\nhello\r\n0\r\n\r\n"), Chunk),
            ("chunk data too long", format!("{chunked}5\r\nhello!\r\n0\r\n\r\n"), Chunk),
            ("chunk data, CR without LF", format!("{chunked}5\r\nhello\rx"), Chunk),
            ("bad trailer", format!("{chunked}0\r\nno colon\r\n\r\n"), Header),
            ("head too large, no end", format!("HTTP/1.1 200 OK\r\nX: {}", "a".repeat(MAX_HEAD)), TooLarge),
            (
                "head too large, complete",
                format!("HTTP/1.1 200 OK\r\nX: {}\r\n\r\n", "a".repeat(MAX_HEAD)),
                TooLarge,
            ),
        ];
        for (name, text, expected) in cases {
            assert_eq!(parse_response(text.as_bytes(), false, true), Err(expected), "{name}");
        }
    }

    #[test]
    fn a_head_of_64_kib_is_accepted() {
        let start = "HTTP/1.1 200 OK\r\nX: ";
        let end = "\r\nContent-Length: 0\r\n\r\n";
        let text = format!("{start}{}{end}", "a".repeat(MAX_HEAD - start.len() - end.len()));
        assert_eq!(text.len(), MAX_HEAD);
        let expected = head(200, true, BodyKind::Length(0), MAX_HEAD);
        assert_eq!(parse_response(text.as_bytes(), false, false), Ok(Status::Complete(expected)));
    }

    #[test]
    fn a_huge_content_length_is_partial_not_an_overflow() {
        let buf = b"HTTP/1.1 200 OK\r\nContent-Length: 18446744073709551615\r\n\r\nabc";
        assert_eq!(parse_response(buf, false, true), Ok(Status::Partial));
        let buf = format!("HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n{:x}\r\nabc", u64::MAX);
        assert_eq!(parse_response(buf.as_bytes(), false, true), Ok(Status::Partial));
    }

    #[test]
    fn errors_display() {
        assert_eq!(ResponseError::Chunk.to_string(), "invalid chunked body");
        assert_eq!(ResponseError::TooLarge.to_string(), "response head too large");
    }

    mod properties {
        use super::super::*;
        use proptest::collection::vec;
        use proptest::prelude::*;

        proptest! {
            /// Any body cut into any chunks frames to its exact length, and no prefix of it
            /// is complete.
            #[test]
            fn chunked_bodies_frame_exactly(
                chunks in vec((vec(any::<u8>(), 1..40), any::<bool>()), 0..8)
            ) {
                let mut buf = b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n".to_vec();
                for (data, with_ext) in &chunks {
                    let ext = if *with_ext { "; name=\"v;al\"" } else { "" };
                    buf.extend_from_slice(format!("{:X}{ext}\r\n", data.len()).as_bytes());
                    buf.extend_from_slice(data);
                    buf.extend_from_slice(b"\r\n");
                }
                buf.extend_from_slice(b"0\r\nTrailer: t\r\n\r\n");
                let (status, keep_alive, body, len) = (200, true, BodyKind::Chunked, buf.len());
                let expected = ResponseHead { status, keep_alive, body, len };
                prop_assert_eq!(parse_response(&buf, false, false), Ok(Status::Complete(expected)));
                for split in 0..buf.len() {
                    prop_assert_eq!(parse_response(&buf[..split], false, false), Ok(Status::Partial));
                }
            }
        }
    }
}
