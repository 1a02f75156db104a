//! Requests `percore serve` refuses, and the irregular ones it tolerates, as a
//! client sees them on the wire.

#[path = "../../tests/util/mod.rs"]
mod util;

use std::panic::{self, AssertUnwindSafe};
use std::thread;
use std::time::Duration;

use util::{date_of, Client, Method, Server, HELLO, OK};

const BAD: &str = "HTTP/1.1 400 Bad Request";
const NOT_ALLOWED: &str = "HTTP/1.1 405 Method Not Allowed";
const TOO_LARGE: &str = "HTTP/1.1 413 Content Too Large";
const URI_TOO_LONG: &str = "HTTP/1.1 414 URI Too Long";
const HEAD_TOO_LARGE: &str = "HTTP/1.1 431 Request Header Fields Too Large";
const NOT_IMPLEMENTED: &str = "HTTP/1.1 501 Not Implemented";
const VERSION: &str = "HTTP/1.1 505 HTTP Version Not Supported";

/// A valid request pipelined after each case. After a refusal it must get no
/// answer (the server never parses past a bad request); after a tolerated
/// request it must get its 200. It asks to close, so that EOF follows it.
const NEXT: &[u8] = b"GET /next HTTP/1.1\r\nHost: a\r\nConnection: close\r\n\r\n";

/// One request on a fresh connection and what it must get.
struct Case {
    name: &'static str,
    bytes: &'static [u8],
    status: &'static str,
}

const fn case(name: &'static str, bytes: &'static [u8], status: &'static str) -> Case {
    Case { name, bytes, status }
}

/// Requests refused with an error response and a close, at the default limits.
const REFUSED: &[Case] = &[
    // Framing the server will not guess at.
    case(
        "chunked",
        b"POST / HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\n",
        NOT_IMPLEMENTED,
    ),
    case(
        "chunked_get",
        b"GET / HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\n",
        NOT_IMPLEMENTED,
    ),
    case(
        "length_and_chunked",
        b"POST / HTTP/1.1\r\nHost: a\r\nContent-Length: 5\r\nTransfer-Encoding: chunked\r\n\r\nhello",
        BAD,
    ),
    case("te_gzip", b"POST / HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: gzip\r\n\r\n", BAD),
    case("length_not_a_number", b"GET / HTTP/1.1\r\nHost: a\r\nContent-Length: abc\r\n\r\n", BAD),
    case("length_negative", b"GET / HTTP/1.1\r\nHost: a\r\nContent-Length: -1\r\n\r\n", BAD),
    case(
        "length_overflow",
        b"GET / HTTP/1.1\r\nHost: a\r\nContent-Length: 99999999999999999999999\r\n\r\n",
        BAD,
    ),
    case(
        "length_conflict",
        b"GET / HTTP/1.1\r\nHost: a\r\nContent-Length: 5\r\nContent-Length: 6\r\n\r\nhello!",
        BAD,
    ),
    // The body is refused from its Content-Length alone, before any of it.
    case(
        "body_over_default_max",
        b"POST / HTTP/1.1\r\nHost: a\r\nContent-Length: 1048577\r\n\r\n",
        TOO_LARGE,
    ),
    // Header lines that break the grammar.
    case("obs_fold", b"GET / HTTP/1.1\r\nHost: a\r\nX-A: b\r\n c\r\n\r\n", BAD),
    case("space_before_colon", b"GET / HTTP/1.1\r\nHost: a\r\nX-A : b\r\n\r\n", BAD),
    case("no_colon", b"GET / HTTP/1.1\r\nHost: a\r\nX-A b\r\n\r\n", BAD),
    case("nul_in_name", b"GET / HTTP/1.1\r\nHost: a\r\nX\0A: b\r\n\r\n", BAD),
    case("control_in_name", b"GET / HTTP/1.1\r\nHost: a\r\nX\x01A: b\r\n\r\n", BAD),
    case("nul_in_value", b"GET / HTTP/1.1\r\nHost: a\r\nX-A: b\0c\r\n\r\n", BAD),
    case("cr_in_value", b"GET / HTTP/1.1\r\nHost: a\r\nX-A: b\rc\r\n\r\n", BAD),
    case("control_in_value", b"GET / HTTP/1.1\r\nHost: a\r\nX-A: b\x07c\r\n\r\n", BAD),
    case("control_in_target", b"GET /a\x01b HTTP/1.1\r\nHost: a\r\n\r\n", BAD),
    case("space_in_target", b"GET /a b HTTP/1.1\r\nHost: a\r\n\r\n", BAD),
    case("no_host", b"GET / HTTP/1.1\r\n\r\n", BAD),
    case("two_hosts", b"GET / HTTP/1.1\r\nHost: a\r\nHost: b\r\n\r\n", BAD),
    // Request lines that are not HTTP/1.x.
    case("method_not_a_token", b"G(T / HTTP/1.1\r\nHost: a\r\n\r\n", BAD),
    case("version_1x", b"GET / HTTP/1.x\r\nHost: a\r\n\r\n", BAD),
    case("version_lowercase", b"GET / http/1.1\r\nHost: a\r\n\r\n", BAD),
    case("http09", b"GET /\r\n", BAD),
    case("http2_request_line", b"GET / HTTP/2.0\r\nHost: a\r\n\r\n", VERSION),
    case("http2_preface", b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n", VERSION),
    // The start of a TLS ClientHello, as sent by `curl https://` to a plain port.
    case(
        "tls_client_hello",
        b"\x16\x03\x01\x02\x00\x01\x00\x01\xfc\x03\x03\xa7\x1e\x00\x00\x20\x13\x01",
        BAD,
    ),
];

/// Requests answered on a connection that stays open: the pipelined [`NEXT`]
/// after each must get its 200, which also proves any body was skipped
/// exactly (a body left unread would be parsed as the next request).
const TOLERATED: &[Case] = &[
    case("get_with_body", b"GET / HTTP/1.1\r\nHost: a\r\nContent-Length: 5\r\n\r\nhello", OK),
    case("head_with_body", b"HEAD / HTTP/1.1\r\nHost: a\r\nContent-Length: 5\r\n\r\nhello", OK),
    case("bare_lf", b"GET / HTTP/1.1\nHost: a\n\n", OK),
    case("leading_empty_line", b"\r\nGET / HTTP/1.1\r\nHost: a\r\n\r\n", OK),
    case("post_with_body", b"POST / HTTP/1.1\r\nHost: a\r\nContent-Length: 5\r\n\r\nhello", NOT_ALLOWED),
    case("put_with_body", b"PUT /x HTTP/1.1\r\nHost: a\r\nContent-Length: 3\r\n\r\nabc", NOT_ALLOWED),
    case("delete", b"DELETE /x HTTP/1.1\r\nHost: a\r\n\r\n", NOT_ALLOWED),
    case("unknown_method", b"FOO / HTTP/1.1\r\nHost: a\r\n\r\n", NOT_ALLOWED),
    // Methods are case-sensitive: `get` is a valid token, but not GET.
    case("lowercase_get", b"get / HTTP/1.1\r\nHost: a\r\n\r\n", NOT_ALLOWED),
];

/// Runs `check` on every case, then fails naming all the cases that failed,
/// so one run shows every broken case rather than the first.
fn for_each_case(cases: &[Case], check: impl Fn(&Case)) {
    let failed: Vec<&str> = cases
        .iter()
        .filter(|case| panic::catch_unwind(AssertUnwindSafe(|| check(case))).is_err())
        .map(|case| case.name)
        .collect();
    assert!(failed.is_empty(), "failed cases (their panics are printed above): {failed:?}");
}

/// Sends `bytes` then [`NEXT`] on a fresh connection, and asserts the answer is
/// exactly the error response `status` followed by EOF, with nothing for NEXT.
fn assert_refused(server: &Server, bytes: &[u8], status: &str) {
    let mut client = server.client();
    client.send(&[bytes, NEXT].concat());
    let response = client.read_response(Method::Get);
    let want = format!(
        "{status}\r\nServer: percore\r\nDate: {}\r\nContent-Type: text/plain\r\nContent-Length: {}\r\n\
         Connection: close\r\n\r\n",
        date_of(&response),
        response.body.len()
    );
    assert_eq!(String::from_utf8_lossy(&response.head), want);
    assert!(!response.body.is_empty(), "an error response has a short body: {response:?}");
    // Also proves Content-Length was exact: a longer body would show up here.
    client.expect_eof();
}

/// Sends `bytes` then [`NEXT`] on a fresh connection, asserts the answer to
/// `bytes` has `status` (read as the answer to `method`), then that NEXT gets
/// its 200 and the close it asked for.
fn assert_tolerated(server: &Server, bytes: &[u8], status: &str, method: Method) {
    let mut client = server.client();
    client.send(&[bytes, NEXT].concat());
    let response = client.read_response(method);
    assert_eq!(response.status_line, status, "{response:?}");
    date_of(&response);
    match status {
        OK if method == Method::Get => assert_eq!(response.body, HELLO, "{response:?}"),
        NOT_ALLOWED => assert_eq!(response.header("Allow"), Some("GET, HEAD"), "{response:?}"),
        _ => {}
    }
    // The connection stays open after a tolerated request.
    assert_eq!(response.header("Connection"), None, "{response:?}");
    assert_next_answered(&mut client);
}

/// Reads the answer to [`NEXT`], then the close it asked for.
fn assert_next_answered(client: &mut Client) {
    let next = client.read_response(Method::Get);
    assert_eq!((next.status_line.as_str(), next.body.as_slice()), (OK, HELLO), "{next:?}");
    client.expect_eof();
}

#[test]
fn refused_requests_get_an_exact_error_and_a_close() {
    let server = Server::percore(&[]);
    for_each_case(REFUSED, |case| assert_refused(&server, case.bytes, case.status));
}

#[test]
fn tolerated_requests_are_answered_and_the_next_one_too() {
    let server = Server::percore(&[]);
    for_each_case(TOLERATED, |case| {
        let method = if case.bytes.starts_with(b"HEAD") { Method::Head } else { Method::Get };
        assert_tolerated(&server, case.bytes, case.status, method);
    });
}

/// The size limits, given in bytes as on the command line.
struct Limits {
    request_line: usize,
    head: usize,
    body: usize,
}

/// `GET` of a `target_len`-byte target with headers adding up to about
/// `headers_len` bytes, and a `Content-Length` body of `body_len` bytes.
fn sized_request(target_len: usize, headers_len: usize, body_len: usize) -> Vec<u8> {
    let mut text =
        format!("GET /{} HTTP/1.1\r\nHost: a\r\nContent-Length: {body_len}\r\n", "t".repeat(target_len - 1));
    // Many short lines rather than one long one: the head limit is on the sum.
    for i in 0..headers_len / 32 {
        text += &format!("X-Pad-{i:05}: {}\r\n", "p".repeat(16));
    }
    text += "\r\n";
    let mut bytes = text.into_bytes();
    bytes.resize(bytes.len() + body_len, b'b');
    bytes
}

/// Just within each limit is answered; just over each is refused with its status.
fn check_size_limits(flags: &[&str], limits: Limits) {
    let server = Server::percore(flags);
    let within = [
        ("request line", sized_request(limits.request_line / 2, 0, 0)),
        ("head", sized_request(1, limits.head / 2, 0)),
        ("body", sized_request(1, 0, limits.body)),
    ];
    for (what, bytes) in within {
        eprintln!("{flags:?}: {what} within its limit");
        assert_tolerated(&server, &bytes, OK, Method::Get);
    }
    // Over by a margin, so the exact accounting (line ending or not) does not matter.
    let over = [
        ("request line", sized_request(limits.request_line + limits.request_line / 8, 0, 0), URI_TOO_LONG),
        ("head", sized_request(1, limits.head + limits.head / 4, 0), HEAD_TOO_LARGE),
        ("body", sized_request(1, 0, limits.body + 1), TOO_LARGE),
    ];
    for (what, bytes, status) in over {
        eprintln!("{flags:?}: {what} over its limit");
        assert_refused(&server, &bytes, status);
    }
}

#[test]
fn size_limits_from_flags() {
    let flags = ["--max-request-line", "64", "--max-header-bytes", "256", "--max-body", "1k"];
    check_size_limits(&flags, Limits { request_line: 64, head: 256, body: 1024 });
}

#[test]
fn size_limits_default() {
    // Over the request-line limit: a 9 KiB target; over the head limit: 40 KiB.
    check_size_limits(&[], Limits { request_line: 8 * 1024, head: 32 * 1024, body: 1024 * 1024 });
}

#[test]
fn body_arriving_in_pieces_is_skipped() {
    const BODY: usize = 100_000;
    const PIECES: usize = 10;
    let server = Server::percore(&[]);
    let mut client = server.client();
    client.send(format!("GET / HTTP/1.1\r\nHost: a\r\nContent-Length: {BODY}\r\n\r\n").as_bytes());
    for _ in 0..PIECES {
        client.send(&[b'b'; BODY / PIECES]);
        // Gives the server a chance to read each piece on its own; not a timing
        // assertion: any split of the body must give the same answers.
        thread::sleep(Duration::from_millis(20));
    }
    client.send(NEXT);
    let first = client.read_response(Method::Get);
    assert_eq!((first.status_line.as_str(), first.body.as_slice()), (OK, HELLO), "{first:?}");
    assert_next_answered(&mut client);
}
