//! The backend side of an exchange: each answer read as it arrives (head, then
//! body pieces), its head rewritten for the client and everything after it
//! forwarded unchanged; at its end the connection goes back to the pool, or
//! closes. A backend that fails before answering gets the client a 502 or a 504,
//! or the request a second try.

use std::time::Duration;

use percore::http::{BodyKind, Method, ResponseEvent, ResponseReader, Stream, Version};
use percore::reactor::{Closed, ConnId, Flow, Io, Verdict};

use crate::heads::{self, Persist};
use crate::proxy::{Exchange, Failure, Proxy};

/// Times the backend's silence while it owes an answer (nginx's
/// `proxy_read_timeout`), with the connection's own timer: set again at every
/// arrival, cleared once the answer ended (`None`). The one place that stands in
/// for a read timeout of the loop's own.
fn read_timeout(io: &mut Io<'_>, timeout: Option<Duration>) {
    match timeout {
        Some(timeout) => io.set_timer(timeout),
        None => io.cancel_timer(),
    }
}

/// How an answer that ended leaves its two connections.
struct Ending {
    /// The backend connection may carry another request.
    reusable: bool,
}

impl Proxy {
    /// Reads a backend's answer: the head goes to the client rewritten, the body as
    /// it came; the answer's end ends the exchange.
    pub(crate) fn upstream_data(
        &mut self,
        reader: &mut ResponseReader,
        input: &[u8],
        io: &mut Io<'_>,
    ) -> Verdict {
        let Some(client) = self.upstreams.get(&io.id()).and_then(|upstream| upstream.client) else {
            // An idle connection owes nothing: what it sends answers no request.
            return Verdict::close(0);
        };
        let Some(exchange) = self.exchanges.get_mut(&client) else { return Verdict::close(0) };
        reader.set_method(exchange.method);
        read_timeout(io, self.read_timeout);
        let mut at = 0;
        loop {
            let Ok(framed) = reader.read(&input[at..], Stream::Open) else {
                self.fail(Failure::Broken, io);
                return Verdict::close(at);
            };
            let (piece, ended) = (&input[at..at + framed.consumed], framed.event);
            let ended = match ended {
                ResponseEvent::Partial => return Verdict::keep(at),
                ResponseEvent::Head { head, ended } => {
                    let interim = head.is_interim();
                    if interim && exchange.version == Version::Http10 {
                        // An HTTP/1.0 client knows no interim answer (RFC 9110, 15.2).
                        at += framed.consumed;
                        continue;
                    }
                    if !interim {
                        exchange.keep_client &= exchange.sent
                            && !self.draining
                            && head.body() != BodyKind::UntilClose
                            && head.status() != 101;
                        exchange.reusable = head.keep_alive();
                    }
                    let persist = if interim {
                        Persist::Keep
                    } else {
                        Persist::of(exchange.keep_client, exchange.version)
                    };
                    self.scratch.clear();
                    heads::forward_response(&mut self.scratch, &head, persist);
                    io.write_to(client, &self.scratch);
                    io.write_to(client, &piece[head.as_bytes().len()..]);
                    ended && !interim
                }
                ResponseEvent::Body { ended } => {
                    io.write_to(client, piece);
                    ended
                }
            };
            exchange.answered = true;
            at += framed.consumed;
            if ended {
                let reusable = exchange.reusable && at == input.len();
                return match self.finish(client, Ending { reusable }, io) {
                    Flow::Close => Verdict::close(at),
                    _ => Verdict::keep(at),
                };
            }
        }
    }

    /// The answer to `client` ended: the client is answered (and closed, unless it
    /// stays open), and this backend connection goes back to the pool if it can
    /// carry another request, or closes.
    fn finish(&mut self, client: ConnId, ending: Ending, io: &mut Io<'_>) -> Flow {
        let Some(exchange) = self.end_exchange(client, io) else { return Flow::Close };
        if exchange.keep_client {
            // Its next request, if it sent one, waits in its input.
            io.resume(client);
        } else {
            io.close(client);
        }
        self.count(false);
        read_timeout(io, None);
        let id = io.id();
        let Some(upstream) = self.upstreams.get_mut(&id) else { return Flow::Close };
        if !(ending.reusable && exchange.sent) || self.draining {
            return Flow::Close;
        }
        upstream.reused = true;
        self.pool.put(upstream.backend, id);
        io.set_idle(id);
        Flow::Continue
    }

    /// The client sent its whole request: the backend's silence is timed from now.
    pub(crate) fn upstream_sent(&mut self, io: &mut Io<'_>) {
        if self.upstreams.get(&io.id()).is_some_and(|upstream| upstream.client.is_some()) {
            read_timeout(io, self.read_timeout);
        }
    }

    /// The backend stayed silent past the read timeout: 504 (or the answer cut).
    pub(crate) fn upstream_timed_out(&mut self, io: &mut Io<'_>) -> Flow {
        if let Some(upstream) = self.upstreams.get(&io.id()).filter(|upstream| upstream.client.is_some()) {
            let backend = upstream.backend;
            self.backends.failed(backend, io.now());
            self.fail(Failure::ReadTimedOut, io);
            return Flow::Close;
        }
        Flow::Continue
    }

    /// The backend closed its side: an answer delimited by the close ends here;
    /// any other answer was cut short, which the close that follows tells.
    pub(crate) fn upstream_ended(&mut self, reader: &mut ResponseReader, io: &mut Io<'_>) -> Flow {
        let client = self.upstreams.get(&io.id()).and_then(|upstream| upstream.client);
        if let Some(client) = client {
            if let Ok(framed) = reader.read(&[], Stream::Ended) {
                if framed.event == (ResponseEvent::Body { ended: true }) {
                    self.finish(client, Ending { reusable: false }, io);
                }
            }
        }
        Flow::Close
    }

    /// A backend connection closed. Idle, it leaves the pool; owing an answer, its
    /// exchange fails.
    pub(crate) fn upstream_closed(&mut self, closed: Closed, io: &mut Io<'_>) {
        let failure = Failure::of(closed);
        if matches!(failure, Failure::ConnectRefused | Failure::ConnectTimedOut) {
            if let Some(upstream) = self.upstreams.get(&io.id()) {
                self.backends.failed(upstream.backend, io.now());
            }
        }
        if self.upstreams.get(&io.id()).is_some_and(|upstream| upstream.client.is_some()) {
            self.fail(failure, io);
        }
        if let Some(upstream) = self.upstreams.remove(&io.id()) {
            self.pool.remove(upstream.backend, io.id());
        }
    }

    /// This backend connection failed its exchange: the request is tried again if
    /// it can be, else the client gets `failure`'s status, or, if its answer had
    /// begun, is closed (it sees the answer cut short).
    fn fail(&mut self, failure: Failure, io: &mut Io<'_>) {
        let Some(upstream) = self.upstreams.get(&io.id()) else { return };
        let (backend, reused) = (upstream.backend, upstream.reused);
        let Some(client) = upstream.client else { return };
        let Some(mut exchange) = self.end_exchange(client, io) else { return };
        if let Some(backend) = self.retry_on(failure, &exchange, backend, reused, io) {
            let head = exchange.replay.take().expect("a retry has its head");
            exchange.upstream = self.open(backend, io);
            self.start(client, exchange, &head, io);
            // Sent whole: its silence is timed from now.
            io.wake(self.exchanges[&client].upstream);
            return;
        }
        if exchange.answered {
            io.close(client);
            return;
        }
        let keep = exchange.keep_client && exchange.sent && !self.draining;
        self.scratch.clear();
        heads::answer(
            &mut self.scratch,
            failure.status(),
            exchange.method,
            Persist::of(keep, exchange.version),
        );
        io.write_to(client, &self.scratch);
        if keep {
            io.resume(client);
        } else {
            io.close(client);
        }
        self.count(true);
    }

    /// The backend to try `exchange`'s request on again after `failure` on a
    /// connection to `backend` (`reused`, or fresh), if it is tried again: once at
    /// most, never after a byte of the answer, and only a request without a body.
    /// A connect that failed sent nothing: any such request goes to the next
    /// backend up, if there is another. A reused connection closed unanswered may
    /// have crossed the backend's keep-alive timeout: a `GET` or `HEAD` goes again,
    /// on a fresh connection to the same backend (the request may have been
    /// received: only a safe method is sent twice).
    fn retry_on(
        &mut self,
        failure: Failure,
        exchange: &Exchange,
        backend: usize,
        reused: bool,
        io: &Io<'_>,
    ) -> Option<usize> {
        if exchange.answered || exchange.replay.is_none() || !exchange.sent {
            return None;
        }
        match failure {
            Failure::ConnectRefused | Failure::ConnectTimedOut => {
                Some(self.backends.pick(io.now())).filter(|&next| next != backend)
            }
            Failure::Broken if reused && matches!(exchange.method, Method::Get | Method::Head) => {
                Some(backend)
            }
            _ => None,
        }
    }
}
