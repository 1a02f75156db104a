//! Accepting: the listener, taken to `EAGAIN` within a budget, bounded by the
//! connection limit, and safe when the process runs out of descriptors; and when to
//! look at its queue again without a new edge.

use std::fs::File;
use std::net::SocketAddr;
use std::os::fd::{AsFd, OwnedFd};

use crate::listen::Listener;
use crate::sys::{self, AcceptError, Epoll};

/// When the loop looks at the listener's queue again.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Retry {
    /// On its next edge: the queue was emptied.
    OnEdge,
    /// At the end of this turn: the accept budget ran out.
    Now,
    /// Once a connection closes: at `max_connections`.
    AtLimit,
    /// At the next tick: accept failed for want of memory or descriptors.
    NextTick,
}

/// What one accept gave.
#[derive(Debug)]
pub(crate) enum Accepted {
    /// A connection, and its peer's address as the accept said it (`None` for a
    /// Unix socket's: it has no IP address).
    Connection(OwnedFd, Option<SocketAddr>),
    /// None taken, but the queue goes on: the head connection failed before it was
    /// taken, or was refused for want of descriptors.
    Nothing,
    /// The queue is empty (or there is no listener).
    Empty,
    /// Stopped for now (the limit, an error); the loop looks again as it was told.
    Later,
}

/// The listener, if the loop has one, and what accepting needs besides.
#[derive(Debug)]
pub(crate) struct Acceptor {
    listener: Option<Listener>,
    /// A descriptor held back to be closed when accept fails with `EMFILE`, so the
    /// connection at the head of the queue can be accepted and closed instead of
    /// staying queued with no new edge to wake us.
    reserve: Option<File>,
    retry: Retry,
}

impl Acceptor {
    /// Accepts on `listener`, if any.
    pub(crate) fn new(listener: Option<Listener>) -> Acceptor {
        let reserve = listener.as_ref().and_then(|_| open_reserve());
        Acceptor { listener, reserve, retry: Retry::OnEdge }
    }

    pub(crate) fn has_listener(&self) -> bool {
        self.listener.is_some()
    }

    /// Accepts one connection, if there is `room` for it.
    pub(crate) fn accept(&mut self, room: bool) -> Accepted {
        let Some(listener) = self.listener.as_ref() else { return Accepted::Empty };
        if !room {
            self.retry = Retry::AtLimit;
            return Accepted::Later;
        }
        match sys::accept(listener.as_fd()) {
            Ok((fd, peer)) => Accepted::Connection(fd, peer),
            Err(e) => match AcceptError::of(&e) {
                AcceptError::Empty => Accepted::Empty,
                // That connection failed before we took it; the next one is there.
                AcceptError::Aborted => Accepted::Nothing,
                AcceptError::OutOfDescriptors if self.refuse_one() => Accepted::Nothing,
                AcceptError::OutOfDescriptors | AcceptError::Other => {
                    self.retry = Retry::NextTick;
                    Accepted::Later
                }
            },
        }
    }

    /// The accept budget ran out with connections maybe left in the queue.
    pub(crate) fn budget_spent(&mut self) {
        self.retry = Retry::Now;
    }

    /// Whether the queue is looked at again at the end of this turn, so the next
    /// wait does not wait.
    pub(crate) fn looks_again_now(&self) -> bool {
        self.retry == Retry::Now
    }

    /// Whether to look at the queue again now, with no new edge: the listener is
    /// edge-triggered, so connections left in its queue (at the limit, after the
    /// budget, after an error) raise none. `room`: below the connection limit;
    /// `tick`: the second turned.
    pub(crate) fn looks_again(&mut self, room: bool, tick: bool) -> bool {
        let again = match self.retry {
            Retry::OnEdge => false,
            Retry::Now => true,
            Retry::AtLimit => room,
            Retry::NextTick => tick,
        };
        if again {
            self.retry = Retry::OnEdge;
        }
        again
    }

    /// Lets the listener go: it is closed, unless another process holds it too.
    pub(crate) fn drop_listener(&mut self, epoll: &Epoll) {
        if let Some(listener) = self.listener.take() {
            let _ = epoll.delete(listener.as_fd());
        }
    }

    /// Out of descriptors: frees the reserve, accepts and closes the connection at the
    /// head of the queue, takes the reserve back. Returns whether that made progress.
    fn refuse_one(&mut self) -> bool {
        if self.reserve.take().is_none() {
            return false;
        }
        let refused = self.listener.as_ref().is_some_and(|listener| sys::accept(listener.as_fd()).is_ok());
        self.reserve = open_reserve();
        refused
    }
}

fn open_reserve() -> Option<File> {
    File::open("/dev/null").ok()
}
