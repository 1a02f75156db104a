//! The contract between the loop and what it serves: callbacks with bytes in and
//! output out through an [`Io`], and what to do next.

use std::io;
use std::time::SystemTime;

use super::io::Io;
use super::slab::Token;

/// What the loop does after [`Protocol::on_data`]: how much input was used, and
/// what comes next.
///
/// ```
/// use percore::reactor::{Then, Verdict};
/// // Used 10 bytes; the rest waits for more input, on an open connection.
/// assert_eq!(Verdict::keep(10), Verdict { consumed: 10, then: Then::Read });
/// assert_eq!(Verdict::close(10).then, Then::Close);
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Verdict {
    /// Bytes of the input that were used up; the rest is handed in again, with
    /// whatever arrives next, on the next call.
    pub consumed: usize,
    /// What the loop does next.
    pub then: Then,
}

/// What the loop does with a connection after [`Protocol::on_data`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Then {
    /// Reads more input.
    Read,
    /// Reads no more for now, and calls `on_data` again with the unconsumed input
    /// (new bytes too, if any came) once this call's output is sent. For a protocol
    /// that answers part of what it was given (its output is [full](Io::is_full)),
    /// or that waits before it answers more. With nothing written, nothing sends
    /// it on by itself: it goes on once a later callback ([`on_timer`](Protocol::on_timer),
    /// [`on_wake`](Protocol::on_wake)) writes to it and that output is sent, or once
    /// any callback [resumes](Io::resume) it.
    Pause,
    /// Closes the connection once the output is sent; input after `consumed` is
    /// never handed to the protocol.
    Close,
}

impl Verdict {
    /// `consumed` bytes used; read more.
    pub fn keep(consumed: usize) -> Verdict {
        Verdict { consumed, then: Then::Read }
    }

    /// `consumed` bytes used; call again with the rest once the output is sent.
    pub fn pause(consumed: usize) -> Verdict {
        Verdict { consumed, then: Then::Pause }
    }

    /// `consumed` bytes used; close the connection once the output is sent.
    pub fn close(consumed: usize) -> Verdict {
        Verdict { consumed, then: Then::Close }
    }
}

/// What the loop does after [`Protocol::on_open`], [`on_timer`](Protocol::on_timer),
/// [`on_wake`](Protocol::on_wake) or [`on_input_end`](Protocol::on_input_end).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Flow {
    /// Goes on: sends the output, and reads as before.
    Continue,
    /// Closes the connection once the output is sent.
    Close,
}

/// Names one connection of a loop, for [`Io::write_to`], [`Io::wake`] and the other
/// calls that reach another connection; a closed connection's id never names a
/// later one.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct ConnId(u64);

impl ConnId {
    pub(crate) fn of(token: Token) -> ConnId {
        ConnId(token.0)
    }

    pub(crate) fn token(self) -> Token {
        Token(self.0)
    }
}

/// How a connection ended, as told to [`Protocol::on_close`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Closed {
    /// The protocol said close, a graceful stop closed it, or it lingered to its end.
    Done,
    /// The peer closed it: end of stream.
    ByPeer,
    /// One of the loop's timeouts expired (for a connection being opened:
    /// [`ConnectFailed`](Closed::ConnectFailed) with `TimedOut`).
    TimedOut,
    /// A connection the loop opened ([`Io::connect`]) was never established: refused,
    /// unreachable, or not accepted within the connect timeout (`TimedOut`).
    ConnectFailed(io::ErrorKind),
    /// Reading failed (a reset).
    ReadFailed(io::ErrorKind),
    /// Sending failed.
    WriteFailed(io::ErrorKind),
}

/// A protocol served by the loop. It does no I/O: the loop accepts or connects,
/// reads, calls the protocol, and sends what it wrote to its [`Io`].
///
/// One value serves every connection of a loop; state that belongs to one
/// connection lives in [`Protocol::Conn`], which the loop keeps beside the socket.
/// Every callback gets an [`Io`] for its connection: its id, the loop's time, its
/// output and its timer, and the rest of the loop: it may open a connection, write
/// to, wake, resume, shut down or close any other.
///
/// # The loop's timeouts
///
/// A connection is under one of the loop's timeouts ([`Config`](super::Config)) at a
/// time, the first of these that applies: the linger after a close; the connect
/// timeout while a connection it opened is not yet established; the send timeout
/// while output is unsent; the message timeout while input is held unconsumed (a
/// partial message); none while the connection has a timer of its own
/// ([`Io::set_timer`]: the protocol decides); the message timeout while the protocol
/// says it [is busy](Protocol::is_busy); else the idle timeout (unless the
/// connection [opted out](Io::set_idle_timeout)). A byte stream that consumes all
/// its input at once (echo, a relay) is only ever under the send and idle timeouts.
pub trait Protocol {
    /// Per-connection state, created with `Default` when a connection opens.
    /// Keep it small: an idle connection costs its slab slot and nothing else.
    type Conn: Default;

    /// A connection opened: accepted, or, if the loop opened it ([`Io::connect`],
    /// [`Reactor::connect`](super::Reactor::connect)), established. What it writes
    /// goes out before any input is read (a server's greeting, a client's first
    /// request), after anything written to the connection while it was being
    /// opened.
    fn on_open(&mut self, _conn: &mut Self::Conn, _io: &mut Io<'_>) -> Flow {
        Flow::Continue
    }

    /// Handles `input`: every byte received and not yet consumed, oldest first.
    /// Writes its answer to `io` and says how much input it used and what comes next.
    /// To bound its memory a protocol stops once [`Io::is_full`] and returns
    /// [`Verdict::pause`]: the loop calls it again with the rest once the peer has
    /// taken the output. Input written on to another connection
    /// ([`Io::write_to`]) needs no such care: the loop stops reading this one while
    /// the other's output is over the budget.
    fn on_data(&mut self, conn: &mut Self::Conn, input: &[u8], io: &mut Io<'_>) -> Verdict;

    /// The connection's timer ([`Io::set_timer`]) fired.
    fn on_timer(&mut self, _conn: &mut Self::Conn, _io: &mut Io<'_>) -> Flow {
        Flow::Continue
    }

    /// The connection was woken by [`Io::wake`] or [`Reactor::wake`](super::Reactor::wake).
    fn on_wake(&mut self, _conn: &mut Self::Conn, _io: &mut Io<'_>) -> Flow {
        Flow::Continue
    }

    /// The peer finished sending (it shut down its side: end of stream); its
    /// unconsumed input was handed to `on_data` first. [`Flow::Close`] (the default)
    /// closes the connection once its output is sent, as [`Closed::ByPeer`].
    /// [`Flow::Continue`] keeps it open for writing, half-closed: it closes once it
    /// is [shut down](Io::shutdown) too, or closed.
    fn on_input_end(&mut self, _conn: &mut Self::Conn, _io: &mut Io<'_>) -> Flow {
        Flow::Close
    }

    /// A connection is gone. `unconsumed` is the input the protocol left unconsumed
    /// (after [`Closed::ByPeer`], a message delimited by the end of the stream).
    /// `io` names the connection and reaches the others (to close a partner, say);
    /// what is written to the connection itself is dropped.
    fn on_close(&mut self, _conn: &mut Self::Conn, _closed: Closed, _unconsumed: &[u8], _io: &mut Io<'_>) {}

    /// Whether `conn` is in the middle of an exchange although no input is pending
    /// and no output unsent (HTTP: a request body still arriving). The loop then
    /// holds it to the message timeout rather than the idle one (unless it has a
    /// timer of its own: see [the loop's timeouts](Protocol#the-loops-timeouts)),
    /// does not close it in a graceful stop, and, if the protocol closes it, reads
    /// what the peer still sends before closing.
    fn is_busy(_conn: &Self::Conn) -> bool {
        false
    }

    /// Called by the loop once a second, at the turn of the wall-clock second.
    fn on_tick(&mut self, _now: SystemTime) {}

    /// Called once when the loop starts a graceful stop: answer what was received,
    /// asking clients to close (HTTP: `Connection: close`).
    fn on_drain(&mut self) {}

    /// What the protocol counted so far, for whoever reports on it (the workers'
    /// live figures and last lines); nothing, unless the protocol counts.
    fn counts(&self) -> Counts {
        Counts::default()
    }
}

/// What a protocol counted ([`Protocol::counts`]): requests (or messages, commands)
/// answered, and those refused.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Counts {
    /// Requests answered, refusals included.
    pub requests: u64,
    /// Requests refused as malformed or over a limit.
    pub errors: u64,
}
