//! The loop: one thread, one epoll instance, edge-triggered, no locks.
//!
//! The listener is registered for `EPOLLIN|EPOLLET` and drained with `accept4` until
//! `EAGAIN`. Each connection is registered once, at accept, for
//! `EPOLLIN|EPOLLOUT|EPOLLRDHUP|EPOLLET`, and never modified: every edge is drained
//! (reads until `EAGAIN` or a short read, output until sent or `EAGAIN`). A connection
//! gets a bounded amount of reading per wake-up; if it has more, it is queued and
//! served again after the rest of the batch, so one pipelining client cannot starve
//! the others.
//!
//! A [`Protocol`] is called for every connection event: [`on_open`](Protocol::on_open)
//! when it opens (accepted, or established), [`on_data`](Protocol::on_data) when
//! input arrives or a paused protocol may go on, [`on_input_end`](Protocol::on_input_end)
//! at the end of the peer's stream, [`on_timer`](Protocol::on_timer) when its timer
//! fires, [`on_wake`](Protocol::on_wake) when it is woken, [`on_close`](Protocol::on_close)
//! when it is gone. Each call writes to an [`Io`], whose output the loop sends when
//! the call returns, and through which it may open, write to, wake, resume, shut
//! down or close any other connection of the loop.

mod accept;
mod client;
mod clock;
mod close;
mod config;
mod connection;
mod core;
mod deferred;
mod drain;
mod harness;
mod io;
mod output;
mod protocol;
mod requests;
mod slab;
mod splice;
mod timers;

pub use config::{Config, DrainPolicy, IdleTimeout};
pub use drain::{DrainOptions, ListenerFate};
pub use harness::Harness;
pub use io::Io;
pub use output::sealed_file;
pub use protocol::{Closed, ConnId, Counts, Flow, Protocol, Then, Verdict};

pub(crate) use clock::far_future;
pub(crate) use core::READ_BUFFER;
pub(crate) use output::COPY_MAX;

use std::fs::File;
use std::io as stdio;
use std::net::TcpListener;
use std::os::fd::AsFd;
use std::time::{Duration, Instant, SystemTime};

use self::core::{Callback, Core, Next};
use crate::sys::{self, Epoll, EpollEvent};
use connection::{Connection, Phase};
use drain::Drain;
use requests::Batch;
use slab::{Slab, Token, MAX_INDEX};
use splice::Splices;

const LISTENER: u64 = MAX_INDEX as u64 + 1;
const CONTROL: u64 = MAX_INDEX as u64 + 2;

/// Events taken from the kernel per `epoll_wait`.
const EVENTS_PER_WAIT: usize = 1024;

/// Why [`Reactor::run`] returned.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Wake {
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
    /// Connections dropped because a socket call failed (reset by the peer, ...).
    pub errors: u64,
    /// Connections open now.
    pub open: usize,
}

/// A single-threaded event loop serving protocol `P` on one listener, or (made with
/// [`Reactor::client`]) on connections it opens itself.
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
    epoll: Epoll,
    listener: Option<TcpListener>,
    /// A descriptor held back to be closed when accept fails with `EMFILE`, so the
    /// connection at the head of the queue can be accepted and closed instead of
    /// staying queued with no new edge to wake us.
    reserve_fd: Option<File>,
    connections: Slab<Connection<P::Conn>>,
    core: Core<P>,
    events: Vec<EpollEvent>,
    /// `events` holds a batch whose control event was reported first and whose
    /// other events the next turn serves.
    held: bool,
    again: Vec<Token>,
    /// Set by [`Reactor::drain`]: the graceful stop under way.
    drain: Option<Drain>,
    stats: Stats,
    /// When to look at the listener's queue without a new edge.
    accept: Accept,
    /// Requests being carried out (see `run_deferred`), or the memory of the last.
    batch: Option<Batch>,
    /// Connections whose reading stopped for another's output: (other, blocked).
    blocked: Vec<(Token, Token)>,
    /// Connections whose input is spliced on to another.
    splices: Splices,
}

/// When the loop looks at the listener's queue again.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Accept {
    /// On its next edge: the queue was drained.
    OnEdge,
    /// At the end of this turn: the accept budget ran out.
    Now,
    /// Once a connection closes: at `max_connections`.
    AtLimit,
    /// At the next tick: accept failed for want of memory or descriptors.
    NextTick,
}

impl<P: Protocol> Reactor<P> {
    /// Creates a loop that will accept on `listener` and serve `protocol`.
    pub fn new(listener: TcpListener, protocol: P, config: Config) -> stdio::Result<Reactor<P>> {
        listener.set_nonblocking(true)?;
        let mut reactor = Reactor::client(protocol, config)?;
        reactor.epoll.add(listener.as_fd(), sys::INTEREST_READ, LISTENER)?;
        reactor.listener = Some(listener);
        reactor.reserve_fd = open_reserve();
        Ok(reactor)
    }

    /// Creates a loop with no listener, for connections opened with
    /// [`connect`](Reactor::connect): the client side.
    pub fn client(protocol: P, config: Config) -> stdio::Result<Reactor<P>> {
        Ok(Reactor {
            epoll: Epoll::new()?,
            listener: None,
            reserve_fd: None,
            connections: Slab::new(),
            core: Core::new(protocol, config),
            events: Vec::with_capacity(EVENTS_PER_WAIT),
            held: false,
            again: Vec::new(),
            drain: None,
            stats: Stats::default(),
            accept: Accept::OnEdge,
            batch: Some(Batch::default()),
            blocked: Vec::new(),
            splices: Splices::default(),
        })
    }

    /// Also waits for `fd` (a signalfd, an eventfd, a timerfd, a pipe) to become
    /// readable, and then returns [`Wake::Control`] from [`run`](Reactor::run).
    ///
    /// The loop keeps no borrow of `fd`: epoll watches the open file it names until
    /// that file is closed. Keep `fd` open for as long as the loop should watch it;
    /// once it is closed the loop hears of it no more (if a copy of it, `dup`ed or
    /// inherited, stays open, the loop goes on hearing of that one). The loop never
    /// reads, writes or closes it.
    pub fn watch(&mut self, fd: impl AsFd) -> stdio::Result<()> {
        self.epoll.add(fd.as_fd(), sys::INTEREST_READ, CONTROL)
    }

    /// What the loop counted so far.
    pub fn stats(&self) -> Stats {
        Stats { open: self.connections.len(), ..self.stats }
    }

    /// The loop's time as of its last look at the clock, after its last wait: the
    /// [`Io::now`] its callbacks saw, for an owner that drives it turn by turn.
    pub fn now(&self) -> Instant {
        self.core.clock.instant()
    }

    /// The protocol being served.
    pub fn protocol(&self) -> &P {
        &self.core.protocol
    }

    /// The protocol being served, to change its state between turns of the loop.
    pub fn protocol_mut(&mut self) -> &mut P {
        &mut self.core.protocol
    }

    /// Runs the loop until the watched descriptor is readable or a drain finished;
    /// without either it runs until epoll itself fails.
    pub fn run(&mut self) -> stdio::Result<Wake> {
        self.core.protocol.on_tick(SystemTime::now());
        loop {
            if let Some(wake) = self.turn(None)? {
                return Ok(wake);
            }
        }
    }

    /// One turn of the loop: waits at most `max_wait` (`None`: as long as nothing
    /// is due) for events, and does the work they bring, then the timers that are
    /// due. For a caller that drives the loop itself, such as a load generator that
    /// looks at its clock between turns.
    pub fn turn(&mut self, max_wait: Option<Duration>) -> stdio::Result<Option<Wake>> {
        let mut events = std::mem::take(&mut self.events);
        let held = std::mem::take(&mut self.held);
        if !held {
            if let Err(e) = self.epoll.wait(&mut events, self.timeout(max_wait)) {
                self.events = events;
                return Err(e);
            }
        }
        let tick = self.core.clock.advance();
        if let Some(now) = tick {
            self.core.protocol.on_tick(now);
        }
        if !held && events.iter().any(|event| event.token() == CONTROL) {
            // The owner hears of its descriptor before the rest of the batch is
            // served, which the next turn does: a stop signal takes effect before
            // the requests that came with it are answered (they get `Connection:
            // close`), not after.
            self.events = events;
            self.held = true;
            return Ok(Some(Wake::Control));
        }
        for event in &events {
            match event.token() {
                LISTENER if self.drain.is_some() => self.accept_queued(),
                LISTENER => {
                    self.accept_all();
                }
                CONTROL => {}
                token => self.on_connection_event(Token(token), event),
            }
        }
        self.events = events;
        self.serve_again();
        self.fire_timers();
        self.end_grace_if_over();
        if tick.is_some() {
            self.close_expired();
        }
        // The listener is edge-triggered: connections left in its queue (at the
        // connection limit, after the accept budget, after an error) raise no new
        // edge, so the loop looks at the queue again itself.
        let retry = match self.accept {
            Accept::OnEdge => false,
            Accept::Now => true,
            Accept::AtLimit => self.connections.len() < self.core.config.max_connections,
            Accept::NextTick => tick.is_some(),
        };
        if retry {
            self.accept = Accept::OnEdge;
            match self.drain {
                None => {
                    self.accept_all();
                }
                Some(_) => self.accept_queued(),
            }
        }
        if self.drain.is_some() && self.listener.is_none() && self.connections.len() == 0 {
            return Ok(Some(Wake::Drained));
        }
        Ok(None)
    }

    /// How long the next wait may last: not at all when work is queued, else until
    /// the first timer, the turn of the second (for the tick) or `max_wait`.
    fn timeout(&self, max_wait: Option<Duration>) -> Option<Duration> {
        if !self.again.is_empty() || self.accept == Accept::Now {
            return Some(Duration::ZERO);
        }
        let now = self.core.clock.instant();
        let timer = self.core.io.timers.next().map(|at| at.saturating_duration_since(now));
        let grace = self.grace_until().map(|at| at.saturating_duration_since(now));
        let second = Some(self.core.clock.to_next_second());
        [timer, grace, second, max_wait].into_iter().flatten().min()
    }

    fn on_connection_event(&mut self, token: Token, event: &EpollEvent) {
        // A connection closed earlier in this batch has a retired token: skip it.
        let Some(conn) = self.connections.get_mut(token) else { return };
        if conn.connecting {
            return self.established(token, event.is_readable());
        }
        if event.is_read_closed() {
            conn.read_closed = true;
        }
        self.drive(token, event.is_readable() || event.is_read_closed());
    }

    /// Serves the connections whose reading budget ran out last turn.
    fn serve_again(&mut self) {
        let mut batch = std::mem::take(&mut self.again);
        for token in batch.drain(..) {
            if let Some(conn) = self.connections.get_mut(token) {
                conn.queued = false;
            }
            self.drive(token, true);
        }
        if self.again.is_empty() {
            // Keeps the capacity: no allocation per busy turn.
            self.again = batch;
        }
    }

    /// Calls `on_timer` for every connection whose timer is due.
    fn fire_timers(&mut self) {
        let now = self.core.clock.instant();
        while let Some(token) = self.core.io.timers.pop_due(now) {
            self.call(token, Callback::Timer);
        }
    }

    /// Calls the protocol back on connection `token` and carries out what it says.
    fn call(&mut self, token: Token, callback: Callback) {
        let Some(conn) = self.connections.get_mut(token) else { return };
        match self.core.callback(conn, token, callback) {
            // Sends what earlier output left queued, resumes a paused protocol whose
            // output is sent, and settles the timeouts.
            Next::Wait => self.drive(token, false),
            next => self.finish(token, next),
        }
    }

    /// Moves a connection forward: flushes its output, then reads and answers.
    fn drive(&mut self, token: Token, readable: bool) {
        let Some(conn) = self.connections.get_mut(token) else { return };
        if let Err(e) = conn.flush() {
            return self.finish(token, Next::Close(Closed::WriteFailed(e.kind())));
        }
        if conn.blocking && conn.unsent() <= deferred::RESUME_BELOW {
            conn.blocking = false;
            self.unblock(token);
        }
        let Some(conn) = self.connections.get_mut(token) else { return };
        let next = match conn.phase {
            Phase::Closing { .. } => Next::Settle,
            Phase::Lingering if readable => self::core::discard_input(conn, &mut self.core.read_buffer),
            Phase::Lingering => Next::Wait,
            Phase::Open if conn.splicing && readable => self.move_input(token),
            Phase::Open if conn.splicing => Next::Wait,
            Phase::Open if readable || self.core.may_resume(conn) => self.core.read_and_answer(conn, token),
            Phase::Open => Next::Wait,
        };
        self.finish(token, next);
    }

    fn finish(&mut self, token: Token, next: Next) {
        self.settle_next(token, next);
        if !self.core.io.deferred.is_empty() {
            self.run_deferred();
        }
    }

    fn settle_next(&mut self, token: Token, next: Next) {
        match next {
            Next::Wait if self.closes_idle() => self.close_if_idle(token),
            Next::Wait => self.rearm(token),
            Next::Again => {
                self.rearm(token);
                self.serve_soon(token);
            }
            Next::Close(closed) => self.close(token, closed),
            Next::Settle => self.settle(token),
        }
    }

    fn rearm(&mut self, token: Token) {
        let Some(conn) = self.connections.get_mut(token) else { return };
        if conn.is_finished() {
            return self.close(token, Closed::Done);
        }
        let busy = P::is_busy(&conn.state);
        let timer_set = self.core.io.timers.is_set(token);
        conn.rearm(self.core.clock.now(), &self.core.config, busy, timer_set);
    }
}

fn open_reserve() -> Option<File> {
    File::open("/dev/null").ok()
}

/// A protocol that consumes what it is given and answers nothing: for the unit tests
/// of the loop and of what runs it, which test their own decisions.
#[cfg(test)]
pub(crate) struct Unused;

#[cfg(test)]
impl Protocol for Unused {
    type Conn = ();

    fn on_data(&mut self, _conn: &mut (), input: &[u8], _io: &mut Io<'_>) -> Verdict {
        Verdict::keep(input.len())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_loops_own_tokens_name_no_connection() {
        for own in [LISTENER, CONTROL] {
            assert!(Token(own).index() > MAX_INDEX as usize, "{own:#x} names a slot");
        }
        assert_ne!(LISTENER, CONTROL);
    }

    #[test]
    fn a_turn_with_work_queued_does_not_wait() {
        let mut reactor = Reactor::client(Unused, Config::default()).expect("a loop");
        // Nothing due but the tick: the wait lasts until the second turns.
        let idle = reactor.timeout(None).expect("a bound");
        assert!(idle > Duration::ZERO && idle <= Duration::from_secs(1), "{idle:?}");
        // A connection whose reading budget ran out is served in the next turn at
        // once, not after the next edge or tick ...
        reactor.again.push(Token(0));
        assert_eq!(reactor.timeout(None), Some(Duration::ZERO));
        reactor.again.clear();
        // ... and so is a listener whose accepting budget ran out.
        reactor.accept = Accept::Now;
        assert_eq!(reactor.timeout(Some(Duration::from_secs(5))), Some(Duration::ZERO));
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
