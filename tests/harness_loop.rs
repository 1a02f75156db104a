//! The `Harness` against the real loop: one protocol, one scripted conversation,
//! driven once through the `Harness` (its clock moved past each timer) and once
//! through a `Reactor` over a socket on 127.0.0.1. The docs promise that the
//! harness hands input in and honours pauses "as the loop does": both must give
//! the same bytes, and the bytes the script expects.
//!
//! The client sends a step only once the previous step's answer (timers' output
//! included) has arrived, so the bytes do not depend on how fast either side is;
//! nothing here measures time.

use std::io::{ErrorKind, Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::os::unix::net::UnixStream;
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use percore::listen::{self, ListenOptions, Opening};
use percore::reactor::{Config, Flow, Harness, Io, Protocol, Reactor, Returned, Verdict};

/// Bound on every wait for the loop.
const WAIT: Duration = Duration::from_secs(10);

/// Answers commands, one a line (see [`Command`]); a partial line waits for the rest.
struct Commands;

/// One line of input.
#[derive(Debug, PartialEq, Eq)]
enum Command<'a> {
    /// `say TEXT`: writes TEXT and a newline at once.
    Say(&'a [u8]),
    /// `after MS`: sets the timer MS ms ahead; it writes `timer`.
    After(Duration),
    /// `ticks N MS`: sets the timer MS ms ahead; it writes `tick I` and sets itself
    /// again, until it fired N times.
    Ticks(u32, Duration),
    /// `zero`: sets the timer 0 ms ahead; it writes `zero`.
    Zero,
    /// `past`: sets the timer a second ago; it writes `past`.
    Past,
    /// `hold MS`: pauses with nothing written, the rest of the input held, and sets
    /// the timer MS ms ahead, which resumes the connection and writes nothing.
    Hold(Duration),
    /// `step`: writes `step` and pauses: the rest comes once that is sent.
    Step,
    /// `wake`: wakes its own connection, which then writes `woken`.
    Wake,
    /// `quit`: writes `bye` and closes; what follows is never handed in.
    Quit,
    /// Anything else: answered `? LINE`.
    Unknown(&'a [u8]),
}

impl Command<'_> {
    fn parse(line: &[u8]) -> Command<'_> {
        let millis = |word: &str| word.parse().ok().map(Duration::from_millis);
        let text = std::str::from_utf8(line).unwrap_or("");
        let words: Vec<&str> = text.split(' ').collect();
        let parsed = match words.as_slice() {
            ["say", ..] => line.strip_prefix(b"say ").map(Command::Say),
            ["after", ms] => millis(ms).map(Command::After),
            ["ticks", n, ms] => n.parse().ok().zip(millis(ms)).map(|(n, every)| Command::Ticks(n, every)),
            ["zero"] => Some(Command::Zero),
            ["past"] => Some(Command::Past),
            ["hold", ms] => millis(ms).map(Command::Hold),
            ["step"] => Some(Command::Step),
            ["wake"] => Some(Command::Wake),
            ["quit"] => Some(Command::Quit),
            _ => None,
        };
        parsed.unwrap_or(Command::Unknown(line))
    }
}

/// A connection of [`Commands`].
#[derive(Debug, Default)]
struct Line {
    /// What its timer does when it fires.
    timer: Timer,
    /// Paused by `hold` and not yet resumed: `on_data` must not be called.
    held: bool,
}

/// What a connection's timer does when it fires.
#[derive(Debug, Default)]
enum Timer {
    /// Nothing should fire: it writes `stray timer`.
    #[default]
    Unset,
    /// Writes these bytes.
    Say(&'static [u8]),
    /// Writes `tick I`, and sets itself again `every` ahead until it fired `of` times.
    Ticks { fired: u32, of: u32, every: Duration },
    /// Resumes the connection held by `hold`, writing nothing.
    Resume,
}

impl Protocol for Commands {
    type Conn = Line;

    fn on_data(&mut self, conn: &mut Line, input: &[u8], io: &mut Io<'_>) -> Verdict {
        if conn.held {
            io.write(b"on_data while held\n");
        }
        let mut consumed = 0;
        while let Some(end) = input[consumed..].iter().position(|&b| b == b'\n') {
            let line = &input[consumed..consumed + end];
            consumed += end + 1;
            match Command::parse(line) {
                Command::Say(text) => {
                    io.write(text);
                    io.write(b"\n");
                }
                Command::After(after) => {
                    conn.timer = Timer::Say(b"timer\n");
                    io.set_timer(after);
                }
                Command::Ticks(of, every) => {
                    conn.timer = Timer::Ticks { fired: 0, of, every };
                    io.set_timer(every);
                }
                Command::Zero => {
                    conn.timer = Timer::Say(b"zero\n");
                    io.set_timer(Duration::ZERO);
                }
                Command::Past => {
                    conn.timer = Timer::Say(b"past\n");
                    let now = io.now();
                    io.set_timer_at(now.checked_sub(Duration::from_secs(1)).unwrap_or(now));
                }
                Command::Hold(after) => {
                    conn.timer = Timer::Resume;
                    conn.held = true;
                    io.set_timer(after);
                    return Verdict::pause(consumed);
                }
                Command::Step => {
                    io.write(b"step\n");
                    return Verdict::pause(consumed);
                }
                Command::Wake => {
                    let id = io.id();
                    io.wake(id);
                }
                Command::Quit => {
                    io.write(b"bye\n");
                    return Verdict::close(consumed);
                }
                Command::Unknown(line) => {
                    io.write(b"? ");
                    io.write(line);
                    io.write(b"\n");
                }
            }
        }
        Verdict::keep(consumed)
    }

    fn on_timer(&mut self, conn: &mut Line, io: &mut Io<'_>) -> Flow {
        match std::mem::take(&mut conn.timer) {
            Timer::Unset => io.write(b"stray timer\n"),
            Timer::Say(text) => io.write(text),
            Timer::Ticks { fired, of, every } => {
                let fired = fired + 1;
                io.write(format!("tick {fired}\n").as_bytes());
                if fired < of {
                    conn.timer = Timer::Ticks { fired, of, every };
                    io.set_timer(every);
                }
            }
            Timer::Resume => {
                conn.held = false;
                let id = io.id();
                io.resume(id);
            }
        }
        Flow::Continue
    }

    fn on_wake(&mut self, _conn: &mut Line, io: &mut Io<'_>) -> Flow {
        io.write(b"woken\n");
        Flow::Continue
    }
}

/// What the client sends at once, and the answer it then waits for before it
/// sends the next step.
struct Step {
    send: &'static [u8],
    expect: &'static [u8],
}

/// The conversation: each feature of the contract in turn, with the answer each
/// step must get. The timers are short, for the loop; the harness is told to move
/// its clock.
const SCRIPT: &[Step] = &[
    // A write on data; a partial line left unconsumed ...
    Step { send: b"say hello\nsay wor", expect: b"hello\n" },
    // ... comes first in the next call, completed.
    Step { send: b"ld\n", expect: b"world\n" },
    // A timer set in on_data.
    Step { send: b"after 20\n", expect: b"timer\n" },
    // A timer set again inside on_timer fires again.
    Step { send: b"ticks 3 10\n", expect: b"tick 1\ntick 2\ntick 3\n" },
    // A timer of zero duration, and one set in the past, fire at the next look.
    Step { send: b"zero\n", expect: b"zero\n" },
    Step { send: b"past\n", expect: b"past\n" },
    // A pause with nothing written holds the rest of the input until the timer
    // resumes the connection; the held line is answered then, and only then.
    Step { send: b"hold 20\nsay after the hold\n", expect: b"after the hold\n" },
    // A pause with output written goes on with the rest once that output is sent.
    Step { send: b"step\nstep\nsay after the steps\n", expect: b"step\nstep\nafter the steps\n" },
    // A wake asked by a callback is carried out once it returns.
    Step { send: b"wake\nsay before the wake\n", expect: b"before the wake\nwoken\n" },
    // A close: what comes after it is never handed in.
    Step { send: b"quit\nsay never\n", expect: b"bye\n" },
];

/// Everything `script` expects, in order.
fn transcript(script: &[Step]) -> Vec<u8> {
    script.iter().flat_map(|step| step.expect.iter().copied()).collect()
}

/// What a driver gave the client: the bytes, and whether the connection was closed
/// after them.
#[derive(Debug, PartialEq, Eq)]
struct Outcome {
    output: String,
    closed: bool,
}

/// `script` through the harness: each step received as one read, and the clock
/// moved to each timer's deadline in turn until none is set.
fn through_the_harness(script: &[Step]) -> Outcome {
    let mut harness = Harness::new(Commands);
    assert_eq!(harness.open(), Flow::Continue);
    let mut output = Vec::new();
    for step in script {
        harness.receive(step.send);
        output.extend(harness.take_output());
        // A timer that kept setting itself would never end: bounded.
        for _ in 0..100 {
            let Some(at) = harness.timer() else { break };
            harness.advance(at.saturating_duration_since(harness.now()));
            output.extend(harness.take_output());
        }
        assert_eq!(harness.timer(), None, "a timer still set after the clock moved to it 100 times");
    }
    let closed = harness.is_closing(harness.id());
    Outcome { output: String::from_utf8_lossy(&output).into_owned(), closed }
}

/// A loop serving [`Commands`] on its own thread, until dropped.
struct LoopThread {
    addr: SocketAddr,
    /// Writing to it ends the loop's `run` with [`Returned::Control`].
    stop: UnixStream,
    thread: Option<JoinHandle<std::io::Result<Returned>>>,
}

impl LoopThread {
    fn start() -> LoopThread {
        let options = ListenOptions { opening: Opening::ClientSpeaksFirst, ..ListenOptions::default() };
        let listener = listen::bind(([127, 0, 0, 1], 0).into(), &options).expect("binding");
        let addr = listener.local_addr().expect("the bound address");
        let mut reactor = Reactor::new(listener, Commands, Config::default()).expect("a loop");
        let (stop, watched) = UnixStream::pair().expect("a socket pair");
        reactor.watch(&watched).expect("watching the stop socket");
        // `watched` moves with the loop: it stays open while the loop runs.
        let thread = std::thread::spawn(move || {
            let _watched = watched;
            reactor.run()
        });
        LoopThread { addr, stop, thread: Some(thread) }
    }

    /// Stops the loop and checks that it stopped for that.
    fn stop(mut self) {
        (&self.stop).write_all(b"!").expect("asking the loop to stop");
        let thread = self.thread.take().expect("running");
        let wake = thread.join().expect("the loop's thread").expect("the loop's run");
        assert_eq!(wake, Returned::Control);
    }
}

impl Drop for LoopThread {
    fn drop(&mut self) {
        // After a failed test: the loop stops on its own thread, unwaited.
        let _ = (&self.stop).write_all(b"!");
    }
}

/// Reads until `want` more bytes came, the stream ended, or [`WAIT`] passed; appends
/// what came to `output`. Returns whether all `want` bytes came.
fn read_some(stream: &mut TcpStream, want: usize, output: &mut Vec<u8>) -> bool {
    let deadline = Instant::now() + WAIT;
    let mut buffer = [0; 4096];
    let mut got = 0;
    while got < want && Instant::now() < deadline {
        match stream.read(&mut buffer[..(want - got).min(4096)]) {
            Ok(0) => return false,
            Ok(n) => {
                output.extend_from_slice(&buffer[..n]);
                got += n;
            }
            Err(e) if matches!(e.kind(), ErrorKind::WouldBlock | ErrorKind::TimedOut) => {}
            Err(e) if e.kind() == ErrorKind::Interrupted => {}
            Err(e) => panic!("reading the loop's answers: {e}"),
        }
    }
    got == want
}

/// `script` through the loop over a socket: each step sent once the previous one's
/// answer has arrived; then whatever follows the last answer, until the end of the
/// stream.
fn through_the_loop(script: &[Step]) -> Outcome {
    let server = LoopThread::start();
    let mut stream = TcpStream::connect_timeout(&server.addr, WAIT).expect("connecting");
    stream.set_read_timeout(Some(Duration::from_millis(100))).expect("a read timeout");
    stream.set_write_timeout(Some(WAIT)).expect("a write timeout");
    let mut output = Vec::new();
    for step in script {
        stream.write_all(step.send).expect("sending a step");
        let complete = read_some(&mut stream, step.expect.len(), &mut output);
        assert!(
            complete,
            "the loop's answer to {:?} did not come within {WAIT:?}; it sent so far:\n{}",
            String::from_utf8_lossy(step.send),
            String::from_utf8_lossy(&output)
        );
    }
    // Anything more, and the end of the stream.
    stream.set_read_timeout(Some(WAIT)).expect("a read timeout");
    let closed = stream.read_to_end(&mut output).is_ok();
    drop(stream);
    server.stop();
    Outcome { output: String::from_utf8_lossy(&output).into_owned(), closed }
}

/// Runs `script` through both drivers: they must agree, and give its transcript
/// and a close.
fn both_give(script: &[Step]) {
    let harness = through_the_harness(script);
    let real = through_the_loop(script);
    assert_eq!(harness, real, "the harness (left) and the loop (right) disagree");
    let expected =
        Outcome { output: String::from_utf8_lossy(&transcript(script)).into_owned(), closed: true };
    assert_eq!(real, expected, "both drivers gave this (left), not the script's transcript (right)");
}

#[test]
fn the_harness_and_the_loop_give_one_script_the_same_bytes() {
    both_give(SCRIPT);
}

#[test]
fn a_connection_that_said_close_hears_from_no_timer_nor_wake() {
    // The loop calls back an open connection only: once `quit` said close, the
    // timer set before it and the wake asked beside it do nothing, in the harness
    // as in the loop.
    both_give(&[Step { send: b"after 20\nwake\nquit\n", expect: b"bye\n" }]);
}

#[test]
fn the_commands_are_what_the_script_says() {
    // The script's lines mean what its comments say: a typo would make a step
    // test nothing, and both drivers would still agree.
    assert_eq!(Command::parse(b"say a b"), Command::Say(b"a b"));
    assert_eq!(Command::parse(b"after 20"), Command::After(Duration::from_millis(20)));
    assert_eq!(Command::parse(b"ticks 3 10"), Command::Ticks(3, Duration::from_millis(10)));
    assert_eq!(Command::parse(b"zero"), Command::Zero);
    assert_eq!(Command::parse(b"past"), Command::Past);
    assert_eq!(Command::parse(b"hold 20"), Command::Hold(Duration::from_millis(20)));
    assert_eq!(Command::parse(b"step"), Command::Step);
    assert_eq!(Command::parse(b"wake"), Command::Wake);
    assert_eq!(Command::parse(b"quit"), Command::Quit);
    assert_eq!(Command::parse(b"after x"), Command::Unknown(b"after x"));
}
