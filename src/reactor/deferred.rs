//! Carrying out what callbacks asked of the rest of the loop (queued in `requests`):
//! open a connection, write to, wake, resume, shut down or close another, as soon as
//! the call that asked returns, in the same turn.

use std::net::SocketAddr;

use super::config::OUTPUT_BUDGET;
use super::connection::Phase;
use super::core::Next;
use super::requests::Request;
use super::slab::Token;
use super::{Closed, ConnId, Protocol, Reactor};

/// Unsent output at or below which a connection lets the connections whose reading
/// stopped for it read again: half the budget, so that the next read does not take
/// it over the budget at once.
pub(crate) const RESUME_BELOW: usize = OUTPUT_BUDGET / 2;

impl<P: Protocol> Reactor<P> {
    /// Carries out what callbacks asked, in order, and what the calls that makes ask
    /// in turn, until nothing is left. A call made while it runs leaves the rest to it.
    pub(crate) fn run_deferred(&mut self) {
        let Some(mut spare) = self.batch.take() else { return };
        while !self.core.io.deferred.is_empty() {
            let batch = self.core.io.deferred.take(spare);
            for request in &batch.requests {
                self.carry_out(request, &batch.bytes);
            }
            spare = batch;
            spare.clear();
        }
        self.batch = Some(spare);
    }

    fn carry_out(&mut self, request: &Request, bytes: &[u8]) {
        match *request {
            Request::Connect(token, addr) => self.open(token, addr),
            Request::Write { from, to, bytes: ref range } => self.write_on(from, to, &bytes[range.clone()]),
            Request::Wake(token) => {
                self.wake(ConnId::of(token));
            }
            Request::Resume(token) => {
                let Some(conn) = self.connections.get_mut(token) else { return };
                conn.awaiting_output = false;
                self.drive(token, false);
            }
            Request::Shutdown(token) => {
                let Some(conn) = self.connections.get_mut(token).filter(|conn| conn.is_open()) else {
                    return;
                };
                conn.shut_requested = true;
                self.drive(token, false);
            }
            Request::Close(token) => {
                let Some(conn) = self.connections.get_mut(token).filter(|conn| conn.is_open()) else {
                    return;
                };
                let linger = self.core.lingers(conn, false);
                conn.pending_input = Vec::new();
                conn.phase = Phase::Closing { linger };
                self.finish(token, Next::Settle);
            }
            Request::Idle(token, idle) => {
                let Some(conn) = self.connections.get_mut(token) else { return };
                conn.idle = idle;
                self.rearm(token);
            }
            Request::Splice(from, to) => self.start_splice(from, to),
            Request::Drain(token, policy) => {
                let Some(conn) = self.connections.get_mut(token) else { return };
                conn.drain = policy;
            }
        }
    }

    /// Opens the connection a callback asked for; if that fails at once, the
    /// protocol hears of it as of a connect that failed later.
    fn open(&mut self, token: Token, addr: SocketAddr) {
        if let Err(e) = self.place(token, addr) {
            self.core.io.deferred.ids.give_back(token);
            self.stats.errors += 1;
            let mut state = P::Conn::default();
            self.core.on_close(token, &mut state, Closed::ConnectFailed(e.kind()), &[]);
        }
    }

    /// Sends `bytes` on `to` for `from`; `from` stops reading if that leaves `to`
    /// over the budget.
    pub(crate) fn write_on(&mut self, from: Token, to: Token, bytes: &[u8]) {
        let Some(conn) = self.connections.get_mut(to).filter(|conn| conn.is_open()) else { return };
        if let Err(e) = conn.send_bytes(bytes) {
            return self.close(to, Closed::WriteFailed(e.kind()));
        }
        if conn.unsent() > OUTPUT_BUDGET {
            conn.blocking = true;
            if let Some(writer) = self.connections.get_mut(from).filter(|writer| !writer.blocked) {
                writer.blocked = true;
                self.blocked.push((to, from));
            }
        }
        self.rearm(to);
    }

    /// Lets the connections blocked on `token`'s output read again (next turn, with
    /// the others queued to be served again).
    pub(crate) fn unblock(&mut self, token: Token) {
        let mut i = 0;
        while i < self.blocked.len() {
            let (on, writer) = self.blocked[i];
            if on != token {
                i += 1;
                continue;
            }
            self.blocked.swap_remove(i);
            if let Some(conn) = self.connections.get_mut(writer) {
                conn.blocked = false;
                self.serve_soon(writer);
            }
        }
    }

    /// Serves connection `token` again at the start of the next turn, which then
    /// does not wait; once, however often it is asked.
    pub(crate) fn serve_soon(&mut self, token: Token) {
        let Some(conn) = self.connections.get_mut(token) else { return };
        if !std::mem::replace(&mut conn.queued, true) {
            self.again.push(token);
        }
    }
}
