//! The listening socket, configured for the loop.

use std::io;
use std::net::{SocketAddr, TcpListener};
use std::os::fd::AsFd;

use socket2::{Domain, Protocol, Socket, Type};

use crate::sys;

/// Who speaks first on a new connection.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Opening {
    /// The client (HTTP, echo, Redis): `TCP_DEFER_ACCEPT` lets the kernel queue a
    /// connection for `accept` only once its first bytes arrived, so the loop's
    /// first read finds the request, and a connection answered and closed at once
    /// is never added to epoll at all.
    ClientSpeaksFirst,
    /// The server (SMTP, FTP, POP3): the connection is accepted at once, so that
    /// the server can greet it. Also for a relay, which cannot know who speaks
    /// first in what it carries (a proxy that reads its clients' requests, whose
    /// clients speak first, is `ClientSpeaksFirst`).
    ServerSpeaksFirst,
}

/// How to listen.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ListenOptions {
    /// The accept queue's length; the kernel caps it at `net.core.somaxconn`.
    pub backlog: u32,
    /// Who speaks first.
    pub opening: Opening,
}

impl Default for ListenOptions {
    /// A backlog of 4096 (Linux's default `somaxconn` since 5.4), client first.
    fn default() -> ListenOptions {
        ListenOptions { backlog: 4096, opening: Opening::ClientSpeaksFirst }
    }
}

/// Seconds the kernel holds a silent connection back before queueing it anyway.
const DEFER_ACCEPT_SECS: libc::c_int = 5;

/// Binds a non-blocking TCP listener on `addr` with `SO_REUSEADDR` and
/// `SO_REUSEPORT` (so several processes can share the port) and `TCP_NODELAY`,
/// which Linux copies to every accepted connection: one `setsockopt` here instead of
/// one per connection.
pub fn bind(addr: SocketAddr, options: &ListenOptions) -> io::Result<TcpListener> {
    let socket =
        Socket::new(Domain::for_address(addr), Type::STREAM.nonblocking().cloexec(), Some(Protocol::TCP))?;
    socket.set_reuse_address(true)?;
    socket.set_reuse_port(true)?;
    socket.set_nodelay(true)?;
    if options.opening == Opening::ClientSpeaksFirst {
        sys::set_defer_accept(socket.as_fd(), DEFER_ACCEPT_SECS)?;
    }
    socket.bind(&addr.into())?;
    socket.listen(i32::try_from(options.backlog).unwrap_or(i32::MAX))?;
    Ok(socket.into())
}

/// Whether another socket holds `addr` (any socket, `SO_REUSEPORT` or not, of any
/// user): binding it without `SO_REUSEPORT` then fails with "address in use", where
/// a `SO_REUSEPORT` bind of the same user would silently share the port.
/// `SO_REUSEADDR` keeps a connection left in `TIME_WAIT` by an earlier run from
/// counting.
pub fn is_taken(addr: SocketAddr) -> io::Result<bool> {
    let probe = Socket::new(Domain::for_address(addr), Type::STREAM.cloexec(), Some(Protocol::TCP))?;
    probe.set_reuse_address(true)?;
    match probe.bind(&addr.into()) {
        Ok(()) => Ok(false),
        Err(e) if e.kind() == io::ErrorKind::AddrInUse => Ok(true),
        Err(e) => Err(e),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::fd::AsFd;

    fn loopback() -> SocketAddr {
        ([127, 0, 0, 1], 0).into()
    }

    #[test]
    fn a_listener_defers_accept_only_where_the_client_speaks_first() {
        for (opening, deferred) in [(Opening::ClientSpeaksFirst, true), (Opening::ServerSpeaksFirst, false)] {
            let listener =
                bind(loopback(), &ListenOptions { opening, ..ListenOptions::default() }).expect("bound");
            let seconds = sys::defer_accept(listener.as_fd()).expect("TCP_DEFER_ACCEPT");
            assert_eq!(seconds > 0, deferred, "{opening:?}: {seconds} s");
        }
    }

    #[test]
    fn an_address_is_taken_while_a_socket_holds_it_and_free_after() {
        let listener = bind(loopback(), &ListenOptions::default()).expect("bound");
        let addr = listener.local_addr().expect("its address");
        assert!(is_taken(addr).expect("probed"), "{addr} is held");
        drop(listener);
        assert!(!is_taken(addr).expect("probed"), "{addr} is free");
        // An address this machine does not have is not "taken": an error, said as such.
        let elsewhere = SocketAddr::from(([192, 0, 2, 1], addr.port()));
        let error = is_taken(elsewhere).expect_err("not a local address");
        assert_eq!(error.kind(), io::ErrorKind::AddrNotAvailable, "{error}");
    }
}
