//! [`Harness`]: a protocol on its connections with no socket and no loop, on a
//! clock that moves only when told, for tests and examples.

use std::io;
use std::net::SocketAddr;
use std::time::{Duration, Instant, SystemTime};

use super::io::{Io, IoState};
use super::requests::{Batch, Request};
use super::slab::Token;
use super::{Closed, ConnId, Flow, Protocol, Verdict};

/// Drives a [`Protocol`] the way the loop does, without sockets: each call is one
/// callback, its output collects until [`take_output`](Harness::take_output), and
/// timers fire when [`advance`](Harness::advance) moves the clock past them.
///
/// The harness starts with one connection, which the methods without an id
/// drive. Connections the protocol opens ([`Io::connect`]) are listed by
/// [`connecting`](Harness::connecting) until the test [establishes](Harness::establish)
/// or [fails](Harness::fail_connect) them, and driven by the `_on` methods; what a
/// callback asks of other connections (writes, wakes, resumes, shut-downs, closes)
/// is done when it returns, as the loop does. The harness holds no output back: a
/// write to another connection is collected whatever its size (the loop's flow
/// control is not modelled), and output not yet taken counts as unsent
/// ([`Io::is_full`]). A method given an id the harness has no connection for panics.
///
/// # Input
///
/// [`receive`](Harness::receive) hands a connection its input as the loop hands it a
/// read, by the loop's rules: what the protocol leaves unconsumed is kept and comes
/// first in its next call; a protocol that [pauses](super::Then::Pause) is called
/// again with what it holds once its output is sent (here: taken by the test), or,
/// having written nothing, once a timer or a wake writes to it or a callback
/// [resumes](Io::resume) it; input received meanwhile waits, as it would in the
/// socket. After a close ([`Then::Close`](super::Then::Close), [`Flow::Close`])
/// nothing more is read, and neither its timer nor a wake calls the connection. The loop's limit on held input (`max_pending_input`) is
/// not modelled.
///
/// [`data`](Harness::data) is one `on_data` call with exactly the input given, for a
/// test that looks at one call: what the connection holds is left alone, and what
/// the call leaves unconsumed is the test's to give again.
///
/// ```
/// use std::time::Duration;
/// use percore::reactor::{Flow, Harness, Io, Protocol, Verdict};
///
/// /// Says "late" one second after each input.
/// struct Late;
/// impl Protocol for Late {
///     type Conn = ();
///     fn on_data(&mut self, _: &mut (), input: &[u8], io: &mut Io<'_>) -> Verdict {
///         io.set_timer(Duration::from_secs(1));
///         Verdict::keep(input.len())
///     }
///     fn on_timer(&mut self, _: &mut (), io: &mut Io<'_>) -> Flow {
///         io.write(b"late");
///         Flow::Continue
///     }
/// }
///
/// let mut harness = Harness::new(Late);
/// harness.data(b"x");
/// assert_eq!(harness.advance(Duration::from_millis(999)), None);
/// assert_eq!(harness.advance(Duration::from_millis(1)), Some(Flow::Continue));
/// assert_eq!(harness.take_output(), b"late");
/// ```
///
/// A protocol that answers whole lines, given them in reads cut anywhere:
///
/// ```
/// use percore::reactor::{Harness, Io, Protocol, Verdict};
///
/// struct Lines;
/// impl Protocol for Lines {
///     type Conn = ();
///     fn on_data(&mut self, _: &mut (), input: &[u8], io: &mut Io<'_>) -> Verdict {
///         let end = input.iter().rposition(|&b| b == b'\n').map_or(0, |at| at + 1);
///         io.write(&input[..end]);
///         Verdict::keep(end) // a partial line waits for the rest
///     }
/// }
///
/// let mut harness = Harness::new(Lines);
/// harness.receive(b"one\ntw");
/// assert_eq!(harness.take_output(), b"one\n");
/// assert_eq!(harness.unconsumed(harness.id()), b"tw");
/// harness.receive(b"o\n");
/// assert_eq!(harness.take_output(), b"two\n");
/// ```
#[derive(Debug)]
pub struct Harness<P: Protocol> {
    protocol: P,
    /// Every connection, in the order opened; the first is the harness's own.
    conns: Vec<Entry<P::Conn>>,
    io: IoState,
    now: Instant,
    /// Requests of earlier calls are being carried out: those of a call made
    /// meanwhile are left to that, as the loop leaves them.
    carrying_out: bool,
}

/// One connection of the harness.
#[derive(Debug)]
struct Entry<S> {
    token: Token,
    state: S,
    /// Output written and not yet taken by the test.
    collected: Vec<u8>,
    status: Status,
    /// Shut down for writing ([`Io::shutdown`]): what is written is dropped.
    shut: bool,
    /// Received bytes the protocol left unconsumed, handed in again first.
    held: Vec<u8>,
    /// Received bytes not read yet: the connection is paused, or being opened.
    unread: Vec<u8>,
    /// The protocol paused: it is called again with `held` once its output is taken.
    paused: bool,
    /// Paused with nothing written: it waits for a timer's or a wake's output, or a
    /// resume.
    awaiting_output: bool,
    /// A callback said close: nothing more is read.
    closing: bool,
}

impl<S: Default> Entry<S> {
    fn new(token: Token, status: Status) -> Entry<S> {
        Entry {
            token,
            state: S::default(),
            collected: Vec::new(),
            status,
            shut: false,
            held: Vec::new(),
            unread: Vec::new(),
            paused: false,
            awaiting_output: false,
            closing: false,
        }
    }
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Status {
    Connecting(SocketAddr),
    Open,
    Closed(Closed),
}

impl<P: Protocol> Harness<P> {
    /// `protocol` with one connection, not yet opened, at the harness's time zero.
    pub fn new(protocol: P) -> Harness<P> {
        let now = Instant::now();
        let mut io = IoState::new(now);
        let token = io.deferred.ids.take();
        Harness { protocol, conns: vec![Entry::new(token, Status::Open)], io, now, carrying_out: false }
    }

    /// The harness's own connection, which the methods without an id drive.
    pub fn id(&self) -> ConnId {
        ConnId::of(self.conns[0].token)
    }

    /// Calls [`Protocol::on_open`].
    pub fn open(&mut self) -> Flow {
        self.establish(self.id())
    }

    /// Calls [`Protocol::on_data`] with `input`, as it is: the caller keeps what
    /// was not consumed (see [Input](Harness#input)).
    pub fn data(&mut self, input: &[u8]) -> Verdict {
        self.data_on(self.id(), input)
    }

    /// Calls [`Protocol::on_wake`].
    pub fn wake(&mut self) -> Flow {
        self.wake_on(self.id())
    }

    /// Calls [`Protocol::on_input_end`]: the peer finished sending.
    pub fn input_end(&mut self) -> Flow {
        self.input_end_on(self.id())
    }

    /// Calls [`Protocol::on_tick`] with `now`, as the loop does at the turn of a
    /// wall-clock second.
    pub fn tick(&mut self, now: SystemTime) {
        self.protocol.on_tick(now);
    }

    /// Calls [`Protocol::on_drain`], as the loop does when a graceful stop begins.
    pub fn drain(&mut self) {
        self.protocol.on_drain();
    }

    /// Calls [`Protocol::on_close`].
    pub fn close(&mut self, closed: Closed, unconsumed: &[u8]) {
        self.close_on(self.id(), closed, unconsumed);
    }

    /// Moves the clock on by `by`, calling [`Protocol::on_timer`] for every timer due
    /// by then, in deadline order, each with the clock at its deadline. Returns what
    /// the last of those calls returned.
    pub fn advance(&mut self, by: Duration) -> Option<Flow> {
        let until = self.now + by;
        let mut flow = None;
        while let Some(at) = self.io.timers.next().filter(|&at| at <= until) {
            self.now = self.now.max(at);
            let Some(token) = self.io.timers.pop_due(at) else { break };
            if self.entry(ConnId::of(token)).is_some_and(|entry| entry.closing) {
                continue; // as in the loop, a connection that said close hears from no timer
            }
            flow = Some(self.call_flow(token, |protocol, conn, io| protocol.on_timer(conn, io)));
        }
        self.now = until;
        flow
    }

    /// The harness's clock.
    pub fn now(&self) -> Instant {
        self.now
    }

    /// When the timer of the harness's own connection fires, if it is set.
    pub fn timer(&self) -> Option<Instant> {
        self.io.timers.deadline(self.conns[0].token)
    }

    /// Everything written to the harness's own connection since the last call, in
    /// order (see [`take_output_of`](Harness::take_output_of)).
    pub fn take_output(&mut self) -> Vec<u8> {
        self.take_output_of(self.id())
    }

    /// The protocol.
    pub fn protocol(&self) -> &P {
        &self.protocol
    }

    /// The state of the harness's own connection.
    pub fn conn(&self) -> &P::Conn {
        self.conn_of(self.id())
    }

    /// The connections the protocol asked to open and the test has neither
    /// established nor failed, with their addresses, oldest first.
    pub fn connecting(&self) -> Vec<(ConnId, SocketAddr)> {
        let pending = self.conns.iter().filter_map(|entry| match entry.status {
            Status::Connecting(addr) => Some((ConnId::of(entry.token), addr)),
            _ => None,
        });
        pending.collect()
    }

    /// Establishes connection `id`: calls [`Protocol::on_open`] for it, then reads
    /// what it [received](Harness::receive_on) while it was being opened.
    pub fn establish(&mut self, id: ConnId) -> Flow {
        if let Some(entry) = self.entry(id) {
            entry.status = Status::Open;
        }
        let flow = self.call_flow(id.token(), |protocol, conn, io| protocol.on_open(conn, io));
        self.read(id.token());
        flow
    }

    /// Fails connection `id`, being opened: [`Protocol::on_close`] with
    /// [`Closed::ConnectFailed`].
    pub fn fail_connect(&mut self, id: ConnId, error: io::ErrorKind) {
        self.close_on(id, Closed::ConnectFailed(error), &[]);
    }

    /// Calls [`Protocol::on_data`] for connection `id` with `input`, as it is.
    pub fn data_on(&mut self, id: ConnId, input: &[u8]) -> Verdict {
        let token = id.token();
        let (verdict, wrote) = self.call_only(token, |protocol, conn, io| protocol.on_data(conn, input, io));
        self.note_verdict(token, verdict.then, wrote);
        self.carry_out_deferred();
        verdict
    }

    /// Calls [`Protocol::on_wake`] for connection `id`.
    pub fn wake_on(&mut self, id: ConnId) -> Flow {
        self.call_flow(id.token(), |protocol, conn, io| protocol.on_wake(conn, io))
    }

    /// Calls [`Protocol::on_input_end`] for connection `id`.
    pub fn input_end_on(&mut self, id: ConnId) -> Flow {
        self.call_flow(id.token(), |protocol, conn, io| protocol.on_input_end(conn, io))
    }

    /// Calls [`Protocol::on_close`] for connection `id`, unless it is closed already.
    pub fn close_on(&mut self, id: ConnId, closed: Closed, unconsumed: &[u8]) {
        let Some(entry) = self.entry(id).filter(|entry| !matches!(entry.status, Status::Closed(_))) else {
            return;
        };
        entry.status = Status::Closed(closed);
        (entry.held, entry.unread) = (Vec::new(), Vec::new());
        self.call(id.token(), |protocol, conn, io| protocol.on_close(conn, closed, unconsumed, io));
        self.io.timers.cancel(id.token());
    }

    /// Everything written to connection `id` since the last call, in order. Taking
    /// it is its peer reading it: a connection [paused](super::Then::Pause) for its output
    /// goes on (see [Input](Harness#input)), and what it writes then is taken too.
    pub fn take_output_of(&mut self, id: ConnId) -> Vec<u8> {
        let Some(entry) = self.entry(id) else { return Vec::new() };
        let mut taken = std::mem::take(&mut entry.collected);
        loop {
            let went_on = self.read(id.token()).is_some();
            if let Some(entry) = self.entry(id) {
                taken.append(&mut entry.collected);
            }
            if !went_on {
                return taken;
            }
        }
    }

    /// The state of connection `id`.
    ///
    /// # Panics
    ///
    /// If the harness has no connection `id`.
    pub fn conn_of(&self, id: ConnId) -> &P::Conn {
        &self.entry_ref(id).state
    }

    /// How connection `id` was closed, if it was: by [`close_on`](Harness::close_on),
    /// or by a callback's [`Io::close`] (as [`Closed::Done`]).
    pub fn closed(&self, id: ConnId) -> Option<Closed> {
        self.conns.iter().find(|entry| entry.token == id.token()).and_then(|entry| match entry.status {
            Status::Closed(closed) => Some(closed),
            _ => None,
        })
    }

    /// Whether connection `id` was shut down for writing ([`Io::shutdown`]).
    pub fn is_shut(&self, id: ConnId) -> bool {
        self.conns.iter().any(|entry| entry.token == id.token() && entry.shut)
    }

    fn entry(&mut self, id: ConnId) -> Option<&mut Entry<P::Conn>> {
        self.conns.iter_mut().find(|entry| entry.token == id.token())
    }

    /// # Panics
    ///
    /// If the harness has no connection `id`.
    fn entry_ref(&self, id: ConnId) -> &Entry<P::Conn> {
        let entry = self.conns.iter().find(|entry| entry.token == id.token());
        entry.expect("a connection of this harness")
    }

    /// Makes a call that says what comes next, notes a close, and carries out what
    /// it asked.
    fn call_flow(
        &mut self,
        token: Token,
        callback: impl FnOnce(&mut P, &mut P::Conn, &mut Io<'_>) -> Flow,
    ) -> Flow {
        let (flow, _) = self.call_only(token, callback);
        if flow == Flow::Close {
            if let Some(entry) = self.entry(ConnId::of(token)) {
                entry.closing = true;
                (entry.held, entry.unread) = (Vec::new(), Vec::new());
            }
        }
        self.carry_out_deferred();
        flow
    }

    /// Makes one call on connection `token`, then carries out what it asked.
    fn call<R>(&mut self, token: Token, callback: impl FnOnce(&mut P, &mut P::Conn, &mut Io<'_>) -> R) -> R {
        let (result, _) = self.call_only(token, callback);
        self.carry_out_deferred();
        result
    }

    /// Makes one call on connection `token` and collects its output; returns what
    /// the call returned and whether it wrote anything.
    ///
    /// # Panics
    ///
    /// If the harness has no connection `token`.
    fn call_only<R>(
        &mut self,
        token: Token,
        callback: impl FnOnce(&mut P, &mut P::Conn, &mut Io<'_>) -> R,
    ) -> (R, bool) {
        let entry =
            self.conns.iter_mut().find(|entry| entry.token == token).expect("a connection of this harness");
        let mut io = self.io.for_call(token, self.now, entry.collected.len());
        let result = callback(&mut self.protocol, &mut entry.state, &mut io);
        let wrote = !self.io.output.is_empty();
        if wrote {
            // A paused protocol waiting for output has it.
            entry.awaiting_output = false;
        }
        if !entry.shut {
            entry.collected.extend(self.io.output.to_vec());
        }
        (result, wrote)
    }

    /// Carries out what the calls made so far asked, and what the calls that makes
    /// ask in turn, until nothing is left; inside that, does nothing (the one under
    /// way carries out the rest).
    fn carry_out_deferred(&mut self) {
        if std::mem::replace(&mut self.carrying_out, true) {
            return;
        }
        while !self.io.deferred.is_empty() {
            let batch = self.io.deferred.take(Batch::default());
            for request in &batch.requests {
                self.carry_out(request, &batch.bytes);
            }
        }
        self.carrying_out = false;
    }

    /// Does what a call asked of a connection, as the loop does when it returns.
    fn carry_out(&mut self, request: &Request, bytes: &[u8]) {
        let open = |entry: &Entry<P::Conn>| !matches!(entry.status, Status::Closed(_));
        match *request {
            Request::Connect(token, addr) => self.conns.push(Entry::new(token, Status::Connecting(addr))),
            Request::Write { to, bytes: ref range, .. } => {
                if let Some(entry) = self.entry(ConnId::of(to)).filter(|entry| open(entry) && !entry.shut) {
                    entry.collected.extend_from_slice(&bytes[range.clone()]);
                }
            }
            Request::Wake(token) if self.entry(ConnId::of(token)).is_some_and(|e| open(e) && !e.closing) => {
                self.call_flow(token, |protocol, conn, io| protocol.on_wake(conn, io));
            }
            Request::Resume(token) => {
                if let Some(entry) = self.entry(ConnId::of(token)).filter(|entry| open(entry)) {
                    entry.awaiting_output = false;
                    self.read(token);
                }
            }
            Request::Shutdown(token) => {
                if let Some(entry) = self.entry(ConnId::of(token)) {
                    entry.shut = true;
                }
            }
            Request::Close(token) => self.close_on(ConnId::of(token), Closed::Done, &[]),
            Request::Wake(_) | Request::Idle(..) | Request::Drain(..) | Request::Splice(..) => {}
        }
    }
}

mod input;
#[cfg(test)]
mod tests;
