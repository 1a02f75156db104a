//! What `percore bench` says and sends: the report's header and units, status codes
//! counted by code, its exit status and why, request bodies and the URL as they go
//! on the wire, and the option values it refuses as usage errors.

#[path = "../../tests/util/mod.rs"]
mod util;

use std::io::{Read, Write};
use std::net::TcpStream;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use serde_json::{json, Value};
use util::{
    percore_bin, run_capturing_within, run_with_stdout_within, Finished, ScriptedServer, Server, TempFile,
};

/// Bound on a whole bench run: the runs here take at most a few seconds, but a
/// loaded 2-core CI machine may be much slower than that.
const BENCH_TIMEOUT: Duration = Duration::from_secs(30);

/// The percentiles the text report lists, as its `N%` lines.
const PERCENTILES: [&str; 10] = ["50", "66", "75", "80", "90", "95", "98", "99", "99.9", "100"];

fn bench(args: &[&str]) -> Finished {
    run_capturing_within(&percore_bin(), &[&["bench"], args].concat(), BENCH_TIMEOUT)
}

/// `percore bench ARGS --json`, which must exit with `status`, and its report.
fn bench_json_exiting(args: &[&str], status: i32) -> Value {
    let all = [args, &["--json"]].concat();
    let run = bench(&all);
    assert_eq!(run.status.code(), Some(status), "bench {all:?}: {}; stderr:\n{}", run.status, run.stderr);
    serde_json::from_str(&run.stdout)
        .unwrap_or_else(|e| panic!("bench {all:?}: no JSON ({e}):\n{}", run.stdout))
}

fn count(report: &Value, pointer: &str) -> u64 {
    report.pointer(pointer).and_then(Value::as_u64).unwrap_or_else(|| panic!("no {pointer} in:\n{report:#}"))
}

/// A server whose connections answer each request head (up to its blank line) with
/// the next of `answers`, in turn, or never if there are none; every byte received
/// is kept in the returned buffer (the first 64 KiB).
fn answering(answers: &'static [&'static [u8]]) -> (ScriptedServer, Arc<Mutex<Vec<u8>>>) {
    let received = Arc::new(Mutex::new(Vec::new()));
    let kept = Arc::clone(&received);
    let server = ScriptedServer::start(move |mut stream: TcpStream| {
        let _ = stream.set_read_timeout(Some(Duration::from_secs(30)));
        let (mut buf, mut pending, mut answered) = ([0u8; 4096], Vec::new(), 0);
        while let Ok(n @ 1..) = stream.read(&mut buf) {
            if let Ok(mut kept) = kept.lock() {
                let room = (64 * 1024usize).saturating_sub(kept.len()).min(n);
                kept.extend_from_slice(&buf[..room]);
            }
            // A body (one test's POST, alone on its connection) has no blank line.
            pending.extend_from_slice(&buf[..n]);
            while let Some(end) = pending.windows(4).position(|w| w == b"\r\n\r\n") {
                pending.drain(..end + 4);
                let Some(answer) = answers.get(answered % answers.len().max(1)) else { continue };
                answered += 1;
                if stream.write_all(answer).is_err() {
                    return;
                }
            }
        }
    });
    (server, received)
}

const OK: &[u8] = b"HTTP/1.1 200 OK\r\nContent-Length: 0\r\n\r\n";

// ---------------------------------------------------------------------------
// The report.

#[test]
fn json_report_says_what_ran() {
    let server = Server::percore(&["--workers", "1"]);
    let url = format!("http://{}/", server.addr());
    // Four threads asked for, three connections: a thread per connection.
    let report = bench_json_exiting(&[&url, "-n", "100", "-c", "3", "-t", "4", "--pipeline", "4"], 0);
    assert_eq!(report["format"], "percore-bench/1", "{report:#}");
    let run = &report["runs"][0];
    assert_eq!(
        (run["url"].as_str(), run["method"].as_str()),
        (Some(url.as_str()), Some("GET")),
        "{report:#}"
    );
    assert_eq!((run["mode"].as_str(), count(run, "/pipeline")), (Some("pipeline"), 4), "{report:#}");
    assert_eq!((count(run, "/threads"), count(run, "/connections")), (3, 3), "{report:#}");
    assert_eq!(
        (count(run, "/stop/requests"), report["interrupted"].as_bool()),
        (100, Some(false)),
        "{report:#}"
    );
    assert!(report["started_at"].as_str().is_some_and(|t| t.ends_with('Z')), "{report:#}");
}

#[test]
fn a_report_nobody_reads_is_no_failure_but_one_that_cannot_be_written_is() {
    let (server, _) = answering(&[OK]);
    let url = server.url();
    let args = ["bench", url.as_str(), "-n", "10", "-c", "1", "-t", "1"];
    // `percore bench ... | head -0`: the reader is gone before the report comes.
    let (reader, writer) = std::io::pipe().expect("a pipe");
    drop(reader);
    let run = run_with_stdout_within(&percore_bin(), &args, writer.into(), BENCH_TIMEOUT);
    assert_eq!(run.status.code(), Some(0), "{}; stderr:\n{}", run.status, run.stderr);
    // A full disk loses the report: that is a failure, and says so.
    let full = std::fs::File::options().write(true).open("/dev/full").expect("opening /dev/full");
    let run = run_with_stdout_within(&percore_bin(), &args, full.into(), BENCH_TIMEOUT);
    assert_eq!(run.status.code(), Some(1), "{}; stderr:\n{}", run.status, run.stderr);
    assert!(run.stderr.contains("cannot print the report"), "{}", run.stderr);
}

#[test]
fn text_report_says_what_ran_with_latencies_in_human_units() {
    let server = Server::percore(&["--workers", "1"]);
    let url = format!("http://{}/", server.addr());
    let run = bench(&[&url, "-n", "100", "-c", "2", "-t", "1"]);
    assert!(run.status.success(), "bench failed ({}); stderr:\n{}", run.status, run.stderr);
    let first = run.stdout.lines().next().unwrap_or_default();
    assert_eq!(
        first,
        format!("GET {url}: 100 requests, 1 thread, 2 connections, keep-alive"),
        "{}",
        run.stdout
    );
    assert!(run.stdout.contains("\nstatus codes:    200 100\n"), "{}", run.stdout);
    for percentile in PERCENTILES {
        // Each value in µs, ms or s, never a bare number of microseconds.
        let label = format!("{percentile}%");
        let line = run.stdout.lines().find(|line| line.trim_start().starts_with(&label));
        let unit = line.is_some_and(|l| ["µs", "ms", "s"].iter().any(|u| l.ends_with(u)));
        assert!(unit, "no {label} line with a unit in:\n{}", run.stdout);
    }
    let latency = run.stdout.lines().find(|l| l.starts_with("latency:")).unwrap_or_default();
    assert_eq!(latency.matches("µs").count() + latency.matches("ms").count(), 4, "{latency}");
}

#[test]
fn status_codes_are_counted_by_code_and_redirects_are_no_failure() {
    static ANSWERS: [&[u8]; 3] = [
        OK,
        b"HTTP/1.1 302 Found\r\nLocation: /x\r\nContent-Length: 0\r\n\r\n",
        b"HTTP/1.1 404 Not Found\r\nContent-Length: 0\r\n\r\n",
    ];
    let (server, _) = answering(&ANSWERS[..2]);
    let report = bench_json_exiting(&[&server.url(), "-n", "100", "-c", "1", "-t", "1"], 0);
    assert_eq!(report["status"], json!({ "200": 50, "302": 50 }), "{report:#}");
    assert_eq!(count(&report, "/non_2xx_3xx"), 0, "{report:#}");
    let (server, _) = answering(&ANSWERS);
    let report = bench_json_exiting(&[&server.url(), "-n", "99", "-c", "1", "-t", "1"], 1);
    assert_eq!(report["status"], json!({ "200": 33, "302": 33, "404": 33 }), "{report:#}");
    assert_eq!(count(&report, "/non_2xx_3xx"), 33, "{report:#}");
}

// ---------------------------------------------------------------------------
// Exit status.

#[test]
fn a_run_whose_requests_all_failed_exits_1_and_says_why() {
    let (server, _) = answering(&[b"NOT HTTP\r\n\r\n"]);
    let run = bench(&[&server.url(), "-n", "5", "-c", "1", "-t", "1"]);
    assert_eq!(run.status.code(), Some(1), "stderr:\n{}", run.stderr);
    assert!(run.stderr.contains("requests failed (--fail-on any)"), "stderr:\n{}", run.stderr);
    assert!(run.stdout.contains("errors:"), "the report is printed all the same:\n{}", run.stdout);
    // Unless nothing is to fail it.
    let (server, _) = answering(&[]);
    let report = bench_json_exiting(
        &[&server.url(), "-n", "1", "-t", "1", "--timeout", "0.2", "--fail-on", "never"],
        0,
    );
    assert_eq!(count(&report, "/errors/timeout"), 1, "{report:#}");
}

// ---------------------------------------------------------------------------
// What goes on the wire: bodies, the URL.

/// Runs one request against a server answering 200 and returns what it received.
fn one_request(url_tail: &str, args: &[&str]) -> String {
    let (server, received) = answering(&[OK]);
    let url = format!("http://{}{url_tail}", server.addr());
    bench_json_exiting(&[&[url.as_str(), "-n", "1", "-c", "1", "-t", "1"], args].concat(), 0);
    drop(server);
    let bytes = received.lock().map(|r| r.clone()).unwrap_or_default();
    String::from_utf8_lossy(&bytes).into_owned()
}

#[test]
fn a_body_goes_with_its_length_and_type_and_makes_the_method_post() {
    let request = one_request("/submit", &["-b", "hello", "-T", "text/plain"]);
    assert!(request.starts_with("POST /submit HTTP/1.1\r\n"), "{request:?}");
    assert!(request.contains("\r\nContent-Type: text/plain\r\n"), "{request:?}");
    assert!(request.ends_with("\r\nContent-Length: 5\r\n\r\nhello"), "{request:?}");
    let file = TempFile::with_contents(b"{\"a\":1}");
    let request = one_request("/", &["--body-file", file.path(), "-m", "PUT"]);
    assert!(request.starts_with("PUT / HTTP/1.1\r\n"), "{request:?}");
    assert!(request.ends_with("\r\nContent-Length: 7\r\n\r\n{\"a\":1}"), "{request:?}");
}

#[test]
fn the_url_is_parsed_as_a_browser_would() {
    // A fragment stays with the client; a space is percent-encoded.
    let request = one_request("/a b?q=1#frag", &[]);
    assert!(request.starts_with("GET /a%20b?q=1 HTTP/1.1\r\nHost: 127.0.0.1:"), "{request:?}");
    // Credentials are not taken for the host: refused, as a usage error.
    let run = bench(&["http://user@127.0.0.1:9/", "-n", "1"]);
    assert_eq!(run.status.code(), Some(2), "stderr:\n{}", run.stderr);
    assert!(run.stderr.contains("user and password"), "stderr:\n{}", run.stderr);
}

// ---------------------------------------------------------------------------
// Options checked at parse.

#[test]
fn timeouts_take_fractions_and_units() {
    for (timeout, seconds) in [("1.5", 1.5), ("500ms", 0.5), ("2s", 2.0)] {
        let (server, _) = answering(&[]);
        let report = bench_json_exiting(&[&server.url(), "-n", "1", "-t", "1", "--timeout", timeout], 1);
        assert_eq!(count(&report, "/errors/timeout"), 1, "--timeout {timeout}: {report:#}");
        assert_eq!(report["runs"][0]["timeout_s"].as_f64(), Some(seconds), "--timeout {timeout}: {report:#}");
    }
}

#[test]
fn out_of_range_numbers_and_unsafe_values_are_usage_errors_not_panics() {
    // Parsing fails before any connection, so nothing needs to listen here.
    let target = "http://127.0.0.1:9/";
    let cases: [&[&str]; 16] = [
        &["--rate", "1e-300"],
        &["--rate", "nan"],
        &["--rate", "0"],
        &["-t", "0"],
        &["-t", "100000000000"],
        &["-c", "0"],
        &["-c", "100000000000"],
        &["--pipeline", "0"],
        &["--pipeline", "10000000"],
        &["--timeout", "0"],
        &["--timeout", "1e9"],
        &["-d", "0s"],
        &["--max-response-size", "0"],
        &["--start-at", "tomorrow"],
        &["-H", "X: a\r\nY: b"],
        &["-m", "GET /"],
    ];
    for args in cases {
        let all = [&[target], args].concat();
        let run = bench(&all);
        assert_eq!(run.status.code(), Some(2), "bench {all:?}: {}; stderr:\n{}", run.status, run.stderr);
    }
}
