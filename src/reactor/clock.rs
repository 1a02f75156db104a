//! The loop's clock, read once per turn: the instant for timers, deadlines and
//! what a protocol sees as now, and the wall-clock second for the once-a-second
//! tick. The wall clock is read only when
//! the monotonic one says its second should have turned, so a turn costs one read.

use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

/// An instant no timer or deadline reaches: a century after `now`, for a duration
/// too large to add to it.
pub(crate) fn far_future(now: Instant) -> Instant {
    now + Duration::from_secs(100 * 365 * 24 * 3600)
}

#[derive(Debug)]
pub(crate) struct Clock {
    start: Instant,
    /// As of the last look.
    instant: Instant,
    wall_second: u64,
    /// When, by the monotonic clock, the wall clock's next second begins, as of the
    /// last look at it: the wall clock is not read again before.
    next_second: Instant,
}

impl Clock {
    pub(crate) fn new() -> Clock {
        let (wall_second, into_second) = split(SystemTime::now());
        let start = Instant::now();
        let next_second = start + (Duration::from_secs(1) - into_second);
        Clock { start, instant: start, wall_second, next_second }
    }

    /// When the clock started: the origin of the loop's timers.
    pub(crate) fn start(&self) -> Instant {
        self.start
    }

    /// The instant of the last look.
    pub(crate) fn instant(&self) -> Instant {
        self.instant
    }

    /// How long until the wall clock turns to the next second, as of the last look:
    /// the loop looks once per turn, and what it does between that look and its
    /// next wait is short.
    pub(crate) fn to_next_second(&self) -> Duration {
        self.next_second.saturating_duration_since(self.instant)
    }

    /// Looks at the clock. At the turn of a wall-clock second (or a jump of the wall
    /// clock either way, seen at the latest a second later), returns the wall time.
    pub(crate) fn advance(&mut self) -> Option<SystemTime> {
        self.instant = Instant::now();
        if self.instant < self.next_second {
            return None;
        }
        let wall = SystemTime::now();
        let (second, into_second) = split(wall);
        self.next_second = self.instant + (Duration::from_secs(1) - into_second);
        if second == self.wall_second {
            // The monotonic clock ran ahead of the wall clock (which is slewed):
            // the second turns in a moment.
            return None;
        }
        self.wall_second = second;
        Some(wall)
    }
}

/// The whole seconds of `time` since the epoch, and the time into the last.
fn split(time: SystemTime) -> (u64, Duration) {
    time.duration_since(UNIX_EPOCH)
        .map_or((0, Duration::ZERO), |d| (d.as_secs(), d - Duration::from_secs(d.as_secs())))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn split_gives_the_whole_seconds_and_the_time_into_the_last() {
        let time = UNIX_EPOCH + Duration::from_millis(5_250);
        assert_eq!(split(time), (5, Duration::from_millis(250)));
        assert_eq!(split(UNIX_EPOCH - Duration::from_secs(1)), (0, Duration::ZERO), "before 1970");
    }

    /// Advances `clock` until the wall-clock second turns (at most 3 s of looking),
    /// returning the wall time it gave.
    fn until_the_second_turns(clock: &mut Clock) -> SystemTime {
        let deadline = Instant::now() + Duration::from_secs(3);
        loop {
            assert!(Instant::now() < deadline, "no turn of the second in 3 s");
            if let Some(wall) = clock.advance() {
                return wall;
            }
            std::thread::sleep(Duration::from_millis(5));
        }
    }

    #[test]
    fn the_tick_comes_when_the_wall_second_turns() {
        let mut clock = Clock::new();
        let first_second = clock.wall_second;
        for turn in 1..=3 {
            let wall = until_the_second_turns(&mut clock);
            assert!(split(wall).0 > first_second, "turn {turn}: a new second, not the same one");
            assert_eq!(clock.wall_second, split(wall).0);
            let to_next = clock.to_next_second();
            assert!(to_next > Duration::ZERO && to_next <= Duration::from_secs(1), "{to_next:?}");
        }
        // Three turns of the wall second are more than two seconds of the monotonic
        // clock, however late the first came.
        let since_start = clock.instant() - clock.start();
        assert!(since_start > Duration::from_secs(2), "{since_start:?}");
    }
}
