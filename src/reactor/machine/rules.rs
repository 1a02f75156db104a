//! The machine's decisions: what a connection does next ([`Machine::poll`]), and
//! the deadline it waits under.

use std::time::{Duration, Instant};

use super::connection::{Connection, Life, Reading, Writing};
use super::deadline::{millis_between, Limits, Under};
use crate::reactor::config::{Config, IdleTimeout, OUTPUT_BUDGET};
use crate::reactor::io::IoState;
use crate::reactor::output::Output;
use crate::reactor::protocol::{Closed, Protocol};
use crate::reactor::slab::Token;
use crate::reactor::timers::Heap;

/// Unsent output at or below which a connection lets the connections whose reading
/// stopped for it read again: half the budget, so that the next read does not take
/// it over the budget at once.
pub(super) const RESUME_BELOW: usize = OUTPUT_BUDGET / 2;

/// A splice begun ([`Machine::splice`]): the bytes the connection held that go
/// first, and how many more to move through the pipe (`None`: until the end of
/// the input; `Some(0)`: none, the splice is over).
#[derive(Debug, PartialEq, Eq)]
pub(crate) struct Spliced {
    pub(crate) first: Vec<u8>,
    pub(crate) left: Option<u64>,
}

/// What a driver does next for a connection, as [`Machine::poll`] says.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Step {
    /// Send the last callback's output ([`Machine::output`]), and report what the
    /// wire took ([`Machine::sent`]).
    Send,
    /// Send what the connection has queued ([`Connection::queue`]), and report it
    /// ([`Machine::flushed`]).
    Flush,
    /// Read, and report what came ([`Machine::received`], `input_ended`,
    /// `nothing_to_read`, `read_failed`).
    Read,
    /// Hand a paused protocol, whose pause is over, the input it holds
    /// ([`Machine::hand_held`]): it counts as a read.
    HandHeld,
    /// Read and drop what a lingering connection's peer still sends
    /// ([`Machine::discarded`]).
    Discard,
    /// Move input on through the connection's pipe to the one it feeds.
    Splice,
    /// Let the connections blocked on this one's output read again: it drained below
    /// half the budget (or took what waited in a splice's pipe, as far as it can
    /// tell).
    Release,
    /// Shut the writing side down, and report it ([`Machine::shut_down`]).
    ShutdownWrite,
    /// Shut the writing side down to linger: read and drop what the peer still
    /// sends until it closes. Reported as `ShutdownWrite` is.
    Linger,
    /// Nothing until the wire's next edge, a timer, or an order.
    Wait,
    /// Close the connection now, for this reason ([`Machine::closed`]).
    Close(Closed),
}

/// What an edge of a connection's wire said it is ready for.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub(crate) struct Edge {
    /// Input may be read.
    pub(crate) readable: bool,
    /// Output may be sent.
    pub(crate) writable: bool,
    /// The peer shut down its side (or the connection is gone).
    pub(crate) read_closed: bool,
}

/// Where a graceful stop is, as far as the rules go.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum Stopping {
    No,
    /// Under way, in its grace: a close the protocol asks for lingers (a client that
    /// pipelines did not ask for it).
    Grace,
    /// The grace is over: a connection that turns idle is closed.
    ClosingIdle,
}

/// What the work on any connection needs besides the connection itself: the
/// protocol, what its callbacks' [`Io`] borrows, the limits, the time, and whether
/// a graceful stop is under way. One per loop (or harness).
#[derive(Debug)]
pub(crate) struct Machine<P: Protocol> {
    pub(crate) protocol: P,
    /// The one output buffer (and whose output it holds, to be sent or queued at
    /// that connection's next [`poll`](Machine::poll)), the timers, and the orders
    /// callbacks gave.
    pub(crate) io: IoState,
    pub(super) limits: Limits,
    /// The driver's clock: when its milliseconds start, and now.
    pub(super) origin: Instant,
    pub(super) now: Instant,
    /// Milliseconds from `origin` to `now`: what deadlines count.
    millis: u64,
    /// The loop's deadlines, by connection, in its milliseconds; a connection's entry
    /// may come before its deadline (see [`Heap::lower`]), never after.
    deadlines: Heap,
    /// The read timeout of each connection slot whose connection has one (its
    /// deadline says so), in milliseconds.
    pub(super) read_timeouts: Vec<u32>,
    pub(super) stopping: Stopping,
}

impl<P: Protocol> Machine<P> {
    /// `protocol` under `config`, its timers counted from `origin`.
    pub(crate) fn new(protocol: P, config: &Config, origin: Instant) -> Machine<P> {
        Machine {
            protocol,
            io: IoState::new(origin),
            limits: Limits::of(config),
            origin,
            now: origin,
            millis: 0,
            deadlines: Heap::default(),
            read_timeouts: Vec::new(),
            stopping: Stopping::No,
        }
    }

    /// The driver's time: the instant callbacks see, and the deadlines count.
    pub(crate) fn set_time(&mut self, now: Instant) {
        self.now = now;
        self.millis = millis_between(self.origin, now);
    }

    pub(crate) fn now(&self) -> Instant {
        self.now
    }

    /// The last callback's output, which [`Step::Send`] sends.
    pub(crate) fn output(&self) -> &Output {
        &self.io.output
    }

    /// The next step for `conn`, from its state alone. Moves it on where no I/O is
    /// needed: a pause with nothing held ends, a close whose output is sent goes on
    /// to linger.
    pub(crate) fn poll(&mut self, conn: &mut Connection<P::Conn>, token: Token) -> Step {
        loop {
            if let Life::Over(closed) = conn.life {
                return Step::Close(closed);
            }
            if self.io.output_of == Some(token) {
                if conn.sends_directly() && !conn.drops_output() {
                    return Step::Send;
                }
                self.io.output_of = None;
                if !conn.drops_output() {
                    conn.queue().push(&self.io.output, 0);
                }
            }
            if conn.unsent() > 0 && conn.ready.writable && !conn.is_connecting() {
                return Step::Flush;
            }
            if conn.blocking && conn.unsent() <= RESUME_BELOW {
                conn.blocking = false;
                return Step::Release;
            }
            match conn.life {
                Life::Over(closed) => return Step::Close(closed),
                Life::Closing { linger, closed } => {
                    if conn.unsent() > 0 || conn.is_connecting() {
                        return self.wait(conn, token);
                    }
                    if !linger {
                        return Step::Close(closed);
                    }
                    if !conn.ready.read_closed {
                        // Our end of stream tells the peer to finish; after its end
                        // of stream only what is queued remains to be read.
                        return Step::Linger;
                    }
                    start_lingering(conn);
                }
                Life::Lingering if conn.ready.readable => return Step::Discard,
                Life::Lingering => return self.wait(conn, token),
                Life::Open => {
                    if matches!(conn.writing, Writing::ShutRequested) && conn.unsent() == 0 {
                        return Step::ShutdownWrite;
                    }
                    if matches!(conn.reading, Reading::Ended) && matches!(conn.writing, Writing::Shut) {
                        // Both ways are done.
                        return Step::Close(Closed::Done);
                    }
                    if conn.blocked || conn.is_connecting() {
                        return self.wait(conn, token);
                    }
                    match conn.reading {
                        Reading::Paused { awaiting_output: false } if conn.unsent() == 0 => {
                            if !conn.held.is_empty() {
                                // What was received comes before reading more.
                                return Step::HandHeld;
                            }
                            conn.reading = Reading::Open;
                        }
                        Reading::Open if conn.unsent() > OUTPUT_BUDGET => return self.wait(conn, token),
                        Reading::Open if conn.ready.readable => return Step::Read,
                        Reading::Spliced if conn.ready.readable => return Step::Splice,
                        _ => return self.wait(conn, token),
                    }
                }
            }
        }
    }

    /// Nothing to do now: an idle connection is closed if a stop's grace is over,
    /// and the connection's deadline is set for what it waits for.
    fn wait(&mut self, conn: &mut Connection<P::Conn>, token: Token) -> Step {
        if matches!(self.stopping, Stopping::ClosingIdle) && self.may_close_idle(conn) {
            return Step::Close(Closed::Done);
        }
        self.rearm(conn, token);
        Step::Wait
    }

    /// Sets the connection's deadline for what it is doing now, by the precedence
    /// [`Protocol`]'s docs give.
    #[inline(always)]
    pub(crate) fn rearm(&mut self, conn: &mut Connection<P::Conn>, token: Token) {
        let under = match conn.life {
            Life::Lingering => Under::Linger,
            _ if conn.is_handshaking() => Under::Handshake,
            _ if conn.is_connecting() => Under::Connect,
            // Blocking: another connection's bytes wait for it (in a splice's pipe).
            _ if conn.unsent() > 0 || conn.blocking => Under::Send,
            // Not while the loop holds its reading back for another's output: that
            // one's send timeout runs.
            _ if conn.deadline.reads_timed() && !conn.blocked => {
                Under::Read(self.read_timeouts[token.index()])
            }
            // Input held by a pause is a message the protocol has not taken yet, not
            // one partly received.
            _ if !conn.held.is_empty() && !matches!(conn.reading, Reading::Paused { .. }) => {
                Under::PartialMessage
            }
            _ if self.io.timers.is_set(token) => Under::OwnTimer,
            _ if P::is_busy(&conn.state) => Under::Busy,
            _ if conn.busy => Under::Elsewhere,
            _ => Under::Idle { never: conn.idle == IdleTimeout::Never },
        };
        // The heap holds an entry for each connection with a deadline, at or before
        // it: only a deadline that may have come earlier moves it.
        if let Some(ahead) = conn.deadline.rearm(under, self.millis, &self.limits) {
            self.deadlines.lower(token, self.millis + u64::from(ahead));
        }
    }

    /// A connection whose deadline may have come, by the heap: whether it did. One
    /// whose deadline moved on since is watched again, at its deadline.
    pub(crate) fn expired(&mut self, conn: &Connection<P::Conn>, token: Token) -> bool {
        if conn.deadline.expired(self.millis) {
            return true;
        }
        if let Some(at) = conn.deadline.at(self.millis) {
            self.deadlines.lower(token, at);
        }
        false
    }

    /// A connection whose deadline may have come (or a closed one's, which the
    /// driver skips); `None` once none is due now.
    pub(crate) fn next_expired(&mut self) -> Option<Token> {
        self.deadlines.pop_due(self.millis)
    }

    /// How long until the first deadline comes (by the clock's whole milliseconds),
    /// if any.
    pub(crate) fn to_next_deadline(&self) -> Option<Duration> {
        self.deadlines.first().map(|first| Duration::from_millis(first.saturating_sub(self.millis)))
    }
}

/// A close whose output is sent lingers: what the peer sent meanwhile is read (and
/// dropped) at once, and from then on until it closes.
pub(super) fn start_lingering<S>(conn: &mut Connection<S>) {
    conn.life = Life::Lingering;
    conn.ready.readable = true;
}
