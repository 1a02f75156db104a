//! The values of `percore bench`'s options, each checked as it is parsed: a value
//! that would overflow, panic or make no sense later is a usage error now (exit
//! status 2), with the range it must be in.

use std::time::{Duration, SystemTime};

use clap::ValueEnum;
use time::format_description::well_known::Rfc3339;
use time::OffsetDateTime;

use super::report::{Counts, Report};
use super::target::Target;
use crate::commands::parse_duration;

/// Connections over all threads: well past any machine's descriptors, and a bound
/// on the loop that opens them.
pub const MAX_CONNECTIONS: u64 = 1_000_000;
/// Requests in flight per connection: a count (u32) and a connection's output
/// (some 40 MB of requests) that stay in bounds, far deeper than a benchmark needs
/// (a test fills the socket buffers with 300,000).
pub const MAX_PIPELINE: u64 = 1_000_000;
/// Load threads: a thread per CPU of the largest machines.
const MAX_THREADS: usize = 1024;
/// The longest run: a year (a longer one is a typo).
const MAX_RUN: Duration = Duration::from_secs(366 * 24 * 3600);
const MIN_TIMEOUT: Duration = Duration::from_millis(1);
const MAX_TIMEOUT: Duration = Duration::from_secs(3600);
/// Requests per second: one every 100 s, to far past what one machine sends.
const MIN_RATE: f64 = 0.01;
const MAX_RATE: f64 = 1e9;

pub fn target(text: &str) -> Result<Target, String> {
    Target::parse(text)
}

/// `NAME=VALUE` (a compared target's URL, pid, command): a name of letters,
/// digits, `-`, `_` and `.`, and a value that is not empty.
pub fn named(text: &str) -> Result<(String, String), String> {
    let bad = || format!("{text:?} is not NAME=VALUE (a name of letters, digits, - _ and ., then =)");
    let (name, value) = text.split_once('=').ok_or_else(bad)?;
    let name_ok = !name.is_empty() && name.chars().all(|c| c.is_ascii_alphanumeric() || "-_.".contains(c));
    if !name_ok || value.is_empty() {
        return Err(bad());
    }
    Ok((name.to_string(), value.to_string()))
}

/// `-d`: a duration, 1 ms to a year.
pub fn run_time(text: &str) -> Result<Duration, String> {
    duration_within(text, MIN_TIMEOUT, MAX_RUN, "1ms to 366 days")
}

/// `--timeout`: a duration, 1 ms to an hour; a bare number is seconds.
pub fn timeout(text: &str) -> Result<Duration, String> {
    duration_within(text, MIN_TIMEOUT, MAX_TIMEOUT, "1ms to 1h")
}

fn duration_within(text: &str, min: Duration, max: Duration, range: &str) -> Result<Duration, String> {
    let duration = parse_duration(text)?;
    if (min..=max).contains(&duration) {
        Ok(duration)
    } else {
        Err(format!("{text:?} is outside {range}"))
    }
}

pub fn threads(text: &str) -> Result<usize, String> {
    text.parse()
        .ok()
        .filter(|n| (1..=MAX_THREADS).contains(n))
        .ok_or_else(|| format!("{text:?} is not 1 to {MAX_THREADS}"))
}

pub fn rate(text: &str) -> Result<f64, String> {
    text.parse::<f64>()
        .ok()
        .filter(|rate| (MIN_RATE..=MAX_RATE).contains(rate))
        .ok_or_else(|| format!("{text:?} is not a rate of {MIN_RATE} to {MAX_RATE:e} requests per second"))
}

/// `-H`: `Name: value`, the name a token, the value without control bytes (a CR or
/// LF would end the head early, or smuggle a header in).
pub fn header(text: &str) -> Result<String, String> {
    let (name, value) =
        text.split_once(':').ok_or_else(|| format!("{text:?} is not a header 'Name: value'"))?;
    if !is_token(name.trim_end()) {
        return Err(format!("{text:?}: {:?} is not a header name", name.trim_end()));
    }
    header_value(value)?;
    Ok(text.to_string())
}

/// A header value: visible characters, spaces and tabs (RFC 9110, 5.5).
pub fn header_value(text: &str) -> Result<String, String> {
    if text.chars().any(|c| c.is_control() && c != '\t') {
        return Err(format!("{text:?} has a control character, which a header value may not hold"));
    }
    Ok(text.to_string())
}

/// `--method`: a token (RFC 9110, 9.1), as given (methods are case-sensitive).
pub fn method(text: &str) -> Result<String, String> {
    if is_token(text) {
        Ok(text.to_string())
    } else {
        Err(format!("{text:?} is not a method (a token, such as GET or POST)"))
    }
}

/// `tchar = "!" / "#" / "$" / "%" / "&" / "'" / "*" / "+" / "-" / "." / "^" / "_" /
/// "`" / "|" / "~" / DIGIT / ALPHA`; a token is one or more of them.
fn is_token(text: &str) -> bool {
    !text.is_empty() && text.bytes().all(|b| b.is_ascii_alphanumeric() || b"!#$%&'*+-.^_`|~".contains(&b))
}

/// `--start-at`: RFC 3339 (`2025-06-01T12:00:00Z`, `2025-06-01T14:00:00+02:00`,
/// what `date -Iseconds` prints) or Unix seconds (`1748779200`, `1748779200.5`,
/// what `date +%s` prints).
pub fn start_at(text: &str) -> Result<SystemTime, String> {
    let bad =
        || format!("{text:?} is not a time: RFC 3339 (2025-06-01T12:00:00Z) or Unix seconds (1748779200)");
    if text.bytes().all(|b| b.is_ascii_digit() || b == b'.') {
        let seconds: f64 = text.parse().map_err(|_| bad())?;
        let since_epoch = Duration::try_from_secs_f64(seconds).map_err(|_| bad())?;
        return SystemTime::UNIX_EPOCH.checked_add(since_epoch).ok_or_else(bad);
    }
    OffsetDateTime::parse(text, &Rfc3339).map(SystemTime::from).map_err(|_| bad())
}

/// What makes a run (or a merge) exit with status 1.
#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
pub enum FailOn {
    /// Any error, or any response that is neither 2xx nor 3xx.
    Any,
    /// Errors alone: connect, read, write, timeout, parse.
    Errors,
    /// Nothing: the status is 0 unless the run could not start.
    Never,
}

impl FailOn {
    /// `Err` with what failed, when `report` fails by this rule.
    pub fn check(self, report: &Report) -> Result<(), String> {
        self.check_counts(&report.counts)
    }

    /// [`check`](FailOn::check) on counts alone (a comparison's, over its rounds).
    pub fn check_counts(self, counts: &Counts) -> Result<(), String> {
        let (errors, status) = (counts.errors.total(), counts.status.failed());
        let failed = match self {
            FailOn::Any => errors.saturating_add(status),
            FailOn::Errors => errors,
            FailOn::Never => 0,
        };
        if failed == 0 {
            return Ok(());
        }
        let mut what = Vec::new();
        if errors > 0 {
            what.push(format!("{errors} errors"));
        }
        if status > 0 && self == FailOn::Any {
            what.push(format!("{status} responses neither 2xx nor 3xx"));
        }
        Err(format!(
            "{} of {} requests failed (--fail-on {}): {}",
            failed,
            counts.requests + errors,
            self.name(),
            what.join(", ")
        ))
    }

    fn name(self) -> &'static str {
        match self {
            FailOn::Any => "any",
            FailOn::Errors => "errors",
            FailOn::Never => "never",
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn numbers_out_of_range_are_refused_not_panicked_on() {
        for bad in ["1e-300", "0", "-5", "nan", "inf", "1e300", "0.001"] {
            assert!(rate(bad).is_err(), "--rate {bad}");
        }
        assert_eq!(rate("50000"), Ok(50000.0));
        assert_eq!(rate("0.5"), Ok(0.5));
        for bad in ["0", "1025", "-1", "x", "99999999999999999999"] {
            assert!(threads(bad).is_err(), "-t {bad}");
        }
        for bad in ["0", "0.0001ms", "2h", "1e3", "x", "99999999999999999999h", "-1"] {
            assert!(timeout(bad).is_err(), "--timeout {bad}");
        }
        // A year (366 days) is the longest run: 8784 hours.
        for bad in ["0", "8785h", "527041m", "9999999h"] {
            assert!(run_time(bad).is_err(), "-d {bad}");
        }
        assert_eq!(run_time("8784h"), Ok(Duration::from_secs(366 * 24 * 3600)));
        assert_eq!(run_time("1ms"), Ok(Duration::from_millis(1)));
    }

    #[test]
    fn timeouts_may_be_fractional() {
        let cases = [("2s", 2000), ("1.5", 1500), ("500ms", 500), ("10", 10_000), ("1m", 60_000)];
        for (text, millis) in cases {
            assert_eq!(timeout(text), Ok(Duration::from_millis(millis)), "{text}");
        }
    }

    #[test]
    fn headers_and_methods_cannot_smuggle_anything() {
        assert!(header("X-A: 1").is_ok());
        assert!(header("X-Empty:").is_ok());
        for bad in ["X-A 1", ": v", "X A: 1", "X-A: 1\r\nX-B: 2", "X-A: \n", "X-A: a\0"] {
            assert!(header(bad).is_err(), "{bad:?}");
        }
        assert!(method("PATCH").is_ok());
        for bad in ["", "GET /", "GET\r\n", "G\u{e9}T"] {
            assert!(method(bad).is_err(), "{bad:?}");
        }
    }

    #[test]
    fn a_failed_run_says_how_many_of_how_many_and_which_kinds_by_its_rule() {
        let mut report = Report::new(Vec::new(), SystemTime::UNIX_EPOCH);
        report.counts.requests = 10;
        report.counts.status.add(200, 8);
        report.counts.status.add(503, 2);
        assert_eq!(
            FailOn::Any.check(&report),
            Err("2 of 10 requests failed (--fail-on any): 2 responses neither 2xx nor 3xx".into())
        );
        assert_eq!(FailOn::Errors.check(&report), Ok(()), "a 503 is an answer");
        report.counts.errors.timeout = 3;
        assert_eq!(
            FailOn::Any.check(&report),
            Err("5 of 13 requests failed (--fail-on any): 3 errors, 2 responses neither 2xx nor 3xx".into())
        );
        assert_eq!(
            FailOn::Errors.check(&report),
            Err("3 of 13 requests failed (--fail-on errors): 3 errors".into())
        );
        assert_eq!(FailOn::Never.check(&report), Ok(()));
        // Errors alone: no word of responses.
        report.counts.status = Default::default();
        report.counts.status.add(200, 10);
        assert_eq!(
            FailOn::Any.check(&report),
            Err("3 of 13 requests failed (--fail-on any): 3 errors".into())
        );
    }

    #[test]
    fn start_times_in_either_form() {
        let at = SystemTime::UNIX_EPOCH + Duration::from_secs(1_748_779_200);
        assert_eq!(start_at("1748779200"), Ok(at));
        assert_eq!(start_at("1748779200.5"), Ok(at + Duration::from_millis(500)));
        assert_eq!(start_at("2025-06-01T12:00:00Z"), Ok(at));
        assert_eq!(start_at("2025-06-01T14:00:00+02:00"), Ok(at));
        for bad in ["tomorrow", "2025-06-01", "1.2.3", "", "2025-06-01T12:00:00"] {
            assert!(start_at(bad).is_err(), "{bad:?}");
        }
    }
}
