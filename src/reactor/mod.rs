//! The loop: one thread, one epoll instance, edge-triggered, no locks.
//!
//! The listener is registered for `EPOLLIN|EPOLLET` and drained with `accept4` until
//! `EAGAIN`. Each connection is registered once, at accept, for
//! `EPOLLIN|EPOLLOUT|EPOLLRDHUP|EPOLLET`, and never modified: every edge is drained
//! (reads until `EAGAIN` or a short read, output until sent or `EAGAIN`). A connection
//! gets a bounded amount of reading per wake-up; if it has more, it is queued and
//! served again after the rest of the batch, so one pipelining client cannot starve
//! the others.

mod clock;
mod config;
mod connection;
mod io;
mod protocol;
mod slab;

pub use config::Config;
pub use protocol::{Counts, Protocol, Verdict};

use std::fs::File;
use std::io as stdio;
use std::net::TcpListener;
use std::os::fd::{AsRawFd, OwnedFd, RawFd};
use std::time::{Duration, SystemTime};

use crate::sys::{self, Epoll, Event};
use clock::Clock;
use connection::{Connection, Phase};
use io::{discard_input, read_and_answer, Next};
use slab::{Slab, Token, MAX_INDEX};

const LISTENER: u64 = MAX_INDEX as u64 + 1;
const CONTROL: u64 = MAX_INDEX as u64 + 2;

/// Bytes read per `recv`: the loop's one read buffer, shared by all connections.
const READ_BUFFER: usize = 64 * 1024;
/// Reads one connection may do per wake-up before the others get their turn.
const READS_PER_WAKE: usize = 16;
/// Unsent output above which a connection's input is not read further, so a client
/// that pipelines without reading cannot grow the worker's memory.
const OUTPUT_CAP: usize = 256 * 1024;
/// Events taken from the kernel per `epoll_wait`.
const EVENTS_PER_WAIT: usize = 1024;

/// Why [`Reactor::run`] returned.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Wake {
    /// The descriptor given to [`Reactor::watch`] is readable. It is edge-triggered:
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
    /// Connections dropped because a socket call failed (reset by the peer, ...).
    pub errors: u64,
    /// Connections open now.
    pub open: usize,
}

/// A single-threaded event loop serving protocol `P` on one listener.
#[derive(Debug)]
pub struct Reactor<P: Protocol> {
    epoll: Epoll,
    listener: TcpListener,
    /// A descriptor held back to be closed when accept fails with `EMFILE`, so the
    /// connection at the head of the queue can be accepted and closed instead of
    /// staying queued with no new edge to wake us.
    reserve_fd: Option<File>,
    connections: Slab<Connection<P::Conn>>,
    protocol: P,
    read_buffer: Box<[u8]>,
    output: Vec<u8>,
    events: Vec<Event>,
    again: Vec<Token>,
    clock: Clock,
    /// Set by [`Reactor::drain`]: the second of the loop's clock at which the
    /// connections still open are closed.
    drain_deadline: Option<u32>,
    stats: Stats,
    config: Config,
    /// Accepting stopped at `max_connections`; resumed when a slot frees.
    accept_paused: bool,
}

impl<P: Protocol> Reactor<P> {
    /// Creates a loop that will accept on `listener` and serve `protocol`.
    pub fn new(listener: TcpListener, protocol: P, config: Config) -> stdio::Result<Reactor<P>> {
        listener.set_nonblocking(true)?;
        let epoll = Epoll::new()?;
        epoll.add(listener.as_raw_fd(), sys::INTEREST_READ, LISTENER)?;
        Ok(Reactor {
            epoll,
            listener,
            reserve_fd: open_reserve(),
            connections: Slab::new(),
            protocol,
            read_buffer: vec![0; READ_BUFFER].into_boxed_slice(),
            output: Vec::with_capacity(READ_BUFFER),
            events: Vec::with_capacity(EVENTS_PER_WAIT),
            again: Vec::new(),
            clock: Clock::new(),
            drain_deadline: None,
            stats: Stats::default(),
            config,
            accept_paused: false,
        })
    }

    /// Also waits for `fd` (a signalfd, an eventfd) to become readable, and then
    /// returns [`Wake::Control`] from [`run`](Reactor::run).
    pub fn watch(&mut self, fd: RawFd) -> stdio::Result<()> {
        self.epoll.add(fd, sys::INTEREST_READ, CONTROL)
    }

    /// Starts a graceful stop: no more accepting, the protocol is told
    /// ([`Protocol::on_drain`]), idle connections are closed now and the others as
    /// soon as they are idle; after `timeout`, whatever is left is closed.
    /// [`run`](Reactor::run) returns [`Wake::Drained`] when no connection is left.
    pub fn drain(&mut self, timeout: Duration) {
        if self.drain_deadline.is_some() {
            return;
        }
        // The listener stays open (the master holds it); it is only no longer watched.
        let _ = self.epoll.delete(self.listener.as_raw_fd());
        self.protocol.on_drain();
        self.drain_deadline = Some(self.clock.now().saturating_add(timeout.as_secs().max(1) as u32));
        self.connections.remove_if(Connection::is_idle);
    }

    /// Whether [`drain`](Reactor::drain) was called.
    pub fn is_draining(&self) -> bool {
        self.drain_deadline.is_some()
    }

    /// What the loop counted so far.
    pub fn stats(&self) -> Stats {
        Stats { open: self.connections.len(), ..self.stats }
    }

    /// The protocol being served.
    pub fn protocol(&self) -> &P {
        &self.protocol
    }

    /// Runs the loop until the watched descriptor is readable or a drain finished;
    /// without either it runs until epoll itself fails.
    pub fn run(&mut self) -> stdio::Result<Wake> {
        self.protocol.on_tick(SystemTime::now());
        loop {
            if let Some(wake) = self.turn()? {
                return Ok(wake);
            }
        }
    }

    /// One wait for events and the work they bring.
    fn turn(&mut self) -> stdio::Result<Option<Wake>> {
        let timeout = if self.again.is_empty() { self.clock.ms_to_next_second() } else { 0 };
        let mut events = std::mem::take(&mut self.events);
        self.epoll.wait(&mut events, timeout)?;
        let mut control = false;
        for event in &events {
            match event.token() {
                LISTENER => self.accept_all(),
                CONTROL => control = true,
                token => self.on_connection_event(Token(token), event),
            }
        }
        self.events = events;
        for token in std::mem::take(&mut self.again) {
            self.drive(token, true);
        }
        if let Some(now) = self.clock.advance() {
            self.protocol.on_tick(now);
            self.close_expired();
        }
        if self.drain_deadline.is_some() && self.connections.len() == 0 {
            return Ok(Some(Wake::Drained));
        }
        if self.accept_paused && self.connections.len() < self.config.max_connections && !self.is_draining() {
            // The listener is edge-triggered: connections queued while paused raise
            // no new edge, so look at the queue now.
            self.accept_paused = false;
            self.accept_all();
        }
        Ok(control.then_some(Wake::Control))
    }

    fn accept_all(&mut self) {
        loop {
            if self.connections.len() >= self.config.max_connections {
                self.accept_paused = true;
                return;
            }
            match sys::accept(self.listener.as_raw_fd()) {
                Ok(fd) => {
                    self.stats.accepted += 1;
                    self.register(fd);
                }
                Err(e) if e.kind() == stdio::ErrorKind::WouldBlock => return,
                Err(e) if is_out_of_fds(&e) => {
                    if !self.refuse_one() {
                        return;
                    }
                }
                // The connection at the head of the queue failed (ECONNABORTED,
                // EPROTO, ...); the next one is still there.
                Err(_) => {}
            }
        }
    }

    /// Serves a new connection's first request at once (a listener with
    /// `TCP_DEFER_ACCEPT` hands over connections with their request already in), then
    /// registers it, unless it is already closed: a new connection per request then
    /// costs accept, recv, send and close, and no `epoll_ctl`. Registering after the
    /// read loses no edge: `EPOLL_CTL_ADD` reports the readiness the socket has then.
    fn register(&mut self, fd: OwnedFd) {
        let token = self.connections.insert(Connection::new(fd));
        self.drive(token, true);
        let Some(conn) = self.connections.get_mut(token) else { return };
        if self.epoll.add(conn.fd.as_raw_fd(), sys::INTEREST_CONNECTION, token.0).is_err() {
            self.connections.remove(token);
        }
    }

    /// Out of descriptors: frees the reserve, accepts and closes the connection at the
    /// head of the queue, takes the reserve back. Returns whether that made progress.
    fn refuse_one(&mut self) -> bool {
        if self.reserve_fd.take().is_none() {
            return false;
        }
        let refused = sys::accept(self.listener.as_raw_fd()).is_ok();
        self.reserve_fd = open_reserve();
        refused
    }

    fn on_connection_event(&mut self, token: Token, event: &Event) {
        // A connection closed earlier in this batch has a retired token: skip it.
        let Some(conn) = self.connections.get_mut(token) else { return };
        if event.is_read_closed() {
            conn.read_closed = true;
        }
        self.drive(token, event.is_readable() || event.is_read_closed());
    }

    /// Moves a connection forward: flushes its output, then reads and answers.
    fn drive(&mut self, token: Token, readable: bool) {
        let Some(conn) = self.connections.get_mut(token) else { return };
        if conn.unsent() > 0 && conn.flush().is_err() {
            return self.finish(token, Next::Drop);
        }
        let next = match conn.phase {
            Phase::Closing { .. } => Next::Settle,
            Phase::Lingering if readable => discard_input(conn, &mut self.read_buffer),
            Phase::Lingering => Next::Wait,
            Phase::Open => {
                let resume = conn.read_paused && conn.unsent() <= OUTPUT_CAP;
                if readable || resume {
                    conn.read_paused = false;
                    read_and_answer(conn, &mut self.protocol, &mut self.read_buffer, &mut self.output)
                } else {
                    Next::Wait
                }
            }
        };
        self.finish(token, next);
    }

    fn finish(&mut self, token: Token, next: Next) {
        match next {
            Next::Wait if self.drain_deadline.is_some() => self.close_if_idle(token),
            Next::Wait => self.rearm(token),
            Next::Again => {
                self.rearm(token);
                self.again.push(token);
            }
            Next::Drop => {
                self.stats.errors += 1;
                self.connections.remove(token);
            }
            Next::Settle => self.settle(token),
        }
    }

    fn rearm(&mut self, token: Token) {
        if let Some(conn) = self.connections.get_mut(token) {
            let mid_request = P::mid_request(&conn.state);
            conn.rearm(self.clock.now(), &self.config, mid_request);
        }
    }

    fn close_if_idle(&mut self, token: Token) {
        if self.connections.get_mut(token).is_some_and(|conn| conn.is_idle()) {
            self.connections.remove(token);
        }
    }

    /// Closes a connection whose output is all sent, lingering first when the peer
    /// may still be sending.
    fn settle(&mut self, token: Token) {
        let Some(conn) = self.connections.get_mut(token) else { return };
        let Phase::Closing { linger } = conn.phase else { return };
        if conn.unsent() > 0 {
            return;
        }
        if linger && !conn.read_closed && sys::shutdown_write(conn.fd.as_raw_fd()).is_ok() {
            conn.phase = Phase::Lingering;
            let next = discard_input(conn, &mut self.read_buffer);
            return self.finish(token, next);
        }
        self.connections.remove(token);
    }

    fn close_expired(&mut self) {
        let now = self.clock.now();
        if self.drain_deadline.is_some_and(|deadline| deadline <= now) {
            return self.connections.remove_if(|_| true);
        }
        self.connections.remove_if(|conn| conn.deadline != 0 && conn.deadline <= now);
    }
}

fn open_reserve() -> Option<File> {
    File::open("/dev/null").ok()
}

fn is_out_of_fds(e: &stdio::Error) -> bool {
    matches!(e.raw_os_error(), Some(libc::EMFILE | libc::ENFILE))
}
