//! The heads the proxy writes: a request's on to its backend and a response's back
//! to its client, each without the fields that belong to one connection and with
//! the framing the proxy gives the body itself, and the proxy's own short answers
//! (400, 405, 502, 504).
//!
//! Hop-by-hop fields (RFC 9110, 7.6.1) describe one connection and are never
//! forwarded: `Connection`, every field it names, and `Keep-Alive`,
//! `Proxy-Connection`, `TE`, `Trailer` and `Upgrade`. The framing fields
//! (`Content-Length`, `Transfer-Encoding`) are never forwarded either: the proxy
//! reads each body by its sender's framing and sends it on under its own (see
//! `reframe.rs`), so what the next hop frames is what the proxy framed. A field
//! `Connection` names is removed unless it names the host, so that a client cannot
//! strip the `Host` the backend routes by.

use std::io::Write;
use std::net::IpAddr;

use percore::http::{Method, Request, ResponseHead, Trailers, Version};

use crate::reframe::Outgoing;

/// Fields that are hop-by-hop whatever `Connection` says.
const HOP_BY_HOP: [&[u8]; 6] =
    [b"connection", b"keep-alive", b"proxy-connection", b"te", b"trailer", b"upgrade"];

/// Fields that frame a body: the proxy writes its own.
const FRAMING: [&[u8]; 2] = [b"content-length", b"transfer-encoding"];

/// Fields that tell a backend who the client is, or how it came: the client's word
/// alone, dropped unless the proxy is told to trust it (`--trust-forwarded-headers`).
const FORWARDING: [&[u8]; 2] = [b"forwarded", b"x-real-ip"];

/// Fields a trailer section may not carry on (RFC 9110, 6.5.1): those that frame
/// or route a message, modify a request, control a response, authenticate, or say
/// how the content is to be read. A recipient that merges trailers into the head
/// (as many do) would act on them after the proxy decided by the head alone.
const NOT_IN_TRAILERS: [&[u8]; 27] = [
    b"content-length",
    b"transfer-encoding",
    b"host",
    b"connection",
    b"keep-alive",
    b"proxy-connection",
    b"te",
    b"trailer",
    b"upgrade",
    b"content-type",
    b"content-encoding",
    b"content-range",
    b"expect",
    b"max-forwards",
    b"range",
    b"if-match",
    b"if-none-match",
    b"if-modified-since",
    b"if-unmodified-since",
    b"if-range",
    b"cache-control",
    b"authorization",
    b"proxy-authorization",
    b"cookie",
    b"set-cookie",
    b"www-authenticate",
    b"location",
];

/// What the proxy lets through of what a client says about itself.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Policy {
    /// Header fields whose names have an underscore go on (nginx's
    /// `underscores_in_headers on`); by default they are dropped, as a backend may
    /// read `X_Forwarded_For` as `X-Forwarded-For` (CGI and its heirs do).
    pub underscores_in_headers: bool,
    /// The client's `Forwarded`, `X-Real-IP` and `X-Forwarded-*` go on, and its
    /// `X-Forwarded-For` gets the client's address added (nginx's
    /// `$proxy_add_x_forwarded_for`): for a proxy behind another that sets them. By
    /// default they are dropped, and `X-Forwarded-For` is the client's address
    /// alone: a client could say anything in them.
    pub trust_forwarded_headers: bool,
}

impl Policy {
    /// Whether a client's field `name` goes on to the backend (the framing and
    /// hop-by-hop fields aside).
    fn lets_through(&self, name: &[u8]) -> bool {
        if !self.underscores_in_headers && name.contains(&b'_') {
            return false;
        }
        self.trust_forwarded_headers || !is_forwarding(name)
    }
}

/// Who a request came from, as its backend is told: the client's address
/// (`X-Forwarded-For`) and whether it spoke TLS to the proxy (`X-Forwarded-Proto:
/// https`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Origin {
    /// The client's address, if the socket told it.
    pub addr: Option<IpAddr>,
    /// How the client spoke to the proxy.
    pub scheme: Scheme,
}

/// How a client spoke to the proxy.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Scheme {
    /// Plain HTTP: the backend is told nothing (no `X-Forwarded-Proto`).
    Http,
    /// HTTPS, the proxy ending the TLS: `X-Forwarded-Proto: https`.
    Https,
}

impl Scheme {
    /// How the client of connection `io` speaks (TLS only with the library's `tls`
    /// feature, which the workspace's build turns on).
    pub fn of(io: &percore::reactor::Io<'_>) -> Scheme {
        #[cfg(feature = "tls")]
        if io.tls().is_some() {
            return Scheme::Https;
        }
        let _ = io;
        Scheme::Http
    }
}

/// `Forwarded`, `X-Real-IP` and `X-Forwarded-*`.
fn is_forwarding(name: &[u8]) -> bool {
    let prefix = b"x-forwarded-";
    FORWARDING.iter().any(|field| name.eq_ignore_ascii_case(field))
        || name.len() >= prefix.len() && name[..prefix.len()].eq_ignore_ascii_case(prefix)
}

/// Why a request is answered by the proxy itself.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Refusal {
    /// `CONNECT`: the proxy is no tunnel (405, as nginx answers).
    Connect,
    /// An absolute-form target that is not `http://` or `https://` with a host, or
    /// that names another host than the `Host` field (400).
    Target,
}

impl Refusal {
    pub fn status(self) -> u16 {
        match self {
            Refusal::Connect => 405,
            Refusal::Target => 400,
        }
    }
}

/// Where a request goes: its target in origin form, and the host it names when its
/// target named one (an absolute-form target, RFC 9112, 3.2.2).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Route<'a> {
    pub target: &'a [u8],
    pub host: Option<&'a [u8]>,
}

impl<'a> Route<'a> {
    /// The route of `request`: an absolute-form target is rewritten to origin form,
    /// its authority the host (a `Host` field that names another is refused, as a
    /// backend that routes by `Host` would go elsewhere than the proxy judged);
    /// `CONNECT` is refused.
    pub fn of(request: &Request<'a>) -> Result<Route<'a>, Refusal> {
        if request.method == Method::Connect {
            return Err(Refusal::Connect);
        }
        let target = request.target;
        if target.starts_with(b"/") || target == b"*" {
            return Ok(Route { target, host: None });
        }
        // Anything else is the absolute form or nothing (the authority form is
        // CONNECT's alone).
        let rest = after_http_scheme(target).ok_or(Refusal::Target)?;
        let path_at = rest.iter().position(|&b| b == b'/' || b == b'?').unwrap_or(rest.len());
        let (authority, path) = rest.split_at(path_at);
        if authority.is_empty() || authority.contains(&b'@') {
            return Err(Refusal::Target);
        }
        if request.host.is_some_and(|host| !host.eq_ignore_ascii_case(authority)) {
            return Err(Refusal::Target);
        }
        let target = match path {
            [] => &b"/"[..],
            // `http://h?q` is `/?q` in origin form (RFC 9112, 3.2.1): a slash the
            // route would have to add. Refused: no client sends it.
            [b'?', ..] => return Err(Refusal::Target),
            path => path,
        };
        Ok(Route { target, host: Some(authority) })
    }
}

/// The rest of an absolute-form target after `http://` or `https://` (in any case);
/// `None` for any other scheme.
fn after_http_scheme(target: &[u8]) -> Option<&[u8]> {
    ["http://", "https://"].iter().find_map(|scheme| {
        let scheme = scheme.as_bytes();
        (target.len() >= scheme.len() && target[..scheme.len()].eq_ignore_ascii_case(scheme))
            .then(|| &target[scheme.len()..])
    })
}

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

/// Writes to `out` the head of `request` as it goes to a backend by `route`: its
/// request line with the route's target, its end-to-end fields as they came but for
/// those `policy` drops (and `Host` if the route names the host: then that one
/// first), `X-Forwarded-For` with the client's address and, if it spoke TLS,
/// `X-Forwarded-Proto: https` (unless a trusted one came: `policy`), and the
/// framing of the body as the proxy sends it (`body`). The backend connection is kept alive: HTTP/1.1 keeps it by
/// default, an HTTP/1.0 request (sent on as one, so that the backend answers as to
/// an HTTP/1.0 client) asks for it.
pub fn forward_request(
    out: &mut Vec<u8>,
    request: &Request<'_>,
    route: &Route<'_>,
    client: &Origin,
    policy: &Policy,
    body: Outgoing,
) {
    let version: &[u8] = match request.version {
        Version::Http10 => b"HTTP/1.0",
        Version::Http11 => b"HTTP/1.1",
    };
    for part in [request.method_bytes(), b" ", route.target, b" ", version, b"\r\n"] {
        out.extend_from_slice(part);
    }
    if let Some(host) = route.host {
        write_field(out, b"Host", host);
    }
    let mut forwarded_for = Vec::new();
    let mut proto_said = false;
    for (name, value) in end_to_end(request.headers()) {
        if !policy.lets_through(name) || route.host.is_some() && name.eq_ignore_ascii_case(b"host") {
            continue;
        }
        if name.eq_ignore_ascii_case(b"x-forwarded-for") {
            forwarded_for.push(value);
        } else {
            proto_said |= name.eq_ignore_ascii_case(b"x-forwarded-proto");
            write_field(out, name, value);
        }
    }
    if client.scheme == Scheme::Https && !proto_said {
        out.extend_from_slice(b"X-Forwarded-Proto: https\r\n");
    }
    out.extend_from_slice(b"X-Forwarded-For: ");
    for value in forwarded_for {
        out.extend_from_slice(value);
        out.extend_from_slice(b", ");
    }
    // Writing to a Vec cannot fail.
    let _ = match client.addr {
        Some(ip) => write!(out, "{}\r\n", ip.to_canonical()),
        None => write!(out, "unknown\r\n"),
    };
    body.write_field(out);
    if request.version == Version::Http10 {
        out.extend_from_slice(b"Connection: keep-alive\r\n");
    }
    out.extend_from_slice(b"\r\n");
}

/// Writes to `out` the head of `head`, a backend's response, as it goes to the
/// client: the status line as HTTP/1.1 (the proxy's version, whatever the backend
/// spoke), its end-to-end fields as they came, the framing `framing` gives, and what
/// `persist` says.
pub fn forward_response(out: &mut Vec<u8>, head: &ResponseHead<'_>, framing: Outgoing, persist: Persist) {
    let _ = write!(out, "HTTP/1.1 {} ", head.status());
    out.extend_from_slice(head.reason());
    out.extend_from_slice(b"\r\n");
    for (name, value) in end_to_end(head.headers()) {
        write_field(out, name, value);
    }
    framing.write_field(out);
    out.extend_from_slice(persist.field());
    out.extend_from_slice(b"\r\n");
}

/// Writes to `out` the fields of `trailers` that may go on: none that frames,
/// routes or controls the message, and none `policy` drops.
pub fn forward_trailers(out: &mut Vec<u8>, trailers: &Trailers<'_>, policy: &Policy) {
    for (name, value) in trailers.fields() {
        if NOT_IN_TRAILERS.iter().any(|field| name.eq_ignore_ascii_case(field)) || !policy.lets_through(name)
        {
            continue;
        }
        write_field(out, name, value);
    }
}

/// What a response's framing fields say, the proxy's own framing aside.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Declared {
    /// The `Content-Length` it gave (the reader refused unequal ones).
    pub length: Option<u64>,
    /// It gave a `Transfer-Encoding`.
    pub transfer_encoding: bool,
    /// Its `Transfer-Encoding` is `chunked` alone: a body the proxy can read and
    /// frame again. Any other coding (`gzip, chunked`, `identity`) it refuses.
    pub chunked_alone: bool,
}

impl Declared {
    pub fn of(head: &ResponseHead<'_>) -> Declared {
        let mut declared = Declared { length: None, transfer_encoding: false, chunked_alone: false };
        let mut codings = 0;
        for (name, value) in head.headers() {
            if name.eq_ignore_ascii_case(b"content-length") {
                declared.length = std::str::from_utf8(value).ok().and_then(|value| value.parse().ok());
            } else if name.eq_ignore_ascii_case(b"transfer-encoding") {
                declared.transfer_encoding = true;
                for coding in value.split(|&b| b == b',').map(<[u8]>::trim_ascii).filter(|c| !c.is_empty()) {
                    codings += 1;
                    declared.chunked_alone = codings == 1 && coding.eq_ignore_ascii_case(b"chunked");
                }
            }
        }
        declared.chunked_alone &= codings == 1;
        declared
    }

    /// Both a length and a transfer coding: framing a peer may read either way
    /// (RFC 9112, 6.3: the length is removed, and the connection closed after).
    pub fn is_ambiguous(&self) -> bool {
        self.length.is_some() && self.transfer_encoding
    }
}

/// Writes to `out` the proxy's own answer `status` (400, 405, 502, 504) with a
/// short text body, none to a `HEAD`.
pub fn answer(out: &mut Vec<u8>, status: u16, method: Method, persist: Persist) {
    let reason = match status {
        400 => "Bad Request",
        405 => "Method Not Allowed",
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

/// The end-to-end fields of a head's `fields`, in order, but for the framing ones.
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
        if HOP_BY_HOP.iter().any(eq) || FRAMING.iter().any(eq) {
            return false;
        }
        name.eq_ignore_ascii_case(b"host") || !named.iter().any(|options| lists(options, name))
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
mod tests;
