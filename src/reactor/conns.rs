//! [`Conns`]: the loop's connections as a callback reaches them by id, to open,
//! wake, resume, shut down, close or mark them; what it asks is done when it
//! returns. Every connection's callback has them through its [`Io`](super::Io);
//! [`on_tick`](super::Protocol::on_tick) and [`on_drain`](super::Protocol::on_drain),
//! which have no connection of their own, are given them alone.

use std::path::Path;
use std::time::Duration;

use super::orders::{Order, Orders};
use super::slab::Token;
use crate::listen::Address;

/// Names one connection of a loop, for [`Io::write_to`](super::Io::write_to), [`Conns::wake`] and the other
/// calls that reach another connection; a closed connection's id never names a
/// later one.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct ConnId(u64);

impl ConnId {
    pub(crate) fn of(token: Token) -> ConnId {
        ConnId(token.0)
    }

    pub(crate) fn token(self) -> Token {
        Token(self.0)
    }
}

/// The loop's connections, reached by id from a callback. Each call is an order,
/// carried out as soon as the callback returns, in the order given.
#[derive(Debug)]
pub struct Conns<'a> {
    pub(super) orders: &'a mut Orders,
}

impl Conns<'_> {
    /// Opens a connection to `addr`, an IP address (non-blocking, `TCP_NODELAY`) or
    /// a Unix socket's path ([`Address::Unix`], as [`connect_unix`](Conns::connect_unix)),
    /// and returns its id at once; its state is created with `Default`, as an accepted one's is. Bytes
    /// written to it meanwhile wait until it is established; then
    /// [`Protocol::on_open`](super::Protocol::on_open) is called for it. If it cannot
    /// be established (refused, unreachable, or not within the connect timeout),
    /// [`Protocol::on_close`](super::Protocol::on_close) is called for it with
    /// [`Closed::ConnectFailed`](super::Closed::ConnectFailed) instead, and its
    /// state. [`close`](Conns::close) and [`shutdown`](Conns::shutdown) wait for it to be
    /// established and its output sent.
    ///
    /// `on_open` is the same callback for accepted and opened connections: a
    /// protocol that needs to tell them apart (or to give an opened one its
    /// partner) remembers the ids it opened, as a relay does:
    ///
    /// ```
    /// use std::collections::HashMap;
    /// use percore::reactor::{ConnId, Flow, Io, Protocol, Verdict};
    ///
    /// struct Relay {
    ///     backend: std::net::SocketAddr,
    ///     /// Each connection opened and not yet established, with its client.
    ///     opening: HashMap<ConnId, ConnId>,
    /// }
    ///
    /// impl Protocol for Relay {
    ///     type Conn = Option<ConnId>; // the other end
    ///
    ///     fn on_open(&mut self, peer: &mut Option<ConnId>, io: &mut Io<'_>) -> Flow {
    ///         *peer = Some(match self.opening.remove(&io.id()) {
    ///             Some(client) => client, // a backend, established
    ///             None => {
    ///                 // a client, accepted: its backend is opened
    ///                 let backend = io.connect(self.backend);
    ///                 self.opening.insert(backend, io.id());
    ///                 backend
    ///             }
    ///         });
    ///         Flow::Continue
    ///     }
    ///
    ///     fn on_data(&mut self, peer: &mut Option<ConnId>, input: &[u8], io: &mut Io<'_>) -> Verdict {
    ///         if let Some(peer) = *peer {
    ///             io.write_to(peer, input);
    ///         }
    ///         Verdict::keep(input.len())
    ///     }
    /// }
    /// ```
    pub fn connect(&mut self, addr: impl Into<Address>) -> ConnId {
        self.open(addr.into())
    }

    /// Opens a connection to the Unix socket at `path`, as [`connect`](Conns::connect)
    /// does to an IP address (nginx's `proxy_pass http://unix:`), with the same
    /// failures, told the same way, and the same connect timeout. A non-blocking
    /// connect to a Unix socket is established at once or fails at once: a path
    /// nothing listens on, and a listener whose queue is full
    /// ([`WouldBlock`](std::io::ErrorKind::WouldBlock): the loop does not wait for
    /// room, as nginx answers 502 then), reach `on_close` as
    /// [`Closed::ConnectFailed`](super::Closed::ConnectFailed).
    pub fn connect_unix(&mut self, path: &Path) -> ConnId {
        self.open(Address::Unix(path.to_path_buf()))
    }

    /// Opens a connection to `addr` that speaks TLS with `tls`, to the server named
    /// `server` (the name its certificate must have, sent by SNI; an IP address is
    /// checked against the certificate, not sent), as [`connect`](Conns::connect)
    /// does: established (and `on_open` called) once its handshake is done too,
    /// within the connect timeout, what was written to it meanwhile sent then; a
    /// handshake that fails (a certificate not trusted or not the name's, an alert;
    /// the connection never opened: its state is as created) reaches `on_close` as
    /// [`Closed::ConnectFailed`](super::Closed::ConnectFailed)`(InvalidData)`, and
    /// a `server` that is neither a DNS name nor an IP address as
    /// `ConnectFailed(InvalidInput)`. The [`Harness`](super::Harness) plays no TLS
    /// server: it lists such a connection as [connecting](super::Harness::connecting),
    /// and a test fails it ([`fail_connect`](super::Harness::fail_connect)) or leaves it.
    #[cfg(feature = "tls")]
    pub fn connect_tls(
        &mut self,
        addr: impl Into<Address>,
        tls: &crate::tls::ClientTls,
        server: &str,
    ) -> ConnId {
        let token = self.orders.ids.take();
        self.orders.connect_tls(token, addr.into(), tls.session(server));
        ConnId::of(token)
    }

    fn open(&mut self, addr: Address) -> ConnId {
        let token = self.orders.ids.take();
        self.orders.push(Order::Connect(token, addr));
        ConnId::of(token)
    }

    /// Calls [`Protocol::on_wake`](super::Protocol::on_wake) for connection `id`, if
    /// it is open (even if not yet established). This and the calls below do nothing
    /// for a connection that is closed.
    pub fn wake(&mut self, id: ConnId) {
        self.orders.push(Order::Wake(id.token()));
    }

    /// Ends the pause of connection `id` ([`Verdict::pause`](super::Verdict::pause)):
    /// once its output is sent, its `on_data` is called again with the input it
    /// holds, and it is read again. A connection not paused that holds input
    /// unconsumed is handed it again the same way; see
    /// [Pause and resume](super::Flow#pause-and-resume).
    pub fn resume(&mut self, id: ConnId) {
        self.orders.push(Order::Resume(id.token()));
    }

    /// Shuts down the writing side of connection `id` (`shutdown(SHUT_WR)`) once its
    /// output is sent: its peer reads the end of the stream, and may go on sending.
    /// Output written to it afterwards is dropped. A connection shut down whose input
    /// has ended too ([`Protocol::on_input_end`](super::Protocol::on_input_end)) is
    /// closed, as [`Closed::Done`](super::Closed::Done).
    pub fn shutdown(&mut self, id: ConnId) {
        self.orders.push(Order::Shutdown(id.token()));
    }

    /// Closes connection `id` once its output is sent, as if its own callback had
    /// returned [`Flow::Close`](super::Flow::Close).
    ///
    /// Orders are carried out in the order given, and a connection written to is
    /// served at once: one paused for its output that an earlier
    /// [`write_to`](super::Io::write_to) of the same callback wrote to has its pause
    /// end, and its `on_data` is handed the input it holds, before this close is
    /// carried out. A protocol that must not read on (a server after a request that
    /// closes the connection, RFC 9112, 9.6) keeps that in its own state: the proxy
    /// example notes the clients it closes.
    pub fn close(&mut self, id: ConnId) {
        self.orders.push(Order::Close(id.token()));
    }

    /// Marks connection `id` (this one or another) busy: in the middle of an
    /// exchange that another connection carries on, as a proxy's client whose
    /// request waits at a backend, and the backend's connection that owes the
    /// answer. A graceful stop leaves a busy connection open, past its grace, until
    /// it is [set idle](Conns::set_idle) (or closes, or the stop's timeout comes);
    /// then it closes as soon as nothing is pending, its answer sent. A mark is on
    /// or off: it does not count, and one `set_idle` ends it. A busy connection
    /// with nothing pending (and no body arriving, [`Protocol::is_busy`](super::Protocol::is_busy)) is under
    /// no idle timeout: the exchange's
    /// timeouts are the other connection's (a proxy's read timeout on its upstream,
    /// [`set_read_timeout`](Conns::set_read_timeout)); the send timeout still
    /// applies to what it has unsent. Like
    /// [`write_to`](super::Io::write_to), it is done when the callback returns.
    pub fn set_busy(&mut self, id: ConnId) {
        self.orders.push(Order::Busy(id.token(), true));
    }

    /// Ends the mark of [`set_busy`](Conns::set_busy) on connection `id`: it is idle
    /// again once nothing is pending.
    pub fn set_idle(&mut self, id: ConnId) {
        self.orders.push(Order::Busy(id.token(), false));
    }

    /// Sets connection `id`'s read timeout, or with `None` clears it (the default):
    /// while it is set, the connection is closed ([`Closed::TimedOut`]) when
    /// `timeout` passes with no byte arriving, whatever the protocol holds or is
    /// busy with; it takes the place of the message and idle timeouts, and the
    /// connect and send timeouts still come first. nginx's `proxy_read_timeout`: a
    /// proxy sets it on the upstream connection when the request is sent, and
    /// clears it when the response has ended. Milliseconds count; like
    /// [`write_to`](super::Io::write_to), it is done when the callback returns.
    /// Setting it again while it runs does not restart the count, which starts at
    /// the latest byte read (or when it was set); a new `timeout` counts from the
    /// next byte. Clearing it and setting it in the same callback is setting it
    /// again; to restart it, clear it, then set it in a later callback.
    ///
    /// [`Closed::TimedOut`]: super::Closed::TimedOut
    pub fn set_read_timeout(&mut self, id: ConnId, timeout: Option<Duration>) {
        self.orders.push(Order::ReadTimeout(id.token(), timeout));
    }
}
