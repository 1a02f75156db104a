use super::*;
use crate::http::Version;

mod events;
mod limits;

/// A head as a test keeps it: all it says, owned.
#[derive(Clone, Debug, PartialEq, Eq)]
struct Head {
    status: u16,
    reason: String,
    version: Version,
    keep_alive: bool,
    body: BodyKind,
    headers: Vec<(String, String)>,
    len: usize,
}

impl Head {
    fn of(head: &ResponseHead<'_>) -> Head {
        let text = |bytes: &[u8]| String::from_utf8_lossy(bytes).into_owned();
        Head {
            status: head.status(),
            reason: text(head.reason()),
            version: head.version(),
            keep_alive: head.keep_alive(),
            body: head.body(),
            headers: fields(head.headers()),
            len: head.as_bytes().len(),
        }
    }
}

/// An event as a test keeps it, with the bytes its call consumed.
#[derive(Clone, Debug, PartialEq, Eq)]
enum Seen {
    Head { head: Head, consumed: usize, content: Vec<u8>, ended: bool },
    Body { consumed: usize, content: Vec<u8>, trailers: Vec<(String, String)>, ended: bool },
}

/// A response as its events add up: its head, the bytes of its body on the wire, its
/// content and trailers, and whether it ended.
#[derive(Clone, Debug, PartialEq, Eq)]
struct Response {
    head: Head,
    body: usize,
    content: Vec<u8>,
    trailers: Vec<(String, String)>,
    ended: bool,
}

/// Header fields as a test keeps them.
fn fields<'a>(fields: impl Iterator<Item = (&'a [u8], &'a [u8])>) -> Vec<(String, String)> {
    let text = |bytes: &[u8]| String::from_utf8_lossy(bytes).into_owned();
    fields.map(|(name, value)| (text(name), text(value))).collect()
}

/// Reads `pieces` as a connection's reads with one reader, as a caller does: what a
/// call left unconsumed comes again with the next piece, and each piece is read
/// until the reader needs more; the last piece with `stream`. Each event, with the
/// bytes handed in so far when it came.
fn read_pieces(
    method: Method,
    pieces: &[&[u8]],
    stream: Stream,
) -> Result<Vec<(usize, Seen)>, ResponseError> {
    let (mut reader, mut pending, mut arrived, mut seen) =
        (ResponseReader::new(method), Vec::new(), 0, Vec::new());
    for (at, piece) in pieces.iter().enumerate() {
        let stream = if at + 1 == pieces.len() { stream } else { Stream::Open };
        pending.extend_from_slice(piece);
        arrived += piece.len();
        loop {
            let Framed { consumed, event } = reader.read(&pending, stream)?;
            assert!(consumed <= pending.len(), "consumed more than given");
            let event = match event {
                ResponseEvent::Partial => {
                    assert_eq!(consumed, 0, "a partial read consumes nothing");
                    break;
                }
                ResponseEvent::Head { head, ended } => {
                    assert!(ended || consumed == head.as_bytes().len(), "a head alone is its length");
                    assert!(consumed >= head.as_bytes().len() && pending.starts_with(head.as_bytes()));
                    let content = pending[head.as_bytes().len()..consumed].to_vec();
                    Seen::Head { head: Head::of(&head), consumed, content, ended }
                }
                ResponseEvent::Body { content, trailers, ended } => {
                    assert!(ended || consumed > 0, "body progress consumes");
                    let start = consumed - content.len();
                    assert_eq!(content.as_ptr(), pending[start..].as_ptr(), "the last bytes consumed");
                    let trailers = fields(trailers.fields());
                    Seen::Body { consumed, content: content.to_vec(), trailers, ended }
                }
            };
            seen.push((arrived, event));
            pending.drain(..consumed);
        }
    }
    Ok(seen)
}

/// The responses the events add up to, checking that they come in order: a head,
/// then body pieces until the one that ends it.
fn responses(seen: &[(usize, Seen)]) -> Vec<Response> {
    let mut responses: Vec<Response> = Vec::new();
    for (_, event) in seen {
        match event {
            Seen::Head { head, consumed, content, ended } => {
                assert!(responses.last().is_none_or(|last| last.ended), "a head after an unended response");
                // A body that came with its head is its content: a chunked one never does.
                assert!(content.is_empty() || head.body != BodyKind::Chunked, "chunks with their head");
                let (body, content, trailers) = (consumed - head.len, content.clone(), Vec::new());
                responses.push(Response { head: head.clone(), body, content, trailers, ended: *ended });
            }
            Seen::Body { consumed, content, trailers, ended } => {
                let last = responses.last_mut().filter(|last| !last.ended).expect("a body after its head");
                last.body += consumed;
                last.content.extend_from_slice(content);
                last.trailers.extend_from_slice(trailers);
                last.ended = *ended;
            }
        }
    }
    responses
}

/// What `pieces` add up to, read as [`read_pieces`] does.
fn read_responses(method: Method, pieces: &[&[u8]], stream: Stream) -> Result<Vec<Response>, ResponseError> {
    read_pieces(method, pieces, stream).map(|seen| responses(&seen))
}

/// One valid response, how it is read, and what its head says.
struct Case {
    name: &'static str,
    text: String,
    /// A chunked body's content, without its framing.
    chunked_content: String,
    method: Method,
    stream: Stream,
    status: u16,
    keep_alive: bool,
    body: BodyKind,
}

/// A case named `name` expected to frame to this status, keep-alive and body.
fn case(name: &'static str, status: u16, keep_alive: bool, body: BodyKind) -> Case {
    let (text, chunked_content) = (String::new(), String::new());
    Case { name, text, chunked_content, method: Method::Get, stream: Stream::Open, status, keep_alive, body }
}

impl Case {
    fn text(mut self, text: impl Into<String>) -> Case {
        self.text = text.into();
        self
    }

    fn content(mut self, content: impl Into<String>) -> Case {
        self.chunked_content = content.into();
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

    /// The head's length: up to the first empty line, after CRLF or LF.
    fn head_len(&self) -> usize {
        let crlf = self.text.find("\r\n\r\n").map(|at| at + 4);
        let lf = self.text.find("\n\n").map(|at| at + 2);
        crlf.into_iter().chain(lf).min().expect("a whole head")
    }

    /// The case read whole: one event, its head and the whole body; a chunked body
    /// in events of its own, after its head.
    fn whole(&self) -> Response {
        let seen = read_pieces(self.method, &[self.bytes()], self.stream).expect(self.name);
        let [whole] = &responses(&seen)[..] else { panic!("{}: not one response: {seen:?}", self.name) };
        let head = &whole.head;
        let expected = (self.status, self.keep_alive, self.body, self.head_len());
        assert_eq!((head.status, head.keep_alive, head.body, head.len), expected, "{}", self.name);
        assert_eq!((whole.body, whole.ended), (self.text.len() - head.len, true), "{}", self.name);
        let content = match self.body {
            BodyKind::Chunked => {
                let (_, Seen::Head { consumed, ended: false, .. }) = &seen[0] else {
                    panic!("{}: the head alone first: {seen:?}", self.name)
                };
                assert_eq!(*consumed, head.len, "{}", self.name);
                self.chunked_content.as_bytes()
            }
            _ => {
                assert_eq!(seen.len(), 1, "{}: one event", self.name);
                &self.bytes()[head.len..]
            }
        };
        assert_eq!(
            String::from_utf8_lossy(&whole.content),
            String::from_utf8_lossy(content),
            "{}",
            self.name
        );
        whole.clone()
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
        case("chunked", 200, KEEP, Chunked)
            .text(format!("{chunked}5\r\nhello\r\n0\r\n\r\n"))
            .content("hello"),
        case("chunked with extensions and trailers", 200, KEEP, Chunked)
            .text(format!(
                "{chunked}5;name=value\r\nhello\r\n1A ; a=\"b c\";x\r\n{ALPHABET}\r\n\
                 000;last\r\nExpires: never\r\nX-Sum:1\r\n\r\n"
            ))
            .content(format!("hello{ALPHABET}")),
        case("chunked, bare LF", 200, KEEP, Chunked)
            .text("HTTP/1.1 200 OK\nTransfer-Encoding: chunked\n\n5\nhello\n0\n\n")
            .content("hello"),
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
fn a_whole_response_is_one_event_with_its_body() {
    for case in valid_cases() {
        let whole = case.whole();
        let body = match case.body {
            BodyKind::Length(length) => length as usize,
            BodyKind::None => 0,
            BodyKind::Chunked | BodyKind::UntilClose => whole.body,
        };
        assert_eq!(whole.body, body, "{}", case.name);
    }
}

#[test]
fn a_response_cut_anywhere_adds_up_to_the_whole_head_first() {
    for case in valid_cases() {
        let whole = case.whole();
        for split in 0..=case.text.len() {
            let (first, rest) = case.bytes().split_at(split);
            let seen = read_pieces(case.method, &[first, rest], case.stream).expect(case.name);
            assert_eq!(responses(&seen), std::slice::from_ref(&whole), "{}, split at {split}", case.name);
            // The head comes as soon as it is whole, alone unless the body came too.
            let (arrived, Seen::Head { consumed, .. }) = &seen[0] else {
                panic!("{}: the head first", case.name)
            };
            let expected = if split >= whole.head.len { split } else { case.text.len() };
            assert_eq!(*arrived, expected, "{}, split at {split}", case.name);
            assert!(*consumed == whole.head.len || seen.len() == 1, "{}, split at {split}", case.name);
        }
    }
}

#[test]
fn a_response_a_byte_at_a_time_gives_its_head_when_whole_then_each_byte() {
    for case in valid_cases() {
        let bytes: Vec<&[u8]> = case.bytes().chunks(1).collect();
        let seen = read_pieces(case.method, &bytes, case.stream).expect(case.name);
        assert_eq!(responses(&seen), [case.whole()], "{}", case.name);
        let (arrived, Seen::Head { .. }) = &seen[0] else { panic!("{}: the head first", case.name) };
        assert_eq!(*arrived, case.head_len(), "{}: the head as soon as its last byte came", case.name);
    }
    // A body whose length is given is consumed byte by byte, each byte told.
    let text = b"HTTP/1.1 200 OK\r\nX-A: 1\r\nContent-Length: 3\r\n\r\nabc";
    let head_len = text.len() - 3;
    let seen = read_pieces(Method::Get, &text.chunks(1).collect::<Vec<_>>(), Stream::Open).expect("valid");
    let events: Vec<_> = seen
        .iter()
        .map(|(arrived, seen)| match seen {
            Seen::Head { head, consumed, ended, .. } => {
                (*arrived, Some(head.headers.len()), *consumed, *ended)
            }
            Seen::Body { consumed, ended, .. } => (*arrived, None, *consumed, *ended),
        })
        .collect();
    let expected = [
        (head_len, Some(2), head_len, false),
        (head_len + 1, None, 1, false),
        (head_len + 2, None, 1, false),
        (head_len + 3, None, 1, true),
    ];
    assert_eq!(events, expected);
}

#[test]
fn no_prefix_ends() {
    for case in valid_cases() {
        for split in 0..case.text.len() {
            // At EOF, a prefix of an UntilClose response would be a shorter whole one.
            let prefix = read_responses(case.method, &[&case.bytes()[..split]], Stream::Open);
            let unended = prefix.as_ref().is_ok_and(|responses| responses.iter().all(|r| !r.ended));
            assert!(unended, "{}, split at {split}: {prefix:?}", case.name);
        }
    }
}

#[test]
fn bytes_after_a_response_do_not_change_it() {
    for case in valid_cases().into_iter().filter(|case| case.body != BodyKind::UntilClose) {
        let pipelined = format!("{}HTTP/1.1 200 OK\r\nContent-Length: 1\r\n\r\nx", case.text);
        let framed = ResponseReader::new(case.method).read(pipelined.as_bytes(), case.stream);
        let expected = ResponseReader::new(case.method).read(case.bytes(), case.stream);
        assert_eq!(framed, expected, "{}", case.name);
    }
}

mod properties {
    use super::*;
    use proptest::collection::vec;
    use proptest::prelude::*;

    proptest! {
        /// Any body cut into any chunks adds up to its exact length and content, read
        /// whole or cut anywhere into two reads, and no prefix of it ends.
        #[test]
        fn chunked_bodies_add_up_exactly(chunks in vec((vec(any::<u8>(), 1..40), any::<bool>()), 0..8)) {
            let head = b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n";
            let mut buf = head.to_vec();
            for (data, with_ext) in &chunks {
                let ext = if *with_ext { "; name=\"v;al\"" } else { "" };
                buf.extend_from_slice(format!("{:X}{ext}\r\n", data.len()).as_bytes());
                buf.extend_from_slice(data);
                buf.extend_from_slice(b"\r\n");
            }
            buf.extend_from_slice(b"0\r\nTrailer: t\r\n\r\n");
            let whole = read_responses(Method::Get, &[&buf], Stream::Open).expect("valid");
            let content: Vec<u8> = chunks.iter().flat_map(|(data, _)| data.clone()).collect();
            let trailers = vec![("Trailer".to_string(), "t".to_string())];
            let [Response { head: whole_head, .. }] = &whole[..] else { panic!("one response: {whole:?}") };
            let (whole_head, body) = (whole_head.clone(), buf.len() - head.len());
            let expected = [Response { head: whole_head, body, content, trailers, ended: true }];
            prop_assert_eq!(&whole, &expected);
            for split in 0..buf.len() {
                let prefix = read_responses(Method::Get, &[&buf[..split]], Stream::Open).expect("valid");
                prop_assert!(prefix.iter().all(|r| !r.ended), "split at {}", split);
                let got = read_responses(Method::Get, &[&buf[..split], &buf[split..]], Stream::Open);
                prop_assert_eq!(got.expect("valid"), expected.clone(), "split at {}", split);
            }
        }
    }
}
