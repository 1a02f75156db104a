//! TLS as its users see it, with real clients: `percore serve --tls-cert --tls-key`
//! answered by curl (TLS 1.3 and 1.2, ALPN), `openssl s_client` (the chain, the
//! versions refused, a renegotiation), Python's ssl (pipelining, a request over
//! several records, a resumed session, and the hostile peers below), wrk, ab and
//! h2load; each example on the loop over TLS once, with its own client; hostile
//! input (garbage, a ClientHello a byte at a time, a thousand stalled handshakes, a
//! fatal alert, a cut without close_notify, an oversize record, a renegotiation):
//! what the client sees, and that the server goes on serving; and the start-up
//! errors of the certificate and key flags, as exit statuses and one-line messages.
//!
//! The certificates are tests/tls/'s (tests/tls/make.sh made them): `ca.pem` is the
//! CA every client here trusts. The Python clients are `tls_peer.py`, beside this
//! file, one mode a test. Every server runs on one worker on an ephemeral port; a
//! test whose tool is missing says so and is skipped (failed under
//! `PERCORE_REQUIRE_TOOLS`, as `.ci/run` sets it).

#[path = "../../tests/util/mod.rs"]
mod util;

use std::io::{ErrorKind, Read, Write};
use std::net::TcpStream;
use std::path::{Path, PathBuf};
use std::process::{ChildStdin, Command, Stdio};
use std::sync::{Arc, Mutex};
use std::thread::{self, JoinHandle};
use std::time::{Duration, Instant};

use util::{
    connect, is_running, new_master, pattern, percore_bin, raise_fd_limit, run_capturing,
    run_capturing_within, run_wrk, signal, stopped_lines, tool_available, wait_until, worker_lines, Finished,
    KillOnDrop, KillPid, Server, StoppedLine, TempFile, HELLO, OK, WAIT,
};

/// A file of tests/tls/.
fn tls_file(name: &str) -> PathBuf {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).parent().expect("the workspace's root");
    root.join("tests/tls").join(name)
}

/// `tls_file(name)` as a command line takes it.
fn tls_arg(name: &str) -> String {
    tls_file(name).to_str().expect("a UTF-8 path").to_owned()
}

/// `--workers 1`, TLS with the certificate `cert`.pem and its key `cert`.key, then
/// `extra`.
fn tls_args(cert: &str, extra: &[&str]) -> Vec<String> {
    let (pem, key) = (tls_arg(&format!("{cert}.pem")), tls_arg(&format!("{cert}.key")));
    let flags = ["--workers", "1", "--tls-cert", &pem, "--tls-key", &key];
    flags.iter().chain(extra).map(|arg| arg.to_string()).collect()
}

/// `args` as a command line's arguments.
fn strs(args: &[String]) -> Vec<&str> {
    args.iter().map(String::as_str).collect()
}

/// `run`, which must have succeeded (`what` ran).
fn succeeded(what: &str, run: Finished) -> Finished {
    assert!(run.status.success(), "{what} failed ({}):\n{}\n{}", run.status, run.stdout, run.stderr);
    run
}

/// `percore serve` over TLS (the localhost certificate) on one worker, plus `extra`
/// flags.
fn hello(extra: &[&str]) -> Server {
    Server::percore(&strs(&tls_args("localhost", extra)))
}

/// Example `name` over TLS (the localhost certificate) on one worker, plus `extra`
/// flags.
fn example(name: &str, extra: &[&str]) -> Server {
    Server::example(name, &strs(&tls_args("localhost", extra)))
}

/// Asserts the server still runs its first worker (nothing it was sent crashed it)
/// and serves a client after it (curl, if it is there).
fn assert_first_worker_serves(server: &Server) {
    // Its line may not have been read yet on a loaded machine: waited for, not assumed.
    let stderr = server.wait_for_stderr(WAIT, "the worker's line", |s| !worker_lines(s).is_empty());
    let first = worker_lines(&stderr)[0].pid;
    if tool_available("curl", "curl") {
        assert_eq!(curl_hello(server.addr().port()), HELLO, "a client after it is served");
    }
    assert!(is_running(first), "the first worker {first} is gone:\n{}", server.stderr());
    assert_eq!(worker_lines(&server.stderr()).len(), 1, "a worker was restarted: {}", server.stderr());
}

/// Stops `server` gracefully and returns its worker's last line.
fn stopped(mut server: Server) -> StoppedLine {
    signal(server.pid(), "TERM");
    server.wait_exit(WAIT);
    let lines = stopped_lines(&server.wait_stderr_closed(WAIT));
    assert_eq!(lines.len(), 1, "{lines:?}");
    lines[0]
}

/// curl on `https://localhost:PORT/PATH` (localhost resolved to 127.0.0.1, where
/// the servers listen), trusting the test CA, with `args` before the URL.
fn curl(port: u16, args: &[&str], path: &str) -> Finished {
    let resolve = format!("localhost:{port}:127.0.0.1");
    let url = format!("https://localhost:{port}/{path}");
    let ca = tls_arg("ca.pem");
    let all = [&["-sS", "--max-time", "10", "--resolve", &resolve, "--cacert", &ca], args, &[&url]].concat();
    run_capturing_within(Path::new("curl"), &all, WAIT)
}

/// The body curl gets from `/` on `port`, which must succeed.
fn curl_hello(port: u16) -> Vec<u8> {
    succeeded("curl", curl(port, &[], "")).stdout.into_bytes()
}

/// What the Python client `mode` of tls_peer.py printed against `port`, a line
/// each (it must succeed); None (the test is skipped) without python3.
fn python_peer(mode: &str, port: u16) -> Option<Vec<String>> {
    if !tool_available("python3", "python3") {
        return None;
    }
    let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/tls_peer.py");
    let args = [script.to_str().expect("a UTF-8 path"), mode, &port.to_string(), &tls_arg("ca.pem")];
    let run =
        succeeded(&format!("tls_peer.py {mode}"), run_capturing_within(Path::new("python3"), &args, WAIT));
    Some(run.stdout.lines().map(str::to_owned).collect())
}

/// `openssl s_client` to 127.0.0.1:`port`, for localhost, trusting the test CA, with
/// `args`; stdin closed (it leaves once the handshake is over, or failed).
fn s_client(port: u16, args: &[&str]) -> Finished {
    run_capturing(Path::new("openssl"), &strs(&s_client_args(port, args)))
}

/// The arguments of [`s_client`], `args` last.
fn s_client_args(port: u16, args: &[&str]) -> Vec<String> {
    let (to, ca) = (format!("127.0.0.1:{port}"), tls_arg("ca.pem"));
    let base = ["s_client", "-connect", &to, "-servername", "localhost", "-CAfile", &ca];
    base.iter().chain(args).map(|arg| arg.to_string()).collect()
}

/// `openssl s_client` run as a user at a terminal: lines typed on its stdin, its
/// output read as it comes. Killed on drop.
struct Interactive {
    child: KillOnDrop,
    stdin: Option<ChildStdin>,
    stdout: Arc<Mutex<Vec<u8>>>,
    stderr: Arc<Mutex<Vec<u8>>>,
    readers: Vec<JoinHandle<()>>,
}

impl Interactive {
    fn s_client(port: u16, args: &[&str]) -> Interactive {
        let mut child = Command::new("openssl")
            .args(s_client_args(port, args))
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap_or_else(|e| panic!("spawning openssl s_client: {e}"));
        let stdin = child.stdin.take();
        let (stdout, stderr) = (Arc::default(), Arc::default());
        let readers = vec![
            collect(child.stdout.take().expect("piped"), Arc::clone(&stdout)),
            collect(child.stderr.take().expect("piped"), Arc::clone(&stderr)),
        ];
        Interactive { child: KillOnDrop(child), stdin, stdout, stderr, readers }
    }

    /// Types `text`.
    fn send(&mut self, text: &str) {
        let stdin = self.stdin.as_mut().expect("stdin still open");
        stdin.write_all(text.as_bytes()).unwrap_or_else(|e| panic!("typing {text:?}: {e}"));
    }

    /// What it printed on stdout so far.
    fn stdout(&self) -> String {
        String::from_utf8_lossy(&self.stdout.lock().unwrap()).into_owned()
    }

    /// Waits (bounded) until its stdout holds `text`.
    fn wait_for(&self, text: &str) {
        let found = wait_until(WAIT, || self.stdout().contains(text));
        let stderr = String::from_utf8_lossy(&self.stderr.lock().unwrap()).into_owned();
        assert!(
            found,
            "no {text:?} from s_client within {WAIT:?}; stdout:\n{}\nstderr:\n{stderr}",
            self.stdout()
        );
    }

    /// Closes its stdin (end of input: it leaves) and waits (bounded) for it to exit.
    fn finish(mut self) -> Finished {
        drop(self.stdin.take());
        let mut status = None;
        let exited = wait_until(WAIT, || {
            status = self.child.0.try_wait().expect("polling s_client");
            status.is_some()
        });
        assert!(exited, "s_client did not exit within {WAIT:?}; stdout:\n{}", self.stdout());
        for reader in self.readers.drain(..) {
            reader.join().expect("an output reader");
        }
        let text = |bytes: &Mutex<Vec<u8>>| String::from_utf8_lossy(&bytes.lock().unwrap()).into_owned();
        Finished { status: status.expect("exited"), stdout: text(&self.stdout), stderr: text(&self.stderr) }
    }
}

/// Appends what `pipe` gives to `into`, as it comes, until its end.
fn collect(mut pipe: impl Read + Send + 'static, into: Arc<Mutex<Vec<u8>>>) -> JoinHandle<()> {
    thread::spawn(move || {
        let mut buf = [0; 4096];
        while let Ok(n @ 1..) = pipe.read(&mut buf) {
            into.lock().unwrap().extend_from_slice(&buf[..n]);
        }
    })
}

// 1. Real clients against `percore serve` over TLS.

#[test]
fn curl_gets_hello_over_tls_1_3_and_1_2_with_alpn_http_1_1() {
    if !tool_available("curl", "curl") {
        return;
    }
    let server = hello(&[]);
    let port = server.addr().port();
    for (args, version) in [(&[][..], "TLSv1.3"), (&["--tlsv1.2", "--tls-max", "1.2"][..], "TLSv1.2")] {
        let run = succeeded(&format!("curl {args:?}"), curl(port, &[&["-v"], args].concat(), ""));
        assert_eq!(run.stdout.as_bytes(), HELLO, "curl {args:?}");
        let verbose = &run.stderr;
        assert!(verbose.contains(&format!("SSL connection using {version} / ")), "curl {args:?}:\n{verbose}");
        assert!(verbose.contains("ALPN: server accepted http/1.1"), "curl {args:?}:\n{verbose}");
        assert!(verbose.contains("SSL certificate verify ok."), "curl {args:?}:\n{verbose}");
    }
}

#[test]
fn openssl_s_client_verifies_the_chain_against_the_ca() {
    if !tool_available("openssl", "openssl") {
        return;
    }
    let server = hello(&[]);
    let args = ["-verify_return_error", "-verify_hostname", "localhost"];
    let run = succeeded("s_client", s_client(server.addr().port(), &args));
    let out = &run.stdout;
    assert!(out.contains("subject=CN = localhost") && out.contains("issuer=CN = percore test CA"), "{out}");
    assert!(out.contains("Verify return code: 0 (ok)"), "{out}");
    assert!(out.contains("New, TLSv1.3, Cipher is TLS_"), "{out}");
}

#[test]
fn tls_1_0_and_1_1_are_refused_with_an_alert_and_no_handshake() {
    if !tool_available("openssl", "openssl") {
        return;
    }
    let server = hello(&[]);
    for version in ["-tls1", "-tls1_1"] {
        // Security level 0: the client offers the old versions at all.
        let run = s_client(server.addr().port(), &[version, "-cipher", "DEFAULT@SECLEVEL=0"]);
        let (out, err) = (&run.stdout, &run.stderr);
        assert!(!run.status.success(), "{version} succeeded:\n{out}");
        assert!(out.contains("New, (NONE), Cipher is (NONE)"), "{version}: a handshake:\n{out}");
        // An alert says it is refused (rustls's handshake_failure), not a bare close.
        assert!(err.contains("SSL alert number"), "{version}: no alert:\n{err}\n{out}");
    }
    assert_first_worker_serves(&server);
}

#[test]
fn a_client_offering_only_h2_by_alpn_is_refused_with_an_alert_that_says_so() {
    if !tool_available("openssl", "openssl") {
        return;
    }
    let server = hello(&[]);
    let run = s_client(server.addr().port(), &["-alpn", "h2"]);
    assert!(!run.status.success(), "h2 alone was taken:\n{}", run.stdout);
    assert!(run.stderr.contains("alert no application protocol"), "{}\n{}", run.stderr, run.stdout);
    assert_first_worker_serves(&server);
}

#[test]
fn python_ssl_pipelines_three_requests_in_one_write_over_tls_1_3() {
    let server = hello(&[]);
    let Some(lines) = python_peer("pipeline", server.addr().port()) else { return };
    assert_eq!(
        lines,
        [
            "version TLSv1.3 alpn http/1.1",
            "answer HTTP/1.1 200 OK body 14",
            "answer HTTP/1.1 200 OK body 0",
            "answer HTTP/1.1 405 Method Not Allowed body 19",
            "closed with close_notify",
        ]
    );
}

#[test]
fn python_ssl_sends_a_request_split_across_records() {
    let server = hello(&[]);
    let Some(lines) = python_peer("split", server.addr().port()) else { return };
    assert_eq!(lines, ["answer HTTP/1.1 200 OK body 14"]);
}

#[test]
fn python_ssl_resumes_a_session_with_the_first_connections_ticket() {
    let server = hello(&[]);
    let Some(lines) = python_peer("resume", server.addr().port()) else { return };
    assert_eq!(
        lines,
        ["first reused False ticket True", "second reused True", "answer HTTP/1.1 200 OK body 14"]
    );
}

/// How `openssl s_client` to `port` began its session: "New" (a full handshake) or
/// "Reused" (resumed). It reads the session to resume from `session` with
/// `-sess_in`, or keeps the one it is given there with `-sess_out`; it asks for `/`
/// and waits for the answer, so that a TLS 1.3 ticket (sent after the handshake) is
/// read before it leaves.
fn s_client_session(port: u16, flag: &str, session: &TempFile) -> String {
    let mut client = Interactive::s_client(port, &[flag, session.path(), "-crlf"]);
    client.send("GET / HTTP/1.1\nHost: localhost\n\n");
    client.wait_for(std::str::from_utf8(HELLO).expect("a text body"));
    let run = client.finish();
    let began =
        run.stdout.lines().find_map(|line| line.strip_suffix(", TLSv1.3, Cipher is TLS_AES_256_GCM_SHA384"));
    began
        .unwrap_or_else(|| panic!("s_client said no TLS 1.3 session:\n{}\n{}", run.stdout, run.stderr))
        .to_owned()
}

#[test]
fn a_ticket_resumes_on_either_worker_after_a_reload_and_after_a_binary_upgrade() {
    if !tool_available("openssl", "openssl") {
        return;
    }
    let (pem, key) = (tls_arg("localhost.pem"), tls_arg("localhost.key"));
    let mut server = Server::percore(&["--workers", "2", "--no-pin", "--tls-cert", &pem, "--tls-key", &key]);
    let port = server.addr().port();
    let session = TempFile::with_contents(b"");
    assert_eq!(s_client_session(port, "-sess_out", &session), "New");
    // Each connection goes to one of the two workers by a hash of its port: eight
    // reach both but once in 128 runs; every one resumes.
    for _ in 0..8 {
        assert_eq!(s_client_session(port, "-sess_in", &session), "Reused");
    }
    signal(server.pid(), "HUP");
    server.wait_for_stderr(WAIT, "the reload", |s| s.contains("reloading: generation 2"));
    for _ in 0..4 {
        assert_eq!(s_client_session(port, "-sess_in", &session), "Reused", "after a reload");
    }
    signal(server.pid(), "USR2");
    let stderr = server.wait_for_stderr(WAIT, "the new master", |s| new_master(s).is_some());
    let new = KillPid(new_master(&stderr).expect("checked"));
    assert_eq!(server.wait_exit(WAIT).code(), Some(0), "the old master:\n{}", server.stderr());
    for _ in 0..4 {
        assert_eq!(s_client_session(port, "-sess_in", &session), "Reused", "after an upgrade");
    }
    signal(new.0, "TERM");
    assert!(wait_until(WAIT, || !is_running(new.0)), "the new master still runs");
}

#[test]
fn a_reload_renews_the_certificate_and_one_that_fails_to_load_keeps_the_one_served() {
    if !tool_available("openssl", "openssl") {
        return;
    }
    let test_file = |name| std::fs::read(tls_file(name)).expect("a test certificate or key");
    // The certificate expired; the operator renews it in place and sends a HUP.
    let (cert, key) = (
        TempFile::with_contents(&test_file("expired.pem")),
        TempFile::with_contents(&test_file("expired.key")),
    );
    let server = Server::percore(&["--workers", "1", "--tls-cert", cert.path(), "--tls-key", key.path()]);
    let port = server.addr().port();
    let subject = || {
        let run = s_client(port, &[]);
        let subject = run.stdout.lines().find_map(|line| line.strip_prefix("subject=CN = "));
        subject.unwrap_or_else(|| panic!("no certificate:\n{}\n{}", run.stdout, run.stderr)).to_owned()
    };
    assert_eq!(subject(), "expired");
    std::fs::write(cert.path(), test_file("localhost.pem")).expect("renewing the certificate");
    std::fs::write(key.path(), test_file("localhost.key")).expect("renewing the key");
    signal(server.pid(), "HUP");
    server.wait_for_stderr(WAIT, "the reload", |s| s.contains("reloading: generation 2"));
    assert!(wait_until(WAIT, || subject() == "localhost"), "the renewed certificate is not served");
    let run =
        succeeded("s_client", s_client(port, &["-verify_return_error", "-verify_hostname", "localhost"]));
    assert!(run.stdout.contains("Verify return code: 0 (ok)"), "{}", run.stdout);
    // A key that is not the certificate's: the reload is refused, naming the file,
    // and the workers serve on as they were.
    std::fs::write(key.path(), test_file("other.key")).expect("a wrong key");
    signal(server.pid(), "HUP");
    let refused = format!(
        "reload failed, the workers go on: {}: not a key for the certificate of {}\n",
        key.path(),
        cert.path()
    );
    let stderr = server.wait_for_stderr(WAIT, "the refused reload", |s| s.contains(&refused));
    assert!(!stderr.contains("generation 3"), "{stderr}");
    assert_eq!(subject(), "localhost");
    assert_eq!(curl_hello(port), HELLO);
}

#[test]
fn a_renewal_under_wrk_and_ab_fails_no_request() {
    if !tool_available("wrk", "wrk") || !tool_available("ab", "apache2-utils") {
        return;
    }
    let test_file = |name| std::fs::read(tls_file(name)).expect("a test certificate or key");
    let (cert, key) = (
        TempFile::with_contents(&test_file("expired.pem")),
        TempFile::with_contents(&test_file("expired.key")),
    );
    let server =
        Server::percore(&["--workers", "2", "--no-pin", "--tls-cert", cert.path(), "--tls-key", key.path()]);
    let url = format!("https://127.0.0.1:{}/", server.addr().port());
    // Keep-alive connections (wrk) and a handshake per request (ab), neither
    // verifying the certificate, across the renewal.
    let wrk_url = url.clone();
    let wrk = thread::spawn(move || run_wrk(&["-t1", "-c20", "-d3s"], &wrk_url));
    let ab =
        thread::spawn(move || run_capturing_within(Path::new("ab"), &["-n", "1000", "-c", "10", &url], WAIT));
    thread::sleep(Duration::from_millis(500));
    std::fs::write(cert.path(), test_file("localhost.pem")).expect("renewing the certificate");
    std::fs::write(key.path(), test_file("localhost.key")).expect("renewing the key");
    signal(server.pid(), "HUP");
    server.wait_for_stderr(WAIT, "the reload", |s| s.contains("reloading: generation 2"));
    assert!(wrk.join().expect("the wrk thread") > 0);
    let run = succeeded("ab", ab.join().expect("the ab thread"));
    assert!(run.stdout.contains("Complete requests:      1000\n"), "{}", run.stdout);
    assert!(run.stdout.contains("Failed requests:        0\n"), "{}", run.stdout);
    assert!(!run.stdout.contains("Non-2xx"), "{}", run.stdout);
}

#[test]
fn each_name_gets_its_certificate_and_an_unknown_or_absent_name_the_first() {
    if !tool_available("openssl", "openssl") || !tool_available("curl", "curl") {
        return;
    }
    let extra = ["--tls-cert", &tls_arg("example.test.pem"), "--tls-key", &tls_arg("example.test.key")];
    let server = hello(&extra);
    let port = server.addr().port();
    // curl verifies the certificate it gets against the name it asked for (the
    // helper's own URL, localhost's, follows this one).
    let hello = std::str::from_utf8(HELLO).expect("a text body");
    for name in ["example.test", "www.example.test"] {
        let resolve = format!("{name}:{port}:127.0.0.1");
        let url = format!("https://{name}:{port}/");
        let run = curl(port, &["--resolve", &resolve, &url], "");
        assert!(
            run.status.success() && run.stdout == hello.repeat(2),
            "{name}: {}\n{}",
            run.stdout,
            run.stderr
        );
    }
    let subject = |name: Option<&str>| {
        let (to, ca) = (format!("127.0.0.1:{port}"), tls_arg("ca.pem"));
        let sni = name.map_or(vec!["-noservername"], |name| vec!["-servername", name]);
        let args = [&["s_client", "-connect", &to, "-CAfile", &ca][..], &sni].concat();
        let run = run_capturing(Path::new("openssl"), &args);
        let subject = run.stdout.lines().find_map(|line| line.strip_prefix("subject=CN = "));
        subject
            .unwrap_or_else(|| panic!("{name:?}: no certificate:\n{}\n{}", run.stdout, run.stderr))
            .to_owned()
    };
    assert_eq!(subject(Some("www.example.test")), "example.test");
    assert_eq!(subject(Some("unknown.test")), "localhost");
    assert_eq!(subject(None), "localhost");
}

#[test]
fn with_tickets_off_no_ticket_is_sent_and_none_resumes() {
    if !tool_available("openssl", "openssl") {
        return;
    }
    let on = hello(&[]);
    let session = TempFile::with_contents(b"");
    assert_eq!(s_client_session(on.addr().port(), "-sess_out", &session), "New");
    let off = hello(&["--tls-tickets", "off"]);
    // The session the other server gave, offered here: refused, a full handshake.
    assert_eq!(s_client_session(off.addr().port(), "-sess_in", &session), "New");
    // Its own first session: no ticket came, so s_client keeps nothing to resume.
    let own = TempFile::with_contents(b"");
    assert_eq!(s_client_session(off.addr().port(), "-sess_out", &own), "New");
    let kept = std::fs::read(own.path()).expect("the session file");
    assert!(kept.is_empty(), "a session was kept:\n{}", String::from_utf8_lossy(&kept));
    assert_first_worker_serves(&off);
}

#[test]
fn wrk_over_https_sees_no_errors() {
    if !tool_available("wrk", "wrk") {
        return;
    }
    let server = hello(&[]);
    let url = format!("https://127.0.0.1:{}/", server.addr().port());
    run_wrk(&["-t1", "-c10", "-d1s"], &url);
    assert_first_worker_serves(&server);
}

#[test]
fn ab_over_https_fails_no_request_with_a_handshake_for_each() {
    if !tool_available("ab", "apache2-utils") {
        return;
    }
    let server = hello(&[]);
    let url = format!("https://127.0.0.1:{}/", server.addr().port());
    let run = succeeded("ab", run_capturing_within(Path::new("ab"), &["-n", "500", "-c", "10", &url], WAIT));
    let out = &run.stdout;
    assert!(out.contains("SSL/TLS Protocol:       TLSv1.3,"), "{out}");
    assert!(out.contains("Complete requests:      500\n"), "{out}");
    assert!(out.contains("Failed requests:        0\n"), "{out}");
    assert!(!out.contains("Non-2xx"), "{out}");
    // ab without -k asks HTTP/1.0 without keep-alive: the server closes after each
    // answer, and each request came on a connection, a handshake, of its own. (A
    // few more connections: ab opens the next ones before it knows it is done, and
    // drops them when it is, sometimes with a reset the worker counts as failed.)
    let last = stopped(server);
    assert_eq!(last.requests, 500, "{last:?}");
    assert!(last.connections >= 500, "{last:?}");
}

#[test]
fn h2load_over_https_in_http_1_1_has_every_request_succeed() {
    if !tool_available("h2load", "nghttp2-client") {
        return;
    }
    let server = hello(&[]);
    let url = format!("https://127.0.0.1:{}/", server.addr().port());
    let args = ["--h1", "-n", "1000", "-c", "10", &url];
    let run = succeeded("h2load", run_capturing_within(Path::new("h2load"), &args, WAIT));
    let out = &run.stdout;
    assert!(out.contains("Application protocol: http/1.1"), "{out}");
    assert!(
        out.contains(
            "requests: 1000 total, 1000 started, 1000 done, 1000 succeeded, 0 failed, 0 errored, 0 timeout"
        ),
        "{out}"
    );
    assert!(out.contains("status codes: 1000 2xx, 0 3xx, 0 4xx, 0 5xx"), "{out}");
}

// 2. Each example over TLS, with its own client.

#[test]
fn echo_over_tls_returns_a_line_typed_into_openssl_s_client() {
    if !tool_available("openssl", "openssl") {
        return;
    }
    let server = example("echo", &[]);
    let mut client = Interactive::s_client(server.addr().port(), &["-brief"]);
    client.send("a line over TLS\n");
    client.wait_for("a line over TLS\n");
    let run = succeeded("s_client", client.finish());
    assert_eq!(run.stdout, "a line over TLS\n", "what came back");
    assert!(run.stderr.contains("Verification: OK"), "{}", run.stderr);
}

#[test]
fn redis_ping_over_tls_answers_redis_cli_ping() {
    if !tool_available("redis-cli", "redis-tools") {
        return;
    }
    let server = example("redis_ping", &[]);
    let port = server.addr().port().to_string();
    let args = ["--tls", "--cacert", &tls_arg("ca.pem"), "-h", "127.0.0.1", "-p", &port, "ping"];
    let run = succeeded("redis-cli", run_capturing(Path::new("redis-cli"), &args));
    assert_eq!(run.stdout, "PONG\n", "{}", run.stderr);
}

#[test]
fn smtp_sink_over_tls_on_connect_takes_a_message_from_swaks_which_verifies_it() {
    if !tool_available("swaks", "swaks") {
        return;
    }
    let server = example("smtp_sink", &[]);
    let port = server.addr().port().to_string();
    let ca = tls_arg("ca.pem");
    let args = [
        "--tlsc",
        "--tls-verify",
        "--tls-ca-path",
        &ca,
        "--server",
        "127.0.0.1",
        "--port",
        &port,
        "--to",
        "a@example.com",
    ];
    let run = succeeded("swaks", run_capturing_within(Path::new("swaks"), &args, WAIT));
    let out = &run.stdout;
    assert!(out.contains("=== TLS started with cipher TLSv1.3:"), "{out}");
    assert!(out.contains("<~  220 "), "the greeting, over TLS:\n{out}");
    assert!(out.contains("<~  250 2.0.0 OK: message accepted and dropped"), "{out}");
    assert!(out.contains("<~  221 "), "{out}");
}

#[test]
fn static_files_over_https_sends_a_file_of_one_mib_byte_for_byte() {
    if !tool_available("curl", "curl") {
        return;
    }
    // The file's bytes never repeat, so a record sealed from the wrong offset shows.
    let body = pattern(7, 1 << 20);
    let file = TempFile::with_contents(&body);
    let (root, name) = file.path().rsplit_once('/').expect("a file in a directory");
    let server = example("static_files", &["--root", root]);
    let out = TempFile::with_contents(b"");
    let run = succeeded("curl", curl(server.addr().port(), &["-o", out.path(), "-w", "%{http_code}"], name));
    assert_eq!(run.stdout, "200");
    util::assert_same(&std::fs::read(out.path()).expect("curl's file"), &body, "the file over TLS");
}

/// A plain `percore serve` on one worker: the backend behind a relay or a proxy.
fn plain_backend() -> Server {
    Server::percore(&["--workers", "1"])
}

#[test]
fn relay_ends_tls_from_its_clients_and_relays_plaintext_to_a_plain_backend() {
    if !tool_available("curl", "curl") {
        return;
    }
    let backend = plain_backend();
    let relay = example("relay", &["--backend", &backend.addr().to_string()]);
    assert_eq!(curl_hello(relay.addr().port()), HELLO);
}

#[test]
fn proxy_over_https_answers_from_a_plain_backend() {
    if !tool_available("curl", "curl") {
        return;
    }
    let backend = plain_backend();
    let proxy = example("proxy", &["--backend", &backend.addr().to_string()]);
    let run = succeeded("curl", curl(proxy.addr().port(), &["-i"], ""));
    assert!(run.stdout.starts_with(&format!("{OK}\r\n")), "{}", run.stdout);
    assert!(run.stdout.ends_with("\r\n\r\nhello, world!\n"), "{}", run.stdout);
}

#[test]
fn proxy_over_https_tells_its_backend_the_client_spoke_https() {
    if !tool_available("curl", "curl") || !tool_available("python3", "python3") {
        return;
    }
    // The proxy tests' backend, which answers /echo with the request it received.
    let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/proxy/backend.py");
    let backend = Server::start(Path::new("python3"), &[script.to_str().expect("a UTF-8 path")]);
    let proxy = example("proxy", &["--backend", &backend.addr().to_string()]);
    // The client's own word is dropped, the proxy's said.
    let run = succeeded("curl", curl(proxy.addr().port(), &["-H", "X-Forwarded-Proto: http"], "echo"));
    let forwarded = "GET /echo HTTP/1.1\r\nHost: localhost:";
    assert!(run.stdout.starts_with(forwarded), "{}", run.stdout);
    assert!(
        run.stdout.contains("\r\nX-Forwarded-Proto: https\r\nX-Forwarded-For: 127.0.0.1\r\n"),
        "{}",
        run.stdout
    );
    assert_eq!(run.stdout.matches("X-Forwarded-Proto").count(), 1, "{}", run.stdout);
}

#[test]
fn proxy_speaks_tls_to_backends_it_verifies_keeps_them_pooled_and_502s_one_that_fails_saying_so_once() {
    if !tool_available("curl", "curl") {
        return;
    }
    let ca = tls_arg("ca.pem");
    // Verified against the CA, by the backend's address (the certificate has 127.0.0.1).
    let backend = hello(&[]);
    let to = backend.addr().to_string();
    let mut proxy = example("proxy", &["--backend", &to, "--backend-tls", "--backend-ca", &ca]);
    for _ in 0..5 {
        assert_eq!(curl_hello(proxy.addr().port()), HELLO);
    }
    signal(proxy.pid(), "TERM");
    proxy.wait_exit(WAIT);
    let said = proxy.wait_stderr_closed(WAIT);
    assert!(said.contains(": 5 requests, 1 backend connections opened"), "the pool kept none:\n{said}");
    // A backend whose certificate is not for the name it is reached by.
    let other = Server::percore(&strs(&tls_args("example.test", &[])));
    let named = format!("localhost:{}", other.addr().port());
    let refused = example("proxy", &["--backend", &named, "--backend-tls", "--backend-ca", &ca]);
    for _ in 0..2 {
        let run =
            succeeded("curl", curl(refused.addr().port(), &["-o", "/dev/null", "-w", "%{http_code}"], ""));
        assert_eq!(run.stdout, "502");
    }
    let line =
        format!(
        "proxy: backend 127.0.0.1:{} (localhost): TLS handshake: invalid peer certificate: certificate not valid for name \"localhost\"",
        other.addr().port()
    );
    let stderr = refused.wait_for_stderr(WAIT, "the failed handshake said", |s| s.contains(&line));
    assert_eq!(stderr.matches(&line).count(), 1, "{stderr}");
    // Unverified, on the flag that says so.
    let insecure = example("proxy", &["--backend", &named, "--backend-tls", "--backend-tls-insecure"]);
    assert_eq!(curl_hello(insecure.addr().port()), HELLO);
    // Neither: a usage error.
    let run =
        util::run_capturing(&util::example_bin("proxy"), &["--port", "0", "--backend", &to, "--backend-tls"]);
    assert_eq!(run.status.code(), Some(2), "{}", run.stderr);
    assert!(run.stderr.contains("--backend-tls needs --backend-ca"), "{}", run.stderr);
}

// 3. Hostile input.

/// Reads what the server sends on `stream` until it closes it; a reset after some
/// bytes ends it too.
fn read_until_closed(stream: &mut TcpStream) -> Vec<u8> {
    let mut all = Vec::new();
    let mut buf = [0; 4096];
    loop {
        match stream.read(&mut buf) {
            Ok(0) => return all,
            Ok(n) => all.extend_from_slice(&buf[..n]),
            Err(e) if e.kind() == ErrorKind::Interrupted => {}
            Err(e) if e.kind() == ErrorKind::ConnectionReset => return all,
            Err(e) => panic!("reading until the close: {e}; got {all:02x?}"),
        }
    }
}

/// rustls's answer to bytes that are no TLS: a fatal decode_error alert, in
/// plaintext (no key is agreed yet).
const DECODE_ERROR_ALERT: [u8; 7] = [21, 3, 3, 0, 2, 2, 50];

#[test]
fn garbage_instead_of_a_client_hello_gets_an_alert_and_a_close_and_others_are_served_at_once() {
    let server = hello(&[]);
    for (garbage, answers) in [
        // http:// to the https port.
        (&b"GET / HTTP/1.1\r\nHost: localhost\r\n\r\n"[..], &[&DECODE_ERROR_ALERT[..]][..]),
        (&[0xff; 64], &[&DECODE_ERROR_ALERT]),
        // A handshake record holding an empty ClientHello.
        (&[22, 3, 1, 0, 4, 1, 0, 0, 0], &[&DECODE_ERROR_ALERT]),
        // A handshake message of 6.6 MB announced ("ello"): rustls 0.23 refuses it past
        // its limit without an alert (its deframer's error has none), a bare close.
        (&[22, 3, 1, 0, 5, b'h', b'e', b'l', b'l', b'o'], &[&[], &DECODE_ERROR_ALERT]),
    ] {
        let mut stream = connect(server.addr());
        stream.write_all(garbage).expect("sending the garbage");
        let answer = read_until_closed(&mut stream);
        assert!(
            answers.contains(&&answer[..]),
            "the answer to {garbage:02x?}: {answer:?}, not one of {answers:?}"
        );
        assert_first_worker_serves(&server);
    }
}

#[test]
fn a_client_hello_sent_a_byte_at_a_time_completes_its_handshake() {
    let server = hello(&[]);
    let Some(lines) = python_peer("drip", server.addr().port()) else { return };
    assert_eq!(lines.len(), 3, "{lines:?}");
    assert!(lines[0].starts_with("client hello of ") && lines[0].ends_with(" bytes sent a byte a write"));
    assert_eq!(lines[1..], ["version TLSv1.3", "answer HTTP/1.1 200 OK body 14"]);
}

/// The first bytes of a ClientHello: a handshake record of 512 bytes, and in it a
/// ClientHello of 508, of which only its version and part of its random come.
const HALF_A_CLIENT_HELLO: [u8; 27] =
    [22, 3, 1, 2, 0, 1, 0, 1, 252, 3, 3, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16];

/// How much longer than the handshake timeout a connection that sends nothing may
/// wait for its close: the listener's TCP_DEFER_ACCEPT (5 s) has the kernel hold it
/// until its SYN-ACK was sent again three times (1 + 2 + 4 s), and only then does
/// the worker accept it and start its handshake's clock.
const DEFERRED: Duration = Duration::from_secs(10);

#[test]
fn a_thousand_stalled_handshakes_hold_up_no_one_and_are_closed_after_the_timeout() {
    const STALLED: usize = 1000;
    if !tool_available("curl", "curl") {
        return;
    }
    // Ours, with room for the other tests running beside this one.
    raise_fd_limit(STALLED as u64 + 1024);
    let server = hello(&["--tls-handshake-timeout", "1s"]);
    // Every other one sends half a ClientHello, the rest nothing.
    let stalled: Vec<(TcpStream, bool)> = (0..STALLED)
        .map(|i| {
            let mut stream = connect(server.addr());
            let half = i % 2 == 1;
            if half {
                stream.write_all(&HALF_A_CLIENT_HELLO).expect("sending half a ClientHello");
            }
            (stream, half)
        })
        .collect();
    // A client meanwhile is served.
    assert_eq!(curl_hello(server.addr().port()), HELLO, "a client beside 1,000 stalled handshakes");
    // Then each stalled one is closed by the server, without a byte.
    let deadline = Instant::now() + WAIT + DEFERRED;
    let mut open = Vec::new();
    for (index, (mut stream, half)) in stalled.into_iter().enumerate() {
        let left = deadline.saturating_duration_since(Instant::now()).max(Duration::from_millis(1));
        stream.set_read_timeout(Some(left)).unwrap();
        let mut buf = [0; 64];
        match stream.read(&mut buf) {
            Ok(0) => {}
            Err(e) if e.kind() == ErrorKind::ConnectionReset => {}
            Ok(n) => panic!("stalled connection {index} (half a ClientHello: {half}) got {:02x?}", &buf[..n]),
            Err(e) if matches!(e.kind(), ErrorKind::WouldBlock | ErrorKind::TimedOut) => {
                open.push((index, half))
            }
            Err(e) => panic!("stalled connection {index}: {e}"),
        }
    }
    assert!(
        open.is_empty(),
        "{} stalled connections still open, (index, sent half a ClientHello): {open:?}",
        open.len()
    );
    assert_first_worker_serves(&server);
}

#[test]
fn a_fatal_alert_from_the_client_mid_connection_closes_that_connection_only() {
    let server = hello(&[]);
    let Some(lines) = python_peer("alert", server.addr().port()) else { return };
    assert_eq!(lines.len(), 4, "{lines:?}");
    // The client's OpenSSL refuses a record changed on the way, with bad_record_mac.
    assert!(lines[0].starts_with("client read ") && lines[0].contains("BAD_RECORD_MAC"), "{lines:?}");
    assert!(lines[1].starts_with("client alert ") && lines[1] != "client alert 0 bytes", "{lines:?}");
    assert_eq!(lines[2..], ["server sent 0 bytes, then closed", "other answer HTTP/1.1 200 OK body 14"]);
}

#[test]
fn a_connection_cut_without_close_notify_after_its_answer_ends_like_any_other() {
    let server = hello(&[]);
    let Some(lines) = python_peer("cut", server.addr().port()) else { return };
    assert_eq!(lines, ["answer HTTP/1.1 200 OK body 14", "cut", "next answer HTTP/1.1 200 OK body 14"]);
    // Neither connection failed: a truncation after the answer is an end of input.
    let last = stopped(server);
    assert_eq!((last.connections, last.failed, last.requests, last.refused), (2, 0, 2, 0), "{last:?}");
}

#[test]
fn a_record_longer_than_any_is_refused_with_record_overflow_and_a_close() {
    let server = hello(&[]);
    let Some(lines) = python_peer("oversize", server.addr().port()) else { return };
    // One record, the alert (5 bytes of header, 2 of alert, 1 of type, 16 of tag).
    assert_eq!(lines, ["server sent 24 bytes, then closed", "client read TLSV1_ALERT_RECORD_OVERFLOW"]);
    assert_first_worker_serves(&server);
}

#[test]
fn renegotiation_is_refused_and_the_server_goes_on() {
    if !tool_available("openssl", "openssl") {
        return;
    }
    let server = hello(&[]);
    let mut client = Interactive::s_client(server.addr().port(), &["-tls1_2", "-msg"]);
    client.send("GET / HTTP/1.1\r\nHost: localhost\r\n\r\n");
    client.wait_for("hello, world!\n");
    // s_client's command: a ClientHello on the established connection.
    client.send("R\n");
    client.wait_for("Alert [length 0002], warning no_renegotiation");
    // OpenSSL's client gives up on the connection at the refusal.
    let run = client.finish();
    assert!(run.stderr.contains("RENEGOTIATING"), "{}", run.stderr);
    assert!(run.stderr.contains("no renegotiation"), "{}", run.stderr);
    assert_first_worker_serves(&server);
}

// 4. Start-up errors.

/// `percore serve` on an ephemeral port with `args`, run to its exit.
fn serve_exits(args: &[&str]) -> Finished {
    let all = [&["serve", "--bind", "127.0.0.1", "--port", "0", "--workers", "1"], args].concat();
    run_capturing(&percore_bin(), &all)
}

#[test]
fn a_missing_malformed_or_mismatched_certificate_or_key_exits_1_with_a_line_naming_its_file() {
    let missing = "/nonexistent/percore-test.pem";
    let garbage = TempFile::with_contents(b"this is no PEM at all\n");
    let bad_base64 =
        TempFile::with_contents(b"-----BEGIN CERTIFICATE-----\n!!!\n-----END CERTIFICATE-----\n");
    let (cert, key, other) = (tls_arg("localhost.pem"), tls_arg("localhost.key"), tls_arg("other.key"));
    for (cert, key, named, why) in [
        (missing, key.as_str(), missing, "No such file or directory"),
        (garbage.path(), &key, garbage.path(), "no certificate in PEM"),
        (bad_base64.path(), &key, bad_base64.path(), "malformed PEM"),
        (&cert, garbage.path(), garbage.path(), "no private key in PEM"),
        (&cert, &other, &other, "not a key for the certificate of"),
    ] {
        let run = serve_exits(&["--tls-cert", cert, "--tls-key", key]);
        let err = &run.stderr;
        assert_eq!(run.status.code(), Some(1), "--tls-cert {cert} --tls-key {key}: {err}");
        assert_eq!(err.lines().count(), 1, "one line: {err}");
        assert!(err.starts_with("percore: --tls-cert/--tls-key: "), "{err}");
        assert!(err.contains(named) && err.contains(why), "naming {named} ({why}): {err}");
    }
}

#[test]
fn a_certificate_without_its_key_or_a_key_without_its_certificate_is_a_usage_error() {
    let (cert, key) = (tls_arg("localhost.pem"), tls_arg("localhost.key"));
    for (given, missing) in [(["--tls-cert", &cert], "--tls-key"), (["--tls-key", &key], "--tls-cert")] {
        let run = serve_exits(&given);
        assert_eq!(run.status.code(), Some(2), "{given:?}: {}", run.stderr);
        assert!(run.stderr.contains("required arguments were not provided"), "{}", run.stderr);
        assert!(run.stderr.contains(missing), "{}", run.stderr);
    }
    let run =
        serve_exits(&["--tls-cert", &cert, "--tls-key", &key, "--tls-cert", &tls_arg("example.test.pem")]);
    assert_eq!(run.status.code(), Some(2), "{}", run.stderr);
    assert!(run.stderr.contains("--tls-cert is given 2 times and --tls-key 1"), "{}", run.stderr);
}

#[test]
fn an_expired_certificate_starts_with_a_warning_naming_its_file_and_curl_refuses_it() {
    let server = Server::percore(&strs(&tls_args("expired", &[])));
    let warning = format!("percore: warning: the certificate of {} has expired\n", tls_arg("expired.pem"));
    assert!(server.stderr().starts_with(&warning), "{}", server.stderr());
    if !tool_available("curl", "curl") {
        return;
    }
    let run = curl(server.addr().port(), &[], "");
    assert_eq!(run.status.code(), Some(60), "curl: {}", run.stderr);
    assert!(run.stderr.contains("certificate has expired"), "{}", run.stderr);
}
