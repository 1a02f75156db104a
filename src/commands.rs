//! The command line.

use std::path::PathBuf;
use std::time::{Duration, SystemTime};

use clap::{Args, Parser, Subcommand};
use percore::cli::{CpuList, ServerArgs};

use crate::bench::args;
use crate::bench::{FailOn, Target};

/// percore: a per-core HTTP/1.1 hello server on an edge-triggered epoll loop.
#[derive(Debug, Parser)]
#[command(version, about, long_about = None)]
pub struct Cli {
    #[command(subcommand)]
    pub command: Command,
}

// One value, parsed once at start: the size of its largest variant costs nothing.
#[allow(clippy::large_enum_variant)]
#[derive(Debug, Subcommand)]
pub enum Command {
    /// Serve one prebuilt response to every GET and HEAD, on every path, with one
    /// worker process per CPU.
    Serve(ServeArgs),
    /// Compare the kernel settings of sysctl.conf with the live ones (changes nothing).
    Tune,
    /// Load an HTTP server and report throughput, errors and the latency
    /// distribution, like wrk and ab together, on percore's own loop.
    Bench(BenchArgs),
}

#[derive(Debug, Args)]
#[command(args_conflicts_with_subcommands = true, subcommand_negates_reqs = true)]
pub struct BenchArgs {
    #[command(subcommand)]
    pub command: Option<BenchCommand>,

    /// The URL to load: http://HOST[:PORT][/PATH][?QUERY]
    #[arg(required = true, value_parser = args::target)]
    pub url: Option<Target>,

    #[command(flatten)]
    pub load: LoadArgs,

    /// Start at this wall-clock time, RFC 3339 (2025-06-01T12:00:00Z, or with an
    /// offset) or Unix seconds (1748779200), so runs on several machines load together.
    #[arg(long, value_name = "TIME", value_parser = args::start_at)]
    pub start_at: Option<SystemTime>,

    /// Write the latencies as an HdrHistogram interval log (one histogram a second,
    /// V2 compressed, microseconds), with the run's counts, for `percore bench merge`.
    #[arg(long, value_name = "FILE")]
    pub hdr_log: Option<PathBuf>,

    #[command(flatten)]
    pub report: ReportArgs,
}

/// The load: connections, threads, how long, the request and its shape. A run's,
/// and each of a comparison's.
#[derive(Debug, Args)]
pub struct LoadArgs {
    /// Connections open at once, over all threads.
    #[arg(short = 'c', long, value_name = "N", default_value_t = 100, value_parser = clap::value_parser!(u64).range(1..=args::MAX_CONNECTIONS))]
    pub connections: u64,

    /// How long to run: 10s, 1m, 500ms, 1.5 (seconds) [default: 10s unless -n is given].
    #[arg(short = 'd', long, value_name = "DURATION", value_parser = args::run_time, conflicts_with = "requests")]
    pub duration: Option<Duration>,

    /// Stop after this many requests.
    #[arg(short = 'n', long, value_name = "N", value_parser = clap::value_parser!(u64).range(1..))]
    pub requests: Option<u64>,

    /// Threads, each one pinned loop [default: one per CPU of --cpus, or of the
    /// CPUs this process may run on].
    #[arg(short = 't', long, value_name = "N", value_parser = args::threads)]
    pub threads: Option<usize>,

    /// CPUs for the threads, in taskset's syntax.
    #[arg(long, value_name = "LIST")]
    pub cpus: Option<CpuList>,

    /// Do not pin threads to their CPUs.
    #[arg(long)]
    pub no_pin: bool,

    /// Requests in flight per connection (HTTP pipelining), 1 to 1,000,000.
    #[arg(long, value_name = "DEPTH", default_value_t = 1, value_parser = clap::value_parser!(u64).range(1..=args::MAX_PIPELINE))]
    pub pipeline: u64,

    /// A new connection per request, HTTP/1.0 without keep-alive (as ab without -k).
    #[arg(long, conflicts_with = "pipeline")]
    pub close: bool,

    /// A fixed total rate, requests per second (0.01 to 1e9); each latency counts from
    /// when its request was due, so a stalled server shows in the tail.
    #[arg(long, value_name = "R", value_parser = args::rate, conflicts_with = "pipeline")]
    pub rate: Option<f64>,

    /// An extra request header, 'Name: value' (repeatable).
    #[arg(short = 'H', long = "header", value_name = "HEADER", value_parser = args::header)]
    pub headers: Vec<String>,

    /// Request method [default: GET, or POST with a body].
    #[arg(short = 'm', long, value_name = "METHOD", value_parser = args::method)]
    pub method: Option<String>,

    /// Request body.
    #[arg(short = 'b', long, value_name = "TEXT", conflicts_with = "body_file")]
    pub body: Option<String>,

    /// Read the request body from this file, once, at start.
    #[arg(long, value_name = "PATH")]
    pub body_file: Option<PathBuf>,

    /// Content-Type of the request body.
    #[arg(short = 'T', long, value_name = "TYPE", value_parser = args::header_value)]
    pub content_type: Option<String>,

    /// How long a request may wait for its response before it counts as a timeout:
    /// 2s, 1.5 (seconds), 500ms; 1ms to 1h.
    #[arg(long, value_name = "DURATION", default_value = "10s", value_parser = args::timeout)]
    pub timeout: Duration,

    /// Largest response (head, body and any 1xx before it); past it the connection
    /// counts as a read error and is replaced. Suffixes k, m, g.
    #[arg(long, value_name = "BYTES", default_value = "64m", value_parser = size_within(1, u64::MAX))]
    pub max_response_size: u64,
}

// Parsed once, as `Command` is.
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
    #[arg(value_name = "NAME=URL", value_parser = args::named)]
    pub targets: Vec<(String, String)>,

    #[command(flatten)]
    pub load: LoadArgs,

    /// NAME=PID: the pid of a target's server, whose CPU (its whole process tree,
    /// user and system, from /proc) is read over each round (repeatable).
    #[arg(long = "pid", value_name = "NAME=PID", value_parser = args::named)]
    pub pids: Vec<(String, String)>,

    /// NAME=COMMAND: starts a target's server with `sh -c`, pinned to --server-cpus,
    /// {port} in it replaced by a free port (its URL, unless given, is then
    /// http://127.0.0.1:PORT/); waited for until it accepts, its CPU read, and
    /// stopped (TERM, then KILL after 5 s) at the end (repeatable).
    #[arg(long = "serve", value_name = "NAME=COMMAND", value_parser = args::named)]
    pub serves: Vec<(String, String)>,

    /// NAME=COMMAND: run with `sh -c` before each of the target's rounds (a sysctl
    /// setting, a config file); a failure stops the comparison (repeatable).
    #[arg(long = "prepare", value_name = "NAME=COMMAND", value_parser = args::named)]
    pub prepares: Vec<(String, String)>,

    /// CPUs the servers that --serve starts run on, in taskset's syntax [default: any].
    #[arg(long, value_name = "LIST")]
    pub server_cpus: Option<CpuList>,

    /// Rounds: each loads every target once, in an order rotated from round to round.
    #[arg(long, value_name = "N", default_value_t = 5, value_parser = clap::value_parser!(u32).range(1..=1000))]
    pub rounds: u32,

    /// A load of each target before its first round, not counted.
    #[arg(long, value_name = "DURATION", default_value = "1s", value_parser = args::run_time)]
    pub warmup: Duration,

    /// Where the first round's order starts [default: from the clock; printed].
    #[arg(long, value_name = "N")]
    pub seed: Option<u64>,

    /// Also write the comparison as a Markdown table, with its command line, to FILE.
    #[arg(long, value_name = "FILE")]
    pub markdown: Option<PathBuf>,

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

    /// Draw the latency by percentile and the requests per second over time, as SVG.
    #[arg(long, value_name = "FILE.svg")]
    pub plot: Option<PathBuf>,

    /// What makes the exit status 1: any error or any response that is not 2xx or
    /// 3xx (any), only errors (errors: connect, read, write, timeout, parse), or
    /// nothing (never).
    #[arg(long, value_name = "WHAT", default_value = "any")]
    pub fail_on: FailOn,
}

/// `10s`, `1m`, `500ms`, `2h`, or a number of seconds; more than zero.
pub(crate) fn parse_duration(text: &str) -> Result<std::time::Duration, String> {
    let bad = || format!("{text:?} is not a duration (such as 10s, 1m or 500ms)");
    let split = text.find(|c: char| !c.is_ascii_digit() && c != '.').unwrap_or(text.len());
    let (number, unit) = text.split_at(split);
    let number: f64 = number.parse().map_err(|_| bad())?;
    let seconds = match unit {
        "" | "s" => number,
        "ms" => number / 1000.0,
        "m" => number * 60.0,
        "h" => number * 3600.0,
        _ => return Err(bad()),
    };
    std::time::Duration::try_from_secs_f64(seconds).ok().filter(|d| !d.is_zero()).ok_or_else(bad)
}

#[derive(Debug, Args)]
pub struct ServeArgs {
    #[command(flatten)]
    pub server: ServerArgs,

    /// Response body [default: "hello, world!\n"].
    #[arg(long, value_name = "TEXT", conflicts_with = "body_file")]
    pub body: Option<String>,

    /// Read the response body from this file, once, at start.
    #[arg(long, value_name = "PATH")]
    pub body_file: Option<PathBuf>,

    /// Bodies of this size or more are sealed in a memfd and sent with sendfile(2),
    /// from the page cache to the socket without a copy; smaller ones from memory.
    /// Suffixes k, m, g; `off` sends every body from memory.
    #[arg(long, value_name = "BYTES", default_value = "16k", value_parser = parse_sendfile_min)]
    pub sendfile_min: u64,

    /// Send each answer this long after its request arrived (10ms, 1.5s), as a
    /// backend with latency would: for testing proxies and load balancers.
    #[arg(long, value_name = "DURATION", value_parser = parse_duration)]
    pub delay: Option<std::time::Duration>,

    /// Content-Type of the response.
    #[arg(long, value_name = "TYPE", default_value = "text/plain")]
    pub content_type: String,

    /// Largest request body read (and dropped); larger gets 413. Suffixes k, m, g.
    #[arg(long, value_name = "BYTES", default_value = "1m", value_parser = parse_size)]
    pub max_body: u64,

    /// Longest request line, 1 byte to 1m; longer gets 414. Suffixes k, m.
    #[arg(long, value_name = "BYTES", default_value = "8k", value_parser = size_within(1, MAX_REQUEST_LINE))]
    pub max_request_line: u64,

    /// Largest request head (request line and headers), 1 byte to 64m; larger gets
    /// 431. Suffixes k, m.
    #[arg(long, value_name = "BYTES", default_value = "32k", value_parser = size_within(1, MAX_HEAD))]
    pub max_header_bytes: u64,
}

/// The longest request line the server takes: far past any real one (browsers stop
/// near 8k, nginx's largest buffers are 8k), and well inside every count.
const MAX_REQUEST_LINE: u64 = 1024 * 1024;
/// The largest request head the server takes.
const MAX_HEAD: u64 = 64 * 1024 * 1024;

/// A byte count with an optional `k`, `m` or `g` suffix (powers of 1024).
fn parse_size(text: &str) -> Result<u64, String> {
    let lower = text.to_ascii_lowercase();
    let (digits, unit) = match lower.as_bytes().last() {
        Some(b'k') => (&lower[..lower.len() - 1], 1024),
        Some(b'm') => (&lower[..lower.len() - 1], 1024 * 1024),
        Some(b'g') => (&lower[..lower.len() - 1], 1024 * 1024 * 1024),
        _ => (&lower[..], 1),
    };
    digits
        .parse::<u64>()
        .ok()
        .and_then(|n| n.checked_mul(unit))
        .ok_or_else(|| format!("{text:?} is not a size in bytes (such as 8192, 8k or 1m)"))
}

/// `off` (never), or a size from which bodies are sent with sendfile(2).
fn parse_sendfile_min(text: &str) -> Result<u64, String> {
    if text == "off" {
        return Ok(u64::MAX);
    }
    parse_size(text).map_err(|e| format!("{e}, or off"))
}

/// [`parse_size`], refusing a size outside `min..=max`.
fn size_within(min: u64, max: u64) -> impl Fn(&str) -> Result<u64, String> + Clone + Send + Sync + 'static {
    move |text| {
        let size = parse_size(text)?;
        if (min..=max).contains(&size) {
            Ok(size)
        } else {
            Err(format!("{text:?} is outside {min} to {max} bytes"))
        }
    }
}
