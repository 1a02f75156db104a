//! What the wire says: its edges, and what came of each read, send and shutdown.

use std::io;

use super::connection::{Connection, Life, Writing};
use super::rules::{start_lingering, Edge, Machine};
use crate::reactor::io::Ends;
use crate::reactor::protocol::{Closed, Protocol};
use crate::reactor::slab::Token;

impl<P: Protocol> Machine<P> {
    /// The wire's edge: what it is ready for now.
    pub(crate) fn ready(&mut self, conn: &mut Connection<P::Conn>, edge: Edge) {
        conn.ready.readable |= edge.readable || edge.read_closed;
        conn.ready.writable |= edge.writable;
        conn.ready.read_closed |= edge.read_closed;
    }

    /// Input arrived: `filled` when it filled the read, so more may wait.
    pub(crate) fn received(
        &mut self,
        conn: &mut Connection<P::Conn>,
        token: Token,
        ends: Ends<'_>,
        fresh: &[u8],
        filled: bool,
    ) {
        // A short read drained the wire, unless the peer shut down: then only the
        // end of its stream says so.
        conn.ready.readable = filled || conn.ready.read_closed;
        conn.deadline.read_some();
        self.hand_in(conn, token, ends, fresh, filled);
        if conn.is_open() && conn.held.len() > self.limits.max_held_input {
            conn.life = Life::Over(Closed::Done);
        }
    }

    /// The wire has no input now.
    pub(crate) fn nothing_to_read(&mut self, conn: &mut Connection<P::Conn>) {
        conn.ready.readable = false;
    }

    /// Reading failed (a reset).
    pub(crate) fn read_failed(&mut self, conn: &mut Connection<P::Conn>, kind: io::ErrorKind) {
        conn.life = Life::Over(Closed::ReadFailed(kind));
    }

    /// What a lingering connection read and dropped: the end of the peer's stream
    /// (or an error) ends it.
    pub(crate) fn discarded(&mut self, conn: &mut Connection<P::Conn>, read: io::Result<usize>) {
        match read {
            Ok(0) => conn.life = Life::Over(Closed::Done),
            Ok(_) => {}
            Err(e) if e.kind() == io::ErrorKind::WouldBlock => conn.ready.readable = false,
            Err(_) => conn.life = Life::Over(Closed::Done),
        }
    }

    /// What the wire took of the last callback's output; the rest is queued.
    pub(crate) fn sent(&mut self, conn: &mut Connection<P::Conn>, sent: io::Result<usize>) {
        self.io.output_of = None;
        match sent {
            Ok(n) if n < self.io.output.len() => {
                conn.ready.writable = false;
                conn.queue().push(&self.io.output, n);
            }
            Ok(_) => {}
            Err(e) => conn.life = Life::Over(Closed::WriteFailed(e.kind())),
        }
    }

    /// What the wire took of the queue.
    pub(crate) fn flushed(&mut self, conn: &mut Connection<P::Conn>, sent: io::Result<usize>) {
        match sent {
            Ok(n) => {
                took(conn, n);
                if conn.unsent() == 0 {
                    // An idle connection owns no buffer.
                    conn.queue = None;
                } else {
                    conn.ready.writable = false;
                }
            }
            Err(e) => conn.life = Life::Over(Closed::WriteFailed(e.kind())),
        }
    }

    /// The writing side was shut down (or failed to be): a close goes on to
    /// linger; an open connection drops what is written from now on.
    pub(crate) fn shut_down(&mut self, conn: &mut Connection<P::Conn>, result: io::Result<()>) {
        conn.writing = Writing::Shut;
        match (conn.life, result) {
            (Life::Closing { .. }, Ok(())) => start_lingering(conn),
            // Nothing to linger on: the peer is gone.
            (Life::Closing { closed, .. }, Err(_)) => conn.life = Life::Over(closed),
            (_, Err(e)) => conn.life = Life::Over(Closed::WriteFailed(e.kind())),
            (_, Ok(())) => {}
        }
    }

    /// Whether `conn` takes bytes another connection spliced to it now: it is open
    /// and established, and what was written to it before goes first.
    pub(crate) fn takes_spliced(&self, conn: &Connection<P::Conn>) -> bool {
        conn.is_open() && !conn.is_connecting() && conn.unsent() == 0
    }

    /// What the wire of `conn` took of the bytes spliced to it: how many (none for
    /// now, on `WouldBlock`), or how it closes.
    pub(crate) fn emptied(
        &mut self,
        conn: &mut Connection<P::Conn>,
        sent: io::Result<usize>,
    ) -> Result<usize, Closed> {
        match sent {
            Ok(n) => {
                took(conn, n);
                Ok(n)
            }
            Err(e) if e.kind() == io::ErrorKind::WouldBlock => Ok(0),
            Err(e) => Err(Closed::WriteFailed(e.kind())),
        }
    }
}

/// The peer of `conn` took `n` bytes of output: any is progress against the send
/// timeout.
fn took<C>(conn: &mut Connection<C>, n: usize) {
    if n > 0 {
        conn.deadline.output_progressed();
    }
}
