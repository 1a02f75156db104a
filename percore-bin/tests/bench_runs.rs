//! `percore bench` as a run that lives beyond one command: Ctrl-C ends it with its
//! report, `--hdr-log` keeps its latencies in HdrHistogram's interval log (read
//! back here with the hdrhistogram crate's own reader), `percore bench merge` adds
//! runs up exactly, `--start-at` waits for a wall-clock instant, `--plot` draws.

#[path = "../../tests/util/mod.rs"]
mod util;

use std::io::{Read, Write};
use std::net::TcpStream;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use base64::Engine as _;
use hdrhistogram::serialization::interval_log::{IntervalLogIterator, LogEntry};
use hdrhistogram::serialization::Deserializer;
use hdrhistogram::Histogram;
use serde_json::Value;
use util::{
    cpus_allowed, percore_bin, run_capturing_within, signal, signal_pending, thread_cpus_allowed, wait_until,
    Finished, Running, ScriptedServer, Server, TempFile, WAIT,
};

/// Bound on a whole bench run: the runs here take at most a few seconds, but a
/// loaded 2-core CI machine may be much slower than that.
const BENCH_TIMEOUT: Duration = Duration::from_secs(30);

const SIGINT: u32 = 2;

fn bench(args: &[&str]) -> Finished {
    let all = [&["bench"], args].concat();
    run_capturing_within(&percore_bin(), &all, BENCH_TIMEOUT)
}

fn json_of(run: &Finished) -> Value {
    assert!(run.status.success(), "bench failed ({}); stderr:\n{}", run.status, run.stderr);
    serde_json::from_str(&run.stdout).unwrap_or_else(|e| panic!("no JSON report ({e}):\n{}", run.stdout))
}

fn count(report: &Value, pointer: &str) -> u64 {
    report.pointer(pointer).and_then(Value::as_u64).unwrap_or_else(|| panic!("no {pointer} in:\n{report:#}"))
}

/// A server that answers every request head with a 200, and counts them.
fn counting_server() -> (ScriptedServer, Arc<AtomicU64>) {
    let answered = Arc::new(AtomicU64::new(0));
    let counter = Arc::clone(&answered);
    let server = ScriptedServer::start(move |mut stream: TcpStream| {
        let _ = stream.set_read_timeout(Some(Duration::from_secs(30)));
        let (mut buf, mut tail) = ([0u8; 4096], Vec::new());
        while let Ok(n @ 1..) = stream.read(&mut buf) {
            tail.extend_from_slice(&buf[..n]);
            while let Some(end) = tail.windows(4).position(|w| w == b"\r\n\r\n") {
                tail.drain(..end + 4);
                counter.fetch_add(1, Ordering::SeqCst);
                if stream.write_all(b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok").is_err() {
                    return;
                }
            }
        }
    });
    (server, answered)
}

// ---------------------------------------------------------------------------
// Ctrl-C.

#[test]
fn ctrl_c_ends_the_run_and_prints_its_report_marked_interrupted() {
    let (server, answered) = counting_server();
    let url = server.url();
    let bench = Running::start(&percore_bin(), &["bench", &url, "-d", "60s", "-c", "2", "-t", "1", "--json"]);
    assert!(wait_until(WAIT, || answered.load(Ordering::SeqCst) > 0), "no request arrived");
    signal(bench.pid(), "INT");
    let run = bench.finish_within(BENCH_TIMEOUT);
    let report = json_of(&run);
    assert_eq!(report["interrupted"], true, "{report:#}");
    assert!(count(&report, "/requests") > 0, "{report:#}");
    assert!(report["duration_s"].as_f64().is_some_and(|d| d < 60.0), "{report:#}");
}

#[test]
fn a_second_ctrl_c_exits_at_once() {
    // A body file that is a FIFO no one writes: reading it blocks the run before it
    // starts, so the first Ctrl-C cannot end it; the second must.
    let dir = std::env::temp_dir().join(format!("percore-fifo-{}", std::process::id()));
    std::fs::create_dir_all(&dir).expect("a temporary directory");
    let fifo = dir.join("body");
    let made = std::process::Command::new("mkfifo").arg(&fifo).status().expect("running mkfifo");
    assert!(made.success(), "mkfifo failed");
    let (server, _) = counting_server();
    let args = ["bench", &server.url(), "-d", "60s", "--body-file", fifo.to_str().expect("a UTF-8 path")];
    let bench = Running::start(&percore_bin(), &args);
    let pid = bench.pid();
    assert!(wait_until(WAIT, || catches(pid, SIGINT)), "bench never caught SIGINT");
    signal(pid, "INT");
    assert!(wait_until(WAIT, || !signal_pending(pid, SIGINT)), "the first SIGINT was never taken");
    signal(pid, "INT");
    let run = bench.finish_within(BENCH_TIMEOUT);
    let _ = std::fs::remove_dir_all(&dir);
    use std::os::unix::process::ExitStatusExt;
    assert_eq!(run.status.signal(), Some(SIGINT as i32), "{}; stdout:\n{}", run.status, run.stdout);
}

/// Whether `pid` has a handler for signal `signo` (`SigCgt` in /proc/PID/status).
fn catches(pid: u32, signo: u32) -> bool {
    let Ok(status) = std::fs::read_to_string(format!("/proc/{pid}/status")) else { return false };
    status
        .lines()
        .filter_map(|line| line.strip_prefix("SigCgt:"))
        .filter_map(|mask| u64::from_str_radix(mask.trim(), 16).ok())
        .any(|mask| mask & (1 << (signo - 1)) != 0)
}

// ---------------------------------------------------------------------------
// Pinning.

#[test]
fn a_load_thread_is_pinned_to_its_cpu_unless_told_not_to() {
    let cpus = percore::worker::allowed_cpus();
    let [_, second, ..] = cpus[..] else {
        util::skip(&format!("pinning is seen on two CPUs, and this process may run on {cpus:?} only"));
        return;
    };
    let everywhere = cpus_allowed(std::process::id()).expect("this process's CPUs");
    let (server, answered) = counting_server();
    let (url, cpu) = (server.url(), second.to_string());
    for no_pin in [false, true] {
        let mut args = vec!["bench", &url, "-d", "60s", "-c", "1", "-t", "1", "--cpus", &cpu, "--json"];
        args.extend(no_pin.then_some("--no-pin"));
        let before = answered.load(Ordering::SeqCst);
        let bench = Running::start(&percore_bin(), &args);
        // The load thread pins itself before it connects: once answers come, it ran.
        assert!(wait_until(WAIT, || answered.load(Ordering::SeqCst) > before), "no request arrived");
        let threads = thread_cpus_allowed(bench.pid());
        signal(bench.pid(), "INT");
        json_of(&bench.finish_within(BENCH_TIMEOUT));
        let pinned = threads.contains(&cpu);
        assert_eq!(pinned, !no_pin, "--no-pin {no_pin}: threads' CPUs {threads:?}");
        assert!(threads.contains(&everywhere), "the main thread runs anywhere: {threads:?}");
    }
}

// ---------------------------------------------------------------------------
// The interval log and the merge.

/// The histograms of an interval log, added up, read with hdrhistogram's reader.
fn logged_latencies(path: &str) -> Histogram<u64> {
    let bytes = std::fs::read(path).unwrap_or_else(|e| panic!("reading {path}: {e}"));
    let mut total = Histogram::new_with_bounds(1, 60_000_000, 3).expect("valid bounds");
    let (mut deserializer, mut intervals) = (Deserializer::new(), 0);
    for entry in IntervalLogIterator::new(&bytes) {
        let LogEntry::Interval(interval) = entry.unwrap_or_else(|e| panic!("{path}: {e:?}")) else {
            continue;
        };
        let encoded =
            base64::engine::general_purpose::STANDARD.decode(interval.encoded_histogram()).expect("base64");
        let histogram: Histogram<u64> = deserializer.deserialize(&mut &encoded[..]).expect("a V2 histogram");
        total.add(&histogram).expect("same bounds");
        intervals += 1;
    }
    assert!(intervals > 0, "{path} has no interval");
    total
}

#[test]
fn two_logged_runs_merge_into_their_sum() {
    let server = Server::percore(&["--workers", "1"]);
    let url = format!("http://{}/", server.addr());
    let (first, second) = (TempFile::with_contents(b""), TempFile::with_contents(b""));
    let a = json_of(&bench(&[&url, "-n", "2000", "-c", "4", "-t", "1", "--json", "--hdr-log", first.path()]));
    let b =
        json_of(&bench(&[&url, "-d", "1.5s", "-c", "2", "-t", "1", "--json", "--hdr-log", second.path()]));
    let merged = json_of(&bench(&["merge", first.path(), second.path(), "--json"]));

    // The logs read back, each with as many latencies as its run had responses.
    let (mut union, b_latencies) = (logged_latencies(first.path()), logged_latencies(second.path()));
    assert_eq!((union.len(), b_latencies.len()), (count(&a, "/requests"), count(&b, "/requests")));
    union.add(&b_latencies).expect("same bounds");

    for pointer in ["/requests", "/bytes_read", "/status/200", "/errors/total", "/non_2xx_3xx"] {
        assert_eq!(count(&merged, pointer), count(&a, pointer) + count(&b, pointer), "{pointer}: {merged:#}");
    }
    assert_eq!(merged["runs"].as_array().map(Vec::len), Some(2), "{merged:#}");
    let percentiles = [("50", 0.5), ("90", 0.9), ("99", 0.99), ("99.9", 0.999), ("100", 1.0)];
    for (label, quantile) in percentiles {
        let pointer = format!("/latency_us/percentiles/{label}");
        assert_eq!(count(&merged, &pointer), union.value_at_quantile(quantile), "p{label}: {merged:#}");
    }
    assert_eq!(
        (count(&merged, "/latency_us/min"), count(&merged, "/latency_us/max")),
        (union.min(), union.max())
    );
}

#[test]
fn a_run_starts_at_its_wall_clock_instant() {
    let (server, _) = counting_server();
    let now = SystemTime::now().duration_since(UNIX_EPOCH).expect("after 1970").as_secs_f64();
    let at = format!("{:.3}", now + 2.0);
    let report = json_of(&bench(&[&server.url(), "-n", "10", "-t", "1", "--start-at", &at, "--json"]));
    let started_at = report["started_at"].as_str().unwrap_or_default();
    let started_at = time::OffsetDateTime::parse(started_at, &time::format_description::well_known::Rfc3339)
        .unwrap_or_else(|e| panic!("{started_at:?}: {e}"));
    let started = (started_at - time::OffsetDateTime::UNIX_EPOCH).as_seconds_f64();
    assert!(started >= now + 2.0 - 0.001, "started at {started}, asked for {at}");
    assert_eq!(count(&report, "/requests"), 10, "{report:#}");
}

#[test]
fn ctrl_c_while_waiting_for_the_start_ends_the_wait_with_nothing_sent() {
    let (server, answered) = counting_server();
    let now = SystemTime::now().duration_since(UNIX_EPOCH).expect("after 1970").as_secs_f64();
    // Two minutes away: far past the bound on the run, were the wait not cut short.
    let at = format!("{:.3}", now + 120.0);
    let bench = Running::start(&percore_bin(), &["bench", &server.url(), "--start-at", &at, "--json"]);
    let pid = bench.pid();
    assert!(wait_until(WAIT, || catches(pid, SIGINT)), "bench never caught SIGINT");
    signal(pid, "INT");
    let report = json_of(&bench.finish_within(BENCH_TIMEOUT));
    assert_eq!((report["interrupted"].as_bool(), count(&report, "/requests")), (Some(true), 0), "{report:#}");
    assert_eq!(answered.load(Ordering::SeqCst), 0);
}

#[test]
fn a_plot_draws_both_charts() {
    let (server, _) = counting_server();
    let plot = TempFile::with_contents(b"");
    let run = bench(&[&server.url(), "-n", "500", "-c", "2", "-t", "1", "--plot", plot.path()]);
    assert!(run.status.success(), "{}; stderr:\n{}", run.status, run.stderr);
    let svg = std::fs::read_to_string(plot.path()).expect("the plot is written");
    assert!(svg.starts_with("<svg"), "{svg}");
    for text in ["latency by percentile", "responses per second", "99.9%"] {
        assert!(svg.contains(text), "no {text:?} in the plot");
    }
}
