//! What a client sees on the wire from `percore serve`.

#[path = "../../tests/util/mod.rs"]
mod util;

use std::net::TcpListener;
use std::thread;
use std::time::{Duration, Instant};

use util::{
    date_of, percore_bin, request, run_capturing, run_expecting_exit, Client, Method, Response, Server,
    TempFile, HELLO, OK,
};

/// The exact bytes of a 200 response with the given `date` (taken from the
/// response under test, as it cannot be predicted) and `extra` header lines
/// after Content-Length. A HEAD response is the same without the body.
fn expected(date: &str, content_type: &str, body: &[u8], extra: &[&str], method: Method) -> Vec<u8> {
    let mut head = format!(
        "{OK}\r\nServer: percore\r\nDate: {date}\r\nContent-Type: {content_type}\r\nContent-Length: {}\r\n",
        body.len()
    );
    for line in extra {
        head.push_str(line);
        head.push_str("\r\n");
    }
    head.push_str("\r\n");
    let mut bytes = head.into_bytes();
    if method == Method::Get {
        bytes.extend_from_slice(body);
    }
    bytes
}

/// Asserts `response` is, byte for byte, the given 200 response, and returns
/// its Date value.
fn assert_exact(
    response: &Response,
    content_type: &str,
    body: &[u8],
    extra: &[&str],
    method: Method,
) -> String {
    let date = date_of(response).to_string();
    let want = expected(&date, content_type, body, extra, method);
    assert_eq!(String::from_utf8_lossy(&response.raw()), String::from_utf8_lossy(&want));
    date
}

fn assert_hello(response: &Response, extra: &[&str], method: Method) -> String {
    assert_exact(response, "text/plain", HELLO, extra, method)
}

fn assert_ok_with_body(response: &Response, body: &[u8]) {
    assert_eq!(response.status_line, OK);
    assert_eq!(response.body, body);
}

/// Proves a connection is still usable by getting another answer on it.
fn assert_still_open(client: &mut Client) {
    assert_ok_with_body(&client.get("/still-open"), HELLO);
}

#[test]
fn single_get_is_exact() {
    let server = Server::percore(&[]);
    let mut client = server.client();
    let response = client.get("/");
    assert_hello(&response, &[], Method::Get);
}

#[test]
fn every_path_gets_the_same_body() {
    let server = Server::percore(&[]);
    let mut client = server.client();
    for target in ["/", "/anything?x=1", "/a/b/c"] {
        assert_hello(&client.get(target), &[], Method::Get);
    }
}

#[test]
fn thousand_sequential_requests_on_one_connection() {
    let server = Server::percore(&[]);
    let mut client = server.client();
    for i in 0..1000 {
        let response = client.get(&format!("/{i}"));
        assert_ok_with_body(&response, HELLO);
        assert_eq!(response.header("Connection"), None, "request {i}");
    }
    assert_still_open(&mut client);
}

#[test]
fn http10_without_keep_alive_closes() {
    let server = Server::percore(&[]);
    let mut client = server.client();
    client.send_request(Method::Get, "/", "HTTP/1.0", &[]);
    let response = client.read_response(Method::Get);
    assert_hello(&response, &["Connection: close"], Method::Get);
    client.expect_eof();
}

#[test]
fn http10_keep_alive_stays_open() {
    let server = Server::percore(&[]);
    let mut client = server.client();
    for _ in 0..2 {
        client.send_request(Method::Get, "/", "HTTP/1.0", &["Connection: keep-alive"]);
        let response = client.read_response(Method::Get);
        assert_hello(&response, &["Connection: keep-alive"], Method::Get);
    }
}

#[test]
fn http11_connection_close_closes() {
    let server = Server::percore(&[]);
    let mut client = server.client();
    client.send_request(Method::Get, "/", "HTTP/1.1", &["Connection: close"]);
    let response = client.read_response(Method::Get);
    assert_hello(&response, &["Connection: close"], Method::Get);
    client.expect_eof();
}

#[test]
fn head_has_the_get_head_and_no_body() {
    let server = Server::percore(&[]);
    let mut client = server.client();
    // Pipelined in one write: if HEAD sent any body bytes they would sit
    // where the GET's status line is expected.
    let both = request(Method::Head, "/", "HTTP/1.1", &[]) + &request(Method::Get, "/", "HTTP/1.1", &[]);
    client.send(both.as_bytes());

    let head = client.read_response(Method::Head);
    assert_hello(&head, &[], Method::Head);
    assert_eq!(head.header("Content-Length"), Some("14"));

    let get = client.read_response(Method::Get);
    assert_hello(&get, &[], Method::Get);
    assert_eq!(without_date(&head), without_date(&get));
}

fn without_date(response: &Response) -> Vec<(String, String)> {
    let mut headers = response.headers.clone();
    headers.retain(|(name, _)| !name.eq_ignore_ascii_case("Date"));
    headers
}

/// Every third request of a pipelined batch is a HEAD, so an answer given
/// out of order or with the wrong framing breaks the parse.
fn pipelined_method(i: usize) -> Method {
    if i % 3 == 1 {
        Method::Head
    } else {
        Method::Get
    }
}

#[test]
fn hundred_pipelined_requests_in_one_write() {
    let server = Server::percore(&[]);
    let mut client = server.client();
    let batch: String =
        (0..100).map(|i| request(pipelined_method(i), &format!("/{i}"), "HTTP/1.1", &[])).collect();
    client.send(batch.as_bytes());
    for i in 0..100 {
        let method = pipelined_method(i);
        let response = client.read_response(method);
        assert_eq!(response.status_line, OK, "response {i}");
        assert_eq!(response.content_length(), HELLO.len(), "response {i}");
        if method == Method::Get {
            assert_eq!(response.body, HELLO, "response {i}");
        }
    }
    // Also shows nothing stray followed the 100th response.
    assert_still_open(&mut client);
}

#[test]
fn request_sent_one_byte_at_a_time() {
    let server = Server::percore(&[]);
    let mut client = server.client();
    // Without Nagle each one-byte write leaves as its own segment, so the
    // server has to resume parsing a request split at every possible point.
    client.stream().set_nodelay(true).unwrap();
    for byte in request(Method::Get, "/slow", "HTTP/1.1", &[]).bytes() {
        client.send(&[byte]);
        // Not synchronisation: only makes it likelier that each byte arrives
        // in a separate read on the server.
        thread::sleep(Duration::from_millis(1));
    }
    assert_hello(&client.read_response(Method::Get), &[], Method::Get);
}

#[test]
fn half_close_after_pipelined_requests() {
    let server = Server::percore(&[]);
    let mut client = server.client();
    let two = request(Method::Get, "/1", "HTTP/1.1", &[]) + &request(Method::Get, "/2", "HTTP/1.1", &[]);
    client.send(two.as_bytes());
    client.shutdown_write();
    for _ in 0..2 {
        assert_hello(&client.read_response(Method::Get), &[], Method::Get);
    }
    client.expect_eof();
}

#[test]
fn thousand_concurrent_connections() {
    const CONNECTIONS: usize = 1000;
    const THREADS: usize = 4;
    let server = Server::percore(&[]);
    // All connections are open before any request, so the server really
    // holds 1,000 at once.
    let mut clients: Vec<Client> = (0..CONNECTIONS).map(|_| server.client()).collect();
    thread::scope(|scope| {
        for chunk in clients.chunks_mut(CONNECTIONS / THREADS) {
            scope.spawn(move || {
                for round in 0..2 {
                    let target = format!("/round{round}");
                    // Send on every connection before reading any answer, so
                    // all requests are in flight together.
                    for client in chunk.iter_mut() {
                        client.send_request(Method::Get, &target, "HTTP/1.1", &[]);
                    }
                    for client in chunk.iter_mut() {
                        assert_ok_with_body(&client.read_response(Method::Get), HELLO);
                    }
                }
            });
        }
    });
}

#[test]
fn date_refreshes() {
    let server = Server::percore(&[]);
    let mut client = server.client();
    let first = date_of(&client.get("/")).to_string();
    // Bounded polling: the clock must cross a second boundary within ~5 s.
    let deadline = Instant::now() + Duration::from_secs(5);
    let mut last = first.clone();
    while last == first && Instant::now() < deadline {
        thread::sleep(Duration::from_millis(100));
        last = date_of(&client.get("/")).to_string();
    }
    assert_ne!(last, first, "Date stayed {first:?} for 5 s");
}

/// A body with a newline and a multi-byte character, to check the length is
/// counted in bytes.
const CUSTOM_BODY: &str = "{\"msg\":\"custom \u{e9}\"}\n";
const JSON: &str = "application/json";

fn assert_custom_body_served(server: &Server) {
    let mut client = server.client();
    for target in ["/", "/other/path?q"] {
        let response = client.get(target);
        assert_exact(&response, JSON, CUSTOM_BODY.as_bytes(), &[], Method::Get);
    }
}

#[test]
fn custom_body_from_flag() {
    let server = Server::percore(&["--body", CUSTOM_BODY, "--content-type", JSON]);
    assert_custom_body_served(&server);
}

/// A uniquely named file in the temp dir, removed on drop.
#[test]
fn custom_body_from_file() {
    let file = TempFile::with_contents(CUSTOM_BODY.as_bytes());
    let path = file.path();
    let server = Server::percore(&["--body-file", path, "--content-type", JSON]);
    assert_custom_body_served(&server);
}

#[test]
fn the_program_names_itself_percore() {
    // Its package is percore-bin, whose name clap would otherwise take.
    let run = run_capturing(&percore_bin(), &["--version"]);
    assert!(run.status.success(), "{run:?}");
    assert_eq!(run.stdout, format!("percore {}\n", env!("CARGO_PKG_VERSION")));
}

#[test]
fn bad_flag_exits_with_status_2() {
    let (status, stderr) = run_expecting_exit(&percore_bin(), &["serve", "--no-such-flag"]);
    assert_eq!(status.code(), Some(2), "stderr:\n{stderr}");
    assert!(!stderr.trim().is_empty(), "no usage message on stderr");
}

#[test]
fn port_in_use_is_a_one_line_error() {
    // Held for the whole test so the server cannot get the port.
    let holder = TcpListener::bind("127.0.0.1:0").unwrap();
    let port = holder.local_addr().unwrap().port().to_string();
    // Limits within any machine's, so no warning about them comes before the error.
    let args = ["serve", "--bind", "127.0.0.1", "--port", &port, "--backlog", "128", "--max-conns", "1000"];
    let (status, stderr) = run_expecting_exit(&percore_bin(), &args);
    assert!(!status.success(), "exited successfully; stderr:\n{stderr}");
    let lines: Vec<&str> = stderr.lines().collect();
    assert_eq!(lines.len(), 1, "expected one line on stderr, got {stderr:?}");
    // Named by the program, with the address and the flag that shares it.
    let said = format!(
        "percore: cannot listen on 127.0.0.1:{port}: address in use by another socket (--reuseport-join shares it)"
    );
    assert_eq!(lines[0], said);
    assert_eq!(status.code(), Some(1), "{stderr}");
    drop(holder);
}
