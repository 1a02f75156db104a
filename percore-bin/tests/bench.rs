//! `percore bench`, the load generator: counts against a running percore in
//! every mode, how it counts odd responses of a small canned server defined
//! here, a fixed rate, both report formats, and its errors. What the report says
//! and the options are in bench_report.rs; servers that attack it in
//! bench_hostile.rs; Ctrl-C, the interval log and its merge in bench_runs.rs.

#[path = "../../tests/util/mod.rs"]
mod util;

use std::io::{Read, Write};
use std::net::{Shutdown, SocketAddr, TcpListener, TcpStream};
use std::path::Path;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Condvar, Mutex};
use std::thread::{self, JoinHandle};
use std::time::{Duration, Instant};

use serde_json::Value;
use util::{
    percore_bin, run_capturing_within, signal, stopped_lines, Finished, ScriptedServer, Server, WAIT,
};

/// Bound on a whole bench run: the runs here take at most a few seconds, but a
/// loaded 2-core CI machine may be much slower than that.
const BENCH_TIMEOUT: Duration = Duration::from_secs(30);

/// Bound on a run that must fail promptly (refused or unresolvable target).
const PROMPT_FAILURE: Duration = Duration::from_secs(15);

/// How long a canned-server connection waits for a request before giving up,
/// so that no connection thread outlives its test for long, whatever happens.
const CANNED_READ_TIMEOUT: Duration = Duration::from_secs(30);

/// Every number of the JSON report but the percentiles, as JSON pointers.
const JSON_FIELDS: [&str; 16] = [
    "/requests",
    "/duration_s",
    "/requests_per_sec",
    "/bytes_read",
    "/bytes_per_sec",
    "/non_2xx_3xx",
    "/errors/connect",
    "/errors/read",
    "/errors/write",
    "/errors/timeout",
    "/errors/parse",
    "/errors/total",
    "/latency_us/min",
    "/latency_us/mean",
    "/latency_us/stdev",
    "/latency_us/max",
];

/// A plain 200 with a body of two bytes.
const OK_RESPONSE: &[u8] = b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok";

/// The percentiles both reports list: keys under `/latency_us/percentiles` of
/// the JSON one, `N%` lines of the text one.
const PERCENTILES: [&str; 10] = ["50", "66", "75", "80", "90", "95", "98", "99", "99.9", "100"];

// ---------------------------------------------------------------------------
// Running bench.

/// `percore bench ARGS`, to its exit within [`BENCH_TIMEOUT`].
fn bench(args: &[&str]) -> Finished {
    bench_within(args, BENCH_TIMEOUT)
}

fn bench_within(args: &[&str], timeout: Duration) -> Finished {
    let mut all = vec!["bench"];
    all.extend_from_slice(args);
    run_capturing_within(&percore_bin(), &all, timeout)
}

/// `percore bench ARGS --json`, which must exit with `status`, and its report.
fn bench_json_exiting(args: &[&str], status: i32) -> Value {
    let mut all = args.to_vec();
    all.push("--json");
    let run = bench(&all);
    assert_eq!(run.status.code(), Some(status), "bench {all:?}: {}; stderr:\n{}", run.status, run.stderr);
    serde_json::from_str(&run.stdout)
        .unwrap_or_else(|e| panic!("bench {all:?} printed no JSON object ({e}):\n{}", run.stdout))
}

/// `percore bench ARGS --json`, which must succeed, and its parsed report.
fn bench_json(args: &[&str]) -> Value {
    bench_json_exiting(args, 0)
}

/// The non-negative integer at `pointer` in a JSON report.
fn count(report: &Value, pointer: &str) -> u64 {
    report
        .pointer(pointer)
        .and_then(Value::as_u64)
        .unwrap_or_else(|| panic!("no count at {pointer} in the report:\n{report:#}"))
}

fn url(addr: SocketAddr) -> String {
    format!("http://{addr}/")
}

/// A percore server with one worker, which is enough for these loads and
/// leaves the other CPU to bench.
fn percore() -> Server {
    Server::percore(&["--workers", "1"])
}

// ---------------------------------------------------------------------------
// A canned server: answers every request head with the same bytes.

/// How a [`canned_server`] connection answers.
#[derive(Clone)]
struct Canned {
    /// Sent for each request head (everything up to its blank line); never, if empty.
    response: &'static [u8],
    /// Close the connection after its first answer.
    close_after: bool,
    /// Answer only once this many requests are waiting, then all of them.
    batch: usize,
    /// Shared by every connection: a time when no one answers.
    stall: Option<Arc<Stall>>,
    /// Shared by every connection: answers go out in rounds, one per connection.
    rounds: Option<Arc<Rounds>>,
}

impl Canned {
    /// Answers every request at once with `response`.
    fn answering(response: &'static [u8]) -> Canned {
        Canned { response, close_after: false, batch: 1, stall: None, rounds: None }
    }
}

/// A server-wide stall: once `after` answers were sent, no connection answers for `length`.
struct Stall {
    after: usize,
    length: Duration,
    answered: AtomicUsize,
    until: Mutex<Option<Instant>>,
}

impl Stall {
    fn new(after: usize, length: Duration) -> Stall {
        Stall { after, length, answered: AtomicUsize::new(0), until: Mutex::new(None) }
    }

    /// Called before each answer: waits out the stall, starting it at the right answer.
    fn before_answer(&self) {
        let answered = self.answered.fetch_add(1, Ordering::SeqCst);
        let until = {
            let mut until = self.until.lock().unwrap();
            if answered == self.after {
                *until = Some(Instant::now() + self.length);
            }
            *until
        };
        if let Some(until) = until {
            thread::sleep(until.saturating_duration_since(Instant::now()));
        }
    }
}

/// Server-wide rounds: a connection's request is answered only once `size`
/// connections each have one waiting, then all of theirs at once.
struct Rounds {
    size: usize,
    /// Requests waiting in the round under way, and how many rounds were answered.
    state: Mutex<(usize, usize)>,
    answered: Condvar,
}

impl Rounds {
    fn new(size: usize) -> Rounds {
        Rounds { size, state: Mutex::new((0, 0)), answered: Condvar::new() }
    }

    /// Called before a connection's answer: waits for its round to fill (at most
    /// [`CANNED_READ_TIMEOUT`], so that no thread outlives its test for long).
    fn before_answer(&self) {
        let mut state = self.state.lock().unwrap();
        let round = state.1;
        state.0 += 1;
        if state.0 == self.size {
            *state = (0, round + 1);
            self.answered.notify_all();
            return;
        }
        let _ = self.answered.wait_timeout_while(state, CANNED_READ_TIMEOUT, |state| state.1 == round);
    }
}

/// A server on an ephemeral loopback port whose connections answer as `canned` says.
/// Connection threads end by themselves when bench closes its connections (or
/// after [`CANNED_READ_TIMEOUT`]).
fn canned_server(canned: Canned) -> ScriptedServer {
    ScriptedServer::start(move |stream| answer_requests(stream, &canned))
}

/// `percore bench URL ARGS --json` against a [`canned_server`] answering as `canned` says.
fn bench_canned(canned: Canned, args: &[&str]) -> Value {
    bench_canned_exiting(canned, args, 0)
}

/// As [`bench_canned`], for a run that must exit with `status`.
fn bench_canned_exiting(canned: Canned, args: &[&str], status: i32) -> Value {
    let server = canned_server(canned);
    bench_json_exiting(&[&[server.url().as_str()], args].concat(), status)
}

/// Reads once from `stream` and returns how many request heads are now whole, taking
/// them from `pending`; None once the peer closed. bench sends GETs without a body,
/// so a request ends at its blank line.
fn read_request_heads(stream: &mut TcpStream, pending: &mut Vec<u8>) -> Option<usize> {
    let mut buf = [0u8; 4096];
    match stream.read(&mut buf) {
        Ok(0) | Err(_) => return None,
        Ok(n) => pending.extend_from_slice(&buf[..n]),
    }
    let mut heads = 0;
    while let Some(end) = pending.windows(4).position(|w| w == b"\r\n\r\n") {
        pending.drain(..end + 4);
        heads += 1;
    }
    Some(heads)
}

/// One connection of [`canned_server`]: reads request heads (pipelined ones
/// included) until the peer closes, answering them as `canned` says.
fn answer_requests(mut stream: TcpStream, canned: &Canned) {
    stream.set_read_timeout(Some(CANNED_READ_TIMEOUT)).unwrap();
    let (mut pending, mut waiting) = (Vec::new(), 0);
    loop {
        let Some(heads) = read_request_heads(&mut stream, &mut pending) else { return };
        waiting += heads;
        if canned.response.is_empty() || waiting < canned.batch {
            continue;
        }
        for _ in 0..std::mem::take(&mut waiting) {
            if let Some(stall) = &canned.stall {
                stall.before_answer();
            }
            if let Some(rounds) = &canned.rounds {
                rounds.before_answer();
            }
            if stream.write_all(canned.response).is_err() {
                return;
            }
            if canned.close_after {
                let _ = stream.shutdown(Shutdown::Write);
                return;
            }
        }
    }
}

// ---------------------------------------------------------------------------
// Against percore: exact counts in every mode.

/// `-n 1000` in the mode `mode` against percore: every request answered once,
/// with no error and no non-2xx. Returns the connections the server accepted, from
/// its `stopped` line once it stopped, and checks it saw the 1000 requests.
fn assert_clean_thousand(mode: &[&str]) -> u64 {
    let mut server = percore();
    let target = url(server.addr());
    let mut args = vec![target.as_str(), "-n", "1000", "-t", "1"];
    args.extend_from_slice(mode);
    let report = bench_json(&args);
    assert_eq!(count(&report, "/requests"), 1000, "{mode:?}: {report:#}");
    assert_eq!(count(&report, "/errors/total"), 0, "{mode:?}: {report:#}");
    assert_eq!(count(&report, "/non_2xx_3xx"), 0, "{mode:?}: {report:#}");
    assert_eq!(count(&report, "/status/200"), 1000, "{mode:?}: {report:#}");
    assert!(count(&report, "/bytes_read") > 0, "{mode:?}: {report:#}");
    signal(server.pid(), "TERM");
    server.wait_exit(WAIT);
    let stopped = stopped_lines(&server.wait_stderr_closed(WAIT));
    assert_eq!(stopped.len(), 1, "{stopped:?}");
    assert_eq!(stopped[0].requests, 1000, "{mode:?}: the server's count: {stopped:?}");
    stopped[0].connections
}

/// The connection bench opens first, alone, to check the target is there: the
/// server may count it (it sends no request).
const PROBE: u64 = 1;

#[test]
fn keep_alive_counts_exactly_n_requests_on_its_connections() {
    let connections = assert_clean_thousand(&["-c", "10"]);
    assert!(connections <= 10 + PROBE, "{connections} connections for keep-alive with -c 10");
}

#[test]
fn pipelined_counts_exactly_n_requests_on_its_connections() {
    let connections = assert_clean_thousand(&["--pipeline", "16", "-c", "4"]);
    assert!(connections <= 4 + PROBE, "{connections} connections for -c 4");
}

#[test]
fn close_mode_opens_a_connection_per_request() {
    let connections = assert_clean_thousand(&["--close", "-c", "10"]);
    // A replacement is opened only for a request left to send: near the end, the
    // connections closed outnumber the requests left.
    let most = 1000 + PROBE;
    assert!((1000..=most).contains(&connections), "{connections} connections for 1000 requests");
}

#[test]
fn close_mode_replaces_every_closed_connection_at_once() {
    // Answered in rounds of 5 connections together: were a closed connection not
    // replaced, the next round would never fill and its requests would time out.
    let rounds = Some(Arc::new(Rounds::new(5)));
    let canned = Canned { close_after: true, rounds, ..Canned::answering(OK_RESPONSE) };
    let report = bench_canned(canned, &["-n", "20", "-c", "5", "-t", "1", "--close", "--timeout", "5s"]);
    assert_eq!((count(&report, "/requests"), count(&report, "/errors/total")), (20, 0), "{report:#}");
}

#[test]
fn pipeline_sends_the_whole_depth_before_any_answer() {
    // The server answers only once it holds 16 requests: a bench that sent fewer at a
    // time would get no answer and time out.
    let canned = Canned { batch: 16, ..Canned::answering(OK_RESPONSE) };
    let args = ["-n", "64", "-c", "2", "-t", "1", "--pipeline", "16", "--timeout", "5"];
    let report = bench_canned(canned, &args);
    assert_eq!(count(&report, "/requests"), 64, "{report:#}");
    assert_eq!(count(&report, "/errors/total"), 0, "{report:#}");
}

// ---------------------------------------------------------------------------
// Against the canned server: how odd responses count.

#[test]
fn chunked_bodies_are_framed_and_counted() {
    const RESPONSE: &[u8] = b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n5\r\nhello\r\n0\r\n\r\n";
    let report = bench_canned(Canned::answering(RESPONSE), &["-n", "200", "-c", "2", "-t", "1"]);
    assert_eq!(count(&report, "/requests"), 200, "{report:#}");
    assert_eq!(count(&report, "/errors/total"), 0, "{report:#}");
    // Every byte of each response (head and chunks) counted, no more.
    assert_eq!(count(&report, "/bytes_read"), 200 * RESPONSE.len() as u64, "{report:#}");
}

#[test]
fn connection_close_answers_make_keep_alive_reconnect() {
    const RESPONSE: &[u8] = b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\nConnection: close\r\n\r\nok";
    let report = bench_canned(
        Canned { close_after: true, ..Canned::answering(RESPONSE) },
        &["-n", "100", "-c", "4", "-t", "1"],
    );
    assert_eq!(count(&report, "/requests"), 100, "{report:#}");
    assert_eq!(count(&report, "/errors/total"), 0, "{report:#}");
}

#[test]
fn server_errors_count_as_non_2xx_3xx_not_errors_and_fail_the_run() {
    const RESPONSE: &[u8] = b"HTTP/1.1 500 Internal Server Error\r\nContent-Length: 0\r\n\r\n";
    let args = ["-n", "100", "-c", "2", "-t", "1"];
    let report = bench_canned_exiting(Canned::answering(RESPONSE), &args, 1);
    assert_eq!(count(&report, "/requests"), 100, "{report:#}");
    assert_eq!((count(&report, "/non_2xx_3xx"), count(&report, "/status/500")), (100, 100), "{report:#}");
    assert_eq!(count(&report, "/errors/total"), 0, "{report:#}");
    // Only errors fail the run when --fail-on says so: a 500 is then an answer.
    bench_canned(Canned::answering(RESPONSE), &[&args[..], &["--fail-on", "errors"]].concat());
}

#[test]
fn unanswered_requests_time_out_and_the_run_ends() {
    // An empty response: the server reads every request and never answers.
    // bench_json's bounded wait is the check that the run ends by itself:
    // 4 requests, 2 at a time, each given up after 1 s; every one failed (status 1).
    let args = ["-n", "4", "-c", "2", "-t", "1", "--timeout", "1"];
    let report = bench_canned_exiting(Canned::answering(b""), &args, 1);
    assert_eq!(count(&report, "/errors/timeout"), 4, "{report:#}");
    assert_eq!(count(&report, "/requests"), 0, "{report:#}");
}

#[test]
fn garbage_answers_count_as_parse_errors_and_the_run_ends() {
    // As above, bench_json's bounded wait checks that the run ends by itself.
    let args = ["-n", "20", "-c", "2", "-t", "1"];
    let report = bench_canned_exiting(Canned::answering(b"NOT HTTP\r\n\r\n"), &args, 1);
    assert!(count(&report, "/errors/parse") > 0, "{report:#}");
}

// ---------------------------------------------------------------------------
// A fixed rate.

#[test]
fn fixed_rate_sends_the_rate_times_the_duration() {
    let server = percore();
    let report = bench_json(&[&url(server.addr()), "--rate", "200", "-d", "3s", "-c", "10", "-t", "1"]);
    // 200/s for 3 s, within the 5% the rate promises.
    let requests = count(&report, "/requests");
    assert!((570..=630).contains(&requests), "{requests} requests, not 600 ± 5%: {report:#}");
}

#[test]
fn fixed_rate_latency_counts_from_the_due_time_so_a_stall_shows_in_the_tail() {
    // 200/s for 3 s on 10 connections, and a server that answers no one for 1 s after
    // its 200th answer: some 200 requests fall due during the stall. Counted from when
    // each was due they take up to a second, the last tenth of all of them over half
    // of one; counted from when each could be sent, only the 10 in flight when the
    // stall began would be slow.
    let canned = Canned {
        stall: Some(Arc::new(Stall::new(200, Duration::from_secs(1)))),
        ..Canned::answering(OK_RESPONSE)
    };
    let report = bench_canned(canned, &["--rate", "200", "-d", "3s", "-c", "10", "-t", "1"]);
    assert_eq!(count(&report, "/errors/total"), 0, "{report:#}");
    let p90 = count(&report, "/latency_us/percentiles/90");
    assert!(p90 >= 500_000, "the 90th percentile is {p90} µs, under half the 1 s stall: {report:#}");
}

// ---------------------------------------------------------------------------
// Report formats.

#[test]
fn json_report_has_every_field() {
    let server = percore();
    let report = bench_json(&[&url(server.addr()), "-n", "100", "-c", "2", "-t", "1"]);
    let percentiles = PERCENTILES.iter().map(|p| format!("/latency_us/percentiles/{p}"));
    for pointer in JSON_FIELDS.iter().map(|p| p.to_string()).chain(percentiles) {
        let value = report.pointer(&pointer);
        assert!(value.is_some_and(Value::is_number), "{pointer} is not a number in:\n{report:#}");
    }
}

#[test]
fn text_report_has_the_rate_and_every_percentile() {
    let server = percore();
    let run = bench(&[&url(server.addr()), "-n", "100", "-c", "2", "-t", "1"]);
    assert!(run.status.success(), "bench failed ({}); stderr:\n{}", run.status, run.stderr);
    assert!(run.stdout.contains("requests/s"), "no requests/s in:\n{}", run.stdout);
    for percentile in PERCENTILES {
        // `99%` must not be taken for `99.9%`, hence whole labels at a line start.
        let label = format!("{percentile}%");
        assert!(
            run.stdout.lines().any(|line| line.trim_start().starts_with(&label)),
            "no {label} line in:\n{}",
            run.stdout
        );
    }
}

// ---------------------------------------------------------------------------
// Failures.

/// Runs bench, which must fail promptly with exit status 1, and returns its stderr.
fn bench_failure(target: &str) -> String {
    let run = bench_within(&[target, "-n", "10", "-c", "1", "-t", "1", "--json"], PROMPT_FAILURE);
    assert_eq!(run.status.code(), Some(1), "bench {target}: {}; stdout:\n{}", run.status, run.stdout);
    run.stderr
}

#[test]
fn nothing_listening_is_one_clear_error() {
    // A port that was just free: bound, then released.
    let addr = TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap();
    let stderr = bench_failure(&url(addr));
    let lines: Vec<&str> = stderr.lines().filter(|line| !line.trim().is_empty()).collect();
    assert_eq!(lines.len(), 1, "expected one error line, got:\n{stderr}");
    assert!(lines[0].contains("cannot connect"), "stderr:\n{stderr}");
}

#[test]
fn unresolvable_host_is_an_error() {
    let stderr = bench_failure("http://no-such-host.invalid/");
    assert!(stderr.contains("cannot resolve"), "stderr:\n{stderr}");
}

#[test]
fn conflicting_options_are_usage_errors() {
    // Parsing fails before any connection, so nothing needs to listen here.
    let target = "http://127.0.0.1:9/";
    for args in [["-d", "3s", "-n", "10"].as_slice(), &["--close", "--pipeline", "4", "-n", "10"]] {
        let mut all = vec![target, "-t", "1"];
        all.extend_from_slice(args);
        let run = bench(&all);
        assert_eq!(run.status.code(), Some(2), "bench {all:?}: {}; stderr:\n{}", run.status, run.stderr);
    }
}

/// A listener that takes bench's first connection, which it hands to `serve` once
/// the listener is closed: any connection bench opens after it is refused.
fn one_connection_then_none(serve: impl FnOnce(TcpStream) + Send + 'static) -> (SocketAddr, JoinHandle<()>) {
    let listener = TcpListener::bind("127.0.0.1:0").expect("binding a loopback listener");
    let addr = listener.local_addr().unwrap();
    let server = thread::spawn(move || {
        let (stream, _) = listener.accept().expect("bench's first connection");
        drop(listener);
        stream.set_read_timeout(Some(CANNED_READ_TIMEOUT)).unwrap();
        serve(stream);
    });
    (addr, server)
}

#[test]
fn a_close_before_the_answer_is_a_read_error_and_a_refused_connection_a_connect_error() {
    // The one connection is closed once its request is read, unanswered; the ones
    // bench opens to replace it are refused. Both fail the run (exit status 1).
    let (addr, server) = one_connection_then_none(|mut stream| {
        let _ = read_request_heads(&mut stream, &mut Vec::new());
    });
    let report = bench_json_exiting(&[&url(addr), "-n", "10", "-c", "1", "-t", "1", "--timeout", "5"], 1);
    server.join().expect("the server thread");
    assert_eq!(count(&report, "/requests"), 0, "{report:#}");
    assert_eq!(count(&report, "/errors/read"), 1, "{report:#}");
    assert!(count(&report, "/errors/connect") >= 1, "{report:#}");
    for kind in ["write", "timeout", "parse"] {
        assert_eq!(count(&report, &format!("/errors/{kind}")), 0, "{kind}: {report:#}");
    }
}

#[test]
fn connections_that_cannot_be_opened_are_connect_errors_and_the_rest_carry_the_load() {
    // 32 descriptors: the 50 connections asked for do not all fit, and the sockets
    // past the limit fail at once (EMFILE), before any connect.
    let server = percore();
    let target = url(server.addr());
    let percore = percore_bin();
    let args = ["--nofile=32:32", "--", percore.to_str().expect("a UTF-8 path"), "bench"];
    let run = run_capturing_within(
        Path::new("prlimit"),
        &[&args[..], &[&target, "-n", "200", "-c", "50", "-t", "1", "--json"]].concat(),
        BENCH_TIMEOUT,
    );
    assert_eq!(run.status.code(), Some(1), "{}; stderr:\n{}", run.status, run.stderr);
    let report: Value = serde_json::from_str(&run.stdout).unwrap_or_else(|e| panic!("{e}: {}", run.stdout));
    let connect = count(&report, "/errors/connect");
    assert!((1..50).contains(&connect), "{connect} of 50 connections failed: {report:#}");
    assert_eq!((count(&report, "/requests"), count(&report, "/errors/total")), (200, connect), "{report:#}");
}

#[test]
fn the_first_connection_a_server_sees_carries_a_request() {
    // No connection is opened only to see whether the target is there: a server
    // that answers one connection answers the run's, and sees no empty one.
    let (addr, server) = one_connection_then_none(|mut stream| {
        let mut heads = Vec::new();
        let got = read_request_heads(&mut stream, &mut heads);
        assert!(got.is_some_and(|n| n >= 1), "the first connection sent no request: {heads:?}");
        let _ = stream.write_all(b"HTTP/1.1 200 OK\r\nContent-Length: 0\r\n\r\n");
    });
    let report = bench_json_exiting(&[&url(addr), "-n", "1", "-c", "1", "-t", "1"], 0);
    server.join().expect("the server thread: its connection carried a request");
    assert_eq!(count(&report, "/requests"), 1, "{report:#}");
}

#[test]
fn a_head_that_arrives_slowly_is_waited_for_as_long_as_the_timeout_says() {
    // 13 s between the status line and the rest: past every timeout of the loop's
    // own (a server's 10 s for a request head), well within --timeout 25.
    let (addr, server) = one_connection_then_none(|mut stream| {
        let _ = read_request_heads(&mut stream, &mut Vec::new());
        let _ = stream.write_all(b"HTTP/1.1 200 OK\r\n");
        thread::sleep(Duration::from_secs(13));
        let _ = stream.write_all(b"Content-Length: 0\r\n\r\n");
    });
    let report = bench_json_exiting(&[&url(addr), "-n", "1", "-c", "1", "-t", "1", "--timeout", "25"], 0);
    server.join().expect("the server thread");
    assert_eq!((count(&report, "/requests"), count(&report, "/errors/total")), (1, 0), "{report:#}");
}

#[test]
fn a_reset_while_requests_are_still_unsent_is_a_write_error() {
    // 300,000 pipelined requests, 11 MB in one write: far more than the socket
    // buffers take, so most are still queued in bench when the server, having read
    // a little, resets the connection.
    const PIPELINED: &str = "300000";
    let (addr, server) = one_connection_then_none(|mut stream| {
        let _ = stream.read(&mut [0u8; 1024]);
        socket2::SockRef::from(&stream).set_linger(Some(Duration::ZERO)).expect("SO_LINGER 0");
        // Closed with SO_LINGER 0: a reset, not an end of stream.
        drop(stream);
    });
    let args = [&url(addr), "-n", PIPELINED, "--pipeline", PIPELINED, "-c", "1", "-t", "1", "--timeout", "5"];
    let report = bench_json_exiting(&args, 1);
    server.join().expect("the server thread");
    assert_eq!(count(&report, "/requests"), 0, "{report:#}");
    assert_eq!(count(&report, "/errors/write"), 300_000, "every request in flight is lost: {report:#}");
    for kind in ["connect", "read", "timeout", "parse"] {
        assert_eq!(count(&report, &format!("/errors/{kind}")), 0, "{kind}: {report:#}");
    }
}
