//! The harness on its own: ticks, closes, timers and a pair of connections; the
//! input it holds and hands in again, as the loop does.

use super::*;
use crate::reactor::io::Io;
use crate::reactor::Conns;

/// Records the ticks and closes it hears of; sets a timer on each input.
#[derive(Default)]
struct Recorder {
    ticks: Vec<SystemTime>,
    closes: Vec<(Closed, Vec<u8>)>,
}

impl Protocol for Recorder {
    type Conn = ();

    fn on_data(&mut self, _conn: &mut (), _input: &[u8], io: &mut Io<'_>) -> Verdict {
        io.set_timer(Duration::from_secs(1));
        Verdict::keep(0)
    }

    fn on_tick(&mut self, now: SystemTime, _conns: &mut Conns<'_>) {
        self.ticks.push(now);
    }

    fn on_close(&mut self, _conn: &mut (), closed: Closed, unconsumed: &[u8], _io: &mut Io<'_>) {
        self.closes.push((closed, unconsumed.to_vec()));
    }
}

#[test]
fn a_tick_and_a_close_reach_the_protocol_and_a_close_cancels_the_timer() {
    let mut harness = Harness::new(Recorder::default());
    let second = SystemTime::UNIX_EPOCH + Duration::from_secs(1_000_000);
    harness.tick(second);
    assert_eq!(harness.protocol().ticks, [second]);
    harness.data(b"x");
    assert_eq!(harness.timer(), Some(harness.now() + Duration::from_secs(1)));
    harness.receive(b"half");
    harness.end(Closed::ByPeer);
    assert_eq!(harness.protocol().closes, [(Closed::ByPeer, b"half".to_vec())], "with what it held");
    assert_eq!(harness.timer(), None, "a closed connection's timer never fires");
    assert_eq!(harness.advance(Duration::from_secs(2)), None);
}

/// Two connections per client: what one receives is written on to the other;
/// an end of input shuts the other down, and a close closes it.
#[derive(Default)]
struct Pair {
    opening: Vec<(ConnId, ConnId)>,
}

impl Protocol for Pair {
    type Conn = Option<ConnId>;

    fn on_open(&mut self, peer: &mut Option<ConnId>, io: &mut Io<'_>) -> Flow {
        if let Some(at) = self.opening.iter().position(|&(backend, _)| backend == io.id()) {
            *peer = Some(self.opening.swap_remove(at).1);
        } else {
            let backend = io.connect(([127, 0, 0, 1], 9));
            self.opening.push((backend, io.id()));
            *peer = Some(backend);
        }
        Flow::Continue
    }

    fn on_data(&mut self, peer: &mut Option<ConnId>, input: &[u8], io: &mut Io<'_>) -> Verdict {
        io.write_to(peer.expect("a peer"), input);
        Verdict::keep(input.len())
    }

    fn on_input_end(&mut self, peer: &mut Option<ConnId>, io: &mut Io<'_>) -> Flow {
        io.shutdown(peer.expect("a peer"));
        Flow::Continue
    }

    fn on_close(&mut self, peer: &mut Option<ConnId>, _closed: Closed, _unconsumed: &[u8], io: &mut Io<'_>) {
        let opened_by =
            self.opening.iter().find(|&&(backend, _)| backend == io.id()).map(|&(_, client)| client);
        if let Some(other) = peer.or(opened_by) {
            io.close(other);
        }
    }
}

#[test]
fn a_pair_of_connections_is_driven_both_ways() {
    let mut harness = Harness::new(Pair::default());
    let client = harness.id();
    harness.open();
    let [(backend, ref addr)] = harness.connecting()[..] else { panic!("{:?}", harness.connecting()) };
    assert_eq!(*addr, ([127, 0, 0, 1], 9).into());
    harness.data(b"request");
    assert_eq!(harness.establish(backend), Some(Flow::Continue));
    assert!(harness.connecting().is_empty());
    assert_eq!(harness.take_output_of(backend), b"request", "written while it was being opened");
    harness.data_on(backend, b"answer");
    assert_eq!(harness.take_output(), b"answer");
    harness.input_end();
    assert!(harness.is_shut(backend) && !harness.is_shut(client));
    harness.end_on(backend, Closed::ByPeer);
    // Closed with its partner, which its protocol asked for: Done, though its own
    // peer had finished sending.
    assert_eq!(harness.closed(client), Some(Closed::Done), "closed with its partner");
}

#[test]
fn a_connection_another_closed_is_closing_while_its_output_waits() {
    let mut harness = Harness::new(Pair::default());
    let client = harness.id();
    harness.open();
    let (backend, _) = harness.connecting()[0];
    harness.establish(backend);
    harness.data_on(backend, b"answer");
    harness.end_on(backend, Closed::ByPeer);
    // The backend's close closed the client, which sends its answer first.
    assert!(harness.is_closing(client), "closed by another, nothing more is read");
    assert_eq!(harness.closed(client), None, "its output not taken yet");
    assert_eq!(harness.take_output(), b"answer");
    assert_eq!(harness.closed(client), Some(Closed::Done));
}

#[test]
fn a_connection_that_cannot_be_opened_closes_its_partner() {
    let mut harness = Harness::new(Pair::default());
    harness.open();
    let (backend, _) = harness.connecting()[0];
    harness.fail_connect(backend, io::ErrorKind::ConnectionRefused);
    assert_eq!(harness.closed(backend), Some(Closed::ConnectFailed(io::ErrorKind::ConnectionRefused)));
    assert_eq!(harness.closed(harness.id()), Some(Closed::Done));
}

/// Records every input `on_data` is given and answers as its script says, then
/// (the script done) consumes everything; each call sets a one-second timer, whose
/// firing writes "timer"; a wake resumes the connection; the first `on_open` opens
/// a connection.
#[derive(Default)]
struct Scripted {
    inputs: Vec<Vec<u8>>,
    /// Per call: bytes consumed, what comes next, and what it writes.
    script: std::collections::VecDeque<(usize, Flow, &'static [u8])>,
    opened: bool,
}

impl Scripted {
    fn new(script: &[(usize, Flow, &'static [u8])]) -> Scripted {
        Scripted { script: script.iter().copied().collect(), ..Scripted::default() }
    }
}

impl Protocol for Scripted {
    type Conn = ();

    fn on_open(&mut self, _conn: &mut (), io: &mut Io<'_>) -> Flow {
        if !std::mem::replace(&mut self.opened, true) {
            io.connect(([127, 0, 0, 1], 9));
        }
        Flow::Continue
    }

    fn on_data(&mut self, _conn: &mut (), input: &[u8], io: &mut Io<'_>) -> Verdict {
        self.inputs.push(input.to_vec());
        io.set_timer(Duration::from_secs(1));
        let (consumed, flow, written) = self.script.pop_front().unwrap_or((input.len(), Flow::Continue, b""));
        io.write(written);
        Verdict { consumed, flow }
    }

    fn on_timer(&mut self, _conn: &mut (), io: &mut Io<'_>) -> Flow {
        io.write(b"timer");
        Flow::Continue
    }

    fn on_wake(&mut self, _conn: &mut (), io: &mut Io<'_>) -> Flow {
        io.resume(io.id());
        Flow::Continue
    }
}

fn inputs(harness: &Harness<Scripted>) -> Vec<&[u8]> {
    harness.protocol().inputs.iter().map(Vec::as_slice).collect()
}

#[test]
fn what_a_call_leaves_unconsumed_comes_first_in_the_next() {
    let mut harness = Harness::new(Scripted::new(&[(2, Flow::Continue, b"")]));
    harness.receive(b"abcd");
    assert_eq!(harness.unconsumed(harness.id()), b"cd");
    harness.receive(b"ef");
    assert_eq!(inputs(&harness), [&b"abcd"[..], b"cdef"]);
    assert_eq!(harness.unconsumed(harness.id()), b"");
}

#[test]
fn a_paused_protocol_goes_on_once_its_output_is_taken_with_what_it_holds_first() {
    let mut harness = Harness::new(Scripted::new(&[(1, Flow::Pause, b"x"), (2, Flow::Continue, b"y")]));
    harness.receive(b"abc");
    harness.receive(b"de");
    assert_eq!(inputs(&harness), [b"abc"], "not read while paused: the output waits");
    // Taken, the output is sent: called with what it holds, then with what waited.
    assert_eq!(harness.take_output(), b"xy");
    assert_eq!(inputs(&harness), [&b"abc"[..], b"bc", b"de"]);
}

#[test]
fn a_pause_with_nothing_written_waits_for_a_timers_output_or_a_resume() {
    let mut harness = Harness::new(Scripted::new(&[(0, Flow::Pause, b""), (0, Flow::Pause, b"")]));
    harness.receive(b"ab");
    assert_eq!(harness.take_output(), b"", "nothing sends it on");
    assert_eq!(inputs(&harness), [b"ab"]);
    assert_eq!(harness.advance(Duration::from_secs(1)), Some(Flow::Continue));
    assert_eq!(harness.take_output(), b"timer", "the timer wrote: it goes on once that is sent");
    assert_eq!(inputs(&harness), [b"ab", b"ab"]);
    // Paused again with nothing written; a resume sends it on.
    assert_eq!(harness.wake(), Some(Flow::Continue));
    assert_eq!(inputs(&harness), [b"ab", b"ab", b"ab"]);
}

#[test]
fn after_a_close_nothing_more_is_read_and_the_close_ends_once_its_output_is_taken() {
    let mut harness = Harness::new(Scripted::new(&[(1, Flow::Close, b"bye")]));
    let id = harness.id();
    assert!(!harness.is_closing(id));
    harness.receive(b"abc");
    assert!(harness.is_closing(id));
    assert_eq!(harness.unconsumed(id), b"", "dropped, as the loop drops it");
    harness.receive(b"more");
    assert_eq!(harness.closed(id), None, "its output waits for the peer");
    assert_eq!(harness.take_output(), b"bye");
    assert_eq!(inputs(&harness), [b"abc"]);
    assert_eq!(harness.closed(id), Some(Closed::Done), "sent, lingered, and closed by the peer");
    assert_eq!(harness.take_output(), b"", "nothing more");
}

#[test]
fn input_received_while_a_connection_is_opened_is_read_once_it_is_established() {
    let mut harness = Harness::new(Scripted::default());
    harness.open();
    let (backend, _) = harness.connecting()[0];
    harness.receive_on(backend, b"early");
    assert!(inputs(&harness).is_empty());
    harness.establish(backend);
    assert_eq!(inputs(&harness), [b"early"]);
}

/// Says its connection's addresses when it opens.
struct SaysAddresses;

impl Protocol for SaysAddresses {
    type Conn = ();

    fn on_open(&mut self, _conn: &mut (), io: &mut Io<'_>) -> Flow {
        let peer = io.peer_addr().map_or("none".to_string(), |a| a.to_string());
        let local = io.local_addr().map_or("none".to_string(), |a| a.to_string());
        io.write(format!("{peer} {local}").as_bytes());
        Flow::Continue
    }

    fn on_data(&mut self, _conn: &mut (), input: &[u8], io: &mut Io<'_>) -> Verdict {
        io.connect("10.0.0.1:80".parse::<std::net::SocketAddr>().expect("an address"));
        Verdict::keep(input.len())
    }
}

#[test]
fn the_harness_gives_its_connections_loopback_addresses_as_documented() {
    let mut harness = Harness::new(SaysAddresses);
    harness.open();
    assert_eq!(
        harness.take_output(),
        b"127.0.0.1:49152 127.0.0.1:8080",
        "accepted: the test's port, then 8080"
    );
    harness.data(b"x");
    let [(made, ref to)] = harness.connecting()[..] else { panic!("one connection being made") };
    assert_eq!(*to, "10.0.0.1:80".parse().expect("an address"));
    harness.establish(made);
    assert_eq!(
        harness.take_output_of(made),
        b"10.0.0.1:80 127.0.0.1:49153",
        "made: its peer, then the test's port"
    );
    let second = harness.accept();
    assert_ne!(second, harness.id());
    assert_eq!(
        harness.take_output_of(second),
        b"127.0.0.1:49154 127.0.0.1:8080",
        "another accepted: opened at once, the next port"
    );
    harness.data_on(second, b"y");
    assert_eq!(harness.connecting().len(), 1, "driven by its id");
}

/// A client whose input waits for its backend: the client's `on_data` consumes
/// nothing, unless the input ends in `!`, and reads on (`keep`) or pauses with
/// nothing written; the backend's input is written on to the client, and a wake of
/// the backend resumes the client.
#[derive(Default)]
struct Waits {
    client: Option<ConnId>,
    backend: Option<ConnId>,
    keep: bool,
    /// Every input the client's `on_data` was given.
    calls: Vec<Vec<u8>>,
}

impl Protocol for Waits {
    type Conn = ();

    fn on_open(&mut self, _conn: &mut (), io: &mut Io<'_>) -> Flow {
        if self.client.is_none() {
            self.client = Some(io.id());
            self.backend = Some(io.connect(([127, 0, 0, 1], 9)));
        }
        Flow::Continue
    }

    fn on_data(&mut self, _conn: &mut (), input: &[u8], io: &mut Io<'_>) -> Verdict {
        if Some(io.id()) == self.backend {
            io.write_to(self.client.expect("a client"), input);
            return Verdict::keep(input.len());
        }
        self.calls.push(input.to_vec());
        match input.last() {
            Some(b'!') => Verdict::keep(input.len()),
            _ if self.keep => Verdict::keep(0),
            _ => Verdict::pause(0),
        }
    }

    fn on_wake(&mut self, _conn: &mut (), io: &mut Io<'_>) -> Flow {
        if Some(io.id()) == self.backend {
            io.resume(self.client.expect("a client"));
        }
        Flow::Continue
    }
}

/// A harness on [`Waits`], its backend established; returns the backend's id.
fn waiting(keep: bool) -> (Harness<Waits>, ConnId) {
    let mut harness = Harness::new(Waits { keep, ..Waits::default() });
    harness.open();
    let (backend, _) = harness.connecting()[0];
    harness.establish(backend);
    (harness, backend)
}

#[test]
fn a_pause_with_nothing_written_ends_once_another_connections_write_to_it_is_sent() {
    let (mut harness, backend) = waiting(false);
    harness.receive(b"GET");
    harness.data_on(backend, b"answer");
    assert_eq!(harness.protocol().calls, [b"GET".to_vec()], "its output not sent yet");
    assert_eq!(harness.take_output(), b"answer");
    assert_eq!(harness.protocol().calls, [b"GET".to_vec(), b"GET".to_vec()], "its held input again");
}

#[test]
fn resume_hands_held_input_again_to_a_connection_that_is_not_paused() {
    let (mut harness, backend) = waiting(true);
    harness.receive(b"GET");
    assert_eq!(harness.unconsumed(harness.id()), b"GET");
    harness.wake_on(backend);
    assert_eq!(harness.protocol().calls, [b"GET".to_vec(), b"GET".to_vec()], "its held input again");
    harness.receive(b" more!");
    assert_eq!(harness.protocol().calls.last().map(Vec::as_slice), Some(&b"GET more!"[..]));
    assert!(harness.unconsumed(harness.id()).is_empty());
}

/// Records the length of every input `on_data` is given, and consumes it all.
#[derive(Default)]
struct Lengths(Vec<usize>);

impl Protocol for Lengths {
    type Conn = ();

    fn on_data(&mut self, _conn: &mut (), input: &[u8], _io: &mut Io<'_>) -> Verdict {
        self.0.push(input.len());
        Verdict::keep(input.len())
    }
}

#[test]
fn input_comes_in_reads_of_64_kib_as_the_loop_reads_it() {
    let mut harness = Harness::new(Lengths::default());
    harness.receive(&vec![b'x'; 100_000]);
    assert_eq!(harness.protocol().0, [65_536, 34_464]);
}

/// Writes all a connection receives on to the one it opened, the sink; the sink's
/// close leaves the writer open.
#[derive(Default)]
struct ToSink {
    sink: Option<ConnId>,
    /// Bytes the writer's `on_data` was given.
    given: usize,
}

impl Protocol for ToSink {
    type Conn = ();

    fn on_open(&mut self, _conn: &mut (), io: &mut Io<'_>) -> Flow {
        if self.sink.is_none() {
            self.sink = Some(io.connect(([127, 0, 0, 1], 9)));
        }
        Flow::Continue
    }

    fn on_data(&mut self, _conn: &mut (), input: &[u8], io: &mut Io<'_>) -> Verdict {
        if Some(io.id()) != self.sink {
            self.given += input.len();
            io.write_to(self.sink.expect("a sink"), input);
        }
        Verdict::keep(input.len())
    }
}

#[test]
fn a_writer_blocked_on_a_connection_that_closes_reads_again() {
    let mut harness = Harness::new(ToSink::default());
    harness.open();
    let (sink, _) = harness.connecting()[0];
    harness.establish(sink);
    // The sink's peer reads nothing: once the writer has taken it past the budget,
    // the writer reads no more.
    harness.receive(&vec![b'x'; 300 * 1024]);
    harness.receive(b"more");
    assert_eq!(harness.protocol().given, 300 * 1024, "blocked on the sink's output");
    harness.end_on(sink, Closed::ByPeer);
    assert_eq!(harness.protocol().given, 300 * 1024 + 4, "the sink gone, the writer reads again");
}

/// Opens a connection from the first one; its `on_data` pauses with nothing
/// written and consumes nothing, unless the input is `kill`: then it writes
/// `killed` and closes the connection it opened, in the same call. Its wakes and
/// timers write nothing.
#[derive(Default)]
struct Quiet {
    opened: Option<ConnId>,
    inputs: usize,
}

impl Protocol for Quiet {
    type Conn = ();

    fn on_open(&mut self, _conn: &mut (), io: &mut Io<'_>) -> Flow {
        if self.opened.is_none() {
            self.opened = Some(io.connect(([127, 0, 0, 1], 9)));
        }
        Flow::Continue
    }

    fn on_data(&mut self, _conn: &mut (), input: &[u8], io: &mut Io<'_>) -> Verdict {
        self.inputs += 1;
        if input == b"kill" {
            io.write(b"killed");
            io.close(self.opened.expect("a connection opened"));
            return Verdict::keep(input.len());
        }
        Verdict::pause(0)
    }
}

#[test]
fn a_callback_that_writes_nothing_leaves_a_pause_that_waits_for_output_as_it_is() {
    let mut harness = Harness::new(Quiet::default());
    harness.receive(b"ab");
    assert_eq!(harness.wake(), Some(Flow::Continue));
    assert_eq!(harness.protocol().inputs, 1, "still paused: nothing was written");
}

#[test]
fn a_connect_that_times_out_fails_and_an_idle_connection_times_out() {
    let config = Config {
        connect_timeout: Some(Duration::from_secs(1)),
        idle_timeout: Some(Duration::from_secs(3)),
        ..Config::default()
    };
    let mut harness = Harness::with_config(Quiet::default(), config);
    harness.open();
    let (opened, _) = harness.connecting()[0];
    harness.advance(Duration::from_secs(2));
    assert_eq!(harness.closed(opened), Some(Closed::ConnectFailed(io::ErrorKind::TimedOut)));
    assert_eq!(harness.closed(harness.id()), None);
    harness.advance(Duration::from_secs(2));
    assert_eq!(harness.closed(harness.id()), Some(Closed::TimedOut));
}

#[test]
fn the_loops_timeouts_run_out_to_the_millisecond() {
    let config = Config {
        connect_timeout: Some(Duration::from_millis(150)),
        idle_timeout: Some(Duration::from_millis(250)),
        ..Config::default()
    };
    let mut harness = Harness::with_config(Quiet::default(), config);
    harness.open();
    let (opened, _) = harness.connecting()[0];
    harness.advance(Duration::from_millis(150));
    assert_eq!(harness.closed(opened), None, "150 ms: the connect's last millisecond");
    harness.advance(Duration::from_millis(1));
    assert_eq!(harness.closed(opened), Some(Closed::ConnectFailed(io::ErrorKind::TimedOut)));
    harness.advance(Duration::from_millis(99));
    assert_eq!(harness.closed(harness.id()), None, "idle for 250 ms");
    harness.advance(Duration::from_millis(2));
    assert_eq!(harness.closed(harness.id()), Some(Closed::TimedOut));
}

/// Sets a read timeout of 100 ms on `wait`, clears it on `done`, consumes nothing
/// else: what it holds is a message partly received.
struct ReadsTimed;

impl Protocol for ReadsTimed {
    type Conn = ();

    fn on_data(&mut self, _conn: &mut (), input: &[u8], io: &mut Io<'_>) -> Verdict {
        match input {
            b"wait" => io.set_read_timeout(Some(Duration::from_millis(100))),
            b"done" => io.set_read_timeout(None),
            _ => return Verdict::keep(0),
        }
        Verdict::keep(input.len())
    }
}

#[test]
fn a_read_timeout_runs_from_the_latest_byte_and_takes_the_place_of_the_message_and_idle_ones() {
    let config = Config {
        message_timeout: Some(Duration::from_secs(10)),
        idle_timeout: Some(Duration::from_secs(10)),
        ..Config::default()
    };
    let mut harness = Harness::with_config(ReadsTimed, config);
    harness.receive(b"wait");
    harness.advance(Duration::from_millis(60));
    harness.receive(b"x");
    harness.advance(Duration::from_millis(60));
    harness.receive(b"y");
    harness.advance(Duration::from_millis(100));
    assert_eq!(harness.unconsumed(harness.id()), b"xy", "held: a message partly received");
    assert_eq!(harness.closed(harness.id()), None, "each byte came within 100 ms of the last");
    harness.advance(Duration::from_millis(1));
    assert_eq!(harness.closed(harness.id()), Some(Closed::TimedOut), "101 ms since the last");

    let mut cleared = Harness::with_config(ReadsTimed, config);
    cleared.receive(b"wait");
    cleared.receive(b"done");
    cleared.advance(Duration::from_secs(9));
    assert_eq!(cleared.closed(cleared.id()), None, "cleared: the idle timeout's 10 s");
    cleared.advance(Duration::from_secs(2));
    assert_eq!(cleared.closed(cleared.id()), Some(Closed::TimedOut));
}

/// The first connection's `wait` sets a read timeout of 100 ms on the connection
/// it opened, by id, as a proxy's client sets its upstream's.
#[derive(Default)]
struct TimesAnother {
    opened: Option<ConnId>,
}

impl Protocol for TimesAnother {
    type Conn = ();

    fn on_open(&mut self, _conn: &mut (), io: &mut Io<'_>) -> Flow {
        if self.opened.is_none() {
            self.opened = Some(io.connect(([127, 0, 0, 1], 9)));
        }
        Flow::Continue
    }

    fn on_data(&mut self, _conn: &mut (), input: &[u8], io: &mut Io<'_>) -> Verdict {
        if input == b"wait" {
            io.set_read_timeout_of(
                self.opened.expect("a connection opened"),
                Some(Duration::from_millis(100)),
            );
        }
        Verdict::keep(input.len())
    }
}

#[test]
fn a_callback_sets_another_connections_read_timeout_by_id() {
    let config = Config { idle_timeout: Some(Duration::from_secs(10)), ..Config::default() };
    let mut harness = Harness::with_config(TimesAnother::default(), config);
    harness.open();
    let (opened, _) = harness.connecting()[0];
    harness.establish(opened);
    harness.receive(b"wait");
    harness.advance(Duration::from_millis(100));
    assert_eq!(harness.closed(opened), None);
    harness.advance(Duration::from_millis(1));
    assert_eq!(harness.closed(opened), Some(Closed::TimedOut), "100 ms with no byte");
    assert_eq!(harness.closed(harness.id()), None, "the caller's own is not timed");
}

/// Marks its connection busy on `wait`, idle on `done`.
struct MarksItself;

impl Protocol for MarksItself {
    type Conn = ();

    fn on_data(&mut self, _conn: &mut (), input: &[u8], io: &mut Io<'_>) -> Verdict {
        match input {
            b"wait" => io.set_busy(io.id()),
            _ => io.set_idle(io.id()),
        }
        Verdict::keep(input.len())
    }
}

#[test]
fn a_connection_marked_busy_is_under_no_idle_timeout_until_it_is_set_idle() {
    let config = Config { idle_timeout: Some(Duration::from_secs(1)), ..Config::default() };
    let mut harness = Harness::with_config(MarksItself, config);
    harness.receive(b"wait");
    harness.advance(Duration::from_secs(5));
    assert_eq!(harness.closed(harness.id()), None, "its exchange goes on elsewhere");
    harness.receive(b"done");
    harness.advance(Duration::from_millis(1001));
    assert_eq!(harness.closed(harness.id()), Some(Closed::TimedOut), "idle again");
}

#[test]
fn input_held_by_a_pause_is_under_the_idle_timeout_not_the_message_timeout() {
    let config = Config {
        message_timeout: Some(Duration::from_secs(1)),
        idle_timeout: Some(Duration::from_secs(10)),
        ..Config::default()
    };
    let mut harness = Harness::with_config(Quiet::default(), config);
    harness.receive(b"next request");
    assert_eq!(harness.unconsumed(harness.id()), b"next request", "held by the pause");
    harness.advance(Duration::from_secs(5));
    assert_eq!(harness.closed(harness.id()), None, "not a message partly received");
    harness.advance(Duration::from_secs(6));
    assert_eq!(harness.closed(harness.id()), Some(Closed::TimedOut));
}

#[test]
fn what_a_call_writes_goes_out_though_it_closes_another_connection() {
    let mut harness = Harness::new(Quiet::default());
    harness.open();
    let (opened, _) = harness.connecting()[0];
    harness.establish(opened);
    harness.receive(b"kill");
    assert_eq!(harness.closed(opened), Some(Closed::Done));
    assert_eq!(harness.take_output(), b"killed");
}

#[test]
fn a_connection_is_shut_down_from_when_it_is_asked_until_its_output_is_sent() {
    let mut harness = Harness::new(Pair::default());
    harness.open();
    let (backend, _) = harness.connecting()[0];
    harness.establish(backend);
    harness.data(b"request");
    harness.input_end();
    assert!(harness.is_shut(backend), "asked, its output waiting");
    assert_eq!(harness.take_output_of(backend), b"request");
}

/// Answers every input with `seen`, and consumes none of it.
struct Hoards;

impl Protocol for Hoards {
    type Conn = ();

    fn on_data(&mut self, _conn: &mut (), _input: &[u8], io: &mut Io<'_>) -> Verdict {
        io.write(b"seen");
        Verdict::keep(0)
    }
}

#[test]
fn a_connection_over_the_input_limit_closes_at_once_and_drops_what_its_last_call_wrote() {
    let mut harness = Harness::with_config(Hoards, Config { max_pending_input: 4, ..Config::default() });
    harness.receive(b"123");
    assert_eq!(harness.take_output(), b"seen");
    harness.receive(b"456");
    assert_eq!(harness.closed(harness.id()), Some(Closed::Done));
    assert_eq!(harness.take_output(), b"", "closed at once, what it wrote dropped");
}

#[test]
fn output_the_peer_does_not_take_is_under_the_send_timeout_not_the_idle_one() {
    let config = Config {
        send_timeout: Some(Duration::from_secs(1)),
        idle_timeout: Some(Duration::from_secs(10)),
        ..Config::default()
    };
    let mut harness = Harness::with_config(Hoards, config);
    harness.receive(b"1");
    harness.advance(Duration::from_secs(2));
    assert_eq!(harness.closed(harness.id()), Some(Closed::TimedOut), "its answer untaken for 2 s");
}

/// Always busy: a message under way, whatever it holds.
struct Busy;

impl Protocol for Busy {
    type Conn = ();

    fn on_data(&mut self, _conn: &mut (), input: &[u8], _io: &mut Io<'_>) -> Verdict {
        Verdict::keep(input.len())
    }

    fn is_busy(_conn: &()) -> bool {
        true
    }
}

/// Busy with a body (as [`Busy`]), and marked busy too, as a proxy's client whose
/// request is under way.
struct BusyAndMarked;

impl Protocol for BusyAndMarked {
    type Conn = ();

    fn on_data(&mut self, _conn: &mut (), input: &[u8], io: &mut Io<'_>) -> Verdict {
        io.set_busy(io.id());
        Verdict::keep(input.len())
    }

    fn is_busy(_conn: &()) -> bool {
        true
    }
}

#[test]
fn a_body_still_arriving_is_under_the_message_timeout_though_its_connection_is_marked_busy() {
    let config = Config {
        message_timeout: Some(Duration::from_secs(1)),
        idle_timeout: Some(Duration::from_secs(10)),
        ..Config::default()
    };
    let mut harness = Harness::with_config(BusyAndMarked, config);
    harness.receive(b"part of a body");
    harness.advance(Duration::from_secs(2));
    assert_eq!(harness.closed(harness.id()), Some(Closed::TimedOut), "the body stalled for 2 s");
}

/// The harness's own connection, on `go`, sets itself a read timeout of 100 ms and
/// writes 300 KiB to the connection it opened: over the output budget there, so it
/// is read no more until that drains.
#[derive(Default)]
struct FloodsAnother {
    opened: Option<ConnId>,
}

impl Protocol for FloodsAnother {
    type Conn = ();

    fn on_open(&mut self, _conn: &mut (), io: &mut Io<'_>) -> Flow {
        if self.opened.is_none() {
            self.opened = Some(io.connect(([127, 0, 0, 1], 9)));
        }
        Flow::Continue
    }

    fn on_data(&mut self, _conn: &mut (), input: &[u8], io: &mut Io<'_>) -> Verdict {
        if input == b"go" {
            io.set_read_timeout(Some(Duration::from_millis(100)));
            io.write_to(self.opened.expect("a connection opened"), &vec![b'x'; 300 * 1024]);
        }
        Verdict::keep(input.len())
    }
}

#[test]
fn a_read_timeout_does_not_run_while_the_loop_holds_the_reading_back() {
    let mut harness = Harness::new(FloodsAnother::default());
    harness.open();
    let (opened, _) = harness.connecting()[0];
    harness.establish(opened);
    harness.receive(b"go");
    harness.advance(Duration::from_secs(1));
    assert_eq!(harness.closed(harness.id()), None, "not read, for the other's output: no read timeout");
    assert_eq!(harness.take_output_of(opened).len(), 300 * 1024);
    harness.advance(Duration::from_millis(101));
    assert_eq!(harness.closed(harness.id()), Some(Closed::TimedOut), "read again, and silent");
}

#[test]
fn a_connection_its_protocol_says_is_busy_is_under_the_message_timeout() {
    let config = Config {
        message_timeout: Some(Duration::from_secs(1)),
        idle_timeout: Some(Duration::from_secs(10)),
        ..Config::default()
    };
    let mut harness = Harness::with_config(Busy, config);
    harness.receive(b"1");
    harness.advance(Duration::from_secs(2));
    assert_eq!(harness.closed(harness.id()), Some(Closed::TimedOut));
}

/// Answers every input with the same bytes.
struct Answers(&'static [u8]);

impl Protocol for Answers {
    type Conn = ();

    fn on_data(&mut self, _conn: &mut (), input: &[u8], io: &mut Io<'_>) -> Verdict {
        io.write(self.0);
        Verdict::keep(input.len())
    }
}

#[test]
fn a_slow_reader_takes_part_of_the_output_and_keeps_the_connection_past_the_send_timeout() {
    let config = Config { send_timeout: Some(Duration::from_secs(2)), ..Config::default() };
    let mut harness = Harness::with_config(Answers(b"0123456789"), config);
    harness.receive(b"x");
    let id = harness.id();
    let mut read = Vec::new();
    for _ in 0..4 {
        harness.advance(Duration::from_millis(1500));
        read.extend(harness.take_some_output_of(id, 2));
    }
    assert_eq!(read, b"01234567", "two bytes a read");
    assert_eq!(harness.closed(id), None, "6 s, each read within 2 s of the last");
    harness.advance(Duration::from_secs(3));
    assert_eq!(harness.closed(id), Some(Closed::TimedOut), "3 s since the last read");
}

/// Closes, at each tick, every connection it saw open.
#[derive(Default)]
struct ClosesOnTick(Vec<ConnId>);

impl Protocol for ClosesOnTick {
    type Conn = ();

    fn on_open(&mut self, _conn: &mut (), io: &mut Io<'_>) -> Flow {
        self.0.push(io.id());
        Flow::Continue
    }

    fn on_data(&mut self, _conn: &mut (), input: &[u8], _io: &mut Io<'_>) -> Verdict {
        Verdict::keep(input.len())
    }

    fn on_tick(&mut self, _now: SystemTime, conns: &mut Conns<'_>) {
        for &id in &self.0 {
            conns.close(id);
        }
    }
}

#[test]
fn what_on_tick_asks_of_the_connections_is_done_when_it_returns() {
    let mut harness = Harness::new(ClosesOnTick::default());
    harness.open();
    assert_eq!(harness.closed(harness.id()), None);
    harness.tick(SystemTime::UNIX_EPOCH);
    assert_eq!(harness.closed(harness.id()), Some(Closed::Done));
}
