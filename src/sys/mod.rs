//! Every `libc` call percore makes, behind safe functions.
//!
//! This is the only module with `unsafe` code. Each call goes through [`syscall!`],
//! which turns the C convention (`-1` and `errno`) into `io::Result`; each file
//! descriptor is an [`OwnedFd`], closed exactly once by its `Drop`, and one that a
//! call only uses is a [`BorrowedFd`], open for as long as the borrow lasts.

use std::io::{self, IoSlice};
use std::net::SocketAddr;
use std::os::fd::{AsRawFd, BorrowedFd, FromRawFd, OwnedFd};
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

/// Calls a libc function and maps a `-1` result to the thread's `errno`.
///
/// The macro holds no `unsafe` of its own: each call site wraps it in an `unsafe`
/// block with the `// SAFETY:` reason its arguments are valid, which
/// `clippy::undocumented_unsafe_blocks` then asks of every one.
macro_rules! syscall {
    ($fn:ident ( $($arg:expr),* $(,)? )) => {{
        let res = libc::$fn($($arg),*);
        if res == -1 {
            Err(io::Error::last_os_error())
        } else {
            Ok(res)
        }
    }};
}

mod file;
mod handoff;
mod process;
mod retry;
mod shared;
mod splice;
mod timer;

pub use file::{sealed_memfd, sendfile};
pub use handoff::{spawn_with_listeners, take_inherited};
pub use process::{
    fork, kill, pipe, raise_nofile_limit, reap_child, set_batch_scheduling, set_parent_death_signal,
    thread_count, Exit, Forked, SignalFd,
};
use retry::restarting;
pub use shared::SharedCounters;
pub use splice::Pipe;
pub use timer::TimerFd;

/// Readiness reported by [`Epoll::wait`]: the token given at registration and the
/// `EPOLL*` bits that fired.
#[derive(Clone, Copy)]
#[repr(transparent)]
pub struct EpollEvent(libc::epoll_event);

impl EpollEvent {
    /// The token the file descriptor was registered with.
    pub fn token(&self) -> u64 {
        self.0.u64
    }
    /// Data can be read (or a pending `accept`).
    pub fn is_readable(&self) -> bool {
        self.0.events & (libc::EPOLLIN as u32) != 0
    }
    /// Output can be sent (or the connection is gone, which a send then tells).
    pub fn is_writable(&self) -> bool {
        self.0.events & ((libc::EPOLLOUT | libc::EPOLLHUP | libc::EPOLLERR) as u32) != 0
    }
    /// The peer shut down its writing side, or the connection is gone: reading must
    /// continue until `recv` returns 0 or an error, since no later edge will come.
    pub fn is_read_closed(&self) -> bool {
        self.0.events & ((libc::EPOLLRDHUP | libc::EPOLLHUP | libc::EPOLLERR) as u32) != 0
    }
}

impl std::fmt::Debug for EpollEvent {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let (token, events) = (self.0.u64, self.0.events);
        f.debug_struct("EpollEvent")
            .field("token", &token)
            .field("events", &format_args!("{events:#x}"))
            .finish()
    }
}

/// Interest in input only, edge-triggered: a listener or a signalfd.
pub const INTEREST_READ: u32 = (libc::EPOLLIN | libc::EPOLLET) as u32;
/// Interest in everything a connection needs, edge-triggered, registered once.
pub const INTEREST_CONNECTION: u32 =
    (libc::EPOLLIN | libc::EPOLLOUT | libc::EPOLLRDHUP | libc::EPOLLET) as u32;

/// An epoll instance.
#[derive(Debug)]
pub struct Epoll {
    fd: OwnedFd,
}

impl Epoll {
    /// Creates an epoll instance, closed on `exec`.
    pub fn new() -> io::Result<Epoll> {
        // SAFETY: epoll_create1 takes a flag and no memory of ours.
        let fd = unsafe { syscall!(epoll_create1(libc::EPOLL_CLOEXEC)) }?;
        // SAFETY: epoll_create1 returned a new descriptor that nothing else owns.
        Ok(Epoll { fd: unsafe { OwnedFd::from_raw_fd(fd) } })
    }

    /// Registers `fd` with `interest` (`INTEREST_*`) and `token`. The instance watches
    /// the open file itself, not the borrow: until `fd` is closed (or
    /// [`delete`](Epoll::delete)d) its events come with `token`.
    pub fn add(&self, fd: BorrowedFd<'_>, interest: u32, token: u64) -> io::Result<()> {
        self.ctl(libc::EPOLL_CTL_ADD, fd, interest, token)
    }

    /// Removes `fd`; closing a descriptor removes it too, this is for one that stays open.
    pub fn delete(&self, fd: BorrowedFd<'_>) -> io::Result<()> {
        self.ctl(libc::EPOLL_CTL_DEL, fd, 0, 0)
    }

    fn ctl(&self, op: libc::c_int, fd: BorrowedFd<'_>, interest: u32, token: u64) -> io::Result<()> {
        let mut event = libc::epoll_event { events: interest, u64: token };
        // SAFETY: both descriptors are open (owned by `self`, borrowed), and `event` is
        // a valid epoll_event for the duration of the call, which only reads it.
        unsafe { syscall!(epoll_ctl(self.fd.as_raw_fd(), op, fd.as_raw_fd(), &mut event)) }?;
        Ok(())
    }

    /// Waits at most `timeout` (`None`: for ever) and fills `events` with what is
    /// ready. An interrupted wait returns no events.
    ///
    /// The wait has the kernel's timer precision, not whole milliseconds: a wait of
    /// 300 µs is not rounded down to 0 (a busy poll). Linux before 5.11 has no
    /// `epoll_pwait2`; there the wait is rounded up to the next millisecond.
    pub fn wait(&self, events: &mut Vec<EpollEvent>, timeout: Option<Duration>) -> io::Result<()> {
        events.clear();
        let capacity = events.capacity().min(libc::c_int::MAX as usize) as libc::c_int;
        let buffer = events.as_mut_ptr().cast::<libc::epoll_event>();
        let n = if PWAIT2_MISSING.load(Ordering::Relaxed) {
            self.wait_ms(buffer, capacity, timeout)
        } else {
            let spec = timeout.map(|t| libc::timespec {
                tv_sec: t.as_secs().min(libc::time_t::MAX as u64) as libc::time_t,
                tv_nsec: t.subsec_nanos() as libc::c_long,
            });
            let spec_ptr = spec.as_ref().map_or(std::ptr::null(), |s| s as *const libc::timespec);
            // SAFETY: the kernel writes at most `capacity` entries into the Vec's spare
            // capacity (an `EpollEvent` is an epoll_event), and reads `spec` (or
            // nothing, for NULL) during the call; no signal mask is passed.
            let waited = unsafe {
                syscall!(syscall(
                    libc::SYS_epoll_pwait2,
                    self.fd.as_raw_fd(),
                    buffer,
                    capacity,
                    spec_ptr,
                    std::ptr::null::<libc::sigset_t>(),
                    0usize,
                ))
            };
            match waited {
                Err(e) if e.raw_os_error() == Some(libc::ENOSYS) => {
                    PWAIT2_MISSING.store(true, Ordering::Relaxed);
                    self.wait_ms(buffer, capacity, timeout)
                }
                other => other.map(|n| n as libc::c_int),
            }
        };
        match n {
            // SAFETY: the kernel initialised exactly the first `n` entries.
            Ok(n) => unsafe { events.set_len(n as usize) },
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
            Err(e) => return Err(e),
        }
        Ok(())
    }

    /// `epoll_wait`, with the timeout rounded up to whole milliseconds.
    fn wait_ms(
        &self,
        buffer: *mut libc::epoll_event,
        capacity: libc::c_int,
        timeout: Option<Duration>,
    ) -> io::Result<libc::c_int> {
        let ms = timeout.map_or(-1, |t| {
            // Rounded up: a wait shorter than a millisecond must not become 0.
            let ms = t.as_nanos().div_ceil(1_000_000);
            ms.min(libc::c_int::MAX as u128) as libc::c_int
        });
        // SAFETY: the kernel writes at most `capacity` entries at `buffer`, the spare
        // capacity of the caller's Vec; the epoll descriptor is owned by `self`.
        unsafe { syscall!(epoll_wait(self.fd.as_raw_fd(), buffer, capacity, ms)) }
    }
}

/// Set once `epoll_pwait2` answered `ENOSYS` (Linux before 5.11).
static PWAIT2_MISSING: AtomicBool = AtomicBool::new(false);

/// Accepts one connection from a non-blocking listener, itself non-blocking and
/// close-on-exec, with its peer's address as the accept reports it (`None` if it is
/// not an IP address). `WouldBlock` means the queue is empty.
pub fn accept(listener: BorrowedFd<'_>) -> io::Result<(OwnedFd, Option<SocketAddr>)> {
    let flags = libc::SOCK_NONBLOCK | libc::SOCK_CLOEXEC;
    // SAFETY: all zeroes is a valid sockaddr_storage (plain integers and bytes).
    let mut storage: libc::sockaddr_storage = unsafe { std::mem::zeroed() };
    let mut len = std::mem::size_of::<libc::sockaddr_storage>() as libc::socklen_t;
    let addr = std::ptr::addr_of_mut!(storage).cast::<libc::sockaddr>();
    // SAFETY: the listener is borrowed, so open; the kernel writes at most `len`
    // bytes of address at `addr`, our storage of that size, and its length at `len`.
    let fd = restarting(|| unsafe { syscall!(accept4(listener.as_raw_fd(), addr, &mut len, flags)) })?;
    // SAFETY: accept4 returned a new descriptor that nothing else owns.
    let fd = unsafe { OwnedFd::from_raw_fd(fd) };
    // SAFETY: the kernel initialised `len` bytes of the storage with an address.
    let peer = unsafe { socket2::SockAddr::new(storage, len) }.as_socket();
    Ok((fd, peer))
}

/// What a failed `accept4` means for the loop (accept(2), "Error handling").
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum AcceptError {
    /// The queue is empty.
    Empty,
    /// The connection at the head of the queue failed before it was taken; the
    /// next one is there.
    Aborted,
    /// The process or the system has no descriptor left.
    OutOfDescriptors,
    /// Anything else (no memory for socket buffers, ...): try again later.
    Other,
}

impl AcceptError {
    /// Classifies an error of [`accept`].
    pub fn of(e: &io::Error) -> AcceptError {
        match e.raw_os_error() {
            Some(libc::EAGAIN) => AcceptError::Empty,
            Some(libc::EMFILE | libc::ENFILE) => AcceptError::OutOfDescriptors,
            Some(
                libc::ECONNABORTED
                | libc::EPROTO
                | libc::EPERM
                | libc::ENETDOWN
                | libc::ENOPROTOOPT
                | libc::EHOSTDOWN
                | libc::ENONET
                | libc::EHOSTUNREACH
                | libc::EOPNOTSUPP
                | libc::ENETUNREACH,
            ) => AcceptError::Aborted,
            _ => AcceptError::Other,
        }
    }
}

/// Whether a non-blocking `connect` failed only because it is still under way.
pub fn is_in_progress(e: &io::Error) -> bool {
    e.raw_os_error() == Some(libc::EINPROGRESS)
}

// The per-request calls (recv, send, sendmsg) are made with syscall(2), not through
// their libc functions: in a process with more than one thread (percore bench, or
// a library user's) glibc makes those functions cancellation points, and brackets
// every call with two atomic updates of the thread's cancellation state, a tenth
// of the load generator's own instructions per response. Nothing here cancels a
// thread, so the brackets buy nothing. syscall(2) takes every argument as a long: an
// `int` passed through C's variadic arguments has an unspecified upper half, so each
// integer goes as a `c_long` (`long_arg`).

/// An `int` argument of syscall(2), widened as the kernel's `long` expects it.
fn long_arg(value: libc::c_int) -> libc::c_long {
    libc::c_long::from(value)
}

/// A descriptor as an argument of syscall(2).
fn fd_arg(fd: BorrowedFd<'_>) -> libc::c_long {
    long_arg(fd.as_raw_fd())
}

/// Reads into `buf`; `Ok(0)` is end of stream, `WouldBlock` means drained.
pub fn recv(fd: BorrowedFd<'_>, buf: &mut [u8]) -> io::Result<usize> {
    let (no_addr, no_len) = (std::ptr::null_mut::<libc::sockaddr>(), std::ptr::null_mut::<libc::socklen_t>());
    let n = restarting(|| {
        // SAFETY: `fd` is borrowed, so open; recvfrom(2) writes at most `buf.len()`
        // bytes into `buf`, and no address (both address pointers are null).
        unsafe {
            syscall!(syscall(
                libc::SYS_recvfrom,
                fd_arg(fd),
                buf.as_mut_ptr(),
                buf.len(),
                long_arg(0),
                no_addr,
                no_len
            ))
        }
    })?;
    Ok(n as usize)
}

/// Sends from `buf` without raising SIGPIPE on a closed peer; returns bytes sent.
pub fn send(fd: BorrowedFd<'_>, buf: &[u8]) -> io::Result<usize> {
    let (flags, no_addr, no_len) =
        (long_arg(libc::MSG_NOSIGNAL), std::ptr::null::<libc::sockaddr>(), long_arg(0));
    let n = restarting(|| {
        // SAFETY: `fd` is borrowed, so open; sendto(2) reads at most `buf.len()` bytes
        // from `buf`, and no address (null, of length 0).
        unsafe {
            syscall!(syscall(libc::SYS_sendto, fd_arg(fd), buf.as_ptr(), buf.len(), flags, no_addr, no_len))
        }
    })?;
    Ok(n as usize)
}

/// Whether more output follows a send at once (a file range after its head).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum More {
    /// It does: `MSG_MORE`, so that the head and the start of what follows share
    /// packets.
    Follows,
    /// It does not: push what was sent.
    Nothing,
}

/// Sends from `slices`, in order, in one call, without raising SIGPIPE on a closed
/// peer; returns bytes sent. At most `IOV_MAX` (1024) slices are looked at.
pub fn send_vectored(fd: BorrowedFd<'_>, slices: &[IoSlice<'_>], more: More) -> io::Result<usize> {
    // SAFETY: an all-zero msghdr is valid (no address, no control data, no iovecs).
    let mut message: libc::msghdr = unsafe { std::mem::zeroed() };
    // IoSlice is ABI-compatible with iovec on Unix; the kernel only reads them.
    message.msg_iov = slices.as_ptr().cast_mut().cast::<libc::iovec>();
    message.msg_iovlen = slices.len().min(1024) as _;
    let message_ptr = &message as *const libc::msghdr;
    let flags = match more {
        More::Follows => libc::MSG_NOSIGNAL | libc::MSG_MORE,
        More::Nothing => libc::MSG_NOSIGNAL,
    };
    // SAFETY: `fd` is borrowed, so open; sendmsg(2) only reads `message` and the
    // slices it points at, which outlive the call.
    let n = restarting(|| unsafe {
        syscall!(syscall(libc::SYS_sendmsg, fd_arg(fd), message_ptr, long_arg(flags)))
    })?;
    Ok(n as usize)
}

/// Shuts down the sending side: the peer sees end of stream after what was sent.
pub fn shutdown_write(fd: BorrowedFd<'_>) -> io::Result<()> {
    // SAFETY: `fd` is borrowed, so open; shutdown(2) takes no memory of ours.
    unsafe { syscall!(shutdown(fd.as_raw_fd(), libc::SHUT_WR)) }?;
    Ok(())
}

/// Sets `TCP_DEFER_ACCEPT`: the kernel hands a connection to `accept` only once its
/// first bytes arrived (or after `seconds`), so the first read finds the request.
pub fn set_defer_accept(fd: BorrowedFd<'_>, seconds: libc::c_int) -> io::Result<()> {
    let size = std::mem::size_of::<libc::c_int>() as libc::socklen_t;
    let value = (&seconds as *const libc::c_int).cast();
    // SAFETY: `fd` is borrowed, so open; the option value is a c_int of `size` bytes
    // that lives for the duration of the call, which only reads it.
    unsafe { syscall!(setsockopt(fd.as_raw_fd(), libc::IPPROTO_TCP, libc::TCP_DEFER_ACCEPT, value, size)) }?;
    Ok(())
}

/// `TCP_DEFER_ACCEPT` as the kernel keeps it: seconds, rounded up to its SYN-ACK
/// retransmissions; 0 when off.
#[cfg(test)]
pub fn defer_accept(fd: BorrowedFd<'_>) -> io::Result<libc::c_int> {
    let mut seconds: libc::c_int = 0;
    let mut size = std::mem::size_of::<libc::c_int>() as libc::socklen_t;
    let value = (&mut seconds as *mut libc::c_int).cast();
    // SAFETY: `fd` is borrowed, so open; the kernel writes at most `size` bytes to
    // `value`, a c_int that outlives the call, and `size` back.
    unsafe {
        syscall!(getsockopt(fd.as_raw_fd(), libc::IPPROTO_TCP, libc::TCP_DEFER_ACCEPT, value, &mut size))
    }?;
    Ok(seconds)
}

/// `SO_ATTACH_REUSEPORT_CBPF` (asm-generic/socket.h; the libc crate has it for
/// Android only).
const SO_ATTACH_REUSEPORT_CBPF: libc::c_int = 51;

/// Attaches to `fd`'s `SO_REUSEPORT` group a classic BPF program that hands each new
/// connection to the listener at the index of the receiving CPU in `cpus` (the
/// listeners joined the group in that order); a connection received on a CPU not in
/// `cpus` is hashed as usual (the program answers an index past the group).
pub fn steer_by_cpu(fd: BorrowedFd<'_>, cpus: &[usize]) -> io::Result<()> {
    const LOAD_CPU: u16 = (libc::BPF_LD | libc::BPF_W | libc::BPF_ABS) as u16;
    const JUMP_IF_EQUAL: u16 = (libc::BPF_JMP | libc::BPF_JEQ | libc::BPF_K) as u16;
    const RETURN: u16 = (libc::BPF_RET | libc::BPF_K) as u16;
    let op = |code: u16, jt: u8, jf: u8, k: u32| libc::sock_filter { code, jt, jf, k };
    let group = u32::try_from(cpus.len()).map_err(|_| io::Error::from(io::ErrorKind::InvalidInput))?;
    // A = the CPU that received the packet; then for each listener: if A is its CPU,
    // answer its index; else (no CPU matched) an index past the group.
    let mut program = vec![op(LOAD_CPU, 0, 0, (libc::SKF_AD_OFF + libc::SKF_AD_CPU) as u32)];
    for (index, &cpu) in cpus.iter().enumerate() {
        program.push(op(JUMP_IF_EQUAL, 0, 1, cpu as u32));
        program.push(op(RETURN, 0, 0, index as u32));
    }
    program.push(op(RETURN, 0, 0, group));
    attach_cbpf(fd, SO_ATTACH_REUSEPORT_CBPF, &mut program)
}

/// Attaches to the listener `fd` a socket filter that drops every packet: a new
/// connection's SYN, and the last ACK of a handshake under way, so the kernel
/// completes no more connections into its queue (their clients send again, and meet
/// a closed port). Those it completed before are in the queue still, to be accepted:
/// a stop that accepts its queue and then closes loses none that came meanwhile.
/// Connections accepted before are not affected (one accepted after inherits it).
pub fn refuse_new_connections(fd: BorrowedFd<'_>) -> io::Result<()> {
    let drop_all = libc::sock_filter { code: (libc::BPF_RET | libc::BPF_K) as u16, jt: 0, jf: 0, k: 0 };
    attach_cbpf(fd, libc::SO_ATTACH_FILTER, &mut [drop_all])
}

/// Attaches the classic BPF `program` to `fd` as socket option `option`.
fn attach_cbpf(fd: BorrowedFd<'_>, option: libc::c_int, program: &mut [libc::sock_filter]) -> io::Result<()> {
    let len = u16::try_from(program.len()).map_err(|_| io::Error::from(io::ErrorKind::InvalidInput))?;
    let fprog = libc::sock_fprog { len, filter: program.as_mut_ptr() };
    let size = std::mem::size_of::<libc::sock_fprog>() as libc::socklen_t;
    let value = (&fprog as *const libc::sock_fprog).cast();
    // SAFETY: `fd` is borrowed, so open; the option value is a sock_fprog of `size`
    // bytes pointing at `program`, `len` instructions long, all alive for the call;
    // the kernel copies the program.
    unsafe { syscall!(setsockopt(fd.as_raw_fd(), libc::SOL_SOCKET, option, value, size)) }?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn event(events: libc::c_int) -> EpollEvent {
        EpollEvent(libc::epoll_event { events: events as u32, u64: 7 })
    }

    #[test]
    fn the_peers_end_an_error_or_a_hangup_each_close_the_reading_side() {
        for closed in [libc::EPOLLRDHUP, libc::EPOLLHUP, libc::EPOLLERR] {
            assert!(event(closed).is_read_closed(), "{:?}", event(closed));
            assert!(event(closed | libc::EPOLLIN).is_read_closed());
        }
        assert!(!event(libc::EPOLLIN | libc::EPOLLOUT).is_read_closed());
        assert!(event(libc::EPOLLIN).is_readable() && !event(libc::EPOLLOUT).is_readable());
    }

    #[test]
    fn a_listener_refusing_new_connections_keeps_those_already_queued() {
        use std::os::fd::AsFd;
        let listener = std::net::TcpListener::bind("127.0.0.1:0").expect("a listener");
        listener.set_nonblocking(true).expect("nonblocking");
        let addr = listener.local_addr().unwrap();
        let mut queued = std::net::TcpStream::connect(addr).expect("connected before the filter");
        refuse_new_connections(listener.as_fd()).expect("the filter attached");
        // On loopback the handshake runs within connect: by its return the SYN is
        // dropped, and the connection is not in the queue.
        let late = socket2::Socket::new(socket2::Domain::IPV4, socket2::Type::STREAM, None).unwrap();
        late.set_nonblocking(true).unwrap();
        let started = late.connect(&addr.into());
        assert!(started.as_ref().is_err_and(|e| e.raw_os_error() == Some(libc::EINPROGRESS)), "{started:?}");
        let (accepted, _) = accept(listener.as_fd()).expect("the connection queued before");
        let mut accepted = std::net::TcpStream::from(accepted);
        let next = accept(listener.as_fd()).map(|_| ());
        assert!(next.as_ref().is_err_and(|e| e.kind() == io::ErrorKind::WouldBlock), "{next:?}");
        // The connection accepted is a connection like any other.
        std::io::Write::write_all(&mut queued, b"ping").unwrap();
        let mut got = [0; 4];
        std::io::Read::read_exact(&mut accepted, &mut got).unwrap();
        assert_eq!(&got, b"ping");
    }

    /// An epoll instance watching the read end of a pipe, and its write end.
    fn watching_a_pipe() -> (Epoll, OwnedFd, std::fs::File) {
        let epoll = Epoll::new().expect("an epoll instance");
        let (read, write) = pipe().expect("a pipe");
        epoll.add(std::os::fd::AsFd::as_fd(&read), INTEREST_READ, 3).expect("watched");
        (epoll, read, std::fs::File::from(write))
    }

    #[test]
    fn a_deleted_descriptor_reports_nothing_more() {
        use std::io::Write;
        let (epoll, read, mut write) = watching_a_pipe();
        let mut events = Vec::with_capacity(4);
        write.write_all(b"x").expect("a byte");
        epoll.wait(&mut events, Some(Duration::ZERO)).expect("a wait");
        assert_eq!(events.iter().map(EpollEvent::token).collect::<Vec<_>>(), [3]);
        epoll.delete(std::os::fd::AsFd::as_fd(&read)).expect("deleted");
        write.write_all(b"y").expect("a byte more: a new edge");
        epoll.wait(&mut events, Some(Duration::ZERO)).expect("a wait");
        assert!(events.is_empty(), "{events:?}");
    }

    #[test]
    fn the_millisecond_wait_of_older_kernels_reports_and_waits_for_ever_when_asked() {
        use std::io::Write;
        let (epoll, _read, mut write) = watching_a_pipe();
        let mut events: Vec<EpollEvent> = Vec::with_capacity(4);
        let buffer = events.as_mut_ptr().cast::<libc::epoll_event>();
        // Nothing ready: a wait of 300 µs (rounded up to a millisecond) ends empty.
        assert_eq!(epoll.wait_ms(buffer, 4, Some(Duration::from_micros(300))).expect("a wait"), 0);
        // With no timeout it waits until the byte written later arrives.
        let writer = std::thread::spawn(move || {
            std::thread::sleep(Duration::from_millis(50));
            write.write_all(b"x").expect("a byte");
        });
        assert_eq!(epoll.wait_ms(buffer, 4, None).expect("a wait"), 1);
        writer.join().expect("the writer");
    }

    #[test]
    fn an_event_shows_its_token_and_bits() {
        assert_eq!(format!("{:?}", event(libc::EPOLLIN)), "EpollEvent { token: 7, events: 0x1 }");
    }
}
