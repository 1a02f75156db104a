//! [`Hello`]: every `GET` or `HEAD` on any path gets the one prebuilt response, at
//! once or (with a delay) when the connection's timer says so.

use std::collections::VecDeque;
use std::time::{Duration, Instant, SystemTime};

use super::date::http_date;
use super::memo::{Head, HeadMemo};
use super::parse::{Limits, Method, Parsed, Progress, Version};
use super::prebuilt::{Body, Persist, Response, Variants};
use crate::reactor::{Conns, Counts, Flow, Io, Protocol, Verdict, READ_BUFFER};

/// Answers a connection may have waiting for their delay; then it is not read
/// until they go, so a client that pipelines cannot grow the worker.
const MAX_DELAYED: usize = 64;

/// What [`Hello`] answers with, and the limits it enforces.
#[derive(Clone, Debug)]
pub struct HelloConfig {
    /// The body of every `200` response, held once by every worker (and by every
    /// connection still sending it): in memory, or sealed in a file.
    pub body: Body,
    /// Its `Content-Type`.
    pub content_type: String,
    /// Size limits of a request head.
    pub limits: Limits,
    /// Largest request body read (and dropped) before answering; larger gets `413`.
    pub max_body: u64,
    /// How long after its request arrived each answer is sent: a backend with
    /// latency, for testing proxies and load balancers. Zero: at once.
    pub delay: Duration,
}

impl HelloConfig {
    /// The least [`Config::max_pending_input`](crate::reactor::Config::max_pending_input)
    /// a loop serving this configuration needs: a head up to `limits.head` is
    /// [`Hello`]'s to refuse (431), not the loop's to cut, and the loop holds it with
    /// the rest of a read.
    ///
    /// ```
    /// use percore::http::{HelloConfig, Limits};
    /// use percore::reactor::Config;
    ///
    /// let limits = Limits { head: 2 << 20, ..Limits::default() }; // 2 MiB heads
    /// let hello = HelloConfig { limits, ..HelloConfig::default() };
    /// let mut config = Config::default(); // 1 MiB of pending input
    /// config.max_pending_input = config.max_pending_input.max(hello.pending_input_needed());
    /// assert!(config.max_pending_input > 2 << 20);
    /// ```
    pub fn pending_input_needed(&self) -> usize {
        self.limits.head + READ_BUFFER
    }
}

impl Default for HelloConfig {
    fn default() -> HelloConfig {
        HelloConfig {
            body: Body::default(),
            content_type: "text/plain".into(),
            limits: Limits::default(),
            max_body: 1024 * 1024,
            delay: Duration::ZERO,
        }
    }
}

/// The hello server's protocol: parses each request head, skips any body, and
/// writes a prebuilt response; errors get a prebuilt error response and a close.
///
/// ```
/// use percore::http::{Hello, HelloConfig};
/// use percore::reactor::{Harness, Flow};
///
/// let mut harness = Harness::new(Hello::new(&HelloConfig::default()));
/// let two = b"GET / HTTP/1.1\r\nHost: a\r\n\r\nHEAD / HTTP/1.0\r\n\r\n";
/// let verdict = harness.data(two);
/// assert_eq!(verdict.consumed, two.len());
/// assert_eq!(verdict.flow, Flow::Close, "HTTP/1.0 without keep-alive closes");
/// let text = String::from_utf8(harness.take_output()).unwrap();
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
    delay: Duration,
    draining: bool,
    counts: Counts,
    /// The last head parsed: the same bytes again are not parsed again.
    memo: HeadMemo,
}

/// Per-connection state of [`Hello`]: the resumable parse of a head that arrives in
/// pieces, the bytes of a request body still to be skipped, and the answers that
/// wait for their delay.
#[derive(Debug, Default)]
pub struct HelloConn {
    progress: Progress,
    body_left: u64,
    /// Answers and when each is due, oldest first; allocated at the first one.
    // Boxed: 8 bytes in every connection's state, where a VecDeque takes 32.
    #[allow(clippy::box_collection)]
    delayed: Option<Box<VecDeque<(Instant, Answer)>>>,
    /// A closing answer is decided: nothing after it is read as a request.
    closing: bool,
}

/// Which prebuilt response answers a request.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct Answer {
    kind: Kind,
    version: Version,
    persists: Persist,
    head_only: bool,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Kind {
    Ok,
    NotAllowed,
    /// An error status: always closes.
    Error(u16),
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
                let body = Body::bytes(body.as_bytes());
                (code, Response::new(status, "text/plain", &[("Connection", "close")], &body))
            })
            .collect();
        let not_allowed = Body::bytes(&b"method not allowed\n"[..]);
        Hello {
            ok: Variants::new("200 OK", &config.content_type, &[], &config.body),
            not_allowed: Variants::new(
                "405 Method Not Allowed",
                "text/plain",
                &[("Allow", "GET, HEAD")],
                &not_allowed,
            ),
            errors,
            limits: config.limits,
            max_body: config.max_body,
            delay: config.delay,
            draining: false,
            counts: Counts::default(),
            memo: HeadMemo::default(),
        }
    }

    /// Answers now, or queues the answer for its delay; returns what the loop
    /// does next, or `None` to go on reading requests.
    fn answer(
        &mut self,
        conn: &mut HelloConn,
        answer: Answer,
        at: usize,
        io: &mut Io<'_>,
    ) -> Option<Verdict> {
        self.counts.requests += 1;
        let closes = answer.persists == Persist::Close;
        if self.delay.is_zero() {
            self.write(answer, io);
            return closes.then(|| Verdict::close(at));
        }
        let delayed = conn.delayed.get_or_insert_with(Box::default);
        if delayed.is_empty() {
            io.set_timer(self.delay);
        }
        delayed.push_back((io.now() + self.delay, answer));
        // The answer that closes is sent by the timer, which then closes.
        conn.closing = closes;
        (closes || delayed.len() >= MAX_DELAYED).then(|| Verdict::pause(at))
    }

    /// Refuses the request with `code`, which closes the connection.
    fn refuse(&mut self, conn: &mut HelloConn, code: u16, at: usize, io: &mut Io<'_>) -> Verdict {
        self.counts.refused += 1;
        let answer = Answer {
            kind: Kind::Error(code),
            version: Version::Http11,
            persists: Persist::Close,
            head_only: false,
        };
        self.answer(conn, answer, at, io).unwrap_or(Verdict::close(at))
    }

    fn write(&self, answer: Answer, io: &mut Io<'_>) {
        let response = match answer.kind {
            Kind::Ok => self.ok.pick(answer.version, answer.persists),
            Kind::NotAllowed => self.not_allowed.pick(answer.version, answer.persists),
            Kind::Error(code) => {
                let found = self.errors.iter().find(|(c, _)| *c == code);
                &found.unwrap_or(&self.errors[0]).1
            }
        };
        if answer.head_only {
            response.write_head(io);
        } else {
            response.write(io);
        }
    }
}

impl Protocol for Hello {
    type Conn = HelloConn;

    const ALPN: &'static [&'static [u8]] = &[b"http/1.1"];

    fn on_data(&mut self, conn: &mut HelloConn, input: &[u8], io: &mut Io<'_>) -> Verdict {
        if conn.closing {
            // Waits for the timer to send the closing answer, and then to close.
            return Verdict::pause(0);
        }
        let mut at = 0;
        loop {
            if io.is_full() {
                // Many pipelined requests for a large body: the loop calls again once
                // the peer has taken this much.
                return Verdict::pause(at);
            }
            let skipped = conn.body_left.min((input.len() - at) as u64);
            conn.body_left -= skipped;
            at += skipped as usize;
            if at == input.len() {
                return Verdict::keep(at);
            }
            let request = match self.memo.recall(&input[at..]) {
                Some(head) => {
                    conn.progress = Progress::default();
                    head
                }
                None => match conn.progress.parse(&input[at..], &self.limits) {
                    Ok(Parsed::Complete(request)) => {
                        let head = Head::of(&request);
                        self.memo.remember(&input[at..], head);
                        head
                    }
                    Ok(Parsed::Partial) => return Verdict::keep(at),
                    Err(e) => return self.refuse(conn, e.status(), at, io),
                },
            };
            at += request.len;
            conn.body_left = request.content_length;
            if request.chunked {
                // A chunked body's end would need the chunk parse; refuse rather than
                // guess. Of unknown length: the body is "more than we will read".
                conn.body_left = u64::MAX;
                return self.refuse(conn, 501, at, io);
            }
            if request.content_length > self.max_body {
                // The body left unread makes the loop linger before it closes.
                return self.refuse(conn, 413, at, io);
            }
            // While stopping, every request already received is answered; the last
            // one in the input tells the client to close.
            let received_all = (at as u64).saturating_add(conn.body_left) >= input.len() as u64;
            let keep_alive = request.keep_alive && !(self.draining && received_all);
            let answer = Answer {
                kind: if matches!(request.method, Method::Get | Method::Head) {
                    Kind::Ok
                } else {
                    Kind::NotAllowed
                },
                version: request.version,
                persists: if keep_alive { Persist::KeepAlive } else { Persist::Close },
                head_only: request.method == Method::Head,
            };
            if let Some(verdict) = self.answer(conn, answer, at, io) {
                return verdict;
            }
        }
    }

    /// Sends every delayed answer that is due, and sets the timer for the next.
    fn on_timer(&mut self, conn: &mut HelloConn, io: &mut Io<'_>) -> Flow {
        let Some(delayed) = conn.delayed.as_mut() else { return Flow::Continue };
        while let Some(&(due, answer)) = delayed.front() {
            if due > io.now() {
                io.set_timer_at(due);
                break;
            }
            delayed.pop_front();
            self.write(answer, io);
            if answer.persists == Persist::Close {
                return Flow::Close;
            }
        }
        Flow::Continue
    }

    fn is_busy(conn: &HelloConn) -> bool {
        conn.body_left > 0 || conn.delayed.as_ref().is_some_and(|delayed| !delayed.is_empty())
    }

    fn on_drain(&mut self, _conns: &mut Conns<'_>) {
        self.draining = true;
    }

    fn counts(&self) -> Counts {
        self.counts
    }

    fn on_tick(&mut self, now: SystemTime, _conns: &mut Conns<'_>) {
        let date = http_date(now);
        self.ok.set_date(&date);
        self.not_allowed.set_date(&date);
        for (_, response) in &mut self.errors {
            response.set_date(&date);
        }
    }
}
