//! The heads the proxy writes: a request's on to its backend and a response's back
//! to its client, each without the fields that belong to one connection, and the
//! proxy's own short answers (400, 502, 504).
//!
//! Hop-by-hop fields (RFC 9110, 7.6.1) describe one connection and are never
//! forwarded: `Connection`, every field it names, and `Keep-Alive`,
//! `Proxy-Connection`, `TE`, `Trailer` and `Upgrade`. `Transfer-Encoding` is
//! hop-by-hop too, but bodies cross unchanged, chunk framing and trailers
//! included, so the framing a head gives is the framing of the bytes that follow
//! it, and stays. A field `Connection` names is removed unless it frames the
//! message or names its host (`Content-Length`, `Transfer-Encoding`, `Host`): a
//! client must not make the backend read a body other than the one the proxy
//! framed.

use std::io::Write;
use std::net::IpAddr;

use percore::http::{Method, Request, ResponseHead, Version};

/// Fields that are hop-by-hop whatever `Connection` says.
const HOP_BY_HOP: [&[u8]; 6] =
    [b"connection", b"keep-alive", b"proxy-connection", b"te", b"trailer", b"upgrade"];

/// Fields that stay even when `Connection` names them.
const END_TO_END: [&[u8]; 3] = [b"content-length", b"transfer-encoding", b"host"];

/// What the client's connection does after an answer, as the answer tells it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Persist {
    /// Stays open, as HTTP/1.1 does by default.
    Keep,
    /// Stays open for an HTTP/1.0 client that asked: the answer says so.
    KeepAlive10,
    /// Closes after the answer: `Connection: close`.
    Close,
}

impl Persist {
    /// For a client of `version` whose connection stays open if `keep`.
    pub fn of(keep: bool, version: Version) -> Persist {
        match (keep, version) {
            (false, _) => Persist::Close,
            (true, Version::Http10) => Persist::KeepAlive10,
            (true, Version::Http11) => Persist::Keep,
        }
    }

    fn field(self) -> &'static [u8] {
        match self {
            Persist::Keep => b"",
            Persist::KeepAlive10 => b"Connection: keep-alive\r\n",
            Persist::Close => b"Connection: close\r\n",
        }
    }
}

/// Writes to `out` the head of `request` as it goes to a backend: its request line
/// and its end-to-end fields as they came, then `X-Forwarded-For` with `client`
/// added to what the request said (nginx's `$proxy_add_x_forwarded_for`). The
/// backend connection is kept alive: HTTP/1.1 keeps it by default, an HTTP/1.0
/// request (sent on as one, so that the backend answers as to an HTTP/1.0 client)
/// asks for it.
pub fn forward_request(out: &mut Vec<u8>, request: &Request<'_>, client: Option<IpAddr>) {
    let version: &[u8] = match request.version {
        Version::Http10 => b"HTTP/1.0",
        Version::Http11 => b"HTTP/1.1",
    };
    for part in [request.method_bytes(), b" ", request.target, b" ", version, b"\r\n"] {
        out.extend_from_slice(part);
    }
    let fields = request.headers();
    let mut forwarded_for = Vec::new();
    for (name, value) in end_to_end(fields) {
        if name.eq_ignore_ascii_case(b"x-forwarded-for") {
            forwarded_for.push(value);
        } else {
            write_field(out, name, value);
        }
    }
    out.extend_from_slice(b"X-Forwarded-For: ");
    for value in forwarded_for {
        out.extend_from_slice(value);
        out.extend_from_slice(b", ");
    }
    // Writing to a Vec cannot fail.
    let _ = match client {
        Some(ip) => write!(out, "{}\r\n", ip.to_canonical()),
        None => write!(out, "unknown\r\n"),
    };
    if request.version == Version::Http10 {
        out.extend_from_slice(b"Connection: keep-alive\r\n");
    }
    out.extend_from_slice(b"\r\n");
}

/// Writes to `out` the head of `head`, a backend's response, as it goes to the
/// client: the status line as HTTP/1.1 (the proxy's version, whatever the backend
/// spoke), its end-to-end fields as they came, and what `persist` says.
pub fn forward_response(out: &mut Vec<u8>, head: &ResponseHead<'_>, persist: Persist) {
    let _ = write!(out, "HTTP/1.1 {} ", head.status());
    out.extend_from_slice(head.reason());
    out.extend_from_slice(b"\r\n");
    for (name, value) in end_to_end(head.headers()) {
        write_field(out, name, value);
    }
    out.extend_from_slice(persist.field());
    out.extend_from_slice(b"\r\n");
}

/// Writes to `out` the proxy's own answer `status` (400, 502, 504) with a short
/// text body, none to a `HEAD`.
pub fn answer(out: &mut Vec<u8>, status: u16, method: Method, persist: Persist) {
    let reason = match status {
        400 => "Bad Request",
        414 => "URI Too Long",
        431 => "Request Header Fields Too Large",
        502 => "Bad Gateway",
        504 => "Gateway Timeout",
        505 => "HTTP Version Not Supported",
        _ => "Error",
    };
    let body = format!("{status} {reason}\n");
    let _ = write!(
        out,
        "HTTP/1.1 {status} {reason}\r\nContent-Type: text/plain\r\nContent-Length: {}\r\n",
        body.len()
    );
    out.extend_from_slice(persist.field());
    out.extend_from_slice(b"\r\n");
    if method != Method::Head {
        out.extend_from_slice(body.as_bytes());
    }
}

/// The end-to-end fields of a head's `fields`, in order.
fn end_to_end<'a>(
    fields: impl Iterator<Item = (&'a [u8], &'a [u8])> + Clone,
) -> impl Iterator<Item = (&'a [u8], &'a [u8])> {
    // The `Connection` values, found in one walk (a head has one at most, as a
    // rule): a walk per field, as a filter over the fields would make, costs the
    // head's parse again for each of its fields.
    let named: Vec<&[u8]> = fields
        .clone()
        .filter(|(name, _)| name.eq_ignore_ascii_case(b"connection"))
        .map(|(_, options)| options)
        .collect();
    fields.filter(move |(name, _)| {
        let eq = |other: &&[u8]| name.eq_ignore_ascii_case(other);
        if HOP_BY_HOP.iter().any(eq) {
            return false;
        }
        END_TO_END.iter().any(eq) || !named.iter().any(|options| lists(options, name))
    })
}

/// Whether the comma-separated list `options` (a `Connection` value) has `name`.
fn lists(options: &[u8], name: &[u8]) -> bool {
    options.split(|&b| b == b',').any(|option| option.trim_ascii().eq_ignore_ascii_case(name))
}

fn write_field(out: &mut Vec<u8>, name: &[u8], value: &[u8]) {
    for part in [name, b": ", value, b"\r\n"] {
        out.extend_from_slice(part);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use percore::http::{parse, Limits, Parsed, ResponseEvent, ResponseReader, Stream};

    fn forwarded(request: &[u8], client: Option<IpAddr>) -> String {
        let Ok(Parsed::Complete(request)) = parse(request, &Limits::default()) else {
            panic!("a whole head")
        };
        let mut out = Vec::new();
        forward_request(&mut out, &request, client);
        String::from_utf8(out).expect("UTF-8")
    }

    #[test]
    fn a_request_loses_its_hop_by_hop_fields_and_gains_x_forwarded_for() {
        let request = b"GET /a?b HTTP/1.1\r\nHost: h\r\nConnection: keep-alive, X-Secret, Content-Length\r\n\
            Keep-Alive: 5\r\nX-Secret: s\r\nTE: trailers\r\nUpgrade: h2c\r\nProxy-Connection: x\r\n\
            Trailer: X-T\r\nAccept: */*\r\nContent-Length: 0\r\n\r\n";
        let client = Some(IpAddr::from([10, 0, 0, 7]));
        assert_eq!(
            forwarded(request, client),
            "GET /a?b HTTP/1.1\r\nHost: h\r\nAccept: */*\r\nContent-Length: 0\r\n\
             X-Forwarded-For: 10.0.0.7\r\n\r\n"
        );
    }

    #[test]
    fn x_forwarded_for_appends_to_what_the_client_said_and_http_1_0_asks_for_keep_alive() {
        let request =
            b"POST /p HTTP/1.0\r\nX-Forwarded-For: 1.1.1.1\r\nx-forwarded-for: 2.2.2.2, 3.3.3.3\r\n\
            Content-Length: 2\r\n\r\nhi";
        let client = Some("::ffff:127.0.0.1".parse().expect("an address"));
        assert_eq!(
            forwarded(request, client),
            "POST /p HTTP/1.0\r\nContent-Length: 2\r\nX-Forwarded-For: 1.1.1.1, 2.2.2.2, 3.3.3.3, 127.0.0.1\r\n\
             Connection: keep-alive\r\n\r\n"
        );
    }

    #[test]
    fn a_response_loses_its_hop_by_hop_fields_and_says_what_the_client_connection_does() {
        let input = b"HTTP/1.0 200 Fine\r\nConnection: close, X-Hop\r\nX-Hop: 1\r\nKeep-Alive: 3\r\n\
            Transfer-Encoding: chunked\r\nX-End: 2\r\n\r\n";
        let framed = ResponseReader::default().read(input, Stream::Open).expect("a head");
        let ResponseEvent::Head { head, .. } = framed.event else { panic!("a head") };
        let rewritten = |persist| {
            let mut out = Vec::new();
            forward_response(&mut out, &head, persist);
            String::from_utf8(out).expect("UTF-8")
        };
        let fields = "Transfer-Encoding: chunked\r\nX-End: 2\r\n";
        assert_eq!(rewritten(Persist::Keep), format!("HTTP/1.1 200 Fine\r\n{fields}\r\n"));
        assert_eq!(
            rewritten(Persist::KeepAlive10),
            format!("HTTP/1.1 200 Fine\r\n{fields}Connection: keep-alive\r\n\r\n")
        );
        assert_eq!(
            rewritten(Persist::Close),
            format!("HTTP/1.1 200 Fine\r\n{fields}Connection: close\r\n\r\n")
        );
    }

    #[test]
    fn the_proxys_own_answers_have_a_short_body_but_to_head() {
        let mut out = Vec::new();
        answer(&mut out, 502, Method::Get, Persist::Close);
        assert_eq!(
            String::from_utf8_lossy(&out),
            "HTTP/1.1 502 Bad Gateway\r\nContent-Type: text/plain\r\nContent-Length: 16\r\n\
             Connection: close\r\n\r\n502 Bad Gateway\n"
        );
        out.clear();
        answer(&mut out, 504, Method::Head, Persist::Keep);
        assert!(out.ends_with(b"Content-Length: 20\r\n\r\n"), "{}", String::from_utf8_lossy(&out));
    }
}
