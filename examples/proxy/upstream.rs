//! The backend side of an exchange: each answer read as it arrives (head, then
//! body pieces), its head rewritten for the client and everything after it
//! forwarded unchanged; at its end the connection goes back to the pool, or
//! closes. A backend that fails before answering gets the client a 502 or a 504,
//! or the request a second try.

use percore::http::{BodyKind, Method, ResponseEvent, ResponseReader, Stream, Version};
use percore::reactor::{Closed, ConnId, Flow, Io, Verdict};

use crate::heads::{self, Persist};
use crate::proxy::{Exchange, Failure, Proxy};

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
                ResponseEvent::Body { ended, .. } => {
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
        // Its silence no longer matters: back in the pool it is idle.
        io.set_read_timeout(None);
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

    /// The backend closed its side: an answer delimited by the close ends here;
    /// any other answer was cut short, which the close that follows tells.
    pub(crate) fn upstream_ended(&mut self, reader: &mut ResponseReader, io: &mut Io<'_>) -> Flow {
        let client = self.upstreams.get(&io.id()).and_then(|upstream| upstream.client);
        if let Some(client) = client {
            if let Ok(framed) = reader.read(&[], Stream::Ended) {
                if matches!(framed.event, ResponseEvent::Body { ended: true, .. }) {
                    self.finish(client, Ending { reusable: false }, io);
                }
            }
        }
        Flow::Close
    }

    /// A backend connection closed. Idle, it leaves the pool; owing an answer, its
    /// exchange fails, and a backend that refused or timed out (its connect, or the
    /// read timeout while it owed the answer) is skipped for a while.
    pub(crate) fn upstream_closed(&mut self, closed: Closed, io: &mut Io<'_>) {
        let failure = Failure::of(closed);
        if let Some(upstream) = self.upstreams.get(&io.id()) {
            let owed = upstream.client.is_some();
            if matches!(failure, Failure::ConnectRefused | Failure::ConnectTimedOut)
                || (owed && failure == Failure::ReadTimedOut)
            {
                self.backends.failed(upstream.backend, io.now());
            }
            if owed {
                self.fail(failure, io);
            }
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
