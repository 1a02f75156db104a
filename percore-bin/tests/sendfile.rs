//! Bodies sent with sendfile(2) from a sealed memfd (a `--body-file` of
//! `--sendfile-min` bytes or more, 16 KiB by default): byte for byte to many slow
//! readers, none of it in the worker's memory however many clients leave it unread,
//! in order between pipelined answers, from the old file to a client that was
//! mid-transfer across a reload, and cut off by the send timeout mid-file.
//!
//! Each body is a stream of bytes that never repeats, so that a byte sent from the
//! wrong offset, twice or not at all shows as a difference where it happened.

#[path = "../../tests/util/mod.rs"]
mod util;

use std::io::{ErrorKind, Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::sync::Arc;
use std::thread;
use std::time::Duration;

use util::{
    assert_same, beyond_socket_buffers, children_of, connect, connect_with, difference, pattern, request,
    signal, tcp_queues, tcp_queues_of, vm_kib, wait_until, worker_lines, Client, Method, Response, Server,
    TempFile, OK, WAIT,
};

const MIB: usize = 1024 * 1024;

/// `percore serve --workers 1` plus `extra` flags, and the pid of its worker.
fn one_worker(extra: &[&str]) -> (Server, u32) {
    let mut flags = vec!["--workers", "1"];
    flags.extend(extra);
    let server = Server::percore(&flags);
    let stderr = server.wait_for_stderr(WAIT, "a worker line", |s| !worker_lines(s).is_empty());
    let worker = worker_lines(&stderr)[0].pid;
    (server, worker)
}

/// Sends a GET and reads the head of its answer, a byte at a time so that no byte of
/// the body is read with it; asserts it is a 200 with a Content-Length of `len`.
fn get_head(stream: &mut TcpStream, len: usize) {
    stream.write_all(request(Method::Get, "/", "HTTP/1.1", &[]).as_bytes()).expect("sending a GET");
    let mut head = Vec::new();
    while !head.ends_with(b"\r\n\r\n") {
        let mut byte = [0u8];
        match stream.read(&mut byte) {
            Ok(1) => head.push(byte[0]),
            Ok(_) => panic!("closed mid-head: {:?}", String::from_utf8_lossy(&head)),
            Err(e) => panic!("reading the head: {e}; so far {:?}", String::from_utf8_lossy(&head)),
        }
    }
    let head = String::from_utf8(head).expect("a UTF-8 head");
    assert!(head.starts_with(&format!("{OK}\r\n")), "not a 200: {head:?}");
    assert!(
        head.contains(&format!("\r\nContent-Length: {len}\r\n")),
        "Content-Length is not {len}: {head:?}"
    );
}

/// Reads the bytes of `body` from `from` to `to` in pieces of at most `piece`,
/// pausing `pause` after each, and compares them with the body as they come (none is
/// kept); panics at the first difference, an early close or a read that waits past
/// the timeout.
fn read_slowly(
    stream: &mut TcpStream,
    body: &[u8],
    from: usize,
    to: usize,
    piece: usize,
    pause: Duration,
    what: &str,
) {
    let mut buf = vec![0u8; piece];
    let mut at = from;
    while at < to {
        let n = piece.min(to - at);
        stream.read_exact(&mut buf[..n]).unwrap_or_else(|e| panic!("{what}: reading body byte {at} on: {e}"));
        if let Some(difference) = difference(&buf[..n], body, at) {
            panic!("{what}: {difference}");
        }
        at += n;
        thread::sleep(pause);
    }
}

/// The body a new connection gets for a GET now.
fn body_now(addr: SocketAddr) -> Vec<u8> {
    let mut client = Client::connect(addr);
    client.send_request(Method::Get, "/", "HTTP/1.1", &["Connection: close"]);
    client.read_response(Method::Get).body
}

fn fd_count(pid: u32) -> usize {
    std::fs::read_dir(format!("/proc/{pid}/fd"))
        .unwrap_or_else(|e| panic!("reading /proc/{pid}/fd: {e}"))
        .count()
}

/// The worker's descriptor count once it holds still (the same for 300 ms).
fn settled_fd_count(worker: u32) -> usize {
    let mut last = fd_count(worker);
    let mut same = 0;
    let settled = wait_until(WAIT, || {
        thread::sleep(Duration::from_millis(100));
        let now = fd_count(worker);
        same = if now == last { same + 1 } else { 0 };
        last = now;
        same >= 3
    });
    assert!(settled, "worker {worker}'s descriptor count never settled (last {last})");
    last
}

#[test]
fn fifty_slow_readers_each_get_the_whole_body_byte_for_byte() {
    const CONNECTIONS: usize = 50;
    let body = Arc::new(pattern(1, 10 * MIB));
    let file = TempFile::with_contents(&body);
    let (server, _) = one_worker(&["--body-file", file.path()]);
    let addr = server.addr();
    // Each reads far slower than the worker sends, so its socket is full again and
    // again and the worker resumes the file range where each partial send stopped.
    // The pieces differ in size from connection to connection, so that the reads end
    // at ever other offsets.
    let readers: Vec<_> = (0..CONNECTIONS)
        .map(|i| {
            let body = Arc::clone(&body);
            thread::spawn(move || {
                let mut stream = connect(addr);
                get_head(&mut stream, body.len());
                let what = format!("connection {i}");
                let piece = 64 * 1024 + 97 * i;
                read_slowly(&mut stream, &body, 0, body.len(), piece, Duration::from_millis(2), &what);
            })
        })
        .collect();
    let failed: Vec<usize> =
        readers.into_iter().enumerate().filter_map(|(i, reader)| reader.join().err().map(|_| i)).collect();
    assert!(failed.is_empty(), "connections {failed:?} did not get the body (their panics are above)");
}

/// The worker's VmRSS (KiB) with `clients` connections open and idle, then with each
/// having sent a GET for the `len`-byte body and read nothing, once every one of their
/// answers fills its socket and stays put.
fn rss_idle_then_unread(server: &Server, worker: u32, len: usize, clients: usize) -> (u64, u64) {
    // One whole answer first, on a connection kept open (idle) to the end: whatever
    // the worker sets up on its first answer is there before the first measure.
    let mut first = server.client();
    let answer = first.get("/");
    assert_eq!((answer.status_line.as_str(), answer.body.len()), (OK, len), "the first answer");
    // Each idle connection has had a HEAD answered, so that the worker surely holds it
    // (the listener holds back one that sends nothing: TCP_DEFER_ACCEPT). Small buffers
    // and segments keep what the kernel holds for them small.
    let mut clients: Vec<Client> = (0..clients)
        .map(|_| {
            let mut client = Client::new(connect_with(server.addr(), 16 * 1024, Some(1024)));
            client.send_request(Method::Head, "/", "HTTP/1.1", &[]);
            assert_eq!(client.read_response(Method::Head).status_line, OK);
            client
        })
        .collect();
    let idle = vm_kib(worker, "VmRSS");
    let get = request(Method::Get, "/", "HTTP/1.1", &[]);
    for client in &mut clients {
        client.send(get.as_bytes());
    }
    // Each answer is under way once the server's side of its connection holds bytes
    // the client has not taken; then, none reading, the queues soon stop changing.
    let server_sides: Vec<_> = clients
        .iter()
        .map(|client| (client.stream().peer_addr().unwrap(), client.stream().local_addr().unwrap()))
        .collect();
    let (mut last, mut same) = (Vec::new(), 0);
    let still = wait_until(WAIT, || {
        let now = tcp_queues_of(&server_sides);
        let all_sending = now.iter().all(|q| q.is_some_and(|(unsent, _)| unsent > 0));
        same = if all_sending && now == last { same + 1 } else { 0 };
        last = now;
        thread::sleep(Duration::from_millis(100));
        same >= 3
    });
    let sending = last.iter().filter(|q| q.is_some_and(|(unsent, _)| unsent > 0)).count();
    let total = clients.len();
    assert!(still, "{sending} of {total} answers filled their sockets and held still within {WAIT:?}");
    (idle, vm_kib(worker, "VmRSS"))
}

#[test]
fn clients_that_never_read_a_sendfile_body_cost_the_worker_no_memory() {
    const CLIENTS: usize = 200;
    const SLACK_KIB: u64 = 1024;
    let body = pattern(2, 10 * MIB);
    let body_kib = (body.len() / 1024) as u64;
    let file = TempFile::with_contents(&body);
    let (server, worker) = one_worker(&["--body-file", file.path()]);
    let (idle, unread) = rss_idle_then_unread(&server, worker, body.len(), CLIENTS);
    let peak = vm_kib(worker, "VmHWM");
    eprintln!(
        "worker VmRSS: {idle} KiB with {CLIENTS} idle connections, {unread} KiB with {CLIENTS} \
         unread {body_kib} KiB answers; VmHWM {peak} KiB"
    );
    assert!(
        unread <= idle + SLACK_KIB,
        "{CLIENTS} unread answers took the worker from {idle} to {unread} KiB (slack {SLACK_KIB} KiB)"
    );
    // The body is never in the worker's memory, not even once.
    assert!(unread < body_kib, "worker VmRSS {unread} KiB, the body is {body_kib} KiB");
    assert!(peak < body_kib, "worker VmHWM {peak} KiB, the body is {body_kib} KiB");
}

/// The contrast, and the proof that the measure above sees a body in memory: sent
/// from memory (`--sendfile-min off`), the body is in the worker's VmRSS.
#[test]
fn a_body_sent_from_memory_is_in_the_workers_memory() {
    const CLIENTS: usize = 200;
    let body = pattern(2, 10 * MIB);
    let body_kib = (body.len() / 1024) as u64;
    let file = TempFile::with_contents(&body);
    let (server, worker) = one_worker(&["--body-file", file.path(), "--sendfile-min", "off"]);
    let (idle, unread) = rss_idle_then_unread(&server, worker, body.len(), CLIENTS);
    eprintln!("worker VmRSS from memory: {idle} KiB idle, {unread} KiB with {CLIENTS} unread answers");
    assert!(unread >= body_kib, "worker VmRSS {unread} KiB, under the {body_kib} KiB body it holds");
}

#[test]
fn pipelined_get_head_get_are_answered_in_order_byte_for_byte() {
    let body = pattern(3, beyond_socket_buffers(MIB) + 4321);
    let file = TempFile::with_contents(&body);
    let (server, _) = one_worker(&["--body-file", file.path()]);
    // Nothing is read until the three are asked, and little fits the receive buffer:
    // the first body fills the socket and goes out in many sends, the HEAD's head and
    // the second answer after its last byte.
    let stream = connect_with(server.addr(), 16 * 1024, None);
    let (ours, theirs) = (stream.local_addr().unwrap(), stream.peer_addr().unwrap());
    let mut client = Client::new(stream);
    let requests = [
        request(Method::Get, "/", "HTTP/1.1", &[]),
        request(Method::Head, "/", "HTTP/1.1", &[]),
        request(Method::Get, "/", "HTTP/1.1", &["Connection: close"]),
    ];
    client.send(requests.concat().as_bytes());
    let full = wait_until(WAIT, || tcp_queues(theirs, ours).is_some_and(|(unsent, _)| unsent > 0));
    assert!(full, "the first answer did not fill the socket within {WAIT:?}");
    let first = client.read_response(Method::Get);
    let head = client.read_response(Method::Head);
    let second = client.read_response(Method::Get);
    for (which, response) in [("first GET", &first), ("HEAD", &head), ("second GET", &second)] {
        assert_eq!(response.status_line, OK, "the {which}'s answer");
        assert_eq!(response.content_length(), body.len(), "the {which}'s Content-Length");
    }
    // The HEAD's head is the GET's, Date aside; a body after it would have been read
    // above as the second answer's head.
    let without_date = |response: &Response| {
        let headers = response.headers.iter().filter(|(name, _)| name != "Date");
        headers.cloned().collect::<Vec<_>>()
    };
    assert_eq!(without_date(&head), without_date(&first), "the HEAD's headers and the GET's");
    assert_same(&first.body, &body, "the first GET's body");
    assert_same(&second.body, &body, "the second GET's body");
    // The second GET asked to close: nothing more comes.
    client.expect_eof();
}

#[test]
fn a_reload_mid_transfer_finishes_the_old_body_and_serves_the_new() {
    let a = pattern(4, beyond_socket_buffers(10 * MIB));
    let b = pattern(5, a.len() - MIB + 12_345);
    let file = TempFile::with_contents(&a);
    // The old worker may take as long as it needs for the transfer it was in.
    let (server, old_worker) = one_worker(&["--body-file", file.path(), "--shutdown-timeout", "60"]);
    let mut first = connect_with(server.addr(), 64 * 1024, None);
    get_head(&mut first, a.len());
    let half = a.len() / 2;
    let pause = Duration::from_millis(1);
    read_slowly(&mut first, &a, 0, half, 64 * 1024, pause, "the first half of A");
    // The file changes in place: the same file, truncated and written again.
    std::fs::write(file.path(), &b).expect("writing B over the body file");
    // What the master holds before it reads B: its new worker starts from it.
    let before = vm_kib(server.pid(), "VmRSS");
    signal(server.pid(), "HUP");
    server.wait_for_stderr(WAIT, "the reload", |s| s.contains("reloading: generation 2"));
    let mut got = Vec::new();
    let serves_b = wait_until(WAIT, || {
        got = body_now(server.addr());
        got == b
    });
    if !serves_b {
        let what = "a new connection after the reload";
        assert_same(&got, &b, what);
        panic!("{what} did not get B");
    }
    // Neither the new worker nor the master that sealed B holds it in user memory (a
    // buffer the master read it into, kept by its allocator, would be in both): each
    // grew by less than half of B over what the master held before. (Not RSS against
    // B itself: a binary with TLS in it starts near B's 9 MiB.)
    let new_worker = children_of(server.pid()).into_iter().find(|&pid| pid != old_worker);
    let new_worker = new_worker.expect("a worker of the new generation");
    let half_of_b = (b.len() / 2 / 1024) as u64;
    for (what, pid) in [("the new worker", new_worker), ("the master", server.pid())] {
        let rss = vm_kib(pid, "VmRSS");
        assert!(
            rss < before + half_of_b,
            "{what}'s VmRSS is {rss} KiB, the master's {before} KiB before B; B is {} KiB",
            b.len() / 1024
        );
    }
    read_slowly(&mut first, &a, half, a.len(), 64 * 1024, pause, "the second half of A, after the reload");
}

#[test]
fn the_send_timeout_drops_a_client_that_stops_reading_mid_body() {
    let body = pattern(6, beyond_socket_buffers(10 * MIB));
    let file = TempFile::with_contents(&body);
    let (server, worker) = one_worker(&["--body-file", file.path(), "--send-timeout", "1"]);
    // One answer on a connection since closed, so that the worker surely runs.
    let mut warm = server.client();
    warm.send_request(Method::Head, "/", "HTTP/1.1", &["Connection: close"]);
    assert_eq!(warm.read_response(Method::Head).status_line, OK);
    warm.expect_eof();
    drop(warm);
    let baseline = settled_fd_count(worker);
    // Its small receive buffer full, the client stalls the server far from the body's
    // end: the timeout must fire with the file range part sent.
    let mut stream = connect_with(server.addr(), 16 * 1024, None);
    get_head(&mut stream, body.len());
    let read = 256 * 1024;
    read_slowly(&mut stream, &body, 0, read, 16 * 1024, Duration::ZERO, "the start of the body");
    // The stream stays open and unread: only the server can close the worker's end.
    let dropped = wait_until(WAIT, || fd_count(worker) <= baseline);
    assert!(
        dropped,
        "the worker still holds the connection {WAIT:?} after the client stopped reading ({} descriptors, \
         {baseline} with none)",
        fd_count(worker)
    );
    // Reading on, the client gets what was already on its way, then the close.
    let mut at = read;
    let mut buf = vec![0u8; 64 * 1024];
    let end = loop {
        match stream.read(&mut buf) {
            Ok(0) => break "EOF",
            Ok(n) => {
                if let Some(difference) = difference(&buf[..n], &body, at) {
                    panic!("reading on after the stall: {difference}");
                }
                at += n;
            }
            Err(e) if matches!(e.kind(), ErrorKind::ConnectionReset | ErrorKind::ConnectionAborted) => {
                break "reset"
            }
            Err(e) => panic!("reading on after the stall, at body byte {at}: {e}"),
        }
    };
    eprintln!("the client got {at} of {} body bytes, then {end}", body.len());
    assert!(at < body.len(), "the client got the whole body ({at} bytes), then {end}");
}
