//! The loop on Unix sockets: accepting on one (`listen::bind_unix`), and opening
//! connections to one by its path, from the loop's owner (`Reactor::connect_unix`)
//! and from a callback (`Io::connect_unix`). The loop is turned by the test itself,
//! in bounded waits.

use std::collections::HashSet;
use std::io::{ErrorKind, Read, Write};
use std::os::unix::net::{UnixListener, UnixStream};
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use percore::listen::{self, ListenOptions};
use percore::reactor::{Closed, Config, ConnId, Flow, Io, Protocol, Reactor, Verdict};

/// Bound on every wait for the loop or the peer.
const WAIT: Duration = Duration::from_secs(10);

/// A directory of its own under the system's temporary one, removed on drop.
struct TempDir(PathBuf);

impl TempDir {
    fn new(name: &str) -> TempDir {
        let dir = std::env::temp_dir().join(format!("percore-unix-{name}-{}", std::process::id()));
        std::fs::create_dir_all(&dir).expect("a temporary directory");
        TempDir(dir)
    }

    fn path(&self, name: &str) -> PathBuf {
        self.0.join(name)
    }
}

impl Drop for TempDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

/// Turns the loop, 10 ms at a time, until `done` holds; panics after [`WAIT`].
fn turn_until<P: Protocol>(reactor: &mut Reactor<P>, what: &str, mut done: impl FnMut(&Reactor<P>) -> bool) {
    let deadline = Instant::now() + WAIT;
    while !done(reactor) {
        assert!(Instant::now() < deadline, "{what}: not within {WAIT:?}");
        reactor.turn(Some(Duration::from_millis(10))).expect("a turn of the loop");
    }
}

/// Echoes what arrives; remembers what `Io::peer_addr` said of each connection.
#[derive(Default)]
struct Echo {
    peers: Vec<Result<std::net::SocketAddr, ErrorKind>>,
    echoed: usize,
}

impl Protocol for Echo {
    type Conn = ();

    fn on_open(&mut self, _: &mut (), io: &mut Io<'_>) -> Flow {
        self.peers.push(io.peer_addr().map_err(|e| e.kind()));
        Flow::Continue
    }

    fn on_data(&mut self, _: &mut (), input: &[u8], io: &mut Io<'_>) -> Verdict {
        io.write(input);
        self.echoed += input.len();
        Verdict::keep(input.len())
    }
}

#[test]
fn a_loop_on_a_unix_listener_answers_a_unix_client_that_has_no_ip_address() {
    let dir = TempDir::new("listen");
    let path = dir.path("echo.sock");
    let listener = listen::bind_unix(&path, &ListenOptions::default()).expect("bound");
    let mut reactor = Reactor::new(listener, Echo::default(), Config::default()).expect("a loop");
    let mut client = UnixStream::connect(&path).expect("connected");
    client.set_read_timeout(Some(WAIT)).expect("a read timeout");
    client.write_all(b"ping").expect("sent");
    turn_until(&mut reactor, "the echo", |r| r.protocol().echoed == 4);
    let mut echoed = [0; 4];
    client.read_exact(&mut echoed).expect("the echo");
    assert_eq!(&echoed, b"ping");
    assert_eq!(reactor.protocol().peers, [Err(ErrorKind::Unsupported)], "a Unix peer has no IP address");
}

/// Each accepted connection opens one to `target` by its path; each opened one
/// says hello once established. What happens to the opened ones is logged.
struct Dials {
    target: PathBuf,
    dialed: HashSet<ConnId>,
    log: Vec<String>,
}

impl Dials {
    fn new(target: &Path) -> Dials {
        Dials { target: target.to_path_buf(), dialed: HashSet::new(), log: Vec::new() }
    }

    fn logged(&self, entry: &str) -> bool {
        self.log.iter().any(|line| line == entry)
    }
}

impl Protocol for Dials {
    type Conn = ();

    fn on_open(&mut self, _: &mut (), io: &mut Io<'_>) -> Flow {
        if self.dialed.contains(&io.id()) {
            self.log.push("established".into());
            io.write(b"hello");
        } else {
            let dialed = io.connect_unix(&self.target);
            self.dialed.insert(dialed);
        }
        Flow::Continue
    }

    fn on_data(&mut self, _: &mut (), input: &[u8], _: &mut Io<'_>) -> Verdict {
        Verdict::keep(input.len())
    }

    fn on_close(&mut self, _: &mut (), closed: Closed, _: &[u8], io: &mut Io<'_>) {
        if self.dialed.contains(&io.id()) {
            self.log.push(format!("closed: {closed:?}"));
        }
    }
}

/// A loop serving `protocol` on a Unix listener at `path`, and a client connected.
fn serving<P: Protocol>(path: &Path, protocol: P) -> (Reactor<P>, UnixStream) {
    let listener = listen::bind_unix(path, &ListenOptions::default()).expect("bound");
    let reactor = Reactor::new(listener, protocol, Config::default()).expect("a loop");
    (reactor, UnixStream::connect(path).expect("connected"))
}

#[test]
fn a_callback_connects_to_a_listening_path_and_sends_once_established() {
    let dir = TempDir::new("dial");
    let backend = UnixListener::bind(dir.path("backend.sock")).expect("a backend");
    let (mut reactor, _client) = serving(&dir.path("front.sock"), Dials::new(&dir.path("backend.sock")));
    turn_until(&mut reactor, "the dialed connection established", |r| r.protocol().logged("established"));
    let (mut accepted, _) = backend.accept().expect("the loop's connection");
    accepted.set_read_timeout(Some(WAIT)).expect("a read timeout");
    let mut hello = [0; 5];
    accepted.read_exact(&mut hello).expect("what it sent");
    assert_eq!(&hello, b"hello");
}

#[test]
fn a_callback_connecting_to_a_missing_path_hears_its_connect_failed() {
    let dir = TempDir::new("missing");
    let (mut reactor, _client) = serving(&dir.path("front.sock"), Dials::new(&dir.path("nobody.sock")));
    let failed = format!("closed: {:?}", Closed::ConnectFailed(ErrorKind::NotFound));
    turn_until(&mut reactor, "the failed connect", |r| r.protocol().logged(&failed));
    assert!(!reactor.protocol().logged("established"), "{:?}", reactor.protocol().log);
    assert_eq!(reactor.stats().failed, 1);
}

#[test]
fn the_owner_connects_by_path_and_a_missing_path_is_its_error() {
    let dir = TempDir::new("owner");
    let backend = UnixListener::bind(dir.path("backend.sock")).expect("a backend");
    let mut reactor = Reactor::client(Dials::new(Path::new("unused")), Config::default()).expect("a loop");
    let missing = reactor.connect_unix(&dir.path("nobody.sock")).expect_err("nothing there");
    assert_eq!(missing.kind(), ErrorKind::NotFound, "{missing}");
    let id = reactor.connect_unix(&dir.path("backend.sock")).expect("connected");
    reactor.protocol_mut().dialed.insert(id);
    turn_until(&mut reactor, "established", |r| r.protocol().logged("established"));
    let (mut accepted, _) = backend.accept().expect("the loop's connection");
    accepted.set_read_timeout(Some(WAIT)).expect("a read timeout");
    let mut hello = [0; 5];
    accepted.read_exact(&mut hello).expect("what it sent");
    assert_eq!(&hello, b"hello");
}
