//! The latencies as an HdrHistogram interval log (`--hdr-log`), the format of the
//! Java reference's `HistogramLogWriter`: a header, then one line per second of the
//! run, `start,length,max,histogram` (seconds from the run's start; the histogram V2,
//! deflated, base64), so that HdrHistogram's own tools (`HistogramLogProcessor`, the
//! log analyser) read it. Values are microseconds.
//!
//! The run's counts, which no histogram holds (errors by kind, status codes, bytes),
//! follow the last interval as one comment, `#percore-bench-report {JSON}`: the JSON
//! report on one line. Those tools skip comments; `percore bench merge` reads both.

use std::fs::File;
use std::io::{BufWriter, Read, Write};
use std::path::Path;
use std::time::{Duration, SystemTime};

use base64::Engine as _;
use flate2::read::ZlibDecoder;
use hdrhistogram::serialization::interval_log::{IntervalLogIterator, IntervalLogWriterBuilder, LogEntry};
use hdrhistogram::serialization::{Deserializer, V2DeflateSerializer};
use hdrhistogram::Histogram;

use super::figures::Report;
use super::histogram::{add_histogram, new_histogram};
use super::json::{self, Logged};

/// What starts the comment that holds the run's JSON report.
const REPORT_COMMENT: &str = "percore-bench-report ";

/// The first four bytes of a histogram in HdrHistogram's V2 encoding, and of one
/// deflated: `V2DeflateSerializer` writes the latter, `Deserializer` reads both.
const V2_COOKIE: u32 = 0x1c84_9313;
const V2_DEFLATED_COOKIE: u32 = 0x1c84_9314;

/// A V2 histogram's header: cookie, the counts' length in bytes, offset, digits,
/// lowest, highest and a ratio (4 + 4 + 4 + 4 + 8 + 8 + 8 bytes); its counts follow.
const V2_HEADER: usize = 40;

/// The most bytes a V2 histogram takes: the widest HdrHistogram makes (1 to
/// `u64::MAX` at 5 significant digits, its most) has 6,291,456 counts, each encoded
/// in at most 9 bytes (LEB128-64b9B). Reading that one takes 48 MiB of counts.
const V2_MAX: usize = V2_HEADER + 9 * 6_291_456;

/// An interval log being written, one interval at a time, as the run goes.
pub struct LogWriter {
    file: BufWriter<File>,
    serializer: V2DeflateSerializer,
}

impl LogWriter {
    /// Creates (or truncates) the log at `path`: before the run, so that a path that
    /// cannot be written fails it before any load is sent.
    pub fn create(path: &Path) -> Result<LogWriter, String> {
        let file =
            File::create(path).map_err(|e| format!("cannot write --hdr-log {}: {e}", path.display()))?;
        Ok(LogWriter { file: BufWriter::new(file), serializer: V2DeflateSerializer::new() })
    }

    /// Writes the header, once the run's start is known: its intervals are timed
    /// from `started_at` (the log's BaseTime, and its StartTime).
    pub fn begin(&mut self, started_at: SystemTime) -> Result<(), String> {
        IntervalLogWriterBuilder::new()
            .add_comment("[Histogram log format version 1.3]")
            .add_comment("[percore bench: latencies in microseconds, one histogram a second]")
            .with_start_time(started_at)
            .with_base_time(started_at)
            .begin_log_with(&mut self.file, &mut self.serializer)
            .map(drop)
            .map_err(|e| format!("cannot write the interval log: {e}"))
    }

    /// Appends the histogram of the interval `offset` to `offset + length` from the
    /// start.
    pub fn interval(
        &mut self,
        offset: Duration,
        length: Duration,
        latency: &Histogram<u64>,
    ) -> Result<(), String> {
        // A log writer borrows the file and the serializer, so it cannot live beside
        // them; one made from an empty builder writes no header, only what it is given.
        let mut writer = IntervalLogWriterBuilder::new()
            .begin_log_with(&mut self.file, &mut self.serializer)
            .map_err(|e| format!("cannot write the interval log: {e}"))?;
        writer
            .write_histogram(latency, offset, length, None)
            .map_err(|e| format!("cannot write the interval log: {e}"))
    }

    /// Ends the log with the run's report, and flushes it.
    pub fn finish(mut self, report: &Report) -> Result<(), String> {
        let line = serde_json::to_string(&json::to_json(report)).map_err(|e| e.to_string())?;
        writeln!(self.file, "#{REPORT_COMMENT}{line}")
            .and_then(|()| self.file.flush())
            .map_err(|e| format!("cannot write the interval log: {e}"))
    }
}

/// One interval read back from a log.
#[derive(Debug)]
pub struct Interval {
    /// When it started.
    pub start: SystemTime,
    pub latency: Histogram<u64>,
}

/// A log read back: the run's counts and each second's latencies.
#[derive(Debug)]
pub struct LoggedRun {
    pub logged: Logged,
    pub intervals: Vec<Interval>,
}

/// Reads the interval log at `path`, which `--hdr-log` wrote.
pub fn read(path: &Path) -> Result<LoggedRun, String> {
    let name = path.display();
    let bytes = std::fs::read(path).map_err(|e| format!("cannot read {name}: {e}"))?;
    let text = String::from_utf8_lossy(&bytes);
    let report = text
        .lines()
        .filter_map(|line| line.strip_prefix('#')?.strip_prefix(REPORT_COMMENT))
        .next_back()
        .ok_or_else(|| {
            format!("{name}: no percore bench report in it (was the run killed before its end?)")
        })?;
    let report = serde_json::from_str(report).ok().and_then(|value| Logged::from_json(&value));
    let logged = report.ok_or_else(|| format!("{name}: its percore bench report cannot be read"))?;
    let intervals = read_intervals(&bytes).map_err(|e| format!("{name}: {e}"))?;
    let logged_requests: u64 = intervals.iter().map(|i| i.latency.len()).sum();
    if logged_requests != logged.counts.requests {
        return Err(format!(
            "{name}: its histograms hold {logged_requests} responses, its report {}: the log is damaged",
            logged.counts.requests
        ));
    }
    // A run logs one interval a second, the last one partly, so its report's
    // duration, measured a moment after the one that sized its intervals
    // (`run.rs`), is less than a second past them.
    if logged.duration.as_secs() > intervals.len() as u64 {
        return Err(format!(
            "{name}: its report says the run took {:.3} s, its intervals cover {} s: the log is damaged",
            logged.duration.as_secs_f64(),
            intervals.len()
        ));
    }
    Ok(LoggedRun { logged, intervals })
}

/// The intervals of a log, with HdrHistogram's own reader: timed from the BaseTime,
/// or (without one) from the Unix epoch, as the format says.
fn read_intervals(log: &[u8]) -> Result<Vec<Interval>, String> {
    let mut base = SystemTime::UNIX_EPOCH;
    let mut deserializer = Deserializer::new();
    let mut intervals = Vec::new();
    for entry in IntervalLogIterator::new(log) {
        match entry.map_err(|e| format!("not an interval log ({e:?})"))? {
            LogEntry::BaseTime(since_epoch) => base = SystemTime::UNIX_EPOCH + since_epoch,
            LogEntry::StartTime(_) => {}
            LogEntry::Interval(interval) => {
                let encoded = base64::engine::general_purpose::STANDARD
                    .decode(interval.encoded_histogram())
                    .map_err(|e| format!("a histogram is not base64: {e}"))?;
                let v2 = checked_v2(encoded).map_err(|e| format!("a histogram cannot be read: {e}"))?;
                let read: Histogram<u64> = deserializer
                    .deserialize(&mut &v2[..])
                    .map_err(|e| format!("a histogram cannot be read: {e:?}"))?;
                // Kept in percore's own bounds, whatever the log's (the merge adds
                // it into those): a second's memory is one of ours.
                let mut latency = new_histogram();
                add_histogram(&mut latency, &read);
                let start = base + interval.start_timestamp();
                intervals.push(Interval { start, latency });
            }
        }
    }
    Ok(intervals)
}

/// A logged histogram as V2, inflated if deflated, once its header's length of
/// counts is known to be there: HdrHistogram's deserializer sizes a buffer to the
/// length a header claims before it reads a byte of them.
fn checked_v2(encoded: Vec<u8>) -> Result<Vec<u8>, String> {
    let be_u32 = |bytes: &[u8], at: usize| Some(u32::from_be_bytes(bytes.get(at..at + 4)?.try_into().ok()?));
    let v2 = match be_u32(&encoded, 0) {
        Some(V2_COOKIE) => encoded,
        Some(V2_DEFLATED_COOKIE) => {
            let deflated = be_u32(&encoded, 4)
                .and_then(|length| encoded.get(8..)?.get(..usize::try_from(length).ok()?))
                .ok_or("its deflated length is past its end")?;
            let mut inflated = Vec::new();
            ZlibDecoder::new(deflated)
                .take(V2_MAX as u64 + 1)
                .read_to_end(&mut inflated)
                .map_err(|e| format!("it does not inflate: {e}"))?;
            if inflated.len() > V2_MAX {
                return Err(format!("it inflates past {V2_MAX} bytes, more than any histogram takes"));
            }
            inflated
        }
        _ => return Err("not an HdrHistogram V2 histogram".into()),
    };
    let (Some(V2_COOKIE), Some(counts), Some(there)) =
        (be_u32(&v2, 0), be_u32(&v2, 4), v2.len().checked_sub(V2_HEADER))
    else {
        return Err("no V2 histogram header in it".into());
    };
    if u64::from(counts) > there as u64 {
        return Err(format!("its header claims {counts} bytes of counts, {there} follow it"));
    }
    Ok(v2)
}

#[cfg(test)]
mod tests {
    use super::super::{new_histogram, Mode, RunInfo, Stop};
    use super::*;

    struct TempPath(std::path::PathBuf);

    impl Drop for TempPath {
        fn drop(&mut self) {
            let _ = std::fs::remove_file(&self.0);
        }
    }

    fn temp_path(name: &str) -> TempPath {
        TempPath(std::env::temp_dir().join(format!("percore-hdrlog-{}-{name}", std::process::id())))
    }

    #[test]
    fn a_log_reads_back_with_its_intervals_and_counts() {
        let started_at = SystemTime::UNIX_EPOCH + Duration::from_millis(1_748_779_200_500);
        let run = RunInfo {
            url: "http://127.0.0.1:8080/".into(),
            method: "GET".into(),
            mode: Mode::KeepAlive,
            rate: None,
            threads: 1,
            connections: 1,
            stop: Stop::After(Duration::from_millis(1500)),
            timeout: Duration::from_secs(10),
        };
        let mut report = Report::new(vec![run], started_at);
        let (mut first, mut second) = (new_histogram(), new_histogram());
        first.saturating_record_n(100, 3);
        second.saturating_record(1500);
        report.counts.requests = 4;
        report.counts.status.add(200, 4);
        report.duration = Duration::from_millis(1500);

        let path = temp_path("roundtrip");
        let mut log = LogWriter::create(&path.0).expect("created");
        log.begin(started_at).expect("header");
        log.interval(Duration::ZERO, Duration::from_secs(1), &first).expect("first");
        log.interval(Duration::from_secs(1), Duration::from_millis(500), &second).expect("second");
        log.finish(&report).expect("finished");

        let text = std::fs::read_to_string(&path.0).expect("written");
        assert!(text.starts_with("#[Histogram log format version 1.3]\n"), "{text}");
        assert!(text.contains("\n#[BaseTime: 1748779200.500 (seconds since epoch)]\n"), "{text}");
        assert!(text.contains("\n1.000,0.500,1500.000,HISTF"), "{text}");
        let run = read(&path.0).expect("reads back");
        assert_eq!(run.logged.counts, report.counts);
        let starts: Vec<_> = run.intervals.iter().map(|i| i.start).collect();
        assert_eq!(starts, [started_at, started_at + Duration::from_secs(1)]);
        assert_eq!((&run.intervals[0].latency, &run.intervals[1].latency), (&first, &second));
    }

    #[test]
    fn a_log_without_its_report_or_with_other_counts_is_refused() {
        let path = temp_path("damaged");
        std::fs::write(&path.0, "#[BaseTime: 0.000 (seconds since epoch)]\n").expect("written");
        assert!(read(&path.0).is_err_and(|e| e.contains("no percore bench report")));
        let mut log = LogWriter::create(&path.0).expect("created");
        log.begin(SystemTime::UNIX_EPOCH).expect("header");
        let mut report = Report::new(Vec::new(), SystemTime::UNIX_EPOCH);
        report.counts.requests = 1;
        log.finish(&report).expect("finished");
        assert!(read(&path.0).is_err_and(|e| e.contains("damaged")));
    }

    /// Issue 27, found by hand for the fuzz target `hdrlog` (its seed
    /// `histogram-claiming-4-gib`): a `--hdr-log` log whose one histogram's header
    /// claims 4 GiB of counts. HdrHistogram's deserializer sizes a buffer to that
    /// before reading them; the reader refuses it first, as the 47 inflated bytes do
    /// not hold them.
    #[test]
    fn a_histogram_claiming_a_4_gib_payload_is_refused_without_allocating_it() {
        let path = temp_path("payload");
        std::fs::write(&path.0, include_str!("../../../../fuzz/seeds/hdrlog/histogram-claiming-4-gib"))
            .expect("written");
        let error = read(&path.0).expect_err("refused");
        let refused =
            ": a histogram cannot be read: its header claims 4294967295 bytes of counts, 7 follow it";
        assert!(error.ends_with(refused), "{error}");
    }

    /// Issue 27 (the fuzz target's seed `run-claiming-a-billion-seconds`): a log whose
    /// report claims a run of a billion seconds, with one interval, is damaged; read
    /// as it was, the merge sized its plot to a billion seconds.
    #[test]
    fn a_report_of_more_seconds_than_its_intervals_cover_is_refused() {
        let path = temp_path("seconds");
        let log = include_str!("../../../../fuzz/seeds/hdrlog/run-claiming-a-billion-seconds");
        std::fs::write(&path.0, log).expect("written");
        let error = read(&path.0).expect_err("refused");
        let damaged =
            ": its report says the run took 1000000000.000 s, its intervals cover 1 s: the log is damaged";
        assert!(error.ends_with(damaged), "{error}");
        // Less than a second past its intervals, the report is of the run that wrote them.
        std::fs::write(&path.0, log.replace("\"duration_s\":1000000000.0", "\"duration_s\":1.999"))
            .expect("written");
        assert_eq!(read(&path.0).expect("read").intervals.len(), 1);
    }

    /// A histogram of the widest range and precision HdrHistogram makes (48 MiB of
    /// counts) is read, and kept as one of percore's own, whatever a log holds: the
    /// memory of a log's seconds is that of as many of ours. The widest's V2 encoding
    /// takes `V2_MAX` at most.
    #[test]
    fn a_histogram_of_any_bounds_is_kept_in_ours() {
        let mut wide = Histogram::<u64>::new_with_bounds(1, u64::MAX, 5).expect("the widest");
        assert_eq!(V2_MAX, V2_HEADER + 9 * wide.distinct_values());
        wide.record_n(150, 2).expect("recorded");
        wide.record(u64::MAX / 2).expect("recorded");
        let mut report = Report::new(Vec::new(), SystemTime::UNIX_EPOCH);
        report.counts.requests = 3;
        let path = temp_path("wide");
        let mut log = LogWriter::create(&path.0).expect("created");
        log.begin(SystemTime::UNIX_EPOCH).expect("header");
        log.interval(Duration::ZERO, Duration::from_secs(1), &wide).expect("interval");
        log.finish(&report).expect("finished");
        let latency = &read(&path.0).expect("read").intervals[0].latency;
        let ours = new_histogram();
        assert_eq!((latency.sigfig(), latency.high()), (ours.sigfig(), ours.high()));
        // What lies past our range is clamped to its top, as the merge adds it.
        assert_eq!(
            (latency.len(), latency.count_at(150), latency.max()),
            (3, 2, ours.highest_equivalent(ours.high()))
        );
    }
}
