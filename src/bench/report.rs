//! What a benchmark run measured, and how it is printed: counts, errors by kind, and a
//! latency histogram per thread, merged at the end into one [`Report`] printed as text
//! (ab's summary with wrk's percentiles) or as one JSON object.
//!
//! Latencies are kept in microseconds in an HDR histogram of 3 significant digits, as
//! wrk does: a percentile is within 0.1% of the true value, whatever its magnitude.
//! Bytes are printed in SI units (1 kB = 1000 B), and the text report says so.

use std::fmt;
use std::time::Duration;

use hdrhistogram::Histogram;

/// The highest latency the histogram tells apart: 60 s, in µs. Slower responses are
/// counted as 60 s rather than widening every thread's histogram (and the merge).
const MAX_LATENCY_US: u64 = 60_000_000;

/// The percentiles reported, as (label, quantile): ab's list, with wrk's 99.9.
const PERCENTILES: [(&str, f64); 10] = [
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

/// Width of the labels of the text report, so that the values line up.
const LABEL_WIDTH: usize = 17;

/// Error counts by kind.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Errors {
    /// Connections that could not be opened.
    pub connect: u64,
    /// Reads that failed, or a connection closed before a response was complete.
    pub read: u64,
    /// Writes that failed.
    pub write: u64,
    /// Responses that did not arrive in time.
    pub timeout: u64,
    /// Responses that could not be parsed.
    pub parse: u64,
}

impl Errors {
    /// The sum of all kinds.
    pub fn total(&self) -> u64 {
        [self.connect, self.read, self.write, self.timeout, self.parse]
            .into_iter()
            .fold(0, u64::saturating_add)
    }

    fn add(&mut self, other: &Errors) {
        self.connect = self.connect.saturating_add(other.connect);
        self.read = self.read.saturating_add(other.read);
        self.write = self.write.saturating_add(other.write);
        self.timeout = self.timeout.saturating_add(other.timeout);
        self.parse = self.parse.saturating_add(other.parse);
    }
}

/// One thread's (or the merged) measurements.
#[derive(Clone, Debug)]
pub struct Report {
    /// Responses received in full.
    pub requests: u64,
    /// Of those, responses whose status is not 2xx.
    pub non_2xx: u64,
    /// Bytes read from the server, heads and bodies.
    pub bytes_read: u64,
    /// Errors by kind.
    pub errors: Errors,
    /// Response latencies in microseconds, 1 µs to 60 s, 3 significant digits.
    pub latency: Histogram<u64>,
    /// How long the run took.
    pub duration: Duration,
}

impl Default for Report {
    fn default() -> Report {
        Report::new()
    }
}

impl Report {
    /// An empty report.
    pub fn new() -> Report {
        Report {
            requests: 0,
            non_2xx: 0,
            bytes_read: 0,
            errors: Errors::default(),
            // Only invalid bounds or precision make this fail, and these are constants.
            latency: Histogram::new_with_bounds(1, MAX_LATENCY_US, 3).expect("valid histogram bounds"),
            duration: Duration::ZERO,
        }
    }

    /// Records one response's latency; above 60 s it counts as 60 s.
    pub fn record_latency(&mut self, micros: u64) {
        self.latency.saturating_record(micros);
    }

    /// Adds `other`'s counts and latencies to this one; the duration is the longer of
    /// the two, since threads run at the same time.
    pub fn merge(&mut self, other: &Report) {
        self.requests = self.requests.saturating_add(other.requests);
        self.non_2xx = self.non_2xx.saturating_add(other.non_2xx);
        self.bytes_read = self.bytes_read.saturating_add(other.bytes_read);
        self.errors.add(&other.errors);
        if self.latency.add(&other.latency).is_err() {
            // `other.latency` was replaced by one of a wider range: clamp into ours.
            for value in other.latency.iter_recorded() {
                self.latency.saturating_record_n(value.value_iterated_to(), value.count_at_value());
            }
        }
        self.duration = self.duration.max(other.duration);
    }

    /// Responses per second; 0.0 for a zero duration.
    pub fn requests_per_sec(&self) -> f64 {
        per_sec(self.requests, self.duration)
    }

    /// Bytes read per second; 0.0 for a zero duration.
    pub fn bytes_per_sec(&self) -> f64 {
        per_sec(self.bytes_read, self.duration)
    }

    /// The human report: ab's summary, then wrk's latency percentiles. The same as
    /// `to_string()`.
    pub fn to_text(&self) -> String {
        self.to_string()
    }

    /// One JSON object with every field of the text report, numbers unformatted.
    pub fn to_json(&self) -> serde_json::Value {
        let latency = LatencySummary::of(&self.latency);
        let percentiles: serde_json::Map<String, serde_json::Value> = PERCENTILES
            .iter()
            .zip(latency.percentiles)
            .map(|((label, _), value)| (label.to_string(), value.into()))
            .collect();
        let errors = &self.errors;
        serde_json::json!({
            "requests": self.requests,
            "duration_s": self.duration.as_secs_f64(),
            "requests_per_sec": self.requests_per_sec(),
            "bytes_read": self.bytes_read,
            "bytes_per_sec": self.bytes_per_sec(),
            "non_2xx": self.non_2xx,
            "errors": {
                "connect": errors.connect,
                "read": errors.read,
                "write": errors.write,
                "timeout": errors.timeout,
                "parse": errors.parse,
                "total": errors.total(),
            },
            "latency_us": {
                "min": latency.min,
                "mean": latency.mean,
                "stdev": latency.stdev,
                "max": latency.max,
                "percentiles": percentiles,
            },
        })
    }
}

impl fmt::Display for Report {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let width = LABEL_WIDTH;
        let (secs, bytes, errors) =
            (self.duration.as_secs_f64(), Bytes(self.bytes_read as f64), &self.errors);
        writeln!(f, "{:width$}{} in {secs:.2} s, {bytes} read", "requests:", self.requests)?;
        writeln!(f, "{:width$}{:.2}", "requests/s:", self.requests_per_sec())?;
        writeln!(f, "{:width$}{}", "transfer/s:", Bytes(self.bytes_per_sec()))?;
        writeln!(f, "{:width$}{}", "non-2xx:", self.non_2xx)?;
        writeln!(
            f,
            "{:width$}{} (connect {}, read {}, write {}, timeout {}, parse {})",
            "errors:",
            errors.total(),
            errors.connect,
            errors.read,
            errors.write,
            errors.timeout,
            errors.parse
        )?;
        let latency = LatencySummary::of(&self.latency);
        writeln!(
            f,
            "{:width$}min {}, mean {:.1}, stdev {:.1}, max {}",
            "latency (µs):", latency.min, latency.mean, latency.stdev, latency.max
        )?;
        writeln!(f, "percentiles (µs):")?;
        for ((label, _), value) in PERCENTILES.iter().zip(latency.percentiles) {
            writeln!(f, "{label:>5}%{value:>8}")?;
        }
        writeln!(f, "{:width$}1 kB = 1000 B, 1 MB = 1000 kB, 1 GB = 1000 MB", "units:")
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

/// The latency statistics both reports print; all zero for an empty histogram (where
/// hdrhistogram's `max` is undefined).
struct LatencySummary {
    min: u64,
    mean: f64,
    stdev: f64,
    max: u64,
    percentiles: [u64; PERCENTILES.len()],
}

impl LatencySummary {
    fn of(latency: &Histogram<u64>) -> LatencySummary {
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

/// A byte count in SI units: `512 B`, `13.75 MB`.
struct Bytes(f64);

impl fmt::Display for Bytes {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        const UNITS: [&str; 4] = ["kB", "MB", "GB", "TB"];
        if self.0 < 1000.0 {
            return write!(f, "{} B", self.0.round());
        }
        let mut value = self.0 / 1000.0;
        let mut unit = 0;
        // Compared after rounding, so 999_999 B prints as 1.00 MB, not 1000.00 kB.
        while value >= 999.995 && unit + 1 < UNITS.len() {
            value /= 1000.0;
            unit += 1;
        }
        write!(f, "{value:.2} {}", UNITS[unit])
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn report_with(requests: u64, latencies: impl IntoIterator<Item = u64>) -> Report {
        let mut report = Report::new();
        report.requests = requests;
        for micros in latencies {
            report.record_latency(micros);
        }
        report
    }

    #[test]
    fn merge_adds_counts_and_histograms_and_keeps_the_longest_duration() {
        let mut first = report_with(3, [100, 200, 300]);
        first.non_2xx = 1;
        first.bytes_read = 1000;
        first.errors = Errors { connect: 1, read: 2, write: 3, timeout: 4, parse: 5 };
        first.duration = Duration::from_secs(10);
        let mut second = report_with(2, [400, 500]);
        second.non_2xx = 2;
        second.bytes_read = 24;
        second.errors = Errors { connect: 10, read: 20, write: 30, timeout: 40, parse: 50 };
        second.duration = Duration::from_secs(9);

        first.merge(&second);
        assert_eq!((first.requests, first.non_2xx, first.bytes_read), (5, 3, 1024));
        assert_eq!(first.errors, Errors { connect: 11, read: 22, write: 33, timeout: 44, parse: 55 });
        assert_eq!(first.errors.total(), 165);
        assert_eq!(first.duration, Duration::from_secs(10));
        assert_eq!((first.latency.len(), first.latency.min(), first.latency.max()), (5, 100, 500));
    }

    #[test]
    fn merge_into_an_empty_report_copies_it() {
        let mut merged = Report::default();
        merged.merge(&report_with(1, [42]));
        assert_eq!((merged.requests, merged.latency.len(), merged.latency.max()), (1, 1, 42));
    }

    #[test]
    fn merge_of_a_wider_histogram_clamps_instead_of_failing() {
        let mut merged = report_with(0, [10]);
        let mut wide = Report::new();
        wide.latency = Histogram::new_with_bounds(1, 3_600_000_000, 3).expect("valid bounds");
        wide.latency.saturating_record(120_000_000);
        merged.merge(&wide);
        assert_eq!(merged.latency.len(), 2);
        assert!(merged.latency.max() >= MAX_LATENCY_US && merged.latency.max() < 61_000_000);
    }

    #[test]
    fn latencies_beyond_the_range_saturate() {
        let report = report_with(0, [0, u64::MAX]);
        assert_eq!(report.latency.len(), 2);
        assert_eq!(report.latency.min(), 0);
        assert!(report.latency.max() < 61_000_000);
    }

    #[test]
    fn known_latencies_give_their_percentiles() {
        // 1..=1000 µs once each: the p-th percentile is 10 * p µs. Below 2048 the
        // histogram is exact at 3 significant digits.
        let json = report_with(1000, 1..=1000).to_json();
        let expected = [
            ("50", 500),
            ("66", 660),
            ("75", 750),
            ("80", 800),
            ("90", 900),
            ("95", 950),
            ("98", 980),
            ("99", 990),
            ("99.9", 999),
            ("100", 1000),
        ];
        for (label, micros) in expected {
            assert_eq!(json["latency_us"]["percentiles"][label], micros, "p{label}");
        }
        assert_eq!(json["latency_us"]["min"], 1);
        assert_eq!(json["latency_us"]["max"], 1000);
        assert_eq!(json["latency_us"]["mean"], 500.5);
        let stdev = json["latency_us"]["stdev"].as_f64().unwrap_or(0.0);
        assert!((stdev - 288.675).abs() < 0.01, "stdev {stdev}");
    }

    #[test]
    fn large_latencies_are_within_histogram_precision() {
        // 3 significant digits: within 0.1%.
        let report = report_with(1, [12_345_678]);
        let p50 = report.latency.value_at_quantile(0.5) as f64;
        assert!((p50 - 12_345_678.0).abs() / 12_345_678.0 < 0.001, "{p50}");
    }

    #[test]
    fn json_has_every_field() {
        let mut report = report_with(100_000, [45, 98, 4021]);
        report.bytes_read = 13_750_000;
        report.duration = Duration::from_secs(10);
        let json = report.to_json();
        assert_eq!(json["requests"], 100_000);
        assert_eq!(json["duration_s"], 10.0);
        assert_eq!(json["requests_per_sec"], 10_000.0);
        assert_eq!(json["bytes_read"], 13_750_000);
        assert_eq!(json["bytes_per_sec"], 1_375_000.0);
        assert_eq!(json["non_2xx"], 0);
        for kind in ["connect", "read", "write", "timeout", "parse", "total"] {
            assert_eq!(json["errors"][kind], 0, "errors.{kind}");
        }
        for field in ["min", "mean", "stdev", "max"] {
            assert!(json["latency_us"][field].is_number(), "latency_us.{field}");
        }
        let percentiles = json["latency_us"]["percentiles"].as_object().map(|p| p.len());
        assert_eq!(percentiles, Some(PERCENTILES.len()));
        let top = json.as_object().map(|o| o.keys().cloned().collect::<Vec<_>>()).unwrap_or_default();
        let expected_top = [
            "bytes_per_sec",
            "bytes_read",
            "duration_s",
            "errors",
            "latency_us",
            "non_2xx",
            "requests",
            "requests_per_sec",
        ];
        assert_eq!(top, expected_top);
    }

    #[test]
    fn an_empty_report_is_all_zeros_not_nan() {
        let json = Report::new().to_json();
        assert_eq!(json["requests_per_sec"], 0.0);
        assert_eq!(json["bytes_per_sec"], 0.0);
        for field in ["min", "mean", "stdev", "max"] {
            assert_eq!(json["latency_us"][field].as_f64(), Some(0.0), "latency_us.{field}");
        }
        assert_eq!(json["latency_us"]["percentiles"]["99.9"], 0);
        let text = Report::new().to_text();
        assert!(!text.contains("NaN") && !text.contains("inf"), "{text}");
        assert!(text.contains("latency (µs):    min 0, mean 0.0, stdev 0.0, max 0\n"), "{text}");
    }

    #[test]
    fn text_has_the_summary_and_every_percentile_line() {
        let mut report = report_with(100_000, (1..=1000).map(|i| i * 2));
        report.bytes_read = 13_750_000;
        report.non_2xx = 7;
        report.errors.timeout = 2;
        report.errors.read = 1;
        report.duration = Duration::from_secs(10);
        let text = report.to_text();
        let expected_lines = [
            "requests:        100000 in 10.00 s, 13.75 MB read",
            "requests/s:      10000.00",
            "transfer/s:      1.38 MB",
            "non-2xx:         7",
            "errors:          3 (connect 0, read 1, write 0, timeout 2, parse 0)",
            "latency (µs):    min 2, mean 1001.0, stdev 577.3, max 2000",
            "percentiles (µs):",
            "   50%    1000",
            "   66%    1320",
            "   75%    1500",
            "   80%    1600",
            "   90%    1800",
            "   95%    1900",
            "   98%    1960",
            "   99%    1980",
            " 99.9%    1998",
            "  100%    2000",
            "units:           1 kB = 1000 B, 1 MB = 1000 kB, 1 GB = 1000 MB",
        ];
        assert_eq!(text.lines().collect::<Vec<_>>(), expected_lines, "\n{text}");
    }

    #[test]
    fn bytes_pick_a_unit() {
        let cases = [
            (0.0, "0 B"),
            (999.0, "999 B"),
            (1000.0, "1.00 kB"),
            (13_750_000.0, "13.75 MB"),
            (999_999.0, "1.00 MB"),
            (2.5e9, "2.50 GB"),
            (7e15, "7000.00 TB"),
        ];
        for (bytes, text) in cases {
            assert_eq!(Bytes(bytes).to_string(), text);
        }
    }
}
