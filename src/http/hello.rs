//! [`Hello`]: every `GET` or `HEAD` on any path gets the one prebuilt response.

use std::time::SystemTime;

use super::parse::{Limits, Method, Progress, Status, Version};
use super::prebuilt::{http_date, Response, Variants};
use crate::reactor::{Counts, Protocol, Verdict, OUTPUT_BUDGET};

/// What [`Hello`] answers with, and the limits it enforces.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct HelloConfig {
    /// The body of every `200` response.
    pub body: Vec<u8>,
    /// Its `Content-Type`.
    pub content_type: String,
    /// Size limits of a request head.
    pub limits: Limits,
    /// Largest request body read (and dropped) before answering; larger gets `413`.
    pub max_body: u64,
}

impl Default for HelloConfig {
    fn default() -> HelloConfig {
        HelloConfig {
            body: b"hello, world!\n".to_vec(),
            content_type: "text/plain".into(),
            limits: Limits::default(),
            max_body: 1024 * 1024,
        }
    }
}

/// The hello server's protocol: parses each request head, skips any body, and
/// appends a prebuilt response; errors get a prebuilt error response and a close.
///
/// ```
/// use percore::http::{Hello, HelloConfig, HelloConn};
/// use percore::reactor::Protocol;
///
/// let mut hello = Hello::new(&HelloConfig::default());
/// let (mut conn, mut out) = (HelloConn::default(), Vec::new());
/// let two = b"GET / HTTP/1.1\r\nHost: a\r\n\r\nHEAD / HTTP/1.0\r\n\r\n";
/// let verdict = hello.on_data(&mut conn, two, &mut out);
/// assert_eq!(verdict.consumed, two.len());
/// assert!(!verdict.keep_open, "HTTP/1.0 without keep-alive closes");
/// let text = String::from_utf8(out).unwrap();
/// assert!(text.starts_with("HTTP/1.1 200 OK\r\nServer: percore\r\nDate: "));
/// assert_eq!(text.matches("hello, world!\n").count(), 1, "HEAD gets no body");
/// assert!(text.ends_with("Connection: close\r\n\r\n"));
/// ```
#[derive(Debug)]
pub struct Hello {
    ok: Variants,
    not_allowed: Variants,
    errors: Vec<(u16, Response)>,
    limits: Limits,
    max_body: u64,
    draining: bool,
    counts: Counts,
}

/// Per-connection state of [`Hello`]: the resumable parse of a head that arrives in
/// pieces, and the bytes of a request body still to be skipped.
#[derive(Clone, Copy, Debug, Default)]
pub struct HelloConn {
    progress: Progress,
    body_left: u64,
}

impl Hello {
    /// Builds every response `config` asks for.
    pub fn new(config: &HelloConfig) -> Hello {
        let errors = [
            (400, "400 Bad Request", "bad request\n"),
            (413, "413 Content Too Large", "content too large\n"),
            (414, "414 URI Too Long", "uri too long\n"),
            (431, "431 Request Header Fields Too Large", "request header fields too large\n"),
            (501, "501 Not Implemented", "chunked request bodies are not supported\n"),
            (505, "505 HTTP Version Not Supported", "http version not supported\n"),
        ];
        let errors = errors
            .into_iter()
            .map(|(code, status, body)| {
                let response =
                    Response::new(status, "text/plain", &[("Connection", "close")], body.as_bytes());
                (code, response)
            })
            .collect();
        Hello {
            ok: Variants::new("200 OK", &config.content_type, &[], &config.body),
            not_allowed: Variants::new(
                "405 Method Not Allowed",
                "text/plain",
                &[("Allow", "GET, HEAD")],
                b"method not allowed\n",
            ),
            errors,
            limits: config.limits,
            max_body: config.max_body,
            draining: false,
            counts: Counts::default(),
        }
    }

    /// Appends the error response for `code` and counts it.
    fn refuse(&mut self, code: u16, out: &mut Vec<u8>) {
        let (_, response) = self.errors.iter().find(|(c, _)| *c == code).unwrap_or(&self.errors[0]);
        out.extend_from_slice(response.bytes());
        self.counts.requests += 1;
        self.counts.errors += 1;
    }
}

impl Protocol for Hello {
    type Conn = HelloConn;

    fn on_data(&mut self, conn: &mut HelloConn, input: &[u8], out: &mut Vec<u8>) -> Verdict {
        let mut at = 0;
        loop {
            if out.len() >= OUTPUT_BUDGET {
                // Many pipelined requests for a large body: the loop calls again once
                // the peer has taken this much.
                return Verdict::keep(at);
            }
            let skipped = conn.body_left.min((input.len() - at) as u64);
            conn.body_left -= skipped;
            at += skipped as usize;
            if at == input.len() {
                return Verdict::keep(at);
            }
            let request = match conn.progress.parse(&input[at..], &self.limits) {
                Ok(Status::Complete(request)) => request,
                Ok(Status::Partial) => return Verdict::keep(at),
                Err(e) => {
                    self.refuse(e.status(), out);
                    return Verdict::close(at);
                }
            };
            at += request.head_len;
            // A chunked body's end would need the chunk parse; refuse rather than guess.
            conn.body_left = request.content_length;
            let refusal = if request.chunked {
                // Of unknown length: the body is "more than we will read".
                conn.body_left = u64::MAX;
                Some(501)
            } else if request.content_length > self.max_body {
                Some(413)
            } else {
                None
            };
            if let Some(code) = refusal {
                // The body left unread makes the loop linger before it closes.
                self.refuse(code, out);
                return Verdict::close(at);
            }
            // While stopping, every request already received is answered; the last
            // one in the input tells the client to close.
            let received_all = (at as u64).saturating_add(conn.body_left) >= input.len() as u64;
            let keep_alive = request.keep_alive && !(self.draining && received_all);
            let variants = match request.method {
                Method::Get | Method::Head => &self.ok,
                Method::Other => &self.not_allowed,
            };
            let response = variants.pick(keep_alive, request.version == Version::Http10);
            let bytes = if request.method == Method::Head { response.head() } else { response.bytes() };
            out.extend_from_slice(bytes);
            self.counts.requests += 1;
            if !keep_alive {
                return Verdict::close(at);
            }
        }
    }

    fn mid_request(conn: &HelloConn) -> bool {
        conn.body_left > 0
    }

    fn on_drain(&mut self) {
        self.draining = true;
    }

    fn counts(&self) -> Counts {
        self.counts
    }

    fn on_tick(&mut self, now: SystemTime) {
        let date = http_date(now);
        self.ok.set_date(&date);
        self.not_allowed.set_date(&date);
        for (_, response) in &mut self.errors {
            response.set_date(&date);
        }
    }
}
