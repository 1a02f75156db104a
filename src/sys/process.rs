//! Processes and signals: fork, waitpid, kill, signalfd, the parent-death signal and
//! the open-file limit.

use std::io;
use std::mem::MaybeUninit;
use std::os::fd::{AsFd, AsRawFd, BorrowedFd, FromRawFd, OwnedFd};

/// The signals a master and its workers take through a signalfd: nginx's set (TERM,
/// INT, QUIT, HUP, USR1, USR2) and CHLD.
pub const HANDLED_SIGNALS: [libc::c_int; 7] =
    [libc::SIGINT, libc::SIGTERM, libc::SIGQUIT, libc::SIGHUP, libc::SIGUSR1, libc::SIGUSR2, libc::SIGCHLD];

/// Which side of a `fork` this process is on.
#[derive(Debug)]
pub enum Forked {
    /// The new process.
    Child,
    /// The original process; the child's pid.
    Parent(libc::pid_t),
}

/// Forks the calling process, which must run one thread: a fork copies the calling
/// thread alone, so a lock another thread held (the allocator's) would stay locked
/// in the child for ever. With more than one thread it refuses (`EAGAIN`, with a
/// message saying why) and forks nothing.
pub fn fork() -> io::Result<Forked> {
    let threads = thread_count()?;
    if threads != 1 {
        let why = format!("cannot fork a process running {threads} threads");
        return Err(io::Error::new(io::ErrorKind::WouldBlock, why));
    }
    // SAFETY: fork takes no arguments; the process runs one thread (checked above, and
    // only this thread could start another), so the child is a complete copy of it.
    match unsafe { syscall!(fork()) }? {
        0 => Ok(Forked::Child),
        pid => Ok(Forked::Parent(pid)),
    }
}

/// How many threads this process runs (`num_threads` of /proc/self/stat).
pub fn thread_count() -> io::Result<usize> {
    let stat = std::fs::read_to_string("/proc/self/stat")?;
    // The command name, in parentheses, may hold spaces: count fields after it.
    let after_name = stat.rfind(')').map_or("", |at| &stat[at + 1..]);
    after_name
        .split_whitespace()
        .nth(17)
        .and_then(|field| field.parse().ok())
        .ok_or_else(|| io::Error::new(io::ErrorKind::InvalidData, "no num_threads in /proc/self/stat"))
}

/// A pipe, both ends close-on-exec, the read end non-blocking: (read, write).
pub fn pipe() -> io::Result<(OwnedFd, OwnedFd)> {
    let (read, write) = cloexec_pipe()?;
    // SAFETY: `read` is open (owned here); F_SETFL takes an int and no memory of ours.
    unsafe { syscall!(fcntl(read.as_raw_fd(), libc::F_SETFL, libc::O_NONBLOCK)) }?;
    Ok((read, write))
}

/// A pipe, both ends close-on-exec and blocking: (read, write).
pub(super) fn cloexec_pipe() -> io::Result<(OwnedFd, OwnedFd)> {
    let mut fds = [0 as libc::c_int; 2];
    // SAFETY: the kernel writes two descriptors into `fds`, which has room for two.
    unsafe { syscall!(pipe2(fds.as_mut_ptr(), libc::O_CLOEXEC)) }?;
    // SAFETY: pipe2 returned two new descriptors that nothing else owns.
    Ok(unsafe { (OwnedFd::from_raw_fd(fds[0]), OwnedFd::from_raw_fd(fds[1])) })
}

/// How a child ended.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Exit {
    /// It exited with this status.
    Code(i32),
    /// A signal killed it.
    Signal(i32),
}

impl std::fmt::Display for Exit {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Exit::Code(code) => write!(f, "exited with status {code}"),
            Exit::Signal(signal) => write!(f, "was killed by signal {signal}"),
        }
    }
}

/// Reaps one child that has ended, without blocking; `None` when none has.
pub fn reap_child() -> io::Result<Option<(libc::pid_t, Exit)>> {
    let mut status = 0;
    // SAFETY: `status` is a valid int for the kernel to write; -1 names any child.
    let pid = match unsafe { syscall!(waitpid(-1, &mut status, libc::WNOHANG)) } {
        Err(e) if e.raw_os_error() == Some(libc::ECHILD) => return Ok(None),
        result => result?,
    };
    if pid == 0 {
        return Ok(None);
    }
    let exit = if libc::WIFSIGNALED(status) {
        Exit::Signal(libc::WTERMSIG(status))
    } else {
        Exit::Code(libc::WEXITSTATUS(status))
    };
    Ok(Some((pid, exit)))
}

/// Sends `signal` to process `pid`.
pub fn kill(pid: libc::pid_t, signal: libc::c_int) -> io::Result<()> {
    // SAFETY: kill(2) takes two integers and no memory of ours; a wrong pid or
    // signal is an error (ESRCH, EINVAL), not undefined behaviour.
    unsafe { syscall!(kill(pid, signal)) }?;
    Ok(())
}

/// Asks the kernel to send `signal` to this process when its parent dies, so that
/// workers never outlive a master killed with SIGKILL.
pub fn set_parent_death_signal(signal: libc::c_int) -> io::Result<()> {
    // SAFETY: PR_SET_PDEATHSIG takes the signal number as an integer, and no memory
    // of ours; the unused arguments are 0, as prctl(2) asks.
    unsafe { syscall!(prctl(libc::PR_SET_PDEATHSIG, signal as libc::c_ulong, 0, 0, 0)) }?;
    Ok(())
}

/// Moves this process to `SCHED_BATCH`: woken by an event, it does not preempt the
/// task running on its CPU but waits for it to block or for the next tick, and then
/// finds a batch of events instead of one. No privilege is needed.
pub fn set_batch_scheduling() -> io::Result<()> {
    let param = libc::sched_param { sched_priority: 0 };
    // SAFETY: `param` is a valid sched_param for the duration of the call, which only
    // reads it; pid 0 is this process.
    unsafe { syscall!(sched_setscheduler(0, libc::SCHED_BATCH, &param)) }?;
    Ok(())
}

/// Blocks [`HANDLED_SIGNALS`] for this process (a child inherits the mask) and opens a
/// non-blocking signalfd that reads them. Each one's disposition is first reset to
/// the default: a signal inherited as ignored (a parent's `SIG_IGN` survives exec)
/// would be discarded when sent, blocked or not, and never reach the signalfd.
#[derive(Debug)]
pub struct SignalFd {
    fd: OwnedFd,
}

impl SignalFd {
    /// Blocks the signals and opens the descriptor.
    pub fn new() -> io::Result<SignalFd> {
        let mut mask = MaybeUninit::<libc::sigset_t>::uninit();
        // SAFETY: sigemptyset initialises the set it is given, which has room for one.
        unsafe { syscall!(sigemptyset(mask.as_mut_ptr())) }?;
        // SAFETY: sigemptyset succeeded, so the set is initialised.
        let mut mask = unsafe { mask.assume_init() };
        for signal in HANDLED_SIGNALS {
            // SAFETY: `mask` is an initialised sigset_t and `signal` a valid number.
            unsafe { syscall!(sigaddset(&mut mask, signal)) }?;
            // SAFETY: SIG_DFL is a valid disposition for every signal handled here.
            if unsafe { libc::signal(signal, libc::SIG_DFL) } == libc::SIG_ERR {
                return Err(io::Error::last_os_error());
            }
        }
        // SAFETY: `mask` is initialised and only read; the old mask is not asked for
        // (null).
        unsafe { syscall!(sigprocmask(libc::SIG_BLOCK, &mask, std::ptr::null_mut())) }?;
        // SAFETY: `mask` is initialised and only read; -1 asks for a new descriptor.
        let fd = unsafe { syscall!(signalfd(-1, &mask, libc::SFD_NONBLOCK | libc::SFD_CLOEXEC)) }?;
        // SAFETY: signalfd returned a new descriptor that nothing else owns.
        Ok(SignalFd { fd: unsafe { OwnedFd::from_raw_fd(fd) } })
    }

    /// The next pending signal, or `None` when there is none.
    pub fn read(&self) -> io::Result<Option<libc::c_int>> {
        let mut info = MaybeUninit::<libc::signalfd_siginfo>::uninit();
        let size = std::mem::size_of::<libc::signalfd_siginfo>();
        // SAFETY: the descriptor is owned by `self`; the kernel writes at most `size`
        // bytes into `info`, which is `size` bytes long.
        match unsafe { syscall!(read(self.fd.as_raw_fd(), info.as_mut_ptr().cast(), size)) } {
            // SAFETY: a read of a whole record initialised it.
            Ok(n) if n as usize == size => Ok(Some(unsafe { info.assume_init() }.ssi_signo as libc::c_int)),
            Ok(_) => Ok(None),
            Err(e) if e.kind() == io::ErrorKind::WouldBlock => Ok(None),
            Err(e) => Err(e),
        }
    }
}

/// The descriptor, to register with epoll ([`Reactor::watch`](crate::reactor::Reactor::watch)).
impl AsFd for SignalFd {
    fn as_fd(&self) -> BorrowedFd<'_> {
        self.fd.as_fd()
    }
}

/// Raises the soft limit on open files to the hard limit; returns the new limit.
pub fn raise_nofile_limit() -> io::Result<u64> {
    let mut limit = MaybeUninit::<libc::rlimit>::uninit();
    // SAFETY: getrlimit fills the rlimit it is given, which has room for one.
    unsafe { syscall!(getrlimit(libc::RLIMIT_NOFILE, limit.as_mut_ptr())) }?;
    // SAFETY: getrlimit succeeded, so `limit` is initialised.
    let mut limit = unsafe { limit.assume_init() };
    if limit.rlim_cur < limit.rlim_max {
        limit.rlim_cur = limit.rlim_max;
        // SAFETY: `limit` is a valid rlimit, only read.
        unsafe { syscall!(setrlimit(libc::RLIMIT_NOFILE, &limit)) }?;
    }
    Ok(limit.rlim_cur)
}
