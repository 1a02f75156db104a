//! A loop's limits and timeouts.

/// Limits and timeouts of one loop. A timeout of 0 seconds is no timeout.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Config {
    /// Connections open at once; at the limit the loop stops accepting (the kernel
    /// keeps queueing) until one closes.
    pub max_connections: usize,
    /// Seconds a request head may take to arrive, from its first byte, however
    /// slowly the bytes trickle in (slowloris), and the longest a body may stall;
    /// then the connection is closed without an answer.
    pub request_timeout: u32,
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
    /// the open internet's slowest links), 60 s idle, 30 s send; 1 MiB of pending input.
    fn default() -> Config {
        Config {
            max_connections: 65536,
            request_timeout: 10,
            idle_timeout: 60,
            send_timeout: 30,
            max_pending_input: 1024 * 1024,
        }
    }
}
