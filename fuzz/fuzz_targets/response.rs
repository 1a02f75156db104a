//! The response reader against two oracles. The input read as a connection's bytes,
//! whole and cut in two: the same responses (each head, the bytes of each body, its
//! content, and whether each ended) and the same error either way, however the
//! events fell. And
//! the input read as a recipe for responses (status, version, reason, header fields,
//! a body of a given length or chunked, or delimited by the close): the reader reads
//! what was built as exactly what was built, header fields in order, each body's
//! content without its chunk framing, whole and cut anywhere.
#![no_main]

use libfuzzer_sys::arbitrary::{Result, Unstructured};
use libfuzzer_sys::fuzz_target;
use percore::http::{
    BodyKind, Method, ResponseError, ResponseEvent, ResponseHead, ResponseReader, Stream, Version,
};

fuzz_target!(|data: &[u8]| {
    // The first byte picks the method answered and where the rest is cut.
    let Some((&choice, input)) = data.split_first() else { return };
    let method = if choice & 1 == 1 { Method::Head } else { Method::Get };
    let cut = usize::from(choice >> 1) * input.len() / 127;
    let whole = read(method, &[input]);
    let split = read(method, &[&input[..cut], &input[cut..]]);
    assert_eq!(split, whole, "cut at {cut}");

    let Ok((bytes, built)) = build(method, &mut Unstructured::new(input)) else { return };
    let cut = cut * bytes.len() / input.len().max(1);
    let expected = (built, None);
    assert_eq!(read(method, &[&bytes]), expected, "{:?}", String::from_utf8_lossy(&bytes));
    let split = read(method, &[&bytes[..cut], &bytes[cut..]]);
    assert_eq!(split, expected, "cut at {cut}: {:?}", String::from_utf8_lossy(&bytes));
});

/// A response as its events add up: what its head says, the bytes of its body
/// (chunk framing included), its content, and whether it ended.
#[derive(Debug, PartialEq, Eq)]
struct Response {
    status: u16,
    reason: Vec<u8>,
    version: Version,
    keep_alive: bool,
    body: BodyKind,
    headers: Vec<(Vec<u8>, Vec<u8>)>,
    head_len: usize,
    body_len: usize,
    content: Vec<u8>,
    ended: bool,
}

impl Response {
    /// A response that begins with `head`.
    fn of(head: &ResponseHead<'_>) -> Response {
        Response {
            status: head.status(),
            reason: head.reason().to_vec(),
            version: head.version(),
            keep_alive: head.keep_alive(),
            body: head.body(),
            headers: head.headers().map(|(name, value)| (name.to_vec(), value.to_vec())).collect(),
            head_len: head.as_bytes().len(),
            body_len: 0,
            content: Vec::new(),
            ended: false,
        }
    }
}

/// Reads `pieces` with one reader as a connection's reads, keeping what it leaves
/// unconsumed for the next, then the end of the stream: the responses the events add
/// up to, and the error that ended the reading, if one did.
fn read(method: Method, pieces: &[&[u8]]) -> (Vec<Response>, Option<ResponseError>) {
    let (mut reader, mut pending, mut responses) =
        (ResponseReader::new(method), Vec::new(), Vec::<Response>::new());
    let reads = pieces.iter().map(|&piece| (piece, Stream::Open));
    for (piece, stream) in reads.chain([(&[][..], Stream::Ended)]) {
        pending.extend_from_slice(piece);
        loop {
            let framed = match reader.read(&pending, stream) {
                Ok(framed) => framed,
                Err(error) => {
                    // The body bytes told before an error depend on where the reads
                    // were cut: the call that fails tells none of its own.
                    if let Some(last) = responses.last_mut().filter(|last| !last.ended) {
                        last.body_len = 0;
                        last.content.clear();
                    }
                    return (responses, Some(error));
                }
            };
            assert!(framed.consumed <= pending.len(), "consumed more than given");
            match framed.event {
                ResponseEvent::Partial => break,
                ResponseEvent::Head { head, ended } => {
                    assert!(responses.last().is_none_or(|last| last.ended), "a head within a response");
                    let head_len = head.as_bytes().len();
                    assert!(ended || framed.consumed == head_len, "a head alone is its length");
                    responses.push(Response {
                        body_len: framed.consumed - head_len,
                        content: pending[head_len..framed.consumed].to_vec(),
                        ended,
                        ..Response::of(&head)
                    });
                }
                ResponseEvent::Body { content, ended, .. } => {
                    let start = framed.consumed - content.len();
                    assert_eq!(content.as_ptr(), pending[start..].as_ptr(), "the last bytes consumed");
                    let last =
                        responses.last_mut().filter(|last| !last.ended).expect("a body after its head");
                    last.body_len += framed.consumed;
                    last.content.extend_from_slice(content);
                    last.ended = ended;
                }
            }
            pending.drain(..framed.consumed);
        }
    }
    (responses, None)
}

/// Up to 4 responses to `method` built from `recipe`, one after the other, and what
/// each must frame to. One that does not keep the connection is the last.
fn build(method: Method, recipe: &mut Unstructured<'_>) -> Result<(Vec<u8>, Vec<Response>)> {
    let (mut bytes, mut built) = (Vec::new(), Vec::new());
    for _ in 0..recipe.int_in_range(1..=4)? {
        let (text, response) = build_one(method, recipe)?;
        bytes.extend_from_slice(&text);
        let keep_alive = response.keep_alive;
        built.push(response);
        if !keep_alive {
            break;
        }
    }
    Ok((bytes, built))
}

/// How a built response's body is delimited.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Framing {
    Length,
    Chunked,
    UntilClose,
}

fn build_one(method: Method, recipe: &mut Unstructured<'_>) -> Result<(Vec<u8>, Response)> {
    let status = *recipe.choose(&[200u16, 201, 204, 206, 301, 304, 404, 500, 503, 100, 103])?;
    let http10 = recipe.ratio(1, 4)?;
    let eol = if recipe.ratio(1, 5)? { "\n" } else { "\r\n" };
    let reason = *recipe.choose(&["OK", "", "Not Found", "Any Reason At All"])?;
    let connection = *recipe.choose(&[
        None,
        Some("close"),
        Some("keep-alive"),
        Some("Upgrade, Close"),
        Some("Keep-Alive, close"),
    ])?;
    let framing = *recipe.choose(&[Framing::Length, Framing::Chunked, Framing::UntilClose])?;
    let no_body = method == Method::Head || matches!(status, 100..=199 | 204 | 304);
    let interim = (100..200).contains(&status);

    let version = if http10 { "HTTP/1.0" } else { "HTTP/1.1" };
    let mut head = format!("{version} {status} {reason}{eol}");
    let mut headers = Vec::new();
    let mut add = |name: &str, value: &str| {
        head += &format!("{name}:{}{value}{eol}", if value.is_empty() { "" } else { " " });
        headers.push((name.as_bytes().to_vec(), value.as_bytes().to_vec()));
    };
    for _ in 0..recipe.int_in_range(0..=3)? {
        let name = *recipe.choose(&["Server", "Date", "X-Any", "Cache-Control", "content-type"])?;
        let value: String = recipe
            .arbitrary::<String>()?
            .chars()
            .filter(|c| c.is_ascii_graphic() || *c == ' ')
            .take(40)
            .collect();
        add(name, value.trim());
    }
    if let Some(value) = connection.filter(|_| !interim) {
        add("Connection", value);
    }
    let body_len = recipe.int_in_range(0..=300usize)?;
    let (mut body, mut content) = (Vec::new(), Vec::new());
    let kind = match framing {
        _ if interim => BodyKind::None,
        Framing::Length => {
            add("Content-Length", &body_len.to_string());
            if no_body {
                BodyKind::None
            } else {
                body = vec![b'b'; body_len];
                content = body.clone();
                BodyKind::Length(body_len as u64)
            }
        }
        Framing::Chunked => {
            add("Transfer-Encoding", "chunked");
            if no_body {
                BodyKind::None
            } else {
                body = chunked(body_len, eol, recipe)?;
                content = vec![b'c'; body_len];
                BodyKind::Chunked
            }
        }
        Framing::UntilClose if no_body => BodyKind::None,
        Framing::UntilClose => {
            body = vec![b'u'; body_len];
            content = body.clone();
            BodyKind::UntilClose
        }
    };
    head += eol;
    let options = connection.map(str::to_ascii_lowercase).unwrap_or_default();
    let (close, keep) = (options.contains("close"), options.contains("keep-alive"));
    let keep_alive = match kind {
        // No Connection header on an interim response: only the version decides.
        _ if interim => !http10,
        BodyKind::UntilClose => false,
        // An HTTP/1.0 response cannot be chunked: ambiguous, so never kept, with a
        // body or not.
        _ if http10 && framing == Framing::Chunked => false,
        _ if http10 => keep && !close,
        _ => !close,
    };
    let response = Response {
        status,
        reason: reason.as_bytes().to_vec(),
        version: if http10 { Version::Http10 } else { Version::Http11 },
        keep_alive,
        body: kind,
        headers,
        head_len: head.len(),
        body_len: body.len(),
        content,
        ended: true,
    };
    let mut text = head.into_bytes();
    text.extend_from_slice(&body);
    Ok((text, response))
}

/// `len` bytes of data in chunks of sizes the recipe picks (in hex of either case,
/// some with extensions), the last chunk, and maybe a trailer.
fn chunked(mut len: usize, eol: &str, recipe: &mut Unstructured<'_>) -> Result<Vec<u8>> {
    let mut body = String::new();
    while len > 0 {
        let size = recipe.int_in_range(1..=len)?;
        let hex = if recipe.ratio(1, 2)? { format!("{size:X}") } else { format!("{size:x}") };
        let extension = if recipe.ratio(1, 4)? { ";name=value" } else { "" };
        body += &format!("{hex}{extension}{eol}{}{eol}", "c".repeat(size));
        len -= size;
    }
    body += &format!("0{eol}");
    if recipe.ratio(1, 3)? {
        body += &format!("X-Trailer: t{eol}");
    }
    body += eol;
    Ok(body.into_bytes())
}
