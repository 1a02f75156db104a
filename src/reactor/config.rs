//! A loop's limits and timeouts, the output budget, and the idle and drain policies
//! a connection may choose.

use std::time::Duration;

/// Limits and timeouts of one loop. A timeout of `None` is no timeout; the loop
/// counts them in whole milliseconds, rounded up (and at most 24 days), and closes
/// a connection in the turn its deadline passes. Which
/// timeout a connection is under at a time is said in [the loop's
/// timeouts](super::protocol::Protocol#the-loops-timeouts).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Config {
    /// Connections open at once; at the limit the loop stops accepting (the kernel
    /// keeps queueing) until one closes. Connections the loop opens count toward
    /// it, and are not refused by it.
    pub max_connections: usize,
    /// How long a message may take to arrive: from the first byte of input the
    /// protocol leaves unconsumed (a partial message: an HTTP head, a command line),
    /// however slowly the rest trickles in (slowloris); and the most a message the
    /// protocol [is busy](super::protocol::Protocol::is_busy) with (an HTTP body)
    /// may fall behind `min_input_rate`. Then the connection is closed without an
    /// answer. A protocol that consumes all its input at once and is never busy
    /// (echo, a relay) is never under it.
    pub message_timeout: Option<Duration>,
    /// Bytes per second a message the protocol is busy with must keep arriving at,
    /// on average: each `min_input_rate` bytes earn it a second, with
    /// `message_timeout` of slack. 0: no minimum (a message may arrive a byte per
    /// `message_timeout`).
    pub min_input_rate: u32,
    /// How long a connection may stay idle (open, nothing received unconsumed,
    /// nothing to send, no timer of its own, not busy); a connection may opt out
    /// ([`Io::set_idle_timeout`](super::io::Io::set_idle_timeout)).
    pub idle_timeout: Option<Duration>,
    /// How long a connection may hold unsent output without the peer taking any of it.
    pub send_timeout: Option<Duration>,
    /// How long a connection the loop opens ([`Io::connect`](super::io::Io::connect))
    /// may take to be established; then it fails with `TimedOut`.
    pub connect_timeout: Option<Duration>,
    /// How long an accepted connection that speaks TLS may take over its handshake;
    /// then it is closed, the protocol never having heard of it (nginx holds a
    /// stalled handshake for its 60 s `client_header_timeout`).
    pub handshake_timeout: Option<Duration>,
    /// Received bytes a connection may hold unconsumed (an incomplete message the
    /// protocol is still waiting to complete); beyond it the connection is closed.
    /// A protocol should refuse sooner with an answer (HTTP: 414, 431); this bounds
    /// a protocol that does not. It is checked once the protocol has seen a read
    /// (64 KiB at most): one that refuses its messages past N bytes itself needs N
    /// and a read here.
    pub max_pending_input: usize,
}

impl Default for Config {
    /// nginx's choices where it has them: 10 s for a request head (its 60 s is for
    /// the open internet's slowest links), and as much for a TLS handshake, 60 s
    /// idle, 30 s send; HAProxy's usual 5 s to connect; 1 MiB of pending input; a
    /// body at 1 KiB/s at least (Apache's mod_reqtimeout asks 500 B/s).
    fn default() -> Config {
        Config {
            max_connections: 65536,
            message_timeout: Some(Duration::from_secs(10)),
            min_input_rate: 1024,
            idle_timeout: Some(Duration::from_secs(60)),
            send_timeout: Some(Duration::from_secs(30)),
            connect_timeout: Some(Duration::from_secs(5)),
            handshake_timeout: Some(Duration::from_secs(10)),
            max_pending_input: 1024 * 1024,
        }
    }
}

/// Unsent output (queued and just written) above which [`Io::is_full`](super::io::Io::is_full) says to
/// stop writing: a client that pipelines requests without reading their answers
/// cannot grow a connection past about this much.
pub(crate) const OUTPUT_BUDGET: usize = 256 * 1024;

/// How long an idle connection may stay open, as [`Io::set_idle_timeout`](super::io::Io::set_idle_timeout) sets it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum IdleTimeout {
    /// The loop's [`idle_timeout`](Config::idle_timeout): the default.
    FromConfig,
    /// None: the connection stays open however long it is idle (a tunnel whose ends
    /// keep their own timeouts). The other timeouts still apply.
    Never,
}

/// What a graceful stop does with a connection that is idle, as
/// [`Io::set_drain_policy`](super::io::Io::set_drain_policy) sets it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum DrainPolicy {
    /// Closes it once the stop's grace is over, as a server closes an idle
    /// keep-alive connection: the default.
    CloseWhenIdle,
    /// Leaves it until it closes by itself (or the stop's timeout): for a stream
    /// whose pauses are not ends, such as a relay's pair.
    UntilClosed,
}
