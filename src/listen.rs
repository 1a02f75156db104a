//! The listening socket, configured for the loop.

use std::io;
use std::net::{SocketAddr, TcpListener};

use socket2::{Domain, Protocol, Socket, Type};

/// Binds a non-blocking TCP listener on `addr` with `SO_REUSEADDR` and
/// `SO_REUSEPORT` (so several processes can share the port) and `TCP_NODELAY`,
/// which Linux copies to every accepted connection: one `setsockopt` here instead of
/// one per connection.
pub fn bind(addr: SocketAddr, backlog: i32) -> io::Result<TcpListener> {
    let socket =
        Socket::new(Domain::for_address(addr), Type::STREAM.nonblocking().cloexec(), Some(Protocol::TCP))?;
    socket.set_reuse_address(true)?;
    socket.set_reuse_port(true)?;
    socket.set_nodelay(true)?;
    socket.bind(&addr.into())?;
    socket.listen(backlog)?;
    Ok(socket.into())
}
