//! The client side of the loop: connections it opens, and waking a connection's
//! protocol when it has something to send on its own schedule.

use std::io;
use std::net::SocketAddr;
use std::os::fd::{AsRawFd, OwnedFd};

use socket2::{Domain, Socket, Type};

use super::connection::{Connection, Phase};
use super::io::{answer, Next};
use super::slab::Token;
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
        let token = self.connections.insert(Connection::new(fd));
        if let Err(e) = self.epoll.add(raw, sys::INTEREST_CONNECTION, token.0) {
            self.connections.remove(token);
            return Err(e);
        }
        let id = ConnId(token.0);
        let conn = self.connections.get_mut(token).expect("inserted above");
        // Queued, not sent: the socket may still be connecting. The edge that says
        // it is writable (connected) flushes it.
        self.protocol.on_open(id, &mut conn.state, &mut conn.pending_output);
        self.finish(token, Next::Wait);
        Ok(id)
    }

    /// Hands connection `id` its unconsumed input again, with nothing new, so that
    /// its protocol can send what it was waiting to send (a request whose time has
    /// come). Does nothing for a closed or closing connection.
    pub fn wake(&mut self, id: ConnId) {
        let token = Token(id.0);
        let Some(conn) = self.connections.get_mut(token) else { return };
        if conn.phase != Phase::Open {
            return;
        }
        match answer(conn, &mut self.protocol, &[], false, &mut self.output) {
            // Flushes what an earlier answer left queued, and settles timers.
            Next::Wait => self.drive(token, false),
            next => self.finish(token, next),
        }
    }
}
