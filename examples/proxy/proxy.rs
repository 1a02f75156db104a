//! The proxy's protocol: a client's requests are forwarded one at a time to a
//! backend connection, taken from the pool or opened, and each answer comes back
//! as it arrives; the client side is here, the backend side in `upstream.rs`.
//!
//! Each connection's own state is its `Conn`; what the two sides of an exchange
//! must both see lives in the protocol, by id (the loop hands a callback only its
//! own connection's state): `exchanges`, each client's request in flight, and
//! `upstreams`, each backend connection and the client it answers.

use std::collections::{HashMap, HashSet};
use std::time::{Duration, SystemTime};

use percore::http::{
    BodyFramer, ChunkGrammar, Limits, Method, Parsed, Progress, Request, ResponseReader, Version,
};
use percore::reactor::{Closed, ConnId, Conns, Counts, Flow, Io, Protocol, Verdict};

use crate::backends::Backends;
use crate::heads::{self, Origin, Persist, Policy, Route, Scheme};
use crate::pool::Pool;
use crate::reframe::{Outgoing, Piece};

/// The proxy of one worker.
pub struct Proxy {
    pub(crate) backends: Backends,
    pub(crate) pool: Pool<ConnId>,
    /// nginx's `proxy_read_timeout`: the longest a backend may stay silent while
    /// it owes an answer, the loop's read timeout on its connection from the
    /// request sent whole to the answer's end.
    pub(crate) read_timeout: Option<Duration>,
    limits: Limits,
    /// What goes on of what a client says about itself.
    pub(crate) policy: Policy,
    /// Every backend connection, open or being opened.
    pub(crate) upstreams: HashMap<ConnId, Upstream>,
    /// Every client's request in flight: forwarded, its answer not yet whole.
    pub(crate) exchanges: HashMap<ConnId, Exchange>,
    /// Clients that close once their last answer is sent: nothing they sent after
    /// the request it answers is read as a request (RFC 9112, 9.6).
    closing: HashSet<ConnId>,
    /// A graceful stop began: answers close their clients, and no backend
    /// connection goes back to the pool.
    pub(crate) draining: bool,
    pub(crate) counts: Counts,
    /// Backend connections opened, for the figures at exit.
    opened: u64,
    /// A head being written, kept to reuse its allocation.
    pub(crate) scratch: Vec<u8>,
    /// How the backends speak TLS, if they do.
    #[cfg(feature = "tls")]
    backend_tls: Option<BackendTls>,
}

/// TLS to the backends: the client's trust, each backend's name (sent by SNI and
/// checked against its certificate), and whether its failed handshake was said.
#[cfg(feature = "tls")]
pub struct BackendTls {
    client: percore::tls::ClientTls,
    names: Vec<String>,
    said: Vec<bool>,
}

/// A backend connection.
#[derive(Debug)]
pub struct Upstream {
    pub(crate) backend: usize,
    /// The client whose request it carries; none while idle.
    pub(crate) client: Option<ConnId>,
    /// It carried an answer before: a close before it answers the next may be the
    /// backend's keep-alive timeout crossing the request, not a failure.
    pub(crate) reused: bool,
}

/// A request in flight, by its client.
#[derive(Debug)]
pub struct Exchange {
    pub(crate) upstream: ConnId,
    pub(crate) method: Method,
    /// The client's version.
    pub(crate) version: Version,
    /// The client's connection stays open after the answer: its request asked,
    /// and its input has not ended. Fixed when the answer's head goes out.
    pub(crate) keep_client: bool,
    /// The whole request went to the backend.
    pub(crate) sent: bool,
    /// Bytes of the answer went to the client: from then on a failure cuts it.
    pub(crate) answered: bool,
    /// The answer's head lets the backend connection carry another request.
    pub(crate) reusable: bool,
    /// How the answer's body goes on to the client, once its head went.
    pub(crate) answer: Outgoing,
    /// The head to send again on a fresh connection, for a request without a body
    /// that has not been retried yet.
    pub(crate) replay: Option<Vec<u8>>,
}

/// A connection's own state.
#[derive(Debug, Default)]
pub enum Conn {
    /// Not yet opened (a backend connection being established).
    #[default]
    Opening,
    Client(Client),
    /// A backend connection: the reader of its answers.
    Upstream(ResponseReader),
}

/// A client connection.
#[derive(Debug)]
pub struct Client {
    /// Its address and scheme, for `X-Forwarded-For` and `X-Forwarded-Proto`.
    origin: Origin,
    progress: Progress,
    phase: Phase,
}

/// Where a client is in its current request.
#[derive(Clone, Copy, Debug)]
enum Phase {
    /// Before a request head.
    Head,
    /// Its body arriving, read by the strict grammar and forwarded as it comes,
    /// under the framing the proxy gives it.
    Body(BodyFramer, Outgoing),
    /// Sent whole; its answer is on its way (while `exchanges` has it).
    Waiting,
}

/// Why an exchange failed before its answer ended.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Failure {
    ConnectRefused,
    ConnectTimedOut,
    ReadTimedOut,
    /// The backend closed, or sent what is no answer.
    Broken,
}

impl Failure {
    pub(crate) fn of(closed: Closed) -> Failure {
        match closed {
            Closed::ConnectFailed(std::io::ErrorKind::TimedOut) => Failure::ConnectTimedOut,
            Closed::ConnectFailed(_) => Failure::ConnectRefused,
            Closed::TimedOut => Failure::ReadTimedOut,
            _ => Failure::Broken,
        }
    }

    /// The status the client gets when no byte of an answer went out yet.
    pub(crate) fn status(self) -> u16 {
        match self {
            Failure::ConnectTimedOut | Failure::ReadTimedOut => 504,
            Failure::ConnectRefused | Failure::Broken => 502,
        }
    }
}

impl Proxy {
    pub fn new(
        backends: Backends,
        keepalive: usize,
        read_timeout: Option<Duration>,
        policy: Policy,
    ) -> Proxy {
        let count = backends.len();
        Proxy {
            backends,
            pool: Pool::new(count, keepalive),
            read_timeout,
            limits: Limits::default(),
            policy,
            upstreams: HashMap::new(),
            exchanges: HashMap::new(),
            closing: HashSet::new(),
            draining: false,
            counts: Counts::default(),
            opened: 0,
            scratch: Vec::new(),
            #[cfg(feature = "tls")]
            backend_tls: None,
        }
    }

    /// The same, speaking TLS to its backends with `client`, to each by its name in
    /// `names` (as many as the backends): a backend whose handshake fails (its
    /// certificate not trusted or not for its name) is refused as one that refuses
    /// connections is, and said once.
    #[cfg(feature = "tls")]
    pub fn with_backend_tls(mut self, client: percore::tls::ClientTls, names: Vec<String>) -> Proxy {
        assert_eq!(names.len(), self.backends.len(), "a name for each backend");
        let said = vec![false; names.len()];
        self.backend_tls = Some(BackendTls { client, names, said });
        self
    }

    /// Says, once per backend, that its TLS handshake failed, and why.
    #[cfg(feature = "tls")]
    pub(crate) fn tell_tls_failure(&mut self, backend: usize, why: &percore::tls::TlsFailure) {
        let Some(tls) = self.backend_tls.as_mut() else { return };
        if std::mem::replace(&mut tls.said[backend], true) {
            return;
        }
        #[cfg(not(fuzzing))]
        percore::cli::say(format_args!(
            "proxy: backend {} ({}): {why}; answered 502 while it fails",
            self.backends.addr(backend),
            tls.names[backend]
        ));
    }

    /// Reads a client's requests: each head is forwarded, then its body as it comes;
    /// the next request waits in the input until the answer ended.
    fn client_data(&mut self, client: &mut Client, input: &[u8], io: &mut Io<'_>) -> Verdict {
        let mut at = 0;
        loop {
            match client.phase {
                Phase::Head => {
                    if at == input.len() {
                        return Verdict::keep(at);
                    }
                    let request = match client.progress.parse(&input[at..], &self.limits) {
                        Ok(Parsed::Partial) => return Verdict::keep(at),
                        Ok(Parsed::Complete(request)) => request,
                        Err(error) => {
                            // Where this request ends is unknown (or it could be read
                            // two ways): it is refused and never forwarded.
                            client.progress = Progress::default();
                            self.refuse(io, error.status());
                            return Verdict::close(at);
                        }
                    };
                    let route = match Route::of(&request) {
                        Ok(route) => route,
                        Err(refusal) => {
                            self.refuse(io, refusal.status());
                            return Verdict::close(at);
                        }
                    };
                    at += request.head_len;
                    let body = BodyFramer::of(&request).with_grammar(ChunkGrammar::Strict);
                    let outgoing = request_framing(&request);
                    self.forward(client.origin, &request, &route, outgoing, io);
                    client.phase = Phase::Body(body, outgoing);
                }
                Phase::Body(mut body, outgoing) => {
                    let Some(upstream) = self.exchanges.get(&io.id()).map(|exchange| exchange.upstream)
                    else {
                        // Answered (or failed) before the body ended: the client is
                        // being closed, as the rest of its body cannot be used.
                        return Verdict::close(at);
                    };
                    let piece = match body.read(&input[at..]) {
                        Ok(piece) => piece,
                        Err(error) => {
                            // Refused at once, the half-sent request cut at the backend.
                            let answered =
                                self.end_exchange(io.id(), io).is_some_and(|exchange| exchange.answered);
                            io.close(upstream);
                            if !answered {
                                self.refuse(io, error.status());
                            }
                            return Verdict::close(at);
                        }
                    };
                    let sent = Piece { content: piece.content, trailers: piece.trailers, ended: piece.ended };
                    outgoing.forward(&sent, upstream, io, &mut self.scratch, &self.policy);
                    at += piece.consumed;
                    if !piece.ended {
                        client.phase = Phase::Body(body, outgoing);
                        if piece.consumed == 0 || at == input.len() {
                            return Verdict::keep(at);
                        }
                        continue;
                    }
                    if let Some(exchange) = self.exchanges.get_mut(&io.id()) {
                        exchange.sent = true;
                    }
                    self.sent_whole(io.id(), upstream, io);
                    client.phase = Phase::Waiting;
                }
                Phase::Waiting => {
                    if self.exchanges.contains_key(&io.id()) || self.closing.contains(&io.id()) {
                        // A pipelined request waits for the answer before it: the
                        // backend's answer written to this client ends the pause, and
                        // this is asked again. After an answer that closes the client,
                        // it is never read: the close is on its way.
                        return Verdict::pause(at);
                    }
                    client.phase = Phase::Head;
                }
            }
        }
    }

    /// Sends `request`'s head to a backend connection, from the pool or opened, by
    /// `route` and with the framing of its body as the proxy sends it, and records
    /// the exchange.
    fn forward(
        &mut self,
        origin: Origin,
        request: &Request<'_>,
        route: &Route<'_>,
        outgoing: Outgoing,
        io: &mut Io<'_>,
    ) {
        let mut head = std::mem::take(&mut self.scratch);
        head.clear();
        heads::forward_request(&mut head, request, route, &origin, &self.policy, outgoing);
        let backend = self.backends.pick(io.now());
        let upstream = match self.pool.take(backend) {
            Some(pooled) => pooled,
            None => self.open(backend, io),
        };
        let bodiless = request.content_length == 0 && !request.chunked;
        let exchange = Exchange {
            upstream,
            method: request.method,
            version: request.version,
            keep_client: request.keep_alive,
            sent: false,
            answered: false,
            reusable: false,
            answer: Outgoing::None,
            replay: bodiless.then(|| head.clone()),
        };
        self.start(io.id(), exchange, &head, io);
        self.scratch = head;
    }

    /// Opens a connection to `backend`.
    pub(crate) fn open(&mut self, backend: usize, io: &mut Io<'_>) -> ConnId {
        let addr = self.backends.addr(backend).clone();
        #[cfg(feature = "tls")]
        let id = match &self.backend_tls {
            Some(tls) => io.connect_tls(addr, &tls.client, &tls.names[backend]),
            None => io.connect(addr),
        };
        #[cfg(not(feature = "tls"))]
        let id = io.connect(addr);
        self.upstreams.insert(id, Upstream { backend, client: None, reused: false });
        self.opened += 1;
        id
    }

    /// `exchange` begins: `head` goes to its backend connection, which is busy
    /// until the answer ended (a graceful stop waits for it); a request sent whole
    /// already (a retry's) is [`sent_whole`](Proxy::sent_whole).
    pub(crate) fn start(&mut self, client: ConnId, exchange: Exchange, head: &[u8], io: &mut Io<'_>) {
        let upstream = exchange.upstream;
        if let Some(state) = self.upstreams.get_mut(&upstream) {
            state.client = Some(client);
        }
        io.write_to(upstream, head);
        io.set_busy(upstream);
        if exchange.sent {
            self.sent_whole(client, upstream, io);
        }
        self.exchanges.insert(client, exchange);
    }

    /// `client`'s request went whole to `upstream`: the backend's silence is timed
    /// from here (the read timeout), and the client, waiting, is busy until the
    /// answer ended. Not before: while its body arrives the client is the loop's
    /// to time, its message timeout and minimum rate (`is_busy`), as any server's
    /// client; marked busy, it would be under no timeout at all.
    pub(crate) fn sent_whole(&self, client: ConnId, upstream: ConnId, io: &mut Io<'_>) {
        io.set_read_timeout_of(upstream, self.read_timeout);
        io.set_busy(client);
    }

    /// The client's exchange is over, its answer whole or cut: it is forgotten, and
    /// the client is no longer busy.
    pub(crate) fn end_exchange(&mut self, client: ConnId, io: &mut Io<'_>) -> Option<Exchange> {
        let exchange = self.exchanges.remove(&client)?;
        if let Some(upstream) = self.upstreams.get_mut(&exchange.upstream) {
            upstream.client = None;
        }
        io.set_idle(client);
        Some(exchange)
    }

    /// `client` closes once its answer is sent: nothing it sent after its request is
    /// read as another.
    pub(crate) fn close_client(&mut self, client: ConnId, io: &mut Io<'_>) {
        self.closing.insert(client);
        io.close(client);
    }

    /// Answers this connection's request with the proxy's own `status`, and counts
    /// it refused; the connection closes after it.
    fn refuse(&mut self, io: &mut Io<'_>, status: u16) {
        self.scratch.clear();
        heads::answer(&mut self.scratch, status, Method::Get, Persist::Close);
        io.write(&self.scratch);
        self.count(true);
    }

    /// An answer went out whole, the proxy's own if `refused`.
    pub(crate) fn count(&mut self, refused: bool) {
        self.counts.requests += 1;
        self.counts.refused += u64::from(refused);
    }
}

/// How a request's body goes on: chunked as the proxy chunks it, or under its
/// length; a request without one gets `Content-Length: 0` if its method expects a
/// body (RFC 9110, 8.6), and no framing field otherwise.
fn request_framing(request: &Request<'_>) -> Outgoing {
    let expects_body = matches!(request.method, Method::Post | Method::Put | Method::Patch | Method::Other);
    if request.chunked {
        Outgoing::Chunked
    } else if request.content_length > 0 || expects_body {
        Outgoing::Length(request.content_length)
    } else {
        Outgoing::None
    }
}

impl Protocol for Proxy {
    type Conn = Conn;

    /// A client accepted (its address and scheme kept for `X-Forwarded-For` and
    /// `X-Forwarded-Proto`), or a backend connection established.
    fn on_open(&mut self, conn: &mut Conn, io: &mut Io<'_>) -> Flow {
        *conn = if self.upstreams.contains_key(&io.id()) {
            // Read by the strict grammar: every answer's body is framed again.
            Conn::Upstream(ResponseReader::default().with_grammar(ChunkGrammar::Strict))
        } else {
            let addr = io.peer_addr().ok().map(|addr| addr.ip());
            let scheme = Scheme::of(io);
            Conn::Client(Client {
                origin: Origin { addr, scheme },
                progress: Progress::default(),
                phase: Phase::Head,
            })
        };
        Flow::Continue
    }

    fn on_data(&mut self, conn: &mut Conn, input: &[u8], io: &mut Io<'_>) -> Verdict {
        match conn {
            Conn::Client(client) => self.client_data(client, input, io),
            Conn::Upstream(reader) => self.upstream_data(reader, input, io),
            Conn::Opening => unreachable!("no input before a connection opens"),
        }
    }

    /// A client that finished sending after a whole request still gets its answer
    /// (then its connection closes); one that stopped short of it is closed.
    fn on_input_end(&mut self, conn: &mut Conn, io: &mut Io<'_>) -> Flow {
        match conn {
            Conn::Client(Client { phase: Phase::Waiting, .. }) => match self.exchanges.get_mut(&io.id()) {
                Some(exchange) => {
                    exchange.keep_client = false;
                    Flow::Continue
                }
                None => Flow::Close,
            },
            Conn::Upstream(reader) => self.upstream_ended(reader, io),
            _ => Flow::Close,
        }
    }

    fn on_close(&mut self, _conn: &mut Conn, closed: Closed, _unconsumed: &[u8], io: &mut Io<'_>) {
        if self.upstreams.contains_key(&io.id()) {
            return self.upstream_closed(closed, io);
        }
        self.closing.remove(&io.id());
        // A client gone with its answer on the way: the backend connection cannot
        // carry another request before that answer ends, so it goes too.
        if let Some(exchange) = self.end_exchange(io.id(), io) {
            io.close(exchange.upstream);
        }
    }

    /// A client whose request's body is arriving is in the middle of an exchange:
    /// a graceful stop leaves it, and the loop's message timeout times its body.
    fn is_busy(conn: &Conn) -> bool {
        matches!(conn, Conn::Client(Client { phase: Phase::Body(..), .. }))
    }

    /// Idle backend connections over the pool's cap for a whole second are closed.
    fn on_tick(&mut self, _now: SystemTime, conns: &mut Conns<'_>) {
        for id in self.pool.tick() {
            conns.close(id);
        }
    }

    /// Answers in flight finish; idle backend connections close at once.
    fn on_drain(&mut self, conns: &mut Conns<'_>) {
        self.draining = true;
        for id in self.pool.drain() {
            conns.close(id);
        }
    }

    fn counts(&self) -> Counts {
        self.counts
    }
}

/// The worker's last line: what the pool saved, which the loop's own figures do
/// not tell (they count requests, not the connections behind them). Not under the
/// fuzzer (`fuzz/fuzz_targets/proxy.rs`), which makes a proxy per input.
#[cfg(not(fuzzing))]
impl Drop for Proxy {
    fn drop(&mut self) {
        percore::cli::say(format_args!(
            "proxy: worker pid {}: {} requests, {} backend connections opened",
            std::process::id(),
            self.counts.requests,
            self.opened
        ));
    }
}

#[cfg(test)]
mod tests;
