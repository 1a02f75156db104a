//! What is asked of a connection from outside its own callbacks: the orders of
//! other connections' callbacks (resume, shut down, close, write, block, splice),
//! its policies, and a graceful stop.

use std::io;
use std::time::{Duration, SystemTime};

use super::calls::Call;
use super::connection::{Connection, Life, Reading, Writing};
use super::deadline;
use super::rules::{Machine, Spliced, Stopping};
use crate::reactor::config::{DrainPolicy, IdleTimeout, OUTPUT_BUDGET};
use crate::reactor::protocol::{Closed, Protocol};
use crate::reactor::slab::Token;

impl<P: Protocol> Machine<P> {
    /// Ends a pause, or hands again the input a connection reading holds: once its
    /// output is sent, `on_data` is called with what it holds.
    pub(crate) fn resume(&mut self, conn: &mut Connection<P::Conn>) {
        match conn.reading {
            Reading::Paused { .. } => conn.reading = Reading::Paused { awaiting_output: false },
            // A pause that ends as soon as nothing is unsent: the held input first.
            Reading::Open if !conn.held.is_empty() => {
                conn.reading = Reading::Paused { awaiting_output: false }
            }
            _ => {}
        }
    }

    /// Shuts the writing side down once the output is sent.
    pub(crate) fn shutdown(&mut self, conn: &mut Connection<P::Conn>) {
        if !conn.is_open() {
            return;
        }
        conn.writing = match conn.writing {
            Writing::Connecting { accepted, .. } => Writing::Connecting { then_shut: true, accepted },
            Writing::Open => Writing::ShutRequested,
            other => other,
        };
    }

    /// Closes the connection once its output is sent, as if its own callback had
    /// said so.
    pub(crate) fn close_asked(&mut self, conn: &mut Connection<P::Conn>) {
        self.close(conn, Call::Event);
    }

    /// Sets (or with `None` clears) `conn`'s read timeout (which the connection's
    /// next `rearm` applies).
    pub(crate) fn set_read_timeout(
        &mut self,
        conn: &mut Connection<P::Conn>,
        token: Token,
        timeout: Option<Duration>,
    ) {
        let millis = deadline::millis(timeout);
        conn.deadline.set_reads_timed(millis > 0);
        if millis > 0 {
            let slot = token.index();
            if slot >= self.read_timeouts.len() {
                self.read_timeouts.resize(slot + 1, 0);
            }
            self.read_timeouts[slot] = millis;
        }
    }

    pub(crate) fn set_idle_timeout(&mut self, conn: &mut Connection<P::Conn>, idle: IdleTimeout) {
        conn.idle = idle;
    }

    pub(crate) fn set_drain_policy(&mut self, conn: &mut Connection<P::Conn>, policy: DrainPolicy) {
        conn.drain = policy;
    }

    /// Bytes another connection writes to this one: whether the wire may take them
    /// now (then [`sent_bytes`](Machine::sent_bytes) reports it). Otherwise they
    /// are queued, or dropped when the connection is closing or shut down.
    /// A pause that waited for output ends once these are sent.
    pub(crate) fn takes_bytes_now(&mut self, conn: &mut Connection<P::Conn>, bytes: &[u8]) -> bool {
        if !conn.is_open() || conn.drops_output() || bytes.is_empty() {
            return false;
        }
        if let Reading::Paused { awaiting_output: true } = conn.reading {
            conn.reading = Reading::Paused { awaiting_output: false };
        }
        if conn.sends_directly() {
            return true;
        }
        conn.queue().push_bytes(bytes);
        false
    }

    /// What the wire took of `bytes` another connection wrote; the rest is queued.
    pub(crate) fn sent_bytes(
        &mut self,
        conn: &mut Connection<P::Conn>,
        bytes: &[u8],
        sent: io::Result<usize>,
    ) {
        match sent {
            Ok(n) if n < bytes.len() => {
                conn.ready.writable = false;
                conn.queue().push_bytes(&bytes[n..]);
            }
            Ok(_) => {}
            Err(e) => conn.life = Life::Over(Closed::WriteFailed(e.kind())),
        }
    }

    /// Whether a connection written to is over the budget: then it blocks its
    /// writer, whose reading stops until this one drains.
    pub(crate) fn is_over_budget(&mut self, conn: &mut Connection<P::Conn>) -> bool {
        let over = conn.unsent() > OUTPUT_BUDGET;
        conn.blocking |= over;
        over
    }

    /// Another connection's bytes wait for this one (in a splice's pipe): its
    /// output drained, it lets the writer go on.
    pub(crate) fn holds_back_a_writer(&mut self, conn: &mut Connection<P::Conn>) {
        conn.blocking = true;
    }

    /// Stops `conn`'s reading for another connection's output (its read timeout,
    /// if it has one, stops with it). Returns whether it was not stopped already.
    pub(crate) fn block(&mut self, conn: &mut Connection<P::Conn>, token: Token) -> bool {
        let newly = !std::mem::replace(&mut conn.blocked, true);
        if newly {
            self.rearm(conn, token);
        }
        newly
    }

    /// Lets `conn` read again: the other connection drained.
    pub(crate) fn unblock(&mut self, conn: &mut Connection<P::Conn>) {
        conn.blocked = false;
    }

    /// Starts moving `conn`'s input on to another connection, `len` bytes of it
    /// (`None`: until its end). `None` when it is not open, or its input ended.
    /// Otherwise what it held goes first: all of it, or the first `len` bytes; if
    /// those are all there is to move, no splice starts, and the rest of what it
    /// held is handed to the protocol again.
    pub(crate) fn splice(&mut self, conn: &mut Connection<P::Conn>, len: Option<u64>) -> Option<Spliced> {
        if !conn.is_open() || matches!(conn.reading, Reading::Ended) {
            return None;
        }
        if let Some(len) = len.filter(|_| self.holds_all_of(conn, len)) {
            let mut first = conn.held.take();
            conn.held = first.split_off(len as usize).into();
            self.resume(conn);
            return Some(Spliced { first, left: Some(0) });
        }
        let first = conn.held.take();
        conn.reading = Reading::Spliced;
        conn.ready.readable = true;
        Some(Spliced { left: len.map(|len| len - first.len() as u64), first })
    }

    /// Whether `conn` holds all of the `len` bytes a splice is to move (`None`:
    /// until its input ends, which it never holds): then no pipe is needed.
    pub(crate) fn holds_all_of(&self, conn: &Connection<P::Conn>, len: Option<u64>) -> bool {
        len.is_some_and(|len| len <= conn.held.len() as u64)
    }

    /// The connection `conn` fed is gone, or took all it was to: its input reaches
    /// the protocol again.
    pub(crate) fn unsplice(&mut self, conn: &mut Connection<P::Conn>) {
        if matches!(conn.reading, Reading::Spliced) {
            conn.reading = Reading::Open;
        }
    }

    /// The turn of a wall-clock second: the protocol is told (what it orders is the
    /// driver's to carry out).
    pub(crate) fn tick(&mut self, now: SystemTime) {
        self.protocol.on_tick(now, &mut self.io.conns());
    }

    /// A graceful stop begins: the protocol is told (what it orders is the driver's
    /// to carry out), and closes linger from now on.
    pub(crate) fn stop_begun(&mut self) {
        if matches!(self.stopping, Stopping::No) {
            self.stopping = Stopping::Grace;
            self.protocol.on_drain(&mut self.io.conns());
        }
    }

    /// The stop's grace is over: a connection that is idle is closed.
    pub(crate) fn grace_over(&mut self) {
        self.stopping = Stopping::ClosingIdle;
    }

    /// Whether a graceful stop may close `conn` now, as an idle one: nothing
    /// pending, the protocol not busy with it (by its state or its word), and not a
    /// connection the stop leaves alone.
    pub(crate) fn may_close_idle(&self, conn: &Connection<P::Conn>) -> bool {
        conn.has_nothing_pending()
            && !conn.busy
            && !P::is_busy(&conn.state)
            && conn.drain == DrainPolicy::CloseWhenIdle
    }

    /// The protocol says `conn` is in the middle of an exchange another connection
    /// carries on (`busy`), or no longer is.
    pub(crate) fn set_busy(&mut self, conn: &mut Connection<P::Conn>, busy: bool) {
        conn.busy = busy;
    }
}
