//! `percore bench` against servers that attack the client: a `Content-Length` of
//! 100 GB followed by endless bytes, a chunked body that never ends, a flood of
//! `100 Continue`, one every 100 ms (each within the request's deadline), and a head
//! that never ends. Each run ends by itself within its duration (checked by a
//! bounded wait, not timed), counts the errors of the right kind, and its memory
//! stays under 64 MiB (its peak RSS, VmHWM, read from /proc while it runs).

#[path = "../../tests/util/mod.rs"]
mod util;

use std::io::{Read, Write};
use std::net::TcpStream;
use std::time::Duration;

use serde_json::Value;
use util::{percore_bin, wait_until, Running, ScriptedServer};

/// Bound on a run of a few seconds on a loaded 2-core machine.
const BENCH_TIMEOUT: Duration = Duration::from_secs(30);

/// The most a client may hold whatever a server sends.
const MAX_RSS_KIB: u64 = 64 * 1024;

/// What the hostile server sends once a request head arrived.
#[derive(Clone, Copy, Debug)]
enum Attack {
    /// `Content-Length: 99999999999`, then bytes until the client goes.
    HugeLength,
    /// `Content-Length: 99999999999`, then a byte every 100 ms.
    HugeLengthSlowly,
    /// A chunked body whose chunks never end.
    EndlessChunks,
    /// A chunked body whose chunks never end, a 16-byte chunk every 100 ms.
    EndlessChunksSlowly,
    /// `100 Continue` after `100 Continue`, as fast as the socket takes them.
    InterimFlood,
    /// `100 Continue` every 100 ms, never a final response.
    SlowInterim,
    /// A status line, then header lines without end.
    HeaderFlood,
}

/// Reads one request head, then attacks until the client goes (a write fails) or
/// 60 s pass.
fn attack(mut stream: TcpStream, attack: Attack) {
    let _ = stream.set_read_timeout(Some(Duration::from_secs(30)));
    let (mut head, mut buf) = (Vec::new(), [0u8; 4096]);
    while !head.windows(4).any(|w| w == b"\r\n\r\n") {
        match stream.read(&mut buf) {
            Ok(0) | Err(_) => return,
            Ok(n) => head.extend_from_slice(&buf[..n]),
        }
    }
    let (start, repeat, pause): (&[u8], Vec<u8>, Duration) = match attack {
        Attack::HugeLength => {
            (b"HTTP/1.1 200 OK\r\nContent-Length: 99999999999\r\n\r\n", vec![b'x'; 65536], Duration::ZERO)
        }
        Attack::HugeLengthSlowly => (
            b"HTTP/1.1 200 OK\r\nContent-Length: 99999999999\r\n\r\n",
            vec![b'x'],
            Duration::from_millis(100),
        ),
        Attack::EndlessChunks => {
            let chunk = [&b"4000\r\n"[..], &[b'y'; 0x4000], b"\r\n"].concat();
            (b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n", chunk, Duration::ZERO)
        }
        Attack::EndlessChunksSlowly => (
            b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n",
            [&b"10\r\n"[..], &[b'y'; 0x10], b"\r\n"].concat(),
            Duration::from_millis(100),
        ),
        Attack::InterimFlood => (b"", b"HTTP/1.1 100 Continue\r\n\r\n".repeat(1000), Duration::ZERO),
        Attack::SlowInterim => (b"", b"HTTP/1.1 100 Continue\r\n\r\n".to_vec(), Duration::from_millis(100)),
        Attack::HeaderFlood => {
            (b"HTTP/1.1 200 OK\r\n", b"X-Flood: yyyyyyyyyyyyyyyyyyyyyyyy\r\n".repeat(100), Duration::ZERO)
        }
    };
    let deadline = std::time::Instant::now() + Duration::from_secs(60);
    if stream.write_all(start).is_err() {
        return;
    }
    while std::time::Instant::now() < deadline && stream.write_all(&repeat).is_ok() {
        std::thread::sleep(pause);
    }
}

/// The peak resident memory of `pid` in KiB, while it runs.
fn peak_rss_kib(pid: u32) -> Option<u64> {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).ok()?;
    let line = status.lines().find_map(|l| l.strip_prefix("VmHWM:"))?;
    line.trim().trim_end_matches("kB").trim().parse().ok()
}

/// Runs `percore bench URL ARGS --json` against `attack`, watching its memory; returns
/// its report and its peak RSS.
fn bench_against(attack_with: Attack, args: &[&str]) -> (Value, u64) {
    let server = ScriptedServer::start(move |stream| attack(stream, attack_with));
    let url = server.url();
    let all = [&["bench", url.as_str(), "-t", "1", "--json"], args].concat();
    let bench = Running::start(&percore_bin(), &all);
    let pid = bench.pid();
    let mut peak = 0;
    // VmHWM only grows: the last reading before the exit is the peak, to within
    // the 20 ms between readings.
    wait_until(BENCH_TIMEOUT, || match peak_rss_kib(pid) {
        Some(kib) => {
            peak = peak.max(kib);
            false
        }
        None => true,
    });
    let run = bench.finish_within(BENCH_TIMEOUT);
    assert_eq!(
        run.status.code(),
        Some(1),
        "{attack_with:?}: every request fails: {}; stderr:\n{}",
        run.status,
        run.stderr
    );
    eprintln!("{attack_with:?} {args:?}: peak RSS {peak} KiB");
    let report = serde_json::from_str(&run.stdout)
        .unwrap_or_else(|e| panic!("{attack_with:?}: no report ({e}):\n{}", run.stdout));
    (report, peak)
}

fn count(report: &Value, pointer: &str) -> u64 {
    report.pointer(pointer).and_then(Value::as_u64).unwrap_or_else(|| panic!("no {pointer} in:\n{report:#}"))
}

/// Runs against `attack` and checks that its errors are all of kind `kind`, and
/// that the memory stayed bounded.
fn survives(attack: Attack, args: &[&str], kind: &str) -> Value {
    let (report, peak) = bench_against(attack, args);
    let errors = count(&report, "/errors/total");
    assert!(errors > 0, "{attack:?}: no error:\n{report:#}");
    assert_eq!(
        count(&report, &format!("/errors/{kind}")),
        errors,
        "{attack:?}: not all {kind} errors:\n{report:#}"
    );
    assert_eq!(count(&report, "/requests"), 0, "{attack:?}: {report:#}");
    assert!(peak > 0 && peak < MAX_RSS_KIB, "{attack:?}: peak RSS {peak} KiB");
    report
}

#[test]
fn an_endless_body_is_refused_at_its_head_and_the_connection_replaced() {
    // A connection given up lingers (the loop's 5 s at most) before it is replaced,
    // so that a hostile server cannot make the client open connections without end.
    let report = survives(Attack::HugeLength, &["-d", "8s", "-c", "2", "--max-response-size", "1m"], "read");
    // Each connection was refused at its head, its length past 1 MiB, and replaced:
    // more errors than connections, and not a bound's worth read on each.
    let errors = count(&report, "/errors/read");
    assert!(errors > 2, "{report:#}");
    assert!(count(&report, "/bytes_read") < errors * 1024 * 1024, "{report:#}");
}

#[test]
fn endless_chunks_are_cut_at_the_largest_response() {
    survives(Attack::EndlessChunks, &["-d", "3s", "-c", "4", "--max-response-size", "1m"], "read");
}

#[test]
fn a_flood_of_interim_responses_counts_towards_the_largest_response() {
    survives(Attack::InterimFlood, &["-d", "3s", "-c", "4", "--max-response-size", "1m"], "read");
}

#[test]
fn interim_responses_do_not_extend_the_deadline() {
    // One `100 Continue` every 100 ms, within the deadline each time: the request
    // still times out after its second, and a run of 2 requests ends.
    survives(Attack::SlowInterim, &["-n", "2", "-c", "1", "--timeout", "1"], "timeout");
}

#[test]
fn a_head_without_end_is_a_parse_error_at_64_kib() {
    survives(Attack::HeaderFlood, &["-d", "2s", "-c", "4"], "parse");
}

#[test]
fn a_length_past_the_largest_response_is_refused_at_the_head() {
    // A byte every 100 ms: read up to the bound, the response would time out after
    // 20 s; refused at its head, it is a read error at once.
    let args = ["-n", "1", "-c", "1", "--timeout", "20", "--max-response-size", "1m"];
    let (report, _) = bench_against(Attack::HugeLengthSlowly, &args);
    assert_eq!((count(&report, "/errors/read"), count(&report, "/errors/timeout")), (1, 0), "{report:#}");
}

/// The default of `--max-response-size`.
const DEFAULT_MAX_RESPONSE: u64 = 64 * 1024 * 1024;

#[test]
fn an_endless_body_without_a_length_is_cut_at_the_default_bound() {
    // No --max-response-size: the 64 MiB default is what ends the response, read up
    // to it (a chunked body announces no length to refuse at its head), long before
    // a timeout of 20 s.
    let report = survives(Attack::EndlessChunks, &["-n", "1", "-c", "1", "--timeout", "20"], "read");
    assert_eq!(count(&report, "/errors/read"), 1, "{report:#}");
    let read = count(&report, "/bytes_read");
    assert!(
        (DEFAULT_MAX_RESPONSE..DEFAULT_MAX_RESPONSE + 1024 * 1024).contains(&read),
        "{read} bytes read, the bound is {DEFAULT_MAX_RESPONSE}:\n{report:#}"
    );
}

#[test]
fn an_endless_slow_body_ends_at_the_timeout() {
    // Under the default bound for ever: only the 1 s timeout ends each response.
    let report = survives(Attack::EndlessChunksSlowly, &["-n", "2", "-c", "1", "--timeout", "1"], "timeout");
    assert_eq!(count(&report, "/errors/timeout"), 2, "{report:#}");
    // The server sends its 46-byte head, then at most one 21-byte chunk every 100 ms
    // (fewer on a loaded machine), so fewer than 50 chunks a response means each
    // ended within 5 s: the 1 s asked for, not the 10 s default, which would let
    // about 100 through.
    let read = count(&report, "/bytes_read");
    assert!(read < 2 * (46 + 50 * 21), "{read} bytes read: the responses lived past 5 s\n{report:#}");
}
