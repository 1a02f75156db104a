//! Handing listening sockets from one process to another across `exec`: systemd's
//! socket-activation convention (`LISTEN_FDS`, `LISTEN_PID`, descriptors from 3 on),
//! which percore's binary upgrade speaks too, with one more descriptor to say when
//! the new program is ready.

use std::ffi::{CString, OsStr, OsString};
use std::io;
use std::net::TcpListener;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd, RawFd};
use std::os::unix::ffi::OsStrExt;
use std::path::Path;
use std::sync::atomic::{AtomicBool, Ordering};

/// The first descriptor passed (systemd's `SD_LISTEN_FDS_START`).
const FIRST: RawFd = 3;
/// The variable that names the descriptor on which a new master says it is ready.
pub const READY_FD: &str = "PERCORE_READY_FD";

/// Set once the inherited descriptors were taken: nothing may take them twice.
static TAKEN: AtomicBool = AtomicBool::new(false);

/// What this process inherited by the convention: its listeners, and the
/// descriptor on which to say it is ready (a binary upgrade's).
#[derive(Debug, Default)]
pub struct Inherited {
    /// The listening sockets, in the order passed.
    pub listeners: Vec<TcpListener>,
    /// Written to and closed once this process serves.
    pub ready: Option<OwnedFd>,
}

/// Takes the descriptors passed to this process, if `LISTEN_PID` names it; the
/// variables are removed, so that they are taken once and not passed on. Each must
/// be a listening socket. `None` when nothing was passed.
pub fn take_inherited() -> io::Result<Option<Inherited>> {
    let for_us =
        std::env::var("LISTEN_PID").ok().and_then(|pid| pid.parse::<u32>().ok()) == Some(std::process::id());
    let count = std::env::var("LISTEN_FDS").ok().and_then(|n| n.parse::<RawFd>().ok());
    let ready = std::env::var(READY_FD).ok().and_then(|fd| fd.parse::<RawFd>().ok());
    for name in ["LISTEN_PID", "LISTEN_FDS", "LISTEN_FDNAMES", READY_FD] {
        std::env::remove_var(name);
    }
    let (true, Some(count)) = (for_us, count) else { return Ok(None) };
    if TAKEN.swap(true, Ordering::SeqCst) {
        return Ok(None);
    }
    let mut inherited = Inherited::default();
    for fd in FIRST..FIRST.saturating_add(count) {
        let owned = adopt(fd)?;
        if !is_listening(owned.as_raw_fd())? {
            return Err(io::Error::new(
                io::ErrorKind::InvalidInput,
                format!("descriptor {fd} is not a listener"),
            ));
        }
        inherited.listeners.push(TcpListener::from(owned));
    }
    if let Some(fd) = ready.filter(|&fd| fd >= FIRST + count) {
        inherited.ready = Some(adopt(fd)?);
    }
    Ok(Some(inherited))
}

/// Owns inherited descriptor `fd`, closed on exec from now on.
fn adopt(fd: RawFd) -> io::Result<OwnedFd> {
    // Fails with EBADF when nothing is open there.
    syscall!(fcntl(fd, libc::F_SETFD, libc::FD_CLOEXEC))?;
    // SAFETY: `fd` is open (fcntl succeeded), was inherited across exec by the
    // convention, and is taken once (TAKEN), so nothing else in this process owns it.
    Ok(unsafe { OwnedFd::from_raw_fd(fd) })
}

fn is_listening(fd: RawFd) -> io::Result<bool> {
    let mut listening: libc::c_int = 0;
    let mut len = std::mem::size_of::<libc::c_int>() as libc::socklen_t;
    // SAFETY: the kernel writes at most `len` bytes into `listening`.
    syscall!(getsockopt(
        fd,
        libc::SOL_SOCKET,
        libc::SO_ACCEPTCONN,
        (&mut listening as *mut libc::c_int).cast(),
        &mut len
    ))?;
    Ok(listening != 0)
}

/// In a child forked for it: makes `listeners` descriptors 3 on and `ready` the
/// next, sets `LISTEN_FDS`, `LISTEN_PID` and `PERCORE_READY_FD` for them, and
/// executes `program` with `args` (the first being its name). Returns only on
/// failure, with the reason. The process runs one thread (it was just forked from
/// one that checked), so it may allocate.
pub fn exec_with_listeners(
    program: &Path,
    args: &[OsString],
    listeners: &[RawFd],
    ready: RawFd,
) -> io::Error {
    match prepare_and_exec(program, args, listeners, ready) {
        Ok(never) => match never {},
        Err(e) => e,
    }
}

fn prepare_and_exec(
    program: &Path,
    args: &[OsString],
    listeners: &[RawFd],
    ready: RawFd,
) -> io::Result<std::convert::Infallible> {
    let sources: Vec<RawFd> = listeners.iter().copied().chain([ready]).collect();
    // Copies above every target first, so that moving one down never overwrites
    // another still to move.
    let above = FIRST + sources.len() as RawFd;
    let mut copies = Vec::with_capacity(sources.len());
    for &fd in &sources {
        copies.push(syscall!(fcntl(fd, libc::F_DUPFD_CLOEXEC, above))?);
    }
    for (i, &copy) in copies.iter().enumerate() {
        // dup2 clears close-on-exec on the new descriptor: it is passed on.
        syscall!(dup2(copy, FIRST + i as RawFd))?;
    }
    let count = listeners.len().to_string();
    let mut env: Vec<CString> = std::env::vars_os()
        .filter(|(name, _)| {
            !["LISTEN_PID", "LISTEN_FDS", "LISTEN_FDNAMES", READY_FD].iter().any(|v| name == v)
        })
        .map(|(name, value)| pair(&name, &value))
        .collect();
    env.push(pair(OsStr::new("LISTEN_FDS"), OsStr::new(&count)));
    env.push(pair(OsStr::new("LISTEN_PID"), OsStr::new(&std::process::id().to_string())));
    env.push(pair(OsStr::new(READY_FD), OsStr::new(&(FIRST + listeners.len() as RawFd).to_string())));
    let program = c_string(program.as_os_str())?;
    let args: Vec<CString> = args.iter().map(|arg| c_string(arg)).collect::<io::Result<_>>()?;
    let argv: Vec<*const libc::c_char> = args.iter().map(|a| a.as_ptr()).chain([std::ptr::null()]).collect();
    let envp: Vec<*const libc::c_char> = env.iter().map(|e| e.as_ptr()).chain([std::ptr::null()]).collect();
    // SAFETY: every pointer is to a NUL-terminated string that lives until the call,
    // and both arrays end with a null pointer.
    syscall!(execve(program.as_ptr(), argv.as_ptr(), envp.as_ptr()))?;
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
