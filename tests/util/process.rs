//! Running processes: the one runner for commands that run to completion and
//! its wrappers, the guard that kills a child on drop, a temporary file to hand
//! one, bounded waits, signals, and the worker lines `percore serve` prints.

use std::io::{Read, Write};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, ExitStatus, Stdio};
use std::sync::mpsc;
use std::thread;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use super::STARTUP_TIMEOUT;

/// How often the bounded polls below look again.
const POLL_INTERVAL: Duration = Duration::from_millis(20);

/// Kills and reaps the child when dropped, including while a test panics, so
/// no server outlives its test; for a process a test spawns with pipes of its own
/// choosing too.
// It lives here rather than beside `Server` because the runner below needs it
// too, and server.rs then depends on this module, never the other way round.
pub struct KillOnDrop(pub Child);

impl Drop for KillOnDrop {
    fn drop(&mut self) {
        // Fails only if the child already exited, which is fine.
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// What a process that ran to completion printed.
#[derive(Debug)]
pub struct Finished {
    pub status: ExitStatus,
    pub stdout: String,
    pub stderr: String,
}

/// Runs `program args` to completion with a bounded wait, returning its exit
/// status and stderr. Panics (after killing it) if it does not exit in time.
pub fn run_expecting_exit(program: &Path, args: &[&str]) -> (ExitStatus, String) {
    let mut cmd = Command::new(program);
    cmd.args(args);
    run_to_exit(cmd, STARTUP_TIMEOUT)
}

/// Like [`run_expecting_exit`], with extra environment variables and a
/// given bound on the wait.
pub fn run_expecting_exit_with_env(
    program: &Path,
    args: &[&str],
    env: &[(&str, &str)],
    timeout: Duration,
) -> (ExitStatus, String) {
    let mut cmd = Command::new(program);
    cmd.args(args).envs(env.iter().copied());
    run_to_exit(cmd, timeout)
}

pub(super) fn run_to_exit(cmd: Command, timeout: Duration) -> (ExitStatus, String) {
    let finished = run_command(cmd, timeout);
    (finished.status, finished.stderr)
}

/// Runs `program args` to completion with a bounded wait, capturing stdout
/// and stderr. Panics (after killing it) if it does not exit in time.
pub fn run_capturing(program: &Path, args: &[&str]) -> Finished {
    run_capturing_within(program, args, STARTUP_TIMEOUT)
}

/// Like [`run_capturing`], with a given bound on the wait instead of
/// [`STARTUP_TIMEOUT`], for processes that run for a while by design.
pub fn run_capturing_within(program: &Path, args: &[&str], timeout: Duration) -> Finished {
    let mut cmd = Command::new(program);
    cmd.args(args);
    run_command(cmd, timeout)
}

/// Like [`run_capturing_within`], with stdout going to `stdout` (a file, a pipe
/// nobody reads) instead of captured: the result's `stdout` is empty.
pub fn run_with_stdout_within(program: &Path, args: &[&str], stdout: Stdio, timeout: Duration) -> Finished {
    let mut cmd = Command::new(program);
    cmd.args(args);
    Running::spawn_to(cmd, stdout).finish_within(timeout)
}

/// Runs `cmd` to completion within `timeout`, capturing stdout and stderr; panics
/// (after killing it) if it does not exit in time. The one runner behind the others.
fn run_command(cmd: Command, timeout: Duration) -> Finished {
    Running::spawn(cmd).finish_within(timeout)
}

/// A process started with its output captured, to be signalled or watched in /proc
/// while it runs, then waited for; killed if dropped first.
pub struct Running {
    child: KillOnDrop,
    stdout: mpsc::Receiver<String>,
    stderr: mpsc::Receiver<String>,
}

impl Running {
    /// Starts `program args`, stdin closed, stdout and stderr captured.
    pub fn start(program: &Path, args: &[&str]) -> Running {
        let mut cmd = Command::new(program);
        cmd.args(args);
        Running::spawn(cmd)
    }

    fn spawn(cmd: Command) -> Running {
        Running::spawn_to(cmd, Stdio::piped())
    }

    /// Starts `cmd` with stdout to `stdout`: captured if that is a pipe.
    fn spawn_to(mut cmd: Command, stdout: Stdio) -> Running {
        cmd.stdin(Stdio::null()).stdout(stdout).stderr(Stdio::piped());
        let mut child = cmd.spawn().unwrap_or_else(|e| panic!("spawning {cmd:?}: {e}"));
        // Each pipe reaching EOF is how we learn, without polling, that the
        // process has exited; both are drained so neither can fill and block it.
        // Stdout not captured reads as empty at once.
        let drain = |pipe: Option<Box<dyn Read + Send>>| {
            let (tx, rx) = mpsc::channel();
            thread::spawn(move || {
                let mut text = String::new();
                if let Some(mut pipe) = pipe {
                    let _ = pipe.read_to_string(&mut text);
                }
                let _ = tx.send(text);
            });
            rx
        };
        let stdout = child.stdout.take().map(|pipe| Box::new(pipe) as Box<dyn Read + Send>);
        let stderr = child.stderr.take().map(|pipe| Box::new(pipe) as Box<dyn Read + Send>);
        Running { child: KillOnDrop(child), stdout: drain(stdout), stderr: drain(stderr) }
    }

    pub fn pid(&self) -> u32 {
        self.child.0.id()
    }

    /// Waits for the exit within `timeout`; panics (after killing it) if it does
    /// not exit in time.
    pub fn finish_within(mut self, timeout: Duration) -> Finished {
        let deadline = std::time::Instant::now() + timeout;
        let pid = self.pid();
        let collect = |rx: &mpsc::Receiver<String>| {
            let left = deadline.saturating_duration_since(std::time::Instant::now());
            rx.recv_timeout(left).unwrap_or_else(|_| panic!("process {pid} did not exit within {timeout:?}"))
        };
        let (stdout, stderr) = (collect(&self.stdout), collect(&self.stderr));
        let status = self.child.0.wait().expect("waiting for child");
        Finished { status, stdout, stderr }
    }
}

/// A file in the temporary directory, with a name no other test or run takes,
/// removed on drop.
pub struct TempFile(PathBuf);

impl TempFile {
    /// Creates the file with `contents`.
    pub fn with_contents(contents: &[u8]) -> TempFile {
        let nanos = SystemTime::now().duration_since(UNIX_EPOCH).unwrap().as_nanos();
        let name = format!("percore-test-{}-{nanos}", std::process::id());
        let path = std::env::temp_dir().join(name);
        let mut file = std::fs::OpenOptions::new()
            .write(true)
            .create_new(true)
            .open(&path)
            .unwrap_or_else(|e| panic!("creating {}: {e}", path.display()));
        file.write_all(contents).unwrap_or_else(|e| panic!("writing {}: {e}", path.display()));
        TempFile(path)
    }

    /// Its path, for a command line.
    pub fn path(&self) -> &str {
        self.0.to_str().expect("a UTF-8 temp path")
    }
}

impl Drop for TempFile {
    fn drop(&mut self) {
        let _ = std::fs::remove_file(&self.0);
    }
}

/// Polls `cond` until it holds or `timeout` passes; returns whether it held.
/// `cond` is always called at least once, and once more after the deadline.
pub fn wait_until(timeout: Duration, mut cond: impl FnMut() -> bool) -> bool {
    let deadline = std::time::Instant::now() + timeout;
    loop {
        if cond() {
            return true;
        }
        if std::time::Instant::now() >= deadline {
            return cond();
        }
        thread::sleep(POLL_INTERVAL);
    }
}

/// Sends SIG`name` (e.g. "TERM", "KILL") to `pid` with kill(1); returns
/// whether it was delivered (false once the process is gone).
pub fn try_signal(pid: u32, name: &str) -> bool {
    Command::new("kill")
        .args([format!("-{name}"), pid.to_string()])
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status()
        .unwrap_or_else(|e| panic!("running kill -{name} {pid}: {e}"))
        .success()
}

/// Sends SIG`name` to `pid`, which must exist.
pub fn signal(pid: u32, name: &str) {
    assert!(try_signal(pid, name), "kill -{name} {pid} failed: is the process gone?");
}

/// A new master's pid, from the old master's `upgrading: new master pid P` line
/// (after a SIGUSR2).
pub fn new_master(stderr: &str) -> Option<u32> {
    stderr.lines().find_map(|line| line.strip_prefix("percore: upgrading: new master pid ")?.parse().ok())
}

/// Kills a process this test started but is not its child (a new master), by its
/// pid, if it still runs when dropped.
pub struct KillPid(pub u32);

impl Drop for KillPid {
    fn drop(&mut self) {
        if super::is_running(self.0) {
            try_signal(self.0, "KILL");
        }
    }
}

/// SIGCONTs a SIGSTOPped process when dropped, also while a test panics.
pub struct Resume(pub u32);

impl Drop for Resume {
    fn drop(&mut self) {
        try_signal(self.0, "CONT");
    }
}

/// A `worker {index} pid {pid} cpu {cpu}` line: a worker was started.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct WorkerLine {
    pub index: usize,
    pub pid: u32,
    /// Its CPU; `None` for a worker the line says is unpinned (`--no-pin`).
    pub cpu: Option<usize>,
}

impl WorkerLine {
    /// Where the worker runs, as its lines say it: `cpu 3`, or `unpinned`.
    pub fn place(&self) -> String {
        self.cpu.map_or("unpinned".to_string(), |cpu| format!("cpu {cpu}"))
    }
}

/// Parses the `worker I pid P cpu C` (or `worker I pid P unpinned`) prefix of
/// `line`, returning the rest.
fn parse_worker_prefix(line: &str) -> Option<(WorkerLine, &str)> {
    let rest = line.strip_prefix("worker ")?;
    let (index, rest) = rest.split_once(" pid ")?;
    let (pid, rest) = rest.split_once(' ')?;
    let (cpu, rest) = match rest.strip_prefix("unpinned") {
        Some(rest) => (None, rest),
        None => {
            let rest = rest.strip_prefix("cpu ")?;
            let (cpu, rest) = rest.split_once(' ').map_or((rest, ""), |(cpu, rest)| (cpu, rest));
            (Some(cpu.parse().ok()?), rest)
        }
    };
    let rest = rest.strip_prefix(' ').unwrap_or(rest);
    let worker = WorkerLine { index: index.parse().ok()?, pid: pid.parse().ok()?, cpu };
    Some((worker, rest))
}

/// Every worker start line in `stderr`, in order.
pub fn worker_lines(stderr: &str) -> Vec<WorkerLine> {
    stderr
        .lines()
        .filter_map(parse_worker_prefix)
        .filter(|(_, rest)| rest.is_empty())
        .map(|(worker, _)| worker)
        .collect()
}

/// A `worker I pid P cpu C stopped: A connections, F failed, R requests, X refused`
/// line.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct StoppedLine {
    pub worker: WorkerLine,
    pub connections: u64,
    pub failed: u64,
    pub requests: u64,
    pub refused: u64,
}

fn parse_stopped(line: &str) -> Option<StoppedLine> {
    let (worker, rest) = parse_worker_prefix(line)?;
    let counts = rest.strip_prefix("stopped: ")?;
    let mut numbers = counts.split(", ");
    let mut count = |unit: &str| -> Option<u64> { numbers.next()?.strip_suffix(unit)?.trim().parse().ok() };
    let connections = count(" connections")?;
    let failed = count(" failed")?;
    let requests = count(" requests")?;
    let refused = count(" refused")?;
    Some(StoppedLine { worker, connections, failed, requests, refused })
}

/// Every worker `stopped:` line in `stderr`, in order.
pub fn stopped_lines(stderr: &str) -> Vec<StoppedLine> {
    stderr.lines().filter_map(parse_stopped).collect()
}

/// Whether the program `name` is on PATH, for a test that talks to it. When it is
/// not, the test says so on its output and is skipped, unless the environment
/// variable `PERCORE_REQUIRE_TOOLS` is set (as `.ci/run` sets it, after installing
/// them): then it fails, so that CI never passes without running it.
pub fn tool_available(name: &str, package: &str) -> bool {
    let path = std::env::var_os("PATH").unwrap_or_default();
    if std::env::split_paths(&path).any(|dir| dir.join(name).is_file()) {
        return true;
    }
    let why = format!("{name} is not installed (apt-get install {package})");
    assert!(std::env::var_os("PERCORE_REQUIRE_TOOLS").is_none(), "{why}, and PERCORE_REQUIRE_TOOLS is set");
    skip(&why);
    false
}

/// Says that the calling test skips what it tests, and why, on a line of its own
/// starting `skipped:`, written past `cargo test`'s capture of the test's output: a
/// skip is seen in a plain `cargo test`, not only with `--show-output`. (It passes
/// still; `.ci/run` fails when its main run shows such a line.)
pub fn skip(why: &str) {
    let test = thread::current().name().unwrap_or("a test").to_string();
    // A write to the stream itself, not eprintln!, which the test harness captures.
    let _ = writeln!(std::io::stderr(), "\nskipped: {test}: {why}");
}

/// Runs `wrk` with `args` on `url`, within WAIT and 15 s more, and asserts what its
/// user would look at: it succeeded, with no socket errors and no answer outside 2xx.
/// Returns the requests it made, at least one.
pub fn run_wrk(args: &[&str], url: &str) -> u64 {
    let all: Vec<&str> = args.iter().copied().chain(["--timeout", "10s", url]).collect();
    let run = run_capturing_within(Path::new("wrk"), &all, super::WAIT + Duration::from_secs(15));
    let out = &run.stdout;
    assert!(run.status.success(), "wrk failed ({}):\n{out}\n{}", run.status, run.stderr);
    assert!(!out.contains("Socket errors"), "wrk saw socket errors:\n{out}");
    assert!(!out.contains("Non-2xx"), "wrk saw answers that are not 2xx:\n{out}");
    let requests: u64 = out
        .lines()
        .find_map(|line| line.trim().split_once(" requests in ").map(|(n, _)| n.trim().to_string()))
        .and_then(|n| n.parse().ok())
        .unwrap_or_else(|| panic!("no request count in wrk's output:\n{out}"));
    assert!(requests > 0, "wrk made no request:\n{out}");
    requests
}

/// `strace` attached to a running process, recording the system calls it is asked
/// for to a file until [`finish`](Strace::finish). Killed on drop if not finished.
pub struct Strace {
    child: KillOnDrop,
    output: TempFile,
}

impl Strace {
    /// Attaches to `pid`, tracing the comma-separated system calls `calls`; returns
    /// once strace says it is attached, so every call after that is recorded.
    pub fn attach(pid: u32, calls: &str) -> Strace {
        let output = TempFile::with_contents(b"");
        let mut child = Command::new("strace")
            .args(["-e", &format!("trace={calls}"), "-o", output.path(), "-p", &pid.to_string()])
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap_or_else(|e| panic!("spawning strace: {e}"));
        let stderr = child.stderr.take().expect("piped");
        let child = KillOnDrop(child);
        // strace says `Process PID attached` on stderr; the reader stays until it exits.
        let (tx, rx) = mpsc::channel();
        thread::spawn(move || {
            for line in std::io::BufRead::lines(std::io::BufReader::new(stderr)).map_while(Result::ok) {
                let _ = tx.send(line);
            }
        });
        let deadline = std::time::Instant::now() + STARTUP_TIMEOUT;
        loop {
            let left = deadline.saturating_duration_since(std::time::Instant::now());
            match rx.recv_timeout(left) {
                Ok(line) if line.contains("attached") => break,
                Ok(_) => {}
                Err(_) => panic!("strace did not attach to {pid} within {STARTUP_TIMEOUT:?}"),
            }
        }
        Strace { child, output }
    }

    /// Detaches (SIGINT, as Ctrl-C does) and returns the calls recorded, one a line
    /// (`name(args) = result`), without strace's own notes.
    pub fn finish(mut self) -> Vec<String> {
        signal(self.child.0.id(), "INT");
        let exited = wait_until(STARTUP_TIMEOUT, || self.child.0.try_wait().ok().flatten().is_some());
        assert!(exited, "strace did not detach within {STARTUP_TIMEOUT:?}");
        let text = std::fs::read_to_string(self.output.path()).expect("reading strace's output");
        text.lines()
            .filter(|line| !line.starts_with("---") && !line.starts_with("+++"))
            .map(str::to_owned)
            .collect()
    }
}
