//! The servers of `examples/` built on the library: `hello` on several workers with
//! the flags of `percore serve`, and `redis_ping` with raw RESP, counting what it
//! answered, and with the stock `redis-cli`.

#[path = "../../tests/util/mod.rs"]
mod util;

use std::io::{Read, Write};
use std::path::Path;

use util::{connect, run_capturing, signal, stopped_lines, tool_available, Method, Server, WAIT};

#[test]
fn hello_serves_its_json_on_every_path_from_two_workers() {
    // Two workers on the CPUs this test may use (both on one, if it has one).
    let mut server = Server::example("hello", &["--workers", "2"]);
    // The master prints its workers' lines after `listening on`: wait for them.
    let two_workers = |s: &str| s.contains("worker 0 pid") && s.contains("worker 1 pid");
    server.wait_for_stderr(WAIT, "two worker lines", two_workers);
    for path in ["/", "/any/path?q=1"] {
        let mut client = server.client();
        client.send_request(Method::Get, path, "HTTP/1.1", &[]);
        let response = client.read_response(Method::Get);
        assert_eq!(response.status_line, "HTTP/1.1 200 OK");
        assert_eq!(response.header("Content-Type"), Some("application/json"));
        assert_eq!(response.body, b"{\"hello\":\"world\"}\n");
    }
    // The workers' last lines count what the example's protocol answered.
    signal(server.pid(), "TERM");
    server.wait_exit(WAIT);
    let stopped = stopped_lines(&server.wait_stderr_closed(WAIT));
    assert_eq!(stopped.len(), 2, "{stopped:?}");
    assert_eq!(stopped.iter().map(|line| line.requests).sum::<u64>(), 2, "{stopped:?}");
}

/// Sends `request` on a new connection and reads exactly as many bytes as `expected`.
fn resp_exchange(server: &Server, request: &[u8], expected: &[u8]) {
    let mut stream = connect(server.addr());
    stream.write_all(request).expect("sending");
    let mut reply = vec![0; expected.len()];
    stream.read_exact(&mut reply).expect("reading the reply");
    assert_eq!(String::from_utf8_lossy(&reply), String::from_utf8_lossy(expected));
}

#[test]
fn redis_ping_answers_resp_pipelined_and_inline() {
    let mut server = Server::example("redis_ping", &["--workers", "1"]);
    // Pipelined RESP arrays, answered in order in one exchange.
    resp_exchange(
        &server,
        b"*1\r\n$4\r\nPING\r\n*2\r\n$4\r\nECHO\r\n$5\r\nhello\r\n*2\r\n$4\r\nping\r\n$2\r\nhi\r\n*1\r\n$3\r\nGET\r\n",
        b"+PONG\r\n$5\r\nhello\r\n$2\r\nhi\r\n-ERR unknown command 'GET'\r\n",
    );
    // Inline commands, as typed into telnet.
    resp_exchange(
        &server,
        b"PING\r\nECHO\r\n",
        b"+PONG\r\n-ERR wrong number of arguments for 'echo' command\r\n",
    );
    // The worker's last line counts the six commands, two of them refused.
    signal(server.pid(), "TERM");
    server.wait_exit(WAIT);
    let stopped = stopped_lines(&server.wait_stderr_closed(WAIT));
    let counted: Vec<(u64, u64)> = stopped.iter().map(|line| (line.requests, line.refused)).collect();
    assert_eq!(counted, [(6, 2)], "{stopped:?}");
}

#[test]
fn redis_ping_closes_after_quit_and_after_a_protocol_error() {
    let server = Server::example("redis_ping", &["--workers", "1"]);
    for (request, reply) in
        [(&b"*1\r\n$4\r\nQUIT\r\n"[..], &b"+OK\r\n"[..]), (b"*x\r\n", b"-ERR Protocol error\r\n")]
    {
        let mut stream = connect(server.addr());
        stream.write_all(request).expect("sending");
        let mut all = Vec::new();
        stream.read_to_end(&mut all).expect("reading to the close");
        assert_eq!(all, reply, "the reply, then the close");
    }
}

#[test]
fn redis_ping_talks_to_the_stock_redis_cli() {
    if !tool_available("redis-cli", "redis-tools") {
        return;
    }
    let server = Server::example("redis_ping", &["--workers", "1"]);
    let port = server.addr().port().to_string();
    let cli = |args: &[&str]| {
        let all = [&["-h", "127.0.0.1", "-p", &port], args].concat();
        run_capturing(Path::new("redis-cli"), &all).stdout
    };
    assert_eq!(cli(&["ping"]), "PONG\n");
    assert_eq!(cli(&["echo", "hello world"]), "hello world\n");
    assert!(cli(&["get", "x"]).contains("ERR unknown command"));
}
