//! Handing listening sockets from one process to another across `exec`: systemd's
//! socket-activation convention (`LISTEN_FDS`, `LISTEN_PID`, descriptors from 3 on),
//! which percore's binary upgrade speaks too, with one more descriptor to say when
//! the new program is ready, and one to read what the old program hands it beside
//! its listeners.

use std::ffi::{CStr, CString, OsStr, OsString};
use std::fs::File;
use std::io::{self, Read, Write};
use std::os::fd::{AsFd, AsRawFd, BorrowedFd, FromRawFd, OwnedFd, RawFd};
use std::os::unix::ffi::OsStrExt;
use std::path::Path;
use std::sync::atomic::{AtomicBool, Ordering};

use super::process::{self, Forked};

/// The first descriptor passed (systemd's `SD_LISTEN_FDS_START`).
const FIRST: RawFd = 3;
/// The variable that names the descriptor on which a new master says it is ready.
pub const READY_FD: &str = "PERCORE_READY_FD";
/// The variable that names the descriptor a new master reads what the old one
/// hands it from (a pipe, read to its end).
pub const HANDED_FD: &str = "PERCORE_HANDED_FD";
/// Every variable of the convention, removed once read and not passed on.
const VARIABLES: [&str; 5] = ["LISTEN_PID", "LISTEN_FDS", "LISTEN_FDNAMES", READY_FD, HANDED_FD];

/// Set once the inherited descriptors were taken: nothing may take them twice.
static TAKEN: AtomicBool = AtomicBool::new(false);

/// What this process inherited by the convention: its listeners, the descriptor
/// on which to say it is ready, and the one to read what it is handed (a binary
/// upgrade's).
#[derive(Debug, Default)]
pub struct Inherited {
    /// The listening sockets, in the order passed: TCP or Unix (`listen::Listener`
    /// tells them apart).
    pub listeners: Vec<OwnedFd>,
    /// Written to and closed once this process serves.
    pub ready: Option<OwnedFd>,
    /// Read to its end for what the old program handed over.
    pub handed: Option<OwnedFd>,
}

/// Takes the descriptors passed to this process, if `LISTEN_PID` names it; the
/// variables are removed, so that they are taken once and not passed on. Each must
/// be a listening socket. `None` when nothing was passed.
pub fn take_inherited() -> io::Result<Option<Inherited>> {
    let for_us =
        std::env::var("LISTEN_PID").ok().and_then(|pid| pid.parse::<u32>().ok()) == Some(std::process::id());
    let count = std::env::var("LISTEN_FDS").ok().and_then(|n| n.parse::<RawFd>().ok());
    let number = |name| std::env::var(name).ok().and_then(|fd| fd.parse::<RawFd>().ok());
    let (ready, handed) = (number(READY_FD), number(HANDED_FD));
    for name in VARIABLES {
        std::env::remove_var(name);
    }
    let (true, Some(count)) = (for_us, count) else { return Ok(None) };
    if TAKEN.swap(true, Ordering::SeqCst) {
        return Ok(None);
    }
    let mut inherited = Inherited::default();
    for fd in FIRST..FIRST.saturating_add(count) {
        let owned = adopt(fd)?;
        if !is_listening(owned.as_fd())? {
            return Err(io::Error::new(
                io::ErrorKind::InvalidInput,
                format!("descriptor {fd} is not a listener"),
            ));
        }
        inherited.listeners.push(owned);
    }
    if let Some(fd) = ready.filter(|&fd| fd >= FIRST + count) {
        inherited.ready = Some(adopt(fd)?);
    }
    if let Some(fd) = handed.filter(|&fd| fd >= FIRST + count && Some(fd) != ready) {
        inherited.handed = Some(adopt(fd)?);
    }
    Ok(Some(inherited))
}

/// Owns inherited descriptor `fd`, closed on exec from now on.
fn adopt(fd: RawFd) -> io::Result<OwnedFd> {
    // SAFETY: F_SETFD takes an int and no memory of ours; a number with nothing open
    // there fails with EBADF. `fd` is passed by the convention and owned by nothing
    // in this process yet (TAKEN), so flagging it changes no other owner's file.
    unsafe { syscall!(fcntl(fd, libc::F_SETFD, libc::FD_CLOEXEC)) }?;
    // SAFETY: `fd` is open (fcntl succeeded), was inherited across exec by the
    // convention, and is taken once (TAKEN), so nothing else in this process owns it.
    Ok(unsafe { OwnedFd::from_raw_fd(fd) })
}

fn is_listening(fd: BorrowedFd<'_>) -> io::Result<bool> {
    let mut listening: libc::c_int = 0;
    let mut len = std::mem::size_of::<libc::c_int>() as libc::socklen_t;
    let value = (&mut listening as *mut libc::c_int).cast();
    // SAFETY: `fd` is borrowed, so open; the kernel writes at most `len` bytes into
    // `listening`, a c_int of `len` bytes, and the written length into `len`.
    unsafe { syscall!(getsockopt(fd.as_raw_fd(), libc::SOL_SOCKET, libc::SO_ACCEPTCONN, value, &mut len)) }?;
    Ok(listening != 0)
}

/// Starts `program` with `args` (the first being its name) in a new process that
/// inherits `listeners` as descriptors 3 on, `ready` as the next and `handed`
/// after it, named by `LISTEN_FDS`, `LISTEN_PID`, `PERCORE_READY_FD` and
/// `PERCORE_HANDED_FD`. Forks as [`fork`](process::fork)
/// does (refusing from a process of more than one thread), and returns once the
/// child has executed the program, or failed to: then `exec_error` says why, and
/// the child exits with status 127.
pub fn spawn_with_listeners(
    program: &Path,
    args: &[OsString],
    listeners: &[BorrowedFd<'_>],
    ready: BorrowedFd<'_>,
    handed: BorrowedFd<'_>,
) -> io::Result<Spawned> {
    // Made before the fork, so that the child has only system calls left to fail.
    let program = c_string(program.as_os_str())?;
    let args: Vec<CString> = args.iter().map(|arg| c_string(arg)).collect::<io::Result<_>>()?;
    let sources: Vec<RawFd> = listeners.iter().chain([&ready, &handed]).map(AsRawFd::as_raw_fd).collect();
    // The child says why its exec failed on this pipe; a successful exec closes it
    // (close-on-exec) without a word. Its write end sits above every descriptor the
    // child places, so that placing them cannot overwrite it.
    let (error_read, write_end) = process::cloexec_pipe()?;
    let error_write = duplicate_above(write_end.as_fd(), first_free(&sources))?;
    drop(write_end);
    match process::fork()? {
        Forked::Child => {
            // SAFETY: this is the child just forked from a process of one thread (the
            // fork checked), the sources are borrowed, so open, and the child never
            // returns to the caller: if the exec fails, it only writes the reason on
            // its own pipe, above the descriptors the exec replaced, and exits at
            // once, running no other destructor and using no other descriptor.
            let error = match unsafe { exec_with_listeners(&program, &args, &sources, listeners.len()) } {
                Ok(never) => match never {},
                Err(error) => error,
            };
            let code = error.raw_os_error().unwrap_or(libc::EINVAL);
            let _ = File::from(error_write).write_all(&code.to_ne_bytes());
            // SAFETY: _exit(2) ends the process at once; it takes no memory of ours.
            unsafe { libc::_exit(127) }
        }
        Forked::Parent(pid) => {
            drop(error_write);
            let mut code = [0; 4];
            let exec_error = match File::from(error_read).read_exact(&mut code) {
                Ok(()) => Some(io::Error::from_raw_os_error(i32::from_ne_bytes(code))),
                // Closed by the exec: the program runs.
                Err(_) => None,
            };
            Ok(Spawned { pid, exec_error })
        }
    }
}

/// A program started by [`spawn_with_listeners`].
#[derive(Debug)]
pub struct Spawned {
    /// Its process.
    pub pid: libc::pid_t,
    /// Why the child could not execute the program (it exits with status 127);
    /// `None` when it did.
    pub exec_error: Option<io::Error>,
}

/// The first descriptor above those the exec places: 3 on, one per source.
fn first_free(sources: &[RawFd]) -> RawFd {
    FIRST + sources.len() as RawFd
}

/// A close-on-exec copy of `fd` at `at` or above.
fn duplicate_above(fd: BorrowedFd<'_>, at: RawFd) -> io::Result<OwnedFd> {
    // SAFETY: `fd` is borrowed, so open; F_DUPFD_CLOEXEC takes an int and no memory
    // of ours.
    let copy = unsafe { syscall!(fcntl(fd.as_raw_fd(), libc::F_DUPFD_CLOEXEC, at)) }?;
    // SAFETY: fcntl returned a new descriptor that nothing else owns.
    Ok(unsafe { OwnedFd::from_raw_fd(copy) })
}

/// Makes `sources` (the listeners, then the ready descriptor, then the handed one)
/// descriptors 3 on, sets `LISTEN_FDS` (`listeners` of them), `LISTEN_PID`,
/// `PERCORE_READY_FD` and `PERCORE_HANDED_FD` for them, and executes `program` with `args`. Returns only on failure, with the
/// reason.
///
/// # Safety
///
/// Only in a child just forked from a process of one thread (so that it may
/// allocate), which exits at once if this returns: it replaces whatever descriptors
/// 3 on were, which other owners in this process (an `OwnedFd`, a `File`) may hold,
/// so after it nothing may use or close a descriptor it owned there, and the process
/// must end without running destructors (`_exit`). Each of `sources` must be open.
unsafe fn exec_with_listeners(
    program: &CStr,
    args: &[CString],
    sources: &[RawFd],
    listeners: usize,
) -> io::Result<std::convert::Infallible> {
    // Copies above every target first, so that moving one down never overwrites
    // another still to move.
    let above = first_free(sources);
    let mut copies = Vec::with_capacity(sources.len());
    for &fd in sources {
        // SAFETY: `fd` is open (the caller's promise); F_DUPFD_CLOEXEC takes an int and
        // no memory of ours, and makes a new descriptor above every target.
        copies.push(unsafe { syscall!(fcntl(fd, libc::F_DUPFD_CLOEXEC, above)) }?);
    }
    for (i, &copy) in copies.iter().enumerate() {
        // dup2 clears close-on-exec on the new descriptor: it is passed on.
        // SAFETY: `copy` was just made; dup2 takes no memory of ours. Whatever was at
        // the target is replaced, which the caller allowed (see `# Safety`).
        unsafe { syscall!(dup2(copy, FIRST + i as RawFd)) }?;
    }
    let count = listeners.to_string();
    let mut env: Vec<CString> = std::env::vars_os()
        .filter(|(name, _)| !VARIABLES.iter().any(|v| name == v))
        .map(|(name, value)| pair(&name, &value))
        .collect();
    env.push(pair(OsStr::new("LISTEN_FDS"), OsStr::new(&count)));
    env.push(pair(OsStr::new("LISTEN_PID"), OsStr::new(&std::process::id().to_string())));
    env.push(pair(OsStr::new(READY_FD), OsStr::new(&(FIRST + listeners as RawFd).to_string())));
    env.push(pair(OsStr::new(HANDED_FD), OsStr::new(&(FIRST + listeners as RawFd + 1).to_string())));
    let argv: Vec<*const libc::c_char> = args.iter().map(|a| a.as_ptr()).chain([std::ptr::null()]).collect();
    let envp: Vec<*const libc::c_char> = env.iter().map(|e| e.as_ptr()).chain([std::ptr::null()]).collect();
    // SAFETY: every pointer is to a NUL-terminated string that lives until the call,
    // and both arrays end with a null pointer.
    unsafe { syscall!(execve(program.as_ptr(), argv.as_ptr(), envp.as_ptr())) }?;
    unreachable!("execve returns only on failure")
}

fn pair(name: &OsStr, value: &OsStr) -> CString {
    let mut bytes = name.as_bytes().to_vec();
    bytes.push(b'=');
    bytes.extend_from_slice(value.as_bytes());
    // Names and values from the environment hold no NUL; ours neither.
    CString::new(bytes).unwrap_or_default()
}

fn c_string(text: &OsStr) -> io::Result<CString> {
    CString::new(text.as_bytes()).map_err(|e| io::Error::new(io::ErrorKind::InvalidInput, e))
}
