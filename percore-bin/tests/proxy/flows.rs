//! The proxy's flows: requests and bodies of every framing get through whole,
//! pipelined requests are answered in order, hop-by-hop fields stay on their hop,
//! an ambiguous request never reaches a backend, failures get 502 and 504 (read
//! and connect timeouts to the millisecond), a client waiting at a slow backend
//! outlasts the idle timeout, a GET on a reused connection the backend closed is
//! retried, a graceful stop lets a slow answer finish, a client that never reads
//! costs little, and wrk sees no errors and no churn of backend connections.

use std::io::{ErrorKind, Write};
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::thread;
use std::time::{Duration, Instant};

use crate::util::{
    self, connect_with, run_wrk, signal, stopped_lines, tcp_queues, tool_available, vm_kib, wait_until,
    TempFile, HELLO, OK, WAIT,
};
use crate::{accepts, curl, exchange, percore_backend, proxy, python_backend, status};

#[test]
fn get_head_and_http_1_0_reach_percore_serve_and_come_back() {
    if !tool_available("curl", "curl") {
        return;
    }
    let origin = percore_backend(&[]);
    let (proxy, _) = proxy(&[origin.addr()], &[]);
    let url = format!("http://{}/", proxy.addr());
    let response = proxy.client().get("/");
    assert_eq!((response.status_line.as_str(), &response.body[..]), (OK, HELLO));
    let head = curl(&["-I", &url]);
    assert!(head.starts_with(OK) && head.contains("Content-Length: 14"), "{head}");
    let old = curl(&["-0", "-i", &url]);
    assert!(old.contains("Connection: close") && old.ends_with("hello, world!\n"), "{old}");
}

#[test]
fn request_bodies_by_length_and_chunked_reach_the_backend_whole() {
    let Some(origin) = python_backend() else { return };
    if !tool_available("curl", "curl") {
        return;
    }
    let (proxy, _) = proxy(&[origin.addr()], &[]);
    let url = format!("http://{}/echo", proxy.addr());
    // More than the loop's budget, so that the body crosses under flow control; text,
    // as curl's output is read as such.
    let body: Vec<u8> = (0..60_000).flat_map(|line| format!("{line:09}\n").into_bytes()).collect();
    let file = TempFile::with_contents(&body);
    let upload = format!("@{}", file.path());
    for (extra, framing) in [(None, "length"), (Some("Transfer-Encoding: chunked"), "chunked")] {
        let mut args = vec!["-i", "--data-binary", &upload, &url];
        if let Some(header) = extra {
            args.extend(["-H", header]);
        }
        let answer = curl(&args);
        assert_eq!(status(&answer), OK);
        assert!(answer.contains(&format!("X-Body-Framing: {framing}\r\n")), "{framing}: {}", &answer[..300]);
        assert!(answer.contains(&format!("X-Body-Length: {}\r\n", body.len())), "{framing}");
        assert!(
            answer.as_bytes().ends_with(&body),
            "{framing}: the body the backend got is not the one sent"
        );
    }
}

#[test]
fn every_framing_of_an_answer_is_passed_on() {
    let Some(origin) = python_backend() else { return };
    let (proxy, _) = proxy(&[origin.addr()], &[]);
    let get = |path: &str, version: &str| {
        let request = format!("GET {path} {version}\r\nHost: a\r\nConnection: close\r\n\r\n");
        exchange(proxy.addr(), request.as_bytes())
    };
    // The chunks' content and the trailer as the backend sent them, in chunks of the
    // proxy's own (no extension); `Trailer` is a hop-by-hop field here.
    let chunked = get("/chunked", "HTTP/1.1");
    assert_eq!(
        chunked,
        "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\nConnection: close\r\n\r\n\
         7\r\nhello, \r\n8\r\nchunked \r\n6\r\nworld\n\r\n0\r\nX-Trailer: yes\r\n\r\n"
    );
    // To an HTTP/1.0 client, which knows no chunks: the content until the close.
    let chunked = get("/chunked", "HTTP/1.0");
    assert_eq!(chunked, "HTTP/1.1 200 OK\r\nConnection: close\r\n\r\nhello, chunked world\n");
    // Interim answers reach an HTTP/1.1 client, not an HTTP/1.0 one.
    let interim = get("/interim", "HTTP/1.1");
    assert!(interim.starts_with("HTTP/1.1 100 Continue\r\n\r\nHTTP/1.1 103 Early Hints\r\n"), "{interim}");
    assert!(interim.ends_with("HTTP/1.1 200 OK\r\nContent-Length: 6\r\nConnection: close\r\n\r\nfinal\n"));
    let interim = get("/interim", "HTTP/1.0");
    assert!(interim.starts_with("HTTP/1.1 200 OK\r\n") && interim.ends_with("final\n"), "{interim}");
    let until_close = get("/until-close", "HTTP/1.1");
    assert!(until_close.ends_with("Connection: close\r\n\r\nuntil the close\n"), "{until_close}");
    assert_eq!(get("/204", "HTTP/1.1"), "HTTP/1.1 204 No Content\r\nConnection: close\r\n\r\n");
    assert_eq!(
        get("/304", "HTTP/1.1"),
        "HTTP/1.1 304 Not Modified\r\nETag: \"x\"\r\nConnection: close\r\n\r\n"
    );
    // No body after HEAD, whatever the head says.
    let head = exchange(proxy.addr(), b"HEAD /chunked HTTP/1.1\r\nHost: a\r\nConnection: close\r\n\r\n");
    assert_eq!(head, "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\nConnection: close\r\n\r\n");
}

#[test]
fn pipelined_requests_are_answered_in_order() {
    let Some(origin) = python_backend() else { return };
    let (proxy, _) = proxy(&[origin.addr()], &[]);
    let answers = exchange(
        proxy.addr(),
        b"GET /chunked HTTP/1.1\r\nHost: a\r\n\r\nPOST /echo HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: chunked\r\n\r\n\
          3\r\nabc\r\n0\r\n\r\nHEAD /echo HTTP/1.1\r\nHost: a\r\n\r\nGET /204 HTTP/1.1\r\nHost: a\r\nConnection: close\r\n\r\n",
    );
    // Status lines, wherever they start (the echo's body ends without a line end).
    let statuses: Vec<&str> =
        answers.match_indices("HTTP/1.1 2").map(|(at, _)| &answers[at..at + 12]).collect();
    let want = ["HTTP/1.1 200", "HTTP/1.1 200", "HTTP/1.1 200", "HTTP/1.1 204"];
    assert_eq!(statuses, want, "{answers}");
    let (chunked, echoed) =
        (answers.find("X-Trailer: yes").unwrap(), answers.find("X-Body-Length: 3").unwrap());
    assert!(
        chunked < echoed && answers.ends_with("HTTP/1.1 204 No Content\r\nConnection: close\r\n\r\n"),
        "{answers}"
    );
}

#[test]
fn hop_by_hop_fields_stay_on_their_hop_and_x_forwarded_for_is_the_clients_address() {
    let Some(origin) = python_backend() else { return };
    let (proxy, _) = proxy(&[origin.addr()], &[]);
    let answer = exchange(
        proxy.addr(),
        b"POST /echo HTTP/1.1\r\nHost: example.test\r\nConnection: close, X-Hop, Content-Length\r\n\
          X-Hop: 1\r\nKeep-Alive: 5\r\nProxy-Connection: keep-alive\r\nTE: trailers\r\nTrailer: X-T\r\n\
          Upgrade: websocket\r\nX-Forwarded-For: 192.0.2.1\r\nX-Kept: 2\r\nContent-Length: 2\r\n\r\nhi",
    );
    let received = answer.split("\r\n\r\n").nth(1).expect("the head the backend received");
    assert_eq!(
        received,
        "POST /echo HTTP/1.1\r\nHost: example.test\r\nX-Kept: 2\r\nX-Forwarded-For: 127.0.0.1\r\n\
         Content-Length: 2",
        "the backend got the end-to-end fields, the client's address (not what it said), and the length the \
         proxy framed the body by"
    );
    assert!(answer.ends_with("\r\n\r\nhi"), "{answer}");
}

#[test]
fn an_ambiguous_request_is_refused_and_never_reaches_a_backend() {
    let Some(origin) = python_backend() else { return };
    let (proxy, _) = proxy(&[origin.addr()], &[]);
    let smuggles: [&[u8]; 4] = [
        b"POST /echo HTTP/1.1\r\nHost: a\r\nContent-Length: 4\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\n",
        b"POST /echo HTTP/1.1\r\nHost: a\r\nContent-Length: 4\r\nContent-Length: 5\r\n\r\nabcde",
        b"POST /echo HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: gzip, chunked\r\n\r\n0\r\n\r\n",
        b"POST /echo HTTP/1.1\r\nHost: a\r\nContent-Length: 4\r\n Transfer-Encoding: chunked\r\n\r\n0\r\n\r\n",
    ];
    for smuggle in smuggles {
        let answer = exchange(proxy.addr(), smuggle);
        assert!(answer.starts_with("HTTP/1.1 400 Bad Request\r\n"), "{answer}");
        assert!(answer.contains("Connection: close\r\n"), "{answer}");
    }
    // A bad chunk in a body already on its way: cut there, both ways.
    let answer =
        exchange(proxy.addr(), b"POST /echo HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: chunked\r\n\r\nzz\r\n");
    assert!(answer.starts_with("HTTP/1.1 400 Bad Request\r\n"), "{answer}");
    // The refused requests opened no connection: the one that asks is the second.
    assert_eq!(accepts(proxy.addr()), 2);
}

#[test]
fn a_refusing_backend_gets_502_and_is_skipped_while_a_request_without_body_tries_the_next() {
    let Some(origin) = python_backend() else { return };
    // A port nothing listens on: it refuses.
    let refusing = TcpListener::bind("127.0.0.1:0").and_then(|l| l.local_addr()).expect("a free port");
    let (mut alone, _) = proxy(&[refusing], &[]);
    let answer = exchange(alone.addr(), b"GET / HTTP/1.1\r\nHost: a\r\nConnection: close\r\n\r\n");
    assert!(
        answer.starts_with("HTTP/1.1 502 Bad Gateway\r\n") && answer.ends_with("\r\n\r\n502 Bad Gateway\n")
    );
    // The worker's last line counts the connect refused among its connections: the
    // client's and the one it opened, of which one failed.
    signal(alone.pid(), "TERM");
    assert!(alone.wait_exit(WAIT).success());
    let stopped = stopped_lines(&alone.wait_stderr_closed(WAIT));
    let counts: Vec<(u64, u64, u64, u64)> =
        stopped.iter().map(|line| (line.connections, line.failed, line.requests, line.refused)).collect();
    assert_eq!(counts, [(2, 1, 1, 1)], "connections, failed, requests, refused");

    let (proxy, _) = proxy(&[refusing, origin.addr()], &[]);
    // The first request is the refusing backend's turn: tried again on the other.
    let answer = exchange(proxy.addr(), b"GET /204 HTTP/1.1\r\nHost: a\r\nConnection: close\r\n\r\n");
    assert_eq!(status(&answer), "HTTP/1.1 204 No Content");
    // Then the refusing one is skipped: a request with a body, which is never sent
    // twice, finds the live one every time.
    for _ in 0..3 {
        let answer = exchange(
            proxy.addr(),
            b"POST /echo HTTP/1.1\r\nHost: a\r\nContent-Length: 1\r\nConnection: close\r\n\r\nx",
        );
        assert_eq!(status(&answer), OK, "{answer}");
    }
}

#[test]
fn a_backend_silent_past_a_read_timeout_in_milliseconds_gets_504_and_one_that_closes_early_502_or_a_cut_answer(
) {
    let Some(origin) = python_backend() else { return };
    let (proxy, _) = proxy(&[origin.addr()], &["--read-timeout", "200ms"]);
    let get = |path: &str| {
        let request = format!("GET {path} HTTP/1.1\r\nHost: a\r\nConnection: close\r\n\r\n");
        exchange(proxy.addr(), request.as_bytes())
    };
    let silent = get("/hang");
    assert!(
        silent.starts_with("HTTP/1.1 504 Gateway Timeout\r\n") && silent.ends_with("504 Gateway Timeout\n")
    );
    let early = get("/close-early");
    assert!(early.starts_with("HTTP/1.1 502 Bad Gateway\r\n"), "{early}");
    // Its head already went on: the client sees the answer end short of its length.
    assert_eq!(get("/cut"), "HTTP/1.1 200 OK\r\nContent-Length: 100\r\nConnection: close\r\n\r\n0123456789");
}

#[test]
fn a_backend_that_never_accepts_gets_504_after_a_connect_timeout_in_milliseconds() {
    // A listener with a backlog of 0, its accept queue filled: the kernel drops
    // further SYNs, so a connect to it stays in progress (as in tests/relay.rs).
    let listener =
        socket2::Socket::new(socket2::Domain::IPV4, socket2::Type::STREAM, None).expect("a socket");
    listener.bind(&SocketAddr::from(([127, 0, 0, 1], 0)).into()).expect("binding");
    listener.listen(0).expect("listening");
    let origin = listener.local_addr().unwrap().as_socket().expect("an IPv4 address");
    let fillers: Vec<TcpStream> =
        (0..3).filter_map(|_| TcpStream::connect_timeout(&origin, Duration::from_millis(500)).ok()).collect();
    let probe = socket2::Socket::new(socket2::Domain::IPV4, socket2::Type::STREAM, None).expect("a socket");
    if !matches!(probe.connect_timeout(&origin.into(), Duration::from_secs(2)), Err(e) if matches!(e.kind(), ErrorKind::TimedOut | ErrorKind::WouldBlock))
    {
        util::skip("a full accept queue does not stall a connect here");
        return;
    }
    let (proxy, _) = proxy(&[origin], &["--connect-timeout", "250ms"]);
    let answer = exchange(proxy.addr(), b"GET / HTTP/1.1\r\nHost: a\r\nConnection: close\r\n\r\n");
    assert!(answer.starts_with("HTTP/1.1 504 Gateway Timeout\r\n"), "{answer}");
    drop(fillers);
}

#[test]
fn a_client_waiting_at_a_slow_backend_outlasts_the_idle_timeout() {
    let origin = percore_backend(&["--delay", "1s"]);
    let (proxy, _) = proxy(&[origin.addr()], &["--idle-timeout", "200ms", "--read-timeout", "10s"]);
    // The read timeout, not the idle timeout, bounds the wait for an answer.
    let response = proxy.client().get("/");
    assert_eq!((response.status_line.as_str(), &response.body[..]), (OK, HELLO));
}

#[test]
fn a_get_on_a_reused_connection_the_backend_closed_is_retried_once_a_post_is_not() {
    let Some(origin) = python_backend() else { return };
    let (proxy, _) = proxy(&[origin.addr()], &[]);
    // `/once` answers, then closes its connection at the next request, unanswered.
    let twice =
        b"GET /once HTTP/1.1\r\nHost: a\r\n\r\nGET /once HTTP/1.1\r\nHost: a\r\nConnection: close\r\n\r\n";
    let answers = exchange(proxy.addr(), twice);
    assert_eq!(answers.matches("HTTP/1.1 200 OK\r\n").count(), 2, "{answers}");
    // The retry opened a second connection, which the second `/once` marked: the
    // question goes on it, is closed unanswered, and is retried on a third.
    assert_eq!(accepts(proxy.addr()), 3);
    let post =
        b"GET /once HTTP/1.1\r\nHost: a\r\n\r\nPOST /once HTTP/1.1\r\nHost: a\r\nContent-Length: 1\r\nConnection: close\r\n\r\nx";
    let answers = exchange(proxy.addr(), post);
    assert!(answers.starts_with("HTTP/1.1 200 OK\r\n"), "{answers}");
    assert!(answers.contains("HTTP/1.1 502 Bad Gateway\r\n"), "the POST is not sent twice: {answers}");
}

#[test]
fn sigterm_lets_a_request_waiting_at_a_slow_backend_finish() {
    let origin = percore_backend(&["--delay", "3s"]);
    let (mut proxy, _) = proxy(&[origin.addr()], &[]);
    let mut client = proxy.client();
    client.send(b"GET / HTTP/1.1\r\nHost: a\r\n\r\n");
    // The request is at the backend, which waits 3 s before it answers.
    thread::sleep(Duration::from_millis(500));
    signal(proxy.pid(), "TERM");
    let response = client.read_response(util::Method::Get);
    assert_eq!((response.status_line.as_str(), &response.body[..]), (OK, HELLO));
    assert_eq!(response.header("Connection"), Some("close"), "a stop closes the connection after the answer");
    assert!(proxy.wait_exit(WAIT).success());
}

#[test]
fn a_client_that_never_reads_a_large_answer_costs_the_proxy_little() {
    const BOUND_KIB: u64 = 8 * 1024;
    let Some(origin) = python_backend() else { return };
    let (proxy, worker) = proxy(&[origin.addr()], &[]);
    assert_eq!(
        status(&exchange(proxy.addr(), b"GET /204 HTTP/1.1\r\nHost: a\r\nConnection: close\r\n\r\n")),
        "HTTP/1.1 204 No Content"
    );
    let before = vm_kib(worker, "VmRSS");
    let mut stream = connect_with(proxy.addr(), 64 * 1024, Some(1024));
    stream.write_all(b"GET /big?n=209715200 HTTP/1.1\r\nHost: a\r\n\r\n").expect("sending");
    // VmRSS, sampled until it stayed the same (within a page or two) for a second.
    let (mut peak, mut still_since) = (before, Instant::now());
    let mut last = before;
    let stalled = wait_until(Duration::from_secs(60), || {
        thread::sleep(Duration::from_millis(100));
        let rss = vm_kib(worker, "VmRSS");
        peak = peak.max(rss);
        if rss.abs_diff(last) > 256 {
            (last, still_since) = (rss, Instant::now());
        }
        still_since.elapsed() >= Duration::from_secs(1)
    });
    assert!(stalled, "the proxy's memory kept changing");
    // The answer did start: its first bytes wait, unread, at the client.
    let (ours, theirs) = (stream.local_addr().unwrap(), stream.peer_addr().unwrap());
    assert!(tcp_queues(ours, theirs).is_some_and(|(_, unread)| unread > 0), "nothing reached the client");
    eprintln!("proxy worker VmRSS {before} KiB before, at most {peak} KiB with a client not reading");
    assert!(peak < before + BOUND_KIB, "the proxy worker grew from {before} KiB to {peak} KiB");
}

#[test]
fn wrk_through_the_proxy_sees_no_errors_and_no_churn_of_backend_connections() {
    if !tool_available("wrk", "wrk") {
        return;
    }
    let mut origin = percore_backend(&[]);
    let (mut proxy, _) = proxy(&[origin.addr()], &["--keepalive", "64"]);
    let requests = run_wrk(&["-t2", "-c100", "-d2s"], &format!("http://{}/", proxy.addr()));
    signal(proxy.pid(), "TERM");
    assert!(proxy.wait_exit(WAIT).success());
    signal(origin.pid(), "TERM");
    assert!(origin.wait_exit(WAIT).success());
    let backend = stopped_lines(&origin.wait_stderr_closed(WAIT))[0];
    let proxy_stderr = proxy.wait_stderr_closed(WAIT);
    let opened = format!(", {} backend connections opened", backend.connections);
    assert!(proxy_stderr.contains(&opened), "the proxy counts what the backend accepted: {proxy_stderr}");
    assert!(backend.requests >= requests, "{} answered, {requests} made", backend.requests);
    // Each of wrk's 100 connections needs one at the backend while its request is
    // in flight; after that, a steady load opens next to nothing.
    let churn = backend.connections.saturating_sub(100) * 1000 / backend.requests;
    eprintln!(
        "{requests} requests, {} backend connections: {churn} new per 1000 after the first 100",
        backend.connections
    );
    assert!(churn <= 2, "{} backend connections for {} requests", backend.connections, backend.requests);
}
