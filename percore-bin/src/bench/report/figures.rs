//! The figures a run reports: counts, errors by kind, responses by status code, and
//! the latency histogram and its summary.

use std::time::{Duration, SystemTime};

use hdrhistogram::Histogram;

use super::handshakes::Handshakes;
use super::histogram::new_histogram;
use super::run_info::RunInfo;

/// The percentiles reported, as (label, quantile): ab's list, with wrk's 99.9.
pub const PERCENTILES: [(&str, f64); 10] = [
    ("50", 0.50),
    ("66", 0.66),
    ("75", 0.75),
    ("80", 0.80),
    ("90", 0.90),
    ("95", 0.95),
    ("98", 0.98),
    ("99", 0.99),
    ("99.9", 0.999),
    ("100", 1.0),
];

/// Error counts by kind.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Errors {
    /// Connections that could not be opened.
    pub connect: u64,
    /// Reads that failed, a connection closed before a response was complete, or a
    /// response larger than `--max-response-size`.
    pub read: u64,
    /// Writes that failed.
    pub write: u64,
    /// Responses that did not arrive in time.
    pub timeout: u64,
    /// Responses that could not be parsed (a head over 64 KiB among them).
    pub parse: u64,
    /// TLS connections whose handshake failed: a certificate that does not verify,
    /// a handshake the server refused, a server that does not speak TLS.
    pub tls: u64,
}

impl Errors {
    /// The sum of all kinds.
    pub fn total(&self) -> u64 {
        [self.connect, self.read, self.write, self.timeout, self.parse, self.tls]
            .into_iter()
            .fold(0, u64::saturating_add)
    }

    pub fn add(&mut self, other: &Errors) {
        self.connect = self.connect.saturating_add(other.connect);
        self.read = self.read.saturating_add(other.read);
        self.write = self.write.saturating_add(other.write);
        self.timeout = self.timeout.saturating_add(other.timeout);
        self.parse = self.parse.saturating_add(other.parse);
        self.tls = self.tls.saturating_add(other.tls);
    }
}

/// The lowest status code; the parse takes three digits, the first 1 to 9.
const FIRST_STATUS: u16 = 100;
const STATUS_CODES: usize = 900;

/// Responses by status code, 100 to 999: one slot per code, so that counting one is
/// an index, not a lookup.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct StatusCounts(Box<[u64; STATUS_CODES]>);

impl Default for StatusCounts {
    fn default() -> StatusCounts {
        StatusCounts(Box::new([0; STATUS_CODES]))
    }
}

impl StatusCounts {
    /// Counts `n` responses of `status`; a code outside 100 to 999 (which the parse
    /// never gives) is not counted.
    pub fn add(&mut self, status: u16, n: u64) {
        if let Some(slot) = self.0.get_mut(usize::from(status.wrapping_sub(FIRST_STATUS))) {
            *slot = slot.saturating_add(n);
        }
    }

    /// The codes seen, with their counts, lowest code first.
    pub fn iter(&self) -> impl Iterator<Item = (u16, u64)> + '_ {
        (FIRST_STATUS..).zip(self.0.iter().copied()).filter(|&(_, count)| count > 0)
    }

    /// Responses that tell of a failure: neither 2xx nor 3xx (a redirect is an
    /// answer, as wrk counts it). A final 1xx (101) counts: the request was not served.
    pub fn failed(&self) -> u64 {
        self.iter()
            .filter(|(code, _)| !(200..400).contains(code))
            .map(|(_, n)| n)
            .fold(0, u64::saturating_add)
    }

    fn merge(&mut self, other: &StatusCounts) {
        for (code, count) in other.iter() {
            self.add(code, count);
        }
    }
}

/// What a run counted: what the load threads count, each its own, added up at the end.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct RunCounts {
    /// Final responses received in full (interim 1xx ones are not counted).
    pub requests: u64,
    /// Bytes read from the server, heads and bodies.
    pub bytes_read: u64,
    /// Errors by kind.
    pub errors: Errors,
    /// Responses by status code.
    pub status: StatusCounts,
    /// A TLS run's handshakes; `None` for plain HTTP.
    pub tls: Option<Handshakes>,
}

impl RunCounts {
    pub fn add(&mut self, other: &RunCounts) {
        self.requests = self.requests.saturating_add(other.requests);
        self.bytes_read = self.bytes_read.saturating_add(other.bytes_read);
        self.errors.add(&other.errors);
        self.status.merge(&other.status);
        if let Some(theirs) = &other.tls {
            self.tls.get_or_insert_with(Handshakes::default).add(theirs);
        }
    }
}

/// One run's measurements, or several runs' merged.
#[derive(Clone, Debug)]
pub struct Report {
    /// What ran: one entry per run merged into this report.
    pub runs: Vec<RunInfo>,
    /// When the (first) run started sending.
    pub started_at: SystemTime,
    /// From the first start to the last end.
    pub duration: Duration,
    /// A run was ended early by Ctrl-C: the counts are of the time it ran.
    pub interrupted: bool,
    pub counts: RunCounts,
    /// Response latencies in microseconds, 1 µs to 60 s, 3 significant digits.
    pub latency: Histogram<u64>,
    /// Responses completed in each second from `started_at`, for the plot.
    pub per_second: Vec<u64>,
}

impl Report {
    /// An empty report of `runs`, starting at `started_at`.
    pub fn new(runs: Vec<RunInfo>, started_at: SystemTime) -> Report {
        Report {
            runs,
            started_at,
            duration: Duration::ZERO,
            interrupted: false,
            counts: RunCounts::default(),
            latency: new_histogram(),
            per_second: Vec::new(),
        }
    }

    /// Responses per second; 0.0 for a zero duration.
    pub fn requests_per_sec(&self) -> f64 {
        per_sec(self.counts.requests, self.duration)
    }

    /// Whether a run of it spoke TLS: its errors have a kind of their own, `tls`.
    pub fn speaks_tls(&self) -> bool {
        self.runs.iter().any(RunInfo::speaks_tls)
    }

    /// Bytes read per second; 0.0 for a zero duration.
    pub fn bytes_per_sec(&self) -> f64 {
        per_sec(self.counts.bytes_read, self.duration)
    }
}

/// `count` per second of `duration`, 0.0 rather than NaN or infinity for no time.
fn per_sec(count: u64, duration: Duration) -> f64 {
    let secs = duration.as_secs_f64();
    if secs > 0.0 {
        count as f64 / secs
    } else {
        0.0
    }
}

/// The latency statistics every report gives; all zero for an empty histogram (where
/// hdrhistogram's `max` is undefined).
pub struct LatencySummary {
    pub min: u64,
    pub mean: f64,
    pub stdev: f64,
    pub max: u64,
    pub percentiles: [u64; PERCENTILES.len()],
}

impl LatencySummary {
    pub fn of(latency: &Histogram<u64>) -> LatencySummary {
        if latency.is_empty() {
            return LatencySummary {
                min: 0,
                mean: 0.0,
                stdev: 0.0,
                max: 0,
                percentiles: [0; PERCENTILES.len()],
            };
        }
        LatencySummary {
            min: latency.min(),
            mean: latency.mean(),
            stdev: latency.stdev(),
            max: latency.max(),
            percentiles: PERCENTILES.map(|(_, quantile)| latency.value_at_quantile(quantile)),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn counts_add_up_and_status_codes_stay_apart() {
        let mut first = RunCounts { requests: 3, bytes_read: 1000, ..RunCounts::default() };
        first.errors = Errors { connect: 1, read: 2, write: 3, timeout: 4, parse: 5, tls: 6 };
        first.status.add(200, 2);
        first.status.add(302, 1);
        let mut second = RunCounts { requests: 2, bytes_read: 24, ..RunCounts::default() };
        second.errors = Errors { connect: 10, read: 20, write: 30, timeout: 40, parse: 50, tls: 60 };
        second.status.add(200, 1);
        second.status.add(503, 1);
        first.add(&second);
        assert_eq!((first.requests, first.bytes_read), (5, 1024));
        assert_eq!(
            first.errors,
            Errors { connect: 11, read: 22, write: 33, timeout: 44, parse: 55, tls: 66 }
        );
        assert_eq!(first.errors.total(), 231);
        assert_eq!(first.status.iter().collect::<Vec<_>>(), [(200, 3), (302, 1), (503, 1)]);
        assert_eq!(first.tls, None, "plain counts have no handshakes");
        // A TLS thread's handshakes are added in, to none or to some.
        second.tls = Some(Handshakes { done: 2, ..Handshakes::default() });
        first.add(&second);
        first.add(&second);
        assert_eq!(first.tls.map(|handshakes| handshakes.done), Some(4));
    }

    #[test]
    fn redirects_are_not_failures_but_client_and_server_errors_are() {
        let mut status = StatusCounts::default();
        for code in [100, 101, 200, 204, 301, 304, 399, 400, 404, 500, 503, 999] {
            status.add(code, 1);
        }
        // 101, 400, 404, 500, 503, 999; the interim 100 is never counted by the load,
        // but were it, it would be no answer either.
        assert_eq!(status.failed(), 7);
        status.add(99, 1);
        status.add(1000, 1);
        assert_eq!(status.iter().count(), 12, "codes outside 100-999 are not counted");
    }

    #[test]
    fn an_empty_report_has_no_rate_and_no_latency() {
        let report = Report::new(Vec::new(), SystemTime::UNIX_EPOCH);
        assert_eq!((report.requests_per_sec(), report.bytes_per_sec()), (0.0, 0.0));
        let summary = LatencySummary::of(&report.latency);
        assert_eq!((summary.min, summary.max, summary.percentiles), (0, 0, [0; PERCENTILES.len()]));
    }
}
