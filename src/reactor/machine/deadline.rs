//! Which of the loop's timeouts a connection is under, and when it runs out: the
//! precedence [`Protocol`](crate::reactor::Protocol)'s docs give, and how each one
//! is kept or moved on as the connection makes progress.

use std::time::Duration;

use crate::reactor::config::Config;

/// Seconds a closing connection may keep sending us bytes we drop (nginx: 5 s).
const LINGER_SECS: u32 = 5;

/// The loop's limits in the units its clock counts: whole seconds, 0 for none.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Limits {
    message: u32,
    idle: u32,
    send: u32,
    connect: u32,
    /// Bytes per second a message the protocol is busy with must keep arriving at.
    min_input_rate: u32,
    /// Received bytes a connection may hold unconsumed.
    pub(crate) max_held_input: usize,
}

impl Limits {
    pub(crate) fn of(config: &Config) -> Limits {
        Limits {
            message: seconds(config.message_timeout),
            idle: seconds(config.idle_timeout),
            send: seconds(config.send_timeout),
            connect: seconds(config.connect_timeout),
            min_input_rate: config.min_input_rate,
            max_held_input: config.max_pending_input,
        }
    }
}

/// A timeout in the clock's whole seconds, rounded up (a timeout never runs out
/// early); 0 when there is none.
fn seconds(timeout: Option<Duration>) -> u32 {
    let Some(timeout) = timeout.filter(|t| !t.is_zero()) else { return 0 };
    let whole = timeout.as_secs().saturating_add(u64::from(timeout.subsec_nanos() > 0));
    u32::try_from(whole).unwrap_or(u32::MAX)
}

/// What a connection is doing, as far as its timeouts go: the facts the precedence
/// reads, in its order.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Under {
    /// Closed for writing and reading what the peer still sends.
    Linger,
    /// Being opened.
    Connect,
    /// Output waits for the peer (or another connection's bytes wait for it).
    Send,
    /// Input is held unconsumed: a message partly received.
    PartialMessage,
    /// The protocol has a timer of its own: it decides.
    OwnTimer,
    /// The protocol says it is busy (a body still arriving).
    Busy,
    /// Nothing: idle, unless the connection opted out.
    Idle { never: bool },
}

/// Which of the loop's timeouts applies.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Timeout {
    None,
    Connect,
    Idle,
    Message,
    Send,
    Linger,
}

/// A connection's deadline and the progress that moves it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Deadline {
    /// Second (of the loop's clock) after which the connection is closed; 0: none.
    at: u32,
    timeout: Timeout,
    /// The peer took some of our output since the last `rearm`.
    output_progressed: bool,
    /// Bytes the protocol consumed since the last `rearm`.
    /// (32 bits, saturating: a turn consumes at most a few reads, and a connection
    /// fits in the 72 bytes an idle one's slot is measured at.)
    input_consumed: u32,
    /// Bytes of a body received and not yet turned into more time (see `rearm`).
    body_credit: u32,
}

impl Default for Deadline {
    fn default() -> Deadline {
        Deadline {
            at: 0,
            timeout: Timeout::Idle,
            output_progressed: false,
            input_consumed: 0,
            body_credit: 0,
        }
    }
}

impl Deadline {
    /// Whether it ran out by second `now`.
    pub(crate) fn expired(&self, now: u32) -> bool {
        self.at != 0 && self.at <= now
    }

    /// The peer took some output.
    pub(crate) fn output_progressed(&mut self) {
        self.output_progressed = true;
    }

    /// The protocol consumed `bytes` of input.
    pub(crate) fn consumed(&mut self, bytes: usize) {
        let bytes = u32::try_from(bytes).unwrap_or(u32::MAX);
        self.input_consumed = self.input_consumed.saturating_add(bytes);
    }

    /// Sets the deadline for what the connection is doing now (`under`), at second
    /// `now`.
    ///
    /// A request's deadline runs from its first byte; bytes that trickle in without
    /// completing anything do not extend it. Once the protocol consumes some (a head
    /// completed), the next request's deadline starts afresh; but a body (the
    /// protocol busy with its input all consumed) earns time only as it arrives: one
    /// second per `min_input_rate` bytes, never more than the message timeout ahead,
    /// so that a body trickling a byte at a time runs out. The send deadline runs
    /// from the peer's latest progress, the idle deadline from the latest activity.
    pub(crate) fn rearm(&mut self, under: Under, now: u32, limits: &Limits) {
        let (timeout, seconds) = match under {
            Under::Linger => (Timeout::Linger, LINGER_SECS),
            Under::Connect => (Timeout::Connect, limits.connect),
            Under::Send => (Timeout::Send, limits.send),
            Under::PartialMessage | Under::Busy => (Timeout::Message, limits.message),
            Under::OwnTimer | Under::Idle { never: true } => (Timeout::None, 0),
            Under::Idle { never: false } => (Timeout::Idle, limits.idle),
        };
        let consumed = std::mem::take(&mut self.input_consumed);
        let same = self.timeout == timeout;
        let keep = match timeout {
            Timeout::Message if same && consumed > 0 && under == Under::Busy => {
                return self.earn_body_time(now, limits, consumed, seconds);
            }
            Timeout::Message => same && consumed == 0,
            Timeout::Linger | Timeout::Connect => same,
            Timeout::Send => same && !std::mem::take(&mut self.output_progressed),
            Timeout::Idle | Timeout::None => false,
        };
        if keep {
            return;
        }
        if !same {
            // Progress made under the previous timeout does not extend this one.
            self.output_progressed = false;
            self.body_credit = 0;
        }
        self.timeout = timeout;
        // +1: the clock counts whole seconds, so a deadline `seconds` ahead could
        // otherwise come up to a second early.
        self.at = if seconds == 0 { 0 } else { now.saturating_add(seconds).saturating_add(1) };
    }

    /// A body's `consumed` bytes arrived: its deadline moves on by a second per
    /// `min_input_rate` bytes, up to `seconds` ahead of now.
    fn earn_body_time(&mut self, now: u32, limits: &Limits, consumed: u32, seconds: u32) {
        if seconds == 0 {
            return;
        }
        let ceiling = now.saturating_add(seconds).saturating_add(1);
        let Some(rate) = Some(limits.min_input_rate).filter(|&rate| rate > 0) else {
            // No minimum rate: any progress restarts the timeout.
            self.at = ceiling;
            return;
        };
        self.body_credit = self.body_credit.saturating_add(consumed);
        let earned = self.body_credit / rate;
        self.body_credit %= rate;
        self.at = self.at.saturating_add(earned).min(ceiling);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const LIMITS: Limits =
        Limits { message: 10, min_input_rate: 100, idle: 60, send: 30, connect: 5, max_held_input: 1024 };

    const IDLE: Under = Under::Idle { never: false };

    fn rearmed(deadline: &mut Deadline, under: Under, now: u32) -> u32 {
        deadline.rearm(under, now, &LIMITS);
        deadline.at
    }

    #[test]
    fn a_timeout_is_whole_seconds_rounded_up_and_none_is_zero() {
        assert_eq!(seconds(None), 0);
        assert_eq!(seconds(Some(Duration::ZERO)), 0);
        assert_eq!(seconds(Some(Duration::from_millis(1))), 1);
        assert_eq!(seconds(Some(Duration::from_secs(2))), 2);
        assert_eq!(seconds(Some(Duration::from_millis(2001))), 3);
        assert_eq!(seconds(Some(Duration::MAX)), u32::MAX);
    }

    #[test]
    fn an_idle_connection_is_held_to_the_idle_timeout_from_its_latest_activity() {
        let mut deadline = Deadline::default();
        assert_eq!(
            rearmed(&mut deadline, IDLE, 100),
            161,
            "60 s, and a second for the clock's whole seconds"
        );
        assert_eq!(rearmed(&mut deadline, IDLE, 150), 211, "activity restarts the idle timeout");
        assert!(!deadline.expired(210) && deadline.expired(211));
    }

    #[test]
    fn a_protocol_timer_or_an_opt_out_takes_the_place_of_the_loops_timeouts() {
        let mut deadline = Deadline::default();
        assert_eq!(rearmed(&mut deadline, Under::OwnTimer, 100), 0);
        assert_eq!(rearmed(&mut deadline, Under::Idle { never: true }, 100), 0);
        assert!(!deadline.expired(u32::MAX), "no deadline never runs out");
    }

    #[test]
    fn a_partial_message_is_held_to_the_message_timeout_from_its_first_byte() {
        let mut deadline = Deadline::default();
        assert_eq!(rearmed(&mut deadline, Under::PartialMessage, 100), 111);
        assert_eq!(rearmed(&mut deadline, Under::PartialMessage, 105), 111, "bytes that complete nothing");
        // A message completed and the next one begun: its deadline starts afresh.
        deadline.consumed(30);
        assert_eq!(rearmed(&mut deadline, Under::PartialMessage, 106), 117);
    }

    #[test]
    fn a_body_earns_a_second_per_min_input_rate_bytes_up_to_the_message_timeout() {
        let mut deadline = Deadline::default();
        assert_eq!(rearmed(&mut deadline, Under::Busy, 100), 111, "a busy protocol: the message timeout");
        assert_eq!(rearmed(&mut deadline, Under::Busy, 102), 111, "nothing arrived: no time earned");
        deadline.consumed(250);
        assert_eq!(
            rearmed(&mut deadline, Under::Busy, 105),
            113,
            "250 bytes at 100 B/s: 2 s, 50 B of credit"
        );
        deadline.consumed(50);
        assert_eq!(rearmed(&mut deadline, Under::Busy, 105), 114, "the credit and 50 more: a third second");
        deadline.consumed(10_000);
        assert_eq!(rearmed(&mut deadline, Under::Busy, 106), 117, "never more than the timeout ahead");
        let no_minimum = Limits { min_input_rate: 0, ..LIMITS };
        deadline.consumed(1);
        deadline.rearm(Under::Busy, 110, &no_minimum);
        assert_eq!(deadline.at, 121, "with no minimum rate any progress restarts it");
        deadline.rearm(Under::Busy, 115, &no_minimum);
        assert_eq!(deadline.at, 121, "and no progress restarts nothing");
        let no_timeout = Limits { message: 0, ..LIMITS };
        deadline.consumed(1);
        deadline.rearm(Under::Busy, 111, &no_timeout);
        assert_eq!(deadline.at, 121, "with no message timeout nothing is earned");
    }

    #[test]
    fn credit_earned_under_one_timeout_does_not_carry_into_the_next() {
        let mut deadline = Deadline::default();
        rearmed(&mut deadline, Under::Busy, 100);
        deadline.consumed(50);
        assert_eq!(rearmed(&mut deadline, Under::Busy, 101), 111, "50 bytes: no second yet");
        assert_eq!(rearmed(&mut deadline, IDLE, 102), 163, "the body ended: idle");
        assert_eq!(rearmed(&mut deadline, Under::Busy, 103), 114, "a new body: a new deadline");
        deadline.consumed(50);
        assert_eq!(
            rearmed(&mut deadline, Under::Busy, 104),
            114,
            "the first body's 50 bytes are not the second's"
        );
    }

    #[test]
    fn unsent_output_is_held_to_the_send_timeout_which_only_the_peers_progress_extends() {
        let mut deadline = Deadline::default();
        assert_eq!(rearmed(&mut deadline, Under::Send, 100), 131);
        assert_eq!(rearmed(&mut deadline, Under::Send, 110), 131, "no progress");
        deadline.output_progressed();
        assert_eq!(rearmed(&mut deadline, Under::Send, 120), 151, "the peer took some: it starts again");
    }

    #[test]
    fn connect_and_linger_deadlines_are_not_extended() {
        let mut deadline = Deadline::default();
        assert_eq!(rearmed(&mut deadline, Under::Connect, 100), 106, "5 s to connect");
        assert_eq!(rearmed(&mut deadline, Under::Connect, 103), 106);
        assert_eq!(rearmed(&mut deadline, Under::Linger, 104), 110);
        deadline.consumed(10);
        assert_eq!(rearmed(&mut deadline, Under::Linger, 107), 110, "what the peer still sends");
    }
}
