//! [`Reactor`]: one thread, one epoll instance, edge-triggered, no locks. Each turn
//! waits for the kernel's edges and hands them to the concern they belong to: the
//! listener's to accepting, a connection's to the driver (and through it the
//! connection machine), the owner's descriptor back to the owner; then the
//! connections to serve again, the timers, the graceful stop and the deadlines.

use std::io as stdio;
use std::net::SocketAddr;
use std::os::fd::AsFd;
use std::path::Path;
use std::time::{Duration, Instant, SystemTime};

use super::accept::{Accepted, Acceptor};
use super::clock::Clock;
use super::config::Config;
use super::conns::ConnId;
use super::driver::Driver;
use super::machine::{Edge, Machine};
use super::protocol::{Closed, Protocol};
use super::slab::{Token, MAX_INDEX};
use super::stop::{DrainOptions, ListenerFate, Stop};
use super::wire::Socket;
use crate::listen::{Address, Listener};
use crate::sys::{self, Epoll, EpollEvent};

/// The wire of the loop's connections: a socket, which speaks TLS with the `tls`
/// feature if its connection does.
#[cfg(feature = "tls")]
type LoopWire = super::secured::Secured<Socket>;
#[cfg(not(feature = "tls"))]
type LoopWire = Socket;

const LISTENER: u64 = MAX_INDEX as u64 + 1;
const CONTROL: u64 = MAX_INDEX as u64 + 2;

/// Events taken from the kernel per `epoll_wait`.
const EVENTS_PER_WAIT: usize = 1024;

/// Connections accepted per wake-up before the loop serves the ones it has: a
/// flood of new connections must not starve established ones (or signals).
const ACCEPTS_PER_WAKE: usize = 256;

/// Why [`Reactor::run`] (or [`turn`](Reactor::turn)) returned to its owner.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Returned {
    /// A descriptor given to [`Reactor::watch`] is readable. It is edge-triggered:
    /// read it until it would block.
    Control,
    /// A graceful stop ([`Reactor::drain`]) finished: every connection is closed.
    Drained,
}

/// What a loop counted since it started.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Stats {
    /// Connections accepted.
    pub accepted: u64,
    /// Connections the protocol opened ([`Io::connect`](super::io::Io::connect)),
    /// established or not.
    pub opened: u64,
    /// Connections, accepted or opened, dropped because a socket call failed (reset
    /// by the peer, a connect refused, ...).
    pub failed: u64,
    /// Connections open now.
    pub open: usize,
}

impl Stats {
    /// Connections since the loop started, accepted or opened (the sum the workers'
    /// lines print as their connections); `failed` counts some of these.
    pub fn connections(&self) -> u64 {
        self.accepted + self.opened
    }
}

/// A single-threaded event loop serving protocol `P` on one listener, or (made with
/// [`Reactor::client`]) on connections it opens itself.
///
/// The listener is registered for `EPOLLIN|EPOLLET` and accepted from until
/// `EAGAIN`. Each connection is registered once, for
/// `EPOLLIN|EPOLLOUT|EPOLLRDHUP|EPOLLET`, and never modified: every edge is followed
/// up (input read until `EAGAIN` or a short read, output sent until it is all sent
/// or `EAGAIN`). A connection gets a bounded amount of reading per wake-up; if it
/// has more, it is served again after the rest of the batch, so one pipelining
/// client cannot starve the others.
///
/// ```
/// use std::io::{Read, Write};
/// use std::time::Duration;
/// use percore::listen::{self, ListenOptions};
/// use percore::reactor::{Config, Io, Protocol, Reactor, Verdict};
///
/// struct Echo;
/// impl Protocol for Echo {
///     type Conn = ();
///     fn on_data(&mut self, _: &mut (), input: &[u8], io: &mut Io<'_>) -> Verdict {
///         io.write(input);
///         Verdict::keep(input.len())
///     }
/// }
///
/// let listener = listen::bind(([127, 0, 0, 1], 0).into(), &ListenOptions::default())?;
/// let addr = listener.local_addr()?;
/// let mut reactor = Reactor::new(listener, Echo, Config::default())?;
/// std::thread::spawn(move || reactor.run());
///
/// let mut client = std::net::TcpStream::connect(addr)?;
/// client.set_read_timeout(Some(Duration::from_secs(10)))?;
/// client.write_all(b"ping")?;
/// let mut echoed = [0; 4];
/// client.read_exact(&mut echoed)?;
/// assert_eq!(&echoed, b"ping");
/// # Ok::<(), std::io::Error>(())
/// ```
#[derive(Debug)]
pub struct Reactor<P: Protocol> {
    /// The connections, their machine, and the epoll instance they are registered
    /// with.
    driver: Driver<P, LoopWire>,
    clock: Clock,
    /// What accepted connections speak TLS with, if they do.
    #[cfg(feature = "tls")]
    tls: Option<crate::tls::ServerTls>,
    acceptor: Acceptor,
    /// Set by [`Reactor::drain`]: the graceful stop under way.
    stop: Option<Stop>,
    max_connections: usize,
    accepted: u64,
    events: Vec<EpollEvent>,
    /// `events` holds a batch whose control event was reported first and whose
    /// other events the next turn serves.
    batch_held: bool,
}

impl<P: Protocol> Reactor<P> {
    /// Creates a loop that will accept on `listener` (a `TcpListener`, a
    /// `UnixListener`, or a [`Listener`] of either) and serve `protocol`. A
    /// connection accepted on a Unix socket has no IP address:
    /// [`Io::peer_addr`](super::io::Io::peer_addr) says so.
    pub fn new(listener: impl Into<Listener>, protocol: P, config: Config) -> stdio::Result<Reactor<P>> {
        let listener = listener.into();
        listener.set_nonblocking()?;
        let epoll = Epoll::new()?;
        epoll.add(listener.as_fd(), sys::INTEREST_READ, LISTENER)?;
        Ok(Reactor::with(epoll, Some(listener), protocol, config))
    }

    /// Creates a loop with no listener, for connections opened with
    /// [`connect`](Reactor::connect): the client side.
    pub fn client(protocol: P, config: Config) -> stdio::Result<Reactor<P>> {
        Ok(Reactor::with(Epoll::new()?, None, protocol, config))
    }

    fn with(epoll: Epoll, listener: Option<Listener>, protocol: P, config: Config) -> Reactor<P> {
        let clock = Clock::new();
        let machine = Machine::new(protocol, &config, clock.start());
        Reactor {
            driver: Driver::new(machine, epoll),
            clock,
            #[cfg(feature = "tls")]
            tls: None,
            acceptor: Acceptor::new(listener),
            stop: None,
            max_connections: config.max_connections,
            accepted: 0,
            events: Vec::with_capacity(EVENTS_PER_WAIT),
            batch_held: false,
        }
    }

    /// Also waits for `fd` (a signalfd, an eventfd, a timerfd, a pipe) to become
    /// readable, and then returns [`Returned::Control`] from [`run`](Reactor::run).
    ///
    /// The loop keeps no borrow of `fd`: epoll watches the open file it names until
    /// that file is closed. Keep `fd` open for as long as the loop should watch it;
    /// once it is closed the loop hears of it no more (if a copy of it, `dup`ed or
    /// inherited, stays open, the loop goes on hearing of that one). The loop never
    /// reads, writes or closes it.
    pub fn watch(&mut self, fd: impl AsFd) -> stdio::Result<()> {
        self.driver.registry.add(fd.as_fd(), sys::INTEREST_READ, CONTROL)
    }

    /// Connections accepted from now on speak TLS as `tls` says (`None`: they do
    /// not): each is established once its handshake is done, within
    /// [`Config::handshake_timeout`], and only then opened to the protocol
    /// ([`Protocol::on_open`]), which sees plaintext through its `Io` as without
    /// TLS. A handshake that fails closes the connection unseen by the protocol.
    /// It offers the protocol's [`ALPN`](Protocol::ALPN) names.
    #[cfg(feature = "tls")]
    pub fn set_tls(&mut self, tls: Option<&crate::tls::ServerTls>) {
        self.tls = tls.map(|tls| tls.with_alpn(P::ALPN));
    }

    /// What the loop counted so far.
    pub fn stats(&self) -> Stats {
        Stats {
            accepted: self.accepted,
            opened: self.driver.opened(),
            failed: self.driver.failed(),
            open: self.driver.len(),
        }
    }

    /// The loop's time as of its last look at the clock, after its last wait: the
    /// [`Io::now`](super::io::Io::now) its callbacks saw, for an owner that drives it
    /// turn by turn.
    pub fn now(&self) -> Instant {
        self.clock.instant()
    }

    /// The protocol being served.
    pub fn protocol(&self) -> &P {
        &self.driver.machine.protocol
    }

    /// The protocol being served, to change its state between turns of the loop.
    pub fn protocol_mut(&mut self) -> &mut P {
        &mut self.driver.machine.protocol
    }

    /// Opens a connection to `addr` (non-blocking, `TCP_NODELAY`) and registers it;
    /// [`Protocol::on_open`] is called once it is established, and what was written
    /// to it before is sent then. A connection that fails later (refused, or not
    /// established within the connect timeout) reaches [`Protocol::on_close`] as
    /// [`Closed::ConnectFailed`]; one that fails at once is this error.
    pub fn connect(&mut self, addr: impl Into<Address>) -> stdio::Result<ConnId> {
        self.driver.connect(&addr.into())
    }

    /// Opens a connection to `addr` that speaks TLS with `tls`, to the server named
    /// `server` (the name its certificate must have, sent by SNI; an IP address is
    /// checked against the certificate, not sent): as [`connect`](Reactor::connect),
    /// and established once its handshake is done too (within the connect timeout).
    /// A name that is neither a DNS name nor an IP address is `InvalidInput`. A
    /// protocol's callbacks open them with [`Io::connect_tls`](super::Io::connect_tls).
    #[cfg(feature = "tls")]
    pub fn connect_tls(
        &mut self,
        addr: impl Into<Address>,
        tls: &crate::tls::ClientTls,
        server: &str,
    ) -> stdio::Result<ConnId> {
        let session = tls.session(server)?;
        self.driver.connect_tls(&addr.into(), session)
    }

    /// Opens a connection to the Unix socket at `path`, as [`connect`](Reactor::connect)
    /// does to an IP address. A non-blocking connect to a Unix socket is established
    /// at once, or fails at once: with `WouldBlock` when the listener's queue is full
    /// (as nginx, which answers 502 then, the loop does not wait for room).
    pub fn connect_unix(&mut self, path: &Path) -> stdio::Result<ConnId> {
        self.driver.connect(&Address::Unix(path.to_path_buf()))
    }

    /// Calls [`Protocol::on_wake`] for connection `id` (accepted or connected), and
    /// sends what it writes. Returns false, calling nothing, when `id` is closed or
    /// closing.
    pub fn wake(&mut self, id: ConnId) -> bool {
        self.driver.wake(id.token()).is_some()
    }

    /// Runs the loop until the watched descriptor is readable or a drain finished;
    /// without either it runs until epoll itself fails.
    pub fn run(&mut self) -> stdio::Result<Returned> {
        self.driver.machine.tick(SystemTime::now());
        self.driver.run_orders();
        loop {
            if let Some(returned) = self.turn(None)? {
                return Ok(returned);
            }
        }
    }

    /// One turn of the loop: waits at most `max_wait` (`None`: as long as nothing
    /// is due) for events, and does the work they bring, then the timers that are
    /// due. For a caller that drives the loop itself, such as a load generator that
    /// looks at its clock between turns.
    pub fn turn(&mut self, max_wait: Option<Duration>) -> stdio::Result<Option<Returned>> {
        let mut events = std::mem::take(&mut self.events);
        let held = std::mem::take(&mut self.batch_held);
        if !held {
            if let Err(e) = self.driver.registry.wait(&mut events, self.timeout(max_wait)) {
                self.events = events;
                return Err(e);
            }
        }
        let tick = self.clock.advance();
        self.driver.machine.set_time(self.clock.instant());
        if let Some(now) = tick {
            self.driver.machine.tick(now);
            self.driver.run_orders();
        }
        if !held && events.iter().any(|event| event.token() == CONTROL) {
            // The owner hears of its descriptor before the rest of the batch is
            // served, which the next turn does: a stop signal takes effect before
            // the requests that came with it are answered (they get `Connection:
            // close`), not after.
            self.events = events;
            self.batch_held = true;
            return Ok(Some(Returned::Control));
        }
        for event in &events {
            match event.token() {
                LISTENER => self.accept_ready(),
                CONTROL => {}
                token => self.driver.edge(Token(token), edge_of(event)),
            }
        }
        self.events = events;
        self.driver.serve_again();
        self.driver.fire_timers();
        if self.stop.is_some() {
            self.end_grace_if_over();
        }
        self.close_expired();
        let room = self.driver.len() < self.max_connections;
        if self.acceptor.looks_again(room, tick.is_some()) {
            self.accept_ready();
        }
        if self.stop.is_some() && !self.acceptor.has_listener() && self.driver.len() == 0 {
            return Ok(Some(Returned::Drained));
        }
        Ok(None)
    }

    /// How long the next wait may last: not at all when work is queued, else until
    /// the first timer or deadline, the end of a stop's grace or its timeout, the
    /// turn of the second (for the tick) or `max_wait`.
    fn timeout(&self, max_wait: Option<Duration>) -> Option<Duration> {
        if self.driver.has_work() || self.acceptor.looks_again_now() {
            return Some(Duration::ZERO);
        }
        let now = self.clock.instant();
        let machine = &self.driver.machine;
        let mut wait = self.clock.to_next_second();
        if let Some(deadline) = machine.to_next_deadline() {
            wait = wait.min(deadline);
        }
        let timer = machine.io.timers.next();
        let stop = self
            .stop
            .as_ref()
            .map(|stop| stop.grace_until().map_or(stop.deadline(), |g| g.min(stop.deadline())));
        for at in [timer, stop].into_iter().flatten() {
            wait = wait.min(at.saturating_duration_since(now));
        }
        Some(max_wait.map_or(wait, |max| wait.min(max)))
    }

    /// The listener's edge (or a look again): accepts what is queued; once a stop
    /// has begun, closes the listener when its queue is empty. (A stop that hands
    /// the listener over let it go when it began: there is nothing to accept.)
    fn accept_ready(&mut self) {
        if self.accept_all() && self.stop.is_some() {
            self.acceptor.drop_listener(&self.driver.registry);
        }
    }

    /// Accepts until the queue is empty, or until a limit, a budget or an error says
    /// when to look again. Returns whether the queue is empty (or there is no
    /// listener).
    fn accept_all(&mut self) -> bool {
        for _ in 0..ACCEPTS_PER_WAKE {
            let room = self.driver.len() < self.max_connections;
            match self.acceptor.accept(room) {
                Accepted::Connection(fd, peer) => {
                    self.accepted += 1;
                    self.open_accepted(Socket::accepted(fd), peer);
                }
                Accepted::Nothing => {}
                Accepted::Empty => return true,
                Accepted::Later => return false,
            }
        }
        self.acceptor.budget_spent();
        false
    }

    /// Opens a new connection to the protocol ([`Protocol::on_open`], which may
    /// speak first), serves its first request at once (a listener with
    /// `TCP_DEFER_ACCEPT` hands over connections with their request already in), then
    /// registers it, unless it is already closed: a new connection per request then
    /// costs accept, recv, send and close, and no `epoll_ctl`. Registering after the
    /// read loses no edge: `EPOLL_CTL_ADD` reports the readiness the socket has then.
    /// `on_open` hears of the peer's address from the accept (`peer`), at no cost.
    fn open_accepted(&mut self, socket: Socket, peer: Option<SocketAddr>) {
        #[cfg(feature = "tls")]
        if let Some(tls) = &self.tls {
            // Its ClientHello is likely in already: the handshake starts at once.
            let token = self.driver.adopt_handshaking(LoopWire::with_tls(socket, tls.session()));
            self.driver.edge(token, Edge { readable: true, writable: true, read_closed: false });
            self.driver.register(token);
            return;
        }
        let token = self.driver.adopt(LoopWire::from(socket));
        let edge = Edge { readable: true, writable: true, read_closed: false };
        self.driver.with_slot(token, |machine, slot| machine.ready(&mut slot.conn, edge));
        self.driver.open(token, peer);
        self.driver.register(token);
    }

    /// Starts a graceful stop: the listener goes as `options` say, the protocol is
    /// told ([`Protocol::on_drain`]), idle connections are closed after the grace
    /// and the others as soon as they are idle after it; after the timeout,
    /// whatever is left is closed. A connection the protocol closes meanwhile
    /// lingers: it reads and drops what the peer still sends (a client that
    /// pipelines did not know of the close) until the peer closes, for at most 5 s.
    /// [`run`](Reactor::run) returns [`Returned::Drained`] when no connection is
    /// left.
    pub fn drain(&mut self, options: DrainOptions) {
        if self.stop.is_some() {
            return;
        }
        self.stop = Some(Stop::new(&options, self.clock.instant()));
        self.driver.machine.stop_begun();
        self.driver.run_orders();
        match options.listener {
            ListenerFate::HandOver => self.acceptor.drop_listener(&self.driver.registry),
            ListenerFate::CloseAfterQueue => self.accept_ready(),
        }
        self.end_grace_if_over();
    }

    /// Whether [`drain`](Reactor::drain) was called.
    pub fn is_draining(&self) -> bool {
        self.stop.is_some()
    }

    /// When a stop's grace is over: closes every idle connection.
    fn end_grace_if_over(&mut self) {
        let Some(stop) = self.stop.as_mut() else { return };
        if stop.grace_ends(self.clock.instant()) {
            self.driver.close_idle();
        }
    }

    /// Closes the connections whose deadline passed; after a stop's timeout, every
    /// connection, and the listener with nothing left to serve its queue.
    fn close_expired(&mut self) {
        if self.stop.as_ref().is_some_and(|stop| stop.expired(self.clock.instant())) {
            self.driver.close_all(Closed::TimedOut);
            return self.acceptor.drop_listener(&self.driver.registry);
        }
        self.driver.close_expired();
    }
}

/// What an epoll event says a connection's socket is ready for.
fn edge_of(event: &EpollEvent) -> Edge {
    Edge { readable: event.is_readable(), writable: event.is_writable(), read_closed: event.is_read_closed() }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::reactor::driver::Slot;
    use crate::reactor::protocol::Unused;

    #[test]
    fn an_idle_connection_fits_in_64_bytes_of_slab() {
        // The slab's value for an idle connection is most of its cost (under 128 B
        // of worker memory each): the machine's state and the wire (its socket, its TLS).
        let size = std::mem::size_of::<Slot<(), LoopWire>>();
        assert!(size <= 64, "{size}");
    }

    #[test]
    fn the_loops_own_tokens_name_no_connection() {
        for own in [LISTENER, CONTROL] {
            assert!(Token(own).index() > MAX_INDEX as usize, "{own:#x} names a slot");
        }
        assert_ne!(LISTENER, CONTROL);
    }

    #[test]
    fn a_turn_with_work_queued_does_not_wait() {
        let reactor = Reactor::client(Unused, Config::default()).expect("a loop");
        // Nothing due but the tick: the wait lasts until the second turns.
        let idle = reactor.timeout(None).expect("a bound");
        assert!(idle > Duration::ZERO && idle <= Duration::from_secs(1), "{idle:?}");
    }

    #[test]
    fn a_drain_wakes_the_loop_when_its_grace_ends_not_at_the_next_tick() {
        let mut reactor = Reactor::client(Unused, Config::default()).expect("a loop");
        let grace = Duration::from_millis(50);
        reactor.drain(DrainOptions {
            listener: ListenerFate::HandOver,
            grace,
            timeout: Duration::from_secs(10),
        });
        let wait = reactor.timeout(None).expect("a bound");
        assert!(wait <= grace, "{wait:?}");
    }
}
