//! `percore bench`'s command line: its subcommands and options, and the value of
//! each option, checked as it is parsed: a value that would overflow, panic or make
//! no sense later is a usage error now (exit status 2), with the range it must be in.

use std::path::PathBuf;
use std::time::{Duration, SystemTime};

use clap::{Args, Subcommand, ValueEnum};
use percore::cli::CpuList;
use percore::http::is_token;
use time::format_description::well_known::Rfc3339;
use time::OffsetDateTime;

use super::report::{Report, RunCounts};
use super::target::Target;
use crate::units::{duration_within, size_within};

#[derive(Debug, Args)]
#[command(args_conflicts_with_subcommands = true, subcommand_negates_reqs = true)]
pub struct BenchArgs {
    #[command(subcommand)]
    pub command: Option<BenchCommand>,

    /// The URL to load: http://HOST[:PORT][/PATH][?QUERY], or https://... over TLS
    /// (1.3 or 1.2, with --cacert or --insecure).
    #[arg(required = true, value_parser = target)]
    pub url: Option<Target>,

    /// Connections open at once, over all threads.
    #[arg(short = 'c', long, value_name = "N", default_value_t = 100, value_parser = connections)]
    pub connections: u64,

    #[command(flatten)]
    pub load: LoadArgs,

    /// Start at this wall-clock time, RFC 3339 (2025-06-01T12:00:00Z, or with an
    /// offset) or Unix seconds (1748779200), so runs on several machines load together.
    #[arg(long, value_name = "TIME", value_parser = start_at)]
    pub start_at: Option<SystemTime>,

    /// Write the latencies as an HdrHistogram interval log (one histogram a second,
    /// V2 compressed, microseconds), with the run's counts, for `percore bench merge`.
    #[arg(long, value_name = "FILE")]
    pub hdr_log: Option<PathBuf>,

    #[command(flatten)]
    pub report: ReportArgs,
}

/// The load but its connections: threads, how long, the request and its shape. A
/// run's, and each of a comparison's.
#[derive(Debug, Args)]
pub struct LoadArgs {
    /// How long to run: 10s, 1m, 500ms, 1.5 (seconds) [default: 10s unless -n is given].
    #[arg(short = 'd', long, value_name = "DURATION", value_parser = run_time, conflicts_with = "requests")]
    pub duration: Option<Duration>,

    /// Stop after this many requests.
    #[arg(short = 'n', long, value_name = "N", value_parser = clap::value_parser!(u64).range(1..))]
    pub requests: Option<u64>,

    /// Threads, each one pinned loop [default: one per CPU of --cpus, or of the
    /// CPUs this process may run on].
    #[arg(short = 't', long, value_name = "N", value_parser = threads)]
    pub threads: Option<usize>,

    /// CPUs for the threads, in taskset's syntax.
    #[arg(long, value_name = "LIST")]
    pub cpus: Option<CpuList>,

    /// Do not pin threads to their CPUs.
    #[arg(long)]
    pub no_pin: bool,

    /// Requests in flight per connection (HTTP pipelining), 1 to 1,000,000.
    #[arg(long, value_name = "DEPTH", default_value_t = 1, value_parser = clap::value_parser!(u64).range(1..=MAX_PIPELINE))]
    pub pipeline: u64,

    /// A new connection per request, HTTP/1.0 without keep-alive (as ab without -k).
    #[arg(long, conflicts_with = "pipeline")]
    pub close: bool,

    /// A fixed total rate, requests per second (0.01 to 1e9); each latency counts from
    /// when its request was due, so a stalled server shows in the tail.
    #[arg(long, value_name = "R", value_parser = rate, conflicts_with = "pipeline")]
    pub rate: Option<f64>,

    /// An extra request header, 'Name: value' (repeatable).
    #[arg(short = 'H', long = "header", value_name = "HEADER", value_parser = header)]
    pub headers: Vec<String>,

    /// Request method [default: GET, or POST with a body].
    #[arg(short = 'm', long, value_name = "METHOD", value_parser = method)]
    pub method: Option<String>,

    /// Request body.
    #[arg(short = 'b', long, value_name = "TEXT", conflicts_with = "body_file")]
    pub body: Option<String>,

    /// Read the request body from this file, once, at start.
    #[arg(long, value_name = "PATH")]
    pub body_file: Option<PathBuf>,

    /// Content-Type of the request body.
    #[arg(short = 'T', long, value_name = "TYPE", value_parser = header_value)]
    pub content_type: Option<String>,

    /// How long a request may wait for its response before it counts as a timeout:
    /// 2s, 1.5 (seconds), 500ms; 1ms to 1h.
    #[arg(long, value_name = "DURATION", default_value = "10s", value_parser = timeout)]
    pub timeout: Duration,

    /// Largest response (head, body and any 1xx before it); past it the connection
    /// counts as a read error and is replaced. Suffixes k, m, g.
    #[arg(long, value_name = "BYTES", default_value = "64m", value_parser = size_within(1, u64::MAX))]
    pub max_response_size: u64,

    /// For an https:// URL: trust the certificate authorities in this PEM file; the
    /// server's certificate must be signed by one and name the URL's host (the
    /// system's roots are not read: an https:// URL needs this or --insecure).
    #[arg(long, value_name = "FILE", conflicts_with = "insecure")]
    pub cacert: Option<PathBuf>,

    /// For an https:// URL: take any certificate, unverified (as curl -k), for a
    /// server with a self-signed one (the handshake's signatures are still checked).
    #[arg(long)]
    pub insecure: bool,

    /// For an https:// URL: keep the session tickets the server sends and resume
    /// with them, a shorter handshake than a full one (each thread keeps its own);
    /// without it every connection makes a full handshake.
    #[arg(long)]
    pub tls_resume: bool,
}

impl LoadArgs {
    /// Whether whom to trust over TLS was given (--cacert or --insecure).
    pub fn trusts(&self) -> bool {
        self.cacert.is_some() || self.insecure
    }
}

// Parsed once, with the rest of the command line.
#[allow(clippy::large_enum_variant)]
#[derive(Debug, Subcommand)]
pub enum BenchCommand {
    /// One report of runs taken at once, as on several machines: the interval logs
    /// their --hdr-log wrote, counts summed and histograms added.
    Merge(MergeArgs),
    /// Two or more servers (or one under two settings) loaded in interleaved rounds,
    /// with each server's CPU read from /proc, and a verdict on each against the
    /// first: the median of per-round ratios and its confidence interval.
    Compare(CompareArgs),
}

/// `percore bench compare`: targets, how they are started and prepared, and rounds.
#[derive(Debug, Args)]
pub struct CompareArgs {
    /// A target: NAME=URL. The first named target (here or in --serve) is the
    /// baseline the others are compared with.
    #[arg(value_name = "NAME=URL", value_parser = named)]
    pub targets: Vec<(String, String)>,

    /// Connections open at once, over all threads; a list (30,100,1000,5000, or -c
    /// given again) makes a grid whose every point is a comparison of its own.
    #[arg(short = 'c', long, value_name = "N,...", default_value = "100", value_delimiter = ',', value_parser = connections)]
    pub connections: Vec<u64>,

    #[command(flatten)]
    pub load: LoadArgs,

    /// NAME=PID: the pid of a target's server, whose CPU (its whole process tree,
    /// user and system, from /proc) is read over each round (repeatable).
    #[arg(long = "pid", value_name = "NAME=PID", value_parser = named)]
    pub pids: Vec<(String, String)>,

    /// NAME=COMMAND: starts a target's server with `sh -c`, pinned to --server-cpus,
    /// {port} in it replaced by a free port and {host} by the address to listen on
    /// (its URL, unless given, is then http://HOST:PORT/, or https:// with --cacert
    /// or --insecure; HOST is 127.0.0.1, or the namespace's address with --netns);
    /// waited for until it accepts, its CPU read,
    /// and stopped (TERM, then KILL after 5 s) at the end (repeatable).
    #[arg(long = "serve", value_name = "NAME=COMMAND", value_parser = named)]
    pub serves: Vec<(String, String)>,

    /// NAME=COMMAND: run with `sh -c` before each of the target's rounds (a sysctl
    /// setting, a config file); a failure stops the comparison (repeatable).
    #[arg(long = "prepare", value_name = "NAME=COMMAND", value_parser = named)]
    pub prepares: Vec<(String, String)>,

    /// CPUs the servers that --serve starts run on, in taskset's syntax [default:
    /// any]. Given again (--server-cpus 0 --server-cpus 0-1), each set is a row of the
    /// grid: the servers are started anew on it, after the last set's are stopped;
    /// every target must then be started by --serve.
    #[arg(long, value_name = "LIST", value_parser = cpu_set)]
    pub server_cpus: Vec<String>,

    /// Start the servers in a network namespace of their own, joined to the load's
    /// by a veth pair with link-local addresses (169.254.0.0/16), so that no result
    /// rests on loopback's shortcuts; made at the start and removed at the end, also
    /// after an error or Ctrl-C. Needs root (CAP_NET_ADMIN and CAP_SYS_ADMIN) and
    /// iproute2's ip; every target is then started by --serve, with {port} and no URL.
    #[arg(long)]
    pub netns: bool,

    /// Rounds: each loads every target once, in an order rotated from round to round.
    #[arg(long, value_name = "N", default_value_t = 5, value_parser = clap::value_parser!(u32).range(1..=1000))]
    pub rounds: u32,

    /// A load of each target before its first round, not counted.
    #[arg(long, value_name = "DURATION", default_value = "1s", value_parser = run_time)]
    pub warmup: Duration,

    /// Where the first round's order starts [default: from the clock; printed].
    #[arg(long, value_name = "N")]
    pub seed: Option<u64>,

    /// Also write the comparison as Markdown, with its command line, to FILE: a
    /// table of each point's medians and verdicts, and for a grid a table of
    /// responses/s and one of p99 latency against the connections.
    #[arg(long, value_name = "FILE")]
    pub markdown: Option<PathBuf>,

    /// Draw responses per second against the connections as SVG, a line per target
    /// (and server CPU set): the median of each point's rounds.
    #[arg(long, value_name = "FILE.svg")]
    pub rate_plot: Option<PathBuf>,

    /// Draw the 99th percentile latency against the connections as SVG, a line per
    /// target (and server CPU set): the median of each point's rounds.
    #[arg(long, value_name = "FILE.svg")]
    pub p99_plot: Option<PathBuf>,

    #[command(flatten)]
    pub report: ReportArgs,
}

#[derive(Debug, Args)]
pub struct MergeArgs {
    /// Interval logs written by `percore bench --hdr-log`.
    #[arg(required = true, value_name = "FILE")]
    pub logs: Vec<PathBuf>,

    #[command(flatten)]
    pub report: ReportArgs,
}

/// How a report is given, by a run and by a merge.
#[derive(Debug, Args)]
pub struct ReportArgs {
    /// Print the report as one JSON object.
    #[arg(long)]
    pub json: bool,

    /// Draw the report as SVG: for a run or a merge, the latency by percentile and
    /// the responses per second over time; for a compare, each target's server CPU
    /// per response (responses per second when a target's CPU is unknown) round by
    /// round, for a comparison of one point (a grid's are --rate-plot and --p99-plot).
    #[arg(long, value_name = "FILE.svg")]
    pub plot: Option<PathBuf>,

    /// What makes the exit status 1: any error or any response that is not 2xx or
    /// 3xx (any), only errors (errors: connect, read, write, timeout, parse, tls), or
    /// nothing (never).
    #[arg(long, value_name = "WHAT", default_value = "any")]
    pub fail_on: FailOn,
}

/// Connections over all threads: well past any machine's descriptors, and a bound
/// on the loop that opens them.
const MAX_CONNECTIONS: u64 = 1_000_000;
/// Requests in flight per connection: a count (u32) and a connection's output
/// (some 40 MB of requests) that stay in bounds, far deeper than a benchmark needs
/// (a test fills the socket buffers with 300,000).
const MAX_PIPELINE: u64 = 1_000_000;
/// Load threads: a thread per CPU of the largest machines.
const MAX_THREADS: usize = 1024;
/// The longest run: a year (a longer one is a typo).
const MAX_RUN: Duration = Duration::from_secs(366 * 24 * 3600);
const MIN_TIMEOUT: Duration = Duration::from_millis(1);
const MAX_TIMEOUT: Duration = Duration::from_secs(3600);
/// Requests per second: one every 100 s, to far past what one machine sends.
const MIN_RATE: f64 = 0.01;
const MAX_RATE: f64 = 1e9;

fn target(text: &str) -> Result<Target, String> {
    Target::parse(text)
}

/// A whole number from 1 to `max`; the error names the range and what it counts
/// (`what`, after the range: " connections", or nothing).
fn one_to<T: std::str::FromStr + PartialOrd + From<u8> + std::fmt::Display + Copy>(
    text: &str,
    max: T,
    what: &str,
) -> Result<T, String> {
    text.parse()
        .ok()
        .filter(|n| (T::from(1)..=max).contains(n))
        .ok_or_else(|| format!("{text:?} is not 1 to {max}{what}"))
}

/// `-c`: 1 to a million connections.
fn connections(text: &str) -> Result<u64, String> {
    one_to(text, MAX_CONNECTIONS, " connections")
}

/// `--server-cpus`: a CPU list in taskset's syntax, kept as written (it names the
/// set in the report).
fn cpu_set(text: &str) -> Result<String, String> {
    text.parse::<CpuList>()?;
    Ok(text.to_string())
}

/// `NAME=VALUE` (a compared target's URL, pid, command): a name of letters,
/// digits, `-`, `_` and `.`, and a value that is not empty.
fn named(text: &str) -> Result<(String, String), String> {
    let bad = || format!("{text:?} is not NAME=VALUE (a name of letters, digits, - _ and ., then =)");
    let (name, value) = text.split_once('=').ok_or_else(bad)?;
    let name_ok = !name.is_empty() && name.chars().all(|c| c.is_ascii_alphanumeric() || "-_.".contains(c));
    if !name_ok || value.is_empty() {
        return Err(bad());
    }
    Ok((name.to_string(), value.to_string()))
}

/// `-d`: a duration, 1 ms to a year.
fn run_time(text: &str) -> Result<Duration, String> {
    duration_within(text, MIN_TIMEOUT, MAX_RUN, "1ms to 366 days")
}

/// `--timeout`: a duration, 1 ms to an hour; a bare number is seconds.
fn timeout(text: &str) -> Result<Duration, String> {
    duration_within(text, MIN_TIMEOUT, MAX_TIMEOUT, "1ms to 1h")
}

fn threads(text: &str) -> Result<usize, String> {
    one_to(text, MAX_THREADS, "")
}

fn rate(text: &str) -> Result<f64, String> {
    text.parse::<f64>()
        .ok()
        .filter(|rate| (MIN_RATE..=MAX_RATE).contains(rate))
        .ok_or_else(|| format!("{text:?} is not a rate of {MIN_RATE} to {MAX_RATE:e} requests per second"))
}

/// `-H`: `Name: value`, the name a token, the value without control bytes (a CR or
/// LF would end the head early, or smuggle a header in).
fn header(text: &str) -> Result<String, String> {
    let (name, value) =
        text.split_once(':').ok_or_else(|| format!("{text:?} is not a header 'Name: value'"))?;
    if !is_token(name.trim_end().as_bytes()) {
        return Err(format!("{text:?}: {:?} is not a header name", name.trim_end()));
    }
    header_value(value)?;
    Ok(text.to_string())
}

/// A header value: visible characters, spaces and tabs (RFC 9110, 5.5).
fn header_value(text: &str) -> Result<String, String> {
    if text.chars().any(|c| c.is_control() && c != '\t') {
        return Err(format!("{text:?} has a control character, which a header value may not hold"));
    }
    Ok(text.to_string())
}

/// `--method`: a token (RFC 9110, 9.1), as given (methods are case-sensitive).
fn method(text: &str) -> Result<String, String> {
    if is_token(text.as_bytes()) {
        Ok(text.to_string())
    } else {
        Err(format!("{text:?} is not a method (a token, such as GET or POST)"))
    }
}

/// `--start-at`: RFC 3339 (`2025-06-01T12:00:00Z`, `2025-06-01T14:00:00+02:00`,
/// what `date -Iseconds` prints) or Unix seconds (`1748779200`, `1748779200.5`,
/// what `date +%s` prints).
fn start_at(text: &str) -> Result<SystemTime, String> {
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
    /// Errors alone: connect, read, write, timeout, parse, tls.
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
    pub fn check_counts(self, counts: &RunCounts) -> Result<(), String> {
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
        for bad in ["0", "1000001", "-1", "x", ""] {
            assert!(connections(bad).is_err(), "-c {bad}");
        }
        assert_eq!(connections("5000"), Ok(5000));
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
