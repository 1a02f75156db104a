//! Restarting a running server without losing a request: a reload (SIGHUP) and a
//! binary upgrade (SIGUSR2) under a running `percore bench`, a reload while one client
//! pipelines without a pause, a graceful stop with
//! connections queued, systemd's socket activation, the live figures, and steering
//! connections to the CPU that received them.

#[path = "../../tests/util/mod.rs"]
mod util;

use std::io::{BufReader, ErrorKind, Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::panic::{self, AssertUnwindSafe};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::thread;
use std::time::Duration;

use serde_json::Value;
use util::{
    connect, is_running, new_master, percore_bin, proc_state, read_status, run_capturing_within,
    run_expecting_exit, signal, signal_pending, stat_fields, stopped_lines, wait_until, worker_lines, Client,
    Finished, KillPid, Method, Resume, Server, TempFile, HELLO, OK, SIGTERM, WAIT,
};

/// `percore bench` for `seconds` against `addr`, keep-alive, 20 connections, JSON.
fn bench(addr: SocketAddr, seconds: u64) -> thread::JoinHandle<Finished> {
    let url = format!("http://{addr}/");
    thread::spawn(move || {
        let duration = format!("{seconds}s");
        let args = ["bench", "-t", "1", "-c", "20", "-d", &duration, "--json", &url];
        run_capturing_within(&percore_bin(), &args, WAIT + Duration::from_secs(seconds))
    })
}

/// The bench's report, which must be a successful run.
fn report(run: Finished) -> Value {
    serde_json::from_str(&run.stdout)
        .unwrap_or_else(|e| panic!("bench JSON: {e}\n{}\n{}", run.stdout, run.stderr))
}

fn errors(report: &Value) -> u64 {
    report["errors"]["total"].as_u64().expect("an error count")
}

#[test]
fn reloads_under_load_lose_no_request_and_serve_the_new_body() {
    let body = TempFile::with_contents(b"first body\n");
    let server = Server::percore(&["--workers", "2", "--body-file", body.path()]);
    let load = bench(server.addr(), 4);
    for reload in 1..=5 {
        thread::sleep(Duration::from_millis(400));
        signal(server.pid(), "HUP");
        let line = format!("reloading: generation {}", reload + 1);
        server.wait_for_stderr(WAIT, &line, |s| s.contains(&line));
    }
    let report = report(load.join().expect("the bench thread"));
    assert_eq!(errors(&report), 0, "requests failed across 5 reloads: {report}\n{}", server.stderr());
    assert!(report["requests"].as_u64() > Some(0));
    // A reload reads the body file again.
    std::fs::write(body.path(), b"second body\n").expect("rewriting the body");
    signal(server.pid(), "HUP");
    server.wait_for_stderr(WAIT, "generation 7", |s| s.contains("reloading: generation 7"));
    let served = wait_until(WAIT, || server.client().get("/").body == b"second body\n");
    assert!(served, "the new body was not served after a reload");
}

#[test]
fn a_reload_that_cannot_read_its_body_leaves_the_workers_serving() {
    let body = TempFile::with_contents(b"kept\n");
    let server = Server::percore(&["--workers", "1", "--body-file", body.path()]);
    std::fs::remove_file(body.path()).expect("removing the body file");
    signal(server.pid(), "HUP");
    server.wait_for_stderr(WAIT, "a failed reload", |s| s.contains("reload failed"));
    assert_eq!(server.client().get("/").body, b"kept\n");
}

#[test]
fn a_binary_upgrade_under_load_loses_no_request_and_the_old_master_exits() {
    let mut server = Server::percore(&["--workers", "2"]);
    let load = bench(server.addr(), 3);
    thread::sleep(Duration::from_millis(500));
    signal(server.pid(), "USR2");
    let stderr = server.wait_for_stderr(WAIT, "the new master", |s| new_master(s).is_some());
    let _new = KillPid(new_master(&stderr).expect("checked"));
    let status = server.wait_exit(WAIT);
    assert_eq!(status.code(), Some(0), "the old master after the upgrade:\n{}", server.stderr());
    let report = report(load.join().expect("the bench thread"));
    assert_eq!(errors(&report), 0, "requests failed across the upgrade: {report}\n{}", server.stderr());
    // The new master serves on the same address.
    let mut client = util::Client::connect(server.addr());
    assert_eq!(client.get("/").status_line, OK);
}

/// A copy of percore in a directory of its own, which a test replaces on disk as an
/// operator installs a new binary (a running program's file cannot be written over,
/// but it can be replaced by a rename); the directory is removed on drop.
struct Installed {
    dir: PathBuf,
    program: PathBuf,
}

impl Installed {
    /// Installs percore, and starts `percore serve` from it with one worker.
    fn serving(name: &str) -> (Installed, Server) {
        let dir = std::env::temp_dir().join(format!("percore-{name}-{}", std::process::id()));
        std::fs::create_dir_all(&dir).expect("a directory for the program");
        let installed = Installed { program: dir.join("percore"), dir };
        installed.install(&std::fs::read(percore_bin()).expect("reading percore"), 0o755);
        let args = ["serve", "--bind", "127.0.0.1", "--port", "0", "--workers", "1"];
        let server = Server::start(&installed.program, &args);
        (installed, server)
    }

    /// Puts `contents`, with permissions `mode`, in the program's place.
    fn install(&self, contents: &[u8], mode: u32) {
        let staged = self.dir.join("staged");
        std::fs::write(&staged, contents).expect("staging the program");
        std::fs::set_permissions(&staged, std::os::unix::fs::PermissionsExt::from_mode(mode)).expect("chmod");
        std::fs::rename(&staged, &self.program).expect("replacing the program");
    }
}

impl Drop for Installed {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

#[test]
fn a_new_binary_that_hangs_is_killed_and_a_later_upgrade_succeeds() {
    let (installed, mut server) = Installed::serving("upgrade-hangs");
    // A new binary that never says it is ready.
    installed.install(b"#!/bin/sh\nexec sleep 600\n", 0o755);
    signal(server.pid(), "USR2");
    let stderr = server.wait_for_stderr(WAIT, "the new master", |s| new_master(s).is_some());
    let hung = new_master(&stderr).expect("checked");
    let _hung = KillPid(hung);
    // A second USR2 meanwhile is said to be ignored, and the old master serves on.
    signal(server.pid(), "USR2");
    server.wait_for_stderr(WAIT, "the second USR2 refused", |s| s.contains("an upgrade is under way"));
    assert_eq!(server.client().get("/").status_line, OK);
    // Within 30 s and a margin for a loaded machine, the hung one is killed.
    let said = |s: &str| s.contains(&format!("the new master (pid {hung}) did not say it was ready"));
    server.wait_for_stderr(Duration::from_secs(30) + WAIT, "the hung master given up", said);
    let gone = wait_until(WAIT, || !is_running(hung));
    assert!(gone, "the hung new master {hung} still runs");
    assert_eq!(server.client().get("/").status_line, OK);
    // A good binary now upgrades: the old master exits 0, the new one serves.
    installed.install(&std::fs::read(percore_bin()).expect("reading percore"), 0o755);
    signal(server.pid(), "USR2");
    let upgraded = |s: &str| s.lines().filter(|line| line.contains("upgrading: new master pid")).count() == 2;
    let stderr = server.wait_for_stderr(WAIT, "the second new master", upgraded);
    let second = stderr
        .lines()
        .filter_map(|line| line.strip_prefix("percore: upgrading: new master pid "))
        .next_back();
    let _new = KillPid(second.and_then(|pid| pid.parse().ok()).expect("its pid"));
    let status = server.wait_exit(WAIT);
    assert_eq!(status.code(), Some(0), "the old master after the upgrade:\n{}", server.stderr());
    assert_eq!(util::Client::connect(server.addr()).get("/").status_line, OK);
}

#[test]
fn a_new_binary_that_exits_or_cannot_run_is_said_once_and_the_old_master_serves_on() {
    let (installed, server) = Installed::serving("upgrade-fails");
    let upgrades = |s: &str| s.lines().filter(|line| line.contains("upgrading: new master pid")).count();
    // A new binary that exits at once with status 1: said with its status.
    installed.install(b"#!/bin/sh\nexit 1\n", 0o755);
    signal(server.pid(), "USR2");
    let said = "upgrade failed, this master goes on: the new master exited with status 1 before it was ready";
    let stderr = server.wait_for_stderr(WAIT, "the failed upgrade", |s| s.contains(said));
    assert_eq!(upgrades(&stderr), 1, "{stderr}");
    assert_eq!(server.client().get("/").status_line, OK);
    // A file that cannot be executed: said once, naming it, and no new master started.
    installed.install(b"not a program\n", 0o644);
    signal(server.pid(), "USR2");
    let said = format!(
        "upgrade failed, this master goes on: cannot execute {}: Permission denied",
        installed.program.display()
    );
    server.wait_for_stderr(WAIT, "the refused upgrade", |s| s.contains(&said));
    assert_eq!(server.client().get("/").status_line, OK);
    // The child that could not execute exited before the master said so: its
    // SIGCHLD is taken before a USR1 sent now, whose live line so comes after
    // anything said of it.
    signal(server.pid(), "USR1");
    let stderr = server.wait_for_stderr(WAIT, "the live figures", |s| s.contains("live:"));
    assert_eq!(upgrades(&stderr), 1, "{stderr}");
    assert_eq!(stderr.matches("upgrade failed").count(), 2, "{stderr}");
    assert!(is_running(server.pid()), "{stderr}");
}

/// Stops `worker` (SIGSTOP), queues `count` connections with a GET each on its
/// listener, then stops the server (SIGTERM to the master) and lets the worker go on:
/// it finds the queue and the stop together.
fn stop_with_connections_queued(server: &Server, worker: u32, count: usize) -> Vec<TcpStream> {
    signal(worker, "STOP");
    let resume = Resume(worker);
    // A signal is delivered when the process next runs: on a loaded machine the
    // worker could serve the first connections before it stops.
    let stopped = wait_until(WAIT, || proc_state(worker).is_some_and(|(state, _)| state == 'T'));
    assert!(stopped, "worker {worker} did not stop: {:?}", proc_state(worker));
    let queued = (0..count)
        .map(|_| {
            let stream = connect(server.addr());
            (&stream).write_all(b"GET / HTTP/1.1\r\nHost: a\r\n\r\n").expect("a request");
            stream
        })
        .collect();
    signal(server.pid(), "TERM");
    // The worker must find the stop with the queue: the master may not have passed
    // SIGTERM on yet when the test resumes the worker.
    let passed_on = wait_until(WAIT, || signal_pending(worker, SIGTERM));
    assert!(passed_on, "the master did not pass SIGTERM on to worker {worker}");
    drop(resume);
    queued
}

fn worker_of(server: &Server) -> u32 {
    let stderr = server.wait_for_stderr(WAIT, "a worker", |s| !worker_lines(s).is_empty());
    worker_lines(&stderr)[0].pid
}

#[test]
fn a_stop_answers_every_connection_queued_while_the_worker_was_stopped() {
    let server = Server::percore(&["--workers", "1"]);
    let queued = stop_with_connections_queued(&server, worker_of(&server), 600);
    // The worker hears of the stop before it serves the queue it finds with it: each
    // is answered with `Connection: close`, then closed.
    for (i, stream) in queued.iter().enumerate() {
        let mut answer = String::new();
        BufReader::new(stream).read_to_string(&mut answer).unwrap_or_else(|e| panic!("connection {i}: {e}"));
        assert!(answer.starts_with(OK), "connection {i}: {answer:?}");
        assert!(answer.contains("\r\nConnection: close\r\n"), "connection {i}: {answer:?}");
        assert!(
            answer.ends_with("hello, world!\n"),
            "connection {i}: one answer, then the close: {answer:?}"
        );
    }
}

/// utime + stime of `pid`, in clock ticks.
fn cpu_ticks(pid: u32) -> u64 {
    let fields = stat_fields(pid).expect("the process");
    fields[11].parse::<u64>().expect("utime") + fields[12].parse::<u64>().expect("stime")
}

#[test]
fn a_drain_with_more_queued_than_one_accept_batch_waits_without_spinning() {
    let server = Server::percore(&["--workers", "1", "--shutdown-timeout", "30"]);
    let worker = worker_of(&server);
    // One connection mid-request keeps the drain going once the others are served;
    // answered once first, so the worker surely holds it.
    let mut client = server.client();
    assert_eq!(client.get("/").status_line, OK);
    client.send(b"GET / HTTP/1.1\r\nHost: a\r\n");
    // More than the 256 a worker accepts per wake-up.
    for stream in &stop_with_connections_queued(&server, worker, 600) {
        assert_eq!(read_status(&mut BufReader::new(stream)).expect("an answer"), OK);
    }
    // Draining now, waiting for `busy`: it must wait, not spin. A second of
    // waiting costs a few ticks of CPU; spinning costs most of the second's 100.
    let before = cpu_ticks(worker);
    thread::sleep(Duration::from_secs(1));
    let used = cpu_ticks(worker) - before;
    assert!(used < 50, "the draining worker used {used} ticks of CPU in a second of waiting");
    assert!(is_running(worker), "the worker stopped while a request was still arriving");
}

/// A launcher that passes a listening socket as systemd does: descriptor 3,
/// LISTEN_FDS=1, LISTEN_PID the program's own pid; then execs percore serve.
const SOCKET_ACTIVATION: &str = "import os, socket, sys\n\
    args, listening = sys.argv[1:], True\n\
    while args[0] == '--not-listening' or args[0] == '--ready-fd':\n\
    \x20   option = args.pop(0)\n\
    \x20   if option == '--not-listening': listening = False\n\
    \x20   else: os.environ['PERCORE_READY_FD'] = args.pop(0)\n\
    s = socket.socket()\n\
    s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)\n\
    s.bind(('127.0.0.1', 0))\n\
    if listening: s.listen(128)\n\
    if s.fileno() != 3: os.dup2(s.fileno(), 3)\n\
    os.set_inheritable(3, True)\n\
    os.environ['LISTEN_FDS'] = '1'\n\
    os.environ['LISTEN_PID'] = str(os.getpid())\n\
    os.execv(args[0], args)\n";

/// The socket activation launcher's command line for `percore serve` with
/// `options` (`--not-listening`, `--ready-fd N`) and `flags`.
fn launched<'a>(
    launcher: &'a TempFile,
    bin: &'a Path,
    options: &[&'a str],
    flags: &[&'a str],
) -> Vec<&'a str> {
    let mut args = vec![launcher.path()];
    args.extend(options);
    args.extend([bin.to_str().expect("a UTF-8 path"), "serve"]);
    args.extend(flags);
    args
}

#[test]
fn a_socket_passed_as_systemd_does_is_served_without_a_bind() {
    let launcher = TempFile::with_contents(SOCKET_ACTIVATION.as_bytes());
    let bin = percore_bin();
    let server = Server::start(Path::new("python3"), &launched(&launcher, &bin, &[], &["--workers", "2"]));
    // The launcher bound a port of its own; percore listens there, bound by nobody else.
    let mut client = server.client();
    assert_eq!(client.get("/").status_line, OK);
    server.wait_for_stderr(WAIT, "two workers", |s| worker_lines(s).len() == 2);
}

#[test]
fn an_inherited_socket_that_does_not_listen_is_a_one_line_error() {
    let launcher = TempFile::with_contents(SOCKET_ACTIVATION.as_bytes());
    let bin = percore_bin();
    let args = launched(&launcher, &bin, &["--not-listening"], &["--workers", "1"]);
    let (status, stderr) = run_expecting_exit(Path::new("python3"), &args);
    assert_eq!(status.code(), Some(1), "{stderr}");
    assert_eq!(stderr, "percore: inherited listeners (LISTEN_FDS): descriptor 3 is not a listener\n");
}

#[test]
fn a_ready_descriptor_that_names_a_listener_is_not_taken_for_one() {
    // The descriptor on which an upgraded master says it is ready follows the
    // listeners; one among them is ignored, and the listener stays the master's.
    let launcher = TempFile::with_contents(SOCKET_ACTIVATION.as_bytes());
    let bin = percore_bin();
    let args = launched(&launcher, &bin, &["--ready-fd", "3"], &["--workers", "1"]);
    let server = Server::start(Path::new("python3"), &args);
    let stderr = server.wait_for_stderr(WAIT, "a worker", |s| !worker_lines(s).is_empty());
    assert_eq!(server.client().get("/").status_line, OK);
    // A worker started later takes the listener from the master: it must still hold it.
    signal(worker_lines(&stderr)[0].pid, "KILL");
    server.wait_for_stderr(WAIT, "the worker restarted", |s| worker_lines(s).len() == 2);
    assert_eq!(server.client().get("/").status_line, OK, "{}", server.stderr());
}

#[test]
fn listen_fds_that_name_no_listener_is_a_one_line_error() {
    // LISTEN_PID must be percore's own pid: the shell's, which exec keeps.
    let bin = percore_bin();
    let script = "LISTEN_PID=$$ LISTEN_FDS=0 exec \"$0\" serve --port 0 --workers 1";
    let args = ["-c", script, bin.to_str().expect("a UTF-8 path")];
    let (status, stderr) = run_expecting_exit(Path::new("sh"), &args);
    assert_eq!(status.code(), Some(1), "{stderr}");
    assert_eq!(stderr, "percore: inherited listeners (LISTEN_FDS): LISTEN_FDS names no listener\n");
}

#[test]
fn stats_prints_each_workers_rate_and_open_connections() {
    let server = Server::percore(&["--workers", "2", "--stats", "1"]);
    let _open = connect(server.addr());
    let stderr = server.wait_for_stderr(WAIT, "two stats lines", |s| s.matches("stats: ").count() >= 2);
    let line = stderr.lines().rfind(|l| l.starts_with("stats: ")).expect("a stats line");
    assert!(line.contains("worker 0 cpu ") && line.contains("worker 1 cpu "), "{line}");
    assert!(line.contains(" req/s, ") && line.contains(" open"), "{line}");
}

#[test]
fn steering_by_cpu_hands_every_connection_to_the_receiving_cpus_worker() {
    let cpus = percore::worker::allowed_cpus();
    if cpus.len() < 2 {
        util::skip(&format!("steering needs two CPUs, this process may run on {cpus:?}"));
        return;
    }
    let list = format!("{},{}", cpus[0], cpus[1]);
    let mut server = Server::percore(&["--cpus", &list, "--steer", "cpu"]);
    server.wait_for_stderr(WAIT, "two workers", |s| worker_lines(s).len() == 2);
    let url = format!("http://{}/", server.addr());
    let client_cpu = cpus[1].to_string();
    // The whole client on the second CPU: each SYN is received there.
    let run = run_capturing_within(
        Path::new("taskset"),
        &[
            "-c",
            &client_cpu,
            percore_bin().to_str().expect("UTF-8"),
            "bench",
            "--close",
            "-n",
            "200",
            "-c",
            "4",
            &url,
        ],
        WAIT,
    );
    assert!(run.status.success(), "bench: {}{}", run.stdout, run.stderr);
    signal(server.pid(), "TERM");
    server.wait_exit(WAIT);
    let stopped = stopped_lines(&server.wait_stderr_closed(WAIT));
    let on = |cpu: usize| stopped.iter().find(|s| s.worker.cpu == Some(cpu)).map_or(0, |s| s.connections);
    assert!(on(cpus[1]) >= 200, "connections on the client's CPU's worker: {stopped:?}");
    assert_eq!(on(cpus[0]), 0, "connections on the other worker: {stopped:?}");
}

/// The requests a pipelining client sends, in turn, and what answers each: a GET gets
/// the body, a HEAD the same head without it, a DELETE a 405 with a body of its own.
/// An answer out of order shows as the wrong status or the wrong framing.
const TURNS: [(&str, Method, &str, &[u8]); 3] = [
    ("GET / HTTP/1.1\r\nHost: a\r\n\r\n", Method::Get, OK, HELLO),
    ("HEAD / HTTP/1.1\r\nHost: a\r\n\r\n", Method::Head, OK, HELLO),
    (
        "DELETE / HTTP/1.1\r\nHost: a\r\n\r\n",
        Method::Get,
        "HTTP/1.1 405 Method Not Allowed",
        b"method not allowed\n",
    ),
];

/// Requests pipelined per write.
const PER_WRITE: usize = 16;

/// Writes requests `TURNS` in turn, `PER_WRITE` a write, until `stop` is set or a
/// write fails; returns how many requests were written whole, and the error.
fn pipeline_until(stream: TcpStream, stop: Arc<AtomicBool>) -> (usize, Option<ErrorKind>) {
    let mut whole = 0;
    while !stop.load(Ordering::SeqCst) {
        let requests: Vec<&str> = (whole..whole + PER_WRITE).map(|n| TURNS[n % TURNS.len()].0).collect();
        let batch = requests.concat();
        let mut written = 0;
        while written < batch.len() {
            match (&stream).write(&batch.as_bytes()[written..]) {
                Ok(n) => written += n,
                Err(e) if e.kind() == ErrorKind::Interrupted => {}
                Err(e) => {
                    // The requests of this batch that went out before the error.
                    let mut end = 0;
                    let sent = requests.iter().take_while(|r| {
                        end += r.len();
                        end <= written
                    });
                    return (whole + sent.count(), Some(e.kind()));
                }
            }
        }
        whole += PER_WRITE;
    }
    (whole, None)
}

/// Reads answers to the `TURNS` stream, each whole and the one due, until one says
/// `Connection: close`; sends the master a HUP once `before_reload` are read. Returns
/// the answers read.
fn read_answers_reloading_midway(client: &mut Client, master: u32, before_reload: usize) -> usize {
    let mut read = 0;
    loop {
        if read == before_reload {
            signal(master, "HUP");
        }
        let (_, method, status, body) = TURNS[read % TURNS.len()];
        // The client's own panic says what was cut short; this one, where.
        let answer =
            panic::catch_unwind(AssertUnwindSafe(|| client.read_response(method))).unwrap_or_else(|_| {
                panic!("answer {read} is not whole; the HUP went after answer {before_reload}")
            });
        assert_eq!(answer.status_line, status, "answer {read}");
        assert_eq!(answer.content_length(), body.len(), "answer {read}'s Content-Length");
        let body_read: &[u8] = if method == Method::Head { b"" } else { body };
        assert_eq!(answer.body, body_read, "answer {read}'s body");
        read += 1;
        match answer.header("Connection") {
            None => {}
            Some("close") => return read,
            Some(other) => panic!("answer {}: Connection: {other}", read - 1),
        }
    }
}

#[test]
fn a_reload_while_a_client_pipelines_answers_every_request_read_then_closes_cleanly() {
    const BEFORE_RELOAD: usize = 1000;
    let mut server = Server::percore(&["--workers", "1"]);
    let old = worker_of(&server);
    let stream = connect(server.addr());
    let stop = Arc::new(AtomicBool::new(false));
    let writer = {
        let (stream, stop) = (stream.try_clone().expect("a second handle"), Arc::clone(&stop));
        thread::spawn(move || pipeline_until(stream, stop))
    };
    // The HUP comes mid-stream: after the first answers, with more requests on the way.
    let mut client = Client::new(stream);
    let answers = read_answers_reloading_midway(&mut client, server.pid(), BEFORE_RELOAD);
    assert!(answers > BEFORE_RELOAD, "the close came with answer {answers}, before the HUP");
    // Only the last answer said close: whatever came after it would be read here. The
    // close is an end of stream, not a reset, although requests are still arriving.
    client.expect_eof();
    // A new generation serves a new connection while the old worker lingers on ours.
    let stderr = server.wait_for_stderr(WAIT, "a new generation's worker", |s| {
        s.contains("percore: reloading: generation 2") && worker_lines(s).len() == 2
    });
    let new = worker_lines(&stderr)[1].pid;
    assert_ne!(new, old, "the new generation's worker");
    let mut fresh = server.client();
    let answer = fresh.get("/");
    assert_eq!((answer.status_line.as_str(), answer.body.as_slice()), (OK, HELLO));
    drop(fresh);
    stop.store(true, Ordering::SeqCst);
    let (written, error) = writer.join().expect("the writer thread");
    assert!(answers <= written, "{answers} answers to {written} requests");
    // A write fails only once the server is done with the connection.
    let expected = [ErrorKind::BrokenPipe, ErrorKind::ConnectionReset];
    assert!(error.is_none_or(|kind| expected.contains(&kind)), "the writer's error: {error:?}");
    client.shutdown_write();
    let exited = wait_until(WAIT, || !is_running(old));
    assert!(exited, "the old worker {old} did not exit once its connection closed");
    signal(server.pid(), "TERM");
    server.wait_exit(WAIT);
    // The old worker answered as many requests as the client read: none was answered
    // and lost. A retired worker's line is a stopped line with another word.
    let stderr = server.wait_stderr_closed(WAIT).replace(" retired: ", " stopped: ");
    let counts = |pid: u32| {
        let line = stopped_lines(&stderr).into_iter().find(|line| line.worker.pid == pid);
        line.map(|line| (line.connections, line.requests, line.failed + line.refused))
    };
    let answers = answers as u64;
    assert_eq!(counts(old), Some((1, answers, 0)), "the old worker's totals:\n{stderr}");
    assert_eq!(counts(new), Some((1, 1, 0)), "the new worker's totals:\n{stderr}");
}
