//! The idle upstream connections of one worker, kept for the next request to its
//! backend: nginx's `keepalive N` (at most N idle connections, busy ones not
//! counted, the most recently used taken first), with the surplus closed at the
//! next tick rather than at once.
//!
//! # Why the surplus waits for a tick
//!
//! nginx closes the least recently used idle connection as soon as a release takes
//! the pool over N. Under a steady load with more requests in flight than N, that
//! churns as soon as answers come in batches: a loop pass that ends 100 exchanges
//! makes 100 connections idle, closes the 36 over a cap of 64, and the next pass,
//! whose 100 requests find 64, opens 36 again; nginx gets away with it because its
//! passes are small, this loop's are not (it reads every ready connection before it
//! waits again). So here a release never closes anything: once a second the pool
//! closes what it holds over N, oldest first, of the connections that stayed idle
//! since the tick before. A connection taken again within the second was needed, and
//! stays; under a steady load nothing is closed and nothing opened, whatever the
//! size of a pass; when the load falls, the pool is back to N within two seconds.
//! The surplus is at most the most requests in flight at once in that second.

/// Idle connections (of any id type: the proxy's are `ConnId`s), per backend.
#[derive(Debug)]
pub struct Pool<Id> {
    /// Idle connections kept past a tick, at most.
    cap: usize,
    /// Each backend's idle connections, the most recently released last.
    idle: Vec<Vec<Idle<Id>>>,
    /// Ticks so far: the age of an idle connection, in whole seconds.
    ticks: u64,
}

#[derive(Clone, Copy, Debug)]
struct Idle<Id> {
    id: Id,
    /// The tick count when it was released.
    since: u64,
}

impl<Id: Copy + PartialEq> Pool<Id> {
    /// A pool for `backends` backends, keeping at most `cap` idle connections.
    pub fn new(backends: usize, cap: usize) -> Pool<Id> {
        Pool { cap, idle: (0..backends).map(|_| Vec::new()).collect(), ticks: 0 }
    }

    /// The most recently released idle connection to `backend`, taken out of the
    /// pool, if it has one.
    pub fn take(&mut self, backend: usize) -> Option<Id> {
        self.idle[backend].pop().map(|idle| idle.id)
    }

    /// Keeps `id`, a connection to `backend` that carried its last answer whole and
    /// may carry another request.
    pub fn put(&mut self, backend: usize, id: Id) {
        self.idle[backend].push(Idle { id, since: self.ticks });
    }

    /// Forgets `id`, an idle connection to `backend` that closed (the backend
    /// closed it, or the loop's idle timeout did); nothing if it is not idle.
    pub fn remove(&mut self, backend: usize, id: Id) {
        self.idle[backend].retain(|idle| idle.id != id);
    }

    /// Idle connections now.
    pub fn len(&self) -> usize {
        self.idle.iter().map(Vec::len).sum()
    }

    /// A second passed: returns the connections to close, the oldest of those over
    /// the cap that stayed idle since the last tick, taken out of the pool.
    pub fn tick(&mut self) -> Vec<Id> {
        let surplus = self.len().saturating_sub(self.cap);
        let ticks = self.ticks;
        self.ticks += 1;
        if surplus == 0 {
            return Vec::new();
        }
        let mut stale: Vec<Idle<Id>> =
            self.idle.iter().flatten().filter(|idle| idle.since < ticks).copied().collect();
        stale.sort_by_key(|idle| idle.since);
        stale.truncate(surplus);
        for backend in &mut self.idle {
            backend.retain(|idle| !stale.iter().any(|closed| closed.id == idle.id));
        }
        stale.into_iter().map(|idle| idle.id).collect()
    }

    /// Takes every idle connection out of the pool, to close them (a graceful stop).
    pub fn drain(&mut self) -> Vec<Id> {
        self.idle.iter_mut().flat_map(std::mem::take).map(|idle| idle.id).collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_most_recently_released_connection_is_taken_first_from_its_backends_own() {
        let mut pool = Pool::new(2, 8);
        pool.put(0, 1);
        pool.put(1, 2);
        pool.put(0, 3);
        assert_eq!([pool.take(0), pool.take(0), pool.take(0)], [Some(3), Some(1), None]);
        assert_eq!(pool.take(1), Some(2));
    }

    #[test]
    fn a_closed_connection_is_forgotten() {
        let mut pool = Pool::new(1, 8);
        pool.put(0, 1);
        pool.put(0, 2);
        pool.remove(0, 1);
        pool.remove(0, 7);
        assert_eq!((pool.len(), pool.take(0), pool.take(0)), (1, Some(2), None));
    }

    #[test]
    fn the_surplus_over_the_cap_is_closed_once_it_stayed_idle_a_whole_tick_oldest_first() {
        let mut pool = Pool::new(2, 2);
        pool.put(0, 1);
        pool.put(1, 2);
        assert_eq!(pool.tick(), Vec::<i32>::new(), "within the cap");
        pool.put(0, 3);
        pool.put(1, 4);
        // 3 and 4 were released since the last tick: kept, though over the cap.
        assert_eq!(pool.tick(), [1, 2]);
        assert_eq!(pool.len(), 2);
        assert_eq!(pool.tick(), Vec::<i32>::new());
    }

    #[test]
    fn a_steady_load_over_the_cap_closes_nothing_whatever_its_batches() {
        let (mut pool, mut opened) = (Pool::new(1, 64), 0);
        let mut next_id = 0;
        for _second in 0..5 {
            for _pass in 0..100 {
                // A pass takes 100 connections for 100 requests, then their answers
                // come and release them all.
                let mut busy = Vec::new();
                for _ in 0..100 {
                    busy.push(pool.take(0).unwrap_or_else(|| {
                        opened += 1;
                        next_id += 1;
                        next_id
                    }));
                }
                busy.into_iter().for_each(|id| pool.put(0, id));
            }
            assert_eq!(pool.tick(), Vec::<i32>::new());
        }
        assert_eq!(opened, 100, "opened once, then reused");
    }

    #[test]
    fn a_drain_takes_every_idle_connection() {
        let mut pool = Pool::new(2, 1);
        pool.put(0, 1);
        pool.put(1, 2);
        let mut drained = pool.drain();
        drained.sort_unstable();
        assert_eq!((drained, pool.len()), (vec![1, 2], 0));
    }
}
