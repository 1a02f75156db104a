//! A worker that cannot start makes the master give up. The server is a program on
//! the library as a user writes one (`percore::cli::main`), whose protocol cannot be
//! built on the first CPU of its set: the worker pinned there fails at every start,
//! the master restarts it after its back-off, and at its fifth failure within 10 s
//! stops the other workers, says it gives up, and exits with status 1.
//!
//! A test crate of its own with no libtest harness (`harness = false` in
//! Cargo.toml, `util::test_or_serve`), as `tests/service.rs` is: the master forks,
//! so it refuses a process that runs more than one thread, and libtest runs tests on
//! threads. `main` is the test; it starts this same program again as the server
//! ([`ROLE`] set), on 127.0.0.1 port 0 with a worker on every allowed CPU.

mod util;

use std::io;
use std::process::ExitCode;
use std::time::Duration;

use percore::http::{Hello, HelloConfig};
use percore::listen::Opening;
use percore::worker;
use util::{is_running, run_expecting_exit_with_env, stopped_lines, worker_lines};

/// Set in the environment of the copy of this program that serves.
const ROLE: &str = "PERCORE_TEST_GIVE_UP_SERVES";

/// The test's name, as `cargo test` filters and lists it.
const NAME: &str = "worker_failing_at_start_makes_the_master_give_up";

/// Bound on the server's run: five starts of the failing worker, 1.5 s of back-off
/// between them, then the others' graceful stop.
const WITHIN: Duration = Duration::from_secs(20);

fn main() -> ExitCode {
    util::test_or_serve(NAME, ROLE, check, serve)
}

/// The server's role: the hello server on every allowed CPU, but for the first.
fn serve() -> ExitCode {
    let refused = first_cpu();
    let config = HelloConfig::default();
    percore::cli::main(Opening::ClientSpeaksFirst, move || {
        // A pinned worker may run on its own CPU alone.
        if worker::allowed_cpus() == [refused] {
            return Err(io::Error::other(format!("no protocol on CPU {refused}")));
        }
        Ok(Hello::new(&config))
    })
}

/// The first CPU this process may run on: worker 0's.
fn first_cpu() -> usize {
    worker::allowed_cpus()[0]
}

/// The test: the server exits 1 within [`WITHIN`], having said why worker 0 failed,
/// restarted it, given up, and stopped every other worker. (On one CPU worker 0 is
/// the only one: no other is left to stop.)
fn check() -> Result<(), String> {
    let program = std::env::current_exe().map_err(|e| format!("this program's path: {e}"))?;
    let args = ["--bind", "127.0.0.1", "--port", "0"];
    let (status, stderr) = run_expecting_exit_with_env(&program, &args, &[(ROLE, "1")], WITHIN);
    let said = |what: &str| format!("{what}; the server said:\n{stderr}");
    if status.code() != Some(1) {
        return Err(said(&format!("the server exited with {status}, not status 1")));
    }
    let cpu = first_cpu();
    let failed = format!("percore: worker 0 (cpu {cpu}): no protocol on CPU {cpu}");
    if !stderr.lines().any(|line| line == failed) {
        return Err(said(&format!("no {failed:?} line")));
    }
    let restarts = stderr
        .lines()
        .filter(|line| line.starts_with("worker 0 cpu ") && line.contains("; restarting in "))
        .count();
    if !(1..10).contains(&restarts) {
        return Err(said(&format!("worker 0 was restarted {restarts} times")));
    }
    let gave_up = format!("percore: worker 0 (cpu {cpu}) failed to start 5 times within 10 s");
    if !stderr.lines().any(|line| line.starts_with(&gave_up) && line.ends_with("; giving up")) {
        return Err(said(&format!("no {gave_up:?} line that ends with giving up")));
    }
    let started = worker_lines(&stderr);
    let stopped = stopped_lines(&stderr);
    for other in started.iter().filter(|worker| worker.index != 0) {
        if !stopped.iter().any(|line| line.worker == *other) {
            return Err(said(&format!("worker {} (pid {}) did not stop", other.index, other.pid)));
        }
    }
    if let Some(left) = started.iter().find(|worker| is_running(worker.pid)) {
        return Err(said(&format!("worker {} (pid {}) outlived its master", left.index, left.pid)));
    }
    Ok(())
}
