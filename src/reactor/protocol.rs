//! The contract between the loop and what it serves: callbacks with bytes in and
//! output out through an [`Io`], and what to do next.

use std::io;
use std::time::SystemTime;

use super::conns::Conns;
use super::io::Io;

/// What [`Protocol::on_data`] answers: how much input it used, and what comes next.
///
/// ```
/// use percore::reactor::{Flow, Verdict};
/// // Used 10 bytes; the rest waits for more input, on an open connection.
/// assert_eq!(Verdict::keep(10), Verdict { consumed: 10, flow: Flow::Continue });
/// assert_eq!(Verdict::close(10).flow, Flow::Close);
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Verdict {
    /// Bytes of the input that were used up; the rest is handed in again, with
    /// whatever arrives next, on the next call.
    pub consumed: usize,
    /// What the loop does next.
    pub flow: Flow,
}

impl Verdict {
    /// `consumed` bytes used; read more.
    pub fn keep(consumed: usize) -> Verdict {
        Verdict { consumed, flow: Flow::Continue }
    }

    /// `consumed` bytes used; call again with the rest once the output is sent.
    pub fn pause(consumed: usize) -> Verdict {
        Verdict { consumed, flow: Flow::Pause }
    }

    /// `consumed` bytes used; close the connection once the output is sent.
    pub fn close(consumed: usize) -> Verdict {
        Verdict { consumed, flow: Flow::Close }
    }
}

/// What the loop does with a connection after a callback: every callback but
/// [`on_close`](Protocol::on_close) answers with one (`on_data` inside its
/// [`Verdict`]).
///
/// # Pause and resume
///
/// A paused connection is read no more, and `on_data` is not called, until the
/// pause ends; then `on_data` is called with the input it holds unconsumed (if any),
/// before anything more is read. The pause ends:
/// - once the output written by the call that paused is sent (taken by the peer);
/// - if that call wrote nothing: once output written to the connection later is
///   sent, whoever wrote it (its own [`on_timer`](Protocol::on_timer) or
///   [`on_wake`](Protocol::on_wake), or another connection's
///   [`write_to`](Io::write_to): a backend's answer to a client that waited for
///   it), or once any callback [resumes](Io::resume) it.
///
/// [`resume`](Io::resume) also serves a connection that did not pause but holds
/// input unconsumed (its `on_data` kept it, waiting for something other than more
/// bytes): once its output is sent, `on_data` is called again with that input.
/// Resuming a connection that neither paused nor holds input does nothing.
///
/// Input that arrives meanwhile waits in the socket. A pause is for a protocol
/// that answers part of what it was given (its output is [full](Io::is_full)),
/// or that waits before it answers more (a delayed answer, a backend to reply
/// first).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Flow {
    /// Goes on: the output is sent, and the connection is read as before (a paused
    /// one stays paused, and goes on as [Pause and resume](Flow#pause-and-resume)
    /// says). After [`on_input_end`](Protocol::on_input_end): stays open for
    /// writing, half-closed.
    Continue,
    /// Reads no more for now (see [Pause and resume](Flow#pause-and-resume)). After
    /// [`on_input_end`](Protocol::on_input_end), as `Continue`: nothing more comes.
    Pause,
    /// Closes the connection once the output is sent; input not consumed (and
    /// whatever arrives later) is never handed to the protocol. When the peer may
    /// still be sending (input left unconsumed, or a graceful stop's close), the
    /// close lingers, as nginx's `lingering_close`: our end of the stream is sent,
    /// then what the peer sends is read and dropped until it closes, for at most
    /// 5 s, so that a reset does not destroy the last answer before the peer reads
    /// it. A graceful stop waits for a lingering connection too.
    Close,
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
    /// unreachable, or not accepted within the connect timeout (`TimedOut`); over
    /// TLS (`Reactor::connect_tls`, feature `tls`), a handshake that
    /// failed too (`InvalidData`: the certificate not trusted or not the server
    /// name's, an alert from the server, a protocol error).
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
/// while output is unsent; the connection's read timeout, if the protocol set one
/// ([`Conns::set_read_timeout`](super::Conns::set_read_timeout)), unless the loop
/// holds its reading back for another connection's output; the message
/// timeout while input is held unconsumed (a partial message; not input a pause
/// holds, a message the protocol has yet to take); none while the connection has a
/// timer of its own ([`Io::set_timer`]: the protocol decides); the message timeout
/// while the protocol says it [is busy](Protocol::is_busy) (a body arriving); none
/// while it is marked busy with an exchange another connection carries on
/// ([`Conns::set_busy`](super::Conns::set_busy): that one's timeouts apply); else
/// the idle timeout (unless the
/// connection [opted out](Io::set_idle_timeout)). A byte stream that consumes all
/// its input at once (echo, a relay) is only ever under the send and idle timeouts.
pub trait Protocol {
    /// Per-connection state, created with `Default` when a connection opens.
    /// Keep it small: an idle connection costs its slab slot and nothing else.
    type Conn: Default;

    /// The names this protocol goes by in a TLS handshake's ALPN (RFC 7301), most
    /// preferred first: `http/1.1` for HTTP/1.1. A loop that speaks TLS offers them
    /// to its clients; none (the default): a client's ALPN list is not answered.
    const ALPN: &'static [&'static [u8]] = &[];

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

    /// The splice of a length this connection began ([`Io::splice_some_to`]) is
    /// over: the connection fed has been given every byte of it (into its socket,
    /// or, for bytes this connection held, its output). From now on this
    /// connection's input reaches `on_data` again. A proxy learns here that a
    /// request's body has gone whole to its backend. If the connection fed closes
    /// first, this is not called: the input reaches `on_data` again at once.
    fn on_spliced(&mut self, _conn: &mut Self::Conn, _io: &mut Io<'_>) -> Flow {
        Flow::Continue
    }

    /// The peer finished sending (it shut down its side: end of stream); its
    /// unconsumed input was handed to `on_data` first: a connection paused with
    /// input held hears of the end only once the pause is over and `on_data` has
    /// been given that input. [`Flow::Close`] (the default) closes the connection
    /// once the output already written is sent, as [`Closed::ByPeer`]: an answer not
    /// yet written (one a backend still owes, for a request read before the end) is
    /// lost. [`Flow::Continue`] keeps it open for writing, half-closed, so that such
    /// answers can still be written (by this connection's later callbacks, or by
    /// another's `write_to`): it closes once it is [shut down](Io::shutdown) too, or
    /// closed.
    fn on_input_end(&mut self, _conn: &mut Self::Conn, _io: &mut Io<'_>) -> Flow {
        Flow::Close
    }

    /// A connection is gone. `unconsumed` is the input it held, received and not
    /// consumed: after [`Closed::ByPeer`], a message delimited by the end of the
    /// stream; after a reset or a timeout, a message cut short; after a close the
    /// protocol asked for, nothing (what followed the close is never handed in).
    /// `io` names the connection and reaches the others (to close a partner, say);
    /// what is written to the connection itself is dropped.
    fn on_close(&mut self, _conn: &mut Self::Conn, _closed: Closed, _unconsumed: &[u8], _io: &mut Io<'_>) {}

    /// Whether `conn` is in the middle of an exchange although no input is pending
    /// and no output unsent (HTTP: a request body still arriving). The loop then
    /// holds it to the message timeout rather than the idle one (unless it has a
    /// timer of its own: see [the loop's timeouts](Protocol#the-loops-timeouts)),
    /// does not close it in a graceful stop, and, if the protocol closes it, reads
    /// what the peer still sends before closing. (A connection waiting on another,
    /// whose state that other's callbacks cannot change, is marked with
    /// [`Io::set_busy`] instead.)
    fn is_busy(_conn: &Self::Conn) -> bool {
        false
    }

    /// Called by the loop once a second, at the turn of the wall-clock second;
    /// `conns` reaches the connections (to close those idle too long in a pool).
    fn on_tick(&mut self, _now: SystemTime, _conns: &mut Conns<'_>) {}

    /// Called once when the loop starts a graceful stop: answer what was received,
    /// asking clients to close (HTTP: `Connection: close`); `conns` reaches the
    /// connections (to close a pool's idle ones at once).
    fn on_drain(&mut self, _conns: &mut Conns<'_>) {}

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
    pub refused: u64,
}

/// A protocol that consumes what it is given and answers nothing: for the unit tests
/// of the loop and of what runs it, which test their own decisions.
#[cfg(test)]
pub(crate) struct Unused;

#[cfg(test)]
impl Protocol for Unused {
    type Conn = ();

    fn on_data(&mut self, _conn: &mut (), input: &[u8], _io: &mut Io<'_>) -> Verdict {
        Verdict::keep(input.len())
    }
}
