//! Properties of the parse and of the hello protocol: over requests built from the
//! grammar (what the parse must find is known), over the same with a byte changed
//! (the resumable parse must agree with a fresh one), and over pipelines cut
//! anywhere (the same answers, one per request).

use percore::http::{
    parse, Framed, Hello, HelloConfig, Limits, Method, Parsed, Progress, Request, ResponseEvent,
    ResponseReader, Stream, Version,
};
use percore::reactor::Harness;
use proptest::prelude::*;
use std::time::{Duration, UNIX_EPOCH};

/// A fresh `Hello`, its `Date` at one fixed instant.
fn hello() -> Harness<Hello> {
    let mut harness = Harness::new(Hello::new(&HelloConfig::default()));
    harness.tick(UNIX_EPOCH + Duration::from_secs(1_800_000_000));
    harness
}

/// Every byte a `Hello` writes given `chunks` as a connection's reads, handed in
/// as the loop hands them (what a read leaves unconsumed comes again with the next;
/// after a close nothing more is read).
fn serve_in_chunks(chunks: &[&[u8]]) -> Vec<u8> {
    let mut harness = hello();
    let mut out = Vec::new();
    for chunk in chunks {
        harness.receive(chunk);
        out.extend(harness.take_output());
    }
    out
}

/// What a fresh `Hello` writes given `request` as a connection's one read (its
/// pauses resumed as the loop does), and whether it closes the connection after.
fn serve_alone(request: &[u8]) -> (Vec<u8>, bool) {
    let mut harness = hello();
    harness.receive(request);
    let out = harness.take_output();
    (out, harness.is_closing(harness.id()))
}

/// A request head built from the grammar of RFC 9112, and what its parse must find.
#[derive(Clone, Debug)]
struct Built {
    bytes: Vec<u8>,
    method: Method,
    target: Vec<u8>,
    version: Version,
    keep_alive: bool,
    content_length: u64,
    host: Option<Vec<u8>>,
    /// The field lines' names and values, in order, without white space around them.
    fields: Vec<(String, String)>,
}

/// What a parse found, with the header fields in order: the view a test compares.
type Found<'a> = (
    Method,
    &'a [u8],
    Version,
    bool,
    u64,
    bool,
    Option<&'a [u8]>,
    usize,
    Vec<(&'a [u8], &'a [u8])>,
    &'a [u8],
);

fn found<'a>(request: &Request<'a>) -> Found<'a> {
    let Request { method, target, version, keep_alive, content_length, chunked, host, head_len, .. } =
        *request;
    let headers = request.headers().collect();
    (
        method,
        target,
        version,
        keep_alive,
        content_length,
        chunked,
        host,
        head_len,
        headers,
        request.as_bytes(),
    )
}

impl Built {
    /// What the parse of this head must find.
    fn expected(&self) -> Found<'_> {
        let headers = self.fields.iter().map(|(name, value)| (name.as_bytes(), value.as_bytes())).collect();
        let (method, target, host) = (self.method, &self.target[..], self.host.as_deref());
        let length = self.bytes.len();
        (
            method,
            target,
            self.version,
            self.keep_alive,
            self.content_length,
            false,
            host,
            length,
            headers,
            &self.bytes[..],
        )
    }
}

/// `method SP request-target SP HTTP-version`, then field lines (Host, Connection,
/// Content-Length and others, in any order, with optional white space), each line
/// ended by CRLF or a bare LF, then the empty line.
fn built_request() -> impl Strategy<Value = Built> {
    let method = prop::sample::select(
        &["GET", "HEAD", "POST", "DELETE", "OPTIONS", "M-SEARCH", "x!#$%&'*+.^_`|~"][..],
    );
    let target = "/[a-zA-Z0-9/?=&%._~-]{0,24}";
    let version = prop::sample::select(&[Version::Http11, Version::Http10][..]);
    let host =
        prop::option::of(prop::sample::select(&["a", "localhost:8080", "example.com", "[::1]:80"][..]));
    let connection = prop::option::of(prop::sample::select(
        &["close", "keep-alive", "Keep-Alive, Upgrade", "upgrade", "CLOSE", "keep-alive, close"][..],
    ));
    let length = prop::option::of(0..2000u64);
    let others = prop::collection::vec(
        (prop::sample::select(&["User-Agent", "Accept", "X-A", "Cookie", "content-type"][..]), "[ -~]{0,30}"),
        0..5,
    );
    let ows = prop::sample::select(&["", " ", "  ", "\t"][..]);
    let crlf = prop::collection::vec(any::<bool>(), 12);
    (method, target, version, host, connection, length, others, ows, crlf, any::<prop::sample::Index>())
        .prop_map(|(method, target, version, host, connection, length, others, ows, crlf, at)| {
            // HTTP/1.1 requires a Host (else 400); keep the grammar's requests valid.
            let host = host.or((version == Version::Http11).then_some("a"));
            let mut fields: Vec<(String, String)> = others
                .into_iter()
                .map(|(name, value)| (name.to_string(), value.trim().to_string()))
                .collect();
            let known = [("Host", host), ("Connection", connection)].into_iter();
            let known = known.filter_map(|(name, value)| Some((name.to_string(), value?.to_string())));
            let length_field = length.map(|n| ("Content-Length".to_string(), n.to_string()));
            for (i, field) in known.chain(length_field).enumerate() {
                let at = (at.index(fields.len() + 1) + i).min(fields.len());
                fields.insert(at, field);
            }
            let line_end = |i: usize| if crlf[i % crlf.len()] { "\r\n" } else { "\n" };
            let version_text = if version == Version::Http11 { "HTTP/1.1" } else { "HTTP/1.0" };
            let mut text = format!("{method} {target} {version_text}{}", line_end(0));
            for (i, (name, value)) in fields.iter().enumerate() {
                text += &format!("{name}:{ows}{value}{ows}{}", line_end(i + 1));
            }
            text += line_end(fields.len() + 1);
            let (close, keep) = connection.map_or((false, false), |value| {
                let options: Vec<String> = value.split(',').map(|o| o.trim().to_ascii_lowercase()).collect();
                (options.iter().any(|o| o == "close"), options.iter().any(|o| o == "keep-alive"))
            });
            Built {
                bytes: text.into_bytes(),
                method: match method {
                    "GET" => Method::Get,
                    "HEAD" => Method::Head,
                    "POST" => Method::Post,
                    "DELETE" => Method::Delete,
                    "OPTIONS" => Method::Options,
                    _ => Method::Other,
                },
                target: target.into_bytes(),
                version,
                keep_alive: match version {
                    Version::Http11 => !close,
                    Version::Http10 => keep && !close,
                },
                content_length: length.unwrap_or(0),
                host: host.map(|h| h.as_bytes().to_vec()),
                fields,
            }
        })
}

/// A built request head, or the same with one byte changed, inserted or removed
/// anywhere (so the parse is tried past the method token: in the target, the version,
/// a name, a value, a line end), or cut short.
fn mutated_request() -> impl Strategy<Value = Vec<u8>> {
    let byte = prop::sample::select(&b" :\r\n\t\x00\x7f\x80/aZ09-,"[..]);
    (built_request(), any::<prop::sample::Index>(), byte, 0..5u8).prop_map(|(built, at, byte, how)| {
        let mut bytes = built.bytes;
        let at = at.index(bytes.len());
        match how {
            0 => {}
            1 => bytes[at] = byte,
            2 => bytes.insert(at, byte),
            3 => {
                bytes.remove(at);
            }
            _ => bytes.truncate(at),
        }
        bytes
    })
}

/// Limits the built requests reach now and then, and the defaults they never do.
fn limits() -> impl Strategy<Value = Limits> {
    prop::sample::select(vec![Limits { request_line: 40, head: 160 }, Limits::default()])
}

/// Requests a pipeline may hold, each complete and each leaving the connection open.
const REQUESTS: &[&[u8]] = &[
    b"GET / HTTP/1.1\r\nHost: a\r\n\r\n",
    b"HEAD /h HTTP/1.1\r\nHost: a\r\nUser-Agent: proptest\r\n\r\n",
    b"GET /q?x=1 HTTP/1.0\r\nConnection: keep-alive\r\n\r\n",
    b"POST /form HTTP/1.1\r\nHost: a\r\nContent-Length: 5\r\n\r\nhello",
    b"GET /body HTTP/1.1\r\nHost: a\r\nContent-Length: 3\r\n\r\nabc",
    b"\r\nGET /lf HTTP/1.1\nHost: a\n\n",
];

/// The last request: one that closes, one with a framing error, or none.
const ENDINGS: &[&[u8]] = &[
    b"",
    b"GET /last HTTP/1.1\r\nHost: a\r\nConnection: close\r\n\r\n",
    b"GET /bad HTTP/1.1\r\nHost: a\r\nContent-Length: x\r\n\r\nGET / HTTP/1.1\r\nHost: a\r\n\r\n",
];

/// A pipeline of [`REQUESTS`] and one of [`ENDINGS`], and how many answers it gets:
/// one per request, the ending's included (the refused one gets its 400).
fn pipeline() -> impl Strategy<Value = (Vec<u8>, usize)> {
    let requests = prop::collection::vec(prop::sample::select(REQUESTS), 1..20);
    (requests, prop::sample::select(ENDINGS)).prop_map(|(requests, ending)| {
        let answers = requests.len() + usize::from(!ending.is_empty());
        let mut bytes = requests.concat();
        bytes.extend_from_slice(ending);
        (bytes, answers)
    })
}

/// A pipeline, sorted cut positions within it, and how many answers it gets.
fn pipeline_and_cuts() -> impl Strategy<Value = (Vec<u8>, Vec<usize>, usize)> {
    pipeline().prop_flat_map(|(bytes, answers)| {
        let len = bytes.len();
        (Just(bytes), prop::collection::vec(0..=len, 0..12)).prop_map(move |(bytes, mut cuts)| {
            cuts.sort_unstable();
            (bytes, cuts, answers)
        })
    })
}

/// How many responses `output` holds: each starts with its status line, and no body
/// the hello server sends holds one.
fn answers(output: &[u8]) -> usize {
    output.windows(9).filter(|w| w == b"HTTP/1.1 ").count()
}

fn split_at<'a>(bytes: &'a [u8], cuts: &[usize]) -> Vec<&'a [u8]> {
    let mut chunks = Vec::new();
    let mut start = 0;
    for &cut in cuts.iter().chain(std::iter::once(&bytes.len())) {
        chunks.push(&bytes[start..cut]);
        start = cut;
    }
    chunks
}

/// A request head, or one that differs from it in one byte (its method, version,
/// a header name or value), or with a byte more or less.
fn near_copies() -> impl Strategy<Value = Vec<u8>> {
    const BASE: &[u8] = b"GET / HTTP/1.1\r\nHost: a\r\nContent-Length: 0\r\n\r\n";
    (any::<prop::sample::Index>(), prop::sample::select(&b"GHPT01cCkx: \r\n9"[..]), 0..4u8).prop_map(
        |(at, byte, how)| {
            let mut bytes = BASE.to_vec();
            let at = at.index(bytes.len());
            match how {
                0 => {}
                1 => bytes[at] = byte,
                2 => bytes.insert(at, byte),
                _ => {
                    bytes.remove(at);
                }
            }
            bytes
        },
    )
}

/// Whether `request` is one whole request with no body (or refused): then a
/// pipeline of such is the same requests, one after the other.
fn complete_in_itself(request: &[u8]) -> bool {
    match parse(request, &Limits::default()) {
        Ok(Parsed::Complete(parsed)) => {
            parsed.head_len == request.len() && parsed.content_length == 0 && !parsed.chunked
        }
        Ok(Parsed::Partial) => false,
        Err(_) => true,
    }
}

/// Responses whose heads differ from one another in a byte or a few: the same head
/// with another length, connection option, status, version or line ending.
const RESPONSES: &[&str] = &[
    "HTTP/1.1 200 OK\r\nDate: Mon, 30 Nov 2026 12:00:00 GMT\r\nContent-Length: 5\r\n\r\nhello",
    "HTTP/1.1 200 OK\r\nDate: Mon, 30 Nov 2026 12:00:01 GMT\r\nContent-Length: 5\r\n\r\nhello",
    "HTTP/1.1 200 OK\r\nDate: Mon, 30 Nov 2026 12:00:00 GMT\r\nContent-Length: 50\r\n\r\nhello",
    "HTTP/1.1 200 OK\r\nDate: Mon, 30 Nov 2026 12:00:00 GMT\r\nContent-Length: 5\r\nConnection: close\r\n\r\nhello",
    "HTTP/1.0 200 OK\r\nDate: Mon, 30 Nov 2026 12:00:00 GMT\r\nContent-Length: 5\r\n\r\nhello",
    "HTTP/1.1 204 OK\r\nDate: Mon, 30 Nov 2026 12:00:00 GMT\r\nContent-Length: 5\r\n\r\n",
    "HTTP/1.1 200 OK\r\nDate: Mon, 30 Nov 2026 12:00:00 GMT\r\nTransfer-Encoding: chunked\r\n\r\n5\r\nhello\r\n0\r\n\r\n",
    "HTTP/1.1 200 OK\r\nDate: Mon, 30 Nov 2026 12:00:00 GMT\r\n\r\nuntil the end",
    "HTTP/1.1 200 OK\nDate: Mon, 30 Nov 2026 12:00:00 GMT\nContent-Length: 5\n\nhello",
];

/// A sequence of buffers as a load generator's connection sees them: responses from
/// [`RESPONSES`], some with a byte changed (a line end among them), cut anywhere or
/// followed by the next one.
fn response_buffers() -> impl Strategy<Value = Vec<(Vec<u8>, bool)>> {
    let buffer = (
        0..RESPONSES.len(),
        0..RESPONSES.len(),
        any::<prop::sample::Index>(),
        any::<u8>(),
        any::<prop::sample::Index>(),
        any::<bool>(),
    )
        .prop_map(|(first, second, at, byte, cut, at_eof)| {
            let mut bytes = [RESPONSES[first], RESPONSES[second]].concat().into_bytes();
            if byte.is_ascii_graphic() || byte == b'\r' || byte == b'\n' {
                bytes[at.index(RESPONSES[first].len())] = byte;
            }
            bytes.truncate(cut.index(bytes.len() + 1));
            (bytes, at_eof)
        });
    prop::collection::vec(buffer, 1..12)
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 2000, ..ProptestConfig::default() })]

    #[test]
    fn a_request_built_from_the_grammar_parses_to_what_was_built(built in built_request()) {
        let parsed = parse(&built.bytes, &Limits::default());
        let found = match parsed {
            Ok(Parsed::Complete(request)) => found(&request),
            other => panic!("{:?}: parsed as {other:?}", String::from_utf8_lossy(&built.bytes)),
        };
        prop_assert_eq!(found, built.expected(), "{:?}", String::from_utf8_lossy(&built.bytes));
    }

    /// Fed the head in pieces, each call with all that arrived so far, the resumable
    /// parse says what a fresh parse of the same bytes says, at every piece.
    #[test]
    fn the_resumable_parse_agrees_with_a_fresh_one_at_every_piece(
        bytes in mutated_request(),
        cuts in prop::collection::vec(any::<prop::sample::Index>(), 0..8),
        limits in limits(),
    ) {
        let mut ends: Vec<usize> = cuts.iter().map(|cut| cut.index(bytes.len() + 1)).collect();
        ends.sort_unstable();
        ends.push(bytes.len());
        let mut progress = Progress::default();
        for end in ends {
            let resumed = progress.parse(&bytes[..end], &limits);
            let fresh = parse(&bytes[..end], &limits);
            prop_assert_eq!(resumed, fresh, "{} of {:?}", end, String::from_utf8_lossy(&bytes));
            if resumed != Ok(Parsed::Partial) {
                // Done with this request: a new one would start after it.
                break;
            }
        }
    }

    #[test]
    fn any_split_of_a_pipeline_gets_the_same_answers_one_per_request((bytes, cuts, requests) in pipeline_and_cuts()) {
        let whole = serve_in_chunks(&[&bytes]);
        let split = serve_in_chunks(&split_at(&bytes, &cuts));
        prop_assert_eq!(String::from_utf8_lossy(&split), String::from_utf8_lossy(&whole));
        prop_assert_eq!(answers(&whole), requests, "{}", String::from_utf8_lossy(&whole));
    }

    /// Requests built from the grammar, some with a byte changed, pipelined with their
    /// bodies and cut anywhere: the same answers as whole; when none was changed, one
    /// answer per request up to the first that closes.
    #[test]
    fn any_split_of_a_built_pipeline_gets_the_same_answers(
        requests in prop::collection::vec((built_request(), mutated_request(), any::<bool>()), 1..8),
        cuts in prop::collection::vec(any::<prop::sample::Index>(), 0..12),
    ) {
        let mut bytes = Vec::new();
        let mut expected = Some(0);
        let mut closed = false;
        for (built, mutated, mutate) in &requests {
            if *mutate {
                bytes.extend_from_slice(mutated);
                expected = None;
                continue;
            }
            bytes.extend_from_slice(&built.bytes);
            bytes.extend(std::iter::repeat_n(b'x', built.content_length as usize));
            if let (Some(count), false) = (expected.as_mut(), closed) {
                *count += 1;
                closed = !built.keep_alive;
            }
        }
        let mut ends: Vec<usize> = cuts.iter().map(|cut| cut.index(bytes.len() + 1)).collect();
        ends.sort_unstable();
        let whole = serve_in_chunks(&[&bytes]);
        let split = serve_in_chunks(&split_at(&bytes, &ends));
        prop_assert_eq!(String::from_utf8_lossy(&split), String::from_utf8_lossy(&whole));
        if let Some(count) = expected {
            prop_assert_eq!(answers(&whole), count, "{}", String::from_utf8_lossy(&bytes));
        }
    }

    /// The server remembers the last head it parsed; heads that differ from it in one
    /// byte must still be parsed, not taken for it.
    #[test]
    fn a_remembered_request_head_answers_as_a_fresh_parse(
        requests in prop::collection::vec(near_copies().prop_filter("one whole request", |r| complete_in_itself(r)), 1..30)
    ) {
        let pipelined = serve_in_chunks(&[&requests.concat()]);
        // Served one by one, each request gets a fresh server; the pipeline answers
        // them all in turn, up to and including the first that closes.
        let mut one_by_one = Vec::new();
        for request in &requests {
            let (answer, closed) = serve_alone(request);
            one_by_one.extend(answer);
            if closed {
                break;
            }
        }
        prop_assert_eq!(String::from_utf8_lossy(&pipelined), String::from_utf8_lossy(&one_by_one));
    }

    #[test]
    fn a_remembered_head_frames_responses_as_a_fresh_reader(buffers in response_buffers(), head_request in any::<bool>()) {
        let method = if head_request { Method::Head } else { Method::Get };
        let mut reader = ResponseReader::new(method);
        for (bytes, at_eof) in &buffers {
            let stream = if *at_eof { Stream::Ended } else { Stream::Open };
            let got = reader.read(bytes, stream);
            let fresh = ResponseReader::new(method).read(bytes, stream);
            prop_assert_eq!(got, fresh, "{:?}", String::from_utf8_lossy(bytes));
            if !matches!(got, Ok(Framed { event: ResponseEvent::Head { ended: true, .. }, .. })) {
                // Within a response, or lost: the next buffer must start afresh.
                reader = ResponseReader::new(method);
            }
        }
    }
}
