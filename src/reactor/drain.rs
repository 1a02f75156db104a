//! A graceful stop: what happens to the listener, to idle connections and to the
//! others, and when it is over.

use std::os::fd::AsFd;
use std::time::{Duration, Instant};

use super::config::DrainPolicy;
use super::connection::Connection;
use super::slab::Token;
use super::{Closed, Protocol, Reactor};

/// How a graceful stop goes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct DrainOptions {
    /// What becomes of the listener.
    pub listener: ListenerFate,
    /// How long idle keep-alive connections are kept: a client about to send on
    /// one gets its answer (with `Connection: close`) instead of a close under its
    /// feet; after it they are closed, and a connection that turns idle is closed
    /// at once.
    pub grace: Duration,
    /// When whatever is still open is closed.
    pub timeout: Duration,
}

/// What a graceful stop does with the loop's listener.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ListenerFate {
    /// Accepts the connections already queued (they are served like the others),
    /// then closes it: once every process has closed it, new connections are
    /// refused at once, so a client or a load balancer retries elsewhere instead of
    /// waiting for a queue nobody reads. For a stop.
    CloseAfterQueue,
    /// Stops accepting at once and lets it go: another loop accepts from the same
    /// socket, so nothing queued is lost. For a reload or an upgrade.
    HandOver,
}

/// A graceful stop under way.
#[derive(Debug)]
pub(crate) struct Drain {
    /// The second of the loop's clock at which every connection left is closed.
    deadline: u32,
    /// Until then idle connections are kept; `None` once it has passed.
    grace_until: Option<Instant>,
    /// The listener is closed once its queue is empty.
    close_listener: bool,
}

impl<P: Protocol> Reactor<P> {
    /// Starts a graceful stop: the listener goes as `options` say, the protocol is
    /// told ([`Protocol::on_drain`]), idle connections are closed after the grace
    /// and the others as soon as they are idle after it; after the timeout,
    /// whatever is left is closed. A connection the protocol closes meanwhile
    /// lingers: it reads and drops what the peer still sends (a client that
    /// pipelines did not know of the close) until the peer closes, for at most 5 s. [`run`](Reactor::run) returns
    /// [`Wake::Drained`](super::Wake::Drained) when no connection is left.
    pub fn drain(&mut self, options: DrainOptions) {
        if self.drain.is_some() {
            return;
        }
        let seconds = u32::try_from(options.timeout.as_secs()).unwrap_or(u32::MAX).max(1);
        let now = self.core.clock.instant();
        self.drain = Some(Drain {
            deadline: self.core.clock.now().saturating_add(seconds),
            grace_until: Some(now.checked_add(options.grace).unwrap_or(now)),
            close_listener: options.listener == ListenerFate::CloseAfterQueue,
        });
        self.core.draining = true;
        self.core.protocol.on_drain();
        match options.listener {
            ListenerFate::HandOver => self.drop_listener(),
            ListenerFate::CloseAfterQueue => self.accept_queued(),
        }
        self.end_grace_if_over();
    }

    /// Whether [`drain`](Reactor::drain) was called.
    pub fn is_draining(&self) -> bool {
        self.drain.is_some()
    }

    /// During a stop that closes the listener: accepts what is queued, and closes
    /// the listener once the queue is empty.
    pub(crate) fn accept_queued(&mut self) {
        if self.drain.as_ref().is_some_and(|drain| drain.close_listener) && self.accept_all() {
            self.drop_listener();
        }
    }

    pub(crate) fn drop_listener(&mut self) {
        if let Some(listener) = self.listener.take() {
            let _ = self.epoll.delete(listener.as_fd());
        }
    }

    /// When the grace is over: closes every idle connection.
    pub(crate) fn end_grace_if_over(&mut self) {
        let now = self.core.clock.instant();
        let Some(drain) = self.drain.as_mut() else { return };
        if drain.grace_until.is_some_and(|until| until <= now) {
            drain.grace_until = None;
            self.close_where(Self::may_close_idle, Closed::Done);
        }
    }

    /// When the grace ends, if it is under way.
    pub(crate) fn grace_until(&self) -> Option<Instant> {
        self.drain.as_ref().and_then(|drain| drain.grace_until)
    }

    /// Whether a connection that is idle now is closed at once.
    pub(crate) fn closes_idle(&self) -> bool {
        self.drain.as_ref().is_some_and(|drain| drain.grace_until.is_none())
    }

    /// Whether the stop's deadline has come, by the loop's clock.
    pub(crate) fn drain_expired(&self) -> bool {
        self.drain.as_ref().is_some_and(|drain| drain.deadline <= self.core.clock.now())
    }

    pub(crate) fn close_if_idle(&mut self, token: Token) {
        if self.connections.get_mut(token).is_some_and(|conn| Self::may_close_idle(conn)) {
            self.close(token, Closed::Done);
        } else {
            self.rearm(token);
        }
    }

    /// Whether a graceful stop may close `conn` now, as an idle one: no message partly
    /// received (nor one the protocol is busy with), nothing to send, and not a
    /// connection the stop leaves alone.
    pub(crate) fn may_close_idle(conn: &Connection<P::Conn>) -> bool {
        conn.has_nothing_pending() && !P::is_busy(&conn.state) && conn.drain == DrainPolicy::CloseWhenIdle
    }
}
