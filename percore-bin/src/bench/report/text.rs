//! The human report: wrk's header line, ab's summary, status codes by code, and wrk's
//! percentiles, latencies in µs, ms or s; over TLS, the handshakes. Bytes are in SI
//! units (1 kB = 1000 B), and the report says so.

use std::fmt;

use super::figures::{LatencySummary, Report, PERCENTILES};
use super::handshakes::{Handshakes, HANDSHAKE_PERCENTILES};
use super::run_info::Seconds;

/// Width of the labels, so that the values line up.
const LABEL_WIDTH: usize = 17;

impl fmt::Display for Report {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let width = LABEL_WIDTH;
        match &self.runs[..] {
            [run] => writeln!(f, "{run}")?,
            runs => {
                writeln!(f, "{} runs merged:", runs.len())?;
                for run in runs {
                    writeln!(f, "  {run}")?;
                }
            }
        }
        if self.interrupted {
            let after = Seconds(self.duration);
            writeln!(f, "{:width$}by Ctrl-C after {after}: the counts are of that time", "interrupted:")?;
        }
        let (counts, errors) = (&self.counts, &self.counts.errors);
        let (secs, bytes) = (self.duration.as_secs_f64(), Bytes(counts.bytes_read as f64));
        writeln!(f, "{:width$}{} in {secs:.2} s, {bytes} read", "requests:", counts.requests)?;
        writeln!(f, "{:width$}{:.2}", "requests/s:", self.requests_per_sec())?;
        writeln!(f, "{:width$}{}", "transfer/s:", Bytes(self.bytes_per_sec()))?;
        writeln!(f, "{:width$}{}", "status codes:", listed(counts.status.iter()))?;
        writeln!(f, "{:width$}{}", "non-2xx/3xx:", counts.status.failed())?;
        write!(
            f,
            "{:width$}{} (connect {}, read {}, write {}, timeout {}, parse {}",
            "errors:",
            errors.total(),
            errors.connect,
            errors.read,
            errors.write,
            errors.timeout,
            errors.parse
        )?;
        // The kind of its own only a TLS run can have: a plain run's line stays as it was.
        if self.speaks_tls() {
            write!(f, ", tls {}", errors.tls)?;
        }
        writeln!(f, ")")?;
        let latency = LatencySummary::of(&self.latency);
        writeln!(
            f,
            "{:width$}min {}, mean {}, stdev {}, max {}",
            "latency:",
            Micros(latency.min as f64),
            Micros(latency.mean),
            Micros(latency.stdev),
            Micros(latency.max as f64)
        )?;
        writeln!(f, "percentiles:")?;
        for ((label, _), value) in PERCENTILES.iter().zip(latency.percentiles) {
            writeln!(f, "{label:>5}%{:>10}", Micros(value as f64).to_string())?;
        }
        if let Some(handshakes) = &counts.tls {
            write!(f, "{handshakes}")?;
        }
        writeln!(f, "{:width$}1 kB = 1000 B, 1 MB = 1000 kB, 1 GB = 1000 MB", "units:")
    }
}

/// A TLS run's lines: the versions and cipher suites the handshakes agreed on, how
/// many there were and resumed, and how long they took.
impl fmt::Display for Handshakes {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let width = LABEL_WIDTH;
        writeln!(f, "{:width$}{}", "tls versions:", listed(self.versions.iter().map(|(v, n)| (v, *n))))?;
        writeln!(f, "{:width$}{}", "cipher suites:", listed(self.suites.iter().map(|(s, n)| (s, *n))))?;
        writeln!(f, "{:width$}{} ({} resumed)", "handshakes:", self.done, self.resumed)?;
        write!(f, "{:width$}", "handshake time:")?;
        let Some((percentiles, max)) = self.summary() else { return writeln!(f, "none") };
        for ((label, _), value) in HANDSHAKE_PERCENTILES.iter().zip(percentiles) {
            write!(f, "p{label} {}, ", Micros(value as f64))?;
        }
        writeln!(f, "max {}", Micros(max as f64))
    }
}

/// `200 99990, 503 10`: each name with its count, or `none`.
fn listed<T: fmt::Display>(counts: impl Iterator<Item = (T, u64)>) -> String {
    let listed: Vec<String> = counts.map(|(name, n)| format!("{name} {n}")).collect();
    if listed.is_empty() {
        "none".to_string()
    } else {
        listed.join(", ")
    }
}

/// A latency given in microseconds, in the unit that suits it: `87µs`, `98.5µs`,
/// `1.25ms`, `2.00s`.
pub struct Micros(pub f64);

impl fmt::Display for Micros {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let micros = self.0;
        // Compared after rounding, so 999_999 µs prints as 1.00s, not 1000.00ms.
        if micros < 999.95 {
            if micros.fract() == 0.0 {
                write!(f, "{micros:.0}µs")
            } else {
                write!(f, "{micros:.1}µs")
            }
        } else if micros < 999_995.0 {
            write!(f, "{:.2}ms", micros / 1e3)
        } else {
            write!(f, "{:.2}s", micros / 1e6)
        }
    }
}

/// A byte count in SI units: `512 B`, `13.75 MB`.
pub struct Bytes(pub f64);

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
    use std::time::{Duration, SystemTime};

    use super::super::{Handshake, Mode, RunInfo, Stop};
    use super::*;

    fn run() -> RunInfo {
        RunInfo {
            url: "http://127.0.0.1:8080/".into(),
            method: "GET".into(),
            mode: Mode::KeepAlive,
            rate: None,
            threads: 1,
            connections: 10,
            stop: Stop::After(Duration::from_secs(10)),
            timeout: Duration::from_secs(10),
        }
    }

    fn report_with(requests: u64, latencies: impl IntoIterator<Item = u64>) -> Report {
        let mut report = Report::new(vec![run()], SystemTime::UNIX_EPOCH);
        report.counts.requests = requests;
        for micros in latencies {
            report.latency.saturating_record(micros);
        }
        report
    }

    #[test]
    fn text_has_the_header_the_summary_the_codes_and_every_percentile() {
        let mut report = report_with(100_000, (1..=1000).map(|i| i * 2));
        report.counts.bytes_read = 13_750_000;
        report.counts.status.add(200, 99_990);
        report.counts.status.add(301, 3);
        report.counts.status.add(503, 7);
        report.counts.errors.timeout = 2;
        report.counts.errors.read = 1;
        report.duration = Duration::from_secs(10);
        let text = report.to_string();
        let expected_lines = [
            "GET http://127.0.0.1:8080/: 10s, 1 thread, 10 connections, keep-alive",
            "requests:        100000 in 10.00 s, 13.75 MB read",
            "requests/s:      10000.00",
            "transfer/s:      1.38 MB",
            "status codes:    200 99990, 301 3, 503 7",
            "non-2xx/3xx:     7",
            "errors:          3 (connect 0, read 1, write 0, timeout 2, parse 0)",
            "latency:         min 2µs, mean 1.00ms, stdev 577.3µs, max 2.00ms",
            "percentiles:",
            "   50%    1.00ms",
            "   66%    1.32ms",
            "   75%    1.50ms",
            "   80%    1.60ms",
            "   90%    1.80ms",
            "   95%    1.90ms",
            "   98%    1.96ms",
            "   99%    1.98ms",
            " 99.9%    2.00ms",
            "  100%    2.00ms",
            "units:           1 kB = 1000 B, 1 MB = 1000 kB, 1 GB = 1000 MB",
        ];
        assert_eq!(text.lines().collect::<Vec<_>>(), expected_lines, "\n{text}");
    }

    #[test]
    fn a_tls_run_adds_its_kind_of_error_and_its_handshakes_and_a_plain_one_neither() {
        let mut report = report_with(3, [1000]);
        let plain = report.to_string();
        assert!(
            plain.contains("\nerrors:          0 (connect 0, read 0, write 0, timeout 0, parse 0)\n"),
            "{plain}"
        );
        report.runs[0].url = "https://127.0.0.1:8443/".into();
        report.counts.errors.tls = 2;
        let mut handshakes = Handshakes::default();
        for (version, suite, resumed, millis) in [
            ("TLSv1.3", "TLS13_AES_128_GCM_SHA256", false, 1),
            ("TLSv1.3", "TLS13_AES_128_GCM_SHA256", true, 2),
            ("TLSv1.2", "TLS_ECDHE_ECDSA_WITH_AES_128_GCM_SHA256", false, 3),
        ] {
            handshakes.record(&Handshake { version, suite, resumed, took: Duration::from_millis(millis) });
        }
        report.counts.tls = Some(handshakes);
        let text = report.to_string();
        assert!(
            text.contains("\nerrors:          2 (connect 0, read 0, write 0, timeout 0, parse 0, tls 2)\n"),
            "{text}"
        );
        let lines: Vec<&str> = text.lines().collect();
        let expected_tail = [
            "tls versions:    TLSv1.2 1, TLSv1.3 2",
            "cipher suites:   TLS13_AES_128_GCM_SHA256 2, TLS_ECDHE_ECDSA_WITH_AES_128_GCM_SHA256 1",
            "handshakes:      3 (1 resumed)",
            "handshake time:  p50 2.00ms, p99 3.00ms, max 3.00ms",
            "units:           1 kB = 1000 B, 1 MB = 1000 kB, 1 GB = 1000 MB",
        ];
        assert_eq!(lines[lines.len() - expected_tail.len()..], expected_tail, "\n{text}");
        report.counts.tls = Some(Handshakes::default());
        assert!(report.to_string().contains("\nhandshakes:      0 (0 resumed)\nhandshake time:  none\n"));
    }

    #[test]
    fn an_interrupted_run_says_so_and_an_empty_one_has_no_nan() {
        let mut report = report_with(0, []);
        report.interrupted = true;
        report.duration = Duration::from_millis(3210);
        let text = report.to_string();
        assert!(
            text.contains("\ninterrupted:     by Ctrl-C after 3.21s: the counts are of that time\n"),
            "{text}"
        );
        assert!(text.contains("\nstatus codes:    none\n"), "{text}");
        assert!(text.contains("\nlatency:         min 0µs, mean 0µs, stdev 0µs, max 0µs\n"), "{text}");
        assert!(!text.contains("NaN") && !text.contains("inf"), "{text}");
    }

    #[test]
    fn merged_runs_are_each_listed() {
        let mut report = report_with(0, []);
        report.runs.push(run());
        let text = report.to_string();
        assert!(text.starts_with("2 runs merged:\n  GET http://127.0.0.1:8080/: 10s"), "{text}");
    }

    #[test]
    fn latencies_pick_a_unit() {
        let cases = [
            (0.0, "0µs"),
            (87.0, "87µs"),
            (98.54, "98.5µs"),
            (999.94, "999.9µs"),
            (999.95, "1.00ms"),
            (999.96, "1.00ms"),
            (1250.0, "1.25ms"),
            (999_994.0, "999.99ms"),
            (999_995.0, "1.00s"),
            (999_999.0, "1.00s"),
            (2_000_000.0, "2.00s"),
            (60_000_000.0, "60.00s"),
        ];
        for (micros, text) in cases {
            assert_eq!(Micros(micros).to_string(), text, "{micros}");
        }
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
