//! The protocol both drivers serve: commands, one a line, that make it answer,
//! pause, arm timers and reach other connections by name; every callback is written
//! to a log, in call order, with what it was given and what it answered.

use std::collections::{HashMap, HashSet, VecDeque};
use std::net::SocketAddr;
use std::time::{Duration, Instant};

use percore::reactor::{Closed, ConnId, Flow, Io, Protocol, Verdict};

use super::command::{Command, Delay, OnTimer};
pub use remaining::Remaining;

mod remaining;

/// The name of the one accepted connection; the protocol names the ones it opens
/// as the command that opens them says. ConnIds differ between the harness and the
/// loop; names do not.
pub const ACCEPTED: char = 'a';

/// Where the connections the protocol opens go.
#[derive(Clone, Copy, Debug)]
pub struct Targets {
    /// A listener of the test, which plays the peer of each connection opened there.
    pub listening: SocketAddr,
    /// A port where nothing listens: a connect there is refused.
    pub refusing: SocketAddr,
}

/// Serves [`Command`]s and logs every callback.
#[derive(Debug)]
pub struct Scripted {
    targets: Targets,
    remaining: Remaining,
    names: HashMap<ConnId, char>,
    ids: HashMap<char, ConnId>,
    /// The connections opened to the test's listener, in the order opened: the
    /// order in which the test accepts them.
    opened: Vec<char>,
    /// The connection being opened. The protocol opens one at a time, and arms no
    /// timer meanwhile (nor opens one while a timer is armed), so that the order of
    /// a connect's completion and other events is not the kernel's to choose.
    connecting: Option<char>,
    /// The one timer armed, and when it fires. One at a time, so that two deadlines
    /// close together, set in different turns of the loop, cannot fire in an order
    /// the harness's exact clock does not see.
    timer: Option<(char, Instant)>,
    /// Wakes asked and not yet heard, in order: the name woken, and whether its
    /// `on_wake` writes.
    wakes: VecDeque<(char, bool)>,
    /// The connections said to close (by their own callback, or `close`), until
    /// the protocol hears of their close: a loop's client closes when such a
    /// connection's stream ends, as the harness's peer does.
    closing: HashSet<char>,
    /// The connections whose last `on_data` paused before a `pause` or `hold` line,
    /// which their next call skips. So a pause always holds input, and the protocol
    /// always hears when it ends.
    paused: HashSet<char>,
    /// The `on_data` call under way goes on after a pause.
    going_on: bool,
    log: Vec<String>,
}

/// A connection's state.
#[derive(Debug, Default)]
pub struct Line {
    /// What its timer does, and its delay (for `ticks`).
    on_timer: OnTimer,
    delay: Option<Delay>,
    /// `stay` was said: the end of its input leaves it open.
    stays: bool,
}

impl Scripted {
    pub fn new(targets: Targets, remaining: Remaining) -> Scripted {
        Scripted {
            targets,
            remaining,
            names: HashMap::new(),
            ids: HashMap::new(),
            opened: Vec::new(),
            connecting: None,
            timer: None,
            wakes: VecDeque::new(),
            closing: HashSet::new(),
            paused: HashSet::new(),
            going_on: false,
            log: Vec::new(),
        }
    }

    /// Every callback so far, in call order.
    pub fn log(&self) -> &[String] {
        &self.log
    }

    /// The connection named `name`, if it was opened or accepted.
    pub fn id(&self, name: char) -> Option<ConnId> {
        self.ids.get(&name).copied()
    }

    /// The names of the connections opened to the test's listener, in order.
    pub fn opened(&self) -> &[char] {
        &self.opened
    }

    /// Whether connection `name` was said to close (by a callback of its own, or
    /// `close`) and is not closed yet.
    pub fn is_closing(&self, name: char) -> bool {
        self.closing.contains(&name)
    }

    /// The one armed timer: its connection, and when it fires.
    pub fn timer(&self) -> Option<(char, Instant)> {
        self.timer
    }

    fn name(&mut self, io: &Io<'_>) -> char {
        if let Some(&name) = self.names.get(&io.id()) {
            return name;
        }
        // Every connection the protocol opens is named when it is opened: this is
        // the accepted one.
        self.names.insert(io.id(), ACCEPTED);
        self.ids.insert(ACCEPTED, io.id());
        ACCEPTED
    }

    fn record(&mut self, name: char, what: String, io: &Io<'_>) {
        self.log.push(format!("{name} {what}, wrote {}", io.written()));
    }

    /// Carries out one command of connection `name`; `Some` when it ends the call.
    fn obey(&mut self, name: char, conn: &mut Line, command: Command, io: &mut Io<'_>) -> Option<Flow> {
        // A name no connection has is answered `no NAME`.
        let id_of = |protocol: &Scripted, to: char, io: &mut Io<'_>| {
            let id = protocol.id(to);
            if id.is_none() {
                io.write(format!("no {to}\n").as_bytes());
            }
            id
        };
        if self.remaining == Remaining::SteeredClear && self.meets_the_remaining_divergence(&command) {
            io.write(format!("no {}\n", command.render()).as_bytes());
            return None;
        }
        match command {
            Command::Say(text) => io.write(format!("{text}\n").as_bytes()),
            Command::To(to, text) => {
                if let Some(id) = id_of(self, to, io) {
                    io.write_to(id, format!("{text}\n").as_bytes());
                }
            }
            Command::Open(to) | Command::Fail(to)
                if self.ids.contains_key(&to) || self.connecting.is_some() || self.timer.is_some() =>
            {
                io.write(format!("no open {to}\n").as_bytes());
            }
            Command::Open(to) => self.connect(to, self.targets.listening, io),
            Command::Fail(to) => self.connect(to, self.targets.refusing, io),
            Command::Pause => {
                io.write(b"pause\n");
                self.paused.insert(name);
                return Some(Flow::Pause);
            }
            Command::Hold => {
                self.paused.insert(name);
                return Some(Flow::Pause);
            }
            Command::Timer(delay, action) => match self.timer {
                Some((other, _)) if other != name => io.write(b"no timer\n"),
                _ if self.connecting.is_some() => io.write(b"no timer\n"),
                _ => {
                    conn.on_timer = action;
                    conn.delay = Some(delay);
                    self.arm(name, delay, io);
                }
            },
            Command::Cancel => {
                io.cancel_timer();
                if self.timer.is_some_and(|(armed, _)| armed == name) {
                    self.timer = None;
                }
            }
            Command::Wake(to) | Command::Poke(to) => {
                if let Some(id) = id_of(self, to, io) {
                    self.wakes.push_back((to, matches!(command, Command::Wake(_))));
                    io.wake(id);
                }
            }
            Command::Resume(to) => {
                if let Some(id) = id_of(self, to, io) {
                    io.resume(id);
                }
            }
            Command::Shut(to) => {
                if let Some(id) = id_of(self, to, io) {
                    io.shutdown(id);
                }
            }
            Command::Close(to) => {
                if let Some(id) = id_of(self, to, io) {
                    self.said_close(to);
                    io.close(id);
                }
            }
            Command::Quit => {
                io.write(b"bye\n");
                return Some(Flow::Close);
            }
            Command::Stay => conn.stays = true,
        }
        None
    }

    fn connect(&mut self, name: char, addr: SocketAddr, io: &mut Io<'_>) {
        let id = io.connect(addr);
        self.names.insert(id, name);
        self.ids.insert(name, id);
        self.connecting = Some(name);
        if addr == self.targets.listening {
            self.opened.push(name);
        }
    }

    /// Connection `name` closes once its output is sent: its timer, if armed, will
    /// never fire (a closing connection hears from no timer). The record of it goes
    /// now, not at `on_close`, which comes as soon as the harness's peer closes,
    /// and later from the loop's (see `LoopSide::turn`): what the protocol refuses
    /// while a timer is armed must not depend on that.
    fn said_close(&mut self, name: char) {
        self.closing.insert(name);
        if self.timer.is_some_and(|(armed, _)| armed == name) {
            self.timer = None;
        }
    }

    fn arm(&mut self, name: char, delay: Delay, io: &mut Io<'_>) {
        match delay {
            Delay::Ms(ms) => io.set_timer(Duration::from_millis(ms)),
            Delay::Past => {
                let now = io.now();
                io.set_timer_at(now.checked_sub(Duration::from_secs(1)).unwrap_or(now));
            }
        }
        // Set on a closing connection, it will never fire: no record of it.
        if !self.closing.contains(&name) {
            self.timer = io.timer().map(|at| (name, at));
        }
    }
}

impl Protocol for Scripted {
    type Conn = Line;

    fn on_open(&mut self, _conn: &mut Line, io: &mut Io<'_>) -> Flow {
        let name = self.name(io);
        if self.connecting == Some(name) {
            self.connecting = None;
        }
        io.write(format!("hi {name}\n").as_bytes());
        self.record(name, "open".into(), io);
        Flow::Continue
    }

    fn on_data(&mut self, conn: &mut Line, input: &[u8], io: &mut Io<'_>) -> Verdict {
        let name = self.name(io);
        self.going_on = self.paused.contains(&name);
        let mut consumed = 0;
        let mut flow = Flow::Continue;
        while let Some(end) = input[consumed..].iter().position(|&b| b == b'\n') {
            let line = &input[consumed..consumed + end];
            if self.paused.remove(&name) {
                // The pause or hold line this connection paused before: it goes on.
                consumed += end + 1;
                continue;
            }
            let command = Command::parse(line);
            match command {
                Some(command) => match self.obey(name, conn, command, io) {
                    Some(Flow::Pause) => {
                        flow = Flow::Pause;
                        break;
                    }
                    Some(ended) => {
                        consumed += end + 1;
                        flow = ended;
                        break;
                    }
                    None => {}
                },
                None => io.write(format!("? {}\n", String::from_utf8_lossy(line)).as_bytes()),
            }
            consumed += end + 1;
        }
        if flow == Flow::Close {
            self.said_close(name);
        }
        let verdict = Verdict { consumed, flow };
        self.record(name, format!("data {:?} {verdict:?}", String::from_utf8_lossy(input)), io);
        verdict
    }

    fn on_timer(&mut self, conn: &mut Line, io: &mut Io<'_>) -> Flow {
        let name = self.name(io);
        self.timer = None;
        let mut flow = Flow::Continue;
        match conn.on_timer {
            OnTimer::Ring => io.write(b"ring\n"),
            OnTimer::Resume => {
                let id = io.id();
                io.resume(id);
            }
            OnTimer::Quiet => {}
            OnTimer::Close => {
                io.write(b"ring\n");
                flow = Flow::Close;
            }
            OnTimer::Ticks(left) => {
                io.write(format!("tick {left}\n").as_bytes());
                if let (Some(left @ 1..), Some(delay)) = (left.checked_sub(1), conn.delay) {
                    conn.on_timer = OnTimer::Ticks(left);
                    self.arm(name, delay, io);
                }
            }
        }
        if flow == Flow::Close {
            self.said_close(name);
        }
        self.record(name, format!("timer {flow:?}"), io);
        flow
    }

    fn on_wake(&mut self, _conn: &mut Line, io: &mut Io<'_>) -> Flow {
        let name = self.name(io);
        let at = self.wakes.iter().position(|&(woken, _)| woken == name);
        if at.and_then(|at| self.wakes.remove(at)).is_some_and(|(_, writes)| writes) {
            io.write(b"woken\n");
        }
        self.record(name, "wake".into(), io);
        Flow::Continue
    }

    fn on_input_end(&mut self, conn: &mut Line, io: &mut Io<'_>) -> Flow {
        let name = self.name(io);
        io.write(b"end\n");
        let flow = if conn.stays { Flow::Continue } else { Flow::Close };
        if flow == Flow::Close {
            self.said_close(name);
        }
        self.record(name, format!("input end {flow:?}"), io);
        flow
    }

    fn on_close(&mut self, _conn: &mut Line, closed: Closed, unconsumed: &[u8], io: &mut Io<'_>) {
        let name = self.name(io);
        if self.timer.is_some_and(|(armed, _)| armed == name) {
            self.timer = None;
        }
        if self.connecting == Some(name) {
            self.connecting = None;
        }
        self.wakes.retain(|&(woken, _)| woken != name);
        self.closing.remove(&name);
        self.paused.remove(&name);
        self.record(name, format!("close {closed:?} {:?}", String::from_utf8_lossy(unconsumed)), io);
    }
}
