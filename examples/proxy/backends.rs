//! The backends a worker forwards to: round robin, skipping one that failed for a
//! while (nginx's `max_fails=1 fail_timeout=T`).

use std::time::{Duration, Instant};

use percore::listen::Address;

/// The backends, the turn, and which are down until when.
#[derive(Debug)]
pub struct Backends {
    addrs: Vec<Address>,
    /// When each backend that failed may be tried again.
    down_until: Vec<Option<Instant>>,
    /// The backend whose turn is next.
    next: usize,
    fail_timeout: Duration,
}

impl Backends {
    /// `addrs` (at least one), each skipped for `fail_timeout` after it failed (none:
    /// never skipped).
    pub fn new(addrs: Vec<Address>, fail_timeout: Duration) -> Backends {
        assert!(!addrs.is_empty(), "a proxy needs a backend");
        let down_until = vec![None; addrs.len()];
        Backends { addrs, down_until, next: 0, fail_timeout }
    }

    /// How many there are.
    pub fn len(&self) -> usize {
        self.addrs.len()
    }

    pub fn addr(&self, backend: usize) -> &Address {
        &self.addrs[backend]
    }

    /// The backend for the next request, at `now`: the next in turn that is not
    /// down. When every one is down, the next in turn all the same: a try costs no
    /// more than the 502 the request would get untried, and finds a backend that is
    /// back (nginx instead answers 502 until one's fail timeout is over).
    pub fn pick(&mut self, now: Instant) -> usize {
        let count = self.addrs.len();
        let first = self.next;
        let up = (0..count).map(|step| (first + step) % count).find(|&b| self.is_up(b, now));
        let backend = up.unwrap_or(first % count);
        self.next = (backend + 1) % count;
        backend
    }

    /// `backend` refused, or did not answer in time, at `now`: it is skipped until
    /// its fail timeout is over.
    pub fn failed(&mut self, backend: usize, now: Instant) {
        if !self.fail_timeout.is_zero() {
            self.down_until[backend] = now.checked_add(self.fail_timeout);
        }
    }

    fn is_up(&self, backend: usize, now: Instant) -> bool {
        self.down_until[backend].is_none_or(|until| until <= now)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn backends(count: u16) -> Backends {
        let addrs = (0..count).map(|i| Address::from(([127, 0, 0, 1], 8000 + i))).collect();
        Backends::new(addrs, Duration::from_secs(10))
    }

    #[test]
    fn backends_take_turns() {
        let (mut backends, now) = (backends(3), Instant::now());
        let turns: Vec<usize> = (0..7).map(|_| backends.pick(now)).collect();
        assert_eq!(turns, [0, 1, 2, 0, 1, 2, 0]);
    }

    #[test]
    fn a_backend_that_failed_is_skipped_until_its_fail_timeout_is_over() {
        let (mut backends, now) = (backends(3), Instant::now());
        backends.failed(1, now);
        let turns: Vec<usize> = (0..4).map(|_| backends.pick(now)).collect();
        assert_eq!(turns, [0, 2, 0, 2]);
        let later = now + Duration::from_secs(10);
        let turns: Vec<usize> = (0..3).map(|_| backends.pick(later)).collect();
        assert_eq!(turns, [0, 1, 2], "back in turn once its fail timeout is over");
    }

    #[test]
    fn when_every_backend_is_down_each_is_tried_in_turn() {
        let (mut backends, now) = (backends(2), Instant::now());
        backends.failed(0, now);
        backends.failed(1, now);
        let turns: Vec<usize> = (0..3).map(|_| backends.pick(now)).collect();
        assert_eq!(turns, [0, 1, 0]);
    }

    #[test]
    fn a_fail_timeout_of_zero_never_marks_a_backend_down() {
        let now = Instant::now();
        let mut backends = Backends::new(vec![Address::from(([127, 0, 0, 1], 1)); 2], Duration::ZERO);
        backends.failed(0, now);
        assert_eq!([backends.pick(now), backends.pick(now)], [0, 1]);
    }
}
