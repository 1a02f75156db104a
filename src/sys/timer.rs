//! A periodic timer as a descriptor (timerfd), for a loop that watches it beside
//! its sockets.

use std::io;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd, RawFd};
use std::time::Duration;

/// A non-blocking timerfd on the monotonic clock that fires every `interval`.
#[derive(Debug)]
pub struct TimerFd {
    fd: OwnedFd,
}

impl TimerFd {
    /// Fires first after `interval`, then every `interval`.
    pub fn every(interval: Duration) -> io::Result<TimerFd> {
        let fd = syscall!(timerfd_create(libc::CLOCK_MONOTONIC, libc::TFD_NONBLOCK | libc::TFD_CLOEXEC))?;
        // SAFETY: timerfd_create returned a new descriptor that nothing else owns.
        let fd = unsafe { OwnedFd::from_raw_fd(fd) };
        let spec = libc::timespec {
            tv_sec: interval.as_secs().min(libc::time_t::MAX as u64) as libc::time_t,
            tv_nsec: interval.subsec_nanos() as libc::c_long,
        };
        let timer = libc::itimerspec { it_interval: spec, it_value: spec };
        // SAFETY: `timer` is a valid itimerspec; the old value is not asked for.
        syscall!(timerfd_settime(fd.as_raw_fd(), 0, &timer, std::ptr::null_mut()))?;
        Ok(TimerFd { fd })
    }

    /// The descriptor, to register with epoll.
    pub fn raw_fd(&self) -> RawFd {
        self.fd.as_raw_fd()
    }

    /// Expirations since the last read; 0 when none.
    pub fn read(&self) -> io::Result<u64> {
        let mut expirations = 0u64;
        // SAFETY: the kernel writes 8 bytes into `expirations`.
        match syscall!(read(self.fd.as_raw_fd(), (&mut expirations as *mut u64).cast(), 8)) {
            Ok(_) => Ok(expirations),
            Err(e) if e.kind() == io::ErrorKind::WouldBlock => Ok(0),
            Err(e) => Err(e),
        }
    }
}
