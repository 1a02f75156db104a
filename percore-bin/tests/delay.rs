//! `--delay`: each answer is sent its delay after its request arrived. On a fake
//! clock (the protocol in a Harness) for when; on a running server for what.

#[path = "../../tests/util/mod.rs"]
mod util;

use std::io::Read;
use std::time::Duration;

use percore::http::{Hello, HelloConfig};
use percore::reactor::{Flow, Harness};
use util::{Method, Server, HELLO, OK};

const GET: &[u8] = b"GET / HTTP/1.1\r\nHost: a\r\n\r\n";
const GET_CLOSE: &[u8] = b"GET / HTTP/1.1\r\nHost: a\r\nConnection: close\r\n\r\n";

fn delayed(ms: u64) -> Harness<Hello> {
    let config = HelloConfig { delay: Duration::from_millis(ms), ..HelloConfig::default() };
    Harness::new(Hello::new(&config))
}

fn answers(output: &[u8]) -> usize {
    String::from_utf8_lossy(output).matches(OK).count()
}

#[test]
fn an_answer_is_written_when_its_delay_is_over_and_not_before() {
    let mut harness = delayed(20);
    assert_eq!(harness.data(GET).consumed, GET.len());
    assert!(harness.take_output().is_empty(), "nothing at once");
    assert_eq!(harness.advance(Duration::from_millis(19)), None);
    assert!(harness.take_output().is_empty(), "nothing before the delay");
    assert_eq!(harness.advance(Duration::from_millis(1)), Some(Flow::Continue));
    assert_eq!(answers(&harness.take_output()), 1);
    assert_eq!(harness.timer(), None, "no timer left once every answer went");
}

#[test]
fn requests_that_arrive_apart_are_answered_apart() {
    let mut harness = delayed(20);
    harness.data(&GET.repeat(2));
    harness.advance(Duration::from_millis(5));
    harness.data(GET);
    assert_eq!(harness.advance(Duration::from_millis(15)), Some(Flow::Continue));
    assert_eq!(answers(&harness.take_output()), 2, "the two that arrived first");
    harness.advance(Duration::from_millis(4));
    assert!(harness.take_output().is_empty(), "the third is not due yet");
    harness.advance(Duration::from_millis(1));
    assert_eq!(answers(&harness.take_output()), 1, "the third, 20 ms after it arrived");
}

#[test]
fn a_closing_request_closes_after_its_delayed_answer_and_nothing_after_it_is_read() {
    let mut harness = delayed(10);
    let input = [GET, GET_CLOSE, GET].concat();
    let verdict = harness.data(&input);
    assert_eq!(verdict.flow, Flow::Pause, "waits for its answers");
    assert_eq!(verdict.consumed, GET.len() + GET_CLOSE.len(), "the request after the closing one is left");
    // Called again with the rest (as the loop does once output drains): not read.
    assert_eq!(harness.data(GET).consumed, 0);
    assert_eq!(harness.advance(Duration::from_millis(10)), Some(Flow::Close));
    let output = harness.take_output();
    assert_eq!(answers(&output), 2);
    assert!(String::from_utf8_lossy(&output).ends_with("Connection: close\r\n\r\nhello, world!\n"));
}

#[test]
fn a_client_that_pipelines_many_is_paused_not_queued_for_ever() {
    let mut harness = delayed(10);
    let verdict = harness.data(&GET.repeat(1000));
    assert_eq!(verdict.flow, Flow::Pause);
    let queued = verdict.consumed / GET.len();
    assert!(queued < 1000, "every request queued at once");
    harness.advance(Duration::from_millis(10));
    assert_eq!(answers(&harness.take_output()), queued);
}

#[test]
fn a_server_with_a_delay_answers_every_pipelined_request_then_closes() {
    let server = Server::percore(&["--delay", "100ms"]);
    let mut client = server.client();
    client.send(&[GET, GET, GET_CLOSE].concat());
    for i in 0..3 {
        let response = client.read_response(Method::Get);
        assert_eq!(response.status_line, OK, "answer {i}");
        assert_eq!(response.body, HELLO, "answer {i}");
    }
    client.expect_eof();
    let mut rest = Vec::new();
    let _ = client.stream().read_to_end(&mut rest);
    assert!(rest.is_empty());
}
