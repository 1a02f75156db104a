//! The `static_files` example, seen from its clients: curl downloads a file whole
//! and sees its head, a 404 and a 405; every way out of the root is refused and
//! never yields the secret beside it; pipelined requests are answered in order,
//! byte for byte, also past the loop's output budget; keep-alive and close follow
//! the request; a file renamed over while it is sent arrives whole as it was, and
//! one truncated while it is sent ends in a close before its Content-Length; and
//! wrk sees no errors. Each test serves a directory of its own under the temporary
//! directory, removed when the test ends, however it ends.

#[path = "../../tests/util/mod.rs"]
mod util;

use std::io::{ErrorKind, Read, Write};
use std::net::TcpStream;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use socket2::{Domain, Socket, Type};
use util::{
    beyond_socket_buffers, connect, date_of, run_capturing_within, run_wrk, tool_available, Client, Method,
    Response, Server, IO_TIMEOUT, OK, WAIT,
};

/// The receive buffer of a client that reads slowly, so that what it has not read
/// yet stays in the server's file rather than in flight in kernel buffers.
const SMALL_RCVBUF: usize = 64 * 1024;

/// A directory of its own under the temporary directory: `root/`, which the server
/// serves, and beside it what must never be served. Removed on drop, also when the
/// test fails (the server, declared after it, is stopped first).
struct Site {
    dir: PathBuf,
}

impl Site {
    fn new(name: &str) -> Site {
        static NEXT: AtomicUsize = AtomicUsize::new(0);
        let unique = format!(
            "percore-static-files-{}-{}-{name}",
            std::process::id(),
            NEXT.fetch_add(1, Ordering::SeqCst)
        );
        let dir = std::env::temp_dir().join(unique);
        // Left over from an earlier run that had the same pid and was killed.
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(dir.join("root"))
            .unwrap_or_else(|e| panic!("creating {}: {e}", dir.display()));
        Site { dir }
    }

    fn root(&self) -> PathBuf {
        self.dir.join("root")
    }

    /// `relative` under the site's directory (beside the root, not in it).
    fn beside(&self, relative: &str) -> PathBuf {
        self.dir.join(relative)
    }

    /// `relative` under the root.
    fn file(&self, relative: &str) -> PathBuf {
        self.root().join(relative)
    }

    /// Writes `bytes` to `relative` under the root.
    fn write(&self, relative: &str, bytes: &[u8]) -> PathBuf {
        let path = self.file(relative);
        std::fs::write(&path, bytes).unwrap_or_else(|e| panic!("writing {}: {e}", path.display()));
        path
    }

    /// The example on one worker, serving this site's root.
    fn serve(&self) -> Server {
        let root = self.root();
        Server::example(
            "static_files",
            &["--workers", "1", "--root", root.to_str().expect("a UTF-8 temp path")],
        )
    }
}

impl Drop for Site {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

/// `len` bytes, each 4-byte word its index mixed with `seed`: no two aligned words
/// alike within a file, and two seeds give two different files of any length.
fn pattern(len: usize, seed: u32) -> Vec<u8> {
    (0..len.div_ceil(4))
        .flat_map(|word| (word as u32 ^ seed.wrapping_mul(0x9e37_79b9)).to_le_bytes())
        .take(len)
        .collect()
}

/// Asserts `got` equals `want`, naming the first byte that differs rather than
/// printing megabytes.
fn assert_same_bytes(got: &[u8], want: &[u8], what: &str) {
    if let Some(at) = got.iter().zip(want).position(|(a, b)| a != b) {
        panic!("{what}: byte {at} differs (got {}, want {})", got[at], want[at]);
    }
    assert_eq!(got.len(), want.len(), "{what}: length");
}

/// The exact bytes of a 200 answer, with the `Date` the server gave it.
fn ok_answer(date: &str, content_type: &str, body: &[u8], with_body: bool) -> Vec<u8> {
    let head = format!(
        "HTTP/1.1 200 OK\r\nDate: {date}\r\nContent-Type: {content_type}\r\nContent-Length: {}\r\n\r\n",
        body.len()
    );
    [head.as_bytes(), if with_body { body } else { b"" }].concat()
}

/// Sends `request` on a new connection and reads until the server closes it;
/// returns the status code and everything received.
fn exchange(server: &Server, request: &[u8]) -> (u16, Vec<u8>) {
    let mut stream = connect(server.addr());
    stream.write_all(request).expect("sending the request");
    let mut all = Vec::new();
    if let Err(e) = stream.read_to_end(&mut all) {
        panic!(
            "reading to the close after {:?}: {e}; got so far: {:?}",
            String::from_utf8_lossy(request),
            String::from_utf8_lossy(&all)
        );
    }
    let status = all
        .strip_prefix(b"HTTP/1.1 ")
        .and_then(|rest| std::str::from_utf8(rest.get(..3)?).ok()?.parse().ok())
        .unwrap_or_else(|| panic!("no status line in {:?}", String::from_utf8_lossy(&all)));
    (status, all)
}

/// A connection whose receive buffer is small (see [`SMALL_RCVBUF`]), set before it
/// connects so that the window it offers stays small.
fn slow_stream(server: &Server) -> TcpStream {
    let socket = Socket::new(Domain::IPV4, Type::STREAM, None).expect("a socket");
    socket.set_recv_buffer_size(SMALL_RCVBUF).expect("SO_RCVBUF");
    socket.connect_timeout(&server.addr().into(), IO_TIMEOUT).expect("connecting");
    let stream: TcpStream = socket.into();
    stream.set_read_timeout(Some(IO_TIMEOUT)).unwrap();
    stream.set_write_timeout(Some(IO_TIMEOUT)).unwrap();
    stream
}

/// curl with a bound on its run, and its output.
fn curl(args: &[&str]) -> String {
    let all = [&["--max-time", "20"], args].concat();
    let run = run_capturing_within(Path::new("curl"), &all, WAIT + Duration::from_secs(10));
    assert!(run.status.success(), "curl {args:?} failed ({}):\n{}\n{}", run.status, run.stdout, run.stderr);
    run.stdout
}

/// The value of header `name` in a response head as text.
fn header<'a>(head: &'a str, name: &str) -> Option<&'a str> {
    head.lines().find_map(|line| {
        let (n, value) = line.split_once(':')?;
        n.eq_ignore_ascii_case(name).then(|| value.trim())
    })
}

#[test]
fn curl_downloads_a_file_whole_and_sees_its_head_a_404_and_a_405() {
    if !tool_available("curl", "curl") {
        return;
    }
    let site = Site::new("curl");
    let body = pattern(3 * 1024 * 1024, 1);
    site.write("big.bin", &body);
    let server = site.serve();
    let url = |path: &str| format!("http://{}{path}", server.addr());

    let download = site.beside("download");
    curl(&["-s", "-o", download.to_str().unwrap(), &url("/big.bin")]);
    let got = std::fs::read(&download).expect("reading what curl wrote");
    assert_same_bytes(&got, &body, "the file curl downloaded");

    let head = curl(&["-sI", &url("/big.bin")]);
    assert!(head.starts_with("HTTP/1.1 200 OK\r\n"), "{head}");
    assert_eq!(header(&head, "Content-Length"), Some("3145728"), "{head}");
    assert_eq!(header(&head, "Content-Type"), Some("application/octet-stream"), "{head}");

    let missing = curl(&["-s", "-o", "/dev/null", "-w", "%{http_code}", &url("/missing.bin")]);
    assert_eq!(missing, "404");

    let post = curl(&["-s", "-i", "-X", "POST", &url("/big.bin")]);
    assert!(post.starts_with("HTTP/1.1 405 "), "{post}");
    assert_eq!(header(&post, "Allow"), Some("GET, HEAD"), "{post}");
}

#[test]
fn every_way_out_of_the_root_is_refused_and_never_yields_the_secret() {
    let site = Site::new("traversal");
    let secret = b"the secret beside the root, never to be served\n";
    let secret_path = site.beside("secret");
    std::fs::write(&secret_path, secret).expect("writing the secret");
    std::fs::create_dir(site.file("a")).expect("creating root/a");
    site.write("public.txt", b"anyone may read this\n");
    // Symlinks inside the root: to the secret (absolute and relative), to the
    // directory that holds it, and, for contrast, to a file inside the root.
    std::os::unix::fs::symlink(&secret_path, site.file("absolute-link")).unwrap();
    std::os::unix::fs::symlink("../secret", site.file("relative-link")).unwrap();
    std::os::unix::fs::symlink(&site.dir, site.file("outside-dir")).unwrap();
    std::os::unix::fs::symlink("public.txt", site.file("inside-link")).unwrap();
    let server = site.serve();

    let get = |target: &str| {
        let request = format!("GET {target} HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\n\r\n");
        exchange(&server, request.as_bytes())
    };
    // What is inside is served, through a symlink too: the refusals below are of
    // the way out, not of every path.
    for target in ["/public.txt", "/inside-link", "/./public.txt", "/%70ublic.txt", "/public.txt?q=1"] {
        let (status, all) = get(target);
        assert_eq!(status, 200, "{target}: {}", String::from_utf8_lossy(&all));
        assert!(all.ends_with(b"anyone may read this\n"), "{target}");
    }
    let attempts = [
        "/../secret",
        "/%2e%2e/secret",
        "/%2E%2e/secret",
        "/%2e%2E/secret",
        "/a/../../secret",
        "/a/..%2fsecret",
        "/a/..%2Fsecret",
        "/..%2f..%2fsecret",
        "/..%5csecret",
        "/a%2f..%2f..%2fsecret",
        "/x%00",
        "/public.txt%00",
        "/%zz",
        "/%2",
        "/absolute-link",
        "/relative-link",
        "/outside-dir/secret",
    ];
    for target in attempts {
        let (status, all) = get(target);
        let text = String::from_utf8_lossy(&all);
        assert!(status == 400 || status == 404, "{target}: status {status}:\n{text}");
        assert!(!all.windows(secret.len()).any(|w| w == secret), "{target} yielded the secret:\n{text}");
    }
}

#[test]
fn pipelined_requests_are_answered_in_order_byte_for_byte() {
    let site = Site::new("pipeline");
    let one = b"the first file\n";
    let two = b"<p>the second file</p>\n";
    site.write("one.txt", one);
    site.write("two.html", two);
    let server = site.serve();

    let mut client = server.client();
    client.send(
        b"GET /one.txt HTTP/1.1\r\nHost: localhost\r\n\r\n\
          GET /two.html HTTP/1.1\r\nHost: localhost\r\n\r\n\
          HEAD /one.txt HTTP/1.1\r\nHost: localhost\r\n\r\n",
    );
    let expected = [
        (Method::Get, "text/plain", &one[..]),
        (Method::Get, "text/html", two),
        (Method::Head, "text/plain", one),
    ];
    for (i, (method, content_type, body)) in expected.into_iter().enumerate() {
        let response = client.read_response(method);
        let want = ok_answer(date_of(&response), content_type, body, method == Method::Get);
        assert_eq!(
            String::from_utf8_lossy(&response.raw()),
            String::from_utf8_lossy(&want),
            "answer {i} ({method:?})"
        );
    }
    // The HEAD's answer had no body: the next answer on the connection starts clean.
    let response = client.get("/two.html");
    assert_eq!(response.raw(), ok_answer(date_of(&response), "text/html", two, true));

    // Past the loop's output budget (256 KiB): 24 answers of 64 KiB asked at once,
    // which the server pauses between, all arrive whole and in order.
    let files: Vec<Vec<u8>> = (0..3).map(|seed| pattern(64 * 1024, seed + 10)).collect();
    for (i, bytes) in files.iter().enumerate() {
        site.write(&format!("{i}.bin"), bytes);
    }
    let mut requests = Vec::new();
    for n in 0..24 {
        requests
            .extend_from_slice(format!("GET /{}.bin HTTP/1.1\r\nHost: localhost\r\n\r\n", n % 3).as_bytes());
    }
    let mut client = server.client();
    client.send(&requests);
    for n in 0..24 {
        let response: Response = client.read_response(Method::Get);
        let want = ok_answer(date_of(&response), "application/octet-stream", &files[n % 3], true);
        assert_same_bytes(&response.raw(), &want, &format!("pipelined answer {n}"));
    }
}

#[test]
fn keep_alive_and_close_follow_the_request() {
    let site = Site::new("keepalive");
    site.write("one.txt", b"one\n");
    let server = site.serve();

    // HTTP/1.1 keeps the connection by default.
    let mut client = server.client();
    for _ in 0..2 {
        let response = client.get("/one.txt");
        assert_eq!(response.status_line, OK);
        assert_eq!(response.header("Connection"), None);
        assert_eq!(response.body, b"one\n");
    }
    // Connection: close closes it after the answer.
    client.send_request(Method::Get, "/one.txt", "HTTP/1.1", &["Connection: close"]);
    let response = client.read_response(Method::Get);
    assert_eq!((response.status_line.as_str(), response.header("Connection")), (OK, Some("close")));
    assert_eq!(response.body, b"one\n");
    client.expect_eof();

    // HTTP/1.0 closes unless asked to keep it.
    let mut client = server.client();
    client.send_request(Method::Get, "/one.txt", "HTTP/1.0", &[]);
    let response = client.read_response(Method::Get);
    assert_eq!((response.status_line.as_str(), response.header("Connection")), (OK, Some("close")));
    client.expect_eof();
    let mut client = server.client();
    for _ in 0..2 {
        client.send_request(Method::Get, "/one.txt", "HTTP/1.0", &["Connection: keep-alive"]);
        let response = client.read_response(Method::Get);
        assert_eq!((response.status_line.as_str(), response.header("Connection")), (OK, Some("keep-alive")));
        assert_eq!(response.body, b"one\n");
    }

    // A 404 and a HEAD's 404 keep the connection; the HEAD's has no body.
    let mut client = server.client();
    let response = client.get("/missing.txt");
    assert!(response.status_line.starts_with("HTTP/1.1 404 "), "{response:?}");
    client.send_request(Method::Head, "/missing.txt", "HTTP/1.1", &[]);
    let response = client.read_response(Method::Head);
    assert!(response.status_line.starts_with("HTTP/1.1 404 "), "{response:?}");
    assert_eq!(client.get("/one.txt").body, b"one\n");

    // A head that does not parse: 400, and the close.
    let (status, _) = exchange(&server, b"NOT HTTP AT ALL\r\n\r\n");
    assert_eq!(status, 400);
    // A body is never read: 413 for a GET with one, 405 for a POST with one, each
    // with a close.
    let (status, all) =
        exchange(&server, b"GET /one.txt HTTP/1.1\r\nHost: localhost\r\nContent-Length: 5\r\n\r\nhello");
    assert_eq!(status, 413, "{}", String::from_utf8_lossy(&all));
    let chunked = b"POST /one.txt HTTP/1.1\r\nHost: localhost\r\nTransfer-Encoding: chunked\r\n\r\n5\r\nhello\r\n0\r\n\r\n";
    let (status, all) = exchange(&server, chunked);
    assert_eq!(status, 405, "{}", String::from_utf8_lossy(&all));
    assert!(String::from_utf8_lossy(&all).contains("\r\nAllow: GET, HEAD\r\n"));
}

#[test]
fn a_file_renamed_over_while_it_is_sent_arrives_whole_as_it_was_opened() {
    let site = Site::new("rename");
    // Halfway through, more is left than can be in flight.
    let len = 2 * beyond_socket_buffers(16 * 1024 * 1024);
    let old = pattern(len, 1);
    let new = pattern(1024 * 1024 + 3, 2);
    let path = site.write("file.bin", &old);
    let server = site.serve();

    let mut client = Client::new(slow_stream(&server));
    client.send_request(Method::Get, "/file.bin", "HTTP/1.1", &[]);
    // The head alone (read as a HEAD's answer), then half of the body.
    let head = client.read_response(Method::Head);
    assert_eq!(head.status_line, OK);
    assert_eq!(head.content_length(), len);
    let first = client.read_exact_bytes(len / 2);
    // Another file takes the name, as a deployment replaces one.
    let staged = site.write("file.bin.new", &new);
    std::fs::rename(&staged, &path).expect("renaming the new file over the old");
    let rest = client.read_exact_bytes(len - len / 2);
    assert_same_bytes(&first, &old[..len / 2], "the body's first half, before the rename");
    assert_same_bytes(&rest, &old[len / 2..], "the body's second half, after the rename");

    // The next request, on the same connection, gets the new file.
    let response = client.get("/file.bin");
    assert_eq!(response.status_line, OK);
    assert_same_bytes(&response.body, &new, "the body after the rename");
}

#[test]
fn a_file_truncated_while_it_is_sent_ends_in_a_close_before_its_length() {
    let site = Site::new("truncate");
    let len = beyond_socket_buffers(16 * 1024 * 1024);
    let old = pattern(len, 3);
    let path = site.write("file.bin", &old);
    let server = site.serve();

    // Read straight from the socket, with no buffer between that could hold bytes back.
    let mut stream = slow_stream(&server);
    stream.write_all(b"GET /file.bin HTTP/1.1\r\nHost: localhost\r\n\r\n").expect("sending the request");
    let mut all = Vec::new();
    let mut buf = vec![0; 64 * 1024];
    let mut truncated_at = None;
    let mut body_start = None;
    loop {
        match stream.read(&mut buf) {
            Ok(0) => break,
            Ok(n) => all.extend_from_slice(&buf[..n]),
            // A reset is a close too.
            Err(e) if e.kind() == ErrorKind::ConnectionReset => break,
            Err(e) => panic!("reading, {} bytes in (truncated at {truncated_at:?}): {e}", all.len()),
        }
        if body_start.is_none() {
            body_start = all.windows(4).position(|w| w == b"\r\n\r\n").map(|at| at + 4);
        }
        if let Some(start) = body_start {
            if truncated_at.is_none() && all.len() - start >= 64 * 1024 {
                // 64 KiB of the body read: the file loses all its bytes.
                std::fs::OpenOptions::new()
                    .write(true)
                    .open(&path)
                    .and_then(|file| file.set_len(0))
                    .expect("truncating the file");
                truncated_at = Some(all.len() - start);
            }
            assert!(all.len() - start < len, "the whole body arrived, though the file was truncated early");
        }
    }
    let start = body_start.unwrap_or_else(|| panic!("no head in {:?}", String::from_utf8_lossy(&all)));
    let head = String::from_utf8_lossy(&all[..start]);
    assert!(head.starts_with("HTTP/1.1 200 OK\r\n"), "{head}");
    assert_eq!(header(&head, "Content-Length"), Some(len.to_string().as_str()), "{head}");
    assert!(truncated_at.is_some(), "the connection closed before 64 KiB of the body: {head}");
    let got = &all[start..];
    eprintln!("the close came after {} bytes of {len}", got.len());
    assert!(got.len() < len, "got {} bytes of {len}", got.len());
    assert_same_bytes(got, &old[..got.len()], "what arrived before the close");
}

#[test]
fn wrk_sees_no_errors_on_a_64_kib_file() {
    if !tool_available("wrk", "wrk") {
        return;
    }
    let site = Site::new("wrk");
    let body = pattern(64 * 1024, 4);
    site.write("64k.bin", &body);
    let server = site.serve();
    let url = format!("http://{}/64k.bin", server.addr());
    run_wrk(&["-t1", "-c10", "-d1s"], &url);
    // The server still answers, whole, after it.
    let response = server.client().get("/64k.bin");
    assert_same_bytes(&response.body, &body, "the file after wrk");
}
