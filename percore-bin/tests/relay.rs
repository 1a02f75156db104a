//! The `relay` example, run against a real `percore serve` backend (or a listener in
//! the test that misbehaves): large bodies both ways arrive whole, a peer that does
//! not read cannot grow the relay, half-closes pass through, a backend that refuses
//! or never accepts closes its client, the idle timeout and a graceful stop apply to
//! the pairs, and wrk sees no errors through it. The relay runs one worker, found
//! on its stderr, so that its memory can be read from /proc.

#[path = "../../tests/util/mod.rs"]
mod util;

use std::io::{ErrorKind, Read, Write};
use std::net::{Shutdown, SocketAddr, TcpListener, TcpStream};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{mpsc, Arc};
use std::thread;
use std::time::{Duration, Instant};

use socket2::{Domain, Socket, Type};
use util::{
    connect, run_wrk, signal, tcp_queues, tool_available, vm_kib, wait_until, worker_lines, Server, TempFile,
    IO_TIMEOUT, OK, WAIT,
};

/// The size of the large bodies: far more than every socket buffer and the relay's
/// budget on the way.
const BODY: usize = 50 * 1024 * 1024;

/// The relay's ways of moving bytes: through its own memory, and through a pipe.
const CROSSINGS: [&str; 2] = ["copy", "splice"];

/// The receive buffer of a client that reads slowly or not at all, so that the bytes
/// it leaves unread pile up in the relay rather than in its own kernel buffer (and
/// 100 of them hold little kernel memory).
const SMALL_RCVBUF: usize = 64 * 1024;

/// `len` bytes, each 4-byte word the little-endian index of the word: no two
/// aligned words alike, so a byte lost, repeated or moved shows.
fn pattern(len: usize) -> Vec<u8> {
    (0..len.div_ceil(4)).flat_map(|word| (word as u32).to_le_bytes()).take(len).collect()
}

/// Asserts `got` equals `want`, naming the first byte that differs rather than
/// printing 50 MiB.
fn assert_same_bytes(got: &[u8], want: &[u8], what: &str) {
    if let Some(at) = got.iter().zip(want).position(|(a, b)| a != b) {
        panic!("{what}: byte {at} differs (got {}, want {})", got[at], want[at]);
    }
    assert_eq!(got.len(), want.len(), "{what}: length");
}

/// `percore serve --workers 1` plus `extra`, the backend.
fn backend(extra: &[&str]) -> Server {
    Server::percore(&[&["--workers", "1"], extra].concat())
}

/// The relay example on one worker, to `backends`, plus `extra` flags, and its
/// worker's pid.
fn relay(backends: &[SocketAddr], extra: &[&str]) -> (Server, u32) {
    let backends: Vec<String> = backends.iter().map(ToString::to_string).collect();
    let mut flags = vec!["--workers", "1"];
    for addr in &backends {
        flags.extend(["--backend", addr.as_str()]);
    }
    flags.extend(extra);
    let server = Server::example("relay", &flags);
    let stderr = server.wait_for_stderr(WAIT, "worker line", |s| !worker_lines(s).is_empty());
    let worker = worker_lines(&stderr)[0].pid;
    (server, worker)
}

/// A connection to `addr` with a small receive buffer and the usual timeouts.
fn connect_small_rcvbuf(addr: SocketAddr) -> TcpStream {
    let socket = Socket::new(Domain::IPV4, Type::STREAM, None).expect("a socket");
    socket.set_recv_buffer_size(SMALL_RCVBUF).expect("setting SO_RCVBUF");
    socket.connect_timeout(&addr.into(), IO_TIMEOUT).unwrap_or_else(|e| panic!("connecting to {addr}: {e}"));
    let stream: TcpStream = socket.into();
    stream.set_read_timeout(Some(IO_TIMEOUT)).unwrap();
    stream.set_write_timeout(Some(IO_TIMEOUT)).unwrap();
    stream
}

/// Bytes arrived at `stream` that it has not read (its receive queue).
fn unread(stream: &TcpStream) -> u64 {
    let (ours, theirs) = (stream.local_addr().unwrap(), stream.peer_addr().unwrap());
    tcp_queues(ours, theirs).map_or(0, |(_, rx)| rx)
}

/// Waits (bounded) until the transfer has stalled: `progress` (None while not yet
/// started) and the worker's VmRSS have both stayed the same for a second. Returns
/// the largest VmRSS seen meanwhile, in KiB.
fn peak_rss_until_stalled(worker: u32, mut progress: impl FnMut() -> Option<u64>) -> u64 {
    const STILL_FOR: Duration = Duration::from_secs(1);
    // Before 100 transfers stall, every socket buffer on their way fills: hundreds of
    // MB through the kernel, which a loaded machine (CI beside other work) can take
    // longer than WAIT to move. A relay that grows does so meanwhile, and is seen.
    const STALL_WAIT: Duration = Duration::from_secs(90);
    // Within this much VmRSS counts as the same: a page or two may come and go.
    const SLACK_KIB: u64 = 256;
    let mut peak = 0;
    let mut since: Option<(u64, u64, Instant)> = None;
    let mut last = (None, 0);
    let stalled = wait_until(STALL_WAIT, || {
        thread::sleep(Duration::from_millis(100));
        let rss = vm_kib(worker, "VmRSS");
        peak = peak.max(rss);
        let now = progress();
        last = (now, rss);
        let Some(now) = now else { return false };
        match since {
            Some((was, rss_then, at)) if was == now && rss.abs_diff(rss_then) <= SLACK_KIB => {
                at.elapsed() >= STILL_FOR
            }
            _ => {
                since = Some((now, rss, Instant::now()));
                false
            }
        }
    });
    assert!(
        stalled,
        "the transfer did not stall within {STALL_WAIT:?}: last progress {:?}, VmRSS {} KiB",
        last.0, last.1
    );
    peak.max(vm_kib(worker, "VmRSS"))
}

/// The raw answer, without its Date line (which differs between two answers).
fn without_date(answer: &[u8]) -> Vec<u8> {
    let text = String::from_utf8_lossy(answer);
    text.split("\r\n").filter(|line| !line.starts_with("Date:")).collect::<Vec<_>>().join("\r\n").into_bytes()
}

/// Whether a read error is the peer resetting the connection.
fn is_reset(e: &std::io::Error) -> bool {
    matches!(e.kind(), ErrorKind::ConnectionReset | ErrorKind::ConnectionAborted | ErrorKind::BrokenPipe)
}

/// Asserts the relay closes `stream` (end of stream, or a reset if `reset_ok`)
/// within [`WAIT`], sending nothing first.
fn assert_closed_by_relay(mut stream: &TcpStream, reset_ok: bool) {
    stream.set_read_timeout(Some(WAIT)).unwrap();
    let mut buf = [0u8; 1024];
    match stream.read(&mut buf) {
        Ok(0) => {}
        Ok(n) => panic!("expected a close, got {n} bytes: {:?}", String::from_utf8_lossy(&buf[..n])),
        Err(e) if matches!(e.kind(), ErrorKind::WouldBlock | ErrorKind::TimedOut) => {
            panic!("the relay did not close the client within {WAIT:?}")
        }
        Err(e) if reset_ok && is_reset(&e) => {}
        Err(e) => panic!("expected an end of stream, got: {e}"),
    }
}

#[test]
fn a_large_body_arrives_whole_through_the_relay() {
    let want = pattern(BODY);
    let file = TempFile::with_contents(&want);
    let origin = backend(&["--body-file", file.path()]);
    for crossing in CROSSINGS {
        let (relay, _) = relay(&[origin.addr()], &["--splice", crossing]);
        let response = relay.client().get("/");
        assert_eq!(response.status_line, OK);
        assert_eq!(response.content_length(), BODY);
        assert_same_bytes(&response.body, &want, &format!("the body through the relay ({crossing})"));
    }
}

#[test]
fn clients_that_never_read_a_large_body_cannot_grow_the_relay() {
    const ONE_BOUND_KIB: u64 = 8 * 1024;
    const CLIENTS: usize = 100;
    const MANY_BOUND_KIB: u64 = 64 * 1024;
    let file = TempFile::with_contents(&pattern(BODY));
    let origin = backend(&["--body-file", file.path()]);
    for crossing in CROSSINGS {
        never_read(&origin, crossing, (ONE_BOUND_KIB, CLIENTS, MANY_BOUND_KIB));
    }
}

/// One client, then `clients`, that never read a large body, through a relay that
/// crosses as `crossing` says: the relay grows by less than the bounds.
fn never_read(origin: &Server, crossing: &str, (one_bound_kib, clients, many_bound_kib): (u64, usize, u64)) {
    let (relay, worker) = relay(&[origin.addr()], &["--splice", crossing]);
    let before = vm_kib(worker, "VmRSS");
    let get = b"GET / HTTP/1.1\r\nHost: a\r\n\r\n";

    let mut one = connect_small_rcvbuf(relay.addr());
    one.write_all(get).expect("sending the request");
    let peak = peak_rss_until_stalled(worker, || Some(unread(&one)).filter(|&n| n > 0));
    eprintln!(
        "{crossing}: relay worker VmRSS {before} KiB before, at most {peak} KiB with one client not reading"
    );
    assert!(
        peak < before + one_bound_kib,
        "{crossing}, one client not reading: the relay worker grew from {before} KiB to {peak} KiB"
    );
    drop(one);

    let many: Vec<TcpStream> = (0..clients)
        .map(|_| {
            let mut stream = connect_small_rcvbuf(relay.addr());
            stream.write_all(get).expect("sending the request");
            stream
        })
        .collect();
    // Every client has had some of its answer, and none of them is getting more.
    let peak = peak_rss_until_stalled(worker, || {
        let each: Vec<u64> = many.iter().map(unread).collect();
        Some(each.iter().sum()).filter(|_| each.iter().all(|&n| n > 0))
    });
    eprintln!("{crossing}: relay worker VmRSS {before} KiB before, at most {peak} KiB with {clients} clients not reading");
    assert!(
        peak < before + many_bound_kib,
        "{crossing}, {clients} clients not reading: the relay worker grew from {before} KiB to {peak} KiB"
    );
}

#[test]
fn a_backend_that_never_reads_an_upload_cannot_grow_the_relay() {
    const BOUND_KIB: u64 = 8 * 1024;
    // The backend: accepts, and keeps every connection open without reading it.
    let listener = TcpListener::bind("127.0.0.1:0").expect("binding the backend");
    let origin = listener.local_addr().unwrap();
    let (accepted_tx, accepted) = mpsc::channel();
    thread::spawn(move || {
        // Ends when the test ends and drops the receiver (after one more accept at most).
        for stream in listener.incoming() {
            if accepted_tx.send(stream).is_err() {
                break;
            }
        }
    });
    for crossing in CROSSINGS {
        upload_never_read(origin, &accepted, crossing, BOUND_KIB);
    }
}

/// A client uploads to a backend (which `accepted` hands over) that never reads,
/// through a relay that crosses as `crossing` says: it is held back, and the relay
/// grows by less than `bound_kib`.
fn upload_never_read(
    origin: SocketAddr,
    accepted: &mpsc::Receiver<std::io::Result<TcpStream>>,
    crossing: &str,
    bound_kib: u64,
) {
    const CHUNK: usize = 64 * 1024;
    let (relay, worker) = relay(&[origin], &["--splice", crossing]);
    let before = vm_kib(worker, "VmRSS");

    let client = connect(relay.addr());
    // A writer blocked this long has surely stalled: it ends then.
    client.set_write_timeout(Some(Duration::from_secs(3))).unwrap();
    let written = Arc::new(AtomicUsize::new(0));
    let writer = {
        let (mut stream, written) = (client.try_clone().unwrap(), Arc::clone(&written));
        thread::spawn(move || {
            let chunk = pattern(CHUNK);
            while written.load(Ordering::SeqCst) < BODY {
                if stream.write_all(&chunk).is_err() {
                    break;
                }
                written.fetch_add(CHUNK, Ordering::SeqCst);
            }
        })
    };
    let backend_side = accepted.recv_timeout(WAIT).expect("the relay connected to the backend");
    let peak =
        peak_rss_until_stalled(worker, || Some(written.load(Ordering::SeqCst) as u64).filter(|&n| n > 0));
    let sent = written.load(Ordering::SeqCst);
    eprintln!("{crossing}: relay worker VmRSS {before} KiB before, at most {peak} KiB; the client wrote {sent} bytes");
    assert!(sent < BODY, "{crossing}: the client wrote all {BODY} bytes to a backend that never reads");
    assert!(peak < before + bound_kib, "{crossing}: the relay worker grew from {before} KiB to {peak} KiB");
    drop(client);
    drop(backend_side);
    writer.join().expect("the writer thread");
}

#[test]
fn a_half_closed_request_gets_the_whole_answer_through_the_relay() {
    let origin = backend(&[]);
    for crossing in CROSSINGS {
        half_closed_exchange(&origin, crossing);
    }
}

/// A request then a half-close, through a relay that crosses as `crossing` says:
/// the answer is the backend's, whole.
fn half_closed_exchange(origin: &Server, crossing: &str) {
    let (relay, _) = relay(&[origin.addr()], &["--splice", crossing]);
    let exchange = |addr: SocketAddr| {
        let mut stream = connect(addr);
        stream.write_all(b"GET / HTTP/1.1\r\nHost: x\r\n\r\n").expect("sending the request");
        stream.shutdown(Shutdown::Write).expect("half-closing");
        let mut all = Vec::new();
        stream.read_to_end(&mut all).expect("the answer, then the end of stream");
        all
    };
    let direct = exchange(origin.addr());
    let relayed = exchange(relay.addr());
    assert!(direct.starts_with(OK.as_bytes()), "direct: {:?}", String::from_utf8_lossy(&direct));
    assert_eq!(
        String::from_utf8_lossy(&without_date(&relayed)),
        String::from_utf8_lossy(&without_date(&direct)),
        "the answer through the relay, and straight from the backend"
    );
}

#[test]
fn a_backend_that_refuses_closes_its_client() {
    // A port that was bound and is closed: nothing listens there.
    let refusing = TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap();
    let (relay, _) = relay(&[refusing], &[]);
    for _ in 0..2 {
        assert_closed_by_relay(&connect(relay.addr()), true);
    }
}

#[test]
fn a_backend_that_never_accepts_closes_its_client_after_the_connect_timeout() {
    // A listener with a backlog of 0, its accept queue filled: the kernel drops
    // further SYNs (it never answers them), so a connect to it stays in progress.
    let listener = Socket::new(Domain::IPV4, Type::STREAM, None).expect("a socket");
    listener.bind(&SocketAddr::from(([127, 0, 0, 1], 0)).into()).expect("binding");
    listener.listen(0).expect("listening");
    let origin = listener.local_addr().unwrap().as_socket().expect("an IPv4 address");
    let fillers: Vec<TcpStream> =
        (0..3).filter_map(|_| TcpStream::connect_timeout(&origin, Duration::from_millis(500)).ok()).collect();
    assert!(!fillers.is_empty(), "no connection to a fresh listener");
    let probe = Socket::new(Domain::IPV4, Type::STREAM, None).expect("a socket");
    match probe.connect_timeout(&origin.into(), Duration::from_secs(2)) {
        Err(e) if matches!(e.kind(), ErrorKind::TimedOut | ErrorKind::WouldBlock) => {}
        other => panic!(
            "cannot make a backend that never accepts: with its accept queue full ({} queued), \
             a connect to it still ended within 2 s: {other:?}",
            fillers.len()
        ),
    }
    drop(probe);

    let (relay, _) = relay(&[origin], &["--connect-timeout", "1"]);
    assert_closed_by_relay(&connect(relay.addr()), false);
    drop(fillers);
}

#[test]
fn the_idle_timeout_closes_an_idle_pair() {
    let origin = backend(&[]);
    let (relay, _) = relay(&[origin.addr()], &["--keepalive-timeout", "1"]);
    let mut client = relay.client();
    assert_eq!(client.get("/").status_line, OK);
    // The backend keeps it for 60 s: only the relay's timeout can close it.
    assert_closed_by_relay(client.stream(), false);
}

#[test]
fn an_idle_timeout_of_zero_leaves_an_idle_pair_open() {
    let origin = backend(&[]);
    let (relay, _) = relay(&[origin.addr()], &["--keepalive-timeout", "0"]);
    let mut client = relay.client();
    assert_eq!(client.get("/").status_line, OK);
    thread::sleep(Duration::from_secs(3));
    let response = client.get("/");
    assert_eq!(response.status_line, OK, "the pair carries a request after 3 s idle");
    assert_eq!(response.body, util::HELLO);
}

#[test]
fn sigterm_lets_an_open_pair_finish_its_transfer() {
    // At this rate the rest of the body takes a couple of seconds after the signal.
    const RATE: f64 = 20e6;
    const SIGNAL_AT: usize = 5 * 1024 * 1024;
    let want = pattern(BODY);
    let file = TempFile::with_contents(&want);
    let origin = backend(&["--body-file", file.path()]);
    let (mut relay, _) = relay(&[origin.addr()], &["--shutdown-timeout", "30"]);
    let stream = connect_small_rcvbuf(relay.addr());
    let received = Arc::new(AtomicUsize::new(0));
    let reader = {
        let (mut stream, received) = (stream.try_clone().unwrap(), Arc::clone(&received));
        thread::spawn(move || {
            stream
                .write_all(b"GET / HTTP/1.1\r\nHost: a\r\nConnection: close\r\n\r\n")
                .expect("sending the request");
            let start = Instant::now();
            let (mut all, mut buf) = (Vec::with_capacity(BODY + 4096), vec![0u8; 64 * 1024]);
            loop {
                let n = match stream.read(&mut buf) {
                    Ok(0) => break,
                    Ok(n) => n,
                    Err(e) => panic!("reading after {} bytes: {e}", all.len()),
                };
                all.extend_from_slice(&buf[..n]);
                received.store(all.len(), Ordering::SeqCst);
                let due = Duration::from_secs_f64(all.len() as f64 / RATE);
                thread::sleep(due.saturating_sub(start.elapsed()));
            }
            all
        })
    };
    let started = wait_until(WAIT, || received.load(Ordering::SeqCst) >= SIGNAL_AT || reader.is_finished());
    assert!(started, "{} bytes arrived within {WAIT:?}", received.load(Ordering::SeqCst));
    let at_signal = received.load(Ordering::SeqCst);
    signal(relay.pid(), "TERM");
    let all = reader.join().expect("the reader thread");
    eprintln!("SIGTERM after {at_signal} bytes of {}", all.len());
    assert!(at_signal < BODY, "the whole body had arrived before the signal");
    let head_end = all.windows(4).position(|w| w == b"\r\n\r\n").expect("a response head") + 4;
    let head = String::from_utf8_lossy(&all[..head_end]);
    assert!(head.starts_with(OK), "head: {head:?}");
    assert_same_bytes(&all[head_end..], &want, "the body finished during the stop");
    drop(stream);
    let status = relay.wait_exit(WAIT);
    assert!(status.success(), "the relay exited with {status}; stderr:\n{}", relay.stderr());
}

#[test]
fn wrk_through_the_relay_sees_no_errors() {
    if !tool_available("wrk", "wrk") {
        return;
    }
    let origin = backend(&[]);
    let (relay, _) = relay(&[origin.addr()], &[]);
    let url = format!("http://{}/", relay.addr());
    run_wrk(&["-t1", "-c100", "-d2s"], &url);
    // Both ends still answer after it.
    assert_eq!(relay.client().get("/").status_line, OK);
}
