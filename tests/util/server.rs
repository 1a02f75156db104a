//! The server under test: `Server`, a process guard that starts percore or an
//! example on an ephemeral loopback port (or where its arguments say: a Unix
//! socket's path), waits for its `listening on` line and
//! stops it and its workers on drop; and the builds of the examples it runs.

use std::io::{BufRead, BufReader};
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::process::{ChildStderr, Command, ExitStatus, Stdio};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc;
use std::sync::{Arc, Mutex};
use std::thread;
use std::time::Duration;

use percore::listen::Address;

use super::client::Client;
use super::process::{run_to_exit, try_signal, wait_until, KillOnDrop};
use super::procfs::children_of;
use super::STARTUP_TIMEOUT;

/// Building the echo example may compile the library first.
const BUILD_TIMEOUT: Duration = Duration::from_secs(600);

const LISTENING_PREFIX: &str = "listening on ";

const LOOPBACK_ARGS: [&str; 4] = ["--bind", "127.0.0.1", "--port", "0"];

/// The `percore` binary under test: the one cargo built beside the tests, or the
/// one `PERCORE_BIN` names (CI runs the process tests once more against the release
/// build, the profile that is benchmarked). Examples are built into its profile.
pub fn percore_bin() -> PathBuf {
    if let Some(path) = std::env::var_os("PERCORE_BIN") {
        return PathBuf::from(path);
    }
    // Cargo names it only to percore-bin's own tests; the library's start no percore.
    let built = option_env!("CARGO_BIN_EXE_percore");
    PathBuf::from(built.expect("only percore-bin's tests know the percore binary"))
}

/// Path of example `name`, building it first.
///
/// `cargo test` builds examples, but `cargo test -p percore-bin --test echo` does
/// not, and a binary left over from an earlier build may be stale; asking cargo
/// (which is quick when nothing changed) covers both. Cargo releases its build lock
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
    // The examples are the library's. Both packages are named, as `cargo test` at the
    // root names them, so that their dependencies are built with the same features
    // (clap's colours, which the binary adds) and nothing is built twice.
    cmd.args(["build", "--quiet", "-p", "percore", "-p", "percore-bin", "--example", name])
        .current_dir(env!("CARGO_MANIFEST_DIR"));
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

/// A running server process, stopped on drop.
pub struct Server {
    child: KillOnDrop,
    addr: Address,
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

    /// The IP address it listens on.
    ///
    /// # Panics
    ///
    /// If it listens on a Unix socket: see [`address`](Server::address).
    pub fn addr(&self) -> SocketAddr {
        match self.addr {
            Address::Ip(addr) => addr,
            Address::Unix(ref path) => panic!("the server listens on a Unix socket, {}", path.display()),
        }
    }

    /// Where it listens, as its `listening on` line says: an IP address or a path.
    pub fn address(&self) -> &Address {
        &self.addr
    }

    pub fn pid(&self) -> u32 {
        self.child.0.id()
    }

    /// Everything the server wrote to stderr so far, `listening on` included.
    pub fn stderr(&self) -> String {
        self.stderr.lock().unwrap().clone()
    }

    pub fn client(&self) -> Client {
        Client::connect(self.addr())
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

/// Collects stderr for the life of the process and sends the address from
/// the first `listening on` line.
fn spawn_stderr_reader(
    pipe: ChildStderr,
    collected: Arc<Mutex<String>>,
    tx: mpsc::Sender<Address>,
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
