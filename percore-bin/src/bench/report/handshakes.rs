//! What a TLS run's handshakes came to: how many, how many resumed a session, the
//! protocol versions and cipher suites they agreed on, and how long each took, from
//! the connect call to the connection's opening (TCP connect and TLS handshake).
//! Each load thread counts its own; they add up at the end, with the run's counts.

use std::collections::BTreeMap;
use std::io;
use std::time::Duration;

use hdrhistogram::Histogram;

use super::histogram::{add_histogram, new_histogram};

/// The percentiles of the handshake time the reports give, as (label, quantile):
/// a small distribution beside the responses' full one.
pub const HANDSHAKE_PERCENTILES: [(&str, f64); 2] = [("50", 0.50), ("99", 0.99)];

/// A TLS run's handshakes.
#[derive(Clone, Debug, PartialEq)]
pub struct Handshakes {
    /// Handshakes done: connections established.
    pub done: u64,
    /// Of those, the ones that resumed a session (a ticket) instead of a full handshake.
    pub resumed: u64,
    /// Handshakes by protocol version (`TLSv1.3`), in the order of the names.
    pub versions: BTreeMap<String, u64>,
    /// Handshakes by cipher suite (`TLS13_AES_128_GCM_SHA256`).
    pub suites: BTreeMap<String, u64>,
    /// From the connect call to the connection's opening, in microseconds.
    pub latency: Histogram<u64>,
    /// Why the first handshake that failed did, as the loop says it: said once.
    pub first_failure: Option<io::ErrorKind>,
}

impl Default for Handshakes {
    fn default() -> Handshakes {
        Handshakes {
            done: 0,
            resumed: 0,
            versions: BTreeMap::new(),
            suites: BTreeMap::new(),
            latency: new_histogram(),
            first_failure: None,
        }
    }
}

/// One handshake done: what it agreed on, and how long it took.
#[derive(Clone, Copy, Debug)]
pub struct Handshake<'a> {
    pub version: &'a str,
    pub suite: &'a str,
    pub resumed: bool,
    pub took: Duration,
}

impl Handshakes {
    /// Counts one handshake done.
    pub fn record(&mut self, handshake: &Handshake<'_>) {
        self.done += 1;
        self.resumed += u64::from(handshake.resumed);
        count(&mut self.versions, handshake.version, 1);
        count(&mut self.suites, handshake.suite, 1);
        self.latency.saturating_record(handshake.took.as_micros().try_into().unwrap_or(u64::MAX));
    }

    /// Notes a handshake that failed; the first one's reason is kept.
    pub fn failed(&mut self, kind: io::ErrorKind) {
        self.first_failure.get_or_insert(kind);
    }

    /// Adds another thread's handshakes; the first failure stays the first known.
    pub fn add(&mut self, other: &Handshakes) {
        self.done = self.done.saturating_add(other.done);
        self.resumed = self.resumed.saturating_add(other.resumed);
        for (into, from) in [(&mut self.versions, &other.versions), (&mut self.suites, &other.suites)] {
            for (name, n) in from {
                count(into, name, *n);
            }
        }
        add_histogram(&mut self.latency, &other.latency);
        self.first_failure = self.first_failure.or(other.first_failure);
    }

    /// The handshake time's percentiles (as [`HANDSHAKE_PERCENTILES`]) and maximum, in
    /// microseconds; `None` when no handshake was done.
    pub fn summary(&self) -> Option<([u64; HANDSHAKE_PERCENTILES.len()], u64)> {
        if self.latency.is_empty() {
            return None;
        }
        let percentiles = HANDSHAKE_PERCENTILES.map(|(_, quantile)| self.latency.value_at_quantile(quantile));
        Some((percentiles, self.latency.max()))
    }
}

/// Adds `n` to `name`'s count; a name is copied only the first time it is seen.
fn count(counts: &mut BTreeMap<String, u64>, name: &str, n: u64) {
    match counts.get_mut(name) {
        Some(count) => *count = count.saturating_add(n),
        None => {
            counts.insert(name.to_string(), n);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn handshake(version: &'static str, resumed: bool, millis: u64) -> Handshake<'static> {
        let took = Duration::from_millis(millis);
        Handshake { version, suite: "TLS13_AES_128_GCM_SHA256", resumed, took }
    }

    #[test]
    fn handshakes_count_by_version_and_suite_and_add_up_across_threads() {
        let mut first = Handshakes::default();
        first.record(&handshake("TLSv1.3", false, 1));
        first.record(&handshake("TLSv1.3", true, 3));
        let mut second = Handshakes::default();
        second.record(&handshake("TLSv1.2", false, 2));
        second.failed(io::ErrorKind::InvalidData);
        second.failed(io::ErrorKind::UnexpectedEof);
        first.add(&second);
        assert_eq!((first.done, first.resumed), (3, 1));
        let versions: Vec<(&str, u64)> = first.versions.iter().map(|(name, n)| (name.as_str(), *n)).collect();
        assert_eq!(versions, [("TLSv1.2", 1), ("TLSv1.3", 2)]);
        assert_eq!(first.suites.get("TLS13_AES_128_GCM_SHA256"), Some(&3));
        assert_eq!(first.first_failure, Some(io::ErrorKind::InvalidData), "the first one is kept");
        let (percentiles, max) = first.summary().expect("handshakes were done");
        // Within the histogram's 3 significant digits.
        assert_eq!(percentiles.map(|us| us / 10), [200, 300]);
        assert_eq!(max / 10, 300);
    }

    #[test]
    fn no_handshake_has_no_time() {
        let mut handshakes = Handshakes::default();
        handshakes.failed(io::ErrorKind::InvalidData);
        assert_eq!(handshakes.summary(), None);
    }
}
