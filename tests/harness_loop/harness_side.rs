//! A script through the `Harness`: each step handed in as the loop would see it,
//! then everything that follows from it done before the next step, in the loop's
//! order: output taken (a connection paused for it goes on), ends of input read,
//! closes, connects, timers (the clock moved to each deadline). Where the harness
//! leaves a decision to its user (when a connection that said close is closed, and
//! why; when the end of input is read; when a connect completes), this decides as
//! the loop does, by its docs and DESIGN.md.

use std::collections::{BTreeMap, BTreeSet};
use std::io::ErrorKind;

use percore::reactor::{Closed, ConnId, Flow, Harness};

use super::outcome::{Outcome, Received};
use super::protocol::{Known, Scripted, Targets, ACCEPTED};
use super::script::Step;

/// What the harness did: its outcome, and, after the opening and after each step,
/// the outcome so far (`None` for a step skipped: its client had none to take it).
#[derive(Debug)]
pub struct Expected {
    pub outcome: Outcome,
    pub after: Vec<Option<Outcome>>,
}

/// Bound on what one step sets off: a script whose timers kept setting themselves
/// would not end.
const MAX_ROUNDS: usize = 1000;

/// Runs `script` through a harness.
pub fn through_the_harness(script: &[Step], targets: Targets, known: Known) -> Expected {
    let mut side = HarnessSide::new(targets, known);
    let mut after = vec![Some(side.outcome())];
    for step in script {
        let taken = side.take(step);
        if taken {
            side.settle();
        }
        after.push(taken.then(|| side.outcome()));
    }
    Expected { outcome: side.outcome(), after }
}

struct HarnessSide {
    harness: Harness<Scripted>,
    targets: Targets,
    /// What each client received, by connection name.
    clients: BTreeMap<char, Received>,
    /// Clients that ended their stream.
    ended: BTreeSet<char>,
    /// Clients whose end of stream the loop would not read yet: their
    /// connection is paused.
    ends_waiting: BTreeSet<char>,
    /// Connections told of their input's end.
    input_ended: BTreeSet<char>,
    /// What a connection held when its input ended and it said close: the loop
    /// hands that to `on_close`; the harness forgets it then (see
    /// `what_is_held_when_the_input_ends_stays_unconsumed`), so it is kept here.
    held_at_end: BTreeMap<char, Vec<u8>>,
}

impl HarnessSide {
    fn new(targets: Targets, known: Known) -> HarnessSide {
        let mut harness = Harness::new(Scripted::new(targets, known));
        assert_eq!(harness.open(), Flow::Continue);
        let clients = BTreeMap::from([(ACCEPTED, Received::default())]);
        let mut side = HarnessSide {
            harness,
            targets,
            clients,
            ended: BTreeSet::new(),
            ends_waiting: BTreeSet::new(),
            input_ended: BTreeSet::new(),
            held_at_end: BTreeMap::new(),
        };
        side.settle();
        side
    }

    fn outcome(&self) -> Outcome {
        Outcome { log: self.harness.protocol().log().to_vec(), clients: self.clients.clone() }
    }

    fn id(&self, name: char) -> ConnId {
        self.harness.protocol().id(name).expect("a connection the protocol named")
    }

    /// Hands `step` in, if its client can take it: it has a connection, the server
    /// has not closed it, and it has not ended its stream. Returns whether it did.
    fn take(&mut self, step: &Step) -> bool {
        let name = step.name();
        let open = self.clients.contains_key(&name)
            && !self.ended.contains(&name)
            && self.harness.closed(self.id(name)).is_none();
        if !open {
            return false;
        }
        match step {
            Step::Send(_, bytes) => {
                self.harness.receive_on(self.id(name), bytes.as_bytes());
            }
            Step::End(_) => {
                self.ended.insert(name);
                let id = self.id(name);
                if self.harness.is_closing(id) {
                    // It lingered, reading what its peer still sent: until now.
                    self.harness.end_on(id, Closed::Done);
                } else {
                    self.ends_waiting.insert(name);
                }
            }
        }
        true
    }

    /// Does everything that follows, until nothing is left.
    fn settle(&mut self) {
        for _ in 0..MAX_ROUNDS {
            // Each may give the others more to do.
            if self.take_output() | self.end_inputs() | self.close_closing() {
                continue;
            }
            if let Some(&(id, addr)) = self.harness.connecting().first() {
                if addr == self.targets.listening {
                    self.harness.establish(id);
                    let name = *self.harness.protocol().opened().last().expect("named when opened");
                    self.clients.insert(name, Received::default());
                } else {
                    self.harness.fail_connect(id, ErrorKind::ConnectionRefused);
                }
                continue;
            }
            // A connection that said close hears from no timer (it lingers).
            let timer = self.harness.protocol().timer();
            let Some((_, at)) = timer.filter(|&(name, _)| !self.harness.is_closing(self.id(name))) else {
                return;
            };
            self.harness.advance(at.saturating_duration_since(self.harness.now()));
        }
        panic!("a step still set things off after {MAX_ROUNDS} rounds");
    }

    /// Every client reads what was written to it: a connection paused for that
    /// output goes on, and what it writes is read too. Returns whether any came.
    fn take_output(&mut self) -> bool {
        let names: Vec<char> = self.clients.keys().copied().collect();
        let mut any = false;
        for name in names {
            let id = self.id(name);
            let bytes = self.harness.take_output_of(id);
            // A connection that said close lingers, if it does, shut down.
            let ended =
                self.harness.is_shut(id) || self.harness.is_closing(id) || self.harness.closed(id).is_some();
            let client = self.clients.get_mut(&name).expect("listed above");
            client.bytes.push_str(&String::from_utf8_lossy(&bytes));
            any |= !bytes.is_empty() || (ended && !client.ended);
            client.ended |= ended;
        }
        any
    }

    /// The input's end reaches connections that read it: not paused (the loop
    /// reads no more until the pause ends), not closing. Returns whether it reached any.
    fn end_inputs(&mut self) -> bool {
        let waiting: Vec<char> = self.ends_waiting.iter().copied().collect();
        let mut any = false;
        for name in waiting {
            let id = self.id(name);
            if self.harness.is_closing(id) || self.harness.closed(id).is_some() {
                self.ends_waiting.remove(&name);
                continue;
            }
            if self.harness.protocol().is_paused(name) {
                continue;
            }
            self.ends_waiting.remove(&name);
            self.input_ended.insert(name);
            any = true;
            let held = self.harness.unconsumed(id).to_vec();
            self.harness.input_end_on(id);
            if self.harness.is_closing(id) {
                self.held_at_end.insert(name, held);
            }
        }
        any
    }

    /// Closes what the loop would close once its output is sent: a connection that
    /// said close, and one shut down whose input ended. A connection that said close
    /// holding input lingers instead, until its client ends its stream (see `take`),
    /// unless that already happened. Returns whether it closed any.
    fn close_closing(&mut self) -> bool {
        let names: Vec<char> = self.clients.keys().copied().collect();
        let mut any = false;
        for name in names {
            let id = self.id(name);
            if self.harness.closed(id).is_some() {
                continue;
            }
            // The loop knows the stream ended once its client ended it, whether or
            // not it read that end yet (it does not while paused).
            let stream_ended = self.ended.contains(&name);
            if let Some(held) = self.held_at_end.remove(&name) {
                let _ = held;
                self.harness.end_on(id, Closed::ByPeer);
            } else if self.harness.is_closing(id) {
                let closed = match (self.harness.protocol().holds_input(name), stream_ended) {
                    (true, false) => continue,
                    // Lingered, and found the end of the stream at once.
                    (true, true) => Closed::Done,
                    // As the loop says: see
                    // `a_connection_whose_input_ended_closed_by_another_is_told_done`.
                    (false, true) => Closed::ByPeer,
                    (false, false) => Closed::Done,
                };
                self.harness.end_on(id, closed);
            } else if self.harness.is_shut(id) && self.input_ended.contains(&name) {
                self.harness.end_on(id, Closed::Done);
            } else {
                continue;
            }
            self.clients.get_mut(&name).expect("listed above").ended = true;
            any = true;
        }
        any
    }
}
