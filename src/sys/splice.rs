//! Bytes moved from one socket to another through a pipe, with splice(2): the
//! kernel hands pages over and never copies them to user memory.

use super::retry::restarting;
use std::io;
use std::os::fd::{AsFd, AsRawFd, BorrowedFd, FromRawFd, OwnedFd};

/// A non-blocking pipe between two sockets.
#[derive(Debug)]
pub struct Pipe {
    read: OwnedFd,
    write: OwnedFd,
}

impl Pipe {
    /// A pipe, both ends non-blocking and close-on-exec.
    pub fn new() -> io::Result<Pipe> {
        let mut fds = [0 as libc::c_int; 2];
        // SAFETY: the kernel writes two descriptors into `fds`, which has room for two.
        unsafe { syscall!(pipe2(fds.as_mut_ptr(), libc::O_NONBLOCK | libc::O_CLOEXEC)) }?;
        // SAFETY: pipe2 returned two new descriptors that nothing else owns.
        let (read, write) = unsafe { (OwnedFd::from_raw_fd(fds[0]), OwnedFd::from_raw_fd(fds[1])) };
        Ok(Pipe { read, write })
    }

    /// Moves up to `len` bytes from socket `from` into the pipe: `Ok(0)` is the end
    /// of the socket's stream, `WouldBlock` that it has nothing (or the pipe is full).
    pub fn fill_from(&self, from: BorrowedFd<'_>, len: usize) -> io::Result<usize> {
        splice(from, self.write.as_fd(), len)
    }

    /// Moves up to `len` bytes from the pipe to socket `to`; `WouldBlock` when the
    /// socket is full.
    pub fn empty_into(&self, to: BorrowedFd<'_>, len: usize) -> io::Result<usize> {
        splice(self.read.as_fd(), to, len)
    }
}

fn splice(from: BorrowedFd<'_>, to: BorrowedFd<'_>, len: usize) -> io::Result<usize> {
    let (no_offset, flags) =
        (std::ptr::null_mut::<libc::loff_t>(), libc::SPLICE_F_MOVE | libc::SPLICE_F_NONBLOCK);
    let (from, to) = (from.as_raw_fd(), to.as_raw_fd());
    // SAFETY: both descriptors are borrowed, so open; splice(2) takes no memory of
    // ours: both offsets are null (a pipe and a socket are read and written where
    // they stand).
    let n = restarting(|| unsafe { syscall!(splice(from, no_offset, to, no_offset, len, flags)) })?;
    Ok(n as usize)
}
