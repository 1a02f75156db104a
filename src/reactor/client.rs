//! Connections the loop opens itself, and waking a connection's protocol when it
//! has something to do on its own schedule.

use std::io;
use std::net::SocketAddr;
use std::os::fd::{AsRawFd, OwnedFd};

use socket2::{Domain, Socket, Type};

use super::connection::Connection;
use super::drive::Callback;
use super::{ConnId, Protocol, Reactor};
use crate::sys;

impl<P: Protocol> Reactor<P> {
    /// Opens a connection to `addr` (non-blocking, `TCP_NODELAY`) and registers it;
    /// [`Protocol::on_open`] says what to send once it is established. A connection
    /// refused later reaches [`Protocol::on_close`] as a read or write failure.
    pub fn connect(&mut self, addr: SocketAddr) -> io::Result<ConnId> {
        let socket = Socket::new(Domain::for_address(addr), Type::STREAM.nonblocking().cloexec(), None)?;
        socket.set_nodelay(true)?;
        match socket.connect(&addr.into()) {
            Ok(()) => {}
            Err(e) if sys::is_in_progress(&e) => {}
            Err(e) => return Err(e),
        }
        let fd = OwnedFd::from(socket);
        let raw = fd.as_raw_fd();
        let mut conn = Connection::new(fd);
        // Output is queued, not sent, until the socket's first event: the edge that
        // says it is writable (connected) flushes it.
        conn.connecting = true;
        let token = self.connections.insert(conn);
        if let Err(e) = self.epoll.add(raw, sys::INTEREST_CONNECTION, token.0) {
            self.connections.remove(token);
            return Err(e);
        }
        self.call(token, Callback::Open);
        Ok(ConnId::of(token))
    }

    /// Calls [`Protocol::on_wake`] for connection `id` (accepted or connected), and
    /// sends what it writes. Returns false, calling nothing, when `id` is closed or
    /// closing.
    pub fn wake(&mut self, id: ConnId) -> bool {
        let token = id.token();
        let open = self.connections.get_mut(token).is_some_and(|conn| conn.is_open());
        if open {
            self.call(token, Callback::Wake);
        }
        open
    }
}
