//! What a backend or a client could read differently from the proxy: each finding
//! of the desync review (RFC 9112, 6.3 and 7.1; request smuggling), seen through the
//! harness, with the bytes each peer receives.

use percore::reactor::PeerReads;

use super::*;

const CHUNKED_HEAD: &[u8] = b"POST /up HTTP/1.1\r\nHost: h\r\nTransfer-Encoding: chunked\r\n\r\n";

/// The body the backend received after the forwarded head.
fn body_of(forwarded: &[u8]) -> String {
    let text = text(forwarded);
    let (_, body) = text.split_once("\r\n\r\n").unwrap_or_else(|| panic!("a head in {text:?}"));
    body.to_owned()
}

/// The head the backend received, without the body.
fn head_of(forwarded: &[u8]) -> String {
    let text = text(forwarded);
    let (head, _) = text.split_once("\r\n\r\n").unwrap_or_else(|| panic!("a head in {text:?}"));
    format!("{head}\r\n\r\n")
}

#[test]
fn a_chunked_body_outside_the_strict_grammar_is_refused_at_once_and_none_of_it_is_forwarded() {
    let bodies: [(&[u8], &str); 14] = [
        (
            b"2;\nxx\r\n3b\r\n0\r\n\r\nGET /smuggled HTTP/1.1\r\nHost: h\r\n\r\n\r\n0\r\n\r\n",
            "a bare LF in an extension",
        ),
        (b"2\nxx\r\n0\r\n\r\n", "a bare LF after the size"),
        (b"2 \r\nxx\r\n0\r\n\r\n", "white space after the size, no extension"),
        (b"2\r\nxx\n0\r\n\r\n", "a bare LF after the data"),
        (b"2\r\nxx\rX0\r\n\r\n", "a CR without its LF after the data"),
        (b"2\r\nxx\r\n0\n\n", "bare LFs after the last chunk"),
        (b"2\r\nxx\r\n0\r\n\n", "a bare LF ending the trailer section"),
        (b"2\r\nxx\r\n0\r\nX: 1\n\r\n", "a bare LF ending a trailer line"),
        (b"00000000000000002\r\nxx\r\n0\r\n\r\n", "17 hex digits"),
        (b"8000000000000000\r\nxx", "a size of 2^63"),
        (b"2;a b\r\nxx\r\n0\r\n\r\n", "an extension name that is no token"),
        (b"2;a=\"x\r\nxx\r\n0\r\n\r\n", "a quoted extension value not closed"),
        (b"2;\r\nxx\r\n0\r\n\r\n", "a ; without a name"),
        (b"2;a \r\nxx\r\n0\r\n\r\n", "white space after an extension name"),
    ];
    for (body, case) in bodies {
        let mut harness = harness(None, Config::default());
        harness.receive(&[CHUNKED_HEAD, body].concat());
        let upstream = established(&mut harness);
        // Content read before the fault went on, framed by the proxy; the body never
        // ends at the backend, whose connection closes.
        let body = body_of(&harness.take_output_of(upstream));
        assert!(["", "2\r\nxx\r\n"].contains(&body.as_str()), "{case}: {body:?}");
        assert!(harness.closed(upstream).is_some(), "{case}: the backend connection is closed");
        let answer = text(&harness.take_output());
        assert!(answer.starts_with("HTTP/1.1 400 Bad Request\r\n"), "{case}: {answer}");
        assert!(client_closes(&harness), "{case}");
    }
}

#[test]
fn a_chunked_body_goes_on_re_chunked_without_extensions_or_trailers_that_frame_or_route() {
    let mut harness = harness(None, Config::default());
    let body = b"3;name=value;q=\"a \\\"b\\\"\"\r\nabc\r\n000A ; x = y\r\n0123456789\r\n0\r\n\
        X-Sum: 1\r\nContent-Length: 5\r\nTransfer-Encoding: chunked\r\nHost: evil\r\n\r\n";
    harness.receive(&[CHUNKED_HEAD, body].concat());
    let upstream = established(&mut harness);
    let forwarded = harness.take_output_of(upstream);
    assert_eq!(body_of(&forwarded), "3\r\nabc\r\na\r\n0123456789\r\n0\r\nX-Sum: 1\r\n\r\n");
    assert!(head_of(&forwarded).contains("\r\nTransfer-Encoding: chunked\r\n"));
}

#[test]
fn an_answer_with_both_a_length_and_chunks_loses_the_length_and_closes_the_client() {
    let mut harness = harness(None, Config::default());
    let upstream = forwarded(&mut harness, GET);
    harness.receive_on(
        upstream,
        b"HTTP/1.1 200 OK\r\nContent-Length: 5\r\nTransfer-Encoding: chunked\r\n\r\n3\r\nabc\r\n0\r\n\r\n",
    );
    assert_eq!(
        text(&harness.take_output()),
        "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\nConnection: close\r\n\r\n3\r\nabc\r\n0\r\n\r\n"
    );
    assert!(client_closes(&harness));
    assert!(harness.closed(upstream).is_some(), "never pooled");
}

#[test]
fn equal_lengths_are_forwarded_once_both_ways() {
    let mut harness = harness(None, Config::default());
    harness.receive(b"POST /a HTTP/1.1\r\nHost: h\r\nContent-Length: 2\r\nContent-Length: 2\r\n\r\nhi");
    let upstream = established(&mut harness);
    let forwarded = harness.take_output_of(upstream);
    assert_eq!(head_of(&forwarded).matches("Content-Length").count(), 1, "{}", text(&forwarded));
    assert_eq!(body_of(&forwarded), "hi");
    harness.receive_on(upstream, b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\ncontent-length: 2\r\n\r\nok");
    assert_eq!(text(&harness.take_output()), "HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok");
}

#[test]
fn a_chunked_answer_to_an_http_1_0_client_is_de_chunked_and_ends_at_the_close() {
    let mut harness = harness(None, Config::default());
    let upstream = forwarded(&mut harness, b"GET /a HTTP/1.0\r\n\r\n");
    harness.receive_on(
        upstream,
        b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n3\r\nabc\r\n2;x=y\r\nde\r\n0\r\nX-T: 1\r\n\r\n",
    );
    assert_eq!(text(&harness.take_output()), "HTTP/1.1 200 OK\r\nConnection: close\r\n\r\nabcde");
    assert!(client_closes(&harness));
}

#[test]
fn nothing_pipelined_after_a_request_that_closes_reaches_the_backend() {
    let post = &b"POST /2 HTTP/1.1\r\nHost: h\r\nContent-Length: 1\r\n\r\nx"[..];
    let closing: [(&[u8], &str); 2] = [
        (b"GET /1 HTTP/1.1\r\nHost: h\r\nConnection: close\r\n\r\n", "Connection: close"),
        (b"GET /1 HTTP/1.0\r\n\r\n", "HTTP/1.0 without keep-alive"),
    ];
    for (first, case) in closing {
        let mut harness = harness(None, Config::default());
        // The client reads its answer as it comes, as a client on loopback does.
        harness.set_peer_reads(PeerReads::AtOnce);
        harness.receive(&[first, post].concat());
        let upstream = established(&mut harness);
        assert!(harness.take_output_of(upstream).starts_with(b"GET /1 "), "{case}");
        harness.receive_on(upstream, OK);
        let answer = text(&harness.take_output());
        assert!(answer.ends_with("Connection: close\r\n\r\nhi"), "{case}: {answer}");
        let later = harness.take_output_of(upstream);
        assert!(later.is_empty() && harness.connecting().is_empty(), "{case}: {}", text(&later));
    }
    // The answer closes the client (its length is the close): the same.
    let mut harness = harness(None, Config::default());
    harness.set_peer_reads(PeerReads::AtOnce);
    harness.receive(&[GET, post].concat());
    let upstream = established(&mut harness);
    harness.take_output_of(upstream);
    harness.receive_on(upstream, b"HTTP/1.1 200 OK\r\n\r\nto the close");
    harness.input_end_on(upstream);
    let answer = text(&harness.take_output());
    assert!(answer.ends_with("Connection: close\r\n\r\nto the close"), "{answer}");
    assert!(harness.connecting().is_empty(), "the POST opens nothing");
}

#[test]
fn connect_is_refused_the_proxy_is_no_tunnel() {
    let mut harness = harness(None, Config::default());
    harness.receive(b"CONNECT example.com:443 HTTP/1.1\r\nHost: example.com:443\r\n\r\n");
    assert!(harness.connecting().is_empty(), "nothing forwarded");
    let answer = text(&harness.take_output());
    assert!(answer.starts_with("HTTP/1.1 405 Method Not Allowed\r\n"), "{answer}");
    assert!(client_closes(&harness));
}

#[test]
fn an_absolute_form_target_goes_on_in_origin_form_or_is_refused_beside_another_host() {
    let cases: [(&[u8], &str); 3] = [
        (
            b"GET http://other.test/admin?x=1 HTTP/1.1\r\nHost: other.test\r\n\r\n",
            "GET /admin?x=1 HTTP/1.1\r\nHost: other.test\r\n",
        ),
        (
            b"GET HTTP://Other.test HTTP/1.1\r\nHost: other.test\r\n\r\n",
            "GET / HTTP/1.1\r\nHost: Other.test\r\n",
        ),
        (b"GET http://other.test:8080/ HTTP/1.0\r\n\r\n", "GET / HTTP/1.0\r\nHost: other.test:8080\r\n"),
    ];
    for (request, start) in cases {
        let mut harness = harness(None, Config::default());
        harness.receive(request);
        let upstream = established(&mut harness);
        let forwarded = text(&harness.take_output_of(upstream));
        assert!(forwarded.starts_with(start), "{forwarded}");
        assert_eq!(forwarded.matches("Host:").count(), 1, "{forwarded}");
    }
    let refused: [&[u8]; 3] = [
        b"GET http://other.test/admin HTTP/1.1\r\nHost: h\r\n\r\n",
        b"GET http://user@h/ HTTP/1.1\r\nHost: h\r\n\r\n",
        b"GET ftp://h/ HTTP/1.1\r\nHost: h\r\n\r\n",
    ];
    for request in refused {
        let mut harness = harness(None, Config::default());
        harness.receive(request);
        assert!(harness.connecting().is_empty(), "{}", text(request));
        assert!(harness.take_output().starts_with(b"HTTP/1.1 400 Bad Request\r\n"), "{}", text(request));
    }
}

#[test]
fn header_names_with_underscores_and_the_clients_forwarding_fields_are_dropped() {
    let mut harness = harness(None, Config::default());
    harness.receive(
        b"GET /a HTTP/1.1\r\nHost: h\r\nX_Forwarded_For: 6.6.6.6\r\nTransfer_Encoding: chunked\r\n\
          Forwarded: for=6.6.6.6\r\nX-Real-IP: 6.6.6.6\r\nX-Forwarded-For: 6.6.6.6\r\nX-Forwarded-Host: evil\r\n\
          X-Forwarded-Proto: https\r\nX-Kept: 1\r\n\r\n",
    );
    let upstream = established(&mut harness);
    assert_eq!(
        text(&harness.take_output_of(upstream)),
        "GET /a HTTP/1.1\r\nHost: h\r\nX-Kept: 1\r\nX-Forwarded-For: 127.0.0.1\r\n\r\n"
    );
}

#[test]
fn an_answer_that_breaks_its_framing_before_anything_went_out_gets_502_even_after_an_interim_one() {
    let broken: [&[u8]; 3] = [
        b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n2;\nxx\r\n0\r\n\r\n",
        b"HTTP/1.1 200 OK\r\nTransfer-Encoding: gzip, chunked\r\n\r\n0\r\n\r\n",
        b"HTTP/1.1 100 Continue\r\n\r\nHTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n2\nxx\r\n0\r\n\r\n",
    ];
    for answer in broken {
        let mut harness = harness(None, Config::default());
        let upstream = forwarded(&mut harness, GET);
        harness.receive_on(upstream, answer);
        let got = text(&harness.take_output());
        let own = got.trim_start_matches("HTTP/1.1 100 Continue\r\n\r\n");
        assert!(own.starts_with("HTTP/1.1 502 Bad Gateway\r\n"), "{}: {got}", text(answer));
        assert!(harness.closed(upstream).is_some());
    }
    // A fault after the head went: the answer is cut, the client closed.
    let mut harness = harness(None, Config::default());
    let upstream = forwarded(&mut harness, GET);
    harness.receive_on(upstream, b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n3\r\nabc\r\n");
    harness.receive_on(upstream, b"2;\nxx\r\n");
    assert_eq!(
        text(&harness.take_output()),
        "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n3\r\nabc\r\n",
        "no last chunk: the client sees the answer cut short"
    );
    assert!(client_closes(&harness));
}

#[test]
fn an_answers_trailers_go_on_without_the_fields_that_frame_or_route() {
    let mut harness = harness(None, Config::default());
    let upstream = forwarded(&mut harness, GET);
    harness.receive_on(
        upstream,
        b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\nTrailer: X-T\r\n\r\n1;e=\"x\"\r\na\r\n0\r\n\
          X-T: 1\r\nContent-Length: 9\r\nSet-Cookie: s=1\r\n\r\n",
    );
    assert_eq!(
        text(&harness.take_output()),
        "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n1\r\na\r\n0\r\nX-T: 1\r\n\r\n"
    );
}
