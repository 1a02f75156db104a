//! [`Wire`]: what carries a connection's bytes, as the driver uses it to carry out
//! the machine's steps; and [`Socket`], the loop's, over the `sys` calls. The
//! [`Harness`](super::harness::Harness) has a wire of byte vectors.

use std::io;
use std::net::SocketAddr;
use std::os::fd::{AsFd, BorrowedFd, OwnedFd};

use socket2::{Domain, SockRef, Socket as RawSocket, Type};

use super::io::Addresses;
use super::output::{self, Output, SendQueue};
use super::protocol::Closed;
use super::slab::Token;
use crate::listen::Address;
use crate::sys::{self, Epoll};

/// What a read gave: `len` bytes (0: the end of the peer's stream), and whether it
/// filled what it was given (more may wait: a short read drained the wire).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Received {
    pub(crate) len: usize,
    pub(crate) filled: bool,
}

/// Where a wire being established is.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Establishing {
    Done,
    /// Not yet: its next edge tells more.
    InProgress,
    Failed(io::ErrorKind),
}

/// A connection's bytes in and out. Reads and sends take what they can and never
/// wait: `WouldBlock` (or a send of fewer bytes than offered) means "not now", and
/// the wire's next edge says when to try again.
pub(crate) trait Wire: Sized + Addresses {
    /// Where a driver registers its wires to hear of their edges.
    type Registry: std::fmt::Debug;

    /// Starts opening a wire to `addr`, whose edges come with `token`; each edge
    /// then asks whether it is established ([`Wire::establish`]).
    fn connect(registry: &mut Self::Registry, token: Token, addr: &Address) -> io::Result<Self>;

    /// Registers a wire that is already established (accepted), under `token`.
    fn register(&self, registry: &mut Self::Registry, token: Token) -> io::Result<()>;

    /// At an edge of a wire being established (a connect, a TLS handshake): goes
    /// on with it (reading into `buffer` what it needs), and says where it is.
    fn establish(&mut self, buffer: &mut [u8]) -> Establishing;

    /// Reads into `buffer`.
    fn recv(&mut self, buffer: &mut [u8]) -> io::Result<Received>;

    /// Sends what it takes of `output`; returns the bytes it took.
    fn send(&mut self, output: &Output) -> io::Result<usize>;

    /// Sends what it takes of `bytes`; returns the bytes it took.
    fn send_bytes(&mut self, bytes: &[u8]) -> io::Result<usize>;

    /// Sends what it takes of `queue`, dropping it from the queue; returns the bytes
    /// it took.
    fn flush(&mut self, queue: &mut SendQueue) -> io::Result<usize>;

    /// Shuts the writing side down: the peer reads the end of the stream.
    fn shutdown_write(&mut self) -> io::Result<()>;

    /// Shuts the writing side down for a close that lingers: the peer reads the end
    /// of the stream, and is expected to close.
    fn linger(&mut self) -> io::Result<()> {
        self.shutdown_write()
    }

    /// The descriptor splice(2) moves this wire's bytes through, if it has one;
    /// `None` leaves a connection's input to the protocol.
    fn splice_fd(&self) -> Option<BorrowedFd<'_>> {
        None
    }

    /// The connection under `token` closed, as `closed` says; this is its wire's end.
    fn retire(self, _registry: &mut Self::Registry, _token: Token, _closed: Closed) {}
}

/// A wire that can be made to speak TLS (a `Secured` one).
#[cfg(feature = "tls")]
pub(crate) trait WithTls {
    /// Speaks TLS from now on, as `session` says (its handshake to come).
    fn speak_tls(&mut self, session: crate::tls::Session);
}

/// A wire a driver runs: with the `tls` feature, one that can be made to speak TLS
/// (the loop's and the harness's, each a `Secured` one).
#[cfg(feature = "tls")]
pub(crate) trait DriverWire: Wire + WithTls {}
#[cfg(feature = "tls")]
impl<W: Wire + WithTls> DriverWire for W {}
/// A wire a driver runs.
#[cfg(not(feature = "tls"))]
pub(crate) trait DriverWire: Wire {}
#[cfg(not(feature = "tls"))]
impl<W: Wire> DriverWire for W {}

/// The loop's wire: a non-blocking socket, registered edge-triggered with the
/// loop's epoll instance for input, output and the peer's shutdown.
#[derive(Debug)]
pub(crate) struct Socket(OwnedFd);

impl Socket {
    /// An accepted connection's socket.
    pub(crate) fn accepted(fd: OwnedFd) -> Socket {
        Socket(fd)
    }
}

impl Addresses for Socket {
    fn local_addr(&self) -> io::Result<SocketAddr> {
        inet(SockRef::from(&self.0).local_addr()?)
    }

    fn peer_addr(&self) -> io::Result<SocketAddr> {
        inet(SockRef::from(&self.0).peer_addr()?)
    }
}

/// An IP socket's address; a Unix socket's is `Unsupported`.
fn inet(addr: socket2::SockAddr) -> io::Result<SocketAddr> {
    addr.as_socket().ok_or_else(|| io::Error::new(io::ErrorKind::Unsupported, "not an IP address"))
}

/// A non-blocking, close-on-exec stream socket for `addr`, connecting (TCP with
/// `TCP_NODELAY`). A Unix socket's connect never is in progress: it succeeds or
/// fails at once, `EAGAIN` (its listener's queue is full) among the failures.
fn connecting(addr: &Address) -> io::Result<RawSocket> {
    let (domain, to) = match addr {
        Address::Ip(addr) => (Domain::for_address(*addr), socket2::SockAddr::from(*addr)),
        Address::Unix(path) => (Domain::UNIX, socket2::SockAddr::unix(path)?),
    };
    let socket = RawSocket::new(domain, Type::STREAM.nonblocking().cloexec(), None)?;
    if matches!(addr, Address::Ip(_)) {
        socket.set_nodelay(true)?;
    }
    match socket.connect(&to) {
        Ok(()) => Ok(socket),
        Err(e) if sys::is_in_progress(&e) => Ok(socket),
        Err(e) => Err(e),
    }
}

impl Wire for Socket {
    type Registry = Epoll;

    fn connect(epoll: &mut Epoll, token: Token, addr: &Address) -> io::Result<Socket> {
        let socket = Socket(OwnedFd::from(connecting(addr)?));
        socket.register(epoll, token)?;
        Ok(socket)
    }

    fn register(&self, epoll: &mut Epoll, token: Token) -> io::Result<()> {
        epoll.add(self.0.as_fd(), sys::INTEREST_CONNECTION, token.0)
    }

    /// A connect is established at its first edge, unless it failed: the socket's
    /// pending error, SO_ERROR, says.
    fn establish(&mut self, _: &mut [u8]) -> Establishing {
        match SockRef::from(&self.0).take_error() {
            Ok(None) => Establishing::Done,
            Ok(Some(e)) | Err(e) => Establishing::Failed(e.kind()),
        }
    }

    fn recv(&mut self, buffer: &mut [u8]) -> io::Result<Received> {
        let len = sys::recv(self.0.as_fd(), buffer)?;
        Ok(Received { len, filled: len == buffer.len() })
    }

    fn send(&mut self, output: &Output) -> io::Result<usize> {
        output.send(self.0.as_fd())
    }

    fn send_bytes(&mut self, bytes: &[u8]) -> io::Result<usize> {
        output::send_bytes(self.0.as_fd(), bytes)
    }

    fn flush(&mut self, queue: &mut SendQueue) -> io::Result<usize> {
        queue.flush(self.0.as_fd())
    }

    fn shutdown_write(&mut self) -> io::Result<()> {
        sys::shutdown_write(self.0.as_fd())
    }

    fn splice_fd(&self) -> Option<BorrowedFd<'_>> {
        Some(self.0.as_fd())
    }
}
