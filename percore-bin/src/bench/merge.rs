//! `percore bench merge FILE...`: one report of runs taken at once on several
//! machines, from the interval logs their `--hdr-log` wrote. Counts are summed and
//! histograms added, so the percentiles are those of every response together, never
//! an average of percentiles; the duration runs from the first start to the last
//! end, and the seconds of the plot line up by wall clock. Runs not taken at once,
//! which span more seconds than they log together, are refused.

use std::path::PathBuf;
use std::time::{Duration, SystemTime};

use super::report::hdrlog::{self, LoggedRun};
use super::report::{add_histogram, Report};

/// Reads every log and merges them into one report.
pub fn merge(paths: &[PathBuf]) -> Result<Report, String> {
    let logs = paths.iter().map(|path| hdrlog::read(path)).collect::<Result<Vec<_>, _>>()?;
    merge_logs(&logs)
}

/// How many seconds more than their logs hold runs taken at once may span: one for
/// a run's report measured a moment past its last interval (`hdrlog::read` allows
/// that second), the rest for machines whose clocks or starts are a few seconds apart.
const SPAN_SLACK_S: u64 = 10;

fn merge_logs(logs: &[LoggedRun]) -> Result<Report, String> {
    let started_at = logs.iter().map(|log| log.logged.started_at).min().unwrap_or(SystemTime::UNIX_EPOCH);
    let end = |log: &LoggedRun| log.logged.started_at.checked_add(log.logged.duration);
    let ended_at = logs.iter().filter_map(end).max().unwrap_or(started_at);
    let runs = logs.iter().flat_map(|log| log.logged.runs.iter().cloned()).collect();
    let mut report = Report::new(runs, started_at);
    report.duration = ended_at.duration_since(started_at).unwrap_or_default();
    // Each run logs a second at a time, so runs that overlap span no more than the
    // seconds they log together; this also bounds the plot's seconds.
    let logged: u64 = logs.iter().map(|log| log.intervals.len() as u64).sum();
    if report.duration.as_secs() > logged + SPAN_SLACK_S {
        return Err(format!(
            "the runs were not taken at once: {:.3} s from the first start to the last end, {logged} s logged",
            report.duration.as_secs_f64()
        ));
    }
    for log in logs {
        report.interrupted |= log.logged.interrupted;
        report.counts.add(&log.logged.counts);
        for interval in &log.intervals {
            add_histogram(&mut report.latency, &interval.latency);
            // Each second of each run goes to the second of the merge it started in;
            // one past the runs' own span (a damaged log) is left out of the plot.
            let second = interval.start.duration_since(started_at).unwrap_or_default().as_secs();
            let Some(second) = usize::try_from(second).ok().filter(|&s| s < max_seconds(report.duration))
            else {
                continue;
            };
            if second >= report.per_second.len() {
                report.per_second.resize(second + 1, 0);
            }
            report.per_second[second] += interval.latency.len();
        }
    }
    Ok(report)
}

/// The seconds the merged runs span, and one more for rounding.
fn max_seconds(duration: Duration) -> usize {
    usize::try_from(duration.as_secs().saturating_add(2)).unwrap_or(usize::MAX)
}

#[cfg(test)]
mod tests {
    use super::super::report::hdrlog::Interval;
    use super::super::report::json::Logged;
    use super::super::report::{new_histogram, Mode, RunCounts, RunInfo, Stop};
    use super::*;

    fn log(started_at: SystemTime, latencies: &[&[u64]], status: u16) -> LoggedRun {
        let run = RunInfo {
            url: "http://10.0.0.1:8080/".into(),
            method: "GET".into(),
            mode: Mode::KeepAlive,
            rate: None,
            threads: 1,
            connections: 10,
            stop: Stop::After(Duration::from_secs(2)),
            timeout: Duration::from_secs(10),
        };
        let mut counts = RunCounts::default();
        let mut intervals = Vec::new();
        for (i, second) in latencies.iter().enumerate() {
            let mut latency = new_histogram();
            for &micros in *second {
                latency.saturating_record(micros);
            }
            counts.requests += latency.len();
            counts.status.add(status, latency.len());
            let start = started_at + Duration::from_secs(i as u64);
            intervals.push(Interval { start, latency });
        }
        let duration = Duration::from_secs(latencies.len() as u64);
        let logged = Logged { runs: vec![run], started_at, duration, interrupted: false, counts };
        LoggedRun { logged, intervals }
    }

    #[test]
    fn counts_add_histograms_add_and_seconds_line_up_by_wall_clock() {
        let t0 = SystemTime::UNIX_EPOCH + Duration::from_secs(1_748_779_200);
        // The second machine started half a second later.
        let a = log(t0, &[&[100, 200], &[300]], 200);
        let b = log(t0 + Duration::from_millis(500), &[&[1000; 3], &[2000]], 503);
        let merged = merge_logs(&[a, b]).expect("merged");
        assert_eq!(merged.runs.len(), 2);
        assert_eq!(merged.started_at, t0);
        assert_eq!(merged.duration, Duration::from_millis(2500));
        assert_eq!(merged.counts.requests, 7);
        assert_eq!(merged.counts.status.iter().collect::<Vec<_>>(), [(200, 3), (503, 4)]);
        assert_eq!(merged.latency.len(), 7);
        // The median of the union, 1000, is neither run's own (200 and 1000).
        assert_eq!((merged.latency.value_at_quantile(0.5), merged.latency.max()), (1000, 2000));
        assert_eq!(merged.per_second, [5, 2]);
        assert!(!merged.interrupted);
    }

    #[test]
    fn one_interrupted_run_marks_the_merge_interrupted() {
        let t0 = SystemTime::UNIX_EPOCH + Duration::from_secs(1_748_779_200);
        let mut b = log(t0, &[&[100]], 200);
        b.logged.interrupted = true;
        assert!(merge_logs(&[log(t0, &[&[100]], 200), b]).expect("merged").interrupted);
    }

    #[test]
    fn a_second_past_the_runs_span_is_counted_but_left_out_of_the_plot() {
        let t0 = SystemTime::UNIX_EPOCH + Duration::from_secs(1_748_779_200);
        // A damaged log: a run of 2 s with an interval 4 s in, past the span and
        // the second of rounding the plot allows.
        let mut damaged = log(t0, &[&[100], &[200]], 200);
        let mut late = new_histogram();
        late.saturating_record(300);
        damaged.intervals.push(Interval { start: t0 + Duration::from_secs(4), latency: late });
        let merged = merge_logs(&[damaged]).expect("merged");
        assert_eq!(merged.latency.len(), 3);
        assert_eq!(merged.per_second, [1, 1]);
        // One second less late is still in the plot.
        let mut late_but_in = log(t0, &[&[100], &[200]], 200);
        late_but_in.intervals[1].start = t0 + Duration::from_secs(3);
        assert_eq!(merge_logs(&[late_but_in]).expect("merged").per_second, [1, 0, 0, 1]);
    }

    /// Issue 27: the plot's seconds are sized by the numbers a log gives, its
    /// report's duration and an interval's start. A log that claims a run of a
    /// billion seconds with one interval near its end (`hdrlog::read` refuses such a
    /// log too) made the merge allocate 8 GB for the plot.
    #[test]
    fn a_log_claiming_a_billion_seconds_does_not_size_the_plot() {
        let t0 = SystemTime::UNIX_EPOCH + Duration::from_secs(1_748_779_200);
        let mut claimed = log(t0, &[&[100]], 200);
        claimed.logged.duration = Duration::from_secs(1_000_000_000);
        claimed.intervals[0].start = t0 + Duration::from_secs(999_999_999);
        let error = merge_logs(&[claimed]).expect_err("refused");
        assert_eq!(
            error,
            "the runs were not taken at once: 1000000000.000 s from the first start to the last end, 1 s logged"
        );
    }

    #[test]
    fn runs_spanning_more_seconds_than_they_log_were_not_taken_at_once() {
        let t0 = SystemTime::UNIX_EPOCH + Duration::from_secs(1_748_779_200);
        // Two runs of 2 s, the second `apart` seconds after the first: 4 s logged.
        let two_runs = |apart: u64| {
            let second = log(t0 + Duration::from_secs(apart), &[&[100], &[200]], 200);
            merge_logs(&[log(t0, &[&[100], &[200]], 200), second])
        };
        let error = two_runs(3600).expect_err("an hour apart");
        assert!(error.starts_with("the runs were not taken at once: 3602.000 s "), "{error}");
        assert!(two_runs(3 + SPAN_SLACK_S).is_err());
        // Their span, 14 s, is the 4 s they log and the slack: they merge.
        let merged = two_runs(2 + SPAN_SLACK_S).expect("merged");
        assert_eq!((merged.per_second.len(), merged.per_second.iter().sum::<u64>()), (14, 4));
    }
}
