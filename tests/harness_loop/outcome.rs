//! What a driver made of a script, and how the two drivers' outcomes are compared.

use std::collections::{BTreeMap, BTreeSet};
use std::fmt::Write as _;

use super::script::Step;

/// Everything observable of one run: the callbacks, and what the clients saw.
///
/// Two outcomes agree when their logs are the same but for where the `on_close`
/// of a connection that lingered comes: that is when its peer closed, at once in
/// the harness, a turn of the loop later over a socket (see `LoopSide::turn`). Its
/// record (reason, unconsumed input) must still be the same.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Outcome {
    /// Every callback, in call order (the protocol's log).
    pub log: Vec<String>,
    /// What each client received, by connection name.
    pub clients: BTreeMap<char, Received>,
    /// The connections whose close lingered, as far as the run can tell: the
    /// loop's (the harness's peer closes before anyone can tell).
    pub lingered: BTreeSet<char>,
}

/// What one client received.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Received {
    pub bytes: String,
    /// The server ended the stream: shut its writing side down, or closed.
    pub ended: bool,
}

impl Outcome {
    /// Whether this outcome has everything `expected` has (and maybe more).
    pub fn reached(&self, expected: &Outcome) -> bool {
        self.log.len() >= expected.log.len()
            && expected.clients.iter().all(|(name, want)| {
                self.clients
                    .get(name)
                    .is_some_and(|got| got.bytes.len() >= want.bytes.len() && (got.ended || !want.ended))
            })
    }

    /// Whether this outcome, still growing, can no longer become one that starts as
    /// `expected` does: a record or a byte differs, or a lingering connection
    /// closed otherwise.
    pub fn strayed_from(&self, expected: &Outcome) -> bool {
        let prefix_differs = |got: &[u8], want: &[u8]| {
            let n = got.len().min(want.len());
            got[..n] != want[..n]
        };
        let (got, got_closes) = split(&self.log, &self.lingered);
        let (want, want_closes) = split(&expected.log, &self.lingered);
        let log_differs = got.iter().zip(&want).any(|(got, want)| got != want);
        log_differs
            || !got_closes.is_subset(&want_closes)
            || self.clients.iter().any(|(name, got)| match expected.clients.get(name) {
                Some(want) => prefix_differs(got.bytes.as_bytes(), want.bytes.as_bytes()),
                None => !got.bytes.is_empty(),
            })
    }
}

/// `log` split: the records whose order is compared, and the `on_close` records of
/// the connections in `lingered`, whose place is not.
fn split<'a>(log: &'a [String], lingered: &BTreeSet<char>) -> (Vec<&'a str>, BTreeSet<&'a str>) {
    let (mut ordered, mut closes) = (Vec::new(), BTreeSet::new());
    for record in log {
        let mut chars = record.chars();
        let lingering = chars.next().is_some_and(|name| lingered.contains(&name));
        if lingering && chars.as_str().starts_with(" close ") {
            closes.insert(record.as_str());
        } else {
            ordered.push(record.as_str());
        }
    }
    (ordered, closes)
}

/// Panics, showing both, unless the harness's outcome and the loop's agree (see
/// [`Outcome`]). `stopped` says why the loop's run stopped early, if it did.
pub fn assert_agree(script: &[Step], harness: &Outcome, real: &Outcome, stopped: Option<&str>) {
    let (harness_log, harness_closes) = split(&harness.log, &real.lingered);
    let (real_log, real_closes) = split(&real.log, &real.lingered);
    let agree = harness_log == real_log && harness_closes == real_closes && harness.clients == real.clients;
    if agree && stopped.is_none() {
        return;
    }
    let mut report = String::from("the harness and the loop disagree\n");
    if let Some(stopped) = stopped {
        let _ = writeln!(report, "the loop's run stopped: {stopped}");
    }
    let _ = writeln!(report, "script:");
    for step in script {
        let _ = writeln!(report, "    {step:?}");
    }
    let first = harness.log.iter().zip(&real.log).position(|(h, r)| h != r);
    let first = first.unwrap_or(harness.log.len().min(real.log.len()));
    let _ =
        writeln!(report, "callbacks (the first {first} agree; lingered in the loop: {:?}):", real.lingered);
    for i in first.saturating_sub(3)..harness.log.len().max(real.log.len()) {
        let line = |log: &[String]| log.get(i).cloned().unwrap_or_else(|| "-".into());
        let _ =
            writeln!(report, "  {i:3} harness: {}\n      loop:    {}", line(&harness.log), line(&real.log));
    }
    let names = harness.clients.keys().chain(real.clients.keys());
    for name in names.collect::<BTreeSet<_>>() {
        let (h, r) = (harness.clients.get(name), real.clients.get(name));
        if h != r {
            let _ = writeln!(report, "client {name}:\n  harness: {h:?}\n  loop:    {r:?}");
        }
    }
    panic!("{report}");
}
