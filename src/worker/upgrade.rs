//! A binary upgrade: the master executes the program on disk with its listeners
//! (systemd's `LISTEN_FDS` convention, from descriptor 3 on), a pipe on which the
//! new master says it is ready, and one that hands it what it goes on from (the
//! TLS ticket keys, so that the old workers' tickets resume on the new ones); then
//! the old master retires its workers and exits.

use std::ffi::OsString;
use std::fs::File;
use std::io::{self, Read, Write};
use std::os::fd::{AsFd, BorrowedFd, OwnedFd};
use std::path::PathBuf;
use std::time::{Duration, Instant};

use super::listeners::Listeners;
use crate::sys;

/// How long a new master may take to say it is ready: then it is killed, and this
/// master goes on (a new binary that hangs must not wedge every later upgrade).
pub(crate) const READY_TIMEOUT: Duration = Duration::from_secs(30);

/// An upgrade under way: the new master, the end of the pipe it says ready on, and
/// when it is given up.
#[derive(Debug)]
pub(crate) struct Pending {
    pub(crate) pid: libc::pid_t,
    pub(crate) ready: File,
    pub(crate) deadline: Instant,
}

/// Starts this program (as it is on disk now) in a new process, with the same
/// arguments and `listeners`, handing it `handed` (at most a pipe's buffer). A
/// program that cannot be executed is this call's error; its process exits at
/// once, reaped as none of the master's.
pub(crate) fn start(listeners: &Listeners, handed: &[u8]) -> io::Result<Pending> {
    let program = program_on_disk()?;
    let args: Vec<OsString> = std::env::args_os().collect();
    let (read, write) = sys::pipe()?;
    // Written whole and closed before the new master starts: it reads to the end.
    let (handed_read, handed_write) = sys::pipe()?;
    File::from(handed_write).write_all(handed)?;
    let fds: Vec<BorrowedFd<'_>> = listeners.sockets.iter().map(AsFd::as_fd).collect();
    let spawned = sys::spawn_with_listeners(&program, &args, &fds, write.as_fd(), handed_read.as_fd())?;
    if let Some(error) = spawned.exec_error {
        return Err(io::Error::new(error.kind(), format!("cannot execute {}: {error}", program.display())));
    }
    Ok(Pending { pid: spawned.pid, ready: File::from(read), deadline: Instant::now() + READY_TIMEOUT })
}

/// What the old master handed over: read to the end of its pipe, at most 4 KiB;
/// nothing when none was passed (systemd passes none) or it cannot be read.
pub(crate) fn take_handed(handed: Option<OwnedFd>) -> Vec<u8> {
    let mut bytes = Vec::new();
    if let Some(fd) = handed {
        let _ = io::Read::take(File::from(fd), 4096).read_to_end(&mut bytes);
    }
    bytes
}

/// The new master says it is ready: one byte, then the pipe is closed.
pub(crate) fn say_ready(ready: OwnedFd) {
    // If the old master is gone there is nobody to tell.
    let _ = File::from(ready).write_all(b"1");
}

/// The path of this program's file, also after it was replaced on disk (then
/// /proc/self/exe names the old one with " (deleted)" after it: the new one is at
/// the path without it).
fn program_on_disk() -> io::Result<PathBuf> {
    let exe = std::env::current_exe()?;
    let text = exe.to_string_lossy();
    Ok(text.strip_suffix(" (deleted)").map_or(exe.clone(), PathBuf::from))
}
