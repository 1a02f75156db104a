//! Counters shared by a master and its workers: one anonymous shared mapping made
//! before the forks, a set of atomic counters per worker. Each worker writes its
//! own set; the master reads them all, for live per-core figures.

use std::io;
use std::sync::atomic::AtomicU64;

/// Counters in a set: one cache line, so that workers never share one.
pub const COUNTERS_PER_SET: usize = 8;

/// One worker's set of counters.
pub type Counters = [AtomicU64; COUNTERS_PER_SET];

/// `sets` sets of counters in memory shared with every process forked after.
#[derive(Debug)]
pub struct SharedCounters {
    ptr: *mut Counters,
    sets: usize,
}

// SAFETY: the mapping holds atomics only, and is unmapped once, on drop.
unsafe impl Send for SharedCounters {}
// SAFETY: every access is through atomics.
unsafe impl Sync for SharedCounters {}

impl SharedCounters {
    /// Maps `sets` zeroed sets of counters, shared with children forked from now on.
    pub fn new(sets: usize) -> io::Result<SharedCounters> {
        let len = sets.max(1) * std::mem::size_of::<Counters>();
        // SAFETY: an anonymous mapping with no address hint touches no existing memory.
        let ptr = unsafe {
            libc::mmap(
                std::ptr::null_mut(),
                len,
                libc::PROT_READ | libc::PROT_WRITE,
                libc::MAP_SHARED | libc::MAP_ANONYMOUS,
                -1,
                0,
            )
        };
        if ptr == libc::MAP_FAILED {
            return Err(io::Error::last_os_error());
        }
        Ok(SharedCounters { ptr: ptr.cast(), sets: sets.max(1) })
    }

    /// The sets, one per worker.
    pub fn sets(&self) -> &[Counters] {
        // SAFETY: the mapping is page-aligned (more than an AtomicU64 needs), zeroed
        // by the kernel (a valid AtomicU64 is any bit pattern), `sets` long, and
        // lives until `self` drops, which the returned borrow cannot outlive.
        unsafe { std::slice::from_raw_parts(self.ptr, self.sets) }
    }
}

impl Drop for SharedCounters {
    fn drop(&mut self) {
        // SAFETY: the mapping was made by `new` with this length and is unmapped once;
        // no borrow of it outlives `self`.
        unsafe { libc::munmap(self.ptr.cast(), self.sets * std::mem::size_of::<Counters>()) };
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::Ordering;

    #[test]
    fn counters_start_at_zero_and_hold_what_is_stored() {
        let shared = SharedCounters::new(3).expect("a mapping");
        assert_eq!(shared.sets().len(), 3);
        assert!(shared.sets().iter().flatten().all(|counter| counter.load(Ordering::Relaxed) == 0));
        shared.sets()[2][7].store(42, Ordering::Relaxed);
        assert_eq!(shared.sets()[2][7].load(Ordering::Relaxed), 42);
        assert_eq!(std::mem::size_of::<Counters>(), 64, "one cache line a set");
    }
}
