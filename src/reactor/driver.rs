//! [`Driver`]: carries out the machine's steps on each connection's [`Wire`], and
//! owns what the machine's rules need of the other connections: the slab they live
//! in, the connections to serve again, the writers blocked on another's output, the
//! splices, and the orders callbacks give. The loop drives it with sockets, the
//! [`Harness`](super::harness::Harness) with byte vectors: both through this code.

use std::io;
use std::net::SocketAddr;

use super::blocked::Blocked;
use super::conns::ConnId;
use super::io::{Ends, NotConnected};
use super::machine::{Connection, Edge, Machine};
use super::orders::{Batch, Order};
use super::protocol::{Closed, Flow, Protocol, Verdict};
use super::slab::{Slab, Token};
use super::splice::Splices;
use super::steps::{steps, Needs};
use super::wire::{DriverWire, Establishing};
use crate::listen::Address;
use crate::sys::Pipe;

/// Bytes read per `recv`: the loop's one read buffer, shared by all connections. A
/// message longer than this reaches `on_data` over several calls; a protocol that
/// takes larger ones sets [`Config::max_pending_input`](super::config::Config::max_pending_input)
/// to hold them.
pub(crate) const READ_BUFFER: usize = 64 * 1024;

/// A connection and its wire, in the slab.
#[derive(Debug)]
pub(crate) struct Slot<S, W> {
    pub(crate) conn: Connection<S>,
    pub(crate) wire: W,
}

/// What moving a connection's input through its pipe came to.
enum Pumped {
    Moved,
    /// The connection fed cannot take what the pipe holds: wait for it.
    Blocked(Token),
    /// The connection fed failed to take it, and closes so.
    Failed(Token, Closed),
    /// All the splice was to move has reached the connection fed.
    Done,
}

/// The connections of one loop (or harness) and everything between them.
pub(crate) struct Driver<P: Protocol, W: DriverWire> {
    pub(crate) machine: Machine<P>,
    slots: Slab<Slot<P::Conn, W>>,
    pub(crate) registry: W::Registry,
    read_buffer: Box<[u8]>,
    /// Connections to serve again soon (a token may appear twice: the second serve
    /// finds nothing to do).
    again: Vec<Token>,
    blocked: Blocked,
    splices: Splices,
    /// Orders being carried out: `None` while a batch is, its memory otherwise.
    batch: Option<Batch>,
    /// Connections to close once the orders their callbacks gave are carried out.
    closing: Vec<(Token, Closed)>,
    /// Connections dropped because a wire call failed (reset by the peer, ...).
    failed: u64,
    /// Connections opened to a peer, established or not.
    opened: u64,
}

impl<P: Protocol, W: DriverWire> Driver<P, W> {
    pub(crate) fn new(machine: Machine<P>, registry: W::Registry) -> Driver<P, W> {
        Driver {
            machine,
            slots: Slab::new(),
            registry,
            read_buffer: vec![0; READ_BUFFER].into_boxed_slice(),
            again: Vec::new(),
            blocked: Blocked::default(),
            splices: Splices::default(),
            batch: Some(Batch::default()),
            closing: Vec::new(),
            failed: 0,
            opened: 0,
        }
    }

    /// Connections open.
    pub(crate) fn len(&self) -> usize {
        self.slots.len()
    }

    /// Connections dropped because a wire call failed.
    pub(crate) fn failed(&self) -> u64 {
        self.failed
    }

    /// Connections opened to a peer (a connect that failed at once among them,
    /// when the protocol hears of it as a connection).
    pub(crate) fn opened(&self) -> u64 {
        self.opened
    }

    /// Whether connections wait to be served again.
    pub(crate) fn has_work(&self) -> bool {
        !self.again.is_empty()
    }

    /// Calls `act` with the machine and connection `token`'s slot, if it is open.
    pub(crate) fn with_slot<R>(
        &mut self,
        token: Token,
        act: impl FnOnce(&mut Machine<P>, &mut Slot<P::Conn, W>) -> R,
    ) -> Option<R> {
        let slot = self.slots.get_mut(token)?;
        Some(act(&mut self.machine, slot))
    }

    /// Every connection's token.
    pub(crate) fn tokens(&self) -> Vec<Token> {
        self.slots.tokens_where(|_| true)
    }

    pub(crate) fn slot(&self, token: Token) -> Option<&Slot<P::Conn, W>> {
        self.slots.get(token)
    }

    pub(crate) fn slot_mut(&mut self, token: Token) -> Option<&mut Slot<P::Conn, W>> {
        self.slots.get_mut(token)
    }

    /// Places an established connection on `wire`, with nothing called yet.
    pub(crate) fn adopt(&mut self, wire: W) -> Token {
        let token = self.machine.io.orders.ids.take();
        self.slots.put(token, Slot { conn: Connection::open(), wire });
        token
    }

    /// Places an accepted connection whose wire is still being established (its TLS
    /// handshake): its protocol hears of it once that is done.
    #[cfg(feature = "tls")]
    pub(crate) fn adopt_handshaking(&mut self, wire: W) -> Token {
        let token = self.machine.io.orders.ids.take();
        self.slots.put(token, Slot { conn: Connection::handshaking(), wire });
        let slot = self.slots.get_mut(token).expect("placed above");
        self.machine.rearm(&mut slot.conn, token);
        token
    }

    /// Calls `on_open` for an established connection, then serves it; `peer`: its
    /// peer's address, if its wire's opening said it.
    pub(crate) fn open(&mut self, token: Token, peer: Option<SocketAddr>) -> Option<Flow> {
        let slot = self.slots.get_mut(token)?;
        let flow = self.machine.open(&mut slot.conn, token, Ends { wire: &slot.wire, peer });
        self.serve(token);
        flow
    }

    /// Registers the wire of connection `token`, if it is still open.
    pub(crate) fn register(&mut self, token: Token) {
        let Some(slot) = self.slots.get_mut(token) else { return };
        if let Err(e) = slot.wire.register(&mut self.registry, token) {
            self.close(token, Closed::ReadFailed(e.kind()));
        }
    }

    /// Opens a connection to `addr`; one that fails at once is this error.
    pub(crate) fn connect(&mut self, addr: &Address) -> io::Result<ConnId> {
        let token = self.machine.io.orders.ids.take();
        match self.place_connecting(token, addr) {
            Ok(()) => {
                self.opened += 1;
                Ok(ConnId::of(token))
            }
            Err(e) => {
                self.machine.io.orders.ids.give_back(token);
                Err(e)
            }
        }
    }

    /// Opens a connection to `addr` that speaks TLS as `session` says: established
    /// once its handshake is done too.
    #[cfg(feature = "tls")]
    pub(crate) fn connect_tls(&mut self, addr: &Address, session: crate::tls::Session) -> io::Result<ConnId> {
        let id = self.connect(addr)?;
        if let Some(slot) = self.slots.get_mut(id.token()) {
            slot.wire.speak_tls(session);
        }
        Ok(id)
    }

    /// Opens a connection to `addr` under `token`, taken and holding nothing.
    fn place_connecting(&mut self, token: Token, addr: &Address) -> io::Result<()> {
        let wire = W::connect(&mut self.registry, token, addr)?;
        self.slots.put(token, Slot { conn: Connection::connecting(), wire });
        let slot = self.slots.get_mut(token).expect("placed above");
        self.machine.rearm(&mut slot.conn, token);
        Ok(())
    }

    /// An edge of connection `token`'s wire: a connection being opened is
    /// established (or failed); an open one is served.
    pub(crate) fn edge(&mut self, token: Token, edge: Edge) {
        // A connection closed earlier in this batch has a retired token: skip it.
        let Some(slot) = self.slots.get_mut(token) else { return };
        if slot.conn.is_connecting() {
            match slot.wire.establish(&mut self.read_buffer) {
                Establishing::Done => {}
                Establishing::InProgress => return,
                Establishing::Failed(kind) => return self.close(token, Closed::ConnectFailed(kind)),
            }
            // Input may wait already: a request that came with a TLS handshake's
            // last flight.
            self.machine.ready(&mut slot.conn, Edge { readable: true, ..edge });
            self.established(token);
            return;
        }
        self.machine.ready(&mut slot.conn, edge);
        self.serve(token);
    }

    /// A connection being opened is established: `on_open`, and what waited is sent.
    pub(crate) fn established(&mut self, token: Token) -> Option<Flow> {
        let slot = self.slots.get_mut(token)?;
        let flow = self.machine.established(&mut slot.conn, token, Ends::of(&slot.wire));
        self.serve(token);
        flow
    }

    /// Calls `on_timer` for every connection whose timer is due by the machine's now.
    pub(crate) fn fire_timers(&mut self) {
        let now = self.machine.now();
        while let Some(token) = self.machine.io.timers.pop_due(now) {
            self.timer(token);
        }
    }

    /// Calls `on_timer` for connection `token` (if open), then serves it.
    pub(crate) fn timer(&mut self, token: Token) -> Option<Flow> {
        let slot = self.slots.get_mut(token)?;
        let flow = self.machine.timer(&mut slot.conn, token, Ends::of(&slot.wire));
        self.serve(token);
        flow
    }

    /// Calls `on_wake` for connection `token` (if open), then serves it.
    pub(crate) fn wake(&mut self, token: Token) -> Option<Flow> {
        let flow = self.wake_only(token);
        self.run_orders();
        flow
    }

    fn wake_only(&mut self, token: Token) -> Option<Flow> {
        let slot = self.slots.get_mut(token)?;
        let flow = self.machine.wake(&mut slot.conn, token, Ends::of(&slot.wire));
        if flow.is_some() {
            self.serve_only(token);
        }
        flow
    }

    /// Calls `on_data` for connection `token` with exactly `input` (for a test that
    /// looks at one call), then serves it.
    pub(crate) fn data(&mut self, token: Token, input: &[u8]) -> Option<Verdict> {
        let slot = self.slots.get_mut(token)?;
        let verdict = self.machine.data(&mut slot.conn, token, Ends::of(&slot.wire), input);
        self.serve(token);
        Some(verdict)
    }

    /// Serves the connections whose turn was cut short.
    pub(crate) fn serve_again(&mut self) {
        let mut batch = std::mem::take(&mut self.again);
        for token in batch.drain(..) {
            self.serve(token);
        }
        if self.again.is_empty() {
            // Keeps the capacity: no allocation per busy turn.
            self.again = batch;
        }
    }

    /// Carries out connection `token`'s steps, then the orders its callbacks gave.
    pub(crate) fn serve(&mut self, token: Token) {
        self.serve_only(token);
        self.run_orders();
    }

    fn serve_only(&mut self, token: Token) {
        let mut reads = 0;
        loop {
            let Some(slot) = self.slots.get_mut(token) else { return };
            let (conn, wire) = (&mut slot.conn, &mut slot.wire);
            match steps(&mut self.machine, &mut self.read_buffer, conn, wire, token, &mut reads) {
                Needs::Nothing => return,
                Needs::Again => return self.again.push(token),
                // What its callbacks ordered is carried out first, as they
                // returned before it closed.
                Needs::Close(closed) if !self.machine.io.orders.is_empty() => {
                    return self.closing.push((token, closed));
                }
                Needs::Close(closed) => return self.close(token, closed),
                Needs::Release => self.release(token),
                Needs::Splice => self.pump(token),
            }
        }
    }

    /// Lets the connections blocked on `token`'s output read again (soon).
    fn release(&mut self, token: Token) {
        let (slots, machine, again) = (&mut self.slots, &mut self.machine, &mut self.again);
        self.blocked.release(token, |writer| {
            if let Some(slot) = slots.get_mut(writer) {
                machine.unblock(&mut slot.conn);
                again.push(writer);
            }
        });
    }

    /// Moves `token`'s input on through its pipe: empties the pipe into the
    /// connection it feeds, then reads more into it.
    fn pump(&mut self, token: Token) {
        match self.move_through_pipe(token) {
            Pumped::Moved => {}
            Pumped::Blocked(to) => self.block(token, to),
            Pumped::Failed(to, closed) => self.close(to, closed),
            Pumped::Done => {
                self.splices.finish(token);
                if let Some(slot) = self.slots.get_mut(token) {
                    self.machine.unsplice(&mut slot.conn);
                    self.machine.spliced_all(&mut slot.conn, token, Ends::of(&slot.wire));
                }
            }
        }
    }

    fn move_through_pipe(&mut self, token: Token) -> Pumped {
        let Some(splice) = self.splices.of(token) else { return Pumped::Moved };
        let to = splice.to;
        let Some((source, target)) = self.slots.pair_mut(token, to) else { return Pumped::Moved };
        let (Some(from_fd), Some(to_fd)) = (source.wire.splice_fd(), target.wire.splice_fd()) else {
            return Pumped::Moved;
        };
        if splice.in_pipe > 0 {
            if !self.machine.takes_spliced(&target.conn) {
                return Pumped::Blocked(to);
            }
            let emptied = splice.pipe.empty_into(to_fd, splice.in_pipe);
            match self.machine.emptied(&mut target.conn, emptied) {
                Ok(n) => splice.in_pipe -= n,
                Err(closed) => return Pumped::Failed(to, closed),
            }
            if splice.in_pipe > 0 {
                return Pumped::Blocked(to);
            }
        }
        if splice.is_done() {
            return Pumped::Done;
        }
        match splice.pipe.fill_from(from_fd, splice.chunk()) {
            Ok(0) => {
                self.machine.input_ended(&mut source.conn, token, Ends::of(&source.wire));
            }
            Ok(n) => splice.filled(n),
            Err(e) if e.kind() == io::ErrorKind::WouldBlock => self.machine.nothing_to_read(&mut source.conn),
            Err(e) => self.machine.read_failed(&mut source.conn, e.kind()),
        }
        Pumped::Moved
    }

    /// `writer` reads no more until `on`'s output drains (once in the list, however
    /// often it tries before); it tries again then.
    fn block(&mut self, writer: Token, on: Token) {
        let Some((writer_slot, on_slot)) = self.slots.pair_mut(writer, on) else { return };
        if self.machine.block(&mut writer_slot.conn, writer) {
            self.machine.holds_back_a_writer(&mut on_slot.conn);
            self.blocked.add(on, writer);
        }
    }

    /// Carries out what callbacks ordered, in order, and what the calls that makes
    /// order in turn, until nothing is left. A call made while it runs leaves the
    /// rest to it.
    pub(crate) fn run_orders(&mut self) {
        if self.machine.io.orders.is_empty() && self.closing.is_empty() {
            return;
        }
        let Some(mut spare) = self.batch.take() else { return };
        loop {
            if !self.machine.io.orders.is_empty() {
                let batch = self.machine.io.orders.take(spare);
                for order in &batch.orders {
                    self.carry_out(order, &batch.bytes);
                }
                spare = batch;
                spare.clear();
            } else if let Some((token, closed)) = self.closing.pop() {
                self.close(token, closed);
            } else {
                break;
            }
        }
        self.batch = Some(spare);
    }

    fn carry_out(&mut self, order: &Order, bytes: &[u8]) {
        match *order {
            Order::Connect(token, ref addr) => self.connect_ordered(token, addr),
            Order::Write { from, to, bytes: ref range } => self.write(from, to, &bytes[range.clone()]),
            Order::Wake(token) => {
                self.wake_only(token);
            }
            Order::Resume(token) => self.serve_after(token, Machine::resume),
            Order::Shutdown(token) => self.serve_after(token, Machine::shutdown),
            Order::Close(token) => self.serve_after(token, Machine::close_asked),
            Order::Splice(from, to, len) => self.splice(from, to, len),
            Order::Idle(token, idle) => {
                self.with_slot(token, |machine, slot| {
                    machine.set_idle_timeout(&mut slot.conn, idle);
                    machine.rearm(&mut slot.conn, token);
                });
            }
            Order::ReadTimeout(token, timeout) => {
                self.with_slot(token, |machine, slot| {
                    machine.set_read_timeout(&mut slot.conn, token, timeout);
                    machine.rearm(&mut slot.conn, token);
                });
            }
            Order::Busy(token, true) => {
                self.with_slot(token, |machine, slot| {
                    machine.set_busy(&mut slot.conn, true);
                    machine.rearm(&mut slot.conn, token);
                });
            }
            // Served after: a stop past its grace closes it at once if it is idle.
            Order::Busy(token, false) => {
                self.serve_after(token, |machine, conn| machine.set_busy(conn, false))
            }
            Order::Drain(token, policy) => {
                self.with_slot(token, |machine, slot| machine.set_drain_policy(&mut slot.conn, policy));
            }
        }
    }

    /// Tells the machine `act` of connection `token`, then serves it.
    fn serve_after(&mut self, token: Token, act: impl FnOnce(&mut Machine<P>, &mut Connection<P::Conn>)) {
        if self.with_slot(token, |machine, slot| act(machine, &mut slot.conn)).is_some() {
            self.serve_only(token);
        }
    }

    /// Opens the connection a callback ordered; if that fails at once, the protocol
    /// hears of it as of a connect that failed later.
    fn connect_ordered(&mut self, token: Token, addr: &Address) {
        self.opened += 1;
        #[cfg(feature = "tls")]
        let session = match self.machine.io.orders.take_session(token).transpose() {
            Ok(session) => session,
            Err(e) => return self.connect_failed(token, e.kind()),
        };
        match self.place_connecting(token, addr) {
            Err(e) => self.connect_failed(token, e.kind()),
            #[cfg(feature = "tls")]
            Ok(()) => {
                if let (Some(session), Some(slot)) = (session, self.slots.get_mut(token)) {
                    slot.wire.speak_tls(session);
                }
            }
            #[cfg(not(feature = "tls"))]
            Ok(()) => {}
        }
    }

    /// A connection ordered opened under `token` failed before it was placed.
    fn connect_failed(&mut self, token: Token, kind: io::ErrorKind) {
        self.machine.io.orders.ids.give_back(token);
        self.failed += 1;
        self.machine.closed(
            Connection::connecting(),
            token,
            Ends::of(&NotConnected),
            Closed::ConnectFailed(kind),
        );
    }

    /// Sends `bytes` on `to` for `from`; `from` stops reading if that leaves `to`
    /// over the budget.
    fn write(&mut self, from: Token, to: Token, bytes: &[u8]) {
        let Some(slot) = self.slots.get_mut(to) else { return };
        if self.machine.takes_bytes_now(&mut slot.conn, bytes) {
            let sent = slot.wire.send_bytes(bytes);
            self.machine.sent_bytes(&mut slot.conn, bytes, sent);
        }
        if self.machine.is_over_budget(&mut slot.conn) {
            if let Some(writer) = self.slots.get_mut(from) {
                if self.machine.block(&mut writer.conn, from) {
                    self.blocked.add(to, from);
                }
            }
        }
        self.serve_only(to);
    }

    /// Starts splicing `from`'s input on to `to`, after what `from` holds unconsumed;
    /// `len` bytes of it, or (`None`) until it ends. If no pipe can be had, `from`'s
    /// input goes on reaching the protocol.
    fn splice(&mut self, from: Token, to: Token, len: Option<u64>) {
        if !self.splices.may_start(from, to) {
            return;
        }
        let Some((source, target)) = self.slots.pair_mut(from, to) else { return };
        if !target.conn.is_open() {
            return;
        }
        if source.wire.splice_fd().is_none() {
            return;
        }
        // What the connection holds whole (a proxy's small body) needs no pipe.
        let held_whole = self.machine.holds_all_of(&source.conn, len);
        let pipe = if held_whole {
            None
        } else {
            let Ok(pipe) = Pipe::new() else { return };
            Some(pipe)
        };
        let Some(spliced) = self.machine.splice(&mut source.conn, len) else { return };
        if let Some(pipe) = pipe {
            self.splices.start(from, to, pipe, spliced.left);
        }
        self.write(from, to, &spliced.first);
        if held_whole {
            // What it held was all there was to move.
            if let Some(slot) = self.slots.get_mut(from) {
                self.machine.spliced_all(&mut slot.conn, from, Ends::of(&slot.wire));
            }
        }
        self.again.push(from);
    }

    /// The one way a connection leaves: its writers and its splices are let go, the
    /// protocol hears of it (its timer cancelled), and its wire is dropped.
    pub(crate) fn close(&mut self, token: Token, closed: Closed) {
        let Some(slot) = self.slots.remove(token) else { return };
        self.machine.io.orders.ids.give_back(token);
        if !self.blocked.is_empty() {
            self.release(token);
        }
        if !self.splices.is_empty() {
            if let Some(source) = self.splices.end(token).and_then(|source| self.slots.get_mut(source)) {
                self.machine.unsplice(&mut source.conn);
            }
        }
        let closed = self.machine.closed(slot.conn, token, Ends::of(&slot.wire), closed);
        if matches!(closed, Closed::ReadFailed(_) | Closed::WriteFailed(_) | Closed::ConnectFailed(_)) {
            self.failed += 1;
        }
        slot.wire.retire(&mut self.registry, token, closed);
        self.run_orders();
    }

    /// Closes every connection `matches` picks.
    fn close_where(&mut self, closed: Closed, matches: impl FnMut(&Slot<P::Conn, W>) -> bool) {
        for token in self.slots.tokens_where(matches) {
            self.close(token, closed);
        }
    }

    /// Closes the connections whose deadline ran out.
    pub(crate) fn close_expired(&mut self) {
        while let Some(token) = self.machine.next_expired() {
            let Some(slot) = self.slots.get_mut(token) else { continue };
            if self.machine.expired(&slot.conn, token) {
                self.close(token, Closed::TimedOut);
            }
        }
    }

    /// A stop's grace is over: closes the idle connections, and any that turns idle.
    pub(crate) fn close_idle(&mut self) {
        self.machine.grace_over();
        let machine = &self.machine;
        let idle = self.slots.tokens_where(|slot| machine.may_close_idle(&slot.conn));
        for token in idle {
            self.close(token, Closed::Done);
        }
    }

    /// Closes every connection, as `closed`.
    pub(crate) fn close_all(&mut self, closed: Closed) {
        self.close_where(closed, |_| true);
    }
}

/// What a driver is, in short: its connections' states are the machine's to show.
impl<P: Protocol + std::fmt::Debug, W: DriverWire> std::fmt::Debug for Driver<P, W> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Driver")
            .field("machine", &self.machine)
            .field("connections", &self.slots.len())
            .field("again", &self.again.len())
            .field("failed", &self.failed)
            .finish_non_exhaustive()
    }
}
