//! The request parse, on byte slices: valid requests, every prefix, every split.

use percore::http::{parse, Error, Limits, Method, Parsed, Progress, Request, Version};

fn complete(buf: &[u8]) -> Request<'_> {
    match parse(buf, &Limits::default()) {
        Ok(Parsed::Complete(request)) => request,
        other => panic!("{:?}: expected a complete request, got {other:?}", String::from_utf8_lossy(buf)),
    }
}

fn error(buf: &[u8]) -> Error {
    match parse(buf, &Limits::default()) {
        Err(e) => e,
        other => panic!("{:?}: expected an error, got {other:?}", String::from_utf8_lossy(buf)),
    }
}

#[test]
fn header_fields_come_in_order_as_sent_without_white_space_around_values() {
    let buf = b"\r\nGET / HTTP/1.1\r\nHost: a\r\nX-Forwarded-For:\t10.0.0.1 \r\nx-forwarded-for: 10.0.0.2\nEmpty:\r\n\r\nbody";
    let request = complete(&buf[..buf.len() - 4]);
    let headers: Vec<_> = request.headers().collect();
    let expected: [(&[u8], &[u8]); 4] = [
        (b"Host", b"a"),
        (b"X-Forwarded-For", b"10.0.0.1"),
        (b"x-forwarded-for", b"10.0.0.2"),
        (b"Empty", b""),
    ];
    assert_eq!(headers, expected);
    // The head without the empty line allowed before it, to its own empty line.
    assert_eq!(request.as_bytes(), &buf[2..buf.len() - 4]);
    assert_eq!(request.head_len, buf.len() - 4);
    assert_eq!(request.method_bytes(), b"GET");
    let other = complete(b"PROPFIND /d HTTP/1.1\r\nHost: a\r\n\r\n");
    assert_eq!((other.method, other.method_bytes()), (Method::Other, &b"PROPFIND"[..]));
    let bare = complete(b"GET / HTTP/1.0\r\n\r\n");
    assert_eq!(bare.headers().count(), 0);
}

/// One line per valid request: the bytes, then what the parse must report.
macro_rules! valid {
    ($($name:ident: $buf:expr => $method:ident $target:literal $version:ident keep=$keep:literal len=$len:literal host=$host:expr;)*) => {
        $(
            #[test]
            fn $name() {
                let buf: &[u8] = $buf;
                let request = complete(buf);
                assert_eq!(request.method, Method::$method);
                assert_eq!(request.target, $target.as_bytes());
                assert_eq!(request.version, Version::$version);
                assert_eq!(request.keep_alive, $keep, "keep-alive");
                assert_eq!(request.content_length, $len);
                assert_eq!(request.host, $host.map(str::as_bytes));
                assert_eq!(request.head_len, buf.len(), "the head is all of the buffer");
            }
        )*
    };
}

valid! {
    get_11: b"GET / HTTP/1.1\r\nHost: a\r\n\r\n" => Get "/" Http11 keep=true len=0 host=Some("a");
    head_11: b"HEAD /x?y=1 HTTP/1.1\r\nHost: a\r\n\r\n" => Head "/x?y=1" Http11 keep=true len=0 host=Some("a");
    other_method: b"PURGE /p HTTP/1.1\r\nHost: a\r\n\r\n" => Other "/p" Http11 keep=true len=0 host=Some("a");
    post: b"POST /f HTTP/1.1\r\nHost: a\r\nContent-Length: 3\r\n\r\n" => Post "/f" Http11 keep=true len=3 host=Some("a");
    put: b"PUT /f HTTP/1.1\r\nHost: a\r\n\r\n" => Put "/f" Http11 keep=true len=0 host=Some("a");
    delete: b"DELETE /f HTTP/1.1\r\nHost: a\r\n\r\n" => Delete "/f" Http11 keep=true len=0 host=Some("a");
    connect: b"CONNECT a:443 HTTP/1.1\r\nHost: a:443\r\n\r\n" => Connect "a:443" Http11 keep=true len=0 host=Some("a:443");
    options: b"OPTIONS * HTTP/1.1\r\nHost: a\r\n\r\n" => Options "*" Http11 keep=true len=0 host=Some("a");
    trace: b"TRACE / HTTP/1.1\r\nHost: a\r\n\r\n" => Trace "/" Http11 keep=true len=0 host=Some("a");
    patch: b"PATCH /f HTTP/1.1\r\nHost: a\r\n\r\n" => Patch "/f" Http11 keep=true len=0 host=Some("a");
    lowercase_post_is_another_method: b"post / HTTP/1.1\r\nHost: a\r\n\r\n" => Other "/" Http11 keep=true len=0 host=Some("a");
    lowercase_method_is_a_token: b"get / HTTP/1.1\r\nHost: a\r\n\r\n" => Other "/" Http11 keep=true len=0 host=Some("a");
    close_11: b"GET / HTTP/1.1\r\nHost: a\r\nConnection: close\r\n\r\n" => Get "/" Http11 keep=false len=0 host=Some("a");
    close_in_a_list: b"GET / HTTP/1.1\r\nHost: a\r\nconnection: Upgrade, CLOSE\r\n\r\n" => Get "/" Http11 keep=false len=0 host=Some("a");
    http10_closes: b"GET / HTTP/1.0\r\n\r\n" => Get "/" Http10 keep=false len=0 host=None;
    http10_keep_alive: b"GET / HTTP/1.0\r\nConnection: Keep-Alive\r\n\r\n" => Get "/" Http10 keep=true len=0 host=None;
    http12_is_answered_as_11: b"GET / HTTP/1.2\r\nHost: a\r\n\r\n" => Get "/" Http11 keep=true len=0 host=Some("a");
    content_length: b"GET / HTTP/1.1\r\nHost: a\r\nContent-Length: 42\r\n\r\n" => Get "/" Http11 keep=true len=42 host=Some("a");
    same_length_twice: b"GET / HTTP/1.1\r\nHost: a\r\nContent-Length: 5\r\ncontent-length: 5\r\n\r\n" => Get "/" Http11 keep=true len=5 host=Some("a");
    bare_lf: b"GET / HTTP/1.1\nHost: a\n\n" => Get "/" Http11 keep=true len=0 host=Some("a");
    leading_empty_line: b"\r\nGET / HTTP/1.1\r\nHost: a\r\n\r\n" => Get "/" Http11 keep=true len=0 host=Some("a");
    leading_bare_lf: b"\nGET / HTTP/1.1\r\nHost: a\r\n\r\n" => Get "/" Http11 keep=true len=0 host=Some("a");
    ows_is_trimmed: b"GET / HTTP/1.1\r\nHost:  \t a.example \t\r\n\r\n" => Get "/" Http11 keep=true len=0 host=Some("a.example");
    ipv6_host_and_port: b"GET / HTTP/1.1\r\nHost: [::1]:8080\r\n\r\n" => Get "/" Http11 keep=true len=0 host=Some("[::1]:8080");
    empty_host: b"GET / HTTP/1.1\r\nHost:\r\n\r\n" => Get "/" Http11 keep=true len=0 host=Some("");
    empty_value: b"GET / HTTP/1.1\r\nHost: a\r\nX-Empty:\r\n\r\n" => Get "/" Http11 keep=true len=0 host=Some("a");
    obs_text_in_value: b"GET / HTTP/1.1\r\nHost: a\r\nX: caf\xc3\xa9\r\n\r\n" => Get "/" Http11 keep=true len=0 host=Some("a");
}

/// A request as a browser sends it, about 700 bytes of headers (shared with the
/// parse benchmark).
const BROWSER: &[u8] = include_bytes!("data/browser.http");

#[test]
fn a_browser_request_parses() {
    let request = complete(BROWSER);
    assert_eq!(request.target, b"/index.html?q=percore");
    assert_eq!(request.host, Some(&b"www.example.com"[..]));
    assert!(request.keep_alive);
}

#[test]
fn every_proper_prefix_is_partial() {
    let leading_crlf = b"\r\nGET / HTTP/1.1\r\nHost: a\r\n\r\n";
    for full in [&b"GET / HTTP/1.1\r\nHost: a\r\nContent-Length: 3\r\n\r\n"[..], leading_crlf, BROWSER] {
        for end in 0..full.len() {
            assert_eq!(
                parse(&full[..end], &Limits::default()),
                Ok(Parsed::Partial),
                "prefix of {end} bytes of {:?}",
                String::from_utf8_lossy(full)
            );
        }
    }
}

#[test]
fn a_request_split_at_every_position_parses_the_same() {
    let whole = complete(BROWSER);
    for split in 0..BROWSER.len() {
        let mut progress = Progress::default();
        let limits = Limits::default();
        assert_eq!(progress.parse(&BROWSER[..split], &limits), Ok(Parsed::Partial), "split at {split}");
        assert_eq!(progress.parse(BROWSER, &limits), Ok(Parsed::Complete(whole)), "split at {split}");
    }
}

#[test]
fn a_request_arriving_byte_by_byte_parses_the_same() {
    let mut progress = Progress::default();
    let limits = Limits::default();
    for end in 1..BROWSER.len() {
        assert_eq!(progress.parse(&BROWSER[..end], &limits), Ok(Parsed::Partial));
    }
    assert_eq!(progress.parse(BROWSER, &limits), Ok(Parsed::Complete(complete(BROWSER))));
}

#[test]
fn only_the_first_request_of_a_pipeline_is_parsed() {
    let two = b"GET /1 HTTP/1.1\r\nHost: a\r\n\r\nGET /2 HTTP/1.1\r\nHost: a\r\n\r\n";
    let first = complete(two);
    assert_eq!(first.target, b"/1");
    assert_eq!(complete(&two[first.head_len..]).target, b"/2");
}

/// One line per refused request: the bytes, then the error.
macro_rules! invalid {
    ($($name:ident: $buf:expr => $error:ident;)*) => {
        $(
            #[test]
            fn $name() {
                assert_eq!(error($buf), Error::$error);
            }
        )*
    };
}

invalid! {
    method_not_a_token: b"G(T / HTTP/1.1\r\nHost: a\r\n\r\n" => Method;
    binary_garbage_fails_before_the_head_ends: b"\x16\x03\x01\x02\x00\x01\x00\x01\xfc\x03\x03" => Method;
    http09_request_line: b"GET /\r\n\r\n" => Version;
    http0_version: b"GET / HTTP/0.9\r\nHost: a\r\n\r\n" => Version;
    empty_method: b" / HTTP/1.1\r\nHost: a\r\n\r\n" => Method;
    lowercase_version: b"GET / http/1.1\r\nHost: a\r\n\r\n" => Version;
    version_with_junk: b"GET / HTTP/1.1x\r\nHost: a\r\n\r\n" => Version;
    http2_preface: b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n" => UnsupportedVersion;
    control_byte_in_target: b"GET /a\x01b HTTP/1.1\r\nHost: a\r\n\r\n" => Target;
    two_spaces_in_request_line: b"GET  / HTTP/1.1\r\nHost: a\r\n\r\n" => Target;
    obs_fold: b"GET / HTTP/1.1\r\nHost: a\r\nX: 1\r\n  2\r\n\r\n" => Header;
    space_before_colon: b"GET / HTTP/1.1\r\nHost : a\r\n\r\n" => Header;
    no_colon: b"GET / HTTP/1.1\r\nHost: a\r\nNoColon\r\n\r\n" => Header;
    nul_in_value: b"GET / HTTP/1.1\r\nHost: a\r\nX: a\x00b\r\n\r\n" => Header;
    cr_in_value: b"GET / HTTP/1.1\r\nHost: a\r\nX: a\rb\r\n\r\n" => Header;
    control_in_name: b"GET / HTTP/1.1\r\nHost: a\r\nX\x01Y: 1\r\n\r\n" => Header;
    missing_host: b"GET / HTTP/1.1\r\n\r\n" => Host;
    two_hosts: b"GET / HTTP/1.1\r\nHost: a\r\nHost: b\r\n\r\n" => Host;
    host_with_a_space: b"GET / HTTP/1.1\r\nHost: a b\r\n\r\n" => Host;
    host_with_a_slash: b"GET / HTTP/1.1\r\nHost: a/b\r\n\r\n" => Host;
    negative_length: b"GET / HTTP/1.1\r\nHost: a\r\nContent-Length: -1\r\n\r\n" => ContentLength;
    overflowing_length: b"GET / HTTP/1.1\r\nHost: a\r\nContent-Length: 18446744073709551616\r\n\r\n" => ContentLength;
    conflicting_lengths: b"GET / HTTP/1.1\r\nHost: a\r\nContent-Length: 1\r\nContent-Length: 2\r\n\r\n" => ContentLength;
    length_list: b"GET / HTTP/1.1\r\nHost: a\r\nContent-Length: 1, 1\r\n\r\n" => ContentLength;
    length_and_chunked: b"POST / HTTP/1.1\r\nHost: a\r\nContent-Length: 1\r\nTransfer-Encoding: chunked\r\n\r\n" => TransferEncoding;
    gzip_encoding: b"POST / HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: gzip\r\n\r\n" => TransferEncoding;
    chunked_on_http10: b"POST / HTTP/1.0\r\nTransfer-Encoding: chunked\r\n\r\n" => TransferEncoding;
}

#[test]
fn limits_map_to_their_statuses() {
    let limits = Limits { request_line: 32, head: 64 };
    let long_line = format!("GET /{} HTTP/1.1\r\nHost: a\r\n\r\n", "a".repeat(40));
    assert_eq!(parse(long_line.as_bytes(), &limits), Err(Error::RequestLineTooLong));
    assert_eq!(parse(&long_line.as_bytes()[..40], &limits), Err(Error::RequestLineTooLong), "before it ends");
    let big_head = format!("GET / HTTP/1.1\r\nHost: a\r\nX: {}\r\n\r\n", "b".repeat(60));
    assert_eq!(parse(big_head.as_bytes(), &limits), Err(Error::HeadTooLarge));
    assert_eq!(parse(&big_head.as_bytes()[..70], &limits), Err(Error::HeadTooLarge), "before it ends");
    assert_eq!(Error::RequestLineTooLong.status(), 414);
    assert_eq!(Error::HeadTooLarge.status(), 431);
    assert_eq!(Error::UnsupportedVersion.status(), 505);
    assert_eq!(Error::Header.status(), 400);
}

#[test]
fn a_request_line_and_a_head_exactly_at_their_limits_are_taken() {
    let request = b"GET /abcdef HTTP/1.1\r\nHost: a\r\n\r\n";
    let line = request.iter().position(|&b| b == b'\r').unwrap();
    let exact = Limits { request_line: line, head: request.len() };
    assert!(matches!(parse(request, &exact), Ok(Parsed::Complete(_))));
    assert_eq!(
        parse(&request[..line], &exact),
        Ok(Parsed::Partial),
        "the line at the limit, its end not yet in"
    );
    let line_over = Limits { request_line: line - 1, ..exact };
    assert_eq!(parse(request, &line_over), Err(Error::RequestLineTooLong));
    let head_over = Limits { head: request.len() - 1, ..exact };
    assert_eq!(parse(request, &head_over), Err(Error::HeadTooLarge));
}

#[test]
fn the_method_is_checked_one_byte_past_the_longest_line() {
    // A non-token byte right after the longest line allowed is still the method's
    // (400); one further, the line is only too long (414).
    let limits = Limits { request_line: 8, head: 1024 };
    assert_eq!(parse(b"GETXXXXX( / HTTP/1.1\r\nHost: a\r\n\r\n", &limits), Err(Error::Method));
    assert_eq!(parse(b"GETXXXXXX( / HTTP/1.1\r\nHost: a\r\n\r\n", &limits), Err(Error::RequestLineTooLong));
}

#[test]
fn a_partial_head_at_the_limit_waits_and_one_byte_over_is_refused() {
    // The request line is checked as soon as it ends; after it, only the head's size.
    let limits = Limits { request_line: 32, head: 64 };
    let head = format!("GET / HTTP/1.1\r\nHost: a\r\nX: {}", "b".repeat(64));
    let (at_limit, over) = (&head.as_bytes()[..64], &head.as_bytes()[..65]);
    let mut progress = Progress::default();
    assert_eq!(progress.parse(&at_limit[..20], &limits), Ok(Parsed::Partial), "the line has ended");
    assert_eq!(progress.parse(at_limit, &limits), Ok(Parsed::Partial), "64 bytes: may still end in time");
    assert_eq!(progress.parse(over, &limits), Err(Error::HeadTooLarge), "65 bytes cannot");
    assert_eq!(parse(at_limit, &limits), Ok(Parsed::Partial), "a fresh parse agrees");
    assert_eq!(parse(over, &limits), Err(Error::HeadTooLarge), "a fresh parse agrees");
}

#[test]
fn each_error_says_what_it_refuses() {
    let said = [
        (Error::Method, "invalid method"),
        (Error::Target, "invalid request target"),
        (Error::Version, "invalid HTTP version"),
        (Error::UnsupportedVersion, "HTTP version not supported"),
        (Error::Header, "invalid header line"),
        (Error::ContentLength, "invalid Content-Length"),
        (Error::TransferEncoding, "unsupported Transfer-Encoding"),
        (Error::Host, "missing, repeated or invalid Host"),
        (Error::RequestLineTooLong, "request line too long"),
        (Error::HeadTooLarge, "request head too large"),
    ];
    for (error, text) in said {
        assert_eq!(error.to_string(), text, "{error:?}");
    }
}

#[test]
fn chunked_is_reported_for_the_caller_to_decide() {
    let request = complete(b"POST / HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: Chunked\r\n\r\n");
    assert!(request.chunked);
    assert_eq!(request.content_length, 0);
}
