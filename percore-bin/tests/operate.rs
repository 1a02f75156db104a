//! Running percore as an operator does: nginx's signals, stops with clients still
//! arriving, a parent that ignores SIGCHLD, a second server on the same port,
//! workers killed again and again, operator values at their limits, and a body
//! that trickles.

#[path = "../../tests/util/mod.rs"]
mod util;

use std::io::{ErrorKind, Read, Write};
use std::net::TcpStream;
use std::time::{Duration, Instant};

use util::{
    connect, is_running, percore_bin, read_status, run_capturing, signal, try_signal, wait_until,
    worker_lines, Method, Resume, Server, WorkerLine, OK, WAIT,
};

/// `percore serve --workers 1` plus `extra`, and its worker.
fn one_worker(extra: &[&str]) -> (Server, WorkerLine) {
    let mut flags = vec!["--workers", "1"];
    flags.extend(extra);
    let server = Server::percore(&flags);
    let stderr = server.wait_for_stderr(WAIT, "a worker line", |s| !worker_lines(s).is_empty());
    (server, worker_lines(&stderr)[0])
}

/// A connection that got its first answer: accepted and served by the worker.
fn served(server: &Server) -> TcpStream {
    let mut client = server.client();
    assert_eq!(client.get("/").status_line, OK);
    client.stream().try_clone().expect("a handle")
}

/// A connection with half a request head: it keeps a draining worker busy.
fn mid_request(server: &Server) -> TcpStream {
    let stream = served(server);
    (&stream).write_all(b"GET / HTTP/1.1\r\nHost: a\r\n").expect("half a head");
    stream
}

/// What a new connection made now gets: an answer, or a refusal (the connection
/// refused, or closed or reset before anything is read), within `within`.
#[derive(Debug, PartialEq, Eq)]
enum Outcome {
    Answered(String),
    Refused,
    NoAnswerWithin,
}

fn new_connection_outcome(server: &Server, within: Duration) -> Outcome {
    let Ok(stream) = TcpStream::connect_timeout(&server.addr(), within) else { return Outcome::Refused };
    stream.set_read_timeout(Some(within)).expect("a read timeout");
    if (&stream).write_all(b"GET / HTTP/1.1\r\nHost: a\r\n\r\n").is_err() {
        return Outcome::Refused;
    }
    let mut buf = [0u8; 4096];
    match (&stream).read(&mut buf) {
        Ok(0) => Outcome::Refused,
        Ok(n) => Outcome::Answered(String::from_utf8_lossy(&buf[..n]).into_owned()),
        Err(e) if matches!(e.kind(), ErrorKind::WouldBlock | ErrorKind::TimedOut) => Outcome::NoAnswerWithin,
        Err(_) => Outcome::Refused,
    }
}

#[test]
fn a_connection_made_during_a_graceful_stop_is_answered_or_refused_not_left_hanging() {
    let (server, _) = one_worker(&["--shutdown-timeout", "60"]);
    // Keeps the drain going: the worker waits for the rest of this request.
    let _busy = mid_request(&server);
    let mut idle = served(&server);
    signal(server.pid(), "TERM");
    // The worker has begun to drain once the idle connection it had is closed.
    let mut rest = Vec::new();
    let _ = idle.read_to_end(&mut rest);
    // Ten seconds is far longer than an answer or a refusal takes, and far shorter
    // than the 60 s a connection left in the queue would wait.
    match new_connection_outcome(&server, Duration::from_secs(10)) {
        Outcome::Answered(text) => {
            assert!(text.starts_with(OK) && text.contains("Connection: close"), "answered: {text:?}")
        }
        Outcome::Refused => {}
        Outcome::NoAnswerWithin => panic!("a connection made during the stop was left hanging"),
    }
}

#[test]
fn nginx_quit_is_a_graceful_stop() {
    let (mut server, _) = one_worker(&[]);
    signal(server.pid(), "QUIT");
    let status = server.wait_exit(WAIT);
    assert_eq!(status.code(), Some(0), "SIGQUIT stops gracefully, exit 0: {status}\n{}", server.stderr());
}

/// After SIGname the server is still there and serving.
fn survives(name: &str) -> Server {
    let (mut server, _) = one_worker(&[]);
    signal(server.pid(), name);
    // Answers on a new connection, well after the signal was handled.
    let answered = wait_until(WAIT, || {
        let mut client = server.client();
        client.send_request(Method::Get, "/", "HTTP/1.1", &["Connection: close"]);
        client.read_response(Method::Get).status_line == OK
    });
    assert!(answered, "no answer after SIG{name}");
    assert_eq!(server.try_exit_status(), None, "SIG{name} ended the server:\n{}", server.stderr());
    server
}

#[test]
fn nginx_hup_reloads_and_the_server_goes_on() {
    let (mut server, old) = one_worker(&[]);
    signal(server.pid(), "HUP");
    // A new generation: a second worker line, another process.
    let stderr = server.wait_for_stderr(WAIT, "a worker of the new generation", |s| {
        s.contains("reloading: generation 2") && worker_lines(s).len() == 2
    });
    let new = worker_lines(&stderr)[1];
    assert_ne!(new.pid, old.pid, "the reload started no new worker:\n{stderr}");
    // The old one retires; whatever answers after that is the new generation.
    let retired = wait_until(WAIT, || !is_running(old.pid));
    assert!(retired, "the old worker {} still runs after the reload:\n{}", old.pid, server.stderr());
    let mut client = server.client();
    client.send_request(Method::Get, "/", "HTTP/1.1", &["Connection: close"]);
    assert_eq!(client.read_response(Method::Get).status_line, OK);
    assert!(is_running(new.pid), "the new worker is gone:\n{}", server.stderr());
    assert_eq!(server.try_exit_status(), None, "SIGHUP ended the server:\n{}", server.stderr());
}

#[test]
fn nginx_usr1_prints_the_workers_counts_and_the_server_goes_on() {
    let server = survives("USR1");
    server.wait_for_stderr(WAIT, "a live counts line", |s| s.lines().any(|l| l.contains("live:")));
}

/// Sends USR1 to the master until the `live:` line it prints for worker 0 says what
/// `holds` wants (the workers publish their figures once a second); that line.
fn live_line_when(server: &Server, what: &str, holds: impl Fn(&str) -> bool) -> String {
    let deadline = Instant::now() + WAIT;
    loop {
        let printed = server.stderr().matches("live:").count();
        signal(server.pid(), "USR1");
        let stderr = server.wait_for_stderr(WAIT, "a live line", |s| s.matches("live:").count() > printed);
        let line =
            stderr.lines().rfind(|line| line.starts_with("live: worker 0 ")).expect("checked").to_owned();
        if holds(&line) {
            return line;
        }
        assert!(Instant::now() < deadline, "no live line with {what} within {WAIT:?}; the last: {line:?}");
        std::thread::sleep(Duration::from_millis(200));
    }
}

#[test]
fn usr1_shows_each_workers_figures_and_a_retired_worker_leaves_its_place_to_the_new_one() {
    let (server, old) = one_worker(&["--shutdown-timeout", "30"]);
    let mut client = server.client();
    for _ in 0..3 {
        assert_eq!(client.get("/").status_line, OK);
    }
    let figures =
        format!("pid {} {}: 1 connections, 1 open, 0 failed, 3 requests, 0 refused", old.pid, old.place());
    live_line_when(&server, &figures, |line| line.ends_with(&figures));
    // Half a request keeps the old worker draining once it retires.
    client.send(b"GET / HTTP/1.1\r\nHost: a\r\n");
    signal(server.pid(), "HUP");
    let stderr = server.wait_for_stderr(WAIT, "the new worker", |s| worker_lines(s).len() == 2);
    let new = worker_lines(&stderr)[1];
    let new_pid = format!("pid {} ", new.pid);
    live_line_when(&server, &new_pid, |line| line.contains(&new_pid));
    // The retired worker still runs, and publishes no more: with the new one
    // stopped, so that it publishes nothing either, worker 0's figures are still
    // the new one's two of the retired one's publishing seconds later.
    signal(new.pid, "STOP");
    let resume = Resume(new.pid);
    std::thread::sleep(Duration::from_millis(2500));
    assert!(is_running(old.pid), "the retired worker {} is gone:\n{}", old.pid, server.stderr());
    let line = live_line_when(&server, "any figures", |_| true);
    assert!(line.contains(&new_pid), "a retired worker's figures in its successor's place: {line:?}");
    drop(resume);
}

/// The `live:` line for worker 0 printed after a USR1 sent now.
fn live_line_now(server: &Server) -> String {
    let printed = server.stderr().matches("live:").count();
    signal(server.pid(), "USR1");
    let stderr = server.wait_for_stderr(WAIT, "a live line", |s| s.matches("live:").count() > printed);
    stderr.lines().rfind(|line| line.starts_with("live: worker 0 ")).expect("checked").to_owned()
}

#[test]
fn usr1_in_a_workers_first_second_names_that_worker_and_never_another() {
    let (server, first) = one_worker(&[]);
    // Within its first second, once it has answered (it publishes as it starts,
    // before it serves): its own pid, never "pid 0" and zeros.
    assert_eq!(server.client().get("/").status_line, OK);
    let line = live_line_now(&server);
    let own = format!("live: worker 0 pid {} {}: ", first.pid, first.place());
    assert!(line.starts_with(&own), "{line:?}");
    // A worker not yet published is said to be starting.
    let starting = format!("live: worker 0 {}: starting", first.place());
    // A worker killed and restarted: the new one's figures, never the dead one's.
    signal(first.pid, "KILL");
    let stderr = server.wait_for_stderr(WAIT, "a restarted worker", |s| worker_lines(s).len() == 2);
    let second = worker_lines(&stderr)[1];
    let line = live_line_now(&server);
    let own = format!("live: worker 0 pid {} {}: ", second.pid, second.place());
    assert!(line.starts_with(&own) || line == starting, "{line:?}");
}

/// A parent that ignores SIGCHLD and execs percore, as Python's
/// `signal.signal(SIGCHLD, SIG_IGN)` then `os.execv` does: the ignored disposition
/// is inherited.
const IGNORING_SIGCHLD: &str = "import os, signal, sys\n\
    signal.signal(signal.SIGCHLD, signal.SIG_IGN)\n\
    os.execv(sys.argv[1], sys.argv[1:])\n";

#[test]
fn a_killed_worker_is_restarted_even_when_sigchld_was_inherited_ignored() {
    let server = Server::percore_via(&["python3", "-c", IGNORING_SIGCHLD], &["--workers", "1"]);
    let stderr = server.wait_for_stderr(WAIT, "a worker line", |s| !worker_lines(s).is_empty());
    let first = worker_lines(&stderr)[0];
    signal(first.pid, "KILL");
    server.wait_for_stderr(WAIT, "a restarted worker", |s| worker_lines(s).len() == 2);
    let mut client = server.client();
    assert_eq!(client.get("/").status_line, OK);
    // And it stops on SIGTERM.
    let mut server = server;
    signal(server.pid(), "TERM");
    assert_eq!(server.wait_exit(WAIT).code(), Some(0));
}

#[test]
fn a_second_server_on_the_same_port_fails_with_address_in_use() {
    let (first, _) = one_worker(&[]);
    let port = first.addr().port().to_string();
    let second = run_capturing(&percore_bin(), &["serve", "--bind", "127.0.0.1", "--port", &port]);
    assert_eq!(second.status.code(), Some(1), "{}", second.stderr);
    assert!(second.stderr.contains("address in use"), "{}", second.stderr);
    // Asked for, it joins.
    let joined =
        Server::start(&percore_bin(), &["serve", "--bind", "127.0.0.1", "--port", &port, "--reuseport-join"]);
    assert_eq!(joined.addr(), first.addr());
}

#[test]
fn workers_killed_again_and_again_are_restarted_not_given_up() {
    let (server, first) = one_worker(&[]);
    let mut pid = first.pid;
    // More deaths than the crash-loop limit (5 in 10 s), each as an OOM kill does it.
    for death in 1..=7 {
        signal(pid, "KILL");
        let stderr = server.wait_for_stderr(WAIT, "a restarted worker", |s| worker_lines(s).len() > death);
        pid = worker_lines(&stderr)[death].pid;
    }
    assert!(is_running(server.pid()), "the master gave up:\n{}", server.stderr());
    let mut client = server.client();
    assert_eq!(client.get("/").status_line, OK);
}

#[test]
fn limits_that_would_wrap_are_usage_errors() {
    for flags in [
        ["--max-request-line", "18446744073709551615"],
        ["--max-conns", "18446744073709551615"],
        ["--max-header-bytes", "0"],
        ["--workers", "0"],
    ] {
        let run = run_capturing(&percore_bin(), &[&["serve", "--port", "0"], &flags[..]].concat());
        assert_eq!(run.status.code(), Some(2), "{flags:?} must be a usage error:\n{}", run.stderr);
    }
}

#[test]
fn a_head_limit_above_a_mebibyte_is_honoured() {
    let (server, _) = one_worker(&["--max-header-bytes", "2m"]);
    let mut client = server.client();
    // 1.5 MiB of headers, under the 2 MiB asked for.
    let header = format!("X-Big: {}", "b".repeat(1536 * 1024));
    client.send_request(Method::Get, "/", "HTTP/1.1", &[&header]);
    let mut reader = std::io::BufReader::new(client.stream());
    assert_eq!(read_status(&mut reader).expect("an answer to a 1.5 MiB head"), OK);
}

/// Bound on the wait for a close by a timeout of `secs`. The loop's clock counts whole
/// seconds, so such a close comes `secs` to `secs` + 1 s after the timer starts; 4 s
/// more leaves room for a loaded machine, and the default of 10 s cannot meet it for
/// a timeout of 1 s to 3 s.
fn closes_within(secs: u64) -> Duration {
    Duration::from_secs(secs + 4)
}

/// How long a connection under a timeout of 1 s or more is surely still open: a
/// close before this came from something else.
const OPEN_FOR: Duration = Duration::from_millis(300);

/// Whether the server has closed `stream` (end of stream or reset) by now; panics on
/// bytes, none being expected. Waits at most `wait` for the news.
fn closed_now(stream: &TcpStream, wait: Duration) -> bool {
    stream.set_read_timeout(Some(wait)).expect("a read timeout");
    match (&*stream).read(&mut [0u8; 64]) {
        Ok(0) => true,
        Ok(n) => panic!("expected no answer, got {n} bytes"),
        Err(e) if matches!(e.kind(), ErrorKind::WouldBlock | ErrorKind::TimedOut) => false,
        Err(_) => true,
    }
}

#[test]
fn a_body_that_trickles_is_closed_however_it_keeps_arriving() {
    let (server, _) = one_worker(&["--header-timeout", "1"]);
    let stream = connect(server.addr());
    let start = Instant::now();
    // A GET with a body: answered at once, then the body is read and dropped.
    (&stream).write_all(b"GET / HTTP/1.1\r\nHost: a\r\nContent-Length: 100000\r\n\r\n").expect("a head");
    let mut reader = std::io::BufReader::new(&stream);
    assert_eq!(read_status(&mut reader).expect("the answer"), OK);
    // One byte every 300 ms: every byte restarted a timer that was never to expire.
    let within = closes_within(1);
    loop {
        assert!(start.elapsed() < within, "a trickling body was still open after {within:?}");
        if (&stream).write_all(b"x").is_err() || closed_now(&stream, Duration::from_millis(300)) {
            break;
        }
    }
    let open = start.elapsed();
    assert!(open >= OPEN_FOR, "closed after {open:?}, before the timeout could have fired");
    assert!(try_signal(server.pid(), "0"), "the server is alive");
}

#[test]
fn a_body_that_keeps_the_minimum_rate_is_read_past_the_header_timeout() {
    let (server, _) = one_worker(&["--header-timeout", "3", "--min-body-rate", "100"]);
    let start = Instant::now();
    // A body that stops: nothing earns it time, so it is closed at the header timeout.
    let stalled = connect(server.addr());
    (&stalled).write_all(b"GET / HTTP/1.1\r\nHost: a\r\nContent-Length: 9000\r\n\r\n").expect("a head");
    assert_eq!(read_status(&mut std::io::BufReader::new(&stalled)).expect("the answer"), OK);
    let stream = connect(server.addr());
    (&stream).write_all(b"GET / HTTP/1.1\r\nHost: a\r\nContent-Length: 1600\r\n\r\n").expect("a head");
    let mut reader = std::io::BufReader::new(&stream);
    assert_eq!(read_status(&mut reader).expect("the answer"), OK);
    // 20 bytes every 100 ms for 8 s: twice the minimum rate, each part earns its time,
    // however long the whole body takes past the 3 s timeout. The default minimum,
    // 1024 bytes a second, would earn a fifth of it, and close it within 6 s.
    let mut stalled_closed = None;
    for _ in 0..80 {
        std::thread::sleep(Duration::from_millis(100));
        (&stream).write_all(&[b'x'; 20]).expect("the body, still read");
        if stalled_closed.is_none() && closed_now(&stalled, Duration::from_millis(1)) {
            stalled_closed = Some(start.elapsed());
        }
    }
    (&stream).write_all(b"GET / HTTP/1.1\r\nHost: a\r\n\r\n").expect("a second request");
    assert_eq!(read_status(&mut reader).expect("the answer after the body"), OK);
    // The stalled body was closed at the 3 s timeout, not the default's 10 s.
    let within = closes_within(3);
    let closed = stalled_closed.is_some()
        || wait_until(within.saturating_sub(start.elapsed()), || {
            closed_now(&stalled, Duration::from_millis(10))
        });
    assert!(closed, "a stalled body was still open {within:?} on");
    let open = stalled_closed.unwrap_or_else(|| start.elapsed());
    assert!(open >= OPEN_FOR, "the stalled body was closed after {open:?}, before its timeout");
}

#[test]
fn a_clock_before_1970_keeps_serving_with_the_earliest_date() {
    if !util::tool_available("faketime", "faketime") {
        return;
    }
    // The wall clock set to 1960 (the monotonic clock, which timers use, left alone).
    let wrapper = ["env", "FAKETIME_DONT_FAKE_MONOTONIC=1", "faketime", "1960-01-01 00:00:00"];
    let server = Server::percore_via(&wrapper, &["--workers", "1"]);
    let response = server.client().get("/");
    assert_eq!(response.status_line, OK);
    assert_eq!(response.header("Date"), Some("Thu, 01 Jan 1970 00:00:00 GMT"));
}

#[test]
fn a_default_serve_prints_only_where_it_listens_and_its_workers() {
    // A stock machine: somaxconn as the kernel has it, an open-file limit of 20000
    // (under the 65536 connections a worker would take): the defaults fit it quietly.
    let server = Server::percore_via(&["prlimit", "--nofile=20000:20000"], &[]);
    let workers = percore::worker::allowed_cpus().len();
    let stderr = server.wait_for_stderr(WAIT, "every worker line", |s| worker_lines(s).len() == workers);
    // Give any warning time to come: the workers are up and answer.
    assert_eq!(server.client().get("/").status_line, OK);
    let others: Vec<&str> =
        stderr.lines().filter(|l| !l.starts_with("listening on ") && !l.starts_with("worker ")).collect();
    assert!(others.is_empty(), "a default start printed more than its listening and worker lines:\n{stderr}");
}
