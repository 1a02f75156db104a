//! Restarting a running server without losing a request: a reload (SIGHUP) and a
//! binary upgrade (SIGUSR2) under a running `percore bench`, a graceful stop with
//! connections queued, systemd's socket activation, the live figures, and steering
//! connections to the CPU that received them.

mod util;

use std::io::{BufReader, Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::path::Path;
use std::thread;
use std::time::Duration;

use serde_json::Value;
use util::{
    connect, is_running, percore_bin, proc_state, read_status, run_capturing_within, signal, signal_pending,
    stat_fields, stopped_lines, try_signal, wait_until, worker_lines, Finished, Server, TempFile, OK,
    SIGTERM, WAIT,
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

/// A new master's pid, from the old master's `upgrading: new master pid P` line.
fn new_master(stderr: &str) -> Option<u32> {
    stderr.lines().find_map(|line| line.strip_prefix("percore: upgrading: new master pid ")?.parse().ok())
}

/// Kills a process (a new master, which is not the test's child) on drop.
struct KillOnDrop(u32);

impl Drop for KillOnDrop {
    fn drop(&mut self) {
        try_signal(self.0, "KILL");
    }
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
    let _new = KillOnDrop(new_master(&stderr).expect("checked"));
    let status = server.wait_exit(WAIT);
    assert_eq!(status.code(), Some(0), "the old master after the upgrade:\n{}", server.stderr());
    let report = report(load.join().expect("the bench thread"));
    assert_eq!(errors(&report), 0, "requests failed across the upgrade: {report}\n{}", server.stderr());
    // The new master serves on the same address.
    let mut client = util::Client::connect(server.addr());
    assert_eq!(client.get("/").status_line, OK);
}

/// Puts `from` at `to` as a rename does (a running program's file cannot be written
/// over, but it can be replaced), executable.
fn replace_program(from: &Path, to: &Path) {
    let staged = to.with_extension("staged");
    std::fs::copy(from, &staged).expect("staging the program");
    std::fs::rename(&staged, to).expect("replacing the program");
}

#[test]
fn a_new_binary_that_hangs_is_killed_and_a_later_upgrade_succeeds() {
    // The server runs from a copy of percore that the test replaces on disk.
    let dir = std::env::temp_dir().join(format!("percore-upgrade-{}", std::process::id()));
    std::fs::create_dir_all(&dir).expect("a directory for the program");
    let program = dir.join("percore");
    replace_program(&percore_bin(), &program);
    let mut server =
        Server::start(&program, &["serve", "--bind", "127.0.0.1", "--port", "0", "--workers", "1"]);
    // A new binary that never says it is ready.
    let hang = dir.join("hang.sh");
    std::fs::write(&hang, "#!/bin/sh\nexec sleep 600\n").expect("writing the hanging program");
    std::fs::set_permissions(&hang, std::os::unix::fs::PermissionsExt::from_mode(0o755)).expect("chmod");
    replace_program(&hang, &program);
    signal(server.pid(), "USR2");
    let stderr = server.wait_for_stderr(WAIT, "the new master", |s| new_master(s).is_some());
    let hung = new_master(&stderr).expect("checked");
    let _hung = KillOnDrop(hung);
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
    replace_program(&percore_bin(), &program);
    signal(server.pid(), "USR2");
    let upgraded = |s: &str| s.lines().filter(|line| line.contains("upgrading: new master pid")).count() == 2;
    let stderr = server.wait_for_stderr(WAIT, "the second new master", upgraded);
    let second = stderr
        .lines()
        .filter_map(|line| line.strip_prefix("percore: upgrading: new master pid "))
        .next_back();
    let _new = KillOnDrop(second.and_then(|pid| pid.parse().ok()).expect("its pid"));
    let status = server.wait_exit(WAIT);
    assert_eq!(status.code(), Some(0), "the old master after the upgrade:\n{}", server.stderr());
    assert_eq!(util::Client::connect(server.addr()).get("/").status_line, OK);
    let _ = std::fs::remove_dir_all(&dir);
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

/// SIGCONTs a SIGSTOPped process when dropped, also while a test panics.
struct Resume(u32);

impl Drop for Resume {
    fn drop(&mut self) {
        try_signal(self.0, "CONT");
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
    s = socket.socket()\n\
    s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)\n\
    s.bind(('127.0.0.1', 0))\n\
    s.listen(128)\n\
    if s.fileno() != 3: os.dup2(s.fileno(), 3)\n\
    os.set_inheritable(3, True)\n\
    os.environ['LISTEN_FDS'] = '1'\n\
    os.environ['LISTEN_PID'] = str(os.getpid())\n\
    os.execv(sys.argv[1], sys.argv[1:])\n";

#[test]
fn a_socket_passed_as_systemd_does_is_served_without_a_bind() {
    let launcher = TempFile::with_contents(SOCKET_ACTIVATION.as_bytes());
    let bin = percore_bin();
    let args = ["python3", launcher.path(), bin.to_str().expect("a UTF-8 path"), "serve", "--workers", "2"];
    let server = Server::start(Path::new(args[0]), &args[1..]);
    // The launcher bound a port of its own; percore listens there, bound by nobody else.
    let mut client = server.client();
    assert_eq!(client.get("/").status_line, OK);
    server.wait_for_stderr(WAIT, "two workers", |s| worker_lines(s).len() == 2);
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
        eprintln!("skipped: steering needs two CPUs, this process may run on {cpus:?}");
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
    let on = |cpu: usize| stopped.iter().find(|s| s.worker.cpu == cpu).map_or(0, |s| s.connections);
    assert!(on(cpus[1]) >= 200, "connections on the client's CPU's worker: {stopped:?}");
    assert_eq!(on(cpus[0]), 0, "connections on the other worker: {stopped:?}");
}
