//! What the loop sends and what it holds while sending: every pipelined answer
//! arrives, whatever the output budget cut; a connection's send queue never keeps
//! bytes already sent; a shared body is referenced by each connection, not copied, and
//! arrives byte for byte, to many readers at once and past one sendmsg's 64 pieces.

#[path = "../../tests/util/mod.rs"]
mod util;

use std::io::{BufRead, BufReader, Read, Write};
use std::net::TcpStream;
use std::sync::{Arc, Barrier};
use std::thread;
use std::time::Duration;

use util::{
    assert_same, beyond_socket_buffers, connect, connect_with, date_of, difference, pattern, read_status,
    read_to_eof, request, signal, tcp_queues, tool_available, vm_kib, wait_until, worker_lines, Client,
    Method, Server, Strace, TempFile, OK, WAIT,
};

const GET: &[u8] = b"GET / HTTP/1.1\r\nHost: a\r\n\r\n";

/// The size up to which the server copies a body into each answer, past which it
/// references it (the library's threshold, which it keeps to itself).
const COPY_MAX: usize = 1024;

/// `percore serve --workers 1` plus `extra` flags, and the pid of its worker.
fn one_worker(extra: &[&str]) -> (Server, u32) {
    let mut flags = vec!["--workers", "1"];
    flags.extend(extra);
    let server = Server::percore(&flags);
    let stderr = server.wait_for_stderr(WAIT, "worker line", |s| !worker_lines(s).is_empty());
    (server, worker_lines(&stderr)[0].pid)
}

/// A connection that already had one request answered, so that the next ones
/// arrive on a connection the loop knows, as in the reports of lost answers.
fn warm_connection(server: &Server) -> BufReader<TcpStream> {
    let stream = connect(server.addr());
    (&stream).write_all(GET).expect("the first request");
    let mut reader = BufReader::with_capacity(64 * 1024, stream);
    assert_eq!(read_status(&mut reader).expect("the first answer"), OK);
    reader
}

/// Sends `count` GETs in one write and reads `count` answers.
fn pipeline_and_read_all(reader: &mut BufReader<TcpStream>, count: usize) {
    reader.get_ref().write_all(&GET.repeat(count)).expect("the pipelined requests");
    for i in 0..count {
        let status = read_status(reader).unwrap_or_else(|e| panic!("answer {i} of {count}: {e}"));
        assert_eq!(status, OK, "answer {i}");
    }
}

#[test]
fn two_pipelined_answers_of_a_large_body_both_arrive() {
    // 300 KiB: the first answer alone is over the loop's output budget.
    let body = TempFile::with_contents(&vec![b'b'; 300 * 1024]);
    let (server, _) = one_worker(&["--body-file", body.path()]);
    let mut reader = warm_connection(&server);
    pipeline_and_read_all(&mut reader, 2);
}

#[test]
fn two_thousand_pipelined_answers_all_arrive() {
    let (server, _) = one_worker(&[]);
    let mut reader = warm_connection(&server);
    pipeline_and_read_all(&mut reader, 2000);
}

#[test]
fn a_steady_reader_that_never_catches_up_does_not_grow_the_connection() {
    // 1000-byte bodies, copied into each answer (a larger body would be referenced,
    // not copied); the client reads about 7 MB/s, less than the server can send, so
    // the connection always has output waiting while the client reads: 23 MB of
    // answers pass through a connection that must not keep what it sent.
    const ANSWERS: usize = 20_000;
    const GROWTH_BOUND_KIB: u64 = 8 * 1024;
    let body = "s".repeat(1000);
    let (server, worker) = one_worker(&["--body", &body]);
    // A 4 KiB receive buffer (and so window): the answers wait in the server, not in
    // the kernel's buffers.
    let stream = connect_with(server.addr(), 4096, None);
    let baseline = vm_kib(worker, "VmRSS");
    let writer = {
        let stream = stream.try_clone().expect("a second handle");
        // Ahead of the reader all the time: the server stops reading when its
        // output is over budget, so these writes block rather than pile up.
        thread::spawn(move || (&stream).write_all(&GET.repeat(ANSWERS)))
    };
    let mut reader = BufReader::with_capacity(4096, &stream);
    let mut peak = baseline;
    for i in 0..ANSWERS {
        assert_eq!(read_status(&mut reader).unwrap_or_else(|e| panic!("answer {i}: {e}")), OK);
        if i % 64 == 0 {
            thread::sleep(Duration::from_millis(10));
            peak = peak.max(vm_kib(worker, "VmRSS"));
        }
    }
    writer.join().expect("the writer thread").expect("every request written");
    let growth = peak.saturating_sub(baseline);
    eprintln!("worker VmRSS {baseline} KiB, peak {peak} KiB while reading {ANSWERS} answers");
    assert!(growth < GROWTH_BOUND_KIB, "the worker grew by {growth} KiB (bound {GROWTH_BOUND_KIB} KiB)");
}

#[test]
fn a_large_body_is_held_once_however_many_clients_do_not_read() {
    const CLIENTS: usize = 200;
    const RSS_BOUND_KIB: u64 = 64 * 1024;
    let body = TempFile::with_contents(&vec![b'l'; 10 * 1024 * 1024]);
    let (server, worker) = one_worker(&["--body-file", body.path()]);
    let clients: Vec<TcpStream> = (0..CLIENTS)
        .map(|_| {
            let stream = connect(server.addr());
            (&stream).write_all(GET).expect("a request");
            stream
        })
        .collect();
    // Each answer starts arriving once the worker has produced it: then the peak
    // of its memory (VmHWM) covers every client's answer.
    for (i, stream) in clients.iter().enumerate() {
        stream.peek(&mut [0u8; 1]).unwrap_or_else(|e| panic!("client {i}: no answer: {e}"));
    }
    let peak = vm_kib(worker, "VmHWM");
    eprintln!("worker VmHWM with {CLIENTS} clients not reading a 10 MiB body: {peak} KiB");
    assert!(peak < RSS_BOUND_KIB, "worker VmHWM reached {peak} KiB (bound {RSS_BOUND_KIB} KiB)");
    // The connections still work: the first one reads its whole answer.
    let mut first = BufReader::new(&clients[0]);
    assert_eq!(read_status(&mut first).expect("the whole first answer"), OK);
    drop(clients);
    assert!(wait_until(WAIT, || util::is_running(worker)), "the worker died");
}

#[test]
fn bytes_of_an_answer_arrive_in_order_and_whole() {
    // The body's bytes are distinct, so a byte skipped or sent twice (a partial
    // send resumed at the wrong place) shows as a mismatch.
    let content: Vec<u8> = (0..3 * 1024 * 1024u32).map(|i| (i % 251) as u8).collect();
    let body = TempFile::with_contents(&content);
    let (server, _) = one_worker(&["--body-file", body.path()]);
    let mut reader = warm_connection(&server);
    reader.get_ref().write_all(&GET.repeat(3)).expect("three pipelined requests");
    for i in 0..3 {
        let mut head = Vec::new();
        while !head.ends_with(b"\r\n\r\n") {
            let mut byte = [0u8];
            reader.read_exact(&mut byte).unwrap_or_else(|e| panic!("answer {i}'s head: {e}"));
            head.push(byte[0]);
        }
        assert!(head.starts_with(OK.as_bytes()), "answer {i}: {}", String::from_utf8_lossy(&head));
        let mut got = vec![0; content.len()];
        reader.read_exact(&mut got).unwrap_or_else(|e| panic!("answer {i}'s body: {e}"));
        assert!(got == content, "answer {i}'s body differs from the file");
    }
}

/// The value a traced call returned (`... = 1350`), if it is a count of bytes.
fn returned_bytes(call: &str) -> Option<usize> {
    call.rsplit_once(" = ")?.1.split_whitespace().next()?.parse().ok()
}

#[test]
fn the_answers_to_one_read_go_out_in_one_send() {
    const PIPELINED: usize = 50;
    if !tool_available("strace", "strace") {
        return;
    }
    let (server, worker) = one_worker(&[]);
    let mut reader = warm_connection(&server);
    // The loop receives with recvfrom and sends with sendto (sys::recv, sys::send).
    let trace = Strace::attach(worker, "recvfrom,recvmsg,read,sendto,sendmsg,write,writev");
    // 50 requests in one write, 1,350 bytes: one segment on loopback.
    pipeline_and_read_all(&mut reader, PIPELINED);
    let calls = trace.finish();
    let is = |call: &str, names: &[&str]| names.iter().any(|name| call.starts_with(&format!("{name}(")));
    let reads = calls.iter().filter(|c| is(c, &["recvfrom", "recvmsg", "read"]));
    let reads_with_data = reads.filter(|c| returned_bytes(c).is_some_and(|n| n > 0)).count();
    let sends = calls.iter().filter(|c| is(c, &["sendto", "sendmsg", "write", "writev"])).count();
    // Answers copied into the output (Hello's prebuilt ones) need no slices: `send`.
    let plain_sends = calls.iter().filter(|c| is(c, &["sendto"])).count();
    assert_eq!(plain_sends, sends, "copied answers sent with sendmsg or write: {calls:#?}");
    assert!(
        (1..PIPELINED).contains(&reads_with_data),
        "{reads_with_data} reads brought the {PIPELINED} requests: {calls:#?}"
    );
    assert_eq!(sends, reads_with_data, "one send per read of requests: {calls:#?}");
}

#[test]
fn a_request_in_one_segment_is_one_receive_and_its_answer_one_send() {
    const CONNECTIONS: usize = 3;
    const ROUNDS: usize = 3;
    if !tool_available("strace", "strace") {
        return;
    }
    let (server, worker) = one_worker(&[]);
    // A 4 KiB head, written whole: one segment on loopback, taken by one recvfrom
    // into the loop's 64 KiB read buffer. Each is answered before the next is sent.
    let request = format!("GET / HTTP/1.1\r\nHost: a\r\nX-Pad: {}\r\n\r\n", "p".repeat(4000));
    let trace = Strace::attach(worker, "recvfrom,sendto");
    // Opened under the trace: a new connection is read on its readable edge only.
    let mut readers: Vec<_> = (0..CONNECTIONS).map(|_| BufReader::new(connect(server.addr()))).collect();
    for round in 0..ROUNDS {
        for (i, reader) in readers.iter_mut().enumerate() {
            reader.get_ref().write_all(request.as_bytes()).expect("a request");
            let status = read_status(reader).unwrap_or_else(|e| panic!("round {round}, connection {i}: {e}"));
            assert_eq!(status, OK, "round {round}, connection {i}");
        }
    }
    let calls = trace.finish();
    drop(readers);
    let receives: Vec<&String> = calls.iter().filter(|c| c.starts_with("recvfrom(")).collect();
    let sends = calls.iter().filter(|c| c.starts_with("sendto(")).count();
    // A receive that found nothing (EAGAIN) is a read without an edge; a short one,
    // a read buffer too small for the head.
    assert!(
        receives.iter().all(|c| returned_bytes(c) == Some(request.len())),
        "each receive took one whole request: {receives:#?}"
    );
    assert_eq!(receives.len(), CONNECTIONS * ROUNDS, "one receive per request: {receives:#?}");
    assert_eq!(sends, CONNECTIONS * ROUNDS, "one send per answer: {calls:#?}");
}

/// Reads one `Connection: close` answer of `body` from `stream` in reads of at most
/// `piece` bytes, checking the body's bytes as they come, then the close.
fn read_whole_answer_in_pieces(mut stream: TcpStream, body: &[u8], piece: usize, what: &str) {
    let mut buf = vec![0u8; piece];
    let mut head = Vec::new();
    // Bytes of the body read so far.
    let mut at = 0;
    while at < body.len() {
        let n = stream.read(&mut buf).unwrap_or_else(|e| panic!("{what}: reading at body byte {at}: {e}"));
        assert!(n > 0, "{what}: closed at body byte {at}; head {:?}", String::from_utf8_lossy(&head));
        let mut got = &buf[..n];
        if !head.ends_with(b"\r\n\r\n") {
            head.extend_from_slice(got);
            let Some(end) = head.windows(4).position(|w| w == b"\r\n\r\n").map(|i| i + 4) else { continue };
            got = &got[got.len() - (head.len() - end)..];
            head.truncate(end);
            let text = String::from_utf8_lossy(&head);
            assert!(text.starts_with(&format!("{OK}\r\n")), "{what}: not a 200: {text:?}");
            let length = format!("\r\nContent-Length: {}\r\n", body.len());
            assert!(text.contains(&length) && text.contains("\r\nConnection: close\r\n"), "{what}: {text:?}");
        }
        if let Some(difference) = difference(got, body, at) {
            panic!("{what}: {difference}");
        }
        at += got.len();
    }
    read_to_eof(&mut stream);
}

#[test]
fn fifty_readers_of_one_shared_body_each_get_it_byte_for_byte() {
    const CONNECTIONS: usize = 50;
    // Over COPY_MAX and sent from memory: every answer references the one body.
    let body = Arc::new(pattern(11, 1024 * 1024));
    let file = TempFile::with_contents(&body);
    let (server, _) = one_worker(&["--body-file", file.path(), "--sendfile-min", "off"]);
    // 1 KiB segments and a 16 KiB window keep each server socket's send buffer to tens
    // of KiB (with loopback's 64 KiB segments one sendmsg takes the whole answer): each
    // answer goes out in several sends, each resuming inside the body where the last
    // one stopped.
    let request = request(Method::Get, "/", "HTTP/1.1", &["Connection: close"]);
    let streams: Vec<TcpStream> = (0..CONNECTIONS)
        .map(|_| {
            let stream = connect_with(server.addr(), 16 * 1024, Some(1024));
            (&stream).write_all(request.as_bytes()).expect("a request");
            stream
        })
        .collect();
    // Every request is in before any answer is read; then all read at once.
    let start = Arc::new(Barrier::new(CONNECTIONS));
    let readers: Vec<_> = streams
        .into_iter()
        .enumerate()
        .map(|(i, stream)| {
            let (body, start) = (Arc::clone(&body), Arc::clone(&start));
            thread::spawn(move || {
                start.wait();
                // Odd sizes, a different one each: the reads end at different offsets.
                read_whole_answer_in_pieces(stream, &body, 4093 + 2 * i, &format!("connection {i}"));
            })
        })
        .collect();
    let failed: Vec<usize> =
        readers.into_iter().enumerate().filter_map(|(i, reader)| reader.join().err().map(|_| i)).collect();
    assert!(failed.is_empty(), "connections {failed:?} did not get the body (their panics are above)");
}

#[test]
fn a_hundred_pipelined_answers_one_byte_over_the_copy_limit_arrive_whole_and_in_order() {
    const ANSWERS: usize = 100;
    // One byte over COPY_MAX: each answer is its head, copied, and a reference to the
    // body; 100 answers are 200 pieces, more than one sendmsg's 64.
    let body = pattern(12, COPY_MAX + 1);
    let file = TempFile::with_contents(&body);
    let (server, _) = one_worker(&["--body-file", file.path(), "--sendfile-min", "off"]);
    // A small window and small segments (a small send buffer on the server's side):
    // the 115 KB of answers fill the socket, and the sends stop part-way, mostly
    // inside a body (1,025 of each answer's 1,146 bytes).
    let stream = connect_with(server.addr(), 4096, Some(1024));
    // The last asks to close: its answer, the only one that says so, must come last.
    let get = request(Method::Get, "/", "HTTP/1.1", &[]);
    let last = request(Method::Get, "/", "HTTP/1.1", &["Connection: close"]);
    let requests = get.repeat(ANSWERS - 1) + &last;
    (&stream).write_all(requests.as_bytes()).expect("the pipelined requests");
    // Slow at first: nothing is read until the server's side holds bytes the client
    // has not taken and the client's buffer is full.
    let (ours, theirs) = (stream.local_addr().unwrap(), stream.peer_addr().unwrap());
    let full = wait_until(WAIT, || {
        let server_side = tcp_queues(theirs, ours).is_some_and(|(unsent, _)| unsent > 0);
        server_side && tcp_queues(ours, theirs).is_some_and(|(_, unread)| unread > 0)
    });
    assert!(full, "the answers did not fill the socket within {WAIT:?}");
    let mut client = Client::new(stream);
    for i in 0..ANSWERS {
        let answer = client.read_response(Method::Get);
        let date = date_of(&answer);
        let close = if i == ANSWERS - 1 { "Connection: close\r\n" } else { "" };
        let head = format!(
            "{OK}\r\nServer: percore\r\nDate: {date}\r\nContent-Type: text/plain\r\nContent-Length: {}\r\n{close}\r\n",
            body.len()
        );
        assert_eq!(String::from_utf8_lossy(&answer.head), head, "answer {i}'s head");
        assert_same(&answer.body, &body, &format!("answer {i}'s body"));
    }
    client.expect_eof();
}

/// Reads the rest of an answer whose first `head` bytes were read: the rest of its
/// head (returned whole), then `body`, byte for byte.
fn read_answer_of(reader: &mut BufReader<TcpStream>, mut head: Vec<u8>, body: &[u8], what: &str) -> String {
    while !head.ends_with(b"\r\n\r\n") {
        let mut byte = [0u8];
        reader.read_exact(&mut byte).unwrap_or_else(|e| panic!("{what}: its head: {e}"));
        head.push(byte[0]);
    }
    let head = String::from_utf8_lossy(&head).into_owned();
    assert!(head.starts_with(&format!("{OK}\r\n")), "{what}: {head:?}");
    let mut got = vec![0u8; body.len()];
    reader.read_exact(&mut got).unwrap_or_else(|e| panic!("{what}: its body: {e}"));
    assert_same(&got, body, what);
    head
}

#[test]
fn a_graceful_stop_lets_a_client_that_goes_on_pipelining_read_its_last_answer_whole() {
    // From memory, an answer the sockets take only as the client reads it (a 1 MiB
    // one fits whole in a loopback socket's send buffer, and the connection would be
    // idle at the stop). No grace: a connection is closed the moment it is idle, so
    // this holds only if the worker reads B before A's output is done.
    let body = pattern(27, beyond_socket_buffers(0));
    let file = TempFile::with_contents(&body);
    let flags = [
        "--body-file",
        file.path(),
        "--sendfile-min",
        "off",
        "--shutdown-timeout",
        "30",
        "--drain-grace",
        "0",
    ];
    let (server, _) = one_worker(&flags);
    let stream = connect_with(server.addr(), 16 * 1024, None);
    let mut reader = BufReader::with_capacity(4096, stream.try_clone().expect("a handle"));
    // A, answered before the stop: the client reads its first bytes and no more, so
    // the loop holds its output and stops reading the connection.
    (&stream).write_all(GET).expect("request A");
    assert!(reader.fill_buf().is_ok_and(|bytes| !bytes.is_empty()), "A's first bytes");
    signal(server.pid(), "TERM");
    // The stop under way in the worker: it served its queue and closed its
    // listener, so a new connection is refused.
    let stopping = wait_until(WAIT, || TcpStream::connect(server.addr()).is_err());
    assert!(stopping, "still accepting after SIGTERM:\n{}", server.stderr());
    // B, sent during the stop: read once A's output drains, and answered with
    // `Connection: close`, a close the client did not ask for.
    (&stream).write_all(GET).expect("request B");
    let a = read_answer_of(&mut reader, Vec::new(), &body, "answer A");
    assert!(!a.contains("Connection: close"), "{a:?}");
    let mut b_status = Vec::new();
    reader.read_until(b'\n', &mut b_status).expect("B's status line");
    // C: the client pipelines on, as it may until it reads B's head. Unread when
    // the worker closes, it must not reset the connection under B's body.
    (&stream).write_all(GET).expect("request C");
    let b = read_answer_of(&mut reader, b_status, &body, "answer B");
    assert!(b.contains("\r\nConnection: close\r\n"), "{b:?}");
    read_to_eof(&mut reader);
}
