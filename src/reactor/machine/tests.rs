//! The machine on its own: events in, steps out, no wire at all. Each test plays a
//! driver by hand and checks the step the machine asks for next.

use std::collections::VecDeque;
use std::io;
use std::time::{Duration, Instant};

use super::rules::Spliced;
use super::*;
use crate::reactor::config::{Config, DrainPolicy, OUTPUT_BUDGET};
use crate::reactor::io::{Ends, Io, NotConnected};
use crate::reactor::protocol::{Closed, Flow, Protocol, Verdict};
use crate::reactor::slab::Token;

/// Answers each `on_data` call as its script says (then consumes everything),
/// writing the script's bytes; records its inputs and closes.
#[derive(Default)]
struct Script {
    answers: VecDeque<(usize, Flow, &'static [u8])>,
    inputs: Vec<Vec<u8>>,
    closes: Vec<(Closed, Vec<u8>)>,
}

impl Protocol for Script {
    type Conn = ();

    fn on_data(&mut self, _conn: &mut (), input: &[u8], io: &mut Io<'_>) -> Verdict {
        self.inputs.push(input.to_vec());
        let (consumed, flow, written) =
            self.answers.pop_front().unwrap_or((input.len(), Flow::Continue, b""));
        io.write(written);
        Verdict { consumed, flow }
    }

    fn on_timer(&mut self, _conn: &mut (), io: &mut Io<'_>) -> Flow {
        io.write(b"timer");
        Flow::Continue
    }

    fn on_close(&mut self, _conn: &mut (), closed: Closed, unconsumed: &[u8], _io: &mut Io<'_>) {
        self.closes.push((closed, unconsumed.to_vec()));
    }
}

const TOKEN: Token = Token(7);
/// The ends of the machine's connections here: no wire, no addresses.
const ENDS: Ends<'static> = Ends { wire: &NotConnected, peer: None };

/// A machine running `answers`, and an accepted connection ready both ways.
fn machine(answers: &[(usize, Flow, &'static [u8])]) -> (Machine<Script>, Connection<()>) {
    let script = Script { answers: answers.iter().copied().collect(), ..Script::default() };
    let mut machine = Machine::new(script, &Config::default(), Instant::now());
    let mut conn = Connection::open();
    machine.ready(&mut conn, Edge { readable: true, writable: true, read_closed: false });
    (machine, conn)
}

#[test]
fn a_read_is_answered_with_one_send_and_a_short_read_ends_the_reading() {
    let (mut machine, mut conn) = machine(&[(5, Flow::Continue, b"hello")]);
    assert_eq!(machine.poll(&mut conn, TOKEN), Step::Read);
    machine.received(&mut conn, TOKEN, ENDS, b"12345", false);
    assert_eq!(machine.poll(&mut conn, TOKEN), Step::Send);
    assert_eq!(machine.output().to_vec(), b"hello");
    machine.sent(&mut conn, Ok(5));
    assert_eq!(machine.poll(&mut conn, TOKEN), Step::Wait, "a short read drained the wire");
    assert_eq!(conn.unsent(), 0);
}

#[test]
fn a_read_that_fills_the_buffer_is_followed_by_another() {
    let (mut machine, mut conn) = machine(&[]);
    machine.received(&mut conn, TOKEN, ENDS, b"full", true);
    assert_eq!(machine.poll(&mut conn, TOKEN), Step::Read);
    machine.nothing_to_read(&mut conn);
    assert_eq!(machine.poll(&mut conn, TOKEN), Step::Wait);
}

#[test]
fn what_the_wire_does_not_take_is_queued_and_flushed_on_its_next_edge() {
    let (mut machine, mut conn) = machine(&[(1, Flow::Continue, b"abcdef")]);
    machine.received(&mut conn, TOKEN, ENDS, b"x", false);
    assert_eq!(machine.poll(&mut conn, TOKEN), Step::Send);
    machine.sent(&mut conn, Ok(2));
    assert_eq!(conn.unsent(), 4);
    assert_eq!(machine.poll(&mut conn, TOKEN), Step::Wait, "the wire is full until its edge");
    machine.ready(&mut conn, Edge { writable: true, ..Edge::default() });
    assert_eq!(machine.poll(&mut conn, TOKEN), Step::Flush);
    let mut taken = Vec::new();
    assert_eq!(conn.queue().take_into(&mut taken, usize::MAX), 4);
    machine.flushed(&mut conn, Ok(4));
    assert_eq!(taken, b"cdef");
    assert_eq!(machine.poll(&mut conn, TOKEN), Step::Wait);
    assert!(conn.queue.is_none(), "an emptied queue's memory is released");
}

#[test]
fn a_pause_goes_on_with_the_held_input_once_its_output_is_sent() {
    let (mut machine, mut conn) = machine(&[(1, Flow::Pause, b"one"), (1, Flow::Continue, b"two")]);
    machine.received(&mut conn, TOKEN, ENDS, b"ab", true);
    assert_eq!(machine.poll(&mut conn, TOKEN), Step::Send);
    machine.sent(&mut conn, Ok(1));
    assert_eq!(machine.poll(&mut conn, TOKEN), Step::Wait, "paused: not read, output unsent");
    machine.ready(&mut conn, Edge { writable: true, ..Edge::default() });
    assert_eq!(machine.poll(&mut conn, TOKEN), Step::Flush);
    conn.queue().take_into(&mut Vec::new(), usize::MAX);
    machine.flushed(&mut conn, Ok(2));
    // Sent: called again with what it held, before anything more is read.
    assert_eq!(machine.poll(&mut conn, TOKEN), Step::HandHeld);
    machine.hand_held(&mut conn, TOKEN, ENDS);
    assert_eq!(machine.poll(&mut conn, TOKEN), Step::Send);
    assert_eq!(machine.output().to_vec(), b"two");
    assert_eq!(machine.protocol.inputs, [b"ab".to_vec(), b"b".to_vec()]);
    machine.sent(&mut conn, Ok(3));
    assert_eq!(machine.poll(&mut conn, TOKEN), Step::Read, "the read filled the buffer: more may wait");
}

#[test]
fn a_pause_with_nothing_written_waits_for_a_callback_that_writes() {
    let (mut machine, mut conn) = machine(&[(0, Flow::Pause, b"")]);
    machine.received(&mut conn, TOKEN, ENDS, b"held", false);
    assert_eq!(machine.poll(&mut conn, TOKEN), Step::Wait);
    machine.ready(&mut conn, Edge { readable: true, writable: true, read_closed: false });
    assert_eq!(machine.poll(&mut conn, TOKEN), Step::Wait, "an edge does not end the pause");
    assert_eq!(machine.timer(&mut conn, TOKEN, ENDS), Some(Flow::Continue));
    assert_eq!(machine.poll(&mut conn, TOKEN), Step::Send, "the timer's output");
    machine.sent(&mut conn, Ok(5));
    assert_eq!(machine.poll(&mut conn, TOKEN), Step::HandHeld, "resumed: the held input goes first");
    machine.hand_held(&mut conn, TOKEN, ENDS);
    assert_eq!(machine.poll(&mut conn, TOKEN), Step::Read);
    assert_eq!(machine.protocol.inputs, [b"held".to_vec(), b"held".to_vec()]);
}

#[test]
fn a_close_with_input_after_it_sends_its_answer_then_lingers_until_the_peer_closes() {
    let (mut machine, mut conn) = machine(&[(2, Flow::Close, b"bye")]);
    machine.received(&mut conn, TOKEN, ENDS, b"q\nmore", false);
    assert_eq!(machine.poll(&mut conn, TOKEN), Step::Send);
    machine.sent(&mut conn, Ok(3));
    assert_eq!(machine.poll(&mut conn, TOKEN), Step::Linger, "bytes after the close: it lingers");
    machine.shut_down(&mut conn, Ok(()));
    assert_eq!(machine.poll(&mut conn, TOKEN), Step::Discard, "what came meanwhile is read at once");
    machine.discarded(&mut conn, Ok(100));
    assert_eq!(machine.poll(&mut conn, TOKEN), Step::Discard);
    machine.discarded(&mut conn, Err(io::ErrorKind::WouldBlock.into()));
    assert_eq!(machine.poll(&mut conn, TOKEN), Step::Wait);
    machine.ready(&mut conn, Edge { readable: true, ..Edge::default() });
    machine.discarded(&mut conn, Ok(0));
    assert_eq!(machine.poll(&mut conn, TOKEN), Step::Close(Closed::Done));
    let closed = machine.closed(conn, TOKEN, ENDS, Closed::Done);
    assert_eq!(closed, Closed::Done);
    assert_eq!(
        machine.protocol.closes,
        [(Closed::Done, Vec::new())],
        "what followed the close never reached it"
    );
}

#[test]
fn a_close_with_nothing_after_it_closes_once_its_output_is_sent() {
    let (mut machine, mut conn) = machine(&[(4, Flow::Close, b"bye")]);
    machine.received(&mut conn, TOKEN, ENDS, b"quit", false);
    assert_eq!(machine.poll(&mut conn, TOKEN), Step::Send);
    machine.sent(&mut conn, Ok(0));
    assert_eq!(machine.poll(&mut conn, TOKEN), Step::Wait, "held to the send timeout");
    machine.ready(&mut conn, Edge { writable: true, ..Edge::default() });
    assert_eq!(machine.poll(&mut conn, TOKEN), Step::Flush);
    conn.queue().take_into(&mut Vec::new(), usize::MAX);
    machine.flushed(&mut conn, Ok(3));
    assert_eq!(machine.poll(&mut conn, TOKEN), Step::Close(Closed::Done));
}

#[test]
fn a_graceful_stop_makes_every_close_linger_and_after_its_grace_closes_the_idle() {
    let (mut machine, mut conn) = machine(&[(4, Flow::Close, b"")]);
    machine.stop_begun();
    machine.received(&mut conn, TOKEN, ENDS, b"quit", false);
    assert_eq!(machine.poll(&mut conn, TOKEN), Step::Linger, "a close the client did not ask for");
    let (mut machine, mut idle) = self::machine(&[]);
    machine.stop_begun();
    machine.nothing_to_read(&mut idle);
    assert_eq!(machine.poll(&mut idle, TOKEN), Step::Wait, "kept during the grace");
    machine.grace_over();
    assert_eq!(machine.poll(&mut idle, TOKEN), Step::Close(Closed::Done));
    let mut relayed = Connection::open();
    machine.set_drain_policy(&mut relayed, DrainPolicy::UntilClosed);
    assert_eq!(machine.poll(&mut relayed, TOKEN), Step::Wait, "left alone until it closes");
}

#[test]
fn output_over_the_budget_stops_the_reading_until_it_drains() {
    let big: &'static [u8] = Box::leak(vec![b'x'; OUTPUT_BUDGET + 1].into_boxed_slice());
    let (mut machine, mut conn) = machine(&[(1, Flow::Continue, big)]);
    machine.received(&mut conn, TOKEN, ENDS, b"x", true);
    assert_eq!(machine.poll(&mut conn, TOKEN), Step::Send);
    machine.sent(&mut conn, Ok(0));
    assert_eq!(machine.poll(&mut conn, TOKEN), Step::Wait, "input waits, though the read filled the buffer");
    machine.ready(&mut conn, Edge { writable: true, ..Edge::default() });
    assert_eq!(machine.poll(&mut conn, TOKEN), Step::Flush);
    conn.queue().take_into(&mut Vec::new(), usize::MAX);
    machine.flushed(&mut conn, Ok(OUTPUT_BUDGET + 1));
    assert_eq!(machine.poll(&mut conn, TOKEN), Step::Read, "drained: read again, without a new edge");
}

#[test]
fn a_writer_over_anothers_budget_is_blocked_and_released_once_that_drains_below_half() {
    let (mut machine, mut other) = machine(&[]);
    machine.nothing_to_read(&mut other);
    let mut writer = Connection::open();
    machine.ready(&mut writer, Edge { readable: true, writable: true, read_closed: false });
    let bytes = vec![b'y'; OUTPUT_BUDGET + 1];
    assert!(machine.takes_bytes_now(&mut other, &bytes));
    machine.sent_bytes(&mut other, &bytes, Ok(0));
    assert!(machine.is_over_budget(&mut other));
    assert!(machine.block(&mut writer, TOKEN));
    assert!(!machine.block(&mut writer, TOKEN), "once");
    assert_eq!(machine.poll(&mut writer, TOKEN), Step::Wait, "blocked: not read");
    // The peer takes all but half the budget and a byte: not yet down to half.
    let half = OUTPUT_BUDGET / 2;
    machine.ready(&mut other, Edge { writable: true, ..Edge::default() });
    assert_eq!(machine.poll(&mut other, TOKEN), Step::Flush);
    let taken = other.queue().take_into(&mut Vec::new(), OUTPUT_BUDGET - half);
    machine.flushed(&mut other, Ok(taken));
    assert_eq!(other.unsent(), half + 1);
    assert_eq!(machine.poll(&mut other, TOKEN), Step::Wait, "still over half the budget");
    // Then one more: down to half.
    machine.ready(&mut other, Edge { writable: true, ..Edge::default() });
    assert_eq!(machine.poll(&mut other, TOKEN), Step::Flush);
    let taken = other.queue().take_into(&mut Vec::new(), 1);
    machine.flushed(&mut other, Ok(taken));
    assert_eq!(machine.poll(&mut other, TOKEN), Step::Release, "down to half the budget: the writer goes on");
    assert_eq!(machine.poll(&mut other, TOKEN), Step::Wait, "once");
    machine.unblock(&mut writer);
    assert_eq!(machine.poll(&mut writer, TOKEN), Step::Read);
}

#[test]
fn a_connection_being_opened_queues_its_output_until_established_then_opens() {
    let (mut machine, _) = machine(&[]);
    let mut conn = Connection::connecting();
    assert!(!machine.takes_bytes_now(&mut conn, b"early"));
    assert_eq!(conn.unsent(), 5, "queued, not sent");
    machine.ready(&mut conn, Edge { readable: true, writable: true, read_closed: false });
    machine.shutdown(&mut conn);
    machine.close_asked(&mut conn);
    assert_eq!(machine.poll(&mut conn, TOKEN), Step::Wait, "a close waits for the connect");
    assert_eq!(machine.established(&mut conn, TOKEN, ENDS), None, "closing: on_open is not called");
    assert_eq!(machine.poll(&mut conn, TOKEN), Step::Flush, "what waited goes first");
}

#[test]
fn input_held_up_to_the_limit_is_kept_and_a_byte_beyond_it_closes_the_connection() {
    let (mut machine, mut conn) = machine(&[(0, Flow::Continue, b""), (0, Flow::Continue, b"")]);
    let limit = Config::default().max_pending_input;
    machine.received(&mut conn, TOKEN, ENDS, &vec![b'z'; limit], false);
    assert_eq!(machine.poll(&mut conn, TOKEN), Step::Wait, "at the limit: kept");
    machine.received(&mut conn, TOKEN, ENDS, b"z", false);
    assert_eq!(machine.poll(&mut conn, TOKEN), Step::Close(Closed::Done));
}

#[test]
fn output_of_exactly_the_budget_unsent_lets_the_reading_go_on() {
    let exact: &'static [u8] = Box::leak(vec![b'x'; OUTPUT_BUDGET].into_boxed_slice());
    let (mut machine, mut conn) = machine(&[(1, Flow::Continue, exact)]);
    machine.received(&mut conn, TOKEN, ENDS, b"x", true);
    assert_eq!(machine.poll(&mut conn, TOKEN), Step::Send);
    machine.sent(&mut conn, Ok(0));
    assert_eq!(conn.unsent(), OUTPUT_BUDGET);
    assert_eq!(machine.poll(&mut conn, TOKEN), Step::Read);
}

/// Sets the machine's clock to `second` seconds after its origin.
fn at_second(machine: &mut Machine<Script>, second: u64) {
    machine.set_time(machine.origin + Duration::from_secs(second));
}

/// A connection whose answer, `answer`, the wire did not take at second 100: it
/// has 30 s to send it.
fn unsent_from_second_100(answer: &'static [u8]) -> (Machine<Script>, Connection<()>) {
    let (mut machine, mut conn) = machine(&[(1, Flow::Continue, answer)]);
    at_second(&mut machine, 100);
    machine.received(&mut conn, TOKEN, ENDS, b"x", false);
    assert_eq!(machine.poll(&mut conn, TOKEN), Step::Send);
    machine.sent(&mut conn, Ok(0));
    assert_eq!(machine.poll(&mut conn, TOKEN), Step::Wait);
    (machine, conn)
}

#[test]
fn a_slow_peers_progress_extends_the_send_timeout_and_a_flush_that_moves_nothing_does_not() {
    let (mut machine, mut conn) = unsent_from_second_100(b"a long answer");
    let flush = |machine: &mut Machine<Script>, conn: &mut Connection<()>, second: u64, bytes: usize| {
        at_second(machine, second);
        machine.ready(conn, Edge { writable: true, ..Edge::default() });
        assert_eq!(machine.poll(conn, TOKEN), Step::Flush);
        let taken = conn.queue().take_into(&mut Vec::new(), bytes);
        machine.flushed(conn, Ok(taken));
        assert_eq!(machine.poll(conn, TOKEN), Step::Wait);
    };
    // 30 s to send from 100; the peer takes a byte at 125, and at 150.
    flush(&mut machine, &mut conn, 125, 1);
    flush(&mut machine, &mut conn, 150, 1);
    at_second(&mut machine, 170);
    assert!(!machine.expired(&conn, TOKEN), "the peer took a byte 20 s ago");
    // An edge on which it takes nothing is no progress.
    flush(&mut machine, &mut conn, 175, 0);
    at_second(&mut machine, 181);
    assert!(machine.expired(&conn, TOKEN), "30 s since the peer last took a byte");
}

#[test]
fn spliced_bytes_wait_for_a_target_being_opened_closing_or_with_output_of_its_own() {
    let (mut machine, mut open) = machine(&[]);
    assert!(machine.takes_spliced(&open));
    assert!(!machine.takes_spliced(&Connection::connecting()), "being opened");
    assert!(machine.takes_bytes_now(&mut open, b"before"));
    machine.sent_bytes(&mut open, b"before", Ok(2));
    assert!(!machine.takes_spliced(&open), "what was written to it goes first");
    let mut closing = Connection::open();
    machine.close_asked(&mut closing);
    assert!(!machine.takes_spliced(&closing), "closing");
}

#[test]
fn what_a_target_took_of_a_splice_is_progress_and_an_error_closes_it() {
    let (mut machine, mut conn) = unsent_from_second_100(b"answer");
    at_second(&mut machine, 125);
    assert_eq!(machine.emptied(&mut conn, Ok(4096)), Ok(4096));
    assert_eq!(machine.poll(&mut conn, TOKEN), Step::Wait);
    at_second(&mut machine, 140);
    assert!(!machine.expired(&conn, TOKEN), "the peer took spliced bytes at 125");
    assert_eq!(machine.emptied(&mut conn, Err(io::ErrorKind::WouldBlock.into())), Ok(0), "none for now");
    let reset = machine.emptied(&mut conn, Err(io::ErrorKind::ConnectionReset.into()));
    assert_eq!(reset, Err(Closed::WriteFailed(io::ErrorKind::ConnectionReset)));
}

#[test]
fn the_end_of_input_keeps_what_is_held_for_on_close_and_closes_by_the_peer() {
    let (mut machine, mut conn) = machine(&[(0, Flow::Continue, b"")]);
    machine.received(&mut conn, TOKEN, ENDS, b"partial", false);
    assert_eq!(machine.input_ended(&mut conn, TOKEN, ENDS), Flow::Close);
    assert_eq!(machine.poll(&mut conn, TOKEN), Step::Close(Closed::ByPeer));
    machine.closed(conn, TOKEN, ENDS, Closed::ByPeer);
    assert_eq!(machine.protocol.closes, [(Closed::ByPeer, b"partial".to_vec())]);
}

#[test]
fn a_shut_down_connection_reads_until_its_input_ends() {
    let (mut machine, mut conn) = machine(&[]);
    machine.shutdown(&mut conn);
    assert_eq!(machine.poll(&mut conn, TOKEN), Step::ShutdownWrite);
    machine.shut_down(&mut conn, Ok(()));
    assert!(!machine.takes_bytes_now(&mut conn, b"dropped"));
    assert_eq!(conn.unsent(), 0, "output after the shutdown is dropped");
    assert_eq!(machine.poll(&mut conn, TOKEN), Step::Read);
    machine.nothing_to_read(&mut conn);
    assert_eq!(machine.poll(&mut conn, TOKEN), Step::Wait, "half-closed: it still reads");
    assert_eq!(machine.input_ended(&mut conn, TOKEN, ENDS), Flow::Close, "the default closes");
    assert_eq!(machine.poll(&mut conn, TOKEN), Step::Close(Closed::ByPeer));
}

#[test]
fn the_deadline_follows_the_precedence_the_docs_give() {
    let (mut machine, mut conn) = machine(&[(0, Flow::Continue, b"")]);
    at_second(&mut machine, 100);
    machine.nothing_to_read(&mut conn);
    assert_eq!(machine.poll(&mut conn, TOKEN), Step::Wait);
    assert!(!machine.expired(&conn, TOKEN));
    at_second(&mut machine, 161);
    assert!(machine.expired(&conn, TOKEN), "idle for 60 s");
    at_second(&mut machine, 200);
    machine.received(&mut conn, TOKEN, ENDS, b"GE", false);
    assert_eq!(machine.poll(&mut conn, TOKEN), Step::Wait);
    at_second(&mut machine, 211);
    assert!(machine.expired(&conn, TOKEN), "a partial message for 10 s");
}

#[test]
fn a_close_that_consumes_all_the_input_held_before_does_not_linger() {
    // A partial line held, then its end: the close consumes all of it, held and
    // fresh, and the wire was read short: nothing is left to read.
    let (mut machine, mut conn) = machine(&[(0, Flow::Continue, b""), (10, Flow::Close, b"bye")]);
    machine.received(&mut conn, TOKEN, ENDS, b"say a", false);
    machine.received(&mut conn, TOKEN, ENDS, b"\nquit", false);
    assert_eq!(machine.poll(&mut conn, TOKEN), Step::Send);
    machine.sent(&mut conn, Ok(3));
    assert_eq!(machine.poll(&mut conn, TOKEN), Step::Close(Closed::Done));
}

#[test]
fn a_half_closed_connection_its_protocol_closes_ends_as_done_not_by_the_peer() {
    let (mut machine, mut conn) = machine(&[]);
    machine.nothing_to_read(&mut conn);
    struct StaysOpen;
    impl Protocol for StaysOpen {
        type Conn = ();
        fn on_data(&mut self, _: &mut (), input: &[u8], _: &mut Io<'_>) -> Verdict {
            Verdict::keep(input.len())
        }
        fn on_input_end(&mut self, _: &mut (), _: &mut Io<'_>) -> Flow {
            Flow::Continue
        }
    }
    let mut half = Machine::new(StaysOpen, &Config::default(), machine.now());
    assert_eq!(half.input_ended(&mut conn, TOKEN, ENDS), Flow::Continue);
    assert_eq!(half.poll(&mut conn, TOKEN), Step::Wait, "open for writing");
    half.close_asked(&mut conn);
    assert_eq!(half.poll(&mut conn, TOKEN), Step::Close(Closed::Done), "the protocol's close");
    // Its own end of input, answered with a close, is the peer's.
    let (mut machine, mut conn) = self::machine(&[]);
    assert_eq!(machine.input_ended(&mut conn, TOKEN, ENDS), Flow::Close);
    assert_eq!(machine.poll(&mut conn, TOKEN), Step::Close(Closed::ByPeer));
}

#[test]
fn a_close_from_input_held_over_a_pause_lingers_whatever_the_edges_said() {
    // The wire went unread during the pause: what the peer sent meanwhile may not
    // have reached an edge yet, so the close reads before it goes.
    let (mut machine, mut conn) = machine(&[(1, Flow::Pause, b"x"), (4, Flow::Close, b"bye")]);
    machine.received(&mut conn, TOKEN, ENDS, b"hquit", false);
    assert_eq!(machine.poll(&mut conn, TOKEN), Step::Send);
    machine.sent(&mut conn, Ok(1));
    assert_eq!(machine.poll(&mut conn, TOKEN), Step::HandHeld);
    machine.hand_held(&mut conn, TOKEN, ENDS);
    assert_eq!(machine.poll(&mut conn, TOKEN), Step::Send);
    machine.sent(&mut conn, Ok(3));
    assert_eq!(machine.poll(&mut conn, TOKEN), Step::Linger);
}

#[test]
fn resume_leaves_a_connection_that_holds_nothing_reading_while_its_output_waits() {
    let (mut machine, mut conn) = machine(&[(1, Flow::Continue, b"answer")]);
    machine.received(&mut conn, TOKEN, ENDS, b"x", true);
    assert_eq!(machine.poll(&mut conn, TOKEN), Step::Send);
    machine.sent(&mut conn, Ok(0));
    machine.resume(&mut conn);
    assert_eq!(machine.poll(&mut conn, TOKEN), Step::Read, "not paused for its output");
}

#[test]
fn a_splice_of_a_length_sends_what_is_held_first_and_gives_back_what_is_past_it() {
    let (mut first, mut conn) = machine(&[(2, Flow::Continue, b""), (0, Flow::Continue, b"")]);
    first.received(&mut conn, TOKEN, ENDS, b"5\nhellotail", false);
    let spliced = first.splice(&mut conn, Some(5)).expect("open");
    assert_eq!(spliced, Spliced { first: b"hello".to_vec(), left: Some(0) }, "all held: no splice");
    assert_eq!(first.poll(&mut conn, TOKEN), Step::HandHeld, "the rest reaches the protocol");
    first.hand_held(&mut conn, TOKEN, ENDS);
    assert_eq!(first.protocol.inputs.last().map(Vec::as_slice), Some(&b"tail"[..]));

    let (mut second, mut conn) = machine(&[(2, Flow::Continue, b"")]);
    second.received(&mut conn, TOKEN, ENDS, b"5\nhe", false);
    let spliced = second.splice(&mut conn, Some(5)).expect("open");
    assert_eq!(spliced, Spliced { first: b"he".to_vec(), left: Some(3) }, "the rest through the pipe");
    assert_eq!(second.poll(&mut conn, TOKEN), Step::Splice);
    second.unsplice(&mut conn);
    assert_eq!(second.poll(&mut conn, TOKEN), Step::Read, "read as before once it is done");
}
