//! The response framer against two oracles. The input read as a connection's bytes,
//! whole and cut in two: the same responses and the same error either way. And the
//! input read as a recipe for responses (status, version, headers, a body of a given
//! length or chunked, or delimited by the close): the framer frames what was built
//! to exactly what was built, whole and cut anywhere.
#![no_main]

use libfuzzer_sys::arbitrary::{Result, Unstructured};
use libfuzzer_sys::fuzz_target;
use percore::http::{BodyKind, Method, ResponseError, ResponseHead, ResponseReader, Stream};

fuzz_target!(|data: &[u8]| {
    // The first byte picks the method answered and where the rest is cut.
    let Some((&choice, input)) = data.split_first() else { return };
    let method = if choice & 1 == 1 { Method::Head } else { Method::Get };
    let cut = usize::from(choice >> 1) * input.len() / 127;
    let whole = frame(method, &[input]);
    let split = frame(method, &[&input[..cut], &input[cut..]]);
    assert_eq!(split, whole, "cut at {cut}");

    let Ok((bytes, built)) = build(method, &mut Unstructured::new(input)) else { return };
    let cut = cut * bytes.len() / input.len().max(1);
    let expected = (built, None);
    assert_eq!(frame(method, &[&bytes]), expected, "{:?}", String::from_utf8_lossy(&bytes));
    let split = frame(method, &[&bytes[..cut], &bytes[cut..]]);
    assert_eq!(split, expected, "cut at {cut}: {:?}", String::from_utf8_lossy(&bytes));
});

/// Reads `pieces` with one reader as a connection's reads, keeping what it leaves
/// unconsumed for the next, then the end of the stream: every response framed, and
/// the error that ended the framing, if one did.
fn frame(method: Method, pieces: &[&[u8]]) -> (Vec<ResponseHead>, Option<ResponseError>) {
    let (mut reader, mut pending, mut responses) = (ResponseReader::new(method), Vec::new(), Vec::new());
    let reads = pieces.iter().map(|&piece| (piece, Stream::Open));
    for (piece, stream) in reads.chain([(&[][..], Stream::Ended)]) {
        pending.extend_from_slice(piece);
        loop {
            match reader.read(&pending, stream) {
                Ok(framed) => {
                    assert!(framed.consumed <= pending.len(), "consumed more than given");
                    pending.drain(..framed.consumed);
                    match framed.completed {
                        Some(response) => responses.push(response),
                        None => break,
                    }
                }
                Err(error) => return (responses, Some(error)),
            }
        }
    }
    (responses, None)
}

/// Up to 4 responses to `method` built from `recipe`, one after the other, and what
/// each must frame to. One that does not keep the connection is the last.
fn build(method: Method, recipe: &mut Unstructured<'_>) -> Result<(Vec<u8>, Vec<ResponseHead>)> {
    let (mut bytes, mut built) = (Vec::new(), Vec::new());
    for _ in 0..recipe.int_in_range(1..=4)? {
        let (text, head) = build_one(method, recipe)?;
        bytes.extend_from_slice(&text);
        built.push(head);
        if !head.keep_alive {
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

fn build_one(method: Method, recipe: &mut Unstructured<'_>) -> Result<(Vec<u8>, ResponseHead)> {
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
    let mut add = |name: &str, value: &str| {
        head += &format!("{name}:{}{value}{eol}", if value.is_empty() { "" } else { " " })
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
    let mut body = Vec::new();
    let kind = match framing {
        _ if interim => BodyKind::None,
        Framing::Length => {
            add("Content-Length", &body_len.to_string());
            if no_body {
                BodyKind::None
            } else {
                body = vec![b'b'; body_len];
                BodyKind::Length(body_len as u64)
            }
        }
        Framing::Chunked => {
            add("Transfer-Encoding", "chunked");
            if no_body {
                BodyKind::None
            } else {
                body = chunked(body_len, eol, recipe)?;
                BodyKind::Chunked
            }
        }
        Framing::UntilClose if no_body => BodyKind::None,
        Framing::UntilClose => {
            body = vec![b'u'; body_len];
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
    let mut text = head.into_bytes();
    text.extend_from_slice(&body);
    let len = text.len() as u64;
    Ok((text, ResponseHead { status, keep_alive, body: kind, len }))
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
