//! `worker::run` serving a `Service` of the test's own, as a program that takes the
//! library without its `cli` feature does: the master loads the service's
//! configuration, forks a worker that builds its protocol from it, reports its
//! events to the caller's closure, and stops gracefully on SIGTERM with status 0.
//!
//! A test crate of its own with no libtest harness (`harness = false` in
//! Cargo.toml, `util::test_or_serve`): `worker::run` refuses to fork from a process
//! with more than one thread, and libtest runs tests on threads. `main` is the test;
//! it starts this same program again in the role of the server ([`ROLE`] set), with
//! one worker on 127.0.0.1 port 0, and talks to it. Every check that fails prints
//! why and makes the program exit with status 1; the server is killed on the way out.
//!
//! It builds and passes with `--no-default-features`: it uses neither `cli` nor the
//! `percore` binary.

mod util;

use std::io::{self, BufRead, BufReader, Read, Write};
use std::net::{Shutdown, SocketAddr, TcpStream};
use std::process::{Child, Command, ExitCode, ExitStatus, Stdio};
use std::sync::mpsc::{self, Receiver};
use std::time::Instant;

use percore::listen::Opening;
use percore::reactor::{Counts, Io, Protocol, Verdict};
use percore::worker::{self, Event, Options, Outcome, Service};
use util::WAIT;

/// Set in the environment of the copy of this program that serves.
const ROLE: &str = "PERCORE_TEST_SERVICE_SERVES";

/// The longest line the service measures, as its configuration says.
const LONGEST: usize = 16;

/// Answers each line with its length in bytes (its line ending not counted), or
/// `too long` past the longest its configuration allows; a partial line waits for
/// the rest. Counts the lines, and the ones refused.
struct LineLength {
    longest: usize,
    counts: Counts,
}

impl Protocol for LineLength {
    type Conn = ();

    fn on_data(&mut self, _conn: &mut (), input: &[u8], io: &mut Io<'_>) -> Verdict {
        let mut consumed = 0;
        while let Some(end) = input[consumed..].iter().position(|&b| b == b'\n') {
            let line = &input[consumed..consumed + end];
            let line = line.strip_suffix(b"\r").unwrap_or(line);
            consumed += end + 1;
            self.counts.requests += 1;
            if line.len() > self.longest {
                self.counts.refused += 1;
                io.write(b"too long\r\n");
            } else {
                io.write(format!("{}\r\n", line.len()).as_bytes());
            }
        }
        Verdict::keep(consumed)
    }

    fn counts(&self) -> Counts {
        self.counts
    }
}

/// The service: its configuration (the longest line measured) loaded in the master,
/// the protocol built from it in the worker.
struct Lengths;

impl Service for Lengths {
    type Protocol = LineLength;
    type Config = usize;

    fn load(&self) -> io::Result<usize> {
        Ok(LONGEST)
    }

    fn protocol(&self, longest: &usize) -> io::Result<LineLength> {
        Ok(LineLength { longest: *longest, counts: Counts::default() })
    }
}

/// The test's name, as `cargo test` filters and lists it.
const NAME: &str = "worker_run_serves_a_custom_service_and_stops_on_term";

fn main() -> ExitCode {
    util::test_or_serve(NAME, ROLE, check, serve)
}

/// The server's role: one worker on 127.0.0.1 port 0, its events as lines on stdout
/// (`listening ADDR`, `worker PID`, `stopped ...`, any other as it debugs); exits 0
/// once it stopped gracefully.
fn serve() -> ExitCode {
    let cpus = match worker::plan(&worker::allowed_cpus(), None, Some(1)) {
        Ok(cpus) => cpus,
        Err(why) => {
            eprintln!("server: {why}");
            return ExitCode::from(2);
        }
    };
    let options = Options { cpus, ..Options::new(([127, 0, 0, 1], 0).into(), Opening::ClientSpeaksFirst) };
    let report = |event: Event<'_>| match event {
        Event::Listening(addr) => println!("listening {addr}"),
        Event::Started { pid, .. } => println!("worker {pid}"),
        Event::Stopped { stats, counts, .. } => println!(
            "stopped: {} accepted, {} failed, {} requests, {} refused",
            stats.accepted, stats.failed, counts.requests, counts.refused
        ),
        other => println!("event {other:?}"),
    };
    match worker::run(&options, Lengths, report) {
        Ok(Outcome::Gracefully) => ExitCode::SUCCESS,
        Ok(stopped) => {
            eprintln!("server: {stopped}");
            ExitCode::from(3)
        }
        Err(error) => {
            eprintln!("server: {error}");
            ExitCode::from(4)
        }
    }
}

/// What the client sends, in two writes (the first ends inside a line), and the
/// answer it must get, byte for byte.
const SENT: [&[u8]; 2] = [b"hello\r\nPING\r\n\r\nab", b"cd\r\na line far too long\r\n"];
const ANSWER: &[u8] = b"5\r\n4\r\n0\r\n4\r\ntoo long\r\n";
/// The worker's last line once the connection closed and the master got SIGTERM.
const STOPPED: &str = "stopped: 1 accepted, 0 failed, 5 requests, 1 refused";

/// The test: start the server, talk to it, stop it, check it is gone.
fn check() -> Result<(), String> {
    // Options without a CPU are refused, before anything is bound or forked.
    let nowhere =
        Options { cpus: Vec::new(), ..Options::new(([127, 0, 0, 1], 0).into(), Opening::ClientSpeaksFirst) };
    match worker::run(&nowhere, Lengths, |event| println!("{event:?}")) {
        Err(worker::Error::NoWorkers) => {}
        other => return Err(format!("options with no CPU gave {other:?}, not Error::NoWorkers")),
    }
    let mut server = Server::start()?;
    let addr: SocketAddr =
        server.line_after("listening ")?.parse().map_err(|e| format!("the address: {e}"))?;
    let worker: u32 = server.line_after("worker ")?.parse().map_err(|e| format!("the worker's pid: {e}"))?;
    server.worker = Some(worker);

    let answer = converse(addr).map_err(|e| format!("talking to {addr}: {e}"))?;
    if answer != ANSWER {
        return Err(format!(
            "the answer was {:?}, not {:?}",
            String::from_utf8_lossy(&answer),
            String::from_utf8_lossy(ANSWER)
        ));
    }

    if !util::try_signal(server.pid(), "TERM") {
        return Err(format!("the server (pid {}) was gone before SIGTERM", server.pid()));
    }
    let status = server.wait_for_exit()?;
    // The master reaps its workers before it exits: none is left, not even a zombie.
    let worker_left = std::path::Path::new(&format!("/proc/{worker}")).exists();
    let rest = server.lines_to_end()?;
    if !status.success() {
        return Err(format!("the master exited with {status} after SIGTERM; it said:\n{}", rest.join("\n")));
    }
    if worker_left {
        return Err(format!("worker {worker} was still there when its master exited"));
    }
    if rest != [STOPPED] {
        return Err(format!("after SIGTERM it said {rest:?}, not {STOPPED:?}"));
    }
    Ok(())
}

/// Sends [`SENT`], then the end of the stream; returns every byte read until the
/// server closed.
fn converse(addr: SocketAddr) -> io::Result<Vec<u8>> {
    let mut stream = TcpStream::connect_timeout(&addr, WAIT)?;
    stream.set_read_timeout(Some(WAIT))?;
    stream.set_write_timeout(Some(WAIT))?;
    stream.write_all(SENT[0])?;
    // The first write's complete lines are answered before the rest is sent: the
    // partial line is held by the worker, not merged by the kernel.
    let mut first = vec![0; b"5\r\n4\r\n0\r\n".len()];
    stream.read_exact(&mut first)?;
    stream.write_all(SENT[1])?;
    stream.shutdown(Shutdown::Write)?;
    let mut rest = Vec::new();
    stream.read_to_end(&mut rest)?;
    first.extend(rest);
    Ok(first)
}

/// This program in the server's role, its stdout read line by line on a thread;
/// killed (and its worker) when dropped unless it exited.
struct Server {
    child: Child,
    lines: Receiver<String>,
    worker: Option<u32>,
}

impl Server {
    fn start() -> Result<Server, String> {
        let program = std::env::current_exe().map_err(|e| format!("this program's path: {e}"))?;
        let mut child = Command::new(program)
            .env(ROLE, "1")
            // Listeners handed down by a service manager would be taken instead of
            // binding port 0.
            .env_remove("LISTEN_FDS")
            .env_remove("LISTEN_PID")
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit())
            .spawn()
            .map_err(|e| format!("starting the server: {e}"))?;
        let stdout = child.stdout.take().expect("piped");
        let (sender, lines) = mpsc::channel();
        std::thread::spawn(move || {
            for line in BufReader::new(stdout).lines().map_while(Result::ok) {
                if sender.send(line).is_err() {
                    break;
                }
            }
        });
        Ok(Server { child, lines, worker: None })
    }

    fn pid(&self) -> u32 {
        self.child.id()
    }

    /// The rest of the next line, which must start with `prefix`.
    fn line_after(&self, prefix: &str) -> Result<String, String> {
        let line =
            self.lines.recv_timeout(WAIT).map_err(|_| format!("no {prefix:?} line within {WAIT:?}"))?;
        line.strip_prefix(prefix)
            .map(str::to_string)
            .ok_or_else(|| format!("the server said {line:?} where {prefix:?} was expected"))
    }

    /// Every line until stdout closed: the master and the worker both exited.
    fn lines_to_end(&self) -> Result<Vec<String>, String> {
        let deadline = Instant::now() + WAIT;
        let mut lines = Vec::new();
        loop {
            let left = deadline.saturating_duration_since(Instant::now());
            match self.lines.recv_timeout(left) {
                Ok(line) => lines.push(line),
                Err(mpsc::RecvTimeoutError::Disconnected) => return Ok(lines),
                Err(mpsc::RecvTimeoutError::Timeout) => {
                    return Err(format!("the server's output still open {WAIT:?} after it exited: {lines:?}"))
                }
            }
        }
    }

    fn wait_for_exit(&mut self) -> Result<ExitStatus, String> {
        let mut status = None;
        let exited = util::wait_until(WAIT, || {
            status = self.child.try_wait().ok().flatten();
            status.is_some()
        });
        match status {
            Some(status) if exited => Ok(status),
            _ => Err(format!("the master did not exit within {WAIT:?} of SIGTERM")),
        }
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        if self.child.try_wait().ok().flatten().is_none() {
            // Fails only if it exited meanwhile, which is fine.
            let _ = self.child.kill();
            let _ = self.child.wait();
        }
        // Its worker dies with it (it asks for SIGTERM at its parent's death), also
        // when the test failed before it learnt the worker's pid; a worker known
        // that would not is killed.
        if let Some(worker) = self.worker.filter(|&pid| !util::wait_until(WAIT, || !util::is_running(pid))) {
            util::try_signal(worker, "KILL");
        }
    }
}
