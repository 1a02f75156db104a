//! A script through a real loop: a `Reactor` on 127.0.0.1, turned by the test's
//! own thread between the clients' steps, so that no thread is left behind and the
//! clients act only between two turns of the loop. Each step is taken once the
//! loop did all the harness did for the one before (callbacks logged, bytes
//! received, streams ended), waiting at most [`WAIT`].

use std::collections::{BTreeMap, BTreeSet};
use std::io::{ErrorKind, Read, Write};
use std::net::{Shutdown, SocketAddr, TcpListener, TcpStream};
use std::time::{Duration, Instant};

use percore::listen::{self, ListenOptions, Opening};
use percore::reactor::Reactor;
use socket2::{Domain, Socket, Type};

use super::harness_side::Expected;
use super::outcome::{Outcome, Received};
use super::protocol::{Remaining, Scripted, Targets, ACCEPTED};
use super::script::Step;
use super::{config, Wire};

/// Bound on every wait for the loop.
const WAIT: Duration = Duration::from_secs(10);

/// Longest a turn of the loop waits with nothing due: then the clients look at
/// their sockets again.
const TURN: Duration = Duration::from_millis(5);

/// How long (and for how many turns at least) the loop may do nothing new before it
/// is taken to have done all it will: far beyond the scripts' timers (a few ms)
/// and the kernel's loopback, so that a run where the loop does less than the
/// harness fails in a second, not in [`WAIT`] (shrinking runs many such cases).
const QUIET: (Duration, usize) = (Duration::from_secs(1), 100);

/// A loop serving [`Scripted`], its clients, and the sockets its connections go to.
/// Everything is closed when it is dropped, whatever the test's fate.
pub struct LoopSide {
    reactor: Reactor<Scripted>,
    targets: Targets,
    /// Accepts the connections the protocol opens; the test is their peer.
    peers: TcpListener,
    /// Bound and not listening, so that a connect to it is refused and no one
    /// else takes its port meanwhile.
    _refusing: Socket,
    clients: BTreeMap<char, Client>,
    /// The connections whose close lingered: their clients closed at the end of
    /// the server's stream, as the harness's peer does (see [`LoopSide::turn`]).
    lingered: BTreeSet<char>,
}

/// The test's end of one connection.
struct Client {
    stream: TcpStream,
    /// Its TLS, rustls's, if the connection speaks it.
    #[cfg(feature = "tls")]
    tls: Option<rustls::ClientConnection>,
    received: Received,
    /// The client ended its stream (a step did, or it closed at the server's linger).
    ended: bool,
}

impl Client {
    fn new(stream: TcpStream) -> Client {
        stream.set_nonblocking(true).expect("a non-blocking client");
        // The harness's peer sends a step at once. Nagle's algorithm would hold a
        // step back until the server acknowledged the one before, which it delays
        // when it answers nothing (a paused connection): the loop would read it
        // after what later steps set off.
        stream.set_nodelay(true).expect("a client that sends at once");
        Client {
            stream,
            #[cfg(feature = "tls")]
            tls: None,
            received: Received::default(),
            ended: false,
        }
    }

    /// A client speaking TLS through rustls, trusting the test CA: its ClientHello
    /// goes at once, the rest of the handshake as it reads.
    #[cfg(feature = "tls")]
    fn with_tls(stream: TcpStream) -> Client {
        use rustls::pki_types::pem::PemObject;
        let ca = std::path::PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/tls/ca.pem");
        let mut roots = rustls::RootCertStore::empty();
        roots.add_parsable_certificates(
            rustls::pki_types::CertificateDer::pem_file_iter(ca)
                .expect("the CA")
                .map(|c| c.expect("a certificate")),
        );
        let provider = std::sync::Arc::new(rustls::crypto::aws_lc_rs::default_provider());
        let config = rustls::ClientConfig::builder_with_provider(provider)
            .with_safe_default_protocol_versions()
            .expect("versions")
            .with_root_certificates(roots)
            .with_no_client_auth();
        let name = "localhost".try_into().expect("a name");
        let tls = rustls::ClientConnection::new(std::sync::Arc::new(config), name).expect("a client");
        let mut client = Client { tls: Some(tls), ..Client::new(stream) };
        client.write_tls();
        client
    }

    /// Reads what arrived, and notes the end of the stream (or a reset: either way,
    /// the server is done with it).
    fn read(&mut self) {
        let mut buffer = [0; 4096];
        while !self.received.ended {
            match self.stream.read(&mut buffer) {
                Ok(0) => self.received.ended = true,
                Ok(n) => self.arrived(&buffer[..n]),
                Err(e) if e.kind() == ErrorKind::WouldBlock => return,
                Err(e) if e.kind() == ErrorKind::Interrupted => {}
                Err(e) if e.kind() == ErrorKind::ConnectionReset => self.received.ended = true,
                Err(e) => panic!("reading what the loop sent: {e}"),
            }
        }
    }

    /// `bytes` came: what they say, opened by the client's TLS if it has one.
    fn arrived(&mut self, bytes: &[u8]) {
        #[cfg(feature = "tls")]
        if let Some(tls) = self.tls.as_mut() {
            let mut records = bytes;
            while !records.is_empty() {
                tls.read_tls(&mut records).expect("into rustls's buffer");
                tls.process_new_packets().expect("records rustls takes");
            }
            let mut plaintext = Vec::new();
            match tls.reader().read_to_end(&mut plaintext) {
                // close_notify: the server's end of stream, as a plain one's would be.
                Ok(_) => self.received.ended = true,
                Err(e) if e.kind() == ErrorKind::WouldBlock => {}
                Err(e) => panic!("rustls reading what the loop sent: {e}"),
            }
            self.received.bytes.push_str(&String::from_utf8_lossy(&plaintext));
            self.write_tls();
            return;
        }
        self.received.bytes.push_str(&String::from_utf8_lossy(bytes));
    }

    /// Sends `bytes`: a few, far below what the socket buffers, so the write is whole.
    fn send(&mut self, bytes: &[u8]) {
        #[cfg(feature = "tls")]
        if let Some(tls) = self.tls.as_mut() {
            tls.writer().write_all(bytes).expect("into rustls's buffer");
            return self.write_tls();
        }
        self.stream.write_all(bytes).expect("sending a step");
    }

    /// Sends what the client's TLS has to send (a handshake's flight, records).
    #[cfg(feature = "tls")]
    fn write_tls(&mut self) {
        let Some(tls) = self.tls.as_mut() else { return };
        let mut sealed = Vec::new();
        while tls.wants_write() {
            tls.write_tls(&mut sealed).expect("to a vector");
        }
        // The server may have closed already: what it will not read is lost, as a
        // plain client's bytes would be.
        let _ = self.stream.write_all(&sealed);
    }

    /// Ends the client's stream: after close_notify, if it speaks TLS.
    fn end(&mut self) {
        self.ended = true;
        #[cfg(feature = "tls")]
        if let Some(tls) = self.tls.as_mut() {
            tls.send_close_notify();
            self.write_tls();
        }
        // The server may have closed already: then there is nothing to end.
        let _ = self.stream.shutdown(Shutdown::Write);
    }
}

impl LoopSide {
    /// A loop on 127.0.0.1, with its one accepted connection's client, speaking as
    /// `wire` says.
    pub fn start(remaining: Remaining, wire: Wire) -> LoopSide {
        let peers = TcpListener::bind("127.0.0.1:0").expect("binding the peers' listener");
        peers.set_nonblocking(true).expect("a non-blocking listener");
        let refusing = Socket::new(Domain::IPV4, Type::STREAM, None).expect("a socket");
        refusing.bind(&SocketAddr::from(([127, 0, 0, 1], 0)).into()).expect("binding a port");
        let targets = Targets {
            listening: peers.local_addr().expect("the peers' address"),
            refusing: refusing.local_addr().ok().and_then(|addr| addr.as_socket()).expect("its address"),
        };
        let options = ListenOptions { opening: Opening::ServerSpeaksFirst, ..ListenOptions::default() };
        let listener =
            listen::bind(([127, 0, 0, 1], 0).into(), &options).expect("binding the loop's listener");
        let addr = listener.local_addr().expect("the loop's address");
        #[allow(unused_mut, reason = "set with the tls feature")]
        let mut reactor =
            Reactor::new(listener, Scripted::new(targets, remaining), config()).expect("a loop");
        let accepted = TcpStream::connect_timeout(&addr, WAIT).expect("connecting to the loop");
        let client = match wire {
            Wire::Plain => Client::new(accepted),
            #[cfg(feature = "tls")]
            Wire::Tls => {
                reactor.set_tls(Some(&super::server_tls()));
                Client::with_tls(accepted)
            }
        };
        let clients = BTreeMap::from([(ACCEPTED, client)]);
        LoopSide { reactor, targets, peers, _refusing: refusing, clients, lingered: BTreeSet::new() }
    }

    /// Where the protocol's connections go: the harness's protocol must be told the same.
    pub fn targets(&self) -> Targets {
        self.targets
    }

    /// Runs `script` as the harness did (`expected`): the steps it took, each once
    /// the loop did what the harness did before it. Returns what the loop did, and
    /// why it stopped early, if it did: it did not do all that within [`WAIT`], or
    /// did something else.
    pub fn run(mut self, script: &[Step], expected: &Expected) -> (Outcome, Option<String>) {
        let mut checkpoints = expected.after.iter();
        let opening = checkpoints.next().and_then(Option::as_ref).expect("the opening's outcome");
        if let Err(stopped) = self.catch_up(opening) {
            return (self.outcome(), Some(format!("at the opening: {stopped}")));
        }
        for (i, (step, after)) in script.iter().zip(checkpoints).enumerate() {
            let Some(after) = after else { continue };
            self.take(step);
            if let Err(stopped) = self.catch_up(after) {
                return (self.outcome(), Some(format!("at step {i} ({step:?}): {stopped}")));
            }
        }
        // Work the loop left for its next turn (a connection served again) would
        // come after the harness's last callback: one more turn shows it.
        self.turn(Duration::ZERO);
        (self.outcome(), None)
    }

    /// One turn of the loop, waiting at most `max_wait`; then the clients read
    /// what came, and the peers of connections it opened are accepted.
    ///
    /// A client that finds the end of the server's stream while its connection is
    /// closing ends its own: the server lingers, and the harness's peer closes as
    /// soon as it reads the end of a lingering connection's stream. It does so in
    /// the same call, before anything else happens; a client here can only do it
    /// after this turn, so the loop's `on_close` for that connection comes later in
    /// its log than the harness's (see [`Outcome`]'s comparison): the harness has
    /// no peer that closes only when told, as a script's `End` step would.
    fn turn(&mut self, max_wait: Duration) {
        self.reactor.turn(Some(max_wait)).expect("a turn of the loop");
        self.accept_peers();
        for (&name, client) in &mut self.clients {
            client.read();
            if client.received.ended && !client.ended && self.reactor.protocol().is_closing(name) {
                // Closing and not yet closed, its end of stream sent: it lingers.
                self.lingered.insert(name);
                client.end();
            }
        }
    }

    fn take(&mut self, step: &Step) {
        let client = self.clients.get_mut(&step.name()).expect("the harness took this step: a client");
        match step {
            Step::Send(_, bytes) => client.send(bytes.as_bytes()),
            Step::End(_) => client.end(),
        }
    }

    /// Turns the loop until it did what `expected` says, or strayed from it, or
    /// stayed [`QUIET`], or [`WAIT`] passed.
    fn catch_up(&mut self, expected: &Outcome) -> Result<(), String> {
        let deadline = Instant::now() + WAIT;
        let mut last = self.outcome();
        let (mut quiet_since, mut quiet_turns) = (Instant::now(), 0);
        loop {
            self.turn(TURN);
            let outcome = self.outcome();
            if outcome.strayed_from(expected) {
                return Err("it did something else".into());
            }
            if outcome.reached(expected) {
                return Ok(());
            }
            if outcome == last {
                quiet_turns += 1;
                if quiet_since.elapsed() > QUIET.0 && quiet_turns > QUIET.1 {
                    return Err(format!("it did less, and nothing more for {:?}", QUIET.0));
                }
            } else {
                (last, quiet_since, quiet_turns) = (outcome, Instant::now(), 0);
            }
            if Instant::now() > deadline {
                return Err(format!("it did not do as much within {WAIT:?}"));
            }
        }
    }

    /// Accepts the connections the protocol opened, named in the order it opened them.
    fn accept_peers(&mut self) {
        loop {
            let stream = match self.peers.accept() {
                Ok((stream, _)) => stream,
                Err(e) if e.kind() == ErrorKind::WouldBlock => return,
                Err(e) if e.kind() == ErrorKind::Interrupted => continue,
                Err(e) => panic!("accepting a connection the loop opened: {e}"),
            };
            let peers = self.clients.len() - 1;
            let name = *self.reactor.protocol().opened().get(peers).expect("opened before it was accepted");
            self.clients.insert(name, Client::new(stream));
        }
    }

    fn outcome(&self) -> Outcome {
        let clients = self.clients.iter().map(|(&name, client)| (name, client.received.clone())).collect();
        Outcome { log: self.reactor.protocol().log().to_vec(), clients, lingered: self.lingered.clone() }
    }
}
