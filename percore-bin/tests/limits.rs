//! Connection limits and timeouts of `percore serve`: slow and silent clients,
//! clients that never read, resets, running out of descriptors, and many
//! connections at once. Worker state is read from /proc, so most tests run one
//! worker (`--workers 1`) and find its pid on the server's stderr.

#[path = "../../tests/util/mod.rs"]
mod util;

use std::io::{self, BufReader, ErrorKind, Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::thread::{self, JoinHandle};
use std::time::{Duration, Instant};

use util::{
    connect, cpu_ticks, is_running, raise_fd_limit, read_status, tcp_queues, vm_kib, wait_until,
    worker_lines, Client, Method, Server, TempFile, HELLO, OK, WAIT,
};

const GET: &[u8] = b"GET / HTTP/1.1\r\nHost: a\r\n\r\n";
const GET_CLOSE: &[u8] = b"GET / HTTP/1.1\r\nHost: a\r\nConnection: close\r\n\r\n";

/// `percore serve --workers 1` plus `extra` flags, and the pid of its worker.
fn one_worker(extra: &[&str]) -> (Server, u32) {
    let mut flags = vec!["--workers", "1"];
    flags.extend(extra);
    let server = Server::percore(&flags);
    let worker = worker_pid(&server);
    (server, worker)
}

fn worker_pid(server: &Server) -> u32 {
    let stderr = server.wait_for_stderr(WAIT, "worker line", |s| !worker_lines(s).is_empty());
    worker_lines(&stderr)[0].pid
}

fn fd_count(pid: u32) -> usize {
    std::fs::read_dir(format!("/proc/{pid}/fd"))
        .unwrap_or_else(|e| panic!("reading /proc/{pid}/fd: {e}"))
        .count()
}

/// The worker's descriptor count with no client connection: after one served
/// request (so its loop is surely running) on a connection since closed, once
/// the count stops changing.
fn idle_fd_count(server: &Server, worker: u32) -> usize {
    assert_eq!(try_get(server.addr()).expect("a first request"), OK);
    let mut last = fd_count(worker);
    let mut settled = 0;
    let stable = wait_until(WAIT, || {
        thread::sleep(Duration::from_millis(100));
        let now = fd_count(worker);
        settled = if now == last { settled + 1 } else { 0 };
        last = now;
        settled >= 3
    });
    assert!(stable, "the worker's descriptor count never settled (last {last})");
    last
}

/// Waits (bounded) for the worker's descriptor count to be back at `baseline`:
/// every connection it had is closed, no slot leaked.
fn assert_fds_back(worker: u32, baseline: usize, what: &str) {
    assert_fds_back_within(worker, baseline, WAIT, what);
}

/// Like [`assert_fds_back`], waiting at most `within`.
fn assert_fds_back_within(worker: u32, baseline: usize, within: Duration, what: &str) {
    let back = wait_until(within, || fd_count(worker) <= baseline);
    assert!(
        back,
        "{what}: worker {worker} still has {} descriptors {within:?} on, baseline {baseline}",
        fd_count(worker)
    );
}

/// Sends `request` on `stream` and returns the status line of the answer.
fn exchange(stream: &TcpStream, request: &[u8]) -> io::Result<String> {
    let mut stream_ref = stream;
    stream_ref.write_all(request)?;
    // A small buffer, dropped after: nothing follows the one response.
    read_status(&mut BufReader::with_capacity(512, stream))
}

/// One GET on a new connection that asks to be closed after it; an error
/// rather than a panic, for callers that retry or tolerate failures.
fn try_get(addr: SocketAddr) -> io::Result<String> {
    let stream = TcpStream::connect_timeout(&addr, WAIT)?;
    stream.set_read_timeout(Some(WAIT))?;
    stream.set_write_timeout(Some(WAIT))?;
    exchange(&stream, GET_CLOSE)
}

/// A connection that got a 200 on it, so the worker has surely accepted it.
fn served_connection(addr: SocketAddr) -> TcpStream {
    let stream = connect(addr);
    let status = exchange(&stream, GET).expect("a first request");
    assert_eq!(status, OK);
    stream
}

/// Writes `count` pipelined GETs on `stream` from a thread, in batches, until
/// done or a write fails (which is expected when the server drops us).
/// `written` counts the requests in completed batches; the thread returns it.
fn flood(stream: TcpStream, count: usize, written: Arc<AtomicUsize>) -> JoinHandle<usize> {
    const BATCH: usize = 1000;
    thread::spawn(move || {
        let batch = GET.repeat(BATCH);
        let mut stream = stream;
        while written.load(Ordering::Relaxed) < count {
            let n = BATCH.min(count - written.load(Ordering::Relaxed));
            if stream.write_all(&batch[..n * GET.len()]).is_err() {
                break;
            }
            written.fetch_add(n, Ordering::Relaxed);
        }
        written.load(Ordering::Relaxed)
    })
}

/// How a connection ended, as the client saw it.
#[derive(Debug, PartialEq, Eq)]
enum Closed {
    Eof,
    Reset,
}

fn is_reset(e: &io::Error) -> bool {
    matches!(e.kind(), ErrorKind::ConnectionReset | ErrorKind::ConnectionAborted | ErrorKind::BrokenPipe)
}

/// Bound on the wait for a close by a timeout of 1 s. The loop's clock counts whole
/// seconds, so such a close comes 1 to 2 s after the timer starts; 6 s leaves room for
/// a loaded machine, and the defaults (10 s and more) cannot meet it.
const ONE_SECOND_TIMEOUT_CLOSES_WITHIN: Duration = Duration::from_secs(6);

/// How long a connection under a timeout of 1 s is surely still open: the timer runs
/// at least a second, so a close before this came from something else.
const ONE_SECOND_TIMEOUT_OPEN_FOR: Duration = Duration::from_millis(300);

/// Waits (bounded by `within`, counted from the call) for the server to close
/// `stream` without sending a byte, writing one byte of `trickle` (if any is left)
/// every 300 ms meanwhile; a close before `open_for` has passed fails.
fn await_close(
    mut stream: &TcpStream,
    mut trickle: impl Iterator<Item = u8>,
    open_for: Duration,
    within: Duration,
) -> Closed {
    let start = Instant::now();
    stream.set_read_timeout(Some(Duration::from_millis(300))).unwrap();
    let deadline = start + within;
    let mut buf = [0u8; 1024];
    let closed = loop {
        match stream.read(&mut buf) {
            Ok(0) => break Closed::Eof,
            Ok(n) => {
                panic!("expected a close without an answer, got {:?}", String::from_utf8_lossy(&buf[..n]))
            }
            Err(e) if matches!(e.kind(), ErrorKind::WouldBlock | ErrorKind::TimedOut) => {}
            Err(e) if is_reset(&e) => break Closed::Reset,
            Err(e) => panic!("reading: {e}"),
        }
        assert!(Instant::now() < deadline, "the connection was not closed within {within:?}");
        if let Some(byte) = trickle.next() {
            match stream.write_all(&[byte]) {
                Ok(()) => {}
                Err(e) if is_reset(&e) => break Closed::Reset,
                Err(e) => panic!("writing: {e}"),
            }
        }
    };
    let open = start.elapsed();
    assert!(open >= open_for, "closed ({closed:?}) after {open:?}, before the timeout could have fired");
    closed
}

#[test]
fn header_timeout_closes_a_trickling_client() {
    let server = Server::percore(&["--header-timeout", "1"]);
    let stream = connect(server.addr());
    (&stream).write_all(b"GET / HTTP/1.1\r\n").unwrap();
    // A header line that never ends: the head is never complete.
    let trickle = b"X-Slow: ".iter().copied().chain(std::iter::repeat(b'a'));
    await_close(&stream, trickle, ONE_SECOND_TIMEOUT_OPEN_FOR, ONE_SECOND_TIMEOUT_CLOSES_WITHIN);
}

#[test]
fn header_timeout_closes_a_client_gone_silent_mid_head() {
    let server = Server::percore(&["--header-timeout", "1"]);
    let stream = connect(server.addr());
    (&stream).write_all(b"GET / HTTP/1.1\r\nHost: a\r\n").unwrap();
    await_close(&stream, std::iter::empty(), ONE_SECOND_TIMEOUT_OPEN_FOR, ONE_SECOND_TIMEOUT_CLOSES_WITHIN);
}

#[test]
fn keepalive_timeout_closes_an_idle_connection() {
    let server = Server::percore(&["--keepalive-timeout", "1"]);
    let stream = served_connection(server.addr());
    // The default is 60 s, well past the bound.
    assert_eq!(await_close(&stream, std::iter::empty(), Duration::ZERO, WAIT), Closed::Eof);
}

#[test]
fn send_timeout_drops_a_client_that_never_reads() {
    let (server, worker) = one_worker(&["--send-timeout", "1"]);
    let baseline = idle_fd_count(&server, worker);
    let stream = served_connection(server.addr());
    let writer = flood(stream.try_clone().unwrap(), 200_000, Arc::default());
    // `stream` stays open (and unread) until the server has dropped it, so only
    // the send timeout can have closed the worker's end.
    assert_fds_back(worker, baseline, "after the send timeout");
    drop(stream);
    // Bounded: the write timeout (util::connect) ends a write the server never takes.
    writer.join().expect("the writer thread");
}

#[test]
fn max_conns_queues_connections_over_the_limit() {
    const LIMIT: usize = 100;
    const QUEUED: usize = 200;
    let (server, _) = one_worker(&["--max-conns", "100"]);
    let addr = server.addr();
    let first: Vec<TcpStream> = (0..LIMIT).map(|_| served_connection(addr)).collect();
    // Each connected (the kernel completed it and holds it in the listener's queue)
    // and its request sent before we look; they ask to close after their answer, so
    // each frees its slot for the next.
    let queued: Vec<TcpStream> = (0..QUEUED)
        .map(|i| {
            let stream = connect(addr);
            (&stream).write_all(GET_CLOSE).unwrap_or_else(|e| panic!("queued connection {i}: sending: {e}"));
            stream
        })
        .collect();
    // A request answered on each of the first connections: the worker has turned its
    // loop since the queued ones came, and would have taken them had it room.
    for (i, stream) in first.iter().enumerate() {
        assert_eq!(exchange(stream, GET).unwrap_or_else(|e| panic!("connection {i}: {e}")), OK);
    }
    // At the limit the worker accepts nothing more, so nothing queued is answered yet.
    for (i, stream) in queued.iter().enumerate() {
        stream.set_nonblocking(true).unwrap();
        match stream.peek(&mut [0u8; 1]) {
            Err(e) if e.kind() == ErrorKind::WouldBlock => {}
            other => panic!("queued connection {i} got {other:?} while {LIMIT} connections were open"),
        }
        stream.set_nonblocking(false).unwrap();
    }
    drop(first);
    let deadline = Instant::now() + WAIT;
    for (i, stream) in queued.iter().enumerate() {
        // A zero timeout is refused by set_read_timeout; past the deadline, just look.
        let left = deadline.saturating_duration_since(Instant::now()).max(Duration::from_millis(1));
        stream.set_read_timeout(Some(left)).unwrap();
        let status = read_status(&mut BufReader::with_capacity(512, stream));
        assert_eq!(status.unwrap_or_else(|e| panic!("queued connection {i}: {e}")), OK);
    }
}

#[test]
fn an_idle_worker_sleeps() {
    let (server, worker) = one_worker(&[]);
    // Served once (its loop is surely running), then an idle keep-alive connection.
    let mut client = server.client();
    assert_eq!(client.get("/").status_line, OK);
    let before = cpu_ticks(worker);
    thread::sleep(Duration::from_secs(2));
    // 200 ticks of wall time; a loop that polled instead of sleeping would take a
    // good share of them even on a loaded machine, an idle one none.
    let used = cpu_ticks(worker) - before;
    assert!(used < 20, "an idle worker used {used} ticks of CPU in 2 s");
    assert_eq!(client.get("/").status_line, OK, "and it still serves");
}

/// Sets the open-file limit (soft and hard) of the running process `pid` with
/// util-linux's `prlimit`, so the test needs no unsafe code of its own.
fn set_fd_limit(pid: u32, limit: u64) {
    let status = std::process::Command::new("prlimit")
        .args(["--pid", &pid.to_string(), &format!("--nofile={limit}:{limit}")])
        .status()
        .expect("running prlimit");
    assert!(status.success(), "prlimit --pid {pid} failed: {status}");
}

/// What a client saw on a connection it sent a GET on.
#[derive(Debug, PartialEq, Eq)]
enum Outcome {
    /// A 200.
    Answered,
    /// Closed (end of stream or reset) before a byte of an answer.
    Refused,
    /// Neither by the deadline.
    Undecided,
}

/// Reads the answer to the GET sent on `stream`, waiting at most until `deadline`.
fn outcome(stream: &TcpStream, deadline: Instant) -> Outcome {
    // A zero timeout is refused by set_read_timeout; past the deadline, just look.
    let left = deadline.saturating_duration_since(Instant::now()).max(Duration::from_millis(1));
    stream.set_read_timeout(Some(left)).unwrap();
    match read_status(&mut BufReader::with_capacity(512, stream)) {
        Ok(status) if status == OK => Outcome::Answered,
        Ok(status) => panic!("unexpected answer {status:?}"),
        Err(e) if e.kind() == ErrorKind::UnexpectedEof || is_reset(&e) => Outcome::Refused,
        Err(e) if matches!(e.kind(), ErrorKind::WouldBlock | ErrorKind::TimedOut) => Outcome::Undecided,
        Err(e) => panic!("reading an answer: {e}"),
    }
}

#[test]
fn out_of_descriptors_a_worker_refuses_the_queued_connection_and_serves_on() {
    const FD_LIMIT: u64 = 64;
    const CONNECTIONS: usize = 100;
    // --max-conns far above what the descriptors allow, so that accept itself fails
    // with EMFILE rather than the worker stopping at its connection limit.
    let (server, worker) = one_worker(&["--max-conns", "1000"]);
    let baseline = idle_fd_count(&server, worker);
    // Lowered on the running worker, after the master fitted --max-conns to the limit
    // it had at start (the hard limit): the worker runs out of descriptors first.
    set_fd_limit(worker, FD_LIMIT);
    let streams: Vec<TcpStream> = (0..CONNECTIONS)
        .map(|i| {
            let stream = connect(server.addr());
            // A refused connection may be reset before or while we write: that is
            // what we are looking for, and reading below tells it.
            if let Err(e) = (&stream).write_all(GET) {
                assert!(is_reset(&e), "connection {i}: sending: {e}");
            }
            stream
        })
        .collect();
    let deadline = Instant::now() + WAIT;
    let outcomes: Vec<Outcome> = streams.iter().map(|stream| outcome(stream, deadline)).collect();
    let count = |want: Outcome| outcomes.iter().filter(|&o| *o == want).count();
    let (answered, refused) = (count(Outcome::Answered), count(Outcome::Refused));
    eprintln!("{answered} answered, {refused} refused, baseline {baseline} descriptors");
    // The reserve descriptor closes each connection the worker cannot hold; without
    // it they would wait in the queue, unanswered, until a descriptor frees up.
    assert_eq!(count(Outcome::Undecided), 0, "connections neither answered nor closed: {outcomes:?}");
    assert!(refused > 0, "no connection was refused: {outcomes:?}");
    assert!(answered > 0 && answered as u64 <= FD_LIMIT, "{answered} answered: {outcomes:?}");
    // The worker still serves the connections it holds, and new ones once they close.
    for (i, stream) in streams.iter().enumerate().filter(|(i, _)| outcomes[*i] == Outcome::Answered) {
        assert_eq!(exchange(stream, GET).unwrap_or_else(|e| panic!("connection {i}: {e}")), OK);
    }
    drop(streams);
    let answered = wait_until(WAIT, || matches!(try_get(server.addr()).as_deref(), Ok(OK)));
    assert!(answered, "no 200 on a fresh connection within {WAIT:?}");
    assert!(is_running(worker), "the worker died");
    assert_eq!(worker_lines(&server.stderr()).len(), 1, "the worker was restarted:\n{}", server.stderr());
}

#[test]
fn peer_reset_mid_response_frees_the_connection() {
    let (server, worker) = one_worker(&[]);
    let baseline = idle_fd_count(&server, worker);
    for _ in 0..3 {
        let stream = served_connection(server.addr());
        // As much of 10,000 pipelined GETs as the socket takes without blocking.
        stream.set_nonblocking(true).unwrap();
        let requests = GET.repeat(10_000);
        let mut sent = 0;
        while let Ok(n) = (&stream).write(&requests[sent..]) {
            sent += n;
            if sent == requests.len() {
                break;
            }
        }
        // Closing with answers unread makes the kernel send a reset, not a FIN:
        // wait until answers are there.
        stream.set_nonblocking(false).unwrap();
        stream.peek(&mut [0u8; 1]).expect("answers to the pipelined requests");
        drop(stream);
    }
    assert_eq!(try_get(server.addr()).expect("a request after the resets"), OK);
    assert_fds_back(worker, baseline, "after the resets");
}

#[test]
fn ten_thousand_idle_connections_leak_no_slot() {
    const CONNECTIONS: usize = 10_000;
    const THREADS: usize = 4;
    // Ours and the worker's (inherited), with room for the other tests.
    raise_fd_limit(CONNECTIONS as u64 + 1024);
    // No idle timeout: however slowly they open, all must still be open at the end.
    let (server, worker) = one_worker(&["--keepalive-timeout", "0"]);
    let baseline = idle_fd_count(&server, worker);
    let addr = server.addr();
    let openers: Vec<JoinHandle<Vec<TcpStream>>> = (0..THREADS)
        .map(|_| thread::spawn(move || (0..CONNECTIONS / THREADS).map(|_| served_connection(addr)).collect()))
        .collect();
    let open: Vec<TcpStream> =
        openers.into_iter().flat_map(|t| t.join().expect("an opener thread")).collect();
    assert_eq!(try_get(addr).expect("a request with 10,000 connections open"), OK);
    let open_fds = fd_count(worker);
    assert!(
        open_fds >= baseline + CONNECTIONS,
        "{open_fds} descriptors with {CONNECTIONS} open, baseline {baseline}"
    );
    eprintln!("worker VmRSS with {CONNECTIONS} idle connections: {} KiB", vm_kib(worker, "VmRSS"));
    drop(open);
    assert_fds_back(worker, baseline, "after closing 10,000 connections");
}

/// Waits (bounded) until the worker stopped reading the requests `writer` sends on
/// `stream`, which we do not read: either it read every request (none left in our
/// socket's send queue nor in its receive queue), or the bytes it left unread stayed
/// the same for 500 ms. Returns how many it left unread. The socket buffers may take
/// all the requests, so the writer finishing proves nothing by itself.
fn wait_until_reading_stops<T>(stream: &TcpStream, writer: &JoinHandle<T>) -> u64 {
    let (ours, theirs) = (stream.local_addr().unwrap(), stream.peer_addr().unwrap());
    let unread = || Some(tcp_queues(ours, theirs)?.0 + tcp_queues(theirs, ours)?.1);
    let mut last = (None, Instant::now());
    let stopped = wait_until(WAIT, || {
        let now = unread();
        if now != last.0 {
            last = (now, Instant::now());
        }
        let all_read = writer.is_finished() && now == Some(0);
        all_read || (now > Some(0) && last.1.elapsed() > Duration::from_millis(500))
    });
    assert!(stopped, "the worker's unread input kept changing for {WAIT:?}");
    last.0.unwrap_or(0)
}

#[test]
fn slow_reader_cannot_grow_the_worker() {
    const REQUESTS: usize = 100_000;
    const RSS_BOUND_KIB: u64 = 64 * 1024;
    // A body of 1,000 bytes is copied with its head (a larger one would be referenced,
    // held once however often it is queued): 100,000 answers are then about 115 MB,
    // which a worker that went on reading requests while its answers piled up would
    // hold, far over the bound.
    let body = "x".repeat(1000);
    let (server, worker) = one_worker(&["--body", &body]);
    let stream = connect(server.addr());
    // Long enough for the pause below: the writer blocks until we read.
    stream.set_write_timeout(Some(WAIT)).unwrap();
    let written = Arc::new(AtomicUsize::new(0));
    let writer = flood(stream.try_clone().unwrap(), REQUESTS, Arc::clone(&written));
    let unread = wait_until_reading_stops(&stream, &writer);
    // The worker's peak, however briefly it was there.
    let peak = vm_kib(worker, "VmHWM");
    eprintln!(
        "worker VmHWM while not reading: {peak} KiB; {} requests written, {unread} bytes of them unread",
        written.load(Ordering::Relaxed),
    );
    assert!(peak < RSS_BOUND_KIB, "worker VmHWM reached {peak} KiB (bound {RSS_BOUND_KIB} KiB)");
    // The writer goes on as we read; every request gets its 200, in order.
    let mut reader = BufReader::with_capacity(64 * 1024, &stream);
    for i in 0..REQUESTS {
        let status = read_status(&mut reader).unwrap_or_else(|e| panic!("response {i}: {e}"));
        assert_eq!(status, OK, "response {i}");
    }
    assert_eq!(writer.join().expect("the writer thread"), REQUESTS, "requests written");
}

#[test]
fn send_timeout_drops_a_closing_connection_whose_peer_never_reads() {
    // The answer closes the connection (HTTP/1.0) but is far larger than the socket
    // buffers, so the connection waits, closing, for a peer that never reads.
    let body = TempFile::with_contents(&vec![b'x'; 8 * 1024 * 1024]);
    let (server, worker) = one_worker(&["--send-timeout", "1", "--body-file", body.path()]);
    let baseline = idle_fd_count(&server, worker);
    let stream = connect(server.addr());
    (&stream).write_all(b"GET / HTTP/1.0\r\n\r\n").expect("sending");
    assert_fds_back(worker, baseline, "after the send timeout of a closing connection");
    drop(stream);
}

#[test]
fn pipelined_requests_for_a_copied_body_cannot_grow_the_worker() {
    const REQUESTS: usize = 100_000;
    const RSS_BOUND_KIB: u64 = 64 * 1024;
    // A body just under the 1 KiB copy limit, so each answer holds its own copy (a
    // larger one would be shared, held once however often it is queued): 100,000
    // pipelined answers are about 117 MB, which a worker that went on reading while
    // its output was over budget would hold, far over the bound.
    let body = TempFile::with_contents(&[b'x'; 1023]);
    let (server, worker) = one_worker(&["--body-file", body.path()]);
    let stream = connect(server.addr());
    stream.set_write_timeout(Some(WAIT)).unwrap();
    // All of them in one write (from a thread: it blocks until we read, if the
    // socket buffers cannot take them all).
    let writer = {
        let mut stream = stream.try_clone().unwrap();
        thread::spawn(move || stream.write_all(&GET.repeat(REQUESTS)))
    };
    let unread = wait_until_reading_stops(&stream, &writer);
    let peak = vm_kib(worker, "VmHWM");
    eprintln!(
        "worker VmHWM with {REQUESTS} pipelined requests unanswered: {peak} KiB; {unread} bytes unread"
    );
    assert!(peak < RSS_BOUND_KIB, "worker VmHWM reached {peak} KiB (bound {RSS_BOUND_KIB} KiB)");
    // Every request gets its 200 with the whole body, in order.
    let mut client = Client::new(stream.try_clone().unwrap());
    for i in 0..REQUESTS {
        let response = client.read_response(Method::Get);
        assert_eq!((response.status_line.as_str(), response.body.len()), (OK, 1023), "response {i}");
    }
    writer.join().expect("the writer thread").expect("sending the requests");
}

#[test]
fn half_close_with_bytes_after_a_closing_request_gets_the_whole_answer() {
    // More than the loop's 64 KiB read buffer after the request that closes: when
    // the server has answered, some of them are still unread in its socket, and
    // closing then would make the kernel reset the connection, destroying the answer
    // before we read it. Only lingering (reading them to our end of stream) saves it.
    // They are requests, none of which may be answered.
    let after = b"GET /never HTTP/1.0\r\n\r\n".repeat(8000); // 184,000 bytes
    let (server, _) = one_worker(&[]);
    for _ in 0..20 {
        let mut stream = connect(server.addr());
        let bytes = [&b"GET / HTTP/1.0\r\n\r\n"[..], &after].concat();
        stream.write_all(&bytes).expect("sending, then the bytes after the closing request");
        stream.shutdown(std::net::Shutdown::Write).expect("half-closing");
        let mut all = Vec::new();
        stream.read_to_end(&mut all).expect("the answer, then a clean end of stream, not a reset");
        let text = String::from_utf8_lossy(&all);
        assert!(text.starts_with(OK) && text.as_bytes().ends_with(HELLO), "got {text:?}");
        assert_eq!(text.matches("HTTP/1.1").count(), 1, "only the first request is answered");
    }
}

/// Sends `first`, waits until the server's answer has arrived (it has closed or
/// begun to linger by then), sends `then` and half-closes, and reads to the end: a
/// server that closed instead of lingering makes the kernel reset the connection on
/// the bytes that come after, and the answer is lost.
fn answer_with_bytes_arriving_after_it(server: &Server, first: &[u8], then: &[u8]) -> String {
    let mut stream = connect(server.addr());
    stream.write_all(first).expect("sending the request");
    let arrived = wait_until(WAIT, || stream.peek(&mut [0; 1]).is_ok_and(|n| n > 0));
    assert!(arrived, "no answer within {WAIT:?}");
    // Written in pieces: after a reset, a piece fails instead of all being taken.
    for piece in then.chunks(4096) {
        stream.write_all(piece).expect("sending after the answer: the server must still be reading");
    }
    stream.shutdown(std::net::Shutdown::Write).expect("half-closing");
    let mut all = Vec::new();
    stream.read_to_end(&mut all).expect("the answer, then a clean end of stream, not a reset");
    String::from_utf8_lossy(&all).into_owned()
}

#[test]
fn bytes_after_a_closing_request_in_one_short_read_keep_the_connection_lingering() {
    // The closing request and some bytes after it arrive in one read that does not
    // fill the buffer: the unconsumed bytes alone say the peer may go on sending.
    let (server, _) = one_worker(&[]);
    let first = [&b"GET / HTTP/1.0\r\n\r\n"[..], &[b'x'; 1000]].concat();
    let text = answer_with_bytes_arriving_after_it(&server, &first, &[b'y'; 200_000]);
    assert!(text.starts_with(OK) && text.as_bytes().ends_with(HELLO), "got {text:?}");
}

#[test]
fn a_body_refused_413_may_go_on_arriving_while_the_server_lingers() {
    // The head alone arrives first: nothing unconsumed, the read short; only the
    // protocol's word that its body is still due makes the loop linger.
    let (server, _) = one_worker(&["--max-body", "10"]);
    let head = b"POST / HTTP/1.1\r\nHost: a\r\nContent-Length: 200000\r\n\r\n";
    let text = answer_with_bytes_arriving_after_it(&server, head, &[b'z'; 200_000]);
    assert!(text.starts_with("HTTP/1.1 413 "), "got {text:?}");
}

/// On one server, three connections each under one of the loop's timeouts: one idle
/// after an answer (keep-alive), one in the middle of a request head (header), one
/// that does not read an 8 MiB answer (send).
struct UnderEachTimeout {
    idle: Client,
    mid_head: Client,
    not_reading: Client,
}

impl UnderEachTimeout {
    fn open(server: &Server) -> UnderEachTimeout {
        let mut idle = server.client();
        idle.send_request(Method::Head, "/", "HTTP/1.1", &[]);
        assert_eq!(idle.read_response(Method::Head).status_line, OK);
        let mut mid_head = server.client();
        mid_head.send(b"HEAD / HTTP/1.1\r\nHost: a\r\n");
        let mut not_reading = server.client();
        not_reading.send(GET);
        UnderEachTimeout { idle, mid_head, not_reading }
    }

    /// Each connection is still served: the idle one answers, the head completed is
    /// answered, the large answer arrives whole.
    fn assert_still_served(mut self, body_len: usize) {
        self.idle.send_request(Method::Head, "/", "HTTP/1.1", &[]);
        assert_eq!(self.idle.read_response(Method::Head).status_line, OK, "the idle connection");
        self.mid_head.send(b"\r\n");
        assert_eq!(self.mid_head.read_response(Method::Head).status_line, OK, "the head completed");
        let large = self.not_reading.read_response(Method::Get);
        assert_eq!((large.status_line.as_str(), large.body.len()), (OK, body_len), "the large answer");
    }
}

#[test]
fn a_timeout_of_zero_turns_it_off() {
    const BODY: usize = 8 * 1024 * 1024;
    let body = TempFile::with_contents(&vec![b'x'; BODY]);
    let off = ["--keepalive-timeout", "0", "--header-timeout", "0", "--send-timeout", "0"];
    let (server, _) = one_worker(&[&off[..], &["--body-file", body.path()]].concat());
    // The same three connections on a server whose timeouts are all 1 s: once it
    // has closed them all, at least a second has passed on a clock of the same kind.
    let one = ["--keepalive-timeout", "1", "--header-timeout", "1", "--send-timeout", "1"];
    let (control, control_worker) = one_worker(&[&one[..], &["--body-file", body.path()]].concat());
    let baseline = idle_fd_count(&control, control_worker);
    let zero = UnderEachTimeout::open(&server);
    let controls = UnderEachTimeout::open(&control);
    // Within a bound the control's defaults (10 s and more) cannot meet: its flags
    // were heeded, and each of its three timeouts has run.
    assert_fds_back_within(
        control_worker,
        baseline,
        ONE_SECOND_TIMEOUT_CLOSES_WITHIN,
        "the control server's timeouts of 1 s",
    );
    drop(controls);
    zero.assert_still_served(BODY);
}
