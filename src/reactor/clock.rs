//! The loop's coarse clock: whole seconds for deadlines, the wall-clock second for
//! the once-a-second tick.

use std::time::{Instant, SystemTime, UNIX_EPOCH};

#[derive(Debug)]
pub(crate) struct Clock {
    start: Instant,
    /// Whole seconds since `start`, as of the last tick; starts at 1 so that a
    /// deadline of 0 can mean "none".
    now: u32,
    wall_second: u64,
    /// Milliseconds into `wall_second`, as of the last look at the wall clock.
    wall_millis: u32,
}

impl Clock {
    pub(crate) fn new() -> Clock {
        let (wall_second, wall_millis) = split(SystemTime::now());
        Clock { start: Instant::now(), now: 1, wall_second, wall_millis }
    }

    /// Seconds on the loop's monotonic clock, as of the last tick.
    pub(crate) fn now(&self) -> u32 {
        self.now
    }

    /// Milliseconds until the wall clock turns to the next second (at least 1), as
    /// of the last [`advance`](Clock::advance): the loop looks at the wall clock once
    /// per turn, and what it does between that look and its next wait is short.
    pub(crate) fn ms_to_next_second(&self) -> i32 {
        1000 - self.wall_millis as i32
    }

    /// At the turn of a wall-clock second (or a jump of the clock either way), moves
    /// the clock on and returns the wall time; otherwise `None`.
    pub(crate) fn advance(&mut self) -> Option<SystemTime> {
        let wall = SystemTime::now();
        let (second, millis) = split(wall);
        self.wall_millis = millis;
        if second == self.wall_second {
            return None;
        }
        self.wall_second = second;
        self.now = 1 + self.start.elapsed().as_secs() as u32;
        Some(wall)
    }
}

/// The whole seconds of `time` since the epoch, and the milliseconds into the last.
fn split(time: SystemTime) -> (u64, u32) {
    time.duration_since(UNIX_EPOCH).map_or((0, 0), |d| (d.as_secs(), d.subsec_millis()))
}
