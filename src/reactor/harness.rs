//! [`Harness`]: a protocol on one connection with no socket and no loop, on a
//! clock that moves only when told, for tests and examples.

use std::time::{Duration, Instant, SystemTime};

use super::context::Io;
use super::output::Output;
use super::slab::Token;
use super::timers::Timers;
use super::{Closed, Flow, Protocol, Verdict};

/// Drives a [`Protocol`] the way the loop does, without sockets: each call is one
/// callback, its output collects until [`take_output`](Harness::take_output), and
/// the timer fires when [`advance`](Harness::advance) moves the clock past it.
///
/// ```
/// use std::time::Duration;
/// use percore::reactor::{Flow, Harness, Io, Protocol, Verdict};
///
/// /// Says "late" one second after each input.
/// struct Late;
/// impl Protocol for Late {
///     type Conn = ();
///     fn on_data(&mut self, _: &mut (), input: &[u8], io: &mut Io<'_>) -> Verdict {
///         io.set_timer(Duration::from_secs(1));
///         Verdict::keep(input.len())
///     }
///     fn on_timer(&mut self, _: &mut (), io: &mut Io<'_>) -> Flow {
///         io.write(b"late");
///         Flow::Continue
///     }
/// }
///
/// let mut harness = Harness::new(Late);
/// harness.data(b"x");
/// assert_eq!(harness.advance(Duration::from_millis(999)), None);
/// assert_eq!(harness.advance(Duration::from_millis(1)), Some(Flow::Continue));
/// assert_eq!(harness.take_output(), b"late");
/// ```
#[derive(Debug)]
pub struct Harness<P: Protocol> {
    protocol: P,
    conn: P::Conn,
    output: Output,
    collected: Vec<u8>,
    timers: Timers,
    now: Instant,
}

/// The one connection's token.
const TOKEN: Token = Token(0);

impl<P: Protocol> Harness<P> {
    /// `protocol` with one connection, not yet opened, at the harness's time zero.
    pub fn new(protocol: P) -> Harness<P> {
        let now = Instant::now();
        Harness {
            protocol,
            conn: P::Conn::default(),
            output: Output::new(),
            collected: Vec::new(),
            timers: Timers::new(now),
            now,
        }
    }

    /// Calls [`Protocol::on_open`].
    pub fn open(&mut self) -> Flow {
        self.call(|protocol, conn, io| protocol.on_open(conn, io))
    }

    /// Calls [`Protocol::on_data`] with `input`, as it is: the caller keeps what
    /// was not consumed.
    pub fn data(&mut self, input: &[u8]) -> Verdict {
        self.call(|protocol, conn, io| protocol.on_data(conn, input, io))
    }

    /// Calls [`Protocol::on_wake`].
    pub fn wake(&mut self) -> Flow {
        self.call(|protocol, conn, io| protocol.on_wake(conn, io))
    }

    /// Calls [`Protocol::on_tick`] with `now`, as the loop does at the turn of a
    /// wall-clock second.
    pub fn tick(&mut self, now: SystemTime) {
        self.protocol.on_tick(now);
    }

    /// Calls [`Protocol::on_drain`], as the loop does when a graceful stop begins.
    pub fn drain(&mut self) {
        self.protocol.on_drain();
    }

    /// Calls [`Protocol::on_close`].
    pub fn close(&mut self, closed: Closed, unconsumed: &[u8]) {
        self.timers.cancel(TOKEN);
        self.protocol.on_close(&mut self.conn, closed, unconsumed);
    }

    /// Moves the clock on by `by`; if the timer is due by then, clears it and calls
    /// [`Protocol::on_timer`] (with the clock at the timer's deadline).
    pub fn advance(&mut self, by: Duration) -> Option<Flow> {
        let until = self.now + by;
        let due = self.timers.deadline(TOKEN).filter(|&deadline| deadline <= until);
        let flow = due.map(|deadline| {
            self.now = self.now.max(deadline);
            self.timers.cancel(TOKEN);
            self.call(|protocol, conn, io| protocol.on_timer(conn, io))
        });
        self.now = until;
        flow
    }

    /// The harness's clock.
    pub fn now(&self) -> Instant {
        self.now
    }

    /// When the timer fires, if it is set.
    pub fn timer(&self) -> Option<Instant> {
        self.timers.deadline(TOKEN)
    }

    /// Everything written since the last call, in order.
    pub fn take_output(&mut self) -> Vec<u8> {
        std::mem::take(&mut self.collected)
    }

    /// The protocol.
    pub fn protocol(&self) -> &P {
        &self.protocol
    }

    /// The connection's state.
    pub fn conn(&self) -> &P::Conn {
        &self.conn
    }

    fn call<R>(&mut self, callback: impl FnOnce(&mut P, &mut P::Conn, &mut Io<'_>) -> R) -> R {
        self.output.clear();
        let queued = self.collected.len();
        let mut io = Io::new(TOKEN, self.now, &mut self.output, queued, &mut self.timers);
        let result = callback(&mut self.protocol, &mut self.conn, &mut io);
        self.collected.extend(self.output.to_vec());
        result
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Records the ticks and closes it hears of; sets a timer on each input.
    #[derive(Default)]
    struct Recorder {
        ticks: Vec<SystemTime>,
        closes: Vec<(Closed, Vec<u8>)>,
    }

    impl Protocol for Recorder {
        type Conn = ();

        fn on_data(&mut self, _conn: &mut (), _input: &[u8], io: &mut Io<'_>) -> Verdict {
            io.set_timer(Duration::from_secs(1));
            Verdict::keep(0)
        }

        fn on_tick(&mut self, now: SystemTime) {
            self.ticks.push(now);
        }

        fn on_close(&mut self, _conn: &mut (), closed: Closed, unconsumed: &[u8]) {
            self.closes.push((closed, unconsumed.to_vec()));
        }
    }

    #[test]
    fn a_tick_and_a_close_reach_the_protocol_and_a_close_cancels_the_timer() {
        let mut harness = Harness::new(Recorder::default());
        let second = SystemTime::UNIX_EPOCH + Duration::from_secs(1_000_000);
        harness.tick(second);
        assert_eq!(harness.protocol().ticks, [second]);
        harness.data(b"half");
        assert_eq!(harness.timer(), Some(harness.now() + Duration::from_secs(1)));
        harness.close(Closed::ByPeer, b"half");
        assert_eq!(harness.protocol().closes, [(Closed::ByPeer, b"half".to_vec())]);
        assert_eq!(harness.timer(), None, "a closed connection's timer never fires");
        assert_eq!(harness.advance(Duration::from_secs(2)), None);
    }
}
