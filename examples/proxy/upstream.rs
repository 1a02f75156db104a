//! The backend side of an exchange: each answer read as it arrives (head, then
//! body pieces) by the strict grammar, its head rewritten for the client with the
//! framing the proxy gives its body, and its content sent on under that framing
//! (`reframe.rs`); at its end the connection goes back to the pool, or closes. A
//! backend that fails before answering gets the client a 502 or a 504, or the
//! request a second try.

use percore::http::{BodyKind, Method, ResponseEvent, ResponseHead, ResponseReader, Stream, Version};
use percore::reactor::{Closed, ConnId, Flow, Io, Verdict};

use crate::heads::{self, Declared, Persist, Policy};
use crate::proxy::{Exchange, Failure, Proxy};
use crate::reframe::{Outgoing, Piece};

/// Which answer a head that goes to the client is.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Answering {
    /// `1xx` but 101: the final answer follows.
    Interim,
    Final,
}

/// How an answer that ended leaves its two connections.
struct Ending {
    /// The backend connection may carry another request.
    reusable: bool,
}

/// What a response's trailers may carry on to a client: all but what frames,
/// routes or controls a message (the client's own fields are the ones the
/// [`Policy`] judges).
const ANSWERS: Policy = Policy { underscores_in_headers: true, trust_forwarded_headers: true };

impl Proxy {
    /// Reads a backend's answer: the head goes to the client rewritten, then the
    /// body's content under the proxy's framing; the answer's end ends the exchange.
    /// A head is held until what follows it in the same input was read: an answer
    /// whose framing breaks at once gets the client a 502, not a head cut short.
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
        let Some(method) = self.exchanges.get(&client).map(|exchange| exchange.method) else {
            return Verdict::close(0);
        };
        reader.set_method(method);
        let (mut at, mut head_held) = (0, false);
        loop {
            let framed = match reader.read(&input[at..], Stream::Open) {
                Ok(framed) => framed,
                Err(_) => {
                    self.fail(Failure::Broken, io);
                    return Verdict::close(at);
                }
            };
            // What followed a held head was read well (or is still to come): it goes.
            if std::mem::take(&mut head_held) {
                self.answering(client, &[], Answering::Final, io);
            }
            let ended = match framed.event {
                ResponseEvent::Partial => return Verdict::keep(at),
                ResponseEvent::Head { head, ended } => {
                    let Some(exchange) = self.exchanges.get_mut(&client) else { return Verdict::close(at) };
                    if head.is_interim() && exchange.version == Version::Http10 {
                        // An HTTP/1.0 client knows no interim answer (RFC 9110, 15.2).
                        at += framed.consumed;
                        continue;
                    }
                    let Some(persist) = answer_head(exchange, &head, self.draining) else {
                        // A transfer coding the proxy cannot read and frame again.
                        self.fail(Failure::Broken, io);
                        return Verdict::close(at);
                    };
                    let answer = exchange.answer;
                    self.scratch.clear();
                    heads::forward_response(&mut self.scratch, &head, answer, persist);
                    let content = &input[at + head.as_bytes().len()..at + framed.consumed];
                    at += framed.consumed;
                    if !ended {
                        head_held = true;
                        continue;
                    }
                    let interim = head.is_interim();
                    self.answering(
                        client,
                        content,
                        if interim { Answering::Interim } else { Answering::Final },
                        io,
                    );
                    !interim
                }
                ResponseEvent::Body { content, trailers, ended } => {
                    let Some(exchange) = self.exchanges.get(&client) else { return Verdict::close(at) };
                    let piece = Piece { content, trailers, ended };
                    exchange.answer.forward(&piece, client, io, &mut self.scratch, &ANSWERS);
                    at += framed.consumed;
                    ended
                }
            };
            if ended {
                let reusable = self.exchanges.get(&client).is_some_and(|e| e.reusable) && at == input.len();
                return match self.finish(client, Ending { reusable }, io) {
                    Flow::Close => Verdict::close(at),
                    _ => Verdict::keep(at),
                };
            }
        }
    }

    /// The head in `scratch` goes to `client`, then `content`, the body that came
    /// whole with it. After a final answer's head a failure cuts the answer; after
    /// an interim one (`100 Continue`) the client can still get a 502.
    fn answering(&mut self, client: ConnId, content: &[u8], answering: Answering, io: &mut Io<'_>) {
        io.write_to(client, &self.scratch);
        io.write_to(client, content);
        if let Some(exchange) = self.exchanges.get_mut(&client) {
            exchange.answered |= answering == Answering::Final;
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
            self.close_client(client, io);
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
        #[cfg(feature = "tls")]
        if let (Some(backend), Some(why)) =
            (self.upstreams.get(&io.id()).map(|u| u.backend), io.tls_failure())
        {
            self.tell_tls_failure(backend, why);
        }
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
            self.close_client(client, io);
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
            self.close_client(client, io);
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

/// What a final or interim answer's head `head` makes of `exchange`: how its body
/// goes on to the client (`exchange.answer`), whether the client and the backend
/// connection stay open after it, and what the head tells the client of that;
/// `None` for a transfer coding other than `chunked` alone, which the proxy cannot
/// read and frame again (502).
fn answer_head(exchange: &mut Exchange, head: &ResponseHead<'_>, draining: bool) -> Option<Persist> {
    if head.is_interim() {
        // No body, no framing field (RFC 9110, 8.6): whatever it says goes no further.
        exchange.answer = Outgoing::None;
        return Some(Persist::Keep);
    }
    let declared = Declared::of(head);
    if declared.transfer_encoding && !declared.chunked_alone {
        return None;
    }
    let client_chunks = exchange.version == Version::Http11;
    exchange.answer = match head.body() {
        // 204 and 101 have no framing fields (RFC 9110, 8.6 and 6.4.1).
        BodyKind::None if head.status() < 200 || head.status() == 204 => Outgoing::None,
        // An answer to HEAD, or a 304, says what framing its body would have.
        BodyKind::None if declared.transfer_encoding && client_chunks => Outgoing::Chunked,
        BodyKind::None => {
            declared.length.filter(|_| !declared.transfer_encoding).map_or(Outgoing::None, Outgoing::Length)
        }
        BodyKind::Length(len) => Outgoing::Length(len),
        BodyKind::Chunked if client_chunks => Outgoing::Chunked,
        // An HTTP/1.0 client reads the content until the close.
        BodyKind::Chunked | BodyKind::UntilClose => Outgoing::UntilClose,
    };
    // The client stays open only after an answer framed one way, whose end it
    // can find without the close.
    exchange.keep_client &= exchange.sent
        && !draining
        && exchange.answer != Outgoing::UntilClose
        && !declared.is_ambiguous()
        && head.status() != 101;
    exchange.reusable = head.keep_alive();
    Some(Persist::of(exchange.keep_client, exchange.version))
}
