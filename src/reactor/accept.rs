//! Accepting: drained to `EAGAIN`, bounded by `max_connections`, and safe when the
//! process runs out of descriptors.

use std::os::fd::{AsFd, OwnedFd};

use super::connection::Connection;
use super::core::{Callback, Next};
use super::{open_reserve, Accept, Closed, Protocol, Reactor};
use crate::sys::{self, AcceptError};

/// Connections accepted per wake-up before the loop serves the ones it has: a
/// flood of new connections must not starve established ones (or signals).
const ACCEPTS_PER_WAKE: usize = 256;

impl<P: Protocol> Reactor<P> {
    /// Accepts until the queue is empty, or until a limit, a budget or an error
    /// says when to look again (see [`Accept`]). Returns whether the queue is empty
    /// (or there is no listener).
    pub(super) fn accept_all(&mut self) -> bool {
        for _ in 0..ACCEPTS_PER_WAKE {
            let Some(listener) = self.listener.as_ref() else { return true };
            if self.connections.len() >= self.core.config.max_connections {
                self.accept = Accept::AtLimit;
                return false;
            }
            match sys::accept(listener.as_fd()) {
                Ok(fd) => {
                    self.stats.accepted += 1;
                    self.register(fd);
                }
                Err(e) => match AcceptError::of(&e) {
                    AcceptError::Drained => return true,
                    // That connection failed before we took it; the next one is there.
                    AcceptError::Aborted => {}
                    AcceptError::OutOfDescriptors if self.refuse_one() => {}
                    AcceptError::OutOfDescriptors | AcceptError::Other => {
                        self.accept = Accept::NextTick;
                        return false;
                    }
                },
            }
        }
        self.accept = Accept::Now;
        false
    }

    /// Opens a new connection to the protocol ([`Protocol::on_open`], which may
    /// speak first), serves its first request at once (a listener with
    /// `TCP_DEFER_ACCEPT` hands over connections with their request already in), then
    /// registers it, unless it is already closed: a new connection per request then
    /// costs accept, recv, send and close, and no `epoll_ctl`. Registering after the
    /// read loses no edge: `EPOLL_CTL_ADD` reports the readiness the socket has then.
    fn register(&mut self, fd: OwnedFd) {
        let token = self.core.io.deferred.ids.take();
        self.connections.put(token, Connection::new(fd));
        let conn = self.connections.get_mut(token).expect("inserted above");
        match self.core.callback(conn, token, Callback::Open) {
            Next::Wait => self.drive(token, true),
            next => self.finish(token, next),
        }
        let Some(conn) = self.connections.get_mut(token) else { return };
        if let Err(e) = self.epoll.add(conn.fd.as_fd(), sys::INTEREST_CONNECTION, token.0) {
            self.close(token, Closed::ReadFailed(e.kind()));
        }
    }

    /// Out of descriptors: frees the reserve, accepts and closes the connection at the
    /// head of the queue, takes the reserve back. Returns whether that made progress.
    fn refuse_one(&mut self) -> bool {
        if self.reserve_fd.take().is_none() {
            return false;
        }
        let refused = self.listener.as_ref().is_some_and(|listener| sys::accept(listener.as_fd()).is_ok());
        self.reserve_fd = open_reserve();
        refused
    }
}
