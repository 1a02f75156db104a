//! Files sent without a copy: a body sealed in a memfd, and sendfile(2) from any
//! file to a socket.

use super::retry::restarting;
use std::ffi::CStr;
use std::fs::File;
use std::io;
use std::os::fd::{AsRawFd, BorrowedFd, FromRawFd};

/// A file in memory holding what `from` reads to its end, sealed so that neither its
/// bytes nor its size can ever change (`F_SEAL_WRITE`, `F_SEAL_SHRINK`,
/// `F_SEAL_GROW`, then `F_SEAL_SEAL`): pages the kernel is still sending from it are
/// the pages that were written. From a file, the bytes are copied in the kernel
/// (`io::copy`: copy_file_range or sendfile), through no buffer of ours. It is
/// close-on-exec and shows in /proc as `memfd:NAME`.
pub fn sealed_memfd(name: &CStr, mut from: impl io::Read) -> io::Result<File> {
    let flags = libc::MFD_CLOEXEC | libc::MFD_ALLOW_SEALING;
    // SAFETY: `name` is a NUL-terminated string the kernel only reads.
    let fd = unsafe { syscall!(memfd_create(name.as_ptr(), flags)) }?;
    // SAFETY: memfd_create returned a new descriptor that nothing else owns.
    let mut file = unsafe { File::from_raw_fd(fd) };
    io::copy(&mut from, &mut file)?;
    let seals = libc::F_SEAL_WRITE | libc::F_SEAL_SHRINK | libc::F_SEAL_GROW | libc::F_SEAL_SEAL;
    // SAFETY: F_ADD_SEALS takes an int and no memory of ours; the descriptor is open
    // (owned by `file`).
    unsafe { syscall!(fcntl(file.as_raw_fd(), libc::F_ADD_SEALS, seals)) }?;
    Ok(file)
}

/// Sends up to `len` bytes of `file` from byte `offset` on to socket `to`, with
/// sendfile(2); the file's own position is left alone. `Ok(0)` with `len > 0` means
/// the file ends before `offset`; `WouldBlock` that the socket is full.
pub fn sendfile(to: BorrowedFd<'_>, file: BorrowedFd<'_>, offset: u64, len: usize) -> io::Result<usize> {
    let mut offset =
        libc::off_t::try_from(offset).map_err(|_| io::Error::from(io::ErrorKind::InvalidInput))?;
    let (to, from) = (to.as_raw_fd(), file.as_raw_fd());
    // SAFETY: both descriptors are borrowed, so open; sendfile(2) reads `offset` and
    // writes it back (advanced by what was sent); it lives for the call. No other
    // memory of ours is touched.
    let n = restarting(|| unsafe { syscall!(sendfile(to, from, &mut offset, len)) })?;
    Ok(n as usize)
}
