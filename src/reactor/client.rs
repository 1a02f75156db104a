//! Connections the loop opens itself, established or failed; and waking a
//! connection's protocol when it has something to do on its own schedule.

use std::io;
use std::net::SocketAddr;
use std::os::fd::{AsFd, OwnedFd};

use socket2::{Domain, SockRef, Socket, Type};

use super::connection::Connection;
use super::core::Callback;
use super::slab::Token;
use super::{Closed, ConnId, Protocol, Reactor};
use crate::sys;

impl<P: Protocol> Reactor<P> {
    /// Opens a connection to `addr` (non-blocking, `TCP_NODELAY`) and registers it;
    /// [`Protocol::on_open`] is called once it is established, and what was written
    /// to it before is sent then. A connection that fails later (refused, or not
    /// established within the connect timeout) reaches [`Protocol::on_close`] as
    /// [`Closed::ConnectFailed`]; one that fails at once is this error.
    pub fn connect(&mut self, addr: SocketAddr) -> io::Result<ConnId> {
        let token = self.core.io.deferred.ids.take();
        self.place(token, addr).inspect_err(|_| self.core.io.deferred.ids.give_back(token))?;
        Ok(ConnId::of(token))
    }

    /// Opens a connection to `addr` under `token`, taken and holding nothing.
    pub(crate) fn place(&mut self, token: Token, addr: SocketAddr) -> io::Result<()> {
        let socket = Socket::new(Domain::for_address(addr), Type::STREAM.nonblocking().cloexec(), None)?;
        socket.set_nodelay(true)?;
        match socket.connect(&addr.into()) {
            Ok(()) => {}
            Err(e) if sys::is_in_progress(&e) => {}
            Err(e) => return Err(e),
        }
        let fd = OwnedFd::from(socket);
        self.epoll.add(fd.as_fd(), sys::INTEREST_CONNECTION, token.0)?;
        let mut conn = Connection::new(fd);
        // Output is queued, not sent, until the socket's first event says whether
        // it is connected.
        conn.connecting = true;
        self.connections.put(token, conn);
        self.rearm(token);
        Ok(())
    }

    /// The first event of a connection being opened: connected (the protocol opens
    /// it, and what waited is sent), or failed.
    pub(crate) fn established(&mut self, token: Token, readable: bool) {
        let Some(conn) = self.connections.get_mut(token) else { return };
        conn.connecting = false;
        if let Some(kind) = connect_error(&conn.fd) {
            return self.close(token, Closed::ConnectFailed(kind));
        }
        self.call(token, Callback::Open);
        if readable {
            self.drive(token, true);
        }
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

/// Why a connect failed, if it did (the socket's pending error, `SO_ERROR`).
fn connect_error(fd: &OwnedFd) -> Option<io::ErrorKind> {
    match SockRef::from(fd).take_error() {
        Ok(None) => None,
        Ok(Some(e)) | Err(e) => Some(e.kind()),
    }
}
