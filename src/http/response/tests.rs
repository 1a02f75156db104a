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
        case("Content-Length 0", 200, KEEP, Length(0)).text("HTTP/1.1 200 OK\r\nContent-Length:0\r\n\r\n"),
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
        case("HTTP/1.0 with Transfer-Encoding", 200, CLOSE, Chunked)
            .text("HTTP/1.0 200 OK\r\nConnection: keep-alive\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\n"),
        case("HTTP/1.0 keep-alive", 200, KEEP, Length(2))
            .text("HTTP/1.0 200 OK\r\nConnection: Keep-Alive\r\nContent-Length: 2\r\n\r\nhi"),
        case("HTTP/1.0 default close", 200, CLOSE, Length(2))
            .text("HTTP/1.0 200 OK\r\nContent-Length: 2\r\n\r\nhi"),
        case("Connection: close", 200, CLOSE, Length(2))
            .text("HTTP/1.1 200 OK\r\nConnection: foo, close\r\nContent-Length: 2\r\n\r\nhi"),
        case("UntilClose at EOF", 200, CLOSE, UntilClose).text("HTTP/1.1 200 OK\r\n\r\nall of it").at_eof(),
        case("UntilClose, chunked not last", 200, CLOSE, UntilClose)
            .text("HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked, gzip\r\n\r\nxyz")
            .at_eof(),
        case("empty reason", 404, KEEP, Length(0)).text("HTTP/1.1 404 \r\nContent-Length: 0\r\n\r\n"),
        case("no SP before empty reason", 503, KEEP, Length(0))
            .text("HTTP/1.1 503\r\nContent-Length: 0\r\n\r\n"),
        case("later 1.x minor", 200, KEEP, Length(0)).text("HTTP/1.2 200 OK\r\nContent-Length: 0\r\n\r\n"),
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
        ("Content-Length not digits", "HTTP/1.1 200 OK\r\nContent-Length: abc\r\n\r\n".into(), ContentLength),
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
