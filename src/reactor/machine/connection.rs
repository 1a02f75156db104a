//! One connection's state, as the machine keeps it: where it is in its life, what
//! becomes of its input and of its output, what its wire is ready for, and the
//! bytes it owns between wake-ups. Each part is an enum whose variants are the
//! states it can be in; the machine (the parent module) alone moves them.

use crate::reactor::config::{DrainPolicy, IdleTimeout};
use crate::reactor::output::SendQueue;
use crate::reactor::protocol::Closed;

use super::deadline::Deadline;

/// Where a connection is in its life.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Life {
    /// Reading input and answering it.
    Open,
    /// The protocol said close (or, the peer having finished, let it close): send what
    /// is left, then close as `closed` says, lingering first if the peer may still be
    /// sending.
    Closing { linger: bool, closed: Closed },
    /// Everything is sent and the writing side shut down; input the peer still sends
    /// is read and dropped until it closes or the deadline passes, so that unread
    /// bytes do not make the kernel reset the connection before the peer read our
    /// answer.
    Lingering,
    /// Over: closes at once, for this reason.
    Over(Closed),
}

/// What becomes of the connection's input.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Reading {
    /// Read and handed to the protocol.
    Open,
    /// The protocol paused: nothing is read; its held input is handed in again once
    /// its output is sent. `awaiting_output`: it wrote nothing, so it goes on only
    /// once a later callback writes (and that is sent) or it is resumed.
    Paused { awaiting_output: bool },
    /// Moved on to another connection through a pipe, not handed to the protocol.
    Spliced,
    /// The peer's end of stream was read: nothing more comes.
    Ended,
}

/// What becomes of the connection's output.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Writing {
    /// Being established: output is queued, and sent once it is (then the writing
    /// side is shut down if `then_shut`). Opened by the protocol (a connect), or
    /// `accepted` with its TLS handshake under way: then the protocol knows nothing
    /// of it until it is established, and hears nothing if it fails.
    Connecting { then_shut: bool, accepted: bool },
    /// Sent as it is written.
    Open,
    /// The writing side is shut down once the output is sent.
    ShutRequested,
    /// Shut down: output is dropped.
    Shut,
}

/// What the connection's wire is ready for, as its edges said: edge-triggered,
/// so each stays set until an attempt finds it false.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub(crate) struct Ready {
    /// Input may be waiting: read until the wire has none.
    pub(super) readable: bool,
    /// The wire takes output: send until it takes less than offered.
    pub(super) writable: bool,
    /// The peer shut down its side: read until the end of its stream, since a short
    /// read is then no proof of having read everything.
    pub(super) read_closed: bool,
}

/// Received bytes a connection holds unconsumed: no memory while it holds none, and
/// one word in its slot (a `Vec` would take three: every idle connection would
/// pay two words more).
#[derive(Debug, Default)]
#[allow(clippy::box_collection, reason = "one word in the slot, where a Vec takes three")]
pub(crate) struct Held(Option<Box<Vec<u8>>>);

impl Held {
    /// Appends `bytes`.
    pub(super) fn extend_from_slice(&mut self, bytes: &[u8]) {
        if !bytes.is_empty() {
            self.0.get_or_insert_with(Box::default).extend_from_slice(bytes);
        }
    }

    /// Drops the first `n` bytes; the memory goes with the last.
    pub(super) fn consume(&mut self, n: usize) {
        match &mut self.0 {
            Some(bytes) if n < bytes.len() => {
                bytes.drain(..n);
            }
            _ => self.0 = None,
        }
    }

    /// Takes every byte held, leaving none.
    pub(super) fn take(&mut self) -> Vec<u8> {
        self.0.take().map(|bytes| *bytes).unwrap_or_default()
    }
}

impl std::ops::Deref for Held {
    type Target = [u8];

    fn deref(&self) -> &[u8] {
        self.0.as_deref().map_or(&[], Vec::as_slice)
    }
}

impl From<Vec<u8>> for Held {
    fn from(bytes: Vec<u8>) -> Held {
        Held(Some(Box::new(bytes)).filter(|bytes| !bytes.is_empty()))
    }
}

/// One connection: the protocol's state for it and the machine's.
#[derive(Debug)]
pub(crate) struct Connection<S> {
    /// The protocol's own state for this connection.
    pub(super) state: S,
    /// Received bytes the protocol has not consumed yet (an incomplete message).
    pub(super) held: Held,
    /// Output the wire has not taken yet; `None` (no memory) when all is sent.
    pub(super) queue: Option<Box<SendQueue>>,
    pub(super) life: Life,
    pub(super) reading: Reading,
    pub(super) writing: Writing,
    pub(super) ready: Ready,
    /// Reading stopped (whatever `reading` says) because output this connection wrote
    /// to another is over the budget there, or what it spliced waits there; the other
    /// lets it go on once its output drains.
    pub(super) blocked: bool,
    /// Connections are blocked on this one's output (see `blocked`).
    pub(super) blocking: bool,
    /// In the middle of an exchange another connection carries on, as the protocol
    /// said ([`Io::set_busy`](crate::reactor::Io::set_busy)): a graceful stop leaves it.
    pub(super) busy: bool,
    pub(super) idle: IdleTimeout,
    pub(super) drain: DrainPolicy,
    pub(super) deadline: Deadline,
}

impl<S: Default> Connection<S> {
    /// A connection established (accepted, or made by the test).
    pub(crate) fn open() -> Connection<S> {
        Connection::new(Writing::Open)
    }

    /// A connection being opened: nothing is sent until it is established.
    pub(crate) fn connecting() -> Connection<S> {
        Connection::new(Writing::Connecting { then_shut: false, accepted: false })
    }

    /// A connection accepted whose TLS handshake is under way: the protocol hears of
    /// it once that is done.
    #[cfg(feature = "tls")]
    pub(crate) fn handshaking() -> Connection<S> {
        Connection::new(Writing::Connecting { then_shut: false, accepted: true })
    }

    fn new(writing: Writing) -> Connection<S> {
        Connection {
            state: S::default(),
            held: Held::default(),
            queue: None,
            life: Life::Open,
            reading: Reading::Open,
            writing,
            // Its wire's first edge says what it is ready for.
            ready: Ready::default(),
            blocked: false,
            blocking: false,
            busy: false,
            idle: IdleTimeout::FromConfig,
            drain: DrainPolicy::CloseWhenIdle,
            deadline: Deadline::default(),
        }
    }
}

impl<S> Connection<S> {
    /// Bytes queued and not yet taken by the wire.
    pub(crate) fn unsent(&self) -> usize {
        self.queue.as_ref().map_or(0, |queue| queue.len())
    }

    /// The queue of output, made if there is none.
    pub(crate) fn queue(&mut self) -> &mut SendQueue {
        self.queue.get_or_insert_with(Box::default)
    }

    /// The protocol's state for this connection.
    pub(crate) fn state(&self) -> &S {
        &self.state
    }

    /// Received bytes the protocol left unconsumed.
    pub(crate) fn held(&self) -> &[u8] {
        &self.held
    }

    /// Whether the wire may be given output now: established, taking it, nothing
    /// queued before it.
    pub(crate) fn sends_directly(&self) -> bool {
        self.queue.is_none() && self.ready.writable && !self.is_connecting()
    }

    /// Whether its writing side is shut down, or will be once its output is sent.
    pub(crate) fn is_shutting_down(&self) -> bool {
        matches!(
            self.writing,
            Writing::ShutRequested | Writing::Shut | Writing::Connecting { then_shut: true, .. }
        )
    }

    pub(crate) fn is_connecting(&self) -> bool {
        matches!(self.writing, Writing::Connecting { .. })
    }

    /// Whether the protocol has not heard of it yet: accepted, its handshake under way.
    pub(crate) fn is_handshaking(&self) -> bool {
        matches!(self.writing, Writing::Connecting { accepted: true, .. })
    }

    /// Whether output written to it is dropped: it is shut down for writing, or not
    /// open (a close under way sends what was written before it only).
    pub(crate) fn drops_output(&self) -> bool {
        matches!(self.writing, Writing::Shut)
    }

    /// Whether it is open: no close under way.
    pub(crate) fn is_open(&self) -> bool {
        matches!(self.life, Life::Open)
    }

    /// Open, with no partial message held, nothing to send, no input known to wait
    /// in the wire, and its reading not held back by another connection's output (the
    /// protocol may still be busy: the machine asks it).
    pub(crate) fn has_nothing_pending(&self) -> bool {
        self.is_open() && self.held.is_empty() && self.unsent() == 0 && !self.blocked && !self.ready.readable
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_new_connection_waits_for_its_wire_and_one_being_opened_for_its_connect() {
        let open: Connection<()> = Connection::open();
        assert!(!open.sends_directly(), "not before its wire says it is writable");
        assert!(open.has_nothing_pending());
        let connecting: Connection<()> = Connection::connecting();
        assert!(!connecting.sends_directly() && connecting.is_connecting());
    }
}
