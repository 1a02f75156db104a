//! What a backend could read differently from the proxy, end to end: a request
//! smuggled in a chunked body against a backend that frames chunks as older
//! parsers do, input pipelined after a request that closes, and the flags that let
//! a client's own fields through.

use crate::util::OK;
use crate::{exchange, proxy, python_backend, python_backend_with, status};

/// The requests the backend answered, by target, asked through `proxy`.
fn answered(proxy: std::net::SocketAddr) -> Vec<String> {
    let answer = exchange(proxy, b"GET /log HTTP/1.1\r\nHost: a\r\nConnection: close\r\n\r\n");
    let (_, body) = answer.split_once("\r\n\r\n").expect("a body");
    body.lines().map(str::to_owned).collect()
}

/// A chunked body whose first size line ends at a bare LF inside an extension:
/// read with bare LFs as line ends (as the proxy once did), it is two chunks, the
/// second holding `smuggled`; read by a backend that ends size lines only at CRLF
/// (gunicorn 23, among others), it is one chunk of `2` bytes and an empty last one,
/// and `smuggled` is the backend's next request.
fn smuggling(smuggled: &[u8]) -> Vec<u8> {
    let second = [&b"0\r\n\r\n"[..], smuggled].concat();
    assert_eq!(
        format!("{:x}", second.len()).len(),
        2,
        "a size the backend reads as the first chunk's 2 bytes"
    );
    let mut body =
        b"POST /echo?attacker HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: chunked\r\nConnection: close\r\n\r\n\
        2;\nxx\r\n"
            .to_vec();
    body.extend_from_slice(format!("{:x}\r\n", second.len()).as_bytes());
    body.extend_from_slice(&second);
    body.extend_from_slice(b"\r\n0\r\n\r\n");
    body
}

#[test]
fn a_request_smuggled_in_a_chunk_extension_never_reaches_the_backend_nor_captures_the_next_client() {
    let Some(origin) = python_backend_with(&["--crlf-size-lines"]) else { return };
    // One idle backend connection kept: the next client's request goes on the one
    // the attacker's went on.
    let (proxy, _) = proxy(&[origin.addr()], &["--keepalive", "1"]);
    // A request whose body the backend waits for: the next request forwarded on
    // the connection becomes that body, and its answer goes to that request's client.
    let capture = b"POST /echo?smuggled HTTP/1.1\r\nHost: a\r\nContent-Length: 70\r\n\r\n";
    let attack = exchange(proxy.addr(), &smuggling(capture));
    let victim = exchange(
        proxy.addr(),
        b"GET /echo?victim HTTP/1.1\r\nHost: a\r\nCookie: session=victim\r\nConnection: close\r\n\r\n",
    );
    // The victim gets the answer to its own request, and the backend answered it
    // alone: neither the smuggled request nor the attacker's ran.
    assert_eq!(status(&victim), OK, "{victim}");
    let (_, echoed) = victim.split_once("\r\n\r\n").expect("a body");
    assert!(echoed.starts_with("GET /echo?victim HTTP/1.1\r\n"), "the victim's answer: {victim}");
    assert_eq!(answered(proxy.addr()), ["/echo?victim"]);
    // The attacker is refused at its body's first size line, at once.
    assert!(attack.starts_with("HTTP/1.1 400 Bad Request\r\n"), "{attack}");
}

#[test]
fn a_well_framed_chunked_body_reaches_that_backend_re_chunked_and_whole() {
    let Some(origin) = python_backend_with(&["--crlf-size-lines"]) else { return };
    let (proxy, _) = proxy(&[origin.addr()], &[]);
    let answer = exchange(
        proxy.addr(),
        b"POST /echo HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: chunked\r\nConnection: close\r\n\r\n\
          5;a=\"x\"\r\nhello\r\n7 ; b = c\r\n, world\r\n0\r\nX-Sum: 1\r\nHost: evil\r\n\r\n",
    );
    assert_eq!(status(&answer), OK, "{answer}");
    assert!(answer.contains("X-Body-Framing: chunked\r\nX-Body-Length: 12\r\n"), "{answer}");
    assert!(answer.ends_with("\r\n\r\nhello, world"), "{answer}");
}

#[test]
fn nothing_pipelined_after_a_request_that_closes_reaches_the_backend() {
    let Some(origin) = python_backend() else { return };
    let (proxy, _) = proxy(&[origin.addr()], &[]);
    let post = &b"POST /echo?second HTTP/1.1\r\nHost: a\r\nContent-Length: 1\r\n\r\nx"[..];
    for first in [
        &b"GET /echo?close HTTP/1.1\r\nHost: a\r\nConnection: close\r\n\r\n"[..],
        b"GET /echo?http10 HTTP/1.0\r\n\r\n",
        // Its answer is delimited by the close, so the client is closed after it.
        b"GET /until-close HTTP/1.1\r\nHost: a\r\n\r\n",
    ] {
        let answers = exchange(proxy.addr(), &[first, post].concat());
        assert_eq!(answers.matches("HTTP/1.1 200 OK\r\n").count(), 1, "{answers}");
    }
    assert_eq!(answered(proxy.addr()), ["/echo?close", "/echo?http10", "/until-close"]);
}

#[test]
fn the_clients_own_fields_go_on_only_when_the_flags_say() {
    let Some(origin) = python_backend() else { return };
    let request = b"GET /echo HTTP/1.1\r\nHost: a\r\nX_Under: 1\r\nX-Real-IP: 6.6.6.6\r\n\
        X-Forwarded-For: 6.6.6.6\r\nConnection: close\r\n\r\n";
    let (default, _) = proxy(&[origin.addr()], &[]);
    let received = exchange(default.addr(), request);
    assert!(
        received.contains("\r\n\r\nGET /echo HTTP/1.1\r\nHost: a\r\nX-Forwarded-For: 127.0.0.1\r\n\r\n"),
        "{received}"
    );
    let (trusting, _) = proxy(&[origin.addr()], &["--underscores-in-headers", "--trust-forwarded-headers"]);
    let received = exchange(trusting.addr(), request);
    assert!(
        received.contains("\r\nX_Under: 1\r\nX-Real-IP: 6.6.6.6\r\nX-Forwarded-For: 6.6.6.6, 127.0.0.1\r\n"),
        "{received}"
    );
}
