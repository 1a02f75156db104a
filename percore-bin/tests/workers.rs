//! `percore serve` as processes: a master and one pinned worker per CPU, their
//! restarts, their graceful and immediate stops, and `percore tune`.

#[path = "../../tests/util/mod.rs"]
mod util;

use std::collections::BTreeSet;
use std::ops::{Deref, DerefMut};
use std::time::Duration;

use util::{
    children_of, cpu_ticks, cpus_allowed, is_running, percore_bin, proc_state, request, run_capturing,
    run_expecting_exit, signal, signal_pending, stat_fields, stopped_lines, try_signal, wait_until,
    worker_lines, Client, Method, Response, Resume, Server, StoppedLine, WorkerLine, HELLO, OK, SIGTERM,
    WAIT,
};

/// `percore serve` with the waits for its worker lines and its exit that these tests
/// share (its workers are killed on drop by `Server`).
struct Percore {
    server: Server,
}

impl Percore {
    fn start(extra: &[&str]) -> Percore {
        Percore { server: Server::percore(extra) }
    }

    /// Under `taskset` (or any wrapper that execs percore).
    fn start_via(wrapper: &[&str], extra: &[&str]) -> Percore {
        Percore { server: Server::percore_via(wrapper, extra) }
    }

    /// Waits (bounded) for `n` worker start lines and returns them, checking
    /// they are workers 0..n.
    fn workers(&self, n: usize) -> Vec<WorkerLine> {
        let stderr = self.wait_for_stderr(WAIT, &format!("{n} worker lines"), |s| worker_lines(s).len() >= n);
        let workers = worker_lines(&stderr);
        assert_eq!(workers.len(), n, "expected {n} worker lines; stderr:\n{stderr}");
        let indexes: Vec<usize> = workers.iter().map(|w| w.index).collect();
        assert_eq!(indexes, (0..n).collect::<Vec<_>>(), "worker indexes; stderr:\n{stderr}");
        workers
    }

    /// Waits for the master to exit and returns its exit code, failing if it
    /// was killed by a signal instead.
    fn exit_code(&mut self) -> i32 {
        let status = self.wait_exit(WAIT);
        status.code().unwrap_or_else(|| panic!("the master did not exit normally: {status}"))
    }

    /// The `stopped:` lines, of which there must be `n`, once the master
    /// exited: then so have the workers, and stderr is complete.
    fn stopped(&self, n: usize) -> Vec<StoppedLine> {
        let stderr = self.wait_stderr_closed(WAIT);
        let stopped = stopped_lines(&stderr);
        assert_eq!(
            stopped.len(),
            n,
            "expected {n} `worker I pid P cpu C stopped: ...` lines, each a line of its own; stderr:\n{stderr}"
        );
        stopped
    }
}

impl Deref for Percore {
    type Target = Server;
    fn deref(&self) -> &Server {
        &self.server
    }
}

impl DerefMut for Percore {
    fn deref_mut(&mut self) -> &mut Server {
        &mut self.server
    }
}

fn assert_hello(response: &Response) {
    assert_eq!(response.status_line, OK, "{response:?}");
    assert_eq!(response.body, HELLO, "{response:?}");
}

/// One GET on a new connection that asks to be closed after it.
fn get_on_fresh_connection(server: &Server) {
    let mut client = server.client();
    client.send_request(Method::Get, "/", "HTTP/1.1", &["Connection: close"]);
    assert_hello(&client.read_response(Method::Get));
    client.expect_eof();
}

/// A client whose connection a worker has certainly accepted: it got an
/// answer on it.
fn accepted_client(server: &Server) -> Client {
    let mut client = server.client();
    assert_hello(&client.get("/warm-up"));
    client
}

/// Waits (bounded) for `worker` to have pinned itself to its CPU: the start
/// line is printed by the master right after fork, before the worker pins.
fn assert_pinned(worker: &WorkerLine) {
    let want = worker.cpu.expect("a pinned worker").to_string();
    let mut got = None;
    let pinned = wait_until(WAIT, || {
        got = cpus_allowed(worker.pid);
        got.as_deref() == Some(want.as_str())
    });
    assert!(pinned, "{worker:?}: Cpus_allowed_list is {got:?}, expected {want:?}");
}

fn assert_all_gone(pids: &[u32]) {
    let gone = wait_until(WAIT, || pids.iter().all(|&pid| !is_running(pid)));
    let left: Vec<_> =
        pids.iter().filter(|&&pid| is_running(pid)).map(|&pid| (pid, proc_state(pid))).collect();
    // Left running, they would outlive the test: they are its own processes.
    for &(pid, _) in &left {
        try_signal(pid, "KILL");
    }
    assert!(gone, "workers still running {WAIT:?} after the master died (pid, (state, ppid)): {left:?}");
}

/// The first two CPUs this process may run on, as a `--cpus` list; `None` (said on
/// the test's output) when it may run on one only.
fn two_cpus() -> Option<(String, [usize; 2])> {
    match percore::worker::allowed_cpus()[..] {
        [first, second, ..] => Some((format!("{first},{second}"), [first, second])),
        ref one => {
            util::skip(&format!("this test needs two CPUs, and this process may run on {one:?} only"));
            None
        }
    }
}

#[test]
fn two_workers_pinned_share_connections_and_stop_gracefully() {
    const CONNECTIONS: usize = 200;
    let Some((list, pair)) = two_cpus() else { return };
    let mut server = Percore::start(&["--workers", "2", "--cpus", &list]);
    let workers = server.workers(2);

    let pids: Vec<u32> = workers.iter().map(|w| w.pid).collect();
    let mut sorted = pids.clone();
    sorted.sort_unstable();
    assert_eq!(children_of(server.pid()), sorted, "the master's children are not the two workers");
    let cpus: BTreeSet<usize> = workers.iter().filter_map(|w| w.cpu).collect();
    assert_eq!(cpus, BTreeSet::from(pair), "{workers:?}");
    workers.iter().for_each(assert_pinned);

    for _ in 0..CONNECTIONS {
        get_on_fresh_connection(&server);
    }

    signal(server.pid(), "TERM");
    assert_eq!(server.exit_code(), 0);
    let stopped = server.stopped(2);
    for worker in &workers {
        let line = stopped
            .iter()
            .find(|s| s.worker == *worker)
            .unwrap_or_else(|| panic!("no stopped line for {worker:?} in {stopped:?}"));
        // The kernel hashes each connection to one of the two listeners.
        assert!(line.requests > 0, "{worker:?} answered no request: {line:?}");
        assert_eq!((line.failed, line.refused), (0, 0), "{line:?}");
    }
    let requests: u64 = stopped.iter().map(|s| s.requests).sum();
    let connections: u64 = stopped.iter().map(|s| s.connections).sum();
    assert_eq!((connections, requests), (CONNECTIONS as u64, CONNECTIONS as u64), "{stopped:?}");
}

#[test]
fn taskset_mask_gives_one_worker_on_that_cpu() {
    let server = Percore::start_via(&["taskset", "-c", "1"], &[]);
    let workers = server.workers(1);
    assert_eq!(workers[0].cpu, Some(1), "{workers:?}");
    assert_eq!(children_of(server.pid()), vec![workers[0].pid]);
    assert_pinned(&workers[0]);
    get_on_fresh_connection(&server);
}

#[test]
fn no_pin_leaves_a_worker_on_every_cpu_the_master_may_use() {
    let allowed = percore::worker::allowed_cpus();
    // The last allowed CPU: pinned to it, the worker's mask would be that CPU alone.
    let cpu = allowed.last().expect("no allowed CPU").to_string();
    let server = Percore::start(&["--workers", "1", "--cpus", &cpu, "--no-pin"]);
    let worker = server.workers(1)[0];
    // Its line names no CPU: it has none of its own.
    assert_eq!(worker.cpu, None, "{worker:?}: its line says it runs on one CPU");
    // Serving, the worker is past the point where it would have pinned itself.
    get_on_fresh_connection(&server);
    let master = cpus_allowed(server.pid()).expect("the master's CPUs");
    assert_eq!(cpus_allowed(worker.pid), Some(master.clone()), "{worker:?}");
    if allowed.len() == 1 {
        eprintln!("note: one CPU allowed ({master}): pinned or not, a worker's mask is the same here");
    } else {
        assert_ne!(master, cpu, "the master's mask is more than the worker's CPU");
    }
}

#[test]
fn a_worker_stopped_alone_is_restarted_and_its_successor_takes_new_connections() {
    let server = Percore::start(&["--workers", "1"]);
    let first = server.workers(1)[0];
    get_on_fresh_connection(&server);
    // SIGTERM to the worker alone: it stops gracefully, and the master, not
    // stopping, starts another on the same listener, which takes new connections.
    signal(first.pid, "TERM");
    let stderr = server.wait_for_stderr(WAIT, "a restarted worker", |s| worker_lines(s).len() == 2);
    let second = worker_lines(&stderr)[1];
    assert_ne!(second.pid, first.pid);
    for _ in 0..3 {
        get_on_fresh_connection(&server);
    }
}

#[test]
fn killed_worker_is_restarted_on_its_cpu() {
    // Two workers on the CPUs the test may use (both on one, when it has one).
    let server = Percore::start(&["--workers", "2"]);
    let workers = server.workers(2);
    let victim = workers[0];
    assert_pinned(&victim);
    signal(victim.pid, "KILL");

    let stderr = server.wait_for_stderr(WAIT, "restart of worker 0", |s| {
        worker_lines(s).iter().any(|w| w.index == victim.index && w.pid != victim.pid)
    });
    let notice =
        format!("worker {} {} was killed by signal 9; restarting in 100 ms", victim.index, victim.place());
    assert!(stderr.lines().any(|l| l == notice), "no {notice:?} line; stderr:\n{stderr}");
    let restarted = *worker_lines(&stderr).last().unwrap();
    assert_eq!((restarted.index, restarted.cpu), (victim.index, victim.cpu), "stderr:\n{stderr}");
    assert_ne!(restarted.pid, victim.pid);
    assert!(is_running(restarted.pid), "restarted worker {restarted:?} is not running");
    assert_pinned(&restarted);
    assert!(!is_running(victim.pid), "killed worker {victim:?} still running");
    let mut want = vec![restarted.pid, workers[1].pid];
    want.sort_unstable();
    assert_eq!(children_of(server.pid()), want);

    for _ in 0..20 {
        get_on_fresh_connection(&server);
    }
}

/// How many of `pid`'s open descriptors are sockets, epoll instances and signalfds.
fn descriptor_kinds(pid: u32) -> [usize; 3] {
    let fds = std::fs::read_dir(format!("/proc/{pid}/fd")).unwrap_or_else(|e| panic!("fds of {pid}: {e}"));
    let targets: Vec<String> = fds
        .filter_map(|fd| std::fs::read_link(fd.ok()?.path()).ok())
        .map(|target| target.to_string_lossy().into_owned())
        .collect();
    let count = |kind: &str| targets.iter().filter(|t| t.starts_with(kind)).count();
    [count("socket:"), count("anon_inode:[eventpoll]"), count("anon_inode:[signalfd]")]
}

/// Waits (bounded) for `worker` to hold one socket (its listener), one epoll and one
/// signalfd: the start line is printed right after fork, before the worker has
/// closed the master's and opened its own.
fn assert_own_descriptors_only(worker: &WorkerLine) {
    let mut got = [0; 3];
    let settled = wait_until(WAIT, || {
        got = descriptor_kinds(worker.pid);
        got == [1, 1, 1]
    });
    assert!(settled, "{worker:?} holds {got:?} sockets, epolls and signalfds, expected one of each");
}

#[test]
fn workers_hold_their_own_listener_epoll_and_signalfd_only() {
    let server = Percore::start(&["--workers", "2"]);
    let workers = server.workers(2);
    // The master holds both listeners, its epoll and its signalfd.
    assert_eq!(descriptor_kinds(server.pid()), [2, 1, 1], "master's descriptors");
    workers.iter().for_each(assert_own_descriptors_only);

    // A restarted worker is forked from the supervising loop, not the start-up one.
    signal(workers[0].pid, "KILL");
    let stderr = server.wait_for_stderr(WAIT, "restart of worker 0", |s| {
        worker_lines(s).iter().any(|w| w.index == 0 && w.pid != workers[0].pid)
    });
    assert_own_descriptors_only(worker_lines(&stderr).last().unwrap());
    get_on_fresh_connection(&server);
}

#[test]
fn connection_queued_while_worker_is_dead_is_answered_after_restart() {
    let server = Percore::start(&["--workers", "1"]);
    let worker = server.workers(1)[0];

    // Outcome, the master cannot reap or restart the worker yet.
    signal(server.pid(), "STOP");
    let resume = Resume(server.pid());
    signal(worker.pid, "KILL");
    let dead = wait_until(WAIT, || !is_running(worker.pid));
    assert!(dead, "worker {worker:?} still running after SIGKILL: {:?}", proc_state(worker.pid));

    // No process accepts now: the connection waits in the listener's queue,
    // which the stopped master keeps open.
    let mut client = server.client();
    client.send_request(Method::Get, "/queued", "HTTP/1.1", &[]);
    drop(resume);

    assert_hello(&client.read_response(Method::Get));
    let stderr = server.wait_for_stderr(WAIT, "restart of worker 0", |s| worker_lines(s).len() >= 2);
    assert!(stderr.contains("was killed by signal 9; restarting in"), "stderr:\n{stderr}");
}

#[test]
fn sigterm_answers_pipelined_requests_already_sent() {
    const PIPELINED: usize = 50;
    let mut server = Percore::start(&["--workers", "1"]);
    let worker = server.workers(1)[0];
    let mut client = accepted_client(&server);
    let mut idle = accepted_client(&server);

    // With the worker stopped, the whole batch is surely still unanswered (in its
    // socket buffer) when the stop begins: on resuming, the worker finds both the
    // batch and the SIGTERM the master passed on. The last request lacks its final
    // CRLF, so the connection is still in use once the drain has begun.
    signal(worker.pid, "STOP");
    let resume = Resume(worker.pid);
    let stopped = wait_until(WAIT, || proc_state(worker.pid).is_some_and(|(state, _)| state == 'T'));
    assert!(stopped, "worker {worker:?} did not stop: {:?}", proc_state(worker.pid));
    let batch: String =
        (0..PIPELINED).map(|i| request(Method::Get, &format!("/{i}"), "HTTP/1.1", &[])).collect();
    client.send(&batch.as_bytes()[..batch.len() - 2]);
    signal(server.pid(), "TERM");
    let passed_on = wait_until(WAIT, || signal_pending(worker.pid, SIGTERM));
    assert!(passed_on, "the master did not pass SIGTERM on to worker {worker:?}");
    drop(resume);

    // Every answer but the last keeps the connection: any `Connection: close` before
    // would show here, or as a close before all were read.
    for i in 0..PIPELINED - 1 {
        let response = client.read_response(Method::Get);
        assert_eq!(response.status_line, OK, "response {i}: {response:?}");
        assert_eq!(response.body, HELLO, "response {i}: {response:?}");
        assert_eq!(response.header("Connection"), None, "response {i}: {response:?}");
    }
    // The idle connection closed: the drain has begun. The last answer says it closes.
    idle.expect_eof();
    client.send(b"\r\n");
    let last = client.read_response(Method::Get);
    assert_eq!((last.status_line.as_str(), &last.body[..]), (OK, HELLO), "{last:?}");
    assert_eq!(last.header("Connection"), Some("close"), "the last answer: {last:?}");
    client.expect_eof();
    // As a client does on the end of stream: the worker lingers until then.
    drop(client);
    assert_eq!(server.exit_code(), 0);
    let stopped = server.stopped(1);
    assert_eq!(stopped[0].requests, PIPELINED as u64 + 2, "{stopped:?}");
}

/// One worker with the shutdown timeout `seconds` and no header timeout, so that only
/// the stop can end an unfinished request.
fn stopping_in(seconds: &str) -> Percore {
    let server = Percore::start(&["--workers", "1", "--shutdown-timeout", seconds, "--header-timeout", "0"]);
    server.workers(1);
    server
}

/// An accepted client in the middle of a request: its head lacks the final CRLF, so a
/// graceful stop waits for the rest.
fn unfinished_request(server: &Server) -> Client {
    let mut client = accepted_client(server);
    client.send(b"GET / HTTP/1.1\r\nHost: a\r\n");
    client
}

#[test]
fn a_first_sigint_drains_gracefully_and_a_second_stops_at_once() {
    let mut server = stopping_in("30");
    let mut unfinished = unfinished_request(&server);
    let mut finishing = unfinished_request(&server);
    let mut idle = accepted_client(&server);

    // Sent once: a graceful stop closes the idle connection at once, and still answers
    // a request in progress, telling its client to close.
    signal(server.pid(), "INT");
    idle.expect_eof();
    finishing.send(b"\r\n");
    let response = finishing.read_response(Method::Get);
    assert_hello(&response);
    assert_eq!(response.header("Connection"), Some("close"), "{response:?}");
    finishing.expect_eof();

    // The idle connection's close shows the first SIGINT was taken, so this one is a
    // second (two sent before the master read them would merge into one). The
    // unfinished request keeps the worker draining until then: exiting with 130
    // shows the master was still stopping gracefully, and well within the 30 s
    // shutdown timeout shows the second SIGINT cut the stop short.
    signal(server.pid(), "INT");
    let status = server.wait_exit(WAIT);
    assert_eq!(status.code(), Some(130), "exit status {status}");
    unfinished.expect_eof();
}

#[test]
fn ctrl_c_in_a_terminal_drains_gracefully_though_each_worker_hears_it_too() {
    // A terminal's Ctrl-C sends SIGINT to the whole process group: the master and,
    // directly, every worker. In a group of its own (setsid), so that the test's
    // process is not in it.
    let extra = ["--workers", "1", "--shutdown-timeout", "30", "--header-timeout", "0"];
    let mut server = Percore::start_via(&["setsid"], &extra);
    server.workers(1);
    let mut finishing = unfinished_request(&server);
    let group = format!("-{}", server.pid());
    let sent = std::process::Command::new("kill").args(["-INT", "--", &group]).status().expect("kill");
    assert!(sent.success(), "kill -INT -- {group}");
    // A worker's first SIGINT starts a drain, as the master's does: the request in
    // progress is still answered, telling its client to close.
    finishing.send(b"\r\n");
    let response = finishing.read_response(Method::Get);
    assert_hello(&response);
    assert_eq!(response.header("Connection"), Some("close"), "{response:?}");
    finishing.expect_eof();
    drop(finishing);
    assert_eq!(server.exit_code(), 0);
}

#[test]
fn a_worker_killed_during_a_graceful_stop_makes_it_unclean() {
    let mut server = stopping_in("30");
    let worker = server.workers(1)[0];
    // The unfinished request keeps the worker draining while it is killed.
    let _unfinished = unfinished_request(&server);
    signal(server.pid(), "TERM");
    // The stop under way: the listeners are closed, a new connection is refused.
    let stopping = wait_until(WAIT, || std::net::TcpStream::connect(server.addr()).is_err());
    assert!(stopping, "still accepting after SIGTERM:\n{}", server.stderr());
    signal(worker.pid, "KILL");
    assert_eq!(server.exit_code(), 1, "{}", server.stderr());
    let said = "percore: worker 0 was killed by signal 9 while stopping";
    assert!(server.stderr().lines().any(|line| line == said), "{}", server.stderr());
}

#[test]
fn a_worker_hung_in_a_stop_is_killed_after_the_shutdown_timeout_and_its_grace() {
    let mut server = stopping_in("1");
    let worker = server.workers(1)[0];
    // A stopped process is a hung worker: it drains nothing, and exits on no signal
    // but SIGKILL, which the master sends 5 s after the shutdown timeout.
    signal(worker.pid, "STOP");
    let _resume = Resume(worker.pid);
    signal(server.pid(), "TERM");
    assert_eq!(server.exit_code(), 1, "{}", server.stderr());
    let said = "percore: worker 0 was killed by signal 9 while stopping";
    assert!(server.stderr().lines().any(|line| line == said), "{}", server.stderr());
}

#[test]
fn the_open_file_limit_is_raised_to_the_hard_limit() {
    // Started with a soft limit below the hard one, as a login shell's 1024 often is.
    let bin = percore_bin();
    let script = "ulimit -Sn 256 && exec \"$0\" serve --bind 127.0.0.1 --port 0 --workers 1";
    let server =
        Server::start(std::path::Path::new("sh"), &["-c", script, bin.to_str().expect("a UTF-8 path")]);
    let limits = std::fs::read_to_string(format!("/proc/{}/limits", server.pid())).expect("its limits");
    let line = limits.lines().find(|line| line.starts_with("Max open files")).expect("its line");
    let words: Vec<&str> = line.split_whitespace().collect();
    assert_eq!(words[3], words[4], "soft and hard: {line:?}");
    assert_ne!(words[3], "256", "{line:?}");
}

#[test]
fn an_idle_master_sleeps() {
    let server = Percore::start(&["--workers", "1"]);
    server.workers(1);
    // With nothing due (no restart, no --stats, no stop), the master waits for a
    // signal: over a second it runs for a tick or two at most, where a master that
    // polled would run for most of the hundred.
    let before = cpu_ticks(server.pid());
    std::thread::sleep(Duration::from_secs(1));
    let ticks = cpu_ticks(server.pid()) - before;
    assert!(ticks <= 10, "the idle master ran {ticks} ticks in a second");
}

#[test]
fn the_shutdown_timeout_closes_what_is_left_and_the_stop_is_still_graceful() {
    let mut server = stopping_in("1");
    let mut unfinished = unfinished_request(&server);
    signal(server.pid(), "TERM");
    unfinished.expect_eof();
    // The worker closed it and stopped by itself, with its totals: had the master
    // killed it (5 s after the timeout), the stop would be unclean, exit status 1.
    assert_eq!(server.exit_code(), 0);
    let stopped = server.stopped(1);
    assert_eq!((stopped[0].connections, stopped[0].requests), (1, 1), "{stopped:?}");
}

#[test]
fn sigkilled_master_leaves_no_worker() {
    let mut server = Percore::start(&["--workers", "2"]);
    let pids: Vec<u32> = server.workers(2).iter().map(|w| w.pid).collect();
    signal(server.pid(), "KILL");
    server.wait_exit(WAIT);
    assert_all_gone(&pids);
}

/// `serve` on an ephemeral loopback port plus `extra`, for runs expected to exit.
fn serve_args<'a>(extra: &[&'a str]) -> Vec<&'a str> {
    let mut args = vec!["serve", "--bind", "127.0.0.1", "--port", "0"];
    args.extend(extra);
    args
}

/// Whether `text` holds `word` with no letter or digit right before or after.
fn has_word(text: &str, word: &str) -> bool {
    text.split(|c: char| !c.is_ascii_alphanumeric()).any(|w| w == word)
}

#[test]
fn steering_by_cpu_with_two_workers_on_one_cpu_is_a_one_line_error() {
    // One worker more than there are CPUs: the list wraps round, two share a CPU.
    let cpus = percore::worker::allowed_cpus();
    let workers = (cpus.len() + 1).to_string();
    let (status, stderr) =
        run_expecting_exit(&percore_bin(), &serve_args(&["--steer", "cpu", "--workers", &workers]));
    assert_eq!(status.code(), Some(1), "stderr:\n{stderr}");
    let said = format!(
        "percore: --steer cpu: needs one worker per CPU, each on its own: {workers} workers on CPUs "
    );
    assert!(stderr.starts_with(&said) && stderr.lines().count() == 1, "{stderr}");
}

#[test]
fn cpu_outside_the_allowed_ones_is_a_usage_error() {
    // One past the highest CPU this test (and so the server it starts) may run on.
    let outside = (percore::worker::allowed_cpus().last().expect("no allowed CPU") + 1).to_string();
    let (status, stderr) = run_expecting_exit(&percore_bin(), &serve_args(&["--cpus", &outside]));
    assert_eq!(status.code(), Some(2), "stderr:\n{stderr}");
    assert!(has_word(&stderr, &outside), "the error does not name CPU {outside}:\n{stderr}");
}

#[test]
fn a_worker_count_below_one_is_named_out_of_range() {
    for count in ["-1", "0"] {
        let (status, stderr) = run_expecting_exit(&percore_bin(), &serve_args(&["--workers", count]));
        assert_eq!(status.code(), Some(2), "stderr:\n{stderr}");
        assert!(stderr.contains(&format!("{count} is not in 1..")), "--workers {count}:\n{stderr}");
    }
}

#[test]
fn a_body_file_that_cannot_be_read_exits_1_in_serve_and_in_bench() {
    let missing = "/nonexistent/percore-test-body";
    let runs = [
        serve_args(&["--body-file", missing]),
        vec!["bench", "-n", "1", "--body-file", missing, "http://127.0.0.1:9/"],
    ];
    for args in runs {
        let (status, stderr) = run_expecting_exit(&percore_bin(), &args);
        assert_eq!(status.code(), Some(1), "{args:?}:\n{stderr}");
        assert!(stderr.contains(&format!("cannot read --body-file {missing}")), "{args:?}:\n{stderr}");
    }
}

#[test]
fn malformed_cpu_list_is_a_usage_error() {
    let (status, stderr) = run_expecting_exit(&percore_bin(), &serve_args(&["--cpus", "x"]));
    assert_eq!(status.code(), Some(2), "stderr:\n{stderr}");
    assert!(!stderr.trim().is_empty(), "no usage message on stderr");
}

#[test]
fn tune_reports_every_setting_of_sysctl_conf() {
    let path = concat!(env!("CARGO_MANIFEST_DIR"), "/sysctl.conf");
    let conf = std::fs::read_to_string(path).unwrap_or_else(|e| panic!("reading {path}: {e}"));
    let names: Vec<&str> = conf
        .lines()
        .map(str::trim)
        .filter(|line| !line.starts_with('#'))
        .filter_map(|line| line.split_once('='))
        .map(|(name, _)| name.trim())
        .collect();
    assert!(!names.is_empty(), "no settings found in {path}");

    let run = run_capturing(&percore_bin(), &["tune"]);
    // 1 when a setting is below its recommendation (operate.rs checks which).
    assert!(matches!(run.status.code(), Some(0 | 1)), "{run:?}");
    let rows: Vec<&str> = run.stdout.lines().filter_map(|line| line.split_whitespace().next()).collect();
    for name in names {
        assert!(rows.contains(&name), "no row for {name}; stdout:\n{}", run.stdout);
    }
    assert!(run.stdout.contains("ulimit -n"), "no ulimit -n row; stdout:\n{}", run.stdout);
}

/// The scheduling policy of a process: field 41 of /proc/PID/stat (3 is SCHED_BATCH).
fn sched_policy(pid: u32) -> u32 {
    let fields = stat_fields(pid).unwrap_or_else(|| panic!("reading /proc/{pid}/stat"));
    // Field 41 of stat; the first of `fields` is field 3.
    fields[41 - 3].parse().expect("policy is a number")
}

#[test]
fn workers_run_under_sched_other_unless_asked_for_batch() {
    const SCHED_OTHER: u32 = 0;
    const SCHED_BATCH: u32 = 3;
    for (flags, policy) in [(&[][..], SCHED_OTHER), (&["--sched", "batch"][..], SCHED_BATCH)] {
        let server = Percore::start(&[&["--workers", "1"], flags].concat());
        let worker = &server.workers(1)[0];
        // The worker sets its policy before it serves: one answer proves it is done.
        get_on_fresh_connection(&server);
        assert_eq!(sched_policy(worker.pid), policy, "flags {flags:?}");
    }
}
