//! [`Harness`]: a protocol on its connections with no socket and no loop, on a
//! clock that moves only when told, for tests and examples. It drives the loop's own
//! connection machine, through the loop's own driver: only the wire differs.

mod peer;
#[cfg(test)]
mod tests;

use std::io;
use std::time::{Duration, Instant, SystemTime};

pub use peer::PeerReads;
use peer::{Peer, Record, ALL};

use super::config::Config;
use super::conns::ConnId;
use super::driver::Driver;
use super::machine::{Edge, Machine};
use super::protocol::{Closed, Flow, Protocol, Verdict};
use super::slab::Token;
use crate::listen::Address;

/// The harness's wire: the test's vectors, with TLS on them with the `tls` feature
/// if the connection speaks it.
#[cfg(feature = "tls")]
type HarnessWire = super::secured::Secured<Peer>;
#[cfg(not(feature = "tls"))]
type HarnessWire = Peer;

/// A connection the test's listener accepted, not yet opened: the next test port's.
fn adopt_accepted<P: Protocol>(driver: &mut Driver<P, HarnessWire>) -> Token {
    let peer = driver.registry.peer(None);
    driver.adopt(HarnessWire::from(peer))
}

/// A connection the test's listener accepted that speaks TLS with `tls`, the test
/// its client (offering the protocol's ALPN names, trusting any certificate: a
/// harness tests a protocol, not the server's certificate), through its handshake:
/// the protocol has opened it.
#[cfg(feature = "tls")]
fn handshake_accepted<P: Protocol>(
    driver: &mut Driver<P, HarnessWire>,
    tls: &crate::tls::ServerTls,
) -> Token {
    let options =
        crate::tls::ClientTlsOptions { alpn: P::ALPN.iter().map(|name| name.to_vec()).collect(), resume: 0 };
    let anyone = crate::tls::ClientTls::new(&crate::tls::Trust::InsecureAnyCertificate, &options)
        .expect("no file to read");
    let mut peer = driver.registry.peer(None);
    let mut far = anyone.session("localhost").expect("a name");
    // Its ClientHello; what the server answers, its TLS reads as it is sent.
    let _ = far.handshake(&[], &mut peer.unread);
    peer.far = Some(Box::new(far));
    let token = driver.adopt_handshaking(HarnessWire::with_tls(peer, tls.session()));
    let edge = Edge { readable: true, writable: true, read_closed: false };
    // A handshake is two flights each way at most; a few more edges cost nothing.
    for _ in 0..8 {
        if !driver.slot(token).is_some_and(|slot| slot.conn.is_connecting()) {
            return token;
        }
        driver.edge(token, edge);
    }
    panic!("Harness: the TLS handshake did not finish")
}

/// What the test's reading says of a connection's wire: it takes output at once, or
/// only when the test takes it.
fn peer_edge(reads: PeerReads) -> Edge {
    Edge { writable: reads == PeerReads::AtOnce, ..Edge::default() }
}

/// Drives a [`Protocol`] by the loop's rules, without sockets: the test is the peer
/// of every connection. It sends with [`receive`](Harness::receive), reads with
/// [`take_output`](Harness::take_output), and moves the clock with
/// [`advance`](Harness::advance), which fires the timers due.
///
/// The harness starts with one connection, established, which the methods without
/// an id drive; it is opened (`on_open`) before it is first driven, or when the test
/// calls [`open`](Harness::open). [`accept`](Harness::accept) adds another client's,
/// driven by the `_on` methods with its id. Connections the protocol opens
/// ([`Io::connect`](super::io::Io::connect)) are listed by
/// [`connecting`](Harness::connecting) until the test
/// [establishes](Harness::establish) or [fails](Harness::fail_connect) them, and
/// driven by the `_on` methods. A method given an id the harness never had
/// panics; one given a closed connection does nothing, as the loop would.
///
/// # The loop's rules
///
/// Everything the loop decides about a connection is decided here by the same
/// code: what the protocol leaves unconsumed is kept and comes first in its next
/// call; a protocol that [pauses](super::protocol::Flow#pause-and-resume) goes on
/// as the loop lets it; what a callback asks of other connections is done when it
/// returns; writes to another connection are held back by the loop's budget; a
/// close sends what was written first; the loop's timeouts ([`Config`]) close a
/// connection when the clock passes them, and a graceful stop closes idle ones once
/// [its grace](Harness::grace_over) is over. The peer's side is the test's:
///
/// - the test reads a connection's output only when it calls `take_output`: until
///   then the output waits, unsent, as it would for a peer that does not read
///   (so [`Io::is_full`](super::io::Io::is_full) counts it, and a paused protocol
///   goes on once the test has taken it); or part of it, as a slow reader does
///   ([`take_some_output_of`](Harness::take_some_output_of)); or, [set](Harness::set_peer_reads)
///   to [`PeerReads::AtOnce`], as soon as it is sent, as a peer with room in its
///   socket;
/// - [`receive`](Harness::receive) hands the connection its input as one read (one
///   per 64 KiB), when it reads: not while it is paused, being opened, or closing;
/// - a close that lingers ends at once: the test, as a peer, closes when it reads
///   the end of the stream;
/// - splices move nothing: the input keeps reaching `on_data`;
/// - addresses ([`Io::peer_addr`](super::io::Io::peer_addr),
///   [`Io::local_addr`](super::io::Io::local_addr)) are on loopback: the test's end
///   of each connection is `127.0.0.1` with a port counted from 49152 in the order
///   the connections were made; an accepted one's local end is `127.0.0.1:8080`, a
///   made one's peer the address it was opened to (none until it is established;
///   neither end of one made to a Unix socket has an IP address).
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
    driver: Driver<P, HarnessWire>,
    /// What accepted connections speak TLS with, if they do: the test is their
    /// client.
    #[cfg(feature = "tls")]
    tls: Option<crate::tls::ServerTls>,
    now: Instant,
    /// The harness's own connection.
    own: Token,
    /// Whether `on_open` was called for it.
    own_opened: bool,
}

impl<P: Protocol> Harness<P> {
    /// `protocol` with one connection, not yet opened, at the harness's time zero,
    /// under the loop's default [`Config`].
    pub fn new(protocol: P) -> Harness<P> {
        Harness::with_config(protocol, Config::default())
    }

    /// `protocol` under `config`'s limits and timeouts, as [`new`](Harness::new).
    pub fn with_config(protocol: P, config: Config) -> Harness<P> {
        Harness::start(
            protocol,
            config,
            #[cfg(feature = "tls")]
            None,
        )
    }

    /// `protocol` under `config`, as [`with_config`](Harness::with_config), its
    /// connections speaking TLS with `tls` (and the protocol's
    /// [`ALPN`](Protocol::ALPN) names): the test is their TLS client, sealing what
    /// it sends and opening what it takes, so that a test reads and writes
    /// plaintext as without TLS. Each accepted connection, its own first, is
    /// opened (`on_open`) once its handshake is done, at once: so a server's
    /// greeting is in [`take_output`](Harness::take_output) from the start, and
    /// [`open`](Harness::open) is not called (it panics, the connection being open).
    ///
    /// The test's client is a fixed one: TLS 1.3 with TLS13_AES_256_GCM_SHA384,
    /// offering exactly the protocol's ALPN names, verifying no certificate and
    /// resuming nothing. A test of TLS 1.2, an ALPN mismatch or resumption speaks
    /// to a [`Reactor`](super::Reactor) on a socket instead, with a client of its own.
    #[cfg(feature = "tls")]
    pub fn with_tls(protocol: P, config: Config, tls: &crate::tls::ServerTls) -> Harness<P> {
        Harness::start(protocol, config, Some(tls.with_alpn(P::ALPN)))
    }

    fn start(
        protocol: P,
        config: Config,
        #[cfg(feature = "tls")] tls: Option<crate::tls::ServerTls>,
    ) -> Harness<P> {
        let start = Instant::now();
        let mut driver = Driver::new(Machine::new(protocol, &config, start), Record::default());
        #[cfg(feature = "tls")]
        if let Some(tls) = tls {
            let own = handshake_accepted(&mut driver, &tls);
            let mut harness = Harness { driver, now: start, own, own_opened: true, tls: Some(tls) };
            harness.settle();
            return harness;
        }
        let own = adopt_accepted(&mut driver);
        Harness {
            driver,
            now: start,
            own,
            own_opened: false,
            #[cfg(feature = "tls")]
            tls: None,
        }
    }

    /// The harness's own connection, which the methods without an id drive.
    pub fn id(&self) -> ConnId {
        ConnId::of(self.own)
    }

    /// Accepts another connection, as a listener would another client: it is
    /// opened ([`Protocol::on_open`]) at once, then driven by the `_on` methods
    /// with the id returned (a close `on_open` asks for is seen by
    /// [`closed`](Harness::closed)). For a protocol that shares state between its
    /// clients: a pool, a queue, a broadcast.
    pub fn accept(&mut self) -> ConnId {
        #[cfg(feature = "tls")]
        if let Some(tls) = &self.tls {
            let token = handshake_accepted(&mut self.driver, tls);
            self.settle();
            return ConnId::of(token);
        }
        let token = adopt_accepted(&mut self.driver);
        self.driver.open(token, None);
        self.settle();
        ConnId::of(token)
    }

    /// Calls [`Protocol::on_open`] for the harness's own connection. The loop calls
    /// it before anything else: so does the harness, before the first call that
    /// drives the connection ([`receive`](Harness::receive), [`data`](Harness::data),
    /// [`wake`](Harness::wake), [`input_end`](Harness::input_end)), if the test has
    /// not called this first, to see what `on_open` says.
    ///
    /// # Panics
    ///
    /// If it was opened already (as a connection `with_tls` is
    /// from the start), or is closed.
    pub fn open(&mut self) -> Flow {
        assert!(!self.own_opened, "Harness::open: the connection was opened already");
        self.own_opened = true;
        let flow = self.driver.open(self.own, None);
        self.settle();
        flow.expect("Harness::open: the harness's connection is closed")
    }

    /// Opens the harness's own connection if `id` is it and it was not opened yet.
    fn opened(&mut self, id: ConnId) {
        if id.token() == self.own && !self.own_opened {
            self.open();
        }
    }

    /// Calls [`Protocol::on_data`] with `input`, as it is: the caller keeps what
    /// was not consumed (see [`Harness`]).
    ///
    /// # Panics
    ///
    /// If the connection is closed.
    pub fn data(&mut self, input: &[u8]) -> Verdict {
        self.data_on(self.id(), input)
    }

    /// Hands `input` to the harness's own connection (see [`receive_on`](Harness::receive_on)).
    pub fn receive(&mut self, input: &[u8]) {
        self.receive_on(self.id(), input);
    }

    /// Calls [`Protocol::on_wake`] (see [`wake_on`](Harness::wake_on)).
    pub fn wake(&mut self) -> Option<Flow> {
        self.wake_on(self.id())
    }

    /// The peer finishes sending (see [`input_end_on`](Harness::input_end_on)).
    pub fn input_end(&mut self) {
        self.input_end_on(self.id());
    }

    /// Calls [`Protocol::on_tick`] with `now`, as the loop does at the turn of a
    /// wall-clock second, and carries out what it asks.
    pub fn tick(&mut self, now: SystemTime) {
        self.driver.machine.tick(now);
        self.driver.run_orders();
        self.settle();
    }

    /// Begins a graceful stop, as the loop does: [`Protocol::on_drain`] is called,
    /// and closes the protocol asks for from now on would linger. Idle connections
    /// stay until [`grace_over`](Harness::grace_over).
    pub fn drain(&mut self) {
        self.driver.machine.stop_begun();
        self.driver.run_orders();
        self.settle();
    }

    /// The graceful stop's grace is over: idle connections close, as
    /// [`Closed::Done`], and one that turns idle closes at once. A connection whose
    /// output the test has not taken is not idle: its answer is still being sent.
    pub fn grace_over(&mut self) {
        self.driver.close_idle();
        self.settle();
    }

    /// Ends the harness's own connection (see [`end_on`](Harness::end_on)).
    pub fn end(&mut self, closed: Closed) {
        self.end_on(self.id(), closed);
    }

    /// Moves the clock on by `by`, calling [`Protocol::on_timer`] for every timer due
    /// by then, in deadline order, each with the clock at its deadline; the loop's
    /// timeouts close the connections they run out for. Returns what the last
    /// `on_timer` returned.
    pub fn advance(&mut self, by: Duration) -> Option<Flow> {
        let until = self.now + by;
        let mut flow = None;
        loop {
            let timer = self.driver.machine.io.timers.next();
            let deadline = self.driver.machine.to_next_deadline().map(|wait| self.now + wait);
            let due = [timer, deadline].into_iter().flatten().min();
            let Some(at) = due.filter(|&at| at <= until) else { break };
            self.set_time(self.now.max(at));
            if let Some(token) =
                timer.filter(|&timer| timer == at).and_then(|_| self.driver.machine.io.timers.pop_due(at))
            {
                if let Some(fired) = self.driver.timer(token) {
                    flow = Some(fired);
                }
            }
            self.driver.close_expired();
            self.settle();
        }
        self.set_time(until);
        self.driver.close_expired();
        self.settle();
        flow
    }

    /// The harness's clock.
    pub fn now(&self) -> Instant {
        self.now
    }

    /// When the timer of the harness's own connection fires, if it is set.
    pub fn timer(&self) -> Option<Instant> {
        self.driver.machine.io.timers.deadline(self.own)
    }

    /// Everything written to the harness's own connection since the test last took
    /// its output, and what it writes while the test takes it: a protocol paused for
    /// its output goes on, and its output is taken too, until it waits again (see
    /// [`take_output_of`](Harness::take_output_of)).
    pub fn take_output(&mut self) -> Vec<u8> {
        self.take_output_of(self.id())
    }

    /// The protocol.
    pub fn protocol(&self) -> &P {
        &self.driver.machine.protocol
    }

    /// The state of the harness's own connection.
    ///
    /// # Panics
    ///
    /// If it is closed.
    pub fn conn(&self) -> &P::Conn {
        self.conn_of(self.id())
    }

    /// The connections the protocol asked to open and the test has neither
    /// established nor failed, with their addresses, oldest first.
    pub fn connecting(&self) -> Vec<(ConnId, Address)> {
        let mut pending: Vec<(u64, ConnId, Address)> = self
            .driver
            .tokens()
            .into_iter()
            .filter_map(|token| {
                let peer = &self.driver.slot(token)?.wire;
                peer.connecting.clone().map(|addr| (peer.serial, ConnId::of(token), addr))
            })
            .collect();
        pending.sort_unstable_by_key(|&(serial, _, _)| serial);
        pending.into_iter().map(|(_, id, addr)| (id, addr)).collect()
    }

    /// Establishes connection `id`, being opened: calls [`Protocol::on_open`] for it
    /// (unless a close came first), then it reads what it
    /// [received](Harness::receive_on) meanwhile.
    pub fn establish(&mut self, id: ConnId) -> Option<Flow> {
        let reads = self.driver.registry.reads;
        self.driver.with_slot(id.token(), |machine, slot| {
            slot.wire.connecting = None;
            machine.ready(&mut slot.conn, peer_edge(reads));
        })?;
        let flow = self.driver.established(id.token());
        self.settle();
        flow
    }

    /// When the test reads what the connections send, from now on: only when it
    /// takes it (the default), or at once (see [`PeerReads`]).
    pub fn set_peer_reads(&mut self, reads: PeerReads) {
        self.driver.registry.reads = reads;
        let room = if reads == PeerReads::AtOnce { ALL } else { 0 };
        for token in self.driver.tokens() {
            self.driver.with_slot(token, |_, slot| slot.wire.room = room);
            self.edge(token, peer_edge(reads));
        }
    }

    /// Fails connection `id`, being opened: [`Protocol::on_close`] with
    /// [`Closed::ConnectFailed`].
    pub fn fail_connect(&mut self, id: ConnId, error: io::ErrorKind) {
        self.end_on(id, Closed::ConnectFailed(error));
    }

    /// Calls [`Protocol::on_data`] for connection `id` with `input`, as it is (see
    /// [`data`](Harness::data)).
    ///
    /// # Panics
    ///
    /// If the connection is closed.
    pub fn data_on(&mut self, id: ConnId, input: &[u8]) -> Verdict {
        self.opened(id);
        let verdict = self.driver.data(id.token(), input);
        self.settle();
        verdict.unwrap_or_else(|| panic!("{id:?} is closed"))
    }

    /// The peer of connection `id` sends `input`: the connection reads it as one
    /// read (per 64 KiB), after what it holds, as the loop does, when it reads (see
    /// [`Harness`]). A connection being opened reads it once established; a
    /// closing or closed one drops it.
    pub fn receive_on(&mut self, id: ConnId, input: &[u8]) {
        self.opened(id);
        let Some(slot) = self.driver.slot_mut(id.token()) else { return };
        slot.wire.send(input);
        self.edge(id.token(), Edge { readable: true, ..Edge::default() });
    }

    /// Calls [`Protocol::on_wake`] for connection `id`, as [`Io::wake`](super::io::Io::wake)
    /// does; `None` when it is closing or closed, and not called.
    pub fn wake_on(&mut self, id: ConnId) -> Option<Flow> {
        self.opened(id);
        let flow = self.driver.wake(id.token());
        self.settle();
        flow
    }

    /// The peer of connection `id` finishes sending: once what it sent is read,
    /// [`Protocol::on_input_end`] is called.
    pub fn input_end_on(&mut self, id: ConnId) {
        self.opened(id);
        let Some(slot) = self.driver.slot_mut(id.token()) else { return };
        slot.wire.finish();
        self.edge(id.token(), Edge { readable: true, read_closed: true, ..Edge::default() });
    }

    /// Ends connection `id` as `closed` says (a reset, a timeout, ...), at once:
    /// [`Protocol::on_close`] is called with what it holds unconsumed. Nothing, if
    /// it is closed already.
    pub fn end_on(&mut self, id: ConnId, closed: Closed) {
        self.driver.close(id.token(), closed);
        self.settle();
    }

    /// Everything written to connection `id` since the test last took its output,
    /// in order. Taking it is its peer reading it: a connection
    /// [paused](super::protocol::Flow#pause-and-resume) for its output goes on, a
    /// close goes on, and what it writes meanwhile is taken too.
    pub fn take_output_of(&mut self, id: ConnId) -> Vec<u8> {
        self.take_some_output_of(id, ALL)
    }

    /// As [`take_output_of`](Harness::take_output_of), but the test reads at most
    /// `max` bytes, as a slow peer does: the rest waits, and counts as unsent. Any
    /// byte taken is progress against the send timeout ([`Config::send_timeout`]);
    /// none is not.
    pub fn take_some_output_of(&mut self, id: ConnId, max: usize) -> Vec<u8> {
        let token = id.token();
        let Some(slot) = self.driver.slot_mut(token) else { return self.left_by(token) };
        slot.wire.room = max;
        self.edge(token, Edge { writable: true, ..Edge::default() });
        let room = if self.driver.registry.reads == PeerReads::AtOnce { ALL } else { 0 };
        let taken = self.driver.with_slot(token, |_, slot| {
            slot.wire.room = room;
            std::mem::take(&mut slot.wire.taken)
        });
        taken.unwrap_or_else(|| self.left_by(token))
    }

    /// What connection `token`, closed, had sent that the test had not taken yet.
    fn left_by(&mut self, token: Token) -> Vec<u8> {
        let closed = self.driver.registry.closed.iter_mut().find(|(closed, _, _)| *closed == token);
        closed.map(|(_, _, left)| std::mem::take(left)).unwrap_or_default()
    }

    /// The state of connection `id`.
    ///
    /// # Panics
    ///
    /// If the harness has no open connection `id`.
    pub fn conn_of(&self, id: ConnId) -> &P::Conn {
        let slot = self.driver.slot(id.token());
        slot.unwrap_or_else(|| panic!("{id:?} is closed, or not one of this harness")).conn.state()
    }

    /// How connection `id` was closed, if it was.
    pub fn closed(&self, id: ConnId) -> Option<Closed> {
        let record = &self.driver.registry.closed;
        record.iter().find(|(token, _, _)| *token == id.token()).map(|&(_, closed, _)| closed)
    }

    /// Whether connection `id` was shut down for writing ([`Io::shutdown`](super::io::Io::shutdown)),
    /// or will be once its output is taken.
    pub fn is_shut(&self, id: ConnId) -> bool {
        self.driver.slot(id.token()).is_some_and(|slot| slot.wire.shut || slot.conn.is_shutting_down())
    }

    /// What connection `id` holds of what it [received](Harness::receive_on): the
    /// bytes its protocol left unconsumed, which the loop would hand to
    /// [`Protocol::on_close`] if it closed now.
    pub fn unconsumed(&self, id: ConnId) -> &[u8] {
        self.driver.slot(id.token()).map_or(&[], |slot| slot.conn.held())
    }

    /// Whether connection `id` is closing or closed: a callback said close (or
    /// another connection closed it), and nothing more is read.
    pub fn is_closing(&self, id: ConnId) -> bool {
        self.driver.slot(id.token()).is_none_or(|slot| !slot.conn.is_open())
    }

    /// The clock at `now`: the instant callbacks see, and the loop's deadlines
    /// count.
    fn set_time(&mut self, now: Instant) {
        self.now = now;
        self.driver.machine.set_time(now);
    }

    /// An edge of connection `token`'s wire: the test sent, finished, or reads. One
    /// being opened only remembers it, for once it is established.
    fn edge(&mut self, token: Token, edge: Edge) {
        let connecting = self.driver.with_slot(token, |machine, slot| {
            let connecting = slot.wire.connecting.is_some();
            if connecting {
                machine.ready(&mut slot.conn, edge);
            }
            connecting
        });
        if connecting != Some(false) {
            return;
        }
        self.driver.edge(token, edge);
        self.settle();
    }

    /// Does what the loop's turns would do until they wait: each turn serves again
    /// the connections whose turn was cut short, then fires the timers due.
    fn settle(&mut self) {
        loop {
            self.driver.serve_again();
            self.driver.fire_timers();
            if !self.driver.has_work() {
                return;
            }
        }
    }
}
