//! [`Io`]: what a protocol's callback may do on its connection.

use std::fs::File;
use std::io;
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::{Duration, Instant};

use super::clock::far_future;
use super::config::{DrainPolicy, IdleTimeout, OUTPUT_BUDGET};
use super::conns::{ConnId, Conns};
use super::orders::{Order, Orders};
use super::output::Output;
use super::slab::Token;
use super::timers::Timers;
use crate::listen::Address;

/// What a callback can do: on its connection, write output, set its timer, and see
/// the loop's time; on the loop, open a connection and write to, wake, resume,
/// shut down or close any connection. Output written here is sent when the
/// callback returns, after the connection's earlier output, in one system call
/// when the socket takes it; what is asked of other connections is done as soon as
/// the callback returns, in the same turn of the loop, in the order asked.
///
/// # Flow control between connections
///
/// Bytes written to another connection ([`write_to`](Io::write_to)) join its output.
/// When that leaves its unsent output over the loop's budget (256 KiB), the writer's
/// reading stops until the other's output drains below half the budget; then the
/// writer is read again. A relay that writes each input on to its partner this way
/// holds, per pair, at most the budget plus one read per side, whatever either peer
/// does, and no transfer stalls.
///
/// ```
/// use percore::reactor::{Harness, Protocol, Verdict, Io};
///
/// struct Greeter;
/// impl Protocol for Greeter {
///     type Conn = ();
///     fn on_data(&mut self, _: &mut (), input: &[u8], io: &mut Io<'_>) -> Verdict {
///         io.write(b"hello, ");
///         io.write(input);
///         Verdict::close(input.len())
///     }
/// }
///
/// let mut harness = Harness::new(Greeter);
/// harness.data(b"world");
/// assert_eq!(harness.take_output(), b"hello, world");
/// ```
#[derive(Debug)]
pub struct Io<'a> {
    id: ConnId,
    ends: Ends<'a>,
    now: Instant,
    output: &'a mut Output,
    /// Bytes the connection had queued, unsent, before this call.
    queued: usize,
    timers: &'a mut Timers,
    conns: Conns<'a>,
}

/// Where a connection's two ends are, as its wire (a socket, or the harness's
/// vectors) answers when asked.
pub(crate) trait Addresses: std::fmt::Debug {
    /// This end's address.
    fn local_addr(&self) -> io::Result<SocketAddr>;
    /// The far end's address.
    fn peer_addr(&self) -> io::Result<SocketAddr>;
    /// What its TLS handshake agreed on, if it speaks TLS.
    #[cfg(feature = "tls")]
    fn tls(&self) -> Option<&crate::tls::Negotiated> {
        None
    }
    /// Why its TLS handshake failed, if it did.
    #[cfg(feature = "tls")]
    fn tls_failure(&self) -> Option<&crate::tls::TlsFailure> {
        None
    }
}

/// A call's connection's ends: its wire, and the peer's address if the wire's
/// opening already said it (an accept does), so that asking costs nothing.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Ends<'a> {
    pub(crate) wire: &'a dyn Addresses,
    pub(crate) peer: Option<SocketAddr>,
}

impl<'a> Ends<'a> {
    /// The ends of a connection on `wire`.
    pub(crate) fn of(wire: &'a dyn Addresses) -> Ends<'a> {
        Ends { wire, peer: None }
    }
}

/// The ends of a connection that has no wire (its connect failed at once).
#[derive(Debug)]
pub(crate) struct NotConnected;

impl Addresses for NotConnected {
    fn local_addr(&self) -> io::Result<SocketAddr> {
        Err(io::ErrorKind::NotConnected.into())
    }

    fn peer_addr(&self) -> io::Result<SocketAddr> {
        Err(io::ErrorKind::NotConnected.into())
    }
}

/// What every callback's [`Io`] borrows from the loop (or the harness): the one
/// output buffer, the timers, and the orders for other connections.
#[derive(Debug)]
pub(crate) struct IoState {
    pub(crate) output: Output,
    /// The connection whose callback's output `output` holds until it is sent or
    /// queued; the next call may not start before.
    pub(crate) output_of: Option<Token>,
    pub(crate) timers: Timers,
    pub(crate) orders: Orders,
}

impl IoState {
    /// The connections, for a callback that has none of its own.
    pub(crate) fn conns(&mut self) -> Conns<'_> {
        Conns { orders: &mut self.orders }
    }

    /// Timers counted from `origin`, nothing written, nothing asked.
    pub(crate) fn new(origin: Instant) -> IoState {
        IoState {
            output: Output::new(),
            output_of: None,
            timers: Timers::new(origin),
            orders: Orders::default(),
        }
    }

    /// An [`Io`] for a callback on connection `token`, whose ends are `ends` and
    /// which has `queued` bytes unsent, at `now`; the output starts empty.
    pub(crate) fn for_call<'a>(
        &'a mut self,
        token: Token,
        ends: Ends<'a>,
        now: Instant,
        queued: usize,
    ) -> Io<'a> {
        debug_assert!(self.output_of.is_none(), "a call's output was neither sent nor queued");
        self.output.clear();
        let (output, timers, orders) = (&mut self.output, &mut self.timers, &mut self.orders);
        Io { id: ConnId::of(token), ends, now, output, queued, timers, conns: Conns { orders } }
    }
}

impl<'a> Io<'a> {
    /// This connection.
    pub fn id(&self) -> ConnId {
        self.id
    }

    /// The address of the connection's peer: for a connection accepted, the client;
    /// for one opened ([`connect`](Io::connect)), the server. In `on_open` of an
    /// accepted connection it is what the accept said, at no cost; elsewhere it is a
    /// system call (getpeername(2)), so a protocol that needs it for every request
    /// (`X-Forwarded-For`) keeps it in its [`Conn`](super::Protocol::Conn) from
    /// `on_open`. An error if the connection is not established, or was reset; one
    /// of kind [`Unsupported`](io::ErrorKind::Unsupported) for a connection on a
    /// Unix socket, whose ends have no IP address.
    pub fn peer_addr(&self) -> io::Result<SocketAddr> {
        match self.ends.peer {
            Some(peer) => Ok(peer),
            None => self.ends.wire.peer_addr(),
        }
    }

    /// The address of this end of the connection: for a connection accepted on a
    /// listener bound to every address, the one the client reached. A system call
    /// (getsockname(2)) each time: keep it if it is needed again. As
    /// [`peer_addr`](Io::peer_addr), [`Unsupported`](io::ErrorKind::Unsupported) on
    /// a Unix socket.
    pub fn local_addr(&self) -> io::Result<SocketAddr> {
        self.ends.wire.local_addr()
    }

    /// What the connection's TLS handshake agreed on (its version, cipher suite,
    /// ALPN protocol, whether it resumed a session); `None` for a connection that
    /// does not speak TLS.
    #[cfg(feature = "tls")]
    pub fn tls(&self) -> Option<&crate::tls::Negotiated> {
        self.ends.wire.tls()
    }

    /// Why this connection's TLS handshake failed: in `on_close` of a connection
    /// opened with [`connect_tls`](Io::connect_tls) that closes as
    /// [`ConnectFailed`](super::Closed::ConnectFailed)`(InvalidData)` (an accepted one
    /// that fails its handshake never reaches the protocol); `None` otherwise.
    #[cfg(feature = "tls")]
    pub fn tls_failure(&self) -> Option<&crate::tls::TlsFailure> {
        self.ends.wire.tls_failure()
    }

    /// The loop's time, read once per turn of the loop (after it waited).
    pub fn now(&self) -> Instant {
        self.now
    }

    /// Copies `bytes` to the output.
    pub fn write(&mut self, bytes: &[u8]) {
        self.output.write(bytes);
    }

    /// References `bytes` in the output without copying them: the connection holds
    /// the `Arc` until the socket has taken them. For large bodies that every
    /// answer repeats.
    pub fn write_shared(&mut self, bytes: &Arc<[u8]>) {
        self.output.write_shared(bytes);
    }

    /// References `len` bytes of `file` from byte `offset` on, sent with sendfile(2):
    /// they go from the page cache to the socket without passing through user
    /// memory, and count in the output like any other bytes (see
    /// [`is_full`](Io::is_full)). `file` may be owned (a `File`, closed once its range
    /// is sent or the connection is gone) or shared (an `Arc<File>`, such as a body
    /// every answer repeats, made with [`sealed_file`](super::sealed_file)).
    ///
    /// A range of more than the budget (256 KiB) makes [`is_full`](Io::is_full) true
    /// at once: write one, then pause until it is sent. An empty range writes
    /// nothing.
    ///
    /// The bytes sent are those the file holds when the socket takes them: a file
    /// changed while it is sent may go out part old, part new, unless it is sealed.
    /// A file that ends before the range does closes the connection there, as the
    /// answer cannot be completed: the peer sees the end of stream (or a reset)
    /// short of what was promised, and `on_close` gets
    /// [`Closed::WriteFailed`](super::Closed::WriteFailed)`(UnexpectedEof)`.
    pub fn write_file(&mut self, file: impl Into<Arc<File>>, offset: u64, len: usize) {
        self.output.write_file(file.into(), offset, len);
    }

    /// Bytes written in this call.
    pub fn written(&self) -> usize {
        self.output.len()
    }

    /// Whether the connection's unsent output, earlier and written now, reached the
    /// loop's budget (256 KiB): write no more, and return [`Verdict::pause`](super::Verdict::pause)
    /// (or, from `on_timer`, wait).
    pub fn is_full(&self) -> bool {
        self.queued + self.output.len() >= OUTPUT_BUDGET
    }

    /// Sets the connection's timer to fire `after` from [`now`](Io::now), replacing
    /// the one it had. One timer per connection; it does not repeat.
    pub fn set_timer(&mut self, after: Duration) {
        let at = self.now.checked_add(after).unwrap_or_else(|| far_future(self.now));
        self.set_timer_at(at);
    }

    /// Sets the connection's timer to fire at `at` (at once, if `at` has passed).
    pub fn set_timer_at(&mut self, at: Instant) {
        self.timers.set(self.id.token(), at);
    }

    /// Cancels the connection's timer, if set.
    pub fn cancel_timer(&mut self) {
        self.timers.cancel(self.id.token());
    }

    /// When the connection's timer fires, if it is set.
    pub fn timer(&self) -> Option<Instant> {
        self.timers.deadline(self.id.token())
    }

    /// Whether this connection is closed when it stays idle for the loop's idle
    /// timeout (the default), or never.
    pub fn set_idle_timeout(&mut self, idle: IdleTimeout) {
        self.conns.orders.push(Order::Idle(self.id.token(), idle));
    }

    /// Sets this connection's read timeout, or with `None` clears it: as
    /// [`Conns::set_read_timeout`].
    pub fn set_read_timeout(&mut self, timeout: Option<Duration>) {
        self.conns.set_read_timeout(self.id, timeout);
    }

    /// What a graceful stop does with this connection when it is idle: close it
    /// once the grace is over (the default), or leave it until it closes.
    pub fn set_drain_policy(&mut self, policy: DrainPolicy) {
        self.conns.orders.push(Order::Drain(self.id.token(), policy));
    }

    /// Copies `bytes` to the output of connection `to` (this one's: as
    /// [`write`](Io::write)). If that leaves `to`'s unsent output over the budget,
    /// this connection is read no more until it drains (see [flow
    /// control](Io#flow-control-between-connections)). Dropped if `to` is closed or
    /// closing.
    pub fn write_to(&mut self, to: ConnId, bytes: &[u8]) {
        if to == self.id {
            return self.write(bytes);
        }
        if !bytes.is_empty() {
            self.conns.orders.write(self.id.token(), to.token(), bytes);
        }
    }

    /// From now on, moves what this connection receives on to connection `to`
    /// through a kernel pipe (splice(2)), without copying it to user memory or
    /// handing it to [`on_data`](super::Protocol::on_data); what it holds unconsumed
    /// goes first. For bulk transfer between two sockets (a relay's pair): each read
    /// costs two system calls and no copy. Flow control is as for
    /// [`write_to`](Io::write_to), with the pipe (one read) in the place of the
    /// budget. The end of the stream still reaches
    /// [`on_input_end`](super::Protocol::on_input_end); if `to` closes, the input
    /// reaches `on_data` again. One splice feeds a connection at most; a request to
    /// splice into one already fed, or from one already spliced, does nothing, as
    /// does one from a connection whose input has ended (`on_input_end` is told
    /// once), or one the kernel cannot give a pipe for (the input keeps reaching
    /// `on_data`). The [`Harness`](super::Harness) splices nothing.
    pub fn splice_to(&mut self, to: ConnId) {
        self.conns.orders.push(Order::Splice(self.id.token(), to.token(), None));
    }

    /// As [`splice_to`](Io::splice_to), for the next `len` bytes of this
    /// connection's input only (a body of known length: what the connection holds
    /// unconsumed counts first); then its input reaches
    /// [`on_data`](super::Protocol::on_data) again, from the byte after them, and
    /// the connection is read as before, and is told so:
    /// [`on_spliced`](super::Protocol::on_spliced). The splice never reads past
    /// them.
    pub fn splice_some_to(&mut self, to: ConnId, len: u64) {
        self.conns.orders.push(Order::Splice(self.id.token(), to.token(), Some(len)));
    }

    /// As [`Conns::connect`].
    pub fn connect(&mut self, addr: impl Into<Address>) -> ConnId {
        self.conns.connect(addr)
    }

    /// As [`Conns::connect_tls`].
    #[cfg(feature = "tls")]
    pub fn connect_tls(
        &mut self,
        addr: impl Into<Address>,
        tls: &crate::tls::ClientTls,
        server: &str,
    ) -> ConnId {
        self.conns.connect_tls(addr, tls, server)
    }

    /// As [`Conns::connect_unix`].
    pub fn connect_unix(&mut self, path: &std::path::Path) -> ConnId {
        self.conns.connect_unix(path)
    }

    /// As [`Conns::wake`].
    pub fn wake(&mut self, id: ConnId) {
        self.conns.wake(id);
    }

    /// As [`Conns::resume`].
    pub fn resume(&mut self, id: ConnId) {
        self.conns.resume(id);
    }

    /// As [`Conns::shutdown`].
    pub fn shutdown(&mut self, id: ConnId) {
        self.conns.shutdown(id);
    }

    /// As [`Conns::close`].
    pub fn close(&mut self, id: ConnId) {
        self.conns.close(id);
    }

    /// As [`Conns::set_busy`].
    pub fn set_busy(&mut self, id: ConnId) {
        self.conns.set_busy(id);
    }

    /// As [`Conns::set_idle`].
    pub fn set_idle(&mut self, id: ConnId) {
        self.conns.set_idle(id);
    }

    /// As [`Conns::set_read_timeout`]: the read timeout of connection `id`, this one
    /// or another (a proxy's client, its request sent whole, sets its upstream's).
    pub fn set_read_timeout_of(&mut self, id: ConnId, timeout: Option<Duration>) {
        self.conns.set_read_timeout(id, timeout);
    }
}

/// Writes copy, so that `write!` formats straight into the output.
impl std::io::Write for Io<'_> {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        self.output.write(buf);
        Ok(buf.len())
    }

    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use std::io::Write as _;

    use super::*;
    use crate::reactor::{Harness, Protocol, Verdict};

    /// Runs its closure on the `Io` of each `on_data` call, consuming the input.
    struct Probe<F>(F);

    impl<F: FnMut(&mut Io<'_>)> Protocol for Probe<F> {
        type Conn = ();

        fn on_data(&mut self, _conn: &mut (), input: &[u8], io: &mut Io<'_>) -> Verdict {
            (self.0)(io);
            Verdict::keep(input.len())
        }
    }

    #[test]
    fn writes_and_formatted_writes_are_counted_and_kept_in_order() {
        let mut harness = Harness::new(Probe(|io: &mut Io<'_>| {
            io.write(b"abc");
            write!(io, "-{}", 42).expect("formatting into the output");
            assert_eq!(io.written(), 6);
        }));
        harness.data(b"go");
        assert_eq!(harness.take_output(), b"abc-42");
    }

    #[test]
    fn the_output_is_full_at_the_budget_counting_what_is_still_queued() {
        let mut calls = 0;
        let mut harness = Harness::new(Probe(move |io: &mut Io<'_>| {
            calls += 1;
            if calls == 1 {
                io.write(&vec![b'x'; OUTPUT_BUDGET - 1]);
                assert!(!io.is_full(), "one byte under the budget");
                io.write(b"x");
                assert!(io.is_full(), "at the budget");
            } else {
                // The first call's output was not taken: it is still queued.
                assert_eq!(io.written(), 0);
                assert!(io.is_full(), "full with the earlier output alone");
            }
        }));
        harness.data(b"1");
        harness.data(b"2");
        assert_eq!(harness.take_output().len(), OUTPUT_BUDGET);
    }

    #[test]
    fn a_timer_is_seen_set_replaced_and_cancelled() {
        let mut harness = Harness::new(Probe(|io: &mut Io<'_>| {
            let now = io.now();
            io.set_timer(Duration::from_millis(5));
            assert_eq!(io.timer(), Some(now + Duration::from_millis(5)));
            io.set_timer_at(now + Duration::from_secs(1));
            assert_eq!(io.timer(), Some(now + Duration::from_secs(1)), "replaced");
            io.cancel_timer();
            assert_eq!(io.timer(), None);
        }));
        harness.data(b"go");
        assert_eq!(harness.timer(), None, "cancelled in the loop's timers too");
    }

    #[test]
    fn a_timer_too_far_to_add_is_set_for_a_century_ahead() {
        let mut harness = Harness::new(Probe(|io: &mut Io<'_>| io.set_timer(Duration::MAX)));
        harness.data(b"go");
        let at = harness.timer().expect("a timer");
        let years = at.duration_since(harness.now()).as_secs() / (365 * 24 * 3600);
        assert_eq!(years, 100);
    }
}
