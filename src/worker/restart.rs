//! The restart policy: when a worker that died is started again, and when the master
//! gives up instead. Pure: it is told the time, so that its tests run in milliseconds.
//!
//! A worker that could not start (a non-zero exit status: it failed before serving,
//! and would fail again) counts towards giving up: [`CRASH_LIMIT`] of those within
//! [`CRASH_WINDOW`] and the master stops. One killed by a signal while it served
//! (the OOM killer, a crash under some input) is restarted however often it dies:
//! giving up would turn an attack on one worker into an outage of all. Either way
//! the restart waits a back-off that doubles while the worker dies soon after each
//! start, up to [`MAX_BACKOFF`], and starts afresh once a worker has served
//! [`HEALTHY_AFTER`].

use std::collections::VecDeque;
use std::time::{Duration, Instant};

use crate::sys::Exit;

/// A worker that fails to start this many times within [`CRASH_WINDOW`] makes the
/// master give up.
pub(crate) const CRASH_LIMIT: usize = 5;
pub(crate) const CRASH_WINDOW: Duration = Duration::from_secs(10);
/// The first restart's delay.
const FIRST_BACKOFF: Duration = Duration::from_millis(100);
/// The longest restart delay, and how long a failed fork waits to be tried again.
pub(crate) const MAX_BACKOFF: Duration = Duration::from_secs(5);
/// A worker that served this long before it died starts its back-off afresh.
const HEALTHY_AFTER: Duration = Duration::from_secs(10);

/// What to do about a worker that died.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Decision {
    /// Start it again after this delay.
    RestartIn(Duration),
    /// Stop serving: it cannot start.
    GiveUp,
}

/// One worker's restart history, across its restarts.
#[derive(Debug)]
pub(crate) struct Restarts {
    started_at: Instant,
    /// The delay before the next restart.
    backoff: Duration,
    /// When it recently died without having started.
    start_failures: VecDeque<Instant>,
}

impl Restarts {
    pub(crate) fn new(now: Instant) -> Restarts {
        Restarts { started_at: now, backoff: FIRST_BACKOFF, start_failures: VecDeque::new() }
    }

    /// The worker was (re)started at `at`.
    pub(crate) fn started(&mut self, at: Instant) {
        self.started_at = at;
    }

    /// The worker died at `at`, as `exit` says.
    pub(crate) fn died(&mut self, exit: Exit, at: Instant) -> Decision {
        if matches!(exit, Exit::Code(code) if code != 0) {
            self.start_failures.retain(|&failed| at.saturating_duration_since(failed) < CRASH_WINDOW);
            self.start_failures.push_back(at);
            if self.start_failures.len() >= CRASH_LIMIT {
                return Decision::GiveUp;
            }
        }
        if at.saturating_duration_since(self.started_at) >= HEALTHY_AFTER {
            self.backoff = FIRST_BACKOFF;
        }
        let delay = self.backoff;
        self.backoff = self.backoff.saturating_mul(2).min(MAX_BACKOFF);
        Decision::RestartIn(delay)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const FAILED: Exit = Exit::Code(1);
    const KILLED: Exit = Exit::Signal(libc::SIGKILL);

    fn ms(millis: u64) -> Duration {
        Duration::from_millis(millis)
    }

    /// Starts the worker at each restart's end, and dies `ran` after it, `times`
    /// times: the delays it was given, or where it gave up.
    fn die_soon(
        restarts: &mut Restarts,
        at: &mut Instant,
        exit: Exit,
        ran: Duration,
        times: usize,
    ) -> Vec<Decision> {
        (0..times)
            .map(|_| {
                *at += ran;
                let decision = restarts.died(exit, *at);
                if let Decision::RestartIn(delay) = decision {
                    *at += delay;
                    restarts.started(*at);
                }
                decision
            })
            .collect()
    }

    #[test]
    fn the_delay_doubles_while_a_worker_dies_soon_after_each_start_up_to_its_cap() {
        let mut at = Instant::now();
        let mut restarts = Restarts::new(at);
        let delays = die_soon(&mut restarts, &mut at, KILLED, ms(1), 9);
        let expected = [100, 200, 400, 800, 1600, 3200, 5000, 5000, 5000].map(|d| Decision::RestartIn(ms(d)));
        assert_eq!(delays, expected);
    }

    #[test]
    fn a_worker_that_served_long_enough_starts_its_back_off_afresh() {
        let mut at = Instant::now();
        let mut restarts = Restarts::new(at);
        die_soon(&mut restarts, &mut at, KILLED, ms(1), 4);
        let just_short = die_soon(&mut restarts, &mut at, KILLED, HEALTHY_AFTER - ms(1), 1);
        assert_eq!(just_short, [Decision::RestartIn(ms(1600))]);
        let healthy = die_soon(&mut restarts, &mut at, KILLED, HEALTHY_AFTER, 2);
        assert_eq!(healthy, [Decision::RestartIn(FIRST_BACKOFF), Decision::RestartIn(FIRST_BACKOFF)]);
    }

    #[test]
    fn the_fifth_start_failure_within_the_window_gives_up() {
        let mut at = Instant::now();
        let mut restarts = Restarts::new(at);
        let decisions = die_soon(&mut restarts, &mut at, FAILED, ms(1), CRASH_LIMIT);
        assert!(
            decisions[..CRASH_LIMIT - 1].iter().all(|d| matches!(d, Decision::RestartIn(_))),
            "{decisions:?}"
        );
        assert_eq!(decisions[CRASH_LIMIT - 1], Decision::GiveUp);
    }

    #[test]
    fn a_worker_killed_while_serving_is_restarted_however_often_it_dies() {
        let mut at = Instant::now();
        let mut restarts = Restarts::new(at);
        let decisions = die_soon(&mut restarts, &mut at, KILLED, ms(1), 50);
        assert!(!decisions.contains(&Decision::GiveUp));
        // A clean exit of a worker that was not asked to stop is not a start failure either.
        let decisions = die_soon(&mut restarts, &mut at, Exit::Code(0), ms(1), 10);
        assert!(!decisions.contains(&Decision::GiveUp));
    }

    #[test]
    fn start_failures_older_than_the_window_are_forgotten() {
        let start = Instant::now();
        let mut restarts = Restarts::new(start);
        // Four failures, then one just outside the window from the first: the first
        // is forgotten, four remain.
        for i in 0..CRASH_LIMIT as u32 - 1 {
            assert_ne!(restarts.died(FAILED, start + ms(10) * i), Decision::GiveUp);
        }
        assert_ne!(restarts.died(FAILED, start + CRASH_WINDOW), Decision::GiveUp);
        // One more within the window of the second makes five.
        assert_eq!(restarts.died(FAILED, start + CRASH_WINDOW + ms(1)), Decision::GiveUp);
    }
}
