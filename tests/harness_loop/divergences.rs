//! The divergences between the harness and the loop that the property found before
//! both drove one connection machine, each with its smallest script (each failed
//! against the loop and the Harness of then). Both drivers must now agree, on
//! what the docs say where they say it; the protocol carries each script out as
//! written (`Remaining::Met`). Those about pauses come first, then those
//! about closes; last, ignored, the divergence that remains.

use percore::reactor::{Harness, PeerReads};

use super::agree_where;
use super::command::{Command, Delay, OnTimer};
use super::outcome::Outcome;
use super::protocol::{Remaining, Scripted, Targets, ACCEPTED};
use super::script::{send, Step};

/// The log's records from the `from`th on.
fn log_from(outcome: &Outcome, from: usize) -> Vec<&str> {
    outcome.log.iter().skip(from).map(String::as_str).collect()
}

/// What connection `name`'s client received.
fn bytes_of(outcome: &Outcome, name: char) -> (&str, bool) {
    let client = &outcome.clients[&name];
    (&client.bytes, client.ended)
}

/// A paused connection called back with its output sent (a wake that writes, or
/// any call on one paused with output) goes on at once, before the rest of the
/// chain, as the loop did: the old harness waited for the test to take the output.
#[test]
fn a_paused_connection_written_to_goes_on_when_the_test_takes_the_output() {
    let script = [
        send(ACCEPTED, &[Command::Open('b')]),
        send('b', &[Command::Hold]),
        send(ACCEPTED, &[Command::Wake('b'), Command::Wake(ACCEPTED)]),
    ];
    let outcome = agree_where(&script, Remaining::Met);
    assert_eq!(
        log_from(&outcome, 5),
        [
            "b wake, wrote 6",
            "b data \"hold\\n\" Verdict { consumed: 5, flow: Continue }, wrote 0",
            "a wake, wrote 6",
        ]
    );
}

/// The paused connection an `on_timer` wrote to goes on before that timer, set
/// again at once, fires again, as in the loop: the old `Harness::advance` fired it
/// first.
#[test]
fn a_timer_set_again_at_once_fires_before_the_paused_connection_goes_on() {
    let script = [send(
        ACCEPTED,
        &[Command::Timer(Delay::Past, OnTimer::Ticks(2)), Command::Hold, Command::Say("a".into())],
    )];
    let outcome = agree_where(&script, Remaining::Met);
    assert_eq!(
        log_from(&outcome, 2),
        [
            "a timer Continue, wrote 7",
            "a data \"hold\\nsay a\\n\" Verdict { consumed: 11, flow: Continue }, wrote 2",
            "a timer Continue, wrote 7",
        ]
    );
    assert_eq!(bytes_of(&outcome, ACCEPTED), ("hi a\ntick 2\na\ntick 1\n", false));
}

/// What `on_data`, going on after a pause, asks is done when it returns (`Io`'s
/// docs), before it is called again: the old loop called it again first.
#[test]
fn what_a_call_going_on_after_a_pause_asks_waits_for_the_next_call() {
    let script = [send(
        ACCEPTED,
        &[Command::Pause, Command::Wake(ACCEPTED), Command::Pause, Command::Say("a".into())],
    )];
    let outcome = agree_where(&script, Remaining::Met);
    assert_eq!(
        log_from(&outcome, 2),
        [
            "a data \"pause\\nwake a\\npause\\nsay a\\n\" Verdict { consumed: 13, flow: Pause }, wrote 6",
            "a wake, wrote 6",
            "a data \"pause\\nsay a\\n\" Verdict { consumed: 12, flow: Continue }, wrote 2",
        ]
    );
}

/// A callback that closes its connection and asks something of another: what it
/// asked is done first, as soon as it returns (`Io`'s docs), then the close. The
/// old loop closed it first.
#[test]
fn a_connection_closing_itself_is_heard_of_before_what_it_asked() {
    let script =
        [send(ACCEPTED, &[Command::Open('b')]), send('b', &[Command::Poke(ACCEPTED), Command::Quit])];
    let outcome = agree_where(&script, Remaining::Met);
    assert_eq!(log_from(&outcome, 4), ["a wake, wrote 0", "b close Done \"\", wrote 0"]);
}

/// A connection that closes itself holding input (`say a`) lingers, as the loop
/// did: its close comes once its peer closed. The old harness closed it at once.
#[test]
fn close_of_a_connection_holding_input_does_not_linger() {
    // The peer closes at once in the harness, and at the end of the stream it reads
    // in the loop: `a`'s client never takes the last step.
    let script = [
        Step::Send(ACCEPTED, "open b\nclose a\nsay a".into()),
        Step::Send('b', "say b\n".into()),
        Step::End(ACCEPTED),
    ];
    let outcome = agree_where(&script, Remaining::Met);
    assert!(outcome.lingered.contains(&ACCEPTED), "{outcome:?}");
    assert!(outcome.log.iter().any(|record| record == "a close Done \"\", wrote 0"), "{outcome:?}");
    assert_eq!(bytes_of(&outcome, ACCEPTED), ("hi a\n", true));
}

/// A close that consumed all its input, input held before included, does not
/// linger: DESIGN.md lingers only for input held or unread. The old loop lingered.
#[test]
fn a_close_after_held_input_lingers_with_nothing_held() {
    let script = [Step::Send(ACCEPTED, "say a".into()), Step::Send(ACCEPTED, "\nquit\n".into())];
    let outcome = agree_where(&script, Remaining::Met);
    assert!(outcome.lingered.is_empty(), "{outcome:?}");
    assert_eq!(
        log_from(&outcome, 2),
        [
            "a data \"say a\\nquit\\n\" Verdict { consumed: 11, flow: Close }, wrote 6",
            "a close Done \"\", wrote 0"
        ]
    );
}

/// What is written to a connection that said close is dropped (`Io::write_to`), as
/// the loop did: the old harness took it.
#[test]
fn a_write_to_a_connection_that_said_close_is_taken() {
    let script = [
        send(ACCEPTED, &[Command::Open('b')]),
        Step::Send('b', "quit\nsay a\n".into()),
        send(ACCEPTED, &[Command::To('b', "a".into())]),
        Step::End('b'),
    ];
    let outcome = agree_where(&script, Remaining::Met);
    assert_eq!(bytes_of(&outcome, 'b'), ("hi b\nbye\n", true));
}

/// A connection closed while being opened is closed once established (`Io::connect`),
/// what was written to it sent, after the rest of the chain, and never opened, as
/// the loop did: the old harness closed it at once, sending nothing.
#[test]
fn close_of_a_connection_being_opened_is_heard_at_once() {
    let script = [send(
        ACCEPTED,
        &[Command::Open('b'), Command::To('b', "x".into()), Command::Close('b'), Command::Wake(ACCEPTED)],
    )];
    let outcome = agree_where(&script, Remaining::Met);
    assert_eq!(log_from(&outcome, 2), ["a wake, wrote 6", "b close Done \"\", wrote 0"]);
    assert_eq!(bytes_of(&outcome, 'b'), ("x\n", true));
}

/// A connection shut down while being opened sends its greeting once established,
/// then its end of stream (`Io::connect`), as the loop did: the old harness
/// dropped the greeting.
#[test]
fn shutdown_of_a_connection_being_opened_drops_its_greeting() {
    let script = [send(ACCEPTED, &[Command::Open('b'), Command::Shut('b')])];
    let outcome = agree_where(&script, Remaining::Met);
    assert_eq!(bytes_of(&outcome, 'b'), ("hi b\n", true));
}

/// A connection whose input ended, shut down, is closed at once, as `Closed::Done`
/// (`Io::shutdown`), as the loop did: the old harness left it open.
#[test]
fn shutdown_of_a_connection_whose_input_ended_does_not_close_it() {
    let script = [
        send(ACCEPTED, &[Command::Open('b')]),
        send('b', &[Command::Stay]),
        Step::End('b'),
        send(ACCEPTED, &[Command::Shut('b'), Command::Wake(ACCEPTED)]),
    ];
    let outcome = agree_where(&script, Remaining::Met);
    assert_eq!(log_from(&outcome, 6), ["b close Done \"\", wrote 0", "a wake, wrote 6"]);
}

/// A connection whose input ended, kept open for writing, closed by another, is
/// told `Closed::Done` (the protocol said close): the old loop said `ByPeer`.
#[test]
fn a_connection_whose_input_ended_closed_by_another_is_told_done() {
    let script = [
        send(ACCEPTED, &[Command::Open('b'), Command::Stay]),
        Step::End(ACCEPTED),
        send('b', &[Command::Close(ACCEPTED)]),
    ];
    let outcome = agree_where(&script, Remaining::Met);
    assert_eq!(log_from(&outcome, 5), ["a close Done \"\", wrote 0"]);
}

/// What a connection holds when its input ends and `on_input_end` says close
/// reaches `on_close`, as `ByPeer` (a message delimited by the end of the stream),
/// as the loop did: the old harness forgot it, and left the close to the test.
#[test]
fn what_is_held_when_the_input_ends_stays_unconsumed() {
    let closed = "a close ByPeer \"say a\", wrote 0";
    let nowhere = ([127, 0, 0, 1], 9).into();
    let mut harness = Harness::new(Scripted::new(
        Targets { listening: nowhere, refusing: nowhere },
        Remaining::SteeredClear,
    ));
    harness.set_peer_reads(PeerReads::AtOnce);
    harness.open();
    harness.receive(b"say a");
    harness.input_end();
    assert_eq!(harness.protocol().log().last().map(String::as_str), Some(closed));

    let outcome = agree_where(&[Step::Send(ACCEPTED, "say a".into()), Step::End(ACCEPTED)], Remaining::Met);
    assert_eq!(outcome.log.last().map(String::as_str), Some(closed));
}

// The divergence that remains (`protocol/remaining.rs`): the loop serves a
// connection again, in rounds, once what its call asked is done, one round a turn;
// between two rounds it fires the timers due and takes the next turn's events. The
// harness does every round before it returns. Here `a` goes on after a pause and
// asks again (`wake b`), so that its going on, the third round, comes after the
// turn's timers and events in the loop. For the timer the docs side with the loop:
// a turn fires the timers due after a round (`Reactor::turn`), and the Harness says
// it follows the loop's rules. No doc orders a connect's completion against a
// round; the Harness cannot take one between its rounds, as the test establishes
// connects only once its call returns.

#[test]
fn a_timer_due_fires_between_the_rounds_of_a_connection_served_again() {
    let script = [
        send(ACCEPTED, &[Command::Open('b')]),
        send(
            ACCEPTED,
            &[
                Command::Timer(Delay::Past, OnTimer::Ring),
                Command::Wake('b'),
                Command::Pause,
                Command::Wake('b'),
                Command::Pause,
                Command::Say("z".into()),
            ],
        ),
    ];
    // The loop: ..., `b wake`, `a timer`, `a data "pause\nsay z\n"`; the harness
    // the last two the other way round.
    agree_where(&script, Remaining::Met);
}

#[test]
#[ignore = "divergence: a connect completes in the loop between the second and third rounds of \
            a connection served again (its next turn's events come first); the harness does \
            every round before the test can establish it"]
fn a_connect_completes_between_the_rounds_of_a_connection_served_again() {
    let script = [send(
        ACCEPTED,
        &[Command::Open('b'), Command::Pause, Command::Wake('b'), Command::Pause, Command::Say("z".into())],
    )];
    // The loop: ..., `b wake`, `b open`, `a data "pause\nsay z\n"`; the harness the
    // last two the other way round.
    agree_where(&script, Remaining::Met);
}
