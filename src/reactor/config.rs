//! A loop's limits and timeouts.

/// Limits and timeouts of one loop. A timeout of 0 seconds is no timeout.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Config {
    /// Connections open at once; at the limit the loop stops accepting (the kernel
    /// keeps queueing) until one closes.
    pub max_connections: usize,
    /// Seconds a request head may take to arrive, from its first byte, however
    /// slowly the bytes trickle in (slowloris), and the most a body may fall behind
    /// `min_body_rate`; then the connection is closed without an answer.
    pub request_timeout: u32,
    /// Bytes per second a request body must keep arriving at, on average: each
    /// `min_body_rate` bytes earn it a second, with `request_timeout` of slack. 0:
    /// no minimum (a body may arrive a byte per `request_timeout`).
    pub min_body_rate: u32,
    /// Seconds an idle connection (nothing received, nothing to send) stays open.
    pub idle_timeout: u32,
    /// Seconds a connection may hold unsent output without the peer taking any of it.
    pub send_timeout: u32,
    /// Received bytes a connection may hold unconsumed (an incomplete request the
    /// protocol is still waiting to complete); beyond it the connection is closed.
    /// A protocol should refuse sooner with an answer (HTTP: 414, 431); this bounds
    /// a protocol that does not.
    pub max_pending_input: usize,
}

impl Default for Config {
    /// nginx's choices where it has them: 10 s for a request head (its 60 s is for
    /// the open internet's slowest links), 60 s idle, 30 s send; 1 MiB of pending
    /// input; a body at 1 KiB/s at least (Apache's mod_reqtimeout asks 500 B/s).
    fn default() -> Config {
        Config {
            max_connections: 65536,
            request_timeout: 10,
            min_body_rate: 1024,
            idle_timeout: 60,
            send_timeout: 30,
            max_pending_input: 1024 * 1024,
        }
    }
}
