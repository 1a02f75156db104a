//! The callbacks: the machine calls the protocol, and does what its answer says.

use std::io;

use super::connection::{Connection, Life, Reading, Writing};
use super::rules::{Machine, Stopping};
use crate::reactor::io::{Ends, Io};
use crate::reactor::protocol::{Closed, Flow, Protocol, Verdict};
use crate::reactor::slab::Token;

/// Which callback is answered, for what its answer does.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum Call {
    /// `on_data`: `maybe_more` when more input may follow what it was given (bytes
    /// left unconsumed, or a read that filled the buffer), so a close lingers.
    Data { maybe_more: bool },
    /// `on_open`, `on_timer`, `on_wake`.
    Event,
    /// `on_input_end`.
    InputEnd,
}

impl<P: Protocol> Machine<P> {
    /// Calls `on_open` on a connection accepted (or made), if it is open.
    pub(crate) fn open(
        &mut self,
        conn: &mut Connection<P::Conn>,
        token: Token,
        ends: Ends<'_>,
    ) -> Option<Flow> {
        self.event(conn, token, ends, |protocol, state, io| protocol.on_open(state, io))
    }

    /// A connection being opened is established: its queued output may go, and
    /// `on_open` is called, unless a close came first.
    pub(crate) fn established(
        &mut self,
        conn: &mut Connection<P::Conn>,
        token: Token,
        ends: Ends<'_>,
    ) -> Option<Flow> {
        if let Writing::Connecting { then_shut, .. } = conn.writing {
            conn.writing = if then_shut { Writing::ShutRequested } else { Writing::Open };
        }
        self.open(conn, token, ends)
    }

    /// Calls `on_timer`, if the connection is open.
    pub(crate) fn timer(
        &mut self,
        conn: &mut Connection<P::Conn>,
        token: Token,
        ends: Ends<'_>,
    ) -> Option<Flow> {
        self.event(conn, token, ends, |protocol, state, io| protocol.on_timer(state, io))
    }

    /// Calls `on_wake`, if the connection is open.
    pub(crate) fn wake(
        &mut self,
        conn: &mut Connection<P::Conn>,
        token: Token,
        ends: Ends<'_>,
    ) -> Option<Flow> {
        self.event(conn, token, ends, |protocol, state, io| protocol.on_wake(state, io))
    }

    /// A splice of a length this connection began is over.
    pub(crate) fn spliced_all(
        &mut self,
        conn: &mut Connection<P::Conn>,
        token: Token,
        ends: Ends<'_>,
    ) -> Option<Flow> {
        self.event(conn, token, ends, |protocol, state, io| protocol.on_spliced(state, io))
    }

    fn event(
        &mut self,
        conn: &mut Connection<P::Conn>,
        token: Token,
        ends: Ends<'_>,
        callback: impl FnOnce(&mut P, &mut P::Conn, &mut Io<'_>) -> Flow,
    ) -> Option<Flow> {
        if !conn.is_open() {
            return None;
        }
        let mut io = self.io.for_call(token, ends, self.now, conn.unsent());
        let flow = callback(&mut self.protocol, &mut conn.state, &mut io);
        self.answered(conn, token, flow, Call::Event);
        Some(flow)
    }

    /// Calls `on_data` with exactly `input`, leaving what the connection holds
    /// alone: for a test that looks at one call.
    pub(crate) fn data(
        &mut self,
        conn: &mut Connection<P::Conn>,
        token: Token,
        ends: Ends<'_>,
        input: &[u8],
    ) -> Verdict {
        let mut io = self.io.for_call(token, ends, self.now, conn.unsent());
        let verdict = self.protocol.on_data(&mut conn.state, input, &mut io);
        let maybe_more = verdict.consumed < input.len();
        self.answered(conn, token, verdict.flow, Call::Data { maybe_more });
        verdict
    }

    /// Hands the protocol what it holds and then `fresh`, keeps what it leaves
    /// unconsumed, and does what it answers.
    pub(super) fn hand_in(
        &mut self,
        conn: &mut Connection<P::Conn>,
        token: Token,
        ends: Ends<'_>,
        fresh: &[u8],
        maybe_more: bool,
    ) {
        let from_held = !conn.held.is_empty();
        if from_held {
            conn.held.extend_from_slice(fresh);
        }
        let input: &[u8] = if from_held { &conn.held } else { fresh };
        let mut io = self.io.for_call(token, ends, self.now, conn.unsent());
        let verdict = self.protocol.on_data(&mut conn.state, input, &mut io);
        let consumed = verdict.consumed.min(input.len());
        let unconsumed = consumed < input.len();
        conn.deadline.consumed(consumed);
        // What the protocol leaves is kept for its next call (a close drops it).
        if verdict.flow != Flow::Close {
            if !from_held {
                conn.held.extend_from_slice(&fresh[consumed..]);
            } else {
                conn.held.consume(consumed);
            }
        }
        self.answered(conn, token, verdict.flow, Call::Data { maybe_more: unconsumed || maybe_more });
    }

    /// Ends a pause that is over: the protocol is handed the input it holds. The
    /// wire went unread meanwhile, and what came may not have said so yet (its edge
    /// later in the batch, or in the next): a close from this call lingers.
    pub(crate) fn hand_held(&mut self, conn: &mut Connection<P::Conn>, token: Token, ends: Ends<'_>) {
        conn.reading = Reading::Open;
        self.hand_in(conn, token, ends, &[], true);
    }

    /// The peer finished sending: what it sent last is kept (for `on_close`, a
    /// message delimited by the end of stream), and the protocol says whether the
    /// connection closes or stays open for writing.
    pub(crate) fn input_ended(
        &mut self,
        conn: &mut Connection<P::Conn>,
        token: Token,
        ends: Ends<'_>,
    ) -> Flow {
        conn.ready.readable = false;
        conn.ready.read_closed = true;
        conn.reading = Reading::Ended;
        let mut io = self.io.for_call(token, ends, self.now, conn.unsent());
        let flow = self.protocol.on_input_end(&mut conn.state, &mut io);
        self.answered(conn, token, flow, Call::InputEnd);
        flow
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
    pub(super) fn close(&mut self, conn: &mut Connection<P::Conn>, call: Call) {
        if conn.is_open() {
            let linger = self.lingers(conn, call);
            conn.held.take();
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
    pub(crate) fn closed(
        &mut self,
        mut conn: Connection<P::Conn>,
        token: Token,
        ends: Ends<'_>,
        closed: Closed,
    ) -> Closed {
        let closed = match closed {
            Closed::TimedOut if conn.is_connecting() => Closed::ConnectFailed(io::ErrorKind::TimedOut),
            closed => closed,
        };
        if self.io.output_of == Some(token) {
            // What it wrote last goes with it.
            self.io.output_of = None;
        }
        if conn.is_handshaking() {
            // Never opened to the protocol: nothing to tell it.
            return closed;
        }
        let mut io = self.io.for_call(token, ends, self.now, 0);
        self.protocol.on_close(&mut conn.state, closed, &conn.held, &mut io);
        self.io.output.clear();
        self.io.timers.cancel(token);
        closed
    }
}

/// A paused protocol: with nothing written it waits for a callback's output or a
/// resume; otherwise it goes on once its output is sent.
pub(super) fn pause<S>(conn: &mut Connection<S>, wrote: bool) {
    if !matches!(conn.reading, Reading::Ended) {
        conn.reading = Reading::Paused { awaiting_output: !wrote };
    }
}
