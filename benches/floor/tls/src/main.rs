//! The TLS floor: the least an HTTPS hello server can do on rustls, to measure how far a
//! real server's TLS costs are from the limit of the TLS library. One process, one
//! edge-triggered epoll loop; each connection is a rustls `ServerConnection` (the buffered
//! API) with the provider's default cipher suites, TLS 1.3 and 1.2, ALPN http/1.1, session
//! tickets, and the one certificate chain and key of the PEM files. No parse: the only work
//! per request is finding where its head ends (each "\r\n\r\n" in the decrypted bytes, also
//! across reads), so that pipelined requests get one answer each, all of a read's answers
//! in one write to rustls (one TLS record), sent at once; what the socket does not take
//! waits for EPOLLOUT, and reading waits with it. A request with `Connection: close`, or
//! HTTP/1.0 without keep-alive (ab without -k), is answered, then its connection closed
//! after a close_notify. The crypto provider is ring, or aws-lc-rs with the `aws` feature
//! (both builds write the same binary). It listens on 127.0.0.1:PORT (0: any free port) and
//! prints the address on stderr. No timeouts, no limits beyond MAX_FDS: not a server to use.
//!
//!     cargo build --release --manifest-path benches/floor/tls/Cargo.toml
//!     cargo build --release --manifest-path benches/floor/tls/Cargo.toml --features aws --no-default-features
//!     taskset -c 0 benches/floor/tls/target/release/floor-tls 8443 cert.pem key.pem

use std::error::Error;
use std::io::{self, ErrorKind, Read, Write};
use std::net::{Ipv4Addr, TcpListener, TcpStream};
use std::os::fd::{AsRawFd, FromRawFd, RawFd};
use std::sync::Arc;

use libc::{c_int, EPOLLERR, EPOLLET, EPOLLHUP, EPOLLIN, EPOLLOUT, EPOLLRDHUP};
#[cfg(feature = "aws")]
use rustls::crypto::aws_lc_rs as provider;
#[cfg(all(feature = "ring", not(feature = "aws")))]
use rustls::crypto::ring as provider;
use rustls::{version, ServerConfig, ServerConnection};
use rustls_pki_types::pem::PemObject;
use rustls_pki_types::{CertificateDer, PrivateKeyDer};

#[cfg(not(any(feature = "ring", feature = "aws")))]
compile_error!("choose a crypto provider: the `ring` (default) or the `aws` feature");

const ANSWER: &[u8] = b"HTTP/1.1 200 OK\r\nServer: floor\r\nContent-Length: 14\r\n\r\nhello, world!\n";
/// Answers one write to rustls may carry: as many as one TLS record (16 KiB) holds.
const MAX_ANSWERS: usize = 16384 / ANSWER.len();
const MAX_FDS: usize = 65536;

/// One connection: its socket, its TLS state, and how much of "\r\n\r\n" the bytes
/// decrypted so far end with.
struct Conn {
    sock: TcpStream,
    tls: ServerConnection,
    matched: usize,
    /// Answered a request that asked to close, or the peer's close_notify: close once sent.
    closing: bool,
}

/// The socket as rustls reads it, noting a short read: the socket had no more to give.
struct Source<'a> {
    sock: &'a TcpStream,
    short: bool,
}

impl Read for Source<'_> {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        let mut sock = self.sock;
        let n = sock.read(buf)?;
        self.short = n < buf.len();
        Ok(n)
    }
}

impl Conn {
    /// Serves an event: sends what waits, then reads, answers and sends until the socket
    /// has no more to read or takes no more; returns false to close the connection.
    fn ready(&mut self, events: u32, plain: &mut Vec<u8>, answers: &[u8]) -> bool {
        if events & (EPOLLHUP | EPOLLERR) as u32 != 0 {
            return false;
        }
        // EPOLLOUT alone matters only when a send stopped on a full socket.
        if events & (EPOLLIN | EPOLLRDHUP) as u32 == 0 && !self.tls.wants_write() {
            return true;
        }
        // After EPOLLRDHUP, read on to the end of the stream: no edge will come for it.
        let to_end = events & EPOLLRDHUP as u32 != 0;
        let mut drained = false;
        loop {
            match self.flush() {
                Ok(true) if self.closing => return false,
                Ok(true) if drained => return true,
                Ok(true) => {}
                Ok(false) => return true,
                Err(_) => return false,
            }
            let mut source = Source { sock: &self.sock, short: false };
            match self.tls.read_tls(&mut source) {
                Ok(0) => return false,
                Ok(_) => drained = source.short && !to_end,
                Err(e) if e.kind() == ErrorKind::WouldBlock => return true,
                Err(_) => return false,
            }
            if self.tls.process_new_packets().is_err() {
                let _ = self.tls.write_tls(&mut &self.sock); // the alert, if it goes
                return false;
            }
            if self.answer(plain, answers).is_err() {
                return false;
            }
        }
    }

    /// Answers the requests whose heads the last read completed, in one write.
    fn answer(&mut self, plain: &mut Vec<u8>, answers: &[u8]) -> io::Result<()> {
        plain.clear();
        let close_notify = match self.tls.reader().read_to_end(plain) {
            Ok(_) => true,
            Err(e) if e.kind() == ErrorKind::WouldBlock => false,
            Err(e) => return Err(e),
        };
        let (mut ends, close) = scan(plain, &mut self.matched);
        while ends > 0 {
            let n = ends.min(MAX_ANSWERS);
            self.tls.writer().write_all(&answers[..n * ANSWER.len()])?;
            ends -= n;
        }
        if close || close_notify {
            self.tls.send_close_notify();
            self.closing = true;
        }
        Ok(())
    }

    /// Sends what rustls holds: true once the socket took all, false if it would block.
    fn flush(&mut self) -> io::Result<bool> {
        while self.tls.wants_write() {
            match self.tls.write_tls(&mut &self.sock) {
                Ok(_) => {}
                Err(e) if e.kind() == ErrorKind::WouldBlock => return Ok(false),
                Err(e) => return Err(e),
            }
        }
        Ok(true)
    }
}

/// Counts the request heads that end in `buf`, up to the first that asks to close, and
/// says whether one did; `matched` carries a partial "\r\n\r\n" across reads.
fn scan(buf: &[u8], matched: &mut usize) -> (usize, bool) {
    let (mut ends, mut start) = (0, 0);
    for (i, &b) in buf.iter().enumerate() {
        *matched = if b == b"\r\n\r\n"[*matched] { *matched + 1 } else { usize::from(b == b'\r') };
        if *matched == 4 {
            *matched = 0;
            ends += 1;
            if closes(&buf[start..=i]) {
                return (ends, true);
            }
            start = i + 1;
        }
    }
    (ends, false)
}

/// Whether a request head asks to close after its answer: `Connection: close`, or an
/// HTTP/1.0 request line without keep-alive. (A head split across reads is judged by the
/// part in the last one.)
fn closes(head: &[u8]) -> bool {
    let has = |word: &[u8]| head.windows(word.len()).any(|w| w.eq_ignore_ascii_case(word));
    let line = head.split(|&b| b == b'\n').next().unwrap_or(head);
    has(b"connection: close") || (line.ends_with(b"HTTP/1.0\r") && !has(b"keep-alive"))
}

/// A libc return value, or the error its errno gives.
fn check(ret: c_int) -> io::Result<c_int> {
    if ret < 0 {
        Err(io::Error::last_os_error())
    } else {
        Ok(ret)
    }
}

/// A non-blocking listener on 127.0.0.1:`port`, with SO_REUSEADDR and a backlog of 4096.
fn listen(port: u16) -> io::Result<TcpListener> {
    let flags = libc::SOCK_STREAM | libc::SOCK_NONBLOCK | libc::SOCK_CLOEXEC;
    // SAFETY: socket takes no pointers.
    let fd = check(unsafe { libc::socket(libc::AF_INET, flags, 0) })?;
    // SAFETY: fd is a new socket that nothing else owns; the listener closes it.
    let listener = unsafe { TcpListener::from_raw_fd(fd) };
    let one: c_int = 1;
    let size = size_of::<c_int>() as libc::socklen_t;
    // SAFETY: the option value points to a c_int of the size given, alive during the call.
    check(unsafe {
        libc::setsockopt(fd, libc::SOL_SOCKET, libc::SO_REUSEADDR, (&raw const one).cast(), size)
    })?;
    let addr = libc::sockaddr_in {
        sin_family: libc::AF_INET as libc::sa_family_t,
        sin_port: port.to_be(),
        sin_addr: libc::in_addr { s_addr: u32::from(Ipv4Addr::LOCALHOST).to_be() },
        sin_zero: [0; 8],
    };
    let size = size_of::<libc::sockaddr_in>() as libc::socklen_t;
    // SAFETY: the address points to a sockaddr_in of the size given, alive during the call.
    check(unsafe { libc::bind(fd, (&raw const addr).cast(), size) })?;
    // SAFETY: listen takes no pointers.
    check(unsafe { libc::listen(fd, 4096) })?;
    Ok(listener)
}

/// Adds `fd` to the epoll set `ep`, edge-triggered, with `fd` as its data.
fn watch(ep: RawFd, fd: RawFd, events: c_int) -> io::Result<()> {
    let mut event = libc::epoll_event { events: (events | EPOLLET) as u32, u64: fd as u64 };
    // SAFETY: event is a valid epoll_event, alive during the call.
    check(unsafe { libc::epoll_ctl(ep, libc::EPOLL_CTL_ADD, fd, &mut event) }).map(drop)
}

/// Takes the listener's pending connections, until accept4 would block.
fn accept(listener: &TcpListener, ep: RawFd, config: &Arc<ServerConfig>, conns: &mut [Option<Box<Conn>>]) {
    loop {
        let flags = libc::SOCK_NONBLOCK | libc::SOCK_CLOEXEC;
        // SAFETY: null address pointers ask accept4 not to store the peer's address.
        let fd =
            unsafe { libc::accept4(listener.as_raw_fd(), std::ptr::null_mut(), std::ptr::null_mut(), flags) };
        if fd < 0 {
            let err = io::Error::last_os_error();
            match err.kind() {
                ErrorKind::WouldBlock => return,
                ErrorKind::Interrupted | ErrorKind::ConnectionAborted => continue,
                _ => return eprintln!("accept4: {err}"),
            }
        }
        // SAFETY: fd is a new socket that nothing else owns; the stream closes it.
        let sock = unsafe { TcpStream::from_raw_fd(fd) };
        let Some(slot) = conns.get_mut(fd as usize) else { continue };
        let Ok(mut tls) = ServerConnection::new(config.clone()) else { continue };
        // Reading stops while a send waits, which bounds what rustls holds.
        tls.set_buffer_limit(None);
        if sock.set_nodelay(true).is_ok() && watch(ep, fd, EPOLLIN | EPOLLOUT | EPOLLRDHUP).is_ok() {
            *slot = Some(Box::new(Conn { sock, tls, matched: 0, closing: false }));
        }
    }
}

fn serve(listener: &TcpListener, config: Arc<ServerConfig>) -> io::Result<()> {
    // SAFETY: epoll_create1 takes no pointers.
    let ep = check(unsafe { libc::epoll_create1(libc::EPOLL_CLOEXEC) })?;
    watch(ep, listener.as_raw_fd(), EPOLLIN)?;
    let mut conns: Vec<Option<Box<Conn>>> = (0..MAX_FDS).map(|_| None).collect();
    let mut events = vec![libc::epoll_event { events: 0, u64: 0 }; 1024];
    let (mut plain, answers) = (Vec::with_capacity(16384), ANSWER.repeat(MAX_ANSWERS));
    loop {
        // SAFETY: events has room for as many entries as the call is told.
        let n = unsafe { libc::epoll_wait(ep, events.as_mut_ptr(), events.len() as c_int, -1) };
        let n = match check(n) {
            Ok(n) => n as usize,
            Err(e) if e.kind() == ErrorKind::Interrupted => continue,
            Err(e) => return Err(e),
        };
        for event in &events[..n] {
            let (fd, bits) = (event.u64 as usize, event.events);
            if fd == listener.as_raw_fd() as usize {
                accept(listener, ep, &config, &mut conns);
            } else if let Some(conn) = conns[fd].as_mut() {
                if !conn.ready(bits, &mut plain, &answers) {
                    conns[fd] = None; // closing the socket takes it out of the epoll set
                }
            }
        }
    }
}

/// The server's TLS configuration, from the certificate chain and key PEM files.
fn config(cert: &str, key: &str) -> Result<ServerConfig, Box<dyn Error>> {
    let chain = CertificateDer::pem_file_iter(cert)
        .and_then(|certs| certs.collect::<Result<Vec<_>, _>>())
        .map_err(|e| format!("{cert}: {e}"))?;
    let key = PrivateKeyDer::from_pem_file(key).map_err(|e| format!("{key}: {e}"))?;
    // ring's provider is deprecated since rustls 0.23.48 (no post-quantum key exchange).
    #[allow(deprecated)]
    let crypto = provider::default_provider();
    let mut config = ServerConfig::builder_with_provider(Arc::new(crypto))
        .with_protocol_versions(&[&version::TLS13, &version::TLS12])?
        .with_no_client_auth()
        .with_single_cert(chain, key)?;
    config.alpn_protocols = vec![b"http/1.1".to_vec()];
    config.ticketer = provider::Ticketer::new()?;
    Ok(config)
}

fn run(port: &str, cert: &str, key: &str) -> Result<(), Box<dyn Error>> {
    let config = Arc::new(config(cert, key)?);
    let listener = listen(port.parse().map_err(|e| format!("port {port}: {e}"))?)?;
    eprintln!("listening on {}", listener.local_addr()?);
    Ok(serve(&listener, config)?)
}

fn main() {
    let args: Vec<String> = std::env::args().collect();
    if args.len() != 4 {
        eprintln!("usage: {} PORT CERT_PEM KEY_PEM", args[0]);
        std::process::exit(2);
    }
    if let Err(e) = run(&args[1], &args[2], &args[3]) {
        eprintln!("floor-tls: {e}");
        std::process::exit(1);
    }
}
