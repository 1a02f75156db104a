//! Properties of the parse and of the hello protocol over arbitrary input.

use percore::http::{
    parse, Framed, Hello, HelloConfig, Limits, Method, Progress, ResponseReader, Status, Stream,
};
use percore::reactor::{Harness, Then};
use proptest::prelude::*;
use std::time::{Duration, UNIX_EPOCH};

/// Feeds `chunks` to a `Hello` as the loop does: the unconsumed tail of each call is
/// handed in again with the next chunk (at once after a pause, the output being
/// taken); after a close verdict, input is ignored. Returns every byte written, its
/// `Date` at one fixed instant.
fn serve_in_chunks(chunks: &[&[u8]]) -> Vec<u8> {
    let mut harness = Harness::new(Hello::new(&HelloConfig::default()));
    harness.tick(UNIX_EPOCH + Duration::from_secs(1_800_000_000));
    let (mut pending, mut out) = (Vec::new(), Vec::new());
    for chunk in chunks {
        pending.extend_from_slice(chunk);
        loop {
            let verdict = harness.data(&pending);
            pending.drain(..verdict.consumed);
            out.extend(harness.take_output());
            match verdict.then {
                Then::Read => break,
                Then::Pause => continue,
                Then::Close => return out,
            }
        }
    }
    out
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

fn pipeline() -> impl Strategy<Value = Vec<u8>> {
    let requests = prop::collection::vec(prop::sample::select(REQUESTS), 1..20);
    (requests, prop::sample::select(ENDINGS)).prop_map(|(requests, ending)| {
        let mut bytes = requests.concat();
        bytes.extend_from_slice(ending);
        bytes
    })
}

/// A pipeline and sorted cut positions within it.
fn pipeline_and_cuts() -> impl Strategy<Value = (Vec<u8>, Vec<usize>)> {
    pipeline().prop_flat_map(|bytes| {
        let len = bytes.len();
        (Just(bytes), prop::collection::vec(0..=len, 0..12)).prop_map(|(bytes, mut cuts)| {
            cuts.sort_unstable();
            (bytes, cuts)
        })
    })
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
        Ok(Status::Complete(parsed)) => {
            parsed.head_len == request.len() && parsed.content_length == 0 && !parsed.chunked
        }
        Ok(Status::Partial) => false,
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
    fn arbitrary_bytes_never_panic_the_parse(bytes in prop::collection::vec(any::<u8>(), 0..600)) {
        let limits = Limits { request_line: 64, head: 256 };
        let _ = parse(&bytes, &limits);
        let mut progress = Progress::default();
        for end in [bytes.len() / 3, bytes.len() / 2, bytes.len()] {
            let _ = progress.parse(&bytes[..end], &limits);
        }
    }

    #[test]
    fn arbitrary_bytes_never_panic_the_protocol(chunks in prop::collection::vec(prop::collection::vec(any::<u8>(), 0..200), 1..6)) {
        let chunks: Vec<&[u8]> = chunks.iter().map(Vec::as_slice).collect();
        serve_in_chunks(&chunks);
    }

    #[test]
    fn any_split_of_a_pipeline_gets_the_same_answers((bytes, cuts) in pipeline_and_cuts()) {
        let whole = serve_in_chunks(&[&bytes]);
        let split = serve_in_chunks(&split_at(&bytes, &cuts));
        prop_assert_eq!(String::from_utf8_lossy(&split), String::from_utf8_lossy(&whole));
        prop_assert!(whole.starts_with(b"HTTP/1.1 "), "the first request was answered");
    }

    /// The server remembers the last head it parsed; heads that differ from it in one
    /// byte must still be parsed, not taken for it.
    #[test]
    fn a_remembered_request_head_answers_as_a_fresh_parse(
        requests in prop::collection::vec(near_copies().prop_filter("one whole request", |r| complete_in_itself(r)), 1..30)
    ) {
        let pipelined = serve_in_chunks(&[&requests.concat()]);
        let one_by_one: Vec<u8> = requests.iter().map(|request| serve_in_chunks(&[request])).collect::<Vec<_>>().concat();
        // Served one by one, each request gets a fresh server; the pipeline stops at
        // the first that closes.
        prop_assert!(one_by_one.starts_with(&pipelined), "{}\n---\n{}",
            String::from_utf8_lossy(&pipelined), String::from_utf8_lossy(&one_by_one));
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
            if !matches!(got, Ok(Framed { completed: Some(_), .. })) {
                // Within a response, or lost: the next buffer must start afresh.
                reader = ResponseReader::new(method);
            }
        }
    }
}
