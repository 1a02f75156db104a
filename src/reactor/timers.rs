//! The protocol's timers: at most one per connection, kept in a binary min-heap of
//! deadlines that knows where each connection's entry is, so that setting, moving
//! and cancelling a timer is O(log n) and allocates nothing once the heap has grown
//! to the number of connections.

use std::time::{Duration, Instant};

use super::slab::Token;

#[derive(Clone, Copy, Debug)]
struct Entry {
    /// Nanoseconds after the heap's origin.
    deadline: u64,
    token: Token,
}

/// Deadlines by connection.
#[derive(Debug)]
pub(crate) struct Timers {
    origin: Instant,
    heap: Vec<Entry>,
    /// For each slab slot, its entry's index in `heap` plus one; 0 when it has none.
    position: Vec<u32>,
}

impl Timers {
    /// Timers whose deadlines are instants after `origin`.
    pub(crate) fn new(origin: Instant) -> Timers {
        Timers { origin, heap: Vec::new(), position: Vec::new() }
    }

    /// Sets the timer of connection `token` to `at`, replacing the one it had. An
    /// instant in the past fires at the next look.
    pub(crate) fn set(&mut self, token: Token, at: Instant) {
        let deadline =
            u64::try_from(at.saturating_duration_since(self.origin).as_nanos()).unwrap_or(u64::MAX);
        let slot = token.index();
        if slot >= self.position.len() {
            self.position.resize(slot + 1, 0);
        }
        match self.position[slot] {
            0 => {
                // sift_up places it, and records where.
                self.heap.push(Entry { deadline, token });
                self.sift_up(self.heap.len() - 1);
            }
            at => {
                let i = at as usize - 1;
                let earlier = deadline < self.heap[i].deadline;
                self.heap[i] = Entry { deadline, token };
                if earlier {
                    self.sift_up(i);
                } else {
                    self.sift_down(i);
                }
            }
        }
    }

    /// Cancels the timer of the connection in `token`'s slot, if it has one.
    pub(crate) fn cancel(&mut self, token: Token) {
        let Some(i) = self.index_of(token) else { return };
        self.position[token.index()] = 0;
        let last = self.heap.pop().expect("an entry at index i");
        if i < self.heap.len() {
            // The last entry fills the hole, and moves to where it belongs.
            self.place(i, last);
            self.sift_down(i);
            self.sift_up(i);
        }
    }

    /// Whether connection `token` has a timer set.
    pub(crate) fn is_set(&self, token: Token) -> bool {
        self.index_of(token).is_some()
    }

    /// When the timer of connection `token` fires, if it is set.
    pub(crate) fn deadline(&self, token: Token) -> Option<Instant> {
        self.index_of(token).map(|i| self.instant(self.heap[i].deadline))
    }

    /// The earliest deadline of all.
    pub(crate) fn next(&self) -> Option<Instant> {
        self.heap.first().map(|entry| self.instant(entry.deadline))
    }

    /// Removes and returns a connection whose deadline is at or before `now`.
    pub(crate) fn pop_due(&mut self, now: Instant) -> Option<Token> {
        let first = *self.heap.first()?;
        if self.instant(first.deadline) > now {
            return None;
        }
        self.cancel(first.token);
        Some(first.token)
    }

    fn index_of(&self, token: Token) -> Option<usize> {
        let at = *self.position.get(token.index())?;
        (at > 0 && self.heap[at as usize - 1].token == token).then(|| at as usize - 1)
    }

    fn instant(&self, deadline: u64) -> Instant {
        self.origin + Duration::from_nanos(deadline)
    }

    fn place(&mut self, i: usize, entry: Entry) {
        self.position[entry.token.index()] = i as u32 + 1;
        self.heap[i] = entry;
    }

    fn sift_up(&mut self, mut i: usize) {
        let entry = self.heap[i];
        while i > 0 {
            let parent = (i - 1) / 2;
            if self.heap[parent].deadline <= entry.deadline {
                break;
            }
            self.place(i, self.heap[parent]);
            i = parent;
        }
        self.place(i, entry);
    }

    fn sift_down(&mut self, mut i: usize) {
        let entry = self.heap[i];
        loop {
            let left = 2 * i + 1;
            let Some(mut child) = (left < self.heap.len()).then_some(left) else { break };
            if left + 1 < self.heap.len() && self.heap[left + 1].deadline < self.heap[left].deadline {
                child = left + 1;
            }
            if entry.deadline <= self.heap[child].deadline {
                break;
            }
            self.place(i, self.heap[child]);
            i = child;
        }
        self.place(i, entry);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A fake clock: instants are `origin` plus whole milliseconds.
    fn at(origin: Instant, ms: u64) -> Instant {
        origin + Duration::from_millis(ms)
    }

    fn token(slot: u32, generation: u32) -> Token {
        Token::new(slot, generation)
    }

    /// Pops every timer due by `ms`, in order.
    fn due(timers: &mut Timers, origin: Instant, ms: u64) -> Vec<u32> {
        std::iter::from_fn(|| timers.pop_due(at(origin, ms))).map(|t| t.index() as u32).collect()
    }

    #[test]
    fn timers_fire_in_deadline_order_and_only_when_due() {
        let origin = Instant::now();
        let mut timers = Timers::new(origin);
        for (slot, ms) in [(0, 50), (1, 10), (2, 30), (3, 10), (4, 70), (5, 20)] {
            timers.set(token(slot, 0), at(origin, ms));
        }
        assert_eq!(timers.next(), Some(at(origin, 10)));
        assert_eq!(due(&mut timers, origin, 9), Vec::<u32>::new());
        let mut first = due(&mut timers, origin, 20);
        first.sort_unstable();
        assert_eq!(first, [1, 3, 5]);
        assert_eq!(due(&mut timers, origin, 60), [2, 0]);
        assert_eq!(due(&mut timers, origin, 1000), [4]);
        assert_eq!(timers.next(), None);
    }

    #[test]
    fn setting_again_moves_the_timer_and_cancelling_removes_it() {
        let origin = Instant::now();
        let mut timers = Timers::new(origin);
        for slot in 0..100 {
            timers.set(token(slot, 0), at(origin, 1000 + u64::from(slot)));
        }
        timers.set(token(42, 0), at(origin, 5)); // earlier
        timers.set(token(0, 0), at(origin, 5000)); // later
        timers.cancel(token(7, 0));
        timers.cancel(token(7, 0)); // twice is harmless
        assert_eq!(timers.deadline(token(42, 0)), Some(at(origin, 5)));
        assert_eq!(timers.deadline(token(7, 0)), None);
        assert_eq!(due(&mut timers, origin, 10), [42]);
        let rest = due(&mut timers, origin, 2000);
        let expected: Vec<u32> = (1..100).filter(|&slot| slot != 7 && slot != 42).collect();
        assert_eq!(rest, expected, "the others, in deadline order");
        assert_eq!(due(&mut timers, origin, 5000), [0]);
    }

    #[test]
    fn a_timer_cancelled_by_close_never_fires_for_the_slots_next_connection() {
        let origin = Instant::now();
        let mut timers = Timers::new(origin);
        let old = token(3, 0);
        timers.set(old, at(origin, 10));
        // The connection closes: the loop cancels its timer; its slot is reused.
        timers.cancel(old);
        let new = token(3, 1);
        assert_eq!(timers.deadline(new), None, "the new connection has no timer");
        assert_eq!(timers.pop_due(at(origin, 100)), None);
        timers.set(new, at(origin, 200));
        assert_eq!(timers.deadline(old), None, "the old token names no timer");
        assert_eq!(timers.pop_due(at(origin, 300)), Some(new));
    }

    #[test]
    fn many_random_operations_keep_the_heap_ordered() {
        let origin = Instant::now();
        let mut timers = Timers::new(origin);
        let mut model: Vec<Option<u64>> = vec![None; 64];
        let mut state: u64 = 0x2545_f491_4f6c_dd1d;
        for _ in 0..20_000 {
            // xorshift64
            state ^= state << 13;
            state ^= state >> 7;
            state ^= state << 17;
            let slot = (state % 64) as u32;
            if state.is_multiple_of(3) {
                timers.cancel(token(slot, 0));
                model[slot as usize] = None;
            } else {
                let ms = (state >> 8) % 10_000;
                timers.set(token(slot, 0), at(origin, ms));
                model[slot as usize] = Some(ms);
            }
        }
        let mut expected: Vec<(u64, u32)> =
            model.iter().enumerate().filter_map(|(slot, ms)| Some(((*ms)?, slot as u32))).collect();
        expected.sort_unstable();
        let mut popped = Vec::new();
        while let Some(next) = timers.next() {
            let token = timers.pop_due(next).expect("the earliest is due at its own deadline");
            popped.push(((next - origin).as_millis() as u64, token.index() as u32));
        }
        let deadlines = |v: &[(u64, u32)]| v.iter().map(|e| e.0).collect::<Vec<_>>();
        assert_eq!(deadlines(&popped), deadlines(&expected));
        popped.sort_unstable();
        assert_eq!(popped, expected);
    }
}
