//! Counters shared by a master and its workers: one anonymous shared mapping made
//! before the forks, a slot of atomic counters per worker. Each worker writes its
//! own slot; the master reads them all, for live per-core figures.

use std::io;
use std::sync::atomic::AtomicU64;

/// Counters per slot, one cache line each, so that workers never share one.
pub const COUNTERS_PER_SLOT: usize = 8;

/// A slot's counters.
pub type Slot = [AtomicU64; COUNTERS_PER_SLOT];

/// `slots` slots of counters in memory shared with every process forked after.
#[derive(Debug)]
pub struct SharedSlots {
    ptr: *mut Slot,
    slots: usize,
}

// SAFETY: the mapping holds atomics only, and is unmapped once, on drop.
unsafe impl Send for SharedSlots {}
// SAFETY: every access is through atomics.
unsafe impl Sync for SharedSlots {}

impl SharedSlots {
    /// Maps `slots` zeroed slots, shared with children forked from now on.
    pub fn new(slots: usize) -> io::Result<SharedSlots> {
        let len = slots.max(1) * std::mem::size_of::<Slot>();
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
        Ok(SharedSlots { ptr: ptr.cast(), slots: slots.max(1) })
    }

    /// The slots.
    pub fn slots(&self) -> &[Slot] {
        // SAFETY: the mapping is page-aligned (more than an AtomicU64 needs), zeroed
        // by the kernel (a valid AtomicU64 is any bit pattern), `slots` long, and
        // lives until `self` drops, which the returned borrow cannot outlive.
        unsafe { std::slice::from_raw_parts(self.ptr, self.slots) }
    }
}

impl Drop for SharedSlots {
    fn drop(&mut self) {
        // SAFETY: the mapping was made by `new` with this length and is unmapped once;
        // no borrow of it outlives `self`.
        unsafe { libc::munmap(self.ptr.cast(), self.slots * std::mem::size_of::<Slot>()) };
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::Ordering;

    #[test]
    fn slots_start_at_zero_and_hold_what_is_stored() {
        let shared = SharedSlots::new(3).expect("a mapping");
        assert_eq!(shared.slots().len(), 3);
        assert!(shared.slots().iter().flatten().all(|counter| counter.load(Ordering::Relaxed) == 0));
        shared.slots()[2][7].store(42, Ordering::Relaxed);
        assert_eq!(shared.slots()[2][7].load(Ordering::Relaxed), 42);
        assert_eq!(std::mem::size_of::<Slot>(), 64, "one cache line a slot");
    }
}
