//! One behaviour each: the head's parts, a body's progress, interim and final
//! responses, the method answered.

use super::*;

#[test]
fn headers_come_in_order_as_sent_without_their_white_space() {
    let text =
        b"HTTP/1.0 200 \tOK\xe9\r\nServer: percore\r\nX-Empty:\r\nX-Tab:\t a\tb \t\r\nset-cookie: a=1\r\n\
                 Set-Cookie: b=2\r\nContent-Length: 0\r\n\r\n";
    let framed = ResponseReader::default().read(text, Stream::Open);
    let Ok(Framed { event: ResponseEvent::Head { head, ended: true }, .. }) = framed else {
        panic!("{framed:?}")
    };
    assert_eq!((head.status(), head.reason(), head.version()), (200, &b"\tOK\xe9"[..], Version::Http10));
    let expected: [(&[u8], &[u8]); 6] = [
        (b"Server", b"percore"),
        (b"X-Empty", b""),
        (b"X-Tab", b"a\tb"),
        (b"set-cookie", b"a=1"),
        (b"Set-Cookie", b"b=2"),
        (b"Content-Length", b"0"),
    ];
    assert_eq!(head.headers().collect::<Vec<_>>(), expected);
    assert_eq!(head.as_bytes(), text);
    // The same head remembered: the same fields, from the new input's bytes.
    let mut reader = ResponseReader::default();
    let again = [&text[..], text].concat();
    let first = reader.read(&again, Stream::Open).expect("valid");
    let second = reader.read(&again[first.consumed..], Stream::Open).expect("valid");
    assert_eq!(first.event, framed.expect("valid").event);
    let ResponseEvent::Head { head, .. } = second.event else { panic!("{second:?}") };
    assert_eq!(head.headers().collect::<Vec<_>>(), expected);
    assert_eq!(head.as_bytes().as_ptr(), again[text.len()..].as_ptr(), "borrowed from the input");
}

#[test]
fn the_version_and_reason_are_as_sent() {
    for (line, version, reason) in [
        ("HTTP/1.1 200 OK", Version::Http11, "OK"),
        ("HTTP/1.0 404 Not Found", Version::Http10, "Not Found"),
        ("HTTP/1.9 503 ", Version::Http11, ""),
        ("HTTP/1.1 503", Version::Http11, ""),
    ] {
        let text = format!("{line}\r\nContent-Length: 0\r\n\r\n");
        let framed = ResponseReader::default().read(text.as_bytes(), Stream::Open);
        let Ok(Framed { event: ResponseEvent::Head { head, .. }, .. }) = framed else { panic!("{framed:?}") };
        assert_eq!((head.version(), head.reason()), (version, reason.as_bytes()), "{line}");
    }
}

#[test]
fn an_until_close_body_is_consumed_as_it_comes_and_ends_at_eof() {
    let text = b"HTTP/1.1 200 OK\r\nServer: x\r\n\r\nsome body";
    let mut reader = ResponseReader::default();
    let head = reader.read(text, Stream::Open).expect("valid");
    assert!(matches!(head.event, ResponseEvent::Head { ended: false, .. }));
    assert_eq!(head.consumed, text.len() - 9);
    let body = |content: &'static [u8], ended| {
        let event = ResponseEvent::Body { content, trailers: Default::default(), ended };
        Ok(Framed { consumed: content.len(), event })
    };
    assert_eq!(reader.read(b"some body", Stream::Open), body(b"some body", false));
    assert_eq!(reader.read(b" and more", Stream::Open), body(b" and more", false));
    assert_eq!(reader.read(b"", Stream::Open), Ok(Framed::PARTIAL));
    assert_eq!(reader.read(b"", Stream::Ended), body(b"", true));
    // Whole at the close: one event.
    let framed = ResponseReader::default().read(text, Stream::Ended).expect("valid");
    assert!(matches!(framed.event, ResponseEvent::Head { ended: true, .. }) && framed.consumed == text.len());
}

#[test]
fn a_response_cut_short_by_the_close_never_ends() {
    let chunked = "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n";
    for (text, body) in [
        ("HTTP/1.1 200 OK\r\nContent-Length: 10\r\n\r\nshort".to_string(), 5),
        (format!("{chunked}5\r\nhello\r\n"), 10),
        // The trailer section is held until whole: never consumed.
        (format!("{chunked}0\r\nX-Trailer: t\r\n"), 3),
    ] {
        let got = read_responses(Method::Get, &[text.as_bytes()], Stream::Ended).expect("valid so far");
        let [Response { head, body: got_body, ended: false, .. }] = &got[..] else {
            panic!("{text:?}: {got:?}")
        };
        assert_eq!((head.len + got_body, *got_body), (text.len().min(head.len + body), body), "{text:?}");
    }
    let head = b"HTTP/1.1 200 OK\r\nContent-Length: 10\r\n";
    assert_eq!(read_responses(Method::Get, &[head], Stream::Ended), Ok(Vec::new()), "a head cut short");
}

#[test]
fn two_pipelined_responses_are_read_one_after_the_other() {
    let first = "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n3\r\nabc\r\n0\r\n\r\n";
    let second = "HTTP/1.1 404 Not Found\r\nContent-Length: 4\r\nConnection: close\r\n\r\nnope";
    let buf = format!("{first}{second}");
    let seen = read_pieces(Method::Get, &[buf.as_bytes()], Stream::Open).expect("valid");
    let events: Vec<_> = seen
        .iter()
        .map(|(_, seen)| match seen {
            Seen::Head { head, consumed, ended, .. } => {
                (Some(head.status), head.keep_alive, *consumed, *ended)
            }
            Seen::Body { consumed, ended, .. } => (None, true, *consumed, *ended),
        })
        .collect();
    // The chunked one: its head, its one chunk's data, then its end; the other whole.
    let head_len = first.len() - 13;
    let expected = [
        (Some(200), true, head_len, false),
        (None, true, 6, false),
        (None, true, 7, true),
        (Some(404), false, second.len(), true),
    ];
    assert_eq!(events, expected);
}

#[test]
fn an_interim_response_comes_before_the_final_one() {
    let interim = "HTTP/1.1 100 Continue\r\n\r\n";
    let buf = format!("{interim}HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nhi");
    let mut reader = ResponseReader::default();
    let first = reader.read(buf.as_bytes(), Stream::Open).expect("valid");
    let ResponseEvent::Head { head, ended: true } = first.event else { panic!("{first:?}") };
    assert!(head.is_interim() && first.consumed == interim.len());
    let last = reader.read(&buf.as_bytes()[first.consumed..], Stream::Open).expect("valid");
    let ResponseEvent::Head { head, ended: true } = last.event else { panic!("{last:?}") };
    assert!(!head.is_interim() && head.status() == 200 && last.consumed == buf.len() - interim.len());
}

#[test]
fn after_a_101_the_other_protocol_is_left_alone() {
    let head = "HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n\r\n";
    let buf = format!("{head}\x01\x05hello");
    let framed = ResponseReader::default().read(buf.as_bytes(), Stream::Open).expect("valid");
    let ResponseEvent::Head { head: got, ended: true } = framed.event else { panic!("{framed:?}") };
    assert_eq!(
        (got.status(), got.keep_alive(), got.is_interim(), framed.consumed),
        (101, false, false, head.len())
    );
}

#[test]
fn a_head_comes_before_an_error_in_its_body() {
    let text = b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n5\r\nhello\r\nzz\r\n";
    let mut reader = ResponseReader::default();
    let head = reader.read(text, Stream::Open).expect("valid head");
    let ResponseEvent::Head { head: got, ended: false } = head.event else { panic!("{head:?}") };
    assert_eq!((got.status(), head.consumed), (200, text.len() - 14));
    let rest = &text[head.consumed..];
    let body = reader.read(rest, Stream::Open).expect("a valid chunk");
    assert!(matches!(body.event, ResponseEvent::Body { content: b"hello", ended: false, .. }));
    assert_eq!(reader.read(&rest[body.consumed..], Stream::Open), Err(ResponseError::Chunk));
}

#[test]
fn the_method_answered_may_change_between_responses() {
    let text = b"HTTP/1.1 200 OK\r\nContent-Length: 5\r\n\r\nhello";
    let mut reader = ResponseReader::default();
    let body_of = |framed: Result<Framed<'_>, ResponseError>| match framed {
        Ok(Framed { consumed, event: ResponseEvent::Head { head, ended: true } }) => (head.body(), consumed),
        other => panic!("{other:?}"),
    };
    assert_eq!(body_of(reader.read(text, Stream::Open)), (BodyKind::Length(5), text.len()));
    // The same head, remembered, answers HEAD without its body.
    reader.set_method(Method::Head);
    assert_eq!(body_of(reader.read(text, Stream::Open)), (BodyKind::None, text.len() - 5));
    reader.set_method(Method::Get);
    assert_eq!(body_of(reader.read(text, Stream::Open)), (BodyKind::Length(5), text.len()));
}

#[test]
fn what_is_left_of_a_body_of_known_length_is_told() {
    let mut reader = ResponseReader::default();
    assert_eq!(reader.body_left(), None);
    let head = b"HTTP/1.1 200 OK\r\nContent-Length: 10\r\n\r\n";
    assert_eq!(reader.read(head, Stream::Open).map(|framed| framed.consumed), Ok(head.len()));
    assert_eq!(reader.body_left(), Some(10));
    assert_eq!(reader.read(b"abcd", Stream::Open).map(|framed| framed.consumed), Ok(4));
    assert_eq!(reader.body_left(), Some(6));
    assert_eq!(
        reader.read(b"efghij", Stream::Open).map(|framed| framed.event),
        Ok(ResponseEvent::Body { content: b"efghij", trailers: Default::default(), ended: true })
    );
    assert_eq!(reader.body_left(), None);
}
