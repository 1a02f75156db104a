//! The connection machine: every rule about a connection, and no I/O.
//!
//! It takes events: input read ([`received`](Machine::received)), the end of the
//! peer's stream, output sent or refused, a timer due, a wake, an order from
//! another connection, a graceful stop begun; and it says what to do next, one
//! [`Step`] at a time ([`poll`](Machine::poll)): read, send, shut down, close, or
//! wait. It calls the protocol (which does no I/O either) and keeps what the rules
//! need: the input the protocol left unconsumed, the output the wire has not taken,
//! whether the protocol paused, and which of the loop's deadlines applies.
//!
//! Two drivers carry its steps out: the loop, with sockets and epoll, and the
//! [`Harness`](crate::reactor::Harness), with byte vectors and a clock that moves
//! when told. This is the split quinn-proto and rustls make between a protocol's
//! state and its I/O: one copy of the rules, driven by either.

mod connection;
mod deadline;

pub(crate) use connection::Connection;
pub(crate) use deadline::Limits;

use std::io;
use std::time::Instant;

use connection::{Life, Reading, Writing};
use deadline::Under;

use crate::reactor::config::{Config, DrainPolicy, IdleTimeout, OUTPUT_BUDGET};
use crate::reactor::io::{Io, IoState};
use crate::reactor::output::Output;
use crate::reactor::protocol::{Closed, Flow, Protocol, Verdict};
use crate::reactor::slab::Token;

/// Unsent output at or below which a connection lets the connections whose reading
/// stopped for it read again: half the budget, so that the next read does not take
/// it over the budget at once.
const RESUME_BELOW: usize = OUTPUT_BUDGET / 2;

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
enum Stopping {
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
    limits: Limits,
    now: Instant,
    /// Whole seconds of the driver's clock: what deadlines count.
    second: u32,
    stopping: Stopping,
}

/// Which callback is answered, for what its answer does.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Call {
    /// `on_data`: `maybe_more` when more input may follow what it was given (bytes
    /// left unconsumed, or a read that filled the buffer), so a close lingers.
    Data { maybe_more: bool },
    /// `on_open`, `on_timer`, `on_wake`.
    Event,
    /// `on_input_end`.
    InputEnd,
}

impl<P: Protocol> Machine<P> {
    /// `protocol` under `config`, its timers counted from `origin`.
    pub(crate) fn new(protocol: P, config: &Config, origin: Instant) -> Machine<P> {
        Machine {
            protocol,
            io: IoState::new(origin),
            limits: Limits::of(config),
            now: origin,
            second: 1,
            stopping: Stopping::No,
        }
    }

    /// The driver's time: the instant callbacks see, and the whole seconds (from 1)
    /// the deadlines count.
    pub(crate) fn set_time(&mut self, now: Instant, second: u32) {
        self.now = now;
        self.second = second;
    }

    pub(crate) fn now(&self) -> Instant {
        self.now
    }

    /// The last callback's output, which [`Step::Send`] sends.
    pub(crate) fn output(&self) -> &Output {
        &self.io.output
    }

    // The callbacks.

    /// Calls `on_open` on a connection accepted (or made), if it is open.
    pub(crate) fn open(&mut self, conn: &mut Connection<P::Conn>, token: Token) -> Option<Flow> {
        self.event(conn, token, |protocol, state, io| protocol.on_open(state, io))
    }

    /// A connection being opened is established: its queued output may go, and
    /// `on_open` is called, unless a close came first.
    pub(crate) fn established(&mut self, conn: &mut Connection<P::Conn>, token: Token) -> Option<Flow> {
        if let Writing::Connecting { then_shut } = conn.writing {
            conn.writing = if then_shut { Writing::ShutRequested } else { Writing::Open };
        }
        self.open(conn, token)
    }

    /// Calls `on_timer`, if the connection is open.
    pub(crate) fn timer(&mut self, conn: &mut Connection<P::Conn>, token: Token) -> Option<Flow> {
        self.event(conn, token, |protocol, state, io| protocol.on_timer(state, io))
    }

    /// Calls `on_wake`, if the connection is open.
    pub(crate) fn wake(&mut self, conn: &mut Connection<P::Conn>, token: Token) -> Option<Flow> {
        self.event(conn, token, |protocol, state, io| protocol.on_wake(state, io))
    }

    fn event(
        &mut self,
        conn: &mut Connection<P::Conn>,
        token: Token,
        callback: impl FnOnce(&mut P, &mut P::Conn, &mut Io<'_>) -> Flow,
    ) -> Option<Flow> {
        if !conn.is_open() {
            return None;
        }
        let mut io = self.io.for_call(token, self.now, conn.unsent());
        let flow = callback(&mut self.protocol, &mut conn.state, &mut io);
        self.answered(conn, token, flow, Call::Event);
        Some(flow)
    }

    /// Calls `on_data` with exactly `input`, leaving what the connection holds
    /// alone: for a test that looks at one call.
    pub(crate) fn data(&mut self, conn: &mut Connection<P::Conn>, token: Token, input: &[u8]) -> Verdict {
        let mut io = self.io.for_call(token, self.now, conn.unsent());
        let verdict = self.protocol.on_data(&mut conn.state, input, &mut io);
        let maybe_more = verdict.consumed < input.len();
        self.answered(conn, token, verdict.flow, Call::Data { maybe_more });
        verdict
    }

    /// Hands the protocol what it holds and then `fresh`, keeps what it leaves
    /// unconsumed, and does what it answers.
    fn hand_in(&mut self, conn: &mut Connection<P::Conn>, token: Token, fresh: &[u8], maybe_more: bool) {
        let from_held = !conn.held.is_empty();
        if from_held {
            conn.held.extend_from_slice(fresh);
        }
        let input: &[u8] = if from_held { &conn.held } else { fresh };
        let mut io = self.io.for_call(token, self.now, conn.unsent());
        let verdict = self.protocol.on_data(&mut conn.state, input, &mut io);
        let consumed = verdict.consumed.min(input.len());
        let unconsumed = consumed < input.len();
        conn.deadline.consumed(consumed);
        // What the protocol leaves is kept for its next call (a close drops it).
        if verdict.flow != Flow::Close {
            if !from_held {
                conn.held.extend_from_slice(&fresh[consumed..]);
            } else if consumed == conn.held.len() {
                conn.held = Vec::new();
            } else {
                conn.held.drain(..consumed);
            }
        }
        self.answered(conn, token, verdict.flow, Call::Data { maybe_more: unconsumed || maybe_more });
    }

    /// What a callback's answer does: the one place that says it.
    #[inline(always)]
    fn answered(&mut self, conn: &mut Connection<P::Conn>, token: Token, flow: Flow, call: Call) {
        let wrote = !self.io.output.is_empty();
        if wrote {
            self.io.output_of = Some(token);
        }
        match (flow, call) {
            (Flow::Close, Call::InputEnd) => {
                // What it holds stays, for on_close: a message ended by the stream.
                conn.life = Life::Closing { linger: false, closed: Closed::ByPeer };
            }
            (Flow::Close, call) => self.close(conn, call),
            (_, Call::InputEnd) => {}
            (Flow::Pause, _) => pause(conn, wrote),
            (Flow::Continue, Call::Data { .. }) => {
                if let Reading::Paused { .. } = conn.reading {
                    conn.reading = Reading::Open;
                }
            }
            (Flow::Continue, Call::Event) => {
                if wrote && matches!(conn.reading, Reading::Paused { awaiting_output: true }) {
                    // The output it waited for: it goes on once that is sent.
                    conn.reading = Reading::Paused { awaiting_output: false };
                }
            }
        }
    }

    /// Closes an open connection once its output is sent, as its protocol (in
    /// `call`) or another connection asked; what it holds is never handed in.
    fn close(&mut self, conn: &mut Connection<P::Conn>, call: Call) {
        if conn.is_open() {
            let linger = self.lingers(conn, call);
            conn.held = Vec::new();
            conn.life = Life::Closing { linger, closed: Closed::Done };
        }
    }

    /// Whether a close the protocol asks for lingers (reads what the peer still
    /// sends until it closes): closing on unread input resets the connection, and
    /// the reset can destroy our last answers before the peer reads them. So it
    /// lingers when the peer may go on sending: bytes after those `on_data` used,
    /// or input known to wait in the wire (unless the peer has finished); a message
    /// partly received when another callback closes (input held) or one the
    /// protocol is busy with; or a graceful stop, a close the peer did not ask for,
    /// which one that pipelines sends into.
    fn lingers(&self, conn: &Connection<P::Conn>, call: Call) -> bool {
        let more = match call {
            Call::Data { maybe_more } => maybe_more,
            // The input held is a partial message: its rest may still come.
            Call::Event | Call::InputEnd => !conn.held.is_empty(),
        };
        more || (conn.ready.readable && !conn.ready.read_closed)
            || !matches!(self.stopping, Stopping::No)
            || P::is_busy(&conn.state)
    }

    /// Tells the protocol that connection `token` is gone; returns how (a timeout
    /// while it was being opened is a failed connect). What the call writes to it
    /// is dropped, and a timer it sets is cancelled; what it asks of other
    /// connections is done.
    pub(crate) fn closed(&mut self, mut conn: Connection<P::Conn>, token: Token, closed: Closed) -> Closed {
        let closed = match closed {
            Closed::TimedOut if conn.is_connecting() => Closed::ConnectFailed(io::ErrorKind::TimedOut),
            closed => closed,
        };
        if self.io.output_of == Some(token) {
            // What it wrote last goes with it.
            self.io.output_of = None;
        }
        let mut io = self.io.for_call(token, self.now, 0);
        self.protocol.on_close(&mut conn.state, closed, &conn.held, &mut io);
        self.io.output.clear();
        self.io.timers.cancel(token);
        closed
    }

    // What the wire says.

    /// The wire's edge: what it is ready for now.
    pub(crate) fn ready(&mut self, conn: &mut Connection<P::Conn>, edge: Edge) {
        conn.ready.readable |= edge.readable || edge.read_closed;
        conn.ready.writable |= edge.writable;
        conn.ready.read_closed |= edge.read_closed;
    }

    /// The wire takes no output for now (the harness's peer stopped reading).
    pub(crate) fn not_writable(&mut self, conn: &mut Connection<P::Conn>) {
        conn.ready.writable = false;
    }

    /// Ends a pause that is over: the protocol is handed the input it holds.
    pub(crate) fn hand_held(&mut self, conn: &mut Connection<P::Conn>, token: Token) {
        conn.reading = Reading::Open;
        self.hand_in(conn, token, &[], false);
    }

    /// Input arrived: `filled` when it filled the read, so more may wait.
    pub(crate) fn received(
        &mut self,
        conn: &mut Connection<P::Conn>,
        token: Token,
        fresh: &[u8],
        filled: bool,
    ) {
        // A short read drained the wire, unless the peer shut down: then only the
        // end of its stream says so.
        conn.ready.readable = filled || conn.ready.read_closed;
        self.hand_in(conn, token, fresh, filled);
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

    /// The peer finished sending: what it sent last is kept (for `on_close`, a
    /// message delimited by the end of stream), and the protocol says whether the
    /// connection closes or stays open for writing.
    pub(crate) fn input_ended(&mut self, conn: &mut Connection<P::Conn>, token: Token) -> Flow {
        conn.ready.readable = false;
        conn.ready.read_closed = true;
        conn.reading = Reading::Ended;
        let mut io = self.io.for_call(token, self.now, conn.unsent());
        let flow = self.protocol.on_input_end(&mut conn.state, &mut io);
        self.answered(conn, token, flow, Call::InputEnd);
        flow
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
                if n > 0 {
                    conn.deadline.output_progressed();
                }
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

    /// Bytes moved on through the connection's pipe by a splice read: more may wait.
    pub(crate) fn spliced(&mut self, conn: &mut Connection<P::Conn>) {
        conn.ready.readable = true;
    }

    /// The peer of `conn` took bytes another connection spliced to it.
    pub(crate) fn progressed(&mut self, conn: &mut Connection<P::Conn>) {
        conn.deadline.output_progressed();
    }

    // Orders: what callbacks ask of a connection, theirs or another.

    /// Ends a pause: once its output is sent, `on_data` is called with what it holds.
    pub(crate) fn resume(&mut self, conn: &mut Connection<P::Conn>) {
        if let Reading::Paused { .. } = conn.reading {
            conn.reading = Reading::Paused { awaiting_output: false };
        }
    }

    /// Shuts the writing side down once the output is sent.
    pub(crate) fn shutdown(&mut self, conn: &mut Connection<P::Conn>) {
        if !conn.is_open() {
            return;
        }
        conn.writing = match conn.writing {
            Writing::Connecting { .. } => Writing::Connecting { then_shut: true },
            Writing::Open => Writing::ShutRequested,
            other => other,
        };
    }

    /// Closes the connection once its output is sent, as if its own callback had
    /// said so.
    pub(crate) fn close_asked(&mut self, conn: &mut Connection<P::Conn>) {
        self.close(conn, Call::Event);
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
    pub(crate) fn takes_bytes_now(&mut self, conn: &mut Connection<P::Conn>, bytes: &[u8]) -> bool {
        if !conn.is_open() || conn.drops_output() || bytes.is_empty() {
            return false;
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

    /// Stops `conn`'s reading for another connection's output. Returns whether it
    /// was not stopped already.
    pub(crate) fn block(&mut self, conn: &mut Connection<P::Conn>) -> bool {
        !std::mem::replace(&mut conn.blocked, true)
    }

    /// Lets `conn` read again: the other connection drained.
    pub(crate) fn unblock(&mut self, conn: &mut Connection<P::Conn>) {
        conn.blocked = false;
    }

    /// Starts moving `conn`'s input on to another connection; returns what it held,
    /// which goes first. `None` when it is not open.
    pub(crate) fn splice(&mut self, conn: &mut Connection<P::Conn>) -> Option<Vec<u8>> {
        if !conn.is_open() || matches!(conn.reading, Reading::Ended) {
            return None;
        }
        conn.reading = Reading::Spliced;
        conn.ready.readable = true;
        Some(std::mem::take(&mut conn.held))
    }

    /// The connection `conn` fed is gone: its input reaches the protocol again.
    pub(crate) fn unsplice(&mut self, conn: &mut Connection<P::Conn>) {
        if matches!(conn.reading, Reading::Spliced) {
            conn.reading = Reading::Open;
        }
    }

    // A graceful stop.

    /// A graceful stop begins: the protocol is told, and closes linger from now on.
    pub(crate) fn stop_begun(&mut self) {
        if matches!(self.stopping, Stopping::No) {
            self.stopping = Stopping::Grace;
            self.protocol.on_drain();
        }
    }

    /// The stop's grace is over: a connection that is idle is closed.
    pub(crate) fn grace_over(&mut self) {
        self.stopping = Stopping::ClosingIdle;
    }

    /// Whether a graceful stop may close `conn` now, as an idle one: nothing
    /// pending, the protocol not busy, and not a connection the stop leaves alone.
    pub(crate) fn may_close_idle(&self, conn: &Connection<P::Conn>) -> bool {
        conn.has_nothing_pending() && !P::is_busy(&conn.state) && conn.drain == DrainPolicy::CloseWhenIdle
    }

    // What to do next.

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
    pub(crate) fn rearm(&mut self, conn: &mut Connection<P::Conn>, token: Token) {
        let under = match conn.life {
            Life::Lingering => Under::Linger,
            _ if conn.is_connecting() => Under::Connect,
            // Blocking: another connection's bytes wait for it (in a splice's pipe).
            _ if conn.unsent() > 0 || conn.blocking => Under::Send,
            _ if !conn.held.is_empty() => Under::PartialMessage,
            _ if self.io.timers.is_set(token) => Under::OwnTimer,
            _ if P::is_busy(&conn.state) => Under::Busy,
            _ => Under::Idle { never: conn.idle == IdleTimeout::Never },
        };
        conn.deadline.rearm(under, self.second, &self.limits);
    }

    /// Whether `conn`'s deadline ran out.
    pub(crate) fn expired(&self, conn: &Connection<P::Conn>) -> bool {
        conn.deadline.expired(self.second)
    }
}

/// A paused protocol: with nothing written it waits for a callback's output or a
/// resume; otherwise it goes on once its output is sent.
fn pause<S>(conn: &mut Connection<S>, wrote: bool) {
    if !matches!(conn.reading, Reading::Ended) {
        conn.reading = Reading::Paused { awaiting_output: !wrote };
    }
}

/// A close whose output is sent lingers: what the peer sent meanwhile is read (and
/// dropped) at once, and from then on until it closes.
fn start_lingering<S>(conn: &mut Connection<S>) {
    conn.life = Life::Lingering;
    conn.ready.readable = true;
}

#[cfg(test)]
mod tests;
