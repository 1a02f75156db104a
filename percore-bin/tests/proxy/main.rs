//! The `proxy` example, in front of a real `percore serve` and of a small Python
//! backend (`backend.py`) for the answers percore never gives (chunked with
//! trailers, interim answers, early closes, silence, a parser that frames chunks
//! as older servers do): the flows of `flows.rs` and the desync cases of
//! `desync.rs`. The proxy runs one worker, found on its stderr, so that its memory
//! can be read from /proc.

#[path = "../../../tests/util/mod.rs"]
mod util;

mod desync;
mod flows;

use std::io::{Read, Write};
use std::net::SocketAddr;
use std::path::Path;

use util::{connect, run_capturing, tool_available, worker_lines, Server, WAIT};

/// `percore serve --workers 1` plus `extra`.
pub(crate) fn percore_backend(extra: &[&str]) -> Server {
    Server::percore(&[&["--workers", "1"], extra].concat())
}

/// The Python backend with `flags`, or None (the test is skipped) without python3.
pub(crate) fn python_backend_with(flags: &[&str]) -> Option<Server> {
    if !tool_available("python3", "python3") {
        return None;
    }
    let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/proxy/backend.py");
    let args = [&[script.to_str().expect("a UTF-8 path")][..], flags].concat();
    Some(Server::start(Path::new("python3"), &args))
}

/// The Python backend, or None (the test is skipped) without python3.
pub(crate) fn python_backend() -> Option<Server> {
    python_backend_with(&[])
}

/// The proxy on one worker, to `backends`, plus `extra` flags, and its worker's pid.
pub(crate) fn proxy(backends: &[SocketAddr], extra: &[&str]) -> (Server, u32) {
    let backends: Vec<String> = backends.iter().map(ToString::to_string).collect();
    let mut flags = vec!["--workers", "1"];
    for addr in &backends {
        flags.extend(["--backend", addr.as_str()]);
    }
    flags.extend(extra);
    let server = Server::example("proxy", &flags);
    let stderr = server.wait_for_stderr(WAIT, "worker line", |s| !worker_lines(s).is_empty());
    let worker = worker_lines(&stderr)[0].pid;
    (server, worker)
}

/// Sends `request` (raw bytes) on a new connection and reads until the proxy
/// closes it.
pub(crate) fn exchange(addr: SocketAddr, request: &[u8]) -> String {
    let mut stream = connect(addr);
    stream.write_all(request).expect("sending the request");
    let mut answer = Vec::new();
    stream.read_to_end(&mut answer).expect("reading until the close");
    String::from_utf8_lossy(&answer).into_owned()
}

/// curl's output for `args` (`-s` added), which must succeed.
pub(crate) fn curl(args: &[&str]) -> String {
    let all: Vec<&str> = ["-s", "--max-time", "10"].iter().chain(args).copied().collect();
    let run = run_capturing(Path::new("curl"), &all);
    assert!(run.status.success(), "curl {args:?} failed ({}): {}", run.status, run.stderr);
    run.stdout
}

/// The status line of `answer`.
pub(crate) fn status(answer: &str) -> &str {
    answer.lines().next().unwrap_or_default()
}

/// How many connections the Python backend accepted so far, asked through `proxy`
/// (which counts that one too, if it opens a connection for it).
pub(crate) fn accepts(proxy: SocketAddr) -> u64 {
    let answer = exchange(proxy, b"GET /accepts HTTP/1.1\r\nHost: a\r\nConnection: close\r\n\r\n");
    let body = answer.split("\r\n\r\n").nth(1).expect("a body");
    body.trim().parse().unwrap_or_else(|_| panic!("a count, not {answer:?}"))
}
