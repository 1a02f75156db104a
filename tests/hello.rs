//! What `Hello` tells the loop, on a fake clock (the protocol in a Harness): when a
//! connection is busy, what it counted, and how a graceful stop ends a pipeline.

use std::time::Duration;

use percore::http::{Hello, HelloConfig};
use percore::reactor::{Counts, Flow, Harness, Protocol};

const GET: &[u8] = b"GET / HTTP/1.1\r\nHost: a\r\n\r\n";

fn hello(config: HelloConfig) -> Harness<Hello> {
    Harness::new(Hello::new(&config))
}

fn busy(harness: &Harness<Hello>) -> bool {
    Hello::is_busy(harness.conn())
}

#[test]
fn a_connection_is_busy_while_a_body_arrives_and_not_after() {
    let mut harness = hello(HelloConfig::default());
    assert!(!busy(&harness), "nothing received yet");
    let head = b"GET / HTTP/1.1\r\nHost: a\r\nContent-Length: 4\r\n\r\nab";
    assert_eq!(harness.data(head).consumed, head.len());
    assert!(busy(&harness), "two bytes of the body still to come");
    assert_eq!(harness.data(b"c").consumed, 1);
    assert!(busy(&harness), "one byte still to come");
    assert_eq!(harness.data(b"d").consumed, 1);
    assert!(!busy(&harness), "the body is whole and answered");
    assert_eq!(harness.data(GET).consumed, GET.len());
    assert!(!busy(&harness), "a request without a body leaves nothing pending");
}

#[test]
fn a_connection_is_busy_while_an_answer_waits_for_its_delay() {
    let mut harness = hello(HelloConfig { delay: Duration::from_millis(10), ..HelloConfig::default() });
    harness.data(GET);
    assert!(busy(&harness), "the answer waits for its timer");
    harness.advance(Duration::from_millis(10));
    assert!(!harness.take_output().is_empty(), "the answer went");
    assert!(!busy(&harness), "nothing left to send");
}

#[test]
fn answers_and_refusals_are_counted() {
    let mut harness = hello(HelloConfig::default());
    assert_eq!(harness.protocol().counts(), Counts::default());
    harness.data(&GET.repeat(2));
    assert_eq!(harness.protocol().counts(), Counts { requests: 2, refused: 0 });
    let verdict = harness.data(b"G(T / HTTP/1.1\r\n\r\n");
    assert_eq!(verdict.flow, Flow::Close, "a refusal closes");
    assert_eq!(harness.protocol().counts(), Counts { requests: 3, refused: 1 }, "a refusal is an answer too");
}

#[test]
fn in_a_graceful_stop_the_last_request_received_is_answered_with_close() {
    let mut harness = hello(HelloConfig::default());
    harness.data(GET);
    assert!(!String::from_utf8_lossy(&harness.take_output()).contains("Connection: close"));
    harness.drain();
    let verdict = harness.data(&GET.repeat(2));
    assert_eq!(verdict.flow, Flow::Close, "the connection closes after the last answer");
    let output = String::from_utf8_lossy(&harness.take_output()).into_owned();
    let answers: Vec<&str> = output.split("HTTP/1.1 200 OK").skip(1).collect();
    assert_eq!(answers.len(), 2, "{output}");
    assert!(!answers[0].contains("Connection: close"), "the first of the two: {output}");
    assert!(answers[1].contains("Connection: close"), "the last one received: {output}");
}
