//! A periodic timer as a descriptor (timerfd), for a loop that watches it beside
//! its sockets.

use std::io;
use std::os::fd::{AsFd, AsRawFd, BorrowedFd, FromRawFd, OwnedFd};
use std::time::Duration;

/// A non-blocking timerfd on the monotonic clock that fires every `interval`.
#[derive(Debug)]
pub struct TimerFd {
    fd: OwnedFd,
}

impl TimerFd {
    /// Fires first after `interval`, then every `interval`.
    pub fn every(interval: Duration) -> io::Result<TimerFd> {
        let flags = libc::TFD_NONBLOCK | libc::TFD_CLOEXEC;
        // SAFETY: timerfd_create takes a clock and flags, and no memory of ours.
        let fd = unsafe { syscall!(timerfd_create(libc::CLOCK_MONOTONIC, flags)) }?;
        // SAFETY: timerfd_create returned a new descriptor that nothing else owns.
        let fd = unsafe { OwnedFd::from_raw_fd(fd) };
        let spec = libc::timespec {
            tv_sec: interval.as_secs().min(libc::time_t::MAX as u64) as libc::time_t,
            tv_nsec: interval.subsec_nanos() as libc::c_long,
        };
        let timer = libc::itimerspec { it_interval: spec, it_value: spec };
        // SAFETY: `fd` is open (owned here); `timer` is a valid itimerspec, only read;
        // the old value is not asked for (null).
        unsafe { syscall!(timerfd_settime(fd.as_raw_fd(), 0, &timer, std::ptr::null_mut())) }?;
        Ok(TimerFd { fd })
    }

    /// Expirations since the last read; 0 when none.
    pub fn read(&self) -> io::Result<u64> {
        let mut expirations = 0u64;
        let into = (&mut expirations as *mut u64).cast();
        // SAFETY: the descriptor is owned by `self`; the kernel writes at most 8 bytes
        // into `expirations`, a u64.
        match unsafe { syscall!(read(self.fd.as_raw_fd(), into, 8)) } {
            Ok(_) => Ok(expirations),
            Err(e) if e.kind() == io::ErrorKind::WouldBlock => Ok(0),
            Err(e) => Err(e),
        }
    }
}

/// The descriptor, to register with epoll ([`Reactor::watch`](crate::reactor::Reactor::watch)).
impl AsFd for TimerFd {
    fn as_fd(&self) -> BorrowedFd<'_> {
        self.fd.as_fd()
    }
}
