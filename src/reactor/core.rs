//! [`Core`]: what the work on one connection needs besides the connection, and that
//! work, per wake-up: read, hand to the protocol, send; and the other callbacks,
//! whose output is sent the same way.

use std::io;
use std::os::fd::AsFd;

use super::clock::Clock;
use super::config::OUTPUT_BUDGET;
use super::connection::{Connection, Phase};
use super::io::IoState;
use super::slab::Token;
use super::{Closed, Config, Flow, Protocol, Then};
use crate::sys;

/// Reads one connection may do per wake-up before the others get their turn.
pub(crate) const READS_PER_WAKE: usize = 16;

/// Bytes read per `recv`: the loop's one read buffer, shared by all connections. A
/// message longer than this reaches `on_data` over several calls; a protocol that
/// takes larger ones sets [`Config::max_pending_input`] to hold them.
pub(crate) const READ_BUFFER: usize = 64 * 1024;

/// What the work on one connection needs besides the connection itself, apart from
/// the slab, so that the two can be borrowed together.
#[derive(Debug)]
pub(crate) struct Core<P> {
    pub(crate) protocol: P,
    pub(crate) read_buffer: Box<[u8]>,
    /// What a callback's `Io` borrows: the loop's one output buffer (what a callback
    /// writes, before it is sent), the timers, and what callbacks asked of other
    /// connections.
    pub(crate) io: IoState,
    pub(crate) clock: Clock,
    pub(crate) config: Config,
    /// A graceful stop is under way ([`Reactor::drain`](super::Reactor::drain)).
    pub(crate) draining: bool,
}

/// What to do with a connection after some work on it.
pub(crate) enum Next {
    /// Nothing until its next edge.
    Wait,
    /// Its reading budget ran out with input possibly left: serve it again soon.
    Again,
    /// Its phase may have changed: close, linger, or keep waiting.
    Settle,
    /// Close at once, for this reason.
    Close(Closed),
}

/// The callbacks other than `on_data`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Callback {
    Open,
    Timer,
    Wake,
}

impl<P: Protocol> Core<P> {
    /// `protocol` under `config`, on a clock started now.
    pub(crate) fn new(protocol: P, config: Config) -> Core<P> {
        let clock = Clock::new();
        Core {
            protocol,
            read_buffer: vec![0; READ_BUFFER].into_boxed_slice(),
            io: IoState::new(clock.start()),
            clock,
            config,
            draining: false,
        }
    }

    /// Whether an open connection that got no readable edge has work anyway: reading
    /// paused for output that has drained, or a paused protocol whose output is sent.
    /// No new edge would bring either back.
    pub(crate) fn may_resume(&self, conn: &Connection<P::Conn>) -> bool {
        let unsent = conn.unsent();
        (conn.read_paused && unsent <= OUTPUT_BUDGET) || (conn.paused && unsent == 0 && !conn.awaiting_output)
    }

    /// Reads within the wake-up's budget, hands the input to the protocol and sends
    /// its answer, until the socket is drained, the output is over budget, the
    /// protocol waits, or the connection is closing.
    pub(crate) fn read_and_answer(&mut self, conn: &mut Connection<P::Conn>, token: Token) -> Next {
        conn.read_paused = false;
        // Taken for the reads, so that the protocol can be called with `self`.
        let mut buffer = std::mem::take(&mut self.read_buffer);
        let next = self.read_into(conn, token, &mut buffer);
        self.read_buffer = buffer;
        next
    }

    fn read_into(&mut self, conn: &mut Connection<P::Conn>, token: Token, buffer: &mut [u8]) -> Next {
        if conn.blocked || conn.input_ended {
            // Read again when the other connection drains; nothing more to read.
            return Next::Wait;
        }
        for _ in 0..READS_PER_WAKE {
            if conn.unsent() > OUTPUT_BUDGET {
                conn.read_paused = true;
                return Next::Wait;
            }
            if conn.paused {
                if conn.unsent() > 0 || conn.awaiting_output {
                    // Resumed once its output is sent.
                    return Next::Wait;
                }
                conn.paused = false;
                if !conn.pending_input.is_empty() {
                    // What was received comes before reading more.
                    match self.answer(conn, token, &[], false) {
                        Next::Wait => continue,
                        next => return next,
                    }
                }
            }
            let n = match sys::recv(conn.fd.as_fd(), buffer) {
                Ok(0) => return self.end_input(conn, token),
                Ok(n) => n,
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => return Next::Wait,
                Err(e) => return Next::Close(Closed::ReadFailed(e.kind())),
            };
            let filled = n == buffer.len();
            match self.answer(conn, token, &buffer[..n], filled) {
                Next::Wait if conn.pending_input.len() > self.config.max_pending_input => {
                    return Next::Close(Closed::Done)
                }
                Next::Wait => {}
                next => return next,
            }
            if !self.io.deferred.is_empty() {
                // What the protocol asked of other connections (bytes written on to
                // them) is done before more is read.
                return if filled || conn.read_closed || conn.paused { Next::Again } else { Next::Wait };
            }
            // A short read drained the socket, unless the peer has shut down (then
            // only a read of 0 says so); a paused protocol goes on first.
            if !filled && !conn.read_closed && !conn.paused {
                return Next::Wait;
            }
        }
        Next::Again
    }

    /// Hands the protocol its input (`fresh`, after what is pending) and sends its
    /// answer. `Wait` means the connection stays open. `maybe_more`: the socket may
    /// hold more input than was read (the read filled the buffer), so a close must
    /// linger.
    fn answer(
        &mut self,
        conn: &mut Connection<P::Conn>,
        token: Token,
        fresh: &[u8],
        maybe_more: bool,
    ) -> Next {
        let from_pending = !conn.pending_input.is_empty();
        if from_pending {
            conn.pending_input.extend_from_slice(fresh);
        }
        let input: &[u8] = if from_pending { &conn.pending_input } else { fresh };
        let mut io = self.io.for_call(token, self.clock.instant(), conn.unsent());
        let verdict = self.protocol.on_data(&mut conn.state, input, &mut io);
        let consumed = verdict.consumed.min(input.len());
        let unconsumed = consumed < input.len();
        conn.input_consumed = conn.input_consumed.saturating_add(u32::try_from(consumed).unwrap_or(u32::MAX));
        match verdict.then {
            Then::Read => conn.keep_input(from_pending, fresh, consumed),
            Then::Pause => {
                conn.keep_input(from_pending, fresh, consumed);
                conn.paused = true;
                conn.awaiting_output = self.io.output.is_empty();
            }
            Then::Close => {
                let linger = self.lingers(conn, unconsumed || maybe_more);
                conn.pending_input = Vec::new();
                conn.phase = Phase::Closing { linger };
            }
        }
        self.send(conn)
    }

    /// Calls `callback` on an open connection and sends what it wrote.
    pub(crate) fn callback(
        &mut self,
        conn: &mut Connection<P::Conn>,
        token: Token,
        callback: Callback,
    ) -> Next {
        if conn.phase != Phase::Open {
            return Next::Wait;
        }
        let mut io = self.io.for_call(token, self.clock.instant(), conn.unsent());
        let (protocol, state) = (&mut self.protocol, &mut conn.state);
        let flow = match callback {
            Callback::Open => protocol.on_open(state, &mut io),
            Callback::Timer => protocol.on_timer(state, &mut io),
            Callback::Wake => protocol.on_wake(state, &mut io),
        };
        if !self.io.output.is_empty() {
            conn.awaiting_output = false;
        }
        if flow == Flow::Close {
            let linger = self.lingers(conn, false);
            conn.pending_input = Vec::new();
            conn.phase = Phase::Closing { linger };
        }
        self.send(conn)
    }

    /// Whether a close the protocol asks for lingers (reads what the peer still
    /// sends until it closes): closing on unread input resets the connection, and
    /// the reset can destroy our last answers before the peer reads them. So it
    /// lingers when the peer may go on sending: bytes beyond the last answer or in
    /// the socket (`maybe_more`), a message still arriving, or a graceful stop, a
    /// close the peer did not ask for, which one that pipelines sends into.
    pub(crate) fn lingers(&self, conn: &Connection<P::Conn>, maybe_more: bool) -> bool {
        maybe_more || !conn.pending_input.is_empty() || self.draining || P::is_busy(&conn.state)
    }

    /// The peer finished sending: what it sent last is kept (for `on_close`, a
    /// message delimited by the end of stream), and the protocol says whether the
    /// connection closes or stays open for writing.
    pub(crate) fn end_input(&mut self, conn: &mut Connection<P::Conn>, token: Token) -> Next {
        conn.read_closed = true;
        conn.input_ended = true;
        let mut io = self.io.for_call(token, self.clock.instant(), conn.unsent());
        if self.protocol.on_input_end(&mut conn.state, &mut io) == Flow::Close {
            conn.phase = Phase::Closing { linger: false };
        }
        self.send(conn)
    }

    /// Sends the output of a callback; `Settle` when the connection is closing.
    fn send(&mut self, conn: &mut Connection<P::Conn>) -> Next {
        if let Err(e) = conn.send(&self.io.output) {
            return Next::Close(Closed::WriteFailed(e.kind()));
        }
        if conn.phase != Phase::Open {
            return Next::Settle;
        }
        Next::Wait
    }
}

/// Reads and drops what a lingering connection still sends; closes at its end.
pub(crate) fn discard_input<S>(conn: &mut Connection<S>, read_buffer: &mut [u8]) -> Next {
    for _ in 0..READS_PER_WAKE {
        match sys::recv(conn.fd.as_fd(), read_buffer) {
            Ok(0) => return Next::Close(Closed::Done),
            Ok(_) => {}
            Err(e) if e.kind() == io::ErrorKind::WouldBlock => return Next::Wait,
            Err(_) => return Next::Close(Closed::Done),
        }
    }
    Next::Again
}

#[cfg(test)]
mod tests {
    use super::super::output::tests::small_send_buffer_pair;
    use super::super::Unused;
    use super::*;
    use std::os::fd::OwnedFd;
    use std::os::unix::net::UnixStream;

    /// A connection with `unsent` bytes queued (none, or more than its socket takes:
    /// the peer, returned, does not read).
    fn with_unsent(unsent: usize) -> (Connection<()>, UnixStream) {
        let (ours, peer) = small_send_buffer_pair();
        let mut conn = Connection::new(OwnedFd::from(ours));
        if unsent > 0 {
            let first = 64 * 1024;
            conn.send_bytes(&vec![b'x'; first]).expect("a send");
            let queued = conn.unsent();
            assert!(queued > 0 && queued <= unsent, "the socket took {} bytes", first - queued);
            // Queued whole behind what the full socket did not take.
            conn.send_bytes(&vec![b'y'; unsent - queued]).expect("queued");
        }
        assert_eq!(conn.unsent(), unsent);
        (conn, peer)
    }

    #[test]
    fn reading_paused_for_output_resumes_once_the_output_is_within_the_budget() {
        let core = Core::new(Unused, Config::default());
        for (unsent, resumes) in [(0, true), (OUTPUT_BUDGET, true), (OUTPUT_BUDGET + 1, false)] {
            let (mut conn, _peer) = with_unsent(unsent);
            assert!(!core.may_resume(&conn), "nothing paused, {unsent} bytes unsent");
            conn.read_paused = true;
            assert_eq!(core.may_resume(&conn), resumes, "{unsent} bytes unsent");
        }
    }

    #[test]
    fn a_paused_protocol_resumes_once_all_its_output_is_sent_unless_it_awaits_more() {
        let core = Core::new(Unused, Config::default());
        let (mut conn, _peer) = with_unsent(0);
        conn.paused = true;
        assert!(core.may_resume(&conn));
        conn.awaiting_output = true;
        assert!(!core.may_resume(&conn), "awaiting output another connection writes");
        let (mut conn, _peer) = with_unsent(OUTPUT_BUDGET);
        conn.paused = true;
        assert!(!core.may_resume(&conn), "output unsent");
    }
}
