//! The listening socket, configured for the loop: TCP on an IP address, or a Unix
//! socket on a path (nginx's `listen unix:`), and the address that names either.

use std::fmt;
use std::io;
use std::net::{IpAddr, SocketAddr, TcpListener};
use std::os::fd::{AsFd, BorrowedFd, OwnedFd};
use std::os::unix::fs::FileTypeExt;
use std::os::unix::net::UnixListener;
use std::path::{Path, PathBuf};
use std::str::FromStr;

use socket2::{Domain, Protocol, SockAddr, SockRef, Socket, Type};

use crate::sys;

/// What a Unix socket's address starts with, as nginx writes it: `unix:/run/x.sock`.
const UNIX_PREFIX: &str = "unix:";

/// Where a server listens, or a client connects: an IP socket address, or the
/// path of a Unix socket. Written (and parsed) as `127.0.0.1:8080`, `[::1]:8080`
/// or `unix:/run/percore.sock`.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub enum Address {
    /// A TCP socket on an IP address and port.
    Ip(SocketAddr),
    /// A Unix stream socket on a path of the file system.
    Unix(PathBuf),
}

impl fmt::Display for Address {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Address::Ip(addr) => write!(f, "{addr}"),
            Address::Unix(path) => write!(f, "{UNIX_PREFIX}{}", path.display()),
        }
    }
}

impl FromStr for Address {
    type Err = String;

    /// `unix:PATH` (a path that is not empty), or an IP socket address.
    fn from_str(text: &str) -> Result<Address, String> {
        match text.strip_prefix(UNIX_PREFIX) {
            Some("") => Err(format!("`{text}` names no path")),
            Some(path) => Ok(Address::Unix(PathBuf::from(path))),
            None => text
                .parse()
                .map(Address::Ip)
                .map_err(|_| format!("`{text}` is neither IP:PORT nor {UNIX_PREFIX}PATH")),
        }
    }
}

impl From<SocketAddr> for Address {
    fn from(addr: SocketAddr) -> Address {
        Address::Ip(addr)
    }
}

/// `io.connect(&backend)` for an address a protocol keeps: a copy (a path's is
/// an allocation).
impl From<&Address> for Address {
    fn from(addr: &Address) -> Address {
        addr.clone()
    }
}

/// `([127, 0, 0, 1], 8080).into()`, as for a `SocketAddr`.
impl<I: Into<IpAddr>> From<(I, u16)> for Address {
    fn from((ip, port): (I, u16)) -> Address {
        Address::Ip(SocketAddr::new(ip.into(), port))
    }
}

/// A listening socket the loop accepts from: TCP or Unix.
#[derive(Debug)]
pub enum Listener {
    /// A TCP listener.
    Tcp(TcpListener),
    /// A Unix stream listener.
    Unix(UnixListener),
}

impl Listener {
    /// The address it listens on. An error for a Unix socket with no path (an
    /// abstract or unnamed one).
    pub fn local_addr(&self) -> io::Result<Address> {
        match self {
            Listener::Tcp(listener) => listener.local_addr().map(Address::Ip),
            Listener::Unix(listener) => match listener.local_addr()?.as_pathname() {
                Some(path) => Ok(Address::Unix(path.to_path_buf())),
                None => Err(io::Error::new(io::ErrorKind::Unsupported, "a Unix socket with no path")),
            },
        }
    }

    /// Another descriptor of the same socket (a worker's, after a fork).
    pub fn try_clone(&self) -> io::Result<Listener> {
        Ok(match self {
            Listener::Tcp(listener) => Listener::Tcp(listener.try_clone()?),
            Listener::Unix(listener) => Listener::Unix(listener.try_clone()?),
        })
    }

    /// Makes accepting never wait, whoever bound it.
    pub(crate) fn set_nonblocking(&self) -> io::Result<()> {
        match self {
            Listener::Tcp(listener) => listener.set_nonblocking(true),
            Listener::Unix(listener) => listener.set_nonblocking(true),
        }
    }
}

impl From<TcpListener> for Listener {
    fn from(listener: TcpListener) -> Listener {
        Listener::Tcp(listener)
    }
}

impl From<UnixListener> for Listener {
    fn from(listener: UnixListener) -> Listener {
        Listener::Unix(listener)
    }
}

/// A listening socket passed by its descriptor (by systemd, or an upgrading
/// master): a Unix one if its domain says so, else TCP.
impl TryFrom<OwnedFd> for Listener {
    type Error = io::Error;

    fn try_from(fd: OwnedFd) -> io::Result<Listener> {
        Ok(match SockRef::from(&fd).domain()? {
            Domain::UNIX => Listener::Unix(UnixListener::from(fd)),
            _ => Listener::Tcp(TcpListener::from(fd)),
        })
    }
}

impl AsFd for Listener {
    fn as_fd(&self) -> BorrowedFd<'_> {
        match self {
            Listener::Tcp(listener) => listener.as_fd(),
            Listener::Unix(listener) => listener.as_fd(),
        }
    }
}

/// Who speaks first on a new connection.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Opening {
    /// The client (HTTP, echo, Redis): `TCP_DEFER_ACCEPT` lets the kernel queue a
    /// connection for `accept` only once its first bytes arrived, so the loop's
    /// first read finds the request, and a connection answered and closed at once
    /// is never added to epoll at all.
    ClientSpeaksFirst,
    /// The server (SMTP, FTP, POP3): the connection is accepted at once, so that
    /// the server can greet it. Also for a relay, which cannot know who speaks
    /// first in what it carries (a proxy that reads its clients' requests, whose
    /// clients speak first, is `ClientSpeaksFirst`).
    ServerSpeaksFirst,
}

/// How to listen.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ListenOptions {
    /// The accept queue's length; the kernel caps it at `net.core.somaxconn`.
    pub backlog: u32,
    /// Who speaks first.
    pub opening: Opening,
}

impl Default for ListenOptions {
    /// A backlog of 4096 (Linux's default `somaxconn` since 5.4), client first.
    fn default() -> ListenOptions {
        ListenOptions { backlog: 4096, opening: Opening::ClientSpeaksFirst }
    }
}

/// Seconds the kernel holds a silent connection back before queueing it anyway.
const DEFER_ACCEPT_SECS: libc::c_int = 5;

/// Binds a non-blocking TCP listener on `addr` with `SO_REUSEADDR` and
/// `SO_REUSEPORT` (so several processes can share the port) and `TCP_NODELAY`,
/// which Linux copies to every accepted connection: one `setsockopt` here instead of
/// one per connection.
pub fn bind(addr: SocketAddr, options: &ListenOptions) -> io::Result<TcpListener> {
    let socket =
        Socket::new(Domain::for_address(addr), Type::STREAM.nonblocking().cloexec(), Some(Protocol::TCP))?;
    socket.set_reuse_address(true)?;
    socket.set_reuse_port(true)?;
    socket.set_nodelay(true)?;
    if options.opening == Opening::ClientSpeaksFirst {
        sys::set_defer_accept(socket.as_fd(), DEFER_ACCEPT_SECS)?;
    }
    socket.bind(&addr.into())?;
    socket.listen(i32::try_from(options.backlog).unwrap_or(i32::MAX))?;
    Ok(socket.into())
}

/// Binds a non-blocking, close-on-exec Unix stream listener on `path`, with
/// `options.backlog` (`options.opening` is TCP's alone: a Unix socket has no
/// `TCP_DEFER_ACCEPT`, and none of TCP's options).
///
/// A socket file already at `path` is replaced only if nothing listens on it: a
/// connect to it is refused (a server that stopped without removing it). One a
/// server listens on is an [`AddrInUse`](io::ErrorKind::AddrInUse) error, and so
/// is a file there that is not a socket, which is never removed.
pub fn bind_unix(path: &Path, options: &ListenOptions) -> io::Result<UnixListener> {
    let addr = SockAddr::unix(path)?;
    let socket = Socket::new(Domain::UNIX, Type::STREAM.nonblocking().cloexec(), None)?;
    match socket.bind(&addr) {
        Err(e) if e.kind() == io::ErrorKind::AddrInUse && is_stale(path, &addr)? => {
            std::fs::remove_file(path)?;
            socket.bind(&addr)?;
        }
        bound => bound?,
    }
    socket.listen(i32::try_from(options.backlog).unwrap_or(i32::MAX))?;
    Ok(UnixListener::from(OwnedFd::from(socket)))
}

/// Whether the file at `path` (`addr`) is a socket nothing listens on; an
/// `AddrInUse` error, saying why, when it is not a socket or one that is live.
fn is_stale(path: &Path, addr: &SockAddr) -> io::Result<bool> {
    let in_use = |why: &str| io::Error::new(io::ErrorKind::AddrInUse, why);
    if !std::fs::symlink_metadata(path)?.file_type().is_socket() {
        return Err(in_use("a file that is not a socket is there"));
    }
    // Non-blocking, so that a live server whose queue is full is not waited for:
    // that connect fails with EAGAIN, and the socket is live all the same.
    let probe = Socket::new(Domain::UNIX, Type::STREAM.nonblocking().cloexec(), None)?;
    match probe.connect(addr) {
        Err(e) if e.kind() == io::ErrorKind::ConnectionRefused => Ok(true),
        Err(e) if e.kind() != io::ErrorKind::WouldBlock => Err(e),
        _ => Err(in_use("a server listens on it")),
    }
}

/// Whether another socket holds `addr` (any socket, `SO_REUSEPORT` or not, of any
/// user): binding it without `SO_REUSEPORT` then fails with "address in use", where
/// a `SO_REUSEPORT` bind of the same user would silently share the port.
/// `SO_REUSEADDR` keeps a connection left in `TIME_WAIT` by an earlier run from
/// counting.
pub fn is_taken(addr: SocketAddr) -> io::Result<bool> {
    let probe = Socket::new(Domain::for_address(addr), Type::STREAM.cloexec(), Some(Protocol::TCP))?;
    probe.set_reuse_address(true)?;
    match probe.bind(&addr.into()) {
        Ok(()) => Ok(false),
        Err(e) if e.kind() == io::ErrorKind::AddrInUse => Ok(true),
        Err(e) => Err(e),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::fd::AsFd;

    fn loopback() -> SocketAddr {
        ([127, 0, 0, 1], 0).into()
    }

    #[test]
    fn a_listener_defers_accept_only_where_the_client_speaks_first() {
        for (opening, deferred) in [(Opening::ClientSpeaksFirst, true), (Opening::ServerSpeaksFirst, false)] {
            let listener =
                bind(loopback(), &ListenOptions { opening, ..ListenOptions::default() }).expect("bound");
            let seconds = sys::defer_accept(listener.as_fd()).expect("TCP_DEFER_ACCEPT");
            assert_eq!(seconds > 0, deferred, "{opening:?}: {seconds} s");
        }
    }

    #[test]
    fn an_address_is_taken_while_a_socket_holds_it_and_free_after() {
        let listener = bind(loopback(), &ListenOptions::default()).expect("bound");
        let addr = listener.local_addr().expect("its address");
        assert!(is_taken(addr).expect("probed"), "{addr} is held");
        drop(listener);
        assert!(!is_taken(addr).expect("probed"), "{addr} is free");
        // An address this machine does not have is not "taken": an error, said as such.
        let elsewhere = SocketAddr::from(([192, 0, 2, 1], addr.port()));
        let error = is_taken(elsewhere).expect_err("not a local address");
        assert_eq!(error.kind(), io::ErrorKind::AddrNotAvailable, "{error}");
    }

    /// A directory of its own under the system's temporary one, removed on drop.
    struct TempDir(PathBuf);

    impl TempDir {
        fn new(name: &str) -> TempDir {
            let dir = std::env::temp_dir().join(format!("percore-listen-{name}-{}", std::process::id()));
            std::fs::create_dir_all(&dir).expect("a temporary directory");
            TempDir(dir)
        }
    }

    impl Drop for TempDir {
        fn drop(&mut self) {
            let _ = std::fs::remove_dir_all(&self.0);
        }
    }

    #[test]
    fn a_stale_socket_file_is_replaced_and_the_new_listener_answers() {
        let dir = TempDir::new("stale");
        let path = dir.0.join("s.sock");
        // A listener that is gone leaves its file behind, which nothing listens on.
        drop(std::os::unix::net::UnixListener::bind(&path).expect("the first listener"));
        assert!(path.exists());
        let listener = bind_unix(&path, &ListenOptions::default()).expect("bound over the stale file");
        let _client = std::os::unix::net::UnixStream::connect(&path).expect("connected");
        let (_accepted, _) = listener.accept().expect("accepted by the new listener");
    }

    #[test]
    fn a_socket_a_server_listens_on_is_in_use_and_kept() {
        let dir = TempDir::new("live");
        let path = dir.0.join("s.sock");
        let live = bind_unix(&path, &ListenOptions::default()).expect("the first listener");
        let error = bind_unix(&path, &ListenOptions::default()).expect_err("the path is in use");
        assert_eq!(error.kind(), io::ErrorKind::AddrInUse, "{error}");
        assert!(error.to_string().contains("a server listens on it"), "{error}");
        let _client = std::os::unix::net::UnixStream::connect(&path).expect("the first still listens");
        live.accept().expect("and accepts");
    }

    #[test]
    fn a_file_that_is_not_a_socket_is_refused_and_left_alone() {
        let dir = TempDir::new("file");
        let path = dir.0.join("not-a-socket");
        std::fs::write(&path, b"keep me").expect("a regular file");
        let error = bind_unix(&path, &ListenOptions::default()).expect_err("not a socket");
        assert_eq!(error.kind(), io::ErrorKind::AddrInUse, "{error}");
        assert!(error.to_string().contains("not a socket"), "{error}");
        assert_eq!(std::fs::read(&path).expect("still there"), b"keep me");
    }

    #[test]
    fn an_address_is_written_and_read_back_ip_or_unix() {
        for text in ["127.0.0.1:8080", "[::1]:80", "unix:/run/percore.sock", "unix:relative.sock"] {
            let address: Address = text.parse().expect(text);
            assert_eq!(address.to_string(), text);
        }
        assert_eq!("unix:/x".parse(), Ok(Address::Unix(PathBuf::from("/x"))));
        assert_eq!(Address::from(([127, 0, 0, 1], 1)), Address::Ip(SocketAddr::from(([127, 0, 0, 1], 1))));
        for refused in ["unix:", "127.0.0.1", "localhost:80", ""] {
            assert!(refused.parse::<Address>().is_err(), "{refused}");
        }
    }

    #[test]
    fn a_listener_says_its_address_and_is_taken_back_from_its_descriptor() {
        let dir = TempDir::new("adopt");
        let path = dir.0.join("s.sock");
        let unix = Listener::from(bind_unix(&path, &ListenOptions::default()).expect("bound"));
        assert_eq!(unix.local_addr().expect("its path"), Address::Unix(path.clone()));
        let tcp = Listener::from(bind(loopback(), &ListenOptions::default()).expect("bound"));
        let tcp_addr = tcp.local_addr().expect("its address");
        for (listener, address) in [(unix, Address::Unix(path)), (tcp, tcp_addr)] {
            let fd = match listener {
                Listener::Tcp(l) => OwnedFd::from(l),
                Listener::Unix(l) => OwnedFd::from(l),
            };
            let adopted = Listener::try_from(fd).expect("a listener");
            assert_eq!(adopted.local_addr().expect("its address"), address);
        }
    }
}
