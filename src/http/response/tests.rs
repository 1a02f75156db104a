use super::*;
use crate::http::chunked::{MAX_SIZE_LINE, MAX_TRAILERS};

fn head(status: u16, keep_alive: bool, body: BodyKind, len: usize) -> ResponseHead {
    ResponseHead { status, keep_alive, body, len: len as u64 }
}

/// What a fresh reader makes of `input` in one call.
fn frame(input: &[u8], method: Method, stream: Stream) -> Result<Framed, ResponseError> {
    ResponseReader::new(method).read(input, stream)
}

/// `input` framed whole: `len` bytes consumed, `response` completed.
fn whole(len: usize, response: ResponseHead) -> Result<Framed, ResponseError> {
    Ok(Framed { consumed: len, completed: Some(response) })
}

/// Feeds `input` in two reads cut at `split`, as a caller does (what the first left
/// unconsumed comes again with the rest), the second with `stream`: the first's
/// answer if it completed a response, else both reads' consumed bytes added up and
/// the second's response.
fn frame_split(input: &[u8], split: usize, method: Method, stream: Stream) -> Result<Framed, ResponseError> {
    let mut reader = ResponseReader::new(method);
    let first = reader.read(&input[..split], Stream::Open)?;
    assert!(first.consumed <= split, "split at {split}: {first:?}");
    if first.completed.is_some() {
        return Ok(first);
    }
    let second = reader.read(&input[first.consumed..], stream)?;
    Ok(Framed { consumed: first.consumed + second.consumed, completed: second.completed })
}

/// One valid response, how it is read, and what it frames to; `len` is always the
/// whole text.
struct Case {
    name: &'static str,
    text: String,
    method: Method,
    stream: Stream,
    expected: ResponseHead,
}

/// A case named `name` expected to frame to this status, keep-alive and body.
fn case(name: &'static str, status: u16, keep_alive: bool, body: BodyKind) -> Case {
    let expected = head(status, keep_alive, body, 0);
    Case { name, text: String::new(), method: Method::Get, stream: Stream::Open, expected }
}

impl Case {
    fn text(mut self, text: impl Into<String>) -> Case {
        self.text = text.into();
        self.expected.len = self.text.len() as u64;
        self
    }

    fn answering_head(mut self) -> Case {
        self.method = Method::Head;
        self
    }

    fn at_eof(mut self) -> Case {
        self.stream = Stream::Ended;
        self
    }

    fn bytes(&self) -> &[u8] {
        self.text.as_bytes()
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
        case("101 Switching Protocols", 101, CLOSE, NoBody)
            .text("HTTP/1.1 101 Switching Protocols\r\nUpgrade: x\r\n\r\n"),
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
        case("every digit of the status", 429, KEEP, Length(0))
            .text("HTTP/1.1 429 Too Many Requests\r\nContent-Length: 0\r\n\r\n"),
        case("no SP before empty reason", 503, KEEP, Length(0))
            .text("HTTP/1.1 503\r\nContent-Length: 0\r\n\r\n"),
        case("later 1.x minor", 200, KEEP, Length(0)).text("HTTP/1.2 200 OK\r\nContent-Length: 0\r\n\r\n"),
        case("obs-text, tab, OWS", 200, KEEP, Length(0))
            .text("HTTP/1.1 200 \tOKé\r\nX-A:\t v \t\r\nContent-Length: 0\r\n\r\n"),
    ]
}

#[test]
fn valid_responses_frame_to_their_whole_length() {
    for case in valid_cases() {
        let got = frame(case.bytes(), case.method, case.stream);
        assert_eq!(got, whole(case.text.len(), case.expected), "{}", case.name);
    }
}

#[test]
fn no_prefix_completes() {
    for case in valid_cases() {
        for split in 0..case.text.len() {
            // At EOF, a prefix of an UntilClose response would be a shorter whole one.
            let Ok(prefix) = frame(&case.bytes()[..split], case.method, Stream::Open) else {
                panic!("{}, split at {split}: an error", case.name)
            };
            assert!(
                prefix.completed.is_none() && prefix.consumed <= split,
                "{}, split at {split}",
                case.name
            );
        }
    }
}

#[test]
fn a_response_split_anywhere_frames_as_whole() {
    for case in valid_cases() {
        for split in 0..=case.text.len() {
            let got = frame_split(case.bytes(), split, case.method, case.stream);
            assert_eq!(got, whole(case.text.len(), case.expected), "{}, split at {split}", case.name);
        }
    }
}

#[test]
fn bytes_after_a_response_do_not_change_it() {
    for case in valid_cases().into_iter().filter(|case| case.expected.body != BodyKind::UntilClose) {
        let pipelined = format!("{}HTTP/1.1 200 OK\r\nContent-Length: 1\r\n\r\nx", case.text);
        let got = frame(pipelined.as_bytes(), case.method, case.stream);
        assert_eq!(got, whole(case.text.len(), case.expected), "{}", case.name);
    }
}

#[test]
fn an_until_close_body_is_consumed_as_it_comes_and_ends_at_eof() {
    let buf = b"HTTP/1.1 200 OK\r\nServer: x\r\n\r\nsome body";
    let mut reader = ResponseReader::default();
    assert_eq!(reader.read(buf, Stream::Open), Ok(Framed { consumed: buf.len(), completed: None }));
    assert_eq!(reader.read(b" and more", Stream::Open), Ok(Framed { consumed: 9, completed: None }));
    let end = head(200, false, BodyKind::UntilClose, buf.len() + 9);
    assert_eq!(reader.read(b"", Stream::Ended), whole(0, end));
}

#[test]
fn a_short_body_at_eof_does_not_complete() {
    let buf = b"HTTP/1.1 200 OK\r\nContent-Length: 10\r\n\r\nshort";
    assert_eq!(frame(buf, Method::Get, Stream::Ended), Ok(Framed { consumed: buf.len(), completed: None }));
}

#[test]
fn two_pipelined_responses_frame_one_after_the_other() {
    let first = "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n3\r\nabc\r\n0\r\n\r\n";
    let second = "HTTP/1.1 404 Not Found\r\nContent-Length: 4\r\nConnection: close\r\n\r\nnope";
    let buf = format!("{first}{second}");
    let mut reader = ResponseReader::default();
    let one = reader.read(buf.as_bytes(), Stream::Open);
    assert_eq!(one, whole(first.len(), head(200, true, BodyKind::Chunked, first.len())));
    let two = reader.read(&buf.as_bytes()[first.len()..], Stream::Open);
    assert_eq!(two, whole(second.len(), head(404, false, BodyKind::Length(4), second.len())));
}

#[test]
fn an_interim_response_is_told_from_the_final_one() {
    let interim = "HTTP/1.1 100 Continue\r\n\r\n";
    let buf = format!("{interim}HTTP/1.1 200 OK\r\nContent-Length: 0\r\n\r\n");
    let mut reader = ResponseReader::default();
    let Ok(Framed { consumed, completed: Some(first) }) = reader.read(buf.as_bytes(), Stream::Open) else {
        panic!("the 100 is framed")
    };
    assert!(first.is_interim());
    let Ok(Framed { completed: Some(last), .. }) = reader.read(&buf.as_bytes()[consumed..], Stream::Open)
    else {
        panic!("the 200 is framed")
    };
    assert!(!last.is_interim());
    assert!(!head(101, false, BodyKind::None, 0).is_interim(), "after a 101, no final response comes");
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
        ("control byte in chunk ext", format!("{chunked}5;a=\x01\r\nhello\r\n0\r\n\r\n"), Chunk),
        ("DEL in chunk ext", format!("{chunked}5;a\x7f\r\nhello\r\n0\r\n\r\n"), Chunk),
        ("chunk data too long", format!("{chunked}5\r\nhello!\r\n0\r\n\r\n"), Chunk),
        ("chunk data, CR without LF", format!("{chunked}5\r\nhello\rx"), Chunk),
        ("bad trailer", format!("{chunked}0\r\nno colon\r\n\r\n"), Header),
        ("size line too long", format!("{chunked}5;{}\r\n", "x".repeat(MAX_SIZE_LINE)), SizeLineTooLong),
        (
            "trailers too large",
            format!("{chunked}0\r\n{}", "X: t\r\n".repeat(MAX_TRAILERS / 6 + 1)),
            TrailersTooLarge,
        ),
        ("head too large, no end", format!("HTTP/1.1 200 OK\r\nX: {}", "a".repeat(MAX_HEAD)), HeadTooLarge),
        (
            "head too large, complete",
            format!("HTTP/1.1 200 OK\r\nX: {}\r\n\r\n", "a".repeat(MAX_HEAD)),
            HeadTooLarge,
        ),
    ];
    for (name, text, expected) in cases {
        let bytes = text.as_bytes();
        assert_eq!(frame(bytes, Method::Get, Stream::Ended), Err(expected), "{name}");
        // However the bytes arrive, the answer is the same (but for the large ones,
        // where every split would take a while).
        for split in (0..=bytes.len()).filter(|_| bytes.len() < 1000) {
            let mut reader = ResponseReader::default();
            let got = reader
                .read(&bytes[..split], Stream::Open)
                .and_then(|first| reader.read(&bytes[first.consumed..], Stream::Ended));
            assert_eq!(got, Err(expected), "{name}, split at {split}");
        }
    }
}

#[test]
fn a_head_of_64_kib_is_accepted() {
    assert_eq!(MAX_HEAD, 65_536, "64 KiB, as documented");
    let start = "HTTP/1.1 200 OK\r\nX: ";
    let end = "\r\nContent-Length: 0\r\n\r\n";
    let text = format!("{start}{}{end}", "a".repeat(MAX_HEAD - start.len() - end.len()));
    assert_eq!(text.len(), MAX_HEAD);
    let got = frame(text.as_bytes(), Method::Get, Stream::Open);
    assert_eq!(got, whole(MAX_HEAD, head(200, true, BodyKind::Length(0), MAX_HEAD)));
}

#[test]
fn a_huge_length_is_counted_down_not_an_overflow() {
    let buf = b"HTTP/1.1 200 OK\r\nContent-Length: 18446744073709551615\r\n\r\nabc";
    assert_eq!(frame(buf, Method::Get, Stream::Ended), Ok(Framed { consumed: buf.len(), completed: None }));
    let buf = format!("HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n{:x}\r\nabc", u64::MAX);
    let got = frame(buf.as_bytes(), Method::Get, Stream::Ended);
    assert_eq!(got, Ok(Framed { consumed: buf.len(), completed: None }));
}

#[test]
fn a_gibibyte_body_leaves_nothing_to_buffer() {
    const GIB: usize = 1 << 30;
    const PIECE: usize = 10 << 20;
    let head_text = format!("HTTP/1.1 200 OK\r\nContent-Length: {GIB}\r\n\r\n");
    let mut reader = ResponseReader::default();
    let first = reader.read(head_text.as_bytes(), Stream::Open);
    assert_eq!(first, Ok(Framed { consumed: head_text.len(), completed: None }));
    let piece = vec![b'x'; PIECE];
    let mut body_left = GIB;
    while body_left > PIECE {
        assert_eq!(reader.read(&piece, Stream::Open), Ok(Framed { consumed: PIECE, completed: None }));
        body_left -= PIECE;
    }
    // The last piece ends the body, and the next response's start is left alone.
    let mut last = piece[..body_left].to_vec();
    last.extend_from_slice(b"HTTP/1.1");
    let response = head(200, true, BodyKind::Length(GIB as u64), head_text.len() + GIB);
    assert_eq!(reader.read(&last, Stream::Open), whole(body_left, response));
}

#[test]
fn errors_display() {
    assert_eq!(ResponseError::Chunk.to_string(), "invalid chunked body");
    assert_eq!(ResponseError::HeadTooLarge.to_string(), "response head too large");
    assert_eq!(ResponseError::SizeLineTooLong.to_string(), "chunk-size line too long");
    assert_eq!(ResponseError::TrailersTooLarge.to_string(), "trailer section too large");
}

mod properties {
    use super::*;
    use proptest::collection::vec;
    use proptest::prelude::*;

    proptest! {
        /// Any body cut into any chunks frames to its exact length, in one read or
        /// in two cut anywhere, and no prefix of it completes.
        #[test]
        fn chunked_bodies_frame_exactly(chunks in vec((vec(any::<u8>(), 1..40), any::<bool>()), 0..8)) {
            let mut buf = b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n".to_vec();
            for (data, with_ext) in &chunks {
                let ext = if *with_ext { "; name=\"v;al\"" } else { "" };
                buf.extend_from_slice(format!("{:X}{ext}\r\n", data.len()).as_bytes());
                buf.extend_from_slice(data);
                buf.extend_from_slice(b"\r\n");
            }
            buf.extend_from_slice(b"0\r\nTrailer: t\r\n\r\n");
            let expected = whole(buf.len(), head(200, true, BodyKind::Chunked, buf.len()));
            prop_assert_eq!(frame(&buf, Method::Get, Stream::Open), expected);
            for split in 0..buf.len() {
                let prefix = frame(&buf[..split], Method::Get, Stream::Open);
                prop_assert!(matches!(prefix, Ok(Framed { completed: None, .. })), "split at {}", split);
                prop_assert_eq!(frame_split(&buf, split, Method::Get, Stream::Open), expected);
            }
        }
    }
}
