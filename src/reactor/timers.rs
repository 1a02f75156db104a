//! Deadlines by connection, at most one per connection slot, in a binary min-heap
//! that knows where each slot's entry is: setting, moving and cancelling one is
//! O(log n), and allocates nothing once the heap has grown to the number of
//! connections. Two heaps use it: the protocol's timers ([`Timers`], instants) and
//! the loop's own timeouts (the machine's, in its clock's milliseconds).

use std::time::{Duration, Instant};

use super::slab::Token;

#[derive(Clone, Copy, Debug)]
struct Entry {
    key: u64,
    token: Token,
}

/// Keys (points in time, in whatever unit the owner counts) by connection slot.
#[derive(Debug, Default)]
pub(crate) struct Heap {
    heap: Vec<Entry>,
    /// For each slab slot, its entry's index in `heap` plus one; 0 when it has none.
    position: Vec<u32>,
}

impl Heap {
    /// Sets the entry of `token`'s slot to `key`, replacing the one it had (whichever
    /// connection of the slot it was for).
    pub(crate) fn set(&mut self, token: Token, key: u64) {
        match self.slot_index(token) {
            None => {
                // sift_up places it, and records where.
                self.heap.push(Entry { key, token });
                self.sift_up(self.heap.len() - 1);
            }
            Some(i) => self.replace(i, Entry { key, token }),
        }
    }

    /// Makes sure connection `token` has an entry at or before `key`: sets one unless
    /// it has one already that early. An entry left earlier than a key that moved on
    /// comes due early, and its owner looks again then: a key that only moves later
    /// (a deadline each request extends) costs a comparison, not a move in the heap.
    #[inline]
    pub(crate) fn lower(&mut self, token: Token, key: u64) {
        match self.slot_index(token) {
            Some(i) if self.heap[i].token == token && self.heap[i].key <= key => {}
            Some(i) => self.replace(i, Entry { key, token }),
            None => self.set(token, key),
        }
    }

    /// Removes the entry of connection `token`, if it has one.
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

    /// The key of connection `token`'s entry, if it has one.
    pub(crate) fn key(&self, token: Token) -> Option<u64> {
        self.index_of(token).map(|i| self.heap[i].key)
    }

    /// The earliest key of all.
    pub(crate) fn first(&self) -> Option<u64> {
        self.heap.first().map(|entry| entry.key)
    }

    /// Removes and returns a connection whose key is at or before `now`.
    pub(crate) fn pop_due(&mut self, now: u64) -> Option<Token> {
        let first = *self.heap.first().filter(|first| first.key <= now)?;
        self.cancel(first.token);
        Some(first.token)
    }

    /// The index of the entry of `token`'s slot, whichever connection it is for.
    fn slot_index(&self, token: Token) -> Option<usize> {
        let at = *self.position.get(token.index())?;
        (at > 0).then(|| at as usize - 1)
    }

    fn index_of(&self, token: Token) -> Option<usize> {
        self.slot_index(token).filter(|&i| self.heap[i].token == token)
    }

    /// Puts `entry` at index `i` in place of the entry there, and moves it to where
    /// it belongs.
    fn replace(&mut self, i: usize, entry: Entry) {
        let earlier = entry.key < self.heap[i].key;
        self.heap[i] = entry;
        if earlier {
            self.sift_up(i);
        } else {
            self.sift_down(i);
        }
    }

    fn place(&mut self, i: usize, entry: Entry) {
        let slot = entry.token.index();
        if slot >= self.position.len() {
            self.position.resize(slot + 1, 0);
        }
        self.position[slot] = i as u32 + 1;
        self.heap[i] = entry;
    }

    fn sift_up(&mut self, mut i: usize) {
        let entry = self.heap[i];
        while i > 0 {
            let parent = (i - 1) / 2;
            if self.heap[parent].key <= entry.key {
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
            if left + 1 < self.heap.len() && self.heap[left + 1].key < self.heap[left].key {
                child = left + 1;
            }
            if entry.key <= self.heap[child].key {
                break;
            }
            self.place(i, self.heap[child]);
            i = child;
        }
        self.place(i, entry);
    }
}

/// The protocol's timers: at most one per connection, at an instant.
#[derive(Debug)]
pub(crate) struct Timers {
    origin: Instant,
    /// Nanoseconds after `origin`.
    heap: Heap,
}

impl Timers {
    /// Timers whose deadlines are instants after `origin`.
    pub(crate) fn new(origin: Instant) -> Timers {
        Timers { origin, heap: Heap::default() }
    }

    /// Sets the timer of connection `token` to `at`, replacing the one it had. An
    /// instant in the past fires at the next look.
    pub(crate) fn set(&mut self, token: Token, at: Instant) {
        self.heap.set(token, self.key(at));
    }

    /// Cancels the timer of connection `token`, if it has one.
    pub(crate) fn cancel(&mut self, token: Token) {
        self.heap.cancel(token);
    }

    /// Whether connection `token` has a timer set.
    pub(crate) fn is_set(&self, token: Token) -> bool {
        self.heap.key(token).is_some()
    }

    /// When the timer of connection `token` fires, if it is set.
    pub(crate) fn deadline(&self, token: Token) -> Option<Instant> {
        self.heap.key(token).map(|key| self.instant(key))
    }

    /// The earliest deadline of all.
    pub(crate) fn next(&self) -> Option<Instant> {
        self.heap.first().map(|key| self.instant(key))
    }

    /// Removes and returns a connection whose deadline is at or before `now`.
    pub(crate) fn pop_due(&mut self, now: Instant) -> Option<Token> {
        // No key made of `now` when no timer is set, as in most turns.
        self.heap.first()?;
        self.heap.pop_due(self.key(now))
    }

    fn key(&self, at: Instant) -> u64 {
        u64::try_from(at.saturating_duration_since(self.origin).as_nanos()).unwrap_or(u64::MAX)
    }

    fn instant(&self, key: u64) -> Instant {
        self.origin + Duration::from_nanos(key)
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

    #[test]
    fn lowering_moves_an_entry_only_earlier_and_takes_the_slot_from_a_closed_connection() {
        let mut heap = Heap::default();
        heap.lower(token(1, 0), 100);
        heap.lower(token(2, 0), 50);
        heap.lower(token(1, 0), 300);
        assert_eq!(heap.key(token(1, 0)), Some(100), "a later key leaves the entry where it was");
        heap.lower(token(1, 0), 20);
        assert_eq!(heap.key(token(1, 0)), Some(20), "an earlier one moves it");
        assert_eq!(heap.first(), Some(20));
        // The slot's connection closed with its entry left in; the next one in the
        // slot takes the entry over, at its own key, even a later one.
        heap.lower(token(1, 1), 400);
        assert_eq!((heap.key(token(1, 0)), heap.key(token(1, 1))), (None, Some(400)));
        assert_eq!(heap.pop_due(1000), Some(token(2, 0)));
        assert_eq!(heap.pop_due(1000), Some(token(1, 1)));
        assert_eq!(heap.pop_due(1000), None, "one entry a slot");
    }

    #[test]
    fn an_entry_left_for_a_closed_connection_comes_due_under_its_own_token() {
        let mut heap = Heap::default();
        heap.set(token(5, 0), 10);
        assert_eq!(heap.pop_due(9), None);
        assert_eq!(heap.pop_due(10), Some(token(5, 0)), "its owner finds the slot moved on");
        assert_eq!(heap.first(), None);
    }
}
