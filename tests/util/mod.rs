//! Helpers shared by the integration tests, one concern a module:
//!
//! - `server`: the server process guard `Server` and the example builds;
//! - `client`: a small blocking HTTP/1.1 client and the checks on its responses;
//! - `process`: the one runner for commands that run to completion (or are
//!   watched while they run), bounded waits, signals, a temporary file, strace
//!   attached to a process, and the worker lines of `percore serve`;
//! - `procfs`: what /proc says about a process and its sockets;
//! - `pattern`: bodies whose bytes never repeat, and where one read differs;
//! - `scripted`: a server written in the test, for a client under test;
//! - `program`: the `main` of a test program without libtest's harness.
//!
//! Test files use the re-exports below, so they need not know which module
//! holds what.
//!
//! The library's tests (`tests/`) and percore-bin's (`percore-bin/tests/`, which
//! start the binary and the examples) both take this module, percore-bin's by
//! `#[path = "../../tests/util/mod.rs"]`. It is compiled into each test crate rather
//! than built as a crate of its own because cargo names the binary under test
//! (`CARGO_BIN_EXE_percore`, read by `percore_bin`) only when it compiles
//! percore-bin's own tests.

// Every test file compiles its own copy of this module and uses a different
// subset of it, so an item unused by one file is not dead code overall.
#![allow(dead_code)]

use std::time::Duration;

mod client;
mod pattern;
mod process;
mod procfs;
mod program;
mod scripted;
mod server;

// Each test file uses its own subset of these, like the items behind them (see
// dead_code above); the allow is here, not on the module, so that an unused
// import inside a helper module still warns.
#[allow(unused_imports)]
pub use self::{
    client::{
        connect, connect_with, date_of, read_status, read_text, read_to_eof, request, Client, Method,
        Response,
    },
    pattern::{assert_same, difference, pattern},
    process::{
        new_master, run_capturing, run_capturing_within, run_expecting_exit, run_expecting_exit_with_env,
        run_with_stdout_within, run_wrk, signal, skip, stopped_lines, tool_available, try_signal, wait_until,
        worker_lines, Finished, KillOnDrop, KillPid, Resume, Running, StoppedLine, Strace, TempFile,
        WorkerLine,
    },
    procfs::{
        beyond_socket_buffers, children_of, cpu_ticks, cpus_allowed, euid, is_running, proc_state,
        raise_fd_limit, signal_pending, stat_fields, tcp_queues, tcp_queues_of, thread_cpus_allowed, vm_kib,
        SIGTERM,
    },
    program::test_or_serve,
    scripted::ScriptedServer,
    server::{example_bin, percore_bin, Server},
};

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
