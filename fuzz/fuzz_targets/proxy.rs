//! The proxy (`examples/proxy`) as a desync tester sees it, in the Harness: arbitrary
//! client bytes through its request path, to a backend peer that answers each
//! request it reads; arbitrary backend bytes through its response path, to one
//! client request. What comes out on the other side is read by a reference parser
//! written here, which takes only the canonical HTTP/1.1 the proxy must write (CRLF
//! line ends, one framing field at most, chunks in lower-case hex without leading
//! zeros or extensions), and must be exactly the messages the proxy read, as
//! percore's parse and the strict body grammar read them: as many, each with the
//! same start, the same content and the trailers the proxy lets through; a message
//! the proxy stopped reading comes out unended, with the content read before it.
#![no_main]

#[path = "../../examples/proxy/backends.rs"]
mod backends;
#[path = "../../examples/proxy/heads.rs"]
mod heads;
#[path = "../../examples/proxy/pool.rs"]
mod pool;
#[path = "../../examples/proxy/proxy.rs"]
mod proxy;
#[path = "../../examples/proxy/reframe.rs"]
mod reframe;
#[path = "../../examples/proxy/upstream.rs"]
mod upstream;

use std::time::Duration;

use libfuzzer_sys::fuzz_target;
use percore::http::{
    parse, BodyFramer, ChunkGrammar, Limits, Method, Parsed, ResponseEvent, ResponseReader, Stream, Trailers,
};
use percore::listen::Address;
use percore::reactor::{ConnId, Harness, PeerReads};

use backends::Backends;
use heads::{Declared, Policy, Route};
use proxy::Proxy;

fuzz_target!(|data: &[u8]| {
    // The first byte picks the path, the backend's end of stream, the client's
    // request, and where the input is cut in two.
    let Some((&choice, input)) = data.split_first() else { return };
    let cut = usize::from(choice >> 3) * input.len() / 31;
    if choice & 1 == 0 {
        requests(input, cut);
    } else {
        responses(input, cut, choice >> 1 & 3, choice & 0b100 != 0);
    }
});

/// A message as its reader found it: its start line, its content (a chunked one's
/// without its framing), its trailers as the proxy writes them, and whether it ended.
#[derive(Debug, Default, PartialEq, Eq)]
struct Message {
    start: Vec<u8>,
    content: Vec<u8>,
    trailers: Vec<u8>,
    ended: bool,
}

fn harness() -> Harness<Proxy> {
    let backends = Backends::new(vec![Address::from(([127, 0, 0, 1], 8080))], Duration::from_secs(10));
    let mut harness = Harness::new(Proxy::new(backends, 4, None, Policy::default()));
    harness.set_peer_reads(PeerReads::AtOnce);
    harness
}

/// The client sends `input` in two reads; the backend answers every request it
/// reads whole. What the backend read must be what the proxy read of `input`.
fn requests(input: &[u8], cut: usize) {
    let mut harness = harness();
    let mut upstreams: Vec<(ConnId, Vec<u8>, usize)> = Vec::new();
    for piece in [&input[..cut], &input[cut..]] {
        harness.receive(piece);
        loop {
            let mut progress = false;
            for (id, _) in harness.connecting() {
                harness.establish(id);
                upstreams.push((id, Vec::new(), 0));
            }
            for (id, received, answered) in &mut upstreams {
                let taken = harness.take_output_of(*id);
                received.extend_from_slice(&taken);
                let read = reference::requests(received)
                    .unwrap_or_else(|e| panic!("{e}: {:?}", String::from_utf8_lossy(received)));
                for _ in read.iter().filter(|message| message.ended).skip(*answered) {
                    harness.receive_on(*id, b"HTTP/1.1 200 OK\r\nContent-Length: 0\r\n\r\n");
                    *answered += 1;
                    progress = true;
                }
                progress |= !taken.is_empty();
            }
            if !progress {
                break;
            }
        }
    }
    let mut forwarded = Vec::new();
    for (_, received, _) in &upstreams {
        forwarded.extend(reference::requests(received).expect("read above"));
    }
    let believed = believed_requests(input);
    assert_eq!(forwarded, believed, "{:?}", String::from_utf8_lossy(input));
}

/// The requests the proxy forwards of `input`, as it reads them: each head whole,
/// then its body by the strict grammar, up to the first it refuses or cannot
/// finish, or the one that closes the connection.
fn believed_requests(input: &[u8]) -> Vec<Message> {
    let (mut messages, mut at) = (Vec::new(), 0);
    loop {
        let Ok(Parsed::Complete(request)) = parse(&input[at..], &Limits::default()) else { break };
        let Ok(route) = Route::of(&request) else { break };
        let start = [request.method_bytes(), b" ", route.target, b" ", version(&request)].concat();
        let mut message = Message { start, ..Message::default() };
        at += request.head_len;
        let mut body = BodyFramer::of(&request).with_grammar(ChunkGrammar::Strict);
        loop {
            let Ok(piece) = body.read(&input[at..]) else { break };
            message.content.extend_from_slice(piece.content);
            at += piece.consumed;
            if piece.ended {
                message.trailers = allowed(&piece.trailers, &Policy::default());
                message.ended = true;
            }
            if piece.ended || piece.consumed == 0 {
                break;
            }
        }
        let go_on = message.ended && request.keep_alive;
        messages.push(message);
        if !go_on {
            break;
        }
    }
    messages
}

fn version(request: &percore::http::Request<'_>) -> &'static [u8] {
    match request.version {
        percore::http::Version::Http10 => b"HTTP/1.0",
        percore::http::Version::Http11 => b"HTTP/1.1",
    }
}

/// The trailers the proxy lets through of `trailers`, as it writes them.
fn allowed(trailers: &Trailers<'_>, policy: &Policy) -> Vec<u8> {
    let mut out = Vec::new();
    heads::forward_trailers(&mut out, trailers, policy);
    out
}

/// One request from the client (`kind`: GET or HEAD, HTTP/1.1 or 1.0); the backend
/// answers with `input`, in two reads, then closes if `closes`. What the client
/// reads must be what the proxy read of `input`.
fn responses(input: &[u8], cut: usize, kind: u8, closes: bool) {
    let (method, request): (Method, &[u8]) = match kind {
        0 => (Method::Get, b"GET / HTTP/1.1\r\nHost: h\r\n\r\n"),
        1 => (Method::Head, b"HEAD / HTTP/1.1\r\nHost: h\r\n\r\n"),
        2 => (Method::Get, b"GET / HTTP/1.0\r\nConnection: keep-alive\r\n\r\n"),
        _ => (Method::Head, b"HEAD / HTTP/1.0\r\n\r\n"),
    };
    let http10 = kind >= 2;
    let mut harness = harness();
    harness.receive(request);
    let (upstream, _) = harness.connecting()[0];
    harness.establish(upstream);
    harness.take_output_of(upstream);
    harness.receive_on(upstream, &input[..cut]);
    harness.receive_on(upstream, &input[cut..]);
    if closes {
        harness.input_end_on(upstream);
    }
    let answer = harness.take_output();
    let client_closed = harness.is_closing(harness.id());
    let read = reference::responses(&answer, method, client_closed)
        .unwrap_or_else(|e| panic!("{e}: {:?}", String::from_utf8_lossy(&answer)));
    let (interim, believed) = believed_responses(input, method, closes, http10);
    assert!(read.len() >= interim.len() && read[..interim.len()] == interim[..], "interim: {read:?}");
    let is_502 = |got: &Message| got.start == b"HTTP/1.1 502 Bad Gateway" && got.ended;
    // An HTTP/1.0 client gets a body without chunks until the close: one cut short
    // looks whole to it (as from nginx; HTTP/1.0 has no other way).
    let unended = |got: &Message| !got.ended || http10;
    match (&read[interim.len()..], believed) {
        ([got], Believed::Final(message)) => assert_eq!(got, &message),
        // Nothing of an answer yet: the client waits, or, the backend gone, gets 502.
        ([], Believed::Nothing) if !closes => {}
        ([got], Believed::Nothing) if closes => assert!(is_502(got), "{got:?}"),
        ([got], Believed::Unended(message)) => {
            assert!(unended(got) && got.start == message.start && got.content == message.content, "{got:?}")
        }
        // The proxy stopped reading the answer: its own 502 if nothing of it went
        // out, else the answer's head and the content read before, cut short.
        ([got], Believed::Broken(None)) => assert!(is_502(got), "{got:?}"),
        ([got], Believed::Broken(Some(message))) => {
            let cut = unended(got) && got.start == message.start && message.content.starts_with(&got.content);
            assert!(is_502(got) || cut, "{got:?} for {message:?}");
        }
        (got, believed) => panic!("{got:?} for {believed:?}"),
    }
}

/// What the proxy makes of a backend's answer, after its interim answers.
#[derive(Debug)]
enum Believed {
    /// No head yet.
    Nothing,
    /// Read whole.
    Final(Message),
    /// Refused, after its head (if any: its start and the content read before).
    Broken(Option<Message>),
    /// Not ended when the input did.
    Unended(Message),
}

/// The answers the proxy reads of `input` to a request of `method`, as the client
/// gets them: the interim ones (none for an HTTP/1.0 client), then the final one.
fn believed_responses(input: &[u8], method: Method, closes: bool, http10: bool) -> (Vec<Message>, Believed) {
    let mut reader = ResponseReader::new(method).with_grammar(ChunkGrammar::Strict);
    let (mut interim, mut at, mut current): (Vec<Message>, usize, Option<Message>) = (Vec::new(), 0, None);
    let stream = if closes { Stream::Ended } else { Stream::Open };
    loop {
        let Ok(framed) = reader.read(&input[at..], stream) else { return (interim, Believed::Broken(current)) };
        match framed.event {
            ResponseEvent::Partial => return (interim, current.map_or(Believed::Nothing, Believed::Unended)),
            ResponseEvent::Head { head, ended } => {
                let start = format!("HTTP/1.1 {} ", head.status()).into_bytes();
                let start = [&start[..], head.reason()].concat();
                let content = input[at + head.as_bytes().len()..at + framed.consumed].to_vec();
                let message = Message { start, content, trailers: Vec::new(), ended };
                at += framed.consumed;
                if head.is_interim() {
                    if !http10 {
                        interim.push(message);
                    }
                    continue;
                }
                let declared = Declared::of(&head);
                if declared.transfer_encoding && !declared.chunked_alone {
                    return (interim, Believed::Broken(None));
                }
                if ended {
                    return (interim, Believed::Final(message));
                }
                current = Some(message);
            }
            ResponseEvent::Body { content, trailers, ended } => {
                let message = current.as_mut().expect("a body after its head");
                message.content.extend_from_slice(content);
                at += framed.consumed;
                if ended {
                    // Trailers go to an HTTP/1.1 client, which gets the chunks too.
                    if !http10 {
                        let all = Policy { underscores_in_headers: true, trust_forwarded_headers: true };
                        message.trailers = allowed(&trailers, &all);
                    }
                    message.ended = true;
                    return (interim, Believed::Final(current.take().expect("the message")));
                }
            }
        }
    }
}

/// The reference: canonical HTTP/1.1 messages, each read whole or left unended at
/// the end of the bytes; anything else is an error, with what was wrong.
mod reference {
    use super::Message;
    use percore::http::Method;

    /// Every request in `bytes`; the last may be unended. The proxy writes a head
    /// whole, so one cut short is an error.
    pub fn requests(bytes: &[u8]) -> Result<Vec<Message>, String> {
        let mut reader = Reader { bytes, at: 0 };
        let mut messages = Vec::new();
        while reader.at < bytes.len() {
            let (start, framing) = reader.head(None)?.ok_or("a head cut short")?;
            messages.push(reader.body(start, framing, false)?);
        }
        Ok(messages)
    }

    /// Every response to a request of `method` in `bytes`, read as a client reads:
    /// until the close (`closed`) for one with neither length nor chunks.
    pub fn responses(bytes: &[u8], method: Method, closed: bool) -> Result<Vec<Message>, String> {
        let mut reader = Reader { bytes, at: 0 };
        let mut messages = Vec::new();
        while reader.at < bytes.len() {
            let (start, framing) = reader.head(Some(method))?.ok_or("a head cut short")?;
            messages.push(reader.body(start, framing, closed)?);
        }
        Ok(messages)
    }

    #[derive(Clone, Copy, Debug, PartialEq, Eq)]
    enum Framing {
        None,
        Length(usize),
        Chunked,
        UntilClose,
    }

    struct Reader<'a> {
        bytes: &'a [u8],
        at: usize,
    }

    impl Reader<'_> {
        /// The next line without its CRLF, if it came whole; a bare CR or LF is an error.
        fn line(&mut self) -> Result<Option<Vec<u8>>, String> {
            let rest = &self.bytes[self.at..];
            let Some(lf) = rest.iter().position(|&b| b == b'\n') else { return Ok(None) };
            if lf == 0 || rest[lf - 1] != b'\r' {
                return Err("a bare LF".into());
            }
            let line = &rest[..lf - 1];
            if line.contains(&b'\r') {
                return Err("a bare CR".into());
            }
            self.at += lf + 1;
            Ok(Some(line.to_vec()))
        }

        /// A head, and how its body is framed; `None` if it did not come whole. A
        /// response's (to `method`) when given, else a request's.
        fn head(&mut self, method: Option<Method>) -> Result<Option<(Vec<u8>, Framing)>, String> {
            let from = self.at;
            let Some(start) = self.line()? else { return Ok(None) };
            let (mut length, mut chunked) = (None, false);
            loop {
                let Some(line) = self.line()? else {
                    self.at = from;
                    return Ok(None);
                };
                if line.is_empty() {
                    break;
                }
                let colon = line.iter().position(|&b| b == b':').ok_or("a field without a colon")?;
                let (name, value) = (&line[..colon], line[colon + 1..].trim_ascii());
                if name.is_empty() || !percore::http::is_token(name) {
                    return Err(format!("a bad field name {:?}", String::from_utf8_lossy(name)));
                }
                if name.eq_ignore_ascii_case(b"content-length") {
                    let value = std::str::from_utf8(value).map_err(|e| e.to_string())?;
                    if length.is_some() || value.is_empty() || !value.bytes().all(|b| b.is_ascii_digit()) {
                        return Err(format!("a second or bad Content-Length {value:?}"));
                    }
                    length = Some(value.parse::<usize>().map_err(|e| e.to_string())?);
                } else if name.eq_ignore_ascii_case(b"transfer-encoding") {
                    if chunked || value != b"chunked" {
                        return Err("a second or other Transfer-Encoding".into());
                    }
                    chunked = true;
                }
            }
            if chunked && length.is_some() {
                return Err("both Content-Length and Transfer-Encoding".into());
            }
            let no_body = method.is_some_and(|method| {
                let status: u16 = std::str::from_utf8(&start[9..start.len().min(12)])
                    .ok()
                    .and_then(|s| s.parse().ok())
                    .unwrap_or(0);
                method == Method::Head || status < 200 || status == 204 || status == 304
            });
            let framing = match (chunked, length) {
                _ if no_body => Framing::None,
                (true, _) => Framing::Chunked,
                (false, Some(length)) => Framing::Length(length),
                (false, None) if method.is_some() => Framing::UntilClose,
                (false, None) => Framing::None,
            };
            Ok(Some((start, framing)))
        }

        /// The body after a head, as far as it came.
        fn body(&mut self, start: Vec<u8>, framing: Framing, closed: bool) -> Result<Message, String> {
            let mut message = Message { start, ..Message::default() };
            let rest = &self.bytes[self.at..];
            match framing {
                Framing::None => message.ended = true,
                Framing::Length(length) => {
                    let take = length.min(rest.len());
                    message.content = rest[..take].to_vec();
                    message.ended = take == length;
                    self.at += take;
                }
                Framing::UntilClose => {
                    message.content = rest.to_vec();
                    message.ended = closed;
                    self.at = self.bytes.len();
                }
                Framing::Chunked => self.chunks(&mut message)?,
            }
            Ok(message)
        }

        /// A chunked body, canonical: sizes in lower-case hex without leading zeros
        /// or extensions, CRLF after each chunk's data.
        fn chunks(&mut self, message: &mut Message) -> Result<(), String> {
            loop {
                let Some(size_line) = self.line()? else { return Ok(()) };
                let text = std::str::from_utf8(&size_line).map_err(|e| e.to_string())?;
                let size = usize::from_str_radix(text, 16).map_err(|_| format!("a size line {text:?}"))?;
                if format!("{size:x}") != text {
                    return Err(format!("a size line not canonical: {text:?}"));
                }
                if size == 0 {
                    loop {
                        let Some(line) = self.line()? else { return Ok(()) };
                        if line.is_empty() {
                            message.ended = true;
                            return Ok(());
                        }
                        message.trailers.extend_from_slice(&line);
                        message.trailers.extend_from_slice(b"\r\n");
                    }
                }
                let rest = &self.bytes[self.at..];
                if rest.len() < size + 2 {
                    message.content.extend_from_slice(&rest[..size.min(rest.len())]);
                    self.at = self.bytes.len();
                    return Ok(());
                }
                if &rest[size..size + 2] != b"\r\n" {
                    return Err("chunk data not followed by CRLF".into());
                }
                message.content.extend_from_slice(&rest[..size]);
                self.at += size + 2;
            }
        }
    }
}
