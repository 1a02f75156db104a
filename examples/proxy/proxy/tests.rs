//! The proxy's exchanges on the loop's own rules, through the harness: its own
//! connection is the client, the connections the proxy opens are the backend's, and
//! the clock moves only when a test says.

use std::io::ErrorKind;
use std::time::Duration;

use percore::listen::Address;
use percore::reactor::{Closed, Config, ConnId, Harness};

use super::*;

const BACKEND: ([u8; 4], u16) = ([127, 0, 0, 1], 8080);
const GET: &[u8] = b"GET /a HTTP/1.1\r\nHost: h\r\n\r\n";
/// What the backend receives for [`GET`].
const FORWARDED: &[u8] = b"GET /a HTTP/1.1\r\nHost: h\r\nX-Forwarded-For: 127.0.0.1\r\n\r\n";
const OK: &[u8] = b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nhi";

/// A proxy to one backend, keeping 4 idle connections, with `read_timeout`, under
/// `config`.
fn harness(read_timeout: Option<Duration>, config: Config) -> Harness<Proxy> {
    let backends = Backends::new(vec![Address::from(BACKEND)], Duration::from_secs(10));
    Harness::with_config(Proxy::new(backends, 4, read_timeout, Policy::default()), config)
}

/// The one connection the proxy is opening, to the backend, established.
fn established(harness: &mut Harness<Proxy>) -> ConnId {
    let connecting = harness.connecting();
    assert_eq!(connecting.len(), 1, "one connect: {connecting:?}");
    let (upstream, addr) = connecting[0].clone();
    assert_eq!(addr, Address::from(BACKEND));
    harness.establish(upstream);
    upstream
}

/// `request` forwarded on a fresh connection, which the backend read: that
/// connection, its answer owed.
fn forwarded(harness: &mut Harness<Proxy>, request: &[u8]) -> ConnId {
    harness.receive(request);
    let upstream = established(harness);
    harness.take_output_of(upstream);
    upstream
}

/// Whether the proxy closed its client, or closes it once its output is sent.
fn client_closes(harness: &Harness<Proxy>) -> bool {
    harness.is_closing(harness.id())
}

fn text(bytes: &[u8]) -> String {
    String::from_utf8_lossy(bytes).into_owned()
}

/// A `GET` forwarded on a fresh connection and answered: the connection is in the
/// pool afterwards.
fn first_exchange(harness: &mut Harness<Proxy>) -> ConnId {
    harness.receive(GET);
    let upstream = established(harness);
    assert_eq!(text(&harness.take_output_of(upstream)), text(FORWARDED));
    harness.receive_on(upstream, OK);
    assert_eq!(text(&harness.take_output()), text(OK));
    assert_eq!(harness.protocol().pool.len(), 1, "back in the pool");
    upstream
}

#[test]
fn an_answered_connection_goes_back_to_the_pool_and_carries_the_next_request_without_a_connect() {
    let mut harness = harness(Some(Duration::from_secs(1)), Config::default());
    let upstream = first_exchange(&mut harness);
    // Idle in the pool longer than the read timeout: cleared at the answer's end,
    // it closes nothing.
    harness.advance(Duration::from_secs(5));
    assert_eq!(harness.closed(upstream), None);
    harness.receive(b"GET /b HTTP/1.1\r\nHost: h\r\n\r\n");
    assert!(harness.connecting().is_empty(), "the pooled connection is taken");
    assert!(harness.take_output_of(upstream).starts_with(b"GET /b HTTP/1.1\r\n"));
    harness.receive_on(upstream, b"HTTP/1.1 204 No Content\r\n\r\n");
    assert_eq!(text(&harness.take_output()), "HTTP/1.1 204 No Content\r\n\r\n");
    assert_eq!((harness.protocol().pool.len(), harness.protocol().opened), (1, 1));
}

#[test]
fn a_pipelined_request_waits_for_the_answer_before_it_then_takes_the_same_connection() {
    let mut harness = harness(None, Config::default());
    harness.receive(&[GET, b"GET /b HTTP/1.1\r\nHost: h\r\n\r\n"].concat());
    let upstream = established(&mut harness);
    assert_eq!(text(&harness.take_output_of(upstream)), text(FORWARDED), "one request at a time");
    harness.receive_on(upstream, OK);
    assert_eq!(text(&harness.take_output()), text(OK));
    assert!(harness.connecting().is_empty());
    assert!(harness.take_output_of(upstream).starts_with(b"GET /b HTTP/1.1\r\n"));
}

#[test]
fn a_get_on_a_pooled_connection_the_backend_closed_unanswered_is_retried_once_on_a_fresh_connect() {
    let mut harness = harness(None, Config::default());
    let pooled = first_exchange(&mut harness);
    harness.receive(GET);
    assert_eq!(text(&harness.take_output_of(pooled)), text(FORWARDED));
    // Its keep-alive timeout crossed the request: the backend closes.
    harness.input_end_on(pooled);
    assert!(harness.closed(pooled).is_some());
    assert!(harness.take_output().is_empty(), "no answer yet: the request goes again");
    let fresh = established(&mut harness);
    assert_eq!(text(&harness.take_output_of(fresh)), text(FORWARDED));
    harness.receive_on(fresh, OK);
    assert_eq!(text(&harness.take_output()), text(OK));

    // Once only: the connection the retry opened, reused and closed unanswered in
    // turn, has the request sent again; that one closed unanswered is a 502.
    harness.receive(GET);
    harness.take_output_of(fresh);
    harness.input_end_on(fresh);
    let retried = established(&mut harness);
    harness.take_output_of(retried);
    harness.input_end_on(retried);
    assert!(harness.connecting().is_empty());
    assert!(harness.take_output().starts_with(b"HTTP/1.1 502 Bad Gateway\r\n"));
}

#[test]
fn a_post_on_a_pooled_connection_the_backend_closed_unanswered_gets_502() {
    let mut harness = harness(None, Config::default());
    let pooled = first_exchange(&mut harness);
    harness.receive(b"POST /a HTTP/1.1\r\nHost: h\r\nContent-Length: 1\r\n\r\nx");
    harness.take_output_of(pooled);
    harness.input_end_on(pooled);
    assert!(harness.connecting().is_empty(), "a request with a body is never sent twice");
    assert!(harness.take_output().starts_with(b"HTTP/1.1 502 Bad Gateway\r\n"));
}

#[test]
fn a_backend_silent_past_the_read_timeout_gets_the_client_504_and_the_client_keeps_its_connection() {
    let mut harness = harness(Some(Duration::from_millis(200)), Config::default());
    let upstream = forwarded(&mut harness, GET);
    harness.advance(Duration::from_secs(1));
    assert_eq!(harness.closed(upstream), Some(Closed::TimedOut));
    let answer = harness.take_output();
    assert!(answer.starts_with(b"HTTP/1.1 504 Gateway Timeout\r\n"), "{}", text(&answer));
    assert_eq!(harness.closed(harness.id()), None);
}

#[test]
fn a_connect_past_the_connect_timeout_gets_the_client_504() {
    let config = Config { connect_timeout: Some(Duration::from_millis(250)), ..Config::default() };
    let mut harness = harness(None, config);
    harness.receive(GET);
    let (upstream, _) = harness.connecting()[0];
    harness.advance(Duration::from_secs(1));
    assert_eq!(harness.closed(upstream), Some(Closed::ConnectFailed(ErrorKind::TimedOut)));
    assert!(harness.connecting().is_empty(), "one backend: nothing else to try");
    assert!(harness.take_output().starts_with(b"HTTP/1.1 504 Gateway Timeout\r\n"));
}

#[test]
fn a_client_waiting_for_a_slow_answer_is_under_the_read_timeout_not_the_idle_timeout() {
    let config = Config { idle_timeout: Some(Duration::from_secs(1)), ..Config::default() };
    let mut harness = harness(Some(Duration::from_secs(60)), config);
    let upstream = forwarded(&mut harness, GET);
    harness.advance(Duration::from_secs(30));
    assert_eq!((harness.closed(harness.id()), harness.closed(upstream)), (None, None));
    harness.receive_on(upstream, OK);
    assert_eq!(text(&harness.take_output()), text(OK));
}

#[test]
fn a_request_body_that_stops_arriving_is_under_the_message_timeout() {
    let config = Config {
        message_timeout: Some(Duration::from_secs(1)),
        idle_timeout: Some(Duration::from_secs(60)),
        ..Config::default()
    };
    let mut harness = harness(Some(Duration::from_secs(60)), config);
    harness.receive(b"POST /a HTTP/1.1\r\nHost: h\r\nContent-Length: 100\r\n\r\nstart");
    let upstream = established(&mut harness);
    assert!(harness.take_output_of(upstream).ends_with(b"\r\n\r\nstart"), "forwarded as it came");
    harness.advance(Duration::from_secs(5));
    assert_eq!(harness.closed(harness.id()), Some(Closed::TimedOut), "the rest never came");
    assert!(harness.closed(upstream).is_some(), "its half-sent request goes with it");
}

#[test]
fn a_graceful_stop_closes_the_pooled_connections_at_once() {
    let mut harness = harness(None, Config::default());
    let pooled = first_exchange(&mut harness);
    harness.drain();
    assert_eq!(harness.closed(pooled), Some(Closed::Done));
    assert_eq!(harness.protocol().pool.len(), 0);
}

#[test]
fn a_graceful_stop_lets_an_exchange_in_flight_finish_and_closes_both_ends_after_it() {
    let mut harness = harness(None, Config::default());
    let upstream = forwarded(&mut harness, GET);
    harness.drain();
    harness.grace_over();
    assert_eq!(
        (harness.closed(harness.id()), harness.closed(upstream)),
        (None, None),
        "busy: left to finish"
    );
    harness.receive_on(upstream, OK);
    let answer = text(&harness.take_output());
    assert!(
        answer.starts_with("HTTP/1.1 200 OK\r\n") && answer.contains("Connection: close\r\n"),
        "{answer}"
    );
    assert!(harness.closed(upstream).is_some(), "not back in a pool that drains");
    assert!(harness.closed(harness.id()).is_some());
}

mod desync;
