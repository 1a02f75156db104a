//! A loop's limits and timeouts, and which timeout a connection is under.

use super::connection::{Connection, Phase};

/// Seconds a closing connection may keep sending us bytes we drop (nginx: 5 s).
const LINGER_SECS: u32 = 5;

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

/// Which timeout a connection is under.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Timer {
    Idle,
    Request,
    Send,
    Linger,
}

impl<S> Connection<S> {
    /// Sets the deadline for the state the connection is now in. A request's
    /// deadline runs from its first byte until the protocol consumes some of it (a
    /// head, or part of a body): bytes that trickle in without completing anything do
    /// not extend it. The send deadline runs from the peer's latest progress, the
    /// idle deadline from the latest activity.
    pub(crate) fn rearm(&mut self, now: u32, config: &Config, mid_request: bool) {
        let (timer, seconds) = match self.phase {
            Phase::Lingering => (Timer::Linger, LINGER_SECS),
            _ if self.unsent() > 0 => (Timer::Send, config.send_timeout),
            _ if !self.pending_input.is_empty() || mid_request => (Timer::Request, config.request_timeout),
            _ => (Timer::Idle, config.idle_timeout),
        };
        let keep = match timer {
            Timer::Request => self.timer == timer && !std::mem::take(&mut self.input_progressed),
            Timer::Linger => self.timer == timer,
            Timer::Send => self.timer == timer && !std::mem::take(&mut self.output_progressed),
            Timer::Idle => false,
        };
        if keep {
            return;
        }
        if self.timer != timer {
            // Progress made under the previous timer does not extend this one.
            self.input_progressed = false;
            self.output_progressed = false;
        }
        self.timer = timer;
        // +1: the clock counts whole seconds, so a deadline `seconds` ahead could
        // otherwise come up to a second early.
        self.deadline = if seconds == 0 { 0 } else { now.saturating_add(seconds).saturating_add(1) };
    }
}
