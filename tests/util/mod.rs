//! Helpers shared by the integration tests: a server process guard and a small
//! blocking HTTP/1.1 client that reads one Content-Length-framed response at a
//! time.

// Every test file compiles its own copy of this module and uses a different
// subset of it, so an item unused by one file is not dead code overall.
#![allow(dead_code)]

use std::io::{BufRead, BufReader, ErrorKind, Read, Write};
use std::net::{Shutdown, SocketAddr, TcpStream};
use std::path::{Path, PathBuf};
use std::process::{Child, ChildStderr, Command, ExitStatus, Stdio};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc;
use std::sync::{Arc, Mutex};
use std::thread;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

/// How long a server may take to print its `listening on` line, or a process
/// that is expected to exit may take to do so.
pub const STARTUP_TIMEOUT: Duration = Duration::from_secs(10);

/// Read/write timeout on every client socket, so a server that stops answering
/// fails the test instead of hanging it.
pub const IO_TIMEOUT: Duration = Duration::from_secs(10);

/// Bound on every wait for something a server does on its own: a line on stderr, a
/// timeout firing, a worker pinning itself, a process exiting. Generous, for a loaded
/// 2-core CI machine; a passing run takes a small fraction of it.
pub const WAIT: Duration = Duration::from_secs(15);

/// The hello server's default body, and the status line of its answers.
pub const HELLO: &[u8] = b"hello, world!\n";
pub const OK: &str = "HTTP/1.1 200 OK";

/// Building the echo example may compile the library first.
const BUILD_TIMEOUT: Duration = Duration::from_secs(600);

const LISTENING_PREFIX: &str = "listening on ";

pub fn percore_bin() -> PathBuf {
    PathBuf::from(env!("CARGO_BIN_EXE_percore"))
}

/// Path of example `name`, building it first.
///
/// `cargo test` builds examples, but `cargo test --test echo` does not, and a
/// binary left over from an earlier build may be stale; asking cargo (which
/// is quick when nothing changed) covers both. Cargo releases its build lock
/// before running test binaries, so this cannot deadlock with the outer cargo.
pub fn example_bin(name: &str) -> PathBuf {
    static BUILT: Mutex<Vec<String>> = Mutex::new(Vec::new());
    let mut built = BUILT.lock().unwrap_or_else(|poisoned| poisoned.into_inner());
    let path = percore_bin().parent().expect("binary has a parent directory").join("examples").join(name);
    if !built.iter().any(|b| b == name) {
        build_example(name);
        built.push(name.to_string());
    }
    path
}

fn build_example(name: &str) {
    let bin = percore_bin();
    let profile_dir = bin.parent().expect("binary has a parent directory");
    let mut cmd = Command::new(env!("CARGO"));
    cmd.args(["build", "--quiet", "--example", name]).current_dir(env!("CARGO_MANIFEST_DIR"));
    // Build into the same profile directory as the binary under test.
    match profile_dir.file_name().and_then(|n| n.to_str()) {
        Some("debug") | None => {}
        Some("release") => {
            cmd.arg("--release");
        }
        Some(other) => {
            cmd.args(["--profile", other]);
        }
    }
    let (status, stderr) = run_to_exit(cmd, BUILD_TIMEOUT);
    assert!(status.success(), "building the {name} example failed ({status}):\n{stderr}");
    let path = profile_dir.join("examples").join(name);
    assert!(path.exists(), "{name} example not found at {} after building it", path.display());
}

/// Kills and reaps the child when dropped, including while a test panics, so
/// no server outlives its test.
struct KillOnDrop(Child);

impl Drop for KillOnDrop {
    fn drop(&mut self) {
        // Fails only if the child already exited, which is fine.
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// A running server process, stopped on drop.
pub struct Server {
    child: KillOnDrop,
    addr: SocketAddr,
    stderr: Arc<Mutex<String>>,
    /// Set once stderr reached EOF: every holder of the pipe has exited.
    stderr_closed: Arc<AtomicBool>,
}

impl Server {
    /// `percore serve` on an ephemeral loopback port, plus `extra` flags.
    pub fn percore(extra: &[&str]) -> Server {
        let mut args = vec!["serve"];
        args.extend(LOOPBACK_ARGS);
        args.extend(extra);
        Server::start(&percore_bin(), &args)
    }

    /// The `echo` example on an ephemeral loopback port.
    pub fn echo() -> Server {
        Server::example("echo", &[])
    }

    /// Example `name` on an ephemeral loopback port, plus `extra` flags.
    pub fn example(name: &str, extra: &[&str]) -> Server {
        let mut args = LOOPBACK_ARGS.to_vec();
        args.extend(extra);
        Server::start(&example_bin(name), &args)
    }

    /// Spawns `program` and waits (bounded) for its `listening on ADDR` line.
    pub fn start(program: &Path, args: &[&str]) -> Server {
        let mut child = Command::new(program)
            .args(args)
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap_or_else(|e| panic!("spawning {}: {e}", program.display()));
        let pipe = child.stderr.take().expect("stderr is piped");
        let child = KillOnDrop(child);
        let stderr = Arc::new(Mutex::new(String::new()));
        let stderr_closed = Arc::new(AtomicBool::new(false));
        let (tx, rx) = mpsc::channel();
        spawn_stderr_reader(pipe, Arc::clone(&stderr), tx, Arc::clone(&stderr_closed));

        // A disconnect means stderr closed (the process exited) before the line.
        let addr = match rx.recv_timeout(STARTUP_TIMEOUT) {
            Ok(addr) => addr,
            Err(_) => {
                drop(child);
                panic!(
                    "{} {args:?} did not print a `{LISTENING_PREFIX}ADDR` line within {STARTUP_TIMEOUT:?}; stderr:\n{}",
                    program.display(),
                    stderr.lock().unwrap()
                );
            }
        };
        Server { child, addr, stderr, stderr_closed }
    }

    pub fn addr(&self) -> SocketAddr {
        self.addr
    }

    pub fn pid(&self) -> u32 {
        self.child.0.id()
    }

    /// Everything the server wrote to stderr so far, `listening on` included.
    pub fn stderr(&self) -> String {
        self.stderr.lock().unwrap().clone()
    }

    pub fn client(&self) -> Client {
        Client::connect(self.addr)
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        if thread::panicking() {
            // The test output is the only place this would otherwise be seen.
            eprintln!("server stderr:\n{}", self.stderr());
        }
        // Its worker processes are killed too, so that none outlives a failed test
        // even if the master's own clean-up were broken. Only while the master is
        // unreaped is its pid surely its own, and are its children its workers.
        if self.try_exit_status().is_none() {
            for pid in children_of(self.pid()) {
                try_signal(pid, "KILL");
            }
        }
        // Then the KillOnDrop field kills and reaps the master.
    }
}

const LOOPBACK_ARGS: [&str; 4] = ["--bind", "127.0.0.1", "--port", "0"];

/// Collects stderr for the life of the process and sends the address from
/// the first `listening on` line.
fn spawn_stderr_reader(
    pipe: ChildStderr,
    collected: Arc<Mutex<String>>,
    tx: mpsc::Sender<SocketAddr>,
    closed: Arc<AtomicBool>,
) {
    thread::spawn(move || {
        let mut tx = Some(tx);
        for line in BufReader::new(pipe).lines() {
            let Ok(line) = line else { break };
            {
                let mut all = collected.lock().unwrap();
                all.push_str(&line);
                all.push('\n');
            }
            let addr = line.strip_prefix(LISTENING_PREFIX).and_then(|a| a.trim().parse().ok());
            if let (Some(addr), Some(sender)) = (addr, tx.as_ref()) {
                // The receiver may have given up already; nothing to do then.
                let _ = sender.send(addr);
                tx = None;
            }
        }
        closed.store(true, Ordering::SeqCst);
    });
}

/// Runs `program args` to completion with a bounded wait, returning its exit
/// status and stderr. Panics (after killing it) if it does not exit in time.
pub fn run_expecting_exit(program: &Path, args: &[&str]) -> (ExitStatus, String) {
    let mut cmd = Command::new(program);
    cmd.args(args);
    run_to_exit(cmd, STARTUP_TIMEOUT)
}

fn run_to_exit(cmd: Command, timeout: Duration) -> (ExitStatus, String) {
    let finished = run_command(cmd, timeout);
    (finished.status, finished.stderr)
}

/// A TCP connection with read/write timeouts set.
pub fn connect(addr: SocketAddr) -> TcpStream {
    let stream =
        TcpStream::connect_timeout(&addr, IO_TIMEOUT).unwrap_or_else(|e| panic!("connecting to {addr}: {e}"));
    stream.set_read_timeout(Some(IO_TIMEOUT)).unwrap();
    stream.set_write_timeout(Some(IO_TIMEOUT)).unwrap();
    stream
}

/// One parsed response. `head` keeps the exact bytes of the status line,
/// header lines and blank line, for byte-for-byte comparisons.
#[derive(Debug, Clone)]
pub struct Response {
    pub status_line: String,
    pub headers: Vec<(String, String)>,
    pub body: Vec<u8>,
    pub head: Vec<u8>,
}

impl Response {
    /// Value of the first header named `name` (case-insensitive).
    pub fn header(&self, name: &str) -> Option<&str> {
        self.headers.iter().find(|(n, _)| n.eq_ignore_ascii_case(name)).map(|(_, v)| v.as_str())
    }

    /// The exact bytes this response occupied on the wire.
    pub fn raw(&self) -> Vec<u8> {
        [self.head.as_slice(), &self.body].concat()
    }

    pub fn content_length(&self) -> usize {
        let value = self.header("Content-Length").unwrap_or_else(|| panic!("no Content-Length in {self:?}"));
        value.parse().unwrap_or_else(|e| panic!("bad Content-Length {value:?}: {e}"))
    }
}

/// Whether the request a response answers was a HEAD, which decides whether
/// Content-Length bytes of body follow.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Method {
    Get,
    Head,
}

impl Method {
    pub fn as_str(self) -> &'static str {
        match self {
            Method::Get => "GET",
            Method::Head => "HEAD",
        }
    }
}

/// A blocking client. The buffered reader lives as long as the connection so
/// bytes of a later pipelined response read ahead are not lost.
pub struct Client {
    reader: BufReader<TcpStream>,
}

impl Client {
    pub fn connect(addr: SocketAddr) -> Client {
        Client::new(connect(addr))
    }

    pub fn new(stream: TcpStream) -> Client {
        Client { reader: BufReader::new(stream) }
    }

    pub fn stream(&self) -> &TcpStream {
        self.reader.get_ref()
    }

    pub fn send(&mut self, bytes: &[u8]) {
        self.reader
            .get_mut()
            .write_all(bytes)
            .unwrap_or_else(|e| panic!("sending {:?}: {e}", String::from_utf8_lossy(bytes)));
    }

    /// Sends a request with a Host header and any `extra` header lines
    /// (each without its CRLF).
    pub fn send_request(&mut self, method: Method, target: &str, version: &str, extra: &[&str]) {
        self.send(request(method, target, version, extra).as_bytes());
    }

    /// One HTTP/1.1 GET of `target`, and its response.
    pub fn get(&mut self, target: &str) -> Response {
        self.send_request(Method::Get, target, "HTTP/1.1", &[]);
        self.read_response(Method::Get)
    }

    /// Reads exactly one response; its body is Content-Length bytes unless it
    /// answers a HEAD.
    pub fn read_response(&mut self, method: Method) -> Response {
        let mut head = Vec::new();
        let status_line = self.read_line(&mut head, "status line");
        let mut headers = Vec::new();
        loop {
            let line = self.read_line(&mut head, "header line");
            if line.is_empty() {
                break;
            }
            let (name, value) =
                line.split_once(':').unwrap_or_else(|| panic!("header line without a colon: {line:?}"));
            headers.push((name.to_string(), value.trim_start().to_string()));
        }
        let mut response = Response { status_line, headers, body: Vec::new(), head };
        if method == Method::Get {
            response.body = self.read_exact_bytes(response.content_length());
        }
        response
    }

    /// Reads one CRLF-terminated line, appending its raw bytes to `raw` and
    /// returning it without the CRLF.
    fn read_line(&mut self, raw: &mut Vec<u8>, what: &str) -> String {
        let start = raw.len();
        match self.reader.read_until(b'\n', raw) {
            Ok(0) => panic!(
                "connection closed while reading a {what}; got so far: {:?}",
                String::from_utf8_lossy(raw)
            ),
            Ok(_) => {}
            Err(e) => panic!("reading a {what}: {e}; got so far: {:?}", String::from_utf8_lossy(raw)),
        }
        let line = &raw[start..];
        assert!(
            line.ends_with(b"\r\n"),
            "{what} not terminated by CRLF: {:?}",
            String::from_utf8_lossy(line)
        );
        String::from_utf8(line[..line.len() - 2].to_vec())
            .unwrap_or_else(|e| panic!("{what} is not UTF-8: {e}"))
    }

    pub fn read_exact_bytes(&mut self, n: usize) -> Vec<u8> {
        let mut buf = vec![0; n];
        self.reader.read_exact(&mut buf).unwrap_or_else(|e| panic!("reading {n} bytes: {e}"));
        buf
    }

    /// Asserts the peer closes the connection (a read returns 0) within the
    /// read timeout, with no further bytes before that.
    pub fn expect_eof(&mut self) {
        read_to_eof(&mut self.reader);
    }

    /// Half-closes: the peer sees EOF, we can still read.
    pub fn shutdown_write(&self) {
        self.stream().shutdown(Shutdown::Write).expect("shutting down the write half");
    }
}

/// Builds a request: request line, a Host header, then `extra` header lines.
pub fn request(method: Method, target: &str, version: &str, extra: &[&str]) -> String {
    let mut text = format!("{} {target} {version}\r\nHost: localhost\r\n", method.as_str());
    for line in extra {
        text.push_str(line);
        text.push_str("\r\n");
    }
    text.push_str("\r\n");
    text
}

/// Asserts `reader` reaches EOF (read returns 0) within its timeout without
/// yielding any more bytes.
pub fn read_to_eof(reader: &mut impl Read) {
    let mut buf = [0u8; 4096];
    match reader.read(&mut buf) {
        Ok(0) => {}
        Ok(n) => panic!(
            "expected the connection to close, got {n} more bytes: {:?}",
            String::from_utf8_lossy(&buf[..n])
        ),
        Err(e) if matches!(e.kind(), ErrorKind::WouldBlock | ErrorKind::TimedOut) => {
            panic!("the connection was not closed within {IO_TIMEOUT:?}")
        }
        Err(e) => panic!("expected a clean close (EOF), got error: {e}"),
    }
}

// ---------------------------------------------------------------------------
// Processes: waiting for exits, signals, /proc, and the worker lines of
// `percore serve`.

/// How often the bounded polls below look again.
const POLL_INTERVAL: Duration = Duration::from_millis(20);

impl Server {
    /// `wrapper` (a program and its arguments, e.g. `taskset -c 1`) running
    /// `percore serve` on an ephemeral loopback port, plus `extra` flags. The
    /// wrapper must exec percore, so that `pid()` is percore's.
    pub fn percore_via(wrapper: &[&str], extra: &[&str]) -> Server {
        let (program, wrapper_args) = wrapper.split_first().expect("a wrapper program");
        let bin = percore_bin();
        let mut args: Vec<&str> = wrapper_args.to_vec();
        args.push(bin.to_str().expect("binary path is UTF-8"));
        args.push("serve");
        args.extend(LOOPBACK_ARGS);
        args.extend(extra);
        Server::start(Path::new(program), &args)
    }

    /// The exit status if the process has exited (reaping it), else None.
    pub fn try_exit_status(&mut self) -> Option<ExitStatus> {
        self.child.0.try_wait().expect("polling the server's exit status")
    }

    /// Waits up to `timeout` for the process to exit; None if it is still
    /// running then (it is still killed on drop).
    pub fn wait_exit_within(&mut self, timeout: Duration) -> Option<ExitStatus> {
        let mut status = None;
        wait_until(timeout, || {
            status = self.try_exit_status();
            status.is_some()
        });
        status
    }

    /// Waits up to `timeout` for the process to exit; panics if it does not.
    pub fn wait_exit(&mut self, timeout: Duration) -> ExitStatus {
        self.wait_exit_within(timeout)
            .unwrap_or_else(|| panic!("the server (pid {}) did not exit within {timeout:?}", self.pid()))
    }

    /// Waits up to `timeout` for stderr to reach EOF (the process and every
    /// child that inherited its stderr have exited) and returns all of it;
    /// panics if it stays open.
    pub fn wait_stderr_closed(&self, timeout: Duration) -> String {
        let closed = wait_until(timeout, || self.stderr_closed.load(Ordering::SeqCst));
        assert!(closed, "stderr still open {timeout:?} on; so far:\n{}", self.stderr());
        self.stderr()
    }

    /// Waits up to `timeout` until `cond` holds for the stderr collected so
    /// far and returns that stderr; panics (naming `what`) otherwise.
    pub fn wait_for_stderr(&self, timeout: Duration, what: &str, cond: impl Fn(&str) -> bool) -> String {
        let mut text = String::new();
        let found = wait_until(timeout, || {
            text = self.stderr();
            cond(&text)
        });
        assert!(found, "no {what} on stderr within {timeout:?}; stderr so far:\n{text}");
        text
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

/// State letter and parent pid of `pid` from /proc/PID/stat, None if there is
/// no such process.
pub fn proc_state(pid: u32) -> Option<(char, u32)> {
    let fields = stat_fields(pid)?;
    Some((fields.first()?.chars().next()?, fields.get(1)?.parse().ok()?))
}

/// Whether `pid` exists and is not a zombie.
pub fn is_running(pid: u32) -> bool {
    proc_state(pid).is_some_and(|(state, _)| state != 'Z')
}

/// Pids of the live (non-zombie) children of `parent`, sorted.
pub fn children_of(parent: u32) -> Vec<u32> {
    let mut children: Vec<u32> = std::fs::read_dir("/proc")
        .expect("reading /proc")
        .filter_map(|entry| entry.ok()?.file_name().to_str()?.parse().ok())
        .filter(|&pid| proc_state(pid).is_some_and(|(state, ppid)| ppid == parent && state != 'Z'))
        .collect();
    children.sort_unstable();
    children
}

/// The `Cpus_allowed_list` of `pid` (e.g. "1" or "0-1"), None if it is gone.
pub fn cpus_allowed(pid: u32) -> Option<String> {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).ok()?;
    status.lines().find_map(|line| line.strip_prefix("Cpus_allowed_list:")).map(|v| v.trim().to_string())
}

/// A `worker {index} pid {pid} cpu {cpu}` line: a worker was started.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct WorkerLine {
    pub index: usize,
    pub pid: u32,
    pub cpu: usize,
}

/// Parses the `worker I pid P cpu C` prefix of `line`, returning the rest.
fn parse_worker_prefix(line: &str) -> Option<(WorkerLine, &str)> {
    let rest = line.strip_prefix("worker ")?;
    let (index, rest) = rest.split_once(" pid ")?;
    let (pid, rest) = rest.split_once(" cpu ")?;
    let (cpu, rest) = rest.split_once(' ').unwrap_or((rest, ""));
    let worker = WorkerLine { index: index.parse().ok()?, pid: pid.parse().ok()?, cpu: cpu.parse().ok()? };
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

/// A `worker I pid P cpu C stopped: A connections, R requests, E errors` line.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct StoppedLine {
    pub worker: WorkerLine,
    pub connections: u64,
    pub requests: u64,
    pub errors: u64,
}

fn parse_stopped(line: &str) -> Option<StoppedLine> {
    let (worker, rest) = parse_worker_prefix(line)?;
    let counts = rest.strip_prefix("stopped: ")?;
    let mut numbers = counts.split(", ");
    let mut count = |unit: &str| -> Option<u64> { numbers.next()?.strip_suffix(unit)?.trim().parse().ok() };
    let connections = count(" connections")?;
    let requests = count(" requests")?;
    let errors = count(" errors")?;
    Some(StoppedLine { worker, connections, requests, errors })
}

/// Every worker `stopped:` line in `stderr`, in order.
pub fn stopped_lines(stderr: &str) -> Vec<StoppedLine> {
    stderr.lines().filter_map(parse_stopped).collect()
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

/// What a process that ran to completion printed.
#[derive(Debug)]
pub struct Finished {
    pub status: ExitStatus,
    pub stdout: String,
    pub stderr: String,
}

/// Runs `program args` to completion with a bounded wait, capturing stdout
/// and stderr. Panics (after killing it) if it does not exit in time.
pub fn run_capturing(program: &Path, args: &[&str]) -> Finished {
    run_capturing_within(program, args, STARTUP_TIMEOUT)
}

/// Whether signal number `signo` is pending for `pid` (to the process or to
/// its main thread), as /proc/PID/status shows it; false if `pid` is gone.
pub fn signal_pending(pid: u32, signo: u32) -> bool {
    let Ok(status) = std::fs::read_to_string(format!("/proc/{pid}/status")) else { return false };
    status
        .lines()
        .filter_map(|line| line.strip_prefix("ShdPnd:").or_else(|| line.strip_prefix("SigPnd:")))
        .filter_map(|mask| u64::from_str_radix(mask.trim(), 16).ok())
        .any(|mask| mask & (1 << (signo - 1)) != 0)
}

/// Like [`run_capturing`], with a given bound on the wait instead of
/// [`STARTUP_TIMEOUT`], for processes that run for a while by design.
pub fn run_capturing_within(program: &Path, args: &[&str], timeout: Duration) -> Finished {
    let mut cmd = Command::new(program);
    cmd.args(args);
    run_command(cmd, timeout)
}

/// Runs `cmd` to completion within `timeout`, capturing stdout and stderr; panics
/// (after killing it) if it does not exit in time. The one runner behind the others.
fn run_command(mut cmd: Command, timeout: Duration) -> Finished {
    cmd.stdin(Stdio::null()).stdout(Stdio::piped()).stderr(Stdio::piped());
    let mut child = cmd.spawn().unwrap_or_else(|e| panic!("spawning {cmd:?}: {e}"));
    let (stdout, stderr) = (child.stdout.take().expect("piped"), child.stderr.take().expect("piped"));
    let mut child = KillOnDrop(child);
    // Each pipe reaching EOF is how we learn, without polling, that the
    // process has exited; both are drained so neither can fill and block it.
    let drain = |mut pipe: Box<dyn Read + Send>| {
        let (tx, rx) = mpsc::channel();
        thread::spawn(move || {
            let mut text = String::new();
            let _ = pipe.read_to_string(&mut text);
            let _ = tx.send(text);
        });
        rx
    };
    let (out_rx, err_rx) = (drain(Box::new(stdout)), drain(Box::new(stderr)));
    let deadline = std::time::Instant::now() + timeout;
    let collect = |rx: mpsc::Receiver<String>| {
        let left = deadline.saturating_duration_since(std::time::Instant::now());
        rx.recv_timeout(left).unwrap_or_else(|_| panic!("{cmd:?} did not exit within {timeout:?}"))
    };
    let (stdout, stderr) = (collect(out_rx), collect(err_rx));
    let status = child.0.wait().expect("waiting for child");
    Finished { status, stdout, stderr }
}

/// The response's `Date` value, asserted to be a 29-byte IMF-fixdate.
pub fn date_of(response: &Response) -> &str {
    let date = response.header("Date").unwrap_or_else(|| panic!("no Date header in {response:?}"));
    assert_eq!(date.len(), 29, "Date {date:?} is not 29 bytes");
    let parsed =
        httpdate::parse_http_date(date).unwrap_or_else(|e| panic!("Date {date:?} does not parse: {e}"));
    // parse_http_date also accepts the obsolete RFC 850 and asctime forms;
    // formatting back yields IMF-fixdate, so equality pins the format down.
    assert_eq!(httpdate::fmt_http_date(parsed), date, "Date is not IMF-fixdate");
    date
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

/// The fields of `/proc/PID/stat` after the command name (which is in parentheses
/// and may itself hold spaces or ')'): the state, field 3, comes first.
pub fn stat_fields(pid: u32) -> Option<Vec<String>> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    Some(stat[stat.rfind(')')? + 1..].split_whitespace().map(str::to_owned).collect())
}

/// A field of `/proc/PID/status` in KiB: `VmRSS` (resident now) or `VmHWM` (its peak).
pub fn vm_kib(pid: u32, field: &str) -> u64 {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status"))
        .unwrap_or_else(|e| panic!("reading /proc/{pid}/status: {e}"));
    let prefix = format!("{field}:");
    let line = status.lines().find_map(|l| l.strip_prefix(&prefix)).unwrap_or_else(|| panic!("no {field}"));
    line.trim().trim_end_matches("kB").trim().parse().unwrap_or_else(|e| panic!("{field} {line:?}: {e}"))
}

/// Reads one response (head, then its Content-Length body, dropped) and
/// returns its status line.
pub fn read_status(reader: &mut impl BufRead) -> std::io::Result<String> {
    use std::io::{self, Error};
    fn line(reader: &mut impl BufRead, buf: &mut String) -> io::Result<()> {
        buf.clear();
        match reader.read_line(buf)? {
            0 => Err(Error::new(ErrorKind::UnexpectedEof, "connection closed mid-response")),
            _ => Ok(()),
        }
    }
    let mut status = String::new();
    line(reader, &mut status)?;
    let mut header = String::new();
    let mut length = None;
    loop {
        line(reader, &mut header)?;
        if header == "\r\n" {
            break;
        }
        if let Some((name, value)) = header.split_once(':') {
            if name.eq_ignore_ascii_case("content-length") {
                length = value.trim().parse::<u64>().ok();
            }
        }
    }
    let length = length.ok_or_else(|| Error::new(ErrorKind::InvalidData, "no Content-Length"))?;
    let skipped = io::copy(&mut reader.by_ref().take(length), &mut io::sink())?;
    if skipped < length {
        return Err(Error::new(ErrorKind::UnexpectedEof, "connection closed mid-body"));
    }
    Ok(status.trim_end().to_string())
}
