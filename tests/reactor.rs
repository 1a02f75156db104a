//! The loop used directly as a library, in-process: limits any protocol gets, and
//! the contract's callbacks (a server that speaks first, timers, wakes, pauses),
//! with the loop turned by the test itself in bounded waits.

mod util;

use std::io::{ErrorKind, Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::time::{Duration, Instant};

use percore::listen::{self, ListenOptions, Opening};
use percore::reactor::{
    Closed, Config, ConnId, Conns, DrainOptions, Flow, Io, ListenerFate, Protocol, Reactor, Returned, Verdict,
};
use util::{connect, read_text, tcp_queues};

/// Bound on every wait for the loop or the peer.
const WAIT: Duration = Duration::from_secs(10);

/// A loop on a loopback listener, and its address.
fn reactor<P: Protocol>(protocol: P, opening: Opening, config: Config) -> (Reactor<P>, SocketAddr) {
    let options = ListenOptions { opening, ..ListenOptions::default() };
    let listener = listen::bind(([127, 0, 0, 1], 0).into(), &options).expect("binding");
    let addr = listener.local_addr().expect("the bound address");
    (Reactor::new(listener, protocol, config).expect("a loop"), addr)
}

/// Turns the loop, 10 ms at a time, until `done` holds; panics after [`WAIT`].
fn turn_until<P: Protocol>(reactor: &mut Reactor<P>, what: &str, mut done: impl FnMut(&Reactor<P>) -> bool) {
    let deadline = Instant::now() + WAIT;
    while !done(reactor) {
        assert!(Instant::now() < deadline, "{what}: not within {WAIT:?}");
        reactor.turn(Some(Duration::from_millis(10))).expect("a turn of the loop");
    }
}

/// Waits for a terminator that never comes: consumes nothing, answers nothing.
struct NeverConsumes;

impl Protocol for NeverConsumes {
    type Conn = ();

    fn on_data(&mut self, _conn: &mut (), _input: &[u8], _io: &mut Io<'_>) -> Verdict {
        Verdict::keep(0)
    }
}

#[test]
fn pending_input_beyond_the_limit_closes_the_connection() {
    let config = Config { max_pending_input: 4096, ..Config::default() };
    let (mut reactor, addr) = reactor(NeverConsumes, Opening::ClientSpeaksFirst, config);
    // The loop runs until the test process exits.
    std::thread::spawn(move || reactor.run());

    let mut client = connect(addr);
    client.write_all(&[b'x'; 1000]).expect("sending under the limit");
    // Under the limit the connection stays open: nothing to read, no end of stream.
    client.set_read_timeout(Some(Duration::from_millis(300))).expect("a short read timeout");
    match client.read(&mut [0u8; 16]) {
        Err(e) if matches!(e.kind(), ErrorKind::WouldBlock | ErrorKind::TimedOut) => {}
        other => panic!("under the limit the connection must stay open and silent, got {other:?}"),
    }
    client.set_read_timeout(Some(WAIT)).expect("a read timeout");
    client.write_all(&[b'x'; 8000]).expect("sending over the limit");
    let mut rest = Vec::new();
    // Closed without an answer: end of stream, or a reset for the unread bytes.
    match client.read_to_end(&mut rest) {
        Ok(_) => assert!(rest.is_empty(), "no answer expected, got {rest:?}"),
        Err(e) => assert_eq!(e.kind(), ErrorKind::ConnectionReset, "{e}"),
    }
}

/// Greets every connection, wakes on demand, and keeps a timer on the first
/// connection only; records what it saw.
#[derive(Debug, Default)]
struct Recorder {
    opened: Vec<ConnId>,
    /// The loop's time each `on_open` saw.
    opened_at: Vec<Instant>,
    timers_fired: usize,
}

impl Protocol for Recorder {
    type Conn = ();

    fn on_open(&mut self, _conn: &mut (), io: &mut Io<'_>) -> Flow {
        if self.opened.is_empty() {
            io.set_timer(Duration::from_millis(100));
        }
        self.opened.push(io.id());
        self.opened_at.push(io.now());
        io.write(b"220 ready\r\n");
        Flow::Continue
    }

    fn on_data(&mut self, _conn: &mut (), input: &[u8], _io: &mut Io<'_>) -> Verdict {
        Verdict::keep(input.len())
    }

    fn on_timer(&mut self, _conn: &mut (), io: &mut Io<'_>) -> Flow {
        self.timers_fired += 1;
        io.write(b"timer\r\n");
        Flow::Continue
    }

    fn on_wake(&mut self, _conn: &mut (), io: &mut Io<'_>) -> Flow {
        io.write(b"woken\r\n");
        Flow::Continue
    }
}

#[test]
fn a_server_greets_a_connection_that_has_sent_nothing() {
    let (mut reactor, addr) = reactor(Recorder::default(), Opening::ServerSpeaksFirst, Config::default());
    let mut first = connect(addr);
    turn_until(&mut reactor, "the connection accepted", |r| r.protocol().opened.len() == 1);
    assert_eq!(read_text(&mut first, 11), "220 ready\r\n");
}

#[test]
fn the_loops_time_is_what_its_callbacks_saw_and_moves_on_with_each_turn() {
    let (mut reactor, addr) = reactor(Recorder::default(), Opening::ServerSpeaksFirst, Config::default());
    let before = Instant::now();
    let _first = connect(addr);
    turn_until(&mut reactor, "the connection accepted", |r| r.protocol().opened.len() == 1);
    let seen = reactor.protocol().opened_at[0];
    assert!(seen >= before, "the loop looked at the clock after the connection came");
    assert_eq!(reactor.now(), seen, "the turn that accepted it");
    reactor.turn(Some(Duration::from_millis(10))).expect("a turn");
    assert!(reactor.now() > seen, "a new turn, a new look");
}

#[test]
fn stats_count_the_connections_accepted_and_open() {
    let (mut reactor, addr) = reactor(Recorder::default(), Opening::ServerSpeaksFirst, Config::default());
    let mut first = connect(addr);
    let _second = connect(addr);
    turn_until(&mut reactor, "two connections accepted", |r| r.protocol().opened.len() == 2);
    assert_eq!((reactor.stats().accepted, reactor.stats().open), (2, 2));
    // Read before closing: a close with the greeting unread would be a reset.
    assert_eq!(read_text(&mut first, 11), "220 ready\r\n");
    drop(first);
    turn_until(&mut reactor, "the first connection closed", |r| r.stats().open == 1);
    assert_eq!((reactor.stats().accepted, reactor.stats().failed), (2, 0), "a close is no error");
    // A reset (close with unread bytes and a zero linger) fails the server's next
    // socket call: an error, counted once.
    let reset = connect(addr);
    turn_until(&mut reactor, "the third connection accepted", |r| r.stats().open == 2);
    socket2::SockRef::from(&reset).set_linger(Some(Duration::ZERO)).expect("a zero linger");
    drop(reset);
    turn_until(&mut reactor, "the reset connection closed", |r| r.stats().open == 1);
    assert_eq!((reactor.stats().accepted, reactor.stats().failed), (3, 1));
}

#[test]
fn a_connect_that_fails_at_once_is_its_error_and_opens_nothing() {
    let mut reactor = Reactor::client(NeverConsumes, Config::default()).expect("a loop");
    // The limited broadcast address: a TCP connect to it fails in the call itself
    // (no route, or a broadcast route TCP refuses), never after an EINPROGRESS.
    let failed = reactor.connect(([255, 255, 255, 255], 9));
    let kind = failed.expect_err("a connect to the broadcast address").kind();
    assert!(matches!(kind, ErrorKind::NetworkUnreachable | ErrorKind::PermissionDenied), "{kind:?}");
    assert_eq!(reactor.stats().open, 0, "nothing registered");
}

#[test]
fn a_watched_descriptor_ends_the_turn_with_a_control_wake() {
    let (mut reactor, _addr) = reactor(Recorder::default(), Opening::ServerSpeaksFirst, Config::default());
    let (mut writer, reader) = std::os::unix::net::UnixStream::pair().expect("a socket pair");
    reactor.watch(&reader).expect("watching");
    assert_eq!(reactor.turn(Some(Duration::from_millis(10))).expect("a turn"), None, "nothing to read yet");
    writer.write_all(b"!").expect("writing");
    let deadline = Instant::now() + WAIT;
    loop {
        match reactor.turn(Some(Duration::from_millis(10))).expect("a turn") {
            Some(wake) => break assert_eq!(wake, Returned::Control),
            None => assert!(Instant::now() < deadline, "no control wake within {WAIT:?}"),
        }
    }
}

#[test]
fn a_loops_debug_text_counts_its_connections() {
    let (mut reactor, addr) = reactor(Recorder::default(), Opening::ServerSpeaksFirst, Config::default());
    let _client = connect(addr);
    turn_until(&mut reactor, "the connection accepted", |r| r.protocol().opened.len() == 1);
    let text = format!("{reactor:?}");
    assert!(text.contains("connections: 1"), "{text}");
}

#[test]
fn an_accepted_connection_can_be_woken_and_a_closed_ones_id_wakes_nothing() {
    let (mut reactor, addr) = reactor(Recorder::default(), Opening::ServerSpeaksFirst, Config::default());
    let mut first = connect(addr);
    turn_until(&mut reactor, "the first connection accepted", |r| r.protocol().opened.len() == 1);
    assert_eq!(read_text(&mut first, 11), "220 ready\r\n");
    let first_id = reactor.protocol().opened[0];
    assert!(reactor.wake(first_id), "an open connection is woken");
    assert_eq!(read_text(&mut first, 7), "woken\r\n");

    drop(first);
    turn_until(&mut reactor, "the first connection closed", |r| r.stats().open == 0);
    // The next connection takes the freed slot; the old id must not name it.
    let mut second = connect(addr);
    turn_until(&mut reactor, "the second connection accepted", |r| r.protocol().opened.len() == 2);
    assert_eq!(read_text(&mut second, 11), "220 ready\r\n");
    assert!(!reactor.wake(first_id), "a closed connection's id wakes nothing");
    let second_id = reactor.protocol().opened[1];
    assert_ne!(first_id, second_id);
    assert!(reactor.wake(second_id));
    assert_eq!(read_text(&mut second, 7), "woken\r\n", "only the wake by its own id reached it");
}

/// Sets a timer on each of its first [`STALE_TIMERS`] connections, 50 ms apart from
/// 1 s on, and none on the others; records the ticks, and the connections whose timer
/// fired.
#[derive(Default)]
struct TimesTheFirst {
    opened: Vec<ConnId>,
    fired: Vec<ConnId>,
    ticks: usize,
}

const STALE_TIMERS: usize = 20;

impl Protocol for TimesTheFirst {
    type Conn = ();

    fn on_open(&mut self, _conn: &mut (), io: &mut Io<'_>) -> Flow {
        if self.opened.len() < STALE_TIMERS {
            io.set_timer(Duration::from_millis(1000 + 50 * self.opened.len() as u64));
        }
        self.opened.push(io.id());
        Flow::Continue
    }

    fn on_data(&mut self, _conn: &mut (), input: &[u8], _io: &mut Io<'_>) -> Verdict {
        Verdict::keep(input.len())
    }

    fn on_timer(&mut self, _conn: &mut (), io: &mut Io<'_>) -> Flow {
        self.fired.push(io.id());
        Flow::Continue
    }

    fn on_tick(&mut self, _now: std::time::SystemTime, _conns: &mut Conns<'_>) {
        self.ticks += 1;
    }
}

#[test]
fn a_timer_cancelled_by_close_never_wakes_the_loop_nor_fires_on_the_slots_next_connection() {
    let (mut reactor, addr) =
        reactor(TimesTheFirst::default(), Opening::ServerSpeaksFirst, Config::default());
    let clients: Vec<TcpStream> = (0..STALE_TIMERS).map(|_| connect(addr)).collect();
    turn_until(&mut reactor, "the timed connections accepted", |r| r.protocol().opened.len() == STALE_TIMERS);
    let armed_at = reactor.now();
    drop(clients);
    turn_until(&mut reactor, "the timed connections closed", |r| r.stats().open == 0);
    // The next connection takes a freed slot, with no timer of its own.
    let _next = connect(addr);
    turn_until(&mut reactor, "the next connection accepted", |r| {
        r.protocol().opened.len() == STALE_TIMERS + 1
    });
    let next = reactor.protocol().opened[STALE_TIMERS];
    // Past every deadline the closed connections had, the loop turned as long as
    // nothing is due: each turn ends at a tick (the turn of a second), an event
    // (the next connection's, just accepted) or a timer. With their timers
    // cancelled, nothing wakes it between ticks, but a rare early look at a wall
    // clock being slewed (at most one a tick) or a late event.
    let (mut turns, ticks_before) = (0, reactor.protocol().ticks);
    while reactor.now() < armed_at + Duration::from_millis(2500) {
        reactor.turn(None).expect("a turn of the loop");
        turns += 1;
    }
    let ticks = reactor.protocol().ticks - ticks_before;
    let between_ticks = turns - ticks;
    assert!(
        between_ticks <= ticks + 2,
        "{between_ticks} turns between {ticks} ticks: the loop woke for the closed connections' timers"
    );
    assert!(!reactor.protocol().fired.contains(&next), "a closed connection's timer fired on the next");
}

#[test]
fn a_timer_fires_on_an_open_connection() {
    let (mut reactor, addr) = reactor(Recorder::default(), Opening::ServerSpeaksFirst, Config::default());
    let mut first = connect(addr);
    turn_until(&mut reactor, "the timer fired", |r| r.protocol().timers_fired == 1);
    assert_eq!(read_text(&mut first, 18), "220 ready\r\ntimer\r\n");
}

/// Sets a timer an hour off on every second connection it opens, and records the
/// closes: whether each closed connection had that timer.
#[derive(Default)]
struct TimesEveryOther {
    opened: usize,
    closed: Vec<bool>,
}

impl Protocol for TimesEveryOther {
    type Conn = bool;

    fn on_open(&mut self, timed: &mut bool, io: &mut Io<'_>) -> Flow {
        self.opened += 1;
        *timed = self.opened.is_multiple_of(2);
        if *timed {
            io.set_timer(Duration::from_secs(3600));
        }
        Flow::Continue
    }

    fn on_data(&mut self, _timed: &mut bool, input: &[u8], _io: &mut Io<'_>) -> Verdict {
        Verdict::keep(input.len())
    }

    fn on_close(&mut self, timed: &mut bool, _closed: Closed, _unconsumed: &[u8], _io: &mut Io<'_>) {
        self.closed.push(*timed);
    }
}

#[test]
fn a_connection_with_its_own_timer_is_under_no_idle_timeout_of_the_loop() {
    let config = Config { idle_timeout: Some(Duration::from_secs(1)), ..Config::default() };
    // Server first: no TCP_DEFER_ACCEPT holding back connections that send nothing.
    let (mut reactor, addr) = reactor(TimesEveryOther::default(), Opening::ServerSpeaksFirst, config);
    let (_untimed, _timed) = (connect(addr), connect(addr));
    turn_until(&mut reactor, "both connections opened", |r| r.protocol().opened == 2);
    // The idle one closes after 1 s ...
    turn_until(&mut reactor, "the idle connection closed", |r| !r.protocol().closed.is_empty());
    // ... and 2 s later, past any deadline the loop could have set it, the timed one
    // is still open.
    let later = Instant::now() + Duration::from_secs(2);
    turn_until(&mut reactor, "2 s passed", |_| Instant::now() >= later);
    assert_eq!((reactor.protocol().closed.as_slice(), reactor.stats().open), (&[false][..], 1));
}

/// Sets a read timeout of 50 ms on every connection it greets; records the closes.
#[derive(Default)]
struct ReadTimed {
    closed: Vec<Closed>,
}

impl Protocol for ReadTimed {
    type Conn = ();

    fn on_open(&mut self, _conn: &mut (), io: &mut Io<'_>) -> Flow {
        io.set_read_timeout(Some(Duration::from_millis(50)));
        io.write(b"hi\n");
        Flow::Continue
    }

    fn on_data(&mut self, _conn: &mut (), _input: &[u8], _io: &mut Io<'_>) -> Verdict {
        Verdict::keep(0)
    }

    fn on_close(&mut self, _conn: &mut (), closed: Closed, _unconsumed: &[u8], _io: &mut Io<'_>) {
        self.closed.push(closed);
    }
}

#[test]
fn a_read_timeout_closes_a_connection_that_sends_nothing_long_before_the_idle_timeout() {
    let config = Config { idle_timeout: Some(Duration::from_secs(60)), ..Config::default() };
    let (mut reactor, addr) = reactor(ReadTimed::default(), Opening::ServerSpeaksFirst, config);
    let mut client = connect(addr);
    turn_until(&mut reactor, "the read timeout", |r| !r.protocol().closed.is_empty());
    assert_eq!(reactor.protocol().closed, [Closed::TimedOut]);
    let mut seen = Vec::new();
    client.read_to_end(&mut seen).expect("the close, after the greeting");
    assert_eq!(seen, b"hi\n");
}

/// Answers one line per call and pauses with the rest; after a pause with nothing
/// written, its timer's output lets it go on.
#[derive(Default)]
struct OneLineAtATime {
    /// Set by the timer: the next call answers a line.
    ready: bool,
    /// Pause with nothing written until the timer fires, before each line.
    wait_for_timer: bool,
}

impl Protocol for OneLineAtATime {
    type Conn = ();

    fn on_data(&mut self, _conn: &mut (), input: &[u8], io: &mut Io<'_>) -> Verdict {
        let Some(end) = input.iter().position(|&b| b == b'\n') else { return Verdict::keep(0) };
        if self.wait_for_timer && !std::mem::take(&mut self.ready) {
            io.set_timer(Duration::from_millis(1));
            return Verdict::pause(0);
        }
        io.write(&input[..=end]);
        Verdict::pause(end + 1)
    }

    fn on_timer(&mut self, _conn: &mut (), io: &mut Io<'_>) -> Flow {
        self.ready = true;
        io.write(b"+");
        Flow::Continue
    }
}

/// Sends `lines` numbered lines in one write and reads them back, each with `prefix`.
fn paused_lines_all_answered(protocol: OneLineAtATime, lines: usize, prefix: &str) {
    let (mut reactor, addr) = reactor(protocol, Opening::ClientSpeaksFirst, Config::default());
    std::thread::spawn(move || reactor.run());
    let mut client = connect(addr);
    let text: String = (0..lines).map(|i| format!("{i:04}\n")).collect();
    client.write_all(text.as_bytes()).expect("sending the lines");
    let expected: String = (0..lines).map(|i| format!("{prefix}{i:04}\n")).collect();
    assert_eq!(read_text(&mut client, expected.len()), expected);
}

#[test]
fn a_paused_protocol_is_called_again_without_a_new_edge() {
    paused_lines_all_answered(OneLineAtATime::default(), 1000, "");
}

#[test]
fn a_pause_with_nothing_written_waits_for_the_timers_output() {
    paused_lines_all_answered(OneLineAtATime { ready: false, wait_for_timer: true }, 50, "+");
}

/// Handles one line per call and pauses with the rest, writing a byte for each;
/// records which connection each line came from, in order.
#[derive(Default)]
struct LinesInOrder {
    handled: Vec<ConnId>,
}

impl Protocol for LinesInOrder {
    type Conn = ();

    fn on_data(&mut self, _conn: &mut (), input: &[u8], io: &mut Io<'_>) -> Verdict {
        let Some(end) = input.iter().position(|&b| b == b'\n') else { return Verdict::keep(0) };
        self.handled.push(io.id());
        // Something to send, so that the loop goes on with the rest at once.
        io.write(b".");
        Verdict::pause(end + 1)
    }
}

/// A loop on a loopback listener and a client connected to it, with small socket
/// buffers at both ends (the accepted socket inherits the listener's): what the
/// peer does not read stays queued in the loop, not in the kernel.
fn small_buffers<P: Protocol>(protocol: P) -> (Reactor<P>, TcpStream) {
    let listener = listen::bind(([127, 0, 0, 1], 0).into(), &ListenOptions::default()).expect("binding");
    socket2::SockRef::from(&listener).set_send_buffer_size(8 * 1024).expect("a small send buffer");
    let addr = listener.local_addr().expect("the bound address");
    let reactor = Reactor::new(listener, protocol, Config::default()).expect("a loop");
    let socket = socket2::Socket::new(socket2::Domain::IPV4, socket2::Type::STREAM, None).expect("a socket");
    socket.set_recv_buffer_size(8 * 1024).expect("a small receive buffer");
    socket.connect_timeout(&addr.into(), WAIT).expect("connecting");
    let stream = TcpStream::from(socket);
    stream.set_read_timeout(Some(WAIT)).expect("a read timeout");
    (reactor, stream)
}

/// Echoes all it gets, heedless of [`Io::is_full`]: only the loop bounds its
/// output. Counts the bytes it was given.
#[derive(Default)]
struct HeedlessEcho {
    seen: usize,
}

impl Protocol for HeedlessEcho {
    type Conn = ();

    fn on_data(&mut self, _conn: &mut (), input: &[u8], io: &mut Io<'_>) -> Verdict {
        self.seen += input.len();
        io.write(input);
        Verdict::keep(input.len())
    }
}

#[test]
fn the_loop_stops_reading_a_peer_that_does_not_read_its_output() {
    let (mut reactor, stream) = small_buffers(HeedlessEcho::default());
    const SENT: usize = 4 << 20;
    let writer = std::thread::spawn(move || {
        // Until all is sent or the server stops taking it for a second.
        stream.set_write_timeout(Some(Duration::from_secs(1))).expect("a write timeout");
        let chunk = [b'x'; 64 * 1024];
        let sent = (0..SENT / chunk.len()).take_while(|_| (&stream).write_all(&chunk).is_ok()).count();
        (stream, sent * chunk.len())
    });
    turn_until(&mut reactor, "the writer done", |_| writer.is_finished());
    for _ in 0..20 {
        reactor.turn(Some(Duration::from_millis(10))).expect("a turn of the loop");
    }
    let (_stream, sent) = writer.join().expect("the writer");
    // The loop reads on only while the unsent echo is under its 256 KiB budget:
    // then one more read (64 KiB) at most, and what the kernel holds.
    let seen = reactor.protocol().seen;
    assert!(seen < 1 << 20, "the loop took {seen} bytes of the {sent} sent, none of its echo read");
}

/// Answers each line with [`BIG_ANSWER`] bytes and pauses until they are sent;
/// counts its calls.
#[derive(Default)]
struct BigAnswers {
    calls: usize,
}

const BIG_ANSWER: usize = 100 * 1024;

impl Protocol for BigAnswers {
    type Conn = ();

    fn on_data(&mut self, _conn: &mut (), input: &[u8], io: &mut Io<'_>) -> Verdict {
        let Some(end) = input.iter().position(|&b| b == b'\n') else { return Verdict::keep(0) };
        self.calls += 1;
        io.write(&[b'x'; BIG_ANSWER]);
        Verdict::pause(end + 1)
    }
}

#[test]
fn a_paused_protocol_is_not_called_again_while_its_output_waits_for_the_peer() {
    // Most of an answer, though under the loop's output budget, stays queued in
    // the loop while the peer does not read.
    let (mut reactor, mut stream) = small_buffers(BigAnswers::default());
    stream.write_all(b"a\n").expect("the first line");
    turn_until(&mut reactor, "the first line answered", |r| r.protocol().calls == 1);
    // The second line's edge is served in the next turns; its answer must wait.
    stream.write_all(b"b\n").expect("the second line");
    // It has arrived in the loop's socket (our end has it acknowledged) before the
    // turns that would call the protocol for it.
    let (ours, theirs) =
        (stream.local_addr().expect("our address"), stream.peer_addr().expect("its address"));
    let arrived =
        util::wait_until(WAIT, || tcp_queues(ours, theirs).is_some_and(|(unacked, _)| unacked == 0));
    assert!(arrived, "the second line was not taken by the loop's socket within {WAIT:?}");
    for _ in 0..3 {
        reactor.turn(Some(Duration::from_millis(50))).expect("a turn of the loop");
    }
    assert_eq!(reactor.protocol().calls, 1, "resumed with its first answer still queued");
    let reader = std::thread::spawn(move || {
        let mut answers = vec![0; 2 * BIG_ANSWER];
        stream.read_exact(&mut answers).map(|()| answers.iter().all(|&b| b == b'x'))
    });
    turn_until(&mut reactor, "both answers read", |_| reader.is_finished());
    assert!(reader.join().expect("the reader").expect("reading both answers"), "two whole answers");
    assert_eq!(reactor.protocol().calls, 2);
}

/// Answers its first input with half a megabyte, more than the loop's output budget
/// of 256 KiB, and records how the connection closed.
#[derive(Default)]
struct OverBudget {
    answered: bool,
    closed: Option<Closed>,
}

impl Protocol for OverBudget {
    type Conn = ();

    fn on_data(&mut self, _conn: &mut (), input: &[u8], io: &mut Io<'_>) -> Verdict {
        if !std::mem::replace(&mut self.answered, true) {
            io.write(&[b'x'; 512 * 1024]);
        }
        Verdict::keep(input.len())
    }

    fn on_close(&mut self, _conn: &mut (), closed: Closed, _unconsumed: &[u8], _io: &mut Io<'_>) {
        self.closed = Some(closed);
    }
}

#[test]
fn a_peer_that_resets_with_output_queued_is_a_failed_write() {
    let (mut reactor, stream) = small_buffers(OverBudget::default());
    (&stream).write_all(b"go\n").expect("the request");
    turn_until(&mut reactor, "the answer queued", |r| r.protocol().answered);
    // Over the budget, reading is paused: the loop can learn of the reset only by
    // sending, and must not take the failed send for a full socket.
    socket2::SockRef::from(&stream).set_linger(Some(Duration::ZERO)).expect("a zero linger");
    drop(stream);
    turn_until(&mut reactor, "the connection closed", |r| r.protocol().closed.is_some());
    let closed = reactor.protocol().closed;
    assert!(matches!(closed, Some(Closed::WriteFailed(_))), "{closed:?}");
    assert_eq!(reactor.stats().open, 0);
}

/// On its first input, sets a 1 ms timer whose callback says goodbye and closes;
/// consumes its input or (`consume` false) keeps it pending, a message unfinished.
struct Dismisses {
    consume: bool,
    fired: bool,
}

impl Protocol for Dismisses {
    type Conn = ();

    fn on_data(&mut self, _conn: &mut (), input: &[u8], io: &mut Io<'_>) -> Verdict {
        if io.timer().is_none() {
            io.set_timer(Duration::from_millis(1));
        }
        Verdict::keep(if self.consume { input.len() } else { 0 })
    }

    fn on_timer(&mut self, _conn: &mut (), io: &mut Io<'_>) -> Flow {
        self.fired = true;
        io.write(b"bye\n");
        Flow::Close
    }
}

/// A client dismissed by [`Dismisses`] after sending `input`: it has read the
/// goodbye and the end of the stream, and the loop has not turned since.
fn dismissed(consume: bool, input: &[u8]) -> (Reactor<Dismisses>, TcpStream) {
    let protocol = Dismisses { consume, fired: false };
    let (mut reactor, addr) = reactor(protocol, Opening::ClientSpeaksFirst, Config::default());
    let mut stream = connect(addr);
    stream.write_all(input).expect("the input");
    turn_until(&mut reactor, "the timer's close", |r| r.protocol().fired);
    let mut goodbye = Vec::new();
    stream.read_to_end(&mut goodbye).expect("the goodbye and the end");
    assert_eq!(goodbye, b"bye\n");
    (reactor, stream)
}

#[test]
fn a_timer_that_closes_with_nothing_pending_closes_at_once() {
    let (_reactor, mut stream) = dismissed(true, b"done\n");
    // The socket is closed, not lingering: the peer's next bytes are refused (a
    // reset), although the loop does not turn to read them.
    let deadline = Instant::now() + WAIT;
    let refused = loop {
        assert!(Instant::now() < deadline, "bytes to a closed connection still accepted after {WAIT:?}");
        match stream.write_all(b"more\n") {
            Ok(()) => std::thread::sleep(Duration::from_millis(10)),
            Err(e) => break e.kind(),
        }
    };
    assert!(matches!(refused, ErrorKind::BrokenPipe | ErrorKind::ConnectionReset), "{refused:?}");
}

#[test]
fn a_timer_that_closes_mid_message_lingers_until_the_peer_resets() {
    let (mut reactor, stream) = dismissed(false, b"half a mess");
    assert_eq!(reactor.stats().open, 1, "lingering: the rest of the message may still come");
    socket2::SockRef::from(&stream).set_linger(Some(Duration::ZERO)).expect("a zero linger");
    drop(stream);
    // The reset's edge is served in the next turns, and frees the slot there, not
    // at the linger's timeout.
    for _ in 0..3 {
        reactor.turn(Some(Duration::from_millis(50))).expect("a turn of the loop");
    }
    assert_eq!(reactor.stats().open, 0, "a reset ends the linger");
}

#[test]
fn a_linger_whose_peer_stays_silent_ends_after_five_seconds_whatever_the_idle_timeout() {
    let (mut reactor, _stream) = dismissed(false, b"half a mess");
    assert_eq!(reactor.stats().open, 1, "lingering");
    // The peer neither sends nor closes: the linger's own 5 s end it, not the
    // idle timeout's 60.
    turn_until(&mut reactor, "the linger's end", |r| r.stats().open == 0);
}

#[test]
fn a_pipelining_client_cannot_starve_another() {
    const LINES: usize = 10_000;
    // READS_PER_WAKE in the loop, which DESIGN.md states (16 reads per wake-up): each call after a pause
    // counts as one of them.
    const BUDGET: usize = 16;
    let (mut reactor, addr) = reactor(LinesInOrder::default(), Opening::ClientSpeaksFirst, Config::default());
    // Both connections have all their input in before the loop first turns: the
    // first 10,000 lines, the second one.
    let mut greedy = connect(addr);
    greedy.write_all(&b"a\n".repeat(LINES)).expect("the greedy client's lines");
    let mut other = connect(addr);
    other.write_all(b"b\n").expect("the other client's line");
    turn_until(&mut reactor, "both connections accepted", |r| r.stats().accepted == 2);
    turn_until(&mut reactor, "the other client's line handled", |r| r.protocol().handled.len() > LINES);
    let handled = &reactor.protocol().handled;
    let greedy_id = handled[0];
    let before_other = handled.iter().take_while(|&&id| id == greedy_id).count();
    eprintln!("{before_other} of the greedy client's lines were handled before the other's");
    assert!(
        before_other <= BUDGET,
        "{before_other} lines of one connection handled before the other's one line, over the budget of {BUDGET}"
    );
    // And the greedy client is not starved either: every line answered.
    assert_eq!(read_text(&mut greedy, LINES), ".".repeat(LINES));
    assert_eq!(read_text(&mut other, 1), ".");
}

/// Echoes whole lines, keeping a partial one until its end arrives; says how many
/// bytes of a partial line it last saw.
#[derive(Default)]
struct Lines {
    partial: usize,
}

impl Protocol for Lines {
    type Conn = ();

    fn on_data(&mut self, _conn: &mut (), input: &[u8], io: &mut Io<'_>) -> Verdict {
        let whole = input.iter().rposition(|&b| b == b'\n').map_or(0, |end| end + 1);
        io.write(&input[..whole]);
        self.partial = input.len() - whole;
        Verdict::keep(whole)
    }
}

#[test]
fn in_a_stop_a_connection_that_turns_idle_after_the_grace_is_closed_at_once() {
    let (mut reactor, addr) = reactor(Lines::default(), Opening::ClientSpeaksFirst, Config::default());
    let mut stream = connect(addr);
    stream.write_all(b"par").expect("a partial line");
    turn_until(&mut reactor, "the partial line received", |r| r.protocol().partial == 3);
    assert!(!reactor.is_draining());
    // No grace, and a deadline far beyond the test's wait: only turning idle closes it.
    let options = DrainOptions {
        listener: ListenerFate::HandOver,
        grace: Duration::ZERO,
        timeout: Duration::from_secs(600),
    };
    reactor.drain(options);
    assert!(reactor.is_draining());
    reactor.turn(Some(Duration::from_millis(10))).expect("a turn");
    assert_eq!(reactor.stats().open, 1, "mid-line, it is not idle: kept");
    stream.write_all(b"t\n").expect("the line's end");
    turn_until(&mut reactor, "the connection closed once idle", |r| r.stats().open == 0);
    let mut all = Vec::new();
    stream.read_to_end(&mut all).expect("the answer, then the close");
    assert_eq!(all, b"part\n");
}

#[test]
fn in_a_stop_at_the_limit_the_listener_closes_once_its_queue_is_accepted() {
    let config = Config { max_connections: 3, ..Config::default() };
    let (mut reactor, addr) = reactor(NeverConsumes, Opening::ServerSpeaksFirst, config);
    let open = [connect(addr), connect(addr), connect(addr)];
    turn_until(&mut reactor, "three connections, the limit", |r| r.stats().open == 3);
    // A fourth waits in the listener's queue, and keeps the listener open when the
    // stop begins at the limit.
    let _queued = connect(addr);
    reactor.turn(Some(Duration::from_millis(10))).expect("a turn at the limit");
    let options = DrainOptions {
        listener: ListenerFate::CloseAfterQueue,
        grace: Duration::from_secs(600),
        timeout: Duration::from_secs(600),
    };
    reactor.drain(options);
    // Room for the queue, and one more connection in it: both are accepted, served
    // like the others, and then the listener is closed.
    drop(open);
    let _last = connect(addr);
    turn_until(&mut reactor, "the queue accepted", |r| r.stats().accepted == 5);
    let refused = TcpStream::connect_timeout(&addr, WAIT).expect_err("a connection after the queue");
    assert_eq!(refused.kind(), ErrorKind::ConnectionRefused);
}

#[test]
fn a_connection_queued_at_the_limit_is_accepted_once_one_closes() {
    let config = Config { max_connections: 1, ..Config::default() };
    let (mut reactor, addr) = reactor(NeverConsumes, Opening::ServerSpeaksFirst, config);
    let first = connect(addr);
    turn_until(&mut reactor, "the first connection, the limit", |r| r.stats().open == 1);
    // Queued: its edge comes and goes while the loop is at the limit.
    let _queued = connect(addr);
    reactor.turn(Some(Duration::from_millis(50))).expect("a turn at the limit");
    assert_eq!(reactor.stats().accepted, 1, "nothing accepted over the limit");
    // No new edge comes: the loop itself looks at the queue again once a slot frees.
    drop(first);
    turn_until(&mut reactor, "the queued connection accepted", |r| r.stats().accepted == 2);
    assert_eq!(reactor.stats().open, 1);
}

/// Holds a connection's input on `hold` until the watching connection says `go`,
/// telling the watcher when it holds; answers `quit` with a goodbye and a close.
#[derive(Default)]
struct HoldsUntilGo {
    watcher: Option<ConnId>,
    held: Option<ConnId>,
}

impl Protocol for HoldsUntilGo {
    type Conn = ();

    fn on_data(&mut self, _conn: &mut (), input: &[u8], io: &mut Io<'_>) -> Verdict {
        let line = input.iter().position(|&b| b == b'\n').map_or(input, |end| &input[..=end]);
        match line {
            b"watch\n" => self.watcher = Some(io.id()),
            b"hold\n" => {
                self.held = Some(io.id());
                let watcher = self.watcher.expect("a watcher first");
                io.write_to(watcher, b"held\n");
                // Nothing written to this one: it waits for a resume.
                return Verdict::pause(line.len());
            }
            b"go\n" => io.resume(self.held.take().expect("a held connection")),
            b"quit\n" => {
                io.write(b"bye\n");
                return Verdict::close(line.len());
            }
            _ => return Verdict::keep(0),
        }
        Verdict::keep(line.len())
    }
}

#[test]
fn a_close_in_input_held_over_a_pause_lingers_for_what_the_peer_sent_meanwhile() {
    let (mut reactor, addr) = reactor(HoldsUntilGo::default(), Opening::ClientSpeaksFirst, Config::default());
    std::thread::spawn(move || reactor.run());
    let mut watcher = connect(addr);
    watcher.write_all(b"watch\n").expect("watch");
    let mut held = connect(addr);
    held.write_all(b"hold\nquit\n").expect("hold, then quit");
    // Both lines were read: `quit` waits in the loop, held over the pause.
    assert_eq!(read_text(&mut watcher, 5), "held\n");
    // Sent during the pause, so in the socket, unread, when `quit` closes it: a close
    // on it without a linger would reset the connection under the goodbye.
    held.write_all(b"more\n").expect("more");
    watcher.write_all(b"go\n").expect("go");
    let mut rest = Vec::new();
    held.read_to_end(&mut rest).expect("the goodbye, then the end of stream, not a reset");
    assert_eq!(rest, b"bye\n");
}

/// Records each connection's addresses as `on_open` and `on_data` see them, and
/// opens a connection to `to` when a peer sends `connect`.
#[derive(Default)]
struct Addressed {
    to: Option<SocketAddr>,
    /// (connection, where it was seen, peer, local), in the order seen.
    seen: Vec<(ConnId, &'static str, SocketAddr, SocketAddr)>,
}

impl Addressed {
    fn see(&mut self, io: &Io<'_>, at: &'static str) {
        let peer = io.peer_addr().expect("the peer's address");
        let local = io.local_addr().expect("the local address");
        self.seen.push((io.id(), at, peer, local));
    }
}

impl Protocol for Addressed {
    type Conn = ();

    fn on_open(&mut self, _conn: &mut (), io: &mut Io<'_>) -> Flow {
        self.see(io, "open");
        Flow::Continue
    }

    fn on_data(&mut self, _conn: &mut (), input: &[u8], io: &mut Io<'_>) -> Verdict {
        self.see(io, "data");
        if input == b"connect" {
            io.connect(self.to.expect("an address to connect to"));
        }
        Verdict::keep(input.len())
    }
}

#[test]
fn a_connection_knows_its_peers_and_its_own_address_from_on_open_on() {
    let (mut reactor, addr) = reactor(Addressed::default(), Opening::ServerSpeaksFirst, Config::default());
    reactor.protocol_mut().to = Some(addr);
    let mut client = connect(addr);
    client.write_all(b"hello").expect("sending");
    turn_until(&mut reactor, "the connection opened and read", |r| r.protocol().seen.len() == 2);
    let client_addr = client.local_addr().expect("the client's address");
    let seen = &reactor.protocol().seen;
    assert_eq!((seen[0].1, seen[0].2, seen[0].3), ("open", client_addr, addr), "from the accept");
    assert_eq!((seen[1].1, seen[1].2, seen[1].3), ("data", client_addr, addr), "from the socket");

    // A connection the loop opens: its peer is where it went, its own address the
    // one the listener's side sees as its peer.
    client.write_all(b"connect").expect("sending");
    turn_until(&mut reactor, "the connection made, accepted and opened", |r| r.protocol().seen.len() == 5);
    let seen = &reactor.protocol().seen[3..];
    let made = seen.iter().find(|s| s.2 == addr).expect("the made connection's on_open");
    let accepted = seen.iter().find(|s| s.2 != addr).expect("the accepted one's on_open");
    assert_eq!((made.1, accepted.1), ("open", "open"));
    assert_eq!((made.3, accepted.3), (accepted.2, addr), "one connection, seen from each end");
}

/// Says "bye" to each connection as it opens, and closes it.
struct Bye;

impl Protocol for Bye {
    type Conn = ();

    fn on_open(&mut self, _conn: &mut (), io: &mut Io<'_>) -> Flow {
        io.write(b"bye");
        Flow::Close
    }

    fn on_data(&mut self, _conn: &mut (), input: &[u8], _io: &mut Io<'_>) -> Verdict {
        Verdict::close(input.len())
    }
}

#[test]
fn a_stop_that_closes_the_listener_after_its_queue_answers_every_connection_queued() {
    let (mut reactor, addr) = reactor(Bye, Opening::ServerSpeaksFirst, Config::default());
    // More than the first turns take (256 accepts at a time, three times by the
    // end of the first turn), each connection closed as soon as it is accepted
    // (its client has finished): no connection is open while the queue still
    // holds some.
    let mut clients: Vec<TcpStream> = (0..1500)
        .map(|_| {
            let mut client = connect(addr);
            client.write_all(b"x").expect("sending");
            client.shutdown(std::net::Shutdown::Write).expect("finishing");
            client
        })
        .collect();
    let options = DrainOptions {
        listener: ListenerFate::CloseAfterQueue,
        grace: Duration::from_secs(600),
        timeout: Duration::from_secs(600),
    };
    reactor.drain(options);
    let deadline = Instant::now() + WAIT;
    while reactor.turn(Some(Duration::from_millis(10))).expect("a turn of the loop").is_none() {
        assert!(Instant::now() < deadline, "the stop not over within {WAIT:?}");
    }
    // The listener goes with the loop: a connection left in its queue is reset.
    drop(reactor);
    for (i, client) in clients.iter_mut().enumerate() {
        let mut answer = Vec::new();
        client.read_to_end(&mut answer).unwrap_or_else(|e| panic!("client {i}: {e}"));
        assert_eq!(answer, b"bye", "client {i}");
    }
}
