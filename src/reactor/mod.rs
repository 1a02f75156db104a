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
mod connection;
mod protocol;
mod slab;

pub use protocol::{Protocol, Verdict};

use std::fs::File;
use std::io;
use std::net::TcpListener;
use std::os::fd::{AsRawFd, OwnedFd};

use crate::sys::{self, Epoll, Event};
use clock::Clock;
use connection::{Connection, Phase};
use slab::{Slab, Token, MAX_INDEX};

const LISTENER: u64 = MAX_INDEX as u64 + 1;

/// Bytes read per `recv`: the loop's one read buffer, shared by all connections.
const READ_BUFFER: usize = 64 * 1024;
/// Reads one connection may do per wake-up before the others get their turn.
const READS_PER_WAKE: usize = 16;
/// Unsent output above which a connection's input is not read further, so a client
/// that pipelines without reading cannot grow the worker's memory.
const OUTPUT_CAP: usize = 256 * 1024;
/// Seconds a closing connection may keep sending us bytes we drop (nginx: 5 s).
const LINGER_SECS: u32 = 5;
/// Events taken from the kernel per `epoll_wait`.
const EVENTS_PER_WAIT: usize = 1024;

/// What to do with a connection after some work on it.
enum Next {
    /// Nothing until its next edge.
    Wait,
    /// Its reading budget ran out with input possibly left: serve it again soon.
    Again,
    /// Its phase may have changed: close, linger, or keep waiting.
    Settle,
    /// The socket failed: close at once.
    Drop,
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
}

impl<P: Protocol> Reactor<P> {
    /// Creates a loop that will accept on `listener` and serve `protocol`.
    pub fn new(listener: TcpListener, protocol: P) -> io::Result<Reactor<P>> {
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
        })
    }

    /// The protocol being served.
    pub fn protocol(&self) -> &P {
        &self.protocol
    }

    /// Connections currently open.
    pub fn connection_count(&self) -> usize {
        self.connections.len()
    }

    /// Runs the loop until an unrecoverable error of epoll itself.
    pub fn run(&mut self) -> io::Result<()> {
        self.protocol.on_tick(self.clock.wall());
        loop {
            self.turn()?;
        }
    }

    /// One wait for events and the work they bring.
    fn turn(&mut self) -> io::Result<()> {
        let timeout = if self.again.is_empty() { self.clock.ms_to_next_second() } else { 0 };
        let mut events = std::mem::take(&mut self.events);
        self.epoll.wait(&mut events, timeout)?;
        for event in &events {
            match event.token() {
                LISTENER => self.accept_all(),
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
        Ok(())
    }

    fn accept_all(&mut self) {
        loop {
            match sys::accept(self.listener.as_raw_fd()) {
                Ok(fd) => self.register(fd),
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => return,
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
            Next::Wait => {}
            Next::Again => self.again.push(token),
            Next::Drop => drop(self.connections.remove(token)),
            Next::Settle => self.settle(token),
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
            conn.deadline = self.clock.now() + LINGER_SECS;
            let next = discard_input(conn, &mut self.read_buffer);
            return self.finish(token, next);
        }
        self.connections.remove(token);
    }

    fn close_expired(&mut self) {
        let now = self.clock.now();
        self.connections.remove_if(|conn| conn.deadline != 0 && conn.deadline <= now);
    }
}

fn open_reserve() -> Option<File> {
    File::open("/dev/null").ok()
}

fn is_out_of_fds(e: &io::Error) -> bool {
    matches!(e.raw_os_error(), Some(libc::EMFILE | libc::ENFILE))
}

/// Reads within the wake-up's budget, hands the input to the protocol and sends its
/// answer, until the socket is drained, the output is over the cap, or the
/// connection is closing.
fn read_and_answer<P: Protocol>(
    conn: &mut Connection<P::Conn>,
    protocol: &mut P,
    read_buffer: &mut [u8],
    output: &mut Vec<u8>,
) -> Next {
    for _ in 0..READS_PER_WAKE {
        if conn.unsent() > OUTPUT_CAP {
            conn.read_paused = true;
            return Next::Wait;
        }
        let n = match sys::recv(conn.fd.as_raw_fd(), read_buffer) {
            Ok(0) => {
                // The peer is done sending; an incomplete request can never complete.
                conn.pending_input = Vec::new();
                conn.read_closed = true;
                conn.phase = Phase::Closing { linger: false };
                return Next::Settle;
            }
            Ok(n) => n,
            Err(e) if e.kind() == io::ErrorKind::WouldBlock => return Next::Wait,
            Err(_) => return Next::Drop,
        };
        let fresh = &read_buffer[..n];
        let from_pending = !conn.pending_input.is_empty();
        if from_pending {
            conn.pending_input.extend_from_slice(fresh);
        }
        let input: &[u8] = if from_pending { &conn.pending_input } else { fresh };
        output.clear();
        let verdict = protocol.on_data(&mut conn.state, input, output);
        let consumed = verdict.consumed.min(input.len());
        if verdict.keep_open {
            conn.keep_input(from_pending, fresh, consumed);
        } else {
            let linger = consumed < input.len();
            conn.pending_input = Vec::new();
            conn.phase = Phase::Closing { linger };
        }
        if conn.send(output).is_err() {
            return Next::Drop;
        }
        if conn.phase != Phase::Open {
            return Next::Settle;
        }
        if n < read_buffer.len() && !conn.read_closed {
            return Next::Wait;
        }
    }
    Next::Again
}

/// Reads and drops what a lingering connection still sends; closes at its end.
fn discard_input<S>(conn: &mut Connection<S>, read_buffer: &mut [u8]) -> Next {
    for _ in 0..READS_PER_WAKE {
        match sys::recv(conn.fd.as_raw_fd(), read_buffer) {
            Ok(0) => return Next::Drop,
            Ok(_) => {}
            Err(e) if e.kind() == io::ErrorKind::WouldBlock => return Next::Wait,
            Err(_) => return Next::Drop,
        }
    }
    Next::Again
}
