//! [`Harness`]: a protocol on its connections with no socket and no loop, on a
//! clock that moves only when told, for tests and examples.

use std::io;
use std::net::SocketAddr;
use std::time::{Duration, Instant, SystemTime};

use super::context::{Io, IoState};
use super::deferred::{Batch, Request};
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
/// callback asks of other connections (writes, wakes, shut-downs, closes) is done
/// when it returns, as the loop does. The harness keeps no input: a call gets
/// what the test gives it, and a [resumed](Io::resume) connection's `on_data` gets
/// an empty input. The harness holds no output back: a write to another connection
/// is collected whatever its size (the loop's flow control is not modelled). A
/// method given an id the harness has no connection for panics.
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
#[derive(Debug)]
pub struct Harness<P: Protocol> {
    protocol: P,
    /// Every connection, in the order opened; the first is the harness's own.
    conns: Vec<Entry<P::Conn>>,
    io: IoState,
    now: Instant,
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
        let first = Entry {
            token,
            state: P::Conn::default(),
            collected: Vec::new(),
            status: Status::Open,
            shut: false,
        };
        Harness { protocol, conns: vec![first], io, now }
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
    /// was not consumed.
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
            flow = Some(self.call(token, |protocol, conn, io| protocol.on_timer(conn, io)));
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

    /// Everything written to the harness's own connection since the last call, in order.
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

    /// Establishes connection `id`: calls [`Protocol::on_open`] for it.
    pub fn establish(&mut self, id: ConnId) -> Flow {
        if let Some(entry) = self.entry(id) {
            entry.status = Status::Open;
        }
        self.call(id.token(), |protocol, conn, io| protocol.on_open(conn, io))
    }

    /// Fails connection `id`, being opened: [`Protocol::on_close`] with
    /// [`Closed::ConnectFailed`].
    pub fn fail_connect(&mut self, id: ConnId, error: io::ErrorKind) {
        self.close_on(id, Closed::ConnectFailed(error), &[]);
    }

    /// Calls [`Protocol::on_data`] for connection `id` with `input`, as it is.
    pub fn data_on(&mut self, id: ConnId, input: &[u8]) -> Verdict {
        self.call(id.token(), |protocol, conn, io| protocol.on_data(conn, input, io))
    }

    /// Calls [`Protocol::on_wake`] for connection `id`.
    pub fn wake_on(&mut self, id: ConnId) -> Flow {
        self.call(id.token(), |protocol, conn, io| protocol.on_wake(conn, io))
    }

    /// Calls [`Protocol::on_input_end`] for connection `id`.
    pub fn input_end_on(&mut self, id: ConnId) -> Flow {
        self.call(id.token(), |protocol, conn, io| protocol.on_input_end(conn, io))
    }

    /// Calls [`Protocol::on_close`] for connection `id`, unless it is closed already.
    pub fn close_on(&mut self, id: ConnId, closed: Closed, unconsumed: &[u8]) {
        let Some(entry) = self.entry(id).filter(|entry| !matches!(entry.status, Status::Closed(_))) else {
            return;
        };
        entry.status = Status::Closed(closed);
        self.call(id.token(), |protocol, conn, io| protocol.on_close(conn, closed, unconsumed, io));
        self.io.timers.cancel(id.token());
    }

    /// Everything written to connection `id` since the last call, in order.
    pub fn take_output_of(&mut self, id: ConnId) -> Vec<u8> {
        self.entry(id).map(|entry| std::mem::take(&mut entry.collected)).unwrap_or_default()
    }

    /// The state of connection `id`.
    ///
    /// # Panics
    ///
    /// If the harness has no connection `id`.
    pub fn conn_of(&self, id: ConnId) -> &P::Conn {
        let entry = self.conns.iter().find(|entry| entry.token == id.token());
        &entry.expect("a connection of this harness").state
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

    /// Makes one call on connection `token`, then carries out what it asked.
    ///
    /// # Panics
    ///
    /// If the harness has no connection `token`.
    fn call<R>(&mut self, token: Token, callback: impl FnOnce(&mut P, &mut P::Conn, &mut Io<'_>) -> R) -> R {
        let result = self.call_only(token, callback);
        while !self.io.deferred.is_empty() {
            let batch = self.io.deferred.take(Batch::default());
            for request in &batch.requests {
                self.carry_out(request, &batch.bytes);
            }
        }
        result
    }

    fn call_only<R>(
        &mut self,
        token: Token,
        callback: impl FnOnce(&mut P, &mut P::Conn, &mut Io<'_>) -> R,
    ) -> R {
        let entry =
            self.conns.iter_mut().find(|entry| entry.token == token).expect("a connection of this harness");
        let mut io = self.io.for_call(token, self.now, entry.collected.len());
        let result = callback(&mut self.protocol, &mut entry.state, &mut io);
        if !entry.shut {
            entry.collected.extend(self.io.output.to_vec());
        }
        result
    }

    /// Does what a call asked of a connection, as the loop does when it returns.
    fn carry_out(&mut self, request: &Request, bytes: &[u8]) {
        let open = |entry: &Entry<P::Conn>| !matches!(entry.status, Status::Closed(_));
        match *request {
            Request::Connect(token, addr) => self.conns.push(Entry {
                token,
                state: P::Conn::default(),
                collected: Vec::new(),
                status: Status::Connecting(addr),
                shut: false,
            }),
            Request::Write { to, bytes: ref range, .. } => {
                if let Some(entry) = self.entry(ConnId::of(to)).filter(|entry| open(entry) && !entry.shut) {
                    entry.collected.extend_from_slice(&bytes[range.clone()]);
                }
            }
            Request::Wake(token) if self.entry(ConnId::of(token)).is_some_and(|entry| open(entry)) => {
                self.call_only(token, |protocol, conn, io| protocol.on_wake(conn, io));
            }
            Request::Resume(token) if self.entry(ConnId::of(token)).is_some_and(|entry| open(entry)) => {
                self.call_only(token, |protocol, conn, io| protocol.on_data(conn, &[], io));
            }
            Request::Shutdown(token) => {
                if let Some(entry) = self.entry(ConnId::of(token)) {
                    entry.shut = true;
                }
            }
            Request::Close(token) => self.close_on(ConnId::of(token), Closed::Done, &[]),
            Request::Wake(_)
            | Request::Resume(_)
            | Request::Idle(..)
            | Request::Drain(..)
            | Request::Splice(..) => {}
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Records the ticks and closes it hears of; sets a timer on each input.
    #[derive(Default)]
    struct Recorder {
        ticks: Vec<SystemTime>,
        closes: Vec<(Closed, Vec<u8>)>,
    }

    impl Protocol for Recorder {
        type Conn = ();

        fn on_data(&mut self, _conn: &mut (), _input: &[u8], io: &mut Io<'_>) -> Verdict {
            io.set_timer(Duration::from_secs(1));
            Verdict::keep(0)
        }

        fn on_tick(&mut self, now: SystemTime) {
            self.ticks.push(now);
        }

        fn on_close(&mut self, _conn: &mut (), closed: Closed, unconsumed: &[u8], _io: &mut Io<'_>) {
            self.closes.push((closed, unconsumed.to_vec()));
        }
    }

    #[test]
    fn a_tick_and_a_close_reach_the_protocol_and_a_close_cancels_the_timer() {
        let mut harness = Harness::new(Recorder::default());
        let second = SystemTime::UNIX_EPOCH + Duration::from_secs(1_000_000);
        harness.tick(second);
        assert_eq!(harness.protocol().ticks, [second]);
        harness.data(b"half");
        assert_eq!(harness.timer(), Some(harness.now() + Duration::from_secs(1)));
        harness.close(Closed::ByPeer, b"half");
        assert_eq!(harness.protocol().closes, [(Closed::ByPeer, b"half".to_vec())]);
        assert_eq!(harness.timer(), None, "a closed connection's timer never fires");
        assert_eq!(harness.advance(Duration::from_secs(2)), None);
    }

    /// Two connections per client: what one receives is written on to the other;
    /// an end of input shuts the other down, and a close closes it.
    #[derive(Default)]
    struct Pair {
        opening: Vec<(ConnId, ConnId)>,
    }

    impl Protocol for Pair {
        type Conn = Option<ConnId>;

        fn on_open(&mut self, peer: &mut Option<ConnId>, io: &mut Io<'_>) -> Flow {
            if let Some(at) = self.opening.iter().position(|&(backend, _)| backend == io.id()) {
                *peer = Some(self.opening.swap_remove(at).1);
            } else {
                let backend = io.connect(([127, 0, 0, 1], 9).into());
                self.opening.push((backend, io.id()));
                *peer = Some(backend);
            }
            Flow::Continue
        }

        fn on_data(&mut self, peer: &mut Option<ConnId>, input: &[u8], io: &mut Io<'_>) -> Verdict {
            io.write_to(peer.expect("a peer"), input);
            Verdict::keep(input.len())
        }

        fn on_input_end(&mut self, peer: &mut Option<ConnId>, io: &mut Io<'_>) -> Flow {
            io.shutdown(peer.expect("a peer"));
            Flow::Continue
        }

        fn on_close(
            &mut self,
            peer: &mut Option<ConnId>,
            _closed: Closed,
            _unconsumed: &[u8],
            io: &mut Io<'_>,
        ) {
            let opened_by =
                self.opening.iter().find(|&&(backend, _)| backend == io.id()).map(|&(_, client)| client);
            if let Some(other) = peer.or(opened_by) {
                io.close(other);
            }
        }
    }

    #[test]
    fn a_pair_of_connections_is_driven_both_ways() {
        let mut harness = Harness::new(Pair::default());
        let client = harness.id();
        harness.open();
        let [(backend, addr)] = harness.connecting()[..] else { panic!("{:?}", harness.connecting()) };
        assert_eq!(addr, ([127, 0, 0, 1], 9).into());
        harness.data(b"request");
        assert_eq!(harness.establish(backend), Flow::Continue);
        assert!(harness.connecting().is_empty());
        assert_eq!(harness.take_output_of(backend), b"request", "written while it was being opened");
        harness.data_on(backend, b"answer");
        assert_eq!(harness.take_output(), b"answer");
        harness.input_end();
        assert!(harness.is_shut(backend) && !harness.is_shut(client));
        harness.close_on(backend, Closed::ByPeer, &[]);
        assert_eq!(harness.closed(client), Some(Closed::Done), "closed with its partner");
    }

    #[test]
    fn a_connection_that_cannot_be_opened_closes_its_partner() {
        let mut harness = Harness::new(Pair::default());
        harness.open();
        let (backend, _) = harness.connecting()[0];
        harness.fail_connect(backend, io::ErrorKind::ConnectionRefused);
        assert_eq!(harness.closed(backend), Some(Closed::ConnectFailed(io::ErrorKind::ConnectionRefused)));
        assert_eq!(harness.closed(harness.id()), Some(Closed::Done));
    }
}
