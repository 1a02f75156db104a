//! What a callback asks of the rest of the loop through its [`Io`](super::Io):
//! open a connection, write to, wake, resume, shut down or close another. The
//! connection being served is borrowed during the call, so each request is queued
//! and carried out as soon as the call returns, in the same turn.

use std::net::SocketAddr;
use std::ops::Range;

use super::connection::Phase;
use super::context::OUTPUT_BUDGET;
use super::drive::Next;
use super::slab::{Ids, Token};
use super::{Closed, ConnId, Protocol, Reactor};

/// Unsent output at or below which a connection lets the connections whose reading
/// stopped for it read again: half the budget, so that the next read does not take
/// it over the budget at once.
pub(crate) const RESUME_BELOW: usize = OUTPUT_BUDGET / 2;

/// How long an idle connection may stay open, as [`Io::set_idle_timeout`](super::Io::set_idle_timeout) sets it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum IdleTimeout {
    /// The loop's [`idle_timeout`](super::Config::idle_timeout): the default.
    FromConfig,
    /// None: the connection stays open however long it is idle (a tunnel whose ends
    /// keep their own timeouts). The other timeouts still apply.
    Never,
}

/// What a graceful stop does with a connection that is idle, as
/// [`Io::set_drain_policy`](super::Io::set_drain_policy) sets it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum DrainPolicy {
    /// Closes it once the stop's grace is over, as a server closes an idle
    /// keep-alive connection: the default.
    CloseWhenIdle,
    /// Leaves it until it closes by itself (or the stop's timeout): for a stream
    /// whose pauses are not ends, such as a relay's pair.
    UntilClosed,
}

/// One thing a callback asked for.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) enum Request {
    /// Open a connection to the address under this token, taken at once.
    Connect(Token, SocketAddr),
    /// Send these bytes of the batch's bytes on `to`; `from` wrote them.
    Write {
        from: Token,
        to: Token,
        bytes: Range<usize>,
    },
    Wake(Token),
    Resume(Token),
    Shutdown(Token),
    Close(Token),
    Idle(Token, IdleTimeout),
    Drain(Token, DrainPolicy),
    /// Splice the first connection's input on to the second.
    Splice(Token, Token),
}

/// The requests of the calls made since the loop last carried them out, and the
/// tokens they take for new connections.
#[derive(Debug, Default)]
pub(crate) struct Deferred {
    pub(crate) ids: Ids,
    requests: Vec<Request>,
    /// What `Write` requests copied, one range each.
    bytes: Vec<u8>,
}

/// Requests taken to be carried out, with the bytes their writes refer to.
#[derive(Debug, Default)]
pub(crate) struct Batch {
    pub(crate) requests: Vec<Request>,
    pub(crate) bytes: Vec<u8>,
}

impl Deferred {
    pub(crate) fn push(&mut self, request: Request) {
        self.requests.push(request);
    }

    /// Copies `bytes` to be sent on `to`, after whatever was written to it before.
    pub(crate) fn write(&mut self, from: Token, to: Token, bytes: &[u8]) {
        let start = self.bytes.len();
        self.bytes.extend_from_slice(bytes);
        let end = self.bytes.len();
        // Writes in a row from one connection to another are sent as one.
        if let Some(Request::Write { from: f, to: t, bytes: range }) = self.requests.last_mut() {
            if (*f, *t) == (from, to) && range.end == start {
                range.end = end;
                return;
            }
        }
        self.requests.push(Request::Write { from, to, bytes: start..end });
    }

    pub(crate) fn is_empty(&self) -> bool {
        self.requests.is_empty()
    }

    /// Takes the requests made so far, leaving `spare`'s memory for the next ones.
    pub(crate) fn take(&mut self, spare: Batch) -> Batch {
        let requests = std::mem::replace(&mut self.requests, spare.requests);
        let bytes = std::mem::replace(&mut self.bytes, spare.bytes);
        Batch { requests, bytes }
    }
}

impl Batch {
    /// Forgets the requests, keeping the memory.
    pub(crate) fn clear(&mut self) {
        self.requests.clear();
        self.bytes.clear();
    }
}

impl<P: Protocol> Reactor<P> {
    /// Carries out what callbacks asked, in order, and what the calls that makes ask
    /// in turn, until nothing is left. A call made while it runs leaves the rest to it.
    pub(crate) fn run_deferred(&mut self) {
        let Some(mut spare) = self.batch.take() else { return };
        while !self.core.io.deferred.is_empty() {
            let batch = self.core.io.deferred.take(spare);
            for request in &batch.requests {
                self.carry_out(request, &batch.bytes);
            }
            spare = batch;
            spare.clear();
        }
        self.batch = Some(spare);
    }

    fn carry_out(&mut self, request: &Request, bytes: &[u8]) {
        match *request {
            Request::Connect(token, addr) => self.open(token, addr),
            Request::Write { from, to, bytes: ref range } => self.write_on(from, to, &bytes[range.clone()]),
            Request::Wake(token) => {
                self.wake(ConnId::of(token));
            }
            Request::Resume(token) => {
                let Some(conn) = self.connections.get_mut(token) else { return };
                conn.awaiting_output = false;
                self.drive(token, false);
            }
            Request::Shutdown(token) => {
                let Some(conn) = self.connections.get_mut(token).filter(|conn| conn.is_open()) else {
                    return;
                };
                conn.shut_requested = true;
                self.drive(token, false);
            }
            Request::Close(token) => {
                let Some(conn) = self.connections.get_mut(token).filter(|conn| conn.is_open()) else {
                    return;
                };
                let linger = !conn.pending_input.is_empty() || P::is_busy(&conn.state);
                conn.pending_input = Vec::new();
                conn.phase = Phase::Closing { linger };
                self.finish(token, Next::Settle);
            }
            Request::Idle(token, idle) => {
                let Some(conn) = self.connections.get_mut(token) else { return };
                conn.idle = idle;
                self.rearm(token);
            }
            Request::Splice(from, to) => self.start_splice(from, to),
            Request::Drain(token, policy) => {
                let Some(conn) = self.connections.get_mut(token) else { return };
                conn.drain = policy;
            }
        }
    }

    /// Opens the connection a callback asked for; if that fails at once, the
    /// protocol hears of it as of a connect that failed later.
    fn open(&mut self, token: Token, addr: SocketAddr) {
        if let Err(e) = self.place(token, addr) {
            self.core.io.deferred.ids.give_back(token);
            self.stats.errors += 1;
            let mut state = P::Conn::default();
            self.core.on_close(token, &mut state, Closed::ConnectFailed(e.kind()), &[]);
        }
    }

    /// Sends `bytes` on `to` for `from`; `from` stops reading if that leaves `to`
    /// over the budget.
    pub(crate) fn write_on(&mut self, from: Token, to: Token, bytes: &[u8]) {
        let Some(conn) = self.connections.get_mut(to).filter(|conn| conn.is_open()) else { return };
        if let Err(e) = conn.send_bytes(bytes) {
            return self.close(to, Closed::WriteFailed(e.kind()));
        }
        if conn.unsent() > OUTPUT_BUDGET {
            conn.blocking = true;
            if let Some(writer) = self.connections.get_mut(from).filter(|writer| !writer.blocked) {
                writer.blocked = true;
                self.blocked.push((to, from));
            }
        }
        self.rearm(to);
    }

    /// Lets the connections blocked on `token`'s output read again (next turn, with
    /// the others queued to be served again).
    pub(crate) fn unblock(&mut self, token: Token) {
        let mut i = 0;
        while i < self.blocked.len() {
            let (on, writer) = self.blocked[i];
            if on != token {
                i += 1;
                continue;
            }
            self.blocked.swap_remove(i);
            if let Some(conn) = self.connections.get_mut(writer) {
                conn.blocked = false;
                self.serve_soon(writer);
            }
        }
    }

    /// Serves connection `token` again at the start of the next turn, which then
    /// does not wait; once, however often it is asked.
    pub(crate) fn serve_soon(&mut self, token: Token) {
        let Some(conn) = self.connections.get_mut(token) else { return };
        if !std::mem::replace(&mut conn.queued, true) {
            self.again.push(token);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn writes_in_a_row_to_one_peer_are_one_request_and_others_keep_their_order() {
        let mut deferred = Deferred::default();
        let (a, b, c) = (Token(1), Token(2), Token(3));
        deferred.write(a, b, b"he");
        deferred.write(a, b, b"llo");
        deferred.push(Request::Wake(c));
        deferred.write(a, b, b"!");
        deferred.write(a, c, b"?");
        let batch = deferred.take(Batch::default());
        assert!(deferred.is_empty());
        assert_eq!(
            batch.requests,
            [
                Request::Write { from: a, to: b, bytes: 0..5 },
                Request::Wake(c),
                Request::Write { from: a, to: b, bytes: 5..6 },
                Request::Write { from: a, to: c, bytes: 6..7 },
            ]
        );
        assert_eq!(batch.bytes, b"hello!?");
    }
}
