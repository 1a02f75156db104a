//! The loop reached from a callback, as a server that talks to other servers uses
//! it: connections opened from a callback (established, refused), bytes written on
//! to another connection with the writer's reading held back while the other's
//! output is over the budget, half-close, and the per-connection idle and drain
//! policies. The loop is turned by the test itself, in bounded waits.

mod util;

use std::io::{ErrorKind, Read, Write};
use std::net::{Shutdown, SocketAddr, TcpListener};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use percore::listen::{self, ListenOptions, Opening};
use percore::reactor::{
    Closed, Config, ConnId, Conns, DrainOptions, DrainPolicy, Flow, IdleTimeout, Io, ListenerFate, Protocol,
    Reactor, Verdict,
};
use util::{connect, tcp_queues};

/// Bound on every wait for the loop or the peer.
const WAIT: Duration = Duration::from_secs(10);

fn reactor<P: Protocol>(protocol: P, config: Config) -> (Reactor<P>, SocketAddr) {
    let options = ListenOptions { opening: Opening::ServerSpeaksFirst, ..ListenOptions::default() };
    let listener = listen::bind(([127, 0, 0, 1], 0).into(), &options).expect("binding");
    let addr = listener.local_addr().expect("the bound address");
    (Reactor::new(listener, protocol, config).expect("a loop"), addr)
}

/// Turns the loop, 10 ms at a time, until `done` holds; panics after [`WAIT`].
fn turn_until<P: Protocol>(
    reactor: &mut Reactor<P>,
    what: &str,
    mut done: impl FnMut(&mut Reactor<P>) -> bool,
) {
    let deadline = Instant::now() + WAIT;
    while !done(reactor) {
        assert!(Instant::now() < deadline, "{what}: not within {WAIT:?}");
        reactor.turn(Some(Duration::from_millis(10))).expect("a turn of the loop");
    }
}

/// Reads `len` bytes of `stream` in a thread while the loop turns; returns them,
/// and the stream.
fn read_turning<P: Protocol>(
    reactor: &mut Reactor<P>,
    mut stream: std::net::TcpStream,
    len: usize,
    what: &str,
) -> (Vec<u8>, std::net::TcpStream) {
    let reading = std::thread::spawn(move || {
        let mut bytes = vec![0; len];
        stream.read_exact(&mut bytes).map(|()| (bytes, stream))
    });
    turn_until(reactor, what, |_| reading.is_finished());
    reading.join().expect("the reader").expect(what)
}

/// Turns the loop for `span`.
fn turn_for<P: Protocol>(reactor: &mut Reactor<P>, span: Duration) {
    let until = Instant::now() + span;
    while Instant::now() < until {
        reactor.turn(Some(Duration::from_millis(10))).expect("a turn of the loop");
    }
}

/// A pair per accepted connection: each one opens a connection to `target` and
/// writes every input on to it, and what comes back on to the accepted one; an end
/// of input shuts the other side down. What happens is logged.
struct Pairs {
    target: SocketAddr,
    /// Whether each end splices its input on to the other (else: writes it on).
    splice: bool,
    /// Whether an end whose input ended asks to splice it on then (which does
    /// nothing: there is nothing more to move).
    splice_at_end: bool,
    /// Whether a graceful stop closes the dialed ends at once, as a pool's idle
    /// connections.
    closes_dialed_at_drain: bool,
    /// Whether input on the accepted end marks both ends busy, and input on the
    /// dialed end (the answer) marks both idle, as a proxy's exchange.
    marks_busy: bool,
    /// Each dialed connection, with the accepted one that dialed it, until woken.
    dialed: Vec<(ConnId, ConnId)>,
    log: Vec<String>,
}

#[derive(Default)]
struct End {
    peer: Option<ConnId>,
    dialed: bool,
}

impl Pairs {
    fn new(target: SocketAddr) -> Pairs {
        Pairs {
            target,
            splice: false,
            splice_at_end: false,
            marks_busy: false,
            closes_dialed_at_drain: false,
            dialed: Vec::new(),
            log: Vec::new(),
        }
    }

    fn splicing(target: SocketAddr) -> Pairs {
        Pairs { splice: true, ..Pairs::new(target) }
    }

    fn logged(&self, entry: &str) -> bool {
        self.log.iter().any(|line| line == entry)
    }
}

impl Protocol for Pairs {
    type Conn = End;

    fn on_open(&mut self, end: &mut End, io: &mut Io<'_>) -> Flow {
        if end.dialed {
            self.log.push("established".into());
            return Flow::Continue;
        }
        let dialed = io.connect(self.target);
        // Written before it is established: sent once it is.
        io.write_to(dialed, b"first ");
        io.wake(dialed);
        self.dialed.push((dialed, io.id()));
        end.peer = Some(dialed);
        if self.splice {
            io.splice_to(dialed);
        }
        Flow::Continue
    }

    fn on_wake(&mut self, end: &mut End, io: &mut Io<'_>) -> Flow {
        // Woken by its accepted end in the same turn that opened it: it is the
        // dialed end (the id was known at once).
        end.dialed = true;
        end.peer = self.dialed.iter().find(|(dialed, _)| *dialed == io.id()).map(|&(_, accepted)| accepted);
        if let Some(accepted) = end.peer.filter(|_| self.splice) {
            io.splice_to(accepted);
        }
        self.log.push("woken".into());
        Flow::Continue
    }

    fn on_data(&mut self, end: &mut End, input: &[u8], io: &mut Io<'_>) -> Verdict {
        if let Some(peer) = end.peer {
            io.write_to(peer, input);
            if self.marks_busy {
                for id in [io.id(), peer] {
                    if end.dialed {
                        io.set_idle(id);
                    } else {
                        io.set_busy(id);
                    }
                }
            }
        }
        Verdict::keep(input.len())
    }

    fn on_input_end(&mut self, end: &mut End, io: &mut Io<'_>) -> Flow {
        self.log.push("input ended".into());
        match end.peer {
            Some(peer) => {
                if self.splice_at_end {
                    io.splice_to(peer);
                }
                io.shutdown(peer);
                Flow::Continue
            }
            None => Flow::Close,
        }
    }

    fn on_drain(&mut self, conns: &mut Conns<'_>) {
        if self.closes_dialed_at_drain {
            for &(dialed, _) in &self.dialed {
                conns.close(dialed);
            }
        }
    }

    fn on_close(&mut self, end: &mut End, closed: Closed, _unconsumed: &[u8], _io: &mut Io<'_>) {
        let side = if end.dialed { "dialed" } else { "accepted" };
        self.log.push(format!("{side} closed: {closed:?}"));
    }
}

#[test]
fn a_callback_opens_a_connection_whose_id_it_has_at_once_and_hears_when_it_is_established() {
    let backend = TcpListener::bind("127.0.0.1:0").expect("a backend");
    let (mut reactor, addr) =
        reactor(Pairs::new(backend.local_addr().expect("its address")), Config::default());
    let _client = connect(addr);
    turn_until(&mut reactor, "the dialed connection established", |r| r.protocol().logged("established"));
    // Woken (by id, in the turn that opened it) before it was established.
    assert_eq!(reactor.protocol().log[..2], ["woken", "established"]);
    let (mut accepted, _) = backend.accept().expect("the loop's connection");
    accepted.set_read_timeout(Some(WAIT)).expect("a read timeout");
    let mut first = [0; 6];
    accepted.read_exact(&mut first).expect("what was written before it was established");
    assert_eq!(&first, b"first ");
}

#[test]
fn a_refused_connection_is_closed_with_its_error_and_never_opened() {
    let refusing = TcpListener::bind("127.0.0.1:0").expect("a port");
    let target = refusing.local_addr().expect("its address");
    drop(refusing);
    let (mut reactor, addr) = reactor(Pairs::new(target), Config::default());
    let _client = connect(addr);
    let refused = format!("dialed closed: {:?}", Closed::ConnectFailed(ErrorKind::ConnectionRefused));
    turn_until(&mut reactor, "the refusal", |r| r.protocol().logged(&refused));
    assert!(!reactor.protocol().logged("established"), "{:?}", reactor.protocol().log);
}

#[test]
fn a_connect_a_callback_orders_that_fails_at_once_closes_it_and_counts_as_failed() {
    // The limited broadcast address: the connect fails in the call itself.
    let (mut reactor, addr) = reactor(Pairs::new(([255, 255, 255, 255], 9).into()), Config::default());
    let _client = connect(addr);
    turn_until(&mut reactor, "the failed connect", |r| {
        r.protocol().log.iter().any(|line| line.contains("closed: ConnectFailed"))
    });
    assert_eq!(reactor.stats().failed, 1, "{:?}", reactor.protocol().log);
    assert_eq!(reactor.stats().open, 1, "the accepted connection stays");
}

#[test]
fn a_splice_asked_for_once_the_input_ended_does_nothing() {
    let backend = TcpListener::bind("127.0.0.1:0").expect("a backend");
    let target = backend.local_addr().expect("its address");
    let (mut reactor, addr) = reactor(Pairs { splice_at_end: true, ..Pairs::new(target) }, Config::default());
    let client = connect(addr);
    turn_until(&mut reactor, "the dialed connection established", |r| r.protocol().logged("established"));
    client.shutdown(Shutdown::Write).expect("shutting down");
    turn_until(&mut reactor, "the end of input", |r| r.protocol().logged("input ended"));
    turn_for(&mut reactor, Duration::from_millis(100));
    let ends = reactor.protocol().log.iter().filter(|line| *line == "input ended").count();
    assert_eq!(ends, 1, "{:?}", reactor.protocol().log);
}

/// A request sent through a pair, and a graceful stop (grace 50 ms) begun while
/// the backend has not answered; after 300 ms the backend answers. Returns the
/// connections open before the answer, and what the client read to its end.
fn answer_in_a_stop(marks_busy: bool) -> (usize, Vec<u8>) {
    let backend = TcpListener::bind("127.0.0.1:0").expect("a backend");
    let target = backend.local_addr().expect("its address");
    let (mut reactor, addr) = reactor(Pairs { marks_busy, ..Pairs::new(target) }, Config::default());
    let mut client = connect(addr);
    turn_until(&mut reactor, "the dialed connection established", |r| r.protocol().logged("established"));
    let (upstream, _) = backend.accept().expect("the loop's connection");
    upstream.set_read_timeout(Some(WAIT)).expect("a read timeout");
    client.write_all(b"request").expect("sending");
    let (request, mut upstream) = read_turning(&mut reactor, upstream, 13, "the request forwarded");
    assert_eq!(request, b"first request");
    let options = DrainOptions {
        listener: ListenerFate::HandOver,
        grace: Duration::from_millis(50),
        timeout: Duration::from_secs(30),
    };
    reactor.drain(options);
    turn_for(&mut reactor, Duration::from_millis(300));
    let open = reactor.stats().open;
    // A backend gone with its connection just reads the end of the stream.
    let _ = upstream.write_all(b"answer");
    let reading = std::thread::spawn(move || {
        let mut answer = Vec::new();
        client.read_to_end(&mut answer).map(|_| answer)
    });
    turn_until(&mut reactor, "the client's connection ended", |_| reading.is_finished());
    let answer = reading.join().expect("the client").expect("reading");
    turn_until(&mut reactor, "every connection closed", |r| r.stats().open == 0);
    (open, answer)
}

#[test]
fn on_drain_closes_connections_by_id_at_once_and_the_stop_keeps_the_rest_through_its_grace() {
    let backend = TcpListener::bind("127.0.0.1:0").expect("a backend");
    let target = backend.local_addr().expect("its address");
    let pairs = Pairs { closes_dialed_at_drain: true, ..Pairs::new(target) };
    let (mut reactor, addr) = reactor(pairs, Config::default());
    let _client = connect(addr);
    turn_until(&mut reactor, "the dialed connection established", |r| r.protocol().logged("established"));
    let (mut upstream, _) = backend.accept().expect("the loop's connection");
    upstream.set_read_timeout(Some(WAIT)).expect("a read timeout");
    let options =
        DrainOptions { listener: ListenerFate::HandOver, grace: WAIT, timeout: Duration::from_secs(30) };
    reactor.drain(options);
    let reading = std::thread::spawn(move || {
        let mut all = Vec::new();
        upstream.read_to_end(&mut all).map(|_| all)
    });
    turn_until(&mut reactor, "the end of the dialed connection's stream", |_| reading.is_finished());
    assert_eq!(reading.join().expect("the backend").expect("reading"), b"first ");
    // The close lingers until the backend, having read the end, closes too.
    turn_until(&mut reactor, "the dialed connection closed", |r| r.protocol().logged("dialed closed: Done"));
    assert_eq!(reactor.stats().open, 1, "the client is kept through the grace");
}

#[test]
fn a_stop_leaves_an_exchange_marked_busy_until_its_answer_is_sent_then_closes_both_ends() {
    assert_eq!(answer_in_a_stop(true), (2, b"answer".to_vec()));
    assert_eq!(answer_in_a_stop(false), (0, Vec::new()), "unmarked, both ends look idle and are closed");
}

#[test]
fn an_end_of_input_leaves_the_connection_open_for_writing_until_it_is_shut_down_too() {
    half_close(Pairs::new);
    half_close(Pairs::splicing);
}

fn half_close(pairs: fn(SocketAddr) -> Pairs) {
    let backend = TcpListener::bind("127.0.0.1:0").expect("a backend");
    let (mut reactor, addr) = reactor(pairs(backend.local_addr().expect("its address")), Config::default());
    let mut client = connect(addr);
    client.write_all(b"request").expect("sending");
    client.shutdown(Shutdown::Write).expect("half-closing");
    turn_until(&mut reactor, "the end of the client's input", |r| r.protocol().logged("input ended"));
    let (mut accepted, _) = backend.accept().expect("the loop's connection");
    accepted.set_read_timeout(Some(WAIT)).expect("a read timeout");
    let reading = std::thread::spawn(move || {
        let mut request = Vec::new();
        accepted.read_to_end(&mut request).expect("reading to the end the client's shutdown sent on");
        accepted.write_all(b"answer").expect("answering after the request's end");
        request
    });
    turn_until(&mut reactor, "the backend's answer", |_| reading.is_finished());
    assert_eq!(reading.join().expect("the backend"), b"first request");
    // The backend closed (its stream dropped): both ends are done both ways.
    turn_until(&mut reactor, "both ends closed", |r| r.stats().open == 0);
    let mut answer = Vec::new();
    client.read_to_end(&mut answer).expect("reading the answer to the end");
    assert_eq!(answer, b"answer", "the answer came after the client's own end of stream");
    for side in ["accepted", "dialed"] {
        assert!(reactor.protocol().logged(&format!("{side} closed: Done")), "{:?}", reactor.protocol().log);
    }
    let ends = reactor.protocol().log.iter().filter(|line| *line == "input ended").count();
    assert_eq!(ends, 2, "one end of input told per connection: {:?}", reactor.protocol().log);
}

#[test]
fn a_writer_stops_reading_while_its_peer_is_over_the_budget_and_goes_on_once_it_drains() {
    held_back(Pairs::new);
}

#[test]
fn a_spliced_connection_stops_reading_while_its_peer_cannot_take_the_pipe_and_goes_on_once_it_drains() {
    held_back(Pairs::splicing);
}

fn held_back(pairs: fn(SocketAddr) -> Pairs) {
    let backend = TcpListener::bind("127.0.0.1:0").expect("a backend");
    let (mut reactor, addr) = reactor(pairs(backend.local_addr().expect("its address")), Config::default());
    let mut client = connect(addr);
    client.set_write_timeout(Some(WAIT)).expect("a write timeout");
    turn_until(&mut reactor, "the dialed connection established", |r| r.protocol().logged("established"));
    let (mut accepted, _) = backend.accept().expect("the loop's connection");
    // More than every buffer on the way holds: the writer must be held back.
    const TOTAL: usize = 96 << 20;
    let written = Arc::new(AtomicUsize::new(0));
    let progress = Arc::clone(&written);
    let writing = std::thread::spawn(move || {
        let chunk: Vec<u8> = (0..64 * 1024).map(|i| (i % 251) as u8).collect();
        while progress.load(Ordering::Relaxed) < TOTAL {
            client.write_all(&chunk).expect("writing: the loop reads again once the peer drains");
            progress.fetch_add(chunk.len(), Ordering::Relaxed);
        }
        client
    });
    // The backend reads nothing: the writer stalls short of the total.
    let mut last = usize::MAX;
    turn_until(&mut reactor, "the writer held back", |r| {
        turn_for(r, Duration::from_millis(500));
        let now = written.load(Ordering::Relaxed);
        std::mem::replace(&mut last, now) == now
    });
    assert!(last < TOTAL, "everything was written ({last}): nothing held the writer back");
    // Once the backend reads, every byte arrives, in order.
    accepted.set_read_timeout(Some(WAIT)).expect("a read timeout");
    let reading = std::thread::spawn(move || {
        let mut prefix = [0; 6];
        accepted.read_exact(&mut prefix).expect("the first bytes");
        let mut received = vec![0; TOTAL];
        accepted.read_exact(&mut received).map(|()| received)
    });
    turn_until(&mut reactor, "every byte relayed", |_| reading.is_finished());
    let received = reading.join().expect("the reader").expect("reading every byte");
    assert!(received.iter().enumerate().all(|(i, &b)| b == ((i % (64 * 1024)) % 251) as u8), "bytes differ");
    writing.join().expect("the writer");
}

/// Opts out of the idle timeout, or of being closed as idle in a stop, as told.
struct Policies {
    idle: IdleTimeout,
    drain: DrainPolicy,
}

impl Protocol for Policies {
    type Conn = ();

    fn on_open(&mut self, _conn: &mut (), io: &mut Io<'_>) -> Flow {
        io.set_idle_timeout(self.idle);
        io.set_drain_policy(self.drain);
        Flow::Continue
    }

    fn on_data(&mut self, _conn: &mut (), input: &[u8], io: &mut Io<'_>) -> Verdict {
        io.write(input);
        Verdict::keep(input.len())
    }
}

/// Whether a connection left idle for `span` under `policies` is still open.
fn open_after<F: FnOnce(&mut Reactor<Policies>)>(
    policies: Policies,
    config: Config,
    span: Duration,
    then: F,
) -> bool {
    let (mut reactor, addr) = reactor(policies, config);
    let mut client = connect(addr);
    turn_until(&mut reactor, "the connection accepted", |r| r.stats().open == 1);
    then(&mut reactor);
    turn_for(&mut reactor, span);
    let open = reactor.stats().open == 1;
    if open {
        client.write_all(b"ping").expect("sending");
        turn_until(&mut reactor, "the echo", |_| true);
        let mut echo = [0; 4];
        let reading = std::thread::spawn(move || client.read_exact(&mut echo).map(|()| echo));
        turn_until(&mut reactor, "the echo read", |_| reading.is_finished());
        assert_eq!(&reading.join().expect("the reader").expect("the echo"), b"ping");
    }
    open
}

#[test]
fn a_connection_that_opts_out_of_the_idle_timeout_outlives_it() {
    let config = Config { idle_timeout: Some(Duration::from_secs(1)), ..Config::default() };
    let keep = Policies { idle: IdleTimeout::Never, drain: DrainPolicy::CloseWhenIdle };
    assert!(open_after(keep, config, Duration::from_secs(3), |_| {}), "closed by the idle timeout");
    let default = Policies { idle: IdleTimeout::FromConfig, drain: DrainPolicy::CloseWhenIdle };
    assert!(
        !open_after(default, config, Duration::from_secs(3), |_| {}),
        "the idle timeout did not close it"
    );
}

#[test]
fn a_stop_leaves_a_connection_that_asked_for_it_until_it_closes() {
    let stop = |reactor: &mut Reactor<Policies>| {
        let options = DrainOptions {
            listener: ListenerFate::HandOver,
            grace: Duration::from_millis(50),
            timeout: Duration::from_secs(30),
        };
        reactor.drain(options);
    };
    let until_closed = Policies { idle: IdleTimeout::FromConfig, drain: DrainPolicy::UntilClosed };
    assert!(
        open_after(until_closed, Config::default(), Duration::from_secs(1), stop),
        "closed as idle in the stop"
    );
    let default = Policies { idle: IdleTimeout::FromConfig, drain: DrainPolicy::CloseWhenIdle };
    assert!(!open_after(default, Config::default(), Duration::from_secs(1), stop), "left open by the stop");
}

/// Splices each accepted connection's input on to a connection it opens to
/// `target`; what the target sends back is written to the accepted one, and a
/// target that sends `close` is closed. Every input the protocol is given, and
/// every close, is logged.
struct Splicer {
    target: SocketAddr,
    /// Each connection opened to the target, with the accepted one it serves.
    targets: Vec<(ConnId, ConnId)>,
    log: Vec<String>,
}

impl Splicer {
    fn new(target: SocketAddr) -> Splicer {
        Splicer { target, targets: Vec::new(), log: Vec::new() }
    }

    fn logged(&self, entry: &str) -> bool {
        self.log.iter().any(|line| line == entry)
    }

    /// The accepted connection `id` serves, if it is a target connection.
    fn client_of(&self, id: ConnId) -> Option<ConnId> {
        self.targets.iter().find(|&&(target, _)| target == id).map(|&(_, client)| client)
    }
}

impl Protocol for Splicer {
    type Conn = ();

    fn on_open(&mut self, _conn: &mut (), io: &mut Io<'_>) -> Flow {
        if self.client_of(io.id()).is_none() {
            let target = io.connect(self.target);
            self.targets.push((target, io.id()));
            io.splice_to(target);
            self.log.push("accepted".into());
        }
        Flow::Continue
    }

    fn on_data(&mut self, _conn: &mut (), input: &[u8], io: &mut Io<'_>) -> Verdict {
        let client = self.client_of(io.id());
        let side = if client.is_some() { "target" } else { "client" };
        self.log.push(format!("{side} data {}", String::from_utf8_lossy(input)));
        match client {
            Some(_) if input == b"close" => return Verdict::close(input.len()),
            Some(client) => io.write_to(client, input),
            None => {}
        }
        Verdict::keep(input.len())
    }

    fn on_close(&mut self, _conn: &mut (), closed: Closed, _unconsumed: &[u8], io: &mut Io<'_>) {
        let side = if self.client_of(io.id()).is_some() { "target" } else { "client" };
        self.log.push(format!("{side} closed: {closed:?}"));
    }
}

/// A loop on [`Splicer`], a client connected, and the target's end of the
/// connection the loop opened for it.
fn spliced() -> (Reactor<Splicer>, std::net::TcpStream, std::net::TcpStream) {
    let backend = TcpListener::bind("127.0.0.1:0").expect("a backend");
    let (mut reactor, addr) =
        reactor(Splicer::new(backend.local_addr().expect("its address")), Config::default());
    let client = connect(addr);
    turn_until(&mut reactor, "the client accepted", |r| r.protocol().logged("accepted"));
    let (target, _) = backend.accept().expect("the loop's connection");
    target.set_read_timeout(Some(WAIT)).expect("a read timeout");
    (reactor, client, target)
}

#[test]
fn spliced_input_reaches_the_other_connection_and_never_the_protocol_until_that_one_closes() {
    let (mut reactor, mut client, target) = spliced();
    client.write_all(b"spliced").expect("sending");
    let (received, mut target) = read_turning(&mut reactor, target, 7, "the input spliced on");
    assert_eq!(received, b"spliced");
    assert!(
        !reactor.protocol().log.iter().any(|line| line.starts_with("client data")),
        "{:?}",
        reactor.protocol().log
    );
    // The target closes: the splice into it ends, and what the client sends then
    // reaches the protocol.
    target.write_all(b"close").expect("sending");
    turn_until(&mut reactor, "the target closed", |r| r.protocol().logged("target closed: Done"));
    client.write_all(b"after").expect("sending");
    turn_until(&mut reactor, "the client's input handed in", |r| r.protocol().logged("client data after"));
}

#[test]
fn a_reset_of_a_spliced_connection_closes_it_as_a_failed_read() {
    let (mut reactor, client, _target) = spliced();
    socket2::SockRef::from(&client).set_linger(Some(Duration::ZERO)).expect("SO_LINGER 0");
    drop(client);
    let reset = format!("client closed: {:?}", Closed::ReadFailed(ErrorKind::ConnectionReset));
    turn_until(&mut reactor, "the reset", |r| r.protocol().logged(&reset));
}

#[test]
fn a_stops_timeout_closes_even_the_connections_that_asked_to_be_left() {
    let (mut reactor, addr) = reactor(
        Policies { idle: IdleTimeout::FromConfig, drain: DrainPolicy::UntilClosed },
        Config::default(),
    );
    let mut client = connect(addr);
    turn_until(&mut reactor, "the connection accepted", |r| r.stats().open == 1);
    let options = DrainOptions {
        listener: ListenerFate::HandOver,
        grace: Duration::ZERO,
        timeout: Duration::from_secs(1),
    };
    reactor.drain(options);
    turn_until(&mut reactor, "the stop's timeout", |r| r.stats().open == 0);
    let mut rest = Vec::new();
    client.read_to_end(&mut rest).expect("the end of the stream");
    assert!(rest.is_empty());
}

/// Each accepted connection opens one to `target`; input of the form `N\n...`
/// has its next N bytes spliced on to it (the connection marked busy first);
/// other input is logged.
struct Framed {
    target: SocketAddr,
    log: Vec<String>,
}

impl Protocol for Framed {
    type Conn = Option<ConnId>;

    fn on_open(&mut self, target: &mut Option<ConnId>, io: &mut Io<'_>) -> Flow {
        // The connection it opened is the one whose peer is the target.
        if io.peer_addr().ok() != Some(self.target) {
            *target = Some(io.connect(self.target));
        }
        Flow::Continue
    }

    fn on_spliced(&mut self, _target: &mut Option<ConnId>, _io: &mut Io<'_>) -> Flow {
        self.log.push("spliced".into());
        Flow::Continue
    }

    fn on_data(&mut self, target: &mut Option<ConnId>, input: &[u8], io: &mut Io<'_>) -> Verdict {
        let header = input.iter().position(|&b| b == b'\n').and_then(|end| {
            let len = std::str::from_utf8(&input[..end]).ok()?.parse().ok()?;
            Some((end + 1, len))
        });
        match (header, *target) {
            (Some((head, len)), Some(to)) => {
                // As a proxy marks the exchange busy, before the splice.
                io.set_busy(io.id());
                io.splice_some_to(to, len);
                Verdict::keep(head)
            }
            _ => {
                self.log.push(format!("data {}", String::from_utf8_lossy(input)));
                Verdict::keep(input.len())
            }
        }
    }
}

/// A [`Framed`] loop, a client connected, and the target's end of the connection
/// the loop opened for it.
fn framed_pair() -> (Reactor<Framed>, std::net::TcpStream, std::net::TcpStream) {
    let backend = TcpListener::bind("127.0.0.1:0").expect("a backend");
    let target = backend.local_addr().expect("its address");
    let (mut reactor, addr) = reactor(Framed { target, log: Vec::new() }, Config::default());
    let client = connect(addr);
    turn_until(&mut reactor, "the target connected", |r| r.stats().open == 2);
    let (upstream, _) = backend.accept().expect("the loop's connection");
    (reactor, client, upstream)
}

/// Sends `writes`, 50 ms apart, through a [`Framed`] loop; returns what its target
/// read before the protocol logged `data tail`, and the protocol's log.
fn framed(writes: &[&[u8]]) -> (Vec<u8>, Vec<String>) {
    let (mut reactor, mut client, mut upstream) = framed_pair();
    for write in writes {
        client.write_all(write).expect("sending");
        turn_for(&mut reactor, Duration::from_millis(50));
    }
    turn_until(&mut reactor, "the tail handed in", |r| r.protocol().log.iter().any(|l| l == "data tail"));
    upstream.set_nonblocking(true).expect("non-blocking");
    let mut spliced = Vec::new();
    match upstream.read_to_end(&mut spliced) {
        Err(e) if e.kind() == ErrorKind::WouldBlock => {}
        other => panic!("the target's connection: {other:?}"),
    }
    (spliced, reactor.protocol().log.clone())
}

#[test]
fn a_splice_of_a_length_moves_that_many_bytes_and_hands_what_follows_to_the_protocol() {
    let told = ["spliced", "data tail"].map(String::from).to_vec();
    assert_eq!(framed(&[b"5\nhellotail"]), (b"hello".to_vec(), told.clone()), "all received with the header");
    assert_eq!(framed(&[b"5\nhe", b"llotail"]), (b"hello".to_vec(), told), "the rest through the pipe");
    let twice = ["spliced", "spliced", "data tail"].map(String::from).to_vec();
    assert_eq!(
        framed(&[b"5\nhe", b"llo3\nab", b"ctail"]),
        (b"helloabc".to_vec(), twice),
        "two bodies in a row through the pipe, on one connection"
    );
}

#[test]
fn a_body_spliced_after_its_connection_is_marked_busy_never_reaches_on_data() {
    let (mut reactor, mut client, mut upstream) = framed_pair();
    upstream.set_read_timeout(Some(WAIT)).expect("a read timeout");
    // A megabyte with its header in one write: the first read fills the buffer.
    let mut message = b"1000000\n".to_vec();
    message.extend(std::iter::repeat_n(b'B', 1_000_000));
    message.extend_from_slice(b"tail");
    let ends =
        (client.peer_addr().expect("the loop's address"), client.local_addr().expect("the client's address"));
    let writer = std::thread::spawn(move || client.write_all(&message).map(|()| client));
    // More than a read (64 KiB) waits before the loop reads: its first read fills
    // the buffer, and so it would read again at once.
    let deadline = Instant::now() + WAIT;
    while tcp_queues(ends.0, ends.1).is_none_or(|(_, received)| received < 100_000) {
        assert!(Instant::now() < deadline, "the body not queued within {WAIT:?}");
        std::thread::sleep(Duration::from_millis(5));
    }
    let reader = std::thread::spawn(move || {
        let mut body = vec![0; 1_000_000];
        upstream.read_exact(&mut body).map(|()| body)
    });
    turn_until(&mut reactor, "the tail handed in", |r| r.protocol().log.iter().any(|l| l.ends_with("tail")));
    let _client = writer.join().expect("the writer").expect("sending");
    let body = reader.join().expect("the backend").expect("the body");
    assert!(body.iter().all(|&b| b == b'B'), "the body, whole, at the target");
    let handed: Vec<usize> = reactor.protocol().log.iter().map(String::len).collect();
    assert_eq!(reactor.protocol().log, ["spliced", "data tail"], "input lengths handed in: {handed:?}");
}
