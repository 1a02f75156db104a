//! Every error, and the bounds of what a connection holds.

use super::*;
use crate::http::chunked::{MAX_SIZE_LINE, MAX_TRAILERS};

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
        assert_eq!(read_pieces(Method::Get, &[bytes], Stream::Ended), Err(expected), "{name}");
        // However the bytes arrive, the answer is the same (but for the large ones,
        // where every split would take a while).
        for split in (0..=bytes.len()).filter(|_| bytes.len() < 1000) {
            let got = read_pieces(Method::Get, &[&bytes[..split], &bytes[split..]], Stream::Ended);
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
    let got = read_responses(Method::Get, &[text.as_bytes()], Stream::Open).expect("valid");
    assert_eq!(got.iter().map(|r| (r.head.len, r.body, r.ended)).collect::<Vec<_>>(), [(MAX_HEAD, 0, true)]);
}

#[test]
fn a_huge_length_is_counted_down_not_an_overflow() {
    let size_line = format!("{:x}\r\n", u64::MAX);
    for (head, body_start) in [
        ("HTTP/1.1 200 OK\r\nContent-Length: 18446744073709551615\r\n\r\n", ""),
        ("HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n", &size_line),
    ] {
        let text = format!("{head}{body_start}abc");
        let got = read_responses(Method::Get, &[text.as_bytes()], Stream::Ended).expect("valid");
        let got: Vec<_> = got.iter().map(|r| (r.head.len, r.body, r.ended)).collect();
        assert_eq!(got, [(head.len(), body_start.len() + 3, false)], "{head:?}");
    }
}

#[test]
fn a_gibibyte_body_leaves_nothing_to_buffer() {
    const GIB: usize = 1 << 30;
    const PIECE: usize = 10 << 20;
    let head = format!("HTTP/1.1 200 OK\r\nContent-Length: {GIB}\r\n\r\n");
    let mut reader = ResponseReader::default();
    let first = reader.read(head.as_bytes(), Stream::Open).expect("valid");
    assert!(matches!(first.event, ResponseEvent::Head { ended: false, .. }) && first.consumed == head.len());
    let piece = vec![b'x'; PIECE];
    let mut body_left = GIB;
    fn progress(content: &[u8], ended: bool) -> Result<Framed<'_>, ResponseError> {
        let event = ResponseEvent::Body { content, trailers: Default::default(), ended };
        Ok(Framed { consumed: content.len(), event })
    }
    while body_left > PIECE {
        assert_eq!(reader.read(&piece, Stream::Open), progress(&piece, false));
        body_left -= PIECE;
        assert_eq!(reader.body_left(), Some(body_left as u64));
    }
    // The last piece ends the body, and the next response's start is left alone.
    let mut last = piece[..body_left].to_vec();
    last.extend_from_slice(b"HTTP/1.1");
    assert_eq!(reader.read(&last, Stream::Open), progress(&last[..body_left], true));
}

#[test]
fn errors_display() {
    assert_eq!(ResponseError::Chunk.to_string(), "invalid chunked body");
    assert_eq!(ResponseError::HeadTooLarge.to_string(), "response head too large");
    assert_eq!(ResponseError::SizeLineTooLong.to_string(), "chunk-size line too long");
    assert_eq!(ResponseError::TrailersTooLarge.to_string(), "trailer section too large");
}
