//! Which of the loop's timeouts a connection is under, and when it runs out: the
//! precedence [`Protocol`](crate::reactor::Protocol)'s docs give, and how each one
//! is kept or moved on as the connection makes progress.

use std::time::{Duration, Instant};

use crate::reactor::config::Config;

/// Milliseconds a closing connection may keep sending us bytes we drop (nginx: 5 s).
const LINGER_MS: u32 = 5_000;

/// The longest timeout, in milliseconds: 24 days; a longer one is this. A deadline
/// is kept in 32 bits of the clock's milliseconds, which wrap every 49 days, and is
/// compared with the clock by the sign of their difference (as nginx compares its
/// timers), which is right while they are less than 24.8 days apart.
pub(crate) const MAX_TIMEOUT_MS: u32 = 24 * 24 * 3600 * 1000;

/// The loop's limits in the units its clock counts: milliseconds, 0 for none.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Limits {
    message: u32,
    idle: u32,
    send: u32,
    connect: u32,
    handshake: u32,
    /// Bytes per second a message the protocol is busy with must keep arriving at.
    min_input_rate: u32,
    /// Received bytes a connection may hold unconsumed.
    pub(crate) max_held_input: usize,
}

impl Limits {
    pub(crate) fn of(config: &Config) -> Limits {
        Limits {
            message: millis(config.message_timeout),
            idle: millis(config.idle_timeout),
            send: millis(config.send_timeout),
            connect: millis(config.connect_timeout),
            handshake: millis(config.handshake_timeout),
            min_input_rate: config.min_input_rate,
            max_held_input: config.max_pending_input,
        }
    }
}

/// A timeout in the clock's whole milliseconds, rounded up (a timeout never runs out
/// early) and at most [`MAX_TIMEOUT_MS`]; 0 when there is none.
pub(crate) fn millis(timeout: Option<Duration>) -> u32 {
    let Some(timeout) = timeout.filter(|t| !t.is_zero()) else { return 0 };
    let whole = timeout.as_nanos().div_ceil(1_000_000);
    u32::try_from(whole).unwrap_or(u32::MAX).min(MAX_TIMEOUT_MS)
}

/// Whole milliseconds from `start` to `now` (0 if `now` is earlier): the clock the
/// deadlines count.
pub(crate) fn millis_between(start: Instant, now: Instant) -> u64 {
    let since = now.saturating_duration_since(start);
    since.as_secs() * 1000 + u64::from(since.subsec_millis())
}

/// Whether millisecond `a` of the wrapping 32-bit clock comes after `b`.
fn after(a: u32, b: u32) -> bool {
    (a.wrapping_sub(b) as i32) > 0
}

/// What a connection is doing, as far as its timeouts go: the facts the precedence
/// reads, in its order.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Under {
    /// Closed for writing and reading what the peer still sends.
    Linger,
    /// Being opened.
    Connect,
    /// Accepted, its TLS handshake under way.
    Handshake,
    /// Output waits for the peer (or another connection's bytes wait for it).
    Send,
    /// Input is held unconsumed: a message partly received.
    PartialMessage,
    /// The protocol has a timer of its own: it decides.
    OwnTimer,
    /// The protocol marked it busy with an exchange another connection carries on
    /// (a proxy's client, its request at a backend): that one's timeouts apply.
    Elsewhere,
    /// The protocol set a read timeout for the connection: it replaces the message
    /// and idle timeouts.
    Read(u32),
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
    Read,
    Send,
    Linger,
}

/// A connection's deadline and the progress that moves it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Deadline {
    /// Millisecond of the loop's clock, its low 32 bits, after which the connection
    /// is closed; 0: none.
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
    /// The protocol set a read timeout for the connection (whose length the machine
    /// keeps).
    reads_timed: bool,
}

impl Default for Deadline {
    fn default() -> Deadline {
        Deadline {
            at: 0,
            timeout: Timeout::None,
            output_progressed: false,
            input_consumed: 0,
            body_credit: 0,
            reads_timed: false,
        }
    }
}

impl Deadline {
    /// Whether it ran out by millisecond `now` of the loop's clock.
    pub(crate) fn expired(&self, now: u64) -> bool {
        self.at != 0 && !after(self.at, now as u32)
    }

    /// When it runs out, in the clock's milliseconds, seen at millisecond `now`.
    pub(crate) fn at(&self, now: u64) -> Option<u64> {
        let ahead = self.at.wrapping_sub(now as u32) as i32;
        (self.at != 0).then(|| now.saturating_add_signed(i64::from(ahead)))
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

    /// Bytes arrived: under a read timeout, progress, consumed or not.
    pub(crate) fn read_some(&mut self) {
        if self.timeout == Timeout::Read {
            self.input_consumed |= 1;
        }
    }

    /// Whether the protocol set a read timeout.
    pub(crate) fn reads_timed(&self) -> bool {
        self.reads_timed
    }

    /// The protocol set a read timeout (`true`) or cleared it: the next `rearm`
    /// sets a deadline afresh, whatever the timeout was.
    pub(crate) fn set_reads_timed(&mut self, timed: bool) {
        self.reads_timed = timed;
        self.timeout = Timeout::None;
    }

    /// Sets the deadline for what the connection is doing now (`under`), at
    /// millisecond `now`.
    ///
    /// A request's deadline runs from its first byte; bytes that trickle in without
    /// completing anything do not extend it. Once the protocol consumes some (a head
    /// completed), the next request's deadline starts afresh; but a body (the
    /// protocol busy with its input all consumed) earns time only as it arrives: one
    /// second per `min_input_rate` bytes, never more than the message timeout ahead,
    /// so that a body trickling a byte at a time runs out. A read timeout runs from
    /// the latest byte read, the send deadline from the peer's latest progress, the
    /// idle deadline from the latest activity.
    ///
    /// Returns how far ahead of `now` the deadline is (in milliseconds) when it may
    /// have come earlier: under one timeout it only ever moves later, so only a new
    /// timeout can (a connection starts under none, and a read timeout set or
    /// cleared starts it afresh).
    #[inline]
    pub(crate) fn rearm(&mut self, under: Under, now: u64, limits: &Limits) -> Option<u32> {
        let (timeout, millis) = match under {
            Under::Linger => (Timeout::Linger, LINGER_MS),
            Under::Connect => (Timeout::Connect, limits.connect),
            Under::Handshake => (Timeout::Connect, limits.handshake),
            Under::Send => (Timeout::Send, limits.send),
            Under::PartialMessage | Under::Busy => (Timeout::Message, limits.message),
            Under::Read(millis) => (Timeout::Read, millis),
            Under::OwnTimer | Under::Elsewhere | Under::Idle { never: true } => (Timeout::None, 0),
            Under::Idle { never: false } => (Timeout::Idle, limits.idle),
        };
        let now = now as u32;
        let consumed = std::mem::take(&mut self.input_consumed);
        let same = self.timeout == timeout;
        let keep = match timeout {
            Timeout::Message if same && consumed > 0 && under == Under::Busy => {
                self.earn_body_time(now, limits, consumed, millis);
                return None;
            }
            Timeout::Message | Timeout::Read => same && consumed == 0,
            Timeout::Linger | Timeout::Connect => same,
            Timeout::Send => same && !std::mem::take(&mut self.output_progressed),
            Timeout::Idle | Timeout::None => false,
        };
        if keep {
            return None;
        }
        if !same {
            // Progress made under the previous timeout does not extend this one.
            self.output_progressed = false;
            self.body_credit = 0;
        }
        self.timeout = timeout;
        self.at = if millis == 0 { 0 } else { ahead(now, millis) };
        (!same && millis > 0).then(|| self.at.wrapping_sub(now))
    }

    /// A body's `consumed` bytes arrived: its deadline moves on by a second per
    /// `min_input_rate` bytes, up to `millis` ahead of now.
    fn earn_body_time(&mut self, now: u32, limits: &Limits, consumed: u32, millis: u32) {
        if millis == 0 {
            return;
        }
        let ceiling = ahead(now, millis);
        let Some(rate) = Some(limits.min_input_rate).filter(|&rate| rate > 0) else {
            // No minimum rate: any progress restarts the timeout.
            self.at = ceiling;
            return;
        };
        self.body_credit = self.body_credit.saturating_add(consumed);
        let earned = (self.body_credit / rate).saturating_mul(1000).min(MAX_TIMEOUT_MS);
        self.body_credit %= rate;
        let later = self.at.wrapping_add(earned);
        self.at = if after(later, ceiling) { ceiling } else { later };
    }
}

/// The deadline `millis` after millisecond `now`, never 0 (which means none). One
/// more millisecond: the clock counts whole ones, so a deadline `millis` ahead could
/// otherwise come up to a millisecond early.
fn ahead(now: u32, millis: u32) -> u32 {
    now.wrapping_add(millis).wrapping_add(1).max(1)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The limits in milliseconds: 10 s, 100 B/s, 60 s, 30 s, 5 s, 10 s.
    const LIMITS: Limits = Limits {
        message: 10_000,
        min_input_rate: 100,
        idle: 60_000,
        send: 30_000,
        connect: 5_000,
        handshake: 10_000,
        max_held_input: 1024,
    };

    const IDLE: Under = Under::Idle { never: false };

    /// A second of the clock, in its milliseconds.
    const S: u64 = 1000;

    fn rearmed(deadline: &mut Deadline, under: Under, now: u64) -> u64 {
        deadline.rearm(under, now, &LIMITS);
        deadline.at(now).unwrap_or(0)
    }

    #[test]
    fn a_timeout_is_whole_milliseconds_rounded_up_at_most_24_days_and_none_is_zero() {
        assert_eq!(millis(None), 0);
        assert_eq!(millis(Some(Duration::ZERO)), 0);
        assert_eq!(millis(Some(Duration::from_nanos(1))), 1);
        assert_eq!(millis(Some(Duration::from_millis(15))), 15);
        assert_eq!(millis(Some(Duration::from_micros(2001))), 3);
        assert_eq!(millis(Some(Duration::from_secs(2))), 2000);
        assert_eq!(millis(Some(Duration::from_secs(30 * 24 * 3600))), MAX_TIMEOUT_MS);
        assert_eq!(millis(Some(Duration::MAX)), MAX_TIMEOUT_MS);
    }

    #[test]
    fn the_clock_counts_whole_milliseconds() {
        let start = Instant::now();
        assert_eq!(millis_between(start, start + Duration::from_micros(2999)), 2);
        assert_eq!(millis_between(start, start + Duration::from_secs(3)), 3000);
        assert_eq!(millis_between(start + Duration::from_secs(1), start), 0, "never backwards");
    }

    #[test]
    fn an_idle_connection_is_held_to_the_idle_timeout_from_its_latest_activity() {
        let mut deadline = Deadline::default();
        assert_eq!(
            rearmed(&mut deadline, IDLE, 100 * S),
            160 * S + 1,
            "60 s, and a millisecond for the clock's whole milliseconds"
        );
        assert_eq!(rearmed(&mut deadline, IDLE, 150 * S), 210 * S + 1, "activity restarts the idle timeout");
        assert!(!deadline.expired(210 * S) && deadline.expired(210 * S + 1));
    }

    #[test]
    fn a_protocol_timer_or_an_opt_out_takes_the_place_of_the_loops_timeouts() {
        let mut deadline = Deadline::default();
        assert_eq!(deadline.at(100), None, "a connection starts with none");
        assert_eq!(rearmed(&mut deadline, Under::OwnTimer, 100 * S), 0);
        assert_eq!(rearmed(&mut deadline, Under::Idle { never: true }, 100 * S), 0);
        assert!(!deadline.expired(u64::MAX), "no deadline never runs out");
    }

    #[test]
    fn a_partial_message_is_held_to_the_message_timeout_from_its_first_byte() {
        let mut deadline = Deadline::default();
        assert_eq!(rearmed(&mut deadline, Under::PartialMessage, 100 * S), 110 * S + 1);
        deadline.read_some();
        assert_eq!(
            rearmed(&mut deadline, Under::PartialMessage, 105 * S),
            110 * S + 1,
            "bytes that complete nothing"
        );
        // A message completed and the next one begun: its deadline starts afresh.
        deadline.consumed(30);
        assert_eq!(rearmed(&mut deadline, Under::PartialMessage, 106 * S), 116 * S + 1);
    }

    #[test]
    fn a_read_timeout_runs_from_the_latest_byte_read_consumed_or_not() {
        let mut deadline = Deadline::default();
        let read = Under::Read(250);
        assert_eq!(rearmed(&mut deadline, read, 1000), 1251, "250 ms");
        assert_eq!(rearmed(&mut deadline, read, 1100), 1251, "nothing read: it runs on");
        deadline.read_some();
        assert_eq!(rearmed(&mut deadline, read, 1200), 1451, "bytes read, not consumed: it starts again");
        deadline.consumed(5);
        assert_eq!(rearmed(&mut deadline, read, 1300), 1551, "held bytes consumed: progress too");
        assert_eq!(rearmed(&mut deadline, read, 1400), 1551);
        assert!(!deadline.expired(1550) && deadline.expired(1551));
        deadline.set_reads_timed(true);
        assert_eq!(rearmed(&mut deadline, Under::Read(100), 1500), 1601, "set again: afresh");
        deadline.set_reads_timed(false);
        assert_eq!(rearmed(&mut deadline, IDLE, 1500), 61_501, "cleared: the idle timeout again");
    }

    #[test]
    fn a_body_earns_a_second_per_min_input_rate_bytes_up_to_the_message_timeout() {
        let mut deadline = Deadline::default();
        assert_eq!(
            rearmed(&mut deadline, Under::Busy, 100 * S),
            110 * S + 1,
            "a busy protocol: the message timeout"
        );
        assert_eq!(
            rearmed(&mut deadline, Under::Busy, 102 * S),
            110 * S + 1,
            "nothing arrived: no time earned"
        );
        deadline.consumed(250);
        assert_eq!(
            rearmed(&mut deadline, Under::Busy, 105 * S),
            112 * S + 1,
            "250 bytes at 100 B/s: 2 s, 50 B of credit"
        );
        deadline.consumed(50);
        assert_eq!(
            rearmed(&mut deadline, Under::Busy, 105 * S),
            113 * S + 1,
            "the credit and 50 more: a third second"
        );
        deadline.consumed(10_000);
        assert_eq!(
            rearmed(&mut deadline, Under::Busy, 106 * S),
            116 * S + 1,
            "never more than the timeout ahead"
        );
        let no_minimum = Limits { min_input_rate: 0, ..LIMITS };
        deadline.consumed(1);
        deadline.rearm(Under::Busy, 110 * S, &no_minimum);
        assert_eq!(deadline.at(110 * S), Some(120 * S + 1), "with no minimum rate any progress restarts it");
        deadline.rearm(Under::Busy, 115 * S, &no_minimum);
        assert_eq!(deadline.at(115 * S), Some(120 * S + 1), "and no progress restarts nothing");
        let no_timeout = Limits { message: 0, ..LIMITS };
        deadline.consumed(1);
        deadline.rearm(Under::Busy, 111 * S, &no_timeout);
        assert_eq!(deadline.at(111 * S), Some(120 * S + 1), "with no message timeout nothing is earned");
    }

    #[test]
    fn credit_earned_under_one_timeout_does_not_carry_into_the_next() {
        let mut deadline = Deadline::default();
        rearmed(&mut deadline, Under::Busy, 100 * S);
        deadline.consumed(50);
        assert_eq!(rearmed(&mut deadline, Under::Busy, 101 * S), 110 * S + 1, "50 bytes: no second yet");
        assert_eq!(rearmed(&mut deadline, IDLE, 102 * S), 162 * S + 1, "the body ended: idle");
        assert_eq!(rearmed(&mut deadline, Under::Busy, 103 * S), 113 * S + 1, "a new body: a new deadline");
        deadline.consumed(50);
        assert_eq!(
            rearmed(&mut deadline, Under::Busy, 104 * S),
            113 * S + 1,
            "the first body's 50 bytes are not the second's"
        );
    }

    #[test]
    fn unsent_output_is_held_to_the_send_timeout_which_only_the_peers_progress_extends() {
        let mut deadline = Deadline::default();
        assert_eq!(rearmed(&mut deadline, Under::Send, 100 * S), 130 * S + 1);
        assert_eq!(rearmed(&mut deadline, Under::Send, 110 * S), 130 * S + 1, "no progress");
        deadline.output_progressed();
        assert_eq!(
            rearmed(&mut deadline, Under::Send, 120 * S),
            150 * S + 1,
            "the peer took some: it starts again"
        );
    }

    #[test]
    fn connect_and_linger_deadlines_are_not_extended() {
        let mut deadline = Deadline::default();
        assert_eq!(rearmed(&mut deadline, Under::Connect, 100 * S), 105 * S + 1, "5 s to connect");
        assert_eq!(rearmed(&mut deadline, Under::Connect, 103 * S), 105 * S + 1);
        assert_eq!(rearmed(&mut deadline, Under::Linger, 104 * S), 109 * S + 1);
        deadline.consumed(10);
        assert_eq!(rearmed(&mut deadline, Under::Linger, 107 * S), 109 * S + 1, "what the peer still sends");
    }

    #[test]
    fn only_a_first_deadline_or_a_new_timeout_can_bring_it_earlier() {
        let mut deadline = Deadline::default();
        assert_eq!(deadline.rearm(IDLE, 100 * S, &LIMITS), Some(60_001), "the first deadline");
        assert_eq!(deadline.rearm(IDLE, 101 * S, &LIMITS), None, "idle again: later");
        assert_eq!(deadline.rearm(Under::Send, 102 * S, &LIMITS), Some(30_001), "the send timeout: earlier");
        deadline.output_progressed();
        assert_eq!(deadline.rearm(Under::Send, 103 * S, &LIMITS), None, "progress: later");
        assert_eq!(deadline.rearm(Under::PartialMessage, 104 * S, &LIMITS), Some(10_001));
        deadline.consumed(5);
        assert_eq!(deadline.rearm(Under::PartialMessage, 105 * S, &LIMITS), None, "a message afresh: later");
        assert_eq!(deadline.rearm(Under::OwnTimer, 106 * S, &LIMITS), None, "no deadline");
        assert_eq!(deadline.at(106 * S), None);
        assert_eq!(deadline.rearm(IDLE, 107 * S, &LIMITS), Some(60_001));
    }

    #[test]
    fn deadlines_hold_across_the_wrap_of_the_clocks_32_bits() {
        let mut deadline = Deadline::default();
        let before_wrap = u64::from(u32::MAX) - 100;
        let at = rearmed(&mut deadline, Under::Read(250), before_wrap);
        assert_eq!(at, before_wrap + 251, "past the wrap, in the clock's full milliseconds");
        assert!(!deadline.expired(before_wrap + 250));
        assert!(deadline.expired(before_wrap + 251));
        assert!(deadline.expired(before_wrap + 251 + u64::from(MAX_TIMEOUT_MS)), "long after, still expired");
        let mut deadline = Deadline::default();
        let far = rearmed(&mut deadline, Under::Read(MAX_TIMEOUT_MS), before_wrap);
        assert_eq!(far, before_wrap + u64::from(MAX_TIMEOUT_MS) + 1);
        assert!(!deadline.expired(far - 1) && deadline.expired(far));
    }
}
