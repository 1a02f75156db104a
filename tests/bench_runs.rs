//! `percore bench` as a run that lives beyond one command: Ctrl-C ends it with its
//! report.

mod util;

use std::io::{Read, Write};
use std::net::TcpStream;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;

use serde_json::Value;
use util::{percore_bin, signal, signal_pending, wait_until, Finished, Running, ScriptedServer, WAIT};

/// Bound on a whole bench run: the runs here take at most a few seconds, but a
/// loaded 2-core CI machine may be much slower than that.
const BENCH_TIMEOUT: Duration = Duration::from_secs(30);

const SIGINT: u32 = 2;

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
