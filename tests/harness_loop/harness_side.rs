//! A script through the `Harness`, driven as a user would: its peer reads output
//! as soon as it is sent (as a client on loopback takes small output at once), each
//! step is handed in (`receive_on`, `input_end_on`), and then what the test does as
//! the peer of everything: it establishes or refuses the connects, and moves the
//! clock to each timer's deadline. Every rule about a connection (pauses, closes,
//! their reasons, lingers, ends of input) is the Harness's own.

use std::collections::{BTreeMap, BTreeSet};
use std::io::ErrorKind;

use percore::reactor::{ConnId, Flow, Harness, PeerReads};

use super::outcome::{Outcome, Received};
use super::protocol::{Remaining, Scripted, Targets, ACCEPTED};
use super::script::Step;
use super::{config, Wire};

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

/// Runs `script` through a harness, its accepted connection speaking as `wire` says.
pub fn through_the_harness(script: &[Step], targets: Targets, remaining: Remaining, wire: Wire) -> Expected {
    let mut side = HarnessSide::new(targets, remaining, wire);
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
}

impl HarnessSide {
    fn new(targets: Targets, remaining: Remaining, wire: Wire) -> HarnessSide {
        let protocol = Scripted::new(targets, remaining);
        let mut harness = match wire {
            Wire::Plain => Harness::with_config(protocol, config()),
            // Opened once its handshake is done: at once.
            #[cfg(feature = "tls")]
            Wire::Tls => Harness::with_tls(protocol, config(), &super::server_tls()),
        };
        harness.set_peer_reads(PeerReads::AtOnce);
        if wire == Wire::Plain {
            assert_eq!(harness.open(), Flow::Continue);
        }
        let clients = BTreeMap::from([(ACCEPTED, Received::default())]);
        let mut side = HarnessSide { harness, targets, clients, ended: BTreeSet::new() };
        side.settle();
        side
    }

    fn outcome(&self) -> Outcome {
        let log = self.harness.protocol().log().to_vec();
        Outcome { log, clients: self.clients.clone(), lingered: BTreeSet::new() }
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
        let id = self.id(name);
        match step {
            Step::Send(_, bytes) => self.harness.receive_on(id, bytes.as_bytes()),
            Step::End(_) => {
                self.ended.insert(name);
                self.harness.input_end_on(id);
            }
        }
        true
    }

    /// Does what the test does as every connection's peer once the loop is idle,
    /// until nothing is left: reads what was sent, establishes or refuses a
    /// connect, lets the one timer armed come due.
    fn settle(&mut self) {
        for _ in 0..MAX_ROUNDS {
            self.read_output();
            if let Some((id, addr)) = self.harness.connecting().first().cloned() {
                if addr == self.targets.listening.into() {
                    self.harness.establish(id);
                    let name = *self.harness.protocol().opened().last().expect("named when opened");
                    self.clients.insert(name, Received::default());
                } else {
                    self.harness.fail_connect(id, ErrorKind::ConnectionRefused);
                }
                continue;
            }
            let Some((_, at)) = self.harness.protocol().timer() else { return };
            let before = self.harness.protocol().log().len();
            self.harness.advance(at.saturating_duration_since(self.harness.now()));
            if self.harness.protocol().log().len() == before {
                // No callback: the protocol's record names a timer that cannot
                // fire, and would bring the harness here again and again.
                return;
            }
        }
        panic!("a step still set things off after {MAX_ROUNDS} rounds");
    }

    /// Every client takes what was sent to it, and sees whether its stream ended:
    /// the connection was shut down or closed.
    fn read_output(&mut self) {
        let names: Vec<char> = self.clients.keys().copied().collect();
        for name in names {
            let id = self.id(name);
            let bytes = self.harness.take_output_of(id);
            let ended = self.harness.is_shut(id) || self.harness.closed(id).is_some();
            let client = self.clients.get_mut(&name).expect("listed above");
            client.bytes.push_str(&String::from_utf8_lossy(&bytes));
            client.ended |= ended;
        }
    }
}
