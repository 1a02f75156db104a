//! The loop at scale and woken from outside, as its owner drives it: connections
//! woken from another thread through a watched descriptor (and the batch that came
//! with the wake still served), and a timer on each of thousands of connections,
//! half of them closed before it fires. The loop is turned by the test itself, in
//! bounded waits.

mod util;

use std::io::{ErrorKind, Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::os::unix::net::UnixStream;
use std::sync::mpsc::{self, Receiver};
use std::sync::{Mutex, MutexGuard};
use std::time::{Duration, Instant, SystemTime};

use percore::listen::{self, ListenOptions, Opening};
use percore::reactor::{Closed, Config, ConnId, Conns, Flow, Io, Protocol, Reactor, Returned, Verdict};
use util::{connect, read_text, tcp_queues};

/// Bound on every wait for the loop or the peer.
const WAIT: Duration = Duration::from_secs(10);

/// The tests of this file one at a time: one counts the process's descriptors, and
/// takes nearly all it may open.
static ONE_AT_A_TIME: Mutex<()> = Mutex::new(());

fn one_at_a_time() -> MutexGuard<'static, ()> {
    // A test that failed holding it poisons it; the next one still runs.
    ONE_AT_A_TIME.lock().unwrap_or_else(|poisoned| poisoned.into_inner())
}

/// A loop on a loopback listener, and its address. The server speaks first: no
/// `TCP_DEFER_ACCEPT` holds back a connection that has sent nothing.
fn reactor<P: Protocol>(protocol: P) -> (Reactor<P>, SocketAddr) {
    let options = ListenOptions { opening: Opening::ServerSpeaksFirst, ..ListenOptions::default() };
    let listener = listen::bind(([127, 0, 0, 1], 0).into(), &options).expect("binding");
    let addr = listener.local_addr().expect("the bound address");
    (Reactor::new(listener, protocol, Config::default()).expect("a loop"), addr)
}

/// Turns the loop, 10 ms at a time, until `done` holds; panics after [`WAIT`].
fn turn_until<P: Protocol>(reactor: &mut Reactor<P>, what: &str, mut done: impl FnMut(&Reactor<P>) -> bool) {
    let deadline = Instant::now() + WAIT;
    while !done(reactor) {
        assert!(Instant::now() < deadline, "{what}: not within {WAIT:?}");
        assert_eq!(reactor.turn(Some(Duration::from_millis(10))).expect("a turn of the loop"), None);
    }
}

/// Descriptors this process has open.
fn open_fds() -> usize {
    std::fs::read_dir("/proc/self/fd").expect("listing /proc/self/fd").count()
}

// ---------------------------------------------------------------------------
// Woken from another thread
// ---------------------------------------------------------------------------

/// Records the connections it opens; answers each `ping` line with `pong`, and a
/// wake with `woken`.
#[derive(Default)]
struct Pings {
    opened: Vec<ConnId>,
    answered: usize,
    woken: usize,
}

impl Protocol for Pings {
    type Conn = ();

    fn on_open(&mut self, _conn: &mut (), io: &mut Io<'_>) -> Flow {
        self.opened.push(io.id());
        Flow::Continue
    }

    fn on_data(&mut self, _conn: &mut (), input: &[u8], io: &mut Io<'_>) -> Verdict {
        let whole = input.iter().rposition(|&b| b == b'\n').map_or(0, |end| end + 1);
        for line in input[..whole].split(|&b| b == b'\n').filter(|line| !line.is_empty()) {
            assert_eq!(line, b"ping");
            self.answered += 1;
            io.write(b"pong\n");
        }
        Verdict::keep(whole)
    }

    fn on_wake(&mut self, _conn: &mut (), io: &mut Io<'_>) -> Flow {
        self.woken += 1;
        io.write(b"woken\n");
        Flow::Continue
    }
}

/// The owner's side of the wake channel: a byte on `bell` for each id sent on `ids`.
struct Doorbell {
    bell: UnixStream,
    ids: Receiver<ConnId>,
}

impl Doorbell {
    /// After a [`Returned::Control`]: reads the bell until it would block (it is
    /// edge-triggered), then wakes every connection whose id came. Returns each id
    /// with what [`Reactor::wake`] said.
    fn answer<P: Protocol>(&mut self, reactor: &mut Reactor<P>) -> Vec<(ConnId, bool)> {
        let mut rung = [0; 64];
        loop {
            match self.bell.read(&mut rung) {
                Ok(0) => break, // the other thread is gone, and so is its end
                Ok(_) => {}
                Err(e) if e.kind() == ErrorKind::WouldBlock => break,
                Err(e) => panic!("reading the bell: {e}"),
            }
        }
        self.ids.try_iter().map(|id| (id, reactor.wake(id))).collect()
    }
}

/// A wake channel watched by `reactor`: the other thread's end (to send an id, then
/// ring), and the owner's.
fn doorbell<P: Protocol>(reactor: &mut Reactor<P>) -> (mpsc::Sender<ConnId>, UnixStream, Doorbell) {
    let (ring, bell) = UnixStream::pair().expect("a socket pair");
    bell.set_nonblocking(true).expect("a non-blocking bell");
    reactor.watch(&bell).expect("watching the bell");
    let (send, ids) = mpsc::channel();
    (send, ring, Doorbell { bell, ids })
}

#[test]
fn connections_are_woken_from_another_thread_and_a_closed_ones_id_wakes_nothing() {
    let _serial = one_at_a_time();
    let (mut reactor, addr) = reactor(Pings::default());
    let (send, mut ring, mut doorbell) = doorbell(&mut reactor);
    let mut clients: Vec<TcpStream> = (0..3).map(|_| connect(addr)).collect();
    turn_until(&mut reactor, "three connections opened", |r| r.protocol().opened.len() == 3);
    let ids = reactor.protocol().opened.clone();
    // The third closes; its id outlives it on the other thread.
    drop(clients.pop());
    turn_until(&mut reactor, "the third connection closed", |r| r.stats().open == 2);

    let order = [ids[0], ids[2], ids[1]];
    let other = std::thread::spawn(move || {
        for id in order {
            // The id first: a ring finds the ids sent before it in the channel.
            send.send(id).expect("sending an id");
            ring.write_all(b"!").expect("ringing");
        }
        // Its end is kept open: a hang-up would ring too.
        ring
    });
    // Each control wake is answered as it comes, while the other thread rings.
    let mut woken = Vec::new();
    let deadline = Instant::now() + WAIT;
    while woken.len() < 3 || !other.is_finished() {
        assert!(Instant::now() < deadline, "three ids answered: not within {WAIT:?}, got {woken:?}");
        if let Some(wake) = reactor.turn(Some(Duration::from_millis(10))).expect("a turn of the loop") {
            assert_eq!(wake, Returned::Control);
            woken.extend(doorbell.answer(&mut reactor));
        }
    }
    let _ring = other.join().expect("the other thread");
    // A last ring may have come after its id was taken: read, it rings no more.
    assert_eq!(doorbell.answer(&mut reactor), [], "an id sent twice");
    assert_eq!(woken, [(ids[0], true), (ids[2], false), (ids[1], true)], "the closed one's wake is false");
    assert_eq!(reactor.protocol().woken, 2);
    for (i, client) in clients.iter_mut().enumerate() {
        assert_eq!(read_text(client, 6), "woken\n", "connection {i}");
    }
    // The woken connections go on as before.
    for client in &mut clients {
        client.write_all(b"ping\n").expect("a ping");
    }
    turn_until(&mut reactor, "both pings answered", |r| r.protocol().answered == 2);
    for client in &mut clients {
        assert_eq!(read_text(client, 5), "pong\n");
    }
}

#[test]
fn requests_that_come_with_a_control_wake_are_answered_in_the_next_turn() {
    let _serial = one_at_a_time();
    let (mut reactor, addr) = reactor(Pings::default());
    let (send, mut ring, mut doorbell) = doorbell(&mut reactor);
    let mut clients: Vec<TcpStream> = (0..2).map(|_| connect(addr)).collect();
    turn_until(&mut reactor, "two connections opened", |r| r.protocol().opened.len() == 2);
    // Whatever the accepts left to report is reported now, so that the next wait
    // finds the requests and the ring together.
    for _ in 0..3 {
        assert_eq!(reactor.turn(Some(Duration::from_millis(10))).expect("a turn"), None);
    }
    let first = reactor.protocol().opened[0];

    // Both requests are in the loop's sockets, unread, before it turns again ...
    for client in &mut clients {
        client.write_all(b"ping\n").expect("a ping");
        let (ours, theirs) = (client.local_addr().expect("our address"), addr);
        let arrived = util::wait_until(WAIT, || tcp_queues(theirs, ours).is_some_and(|(_, rx)| rx == 5));
        assert!(arrived, "a ping did not reach the loop's socket within {WAIT:?}");
    }
    // ... and so is the ring, from another thread.
    let _ring = std::thread::spawn(move || {
        send.send(first).expect("sending the id");
        ring.write_all(b"!").expect("ringing");
        ring
    })
    .join()
    .expect("the other thread");

    // One wait finds all three: the owner hears of the ring first, the requests not
    // yet served ...
    let wake = reactor.turn(Some(WAIT)).expect("a turn");
    assert_eq!(wake, Some(Returned::Control));
    assert_eq!(
        reactor.protocol().answered,
        0,
        "the owner hears of its descriptor before the batch is served"
    );
    assert_eq!(doorbell.answer(&mut reactor), [(first, true)]);
    // ... and the batch it held is served next, though no new edge comes for it.
    turn_until(&mut reactor, "the held requests answered", |r| r.protocol().answered == 2);
    assert_eq!(read_text(&mut clients[0], 11), "woken\npong\n", "the wake, then the answer");
    assert_eq!(read_text(&mut clients[1], 5), "pong\n");
}

// ---------------------------------------------------------------------------
// Timers at scale
// ---------------------------------------------------------------------------

/// How long after its open a connection's timer fires, at the earliest; then
/// [`SPREAD_MS`] more, at most. Room to open every connection and close half of
/// them before the first deadline, many times over.
const HOLD: Duration = Duration::from_secs(2);
const SPREAD_MS: u64 = 1000;
/// How much later the timers of the connections the test closes (the even-numbered)
/// are set: their deadlines pass after the others have fired and everything is
/// closed, while the loop should be asleep.
const LATER: Duration = Duration::from_millis(1500);

/// Sets a timer on each connection at open, at a deadline from [`HOLD`] to
/// `HOLD + SPREAD_MS` later ([`LATER`] still on an even-numbered connection),
/// scattered by the connection's number; greets it with that number; on its timer
/// writes `!`. Records, by number, each deadline, each firing and each close (at
/// the loop's time), and counts the ticks.
#[derive(Default)]
struct Timed {
    deadlines: Vec<Instant>,
    fired: Vec<Vec<Instant>>,
    closed: Vec<Option<Instant>>,
    closes: usize,
    firings: usize,
    ticks: usize,
}

impl Protocol for Timed {
    /// The connection's number, in the order opened.
    type Conn = usize;

    fn on_open(&mut self, number: &mut usize, io: &mut Io<'_>) -> Flow {
        *number = self.deadlines.len();
        // 7919 is prime to 1000: consecutive connections' deadlines scatter over the
        // whole second, every millisecond taken as often.
        let spread = Duration::from_millis((*number as u64 * 7919) % SPREAD_MS);
        let later = if number.is_multiple_of(2) { LATER } else { Duration::ZERO };
        io.set_timer(HOLD + later + spread);
        self.deadlines.push(io.now() + HOLD + later + spread);
        self.fired.push(Vec::new());
        self.closed.push(None);
        writeln!(io, "{number:06}").expect("the greeting");
        Flow::Continue
    }

    fn on_data(&mut self, _number: &mut usize, input: &[u8], _io: &mut Io<'_>) -> Verdict {
        Verdict::keep(input.len())
    }

    fn on_timer(&mut self, number: &mut usize, io: &mut Io<'_>) -> Flow {
        self.fired[*number].push(io.now());
        self.firings += 1;
        io.write(b"!");
        Flow::Continue
    }

    fn on_close(&mut self, number: &mut usize, _closed: Closed, _unconsumed: &[u8], io: &mut Io<'_>) {
        assert!(self.closed[*number].replace(io.now()).is_none(), "connection {number} closed twice");
        self.closes += 1;
    }

    fn on_tick(&mut self, _now: SystemTime, _conns: &mut Conns<'_>) {
        self.ticks += 1;
    }
}

/// The soft and hard limits on this process's open files, from /proc (the tests
/// use no unsafe code: no getrlimit).
fn nofile_limits() -> (u64, u64) {
    let limits = std::fs::read_to_string("/proc/self/limits").expect("reading /proc/self/limits");
    let line = limits.lines().find(|l| l.starts_with("Max open files")).expect("an open-files line");
    let numbers: Vec<u64> = line.split_whitespace().filter_map(|v| v.parse().ok()).collect();
    match numbers[..] {
        [soft, hard] => (soft, hard),
        _ => panic!("an open-files line with two numeric limits: {line:?}"),
    }
}

/// Raises the soft open-file limit to the hard one with util-linux's `prlimit`, if
/// it is lower and `prlimit` is there (no setrlimit without unsafe code); returns
/// the soft limit then in force.
fn raise_nofile_limit() -> u64 {
    let (soft, hard) = nofile_limits();
    if soft < hard {
        let pid = std::process::id().to_string();
        let raised = std::process::Command::new("prlimit")
            .args(["--pid", &pid, &format!("--nofile={hard}:{hard}")])
            .status()
            .is_ok_and(|status| status.success());
        if !raised {
            eprintln!("the open-file limit stays at {soft}: prlimit could not raise it to {hard}");
        }
    }
    nofile_limits().0
}

/// The number of connections at once.
const WANTED: usize = 10_000;
/// Fewer than this, and the test says so rather than test timers at a smaller scale.
const AT_LEAST: usize = 1_000;
/// Descriptors left free beside ours, the loop's and two per connection.
const MARGIN: usize = 256;
/// Connections opened before the loop accepts them: well under the listener's
/// backlog (4096), so that no connect waits for a SYN to be retried.
const OPEN_BATCH: usize = 500;

#[test]
fn a_timer_on_each_of_thousands_of_connections_fires_once_unless_closed_first() {
    let _serial = one_at_a_time();
    // Each connection is two descriptors of this process, the client's and the
    // loop's: the open-file limit decides how many there can be. 10,000 needs a
    // limit over 20,000 (the hard limit here is often exactly 20,000, and only
    // unsafe code or a privileged prlimit could go past it): up to 10,000, as many
    // as the limit allows with a margin, and not fewer than 1,000.
    let limit = raise_nofile_limit() as usize;
    let before = open_fds();
    let connections = WANTED.min(limit.saturating_sub(before + MARGIN) / 2);
    assert!(connections >= AT_LEAST, "an open-file limit of {limit} allows {connections} connections");
    eprintln!("{connections} connections (open-file limit {limit})");

    let started = Instant::now();
    let (mut reactor, addr) = reactor(Timed::default());
    let with_loop = open_fds();
    // Every connection opened, greeted with its number, and kept by that number.
    let mut clients: Vec<Option<TcpStream>> = Vec::with_capacity(connections);
    while clients.len() < connections {
        let batch: Vec<TcpStream> =
            (0..OPEN_BATCH.min(connections - clients.len())).map(|_| connect(addr)).collect();
        let total = clients.len() + batch.len();
        turn_until(&mut reactor, "a batch opened", |r| r.protocol().deadlines.len() == total);
        clients.resize_with(total, || None);
        for mut stream in batch {
            let number: usize = read_text(&mut stream, 7).trim_end().parse().expect("a numbered greeting");
            assert!(clients[number].replace(stream).is_none(), "number {number} given twice");
        }
    }
    assert_eq!(reactor.stats().open, connections);
    let opened_in = started.elapsed();

    // Every second connection's client leaves, its timer due seconds later.
    for stream in clients.iter_mut().step_by(2) {
        drop(stream.take());
    }
    let closing = connections.div_ceil(2);
    turn_until(&mut reactor, "half the connections closed", |r| r.protocol().closes == closing);
    let kept = connections - closing;
    turn_until(&mut reactor, "the kept connections' timers fired", |r| r.protocol().firings >= kept);
    // Each kept client sees its timer's one byte.
    for (number, stream) in clients.iter_mut().enumerate() {
        if let Some(stream) = stream {
            assert_eq!(read_text(stream, 1), "!", "connection {number}");
        }
    }
    eprintln!("opened in {opened_in:?}, all timers done {:?} after the start", started.elapsed());

    // Then the others leave: nothing is left open, in the loop or in this process.
    drop(clients);
    turn_until(&mut reactor, "every connection closed", |r| r.stats().open == 0);
    assert_eq!(reactor.protocol().closes, connections);
    assert_eq!(open_fds(), with_loop, "descriptors left open by the connections");

    // With nothing to do, the loop sleeps, though the deadlines the closed
    // connections had pass meanwhile (unless the loop was slow to get here): each
    // turn ends at a tick (the turn of the second) but a rare early look at a wall
    // clock being slewed (at most one a tick), or a late event.
    let (mut turns, ticks_before, asleep_at) = (0, reactor.protocol().ticks, reactor.now());
    while reactor.now() < asleep_at + Duration::from_millis(2500) {
        assert_eq!(reactor.turn(None).expect("a turn of the loop"), None);
        turns += 1;
    }
    let ticks = reactor.protocol().ticks - ticks_before;
    let between_ticks = turns - ticks;
    let passed = |at: &&Instant| **at > asleep_at && **at <= reactor.now();
    let stale = reactor.protocol().deadlines.iter().step_by(2).filter(passed).count();
    eprintln!("asleep: {turns} turns, {ticks} ticks, {stale} closed connections' deadlines passed");
    assert!(between_ticks <= ticks + 2, "{between_ticks} turns between {ticks} ticks with nothing open");

    // What each connection saw, now that every deadline is long past.
    let protocol = reactor.protocol();
    let mut closed_in_time = 0;
    for number in 0..connections {
        let (deadline, fired) = (protocol.deadlines[number], &protocol.fired[number]);
        let closed = protocol.closed[number].expect("every connection closed");
        assert!(fired.iter().all(|&at| at >= deadline), "connection {number}'s timer fired early");
        if !number.is_multiple_of(2) {
            assert_eq!(fired.len(), 1, "kept connection {number}'s timer fired {} times", fired.len());
        } else if closed < deadline {
            closed_in_time += 1;
            assert!(fired.is_empty(), "connection {number} closed before its deadline, its timer fired");
        } else {
            // Its client left in time, but the loop, behind on a loaded machine, saw
            // the deadline first: one firing, before the close.
            assert!(
                fired.len() <= 1 && fired.iter().all(|&at| at <= closed),
                "connection {number}: {fired:?}"
            );
        }
    }
    eprintln!("{closed_in_time} of {closing} closed connections closed before their deadline");
    assert!(closed_in_time > 0, "no connection closed before its deadline: the test saw no cancelled timer");
    drop(reactor);
    assert_eq!(open_fds(), before, "descriptors left open by the loop");
}
