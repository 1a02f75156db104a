//! How connections leave the loop: closed at once, settled once their output is
//! sent (lingering while the peer may still be sending), or timed out.

use std::io;
use std::os::fd::AsFd;

use super::connection::{Connection, Phase};
use super::core;
use super::slab::Token;
use super::{Closed, Core, Protocol, Reactor};
use crate::sys;

impl<P: Protocol> Reactor<P> {
    /// The one way a connection leaves the loop: its timer is cancelled, the
    /// protocol hears of it, and the socket is closed when the connection drops.
    pub(crate) fn close(&mut self, token: Token, closed: Closed) {
        let Some(mut conn) = self.connections.remove(token) else { return };
        self.core.io.deferred.ids.give_back(token);
        if conn.blocking {
            self.unblock(token);
        }
        if !self.splices.is_empty() {
            self.end_splices(token);
        }
        let closed = match closed {
            Closed::TimedOut if conn.connecting => Closed::ConnectFailed(io::ErrorKind::TimedOut),
            closed => closed,
        };
        self.core.on_close(token, &mut conn.state, closed, &conn.pending_input);
        if matches!(closed, Closed::ReadFailed(_) | Closed::WriteFailed(_) | Closed::ConnectFailed(_)) {
            self.stats.errors += 1;
        }
        if !self.core.io.deferred.is_empty() {
            self.run_deferred();
        }
    }

    pub(crate) fn close_where(&mut self, matches: impl FnMut(&Connection<P::Conn>) -> bool, closed: Closed) {
        for token in self.connections.tokens_where(matches) {
            self.close(token, closed);
        }
    }

    /// Closes a connection whose output is all sent, lingering first when the peer
    /// may still be sending: unread input at close makes the kernel reset the
    /// connection, which can destroy the answer before the peer reads it.
    pub(crate) fn settle(&mut self, token: Token) {
        let Some(conn) = self.connections.get_mut(token) else { return };
        let Phase::Closing { linger } = conn.phase else { return };
        if conn.unsent() > 0 {
            // Held to the send timeout until the rest is taken.
            return self.rearm(token);
        }
        if linger {
            // After the peer's end of stream only what is queued remains to be read;
            // before it, our end of stream tells the peer to finish.
            if conn.read_closed || sys::shutdown_write(conn.fd.as_fd()).is_ok() {
                conn.phase = Phase::Lingering;
                let next = core::discard_input(conn, &mut self.core.read_buffer);
                return self.finish(token, next);
            }
        }
        let closed = if conn.read_closed { Closed::ByPeer } else { Closed::Done };
        self.close(token, closed);
    }

    pub(crate) fn close_expired(&mut self) {
        if self.drain_expired() {
            self.close_where(|_| true, Closed::TimedOut);
            // Nothing is left to serve what the listener still queues.
            return self.drop_listener();
        }
        let now = self.core.clock.now();
        self.close_where(|conn| conn.deadline != 0 && conn.deadline <= now, Closed::TimedOut);
    }
}

impl<P: Protocol> Core<P> {
    /// Tells the protocol that connection `token` is gone. What the call writes to
    /// it is dropped, and a timer it sets is cancelled; what it asks of other
    /// connections is done.
    pub(crate) fn on_close(&mut self, token: Token, state: &mut P::Conn, closed: Closed, unconsumed: &[u8]) {
        let mut io = self.io.for_call(token, self.clock.instant(), 0);
        self.protocol.on_close(state, closed, unconsumed, &mut io);
        self.io.output.clear();
        self.io.timers.cancel(token);
    }
}
