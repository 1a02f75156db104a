//! The listening socket, configured for the loop.

use std::io;
use std::net::{SocketAddr, TcpListener};

use std::os::fd::AsRawFd;

use socket2::{Domain, Protocol, Socket, Type};

use crate::sys;

/// Binds a non-blocking TCP listener on `addr` with `SO_REUSEADDR` and
/// `SO_REUSEPORT` (so several processes can share the port) and `TCP_NODELAY`,
/// which Linux copies to every accepted connection: one `setsockopt` here instead of
/// one per connection.
///
/// With `client_speaks_first` (HTTP, echo: any protocol where the client sends
/// first), `TCP_DEFER_ACCEPT` lets the kernel queue a connection for `accept` only
/// once its first bytes arrived, so the loop's first read finds the request, and a
/// connection that is answered and closed at once is never added to epoll at all.
pub fn bind(addr: SocketAddr, backlog: i32, client_speaks_first: bool) -> io::Result<TcpListener> {
    let socket =
        Socket::new(Domain::for_address(addr), Type::STREAM.nonblocking().cloexec(), Some(Protocol::TCP))?;
    socket.set_reuse_address(true)?;
    socket.set_reuse_port(true)?;
    socket.set_nodelay(true)?;
    if client_speaks_first {
        // Seconds the kernel holds a silent connection back before queueing it anyway.
        sys::set_defer_accept(socket.as_raw_fd(), 5)?;
    }
    socket.bind(&addr.into())?;
    socket.listen(backlog)?;
    Ok(socket.into())
}
