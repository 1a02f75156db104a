//! `percore serve --bind unix:PATH` and an example on a Unix socket: answered there,
//! by every worker through one listener; the socket file removed by a graceful stop,
//! kept through a reload and handed over by an upgrade; a second server on a live
//! path refused without touching the first's file; the proxy example on one, in
//! front of a backend on another.

#[path = "../../tests/util/mod.rs"]
mod util;

use std::io::{Read, Write};
use std::os::unix::net::UnixStream;
use std::path::{Path, PathBuf};

use percore::listen::Address;
use util::{
    example_bin, is_running, new_master, percore_bin, run_capturing, run_expecting_exit, signal,
    tool_available, wait_until, KillPid, Server, HELLO, IO_TIMEOUT, OK, WAIT,
};

/// A directory of its own under the system's temporary one, removed on drop.
struct TempDir(PathBuf);

impl TempDir {
    fn new(name: &str) -> TempDir {
        let dir = std::env::temp_dir().join(format!("percore-bin-unix-{name}-{}", std::process::id()));
        std::fs::create_dir_all(&dir).expect("a temporary directory");
        TempDir(dir)
    }

    /// The socket's path in it, and `--bind`'s value for it.
    fn socket(&self) -> (PathBuf, String) {
        let path = self.0.join("percore.sock");
        let bind = format!("unix:{}", path.display());
        (path, bind)
    }
}

impl Drop for TempDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

/// `percore serve` with two workers on the Unix socket `bind` names.
fn serve(bind: &str) -> Server {
    Server::start(&percore_bin(), &["serve", "--bind", bind, "--workers", "2", "--no-pin"])
}

/// One request on a new connection to `path`, closed after its answer; the answer.
fn get(path: &Path) -> String {
    let mut stream =
        UnixStream::connect(path).unwrap_or_else(|e| panic!("connecting to {}: {e}", path.display()));
    stream.set_read_timeout(Some(IO_TIMEOUT)).expect("a read timeout");
    stream.write_all(b"GET / HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n").expect("the request");
    let mut answer = String::new();
    stream.read_to_string(&mut answer).expect("the answer, to its close");
    answer
}

fn assert_hello(answer: &str) {
    assert!(answer.starts_with(OK), "{answer}");
    assert!(answer.ends_with(std::str::from_utf8(HELLO).expect("text")), "{answer}");
}

#[test]
fn serve_on_a_unix_socket_answers_and_its_file_is_gone_after_a_graceful_stop() {
    let dir = TempDir::new("serve");
    let (path, bind) = dir.socket();
    let mut server = serve(&bind);
    assert_eq!(server.address(), &Address::Unix(path.clone()), "said as unix:PATH");
    assert!(server.stderr().contains(&format!("listening on {bind}\n")), "{}", server.stderr());
    for _ in 0..4 {
        assert_hello(&get(&path));
    }
    if tool_available("curl", "curl") {
        let path_arg = path.to_str().expect("a UTF-8 path");
        let curl = run_capturing(Path::new("curl"), &["-sS", "--unix-socket", path_arg, "http://x/"]);
        assert!(curl.status.success(), "curl: {}", curl.stderr);
        assert_eq!(curl.stdout.as_bytes(), HELLO);
    }
    signal(server.pid(), "TERM");
    let status = server.wait_exit(WAIT);
    assert_eq!(status.code(), Some(0), "{}", server.stderr());
    assert!(!path.exists(), "{} left behind", path.display());
}

#[test]
fn a_reload_keeps_the_socket_file_and_the_new_workers_answer_on_it() {
    let dir = TempDir::new("reload");
    let (path, bind) = dir.socket();
    let server = serve(&bind);
    assert_hello(&get(&path));
    signal(server.pid(), "HUP");
    server.wait_for_stderr(WAIT, "the old generation retired", |s| s.matches(" retired: ").count() == 2);
    assert!(path.exists(), "{} removed by a reload", path.display());
    assert_hello(&get(&path));
}

#[test]
fn a_second_server_on_a_live_path_is_refused_and_leaves_the_first_ones_file() {
    let dir = TempDir::new("live");
    let (path, bind) = dir.socket();
    let _first = serve(&bind);
    let (status, stderr) = run_expecting_exit(&percore_bin(), &["serve", "--bind", &bind, "--no-pin"]);
    assert_eq!(status.code(), Some(1), "{stderr}");
    assert!(stderr.contains(&format!("cannot listen on {bind}: a server listens on it")), "{stderr}");
    assert!(path.exists(), "the first server's file was removed");
    assert_hello(&get(&path));
}

#[test]
fn a_port_with_a_unix_socket_is_a_usage_error() {
    let dir = TempDir::new("port");
    let (path, bind) = dir.socket();
    let (status, stderr) = run_expecting_exit(&percore_bin(), &["serve", "--bind", &bind, "--port", "80"]);
    assert_eq!(status.code(), Some(2), "{stderr}");
    assert!(stderr.contains("--port: a Unix socket"), "{stderr}");
    assert!(!path.exists());
}

#[test]
fn an_upgrade_hands_the_socket_over_and_the_new_master_removes_its_file_when_it_stops() {
    let dir = TempDir::new("upgrade");
    let (path, bind) = dir.socket();
    let mut server = serve(&bind);
    signal(server.pid(), "USR2");
    let stderr = server.wait_for_stderr(WAIT, "the new master", |s| new_master(s).is_some());
    let new = KillPid(new_master(&stderr).expect("checked"));
    let status = server.wait_exit(WAIT);
    assert_eq!(status.code(), Some(0), "the old master:\n{}", server.stderr());
    assert!(path.exists(), "the old master removed the file it handed over");
    assert_hello(&get(&path));
    signal(new.0, "TERM");
    assert!(wait_until(WAIT, || !is_running(new.0)), "the new master still runs");
    assert!(!path.exists(), "{} left behind by the new master", path.display());
}

#[test]
fn the_echo_example_echoes_on_a_unix_socket() {
    let dir = TempDir::new("echo");
    let (path, bind) = dir.socket();
    let _server = Server::start(&example_bin("echo"), &["--bind", &bind, "--workers", "1", "--no-pin"]);
    let mut stream = UnixStream::connect(&path).expect("connected");
    stream.set_read_timeout(Some(IO_TIMEOUT)).expect("a read timeout");
    stream.write_all(b"ping over a path").expect("sent");
    let mut echoed = [0; 16];
    stream.read_exact(&mut echoed).expect("the echo");
    assert_eq!(&echoed, b"ping over a path");
}

#[test]
fn the_proxy_listens_on_a_unix_socket_and_forwards_to_a_backend_on_another() {
    let backend_dir = TempDir::new("proxy-backend");
    let (_, backend) = backend_dir.socket();
    let _backend = serve(&backend);
    let dir = TempDir::new("proxy");
    let (path, bind) = dir.socket();
    let _proxy = Server::start(
        &example_bin("proxy"),
        &["--bind", &bind, "--workers", "1", "--no-pin", "--backend", &backend],
    );
    for _ in 0..3 {
        assert_hello(&get(&path));
    }
}
