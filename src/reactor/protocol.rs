//! The contract between the loop and what it serves: bytes in, bytes out, a verdict.

use std::io;
use std::time::SystemTime;

/// What the loop should do after [`Protocol::on_data`].
///
/// ```
/// use percore::reactor::Verdict;
/// // Used 10 bytes; the rest waits for more input, on an open connection.
/// assert_eq!(Verdict::keep(10), Verdict { consumed: 10, keep_open: true });
/// assert!(!Verdict::close(10).keep_open);
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Verdict {
    /// Bytes of the input that were used up; the rest is handed in again, with
    /// whatever arrives next, on the next call.
    pub consumed: usize,
    /// Whether the connection stays open once the output is sent.
    pub keep_open: bool,
}

impl Verdict {
    /// `consumed` bytes used, the connection stays open.
    pub fn keep(consumed: usize) -> Verdict {
        Verdict { consumed, keep_open: true }
    }

    /// `consumed` bytes used; close the connection once the output is sent.
    /// Input after them is never handed to the protocol.
    pub fn close(consumed: usize) -> Verdict {
        Verdict { consumed, keep_open: false }
    }
}

/// Names one connection of a loop, for [`Reactor::wake`](super::Reactor::wake); a
/// closed connection's id never names a later one.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct ConnId(pub(crate) u64);

/// How a connection ended, as told to [`Protocol::on_close`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Closed {
    /// The protocol said close, a graceful stop closed it, or it lingered to its end.
    Done,
    /// The peer closed it: end of stream.
    ByPeer,
    /// One of the loop's timeouts expired.
    TimedOut,
    /// Reading failed (a reset, or a connect that was refused).
    ReadFailed(io::ErrorKind),
    /// Sending failed.
    WriteFailed(io::ErrorKind),
}

/// A protocol served by the loop. It does no I/O: the loop reads, calls
/// [`on_data`](Protocol::on_data) with every byte not yet consumed, and sends what it
/// appended to `out` in one `send`, after the output of earlier calls.
///
/// One value serves every connection of a loop; state that belongs to one
/// connection lives in [`Protocol::Conn`], which the loop keeps beside the socket.
pub trait Protocol {
    /// Per-connection state, created with `Default` when a connection is accepted.
    /// Keep it small: an idle connection costs its slab slot and nothing else.
    type Conn: Default;

    /// Handles `input`: every byte received and not yet consumed, oldest first.
    /// Appends the response bytes to `out` and says how much input it used. To bound
    /// its memory a protocol may stop once `out` holds [`OUTPUT_BUDGET`](super::OUTPUT_BUDGET)
    /// bytes, leaving input: the loop calls it again, once the peer has taken the
    /// output, before it reads more.
    fn on_data(&mut self, conn: &mut Self::Conn, input: &[u8], out: &mut Vec<u8>) -> Verdict;

    /// A connection the loop opened with [`Reactor::connect`](super::Reactor::connect):
    /// what is appended to `out` is sent once the connection is established. Servers
    /// never see this.
    fn on_open(&mut self, _id: ConnId, _conn: &mut Self::Conn, _out: &mut Vec<u8>) {}

    /// A connection is gone. `unconsumed` is the input the protocol left unconsumed
    /// (after [`Closed::ByPeer`], a response delimited by the end of the stream).
    fn on_close(&mut self, _conn: &mut Self::Conn, _closed: Closed, _unconsumed: &[u8]) {}

    /// Whether `conn` is in the middle of a request although no input is pending
    /// (HTTP: skipping a body). The loop then holds it to the request timeout, not
    /// the idle one, and, if the protocol closes it now, lingers before closing.
    fn mid_request(_conn: &Self::Conn) -> bool {
        false
    }

    /// Called by the loop once a second, at the turn of the wall-clock second.
    fn on_tick(&mut self, _now: SystemTime) {}

    /// Called once when the loop starts a graceful stop: answer what was received,
    /// asking clients to close (HTTP: `Connection: close`).
    fn on_drain(&mut self) {}

    /// What the protocol counted, for the worker's exit summary.
    fn counts(&self) -> Counts {
        Counts::default()
    }
}

/// Requests a protocol answered and refused, as it counts them.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Counts {
    /// Requests answered (including refusals).
    pub requests: u64,
    /// Requests refused as malformed or over a limit.
    pub errors: u64,
}
